"""A client's conversation as a rung sees it: one rendering for the live service and for a replayed step.

A conversation is plain data: turns of (role, text, calls), each call a (name, JSON arguments) pair, the tools
offered as specs (name, description, parameters), and the instructions that go with them (a call demanded by
``tool_choice``, a JSON reply asked by ``response_format``). `rung_messages` writes it the way one rung reads
it: every system text and the tools (described by the rung's tool-call format) in one system message, earlier
assistant calls written the way that rung writes them, tool results as ``tool`` messages. The routing service
renders each request with it (`advisor.service.api.chat.prompt_messages`), and a task made from a captured step
(`advisor.importers.traffic`) replays the very same prompt on every rung (`run_replay_step`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from advisor.agent.formats import final_text, format_for

#: a reasoning block, closed or cut off: never what a reply says to the client
THINK = re.compile(r"<think>.*?(?:</think>|$)\s*", re.S)


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: its role, its text and the tool calls it holds (name, JSON arguments)."""

    role: str
    text: str
    calls: tuple[tuple[str, str], ...] = ()


@dataclass
class Conversation:
    """A conversation up to the step a rung is asked for, as plain data (stored with a captured step)."""

    turns: list[Turn]
    specs: list[dict[str, Any]] = field(default_factory=list)  #: the tools offered: name, description, parameters
    tool_demand: str | None = None  #: the instruction that goes with the tools when a call is demanded
    format_demand: str | None = None  #: the instruction a JSON ``response_format`` adds
    parallel_tool_calls: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The conversation as JSON-able data (`from_json` reads it back)."""
        return {"turns": [{"role": t.role, "text": t.text, **({"calls": [list(c) for c in t.calls]} if t.calls
                                                              else {})} for t in self.turns],
                "specs": self.specs, "tool_demand": self.tool_demand, "format_demand": self.format_demand,
                "parallel_tool_calls": self.parallel_tool_calls}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Conversation":
        """The conversation `to_json` wrote."""
        turns = [Turn(str(t["role"]), str(t.get("text") or ""), tuple((str(n), str(a)) for n, a in t.get("calls", [])))
                 for t in data.get("turns", [])]
        return cls(turns, list(data.get("specs") or []), data.get("tool_demand"), data.get("format_demand"),
                   data.get("parallel_tool_calls"))


def rung_messages(fmt: Any, turns: Sequence[Turn], specs: Sequence[dict[str, Any]], tool_demand: str | None = None,
                  format_demand: str | None = None) -> list[dict[str, str]]:
    """The conversation as rung messages in tool-call format `fmt` (see the module docstring)."""
    system = [t.text for t in turns if t.role in ("system", "developer")]
    if specs:
        system.append(fmt.render_tools(list(specs)))
        if tool_demand:
            system.append(tool_demand)
    if format_demand:
        system.append(format_demand)
    messages: list[dict[str, str]] = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    for t in turns:
        if t.role in ("system", "developer"):
            continue
        if t.role == "assistant" and t.calls:
            written = [fmt.render_call(name, _arguments(args)) for name, args in t.calls]
            messages.append({"role": "assistant", "content": "\n".join(filter(None, [t.text, *written]))})
        else:
            messages.append({"role": "tool" if t.role == "function" else t.role, "content": t.text})
    return messages


def _arguments(text: str) -> dict[str, Any]:
    try:
        args = json.loads(text or "{}")
    except ValueError:
        return {"_raw": text}
    return args if isinstance(args, dict) else {"_": args}


def conversation_messages(model: Any, conversation: Conversation) -> list[dict[str, str]]:
    """`conversation` as `model` (a ladder rung) reads it."""
    c = conversation
    return rung_messages(format_for(model.tool_call_format), c.turns, c.specs, c.tool_demand, c.format_demand)


def unlabelled(model, text: str) -> str:
    """`text` without the stand-in's ``[SIMULATED <rung>]`` label, wherever it stands (at the start, or after the
    ``FINAL ANSWER:`` marker of an answer after tools): a simulated answer is labelled in the response's headers,
    model and system_fingerprint, and in the store, not inside what it says."""
    label = f"[SIMULATED {model.name}]"
    if label not in text:
        return text
    return re.sub(re.escape(label) + " ?", "", text)


def spoken(text: str) -> str:
    """What a reply says to the client: no ``<think>`` block, the answer after the last ``FINAL ANSWER:``
    marker, in whatever case the model wrote it (the marker is the tool prompt's convention, not the client's)."""
    if "<think>" in text:
        text = THINK.sub("", text)
    return final_text(text)
