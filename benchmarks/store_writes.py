"""Benchmark: milliseconds to store one finished run (1 run row, 5 turns, 6 criterion results) in DuckDB.

Compares `Store.add_run` (one multi-row INSERT per table, one transaction) with the same rows written by
DuckDB's ``executemany`` (row by row), which is what add_run used before. Real DuckDB files in a temp folder.

Run:  python benchmarks/store_writes.py [--runs 300]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from advisor.store import CriterionResult, RunRecord, Store, TurnRecord, make_run_key


def _records(i: int):
    run = RunRecord(run_key=make_run_key("bench", i), kind="probe", suite_name="s", suite_hash="h", task_id=f"t{i}",
                    task_class="c", ladder_name="l", ladder_hash="lh", rung="r", rung_position=0, overall=50.0)
    turns = [TurnRecord(j, "read_file", "{}", "observation " * 20, 100, 20, 0.01, "stop") for j in range(5)]
    criteria = [CriterionResult("if" if j < 3 else "tc", f"c{j}", 100 / 3, 1.0) for j in range(6)]
    return run, turns, criteria


def with_add_run(path: Path, n: int) -> float:
    with Store.open(path) as store:
        t0 = time.perf_counter()
        for i in range(n):
            store.add_run(*_records(i))
        return (time.perf_counter() - t0) / n * 1000


def with_executemany(path: Path, n: int) -> float:
    from dataclasses import fields

    with Store.open(path) as store:
        con = store._con  # the benchmark reaches inside on purpose: it times the old write path
        cols = [f.name for f in fields(RunRecord)]
        t0 = time.perf_counter()
        for i in range(n):
            run, turns, criteria = _records(i)
            con.execute("BEGIN TRANSACTION")
            con.executemany(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                            [[getattr(run, c) for c in cols]])
            con.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [[run.run_key, t.turn, t.action, t.arguments_json, t.observation, t.input_tokens,
                              t.output_tokens, t.latency_s, t.finish_reason] for t in turns])
            con.executemany("INSERT INTO criterion_results VALUES (?, ?, ?, ?, ?, ?)",
                            [[run.run_key, c.checklist, c.criterion, c.weight, c.score, c.detail] for c in criteria])
            con.execute("COMMIT")
        return (time.perf_counter() - t0) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        fast = with_add_run(Path(d) / "a.duckdb", args.runs)
        slow = with_executemany(Path(d) / "b.duckdb", args.runs)
    print(f"{args.runs} runs, each 1 run + 5 turns + 6 criteria, one transaction per run")
    print(f"Store.add_run (multi-row INSERT): {fast:6.1f} ms per run")
    print(f"executemany (row by row):         {slow:6.1f} ms per run")


if __name__ == "__main__":
    main()
