"""The check protocol, the registry by check `type`, and what checks look at (targets).

A check grades one criterion of one episode and returns a `CheckOutcome`: the fraction of the weight earned
(0-1), or None when the criterion could not be checked (then the run is unscored, never a silent 0).

Targets: ``final`` (the final answer text), ``file:<path>`` (a workspace file after the run), ``calls``
(the JSON list of tool calls, name and arguments) and ``api_log`` (the JSON list of fixture API requests).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from advisor.errors import AdvisorError, did_you_mean


class CheckError(AdvisorError):
    """A check cannot be evaluated (unknown type, bad target)."""


@dataclass
class CheckOutcome:
    """The result of one check: earned fraction 0-1 (None = could not be checked) and a short explanation."""

    score: float | None
    detail: str = ""

    @classmethod
    def passed(cls, detail: str = "") -> "CheckOutcome":
        """A check that passed."""
        return cls(1.0, detail or "ok")

    @classmethod
    def failed(cls, detail: str) -> "CheckOutcome":
        """A check that failed, and why."""
        return cls(0.0, detail)


CheckFn = Callable[[Any, Any, Any], Awaitable[CheckOutcome]]  #: (check spec, task, episode) -> outcome


def _builtin() -> dict[str, CheckFn]:
    from advisor.checks import text, trajectory, workspace

    return {**text.CHECKS, **workspace.CHECKS, **trajectory.CHECKS}


_REGISTRY: dict[str, CheckFn] | None = None


def check_registry() -> dict[str, CheckFn]:
    """Every deterministic check function by type (``judge`` is handled by the scorer with a `Judge`)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _builtin()
    return _REGISTRY


def get_check(kind: str) -> CheckFn:
    """The check function for a type; unknown types raise `CheckError` with "did you mean / available"."""
    checks = check_registry()
    if kind not in checks:
        raise CheckError(f"unknown check type {kind!r}.{did_you_mean(kind, checks)}")
    return checks[kind]


class TargetMissing(Exception):
    """The target does not exist (no final answer, no such file): the check fails."""


def read_target(target: str, episode) -> str:
    """The text a check looks at; raise `TargetMissing` when there is none, `CheckError` on a bad target."""
    if target == "final":
        if episode.final is None:
            raise TargetMissing("the episode ended without a final answer")
        return episode.final
    if target == "calls":
        return json.dumps([{"name": c.name, "arguments": c.arguments} for c in episode.calls])
    if target == "api_log":
        return json.dumps(episode.api_log)
    if target.startswith("file:"):
        from advisor.tools.base import ToolError
        from advisor.tools.files import resolve_in_workspace

        if episode.workspace is None:
            raise CheckError("the episode has no workspace to read files from")
        rel = target[len("file:"):]
        try:
            path = resolve_in_workspace(episode.workspace, rel)
        except ToolError as exc:
            raise CheckError(f"target {target!r}: {exc}") from None
        if not path.is_file():
            raise TargetMissing(f"file {rel!r} does not exist")
        return path.read_text(encoding="utf-8", errors="replace")
    raise CheckError(f"unknown target {target!r}; use final, calls, api_log or file:<path>")


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_json_lenient(text: str) -> Any:
    """Parse JSON from a text: the whole text, else a fenced ```json block, else the outermost {...}/[...].

    Raises ValueError when no JSON is found. (Strict format is an instruction-following matter, checked
    with a regex; task completion reads the value wherever it is.)
    """
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block)
        except ValueError:
            continue
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(text[start:end + 1])
            except ValueError:
                continue
    raise ValueError("no JSON value found")


def dig(value: Any, path: str) -> Any:
    """The value at a dotted path (``a.b.0.c``; empty = the whole value); raise KeyError when absent."""
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part) and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(part)
    return value


def values_equal(expected: Any, actual: Any) -> bool:
    """Equality with numbers compared to 1e-6 (so 12.5 == 12.50 and 3 == 3.0); bools are not numbers."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return abs(float(expected) - float(actual)) <= 1e-6 * max(1.0, abs(float(expected)))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(values_equal(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(values_equal(e, a) for e, a in zip(expected, actual))
    return expected == actual
