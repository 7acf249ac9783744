"""Give-ups and refusals: a final answer that says the task was not done.

"I was not able to complete this task with the tools available." is a well-formed step: it parses, calls nothing
it should not, and an agent framework ends the run on it. It is also the commonest way a small rung fails
quietly. So the step check (`advisor.service.checks.step_check`, kind ``gave_up``) treats a final answer to a request
that offers tools as a broken step when it matches one of these patterns: it is retried, then escalated to the
next rung within the request, and the session's latch moves up with it. When every rung the request may use gives
up, the last give-up is delivered: it is the honest answer.

The patterns are written here, once, for a final answer's text (case-insensitive, anywhere in the answer); a team
adds its own with the service config's ``api.give_up_patterns`` (regexes), or turns the check off with
``api.give_ups: false``. Their false-positive rate on the example suite's usable answers is measured by
``benchmarks/give_up_patterns.py`` (the figure and the command are in docs/service.md).
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

#: The built-in patterns: the model says it could not do the task, or declines it.
GIVE_UP_PATTERNS: tuple[str, ...] = (
    # "I was not able to complete", "we are unable to finish", "I'm unable to perform"
    r"\b(?:i|we)(?:\s+(?:was|were|am|are)|'m|'re)\s+(?:not\s+able|unable)\s+to\s+"
    r"(?:complete|finish|do|perform|fulfil|fulfill|carry\s+out|accomplish|help|access|proceed)",
    # "I cannot complete", "I couldn't finish", "I can't help with"
    r"\b(?:i|we)\s+(?:cannot|can't|can\s+not|could\s*not|couldn't)\s+"
    r"(?:complete|finish|perform|fulfil|fulfill|carry\s+out|accomplish|help\s+with|do\s+(?:this|that|it)|proceed)",
    # "I'm sorry, but I can't", "Sorry, I am unable"
    r"\bsorry,?\s+(?:but\s+)?(?:i|we)(?:\s+(?:am|are)|'m|'re)?\s+(?:cannot|can't|unable|not\s+able)\b",
    # "I must decline", "I have to refuse"
    r"\b(?:i|we)\s+(?:must|have\s+to|will\s+have\s+to)\s+(?:decline|refuse)\b",
    # "I don't have access to the tools", "I do not have the tools needed"
    r"\b(?:i|we)\s+(?:do\s+not|don't)\s+have\s+(?:access\s+to\s+)?(?:the\s+)?(?:necessary\s+|required\s+|needed\s+)?"
    r"(?:tools?|access)\b",
)


@functools.lru_cache(maxsize=32)
def _compiled(extra: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in (*GIVE_UP_PATTERNS, *extra)), re.IGNORECASE)


def gave_up(text: str | None, extra: Iterable[str] = ()) -> str | None:
    """The words of `text` that say it gave up (the first match of the built-in and `extra` patterns), else
    None."""
    if not text:
        return None
    found = _compiled(tuple(extra)).search(text)
    return None if found is None else " ".join(found.group(0).split())
