"""Stores by URL scheme: `open_store` looks the scheme up in `STORES` (did-you-mean on a miss), refuses a store that
does not play the role asked for, and `Reconnecting` reopens a location after its connection broke."""

from __future__ import annotations

import pytest

from advisor.errors import StoreError
from advisor.store import STORES, LiveRecords, Reconnecting, RunStore, Store, StoreKind, open_store, scheme_of


class Flaky:
    """A toy store whose `fetch` fails while `broken` is set (as a dropped database connection does)."""

    opened = 0
    broken = False

    def __init__(self, location):
        type(self).opened += 1
        self.path, self.closed = location, False

    def fetch(self, key):
        if Flaky.broken:
            self.closed = True
            raise ConnectionError("server closed the connection unexpectedly\nmore detail")
        return f"value of {key}"

    def query(self, sql):
        return self.fetch(sql)

    def close(self):
        self.closed = True


@pytest.fixture
def flaky(monkeypatch):
    monkeypatch.setattr(STORES, "_items", dict(STORES.items()))
    monkeypatch.setattr(Flaky, "opened", 0)
    monkeypatch.setattr(Flaky, "broken", False)
    STORES.add("flaky", StoreKind(lambda location, read_only: Flaky(location), "a test store"))
    return Flaky


def test_the_scheme_picks_the_store(tmp_path, flaky):
    assert scheme_of(tmp_path / "a.duckdb") == "duckdb" and scheme_of("postgresql://u@h/db") == "postgresql"
    with open_store(f"duckdb://{tmp_path / 'a.duckdb'}", role=RunStore) as store:
        assert isinstance(store, Store) and isinstance(store, LiveRecords)
    assert isinstance(open_store("flaky://x"), Flaky)
    with pytest.raises(StoreError, match=r"^flaky2://: unknown store scheme. Did you mean 'flaky'\?"):
        open_store("flaky2://x")


def test_a_store_that_does_not_play_the_role_is_refused_and_closed(flaky, monkeypatch):
    made = []
    STORES.add("flaky", StoreKind(lambda location, read_only: made.append(Flaky(location)) or made[-1]),
               replace=True)
    with pytest.raises(StoreError, match=r"^flaky://x: a flaky store does not keep RunStore \(Runs and the analysis"):
        open_store("flaky://x", role=RunStore)
    assert made[0].closed


def test_reconnecting_reopens_after_the_connection_broke(flaky):
    db = Reconnecting("flaky://user:secret@host/db")
    assert db.call("fetch", "a") == "value of a" and flaky.opened == 1
    flaky.broken = True
    with pytest.raises(StoreError) as info:
        db.call("fetch", "b")
    assert str(info.value) == ("flaky://user:***@host/db: ConnectionError: server closed the connection "
                               "unexpectedly")  # one line, password redacted
    with pytest.raises(ConnectionError):
        db.ping()  # still down: the caller sees the failure, the connection is dropped again
    flaky.broken = False
    db.ping()
    assert db.call("fetch", "c") == "value of c" and flaky.opened == 3
    db.close()
    db.close()  # closing twice is harmless
