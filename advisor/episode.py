"""The record of one agent episode, as the loop produces it and the checks read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ToolCall:
    """One tool call the agent made, with the observation it got back."""

    name: str
    arguments: dict[str, Any]
    observation: str = ""
    ok: bool = True  #: False when the tool reported an error (unknown tool, bad arguments, sandbox limit)


@dataclass
class Episode:
    """What an agent did in one run: its tool calls, its final answer, and why the loop stopped."""

    final: str | None  #: the final answer text, None when the loop ended without one
    stop_reason: str  #: final | max_turns | max_tokens | timeout | stuck | backend_error | invalid_output
    calls: list[ToolCall] = field(default_factory=list)
    workspace: Path | None = None  #: the scratch directory the tools worked in (files checks read)
    api_log: list[dict[str, Any]] = field(default_factory=list)  #: requests the fixture API received
    error: str | None = None  #: backend or loop error text, when there was one
