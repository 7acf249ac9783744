"""The bounds a chat request meets before any expensive work: header values and stored labels, JSON nesting, tools.

Each check is cheap on an ordinary request (a count, a length) and refuses with a `RequestError` (400) that names
the setting of ``limits`` in the service config (`advisor.service.process.config.Limits`). The expensive part of a request
with tools, checking each function's ``parameters`` as a JSON Schema, runs in a thread (`parse_bounded`)
so that the event loop keeps answering while a client sends thousands of schemas. What the HTTP server itself
bounds (header bytes, 431; the time to read a request, 408) is `advisor.service.process.http_protocol`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from advisor.nesting import json_depth
from advisor.service.api.request import RequestError, schema_cached
from advisor.service.api.parse import decode_body, parse_request


def check_depth(raw: bytes, limits) -> None:
    """RequestError 400 when the body nests deeper than ``limits.max_json_depth`` (checked before parsing: Python's
    JSON decoder and jsonschema recurse, so a deep enough body would end in RecursionError)."""
    most = limits.max_json_depth
    if raw.count(b"[") + raw.count(b"{") <= most:  # the common case: too few brackets to nest that deep
        return
    depth = json_depth(raw)
    if depth > most:
        raise RequestError(f"the request body nests {depth} levels deep: the limit is limits.max_json_depth = {most}",
                           code="too_deep")


def check_header_values(headers, limits) -> None:
    """RequestError 400 when an ``x-advisor-*`` request header is longer than ``limits.max_label_chars``."""
    most = limits.max_label_chars
    for name, value in headers.items():
        if len(value) > most and name.startswith("x-advisor-"):
            raise RequestError(f"header {name!r} has {len(value)} characters: the limit is limits.max_label_chars = "
                               f"{most}", param=name, code="header_too_long")


def check_labels(req, limits) -> None:
    """RequestError 400 when a label the service stores or echoes (the task class, the session, the end user, a
    rung name) is longer than ``limits.max_label_chars``, or when the session id is not printable ASCII
    (`check_session_id`)."""
    most = limits.max_label_chars
    prefs = req.advisor
    labels = [("user", req.user)]
    if prefs is not None:
        labels += [("advisor.class", prefs.task_class), ("advisor.session", prefs.session)]
        labels += [(f"advisor.rungs.{i}", r) for i, r in enumerate(prefs.rungs or [])]
    for param, value in labels:
        if value is not None and len(value) > most:
            raise RequestError(f"{param!r} has {len(value)} characters: the limit is limits.max_label_chars = {most}",
                               param=param, code="label_too_long")
    if prefs is not None and prefs.session is not None:
        check_session_id(prefs.session)


def check_session_id(session: str) -> None:
    """RequestError 400 when a session id holds anything but printable ASCII: the id goes back to the client as it
    is, in the ``x-advisor-session`` response header (one Latin-1 line), and the client sends it back verbatim
    with the next step, so it is refused before any latch is written rather than encoded."""
    bad = next((i for i, c in enumerate(session) if not (" " <= c <= "~")), None)
    if bad is not None:
        raise RequestError(f"'advisor.session' (or header x-advisor-session) holds {session[bad]!r} at character "
                           f"{bad + 1}: a session id is printable ASCII (letters, digits, punctuation, spaces), as it "
                           "is echoed in the x-advisor-session response header", param="advisor.session",
                           code="invalid_session_id")


def check_tools(body: Any, limits) -> list[str]:
    """The tools' ``parameters`` as canonical JSON (what `schema_problem` caches by), after bounding their number
    (``limits.max_tools``) and each one's size (``limits.max_tool_schema_bytes``): RequestError 400 past either.
    Checked on the decoded body, before the request model is validated."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list):
        return []
    if len(tools) > limits.max_tools:
        raise RequestError(f"{len(tools)} tools: the limit is limits.max_tools = {limits.max_tools}", param="tools",
                           code="too_many_tools")
    schemas = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        parameters = function.get("parameters") if isinstance(function, dict) else None
        if not isinstance(parameters, dict):
            continue  # validation names what is wrong with it
        text = json.dumps(parameters, sort_keys=True)
        if len(text) > limits.max_tool_schema_bytes:
            raise RequestError(f"'tools.{i}.function.parameters' is {len(text)} bytes as JSON: the limit is "
                               f"limits.max_tool_schema_bytes = {limits.max_tool_schema_bytes}",
                               param=f"tools.{i}.function.parameters", code="tool_schema_too_large")
        schemas.append(text)
    return schemas


#: a larger body is decoded (and its depth measured) in a thread
INLINE_BYTES = 65_536
#: a request with more tools than this is validated in a thread whole (their canonical JSON costs time too)
INLINE_TOOLS = 8


async def parse_bounded(raw: bytes, headers, limits):
    """The validated request (`parse_request`) of a raw body: nesting depth bounded before the JSON is decoded,
    the tools' number and size before they are validated, and a request with new tool schemas or many tools
    validated in a thread, so that the event loop goes on serving (`/healthz` among others) meanwhile. An
    ordinary request (a few tools, seen before) stays on the loop: a thread hop would cost more than it."""
    if len(raw) > INLINE_BYTES:
        body = await asyncio.to_thread(_decode, raw, limits)
    else:
        body = _decode(raw, limits)
    tools = body.get("tools") if isinstance(body, dict) else None
    if isinstance(tools, list) and len(tools) > INLINE_TOOLS:
        req = await asyncio.to_thread(_parse_with_tools, body, headers, limits)
    elif any(not schema_cached(s) for s in check_tools(body, limits)):
        req = await asyncio.to_thread(parse_request, body, headers)
    else:
        req = parse_request(body, headers)
    check_labels(req, limits)
    return req


def _decode(raw: bytes, limits):
    check_depth(raw, limits)
    return decode_body(raw)


def _parse_with_tools(body: dict, headers, limits):
    check_tools(body, limits)
    return parse_request(body, headers)
