"""Floor finder: Wilson maths on hand-checked numbers, floor decisions with known answers, money via chain_outcome."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.errors import DataError
from advisor.floors import FloorSettings, find_floors, wilson_interval, z_for
from advisor.scores import Step, VerifierErrors, chain_outcome
from advisor.store import Store
from synthetic import demo_oracle, make_run


def test_wilson_hand_checked():
    # 8/10 at 95%: centre (0.8 + 1.9208/10) / 1.38416 = 0.71673, half 1.96 * sqrt(0.0256042) / 1.38416 = 0.22658
    lo, hi = wilson_interval(8, 10, 0.95)
    assert lo == pytest.approx(0.49016, abs=1e-4)
    assert hi == pytest.approx(0.94331, abs=1e-4)
    # all successes: the lower bound is n / (n + z^2); z(0.9) = 1.6449
    assert z_for(0.9) == pytest.approx(1.644854, abs=1e-5)
    lo, hi = wilson_interval(20, 20, 0.9)
    assert lo == pytest.approx(20 / (20 + 1.644854 ** 2), abs=1e-6)
    assert hi == pytest.approx(1.0)
    # no successes: upper bound z^2 / (n + z^2)
    lo, hi = wilson_interval(0, 8, 0.9)
    assert lo == 0.0 and hi == pytest.approx(1.644854 ** 2 / (8 + 1.644854 ** 2), abs=1e-6)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def _store(tmp_path, runs):
    s = Store.open(tmp_path / "s.duckdb")
    s.add_runs_bulk(runs)
    return s


def _cell(cls, rung, n_usable, n_bad, cond="baseline", bad_overall=10.0, bad_stop="final", cost=None,
          unscored=0, turns_ok=8, turns_bad=30):
    runs = [make_run(cls, f"{cls}-t{i}", rung, cond, overall=90.0, cost=cost, turns=turns_ok)
            for i in range(n_usable)]
    runs += [make_run(cls, f"{cls}-t{n_usable + i}", rung, cond, overall=bad_overall, stop_reason=bad_stop,
                      cost=cost, turns=turns_bad) for i in range(n_bad)]
    runs += [make_run(cls, f"{cls}-u{i}", rung, cond, unscored=True, cost=cost, stop_reason="backend_error")
             for i in range(unscored)]
    return runs


def test_floor_decisions_known_answer(tmp_path):
    runs = (_cell("narrow", "small", 0, 20, bad_stop="max_turns", bad_overall=5)  # does not converge
            + _cell("narrow", "mid", 20, 0, unscored=3)  # clears: lower bound 0.88 >= 0.8
            + _cell("narrow", "large", 20, 0)
            + _cell("multi", "small", 0, 20, bad_overall=40)  # converges to poor results
            + _cell("multi", "mid", 10, 10)  # 50%: upper bound 0.68 < 0.8 -> below
            + _cell("multi", "large", 17, 3))  # 85%: interval 0.66-0.94 straddles -> undecided
    with _store(tmp_path, runs) as s:
        rep = find_floors(s)
    narrow, multi = rep.get("narrow", "baseline"), rep.get("multi", "baseline")
    assert [v.status for v in narrow.rungs] == ["below", "clears", "clears"]
    assert narrow.floor == "mid" and narrow.floor_status == "decided"
    assert narrow.verdict("small").why_below == "does_not_converge"
    assert multi.verdict("small").why_below == "poor_results"
    assert [v.status for v in multi.rungs] == ["below", "below", "undecided"]
    assert multi.floor is None and multi.floor_status == "none" and "undecided: large" in multi.note
    # unscored runs are counted apart, not in the rate
    mid = narrow.verdict("mid").stats
    assert (mid.runs, mid.unscored, mid.scored, mid.usable) == (23, 3, 20, 20)
    assert mid.usable_rate == 1.0
    assert rep.unscored == 3
    # turns split by outcome
    assert multi.verdict("mid").stats.turns_success == 8 and multi.verdict("mid").stats.turns_failure == 30


def test_provisional_floor_and_target_setting(tmp_path):
    runs = _cell("c", "small", 3, 2) + _cell("c", "mid", 30, 0) + _cell("c", "large", 30, 0)
    with _store(tmp_path, runs) as s:
        cf = find_floors(s).get("c", "baseline")
        assert cf.verdict("small").status == "undecided"
        assert cf.floor == "mid" and cf.floor_status == "provisional"
        # a lower target lets small (3/5) clear... only if its lower bound clears: 0.26 at 90% -> set 0.2
        cf2 = find_floors(s, settings=FloorSettings(target=0.2)).get("c", "baseline")
        assert cf2.floor == "small" and cf2.floor_status == "decided"


def test_cost_per_usable_matches_chain_outcome(tmp_path):
    runs = (_cell("c", "small", 2, 18, cost=0.01) + _cell("c", "mid", 18, 2, cost=0.02)
            + _cell("c", "large", 20, 0, cost=0.05))
    settings = FloorSettings(target=0.6, k=2, false_accept=0.1, false_reject=0.05)
    with _store(tmp_path, runs) as s:
        cf = find_floors(s, settings=settings).get("c", "baseline")
    v = VerifierErrors(0.1, 0.05)
    want_small = chain_outcome([Step(0.1, 0.01, 2), Step(0.9, 0.02, 2), Step(1.0, 0.05, 2)], v)
    want_mid = chain_outcome([Step(0.9, 0.02, 2), Step(1.0, 0.05, 2)], v)
    assert cf.verdict("small").cost_per_usable == pytest.approx(want_small.cost_per_usable)
    assert cf.verdict("small").chain_p_usable == pytest.approx(want_small.p_usable)
    assert cf.verdict("mid").cost_per_usable == pytest.approx(want_mid.cost_per_usable)
    assert cf.verdict("mid").first_time_cost_per_usable == pytest.approx(0.02 / 0.9)
    assert cf.verdict("mid").points_per_dollar == pytest.approx((18 * 90 + 2 * 10) / 20 / 0.02)
    assert cf.floor == "mid" and cf.recommended == "mid"


def test_first_time_can_change_the_answer(tmp_path):
    # mid: p 0.85 at $0.020; large: p 1.0 at $0.0236. One shot: mid is cheaper per usable result (0.0235 vs
    # 0.0236). With a verifier that rejects 30% of good answers, retries on mid waste money and large wins.
    runs = (_cell("c", "small", 0, 20, cost=0.01) + _cell("c", "mid", 85, 15, cost=0.02)
            + _cell("c", "large", 100, 0, cost=0.0236))
    settings = FloorSettings(target=0.75, false_reject=0.3)
    with _store(tmp_path, runs) as s:
        cf = find_floors(s, settings=settings).get("c", "baseline")
    v = VerifierErrors(0.0, 0.3)
    mid = chain_outcome([Step(0.85, 0.02, 3), Step(1.0, 0.0236, 3)], v).cost_per_usable
    large = chain_outcome([Step(1.0, 0.0236, 3)], v).cost_per_usable
    assert large < mid
    assert cf.floor == "mid"
    assert cf.recommended == "large" and cf.first_time == "mid" and cf.first_time_changes
    assert "usable first time, use mid" in cf.note


def test_bar_setting_changes_usable(tmp_path):
    runs = [make_run("c", f"t{i}", "mid", overall=70.0) for i in range(20)]
    with _store(tmp_path, runs) as s:
        assert find_floors(s).get("c", "baseline").verdict("mid").stats.usable == 0
        assert find_floors(s, settings=FloorSettings(bar=60)).get("c", "baseline").verdict("mid").stats.usable == 20


def test_demo_shape_on_full_grid(tmp_path):
    oracle = demo_oracle()
    with _store(tmp_path, oracle.full_grid(replicas=5)) as s:
        rep = find_floors(s)
    for cond in ("baseline", "skill"):
        for cls in ("lookup", "api_call"):
            assert rep.get(cls, cond).floor == "mid", rep.get(cls, cond).note
        assert rep.get("multi_step", cond).floor == "large"
        assert all(rep.get(c, cond).verdict("small").status == "below" for c in oracle.tasks)


def test_bad_settings_and_inputs(tmp_path):
    with pytest.raises(DataError, match="target"):
        FloorSettings(target=1.5)
    with Store.open(tmp_path / "empty.duckdb") as s:
        with pytest.raises(DataError, match="no probe or imported runs"):
            find_floors(s)
    with _store(tmp_path, _cell("narrow", "mid", 5, 0)) as s:
        with pytest.raises(DataError, match="no runs for suite 'nope'"):
            find_floors(s, suite="nope")
        with pytest.raises(DataError, match="Did you mean 'narrow'"):
            find_floors(s, classes=["narow"])


def test_cli_floors_json_and_errors(tmp_path, capsys):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as s:
        s.add_runs_bulk(_cell("narrow", "small", 0, 10) + _cell("narrow", "mid", 20, 0))
    assert main(["floors", "--store", str(path), "--json", "--target", "0.7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["target"] == 0.7
    assert out["classes"][0]["floor"] == "mid"
    assert main(["floors", "--store", str(path)]) == 0
    text = capsys.readouterr().out
    assert "single attempt: floor mid (decided)" in text and "recommended:" not in text
    small = next(line for line in text.splitlines() if line.split()[:1] == ["small"])
    # the small rung's runs ended with a final answer: below for poor results, not for failing to converge
    assert "below: converges to poor results" in small and "does not converge" not in small
    assert main(["floors", "--store", str(path), "--suite-name", "other"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no runs for suite 'other'" in err and len(err.strip().splitlines()) == 1
    assert main(["floors", "--store", str(tmp_path / "missing.duckdb")]) != 0
    assert "no store here yet" in capsys.readouterr().err


def test_imported_runs_do_not_claim_convergence(tmp_path):
    runs = [make_run("c", f"t{i}", "small", overall=30.0, stop_reason="imported") for i in range(10)]
    with _store(tmp_path, runs) as s:
        v = find_floors(s).get("c", "baseline").verdict("small")
    assert v.status == "below" and v.why_below == "poor_results"
    assert "not recorded" in v.reason and "converges" not in v.reason


def test_a_suite_probed_on_two_ladders_is_refused_not_mixed(tmp_path):
    from dataclasses import replace

    from advisor.store import make_run_key

    with Store.open(tmp_path / "two.duckdb") as store:
        store.add_runs_bulk([make_run("narrow", "t1", "small"), make_run("narrow", "t1", "mid")])
        other = replace(make_run("narrow", "t1", "small"), run_key=make_run_key("other ladder"),
                        ladder_name="nemotron", ladder_hash="otherhash")
        store.add_runs_bulk([other])
        with pytest.raises(DataError, match=r"several ladders \(nemotron, synthladder\)"):
            find_floors(store)
