"""The records everything else is built on: episodes, runs, turns, criterion results, and their vocabularies.

This is the bottom layer of the package (it imports nothing from advisor): the agent loop produces an
`Episode` with its `TurnRecord`s, the checks read the `Episode` and give `CriterionResult`s, the probe turns
them into a `RunRecord`, and the store (`advisor.store`) writes and reads all of them.

Stop reasons, run kinds and conditions are `(str, Enum)` enums (Python 3.10 has no ``StrEnum``): a member
equals, hashes and formats as its value, so ``StopReason.FINAL == "final"`` and rows read back from the store
compare equal to the members.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any


class _Text(str, Enum):
    """A string enum whose members print and format as their values (like 3.11's StrEnum)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class StopReason(_Text):
    """Why an episode ended (stored as ``runs.stop_reason``)."""

    FINAL = "final"  #: the model answered
    MAX_TURNS = "max_turns"  #: the turn budget ran out
    MAX_TOKENS = "max_tokens"  #: the token budget ran out
    TIMEOUT = "timeout"  #: the wall-time budget ran out
    STUCK = "stuck"  #: repeated or alternating identical actions
    BACKEND_ERROR = "backend_error"  #: the model server failed: stored unscored, retried by the next probe
    INVALID_OUTPUT = "invalid_output"  #: unusable replies in a row
    IMPORTED = "imported"  #: an imported recorded result (how its loop ended was not recorded)
    INTERRUPTED = "interrupted"  #: the episode was cut short
    STEP = "step"  #: a replayed live step ended at its tool call (a replay runs no tool: `advisor.agent.replay`)


class RunKind(_Text):
    """Where a stored run came from (``runs.kind``)."""

    PROBE = "probe"
    IMPORTED = "imported"
    LIVE = "live"


class Condition(_Text):
    """Whether a task ran with its skill document (``runs.condition``)."""

    BASELINE = "baseline"
    SKILL = "skill"


#: Every stop reason, run kind and condition as plain strings (for messages and validation).
STOP_REASONS = tuple(s.value for s in StopReason)
RUN_KINDS = tuple(k.value for k in RunKind)
CONDITIONS = tuple(c.value for c in Condition)
#: Stop reasons that mean the agent loop did not converge to an answer.
NONCONVERGED = (StopReason.MAX_TURNS, StopReason.MAX_TOKENS, StopReason.TIMEOUT, StopReason.STUCK,
                StopReason.INVALID_OUTPUT)
#: Stop reasons after which an episode cannot be scored (the run is stored unscored, never 0).
UNSCORABLE_STOPS = (StopReason.BACKEND_ERROR,)
#: Run kinds the floor finder reads (live routed runs are chosen by a policy and would bias the rates).
FLOOR_KINDS = (RunKind.PROBE, RunKind.IMPORTED)
#: The run columns the floor finder reads (`advisor.floors`, `Store.floor_rows`).
FLOOR_COLUMNS = ("suite_name", "task_id", "task_class", "rung", "rung_position", "condition", "replica",
                 "stop_reason", "turns", "cost_usd", "judge_cost_usd", "if_score", "tc_score", "overall",
                 "unscored", "simulated")


def plain(value: Any) -> Any:
    """`value` with an enum member replaced by its plain value and a string made valid UTF-8 (`utf8_safe`): what
    a database driver is given."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, str) and not value.isascii():
        return utf8_safe(value)
    return value


def utf8_safe(text: str) -> str:
    """`text` as valid UTF-8, nothing dropped: a byte that was not UTF-8 in a file name or a tool's output (held as a
    lone surrogate by Python's ``surrogateescape``) becomes the escape ``\\xff``, any other lone surrogate
    ``\\ud800``. Names and text that model code writes are data: they reach the store and the model as text."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def now() -> datetime:
    """Current UTC time (naive, as DuckDB TIMESTAMP stores it)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def text_hash(text: str) -> str:
    """sha256 of lower-cased, whitespace-collapsed text: the key prompts are stored and joined under."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()


def make_run_key(*parts: Any) -> str:
    """Idempotent run key from the parts that identify one episode (kind, suite, task, ladder, rung, ...)."""
    return hashlib.sha256("\x1f".join(str(plain(p)) for p in parts).encode()).hexdigest()[:32]


# ----------------------------------------------------------------------------------------- one episode
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
    stop_reason: str  #: a `StopReason`
    calls: list[ToolCall] = field(default_factory=list)
    workspace: Path | None = None  #: the scratch directory the tools worked in (files checks read)
    api_log: list[dict[str, Any]] = field(default_factory=list)  #: requests the fixture API received
    error: str | None = None  #: backend or loop error text, when there was one
    #: how the model call failed, when the stop is ``backend_error``: a `advisor.backends.FailureKind` value
    #: (timeout, down, key refused, bad output, overloaded)
    failure: str | None = None


@dataclass
class TurnRecord:
    """One model call of an episode and what came of it."""

    turn: int
    action: str  #: tool name, 'final', or 'invalid'
    arguments_json: str = "{}"
    observation: str = ""  #: truncated observation text
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = ""


@dataclass
class CriterionResult:
    """The outcome of one checklist criterion in one run."""

    checklist: str  #: if | tc
    criterion: str
    weight: float
    score: float | None  #: fraction 0-1 of the weight earned; None = could not be checked
    detail: str = ""


# ----------------------------------------------------------------------------------------- one stored run
@dataclass
class RunRecord:
    """One episode as stored (a probe run, an imported recorded result, or a live routed request)."""

    run_key: str
    kind: str  #: a `RunKind`
    suite_name: str
    suite_hash: str
    task_id: str
    task_class: str
    ladder_name: str
    ladder_hash: str
    rung: str
    rung_position: int  #: 0 = smallest rung of the ladder
    condition: str = Condition.BASELINE  #: a `Condition`
    replica: int = 0
    seed: int = 0
    policy: str = "fixed"  #: fixed | router | orchestrator (which policy chose the rung)
    prompt_hash: str | None = None
    stop_reason: str = StopReason.FINAL  #: a `StopReason`
    turns: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_from_server: bool = True  #: False when counts are a fallback estimate (see `error`)
    cost_usd: float = 0.0
    cost_estimated: bool = False
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cost_usd: float = 0.0
    latency_s: float = 0.0
    if_score: float | None = None
    tc_score: float | None = None
    overall: float | None = None
    scenario_score: float | None = None  #: an imported scenario's own weighted score (original weights)
    unscored: bool = False
    unscored_reason: str | None = None
    bar: float = 75.0
    near_zero: float = 25.0
    simulated: bool = False
    advisor_version: str = ""
    settings_json: str = "{}"
    error: str | None = None
    failure: str | None = None  #: a backend_error run's failure kind (timeout, down, key refused, ...)
    started_at: datetime | None = None
    finished_at: datetime | None = None
