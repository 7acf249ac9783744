"""Values for a JSON schema taken from a conversation: how a stand-in fills a tool's arguments or a JSON answer.

A stand-in acting on tools it does not know (`advisor.standin.tooluse`) reads the arguments off the conversation
the way a model would, with fixed rules (no randomness here; the rung's mistakes are drawn elsewhere):

- ``const`` and ``enum``: the constant; the enum member named in the user's message (else in a tool result,
  else the schema's ``default``, else the first member);
- a property whose name matches a key of an earlier tool result (``order_id`` <- ``order_id``, ``amount_cents``
  <- ``total_cents`` by their last word) takes that value, converted to the declared type;
- strings: identifiers such as ``ORD-1042`` for names ending in ``id``, e-mail addresses, URLs, dates and quoted
  text from the user's message, by the property's name and ``format``; query-like names get the message itself;
  any other string the name the message gives (a capitalised word inside a sentence: "the weather in Lisbon");
- numbers: a number written in the user's message (not the digits inside an identifier), within the schema's
  ``minimum``/``maximum``; booleans: the default, else true; arrays: every identifier for an id list, else one
  filled item (``minItems`` of them); objects: their required properties, and optional ones the conversation
  gives a value for.

The result validates against the schema for the keywords above (type, enum, const, required, properties,
items, minItems, minimum, maximum, anyOf/oneOf: the first non-null option).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: An identifier as order systems write them: ORD-1042, INV-2024-07, AB-12.
IDENTIFIER = re.compile(r"\b[A-Z][A-Z0-9]{1,9}(?:-[A-Z0-9]+)*-\d+\b")
_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?![\w-])")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"https?://[^\s'\"<>)]+")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_QUOTED = re.compile(r"[\"'`]([^\"'`\n]{1,80})[\"'`]")
_QUERY_NAMES = {"query", "q", "question", "prompt", "text", "message", "content", "body", "search", "input",
                "topic", "description", "note", "notes", "comment", "summary", "subject"}
_TEXT_CLIP = 200
_GUESS_CLIP = 60  #: a text property nothing in the message fits gets the message's opening, this long
#: a capitalised name inside a sentence (after a lower-case word): "in Lisbon", "for Ada Lovelace"
_PROPER = re.compile(r"(?<=[a-z,;:] )([A-Z][\w'-]+(?: [A-Z][\w'-]+)*)")


def words(name: str) -> list[str]:
    """The words of an identifier or a phrase: ``refundOrder`` / ``refund_order`` -> ["refund", "order"]."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def flatten(value: Any, out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every scalar of a decoded JSON value by its key (nested keys too; the first occurrence wins)."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                flatten(v, out)
            else:
                out.setdefault(str(k), v)
    elif isinstance(value, list):
        for v in value:
            flatten(v, out)
    return out


def decode(text: str) -> Any:
    """A tool result as JSON when it is JSON (also the first object or list inside text), else None."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text, start)[0]
    except ValueError:
        return None


@dataclass
class Context:
    """What the conversation says: the user's words and the tool results seen so far (newest last)."""

    user_text: str
    results: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.known: dict[str, Any] = {}
        for text in reversed(self.results):  # the newest result wins a key
            for k, v in flatten(decode(text)).items():
                self.known.setdefault(k, v)
        self.identifiers = list(dict.fromkeys(IDENTIFIER.findall(self.user_text)))
        self.numbers = [float(n) for n in _NUMBER.findall(IDENTIFIER.sub(" ", self.user_text))]

    def result_value(self, name: str) -> Any:
        """The value of the result key that is `name`, else one sharing its last word (None when none)."""
        if name in self.known:
            return self.known[name]
        lowered = {k.lower(): v for k, v in self.known.items()}
        if name.lower() in lowered:
            return lowered[name.lower()]
        last = (words(name) or [""])[-1]
        if last in ("id", "name", "type", "status"):  # too common on their own: only the whole name matches
            return None
        return next((v for k, v in self.known.items() if (words(k) or [""])[-1] == last), None)

    def mentions(self, value: Any) -> bool:
        """Whether the user's message names `value` (as a word, case-insensitive)."""
        text = str(value)
        return bool(text) and re.search(rf"(?<!\w){re.escape(text)}(?!\w)", self.user_text, re.I) is not None


def listed(description: Any) -> list[str]:
    """The values a description lists as the only ones allowed ("one of: damaged, late, other"), else []."""
    found = re.search(r"\bone of\b[:\s]*([^.;()]+)", str(description or ""), re.I)
    if not found:
        return []
    values = [v.strip(" `'\"") for v in re.split(r",|\bor\b|\|", found.group(1))]
    return [v for v in values if v and len(v.split()) == 1]


def _option(schema: dict) -> dict:
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return {**{k: v for k, v in schema.items() if k != key}, **options[0]}
    return schema


def _type(schema: dict) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), "string")
    if declared:
        return declared
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def _number(value: float, schema: dict, integer: bool) -> float | int:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return int(round(value)) if integer else value


def _as(value: Any, kind: str, schema: dict) -> Any:
    """`value` converted to `kind`, or None when it cannot be."""
    if value is None:
        return None
    try:
        if kind in ("integer", "number"):
            if isinstance(value, bool):
                return None
            return _number(float(value), schema, kind == "integer")
        if kind == "boolean":
            return value if isinstance(value, bool) else None
        if kind == "string":
            return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    except (TypeError, ValueError):
        return None
    return None


def _string(name: str, schema: dict, ctx: Context) -> str:
    fmt, name_words = schema.get("format", ""), set(words(name))
    text = ctx.user_text
    if fmt == "email" or "email" in name_words:
        found = _EMAIL.findall(text)
        if found:
            return found[0]
    if fmt in ("uri", "url") or name_words & {"url", "uri", "link"}:
        found = _URL.findall(text)
        if found:
            return found[0]
    if fmt == "date" or "date" in name_words:
        found = _DATE.findall(text)
        if found:
            return found[0]
    if name_words & {"id", "ids", "number", "ref", "reference", "code", "sku"} and ctx.identifiers:
        return ctx.identifiers[0]
    if name_words & _QUERY_NAMES:
        return text.strip()[:_TEXT_CLIP]
    quoted = _QUOTED.findall(text)
    if quoted:
        return quoted[0]
    near = re.search(rf"\b{re.escape(name.replace('_', ' '))}\s*(?:is|:|=|of)?\s+([\w.@-]+)", text, re.I)
    if near:
        return near.group(1)
    if ctx.identifiers:
        return ctx.identifiers[0]
    named = _PROPER.search(text)  # a name the message gives: "the weather in Lisbon" -> Lisbon
    if named:
        return named.group(1)
    return schema.get("default") if isinstance(schema.get("default"), str) else text.strip()[:_GUESS_CLIP] or name


def fill(schema: Any, ctx: Context, name: str = "value", depth: int = 0) -> Any:
    """A value for `schema` (a JSON Schema dict) read off the conversation `ctx`; `name` is the property's name."""
    schema = _option(schema if isinstance(schema, dict) else {})
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum") or listed(schema.get("description"))
    if enum:
        named = [v for v in enum if ctx.mentions(v)]
        seen = ctx.result_value(name)
        return named[0] if named else seen if seen in enum else schema.get("default", enum[0])
    kind = _type(schema)
    if kind == "object":
        return fill_object(schema, ctx, depth + 1)
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        count = max(1, int(schema.get("minItems") or 1))
        if _type(_option(items)) == "string" and set(words(name)) & {"id", "ids"} and ctx.identifiers:
            return list(ctx.identifiers[:max(count, len(ctx.identifiers))])
        return [fill(items, ctx, name, depth + 1) for _ in range(count)] if depth < 6 else []
    seen = _as(ctx.result_value(name), kind, schema)
    if seen is not None:
        return seen
    if "default" in schema and _as(schema["default"], kind, schema) is not None:
        return schema["default"]
    if kind in ("integer", "number"):
        return _number(ctx.numbers[0] if ctx.numbers else 1, schema, kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(name, schema, ctx)


def named_in_message(name: str, value: Any, ctx: Context) -> bool:
    """Whether `value`, filled for property `name`, is one the user's message names: a scalar the message says,
    not the message's opening that a text property gets when nothing else fits (the message itself counts for a
    query-like name)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not ctx.mentions(value):
        return False
    guessed = value == ctx.user_text.strip()[:_GUESS_CLIP]
    return not guessed or bool(set(words(name)) & _QUERY_NAMES)


def provided(name: str, schema: Any, ctx: Context) -> bool:
    """Whether the conversation gives a value for an optional property (a result key or a named enum member)."""
    schema = _option(schema if isinstance(schema, dict) else {})
    if ctx.result_value(name) is not None:
        return True
    return any(ctx.mentions(v) for v in schema.get("enum") or [])


def fill_object(schema: dict, ctx: Context, depth: int = 0) -> dict[str, Any]:
    """An object for `schema`: its required properties, and optional ones the conversation gives a value for."""
    props = schema.get("properties") or {}
    required = [k for k in schema.get("required") or [] if isinstance(k, str)]
    out: dict[str, Any] = {}
    for key, sub in props.items():
        if key in required or provided(key, sub, ctx):
            out[key] = fill(sub, ctx, key, depth)
    for key in required:
        out.setdefault(key, fill({}, ctx, key, depth))
    return out


def invalid(arguments: dict[str, Any], schema: dict) -> dict[str, Any]:
    """`arguments` made not to validate: a required property dropped, else one given the wrong type."""
    required = [k for k in (schema.get("required") or []) if k in arguments]
    if required:
        return {k: v for k, v in arguments.items() if k != required[0]}
    if arguments:
        key = next(iter(arguments))
        return {**arguments, key: [] if isinstance(arguments[key], str) else "not a valid value"}
    return {"unexpected_argument": True}
