"""The chat-completions request as the service accepts it, and the user's routing preferences.

Every field of OpenAI's Chat Completions request is accepted (as the ``openai`` package's
``completion_create_params`` defines them). Honoured: model, messages, max_tokens / max_completion_tokens,
temperature, top_p, stop, seed, presence_penalty, frequency_penalty, stream, stream_options.include_usage,
tools (function tools), tool_choice in every form (``none``, ``auto``, ``required``, a named function,
``allowed_tools``), parallel_tool_calls, response_format (``text``, ``json_object``, ``json_schema``: the reply
is checked against it, `advisor.service.step_check`), and user and metadata (recorded). Any other field, known
to the API or not (logit_bias, logprobs, audio, n above 1, custom tools, image parts, ...), is accepted and
ignored, and `ChatRequest.ignored` names it (the ``x-advisor-ignored`` response header); the service config's
``api: {strict: true}`` refuses such a request with a 400 instead. A field advisor honours still gets a 400
when its value is wrong (a string temperature, a tool_choice naming no offered tool), as OpenAI's API does.
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
    #: JSON's types as they are (``true`` is no number, ``"2"`` no integer), finite numbers; a field advisor does
    #: not model is kept aside (`ignored_fields` names it); a parsed request is filled in after validation
    #: (defaults from headers), so not frozen
    model_config = ConfigDict(frozen=False, extra="allow")


class FunctionCall(_Request):
    name: str
    arguments: str = "{}"


class ToolCallIn(_Request):
    id: str
    type: Literal["function", "custom"] = "function"
    function: FunctionCall | None = None  #: a function call's; a custom tool's call is ignored
    custom: dict[str, Any] | None = None


class ContentPart(_Request):
    """One part of a message's content: text (and an assistant's refusal) is read, any other part (image,
    audio, file) is ignored."""

    type: str
    text: str | None = None
    refusal: str | None = None

    def read(self) -> str:
        """The part's text ('' for a part advisor does not read)."""
        return (self.text if self.type == "text" else self.refusal if self.type == "refusal" else None) or ""


class Message(_Request):
    """One chat message: its text is read, other parts are ignored (named in `ChatRequest.ignored`)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Union[str, list[ContentPart], None] = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None

    def text(self) -> str:
        """The content as one string."""
        if isinstance(self.content, list):
            return "".join(p.read() for p in self.content)
        return self.content or self.refusal or ""

    def function_calls(self) -> list[ToolCallIn]:
        """The message's function tool calls (custom tool calls left out)."""
        return [c for c in self.tool_calls or [] if c.function is not None]


class FunctionDef(_Request):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")  #: OpenAI's rule for function names
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class Tool(_Request):
    type: Literal["function", "custom"]
    function: FunctionDef | None = None  #: a function tool's definition; custom tools are not offered
    custom: dict[str, Any] | None = None


class StreamOptions(_Request):
    include_usage: bool = False


class JsonSchemaFormat(_Request):
    """``response_format.json_schema``: the schema a reply's content must validate against."""

    name: str = Field(default="response", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Request):
    """``response_format``: plain text, any JSON object, or JSON that validates against a schema."""

    model_config = ConfigDict(populate_by_name=True)

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


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
    parallel_tool_calls: bool | None = None  #: false: one call per reply (the first the model wrote)
    response_format: ResponseFormat | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None  #: recorded with the decision
    seed: int | None = Field(default=None, ge=-2 ** 63, le=2 ** 63 - 1)  #: a 64-bit integer, as vLLM and OpenAI take
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)  #: vLLM's SamplingParams take both as named
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    n: int | None = Field(default=None, ge=1)  #: one choice is returned: n above 1 is ignored
    advisor: AdvisorPrefs | None = None
    ignored: list[str] = Field(default_factory=list, exclude=True)  #: fields accepted and not honoured (filled in)

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


def function_names(req: ChatRequest) -> list[str]:
    """The names of the request's function tools (custom tools left out)."""
    return [t.function.name for t in req.tools or () if t.function is not None]


def forced_tool(req: ChatRequest) -> str | None:
    """The function a named tool_choice names (the model is offered only that one), else None."""
    choice = req.tool_choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return choice["function"]["name"]
    return None


def offered_names(req: ChatRequest) -> list[str]:
    """The functions the model may call: none with tool_choice ``none`` (or a custom tool named), the named one,
    those an ``allowed_tools`` choice lists, else every function tool."""
    choice = req.tool_choice
    names = function_names(req)
    if choice == "none":
        return []
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "function":
            return [choice["function"]["name"]]
        if kind == "allowed_tools":
            listed = {t["function"]["name"] for t in choice["allowed_tools"]["tools"]
                      if isinstance(t, dict) and t.get("type") == "function"}
            return [n for n in names if n in listed]
        if kind == "custom":
            return []
    return names


def call_required(req: ChatRequest) -> bool:
    """Whether tool_choice demands a call (``required``, a named function, ``allowed_tools`` in mode required)."""
    choice = req.tool_choice
    if choice == "required":
        return True
    if isinstance(choice, dict):
        return choice.get("type") == "function" or (
            choice.get("type") == "allowed_tools" and choice["allowed_tools"]["mode"] == "required")
    return False


def _union_branch(part: Any) -> bool:
    """Whether a part of pydantic's error location names a branch of a union (``str``, ``list[ContentPart]``)
    rather than a field or an index: it is left out of the `param` the client sees."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)
