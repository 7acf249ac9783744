"""The PostgreSQL latch's local stand-by (advisor.store.latch_fallback): a step goes on while the database is away,
and an escalation made meanwhile survives the database's return. The real path (a replica through a PostgreSQL
stop and restart) is tests/test_replicas.py."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from advisor.errors import StoreError
from advisor.store.latch_fallback import FallbackLatches
from advisor.store.latches import LatchStore


@dataclass
class State:
    rung: str
    updated: float = 0.0


class Flaky:
    """A primary that works until `down` is set (each call then raises as a lost connection does)."""

    def __init__(self, path):
        self.inner, self.down, self.closed = LatchStore(path, State), False, 0

    def update(self, sid, change):
        if self.down:
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (connection refused)")
        return self.inner.update(sid, change)

    def get(self, sid):
        if self.down:
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (connection refused)")
        return self.inner.get(sid)

    def close(self):
        self.closed += 1


def test_steps_go_on_locally_while_the_primary_is_away_and_the_newer_state_wins_after(tmp_path):
    primary = Flaky(tmp_path / "primary.sqlite")
    opened = []

    def open_primary():
        if primary.down:
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (connection refused)")
        opened.append(1)
        return primary

    latches = FallbackLatches(open_primary, LatchStore(tmp_path / "local.sqlite", State), retry_s=0.0)
    latches.update("s", lambda old: State("small"))
    assert latches.get("s").rung == "small" and latches.trouble() is None
    primary.down = True
    moved = latches.update("s", lambda old: State("large" if old is None or old.rung == "small" else old.rung))
    assert moved.rung == "large", "the step is answered from the stand-by"
    assert "cannot connect" in (latches.trouble() or ""), "readiness says the latch is local only"
    assert primary.closed == 1
    primary.down = False
    assert latches.get("s").rung == "large", "the escalation made during the outage is not undone"
    _until(lambda: not latches.primary_away())  # reopened in a thread of its own
    kept = latches.update("s", lambda old: old)
    assert kept.rung == "large" and primary.inner.get("s").rung == "large"
    assert latches.trouble() is None and len(opened) == 2


def test_the_primary_is_not_retried_before_retry_s(tmp_path):
    tries = []

    def open_primary():
        tries.append(1)
        raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (password authentication failed)")

    latches = FallbackLatches(open_primary, LatchStore(tmp_path / "local.sqlite", State), retry_s=60.0)
    for _ in range(5):
        latches.update("s", lambda old: State("small"))
    assert len(tries) == 1 and latches.get("s").rung == "small"
    assert "password authentication failed" in latches.trouble()


def test_readiness_sees_the_primary_back_without_a_step(tmp_path):
    """/readyz asks `trouble()`; once retry_s has passed it tries the primary itself, so "degraded" ends within
    retry_s of the database's return even when no session step comes."""
    primary = Flaky(tmp_path / "primary.sqlite")

    def open_primary():
        if primary.down:
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (connection refused)")
        return primary

    latches = FallbackLatches(open_primary, LatchStore(tmp_path / "local.sqlite", State), retry_s=0.0)
    primary.down = True
    latches.update("s", lambda old: State("small"))
    assert "cannot connect" in (latches.trouble() or "")
    primary.down = False
    _until(lambda: latches.trouble() is None)


def test_a_step_never_waits_for_the_primary_to_connect(tmp_path):
    """An unreachable host holds a connection for its whole timeout: the primary is opened again in a thread, and
    the steps meanwhile go to the stand-by at once."""
    primary = Flaky(tmp_path / "primary.sqlite")
    slow = threading.Event()

    def open_primary():
        if slow.is_set():
            time.sleep(3)  # a connect to a host that does not answer
        if primary.down:
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (timeout expired)")
        return primary

    latches = FallbackLatches(open_primary, LatchStore(tmp_path / "local.sqlite", State), retry_s=0.0)
    primary.down = True
    slow.set()
    began = time.monotonic()
    for i in range(5):
        assert latches.update(f"s{i}", lambda old: State("small")).rung == "small"
    assert time.monotonic() - began < 1.0, "a step waited for the connection"
    assert latches.primary_away() and "cannot connect" in (latches.trouble() or "")
    latches.close()


def _until(condition, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)
