"""Stand-in rungs: SIMULATED agent models served by a real tritonserver for CPU-only demos and tests.

The embedded Triton server calls `responder_for(model, suite_paths)` once per stand-in model and then the
returned function once per request with the prompt text and the decoded sampling parameters. A stand-in is
an *agent*: it reads the prompt the agent loop rendered (default chat template, its rung's tool-call
format), recognises the task by the hash of the instructions among the suites it knows, sees whether the
skill document is in the system prompt and which calls it already made, and emits its next tool call or
its final answer by replaying or perturbing the task's reference trajectory. What it does is a stated,
seeded, parametric model, documented in `advisor.standin.behaviour` and ``docs/standin.md``; nothing
outside the server knows a stand-in is answering, and every result it produces is labelled simulated by
the runner (the ladder says ``simulated: true``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from advisor.standin.agent import StandinAgent
from advisor.standin.orchestrator import StandinOrchestrator
from advisor.triton.responders import RESPONDERS

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
    if max_tokens <= 0:
        return "", True
    return text[: pieces[max_tokens - 1].end()], True


Responder = Callable[[str, dict[str, Any]], Generation]


def responder_for(model, suite_paths: Sequence[str | Path] = ()) -> Responder:
    """The function that answers requests for a stand-in `model` (a ladder `Model` with a standin block).

    `suite_paths` are the suites whose tasks the stand-in "knows" (their reference trajectories), so that
    it can act on them as an agent; a request about any other task gets a generic give-up answer. The
    function is deterministic for the same prompt and sampling parameters, and thread-safe. The rung's
    simulated `latency_ms` is waited by the server (`advisor.triton.standin_model`), not here.
    """
    orchestrates = model.standin is not None and model.standin.orchestrator is not None
    agent = StandinOrchestrator(model, suite_paths) if orchestrates else StandinAgent(model, suite_paths)

    def respond(prompt: str, sampling: dict[str, Any]) -> Generation:
        max_tokens = int(sampling.get("max_tokens", 16))
        step = agent.generate(prompt, sampling) if hasattr(agent, "generate") else None
        text = step.text if step is not None else agent.reply(prompt, sampling)
        text, cut = truncate_tokens(text, max_tokens)
        cut = cut or (step is not None and step.cut)
        return Generation(text, "length" if cut else "stop", count_tokens(prompt), count_tokens(text))

    return respond


RESPONDERS.add("standin", responder_for)

__all__ = ["Generation", "Responder", "count_tokens", "responder_for", "truncate_tokens"]
