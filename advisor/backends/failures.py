"""What went wrong with a model call: the seam's failure kinds, classified by each backend, and the time bound.

Every backend raises `BackendFailure` (a `advisor.errors.BackendError`) with a `FailureKind`, so callers (the
probe, the routing service, `advisor ladder check`) import failures from `advisor.backends` only and never a
backend's own exceptions:

- ``timeout``: the generation did not finish within its time limit (`GenerationTimeout`);
- ``down``: the endpoint cannot be reached, or the model is not (or no longer) available there;
- ``key refused``: the endpoint answered but refused the API key (`KeyRefusedError`, HTTP 401/403);
- ``bad output``: the endpoint answered outside its API (not JSON, no choices, a broken stream chunk);
- ``overloaded``: the endpoint kept saying it is busy (HTTP 429) after the backend's own retries.

`BackendError` (`advisor.errors`, re-exported here) is the root every caller catches; `failure_kind` classifies
any `BackendError` (one that is not a `BackendFailure`, e.g. an unknown model or a contract mismatch, is ``down``:
the rung cannot answer). `time_limit` bounds an awaited body in the caller's own task.
"""

from __future__ import annotations

import asyncio
from enum import Enum

from advisor.errors import BackendError


class FailureKind(str, Enum):
    """How a model call failed (the value is the word used in messages and metrics)."""

    TIMEOUT = "timeout"
    DOWN = "down"
    KEY_REFUSED = "key refused"
    BAD_OUTPUT = "bad output"
    OVERLOADED = "overloaded"


class BackendFailure(BackendError):
    """A model call failed; `kind` says how (set by the backend that raised it)."""

    kind: FailureKind = FailureKind.DOWN

    def __init__(self, message: str, kind: FailureKind | None = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class GenerationTimeout(BackendFailure):
    """A generation did not finish within its time limit."""

    kind = FailureKind.TIMEOUT


class KeyRefusedError(BackendFailure):
    """The server answered, but refused the API key (HTTP 401/403): reachable, not usable."""

    kind = FailureKind.KEY_REFUSED


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind of a backend failure: a `BackendFailure`'s own, else ``down`` (an unknown model, a contract
    mismatch, any other `BackendError`: the model cannot answer here)."""
    return exc.kind if isinstance(exc, BackendFailure) else FailureKind.DOWN


def time_limit(seconds: float):
    """An async context manager that cancels its body after `seconds` (asyncio.TimeoutError)."""
    if hasattr(asyncio, "timeout"):
        return asyncio.timeout(seconds)
    return _WaitFor(seconds)  # pragma: no cover - Python 3.10


class _WaitFor:  # pragma: no cover - Python 3.10 fallback without cancellation of the body
    def __init__(self, seconds: float):
        self.seconds = seconds

    async def __aenter__(self):
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        self._handle = loop.call_later(self.seconds, task.cancel)
        self._expired = lambda: self._handle.when() <= loop.time()

    async def __aexit__(self, exc_type, exc, tb):
        self._handle.cancel()
        if exc_type is asyncio.CancelledError and self._expired():
            raise asyncio.TimeoutError from None
        return False
