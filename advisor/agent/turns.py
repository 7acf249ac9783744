"""One turn of an episode, the part every loop shares: budget, model call, parse, tool step, stuck check, record.

A `Turns` holds one episode's running state (its `EpisodeResult`, the wall-time deadline, the actions taken,
the unusable replies in a row) and does each step of a turn the same way for every loop:

- `check_budget`: the episode's wall time and token budget (``timeout``, ``max_tokens``);
- `ask`: one model call with the conversation as the rung's template renders it **and** as native ``messages``
  and ``tools`` (a chat API uses those, Triton the prompt); tokens, latency and notes are counted and a
  `TurnRecord` is kept; a call still pending at the deadline is ``timeout``, a failed server ``backend_error``;
- `parse`: the reply in the speaker's tool-call format (a reply cut off at ``max_output_tokens`` is unusable);
- `invalid`: an unusable reply, shown to the model as an error; `limits.max_invalid` in a row is
  ``invalid_output``;
- `act`: the tool call run in the sandboxed environment, its observation recorded and returned (with the
  format's ``observation_hint``), then the stuck check (`is_stuck`: ``stuck``).

A step that ends the episode raises `Stop`; the loop returns `finish(stop)`. Who speaks each turn is the loop's
business: `advisor.agent.loop.run_episode` asks one rung, `advisor.orchestrator.loop.run_orchestrated` lets
its orchestrator act or hand the turn to an expert.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from advisor.agent.formats import Parsed
from advisor.backends.failures import failure_kind
from advisor.errors import BackendError
from advisor.records import Episode, StopReason, ToolCall, TurnRecord

STUCK_REPEATS = 3  #: identical consecutive actions that count as stuck
STUCK_CYCLES = 3  #: full A-B cycles (A B A B A B) that count as stuck
OBSERVATION_CHARS = 6000  #: observation text shown to the model (the rest is cut with a note)
RECORD_CHARS = 2000  #: observation text kept in a TurnRecord


@dataclass
class EpisodeResult:
    """An episode plus its per-call accounting."""

    episode: Episode
    turns: list[TurnRecord] = field(default_factory=list)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_from_server: bool = True
    latency_s: float = 0.0  #: wall time of the whole episode
    notes: list[str] = field(default_factory=list)  #: e.g. the client's note on token-count fallbacks

    def cost(self, model: Any) -> float:
        """USD of every model call (prices are linear in tokens)."""
        return model.attempt_cost(self.input_tokens, self.output_tokens)


class Stop(Exception):
    """The episode ends here: its stop reason and, except for a final answer, why."""

    def __init__(self, reason: StopReason, error: str | None = None, failure: str | None = None):
        super().__init__(reason, error)
        self.reason, self.error, self.failure = reason, error, failure


def call_signature(name: str, args: dict[str, Any]) -> str:
    """One action as a comparable string (the stuck check compares them)."""
    return name + "\x00" + json.dumps(args, sort_keys=True, default=str)


def is_stuck(actions: list[str], repeats: int = STUCK_REPEATS, cycles: int = STUCK_CYCLES) -> bool:
    """True when the last actions repeat one action `repeats` times or alternate two for `cycles` cycles."""
    if len(actions) >= repeats and len(set(actions[-repeats:])) == 1:
        return True
    n = 2 * cycles
    if len(actions) >= n:
        tail = actions[-n:]
        a, b = tail[0], tail[1]
        if a != b and all(x == (a if i % 2 == 0 else b) for i, x in enumerate(tail)):
            return True
    return False


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a note of how many were cut."""
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


class Turns:
    """One episode's shared turn machinery (see the module docstring)."""

    def __init__(self, result: EpisodeResult, env: Any, limits: Any, *, sampling: dict[str, Any] | None = None,
                 request_id: str | None = None):
        self.res, self.ep, self.env, self.limits = result, result.episode, env, limits
        self.sampling, self.request_id = sampling, request_id
        self.start = time.monotonic()
        self.deadline = self.start + float(limits.timeout_s)
        self.actions: list[str] = []
        self.invalid_in_row = 0

    def finish(self, stop: Stop) -> EpisodeResult:
        """The result, with the stop reason, the environment's API log and the episode's wall time."""
        self.ep.stop_reason, self.ep.error, self.ep.failure = stop.reason, stop.error, stop.failure
        self.ep.api_log = list(getattr(self.env, "api_log", []) or [])
        self.res.latency_s = time.monotonic() - self.start
        return self.res

    def check_budget(self) -> None:
        """Stop when the episode's wall time or tokens are spent."""
        if self.deadline - time.monotonic() <= 0:
            raise Stop(StopReason.TIMEOUT, f"episode wall time reached {self.limits.timeout_s:g} s")
        self.check_tokens()

    def check_tokens(self) -> None:
        """Stop when the episode's input + output tokens reached `limits.max_tokens`."""
        used = self.res.input_tokens + self.res.output_tokens
        if used >= self.limits.max_tokens:
            raise Stop(StopReason.MAX_TOKENS, f"{used} tokens used of {self.limits.max_tokens}")

    async def ask(self, client: Any, model: Any, template: Any, messages: list[dict[str, str]], tools: list[Any],
                  where: str) -> tuple[Any, TurnRecord]:
        """One model call of `model` through `client` (`where`: "turn 3", "round 3" in messages); the reply
        and its new `TurnRecord` (action ``invalid`` until the caller says what the reply did)."""
        remaining = self.deadline - time.monotonic()
        rid = f"{self.request_id}:{self.res.model_calls}" if self.request_id else None
        prompt = template.render(messages)
        t0 = time.monotonic()
        try:
            gen = await asyncio.wait_for(
                client.generate(model.model_id, prompt, max_tokens=int(model.max_output_tokens),
                                sampling=self.sampling, timeout_s=remaining, request_id=rid,
                                messages=list(messages), tools=list(tools)),
                timeout=remaining)
        except asyncio.TimeoutError:
            raise self._pending(where) from None
        except BackendError as exc:
            if time.monotonic() >= self.deadline - 0.05:  # the client's own timeout fired at the episode deadline
                raise self._pending(where) from None
            raise Stop(StopReason.BACKEND_ERROR, f"{where}: {exc}", failure=failure_kind(exc).value) from None
        latency = time.monotonic() - t0
        res = self.res
        res.model_calls += 1
        res.input_tokens += int(gen.input_tokens)
        res.output_tokens += int(gen.output_tokens)
        if not getattr(gen, "tokens_from_server", True):
            res.tokens_from_server = False
        note = getattr(gen, "note", None)
        if note and note not in res.notes:
            res.notes.append(note)
        record = TurnRecord(turn=len(res.turns), action="invalid", input_tokens=int(gen.input_tokens),
                            output_tokens=int(gen.output_tokens), latency_s=latency,
                            finish_reason=str(gen.finish_reason or ""))
        res.turns.append(record)
        return gen, record

    def _pending(self, where: str) -> Stop:
        return Stop(StopReason.TIMEOUT, f"model call of {where} still pending at the {self.limits.timeout_s:g} s limit")

    @staticmethod
    def parse(fmt: Any, gen: Any, specs: list[Any], model: Any, whose: str = "your") -> Parsed:
        """The reply as a `Parsed`; an unusable one (cut off, or not parseable) carries the error to show."""
        if gen.finish_reason == "length":
            limit = int(model.max_output_tokens)
            return Parsed("invalid", error=f"{whose} reply was cut off at the {limit}-token output limit; write "
                                           "shorter replies: one tool call, or a brief final answer")
        parsed = fmt.parse(gen.text or "", specs)
        if parsed.kind == "invalid":
            return dataclasses.replace(parsed, error=f"could not parse {whose} reply: {parsed.error}")
        return parsed

    def final(self, record: TurnRecord, parsed: Any) -> Stop:
        """The reply is the final answer: record it; the `Stop` to raise."""
        record.action, record.observation = "final", clip_text(parsed.final or "", RECORD_CHARS)
        self.ep.final = parsed.final
        return Stop(StopReason.FINAL)

    def invalid(self, record: TurnRecord, parsed: Any) -> str:
        """An unusable reply: recorded; the observation to show the model (``ERROR: ...``). Stops after
        `limits.max_invalid` in a row."""
        self.invalid_in_row += 1
        record.observation = parsed.error
        if self.invalid_in_row >= self.limits.max_invalid:
            raise Stop(StopReason.INVALID_OUTPUT,
                       f"{self.invalid_in_row} unusable replies in a row; last: {parsed.error}")
        return f"ERROR: {parsed.error}"

    async def act(self, record: TurnRecord, parsed: Any) -> str:
        """Run the reply's tool call in the environment, record it and return its observation (clipped to
        `OBSERVATION_CHARS`); stops at the deadline or when the actions repeat."""
        self.invalid_in_row = 0
        record.action, record.arguments_json = parsed.name, json.dumps(parsed.arguments, default=str)
        try:
            call: ToolCall = await asyncio.wait_for(self.env.call(parsed.name, parsed.arguments),
                                                    timeout=max(self.deadline - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            self.ep.calls.append(ToolCall(parsed.name, parsed.arguments, "tool call cut by the episode time limit",
                                          ok=False))
            raise Stop(StopReason.TIMEOUT, f"tool {parsed.name!r} still running at the "
                                           f"{self.limits.timeout_s:g} s limit") from None
        self.ep.calls.append(call)
        observation = call.observation if call.ok else f"ERROR: {call.observation}"
        if parsed.extra_calls:
            observation += (f"\n[note: only the first tool call of your reply was run; "
                            f"{parsed.extra_calls} more ignored]")
        record.observation = clip_text(observation, RECORD_CHARS)
        self.note_action(parsed.name, parsed.arguments)
        return clip_text(observation, OBSERVATION_CHARS)

    def note_action(self, name: str, arguments: dict[str, Any]) -> None:
        """Count one action for the stuck check; stop when the actions repeat."""
        self.actions.append(call_signature(name, arguments))
        if is_stuck(self.actions):
            raise Stop(StopReason.STUCK, f"repeating actions: last {name!r}")


def with_hint(observation: str, fmt: Any) -> str:
    """A tool observation as the model reads it: followed by its format's reminder of how to finish, if any."""
    hint = getattr(fmt, "observation_hint", None)
    return observation + (f"\n{hint}" if hint else "")
