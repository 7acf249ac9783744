"""The routing service's session latches: a small SQLite map shared by the workers of one service.

The store (DuckDB) is written only through the spool's segments, long after a request; a session's latch must be
read and changed by the next step, on whichever worker it lands. So each session's state (`advisor.service.
sessions.SessionState`, as JSON) lives in one SQLite file beside the spool, changed in an ``IMMEDIATE``
transaction per step (WAL journal, ``synchronous=NORMAL``: no fsync per commit). Idle sessions expire after
``ttl_s``; every 1,000th write deletes the expired ones. At most ``max_sessions`` are kept: past the bound the least
recently updated ones are evicted (a distinct id per request cannot grow the file without end), checked at every
new session when the bound is below 1,000, else every ``max_sessions // 1000``-th new session of a worker (a count
costs a scan: about 0.1 ms per 20,000 rows), so the file holds at most that many more meanwhile.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from advisor.errors import StoreError


class LatchStore:
    """Session states (dataclasses of `state_type`) in one SQLite file shared by the service's workers."""

    def __init__(self, path: str | Path, state_type: type, ttl_s: float = 86400.0, max_sessions: int = 100_000):
        self.path, self.state_type, self.ttl_s, self.max_sessions = str(path), state_type, ttl_s, max_sessions
        self._con = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        self._set_up(deadline_s=10.0)
        self._lock = threading.Lock()
        self._failed: tuple[float, str] | None = None  #: (when, why) the last write failed, until one works
        self._writes = 0
        self._new, self._trim_every = 0, max(1, max_sessions // 1000)

    def _set_up(self, deadline_s: float) -> None:
        """WAL journal and the table. Switching a new file to WAL takes an exclusive lock for which SQLite does not
        wait (workers opening the file at once see "database is locked"), so a locked file is retried until
        `deadline_s`."""
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("PRAGMA synchronous=NORMAL")
                self._con.execute("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                                  "updated REAL NOT NULL)")
                self._con.execute("CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated)")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > give_up:
                    raise StoreError(f"cannot open the session latch {self.path}: {exc}") from None
                time.sleep(0.02)

    def update(self, sid: str, change: Callable[[Any], Any]) -> Any:
        """Read a session's state, apply `change`, write the result (None: leave it); atomic across workers."""
        with self._lock:
            con = self._con
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute("SELECT state, updated FROM sessions WHERE id = ?", [sid]).fetchone()
                old = None
                if row is not None and time.time() - row[1] <= self.ttl_s:
                    old = self.state_type(**json.loads(row[0]))
                new = change(old)
                if new is not None:
                    self._write(con, sid, new, fresh=row is None)
                con.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # the disk is full, or the file cannot be written
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise self._failure(exc) from None
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            self._failed = None
            return new

    def put(self, sid: str, state: Any) -> Any:
        """Write a session's state whatever it was before (a session's first step): one statement, no read."""
        with self._lock:
            try:
                self._write(self._con, sid, state, fresh=True)
            except sqlite3.OperationalError as exc:
                raise self._failure(exc) from None
            self._failed = None
            return state

    def _write(self, con, sid: str, state: Any, fresh: bool) -> None:
        """Write `state` (stamped now); a `fresh` session counts toward the eviction's check, every write toward
        the expiry's."""
        state.updated = time.time()
        con.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)", [sid, json.dumps(state.__dict__), state.updated])
        if fresh:
            self._new += 1
            if self._new % self._trim_every == 0:
                self._evict(con)
        self._writes += 1
        if self._writes % 1000 == 0:
            con.execute("DELETE FROM sessions WHERE updated < ?", [time.time() - self.ttl_s])

    def _failure(self, exc: Exception) -> StoreError:
        """The error of a write that failed (the disk is full, or the file cannot be written), noted for `trouble`."""
        self._failed = (time.monotonic(), f"cannot write the session latch {self.path}: {exc}")
        return StoreError(self._failed[1])

    def primary_away(self) -> bool:
        """False: this file is the store itself (`advisor.store.latch_fallback` has a primary that can be away)."""
        return False

    def trouble(self, within_s: float = 5.0) -> str | None:
        """Why the last write failed, when it did within `within_s` and none has worked since, else None."""
        failed = self._failed
        return failed[1] if failed is not None and time.monotonic() - failed[0] < within_s else None

    def _evict(self, con) -> None:
        """Delete the least recently updated sessions past `max_sessions`."""
        extra = con.execute("SELECT count(*) FROM sessions").fetchone()[0] - self.max_sessions
        if extra > 0:
            con.execute("DELETE FROM sessions WHERE id IN (SELECT id FROM sessions ORDER BY updated LIMIT ?)", [extra])

    def get(self, sid: str) -> Any:
        """A session's state (None when unknown or expired)."""
        with self._lock:
            row = self._con.execute("SELECT state, updated FROM sessions WHERE id = ?", [sid]).fetchone()
        if row is None or time.time() - row[1] > self.ttl_s:
            return None
        return self.state_type(**json.loads(row[0]))

    def close(self) -> None:
        """Close the connection."""
        self._con.close()
