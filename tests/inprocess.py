"""A Triton-client stand-in for unit tests: calls the stand-in responders in-process (no server).

Same `generate` signature and result fields as `advisor.triton.client.TritonClient`; rungs named in `fail`
raise `BackendError`, as a dead server would.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from advisor.errors import BackendError
from advisor.standin import responder_for


@dataclass
class Gen:
    """The fields of `GenerationResult` the loop reads."""

    text: str
    finish_reason: str
    input_tokens: int
    output_tokens: int
    tokens_from_server: bool = True
    note: str | None = None


class InProcess:
    """Answers with each rung's stand-in responder, knowing `suite_paths`; counts calls."""

    def __init__(self, ladder, suite_paths, fail=()):
        self.responders = {m.triton_model: responder_for(m, list(suite_paths)) for m in ladder.rungs}
        self.fail = set(fail)
        self.calls = 0

    async def generate(self, model, prompt, *, max_tokens, sampling=None, timeout_s=None, request_id=None):
        self.calls += 1
        if model in self.fail:
            raise BackendError(f"cannot reach Triton for {model}")
        await asyncio.sleep(0)
        g = self.responders[model](prompt, {**(sampling or {}), "max_tokens": max_tokens})
        return Gen(g.text, g.finish_reason, g.num_input_tokens, g.num_output_tokens)
