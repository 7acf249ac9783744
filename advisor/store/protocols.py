"""The store's roles as protocols, the stores by URL scheme (`STORES`), and `open_store(url, role)`.

Three roles, each a `Protocol` the callers are typed against:

- `RunStore`: probe, imported and policy runs and the analysis over them (floors, reports, training data).
  DuckDB (`advisor.store.Store`) only: the embedded default of the probe, reports and training.
- `LiveRecords`: the routing service's decisions and attempts, and the queries over them (drift, live
  training rows, live accept counts). DuckDB for a single-machine ``serve``; PostgreSQL for several replicas.
- `RouterRegistry`: promoted pointers, the artifacts they name and the promotion records. Both backends.

`open_store(location, role=...)` opens the store a location names through the `StoreKind` registered for its
scheme in `STORES`: a plain path or ``duckdb:///path`` is the DuckDB file (`advisor.store.Store`),
``postgresql://...`` (or ``postgres://``) is PostgreSQL (`advisor.store.postgres`, registered there); with a
`role`, a store that does not play it is one `StoreError` naming the location. `Reconnecting` keeps one location
open for a long-lived caller and reopens it after the connection broke. `LiveOverlay` pairs a DuckDB store of
runs with a PostgreSQL store of live records, so that training, drift, floors and the report read both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar, runtime_checkable

from advisor.errors import StoreError, did_you_mean
from advisor.registry import Registry
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


@dataclass(frozen=True)
class StoreKind:
    """A registered store: how to open a location of its scheme, and what it is."""

    open: Callable[[str, bool], Any]  #: (location, read_only) -> an open store (closed by its caller)
    description: str = ""


#: Stores by URL scheme (``duckdb`` also serves a plain path); `open_store` looks a location's scheme up here.
STORES: Registry[StoreKind] = Registry("store scheme", builtins=("advisor.store.postgres",),
                                       entry_points="advisor.stores")

R = TypeVar("R")


def scheme_of(location: str | Path) -> str:
    """The scheme a store location names (``duckdb`` for a plain path)."""
    text = str(location)
    return text.split("://", 1)[0] if "://" in text else "duckdb"


def redact(url: str) -> str:
    """A database URL with its password replaced by ``***`` (what logs, errors and /readyz may show)."""
    return re.sub(r"(://[^:/@]+:)[^/]*@", r"\1***@", url)


def is_database_url(location: str | Path | None) -> bool:
    """True when `location` names a PostgreSQL database rather than a DuckDB file."""
    return location is not None and str(location).startswith(POSTGRES_SCHEMES)


def duckdb_path(location: str | Path) -> str:
    """The file a DuckDB location names (``duckdb:///abs/path``, ``duckdb://rel/path`` or a plain path)."""
    text = str(location)
    return text[len("duckdb://"):] if text.startswith("duckdb://") else text


def open_store(location: str | Path, read_only: bool = False, role: type[R] | None = None) -> R | Any:
    """Open the store `location` names, by its scheme's `StoreKind` (see the module docstring); with `role` (a
    protocol of this module), a store that does not play it is refused."""
    scheme = scheme_of(location)
    if scheme not in STORES:
        raise StoreError(f"{scheme}://: unknown store scheme.{did_you_mean(scheme, STORES.names())} Use a DuckDB "
                         "file (or duckdb://PATH) or postgresql://USER@HOST/DB")
    store = STORES.get(scheme).open(str(location), read_only)
    if role is not None and not isinstance(store, role):
        store.close()
        raise StoreError(f"{getattr(store, 'path', location)}: a {scheme} store does not keep "
                         f"{role.__name__} ({(role.__doc__ or '').strip().splitlines()[0]}); give a DuckDB store")
    return store


class Reconnecting:
    """One store location held open for a long-lived caller (a worker's pointer, the live-record shipper):
    opened on first use, closed after a call failed, reopened by the next one."""

    def __init__(self, location: str, *, read_only: bool = False, label: str | None = None):
        self.location, self.read_only = location, read_only
        self.label = label or redact(location)
        self._store: Any = None

    def store(self) -> Any:
        """The open store (opened now if it is not, or if its connection broke)."""
        if self._store is not None and getattr(self._store, "closed", False):
            self.close()
        if self._store is None:
            self._store = open_store(self.location, self.read_only)
        return self._store

    def close(self) -> None:
        """Close the connection (a broken one quietly); the next call reopens it."""
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - a broken connection
                pass

    def ping(self) -> None:
        """Open the store if needed and run one trivial query (raises when the database is not there)."""
        self.store().query("SELECT 1 AS up")

    def call(self, method: str, *args: Any) -> Any:
        """`method(*args)` on the store; a failure of the connection closes it and is one `StoreError` line."""
        try:
            return getattr(self.store(), method)(*args)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - the driver's errors: the database went away mid-call
            self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"{self.label}: {type(exc).__name__}: {first}") from None


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


STORES.add("duckdb", StoreKind(lambda location, read_only: Store.open(duckdb_path(location), read_only=read_only),
                               "a DuckDB file: runs, analysis, and the live records of one machine"))
