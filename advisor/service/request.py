"""The chat-completions request as the service accepts it, and the user's routing preferences.

Accepted OpenAI fields: model, messages, max_tokens / max_completion_tokens, temperature, top_p, stop,
stream, stream_options, tools, tool_choice, user, seed, presence_penalty, frequency_penalty, n (1 only).
Anything else is rejected with a 400 in OpenAI's error shape naming the field, never silently dropped.
advisor's own extension is the ``advisor`` object (or ``x-advisor-*`` request headers; the body wins):

    {"class": "extraction", "rungs": ["nano-30b", "super-120b"], "self_hosted_only": true,
     "max_latency_s": 2.0, "target": 0.8, "value_usd": 0.01, "max_cost_usd": 0.001, "session": "run-17"}
"""

from __future__ import annotations

import collections
import json
import re
import threading
from typing import Any, Literal, Union

from pydantic import ConfigDict, Field, ValidationError

from advisor.errors import AdvisorError
from advisor.strict import StrictModel


class RequestError(AdvisorError):
    """A request the service refuses; `status` is the HTTP status, `param` the offending field."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind


class _Request(StrictModel):
    #: JSON's types as they are (``true`` is no number, ``"2"`` no integer), no field of its own, finite numbers;
    #: a parsed request is filled in after validation (defaults from headers), so not frozen
    model_config = ConfigDict(frozen=False)


class FunctionCall(_Request):
    name: str
    arguments: str = "{}"


class ToolCallIn(_Request):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ContentPart(_Request):
    type: Literal["text"]
    text: str


class Message(_Request):
    """One chat message (text content only)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[ContentPart], None] = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The content as one string."""
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content)
        return self.content or ""


class FunctionDef(_Request):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")  #: OpenAI's rule for function names
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class Tool(_Request):
    type: Literal["function"]
    function: FunctionDef


class StreamOptions(_Request):
    include_usage: bool = False


class AdvisorPrefs(_Request):
    """advisor's per-request preferences (the ``advisor`` body object or ``x-advisor-*`` headers)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    task_class: str | None = Field(default=None, alias="class")
    rungs: list[str] | None = Field(default=None, min_length=1)
    self_hosted_only: bool = False
    max_latency_s: float | None = Field(default=None, gt=0)
    target: float | None = Field(default=None, ge=0, le=1)
    value_usd: float | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    session: str | None = Field(default=None, min_length=1, max_length=200)  #: the agent session (sessions.py)


class ChatRequest(_Request):
    """A chat-completions request body."""

    model: str
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: Union[str, list[str], None] = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Tool] | None = None
    tool_choice: Union[Literal["none", "auto", "required"], dict[str, Any], None] = None
    user: str | None = None
    seed: int | None = Field(default=None, ge=-2 ** 63, le=2 ** 63 - 1)  #: a 64-bit integer, as vLLM and OpenAI take
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)  #: vLLM's SamplingParams take both as named
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    n: Literal[1] | None = None
    advisor: AdvisorPrefs | None = None

    def sampling(self) -> dict[str, Any]:
        """vLLM sampling parameters from the OpenAI fields."""
        out: dict[str, Any] = {}
        for key in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.stop is not None:
            out["stop"] = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        return out


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
        return _checked(ChatRequest.model_validate(body))
    except ValidationError as exc:
        err = max(exc.errors(), key=lambda e: len(e["loc"]))  # in a union: the branch the input went furthest in
        param = ".".join(str(p) for p in err["loc"] if not _union_branch(p))
        if err["type"] == "extra_forbidden":
            raise RequestError(f"unsupported field {param!r}: advisor does not implement it (remove it)",
                               param=param, code="unsupported_parameter") from None
        raise RequestError(f"invalid {param!r}: {err['msg']}", param=param, code="invalid_value") from None


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
    """`req`, if its fields agree with each other (RequestError 400 otherwise): stream_options needs stream, no
    stop string is empty (vLLM refuses one: every rung would fail the request), tool names are unique, and
    tool_choice is ``none``, ``auto``, ``required`` (with tools) or ``{"type": "function", "function": {"name":
    NAME}}`` naming one of its tools."""
    if req.stream_options is not None and not req.stream:
        raise RequestError("stream_options is only allowed with stream: true", param="stream_options",
                           code="invalid_value")
    if req.stop is not None and "" in ([req.stop] if isinstance(req.stop, str) else req.stop):
        raise RequestError("a stop string must not be empty (vLLM refuses it)", param="stop", code="invalid_value")
    for i, message in enumerate(req.messages):
        _check_role_fields(i, message)
    names = [t.function.name for t in req.tools or []]
    twice = sorted(n for n, count in collections.Counter(names).items() if count > 1)  # (names.count: n² steps)
    if twice:
        raise RequestError(f"the tools name the function {', '.join(map(repr, twice))} more than once: a model's call "
                           f"could not say which it means", param="tools", code="invalid_value")
    for i, tool in enumerate(req.tools or []):
        problem = schema_problem(json.dumps(tool.function.parameters, sort_keys=True))
        if problem is not None:
            raise RequestError(f"invalid 'tools.{i}.function.parameters': not a JSON Schema ({problem})",
                               param=f"tools.{i}.function.parameters", code="invalid_value")
    choice = req.tool_choice
    if choice is None or choice in ("none", "auto"):
        return req
    if not names:
        raise RequestError("tool_choice needs tools: the request has none", param="tool_choice",
                           code="invalid_value")
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str) or set(choice) - {"type", "function"}:
            raise RequestError('tool_choice must be "none", "auto", "required" or {"type": "function", "function": '
                               '{"name": ...}}', param="tool_choice", code="invalid_value")
        if name not in names:
            raise RequestError(f"tool_choice names the function {name!r}, which is not among the request's tools "
                               f"({', '.join(names)})", param="tool_choice", code="invalid_value")
    return req


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


_SCHEMA_CACHE_SIZE = 256  #: clients send the same tools with every request; a check costs about 1 ms
_schema_problems: "collections.OrderedDict[str, str | None]" = collections.OrderedDict()
_schema_lock = threading.Lock()


def schema_cached(schema_json: str) -> bool:
    """Whether `schema_problem` knows the answer for these ``parameters`` already (then it costs nothing)."""
    return schema_json in _schema_problems


def schema_problem(schema_json: str) -> str | None:
    """What makes a function's ``parameters`` (as canonical JSON) no valid JSON Schema, or None (the last
    answers are cached; thread-safe: `advisor.service.limits` checks new schemas in a thread)."""
    with _schema_lock:
        if schema_json in _schema_problems:
            _schema_problems.move_to_end(schema_json)
            return _schema_problems[schema_json]
    problem = _check_schema(schema_json)
    with _schema_lock:
        _schema_problems[schema_json] = problem
        while len(_schema_problems) > _SCHEMA_CACHE_SIZE:
            _schema_problems.popitem(last=False)
    return problem


def _check_schema(schema_json: str) -> str | None:
    # heavy dependency, imported on use: jsonschema
    import jsonschema
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    try:
        validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"{exc.message} at {exc.json_path}"
    return None


def forced_tool(req: ChatRequest) -> str | None:
    """The function a dict tool_choice names (the model is offered only that one), else None."""
    return req.tool_choice["function"]["name"] if isinstance(req.tool_choice, dict) else None


def _union_branch(part: Any) -> bool:
    """Whether a part of pydantic's error location names a branch of a union (``str``, ``list[ContentPart]``)
    rather than a field or an index: it is left out of the `param` the client sees."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)
