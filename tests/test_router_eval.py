"""Evaluation fixes: AIQ over a policy's own cost range in escalation mode, parity with the best (not the
largest) single rung, the default point's dominance check, paired bootstrap intervals; and the held-out
evaluation in one command (model ids with '/', a split column, a non-numeric column)."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from advisor.cli import main
from advisor.router.evaluation.metrics import aiq, summarise

N = 400


def arrays(cost, quality):
    return {"cost": np.full(N, float(cost)), "quality": np.asarray(quality, float), "predicted": np.full(N, np.nan)}


def outcomes(rng, better: float):
    """Two rungs (the largest is the worst), a router value sweep, a baseline sweep `better` below it."""
    y = lambda p: (rng.random(N) < p).astype(float)  # noqa: E731
    base = {("rung", "small"): arrays(1.0, y(0.6)), ("rung", "largest"): arrays(4.0, y(0.19)),
            ("oracle", 0.0): arrays(1.0, np.ones(N))}
    shared = [y(0.55), y(0.7), y(0.8)]
    for v, (c, q) in enumerate(zip([1.0, 2.0, 3.0], shared)):
        base[("router_value", float(v))] = arrays(c, q)
        drop = (rng.random(N) < better).astype(float)
        base[("baseline", float(v))] = arrays(c, np.clip(q - drop, 0, 1))
    base[("default", 0.0)] = base[("router_value", 1.0)]
    return base


def test_parity_is_with_the_best_single_rung_and_bootstrap_is_paired():
    rng = np.random.default_rng(0)
    res = outcomes(rng, better=0.1)
    s = summarise({"outcomes": {"single": res}, "prompts": N, "dropped_incomplete": 0})["single"]
    assert s["best_single"]["rung"] == "small"  # the largest rung (quality 0.19) is not the reference
    assert "largest" not in s["parity"]["router_value"]
    assert s["parity"]["router_value"]["cost"] == pytest.approx(2.0)
    b = s["bootstrap"]
    assert b["aiq"]["estimate"] > 0 and b["aiq"]["lo"] > 0  # router better than the baseline, interval above 0
    assert b["quality_at_default_cost"]["lo"] > 0
    assert s["default"]["dominated_by"] == []
    same = summarise({"outcomes": {"single": outcomes(np.random.default_rng(1), better=0.0)}, "prompts": N,
                      "dropped_incomplete": 0})["single"]["bootstrap"]["aiq"]
    assert same["estimate"] == pytest.approx(0.0) and same["lo"] == pytest.approx(0.0)  # paired: identical curves


def test_a_dominated_default_is_reported():
    res = outcomes(np.random.default_rng(2), better=0.0)
    res[("baseline", 9.0)] = arrays(1.5, np.ones(N))
    s = summarise({"outcomes": {"single": res}, "prompts": N, "dropped_incomplete": 0})["single"]
    assert [d["policy"] for d in s["default"]["dominated_by"]] == ["baseline"]


def test_escalation_aiq_is_over_the_policy_own_range():
    res = outcomes(np.random.default_rng(3), better=0.0)
    for v in range(3):  # chains cost more than the cheapest rung alone; quality flat 0.9 over [2, 3]
        res[("router_value", float(v))] = arrays(2.0 + v / 2, np.full(N, 0.9))
    s = summarise({"outcomes": {"escalate": res}, "prompts": N, "dropped_incomplete": 0})["escalate"]
    assert s["aiq"]["router_value"] == pytest.approx(0.9)
    # over the single rungs' range [1, 4] with quality 0 below its cheapest point it would be ~0.6
    assert aiq([(2.0, 0.9), (3.0, 0.9)], 1.0, 4.0) == pytest.approx(0.6, abs=0.01)


# ------------------------------------------------------------------------------ held-out in one command
MODELS = {"nano-12b": (0.9, 0.2), "nano-30b": (0.95, 0.5), "super-120b": (0.97, 0.85)}


def table(path: Path, n: int, seed: int, ids: dict, split: bool = True, extra: dict | None = None) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        hard = rng.random() < 0.5
        row = {"prompt": (f"Prove that the sequence {i} converges and derive its limit" if hard
                          else f"Say hello to friend number {i}"), "task": ["math", "chat"][i % 2]}
        for m, (pe, ph) in MODELS.items():
            row[ids[m]] = float(rng.random() < (ph if hard else pe))
        if split:
            row["orig_split"] = "test" if i % 3 else "train"
        row.update(extra or {})
        rows.append(row)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_heldout_eval_in_one_command(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1]
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    table(train, 150, 0, {m: m for m in MODELS}, split=False)
    store, art = tmp_path / "s.duckdb", tmp_path / "router.json"
    assert run(["import", train, "--ladder", root / "ladders/demo.yaml", "--suite-name", "t", "--store", store],
               capsys)[0] == 0
    code, _, err = run(["router", "train", "--store", store, "--out", art, "--folds", "3"], capsys)
    assert code == 0, err
    # held-out ids carry an organisation prefix and the file has a split column: no --map, no --ignore needed
    table(test, 90, 1, {m: f"nvidia/{m}" for m in MODELS})
    code, out, err = run(["router", "eval", "--artifact", art, "--test-file", test, "--out-dir", tmp_path / "e",
                          "--json"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["simulated"] is True  # the demo ladder's rungs are stand-ins
    assert {"router_value", "baseline"} <= set(summary["single"]["aiq"]) and summary["single"]["default"]
    assert "cascade" in summary["escalate"]["aiq"]
    # a non-numeric column that is not a known bookkeeping column: one line suggesting --ignore
    bad = tmp_path / "bad.csv"
    table(bad, 30, 2, {m: f"nvidia/{m}" for m in MODELS}, extra={"notes": "looks fine"})
    code, _, err = run(["router", "eval", "--artifact", art, "--test-file", bad, "--out-dir", tmp_path / "e2"],
                       capsys)
    assert code != 0 and "--ignore notes" in err and err.count("\n") == 1
    code, out, err = run(["router", "eval", "--artifact", art, "--test-file", bad, "--ignore", "notes",
                          "--usable-threshold", "50", "--out-dir", tmp_path / "e3"], capsys)
    assert code == 0, err
    assert "router DEFAULT" in out and "SIMULATED" in out
