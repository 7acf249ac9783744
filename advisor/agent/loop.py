"""The agent loop: act -> observe -> decide, against any rung, until a stop reason.

`run_episode` renders the conversation with the rung's chat template and tool-call format, asks the model
(any object with the `TritonClient.generate` signature), parses the reply, runs the tool call in the task's
sandboxed environment and feeds the observation back. It always ends, and records why:

- ``final``: the model answered (a reply with no tool call, see `advisor.agent.formats`);
- ``max_turns``: `limits.max_turns` model calls made without a final answer;
- ``max_tokens``: the episode's input + output tokens reached `limits.max_tokens`;
- ``timeout``: the episode's wall time reached `limits.timeout_s` (a pending model or tool call is cancelled);
- ``stuck``: the same action `STUCK_REPEATS` times in a row, or two actions alternating A-B for
  `STUCK_CYCLES` full cycles;
- ``backend_error``: the model server failed (`BackendError`); the run is to be stored unscored and retried;
- ``invalid_output``: `limits.max_invalid` unusable replies in a row (a parse error, an empty reply, or a reply
  cut off at the rung's `max_output_tokens`). Each one before that is shown to the model as an observation.

Every model call's tokens (as the server counted them) and latency go into one `TurnRecord` per call.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from advisor.agent.chat import ChatTemplate, system_prompt, template_for
from advisor.agent.formats import FINAL_MARKER, format_for
from advisor.records import Episode, Condition, StopReason, ToolCall, TurnRecord
from advisor.errors import BackendError

STUCK_REPEATS = 3  #: identical consecutive actions that count as stuck
STUCK_CYCLES = 3  #: full A-B cycles (A B A B A B) that count as stuck
OBSERVATION_CHARS = 6000  #: observation text shown to the model (the rest is cut with a note)
RECORD_CHARS = 2000  #: observation text kept in a TurnRecord
#: The system prompt's tool section for a task without tools (an empty tool list invites invented calls).
NO_TOOLS = (f"You have no tools for this task. Reply with '{FINAL_MARKER}' followed by your answer, and nothing "
            "else.")


class ModelClient(Protocol):
    """What the loop needs from a backend (any `advisor.backends.ModelBackend`)."""

    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list | None = None, tools: list | None = None) -> Any:
        """One generation: an object with text, finish_reason, input_tokens, output_tokens, tokens_from_server."""


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


def call_signature(name: str, args: dict[str, Any]) -> str:
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
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


async def run_episode(task: Any, model: Any, client: ModelClient, env: Any, limits: Any, *,
                      condition: str = "baseline", sampling: dict[str, Any] | None = None,
                      request_id: str | None = None, template: ChatTemplate | None = None) -> EpisodeResult:
    """Run one episode of `task` on ladder model `model` through `client`, acting in `env`.

    `limits` is `Suite.limits_for(task)`; with `condition == "skill"` the task's skill document goes into
    the system prompt. `sampling` (e.g. ``{"seed": ..., "temperature": ...}``) is sent with every call.
    Never raises for model or tool problems: they end the episode with a stop reason.
    """
    fmt = format_for(model.tool_call_format)
    template = template or template_for(model)
    specs = list(env.specs())
    skill = task.skill_text if condition == Condition.SKILL else None
    messages: list[dict[str, str]] = [
        {"role": "system", "content": system_prompt(fmt.render_tools(specs) if specs else NO_TOOLS, skill)},
        {"role": "user", "content": task.instructions},
    ]
    res = EpisodeResult(Episode(final=None, stop_reason=StopReason.MAX_TURNS, workspace=getattr(env, "workspace", None)))
    ep = res.episode
    actions: list[str] = []
    invalid_in_row = 0
    start = time.monotonic()
    deadline = start + float(limits.timeout_s)

    def stop(reason: StopReason, error: str | None = None) -> EpisodeResult:
        ep.stop_reason = reason
        ep.error = error
        ep.api_log = list(getattr(env, "api_log", []) or [])
        res.latency_s = time.monotonic() - start
        return res

    for turn in range(int(limits.max_turns)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return stop(StopReason.TIMEOUT, f"episode wall time reached {limits.timeout_s:g} s")
        used = res.input_tokens + res.output_tokens
        if used >= limits.max_tokens:
            return stop(StopReason.MAX_TOKENS, f"{used} tokens used of {limits.max_tokens}")
        prompt = template.render(messages)
        max_out = int(model.max_output_tokens)
        rid = f"{request_id}:{turn}" if request_id else None
        t0 = time.monotonic()
        try:
            gen = await asyncio.wait_for(
                client.generate(model.triton_model, prompt, max_tokens=max_out, sampling=sampling,
                                timeout_s=remaining, request_id=rid, messages=list(messages), tools=specs),
                timeout=remaining)
        except asyncio.TimeoutError:
            return stop(StopReason.TIMEOUT, f"model call of turn {turn} still pending at the {limits.timeout_s:g} s limit")
        except BackendError as exc:
            if time.monotonic() >= deadline - 0.05:  # the client's own timeout fired at the episode deadline
                return stop(StopReason.TIMEOUT, f"model call of turn {turn} still pending at the {limits.timeout_s:g} s limit")
            return stop(StopReason.BACKEND_ERROR, f"turn {turn}: {exc}")
        latency = time.monotonic() - t0
        res.model_calls += 1
        res.input_tokens += int(gen.input_tokens)
        res.output_tokens += int(gen.output_tokens)
        if not getattr(gen, "tokens_from_server", True):
            res.tokens_from_server = False
        note = getattr(gen, "note", None)
        if note and note not in res.notes:
            res.notes.append(note)
        record = TurnRecord(turn=turn, action="invalid", input_tokens=int(gen.input_tokens),
                            output_tokens=int(gen.output_tokens), latency_s=latency,
                            finish_reason=str(gen.finish_reason or ""))
        res.turns.append(record)
        text = gen.text or ""
        parsed = fmt.parse(text, specs)
        if gen.finish_reason == "length":
            parsed = None
            error = (f"your reply was cut off at the {max_out}-token output limit; write shorter replies: "
                     "one tool call, or a brief final answer")
        elif parsed.kind == "invalid":
            error = f"could not parse your reply: {parsed.error}"
        if parsed is not None and parsed.kind == "final":
            record.action, record.observation = "final", clip_text(parsed.final or "", RECORD_CHARS)
            ep.final = parsed.final
            return stop(StopReason.FINAL)
        if parsed is None or parsed.kind == "invalid":
            invalid_in_row += 1
            record.observation = error
            messages += [{"role": "assistant", "content": text}, {"role": "tool", "content": f"ERROR: {error}"}]
            if invalid_in_row >= limits.max_invalid:
                return stop(StopReason.INVALID_OUTPUT, f"{invalid_in_row} unusable replies in a row; last: {error}")
        else:
            invalid_in_row = 0
            try:
                call: ToolCall = await asyncio.wait_for(env.call(parsed.name, parsed.arguments),
                                                        timeout=max(deadline - time.monotonic(), 0.001))
            except asyncio.TimeoutError:
                record.action, record.arguments_json = parsed.name, json.dumps(parsed.arguments, default=str)
                ep.calls.append(ToolCall(parsed.name, parsed.arguments, "tool call cut by the episode time limit",
                                         ok=False))
                return stop(StopReason.TIMEOUT, f"tool {parsed.name!r} still running at the {limits.timeout_s:g} s limit")
            ep.calls.append(call)
            observation = call.observation if call.ok else f"ERROR: {call.observation}"
            if parsed.extra_calls:
                observation += (f"\n[note: only the first tool call of your reply was run; "
                                f"{parsed.extra_calls} more ignored]")
            record.action = parsed.name
            record.arguments_json = json.dumps(parsed.arguments, default=str)
            record.observation = clip_text(observation, RECORD_CHARS)
            hint = getattr(fmt, "observation_hint", None)  # a format's reminder of how to finish
            shown = clip_text(observation, OBSERVATION_CHARS) + (f"\n{hint}" if hint else "")
            messages += [{"role": "assistant", "content": text}, {"role": "tool", "content": shown}]
            actions.append(call_signature(parsed.name, parsed.arguments))
            if is_stuck(actions):
                return stop(StopReason.STUCK, f"repeating actions: last {parsed.name!r}")
        if res.input_tokens + res.output_tokens >= limits.max_tokens:
            return stop(StopReason.MAX_TOKENS, f"{res.input_tokens + res.output_tokens} tokens used of {limits.max_tokens}")
    return stop(StopReason.MAX_TURNS, f"no final answer in {limits.max_turns} model calls")
