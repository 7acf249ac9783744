"""Session latches in PostgreSQL: the latch of a service whose store is a PostgreSQL database, shared by every
replica on every host (`advisor.store.latches.LatchStore` is the one-host SQLite file of a DuckDB store).

One row per session in ``advisor_session_latches`` (id, state as JSON, a version, the database clock's epoch
seconds of the last write). A step reads the row (one ``SELECT``), applies its change in Python and writes the
result with **one atomic statement**, an ``INSERT ... ON CONFLICT (id) DO UPDATE ... WHERE version = <the version
read> RETURNING version``: the write lands only if no other replica wrote in between; otherwise the step reads again
and re-applies its change, so concurrent steps of one session on several replicas are serialised without a lock
held across a round trip (after `OPTIMISTIC` lost races the step reads with the row locked, so it cannot starve). A version read by `get` is remembered, so the usual step
(`get`, then `update`) is two statements. Expiry: a row idle for ``ttl_s`` (by the database's clock, so replicas'
clocks need not agree) reads as no session; every 1,000th write of a replica deletes the expired rows and, past
``max_sessions``, the least recently written ones. The table is created on open (``IF NOT EXISTS``).
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import nullcontext
from typing import Any, Callable

from advisor.errors import StoreError
from advisor.store.postgres import connect, redact

TABLE = "advisor_session_latches"
OPTIMISTIC = 3  #: conditional writes tried before a step reads with the row locked
RETRIES = 10  #: tries of a step in all (more lost races happen only when a new session's row is raced: StoreError)
_CREATE_LOCK = 7_246_118  #: pg_advisory_lock key of the table's creation (the store's migrations use 7_246_117)
_CREATE = (f"CREATE TABLE IF NOT EXISTS {TABLE} (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
           "version BIGINT NOT NULL, updated DOUBLE PRECISION NOT NULL)")
_NOW = "extract(epoch from clock_timestamp())"
_READ = f"SELECT state, version, {_NOW} - updated > %s FROM {TABLE} WHERE id = %s"
#: write if the row is absent, or still at the version read (an expired row read as absent: its version too)
_WRITE = (f"INSERT INTO {TABLE} AS t (id, state, version, updated) VALUES (%s, %s, 1, {_NOW}) "
          f"ON CONFLICT (id) DO UPDATE SET state = excluded.state, version = t.version + 1, updated = {_NOW} "
          "WHERE t.version = %s RETURNING version")
_EXPIRE = f"DELETE FROM {TABLE} WHERE updated < {_NOW} - %s"
_EVICT = (f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} ORDER BY updated DESC OFFSET %s)")


class PgLatchStore:
    """Session states (dataclasses of `state_type`) in PostgreSQL, shared by every replica (module docstring)."""

    def __init__(self, url: str, state_type: type, ttl_s: float = 86400.0, max_sessions: int = 100_000):
        self.url, self.path = url, redact(url)
        self.state_type, self.ttl_s, self.max_sessions = state_type, ttl_s, max_sessions
        self._connect = lambda: connect(url)
        self._con = self._connect()
        _create(self._con)
        self._lock = threading.Lock()
        self._known: dict[str, tuple[Any, int]] = {}  #: (state, version) of a session as `get` last read it
        self._writes = 0

    def _run(self, sql: str, params: list[Any]):
        """Execute one statement; a connection lost (the database restarted) is reopened once."""
        # heavy dependency, imported on use: psycopg
        import psycopg

        try:
            return self._con.execute(sql, params)
        except psycopg.OperationalError:
            if not (self._con.closed or self._con.broken):
                raise
            self._con = self._connect()
            return self._con.execute(sql, params)

    def _read(self, sid: str, lock: bool = False) -> tuple[Any, int]:
        row = self._run(_READ + (" FOR UPDATE" if lock else ""), [self.ttl_s, sid]).fetchone()
        if row is None:
            return None, 0
        state, version, expired = row
        return (None if expired else self.state_type(**json.loads(state))), int(version)

    def update(self, sid: str, change: Callable[[Any], Any]) -> Any:
        """Read a session's state, apply `change`, write the result (None: leave it); atomic across replicas
        (a write that lost a race is re-read and `change` applied again: `change` must depend only on its
        argument and the request). After `OPTIMISTIC` lost races the step reads with the row locked (``SELECT ...
        FOR UPDATE`` in a transaction), so a busy session cannot starve one replica's step."""
        with self._lock:
            known = self._known.pop(sid, None)
            for attempt in range(RETRIES):
                locked = attempt >= OPTIMISTIC
                with self._con.transaction() if locked else nullcontext():
                    if known is not None:
                        (old, version), known = known, None
                    else:
                        old, version = self._read(sid, lock=locked)
                    new = change(old)
                    if new is None:
                        return None
                    new.updated = time.time()
                    if self._run(_WRITE, [sid, json.dumps(new.__dict__), version]).fetchone() is not None:
                        self._maintain()
                        return new
            raise StoreError(f"{self.path}: session latch {sid[:80]!r} changed by other replicas {RETRIES} times "
                             "in a row while this step tried to write it")

    def put(self, sid: str, state: Any) -> Any:
        """Write a session's state whatever it was before (a session's first step)."""
        return self.update(sid, lambda old: state)

    def get(self, sid: str) -> Any:
        """A session's state (None when unknown or expired); the version read serves the next `update`."""
        with self._lock:
            old, version = self._read(sid)
            if len(self._known) > 10_000:  # ids read but never updated (a step that failed before its write)
                self._known.clear()
            self._known[sid] = (_copy(old), version)
        return old

    def _maintain(self) -> None:
        self._writes += 1
        if self._writes % 1000 == 0:
            self._run(_EXPIRE, [self.ttl_s])
            self._run(_EVICT, [self.max_sessions])

    def close(self) -> None:
        """Close the connection."""
        self._con.close()


def _create(con) -> None:
    """The table, once: replicas opening together may race on CREATE ... IF NOT EXISTS (a unique violation in
    the catalogue), so it runs under an advisory lock."""
    con.execute("SELECT pg_advisory_lock(%s)", [_CREATE_LOCK])
    try:
        con.execute(_CREATE)
    finally:
        con.execute("SELECT pg_advisory_unlock(%s)", [_CREATE_LOCK])


def _copy(state: Any) -> Any:
    """An independent copy of a state (the caller may change the one `get` returned)."""
    return None if state is None else type(state)(**json.loads(json.dumps(state.__dict__)))
