"""The PostgreSQL store: the live path of several service replicas (records, promoted pointer, artifacts).

`PostgresStore.open(url)` connects with psycopg 3 and runs the same forward migrations as the DuckDB store
(`advisor.store.migrations`), under an advisory lock so that replicas starting together migrate once. The
connection wrapper translates the DuckDB dialect the shared SQL is written in: ``?`` placeholders become
``%s``, and the type names DOUBLE and BLOB become DOUBLE PRECISION and BYTEA. Live records arrive in batches
(`add_live`: COPY into a temporary table, then ``INSERT ... ON CONFLICT DO NOTHING`` keyed by decision id and
attempt, so a batch sent twice adds nothing); the live queries and the router registry are the same mixins
the DuckDB store uses. Probe runs, reports and training data stay in DuckDB (the embedded default).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Sequence

from advisor.errors import RecordsRejected, StoreError, first_line
from advisor.records import now, plain
from advisor.store._capture_queries import CaptureQueries, add_captures
from advisor.store._live_queries import LiveQueries
from advisor.store._registry_queries import RegistryQueries
from advisor.store._session_queries import SessionQueries
from advisor.store.migrations import MIGRATIONS
from advisor.store.protocols import STORES, StoreKind, redact

_MIGRATION_LOCK = 7_246_117  #: pg_advisory_lock key: one migrating replica at a time
_TYPES = [(re.compile(r"\bDOUBLE\b(?!\s+PRECISION)"), "DOUBLE PRECISION"), (re.compile(r"\bBLOB\b"), "BYTEA")]


def translate(sql: str, with_params: bool = True) -> str:
    """DuckDB-dialect SQL as PostgreSQL takes it through psycopg (placeholders, two type names; psycopg reads
    ``%`` as a placeholder only when parameters are given)."""
    if with_params:
        sql = sql.replace("%", "%%").replace("?", "%s")
    for pattern, name in _TYPES:
        sql = pattern.sub(name, sql)
    return sql


def _plain_number(value: Any) -> Any:
    """PostgreSQL's numeric (an average of integers) as the float DuckDB returns."""
    return float(value) if isinstance(value, Decimal) else value


class _Connection:
    """A psycopg connection (autocommit) that takes the shared DuckDB-dialect SQL."""

    def __init__(self, con):
        self.raw = con

    def execute(self, sql: str, params: Sequence[Any] | None = None):
        if not params:
            return self.raw.execute(translate(sql, with_params=False))
        return self.raw.execute(translate(sql), [plain(p) for p in params])


def connect(url: str, timeout_s: float = 5.0):
    """A psycopg connection to `url` (autocommit); StoreError naming the (redacted) URL when it fails."""
    try:
        # heavy dependency, imported on use: psycopg
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg: pip install 'advisor[postgres]'") from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout_s)))
    except psycopg.Error as exc:
        raise StoreError(f"{redact(url)}: cannot connect to PostgreSQL ({str(exc).strip().splitlines()[0]})") from None


class PostgresStore(LiveQueries, CaptureQueries, SessionQueries, RegistryQueries):
    """A PostgreSQL database holding the live tables (see the module docstring)."""

    def __init__(self, con, url: str):
        self._con = _Connection(con)
        self.url = url
        self.path = redact(url)  #: what messages name (never the password)

    @classmethod
    def open(cls, url: str, read_only: bool = False) -> "PostgresStore":
        """Connect and migrate forward (a read-only open checks the schema is not newer than this advisor)."""
        store = cls(connect(url), url)
        try:
            store.migrate() if not read_only else store._check_version()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Close the connection."""
        self._con.raw.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once the connection is closed or broken."""
        return bool(self._con.raw.closed or self._con.raw.broken)

    # ----------------------------------------------------------------- reading
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, map(_plain_number, row))) for row in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Read-only SQL for tests and ad-hoc inspection (SELECT only); rows as dicts."""
        if not sql.lstrip().lower().startswith(("select", "with")):
            raise StoreError("PostgresStore.query runs SELECT statements only")
        return self._rows(sql, params)

    def probe_usable_rates(self) -> list[dict[str, Any]]:
        """Probe runs live in the DuckDB store; a PostgreSQL store has none (see `advisor.store.LiveOverlay`)."""
        return []

    def probe_run_turns(self, ladder_name: str) -> list[dict[str, Any]]:
        """Probe runs live in the DuckDB store; a PostgreSQL store has none."""
        return []

    def session_outcomes(self) -> list[dict[str, Any]]:
        """`SessionQueries.session_outcomes` in PostgreSQL's words (no arg_min/arg_max: ordered array_agg)."""
        if not self._has_column("session_id"):
            return []
        return self._rows("""
            SELECT session_id, (array_agg(task_class ORDER BY session_step))[1] AS task_class,
                   (array_agg(session_start_rung ORDER BY session_step))[1] AS start_rung,
                   (array_agg(coalesce(final_rung, chosen_rung) ORDER BY session_step DESC))[1] AS final_rung,
                   max(session_step) AS steps, count(escalation) AS escalations,
                   string_agg(split_part(escalation, ' ', 1), ',' ORDER BY session_step) AS reasons,
                   sum(total_cost_usd) AS cost_usd, bool_or(coalesce(simulated, false)) AS simulated,
                   min(created_at) AS first, max(created_at) AS last
            FROM routing_decisions WHERE session_id IS NOT NULL GROUP BY session_id ORDER BY first""")

    # ----------------------------------------------------------------- migrations
    def applied_migrations(self) -> list[str]:
        """Names of the migrations this database has, in order."""
        if not self._rows("SELECT 1 AS x FROM information_schema.tables WHERE table_name = '_migrations' "
                          "AND table_schema = current_schema()"):
            return []
        return [r["name"] for r in self._rows("SELECT name FROM _migrations ORDER BY id")]

    def _check_version(self) -> list[str]:
        applied = self.applied_migrations()
        unknown = [a for a in applied if a not in {name for name, _ in MIGRATIONS}]
        if unknown:
            raise StoreError(f"{self.path}: written by a newer advisor (migrations {', '.join(unknown)}); "
                             "upgrade advisor to use it")
        return applied

    def migrate(self) -> list[str]:
        """Run every migration the database lacks, each in its own transaction; return the ones applied."""
        raw = self._con.raw
        raw.execute("SELECT pg_advisory_lock(%s)", [_MIGRATION_LOCK])
        try:
            applied = self._check_version()
            raw.execute("CREATE TABLE IF NOT EXISTS _migrations (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                        "applied_at TIMESTAMP NOT NULL)")
            done = []
            for i, (name, fn) in enumerate(MIGRATIONS, start=1):
                if name in applied:
                    continue
                with raw.transaction():
                    fn(self._con)
                    self._con.execute("INSERT INTO _migrations VALUES (?, ?, ?)", [i, name, now()])
                done.append(name)
            return done
        finally:
            raw.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATION_LOCK])

    # ----------------------------------------------------------------- live records
    def add_live(self, decisions: Sequence[dict[str, Any]], outcomes: Sequence[dict[str, Any]],
                 captures: Sequence[dict[str, Any]] = ()) -> tuple[int, int]:
        """Record decisions and attempts (dicts keyed by column), and captured steps, in one transaction; rows
        already present (same decision id / attempt) are skipped. Returns (decisions, attempts) newly added."""
        # heavy dependency, imported on use: psycopg
        import psycopg

        raw = self._con.raw
        added = []
        try:
            with raw.transaction():
                for table, rows in (("routing_decisions", decisions), ("live_outcomes", outcomes)):
                    if not rows:
                        added.append(0)
                        continue
                    columns = list(dict.fromkeys(k for r in rows for k in r))
                    cols = ", ".join(columns)
                    raw.execute(f"CREATE TEMP TABLE IF NOT EXISTS _in_{table} (LIKE {table}) ON COMMIT DELETE ROWS")
                    with raw.cursor() as cur:
                        with cur.copy(f"COPY _in_{table} ({cols}) FROM STDIN") as copy:
                            for r in rows:
                                copy.write_row([plain(r.get(c)) for c in columns])
                        cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _in_{table} "
                                    "ON CONFLICT DO NOTHING")
                        added.append(cur.rowcount)
                if captures:
                    add_captures(self._con, captures)
        except (psycopg.errors.DataError, psycopg.errors.IntegrityError,
                psycopg.errors.UndefinedColumn) as exc:  # what the rows hold
            raise RecordsRejected(f"{self.path}: {type(exc).__name__}: {first_line(exc)}") from None
        return added[0], added[1]


def _open(url: str, read_only: bool) -> PostgresStore:
    return PostgresStore.open(url, read_only=read_only)


for _scheme in ("postgresql", "postgres"):
    STORES.add(_scheme, StoreKind(_open, "PostgreSQL: the live records and router registry of several replicas",
                                  shared=True))
