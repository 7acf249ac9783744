"""What the store holds, as Python records: runs, turns, criterion results, and the keys they go under."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any

DEFAULT_STORE = "advisor.duckdb"

RUN_KINDS = ("probe", "imported", "live")
CONDITIONS = ("baseline", "skill")
STOP_REASONS = (
    "final", "max_turns", "max_tokens", "timeout", "stuck", "backend_error", "invalid_output",
    "imported", "interrupted",
)


def now() -> datetime:
    """Current UTC time (naive, as DuckDB TIMESTAMP stores it)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def text_hash(text: str) -> str:
    """sha256 of lower-cased, whitespace-collapsed text: the key prompts are stored and joined under."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()


def make_run_key(*parts: Any) -> str:
    """Idempotent run key from the parts that identify one episode (kind, suite, task, ladder, rung, ...)."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


@dataclass
class RunRecord:
    """One episode (a probe run, an imported recorded result, or a live routed request)."""

    run_key: str
    kind: str  #: probe | imported | live
    suite_name: str
    suite_hash: str
    task_id: str
    task_class: str
    ladder_name: str
    ladder_hash: str
    rung: str
    rung_position: int  #: 0 = smallest rung of the ladder
    condition: str = "baseline"  #: baseline | skill
    replica: int = 0
    seed: int = 0
    policy: str = "fixed"  #: fixed | router | orchestrator (which policy chose the rung)
    prompt_hash: str | None = None
    stop_reason: str = "final"
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
    started_at: datetime | None = None
    finished_at: datetime | None = None


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


_RUN_COLUMNS = [f.name for f in fields(RunRecord)]
_TURN_COLUMNS = ["run_key", "turn", "action", "arguments_json", "observation", "input_tokens", "output_tokens",
                 "latency_s", "finish_reason"]
_CRITERION_COLUMNS = ["run_key", "checklist", "criterion", "weight", "score", "detail"]
