"""OpenAI messages to a rung's prompt, and a rung's reply back to an OpenAI message.

The prompt is rendered with the code the agent loop uses: the rung's chat template
(`advisor.agent.chat.template_for`) and its tool-call format (`advisor.agent.formats.format_for`): the tools
the request offers are described in the system prompt by the format, earlier assistant tool calls are written the
way this rung writes them, and tool results are ``tool`` messages; a ``response_format`` asks for JSON (and its
schema) in the system prompt. A reply comes back as the client expects it: every call the model wrote as its own
``tool_calls`` entry (the first only with ``parallel_tool_calls: false``), and as ``content`` only what the model
said to the client: no call text, no ``FINAL ANSWER:`` marker the tool prompt asks for, no ``<think>`` block, no
stand-in label (a simulated answer is labelled in headers, ``model`` / ``system_fingerprint`` and the store).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from advisor.agent.chat import template_for
from advisor.agent.conversation import THINK as _THINK
from advisor.agent.conversation import Conversation, Turn, rung_messages, spoken, unlabelled
from advisor.agent.formats import FINAL_MARKER, FINAL_RE, Parsed, format_for
from advisor.agent.formats import final_text as _final  # the loop's FINAL ANSWER rule
from advisor.backends import backend_kind
from advisor.service.api.request import call_required, forced_tool, offered_names

_FENCE = re.compile(r"\s*```[A-Za-z]*\s*$")
_TOOLS_TAG = re.compile(r"\s*<tools>\s*$")  #: an echoed tool list's opening tag before the echo
#: where a streamed reply's shown text ends: a '<' (a tool call or ``<think>`` may start) or the marker, any case
_NOT_SHOWN = re.compile("<|" + FINAL_RE.pattern, re.I)


def tool_specs(request) -> list[dict[str, Any]]:
    """The tools the model is offered, as plain specs (name, description, parameters): the function tools
    `offered_names` leaves (none with tool_choice ``none``, the named one, an ``allowed_tools`` list)."""
    if not request.tools:
        return []
    offered = offered_names(request)
    return [{"name": t.function.name, "description": t.function.description, "parameters": t.function.parameters}
            for t in request.tools if t.function is not None and t.function.name in offered]


def tool_demand(request) -> str | None:
    """The instruction that goes with the tools when tool_choice asks for a call (``required``, a named
    function, ``allowed_tools`` in mode required), else None. Models are asked, not forced: a reply without a
    call is a broken step (`advisor.service.checks.step_check`), retried or escalated."""
    forced = forced_tool(request)
    if forced is not None:
        return f"You must call the function {forced} now."
    if call_required(request):
        return "You must call one of these functions now."
    return None


def format_demand(request) -> str | None:
    """The instruction a JSON ``response_format`` adds to the system prompt (its schema, if any), else None."""
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object" or fmt.json_schema is None or fmt.json_schema.schema_ is None:
        return "Reply with one JSON object and nothing else: no prose, no code fence."
    return ("Reply with one JSON object and nothing else (no prose, no code fence) that validates against this "
            f"JSON Schema ({fmt.json_schema.name}):\n{json.dumps(fmt.json_schema.schema_)}")


def render_prompt(model, request) -> str:
    """The text_input for `model` (a ladder rung): the chat template applied to the converted messages."""
    return template_for(model).render(prompt_messages(model, request), add_generation_prompt=True)


def chat_inputs(model, request) -> dict[str, Any]:
    """The ``messages`` and ``tools`` keywords for a backend that takes chat messages (not Triton: it takes the
    rendered prompt, and gets nothing more)."""
    if not backend_kind(model).takes_messages:
        return {}
    return {"messages": prompt_messages(model, request), "tools": tool_specs(request) or None}


def prompt_messages(model, request) -> list[dict[str, str]]:
    """The request's messages as the rung sees them: tools described in the system prompt by the rung's format,
    earlier tool calls written the way it writes them (`advisor.agent.conversation.rung_messages`)."""
    return rung_messages(format_for(model.tool_call_format), turns_of(request), tool_specs(request),
                         tool_demand(request), format_demand(request))


def turns_of(request) -> list[Turn]:
    """The request's messages as conversation turns (role, text, function calls)."""
    return [Turn(m.role, m.text(), tuple((c.function.name, c.function.arguments) for c in m.function_calls())
                 if m.role == "assistant" else ()) for m in request.messages]


def conversation_of(request) -> Conversation:
    """The request's conversation as plain data (what a captured step keeps, `advisor.service.records.capture`)."""
    return Conversation(turns_of(request), tool_specs(request), tool_demand(request), format_demand(request),
                        request.parallel_tool_calls)


def request_text(request) -> str:
    """The text the router and the class rules read: the last user message (else every message)."""
    users = [m.text() for m in request.messages if m.role == "user"]
    return users[-1] if users else "\n".join(m.text() for m in request.messages)


@dataclass
class Reply:
    """A rung's reply as OpenAI sees it, with what the verifier and the step check read."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    final: str | None = None  #: the answer the verifier's ``final`` target reads (None for a tool call)
    calls: list[tuple[str, dict]] = field(default_factory=list)  #: (name, arguments) for ``tool_call`` checks
    problem: str | None = None  #: why the reply's tool calls could not be parsed (None: they could, or none)
    opened_call: bool = False  #: the reply began a tool call (parsed or not)

    @property
    def finish_reason(self) -> str:
        """OpenAI's finish_reason for this reply (``length`` is set by the caller)."""
        return "tool_calls" if self.tool_calls else "stop"

    def message(self) -> dict[str, Any]:
        """The OpenAI assistant message."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        return out


def parse_reply(model, text: str, request) -> Reply:
    """Parse a reply with the rung's format: every call -> its own `tool_calls` entry (the first only with
    ``parallel_tool_calls: false``), the text before the first call (or the answer) -> the content."""
    text = unlabelled(model, text)
    specs = tool_specs(request)
    if not specs:
        return Reply(content=spoken(text), final=_final(text))
    parsed: Parsed = format_for(model.tool_call_format).parse(text, specs)
    if parsed.kind == "invalid" and not spoken(text):
        return Reply(content="")  # an empty reply (the step check names it)
    if parsed.kind == "invalid":
        return Reply(content=spoken(text) or None, problem=parsed.error, opened_call=bool(text.strip()))
    if parsed.kind != "call":
        return Reply(content=spoken(text), final=_final(text))
    calls = list(parsed.calls or [(parsed.name, parsed.arguments)])
    if request.parallel_tool_calls is False:
        calls = calls[:1]
    lead = text[:parsed.start] if parsed.start >= 0 else ""
    lead = _TOOLS_TAG.sub("", _FENCE.sub("", FINAL_RE.sub("", lead)))
    lead = (_THINK.sub("", lead) if "<think>" in lead else lead).strip() or None
    entries = [{"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]
    return Reply(content=lead, tool_calls=entries, final=None, calls=calls, problem=parsed.later_error,
                 opened_call=True)


def stream_shown(model, text: str) -> str:
    """The part of a streamed reply's text so far that may be sent as content: without the stand-in's label
    (nothing while the text could still be the label's start), up to the first '<' (a tool call or a
    ``<think>`` block may start) and the first ``FINAL ANSWER:`` marker's start (in any case)."""
    label = f"[SIMULATED {model.name}]"
    if len(text) <= len(label) and label.startswith(text):
        return ""
    text = unlabelled(model, text)
    stop = _NOT_SHOWN.search(text)
    tail = text if stop is None else text[:stop.start()]
    for n in range(min(len(FINAL_MARKER) - 1, len(tail)), 0, -1):  # a marker may be arriving
        if FINAL_MARKER.startswith(tail[-n:].upper()):
            return tail[:-n]
    return tail
