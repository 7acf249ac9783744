"""One captured live step, replayed on a rung: the recorded conversation in, one reply out, no tool run.

A task made from traffic (`advisor.suite.Replay`, written by ``advisor suite from-traffic``) carries the
conversation as the service rendered it for the rung that answered live (`advisor.agent.conversation`); here the
same conversation is rendered for the rung under test and asked once. Tool results are the recorded ones (they are
in the conversation), so no live tool runs, and the reply is the episode:

- a final answer: stop ``final`` with its text as the service delivers it (`advisor.agent.conversation.spoken`: no
  ``FINAL ANSWER:`` marker, no ``<think>`` block, no stand-in label);
- a tool call: stop ``step`` with the call in the episode's calls (marked not run), for the checks to compare
  with the reference call or the class's verifier;
- an unusable reply (unparseable, cut off at the output cap): stop ``invalid_output``;
- a failed server: ``backend_error`` as in every episode (stored unscored, retried by the next probe).

The step is sent with the live request's sampling parameters (``replay.sampling``: its seed and temperature as the
client sent them, or none), not the probe's seed: a replay draws from the distribution the live step drew from, so
a step the rung answered live is answered alike when it was seeded, and varies across replicas as live traffic
would when it was not.
"""

from __future__ import annotations

import json
from typing import Any

from advisor.agent.chat import ChatTemplate, template_for
from advisor.agent.conversation import Conversation, conversation_messages, spoken, unlabelled
from advisor.agent.formats import format_for
from advisor.agent.turns import RECORD_CHARS, EpisodeResult, Stop, Turns, clip_text
from advisor.records import Episode, StopReason, ToolCall

NOT_RUN = "(not run: a replayed step ends at its tool call)"


async def run_replay_step(task: Any, model: Any, client: Any, limits: Any, *, sampling: dict[str, Any] | None = None,
                          request_id: str | None = None, template: ChatTemplate | None = None) -> EpisodeResult:
    """Ask `model` for the next step of `task.replay`'s conversation once, with the live request's sampling (the
    probe's `sampling` is not used: see the module docstring)."""
    conversation = Conversation.from_json(task.replay.conversation)
    fmt = format_for(model.tool_call_format)
    template = template or template_for(model)
    messages = conversation_messages(model, conversation)
    specs = list(conversation.specs)
    turns = Turns(EpisodeResult(Episode(final=None, stop_reason=StopReason.MAX_TURNS)), None, limits,
                  sampling=dict(task.replay.sampling or {}), request_id=request_id)
    try:
        turns.check_budget()
        gen, record = await turns.ask(client, model, template, messages, specs, "the replayed step")
        if not specs and gen.finish_reason != "length":
            record.action = "final"
            turns.ep.final = spoken(unlabelled(model, gen.text or ""))
            record.observation = clip_text(turns.ep.final, RECORD_CHARS)
            raise Stop(StopReason.FINAL)
        parsed = turns.parse(fmt, gen, specs, model)
        if parsed.kind == "invalid":
            record.observation = parsed.error
            raise Stop(StopReason.INVALID_OUTPUT, parsed.error)
        if parsed.kind == "final":
            turns.ep.final = spoken(unlabelled(model, parsed.final or ""))
            record.action, record.observation = "final", clip_text(turns.ep.final, RECORD_CHARS)
            raise Stop(StopReason.FINAL)
        calls = list(parsed.calls or [(parsed.name, parsed.arguments)])
        if conversation.parallel_tool_calls is False:
            calls = calls[:1]
        for name, arguments in calls:
            turns.ep.calls.append(ToolCall(name, arguments, NOT_RUN, ok=True))
        record.action, record.observation = parsed.name, NOT_RUN
        record.arguments_json = json.dumps(parsed.arguments, default=str)
        raise Stop(StopReason.STEP)
    except Stop as stop:
        return turns.finish(stop)
