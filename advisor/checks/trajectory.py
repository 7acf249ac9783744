"""Checks over what the agent did: state (fixture API requests) and tool_call (the calls it made)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from advisor.checks.base import CheckContext, CheckOutcome, CheckSpec, check, dig, values_equal
from advisor.errors import did_you_mean
from advisor.suite_validation import regex_problem
from advisor.tools.fixture_api import header_matches


class StateCheck(CheckSpec):
    """An assertion over the fixture API's state after the run: a request was (not) made, or a record holds a value."""

    method: str | None = None
    path: str | None = None  #: regex on the request path
    header: dict[str, str] = Field(default_factory=dict)  #: headers the request must carry (value regex)
    body: dict[str, Any] = Field(default_factory=dict)  #: JSON body keys that must equal these values
    count: int | None = None  #: exact number of matching requests; default: at least one
    must_happen: bool = True

    def problems(self, known_tools=None):
        """The path and header regexes compile."""
        for rel, pattern in [(("path",), self.path), *((("header", k), v) for k, v in self.header.items())]:
            problem = regex_problem(pattern)
            if problem:
                yield rel, problem


class ToolCallCheck(CheckSpec):
    """The agent called (or never called) a tool, optionally with arguments containing these values."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    must_happen: bool = True
    max_calls: int | None = None  #: at most this many calls of the tool

    def problems(self, known_tools=None):
        """The tool exists (when the caller knows the tools)."""
        if known_tools is not None and self.tool not in known_tools:
            yield ("tool",), f"unknown tool {self.tool!r}.{did_you_mean(self.tool, known_tools)}"


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


@check("state", StateCheck)
async def state(check: StateCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
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


@check("tool_call", ToolCallCheck)
async def tool_call(check: ToolCallCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
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

