"""The check protocol, the registry by check `type`, and what checks look at (targets).

A check type is declared once, where it is implemented: a pydantic model of its YAML fields (a `CheckSpec`)
and an async function that grades one criterion, registered together under the type name::

    class RegexCheck(CheckSpec):
        pattern: str

    @check("regex", RegexCheck)
    async def regex(spec: RegexCheck, task, episode, ctx: CheckContext) -> CheckOutcome: ...

The suite's ``check:`` mappings are validated by `validate_check`, which picks the model by ``type`` from
`CHECKS` (so a new check type is one module plus this registration; see docs/extending.md). A check returns
a `CheckOutcome`: the fraction of the weight earned (0-1), or None when the criterion could not be checked
(then the run is unscored, never a silent 0), plus what grading cost (a judge model's tokens).

Targets: ``final`` (the final answer text), ``file:<path>`` (a workspace file after the run), ``calls``
(the JSON list of tool calls, name and arguments) and ``api_log`` (the JSON list of fixture API requests).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator

from pydantic import BaseModel, ConfigDict

from advisor.errors import AdvisorError
from advisor.registry import Registry, UnknownNameError


class CheckError(AdvisorError):
    """A check cannot be evaluated (unknown type, bad target)."""


@dataclass
class CheckOutcome:
    """The result of one check: earned fraction 0-1 (None = could not be checked), a short explanation, and
    what grading cost (tokens and USD of a judge model; 0 for deterministic checks)."""

    score: float | None
    detail: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def passed(cls, detail: str = "") -> "CheckOutcome":
        """A check that passed."""
        return cls(1.0, detail or "ok")

    @classmethod
    def failed(cls, detail: str) -> "CheckOutcome":
        """A check that failed, and why."""
        return cls(0.0, detail)


class CheckSpec(BaseModel):
    """Base of every check type's YAML fields: ``type`` names the check, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  #: strict: `count: true` is an error

    type: str

    def problems(self, known_tools: set[str] | None = None) -> Iterator[tuple[tuple[str, ...], str]]:
        """Problems found when the suite is loaded that field types cannot express (a regex that does not
        compile, an unknown tool, a path out of the workspace), as (key path inside the check, message).
        `known_tools` is None when the caller does not check tool names. None by default."""
        return iter(())


@dataclass
class CheckContext:
    """What a check may need besides its spec, the task and the episode."""

    criterion: Any = None  #: the `advisor.suite.Criterion` being graded (name, description, weight, check)
    judge: Any = None  #: an `advisor.checks.judge.Judge`, or None when the run has no judge


CheckFn = Callable[[Any, Any, Any, CheckContext], Awaitable[CheckOutcome]]  #: (spec, task, episode, ctx)


@dataclass(frozen=True)
class CheckType:
    """One registered check type: its name, its spec model and its grading function."""

    name: str
    spec: type[CheckSpec]
    fn: CheckFn
    needs_judge: bool = False  #: graded by a judge model (the probe passes the ladder's judge role)

    async def __call__(self, spec: Any, task: Any, episode: Any, ctx: CheckContext | None = None) -> CheckOutcome:
        """Grade one criterion (`ctx` defaults to an empty context: no judge)."""
        return await self.fn(spec, task, episode, ctx if ctx is not None else CheckContext())


#: Every check type by name; the builtin families register themselves when first looked up.
CHECKS: Registry[CheckType] = Registry("check type", builtins=(
    "advisor.checks.text", "advisor.checks.workspace", "advisor.checks.trajectory", "advisor.checks.judge",
    "advisor.checks.replay"),
    entry_points="advisor.checks")


def check(name: str, spec: type[CheckSpec], *, needs_judge: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated async function as check type `name`, with `spec` as the model of its fields."""
    if not (isinstance(spec, type) and issubclass(spec, CheckSpec)):
        raise TypeError(f"check {name!r}: the spec must be a CheckSpec subclass, got {spec!r}")

    def decorate(fn: CheckFn) -> CheckFn:
        CHECKS.add(name, CheckType(name, spec, fn, needs_judge))
        return fn

    return decorate


def get_check(kind: str) -> CheckType:
    """The check type called `kind`; unknown types raise `CheckError` with "did you mean / available"."""
    try:
        return CHECKS.get(kind)
    except UnknownNameError as exc:
        raise CheckError(str(exc)) from None


def needs_judge(spec: Any) -> bool:
    """True when the check of this spec is graded by a judge model (its type registered ``needs_judge``)."""
    return get_check(spec.type).needs_judge


def check_registry() -> dict[str, CheckType]:
    """Every check type by name (a copy of `CHECKS`)."""
    return CHECKS.items()


def validate_check(value: Any) -> CheckSpec:
    """A suite's ``check:`` mapping as the spec model its ``type`` names (pydantic errors keep their place)."""
    if isinstance(value, CheckSpec):
        return value
    if not isinstance(value, dict):
        raise ValueError("a check is a mapping with a 'type' (regex, file, judge, ...)")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"a check needs a 'type'; available: {', '.join(CHECKS.names())}")
    try:
        spec = CHECKS.get(kind).spec
    except UnknownNameError as exc:
        raise ValueError(str(exc)) from None
    return spec.model_validate(value)


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
        # lazy: this module is loaded by `import advisor`, which stays light
        from advisor.tools.base import ToolError
        # lazy: this module is loaded by `import advisor`, which stays light
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
