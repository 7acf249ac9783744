"""The tool protocol, tool specs and the name registry.

A tool is a small object with a `spec` (name, description, JSON schema of its arguments) and an async
`run(env, arguments)` that returns the observation text. Tool-level problems (bad arguments, sandbox
violations, limits) are raised as `ToolError`; the `Environment` turns them into an observation with
``ok=False`` so the agent sees them and the episode goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from advisor.errors import AdvisorError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from advisor.tools.environment import Environment


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


class Tool(Protocol):
    """A sandboxed tool: a spec plus an async run over one episode's environment."""

    spec: ToolSpec

    async def run(self, env: "Environment", arguments: dict[str, Any]) -> str:
        """Do the call and return the observation text; raise `ToolError` for tool-level problems."""
        ...


def _builtin_tools() -> dict[str, Tool]:
    from advisor.tools.docs import DOC_TOOLS
    from advisor.tools.files import FILE_TOOLS
    from advisor.tools.fixture_api import HTTP_TOOLS
    from advisor.tools.python_tool import PYTHON_TOOLS

    tools: dict[str, Tool] = {}
    for tool in (*FILE_TOOLS, *DOC_TOOLS, *HTTP_TOOLS, *PYTHON_TOOLS):
        tools[tool.spec.name] = tool
    return tools


_REGISTRY: dict[str, Tool] | None = None


def registry() -> dict[str, Tool]:
    """Every tool by name (built on first use; importing this module registers nothing)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _builtin_tools()
    return _REGISTRY


def get_tool(name: str) -> Tool:
    """The tool called `name`; an unknown name raises `UnknownToolError` with "did you mean / available"."""
    tools = registry()
    if name not in tools:
        raise UnknownToolError(f"unknown tool {name!r}.{did_you_mean(name, tools)}")
    return tools[name]


def available_tools() -> dict[str, ToolSpec]:
    """The spec of every registered tool, by name."""
    return {name: tool.spec for name, tool in registry().items()}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON schema for an arguments object with these properties (no others allowed)."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
