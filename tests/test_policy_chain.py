"""`advisor probe --policy router|cascade` against the embedded Triton: chains of rung episodes decided by the
registered routing rules, stored under the policy's name with one policy_calls row per attempt."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.store import Store

from conftest import DEMO_LADDER

TASKS = ["api-refund-order", "api-cancel-order", "docs-rate-limit-pro", "code-slugify", "extract-orders-revenue",
         "docs-backup-retention"]  # six prompts: enough to cross-fit the router (5 grouped folds)
RUNGS = ["nano-12b", "nano-30b", "super-120b"]


def _args(url, store, *policies, extra=()):
    args = ["probe", "--url", url, "--ladder", str(DEMO_LADDER), "--store", str(store), "--full-grid",
            "--replicas", "1", "--no-report", "--json", *extra]
    for p in policies:
        args += ["--policy", p]
    for t in TASKS:
        args += ["--task", t]
    return args


@pytest.fixture(scope="module")
def probed(triton_server, tmp_path_factory):
    store = tmp_path_factory.mktemp("chain") / "s.duckdb"
    assert main(_args(triton_server.grpc_url, store, "rung", "router", "cascade")) == 0
    return store


def _runs(store, policy):
    with Store.open(store, read_only=True) as s:
        runs = s.runs(policy=policy)
        return [(r, s.policy_call_rows(r["run_key"])) for r in runs]


@pytest.mark.triton
def test_router_runs_are_single_shot_on_the_routers_rung(probed):
    runs = _runs(probed, "router")
    fixed = _runs(probed, "fixed")
    assert runs and len(runs) == len(fixed) // len(RUNGS)  # one per task and condition
    for r, calls in runs:
        assert r["rung"] == "router" and r["rung_position"] == -1 and r["simulated"]
        assert len(calls) == 1 and calls[0]["role"] == "attempt" and calls[0]["model"] in RUNGS
        assert calls[0]["accepted"] is None  # no verifier: single-shot
        assert calls[0]["cost_usd"] == pytest.approx(r["cost_usd"]) and r["cost_usd"] > 0
        assert calls[0]["input_tokens"] == r["input_tokens"] and r["model_calls"] >= 1
        settings = json.loads(r["settings_json"])
        assert settings["mode"] == "single" and settings["router"].startswith("advisor-router/")
        assert settings["router_source"].startswith("cross-fitted")  # out-of-sample: never saw the task's runs
    # one decision per task: both conditions of a task go to the same rung
    by_task: dict[str, set[str]] = {}
    for r, calls in runs:
        by_task.setdefault(r["task_id"], set()).add(calls[0]["model"])
    assert all(len(v) == 1 for v in by_task.values())


@pytest.mark.triton
def test_cascade_escalates_cheapest_first_while_the_verifier_rejects(probed):
    runs = _runs(probed, "cascade")
    assert runs
    escalated = 0
    for r, calls in runs:
        seq = [c["model"] for c in calls]
        assert seq == RUNGS[:len(seq)]  # cheapest first, in one order for every task
        for c in calls[:-1]:
            assert c["accepted"] is False and c["verdict"].startswith("rejected")  # escalated only on a reject
        last = calls[-1]
        assert len(seq) == len(RUNGS) or last["accepted"] is None or last["accepted"] is True or \
            r["task_class"] not in json.loads(r["settings_json"])["verified_classes"]
        assert sum(c["cost_usd"] for c in calls) == pytest.approx(r["cost_usd"])  # escalations are paid for
        assert sum(c["output_tokens"] for c in calls) == r["output_tokens"]
        escalated += len(seq) > 1
    assert escalated > 0
    settings = json.loads(runs[0][0]["settings_json"])
    assert "task-completion" in settings["verifier"] and settings["mode"] == "escalate"


@pytest.mark.triton
def test_policies_compares_floor_rung_router_and_cascade(probed, capsys):
    capsys.readouterr()
    assert main(["policies", "--store", str(probed), "--ladder", str(DEMO_LADDER), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = {(a["task_class"], a["condition"]) for a in out["arms"]}
    for cell in cells:
        kinds = sorted(a["policy"] for a in out["arms"] if (a["task_class"], a["condition"]) == cell)
        assert kinds == ["cascade", "fixed", "router"]
    with Store.open(probed, read_only=True) as s:
        cascade = s.runs(policy="cascade")
    for a in (a for a in out["arms"] if a["policy"] == "cascade"):
        mine = [r for r in cascade if (r["task_class"], r["condition"]) == (a["task_class"], a["condition"])
                and not r["unscored"]]
        assert a["cost_per_attempt"] == pytest.approx(sum(r["cost_usd"] for r in mine) / len(mine))
        if a["usable_rate"]:
            assert a["cost_per_usable"] == pytest.approx(a["cost_per_attempt"] / a["usable_rate"])
        assert sum(a["expert_calls"].values()) >= a["runs"]
        assert a["own_family_share"] is None  # only the orchestrator has a family
    assert len(out["recommendations"]) == len(cells)


@pytest.mark.triton
def test_router_file_is_used_and_a_missing_router_is_a_clear_error(probed, triton_server, tmp_path, capsys):
    empty = tmp_path / "empty.duckdb"
    assert main(_args(triton_server.grpc_url, empty, "router")) != 0
    assert "needs a router" in capsys.readouterr().err
    artifact = tmp_path / "router.json"
    assert main(["router", "train", "--store", str(probed), "--out", str(artifact), "--folds", "2"]) == 0
    other = tmp_path / "other.duckdb"
    assert main(_args(triton_server.grpc_url, other, "router", extra=["--router", str(artifact)])) == 0
    runs = _runs(other, "router")
    assert runs and {json.loads(r["settings_json"])["router_file"] for r, _ in runs} == {str(artifact)}
    assert {json.loads(r["settings_json"])["router_source"] for r, _ in runs} == {f"router file {artifact}"}
