"""Checks over the workspace after the run: file (exists / contains / equals) and python (run a file)."""

from __future__ import annotations

from pydantic import Field

from advisor.checks.base import CheckContext, CheckError, CheckOutcome, CheckSpec, check
from advisor.suite_validation import workspace_path_problem
from advisor.tools.base import ToolError
from advisor.tools.files import resolve_in_workspace
from advisor.tools.sandbox import SandboxLimits, run_sandboxed


class _WorkspacePathCheck(CheckSpec):
    """A check of a workspace file at `path` (relative, inside the workspace)."""

    path: str

    def problems(self, known_tools=None):
        """The path stays inside the workspace."""
        problem = workspace_path_problem(self.path)
        if problem:
            yield ("path",), problem


class FileCheck(_WorkspacePathCheck):
    """A workspace file exists / does not exist / contains text / equals text."""

    exists: bool = True
    contains: str | None = None
    equals: str | None = None


class PythonCheck(_WorkspacePathCheck):
    """Run a workspace Python file (sandboxed) with `args`; passes when stdout contains `expect`."""

    args: list[str] = Field(default_factory=list)
    expect: str


def _path(episode, rel: str):
    if episode.workspace is None:
        raise CheckError("the episode has no workspace to check files in")
    try:
        return resolve_in_workspace(episode.workspace, rel)
    except ToolError as exc:
        raise CheckError(f"check path {rel!r}: {exc}") from None


@check("file", FileCheck)
async def file(check: FileCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """A workspace file exists (or not), contains a text, or equals a text (trailing newlines ignored)."""
    path = _path(episode, check.path)
    if not check.exists:
        return CheckOutcome.failed(f"{check.path} exists but must not") if path.exists() else CheckOutcome.passed("absent")
    if not path.is_file():
        return CheckOutcome.failed(f"{check.path} does not exist")
    text = path.read_text(encoding="utf-8", errors="replace")
    if check.contains is not None and check.contains not in text:
        return CheckOutcome.failed(f"{check.path} does not contain {check.contains!r}")
    if check.equals is not None and text.rstrip("\n") != check.equals.rstrip("\n"):
        return CheckOutcome.failed(f"{check.path} differs from the expected content")
    return CheckOutcome.passed(f"{check.path} ok")


@check("python", PythonCheck)
async def python(check: PythonCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """Run a workspace Python file in the sandbox; passes when its stdout contains ``expect``."""
    path = _path(episode, check.path)
    if not path.is_file():
        return CheckOutcome.failed(f"{check.path} does not exist")
    result = await run_sandboxed(episode.workspace, "file", str(path), list(check.args), SandboxLimits(timeout_s=20))
    if result.problem:
        return CheckOutcome.failed(f"{check.path}: {result.problem}")
    if check.expect in result.stdout:
        return CheckOutcome.passed(f"{check.path} printed {check.expect!r}")
    last = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or [""])[-1]
    return CheckOutcome.failed(f"{check.path} exit {result.returncode}, no {check.expect!r} in stdout; last line: {last[:160]}")

