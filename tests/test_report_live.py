"""The report's Live section on a real DuckDB store whose live accept rates differ from the probe's usable rates:
figures equal the test's own queries, DRIFT flagged past the threshold and only there, SIMULATED when stand-ins
answered, absent without live traffic."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from advisor.report import open_store, write_report
from advisor.store import Store
from synthetic import demo_oracle

#: live accept rate per (class, rung), set against the probe's usable rate (offset); 40 attempts each
OFFSET = {("lookup", "mid"): -0.5, ("multi_step", "large"): 0.0}
N = 40


def _probe_rate(s: Store, cls: str, rung: str) -> float:
    return s.query("SELECT avg(CASE WHEN overall >= bar THEN 1 ELSE 0 END) AS r FROM runs WHERE task_class = ? "
                   "AND rung = ? AND NOT unscored", [cls, rung])[0]["r"]


def live_store(path, simulated: bool = True, live: bool = True):
    with Store.open(path) as s:
        s.add_runs_bulk(demo_oracle(simulated=simulated).full_grid(replicas=3))
        if not live:
            return path
        t0 = dt.datetime(2026, 1, 1)
        decisions, outcomes = [], []
        for (cls, rung), off in OFFSET.items():
            rate = min(max(_probe_rate(s, cls, rung) + off, 0.0), 1.0)
            accepted = round(rate * N)
            for i in range(N):
                did = f"{cls}-{rung}-{i:03d}"
                ok = i < accepted
                decisions.append({
                    "decision_id": did, "created_at": t0 + dt.timedelta(seconds=len(decisions)), "request_hash": did,
                    "task_class": cls, "policy": "router:v1", "mode": "escalate", "chosen_rung": rung,
                    "p_usable": 0.9, "expected_cost": 0.01, "total_cost_usd": 0.012,
                    "status": "ok" if ok else "rejected",
                    "class_source": "predicted: default_class" if i % 4 == 0 else "given", "simulated": simulated})
                outcomes.append({"decision_id": did, "attempt": 0, "rung": rung, "cost_usd": 0.012, "verified": True,
                                 "accepted": ok, "failover": False, "simulated": simulated,
                                 "created_at": t0 + dt.timedelta(seconds=len(outcomes))})
        s.add_live(decisions, outcomes)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("live")
    store = live_store(base / "live.duckdb")
    with open_store(store) as s:
        files = write_report(s, base / "reports", "live")
    return store, files


def test_live_figures_equal_the_stores_own_queries(report):
    store, files = report
    live = json.loads(files.json.read_text())["live"]
    by = {c["task_class"]: c for c in live["classes"]}
    assert set(by) == {"lookup", "multi_step"} and live["threshold"] == 0.15
    with Store.open(store, read_only=True) as s:
        for (cls, rung), off in OFFSET.items():
            want = s.query("SELECT avg(CASE WHEN o.accepted THEN 1 ELSE 0 END) AS r, count(*) AS n "
                           "FROM live_outcomes o JOIN routing_decisions d USING (decision_id) WHERE d.task_class = ? AND o.rung = ?",
                           [cls, rung])[0]
            row = next(r for r in by[cls]["rungs"] if r["rung"] == rung)
            assert row["live_accept_rate"] == pytest.approx(want["r"]) and row["live_attempts"] == want["n"] == N
            assert row["probe_usable_rate"] == pytest.approx(_probe_rate(s, cls, rung))
            cost = s.query("SELECT sum(total_cost_usd) / count(*) FILTER (WHERE status = 'ok') AS c, "
                           "avg(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS real FROM routing_decisions "
                           "WHERE task_class = ?", [cls])[0]
            assert by[cls]["cost_per_usable_live_usd"] == pytest.approx(cost["c"])
            assert by[cls]["p_realised"] == pytest.approx(cost["real"]) and by[cls]["p_predicted"] == pytest.approx(0.9)
            assert by[cls]["cost_per_usable_predicted_usd"] == pytest.approx(0.01 / 0.9)
            assert by[cls]["predicted_class_share"] == pytest.approx(0.25)
    # lookup/mid: live accept 50 points under the probe -> DRIFT; multi_step/large matches the probe -> no rung drift
    lookup_mid = next(r for r in by["lookup"]["rungs"] if r["rung"] == "mid")
    assert lookup_mid["difference"] < -0.15 and lookup_mid["drifts"] and by["lookup"]["flagged"]
    ms_large = next(r for r in by["multi_step"]["rungs"] if r["rung"] == "large")
    assert abs(ms_large["difference"]) <= 0.15 and not ms_large["drifts"]
    assert "lookup" in live["drifting"] and live["simulated"] is True


def test_live_section_in_html_and_markdown(report):
    _, files = report
    html = files.html.read_text()
    section = html.split('<div id="live">', 1)[1].split('<div id="evidence">', 1)[0]
    assert '<span class="sim">SIMULATED</span>' in section
    assert 'class="drift"' in section and "DRIFT in" in section and "lookup" in section
    assert "Live: verifier accept rate vs probe usable rate" in section
    md = files.markdown.read_text()
    live_md = md.split("## Live (SIMULATED)", 1)[1].split("## Settings", 1)[0]
    rows = [line for line in live_md.splitlines() if line.startswith("| lookup | mid |")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith("DRIFT"), rows
    assert "| multi_step | large |" in live_md


def test_no_live_section_without_live_traffic(tmp_path):
    store = live_store(tmp_path / "probe.duckdb", simulated=False, live=False)
    with open_store(store) as s:
        files = write_report(s, tmp_path / "reports", "plain")
    assert json.loads(files.json.read_text())["live"] is None
    assert '<div id="live">' not in files.html.read_text() and "## Live" not in files.markdown.read_text()


def test_real_rungs_are_not_labelled_simulated(tmp_path):
    store = live_store(tmp_path / "real.duckdb", simulated=False)
    with open_store(store) as s:
        files = write_report(s, tmp_path / "reports", "real")
    assert json.loads(files.json.read_text())["live"]["simulated"] is False
    assert "## Live\n" in files.markdown.read_text()
