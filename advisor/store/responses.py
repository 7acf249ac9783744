"""Stored responses of the Responses API (``store: true``): per tenant, bounded in age, size and count.

A stored response is what a later request needs to continue it with ``previous_response_id`` (the conversation
as chat messages, the delivered reply included) and what ``GET /v1/responses/{id}`` returns (the ``response``
object). It belongs to the tenant that made it (the API key's name): another tenant's id reads as unknown. Two
backends, as for the session latches: a SQLite file beside the spool, shared by one host's workers, for a DuckDB
store (`SqliteResponses`); one table in the PostgreSQL store's database, shared by every replica
(`PgResponses`). Bounds: a record over ``max_bytes`` is not kept (the response says ``store: false``); records
older than ``ttl_s`` read as unknown and are deleted; past ``max_responses`` the oldest are evicted (checked every
100th write).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from advisor.errors import StoreError
from advisor.store.postgres import connect, redact
from advisor.store.reopening import Reopening

TABLE = "advisor_responses"
_MAINTAIN_EVERY = 100


class _Responses:
    """The reads and writes both backends share; a backend gives `_exec(sql, params)` (SQL with ``?`` parameters,
    under the instance's lock) and the SQL that evicts past ``max_responses``."""

    ttl_s: float
    max_bytes: int
    max_responses: int
    _evict_sql: str

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writes = 0

    def _exec(self, sql: str, params: list[Any]):
        raise NotImplementedError

    def put(self, tenant: str, rid: str, record: dict[str, Any]) -> bool:
        """Keep `record` as `tenant`'s response `rid`; False (nothing kept) when it is over ``max_bytes``."""
        body = json.dumps(record, separators=(",", ":"))
        if len(body.encode()) > self.max_bytes:
            return False
        with self._lock:
            self._exec(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET "
                       "body = excluded.body, created = excluded.created", [tenant, rid, body, time.time()])
            self._writes += 1
            if self._writes % _MAINTAIN_EVERY == 0:
                self._exec(f"DELETE FROM {TABLE} WHERE created < ?", [time.time() - self.ttl_s])
                self._exec(self._evict_sql, [self.max_responses])
        return True

    def get(self, tenant: str, rid: str) -> dict[str, Any] | None:
        """`tenant`'s response `rid` (None when unknown, another tenant's, or older than ``ttl_s``)."""
        with self._lock:
            row = self._exec(f"SELECT body, created FROM {TABLE} WHERE tenant = ? AND id = ?", [tenant, rid]).fetchone()
        if row is None or time.time() - row[1] > self.ttl_s:
            return None
        return json.loads(row[0])

    def delete(self, tenant: str, rid: str) -> bool:
        """Forget `tenant`'s response `rid`; False when there was none."""
        with self._lock:
            return self._exec(f"DELETE FROM {TABLE} WHERE tenant = ? AND id = ?", [tenant, rid]).rowcount > 0


class SqliteResponses(_Responses):
    """Stored responses in one SQLite file shared by the service's workers on this host."""

    _evict_sql = f"DELETE FROM {TABLE} WHERE rowid IN (SELECT rowid FROM {TABLE} ORDER BY created DESC LIMIT -1 OFFSET ?)"

    def __init__(self, path: str | Path, ttl_s: float, max_bytes: int, max_responses: int):
        super().__init__()
        self.path, self.ttl_s, self.max_bytes, self.max_responses = str(path), ttl_s, max_bytes, max_responses
        self._con = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        give_up = time.monotonic() + 10.0
        while True:  # switching a new file to WAL takes a lock SQLite does not wait for (workers opening at once)
            try:
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("PRAGMA synchronous=NORMAL")
                self._con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (tenant TEXT NOT NULL, id TEXT NOT NULL, "
                                  "body TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (tenant, id))")
                self._con.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_created ON {TABLE} (created)")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > give_up:
                    raise StoreError(f"cannot open the stored responses {self.path}: {exc}") from None
                time.sleep(0.02)

    def _exec(self, sql: str, params: list[Any]):
        try:
            return self._con.execute(sql, params)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot use the stored responses {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the connection."""
        self._con.close()


class PgResponses(_Responses):
    """Stored responses in the PostgreSQL store's database, shared by every replica."""

    _evict_sql = (f"DELETE FROM {TABLE} WHERE (tenant, id) IN (SELECT tenant, id FROM {TABLE} ORDER BY created DESC "
                  "OFFSET ?)")

    def __init__(self, url: str, ttl_s: float, max_bytes: int, max_responses: int, retry_s: float = 5.0):
        super().__init__()
        self.path, self.ttl_s, self.max_bytes, self.max_responses = redact(url), ttl_s, max_bytes, max_responses
        self._url = url
        # connected on first use (a database that is away at start stops nothing); after a failed connection,
        # calls fail at once and a thread connects again every `retry_s`: a request, on the event loop, waits for
        # at most the one connection that found the database away
        self._db = Reopening(self._open, retry_s)

    def _open(self):
        # heavy dependency, imported on use: psycopg
        import psycopg

        con = connect(self._url)  # StoreError when the database cannot be reached
        try:
            con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (tenant TEXT NOT NULL, id TEXT NOT NULL, "
                        "body TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant, id))")
        except psycopg.Error as exc:
            con.close()
            raise StoreError(f"{self.path}: {str(exc).strip()[:300]}") from None
        return con

    def _connected(self):
        """The open connection (a broken one, the database restarted, is opened again); StoreError while away."""
        con = self._db.get()
        if con is not None and (con.closed or con.broken):
            self._db.forget()  # closed and dropped
            con = self._db.get()
        if con is None:
            raise StoreError(self._db.down[1] if self._db.down else f"{self.path}: connecting")
        return con

    def _exec(self, sql: str, params: list[Any]):
        """One statement (``?`` as psycopg's ``%s``); a connection lost (the database restarted) is reopened once;
        a database that cannot be reached is a `StoreError`."""
        # heavy dependency, imported on use: psycopg
        import psycopg

        sql = sql.replace("?", "%s")
        for attempt in (1, 2):
            con = self._connected()
            try:
                return con.execute(sql, params)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not (con.closed or con.broken):
                    raise StoreError(f"{self.path}: {exc}") from None

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
