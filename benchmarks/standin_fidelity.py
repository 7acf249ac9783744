"""The demo's fidelity to the published figures: the SIMULATED stand-in ladder on the example suite's tasks
that have a skill, baseline -> with skill, beside the published Nemotron table (../shared/background.md part 2).

    python benchmarks/standin_fidelity.py              # 30 replicas of the full grid, in-process (about 2 minutes)
    python benchmarks/standin_fidelity.py --replicas 10 --store /tmp/fidelity.duckdb

The runs go through the real probe runner, agent loop, sandboxed tools and checks; the model calls are answered
in-process by the same stand-in responders the embedded Triton serves (`FakeModel.standin`; tests check the two
give the same episodes), so the figures are deterministic and need no server. Every figure is SIMULATED.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The published table (baseline, with skill); usable share at baseline was not published.
PUBLISHED = {
    "nano-30b": {"tc": (46.6, 51.3), "if_": (19.0, 26.0), "overall": (30.8, 36.8), "near_zero": (43, 38),
                 "usable": (None, 11)},
    "super-120b": {"tc": (68.4, 69.3), "if_": (31.3, 49.2), "overall": (47.2, 57.8), "near_zero": (19, 22),
                   "usable": (None, 40)},
}
LABELS = {"tc": "goal completion", "if_": "instruction following", "overall": "overall",
          "near_zero": "near-zero share %", "usable": "usable share % (>= 75)"}
PCT = ("near_zero", "usable")
#: Per-class targets of the calibration (docs/standin.md): on the class's tasks without the skill, nano-30b's usable
#: rate over super-120b's (the "usable ratio") at least this; nano-30b is first in a plan where it exceeds the price
#: ratio per attempt. multi_step: at most this (super-120b's class).
CLASS_TARGETS = {"api_calls": (">=", 0.7), "doc_retrieval": (">=", 0.7), "extraction": (">=", 0.7),
                 "code_change": (">=", 0.7), "multi_step": ("<=", 0.25)}


def run(replicas: int, store_path: Path) -> dict:
    """Probe the full grid with `replicas` and return the probe summary."""
    from advisor.agent.fake import FakeModel
    from advisor.ladder import load_ladder
    from advisor.probe.plan import full_grid
    from advisor.probe.runner import execute
    from advisor.probe.summary import summarize
    from advisor.store import Store
    from advisor.suite import load_suite
    from advisor.tools.base import available_tools

    ladder = load_ladder(REPO / "ladders" / "demo.yaml")
    suite_path = REPO / "suites" / "example" / "suite.yaml"
    suite = load_suite(suite_path, known_tools=set(available_tools()))
    client = FakeModel.standin(ladder, [suite_path])
    with Store.open(store_path) as store:
        asyncio.run(execute(full_grid(suite, ladder, replicas), ladder=ladder, suite=suite, store=store,
                            client_for_rung=lambda model: client, concurrency=8))
        return summarize(store, suite_hash=suite.config_hash(), ladder_hash=ladder.config_hash(), ladder=ladder)


def per_class(store_path: Path) -> list[tuple]:
    """Per class and condition: (class, condition, usable nano-12b, nano-30b, super-120b, usable ratio nano-30b :
    super-120b, price ratio per attempt), over every task of the class (the skill condition: tasks with a skill)."""
    import duckdb

    with duckdb.connect(str(store_path), read_only=True) as db:
        rows = db.execute("""
            select task_class, condition, rung, avg(case when overall >= 75 then 1.0 else 0.0 end), avg(cost_usd)
            from runs where not unscored group by all""").fetchall()
    cell = {(c, k, r): (u, cost) for c, k, r, u, cost in rows}
    out = []
    for cls, cond in sorted({(c, k) for c, k, _ in cell}):
        small, mid, big = (cell.get((cls, cond, r), (0.0, 0.0)) for r in ("nano-12b", "nano-30b", "super-120b"))
        out.append((cls, cond, small[0], mid[0], big[0], mid[0] / big[0] if big[0] else float("nan"),
                    mid[1] / big[1] if big[1] else float("nan")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=30)
    ap.add_argument("--store", type=Path, default=None, help="keep the runs in this DuckDB file")
    args = ap.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "fidelity.duckdb"
        summary = run(args.replicas, store)
        classes = per_class(store)
    rungs = {r["rung"]: r for r in summary["rungs"]}
    print(f"SIMULATED stand-ins, {summary['paired_tasks']} example tasks with a skill, {args.replicas} replicas, "
          f"{summary['runs']} runs in {time.monotonic() - started:.0f} s. baseline -> with skill")
    print(f"{'rung':11s} {'metric':24s} {'published':>15s} {'demo':>15s} {'max |diff|':>10s}")
    worst = 0.0
    for name, pub in PUBLISHED.items():
        b, s = rungs[name]["paired_baseline"], rungs[name]["paired_skill"]
        for key, (pb, ps) in pub.items():
            scale = 100 if key in PCT else 1
            db, ds = b[key] * scale, s[key] * scale
            diffs = [abs(d - p) for d, p in ((db, pb), (ds, ps)) if p is not None]
            worst = max(worst, *diffs)
            pubtxt = f"{'-' if pb is None else f'{pb:.1f}'} -> {ps:.1f}"
            print(f"{name:11s} {LABELS[key]:24s} {pubtxt:>15s} {f'{db:.1f} -> {ds:.1f}':>15s} {max(diffs):10.1f}")
    for name, r in rungs.items():
        b, s = r["paired_baseline"], r["paired_skill"]
        final = {c: (r_["stop_reasons"] or {}).get("final", 0) / max(1, r_["runs"]) for c, r_ in (("b", b), ("s", s))}
        print(f"{name:11s} turns {b['turns']:.1f} -> {s['turns']:.1f}; $ per task {b['cost_per_task']:.3g} -> "
              f"{s['cost_per_task']:.3g}; runs ending in a final answer {final['b']:.0%} -> {final['s']:.0%}")
    ratio = rungs["nano-30b"]["paired_skill"]["cost_per_task"] / rungs["super-120b"]["paired_skill"]["cost_per_task"]
    print(f"price per task nano-30b : super-120b (with skill) = {ratio:.2f} (published 0.040 : 0.083 = 0.48)")
    print(f"largest difference from the published table: {worst:.1f} points "
          f"({'within' if worst <= 5 else 'NOT within'} 5)")
    print("per class, all its tasks (skill: those with one); usable share per rung, usable ratio nano-30b : "
          "super-120b against the price ratio per attempt and the calibration's target (docs/standin.md)")
    print(f"{'class':14s} {'condition':9s} {'nano-12b':>8s} {'nano-30b':>8s} {'super-120b':>10s} {'ratio':>6s} "
          f"{'price':>6s} {'target':>8s}")
    for cls, cond, small, mid, big, ratio, price in classes:
        op, goal = CLASS_TARGETS.get(cls, ("", None))
        target = "" if cond != "baseline" or goal is None else f"{op} {goal:.2f}" + (
            " ok" if (ratio >= goal if op == ">=" else ratio <= goal) else " MISSED")
        print(f"{cls:14s} {cond:9s} {small:8.0%} {mid:8.0%} {big:10.0%} {ratio:6.2f} {price:6.2f} {target:>8s}")


if __name__ == "__main__":
    main()
