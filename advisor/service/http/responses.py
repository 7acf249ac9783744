"""``POST /v1/responses``: the subset of OpenAI's Responses API that agent SDKs use, routed like chat completions.

A Responses request is translated into a chat-completions request (`chat_body`) and then decided, run, checked
and recorded exactly as ``/v1/chat/completions`` is (`advisor.service.http.app`): the same routing decision, session,
latch, step check and records. Translated:

- ``instructions`` -> a system message; ``input`` (a string, or items: messages with ``input_text`` /
  ``output_text`` parts, ``function_call``, ``function_call_output``) -> the conversation;
- function ``tools`` and ``tool_choice`` (``none``, ``auto``, ``required``, ``{"type": "function", "name"}``,
  ``allowed_tools``), ``parallel_tool_calls``, ``text.format`` (-> response_format), ``max_output_tokens``,
  ``temperature``, ``top_p``, ``metadata``, ``user``, ``stream``, advisor's own ``advisor`` object.

**Stored responses**: a response the request lets be stored (``store`` is true unless the request says false, as
in the API) is kept for its tenant (the API key's name) with the conversation it ends (`advisor.store.responses`,
bounded by the service config's ``responses``): ``previous_response_id`` continues it (its messages come before
the new input; ``instructions`` are the new request's own, as in the API), and so does its session;
``GET /v1/responses/{id}`` returns it and ``DELETE`` forgets it; another tenant's id, or one forgotten, is a 404.
With ``responses: {store: false}`` in the service config nothing is kept and ``previous_response_id`` is a 400.
``conversation`` is refused with a 400 that says to send the conversation; every other field (``reasoning``,
``include``, non-function tools, image parts, ...) is accepted, ignored and named in ``x-advisor-ignored``. The answer is a ``response`` object whose ``output`` holds a message item (the content)
and one ``function_call`` item per call; streamed, the events the API defines are sent in order
(``response.created``, ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` / ``.done``, ``response.content_part.done``,
``response.function_call_arguments.delta`` / ``.done``, ``response.output_item.done``, ``response.completed``).
A streamed response is sent once the step has been checked (a broken step must not reach the client).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from starlette.responses import StreamingResponse

from advisor.errors import StoreError
from advisor.redaction import without_urls
from advisor.service.api.limits import check_depth, check_labels, check_tools
from advisor.service.api.request import RequestError, schema_cached
from advisor.service.api.parse import decode_body, parse_request
from advisor.service.http.response import answering, json_response

#: Responses fields translated into the chat request (or echoed back); every other field is ignored and named
_TRANSLATED = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
               "max_output_tokens", "temperature", "top_p", "metadata", "user", "stream", "advisor", "store",
               "previous_response_id"}
_COPIED = ("model", "parallel_tool_calls", "temperature", "top_p", "metadata", "user", "stream", "advisor")
_TEXT_PARTS = ("input_text", "output_text", "text")


class Translation:
    """A Responses body as a chat-completions body, with what was ignored and what the answer echoes back."""

    def __init__(self, body: dict[str, Any], history: list[dict[str, Any]] | None = None):
        self.body = body
        self.history = list(history or [])  #: the messages of the response it continues (previous_response_id)
        self.ignored: set[str] = {k for k in body if k not in _TRANSLATED}
        self.stored = False  #: whether the answer was kept (`keep`)
        self.chat: dict[str, Any] = {k: body[k] for k in _COPIED if k in body}
        if body.get("max_output_tokens") is not None:
            self.chat["max_completion_tokens"] = body["max_output_tokens"]
        self.chat["messages"] = self._messages()
        tools = self._tools()
        if tools is not None:
            self.chat["tools"] = tools
        if "tool_choice" in body:
            self.chat["tool_choice"] = self._tool_choice(body["tool_choice"])
        fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
        if isinstance(fmt, dict):
            self.chat["response_format"] = _response_format(fmt)
        if isinstance(body.get("text"), dict):
            self.ignored.update(f"text.{k}" for k in body["text"] if k != "format")

    def _messages(self) -> list[dict[str, Any]]:
        body = self.body
        out: list[dict[str, Any]] = []
        if body.get("instructions"):
            out.append({"role": "system", "content": body["instructions"]})
        out += self.history
        given = body.get("input")
        if isinstance(given, str):
            return out + [{"role": "user", "content": given}]
        if not isinstance(given, list):
            raise RequestError("input must be a string or a list of input items", param="input",
                               code="invalid_value")
        for i, item in enumerate(given):
            if not isinstance(item, dict):
                raise RequestError(f"input.{i} must be an object (an input item)", param=f"input.{i}",
                                   code="invalid_value")
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message":
                out.append({"role": item.get("role"), "content": self._text(item.get("content"), i)})
            elif kind == "function_call":
                call = {"id": item.get("call_id") or item.get("id"), "type": "function",
                        "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
                last = out[-1] if out else None
                if last is not None and last["role"] == "assistant":
                    last.setdefault("tool_calls", []).append(call)  # one assistant turn: its text and calls
                else:
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                output = item.get("output")
                out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                            "content": output if isinstance(output, str) else self._text(output, i)})
            else:
                self.ignored.add(f"input[].{kind}")
        return out

    def _text(self, content: Any, i: int) -> Any:
        """A message's content: a string as it is, the text of its text parts (other parts ignored)."""
        if content is None or isinstance(content, str):
            return content
        if not isinstance(content, list):
            raise RequestError(f"input.{i}.content must be a string or a list of content parts",
                               param=f"input.{i}.content", code="invalid_value")
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                self.ignored.add(f"input[].content[].{kind}")
        return "".join(texts)

    def _tools(self) -> list[dict[str, Any]] | None:
        tools = self.body.get("tools")
        if tools is None:
            return None
        if not isinstance(tools, list):
            raise RequestError("tools must be a list", param="tools", code="invalid_value")
        out = []
        for tool in tools:
            if isinstance(tool, dict) and tool.get("type") == "function":
                function = {k: tool[k] for k in ("name", "description", "parameters", "strict")
                            if tool.get(k) is not None}
                out.append({"type": "function", "function": function})
            else:
                self.ignored.add(f"tools[].{tool.get('type') if isinstance(tool, dict) else 'invalid'}")
        return out

    def _tool_choice(self, choice: Any) -> Any:
        if not isinstance(choice, dict):
            return choice
        kind = choice.get("type")
        if kind == "function":
            return {"type": "function", "function": {"name": choice.get("name")}}
        if kind == "allowed_tools":
            tools = [{"type": "function", "function": {"name": t.get("name")}} for t in choice.get("tools") or []
                     if isinstance(t, dict) and t.get("type") == "function"]
            return {"type": "allowed_tools", "allowed_tools": {"mode": choice.get("mode"), "tools": tools}}
        self.ignored.add(f"tool_choice.{kind}")
        return "auto"


def _response_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """``text.format`` as chat's ``response_format``."""
    if fmt.get("type") != "json_schema":
        return {"type": fmt.get("type")}
    inner = {k: fmt[k] for k in ("name", "schema", "strict", "description") if fmt.get(k) is not None}
    return {"type": "json_schema", "json_schema": inner}


async def parse_responses(raw: bytes, headers, limits, stored=None, tenant: str = ""):
    """(the chat request, the translation) of a raw ``/v1/responses`` body (RequestError 4xx as for chat);
    `stored`: the service's stored responses (None: it keeps none), read for ``previous_response_id``."""
    check_depth(raw, limits)
    body = decode_body(raw)
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if body.get("conversation") is not None:
        raise RequestError("conversation: advisor keeps no conversation objects; send the conversation as input, or "
                           "continue a stored response with previous_response_id", param="conversation",
                           code="unsupported_parameter")
    if "input" not in body:
        raise RequestError("input is required", param="input", code="missing_required_parameter")
    tr = Translation(body, previous_messages(body.get("previous_response_id"), stored, tenant))
    schemas = check_tools(tr.chat, limits)
    if any(not schema_cached(s) for s in schemas):
        req = await asyncio.to_thread(parse_request, tr.chat, headers)
    else:
        req = parse_request(tr.chat, headers)
    check_labels(req, limits)
    req.ignored = sorted(set(req.ignored) | tr.ignored)
    return req, tr


def previous_messages(rid: Any, stored, tenant: str) -> list[dict[str, Any]]:
    """The conversation of the stored response `rid` (RequestError: 400 when nothing is kept or `rid` is no
    string, 404 when this tenant has no such response, 503 when they cannot be read now)."""
    if rid is None:
        return []
    if not isinstance(rid, str):
        raise RequestError("previous_response_id must be a string", param="previous_response_id",
                           code="invalid_value")
    if stored is None:
        raise RequestError("previous_response_id: this service keeps no responses (responses: {store: false} in its "
                           "config); send the whole conversation as input", param="previous_response_id",
                           code="unsupported_parameter")
    try:
        record = stored.get(tenant, rid)
    except StoreError as exc:  # the database that keeps them is away: the client may retry
        raise RequestError(f"stored responses cannot be read now: {without_urls(str(exc))}", status=503,
                           param="previous_response_id", code="store_unavailable", kind="service_unavailable") from None
    if record is None:
        raise RequestError(f"Previous response with id {rid!r} not found.", status=404,
                           param="previous_response_id", code="previous_response_not_found")
    return record["messages"]


def keep(rt, tr: Translation, out, key, response: dict[str, Any]) -> bool:
    """Store a delivered response (unless the request or the config says not to); True when it was kept. Its
    conversation leaves out the request's own ``instructions`` (the first message): a continuation gives its own."""
    if rt.responses is None or tr.body.get("store") is False or out.reply is None:
        return False
    messages = tr.chat["messages"][1:] if tr.body.get("instructions") else tr.chat["messages"]
    reply = out.reply.message()
    try:
        return rt.responses.put(key.name if key is not None else "", response["id"],
                                {"response": {**response, "store": True}, "messages": [*messages, reply]})
    except StoreError:  # a stored response is a convenience: the answer stands without it
        return False


def output_items(out) -> list[dict[str, Any]]:
    """The ``output`` of a delivered reply: a message item with its text (if any), one function_call per call."""
    reply = out.reply
    items: list[dict[str, Any]] = []
    if reply.content:
        items.append({"type": "message", "id": "msg_" + uuid.uuid4().hex, "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.content, "annotations": [], "logprobs": []}]})
    for call in reply.tool_calls:
        items.append({"type": "function_call", "id": "fc_" + uuid.uuid4().hex, "call_id": call["id"],
                      "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                      "status": "completed"})
    return items


def response_object(rt, tr: Translation, out, created: float, status: str, output: list) -> dict[str, Any]:
    """The ``response`` object (the request's settings echoed back, as the API does)."""
    body = tr.body
    n_in = sum(a.input_tokens for a in out.attempts)
    n_out = sum(a.output_tokens for a in out.attempts)
    last = out.attempts[-1] if out.attempts else None
    cut = status == "completed" and last is not None and last.finish_reason == "length"
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    return {"id": "resp_" + out.plan.decision_id[4:], "object": "response", "created_at": int(created),
            "status": "incomplete" if cut else status, "model": out.rung or body.get("model"), "output": output,
            "error": None, "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "temperature": body.get("temperature"),
            "top_p": body.get("top_p"), "tool_choice": body.get("tool_choice", "auto"),
            "tools": [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"],
            "max_output_tokens": body.get("max_output_tokens"),
            "previous_response_id": body.get("previous_response_id"), "store": tr.stored,
            "text": {"format": fmt or {"type": "text"}}, "truncation": "disabled", "user": body.get("user"),
            "usage": {"input_tokens": n_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n_out,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n_in + n_out}
            if status == "completed" else None}


def finish_responses(rt, req, tr: Translation, out, key, started: float, started_at):
    """Record the outcome and answer: the ``response`` object, or its events as server-sent events."""
    later, headers, failed = answering(rt, req, out, key, started, started_at)
    if failed is not None:
        return failed
    created = time.time()
    items = output_items(out)
    done = response_object(rt, tr, out, created, "completed", items)
    tr.stored = done["store"] = keep(rt, tr, out, key, done)
    if not req.stream:
        return json_response(done, headers=headers, background=later)
    events = stream_events(response_object(rt, tr, out, created, "in_progress", []), done)

    async def body():
        for event in events:
            yield event

    return StreamingResponse(body(), media_type="text/event-stream", headers=headers, background=later)


def stream_events(started: dict[str, Any], done: dict[str, Any]) -> list[bytes]:
    """The server-sent events of a finished response, in the order the API defines."""
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(out), **fields}
        out.append(f"event: {kind}\ndata: ".encode() + json.dumps(data, separators=(",", ":")).encode() + b"\n\n")

    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(done["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                         "content": []})
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            emit("response.content_part.added", **ids, part=empty)
            emit("response.output_text.delta", **ids, delta=text, logprobs=[])
            emit("response.output_text.done", **ids, text=text, logprobs=[])
            emit("response.content_part.done", **ids, part=item["content"][0])
        else:
            emit("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                         "arguments": ""})
            ids = {"item_id": item["id"], "output_index": index}
            emit("response.function_call_arguments.delta", **ids, delta=item["arguments"])
            emit("response.function_call_arguments.done", **ids, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=done)
    return out
