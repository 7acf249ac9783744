"""Plans (advisor.plans): chain maths on hand-computed cases, the cheapest clearing plan, next steps, floors JSON."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

import numpy as np
import pytest

from advisor.floors import FloorSettings, analyse, find_floors
from advisor.plans import VerifierUse, candidates, chain_point, plan_cells, recommend
from advisor.scores import VerifierErrors
from advisor.store import Store
from synthetic import make_run


def test_chain_point_hand_computed():
    # one rung, p 0.5, $1, two attempts, perfect verifier: usable 1 - 0.5^2, cost 1 + 0.5 x 1
    assert chain_point([0.5], [1.0], [2], VerifierErrors()) == pytest.approx((1.5, 0.75))
    # escalation: 0.5 on $1 once, then 0.8 on $4 once: usable 0.5 + 0.5 x 0.8, cost 1 + 0.5 x 4
    assert chain_point([0.5, 0.8], [1.0, 4.0], [1, 1], VerifierErrors()) == pytest.approx((3.0, 0.9))
    # false accept 0.2: accept rate 0.5 + 0.5 x 0.2 = 0.6; two attempts accept with 1 - 0.4^2 = 0.84, and an
    # accepted answer is usable with 0.5 / 0.6: usable 0.7; cost 1 + 0.4
    assert chain_point([0.5], [1.0], [2], VerifierErrors(false_accept=0.2)) == pytest.approx((1.4, 0.7))
    # no verifier: the first attempt only
    assert chain_point([0.3, 0.9], [1.0, 5.0], [3, 3], None) == pytest.approx((1.0, 0.3))


def test_candidates_without_a_verifier_are_single_attempts():
    assert candidates(3, None) == [((0,), (1,)), ((1,), (1,)), ((2,), (1,))]
    shapes = candidates(3, VerifierErrors())
    assert ((0, 2), (2, 1)) in shapes and all(len(r) <= 2 for r, _ in shapes)


def _rows(cls, rung, pos, usable, bad, cost, cond="baseline"):
    return ([make_run(cls, f"{cls}-{rung}-{i}", rung, cond, overall=90.0, cost=cost)
             for i in range(usable)]
            + [make_run(cls, f"{cls}-{rung}-b{i}", rung, cond, overall=10.0, cost=cost)
               for i in range(bad)])


def _report(rows, **settings):
    return analyse([asdict(r) for r in rows], FloorSettings(**settings), suite="t")


def test_cheapest_plan_retries_the_small_rung():
    rep = _report(_rows("c", "small", 0, 50, 50, 1.0) + _rows("c", "large", 1, 95, 5, 10.0))
    cp = plan_cells(rep.classes[0], VerifierUse(True), 0.8, 0.9)
    # small alone costs c / p = $2 per usable result whatever k; escalating to large costs more
    assert [s.rung for s in cp.plan.steps] == ["small"] and cp.plan.cost_per_usable == pytest.approx(2.0)
    k = cp.plan.steps[0].attempts
    assert cp.plan.usable == pytest.approx(1 - 0.5 ** k)
    lo, hi = cp.plan.interval
    assert lo >= 0.8 and lo < cp.plan.usable < hi  # the interval is the posterior's, wider than the point
    fewer = plan_cells(rep.classes[0], VerifierUse(True), 0.8, 0.9)
    assert fewer.plan.describe() == cp.plan.describe()  # seeded draws: the same runs, the same answer
    # one attempt fewer does not clear at this confidence (the cheapest-tie goes to the fewest attempts)
    from advisor.plans import _Rungs, evaluate
    import numpy as np

    r = _Rungs(["small"], np.array([50.0]), np.array([100.0]), np.array([1.0]))
    assert not evaluate(r, [((0,), (k - 1,))], VerifierErrors(), 0.8, 0.9)[0].clears
    assert cp.floor == "large" and cp.next_step is None


def test_without_a_verifier_a_plan_is_one_attempt_on_the_floor():
    rep = _report(_rows("c", "small", 0, 50, 50, 1.0) + _rows("c", "large", 1, 95, 5, 10.0))
    cp = plan_cells(rep.classes[0], VerifierUse(False, source="none"), 0.8, 0.9)
    assert cp.plan.describe() == "large x1" and cp.plan.usable == pytest.approx(0.95)
    assert cp.plan.cost_per_usable == pytest.approx(10 / 0.95)


def test_undecided_plan_says_how_many_runs_would_decide_it():
    rep = _report(_rows("c", "large", 0, 9, 1, 10.0))
    cp = plan_cells(rep.classes[0], VerifierUse(False, source="none"), 0.8, 0.9)
    assert cp.plan is None and cp.best.describe() == "large x1"
    assert cp.next_kind == "more_runs" and cp.runs_needed > 0 and f"about {cp.runs_needed} more" in cp.next_step
    more = _report(_rows("c", "large", 0, 9 * (10 + cp.runs_needed) // 10, (10 + cp.runs_needed) // 10, 10.0))
    assert plan_cells(more.classes[0], VerifierUse(False, source="none"), 0.8, 0.9).plan is not None


def test_no_plan_names_the_verifier_or_the_larger_rung_it_needs():
    """No plan clears: the next step names the verifier's accept / reject rates that would make a plan clear, or
    the single-attempt usable rate a larger rung needs (and over how many runs); both hold when checked."""
    from advisor.plans import _Rungs, candidates, evaluate
    from advisor.scores import VerifierErrors

    rep = _report(_rows("c", "large", 0, 60, 40, 10.0))
    cp = plan_cells(rep.classes[0], VerifierUse(False, source="none"), 0.8, 0.9)
    assert cp.plan is None and cp.next_kind == "verifier" and "large x" in cp.next_step
    m = re.search(r"accepts >= (\d+)% of usable answers and rejects >= (\d+)% of unusable", cp.next_step)
    assert m, cp.next_step
    error = 1 - int(m.group(1)) / 100
    v = VerifierErrors(error, error)
    r = _Rungs(["large"], np.array([60.0]), np.array([100.0]), np.array([10.0]))
    assert any(p.clears for p in evaluate(r, candidates(1, v), v, 0.8, 0.9))  # such a verifier would do it
    poor = plan_cells(_report(_rows("c", "large", 0, 10, 90, 10.0)).classes[0], VerifierUse(True), 0.8, 0.9)
    assert poor.next_kind == "larger_rung" and poor.target_met < 0.8 and "nothing on this ladder" in poor.next_step
    lower = re.search(r"a target of (\d+)% clears today", poor.next_step)  # the lower target offered does clear
    assert lower and int(lower.group(1)) / 100 <= poor.target_met, poor.next_step
    m = re.search(r"a larger rung usable >= (\d+)% of the time on one attempt over (\d+) scored runs", poor.next_step)
    assert m, poor.next_step
    rate, runs = int(m.group(1)) / 100 + 0.005, int(m.group(2))
    r = _Rungs(["new"], np.array([rate * runs]), np.array([float(runs)]), np.array([1.0]))
    assert evaluate(r, [((0,), (5,))], VerifierErrors(0, 0), 0.8, 0.9)[0].clears


def test_baseline_without_a_plan_points_at_the_skill():
    rows = _rows("c", "large", 0, 10, 90, 10.0) + _rows("c", "large", 0, 95, 5, 10.0, cond="skill")
    plans = {p.condition: p for p in recommend(_report(rows), {"c": VerifierUse(False, source="none")})}
    assert plans["skill"].plan is not None
    assert plans["baseline"].next_kind == "skill" and "+85 points" in plans["baseline"].next_step


def test_floors_json_contains_plans_and_measured_rates_are_used(tmp_path, capsys):
    from advisor.cli import main

    db = tmp_path / "s.duckdb"
    with Store.open(db) as s:
        s.add_runs_bulk(_rows("c", "small", 0, 50, 50, 1.0) + _rows("c", "large", 1, 95, 5, 10.0))
    assert main(["floors", "--store", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plan = doc["plans"][0]
    assert plan["task_class"] == "c" and plan["plan"]["steps"][0]["rung"] == "small"
    assert plan["verifier"]["source"] == "configured"
    with Store.open(db) as s:
        s.add_verifier_rates([{"measurement_id": "vm_1", "measured_at": "2026-12-04 12:00:00", "task_class": "c",
                               "rung": "*", "verifier_hash": "h", "bar": 75.0, "runs": 200, "unverifiable": 0,
                               "positives": 145, "negatives": 55, "false_accepts": 22, "false_rejects": 0,
                               "false_accept": 0.4, "false_reject": 0.0, "judge_cost_usd": 0.0,
                               "simulated": False}])
        measured = find_floors(s).plans[0]
    assert measured.verifier.source == "measured" and measured.verifier.false_accept == 0.4
    # a leaky verifier lets unusable answers through: the small rung's retries no longer clear alone
    assert measured.plan is None or measured.plan.describe() != plan_desc(plan)


def plan_desc(plan: dict) -> str:
    return ", then ".join(f"{s['rung']} x{s['attempts']}" for s in plan["plan"]["steps"])


def test_a_cheaper_undecided_plan_is_named_beside_the_clearing_one():
    # small at 2/4 ($1): "small x5" reaches 97% at the observed rate, $2 per usable result, but 4 runs leave
    # its interval wide; large at 95/100 ($10) clears on its own at about $10.5 per usable result
    rep = _report(_rows("c", "small", 0, 2, 2, 1.0) + _rows("c", "large", 1, 95, 5, 10.0))
    cp = plan_cells(rep.classes[0], VerifierUse(True), 0.8, 0.9)
    assert cp.plan is not None and cp.cheaper is not None
    assert not cp.cheaper.clears and cp.cheaper.usable >= 0.8
    assert cp.cheaper.cost_per_usable < cp.plan.cost_per_usable
