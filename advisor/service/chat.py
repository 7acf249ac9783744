"""OpenAI messages to a rung's prompt, and a rung's reply back to an OpenAI message.

The prompt is rendered with the code the agent loop uses: the rung's chat template
(`advisor.agent.chat.template_for`) and its tool-call format (`advisor.agent.formats.format_for`): the tools
of the request are described in the system prompt by the format, earlier assistant tool calls are written the
way this rung writes them, and tool results are ``tool`` messages. A reply holding a tool call comes back as
OpenAI ``tool_calls`` (the text before the call is the content); any other reply is the content as written.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from advisor.agent.chat import template_for
from advisor.agent.formats import Parsed, format_for
from advisor.agent.formats import final_text as _final  # the loop's FINAL ANSWER rule
from advisor.service.request import forced_tool

_MARKERS = ("<tool_call>", "<TOOLCALL>", "<function=")


def tool_specs(request) -> list[dict[str, Any]]:
    """The tools the model is offered, as plain specs (name, description, parameters): the request's, none with
    tool_choice ``none``, only the named one with a function tool_choice."""
    if not request.tools or request.tool_choice == "none":
        return []
    forced = forced_tool(request)
    return [{"name": t.function.name, "description": t.function.description, "parameters": t.function.parameters}
            for t in request.tools if forced is None or t.function.name == forced]


def tool_demand(request) -> str | None:
    """The instruction that goes with the tools when tool_choice asks for a call (``required`` or a named
    function), else None. Models are asked, not forced: a reply without a call comes back as content."""
    forced = forced_tool(request)
    if forced is not None:
        return f"You must call the function {forced} now."
    if request.tool_choice == "required":
        return "You must call one of these functions now."
    return None


def render_prompt(model, request) -> str:
    """The text_input for `model` (a ladder rung): the chat template applied to the converted messages."""
    return template_for(model).render(prompt_messages(model, request), add_generation_prompt=True)


def chat_inputs(model, request) -> dict[str, Any]:
    """The ``messages`` and ``tools`` keywords for a backend that takes chat messages (not Triton: it takes the
    rendered prompt, and gets nothing more)."""
    if getattr(model, "backend", "triton") == "triton":
        return {}
    return {"messages": prompt_messages(model, request), "tools": tool_specs(request) or None}


def prompt_messages(model, request) -> list[dict[str, str]]:
    """The request's messages as the rung sees them: tools described in the system prompt by the rung's format,
    earlier tool calls written the way it writes them."""
    fmt = format_for(model.tool_call_format)
    specs = tool_specs(request)
    messages: list[dict[str, str]] = []
    system = [m.text() for m in request.messages if m.role in ("system", "developer")]
    if specs:
        system.append(fmt.render_tools(specs))
        demand = tool_demand(request)
        if demand:
            system.append(demand)
    if system:
        messages.append({"role": "system", "content": "\n\n".join(system)})
    for m in request.messages:
        if m.role in ("system", "developer"):
            continue
        if m.role == "assistant" and m.tool_calls:
            calls = []
            for call in m.tool_calls:
                try:
                    args = json.loads(call.function.arguments or "{}")
                except ValueError:
                    args = {"_raw": call.function.arguments}
                calls.append(fmt.render_call(call.function.name, args if isinstance(args, dict) else {"_": args}))
            messages.append({"role": "assistant", "content": "\n".join(filter(None, [m.text(), *calls]))})
        else:
            messages.append({"role": m.role, "content": m.text()})
    return messages


def request_text(request) -> str:
    """The text the router and the class rules read: the last user message (else every message)."""
    users = [m.text() for m in request.messages if m.role == "user"]
    return users[-1] if users else "\n".join(m.text() for m in request.messages)


@dataclass
class Reply:
    """A rung's reply as OpenAI sees it, with what the verifier reads."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    final: str | None = None  #: the answer the verifier's ``final`` target reads (None for a tool call)
    calls: list[tuple[str, dict]] = field(default_factory=list)  #: (name, arguments) for ``tool_call`` checks

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
    """Parse a reply with the rung's format: tool call -> `tool_calls`, else the text as the content."""
    specs = tool_specs(request)
    if not specs:
        return Reply(content=text, final=_final(text))
    parsed: Parsed = format_for(model.tool_call_format).parse(text, specs)
    if parsed.kind != "call":
        return Reply(content=text, final=_final(text) if parsed.kind == "final" else None)
    cut = min((i for i in (text.find(m) for m in _MARKERS) if i >= 0), default=len(text))
    lead = text[:cut].strip() or None
    call = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": parsed.name, "arguments": json.dumps(parsed.arguments)}}
    return Reply(content=lead, tool_calls=[call], final=None, calls=[(parsed.name, parsed.arguments)])


def safe_prefix(text: str) -> int:
    """How much of streamed `text` can be sent as content now: up to the first '<' (a tool call may start)."""
    i = text.find("<")
    return len(text) if i < 0 else i
