"""Checks over text targets: regex, json_schema, json_equals (each its spec model and its function)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ConfigDict, Field

from advisor.checks.base import (CheckContext, CheckOutcome, CheckSpec, TargetMissing, check, dig, parse_json_lenient,
                                 read_target, values_equal)
from advisor.suite_validation import REGEX_FLAGS, regex_flags, regex_problem


def _short(value, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_target(check, episode):
    """The check's target parsed as JSON (leniently), or the failed `CheckOutcome` saying why it is not."""
    try:
        return parse_json_lenient(read_target(check.target, episode))
    except TargetMissing as exc:
        return CheckOutcome.failed(str(exc))
    except ValueError:
        return CheckOutcome.failed(f"{check.target} is not JSON")


class RegexCheck(CheckSpec):
    """The pattern is found in the target (or absent, with ``must_match: false``)."""

    target: str = "final"
    pattern: str
    must_match: bool = True  #: False: the criterion passes when the pattern is absent
    flags: str = ""  #: any of "i" (ignore case), "m" (multiline), "s" (dot matches newline)

    def problems(self, known_tools=None):
        """Flags among i, m, s; the pattern compiles."""
        try:
            flags = regex_flags(self.flags)
        except ValueError as exc:
            yield ("flags",), str(exc)
            return
        problem = regex_problem(self.pattern, flags)
        if problem:
            yield ("pattern",), problem


class JsonSchemaCheck(CheckSpec):
    """The target parses as JSON and validates against `schema`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    target: str = "final"
    schema_: dict[str, Any] = Field(alias="schema")

    def problems(self, known_tools=None):
        """The schema is a JSON Schema (of the draft its ``$schema`` names, else the latest)."""
        # heavy dependency, imported on use: jsonschema
        import jsonschema
        from jsonschema.validators import validator_for

        try:
            validator_for(self.schema_).check_schema(self.schema_)
        except jsonschema.SchemaError as exc:
            yield ("schema",), f"not a JSON Schema: {exc.message} at {exc.json_path}"


class JsonEqualsCheck(CheckSpec):
    """The target parses as JSON and the value at `path` (dotted; empty = whole document) equals `value`."""

    target: str = "final"
    path: str = ""
    value: Any


@check("regex", RegexCheck)
async def regex(check: RegexCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """The pattern is found (``re.search``) in the target, or absent when ``must_match`` is false."""
    try:
        text = read_target(check.target, episode)
    except TargetMissing as exc:
        return CheckOutcome.failed(str(exc))
    flags = 0
    for letter in check.flags:  # unknown letters are refused when the suite is loaded
        flags |= REGEX_FLAGS.get(letter, 0)
    found = re.search(check.pattern, text, flags) is not None
    if found == check.must_match:
        return CheckOutcome.passed("pattern found" if found else "pattern absent, as required")
    return CheckOutcome.failed(f"pattern {check.pattern!r} " + ("not found" if check.must_match else "found but must be absent"))


@check("json_schema", JsonSchemaCheck)
async def json_schema(check: JsonSchemaCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """The target parses as JSON (leniently) and validates against the JSON schema."""
    # heavy dependency, imported on use: jsonschema
    from jsonschema import Draft202012Validator

    value = _json_target(check, episode)
    if isinstance(value, CheckOutcome):
        return value
    errors = sorted(Draft202012Validator(check.schema_).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.path) or "(root)"
        return CheckOutcome.failed(f"schema: {where}: {err.message}")
    return CheckOutcome.passed("valid")


@check("json_equals", JsonEqualsCheck)
async def json_equals(check: JsonEqualsCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """The JSON value at ``path`` equals ``value`` (numbers to 1e-6)."""
    value = _json_target(check, episode)
    if isinstance(value, CheckOutcome):
        return value
    try:
        actual = dig(value, check.path)
    except KeyError as exc:
        return CheckOutcome.failed(f"no value at {check.path!r} (missing {exc.args[0]!r})")
    if values_equal(check.value, actual):
        return CheckOutcome.passed(f"{check.path or 'value'} = {_short(actual)}")
    return CheckOutcome.failed(f"{check.path or 'value'} = {_short(actual)}, expected {_short(check.value)}")

