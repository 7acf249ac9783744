"""The check of a replayed live step (a task made by ``advisor suite from-traffic``): ``same_step``.

``part: form`` (instruction following): the reply is a well-formed step: a final answer or calls of tools the
conversation offers, and a call when the conversation demanded one (``tool_choice``). ``part: content`` (task
completion): the step is equivalent to the task's reference (the reply the service delivered and accepted live):
the same tools in the same order with equivalent arguments, or for a final answer the same text (whitespace and
case aside) or, when both are JSON, equal values. Strings inside arguments and JSON compare the same way.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from advisor.checks.base import CheckContext, CheckOutcome, CheckSpec, check, values_equal


class SameStepCheck(CheckSpec):
    """A replayed step is well-formed (``form``), or equivalent to the reference step (``content``)."""

    part: Literal["form", "content"] = "content"


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _as_json(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def same_final(expected: str, actual: str) -> bool:
    """Two final answers say the same: equal JSON values when both are JSON, else equal text up to whitespace
    and case."""
    a, b = _as_json(expected), _as_json(actual)
    if a is not None and b is not None:
        return values_equal(_norm(a), _norm(b))
    return _norm(expected) == _norm(actual)


def _form(task, episode) -> CheckOutcome:
    conversation = task.replay.conversation
    offered = {s.get("name") for s in conversation.get("specs") or []}
    if episode.stop_reason not in ("final", "step"):
        return CheckOutcome.failed(f"no usable step ({episode.stop_reason}: {episode.error or 'no reply'})")
    unknown = [c.name for c in episode.calls if c.name not in offered]
    if unknown:
        return CheckOutcome.failed(f"called {', '.join(unknown)}, which the conversation does not offer")
    if conversation.get("tool_demand") and not episode.calls:
        return CheckOutcome.failed("a tool call was demanded and the reply answered instead")
    return CheckOutcome.passed("a tool call" if episode.calls else "a final answer")


def _content(task, episode) -> CheckOutcome:
    reference = task.replay.reference
    if reference is None:
        return CheckOutcome(None, "the task has no reference step")
    calls = [(str(n), a) for n, a in reference.get("calls") or []]
    if calls:
        got = [(c.name, c.arguments) for c in episode.calls]
        if [n for n, _ in got] != [n for n, _ in calls]:
            return CheckOutcome.failed(f"called {[n for n, _ in got] or 'no tool'}, the reference called "
                                       f"{[n for n, _ in calls]}")
        for (name, want), (_, have) in zip(calls, got):
            if not values_equal(_norm(want), _norm(have)):
                return CheckOutcome.failed(f"{name} with {json.dumps(have)[:200]}, the reference with "
                                           f"{json.dumps(want)[:200]}")
        return CheckOutcome.passed(f"the reference's call{'s' if len(calls) > 1 else ''}")
    if episode.final is None:
        return CheckOutcome.failed("the reference answered; this reply " + (
            f"called {episode.calls[0].name}" if episode.calls else "gave no answer"))
    if same_final(str(reference.get("final") or ""), episode.final):
        return CheckOutcome.passed("the reference's answer")
    return CheckOutcome.failed(f"answered {episode.final[:120]!r}, the reference {str(reference.get('final'))[:120]!r}")


@check("same_step", SameStepCheck)
async def same_step(spec: SameStepCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """Grade a replayed step's form or its equivalence with the reference (see the module docstring)."""
    if getattr(task, "replay", None) is None:
        return CheckOutcome(None, "same_step checks a task made from a captured live step (it has no replay)")
    return _form(task, episode) if spec.part == "form" else _content(task, episode)
