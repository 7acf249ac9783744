"""The policy comparison without Triton: `PolicyQueries` on a real DuckDB file, `compare` and `recommend`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.floors import FloorSettings
from advisor.report.analysis import Arm, compare, recommend, side_by_side
from advisor.orchestrator.loop import PolicyCall
from advisor.store import Store

from synthetic import make_run


class _Ladder:
    """Just what `compare` reads of a ladder."""

    name = "synthladder"

    class roles:
        orchestrator = None

    def __init__(self):
        from types import SimpleNamespace

        self.rungs = [SimpleNamespace(name=n, hf_id=f"org/{n}") for n in ("small", "mid", "large")]


@pytest.fixture()
def store(tmp_path):
    s = Store.open(tmp_path / "s.duckdb")
    for i in range(10):  # fixed rungs: small never usable, large always
        s.add_run(make_run("c", f"t{i}", "small", replica=0, overall=10.0))
        s.add_run(make_run("c", f"t{i}", "large", replica=0, overall=90.0))
    for i in range(10):  # a cascade: small rejected (correctly), then large accepted; one false reject on t0
        run = replace(make_run("c", f"t{i}", "small", replica=1, overall=90.0, cost=0.06), policy="cascade",
                      rung="cascade", rung_position=-1)
        calls = [PolicyCall(0, 0, "small", "attempt", 10, 5, 0.01, 0.1, None, "rejected: x", False, i == 0),
                 PolicyCall(1, 1, "large", "attempt", 10, 5, 0.05, 0.1)]
        s.add_run(run, policy_calls=calls)
    yield s
    s.close()


def test_store_queries_count_calls_and_verifier_errors(store):
    counts = {r["model"]: r for r in store.expert_call_counts("synth", "synthladder")}
    assert counts["small"]["n"] == 10 and counts["large"]["n"] == 10 and counts["small"]["rated"] == 0
    (v,) = store.verifier_counts("synth", "synthladder")
    assert v["judged"] == 10 and v["usable"] == 1 and v["false_rejects"] == 1 and v["false_accepts"] == 0
    assert store.policy_ladder_hashes("synth") == ["ladderhash"]
    assert len(store.arm_rows("synth", "synthladder")) == 30
    assert [c["model"] for c in store.policy_call_rows(store.runs(policy="cascade")[0]["run_key"])] == ["small", "large"]


def test_compare_marks_the_floor_rung_and_measures_the_cascade(store):
    arms = compare(store, "synth", _Ladder(), FloorSettings(target=0.7))
    by = {a.arm: a for a in arms}
    assert by["large"].floor_rung and by["large"].floor_found and not by["small"].floor_rung
    cascade = by["cascade"]
    assert cascade.expert_calls == {"small": 10, "large": 10} and cascade.strongest_share == 0.5
    assert cascade.false_reject == 1.0 and cascade.false_accept == 0.0 and cascade.verified == 10
    assert cascade.cost_per_usable == pytest.approx(0.06)  # $0.06 a run (both attempts), every run usable
    assert [a.arm for a in side_by_side(arms)] == ["large", "cascade"]


def _arm(name, policy, rate, cost, runs=30, calls=None, floor=False):
    return Arm("c", "baseline", name, policy, runs, runs, int(rate * runs), rate, (0.0, 1.0), cost * rate,
               cost, 1.0, True, floor_rung=floor, expert_calls=calls or {})


def test_recommend_takes_the_cheapest_arm_reaching_the_target_else_the_most_usable():
    arms = [_arm("mid", "fixed", 0.9, 0.02, floor=True), _arm("router", "router", 0.85, 0.01, calls={"a": 1, "b": 2}),
            _arm("cascade", "cascade", 0.95, 0.005)]
    (run, why), = recommend(arms, 0.8).values()
    assert run == "cascade" and "needs a verifier" in why and "next router" in why
    low = [replace(a, usable_rate=r) for a, r in zip(arms, (0.6, 0.5, 0.4))]
    (run, why), = recommend(low, 0.8).values()
    assert run == "floor rung mid" and "none reaches the 80% target" in why  # the most usable, whatever it costs
    (run, _), = recommend([replace(a, usable_rate=0.5) for a in arms], 0.8).values()
    assert run == "cascade"  # equal rates: the cheapest per usable result
    single = [_arm("large", "fixed", 0.3, 0.05, runs=5, floor=True),
              _arm("router", "router", 0.4, 0.04, calls={"large": 30})]
    (run, why), = recommend(single, 0.8).values()
    assert run == "router" and "same as running large (30 runs here vs 5 fixed runs of it)" in why
    assert "only" not in why  # 30 scored runs is not a small sample


def test_policies_without_policy_runs_is_one_clear_error(store, capsys):
    from advisor.cli import main

    path = store.path
    store.close()
    with Store.open(path) as s:
        s.delete_runs([r["run_key"] for r in s.runs(policy="cascade")])
    assert main(["policies", "--store", str(path)]) != 0
    err = capsys.readouterr().err
    assert "has no policy runs yet" in err and "advisor probe --policy" in err
