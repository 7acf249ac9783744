"""Checks over what the agent did: state (fixture API requests) and tool_call (the calls it made)."""

from __future__ import annotations

import re
from typing import Any

from advisor.checks.base import CheckOutcome, dig, values_equal
from advisor.tools.fixture_api import header_matches


def request_matches(check, request: dict[str, Any]) -> bool:
    """True when one logged fixture-API request satisfies the state check's method, path, headers and body."""
    if check.method and request.get("method", "").upper() != check.method.upper():
        return False
    if check.path and re.fullmatch(check.path, request.get("path", "")) is None:
        return False
    headers = request.get("headers") or {}
    for name, value in check.header.items():
        if not header_matches(value, headers.get(name.lower())):
            return False
    if check.body:
        body = request.get("json")
        for key, value in check.body.items():
            try:
                if not values_equal(value, dig(body, key)):
                    return False
            except (KeyError, TypeError):
                return False
    return True


def _describe(check) -> str:
    parts = [check.method or "any", check.path or "any path"]
    if check.header:
        parts.append(f"headers {sorted(check.header)}")
    if check.body:
        parts.append(f"body {sorted(check.body)}")
    return " ".join(parts)


async def state(check, task, episode) -> CheckOutcome:
    """Count matching fixture-API requests: at least one (or exactly ``count``); none when must_happen is false."""
    n = sum(1 for request in episode.api_log if request_matches(check, request))
    what = _describe(check)
    if not check.must_happen:
        return CheckOutcome.passed(f"no {what} request") if n == 0 else CheckOutcome.failed(f"{n} {what} request(s), expected none")
    if check.count is not None:
        return (CheckOutcome.passed(f"{n} {what} request(s)") if n == check.count
                else CheckOutcome.failed(f"{n} {what} request(s), expected exactly {check.count}"))
    return CheckOutcome.passed(f"{n} {what} request(s)") if n else CheckOutcome.failed(f"no {what} request was made")


def _args_match(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key, value in expected.items():
        try:
            got = dig(actual, key)
        except (KeyError, TypeError):
            return False
        if isinstance(value, str) and isinstance(got, str):
            if value.strip() != got.strip():
                return False
        elif not values_equal(value, got):
            return False
    return True


async def tool_call(check, task, episode) -> CheckOutcome:
    """The agent called the tool (with these argument values); or never did; or at most max_calls times."""
    n = sum(1 for call in episode.calls if call.name == check.tool and _args_match(check.arguments, call.arguments))
    what = check.tool + (f" with {check.arguments}" if check.arguments else "")
    if not check.must_happen:
        return CheckOutcome.passed(f"{what} not called") if n == 0 else CheckOutcome.failed(f"{what} called {n} time(s), must not be")
    if n == 0:
        return CheckOutcome.failed(f"{what} was never called")
    if check.max_calls is not None and n > check.max_calls:
        return CheckOutcome.failed(f"{what} called {n} times, at most {check.max_calls} allowed")
    return CheckOutcome.passed(f"{what} called {n} time(s)")


CHECKS = {"state": state, "tool_call": tool_call}
