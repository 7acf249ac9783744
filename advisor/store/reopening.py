"""A connection to a database that may be away, opened again in a thread of its own once it has failed.

The routing service reaches PostgreSQL from its event loop (a session step's latch, a stored response), and a
connection to a host that does not answer waits its whole timeout. `Reopening` opens its connection in the
caller's thread the first time (and after `forget`, when a live connection broke); once opening it has failed,
or the caller said it `failed`, callers get None at once, and after `retry_s` a thread opens it again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

from advisor.errors import StoreError


class Reopening:
    """The connection `open_` makes (it raises `StoreError` when it cannot), and why it is away."""

    def __init__(self, open_: Callable[[], Any], retry_s: float):
        self._open_, self.retry_s = open_, retry_s
        self._lock = threading.Lock()
        self._value: Any = None
        self.down: tuple[float, str] | None = None  #: (when, why) it last failed, until it opens again
        self._opening = False  #: it is being opened now
        self._closed = False

    def get(self) -> Any:
        """The open connection; else it is opened here when it never failed, or None at once (and once `retry_s` has
        passed since it failed, a thread opens it again)."""
        with self._lock:
            if self._value is not None:
                return self._value
            if self._opening or (self.down is not None and time.monotonic() - self.down[0] < self.retry_s):
                return None
            self._opening = True
            here = self.down is None
        if here:
            return self._open()
        threading.Thread(target=self._open, name="store-reopen", daemon=True).start()
        return None

    def _open(self) -> Any:
        try:
            value = self._open_()
        except StoreError as exc:
            with self._lock:
                self.down, self._opening = (time.monotonic(), str(exc)), False
            return None
        with self._lock:
            self._opening = False
            if not self._closed:
                self._value, self.down = value, None
                return value
        value.close()  # opened after `close`
        return None

    def failed(self, why: str) -> None:
        """The connection stopped working: it is closed and away from now on (opened again after `retry_s`)."""
        with self._lock:
            value, self._value = self._value, None
            self.down = (time.monotonic(), why)
        _close_broken(value)

    def forget(self) -> None:
        """Close and drop a connection that broke (the database restarted): the next `get` opens one here."""
        with self._lock:
            value, self._value = self._value, None
        _close_broken(value)

    def close(self) -> None:
        """Close the connection; one a thread opens later is closed too."""
        with self._lock:
            self._closed = True
            value, self._value = self._value, None
        if value is not None:
            value.close()


def _close_broken(value: Any) -> None:
    """Close a connection that is dropped (a broken one may fail to close: it is dropped either way)."""
    if value is not None:
        with contextlib.suppress(Exception):
            value.close()
