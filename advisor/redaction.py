"""Secrets and addresses kept out of what an upstream's text reaches: logs, the store, clients.

An endpoint's error message is the endpoint's own text, and a hostile or careless one echoes what it received,
the ``Authorization`` header included. `scrub` replaces the given secrets (a rung's API key) and anything shaped
like a credential (``Bearer ...``, ``Authorization: ...``, ``api_key=...``) with ``[redacted]``; it runs on
every text the ``openai`` backend takes from an answer, before the text is cut short (a cut must not leave half
a key). `without_urls` replaces URLs with ``(upstream)``: what a client of the routing service may read names
the rungs, not the addresses behind them.
"""

from __future__ import annotations

import re
from typing import Iterable

REDACTED = "[redacted]"
_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=:-]{4,}")
_FIELD = re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api[-_]?key|access[-_]?token)"
                    r"(\W{0,3}?\s*[:=]\s*\W{0,2})(?!\[redacted\]|(?:bearer|basic|token)\s)[^\s\"',;}]+")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>),;]+")
#: a bare network address with a port: 127.0.0.1:8001, [::1]:8001, localhost:8001, triton.svc.local:8001
_HOST_PORT = re.compile(r"(?i)(?:\b\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\]|\blocalhost|"
                        r"\b(?=[a-z0-9-]*[a-z])[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{1,5}\b")


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without the `secrets` (each at least 4 characters) and without credential-shaped values."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _SCHEME.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    return _FIELD.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)


def without_urls(text: str) -> str:
    """`text` with every URL and every bare ``host:port`` address replaced by ``(upstream)``."""
    return _HOST_PORT.sub("(upstream)", _URL.sub("(upstream)", text))


#: Shapes of well-known secrets that carry no ``key=`` label: OpenAI-style ``sk-`` keys, AWS access key ids, GitHub
#: and Slack tokens, JSON Web Tokens, PEM private keys. `redact` removes them from what is kept of a conversation.
SECRET_SHAPES = (
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bxox[abpors]-[A-Za-z0-9-]{10,}",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"\b(?i:password|passwd|pwd|client[-_]?secret|secret[-_]?key)\s*[:=]\s*[^\s\"',;}]+",
)


class Redactor:
    """What is removed from a text before it is kept: the given `secrets` (the rungs' keys), credential-shaped
    values (`scrub`), the `SECRET_SHAPES` and a team's own `patterns` (regexes), each replaced by ``[redacted]``."""

    def __init__(self, secrets: Iterable[str | None] = (), patterns: Iterable[str] = ()):
        self.secrets = [s for s in secrets if s and len(s) >= 4]
        self.shapes = re.compile("|".join(f"(?:{p})" for p in (*SECRET_SHAPES, *patterns)))

    def __call__(self, text: str) -> str:
        """`text` with every secret, credential and shape replaced."""
        return self.shapes.sub(REDACTED, scrub(text, self.secrets))


class PieceScrubber:
    """`secrets` removed from a text that arrives in pieces (a stream): a piece is passed on without the tail
    that could be the start of a secret, which waits for the next piece (`flush` gives the rest at the end)."""

    def __init__(self, secrets: Iterable[str | None]):
        self.secrets = [s for s in secrets if s and len(s) >= 4]
        self.keep = max((len(s) for s in self.secrets), default=1) - 1
        self.held = ""

    def feed(self, piece: str) -> str:
        """What of the text so far may be passed on."""
        if not self.secrets:
            return piece
        text = self.held + piece
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        cut = max(len(text) - self.keep, 0)
        self.held = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        """The held tail, at the end of the text."""
        out, self.held = self.held, ""
        return out
