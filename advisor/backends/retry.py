"""Retry with backoff, once for every backend: a backend only says which failure may be retried.

A backend's call of its endpoint is one *attempt*, `retried` runs it again while the attempt raises `Retry` (the
backend's classification: a dropped connection, gRPC UNAVAILABLE, HTTP 429 or 5xx) and retries are left, waiting
``base * 2**n`` seconds with up to 50% jitter (or what the failure asks: an HTTP ``Retry-After``), never past the
call's `deadline` (then `asyncio.TimeoutError`, which the caller bounds its call with anyway). When the retries are
spent, the failure the last attempt carried is raised, so the error keeps its kind (`advisor.backends.failures`).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")

#: Seconds before the first retry; doubled for each further one (plus jitter).
BACKOFF_S = 0.2


class Retry(Exception):
    """An attempt failed in a way another attempt may not: `final` is raised when no retry is left, `wait` (seconds)
    overrides the backoff (an HTTP ``Retry-After``)."""

    def __init__(self, final: BaseException, wait: float | None = None):
        super().__init__(str(final))
        self.final, self.wait = final, wait


def backoff(attempt: int, base: float = BACKOFF_S) -> float:
    """Seconds to wait after failed attempt number `attempt` (0-based): exponential, with up to 50% jitter."""
    return base * (2 ** attempt) * (1 + random.random() / 2)


async def retried(attempt: Callable[[int], Awaitable[T]], retries: int, *, deadline: float | None = None,
                  base: float = BACKOFF_S) -> T:
    """The result of `attempt(n)` for n = 0, 1, ... while it raises `Retry` and at most `retries` retries are
    taken (see the module docstring); `deadline` is a `time.monotonic()` time no wait may reach."""
    n = 0
    while True:
        try:
            return await attempt(n)
        except Retry as failed:
            if n >= retries:
                raise failed.final from None
            wait = failed.wait if failed.wait is not None else backoff(n, base)
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise asyncio.TimeoutError from None  # no time left for another try
            await asyncio.sleep(wait)
            n += 1
