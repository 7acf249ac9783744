"""Session latches in a real PostgreSQL (`advisor.store.pg_latches`): atomic across processes, a stale read is
re-read, expiry by the database's clock, and the service opens it with a PostgreSQL store."""

from __future__ import annotations

import multiprocessing
import time
from types import SimpleNamespace

import pytest

from advisor.service.sessions.latch import SessionState, open_latches
from advisor.store.latch_fallback import FallbackLatches
from advisor.store.latches import LatchStore
from advisor.store.pg_latches import PgLatchStore


def _bump(url, n):
    store = PgLatchStore(url, SessionState)
    for _ in range(n):
        store.get("s")  # the version read here goes stale when another process writes before this update
        store.update("s", lambda old: SessionState("a", "a", None, step=(old.step + 1) if old else 1))
    store.close()


def test_steps_from_several_processes_are_never_lost(postgres_server):
    url = postgres_server.new_database("latch_atomic")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(url, 60)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    store = PgLatchStore(url, SessionState)
    assert store.get("s").step == 180  # no lost update: each write lands only on the version its step read


def test_a_stale_read_is_read_again_and_a_change_that_keeps_nothing_writes_nothing(postgres_server):
    url = postgres_server.new_database("latch_stale")
    a, b = PgLatchStore(url, SessionState), PgLatchStore(url, SessionState)
    a.update("x", lambda old: SessionState("small", "small", "chat"))
    assert a.get("x").rung == "small"
    b.update("x", lambda old: SessionState("large", old.start_rung, old.task_class, step=old.step + 1))
    seen = []
    a.update("x", lambda old: seen.append(old.rung) or SessionState(old.rung, old.start_rung, None, step=old.step + 1))
    assert seen == ["small", "large"]  # the first try lost the race to b's write, the second read b's state
    assert a.update("y", lambda old: None) is None and a.get("y") is None
    assert b.get("x").rung == "large" and b.get("x").step == 3


def test_an_idle_session_expires_by_the_database_clock(postgres_server):
    url = postgres_server.new_database("latch_ttl")
    store = PgLatchStore(url, SessionState, ttl_s=0.2)
    store.update("s", lambda old: SessionState("a", "a", None))
    assert store.get("s").rung == "a"
    time.sleep(0.4)
    assert store.get("s") is None
    assert store.update("s", lambda old: old or SessionState("b", "b", None)).rung == "b"  # an expired row is new
    assert store.get("s").rung == "b"


def test_the_service_keeps_its_latches_in_postgres_with_a_postgres_store(postgres_server, tmp_path):
    url = postgres_server.new_database("latch_service")
    cfg = SimpleNamespace(ttl_s=60.0, max_sessions=1000)
    shared = open_latches(str(tmp_path / "a"), url, cfg)
    assert isinstance(shared, FallbackLatches) and isinstance(shared._try(), PgLatchStore)
    assert isinstance(open_latches(str(tmp_path / "b"), None, cfg), LatchStore)


def test_an_unreachable_database_is_one_line():
    from advisor.errors import StoreError

    with pytest.raises(StoreError, match=r"postgresql://u:\*\*\*@127.0.0.1:9/x: cannot connect"):
        PgLatchStore("postgresql://u:secret@127.0.0.1:9/x", SessionState)
