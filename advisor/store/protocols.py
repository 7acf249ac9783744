"""The store's roles as protocols, and `open_store(url)`: the backend chosen by the URL's scheme.

Three roles, each a `Protocol` the callers are typed against:

- `RunStore`: probe, imported and policy runs and the analysis over them (floors, reports, training data).
  DuckDB (`advisor.store.Store`) only: the embedded default of the probe, reports and training.
- `LiveRecords`: the routing service's decisions and attempts, and the queries over them (drift, live
  training rows, live accept counts). DuckDB for a single-machine ``serve``; PostgreSQL for several replicas.
- `RouterRegistry`: promoted pointers, the artifacts they name and the promotion records. Both backends.

`open_store("advisor.duckdb")` (or ``duckdb:///path``) opens the DuckDB file; ``postgresql://...`` (or
``postgres://``) connects to PostgreSQL (`advisor.store.postgres`). `LiveOverlay` pairs a DuckDB store of runs
with a PostgreSQL store of live records, so that training, drift, floors and the report read both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from advisor.errors import StoreError
from advisor.store._store import Store

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
STORE_URL_ENV = "ADVISOR_STORE_URL"  #: where `advisor serve` and the live commands read a store URL from


@runtime_checkable
class RunStore(Protocol):
    """Runs and the analysis over them (the DuckDB store)."""

    path: str

    def runs(self, **filters: Any) -> list[dict[str, Any]]: ...
    def floor_rows(self, suite_name: str | None = None, **kw: Any) -> list[dict[str, Any]]: ...
    def probe_usable_rates(self) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


@runtime_checkable
class LiveRecords(Protocol):
    """The routing service's records and the queries over them."""

    path: str

    def add_live(self, decisions: Sequence[dict[str, Any]],
                 outcomes: Sequence[dict[str, Any]]) -> tuple[int, int]: ...
    def live_attempt_rows(self) -> list[dict[str, Any]]: ...
    def live_class_summary(self) -> list[dict[str, Any]]: ...
    def live_accept_counts(self, classes: Sequence[str] | None = None,
                           unclassified: bool = False) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


@runtime_checkable
class RouterRegistry(Protocol):
    """Promoted pointers, kept artifacts and promotion records."""

    path: str

    def put_artifact(self, sha256: str, suffix: str, router_version: str, body: bytes) -> bool: ...
    def artifact(self, sha256: str) -> tuple[str, bytes] | None: ...
    def pointer(self, name: str = "promoted") -> dict[str, Any] | None: ...
    def set_pointer(self, sha256: str, router_version: str, promotion_id: str | None,
                    name: str = "promoted") -> None: ...
    def add_promotion(self, row: dict[str, Any]) -> None: ...
    def promotions(self) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


def is_database_url(location: str | Path | None) -> bool:
    """True when `location` names a PostgreSQL database rather than a DuckDB file."""
    return location is not None and str(location).startswith(POSTGRES_SCHEMES)


def duckdb_path(location: str | Path) -> str:
    """The file a DuckDB location names (``duckdb:///abs/path``, ``duckdb://rel/path`` or a plain path)."""
    text = str(location)
    return text[len("duckdb://"):] if text.startswith("duckdb://") else text


def open_store(location: str | Path, read_only: bool = False):
    """Open the store `location` names: a PostgreSQL URL, else a DuckDB file (see the module docstring)."""
    text = str(location)
    if is_database_url(text):
        # lazy: this module is loaded by `import advisor`, which stays light
        from advisor.store.postgres import PostgresStore

        return PostgresStore.open(text, read_only=read_only)
    if "://" in text and not text.startswith("duckdb://"):
        raise StoreError(f"{text.split('://')[0]}://: unknown store scheme; use a DuckDB file (or duckdb://PATH) "
                         "or postgresql://USER@HOST/DB")

    return Store.open(duckdb_path(text), read_only=read_only)


class LiveOverlay:
    """A DuckDB store of runs whose live queries are answered by another store (PostgreSQL).

    Everything not live (runs, floors, probe rates, verifier rates) reads the DuckDB store; decisions,
    attempts and promotions read the live store. Closing closes both.
    """

    _LIVE = ("add_live", "live_attempt_rows", "live_class_summary", "live_accept_counts", "session_outcomes",
             "shadow_decisions", "first_attempts", "add_promotion", "promotions", "put_artifact", "artifact",
             "pointer", "set_pointer")

    def __init__(self, runs: RunStore, live: LiveRecords):
        self.runs_store, self.live_store = runs, live
        self.path = f"{runs.path} + {live.path}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.live_store if name in self._LIVE else self.runs_store, name)

    def close(self) -> None:
        """Close both stores."""
        try:
            self.runs_store.close()
        finally:
            self.live_store.close()

    def __enter__(self) -> "LiveOverlay":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def with_live(store: RunStore, live_url: str | None):
    """`store` itself, or with `live_url` a `LiveOverlay` reading live records from that database."""
    if not live_url:
        return store
    try:
        live = open_store(live_url, read_only=True)
    except BaseException:
        store.close()
        raise
    return LiveOverlay(store, live)
