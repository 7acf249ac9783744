"""Reading a chat-completions request off the wire: the JSON body decoded (finite numbers, no lone surrogates),
the ``x-advisor-*`` headers merged into the preferences, the fields validated and checked against each other (a
400 naming the field, as OpenAI's API does), and the fields accepted but not honoured named (`ignored_fields`).
"""

from __future__ import annotations

import collections
import json
import re
from typing import Any

from pydantic import ConfigDict, ValidationError

from advisor.service.api.request import (AdvisorPrefs, ChatRequest, Message, RequestError, function_names,
                                         schema_problem)


class _HeaderPrefs(AdvisorPrefs):
    """The preferences as request headers give them, in text: parsed leniently ("0.5" is a number, "true" a
    boolean), still finite."""

    model_config = ConfigDict(strict=False)


#: header -> preference field (values parsed by pydantic)
HEADERS = {"x-advisor-class": "class", "x-advisor-rungs": "rungs", "x-advisor-self-hosted-only": "self_hosted_only",
           "x-advisor-max-latency-s": "max_latency_s", "x-advisor-target": "target",
           "x-advisor-value-usd": "value_usd", "x-advisor-max-cost-usd": "max_cost_usd",
           "x-advisor-session": "session"}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value: numbers must be finite")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")  #: ``\ud800``..``\udfff`` written in the JSON
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_body(raw: bytes) -> Any:
    """The request body as JSON (RequestError 400 otherwise): UTF-8, as RFC 8259 asks, without NaN or Infinity
    (Python's extension of JSON), and no lone UTF-16 surrogate in a string (``"\\ud800"`` decodes to a character
    no UTF-8 can carry: the prompt could not reach a rung)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not UTF-8 ({exc})", code="invalid_json") from None
    try:
        body = _DECODER.decode(text)
    except ValueError as exc:
        raise RequestError(f"the request body is not JSON ({exc})", code="invalid_json") from None
    if _SURROGATE_ESCAPE.search(raw):  # rare: look for a surrogate that was not half of a pair
        where = _lone_surrogate(body)
        if where is not None:  # (a key can hold the surrogate: the name is escaped to be printable)
            param = ".".join(map(str, where)).encode("utf-8", "backslashreplace").decode("utf-8") or None
            raise RequestError(f"invalid {param or 'body'!r}: a lone UTF-16 surrogate (\\ud800 to \\udfff) is "
                               f"not a character: escape the character whole or send it as UTF-8", param=param,
                               code="invalid_value")
    return body


def _lone_surrogate(value: Any, where: tuple = ()) -> tuple | None:
    """Where in a decoded JSON value a string (or a key) holds a lone surrogate, or None."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = where + (key,) if _SURROGATE.search(key) else _lone_surrogate(item, where + (key,))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _lone_surrogate(item, where + (i,))
            if found is not None:
                return found
    return None


def parse_request(body: Any, headers: dict[str, str]) -> ChatRequest:
    """Validate a decoded JSON body (RequestError 400 naming the field on anything unsupported)."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    from_headers: dict[str, Any] = {}
    for header, value in headers.items():  # one pass (a `header in headers` test scans Starlette's list each time)
        field = HEADERS.get(header) if header.startswith("x-advisor-") else None
        if field is not None and field not in from_headers:  # the first of repeated headers, as headers[h] gives
            value = _utf8(value)
            from_headers[field] = [v.strip() for v in value.split(",") if v.strip()] if field == "rungs" else value
    given = body.get("advisor")
    in_body = given if isinstance(given, dict) else {}
    from_headers = {f: v for f, v in from_headers.items() if f not in in_body}  # the body wins
    if from_headers and (given is None or isinstance(given, dict)):  # else validation names the body's field
        body = {**body, "advisor": {**_header_values(from_headers), **in_body}}
    try:
        req = _checked(ChatRequest.model_validate(body))
    except ValidationError as exc:
        err = max(exc.errors(), key=lambda e: len(e["loc"]))  # in a union: the branch the input went furthest in
        param = ".".join(str(p) for p in err["loc"] if not _union_branch(p))
        if err["type"] == "extra_forbidden":
            raise RequestError(f"unsupported field {param!r}: advisor does not implement it (remove it)",
                               param=param, code="unsupported_parameter") from None
        raise RequestError(f"invalid {param!r}: {err['msg']}", param=param, code="invalid_value") from None
    req.ignored = ignored_fields(req)
    return req


_READ_PARTS = ("text", "refusal")


def ignored_fields(req: ChatRequest) -> list[str]:
    """The fields of `req` advisor accepted and does not honour, as dotted paths (``[]`` for any index): fields
    it does not model (``logit_bias``, ``messages[].audio``), content parts it does not read
    (``messages[].content[].image_url``), custom tools and their calls, ``n`` above 1. Sorted, each once."""
    out = set(req.model_extra or ())
    if req.n is not None and req.n > 1:
        out.add("n")
    if req.stream_options is not None and not req.stream:
        out.add("stream_options")  # (OpenAI refuses it without stream: nothing here depends on it)
    for name, part in (("stream_options", req.stream_options), ("response_format", req.response_format)):
        if part is not None:
            out.update(f"{name}.{k}" for k in part.model_extra or ())
    for m in req.messages:
        out.update(f"messages[].{k}" for k in m.model_extra or ())
        if isinstance(m.content, list):
            for p in m.content:
                if p.type not in _READ_PARTS:
                    out.add(f"messages[].content[].{p.type}")
                out.update(f"messages[].content[].{k}" for k in p.model_extra or () if k != p.type)
        for call in m.tool_calls or ():
            if call.function is None:
                out.add("messages[].tool_calls[].custom")
    for t in req.tools or ():
        if t.function is None:
            out.add("tools[].custom")
        else:
            out.update(f"tools[].function.{k}" for k in t.function.model_extra or ())
        out.update(f"tools[].{k}" for k in t.model_extra or ())
    if isinstance(req.tool_choice, dict) and req.tool_choice.get("type") == "custom":
        out.add("tool_choice.custom")
    return sorted(out)


def _utf8(value: str) -> str:
    """A header's text as the client wrote it: ASGI servers decode header bytes as Latin-1, so a UTF-8 class name
    ("extracción") arrives as mojibake; bytes that are no UTF-8 stay as decoded."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _header_values(given: dict[str, Any]) -> dict[str, Any]:
    """Preference fields from headers (`HEADERS`' text), parsed (RequestError 400 naming the header)."""
    try:
        return _HeaderPrefs.model_validate(given).model_dump(by_alias=True, exclude_unset=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        header = next(h for h, f in HEADERS.items() if f == err["loc"][0])
        raise RequestError(f"invalid header {header!r}: {err['msg']}", param=header, code="invalid_value") from None


def _checked(req: ChatRequest) -> ChatRequest:
    """`req`, if its fields agree with each other (RequestError 400 otherwise): no stop string is empty (vLLM
    refuses one: every rung would fail the request), function tools have a definition with a JSON Schema and
    unique names, a json_schema response_format has a valid schema, and a tool_choice that names functions
    (``function``, ``allowed_tools``) names the request's own."""
    if req.stop is not None and "" in ([req.stop] if isinstance(req.stop, str) else req.stop):
        raise RequestError("a stop string must not be empty (vLLM refuses it)", param="stop", code="invalid_value")
    called: set[str] = set()  # the ids of the tool calls the conversation's assistant messages made so far
    for i, message in enumerate(req.messages):
        _check_role_fields(i, message)
        if message.role == "assistant":
            called.update(c.id for c in message.tool_calls or ())
        elif message.role == "tool" and message.tool_call_id not in called:
            raise RequestError(f"messages.{i}: a tool message must answer a tool call of an earlier assistant "
                               f"message, and no assistant message called {message.tool_call_id!r}",
                               param=f"messages.{i}.tool_call_id", code="invalid_value")
    for i, tool in enumerate(req.tools or []):
        if tool.type == "function" and tool.function is None:
            raise RequestError(f"tools.{i}: a function tool needs its 'function' (name, parameters)",
                               param=f"tools.{i}.function", code="missing_required_parameter")
    _check_response_format(req)
    names = function_names(req)
    twice = sorted(n for n, count in collections.Counter(names).items() if count > 1)  # (names.count: n² steps)
    if twice:
        raise RequestError(f"the tools name the function {', '.join(map(repr, twice))} more than once: a model's call "
                           f"could not say which it means", param="tools", code="invalid_value")
    for i, tool in enumerate(req.tools or []):
        if tool.function is None:
            continue
        problem = schema_problem(json.dumps(tool.function.parameters, sort_keys=True))
        if problem is not None:
            raise RequestError(f"invalid 'tools.{i}.function.parameters': not a JSON Schema ({problem})",
                               param=f"tools.{i}.function.parameters", code="invalid_value")
    choice = req.tool_choice
    if choice is None or choice in ("none", "auto"):
        return req
    if not names and not (isinstance(choice, dict) and choice.get("type") == "custom"):
        raise RequestError("tool_choice needs tools: the request has none", param="tool_choice",
                           code="invalid_value")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "function":
            _check_named(choice.get("function"), names, "tool_choice.function")
        elif kind == "allowed_tools":
            allowed = choice.get("allowed_tools")
            tools = allowed.get("tools") if isinstance(allowed, dict) else None
            if not isinstance(tools, list) or allowed.get("mode") not in ("auto", "required"):
                raise RequestError('tool_choice.allowed_tools needs "mode" ("auto" or "required") and "tools" (a '
                                   'list)', param="tool_choice.allowed_tools", code="invalid_value")
            for i, tool in enumerate(tools):
                if isinstance(tool, dict) and tool.get("type") == "function":
                    _check_named(tool.get("function"), names, f"tool_choice.allowed_tools.tools.{i}.function")
        elif kind != "custom":
            raise RequestError('tool_choice must be "none", "auto", "required", {"type": "function", "function": '
                               '{"name": ...}}, {"type": "allowed_tools", ...} or {"type": "custom", ...}',
                               param="tool_choice", code="invalid_value")
    return req


def _check_named(function: Any, names: list[str], param: str) -> None:
    """A ``{"name": ...}`` that names one of the request's function tools (RequestError otherwise)."""
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RequestError(f"{param} needs the function's name: {{\"name\": ...}}", param=param,
                           code="invalid_value")
    if name not in names:
        raise RequestError(f"{param} names the function {name!r}, which is not among the request's tools "
                           f"({', '.join(names)})", param=param, code="invalid_value")


def _check_response_format(req: ChatRequest) -> None:
    """A ``json_schema`` response_format carries its json_schema, whose schema (if any) is a JSON Schema."""
    fmt = req.response_format
    if fmt is None or fmt.type != "json_schema":
        return
    if fmt.json_schema is None:
        raise RequestError("response_format of type json_schema needs its 'json_schema' ({\"name\": ..., "
                           "\"schema\": {...}})", param="response_format.json_schema",
                           code="missing_required_parameter")
    if fmt.json_schema.schema_ is not None:
        problem = schema_problem(json.dumps(fmt.json_schema.schema_, sort_keys=True))
        if problem is not None:
            raise RequestError(f"invalid 'response_format.json_schema.schema': not a JSON Schema ({problem})",
                               param="response_format.json_schema.schema", code="invalid_value")


def _check_role_fields(i: int, message: Message) -> None:
    """A message's fields that belong to one role: ``tool_calls`` to the assistant's, ``tool_call_id`` to a tool
    result's, which needs it (as OpenAI's API has them)."""
    if message.tool_calls is not None and message.role != "assistant":
        raise RequestError(f"messages.{i}: only an assistant message has tool_calls, not a {message.role} message",
                           param=f"messages.{i}.tool_calls", code="invalid_value")
    if message.role == "tool" and not message.tool_call_id:
        raise RequestError(f"messages.{i}: a tool message needs the tool_call_id of the call it answers",
                           param=f"messages.{i}.tool_call_id", code="missing_required_parameter")
    if message.tool_call_id is not None and message.role != "tool":
        raise RequestError(f"messages.{i}: only a tool message has a tool_call_id, not a {message.role} message",
                           param=f"messages.{i}.tool_call_id", code="invalid_value")


def _union_branch(part: Any) -> bool:
    """Whether a part of pydantic's error location names a branch of a union (``str``, ``list[ContentPart]``)
    rather than a field or an index: it is left out of the `param` the client sees."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)
