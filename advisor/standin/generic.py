"""What a stand-in answers to a prompt that is not one of its suites' tasks: a short, labelled SIMULATED reply.

The stand-ins act on the tasks of the suites they know (`advisor.standin.agent`); a plain chat request sent to
``advisor serve`` on the demo ladder is none of those. So that the service's examples work on the demo too, a
stand-in answers such a prompt generically, always starting with ``[SIMULATED <rung>]``:

- **extraction** ("extract the order id from: ORD-1042 late"): the identifiers in the text (``ORD-1042``-like
  tokens: letters, a dash, digits) as a JSON object whose key is the thing asked for (``order_id``);
- **greeting** ("say hello", "hi"): a greeting;
- **anything else**: a reply that says it is simulated and repeats the request's first words.

A prompt that offers tools (the agent's system prompt: tools, ``FINAL ANSWER``) about no known task is worked on
those tools (`advisor.standin.tooluse`); one whose system prompt asks for JSON is answered with the JSON alone.
Deterministic: the same messages always get the same reply.
"""

from __future__ import annotations

import json
import re

from advisor.agent.formats import FINAL_MARKER
from advisor.standin.arguments import IDENTIFIER

_EXTRACT = re.compile(r"\bextract\s+(?:the\s+|all\s+(?:the\s+)?)?(?P<what>[a-z][a-z ]{0,40}?)\s*(?:from|in|out of)\b",
                      re.IGNORECASE)
_GREETING = re.compile(r"^\W*(?:say\s+)?(?:hello|hi|hey|good (?:morning|afternoon|evening))\b", re.IGNORECASE)
_WORDS_SHOWN = 12


def is_agent_prompt(system: str) -> bool:
    """True for the agent loop's system prompt (tools offered, answers after ``FINAL ANSWER``)."""
    return FINAL_MARKER in system


def label(rung: str) -> str:
    """The prefix of every generic reply."""
    return f"[SIMULATED {rung}]"


def _key(what: str) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", what.lower()) if w not in ("a", "an", "the", "all")]
    key = "_".join(words) or "value"
    return key[:-1] if key.endswith("ids") else key  # "order ids" -> order_id, listed


def generic_reply(rung: str, user_text: str) -> str:
    """The stand-in `rung`'s reply to a plain chat message `user_text` (the last user message)."""
    text = user_text.strip()
    asked = _EXTRACT.search(text)
    if asked:
        found = list(dict.fromkeys(IDENTIFIER.findall(text[asked.end():]) or IDENTIFIER.findall(text)))
        key = _key(asked.group("what"))
        if not found:
            return f"{label(rung)} I found no {asked.group('what').strip()} in the text."
        value = found[0] if len(found) == 1 else found
        return f"{label(rung)} {json.dumps({key: value})}"
    if _GREETING.search(text):
        return f"{label(rung)} Hello! I am the {rung} stand-in, a simulation of the model on the demo ladder."
    words = text.split()
    shown = " ".join(words[:_WORDS_SHOWN]) + (" ..." if len(words) > _WORDS_SHOWN else "")
    return (f"{label(rung)} This is a simulated reply from the {rung} stand-in (no model ran). "
            f"You asked: \"{shown}\". A real rung would answer it here.")
