"""The PostgreSQL latch with a local stand-by: a step is never refused because the shared database is away.

With a PostgreSQL store the session latch lives in the database (`advisor.store.pg_latches.PgLatchStore`), shared
by every replica. When the database cannot be reached (stopped, restarting, refusing the password), the
service's records wait in the spool and its answers go on; the latch does the same: the step is latched in this
host's SQLite file (`advisor.store.latches.LatchStore`, beside the spool) and `trouble()` says why, so `/readyz`
reports "degraded". The database is tried again after `retry_s`, not on every step, and in a thread of its own
(a connection to an unreachable host waits its whole timeout: a step, on the event loop, never waits for it; steps
go to the stand-by meanwhile). Once it answers again, a session that moved during the outage keeps the newer of the two states
(by their ``updated`` clock), so an escalation made on the stand-by is not undone.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from advisor.errors import StoreError


class FallbackLatches:
    """`primary` (opened by `open_primary`, retried after `retry_s` when it fails) with `local` as stand-by."""

    def __init__(self, open_primary: Callable[[], Any], local: Any, retry_s: float = 5.0):
        self._open_primary, self.local, self.retry_s = open_primary, local, retry_s
        self._primary: Any = None
        self._down: tuple[float, str] | None = None  #: (when, why) the primary last failed, until it works again
        self._used_local = False  #: some session was latched locally: reconcile with the primary on each step
        self._lock = threading.Lock()
        self._opening = False  #: a thread is opening the primary now
        self._closed = False
        self._open()  # at start, in the caller's thread: the service starts on the primary when it answers

    def _try(self) -> Any:
        """The primary, or None while it is down; once `retry_s` has passed since its last failure, a thread opens
        it again (and this returns None: the step goes to the stand-by)."""
        with self._lock:
            if self._primary is not None:
                return self._primary
            if self._opening or (self._down is not None and time.monotonic() - self._down[0] < self.retry_s):
                return None
            self._opening = True
        threading.Thread(target=self._open, name="latch-primary", daemon=True).start()
        return None

    def _open(self) -> None:
        """Open the primary; noted as down (with why) when that fails."""
        try:
            primary = self._open_primary()
        except StoreError as exc:
            with self._lock:
                self._down, self._opening = (time.monotonic(), str(exc)), False
            return
        with self._lock:
            self._opening = False
            if not self._closed:
                self._primary, self._down = primary, None
                return
        primary.close()  # opened after `close`

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            primary, self._primary = self._primary, None
            self._down = (time.monotonic(), f"session latch in the local stand-by: {str(exc).strip()[:300]}")
        if primary is not None:
            try:
                primary.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is dropped either way
                pass

    def update(self, sid: str, change: Callable[[Any], Any]) -> Any:
        """One step's change, in the primary when it answers, else in the local stand-by."""
        primary = self._try()
        if primary is not None:
            local_state = self.local.get(sid) if self._used_local else None
            try:
                return primary.update(sid, lambda old: change(_newer(old, local_state)))
            except Exception as exc:  # noqa: BLE001 - psycopg's errors are classified as "primary away" here
                if not _unreachable(exc):
                    raise
                self._failed(exc)
        self._used_local = True
        return self.local.update(sid, change)

    def put(self, sid: str, state: Any) -> Any:
        """Write a session's state whatever it was before (a session's first step), where `update` would."""
        return self.update(sid, lambda old: state)

    def get(self, sid: str) -> Any:
        """A session's state, from the primary when it answers (the newer one if it also moved locally)."""
        primary = self._try()
        if primary is not None:
            try:
                state = primary.get(sid)
            except Exception as exc:  # noqa: BLE001
                if not _unreachable(exc):
                    raise
                self._failed(exc)
            else:
                return _newer(state, self.local.get(sid)) if self._used_local else state
        return self.local.get(sid)

    def primary_away(self) -> bool:
        """Whether the shared primary cannot be reached now (tried again once `retry_s` has passed)."""
        return self._try() is None

    def trouble(self, within_s: float = 5.0) -> str | None:
        """Why steps are latched on this host only (the primary is away), or the stand-by's own write failure. While
        the primary is away it is tried again here once `retry_s` has passed, so `/readyz`'s poll sees it back
        within `retry_s` (and a connection's time) of its return, with no step needed."""
        down = self._down
        if down is not None and self._try() is None:
            return self._down[1] if self._down is not None else down[1]
        return self.local.trouble(within_s)

    def close(self) -> None:
        """Close both."""
        with self._lock:
            self._closed = True
            primary, self._primary = self._primary, None
        if primary is not None:
            primary.close()
        self.local.close()


def _newer(a: Any, b: Any) -> Any:
    """The more recently updated of two states (either may be None)."""
    if a is None or b is None:
        return a if b is None else b
    return b if getattr(b, "updated", 0) > getattr(a, "updated", 0) else a


def _unreachable(exc: Exception) -> bool:
    """The database is away (cannot connect, connection lost), as opposed to a bug or a refused statement."""
    if isinstance(exc, StoreError):
        return True
    try:
        # heavy dependency, imported on use: psycopg
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
