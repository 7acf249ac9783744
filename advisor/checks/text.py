"""Checks over text targets: regex, json_schema, json_equals."""

from __future__ import annotations

import json
import re

from advisor.checks.base import CheckOutcome, TargetMissing, dig, parse_json_lenient, read_target, values_equal

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


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


async def regex(check, task, episode) -> CheckOutcome:
    """The pattern is found (``re.search``) in the target, or absent when ``must_match`` is false."""
    try:
        text = read_target(check.target, episode)
    except TargetMissing as exc:
        return CheckOutcome.failed(str(exc))
    flags = 0
    for letter in check.flags:
        flags |= _FLAGS.get(letter, 0)
    found = re.search(check.pattern, text, flags) is not None
    if found == check.must_match:
        return CheckOutcome.passed("pattern found" if found else "pattern absent, as required")
    return CheckOutcome.failed(f"pattern {check.pattern!r} " + ("not found" if check.must_match else "found but must be absent"))


async def json_schema(check, task, episode) -> CheckOutcome:
    """The target parses as JSON (leniently) and validates against the JSON schema."""
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


async def json_equals(check, task, episode) -> CheckOutcome:
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


CHECKS = {"regex": regex, "json_schema": json_schema, "json_equals": json_equals}
