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


def test_a_database_away_costs_one_wait_then_calls_fail_at_once_until_it_is_back(postgres_server, monkeypatch):
    """A connection to a database that does not answer waits its timeout; the service's requests meet that wait
    once: later calls fail at once, the next connection is made in a thread once `retry_s` has passed, and calls
    work again when it is made."""
    import advisor.store.responses as responses
    from advisor.errors import StoreError

    real, away, tries = responses.connect, [True], []

    def connect(url):
        tries.append(time.monotonic())
        if away[0]:
            time.sleep(1.0)  # a host that does not answer
            raise StoreError("postgresql://x/db: cannot connect to PostgreSQL (timeout expired)")
        return real(url)

    monkeypatch.setattr(responses, "connect", connect)
    store = PgResponses(postgres_server.new_database("responses_away"), ttl_s=3600, max_bytes=2048, max_responses=5,
                        retry_s=0.0)
    try:
        with pytest.raises(StoreError, match="timeout expired"):
            store.get("a", "resp_1")  # the one wait
        began = time.monotonic()
        for _ in range(20):
            with pytest.raises(StoreError, match="timeout expired"):
                store.get("a", "resp_1")
        assert time.monotonic() - began < 0.5, "a call waited for a connection"
        away[0] = False
        deadline = time.monotonic() + 10
        while True:
            try:
                assert store.put("a", "resp_1", {"i": 1}) and store.get("a", "resp_1") == {"i": 1}
                break
            except StoreError:
                assert time.monotonic() < deadline, "the database never came back"
                time.sleep(0.05)
        assert len(tries) >= 3
    finally:
        store.close()


def test_a_continuation_while_they_cannot_be_read_is_a_503_that_names_no_address():
    from advisor.errors import StoreError
    from advisor.service.api.request import RequestError
    from advisor.service.http.responses import previous_messages

    class Away:
        def get(self, tenant, rid):
            raise StoreError("postgresql://advisor@db.internal:5432/advisor: cannot connect to PostgreSQL (timeout)")

    with pytest.raises(RequestError) as refused:
        previous_messages("resp_1", Away(), "a")
    assert (refused.value.status, refused.value.code) == (503, "store_unavailable")
    assert "db.internal" not in str(refused.value) and "cannot connect" in str(refused.value)
