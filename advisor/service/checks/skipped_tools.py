"""Answers without the tools the request asked for: a final answer before a tool the user named was ever called.

"Search the documentation, read the relevant page, and answer" offers ``search_docs`` and ``read_doc``; a reply
that answers after searching but before any ``read_doc`` is a well-formed step that skipped what the user asked
for (an agent framework ends the run on it, with an answer from the model's own memory). The step check
(`advisor.service.checks.step_check`, kind ``skipped_tool``) treats such a final answer as a broken step: retried, then
escalated; when every rung the request may use answers that way, the last answer is delivered.

The rule is plain words, so a team can read what it flags: a tool is **asked for** when the verb its name starts
with (``read`` of ``read_doc``, ``search`` of ``search_docs``; at least four letters, so ``get``/``set`` never
count) is a word of the latest user message, not right after an article ("the list of languages" asks for no
listing), and, when the name has an object (``doc`` of ``read_doc``), a word of the message starts with it
("documentation"). It was **used** when the conversation called any tool with that verb (``read_doc`` satisfies
"read" when ``read_file`` is offered too). A final answer with an asked-for verb unused is flagged. Turn it off
with the service config's ``api.skipped_tools: false``. Its false positives on known-good trajectories (does the
reference way call each tool the instructions ask for?) are measured by ``benchmarks/skipped_tools.py``.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

MIN_VERB = 4  #: shorter leading words (get, set, run, add) are too common in prose to name a tool


def _parts(tool: str) -> list[str]:
    return [p.lower() for p in re.split(r"[_\-.\s]|(?<=[a-z])(?=[A-Z])", tool.strip()) if p]


def verb_of(tool: str) -> str | None:
    """The verb a tool's name starts with (``read_doc`` -> ``read``, ``searchDocs`` -> ``search``), if long enough."""
    parts = _parts(tool)
    first = parts[0] if parts else ""
    return first if len(first) >= MIN_VERB and first.isalpha() else None


def object_of(tool: str) -> str | None:
    """What the tool acts on, as a stem (``read_doc`` -> ``doc``, ``list_files`` -> ``file``), or None."""
    parts = _parts(tool)
    if len(parts) < 2 or not parts[1].isalpha():
        return None
    stem = parts[1][:-1] if parts[1].endswith("s") and len(parts[1]) > 3 else parts[1]
    return stem if len(stem) >= 3 else None


_ARTICLES = {"the", "a", "an", "this", "that", "these", "those", "your", "my", "our", "their", "its", "each", "every"}


def asked_verbs(user_text: str, verbs: Iterable[str]) -> set[str]:
    """The `verbs` the user's text uses as verbs: as a word not right after an article ("read the page" asks for
    reading; "the list of languages" does not ask for listing)."""
    words = re.findall(r"[a-z]+", user_text.lower())
    used = {w for before, w in zip(["", *words], words) if before not in _ARTICLES}
    return set(verbs) & used


def asked_for(tools: Iterable[str], user_text: str) -> list[str]:
    """The tools whose verb the user's text asks for, and whose object it names when the name has one (a word
    starting with it: ``doc`` in "documentation"): "list the action items" does not ask for ``list_files``."""
    tools = list(tools)
    verbs = asked_verbs(user_text, {v for t in tools if (v := verb_of(t)) is not None})
    words = re.findall(r"[a-z]+", user_text.lower())
    return [t for t in tools if verb_of(t) in verbs
            and ((obj := object_of(t)) is None or any(w.startswith(obj) for w in words))]


def skipped(offered: Sequence[str], called: Iterable[str], user_text: str) -> list[str]:
    """The offered tools of each verb the user asked for of which no tool was called in the conversation (one call
    of ``read_doc`` satisfies "read" when ``read_file`` is offered too)."""
    done = {verb_of(t) for t in called}
    return [t for t in asked_for(offered, user_text) if verb_of(t) not in done]
