"""`FakeModel`: a `ModelClient` without a server, for tests of checks, tools, the loop and the probe.

In the spirit of inspect_ai's ``mockllm``, it has two modes:

- **scripted**: ``FakeModel(["<tool_call>...</tool_call>", "FINAL ANSWER: 42"])`` answers each call with the
  next reply of the script (the last one repeats when the script runs out). A reply is a string, a `Reply`
  (text plus token counts and finish reason), an exception instance (raised, as a dead server would:
  use `advisor.errors.BackendError`), or `Sleep` (wait, then answer). The script may also be a function
  ``(call: FakeCall) -> reply``.
- **stand-in**: ``FakeModel.standin(ladder, suite_paths)`` answers every rung with its SIMULATED stand-in
  responder (`advisor.standin.responder_for`) in-process, exactly what the embedded Triton server would
  compute, without starting it. Rungs named in ``fail`` raise `BackendError`.

Every call is recorded in ``calls`` (model, prompt, max_tokens, sampling, request_id); ``prompts`` and
``sampling`` are shortcuts. Results are `advisor.backends.GenerationResult`, the real client's type::

    from advisor.agent.fake import FakeModel
    from advisor.agent.loop import run_episode

    model = FakeModel(['<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>',
                       "FINAL ANSWER: hello"])
    result = await run_episode(task, rung, model, env, limits)
    assert model.calls[0].max_tokens == rung.max_output_tokens

The real path (a `TritonClient` against the embedded tritonserver) is tested beside every use of this fake.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, Union

from advisor.errors import BackendError
from advisor.backends import GenerationResult, estimate_tokens
from advisor.triton.responders import standin_responder


@dataclass(frozen=True)
class Reply:
    """One scripted answer; token counts left None fall back to the model's defaults (or an estimate)."""

    text: str
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens_from_server: bool = True
    note: str | None = None


@dataclass(frozen=True)
class Sleep:
    """Wait `seconds` (a slow model; the caller's timeout may cancel it), then answer `then`."""

    seconds: float
    then: Any = ""


@dataclass(frozen=True)
class FakeCall:
    """One recorded `generate` call."""

    model: str
    prompt: str
    max_tokens: int
    sampling: dict | None = None
    request_id: str | None = None


Script = Union[Sequence[Any], Callable[[FakeCall], Any]]


class FakeModel:
    """A scripted (or stand-in) `ModelClient`; see the module docstring."""

    endpoint = "fake"
    native_tools = False  #: answers the rendered prompt, as Triton does
    streams = False
    constrained_output = False

    def __init__(self, script: Script, *, input_tokens: int | None = None, output_tokens: int | None = None,
                 fail: Iterable[str] = ()):
        if not callable(script) and not list(script):
            raise ValueError("a FakeModel needs at least one scripted reply")
        self._script = script if callable(script) else list(script)
        self.input_tokens = input_tokens  #: default input count of a reply; None: estimated from the prompt
        self.output_tokens = output_tokens  #: default output count; None: estimated from the text
        self.fail = set(fail)  #: models that raise BackendError, as an unreachable server would
        self.calls: list[FakeCall] = []

    @classmethod
    def standin(cls, ladder: Any, suite_paths: Sequence[Any], fail: Iterable[str] = ()) -> "FakeModel":
        """Answer each rung (by its Triton model name) with its SIMULATED stand-in responder, in-process."""
        responders = {m.model_id: standin_responder(m, suite_paths) for m in ladder.rungs}

        def answer(call: FakeCall) -> Reply:
            g = responders[call.model](call.prompt, {**(call.sampling or {}), "max_tokens": call.max_tokens})
            return Reply(g.text, g.finish_reason, g.num_input_tokens, g.num_output_tokens)

        return cls(answer, fail=fail)

    @property
    def prompts(self) -> list[str]:
        """The prompt of every call, in order."""
        return [c.prompt for c in self.calls]

    @property
    def sampling(self) -> list[dict | None]:
        """The sampling parameters of every call, in order."""
        return [c.sampling for c in self.calls]

    def _next(self, call: FakeCall) -> Any:
        if callable(self._script):
            return self._script(call)
        return self._script[min(len(self.calls), len(self._script)) - 1]

    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list | None = None, tools: list | None = None) -> GenerationResult:
        """Record the call and answer it from the script (`TritonClient.generate`'s signature and result)."""
        started = time.perf_counter()
        call = FakeCall(model, prompt, max_tokens, sampling, request_id)
        self.calls.append(call)
        if model in self.fail:
            raise BackendError(f"cannot reach Triton for {model}")
        await asyncio.sleep(0)  # a real call yields to the event loop
        reply = self._next(call)
        while isinstance(reply, Sleep):
            await asyncio.sleep(reply.seconds)
            reply = reply.then
        if isinstance(reply, BaseException):
            raise reply
        if not isinstance(reply, Reply):
            reply = Reply(str(reply))
        n_in = reply.input_tokens if reply.input_tokens is not None else self.input_tokens
        n_out = reply.output_tokens if reply.output_tokens is not None else self.output_tokens
        return GenerationResult(
            text=reply.text, finish_reason=reply.finish_reason,
            input_tokens=n_in if n_in is not None else estimate_tokens(prompt),
            output_tokens=n_out if n_out is not None else estimate_tokens(reply.text),
            tokens_from_server=reply.tokens_from_server, latency_s=time.perf_counter() - started, model=model,
            note=reply.note)

    async def server_ready(self) -> bool:
        """Always True: a fake has no server to lose (rungs in ``fail`` fail each call instead)."""
        return True


__all__ = ["FakeCall", "FakeModel", "Reply", "Sleep"]
