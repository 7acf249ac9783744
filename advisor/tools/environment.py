"""One episode's sandbox: a fresh scratch workspace with the task's fixture files, its docs, and an
in-process fixture API that logs every request.

`Environment.call` never raises for tool-level problems: an unknown or disallowed tool, bad arguments, a
timeout or a sandbox violation all come back as a `ToolCall` with ``ok=False`` and a message the agent reads.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError, did_you_mean
from advisor.records import ToolCall, utf8_safe
from advisor.tools.base import ToolError, ToolSpec, get_tool, registry
from advisor.tools.files import resolve_in_workspace
from advisor.tools.fixture_api import FixtureApi
from advisor.tools.sandbox import SandboxLimits
from advisor.tools.tree import remove_tree

MAX_OBSERVATION_CHARS = 16_000  #: longer observations are cut, with a note


@functools.lru_cache(maxsize=None)
def _validator(name: str):
    # heavy dependency, imported on use: jsonschema
    from jsonschema import Draft202012Validator

    return Draft202012Validator(get_tool(name).spec.parameters)


def check_arguments(name: str, arguments: Any) -> None:
    """Raise `ToolError` when `arguments` does not match the tool's JSON schema."""
    if not isinstance(arguments, dict):
        raise ToolError(f"arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    errors = sorted(_validator(name).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.path) or "arguments"
        raise ToolError(f"bad arguments for {name}: {where}: {err.message}")


class Environment:
    """The sandbox of one episode (workspace, docs, fixture API, api_log)."""

    def __init__(self, task, workspace: Path, limits: SandboxLimits | None = None):
        self.task = task
        self.workspace = workspace
        self.api_log: list[dict[str, Any]] = []
        self.api = FixtureApi(task.fixtures.api, self.api_log)
        self.limits = limits or SandboxLimits()
        self._owns_workspace = True

    @classmethod
    def create(cls, task, root: Path, limits: SandboxLimits | None = None) -> "Environment":
        """A fresh workspace under `root` with the task's fixture files written into it."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        workspace = Path(tempfile.mkdtemp(prefix=f"{task.id}-", dir=root))
        for rel, content in task.fixtures.files.items():
            try:
                path = resolve_in_workspace(workspace, rel)
            except ToolError as exc:
                remove_tree(workspace)
                raise AdvisorError(f"task {task.id}: fixture file {rel!r}: {exc}") from None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        return cls(task, workspace, limits)

    def specs(self) -> list[ToolSpec]:
        """The specs of the task's tools, in the task's order (unknown names are skipped)."""
        tools = registry()
        return [tools[name].spec for name in self.task.tools if name in tools]

    async def call(self, name: str, arguments: dict) -> ToolCall:
        """Run one tool call and return it with its observation; tool-level problems give ``ok=False``."""
        safe_args = arguments if isinstance(arguments, dict) else {"_raw": arguments}
        if name not in self.task.tools:
            allowed = [t for t in self.task.tools if t in registry()]
            return ToolCall(name, safe_args, f"error: tool {name!r} is not available in this task."
                            f"{did_you_mean(str(name), allowed)}", ok=False)
        try:
            tool = get_tool(name)
            check_arguments(name, arguments)
            observation = await tool.run(self, arguments)
            ok = True
        except (ToolError, AdvisorError) as exc:
            observation, ok = f"error: {exc}", False
        except Exception as exc:  # a bug in a tool must not end the episode
            observation, ok = f"error: internal tool error ({type(exc).__name__}: {exc})", False
        observation = utf8_safe(observation)  # a file name or output that is not UTF-8 is escaped, not fatal
        if len(observation) > MAX_OBSERVATION_CHARS:
            observation = observation[:MAX_OBSERVATION_CHARS] + f"\n[... observation cut at {MAX_OBSERVATION_CHARS} characters]"
        return ToolCall(name, safe_args, observation, ok=ok)

    def close(self) -> None:
        """Delete the workspace."""
        if self._owns_workspace:
            remove_tree(self.workspace)

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> str:
        """A one-line summary for logs."""
        return json.dumps({"task": self.task.id, "workspace": str(self.workspace), "tools": list(self.task.tools)})
