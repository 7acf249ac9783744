"""The store (the only code that writes SQL): forward migrations, the DuckDB `Store`, the PostgreSQL store of the
live path, the store's roles as protocols, the stores by URL scheme (`STORES`) and `open_store(url, role=...)`
(see `advisor.store.protocols`).

The record types it stores live in `advisor.records` (the bottom layer) and are re-exported here.
"""

from advisor.records import (CONDITIONS, RUN_KINDS, STOP_REASONS, Condition, CriterionResult, RunKind, RunRecord,
                             StopReason, TurnRecord, make_run_key, now, text_hash)
from advisor.store._store import DEFAULT_STORE, Store
from advisor.store.migrations import MIGRATIONS
from advisor.store.protocols import (STORE_URL_ENV, STORES, LiveOverlay, LiveRecords, Reconnecting, RouterRegistry,
                                     RunStore, StoreKind, is_database_url, open_store, scheme_of, with_live)

__all__ = [
    "Store", "MIGRATIONS", "CONDITIONS", "DEFAULT_STORE", "RUN_KINDS", "STOP_REASONS",
    "Condition", "RunKind", "StopReason", "CriterionResult", "RunRecord", "TurnRecord", "make_run_key", "now",
    "text_hash", "open_store", "is_database_url", "with_live", "LiveOverlay", "RunStore", "LiveRecords",
    "RouterRegistry", "STORE_URL_ENV", "STORES", "StoreKind", "Reconnecting", "scheme_of",
]
