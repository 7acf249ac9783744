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
import threading
from typing import Any, Literal, Union

from pydantic import ConfigDict, Field

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
