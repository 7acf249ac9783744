"""The tool protocol, tool specs and the `TOOLS` name registry.

A tool is a small object with a `spec` (name, description, JSON schema of its arguments) and an async
`run(env, arguments)` that returns the observation text; its class is registered where it is defined with
``@register_tool`` (see docs/extending.md). Tool-level problems (bad arguments, sandbox
violations, limits) are raised as `ToolError`; the `Environment` turns them into an observation with
``ok=False`` so the agent sees them and the episode goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from advisor.errors import AdvisorError
from advisor.registry import Registry, UnknownNameError


class ToolError(AdvisorError):
    """A tool could not do what it was asked (reported to the agent as an observation with ok=False)."""


class UnknownToolError(AdvisorError):
    """A tool name that no tool in the registry carries."""


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: its name, what it does, and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)  #: JSON schema of the arguments object


class ToolContext(Protocol):
    """What a tool reads of its episode's sandbox (`advisor.tools.environment.Environment` is one)."""

    task: Any  #: the task being run (its fixtures and docs)
    workspace: Path  #: the episode's scratch folder
    api: Any  #: the in-process fixture API (`advisor.tools.fixture_api.FixtureApi`)
    api_log: list[dict[str, Any]]  #: every fixture API request, in order
    limits: Any  #: the sandbox limits (`advisor.tools.sandbox.SandboxLimits`)


class Tool(Protocol):
    """A sandboxed tool: a spec plus an async run over one episode's environment."""

    spec: ToolSpec

    async def run(self, env: ToolContext, arguments: dict[str, Any]) -> str:
        """Do the call and return the observation text; raise `ToolError` for tool-level problems."""
        ...


#: Every tool by name; the builtin tool modules register themselves when the registry is first used.
TOOLS: Registry[Tool] = Registry("tool", builtins=(
    "advisor.tools.files", "advisor.tools.docs", "advisor.tools.fixture_api", "advisor.tools.python_tool"),
    entry_points="advisor.tools")

T = TypeVar("T", bound=type)


def register_tool(cls: T) -> T:
    """Class decorator: register one instance of the tool class under its ``spec.name``."""
    TOOLS.add(cls.spec.name, cls())
    return cls


def registry() -> dict[str, Tool]:
    """Every tool by name (a copy of `TOOLS`; importing this module registers nothing)."""
    return TOOLS.items()


def get_tool(name: str) -> Tool:
    """The tool called `name`; an unknown name raises `UnknownToolError` with "did you mean / available"."""
    try:
        return TOOLS.get(name)
    except UnknownNameError as exc:
        raise UnknownToolError(str(exc)) from None


def available_tools() -> dict[str, ToolSpec]:
    """The spec of every registered tool, by name."""
    return {name: tool.spec for name, tool in TOOLS.items().items()}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON schema for an arguments object with these properties (no others allowed)."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
