"""Stand-in rungs: SIMULATED models served by a real tritonserver for CPU-only demos and tests.

The embedded Triton server calls `responder_for(model)` once per stand-in model and then the returned
function once per request with the prompt text and the decoded sampling parameters. The behaviour is a
stated, seeded parametric simulation (see the module docs of the agent model); nothing outside the server
knows a stand-in is answering.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@dataclass
class Generation:
    """One stand-in generation, with the token counts the server returns."""

    text: str
    finish_reason: str  #: stop | length
    num_input_tokens: int
    num_output_tokens: int


def count_tokens(text: str) -> int:
    """The stand-ins' tokenizer: words and punctuation marks (about 1.3 per English word)."""
    return len(_TOKEN.findall(text))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut text after max_tokens stand-in tokens; return (text, was_cut)."""
    pieces = list(_TOKEN.finditer(text))
    if len(pieces) <= max_tokens:
        return text, False
    return text[: pieces[max_tokens - 1].end()], True


Responder = Callable[[str, dict[str, Any]], Generation]


def responder_for(model, suite_paths: Sequence[str | Path] = ()) -> Responder:
    """The function that answers requests for a stand-in `model` (a ladder `Model` with a standin block).

    `suite_paths` are the suites whose tasks the stand-in "knows" (their reference trajectories), so that
    it can act on them as an agent. Until the agent model lands this is a trivial simulation that answers
    with a fixed final text.
    """

    def respond(prompt: str, sampling: dict[str, Any]) -> Generation:
        max_tokens = int(sampling.get("max_tokens", 16))
        text, cut = truncate_tokens(f"[stand-in {model.name}] I have read the task.", max_tokens)
        return Generation(text, "length" if cut else "stop", count_tokens(prompt), count_tokens(text))

    return respond
