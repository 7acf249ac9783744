"""The DuckDB store (the only code that writes SQL): forward migrations and the `Store` itself.

The record types it stores live in `advisor.records` (the bottom layer) and are re-exported here.
"""

from advisor.records import (CONDITIONS, RUN_KINDS, STOP_REASONS, Condition, CriterionResult, RunKind, RunRecord,
                             StopReason, TurnRecord, make_run_key, now, text_hash)
from advisor.store._store import DEFAULT_STORE, Store
from advisor.store.migrations import MIGRATIONS

__all__ = [
    "Store", "MIGRATIONS", "CONDITIONS", "DEFAULT_STORE", "RUN_KINDS", "STOP_REASONS",
    "Condition", "RunKind", "StopReason", "CriterionResult", "RunRecord", "TurnRecord", "make_run_key", "now",
    "text_hash",
]
