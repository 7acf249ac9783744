"""The DuckDB store: the one package that owns the advisor's SQL.

One database file holds ladders, suites, tasks, runs (probe, imported and live), per-turn detail, criterion
results, routing decisions and live outcomes. Migrations (`advisor.store.migrations`) run forward on open.
Writes are transactional per run: a crash loses at most the run in flight, and run keys are idempotent, so a
rerun resumes without duplicates.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from advisor.errors import RecordsRejected, StoreError, first_line
from advisor.records import CriterionResult, RunRecord, TurnRecord, now, plain
from advisor.store._damaged import CheckedConnection, damaged, is_damage
from advisor.store._agreement_queries import AgreementQueries
from advisor.store._capture_queries import CaptureQueries, add_captures
from advisor.store._live_queries import LiveQueries
from advisor.store._policy_queries import PolicyQueries
from advisor.store._queries import Queries
from advisor.store._registry_queries import RegistryQueries
from advisor.store._session_queries import SessionQueries
from advisor.store.migrations import MIGRATIONS

DEFAULT_STORE = "advisor.duckdb"

_RUN_COLUMNS = [f.name for f in fields(RunRecord)]
_TURN_COLUMNS = ["run_key", "turn", "action", "arguments_json", "observation", "input_tokens", "output_tokens",
                 "latency_s", "finish_reason"]
_CRITERION_COLUMNS = ["run_key", "checklist", "criterion", "weight", "score", "detail"]
_POLICY_CALL_COLUMNS = ["run_key", "seq", "round", "model", "role", "input_tokens", "output_tokens", "cost_usd",
                        "latency_s", "respects", "verdict", "accepted", "usable"]
_RUNG_COLUMNS = ["ladder_hash", "name", "position", "role", "hf_id", "triton_model", "params_total_b",
                 "params_active_b", "usd_per_m_input", "usd_per_m_output", "price_basis", "simulated", "self_hosted",
                 "data_leaves_org"]
_TASK_COLUMNS = ["suite_hash", "task_id", "task_class", "has_skill", "prompt_hash"]
_PROMPT_COLUMNS = ["prompt_hash", "prompt_text"]


_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  #: at byte 8 of every DuckDB database file


def _check_store_file(path: str) -> None:
    """Refuse, by its first bytes, a file that is not a DuckDB database (before DuckDB opens or rewrites it)."""
    if path == ":memory:":
        return
    p = Path(path)
    if p.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file; name a file with --store")
    if not p.exists():
        return
    try:
        with p.open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc.strerror})") from None
    if not head:
        return  # an empty file: DuckDB makes it a new store
    if head.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path}: is a SQLite database, not an advisor store (DuckDB); name another file with "
                         "--store")
    if head[8:12] != _DUCKDB_MAGIC:
        raise StoreError(f"{path}: not a DuckDB store (no DuckDB header: a corrupt or different kind of file); "
                         "move it away or name another file with --store")


class Store(Queries, LiveQueries, CaptureQueries, PolicyQueries, AgreementQueries, SessionQueries, RegistryQueries):
    """A DuckDB store file. Open with `Store.open(path)`; use as a context manager to close it."""

    def __init__(self, con, path: str):
        self._con = con
        self.path = path
        self._in_transaction = False

    # ----------------------------------------------------------------- opening and migrations
    @classmethod
    def open(cls, path: str | Path = DEFAULT_STORE, read_only: bool = False) -> "Store":
        """Open (creating if needed) and migrate the store at `path`."""
        # heavy dependency, imported on use: duckdb
        import duckdb

        path = str(path)
        if read_only and path != ":memory:" and not Path(path).exists():
            raise StoreError(f"{path}: no store here yet (run `advisor probe` or `advisor import` first)")
        _check_store_file(path)
        try:  # never fetch an extension: a store file needs none, and a download is not what the user asked
            con = duckdb.connect(path, read_only=read_only, config={"autoinstall_known_extensions": False})
        except duckdb.IOException as exc:
            reason = str(exc).splitlines()[0]
            if is_damage(exc):
                raise damaged(path, exc) from None
            if "lock" in reason.lower():
                raise StoreError(f"{path}: the store is in use ({reason}). Is another advisor process using "
                                 "it? Wait for it to finish or use another --store") from None
            raise StoreError(f"{path}: cannot open the store ({reason}); check the file and its folder") from None
        except duckdb.Error as exc:
            if is_damage(exc):
                raise damaged(path, exc) from None
            raise StoreError(f"{path}: not a DuckDB store ({str(exc).splitlines()[0]})") from None
        store = cls(CheckedConnection(con, path), path)
        if not read_only:
            store.migrate()
        else:
            store._check_version()
        return store

    def close(self) -> None:
        """Close the connection (checkpointing the file)."""
        self._con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def applied_migrations(self) -> list[str]:
        """Names of the migrations this file has, in order."""
        con = self._con
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = '_migrations'").fetchall()[0][0]
        if not exists:
            return []
        return [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY id").fetchall()]

    def _check_version(self) -> list[str]:
        applied = self.applied_migrations()
        known = [name for name, _ in MIGRATIONS]
        unknown = [a for a in applied if a not in known]
        if unknown:
            raise StoreError(f"{self.path}: written by a newer advisor (migrations {', '.join(unknown)}); "
                             "upgrade advisor to read it")
        return applied

    def migrate(self) -> list[str]:
        """Run every migration this file lacks, each in its own transaction; return the ones applied."""
        con = self._con
        applied = self._check_version()
        con.execute("CREATE TABLE IF NOT EXISTS _migrations (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                    "applied_at TIMESTAMP NOT NULL)")
        done = []
        for i, (name, fn) in enumerate(MIGRATIONS, start=1):
            if name in applied:
                continue
            with self._transaction():
                fn(con)
                con.execute("INSERT INTO _migrations VALUES (?, ?, ?)", [i, name, now()])
            done.append(name)
        return done

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        """One transaction: committed when the block ends, rolled back when it raises. Nested blocks join the
        outer transaction (DuckDB has no nested transactions)."""
        if self._in_transaction:
            yield self._con
            return
        self._con.execute("BEGIN TRANSACTION")
        self._in_transaction = True
        try:
            yield self._con
        except BaseException:
            self._in_transaction = False
            self._con.execute("ROLLBACK")
            raise
        self._in_transaction = False
        self._con.execute("COMMIT")

    # ----------------------------------------------------------------- configuration records
    def record_ladder(self, ladder) -> str:
        """Record a ladder, its rungs and its roles (idempotent); return its config hash."""
        h = ladder.config_hash()
        with self._transaction() as con:
            con.execute("INSERT INTO ladders VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        [h, ladder.name, ladder.simulated, json.dumps(ladder.model_dump(mode="json")), now()])
            roles = [(m, "rung", i) for i, m in enumerate(ladder.rungs)]
            roles += [(m, role, -1) for role, m in (("orchestrator", ladder.roles.orchestrator),
                                                      ("judge", ladder.roles.judge)) if m is not None]
            rows = []
            for m, role, pos in roles:
                pin, pout = m.price.per_token()
                rows.append([h, m.name, pos, role, m.hf_id, m.model_id, m.params_total_b, m.params_active_b,
                             pin * 1e6, pout * 1e6, m.price.basis, m.simulated, m.self_hosted, m.data_leaves_org])
            self._insert_values("rungs", _RUNG_COLUMNS, rows, on_conflict_skip=True)
        return h

    def record_suite(self, name: str, suite_hash: str, source: str, config: Any,
                     tasks: Iterable[tuple[str, str, bool, str | None]],
                     prompts: Iterable[tuple[str, str]] = ()) -> None:
        """Record a suite, its tasks ``(task_id, class, has_skill, prompt_hash)`` and prompt texts (idempotent)."""
        with self._transaction() as con:
            con.execute("INSERT INTO suites VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        [suite_hash, name, source, json.dumps(config, default=str), now()])
            self._bulk_insert("tasks", [[suite_hash, tid, cls, bool(skill), ph] for tid, cls, skill, ph in tasks],
                              _TASK_COLUMNS)
            self._bulk_insert("prompts", [list(p) for p in prompts], _PROMPT_COLUMNS)

    def record_import(self, ladder, suite_name: str, suite_hash: str, source: str, config: Any,
                      tasks: Iterable[tuple[str, str, bool, str | None]], prompts: Iterable[tuple[str, str]],
                      runs: Sequence[RunRecord]) -> int:
        """Record an import (ladder, suite, tasks, prompt texts and runs) in ONE transaction: all or nothing.

        Rows already stored are skipped (idempotent re-import); returns the number of runs added.
        """
        with self._transaction():
            self.record_ladder(ladder)
            self.record_suite(suite_name, suite_hash, source, config, tasks, prompts)
            return self.add_runs_bulk(runs)

    def _bulk_insert(self, table: str, rows: list[list[Any]], columns: Sequence[str]) -> None:
        """INSERT ... ON CONFLICT DO NOTHING of many rows through an Arrow table (executemany is row by row)."""
        if not rows:
            return
        try:
            # heavy dependency, imported on use: pyarrow
            import pyarrow as pa
        except ImportError:  # pragma: no cover - pyarrow is in the test and parquet extras
            for start in range(0, len(rows), 500):
                self._insert_values(table, columns, rows[start:start + 500], on_conflict_skip=True)
            return
        batch = pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})
        self._con.register("_bulk_rows", batch)
        cols = ", ".join(columns)
        try:
            self._con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _bulk_rows ON CONFLICT DO NOTHING")
        except BaseException:
            with contextlib.suppress(Exception):  # an aborted transaction refuses this too: the INSERT's error counts
                self._con.unregister("_bulk_rows")
            raise
        self._con.unregister("_bulk_rows")

    def _insert_values(self, table: str, columns: Sequence[str], rows: list[list[Any]],
                       on_conflict_skip: bool = False) -> None:
        """One multi-row ``INSERT ... VALUES (...), (...)`` (DuckDB's executemany runs row by row, ~10x slower)."""
        if not rows:
            return
        one = "(" + ", ".join("?" for _ in columns) + ")"
        conflict = " ON CONFLICT DO NOTHING" if on_conflict_skip else ""
        self._con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join(one for _ in rows)}{conflict}",
                          [plain(v) for row in rows for v in row])

    # ----------------------------------------------------------------- runs
    def add_run(self, run: RunRecord, turns: Sequence[TurnRecord] = (),
                criteria: Sequence[CriterionResult] = (), policy_calls: Sequence[Any] = ()) -> bool:
        """Insert one run with its turns, criterion results and (policy runs) model calls in one transaction.

        `policy_calls` are `advisor.orchestrator.loop.PolicyCall`s: which model each call went to, its tokens
        and cost (table ``policy_calls``).

        Returns False (and writes nothing) when a run with the same key is already stored.
        """
        with self._transaction() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_key = ?", [run.run_key]).fetchall():
                return False
            self._insert_values("runs", _RUN_COLUMNS, [_run_row(run)])
            self._insert_values("turns", _TURN_COLUMNS,
                                [[run.run_key, t.turn, t.action, t.arguments_json, t.observation, t.input_tokens,
                                  t.output_tokens, t.latency_s, t.finish_reason] for t in turns])
            self._insert_values("criterion_results", _CRITERION_COLUMNS,
                                [[run.run_key, c.checklist, c.criterion, c.weight, c.score, c.detail]
                                 for c in criteria], on_conflict_skip=True)
            self._insert_values("policy_calls", _POLICY_CALL_COLUMNS,
                                [[run.run_key, *(getattr(c, k) for k in _POLICY_CALL_COLUMNS[1:])] for c in policy_calls])
        return True

    def add_runs_bulk(self, runs: Sequence[RunRecord]) -> int:
        """Insert many runs (e.g. an import) in one transaction, skipping keys already stored; return the count added."""
        if not runs:
            return 0
        with self._transaction() as con:
            before = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
            self._bulk_insert("runs", [_run_row(r) for r in runs], _RUN_COLUMNS)
            after = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        return after - before

    def delete_runs(self, run_keys: Iterable[str]) -> int:
        """Delete runs (and their detail) by key, e.g. backend errors to be retried; return the count."""
        keys = list(run_keys)
        if not keys:
            return 0
        with self._transaction() as con:
            for table in ("turns", "criterion_results", "policy_calls", "runs"):
                con.execute(f"DELETE FROM {table} WHERE run_key IN (SELECT unnest(?))", [keys])
        return len(keys)

    # ----------------------------------------------------------------- judge agreement
    def add_judge_agreement(self, judge: str, judge_hash: str, suite_name: str, runs: int, positives: int,
                            negatives: int, false_accept: float | None, false_reject: float | None, unparsed: int,
                            simulated: bool, detail: dict[str, Any]) -> None:
        """Append one measurement of a judge against deterministic checks (`advisor.checks.agreement`)."""
        self._con.execute("INSERT INTO judge_agreement VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          [now(), judge, judge_hash, suite_name, runs, positives + negatives, positives, negatives,
                           false_accept, false_reject, unparsed, simulated, json.dumps(detail, default=str)])

    def judge_agreements(self, judge: str | None = None) -> list[dict[str, Any]]:
        """Stored judge measurements, newest first (optionally of one judge)."""
        where, params = (" WHERE judge = ?", [judge]) if judge else ("", [])
        return self.query(f"SELECT * FROM judge_agreement{where} ORDER BY measured_at DESC", params)

    # ----------------------------------------------------------------- routing
    def add_live(self, decisions: Sequence[dict[str, Any]], outcomes: Sequence[dict[str, Any]],
                 captures: Sequence[dict[str, Any]] = ()) -> tuple[int, int]:
        """Record the routing service's decisions and attempts (dicts keyed by column), and its captured steps
        (`advisor.store._capture_queries.add_captures`), in one transaction.

        Idempotent: rows already present (same decision id / attempt) are skipped, so a segment ingested twice
        adds nothing. Returns (decisions, attempts) newly added.
        """
        # heavy dependency, imported on use: duckdb
        import duckdb

        # what the rows hold (pyarrow's ArrowInvalid and ArrowTypeError are a ValueError and a TypeError)
        refused = (duckdb.ConversionException, duckdb.BinderException, duckdb.ConstraintException,
                   duckdb.InvalidInputException, duckdb.TypeMismatchException, duckdb.CatalogException, TypeError,
                   ValueError)
        before = self.live_counts()
        try:
            with self._transaction():
                for table, rows in (("routing_decisions", decisions), ("live_outcomes", outcomes)):
                    if not rows:
                        continue
                    columns = list(dict.fromkeys(k for r in rows for k in r))
                    self._bulk_insert(table, [[r.get(c) for c in columns] for r in rows], columns)
                if captures:
                    add_captures(self._con, captures)
        except refused as exc:
            raise RecordsRejected(f"{self.path}: {type(exc).__name__}: {first_line(exc)}") from None
        after = self.live_counts()
        return after[0] - before[0], after[1] - before[1]

    # ----------------------------------------------------------------- export
    def export_parquet(self, folder: str | Path) -> list[Path]:
        """Write every table to ``folder/<table>.parquet``; return the files."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = []
        for (table,) in self._con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall():
            path = folder / f"{table}.parquet"
            self._con.execute(f"COPY {table} TO '{path}' (FORMAT PARQUET)")
            out.append(path)
        return out



def _run_row(run: RunRecord) -> list[Any]:
    return [plain(getattr(run, c)) for c in _RUN_COLUMNS]
