"""The DuckDB store (the only code that writes SQL): records, forward migrations and the `Store` itself."""

from advisor.store._store import Store, run_to_dict
from advisor.store.migrations import MIGRATIONS
from advisor.store.records import (CONDITIONS, DEFAULT_STORE, RUN_KINDS, STOP_REASONS, CriterionResult, RunRecord,
                                   TurnRecord, make_run_key, now, text_hash)

__all__ = [
    "Store", "run_to_dict", "MIGRATIONS", "CONDITIONS", "DEFAULT_STORE", "RUN_KINDS", "STOP_REASONS",
    "CriterionResult", "RunRecord", "TurnRecord", "make_run_key", "now", "text_hash",
]
