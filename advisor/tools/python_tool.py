"""The run_python tool: run a Python snippet in the bubblewrap sandbox (see `advisor.tools.sandbox`).

Where the sandbox cannot be built the call is refused (`SandboxUnavailable`, an ``ok=False`` observation)
unless running unsandboxed was allowed for the probe (``--allow-unsandboxed``).
"""

from __future__ import annotations

from typing import Any

from advisor.tools.base import ToolError, ToolSpec, object_schema, register_tool
from advisor.tools.sandbox import run_sandboxed

MAX_CODE_CHARS = 100_000


def format_run(returncode: int | None, stdout: str, stderr: str) -> str:
    """The observation text of a finished run: exit code, stdout, stderr."""
    parts = [f"exit code {returncode}"]
    if stdout:
        parts.append("--- stdout ---\n" + stdout.rstrip("\n"))
    if stderr:
        parts.append("--- stderr ---\n" + stderr.rstrip("\n"))
    return "\n".join(parts)


@register_tool
class RunPython:
    """Run Python code in the workspace inside the sandbox: no network, bounded time, memory, processes, output."""

    spec = ToolSpec(
        name="run_python",
        description="Run a Python 3 program in the workspace folder (standard library only, no network, "
        "limited time, memory and processes). Returns the exit code, stdout and stderr. Files of the workspace "
        "can be imported and read; only the workspace and a private /tmp can be written.",
        parameters=object_schema({
            "code": {"type": "string", "description": "The Python source to run."},
            "args": {"type": "array", "items": {"type": "string"}, "description": "Command-line arguments (sys.argv[1:])."},
        }, ["code"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Run the code; a stopped run (limit or sandbox violation) raises `ToolError` with partial output, and
        a missing sandbox raises `SandboxUnavailable` (both become an ok=False observation)."""
        code = arguments["code"]
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"code too long ({len(code)} characters; limit {MAX_CODE_CHARS})")
        result = await run_sandboxed(env.workspace, "code", code, list(arguments.get("args") or []), env.limits)
        text = format_run(result.returncode, result.stdout, result.stderr)
        if result.problem:
            raise ToolError(f"{result.problem}\n{text}")
        return text

