"""Stored responses (`advisor.store.responses`) on both backends, a real SQLite file and a real PostgreSQL: a
tenant reads only its own, a record over the size bound is not kept, age and count are bounded, DELETE forgets."""

from __future__ import annotations

import time

import pytest

from advisor.store.responses import PgResponses, SqliteResponses


@pytest.fixture(params=["sqlite", "postgres"])
def make(request, tmp_path):
    if request.param == "sqlite":
        return lambda **kw: SqliteResponses(tmp_path / "r.sqlite", **kw)
    server = request.getfixturevalue("postgres_server")
    url = server.new_database(f"responses_{int(time.time() * 1000) % 10**9}")
    return lambda **kw: PgResponses(url, **kw)


def test_a_tenant_reads_only_its_own_and_bounds_hold(make):
    store = make(ttl_s=3600, max_bytes=2048, max_responses=5)
    try:
        assert store.put("a", "resp_1", {"messages": ["hi"]})
        assert store.get("a", "resp_1") == {"messages": ["hi"]}
        assert store.get("b", "resp_1") is None and not store.delete("b", "resp_1")
        assert not store.put("a", "resp_big", {"messages": ["x" * 4096]}) and store.get("a", "resp_big") is None
        for i in range(100):  # the 100th write trims to the newest max_responses
            store.put("a", f"resp_n{i}", {"i": i})
        assert store.get("a", "resp_n99") == {"i": 99} and store.get("a", "resp_n0") is None
        assert store.delete("a", "resp_n99") and store.get("a", "resp_n99") is None
    finally:
        store.close()


def test_an_old_response_reads_as_unknown(make):
    store = make(ttl_s=0.2, max_bytes=2048, max_responses=5)
    try:
        store.put("a", "resp_old", {"i": 1})
        time.sleep(0.4)
        assert store.get("a", "resp_old") is None
    finally:
        store.close()
