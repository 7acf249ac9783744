"""Tool-call formats: how a rung is told about its tools and how its replies are parsed.

Each rung declares the `tool_call_format` its vLLM tool-call parser understands (``ladder-facts.md``); the
names are those registered in `FORMATS` (``register_format``; see docs/extending.md):

- ``hermes``: ``<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>``
- ``hermes_json``: hermes, and also a bare JSON call naming an offered tool (what small models emit)
- ``qwen3_coder`` / ``qwen3_xml``:
  ``<tool_call><function=read_file><parameter=path>a.py</parameter></function></tool_call>``
- ``nemotron_json``: ``<TOOLCALL>[{"name": "read_file", "arguments": {"path": "a.py"}}]</TOOLCALL>``

The reply convention the loop applies to every format:

- a reply holding a tool call is an **action**; one call per turn: when a reply holds several, the first is
  run and the observation says the rest were ignored (`Parsed.calls` holds them all, for the service, which
  returns each as its own ``tool_calls`` entry);
- a tool *definition* the model echoed back (``{"name": ..., "description": ..., "parameters": {JSON
  Schema}}``, as in the prompt's tool list) is never a call;
- a reply with no tool-call marker at all is the **final answer**: the text after the last ``FINAL ANSWER:``
  marker (in any case: ``Final Answer:`` too) when there is one, else the whole reply (stripped);
- a reply that opens a tool call but cannot be parsed (bad JSON, unclosed tag, no name) or is empty is
  **invalid**; the loop shows the model the parse error as an observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from advisor.toolcalls import FORMATS, ToolFormat, format_for, register_format
from advisor.toolcalls import spec_dict as _spec_dict

FINAL_MARKER = "FINAL ANSWER:"
#: The marker as models write it: in any case (Qwen2.5-Coder writes ``Final ANSWER:``, others ``Final answer:``).
FINAL_RE = re.compile(re.escape(FINAL_MARKER), re.I)


@dataclass(frozen=True)
class Parsed:
    """One reply, parsed: an action (`name`, `arguments`), a final answer, or invalid (`error`)."""

    kind: str  #: call | final | invalid
    name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    final: str | None = None
    error: str | None = None
    extra_calls: int = 0  #: further calls in the same reply that were ignored
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()  #: every well-formed call of the reply, in order
    start: int = -1  #: where the first call's text begins in the reply (-1: no call)
    later_error: str | None = None  #: why a call after the first could not be parsed (None: all parsed)


def _call(calls: list[tuple[str, dict[str, Any]]], blocks: int, start: int, later_error: str | None = None,
          ) -> Parsed:
    """The `Parsed` action of a reply's calls (the first is the action)."""
    return Parsed("call", name=calls[0][0], arguments=calls[0][1], extra_calls=max(blocks, len(calls)) - 1,
                  calls=tuple(calls), start=start, later_error=later_error)


def final_text(text: str) -> str:
    """The answer in a reply: the text after the last ``FINAL ANSWER:`` marker (in any case), else all of it."""
    return FINAL_RE.split(text)[-1].strip()


def _final_or_empty(text: str) -> Parsed:
    final = final_text(text)
    if not final:
        return Parsed("invalid", error="empty reply: write a tool call, or your answer after 'FINAL ANSWER:'")
    return Parsed("final", final=final)


_FINAL_HELP = (f"When you are done, reply with no tool call: write '{FINAL_MARKER}' followed by your answer. "
               "Make exactly one tool call per reply and wait for its result.")


def _calls_of(text: str, blocks: list[str], one, unclosed: str) -> Parsed:
    """The action of a reply's ``<tool_call>`` blocks (`one` parses a block: (name, arguments) or an error): invalid
    when the first cannot be parsed, else every call that can, with why a later one (or an unclosed last tag)
    cannot."""
    calls, later = [], None
    for i, block in enumerate(blocks):
        got = one(block)
        if isinstance(got, str):
            if i == 0:
                return Parsed("invalid", error=got)
            later = later or got
            continue
        calls.append(got)
    if later is None and text.count("<tool_call>") > len(blocks):
        later = unclosed
    return _call(calls, len(blocks), text.find("<tool_call>"), later)


# ----------------------------------------------------------------------------- JSON formats
def _json_call(obj: Any, where: str) -> tuple[str, dict[str, Any]] | str:
    """(name, arguments) from a decoded call object, or an error string."""
    if not isinstance(obj, dict):
        return f"{where}: expected an object with 'name' and 'arguments'"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return f"{where}: the call has no 'name'"
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models double-encode the arguments
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return f"{where}: 'arguments' of {name!r} is not valid JSON ({exc.msg})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return f"{where}: 'arguments' of {name!r} must be an object"
    return name, args


class HermesFormat:
    """``<tool_call>{json}</tool_call>`` (Qwen3, Nemotron-Orchestrator-8B; vLLM parser ``hermes``)."""

    name = "hermes"
    _BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)

    def render_tools(self, specs: Sequence[Any]) -> str:
        """Tool signatures as JSON lines inside <tools></tools>, then how to call them."""
        lines = "\n".join(json.dumps({"type": "function", "function": _spec_dict(s)}) for s in specs)
        return ("# Tools\n\nYou may call one of these functions. Their signatures are inside <tools></tools>:\n"
                f"<tools>\n{lines}\n</tools>\n\nTo call a function, reply with a JSON object holding its name "
                "and arguments inside <tool_call></tool_call> tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n' + _FINAL_HELP)

    def render_call(self, name: str, arguments: dict[str, Any]) -> str:
        """A hermes call block."""
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"

    def parse(self, text: str, specs: Sequence[Any] = ()) -> Parsed:
        """First <tool_call> block, else final answer; an unclosed or undecodable block is invalid."""
        blocks = self._BLOCK.findall(text)
        if not blocks:
            if "<tool_call>" in text:
                return Parsed("invalid", error="a <tool_call> tag is not closed with </tool_call>")
            return _final_or_empty(text)
        return _calls_of(text, blocks, self._one, "a <tool_call> tag is not closed with </tool_call>")

    @staticmethod
    def _one(block: str, specs: Sequence[Any] = ()) -> tuple[str, dict[str, Any]] | str:
        """(name, arguments) of one <tool_call> block, or why it cannot be parsed."""
        try:
            return _json_call(json.loads(block.strip()), "<tool_call>")
        except json.JSONDecodeError as exc:
            return f"<tool_call> content is not valid JSON ({exc.msg} at char {exc.pos})"


class NemotronJsonFormat:
    """``<TOOLCALL>[{json}, ...]</TOOLCALL>`` (Nemotron Nano v2; vLLM parser plugin ``nemotron_json``)."""

    name = "nemotron_json"
    _BLOCK = re.compile(r"<TOOLCALL>(.*?)</TOOLCALL>", re.S)

    def render_tools(self, specs: Sequence[Any]) -> str:
        """The tool list inside <AVAILABLE_TOOLS></AVAILABLE_TOOLS>, then how to call one."""
        tools = json.dumps([_spec_dict(s) for s in specs])
        return (f"<AVAILABLE_TOOLS>{tools}</AVAILABLE_TOOLS>\n\nTo call a tool, reply with a JSON list holding "
                'one call inside <TOOLCALL></TOOLCALL>: <TOOLCALL>[{"name": "<tool>", "arguments": {...}}]'
                "</TOOLCALL>\n" + _FINAL_HELP)

    def render_call(self, name: str, arguments: dict[str, Any]) -> str:
        """A TOOLCALL block with one call."""
        return f"<TOOLCALL>{json.dumps([{'name': name, 'arguments': arguments}])}</TOOLCALL>"

    def parse(self, text: str, specs: Sequence[Any] = ()) -> Parsed:
        """First call of the first <TOOLCALL> list, else final answer."""
        blocks = self._BLOCK.findall(text)
        if not blocks:
            if "<TOOLCALL>" in text:
                return Parsed("invalid", error="a <TOOLCALL> tag is not closed with </TOOLCALL>")
            return _final_or_empty(text)
        calls, later, written = [], None, 0
        for block in blocks:
            try:
                obj = json.loads(block.strip())
            except json.JSONDecodeError as exc:
                obj, error = None, f"<TOOLCALL> content is not valid JSON ({exc.msg} at char {exc.pos})"
            else:
                error = None if obj != [] else "<TOOLCALL> holds an empty list"
            for item in (obj if isinstance(obj, list) else [obj]) if error is None else []:
                written += 1
                got = _json_call(item, "<TOOLCALL>")
                if isinstance(got, str):
                    error = error or got
                else:
                    calls.append(got)
            if error is not None and not calls:
                return Parsed("invalid", error=error)
            later = later or error
        if later is None and text.count("<TOOLCALL>") > len(blocks):
            later = "a <TOOLCALL> tag is not closed with </TOOLCALL>"
        return _call(calls, written, text.find("<TOOLCALL>"), later)


# ----------------------------------------------------------------------------- XML formats
def _param_types(specs: Sequence[Any], tool: str) -> dict[str, str]:
    for s in specs:
        d = _spec_dict(s)
        if d["name"] == tool:
            props = (d["parameters"] or {}).get("properties", {}) or {}
            return {k: (v or {}).get("type", "") if isinstance(v, dict) else "" for k, v in props.items()}
    return {}


def _convert(value: str, declared: str) -> Any:
    """A parameter's text as the type its schema declares (untyped: JSON when it decodes, else text)."""
    if declared == "string":
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


class QwenXmlFormat:
    """``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``.

    Used by the vLLM parsers ``qwen3_coder`` (Nemotron 3 Nano 30B) and ``qwen3_xml`` (Nemotron 3 Super 120B).
    Parameter values are text; non-string values are written as JSON and converted back using the tool's
    parameter schema.
    """

    _CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
    _FUNC = re.compile(r"<function=([^>\s]+)\s*>(.*?)</function>", re.S)
    _PARAM = re.compile(r"<parameter=([^>\s]+)\s*>(.*?)</parameter>", re.S)

    def __init__(self, name: str):
        self.name = name

    def render_tools(self, specs: Sequence[Any]) -> str:
        """Tools as <function> entries inside <tools></tools>, then the calling syntax."""
        parts = []
        for s in specs:
            d = _spec_dict(s)
            params = []
            props = d["parameters"].get("properties", {}) or {}
            required = set(d["parameters"].get("required", []) or [])
            for k, v in props.items():
                v = v if isinstance(v, dict) else {}
                req = " (required)" if k in required else ""
                params.append(f"<parameter><name>{k}</name><type>{v.get('type', 'string')}</type>"
                              f"<description>{v.get('description', '')}{req}</description></parameter>")
            parts.append(f"<function>\n<name>{d['name']}</name>\n<description>{d['description']}</description>\n"
                         f"<parameters>\n{chr(10).join(params)}\n</parameters>\n</function>")
        return ("# Tools\n\nYou have access to these functions:\n\n<tools>\n" + "\n".join(parts) + "\n</tools>\n\n"
                "To call a function, reply with:\n<tool_call>\n<function=example_function_name>\n"
                "<parameter=example_parameter>\nvalue\n</parameter>\n</function>\n</tool_call>\n" + _FINAL_HELP)

    def render_call(self, name: str, arguments: dict[str, Any]) -> str:
        """One XML call; strings raw, other values as JSON."""
        params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                         for k, v in arguments.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"

    def parse(self, text: str, specs: Sequence[Any] = ()) -> Parsed:
        """First <function=...> inside <tool_call>, else final answer."""
        blocks = self._CALL.findall(text)
        if not blocks:
            if "<tool_call>" in text or "<function=" in text:
                return Parsed("invalid", error="a tool call is not closed: write <tool_call><function=NAME>"
                                               "<parameter=K>V</parameter></function></tool_call>")
            return _final_or_empty(text)
        return _calls_of(text, blocks, lambda block: self._one(block, specs),
                         "a tool call is not closed with </tool_call>")

    def _one(self, block: str, specs: Sequence[Any]) -> tuple[str, dict[str, Any]] | str:
        """(name, arguments) of one <tool_call> block, or why it cannot be parsed."""
        func = self._FUNC.search(block)
        if func is None:
            return "<tool_call> holds no complete <function=NAME>...</function>"
        name, body = func.group(1), func.group(2)
        types = _param_types(specs, name)
        args: dict[str, Any] = {}
        for key, raw in self._PARAM.findall(body):
            value = raw[1:] if raw.startswith("\n") else raw
            value = value[:-1] if value.endswith("\n") else value
            args[key] = _convert(value, types.get(key, ""))
        if "<parameter=" in self._PARAM.sub("", body):
            return f"a <parameter=...> of {name!r} is not closed with </parameter>"
        return name, args


class HermesJsonFormat(HermesFormat):
    """hermes, plus what small models really emit: a bare JSON call ``{"name": ..., "arguments": {...}}`` (also
    in a code fence or after ``FINAL ANSWER:``) is a call when it names one of the offered tools. A JSON answer
    that is not such a call stays the final answer. After each tool result the loop reminds the model how to
    finish (`observation_hint`)."""

    name = "hermes_json"
    observation_hint = (f"(If this result answers the task, reply now with '{FINAL_MARKER}' followed by the answer "
                        "and no tool call. Call a tool again only if you still need something else.)")

    def render_tools(self, specs: Sequence[Any]) -> str:
        """The hermes tool list and instructions, plus how to end after a result."""
        return (super().render_tools(specs) + " After a tool result that gives you what you need, do not call "
                f"the tool again: reply with '{FINAL_MARKER}' and the answer.")

    def parse(self, text: str, specs: Sequence[Any] = ()) -> Parsed:
        """A <tool_call> block as hermes; else the first bare JSON object naming an offered tool; else final."""
        if "<tool_call>" in text:
            return super().parse(text, specs)
        schemas = {d["name"]: d["parameters"] for d in map(_spec_dict, specs)}
        decoder = json.JSONDecoder()
        calls, start, end = [], -1, 0
        for match in re.finditer(r"\{", text):
            if match.start() < end:
                continue  # inside an object already read (a call's arguments, an echoed tool list)
            try:
                obj, end = decoder.raw_decode(text, match.start())
            except json.JSONDecodeError:
                continue
            named = _named_tool(obj, schemas)
            if named is not None and start < 0:
                start = match.start()  # a call, or an echoed definition: neither is said to the client
            if named is not None and ("arguments" in obj or "parameters" in obj) and \
                    not is_definition(named, schemas[named["name"]]):
                got = _json_call(named, "JSON call")
                if isinstance(got, str):
                    return Parsed("invalid", error=got)
                calls.append(got)
        if calls:
            return _call(calls, len(calls), start)
        return _final_or_empty(text)


def _named_tool(obj: Any, schemas: dict[str, Any]) -> dict[str, Any] | None:
    """The object naming an offered tool: `obj`, or the ``function`` inside an echoed ``{"type": "function",
    "function": {...}}`` definition; else None."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict) and obj.get("type") == "function":
        obj = obj["function"]
    return obj if isinstance(obj, dict) and obj.get("name") in schemas else None


def is_definition(obj: dict[str, Any], schema: Any) -> bool:
    """Whether a ``{"name": ..., "parameters": ...}`` object is the tool's definition echoed back (its
    ``parameters`` are the offered JSON Schema, or a schema of an object, or it carries the tool's
    ``description``), not a call whose arguments are named ``parameters``."""
    if "arguments" in obj:
        return False
    params = obj.get("parameters")
    if "description" in obj or params == schema:
        return True
    return isinstance(params, dict) and params.get("type") == "object" and isinstance(params.get("properties"), dict)


register_format(HermesFormat())
register_format(HermesJsonFormat())
register_format(QwenXmlFormat("qwen3_coder"))
register_format(QwenXmlFormat("qwen3_xml"))
register_format(NemotronJsonFormat())
