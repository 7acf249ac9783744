"""The CLI end to end on a small file: import -> router train -> route -> router eval; and the benchmark script
on a synthetic RouterBench-style table with real `<model>|total_cost` columns."""

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from advisor.cli import main
from advisor.store import Store

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"nano-12b": (0.9, 0.2), "nano-30b": (0.95, 0.5), "super-120b": (0.97, 0.85)}  # P(usable) easy, hard
TASKS = ["math", "chat"]


def make_table(path: Path, n: int = 160, seed: int = 0, costs: bool = False, names=None) -> None:
    """A wide RouterBench-style table: hard prompts (long proofs) defeat the small rungs."""
    rng = np.random.default_rng(seed)
    names = names or {m: m for m in MODELS}
    rows = []
    for i in range(n):
        hard = rng.random() < 0.5
        task = TASKS[i % 2]
        text = (f"Prove that the sequence {i} converges and derive its limit in detail" if hard
                else f"Say hello to friend number {i}")
        row = {"sample_id": f"s{i}", "prompt": text, "eval_name": task}
        for m, (pe, ph) in MODELS.items():
            row[names[m]] = float(rng.random() < (ph if hard else pe))
            if costs:
                row[f"{names[m]}|total_cost"] = {"nano-12b": 1e-5, "nano-30b": 3e-5, "super-120b": 2e-4}[m]
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
def test_cli_end_to_end(tmp_path, capsys):
    data, store, art = tmp_path / "d.csv", tmp_path / "s.duckdb", tmp_path / "router.json"
    make_table(data)
    code, out, err = run(["import", data, "--ladder", ROOT / "ladders/demo.yaml", "--suite-name", "syn",
                          "--store", store, "--json"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["runs_added"] == 480 and rep["cost_estimated"] == 480 and rep["classes"] == {"math": 80, "chat": 80}
    with Store.open(store, read_only=True) as s:
        assert s.count_runs(kind="imported", suite_name="syn") == 480

    code, out, err = run(["router", "train", "--store", store, "--out", art, "--folds", "3"], capsys)
    assert code == 0, err
    assert "AUC" in out and art.exists()

    hard = "Prove that the sequence 9999 converges and derive its limit in detail"
    code, out, err = run(["route", "--router", art, "--prompt", hard, "--no-verifier", "--target", "0.7", "--json"],
                         capsys)
    assert code == 0, err
    decision = json.loads(out)
    assert decision["rung"] == "super-120b" and decision["explanation"]["probabilities"]["nano-12b"] < 0.5
    code, out, _ = run(["route", "--router", art, "--prompt", "Say hello to friend number 5", "--no-verifier",
                        "--policy", "router", "--json"], capsys)
    assert json.loads(out)["rung"] == "nano-12b"
    code, out, err = run(["route", "--router", art, "--prompt", hard, "--allow", "nano-3b"], capsys)
    assert code != 0 and "Did you mean 'nano-30b'" in err

    batch, results = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    batch.write_text("".join(json.dumps({"id": i, "prompt": p, "task": "math"}) + "\n"
                             for i, p in enumerate([hard, "Say hello to friend number 1", hard])))
    code, _, err = run(["route", "--router", art, "--batch", batch, "--out", results, "--k", "2"], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert [x["id"] for x in lines] == [0, 1, 2]
    assert all({"rung", "expected_cost_usd", "p_usable", "chain"} <= set(x) for x in lines)

    out_dir = tmp_path / "eval"
    code, out, err = run(["router", "eval", "--store", store, "--folds", "3", "--out-dir", out_dir], capsys)
    assert code == 0, err
    summary = json.loads((out_dir / "summary.json").read_text())
    for mode in ("single", "escalate"):
        curves = summary[mode]["curves"]
        assert {"default", "router", "router_value", "baseline", "rung:super-120b", "rung:nano-12b", "random",
                "class_floor", "threshold", "oracle"} <= set(curves)
        assert summary[mode]["default"]["dominated_by"] is not None and "bootstrap" in summary[mode]
        oracle = curves["oracle"][0]["quality"]
        assert all(p["quality"] <= oracle + 1e-9 for pts in curves.values() for p in pts)
        assert (out_dir / f"cost_quality_{mode}.png").stat().st_size > 1000
    # the router beats always-smallest on quality and always-largest on cost on this easy/hard split
    single = summary["single"]
    assert single["aiq"]["router_value"] > single["aiq"]["rung:nano-12b"]
    largest = single["curves"]["rung:super-120b"][0]
    assert any(p["quality"] >= largest["quality"] - 0.06 and p["cost"] <= 0.7 * largest["cost"]
               for p in single["curves"]["router"])
    assert "cascade" in summary["escalate"]["curves"] and "aiq" in single["bootstrap"]
    assert "SIMULATED" in out  # the demo ladder's rungs are stand-ins

    code, out, err = run(["router", "eval", "--artifact", art, "--test-file", data, "--ladder",
                          ROOT / "ladders/demo.yaml", "--out-dir", tmp_path / "eval2"], capsys)
    assert code == 0, err
    assert "cost at parity with best single" in out and (tmp_path / "eval2" / "summary.json").exists()
    assert "router DEFAULT" in out and "tf-idf logistic baseline" in out and "SIMULATED" in out


def test_cli_errors(tmp_path, capsys):
    art = tmp_path / "router.json"
    art.write_text(json.dumps({"format": "advisor-router", "format_version": 0, "advisor_version": "0.0.1"}))
    code, _, err = run(["route", "--router", art, "--prompt", "x"], capsys)
    assert code == 5 and "format version 0" in err and err.count("\n") == 1
    code, _, err = run(["route", "--router", art], capsys)
    assert code != 0 and "exactly one of --prompt" in err
    empty = tmp_path / "e.csv"
    empty.write_text("")
    code, _, err = run(["import", empty, "--ladder", ROOT / "ladders/demo.yaml", "--suite-name", "x",
                        "--store", tmp_path / "s.duckdb"], capsys)
    assert code == 2 and "empty file" in err
    assert not (tmp_path / "s.duckdb").exists()  # a failed import creates no store
    from advisor.store import Store

    Store.open(tmp_path / "s.duckdb").close()  # an empty store
    code, _, err = run(["router", "train", "--store", tmp_path / "s.duckdb", "--out", art], capsys)
    assert code != 0 and "no scored runs" in err


def bench_table(tmp_path):
    """A RouterBench-style table with real costs and '/' in model ids, and the benchmark module."""
    data = tmp_path / "rb.csv"
    make_table(data, n=120, costs=True, names={m: f"org/{m}" for m in MODELS})
    spec = importlib.util.spec_from_file_location("router_nim9", ROOT / "benchmarks" / "router_nim9.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return data, bench


@pytest.mark.slow
def test_benchmark_runs_on_a_routerbench_table_with_real_costs(tmp_path, capsys):
    data, bench = bench_table(tmp_path)
    summary = bench.run([str(data), "--ladder", "auto", "--folds", "3", "--n-hash", "4096"])
    out = capsys.readouterr().out
    assert "360 costs recorded, 0 estimated" in out
    assert "=== single mode" in out and "=== escalate mode" in out and "oracle" in out
    # recorded costs are used as they are: always-largest costs 2e-4 per request
    assert summary["single"]["curves"]["rung:org_super-120b"][0]["cost"] == pytest.approx(2e-4)


@pytest.mark.slow
def test_benchmark_subsample_and_requests_without_their_class(tmp_path, capsys):
    data, bench = bench_table(tmp_path)
    summary = bench.run([str(data), "--ladder", "auto", "--folds", "3", "--n-hash", "4096", "--subsample", "90",
                         "--hide-test-classes"])
    out = capsys.readouterr().out
    assert "SUBSAMPLE of 90 prompts" in summary["how"] and "without their class" in summary["how"]
    assert "TEST REQUESTS WITHOUT THEIR CLASS" in out and "class predicted when missing" in out
    assert summary["prompts"] == 90 and "in class" in out
