"""The store's roles as protocols, the stores by URL scheme (`STORES`), and `open_store(url, role)`.

Three roles, each a `Protocol` the callers are typed against and declaring every method a caller outside
`advisor.store` uses through it (with the DuckDB store's signatures):

- `RunStore`: probe, imported and policy runs and the analysis over them (floors, reports, training data,
  judge and verifier measurements). DuckDB (`advisor.store.Store`) only: the embedded default of the probe,
  reports and training.
- `LiveRecords`: the routing service's decisions and attempts, and the queries over them (drift, live
  training rows, live accept counts, sessions, shadow decisions). DuckDB for a single-machine ``serve``;
  PostgreSQL for several replicas.
- `RouterRegistry`: promoted pointers, the artifacts they name and the promotion records. Both backends.

The DuckDB store's other public methods are store-internal (`STORE_INTERNAL` says what each is for).

`open_store(location, role=...)` opens the store a location names through the `StoreKind` registered for its
scheme in `STORES`: a plain path or ``duckdb:///path`` is the DuckDB file (`advisor.store.Store`),
``postgresql://...`` (or ``postgres://``) is PostgreSQL (`advisor.store.postgres`, registered there); with a
`role`, a store that does not play it is one `StoreError` naming the location. A `StoreKind` also says whether
its locations are a shared database server (`is_database_url` asks it) or a local file. `Reconnecting` keeps
one location open for a long-lived caller and reopens it after the connection broke. `LiveOverlay` pairs a
DuckDB store of runs with a PostgreSQL store of live records, so that training, drift, floors and the report
read both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence, TypeVar, runtime_checkable

from advisor.errors import StoreError, did_you_mean, first_line
from advisor.records import FLOOR_KINDS, CriterionResult, RunRecord, TurnRecord
from advisor.registry import Registry
from advisor.store._store import Store

STORE_URL_ENV = "ADVISOR_STORE_URL"  #: where `advisor serve` and the live commands read a store URL from


@runtime_checkable
class _Handle(Protocol):
    """What every store is: a `path` its messages name, and `close`."""

    path: str

    def close(self) -> None: ...


@runtime_checkable
class RunStore(_Handle, Protocol):
    """Runs and the analysis over them (the DuckDB store)."""

    # ----------------------------------------------------------------- recording runs and their configuration
    def record_ladder(self, ladder) -> str: ...
    def record_suite(self, name: str, suite_hash: str, source: str, config: Any,
                     tasks: Iterable[tuple[str, str, bool, str | None]],
                     prompts: Iterable[tuple[str, str]] = ()) -> None: ...
    def record_import(self, ladder, suite_name: str, suite_hash: str, source: str, config: Any,
                      tasks: Iterable[tuple[str, str, bool, str | None]], prompts: Iterable[tuple[str, str]],
                      runs: Sequence[RunRecord]) -> int: ...
    def add_run(self, run: RunRecord, turns: Sequence[TurnRecord] = (),
                criteria: Sequence[CriterionResult] = (), policy_calls: Sequence[Any] = ()) -> bool: ...
    def delete_runs(self, run_keys: Iterable[str]) -> int: ...
    # ----------------------------------------------------------------- runs and what was recorded with them
    def run_keys(self, kind: str | None = None, suite_hash: str | None = None,
                 ladder_hash: str | None = None) -> set[str]: ...
    def runs(self, **filters: Any) -> list[dict[str, Any]]: ...
    def turn_rows(self, run_key: str) -> list[dict[str, Any]]: ...
    def criterion_rows(self, run_key: str) -> list[dict[str, Any]]: ...
    def prompt_texts(self, hashes: Iterable[str]) -> dict[str, str]: ...
    def ladder_config(self, ladder_hash: str) -> dict | None: ...
    def suite_config(self, suite_name: str) -> dict[str, Any] | None: ...
    def scored_run_rows(self, suite_name: str) -> list[dict[str, Any]]: ...
    def suite_class_verifiers(self, suite_name: str) -> dict[str, bool]: ...
    def run_counts(self) -> list[dict[str, Any]]: ...
    def applied_migrations(self) -> list[str]: ...
    def export_parquet(self, folder: str | Path) -> list[Path]: ...
    # ----------------------------------------------------------------- floors and the sizing report
    def suite_names(self, kinds: Sequence[str] = FLOOR_KINDS) -> list[str]: ...
    def ladder_names(self, suite_name: str, kinds: Sequence[str] = FLOOR_KINDS) -> list[str]: ...
    def floor_rows(self, suite_name: str | None = None, *, suite_hash: str | None = None,
                   ladder_hash: str | None = None, kinds: Sequence[str] = FLOOR_KINDS,
                   classes: Sequence[str] | None = None, backend_errors: bool = True) -> list[dict[str, Any]]: ...
    def rung_order(self, suite_name: str, classes: Sequence[str] | None = None) -> list[str]: ...
    def paired_task_count(self, suite_name: str, classes: Sequence[str] | None = None) -> int: ...
    def rung_table(self, suite_name: str, bar: float, near_zero: float, classes: Sequence[str] | None = None,
                   paired_only: bool = False) -> list[dict[str, Any]]: ...
    def overall_scores(self, suite_name: str, classes: Sequence[str] | None = None) -> list[dict[str, Any]]: ...
    def unscored_groups(self, suite_name: str, classes: Sequence[str] | None = None) -> list[dict[str, Any]]: ...
    def step_down_pairs(self, suite_name: str, bar: float, near_zero: float,
                        classes: Sequence[str] | None = None) -> list[dict[str, Any]]: ...
    def run_provenance(self, suite_name: str, classes: Sequence[str] | None = None) -> dict[str, Any]: ...
    # ----------------------------------------------------------------- policy runs
    def rung_facts(self, ladder_name: str) -> list[dict[str, Any]]: ...
    def arm_rows(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]: ...
    def expert_call_counts(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]: ...
    def verifier_counts(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]: ...
    def policy_ladder_hashes(self, suite_name: str) -> list[str]: ...
    # ----------------------------------------------------------------- probe runs read beside live traffic
    def probe_usable_rates(self) -> list[dict[str, Any]]: ...
    def probe_run_turns(self, ladder_name: str) -> list[dict[str, Any]]: ...
    # ----------------------------------------------------------------- judges and verifiers against the runs
    def scored_suite_runs(self, suite_name: str, limit: int | None = None) -> list[dict[str, Any]]: ...
    def add_judge_agreement(self, judge: str, judge_hash: str, suite_name: str, runs: int, positives: int,
                            negatives: int, false_accept: float | None, false_reject: float | None, unparsed: int,
                            simulated: bool, detail: dict[str, Any]) -> None: ...
    def judge_agreements(self, judge: str | None = None) -> list[dict[str, Any]]: ...
    def verifier_probe_runs(self, task_class: str, *, ladder_name: str | None = None,
                            suite_name: str | None = None) -> list[dict[str, Any]]: ...
    def turns_of_runs(self, run_keys: Iterable[str]) -> dict[str, list[dict[str, Any]]]: ...
    def add_verifier_rates(self, rows: Sequence[dict[str, Any]]) -> None: ...
    def verifier_rate_rows(self, task_class: str | None = None) -> list[dict[str, Any]]: ...
    def latest_verifier_rates(self, verifier_hashes: dict[str, str]) -> dict[str, list[dict[str, Any]]]: ...


@runtime_checkable
class LiveRecords(_Handle, Protocol):
    """The routing service's records and the queries over them."""

    def add_live(self, decisions: Sequence[dict[str, Any]], outcomes: Sequence[dict[str, Any]],
                 captures: Sequence[dict[str, Any]] = ()) -> tuple[int, int]: ...
    def captured_steps(self, tenant: str | None = None, since=None, until=None) -> list[dict[str, Any]]: ...
    def capture_counts(self) -> list[dict[str, Any]]: ...
    def served_cost(self, decision_ids: Sequence[str]) -> list[dict[str, Any]]: ...
    def live_counts(self) -> tuple[int, int]: ...
    def live_attempt_rows(self) -> list[dict[str, Any]]: ...
    def live_class_summary(self) -> list[dict[str, Any]]: ...
    def live_accept_counts(self, classes: Sequence[str] | None = None,
                           unclassified: bool = False) -> list[dict[str, Any]]: ...
    def session_outcomes(self) -> list[dict[str, Any]]: ...
    def shadow_decisions(self, version: str | None = None) -> list[dict[str, Any]]: ...
    def first_attempts(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class RouterRegistry(_Handle, Protocol):
    """Promoted pointers, kept artifacts and promotion records."""

    def put_artifact(self, sha256: str, suffix: str, router_version: str, body: bytes) -> bool: ...
    def artifact(self, sha256: str) -> tuple[str, bytes] | None: ...
    def pointer(self, name: str = "promoted") -> dict[str, Any] | None: ...
    def set_pointer(self, sha256: str, router_version: str, promotion_id: str | None,
                    name: str = "promoted") -> None: ...
    def add_promotion(self, row: dict[str, Any]) -> None: ...
    def promotions(self) -> list[dict[str, Any]]: ...


ROLES = (RunStore, LiveRecords, RouterRegistry)

#: Public methods of the DuckDB `Store` that no role declares, because no caller outside `advisor.store` uses
#: them (tests may): what each is for. A method a caller outside needs goes on its role instead
#: (`tests/test_store_protocols.py` checks both).
STORE_INTERNAL = {
    "open": "the constructor: callers open a location through `open_store` and its registered `StoreKind`",
    "migrate": "run by `Store.open`",
    "query": "ad-hoc SELECTs for tests and inspection; `Reconnecting.ping` runs one",
    "add_runs_bulk": "the runs of `record_import`, in one statement (tests seed stores with it)",
    "count_runs": "tests",
    "policy_call_rows": "tests",
}


def role_methods(role: type) -> frozenset[str]:
    """The methods a role protocol declares, with those of the protocols it extends (``close``)."""
    return frozenset(name for klass in role.__mro__ for name, value in vars(klass).items()
                     if not name.startswith("_") and callable(value))


@dataclass(frozen=True)
class StoreKind:
    """A registered store: how to open a location of its scheme, and what it is."""

    open: Callable[[str, bool], Any]  #: (location, read_only) -> an open store (closed by its caller)
    description: str = ""
    #: True for a database server that every process and host reaches by its URL (each service worker ships
    #: its records there, the promoted pointer is a row in it, the spool is ``advisor-spool``); False for a
    #: local store that one process opens (records are ingested from a spool beside it, the pointer is a file
    #: beside it)
    shared: bool = False


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
    """True when `location` names a shared database server (its scheme's `StoreKind` says ``shared``, as
    PostgreSQL's does) rather than a local store file; False for an unknown scheme (`open_store` names it)."""
    if location is None:
        return False
    scheme = scheme_of(location)
    return scheme in STORES and STORES.get(scheme).shared


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
            raise StoreError(f"{self.label}: {type(exc).__name__}: {first_line(exc)}") from None


class LiveOverlay:
    """A DuckDB store of runs whose live queries are answered by another store (PostgreSQL).

    Everything not live (runs, floors, probe rates, verifier rates) reads the DuckDB store; decisions,
    attempts and promotions read the live store. Closing closes both.
    """

    #: what the live store answers: the methods of its roles (`close` closes both)
    _LIVE = (role_methods(LiveRecords) | role_methods(RouterRegistry)) - role_methods(_Handle)

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
        live = open_store(live_url, read_only=True, role=LiveRecords)
    except BaseException:
        store.close()
        raise
    return LiveOverlay(store, live)


STORES.add("duckdb", StoreKind(lambda location, read_only: Store.open(duckdb_path(location), read_only=read_only),
                               "a DuckDB file: runs, analysis, and the live records of one machine"))
