"""The agent loop: act -> observe -> decide, against any rung, until a stop reason.

`run_episode` renders the conversation with the rung's chat template and tool-call format, asks the model
(any `advisor.backends.ModelBackend`; only its `generate` is called), parses the reply, runs the tool call in
the task's sandboxed environment and feeds the observation back. It always ends, and records why:

- ``final``: the model answered (a reply with no tool call, see `advisor.agent.formats`);
- ``max_turns``: `limits.max_turns` model calls made without a final answer;
- ``max_tokens``: the episode's input + output tokens reached `limits.max_tokens`;
- ``timeout``: the episode's wall time reached `limits.timeout_s` (a pending model or tool call is cancelled);
- ``stuck``: the same action `STUCK_REPEATS` times in a row, or two actions alternating A-B for
  `STUCK_CYCLES` full cycles;
- ``backend_error``: the model server failed (`BackendError`); the run is to be stored unscored and retried;
- ``invalid_output``: `limits.max_invalid` unusable replies in a row (a parse error, an empty reply, or a reply
  cut off at the rung's `max_output_tokens`). Each one before that is shown to the model as an observation.

Every model call's tokens (as the server counted them) and latency go into one `TurnRecord` per call. The steps
of a turn (budget, model call, parse, tool step, stuck check, record) are `advisor.agent.turns.Turns`, which the
orchestrator's loop drives too.
"""

from __future__ import annotations

from typing import Any

from advisor.agent.chat import ChatTemplate, system_prompt, template_for
from advisor.agent.formats import FINAL_MARKER, format_for
from advisor.agent.replay import run_replay_step
from advisor.agent.turns import (OBSERVATION_CHARS, RECORD_CHARS, STUCK_CYCLES, STUCK_REPEATS, EpisodeResult, Stop,
                                 Turns, call_signature, clip_text, is_stuck, with_hint)
from advisor.backends import ModelBackend
from advisor.records import Condition, Episode, StopReason

__all__ = ["EpisodeResult", "ModelClient", "NO_TOOLS", "OBSERVATION_CHARS", "RECORD_CHARS", "STUCK_CYCLES",
           "STUCK_REPEATS", "call_signature", "clip_text", "is_stuck", "run_episode"]

#: The system prompt's tool section for a task without tools (an empty tool list invites invented calls).
NO_TOOLS = (f"You have no tools for this task. Reply with '{FINAL_MARKER}' followed by your answer, and nothing "
            "else.")


#: What the loop asks a turn of: any backend (the loop calls its `generate` only, so `FakeModel` serves too).
ModelClient = ModelBackend


async def run_episode(task: Any, model: Any, client: ModelClient, env: Any, limits: Any, *,
                      condition: str = "baseline", sampling: dict[str, Any] | None = None,
                      request_id: str | None = None, template: ChatTemplate | None = None) -> EpisodeResult:
    """Run one episode of `task` on ladder model `model` through `client`, acting in `env`.

    `limits` is `Suite.limits_for(task)`; with `condition == "skill"` the task's skill document goes into
    the system prompt. `sampling` (e.g. ``{"seed": ..., "temperature": ...}``) is sent with every call.
    Never raises for model or tool problems: they end the episode with a stop reason. A task made from a
    captured live step (``task.replay``) is one reply on its recorded conversation (`advisor.agent.replay`).
    """
    if getattr(task, "replay", None) is not None:
        return await run_replay_step(task, model, client, limits, sampling=sampling, request_id=request_id,
                                     template=template)
    fmt = format_for(model.tool_call_format)
    template = template or template_for(model)
    specs = list(env.specs())
    skill = task.skill_text if condition == Condition.SKILL else None
    messages: list[dict[str, str]] = [
        {"role": "system", "content": system_prompt(fmt.render_tools(specs) if specs else NO_TOOLS, skill)},
        {"role": "user", "content": task.instructions},
    ]
    turns = Turns(EpisodeResult(Episode(final=None, stop_reason=StopReason.MAX_TURNS,
                                        workspace=getattr(env, "workspace", None))),
                  env, limits, sampling=sampling, request_id=request_id)
    try:
        for turn in range(int(limits.max_turns)):
            turns.check_budget()
            gen, record = await turns.ask(client, model, template, messages, specs, f"turn {turn}")
            parsed = turns.parse(fmt, gen, specs, model)
            if parsed.kind == "final":
                raise turns.final(record, parsed)
            messages.append({"role": "assistant", "content": gen.text or ""})
            if parsed.kind == "invalid":
                messages.append({"role": "tool", "content": turns.invalid(record, parsed)})
            else:
                messages.append({"role": "tool", "content": with_hint(await turns.act(record, parsed), fmt)})
            turns.check_tokens()
        raise Stop(StopReason.MAX_TURNS, f"no final answer in {limits.max_turns} model calls")
    except Stop as stop:
        return turns.finish(stop)
