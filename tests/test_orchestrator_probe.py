"""`advisor probe --policy orchestrator` against the embedded Triton: the SIMULATED orchestrator stand-in hands
turns to the rung stand-ins through the same client; the store holds the runs with their rung sequence and
per-rung cost, and `advisor policies` compares them with the fixed rungs."""

from __future__ import annotations

import json
import re

import pytest

from advisor.cli import main
from advisor.store import Store

from conftest import DEMO_LADDER

TASKS = ["api-refund-order", "docs-rate-limit-pro"]


@pytest.fixture(scope="module")
def probed(triton_server, tmp_path_factory):
    store = tmp_path_factory.mktemp("orch") / "s.duckdb"
    args = ["probe", "--url", triton_server.grpc_url, "--ladder", str(DEMO_LADDER), "--store", str(store),
            "--policy", "orchestrator", "--policy", "rung", "--full-grid", "--replicas", "1", "--no-report",
            "--json"]
    for t in TASKS:
        args += ["--task", t]
    assert main(args) == 0
    return store


def test_policy_runs_are_stored_with_rung_sequence_and_cost_per_rung(probed):
    with Store.open(probed, read_only=True) as s:
        runs = s.query("SELECT run_key, policy, rung, rung_position, cost_usd, input_tokens, output_tokens, "
                       "model_calls, simulated, settings_json FROM runs ORDER BY policy, task_id, rung")
        calls = s.query("SELECT * FROM policy_calls ORDER BY run_key, seq")
    orch = [r for r in runs if r["policy"] == "orchestrator"]
    fixed = [r for r in runs if r["policy"] == "fixed"]
    conditions = len(fixed) // (3 * len(TASKS))  # the tasks' conditions (baseline, and skill when they have one)
    assert conditions >= 1 and len(fixed) == 3 * len(TASKS) * conditions and len(orch) == len(TASKS) * conditions
    assert {r["rung"] for r in orch} == {"orchestrator-8b"} and {r["rung_position"] for r in orch} == {-1}
    assert all(r["simulated"] for r in orch)
    assert json.loads(orch[0]["settings_json"])["prefs_mode"] == "prompt"
    rung_names = {"nano-12b", "nano-30b", "super-120b"}
    for r in orch:
        mine = [c for c in calls if c["run_key"] == r["run_key"]]
        assert mine and mine[0]["role"] == "orchestrator" and mine[0]["model"] == "orchestrator-8b"
        experts = [c for c in mine if c["role"] == "expert"]
        assert experts and {c["model"] for c in experts} <= rung_names  # it handed turns to rungs
        assert [c["seq"] for c in mine] == list(range(len(mine)))
        assert sum(c["cost_usd"] for c in mine) == pytest.approx(r["cost_usd"])
        assert sum(c["input_tokens"] for c in mine) == r["input_tokens"] > 0
        assert sum(c["output_tokens"] for c in mine) == r["output_tokens"]
        assert len(mine) == r["model_calls"]


def test_policies_comparison(probed, capsys):
    capsys.readouterr()
    assert main(["policies", "--store", str(probed), "--ladder", str(DEMO_LADDER), "--json", "--all-rungs"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simulated"] is True
    arms = {(a["task_class"], a["arm"]): a for a in out["arms"]}
    orch = [a for a in out["arms"] if a["policy"] == "orchestrator"]
    assert len(orch) >= len(TASKS)  # one per class and condition
    for a in orch:
        assert sum(a["expert_calls"].values()) > 0
        assert 0 <= a["strongest_share"] <= 1 and a["own_family_share"] == 1.0  # every rung is nvidia's
        lo, hi = a["interval"]
        assert 0 <= lo <= hi <= 1
    assert ("api_calls", "nano-30b") in arms
    assert sum(a["floor_rung"] for a in out["arms"]) == len(orch)  # one floor rung per class and condition
    assert main(["policies", "--store", str(probed), "--ladder", str(DEMO_LADDER), "--json"]) == 0
    side = json.loads(capsys.readouterr().out)
    assert all(a["floor_rung"] or a["policy"] != "fixed" for a in side["arms"])
    assert {(r["task_class"], r["condition"]) for r in side["recommendations"]} == {
        (a["task_class"], a["condition"]) for a in orch}
    assert main(["policies", "--store", str(probed), "--ladder", str(DEMO_LADDER)]) == 0
    text = capsys.readouterr().out
    # a row names the floor rung (or the largest rung, when no rung clears the target); the header alone does not
    assert text.startswith("SIMULATED") and "orchestrator" in text
    assert "(no floor)" in text or re.search(r"floor rung (nano|super)-", text)
    assert "which policy to run" in text


def test_probe_refuses_a_policy_it_cannot_run(tmp_path, capsys):
    code = main(["probe", "--store", str(tmp_path / "x.duckdb"), "--policy", "threshold", "--full-grid",
                 "--task", TASKS[0], "--no-report"])
    assert code != 0
    assert "use rung, orchestrator, router, cascade" in capsys.readouterr().err


def test_report_has_a_policies_section(probed, tmp_path):
    from advisor.report import write_report

    with Store.open(probed, read_only=True) as s:
        files = write_report(s, tmp_path, name="r")
    md = files.markdown.read_text(encoding="utf-8") if hasattr(files, "markdown") else (tmp_path / "r" / "report.md").read_text()
    assert "## Policies: floor rung vs orchestrator, learned router and cascade (SIMULATED)" in md
    assert "| orchestrator |" in md and "### Which policy to run (SIMULATED)" in md and ": run " in md
    assert "policies.png" in md and (tmp_path / "r" / "policies.png").stat().st_size > 1000
    html = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert 'id="fig-policies"' in html and 'id="policy-advice"' in html
    data = json.loads((tmp_path / "r" / "floors.json").read_text())
    assert {a["policy"] for a in data["policies"]} == {"fixed", "orchestrator"}
    # one advice row per class and condition in floors.json, each the line the Markdown prints
    assert {(r["task_class"], r["condition"]) for r in data["policy_advice"]} == {
        (a["task_class"], a["condition"]) for a in data["policies"]}
    for r in data["policy_advice"]:
        assert f"{r['task_class']} ({r['condition']}): run {r['run']}: " in md
