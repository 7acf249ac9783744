"""`advisor floors` shows the routing service's live accept rates beside the probe's usable rates, labelled as
live traffic, and decides the floor from probe runs only (synthetic runs and live records in a real DuckDB
file; the same path with records written by the real service is in tests/test_service.py)."""

from __future__ import annotations

import json

from synthetic import make_run

from advisor.cli import main
from advisor.floors import LIVE_NOTE, find_floors, live_acceptance
from advisor.records import now
from advisor.store import Store


def _probe_runs():
    runs = [make_run("narrow", f"t{i}", "small", overall=10.0) for i in range(10)]
    return runs + [make_run("narrow", f"t{i}", "mid", overall=90.0) for i in range(20)]


def _live(store, task_class: str, rung: str, verdicts: list[bool | None], *, failover: bool = False,
          simulated: bool = False, tag: str = "") -> None:
    """One request per verdict (None = unverified), one attempt each, through the store's ingest path."""
    decisions, outcomes = [], []
    for i, verdict in enumerate(verdicts):
        did = f"dec-{task_class}-{rung}-{tag}{i}"
        decisions.append({"decision_id": did, "created_at": now(), "request_hash": "h", "task_class": task_class,
                          "policy": "router", "mode": "escalate", "chosen_rung": rung, "status": "ok"})
        outcomes.append({"decision_id": did, "attempt": 0, "rung": rung, "created_at": now(),
                         "verified": verdict is not None, "accepted": verdict, "failover": failover,
                         "error": "down: unavailable" if failover else None, "simulated": simulated})
    store.add_live(decisions, outcomes)


def test_live_column_is_shown_labelled_and_does_not_move_the_floor(tmp_path, capsys):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as s:
        s.add_runs_bulk(_probe_runs())
        before = find_floors(s).to_dict()
        # live traffic that would contradict the probe if it were used: small accepted 9 of 10, mid 1 of 4
        _live(s, "narrow", "small", [True] * 9 + [False], simulated=True)
        _live(s, "narrow", "mid", [True, False, False, False])
        _live(s, "narrow", "mid", [None, None], tag="unverified-")  # no verdict: not counted
        _live(s, "narrow", "mid", [True], failover=True, tag="down-")  # a failover: not counted
        _live(s, "narrow", "large", [True, True])  # a rung the probe never ran in this class
        _live(s, "chat", "small", [True])  # a live class the suite does not have
        cells = {(c.task_class, c.rung): c for c in live_acceptance(s)}
        assert find_floors(s).to_dict() == before, "live outcomes never change the floor"
    assert (cells[("narrow", "small")].accepted, cells[("narrow", "small")].attempts) == (9, 10)
    assert cells[("narrow", "mid")].accept_rate == 0.25 and cells[("narrow", "mid")].decisions == 4
    assert cells[("narrow", "small")].simulated == 10 and cells[("narrow", "mid")].simulated == 0

    assert main(["floors", "--store", str(path), "--target", "0.7"]) == 0
    text = capsys.readouterr().out
    assert LIVE_NOTE in text and "live acc (n)" in text and "single attempt: floor mid (decided)" in text
    small = next(ln for ln in text.splitlines() if ln.split()[:1] == ["small"])
    mid = next(ln for ln in text.splitlines() if ln.split()[:1] == ["mid"])
    assert "90% (10)*" in small and "0% (0%-21%)" in small  # live accept beside the probe's usable rate of 0%
    assert "25% (4)" in mid and "100% (" in mid
    assert "live only (no probe runs): large 100% (2)" in text
    assert "classes without probe runs in this suite: chat/small 100% (1)" in text

    assert main(["floors", "--store", str(path), "--json", "--target", "0.7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["classes"][0]["floor"] == "mid" and out["live"]["note"] == LIVE_NOTE
    live = {(c["task_class"], c["rung"]): c for c in out["live"]["cells"]}
    assert live[("narrow", "small")]["accept_rate"] == 0.9 and live[("narrow", "mid")]["attempts"] == 4


def test_no_live_traffic_no_live_column(tmp_path, capsys):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as s:
        s.add_runs_bulk(_probe_runs())
    assert main(["floors", "--store", str(path)]) == 0
    text = capsys.readouterr().out
    assert "live acc" not in text and LIVE_NOTE not in text
    assert main(["floors", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["live"]["cells"] == []


def test_a_store_from_before_the_live_service_columns_still_has_floors(tmp_path, capsys):
    path = tmp_path / "old.duckdb"
    with Store.open(path) as s:
        s.add_runs_bulk(_probe_runs())
        s._con.execute("ALTER TABLE live_outcomes DROP COLUMN failover")  # as m001 left it
        s._con.execute("DELETE FROM _migrations WHERE name = 'm003_live_service'")
    assert main(["floors", "--store", str(path)]) == 0  # read-only: not migrated, no live column
    assert "live acc" not in capsys.readouterr().out


def test_requests_without_a_class_are_counted_only_when_asked(tmp_path):
    """One query serves the floors (classes only) and drift (requests without a class too, under '')."""
    with Store.open(tmp_path / "s.duckdb") as s:
        _live(s, "narrow", "small", [True, False])
        _live(s, None, "small", [True, True, False], tag="unclassified-")
        only = {(r["task_class"], r["rung"]): r for r in s.live_accept_counts()}
        every = {(r["task_class"], r["rung"]): r for r in s.live_accept_counts(unclassified=True)}
        picked = s.live_accept_counts(["narrow"], unclassified=True)
    assert list(only) == [("narrow", "small")]
    assert (every[("", "small")]["accepted"], every[("", "small")]["attempts"]) == (2, 3)
    assert every[("narrow", "small")] == only[("narrow", "small")]
    assert [r["task_class"] for r in picked] == ["narrow"]
