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

from typing import Any, Callable

from advisor.errors import StoreError
from advisor.store.reopening import Reopening


class FallbackLatches:
    """`primary` (opened by `open_primary`, retried after `retry_s` when it fails) with `local` as stand-by."""

    def __init__(self, open_primary: Callable[[], Any], local: Any, retry_s: float = 5.0):
        self.local = local
        # opened here, at start; after a failure again in a thread of its own (the step goes to the stand-by)
        self._primary = Reopening(open_primary, retry_s)
        self._primary.get()
        self._used_local = False  #: some session was latched locally: reconcile with the primary on each step

    def _try(self) -> Any:
        """The primary, or None while it is away."""
        return self._primary.get()

    def _failed(self, exc: Exception) -> None:
        self._primary.failed(f"session latch in the local stand-by: {str(exc).strip()[:300]}")

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
        down = self._primary.down
        if down is not None and self._try() is None:
            return (self._primary.down or down)[1]
        return self.local.trouble(within_s)

    def close(self) -> None:
        """Close both."""
        self._primary.close()
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
