"""Adaptive probing on a synthetic oracle: same floors as the full grid for at most 60% of its runs."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import pytest

from advisor.probe.adaptive import AdaptivePlan, simulate
from advisor.probe.planners import AdaptivePlanner, run_waves
from advisor.errors import DataError
from advisor.floors import FloorSettings, analyse, load_rows
from advisor.store import Store
from synthetic import RUNGS, TINY_SUITE, Oracle, demo_oracle


def _plan(oracle: Oracle, replicas: int, **kw) -> AdaptivePlan:
    cells = {(c, cond): oracle.task_ids(c) for c in oracle.tasks for cond in ("baseline", "skill")}
    return AdaptivePlan(cells, RUNGS, replicas, **kw)


def _row(oracle: Oracle):
    return lambda u: asdict(oracle.run(u.task_class, u.task_id, u.rung, u.condition, u.replica))


def _floors(report):
    return {(c.task_class, c.condition): c.floor for c in report.classes}


@pytest.mark.parametrize("replicas", [5, 8])
def test_adaptive_agrees_with_full_grid_and_saves(replicas):
    oracle = demo_oracle()
    settings = FloorSettings()
    full = analyse([asdict(r) for r in oracle.full_grid(replicas)], settings)
    plan = _plan(oracle, replicas, settings=settings)
    result = simulate(plan, _row(oracle))
    assert result.full_grid_runs == len(oracle.full_grid(replicas))
    assert _floors(result.floors) == _floors(full)
    assert set(_floors(full).values()) == {"mid", "large"}
    assert result.runs_spent <= 0.6 * result.full_grid_runs, result.summary()
    # never more than the full grid's budget in any cell, and no unit twice
    assert len(plan.issued) == result.runs_spent
    for cf in result.floors.classes:
        for v in cf.rungs:
            assert v.stats.runs <= oracle.tasks[cf.task_class] * replicas


def test_plan_rules_small_to_large_and_implied():
    oracle = demo_oracle()
    plan = _plan(oracle, 5)
    rows = []
    first = plan.next_wave(rows)
    # wave 1: one batch of the smallest rung per (class, condition), round-robin over tasks at replica 0
    assert {u.rung for u in first} == {"small"}
    assert len(first) == 6 * plan.batch and {u.replica for u in first} == {0}
    rows += [_row(oracle)(u) for u in first]
    second = plan.next_wave(rows)
    assert {u.rung for u in second} == {"mid"}  # small is below after 6 failures (upper bound 0.31)
    states = {(s.task_class, s.condition): s for s in plan.states(rows)}
    assert states[("lookup", "baseline")].statuses["small"] == "below"


def test_below_implies_smaller_rungs_below():
    # a larger rung known to be below makes an undecided smaller one implied below: it is not sampled
    plan = AdaptivePlan({("c", "baseline"): ["t0", "t1", "t2", "t3"]}, RUNGS, 4, batch=4)
    def row(rung, i, overall):
        return {"suite_name": "s", "task_id": f"t{i}", "task_class": "c", "rung": rung,
                "rung_position": RUNGS.index(rung), "condition": "baseline", "replica": 0, "stop_reason": "final",
                "turns": 5, "cost_usd": 0.01, "judge_cost_usd": 0.0, "if_score": overall, "tc_score": overall,
                "overall": overall, "unscored": False, "simulated": False}
    rows = [row("small", i, 90 if i < 3 else 10) for i in range(4)]  # 3/4: undecided
    rows += [row("mid", i, 10) for i in range(4)]  # 0/4: below
    st = plan.states(rows)[0]
    assert st.statuses["small"] == "implied below" and st.statuses["mid"] == "below"
    assert st.sampling == "large"
    assert {u.rung for u in plan.next_wave(rows)} == {"large"}


def test_stops_at_budget_when_nothing_clears():
    p = {(c, cond, r): 0.6 for c in ("x",) for cond in ("baseline", "skill") for r in RUNGS}
    oracle = Oracle(p=p, tasks={"x": 5})
    plan = _plan(oracle, 3)
    result = simulate(plan, _row(oracle))
    assert result.runs_spent <= result.full_grid_runs
    assert all(s.sampling is None for s in result.groups)
    assert all(c.floor is None for c in result.floors.classes)


def test_bad_plan_inputs():
    with pytest.raises(DataError):
        AdaptivePlan({}, RUNGS, 3)
    with pytest.raises(DataError):
        AdaptivePlan({("c", "baseline"): ["t"]}, RUNGS, 0)


def test_run_adaptive_drives_a_store(tmp_path):
    oracle = demo_oracle()
    store = Store.open(tmp_path / "a.duckdb")
    waves = []

    class_of = {t: c for c in oracle.tasks for t in oracle.task_ids(c)}

    async def execute_wave(specs):
        store.add_runs_bulk([oracle.run(class_of[s.task_id], s.task_id, s.rung, s.condition, s.replica)
                             for s in specs])

    # a resumed probe: some runs are already stored and count as issued
    store.add_runs_bulk([oracle.run("lookup", t, "small", "baseline", 0) for t in oracle.task_ids("lookup")])
    plan = _plan(oracle, 5)
    result = asyncio.run(run_waves(AdaptivePlanner(plan=plan), execute_wave, lambda: load_rows(store, "synth"),
                                   on_wave=lambda i, w: waves.append(len(w))))
    stored = store.count_runs()
    store.close()
    assert stored == result.runs_spent + 8
    assert sum(waves) == result.runs_spent and len(waves) == result.waves
    full = analyse([asdict(r) for r in oracle.full_grid(5)], FloorSettings())
    assert _floors(result.floors) == _floors(full)
    assert "vs 720 for the full grid" in result.summary()




@pytest.mark.triton
@pytest.mark.slow
def test_adaptive_probe_on_embedded_triton(tmp_path):
    from pathlib import Path

    from advisor.probe.session import ProbeConfig, run_probe

    suite = tmp_path / "suite.yaml"
    suite.write_text(TINY_SUITE)
    ladder = Path(__file__).resolve().parent.parent / "ladders" / "demo.yaml"
    cfg = ProbeConfig(ladder_path=ladder, suite_path=suite, store_path=tmp_path / "a.duckdb", replicas=4)
    waves = []
    run = run_probe(cfg, AdaptivePlanner(batch=2), on_wave=lambda i, w: waves.append(len(w)))
    result = run.adaptive
    assert result.full_grid_runs == 2 * 3 * 4  # two baseline-only tasks, three rungs, four replicas
    assert result.runs_spent == sum(waves) == run.outcome.count("done") < result.full_grid_runs
    with Store.open(tmp_path / "a.duckdb", read_only=True) as s:
        assert s.count_runs() == result.runs_spent
        assert s.count_runs(simulated=True) == result.runs_spent
    assert run.notes == [result.summary()]
    # a rerun resumes: nothing new to run
    again = run_probe(cfg, AdaptivePlanner(batch=2))
    assert again.adaptive.runs_spent == 0 and again.outcome.count("done") == 0
    assert again.already_stored == result.runs_spent
    # a run stored as a backend error (server died mid-probe) is not a sample: the next rerun retries it
    import duckdb

    con = duckdb.connect(str(tmp_path / "a.duckdb"))
    con.execute("UPDATE runs SET stop_reason = 'backend_error', unscored = true, if_score = NULL, tc_score = NULL, "
                "overall = NULL WHERE run_key = (SELECT min(run_key) FROM runs)")
    con.close()
    retried = run_probe(cfg, AdaptivePlanner(batch=2))
    assert retried.outcome.count("done") == 1
    with Store.open(tmp_path / "a.duckdb", read_only=True) as s:
        assert s.count_runs() == result.runs_spent
        assert s.count_runs(stop_reason="backend_error") == 0 and s.count_runs(unscored=True) == 0


def test_replay_on_a_stored_full_grid():
    from advisor.probe.adaptive import replay

    oracle = demo_oracle()
    rows = [asdict(r) for r in oracle.full_grid(5)]
    result = replay(rows, 5)
    assert _floors(result.floors) == _floors(analyse(rows, FloorSettings()))
    assert result.full_grid_runs == len(rows) and result.runs_spent <= 0.6 * len(rows)
    with pytest.raises(DataError, match="missing"):
        replay(rows[1:], 5)


def _rows(rung, outcomes, cls="c"):
    return [{"suite_name": "s", "task_id": f"t{i}", "task_class": cls, "rung": rung,
             "rung_position": RUNGS.index(rung), "condition": "baseline", "replica": 0, "stop_reason": "final",
             "turns": 5, "cost_usd": 0.01, "judge_cost_usd": 0.0, "if_score": o, "tc_score": o, "overall": o,
             "unscored": False, "simulated": False} for i, o in enumerate(outcomes)]


def test_clears_needs_every_task_below_needs_one_batch():
    tasks = [f"t{i}" for i in range(10)]
    plan = AdaptivePlan({("c", "baseline"): tasks}, RUNGS, 3, settings=FloorSettings(target=0.3), batch=4)
    # 4/4 usable: the interval (0.60-1.00) clears 0.3, but 6 of the 10 tasks are unseen: not decided yet
    st = plan.states(_rows("small", [90] * 4))[0]
    assert st.statuses["small"] == "undecided" and st.floor is None and st.sampling == "small"
    st = plan.states(_rows("small", [90] * 10))[0]
    assert st.statuses["small"] == "clears" and st.floor == "small"
    # 4/4 failures against a 0.9 target: below after one batch
    plan = AdaptivePlan({("c", "baseline"): tasks}, RUNGS, 3, settings=FloorSettings(target=0.9), batch=4)
    st = plan.states(_rows("small", [10] * 4))[0]
    assert st.statuses["small"] == "below" and st.sampling == "mid"


@pytest.mark.triton
@pytest.mark.slow
def test_demo_ladder_shape_and_adaptive_savings(tmp_path):
    """The full default probe (example suite, demo ladder, 3 replicas): the calibrated shape (the published
    levels, docs/standin.md), and adaptive probing replayed on it agrees with its floors for at most 60% of its runs."""
    from advisor.probe.adaptive import replay
    from advisor.probe.session import ProbeConfig, run_probe

    run_probe(ProbeConfig(store_path=tmp_path / "demo.duckdb", replicas=3))
    with Store.open(tmp_path / "demo.duckdb", read_only=True) as s:
        rows = load_rows(s, "example")
    full = analyse(rows, FloorSettings())
    for cf in full.classes:  # at the published levels no rung is usable 80% of the time; nano-12b never converges
        assert cf.verdict("nano-12b").status == "below" and cf.verdict("nano-12b").why_below == "does_not_converge"
        assert cf.floor is None, cf.note
    skill = {c.task_class: c for c in full.classes if c.condition == "skill"}
    assert skill["multi_step"].verdict("nano-30b").why_below == "does_not_converge"
    # Price per task misleads: nano-30b is cheaper per attempt, super-120b cheaper per usable result.
    nano, big = skill["api_calls"].verdict("nano-30b"), skill["api_calls"].verdict("super-120b")
    assert nano.stats.cost_per_attempt < big.stats.cost_per_attempt
    assert nano.first_time_cost_per_usable > big.first_time_cost_per_usable
    # For retryable work (target 0.25) super-120b is the floor of api_calls with the skill.
    low = {c.task_class: c for c in analyse(rows, FloorSettings(target=0.25)).classes if c.condition == "skill"}
    assert low["api_calls"].floor == "super-120b", low["api_calls"].note
    # The write-up's rule of thumb (docs/standin.md, per-class calibration): nano-30b first, with retries, on the
    # narrow classes without the skill; super-120b for multi-step work (no verifier); nano-12b in no plan.
    from advisor.plans import VerifierUse, recommend

    verifiers = {c: VerifierUse(c != "multi_step") for c in {cf.task_class for cf in full.classes}}
    plans = {(p.task_class, p.condition): p for p in recommend(full, verifiers)}
    for cls in ("api_calls", "doc_retrieval", "extraction", "code_change"):
        assert plans[cls, "baseline"].plan.first_rung == "nano-30b", plans[cls, "baseline"]
    assert {(plans["multi_step", c].plan or plans["multi_step", c].best).first_rung for c in ("baseline", "skill")} \
        == {"super-120b"}
    chosen = [p.plan or p.best for p in plans.values()]
    assert all(step.rung != "nano-12b" for plan in chosen if plan is not None for step in plan.steps)
    result = replay(rows, 3)
    assert _floors(result.floors) == _floors(full)
    assert result.runs_spent <= 0.6 * len(rows), result.summary()


def test_interim_confidence_is_stricter_before_the_full_budget():
    plan = AdaptivePlan({("c", "baseline"): [f"t{i}" for i in range(5)]}, RUNGS, 3, batch=5)  # budget 15: 3 looks
    assert plan.interim_confidence(("c", "baseline"), "small", 15) == pytest.approx(0.9)
    assert plan.interim_confidence(("c", "baseline"), "small", 10) == pytest.approx(1 - 0.1 / 3)
    # 12/12 usable clears 0.8 at 90% (lower bound 0.82) but not at 96.7% before the budget is spent
    rows = [dict(r, replica=i // 5, task_id=f"t{i % 5}") for i, r in enumerate(_rows("small", [90] * 12))]
    st = plan.states(rows)[0]
    assert st.statuses["small"] == "undecided"


def test_plan_stage_samples_an_undecided_plan():
    """Step 6: with the classes' verifiers known, a group whose rungs are decided but whose plan is undecided
    keeps sampling the plan's rungs (within the budget) until the plan is decided; without them it stops."""
    from advisor.plans import VerifierUse, plan_cells

    p = {("x", cond, r): rate for cond in ("baseline", "skill") for r, rate in zip(RUNGS, (0.0, 0.0, 0.5))}
    oracle = Oracle(p=p, tasks={"x": 5})
    plain = simulate(_plan(oracle, 12), _row(oracle))
    planned = simulate(_plan(oracle, 12, verifiers={"x": True}), _row(oracle))
    assert planned.runs_spent > plain.runs_spent
    assert all(not g.for_plan or g.sampling for g in planned.groups)
    settings = FloorSettings()
    for cf in planned.floors.classes:
        cp = plan_cells(cf, VerifierUse(True), settings.target, settings.confidence)
        open_budget = any(v.stats.runs < 5 * 12 for v in cf.rungs if v.stats.rung in cp.decide_rungs)
        assert cp.plan is not None or cp.next_kind != "more_runs" or not open_budget
