"""Benchmark and demo: size from your own traffic, end to end, and how well a replayed step measures the step.

1. `benchmarks/agent_frameworks.py` runs real agent frameworks (the openai SDK loop, the Agents SDK on Responses and
   on Chat Completions, LangGraph) through `advisor serve` on the demo ladder with the README's
   ``service.example.yaml`` (which turns capture on), keeping the service's store;
2. ``advisor suite from-traffic`` writes a suite from the captured steps (the service config's verifiers check
   their classes);
3. ``advisor probe --full-grid`` replays every step on every rung, `--replicas` times, into the same store;
4. **self-consistency**: per step, the share of its replays on the rung that served it live that pass the step's
   own check (goal: at least 90%: the check measures the step, not noise);
5. ``advisor savings``: every arm on those steps.

    .venv/bin/python benchmarks/traffic_demo.py [--runs 3] [--replicas 3] [--keep DIR]
        [--frameworks openai-sdk agents-responses agents-chat langgraph]

Prints each command's output and the figures; ``--keep DIR`` keeps the store and the suite there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ADVISOR = str(Path(sys.executable).parent / "advisor")


def run(cmd: list[str], what: str) -> str:
    """Run a step, print its output, fail loudly."""
    started = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    print(f"$ {' '.join(cmd)}    # {what}, {time.time() - started:.0f} s")
    print(done.stdout.rstrip())
    if done.returncode != 0:
        print(done.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"{what} failed ({done.returncode})")
    return done.stdout


def self_consistency(store: Path, suite: str) -> tuple[int, int, list[tuple[str, str, int, int]]]:
    """(replays on the serving rung that passed, replays on it, per step: task, rung, passed, runs)."""
    from advisor.store import Store

    with Store.open(store, read_only=True) as s:
        config = s.suite_config(suite) or {}
        served = {t["id"]: t["replay"]["served_by"] for t in config.get("tasks", []) if t.get("replay")}
        rows = s.query("SELECT task_id, rung, overall >= bar AS usable FROM runs WHERE suite_name = ? "
                       "AND NOT unscored AND overall IS NOT NULL", [suite])
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        if served.get(r["task_id"]) == r["rung"]:
            per[r["task_id"]][0] += bool(r["usable"])
            per[r["task_id"]][1] += 1
    steps = sorted((task, served[task], ok, n) for task, (ok, n) in per.items())
    return sum(ok for *_, ok, _ in steps), sum(n for *_, n in steps), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="Runs per framework.")
    parser.add_argument("--replicas", type=int, default=3, help="Replays of each step on each rung.")
    parser.add_argument("--frameworks", nargs="+", default=["openai-sdk", "agents-responses", "agents-chat",
                                                            "langgraph"])
    parser.add_argument("--keep", type=Path, default=None, help="Keep the store and the suite in this folder.")
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="advisor-traffic-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        store, out, config = folder / "traffic.duckdb", folder / "suite", REPO / "service.example.yaml"
        run([sys.executable, str(HERE / "agent_frameworks.py"), "--runs", str(args.runs), "--store", str(store),
             "--config", str(config), "--frameworks", *args.frameworks], "agent sessions through advisor serve")
        run([ADVISOR, "suite", "from-traffic", "--store", str(store), "--out", str(out), "--config", str(config)],
            "a suite from the captured steps")
        run([ADVISOR, "probe", "--suite", str(out / "suite.yaml"), "--store", str(store), "--full-grid",
             "--replicas", str(args.replicas), "--no-report"], "every step replayed on every rung")
        from advisor.suite import load_suite

        name = load_suite(out / "suite.yaml").name
        passed, total, steps = self_consistency(store, name)
        print(f"self-consistency (SIMULATED stand-in rungs): replays on the rung that served the step live that pass "
              f"the step's own check: "
              f"{passed}/{total} = {passed / max(total, 1):.0%} (goal >= 90%) over {len(steps)} steps")
        for task, rung, ok, n in steps:
            if ok < n:
                print(f"  {task} on {rung}: {ok}/{n}")
        run([ADVISOR, "savings", "--store", str(store), "--suite-name", name], "what routing saves")
    print(f"traffic demo: {time.time() - started:.0f} s in all, load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores at the end")


if __name__ == "__main__":
    main()
