"""The tool-call formats by name, and a tool spec as a plain dict: what ladders and backends need of the formats.

The formats themselves (``hermes``, ``qwen3_xml``, ...) are written in `advisor.agent.formats`, which registers
them in `FORMATS` here; the registry imports that module on its first lookup (as every registry imports its
builtin modules), so a ladder can check its ``tool_call_format`` names and a chat backend can write a native
tool call in the rung's format without importing the agent.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from advisor.errors import ConfigError, did_you_mean
from advisor.registry import Registry


class ToolFormat(Protocol):
    """How one tool-call format renders the tool list and a call, and parses replies."""

    name: str

    def render_tools(self, specs: Sequence[Any]) -> str:
        """The tool list and calling instructions for the system prompt."""

    def render_call(self, name: str, arguments: dict[str, Any]) -> str:
        """One call written the way this format's models write it."""

    def parse(self, text: str, specs: Sequence[Any] = ()) -> Any:
        """Parse one model reply (an `advisor.agent.formats.Parsed`)."""


#: Every tool-call format by name: the names a ladder's ``tool_call_format`` may use.
FORMATS: Registry[ToolFormat] = Registry("tool-call format", entry_points="advisor.formats")


def register_format(fmt: ToolFormat) -> ToolFormat:
    """Register a format instance under its ``name`` (the ladder's ``tool_call_format`` value)."""
    return FORMATS.add(fmt.name, fmt)


def format_for(name: Any) -> ToolFormat:
    """The format called `name` (a ladder's ``tool_call_format``); ConfigError when unknown."""
    key = str(getattr(name, "value", name))
    if key not in FORMATS:
        raise ConfigError(f"unknown tool_call_format {key!r}.{did_you_mean(key, FORMATS.names())}")
    return FORMATS.get(key)


def spec_dict(spec: Any) -> dict[str, Any]:
    """A tool spec (an object with name/description/parameters, or a dict) as a plain dict."""
    if isinstance(spec, dict):
        return {"name": spec["name"], "description": spec.get("description", ""),
                "parameters": spec.get("parameters") or {"type": "object", "properties": {}}}
    return {"name": spec.name, "description": getattr(spec, "description", ""),
            "parameters": getattr(spec, "parameters", None) or {"type": "object", "properties": {}}}
