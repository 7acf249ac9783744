"""API keys: Bearer tokens checked against sha256 hashes (plain keys are never kept after loading).

Keys come from a file (``--keys FILE``) and/or the environment (``ADVISOR_API_KEYS``, comma-separated). A key
file has one key per line, ``#`` starts a comment::

    NAME  KEY-OR-sha256:HEX  [RUNG,RUNG,...]

The second field is the key itself or ``sha256:`` and its hex digest (so the file need not hold secrets); the
optional third field lists the rungs the key may use (all when absent). A request without a valid key gets
401; a request for (or routed only to) a rung the key may not use gets 403.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import ConfigError, did_you_mean
from advisor.yamlio import read_text

ENV_VAR = "ADVISOR_API_KEYS"


def key_hash(key: str) -> str:
    """The sha256 hex digest of a key (what the service keeps and records)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """One accepted key: its name, its hash and the rungs it may use (None = all)."""

    name: str
    digest: str
    rungs: frozenset[str] | None = None

    def may_use(self, rung: str) -> bool:
        """True when this key may send requests to `rung`."""
        return self.rungs is None or rung in self.rungs


class KeyRing:
    """The accepted keys, by hash."""

    def __init__(self, keys: list[ApiKey]):
        self._by_digest = {k.digest: k for k in keys}

    def __len__(self) -> int:
        return len(self._by_digest)

    def lookup(self, authorization: str | None) -> ApiKey | None:
        """The key of an ``Authorization: Bearer ...`` header (the scheme in any case: RFC 7235), or None when
        missing or unknown."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = key_hash(token.strip())
        for known, key in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return key
        return None

    def to_state(self) -> list[dict]:
        """Hashes only, for handing the ring to worker processes."""
        return [{"name": k.name, "digest": k.digest, "rungs": sorted(k.rungs) if k.rungs is not None else None}
                for k in self._by_digest.values()]

    @classmethod
    def from_state(cls, state: list[dict]) -> "KeyRing":
        """Inverse of `to_state`."""
        return cls([ApiKey(s["name"], s["digest"], frozenset(s["rungs"]) if s["rungs"] is not None else None)
                    for s in state])


def parse_key_file(path: str | Path, rung_names: list[str] | None = None) -> list[ApiKey]:
    """The keys of a key file (ConfigError naming file and line on a bad line or unknown rung)."""
    path = Path(path)
    lines = read_text(path, "key file").splitlines()
    keys = []
    for n, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) not in (2, 3):
            raise ConfigError(f"{path}:{n}: expected 'NAME KEY [RUNG,...]', got {len(fields)} fields")
        name, secret = fields[0], fields[1]
        digest = secret[len("sha256:"):].lower() if secret.startswith("sha256:") else key_hash(secret)
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ConfigError(f"{path}:{n}: sha256: must be followed by 64 hex digits")
        rungs = None
        if len(fields) == 3:
            rungs = frozenset(r for r in fields[2].split(",") if r)
            unknown = sorted(rungs - set(rung_names or rungs))
            if unknown:
                raise ConfigError(f"{path}:{n}: unknown rung {unknown[0]!r}.{did_you_mean(unknown[0], rung_names or [])}")
        keys.append(ApiKey(name, digest, rungs))
    return keys


def load_keys(path: str | Path | None, rung_names: list[str] | None = None,
              environ: dict[str, str] | None = None) -> KeyRing:
    """Keys from the file and the environment variable (empty ring when neither gives any)."""
    env = os.environ if environ is None else environ
    keys = parse_key_file(path, rung_names) if path else []
    for i, secret in enumerate(s.strip() for s in env.get(ENV_VAR, "").split(",")):
        if secret:
            keys.append(ApiKey(f"env-{i + 1}", key_hash(secret)))
    return KeyRing(keys)


def new_key() -> str:
    """A fresh random key (used when none is configured; printed once, kept hashed)."""
    return "sk-advisor-" + secrets.token_urlsafe(24)
