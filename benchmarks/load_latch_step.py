"""Benchmark: one session step's latch work (`get` then `update`, as `session_routing.route_session` does) on the
SQLite latch of a DuckDB-store service and on the PostgreSQL latch of a PostgreSQL-store service
(`advisor.store.pg_latches`), in one process, rounds alternated; a local PostgreSQL is started for the run
(Debian's binaries, loopback).

    python benchmarks/load_latch_step.py [--steps 200] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def step(store, sid: str) -> float:
    """Seconds of one step: read the latch, write the next step's state."""
    from advisor.service.sessions.latch import SessionState

    t0 = time.perf_counter()
    store.get(sid)
    store.update(sid, lambda old: SessionState("a", "a", None, step=(old.step + 1) if old else 1))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    """Time the steps and print p50/p90 per latch and the p50 difference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="steps per round and latch")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    from advisor.service.sessions.latch import SessionState
    from advisor.store.latches import LatchStore
    from advisor.store.local_postgres import LocalPostgres
    from advisor.store.pg_latches import PgLatchStore

    res: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    with LocalPostgres() as pg, tempfile.TemporaryDirectory() as tmp:
        stores = {"sqlite": LatchStore(Path(tmp) / "latch.sqlite", SessionState),
                  "postgres": PgLatchStore(pg.new_database("latch_step"), SessionState)}
        for r in range(args.rounds):
            for name in (("sqlite", "postgres") if r % 2 == 0 else ("postgres", "sqlite")):
                res[name] += [step(stores[name], "bench") for _ in range(args.steps)]
    print(f"latch step (get + update): {args.steps} steps x {args.rounds} rounds per latch, one process, "
          f"loopback PostgreSQL; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, v in res.items():
        print(f"  {name:<9} p50 {statistics.median(v) * 1e3:.3f} ms  p90 {sorted(v)[int(.9 * len(v))] * 1e3:.3f} ms")
    print(f"  postgres - sqlite p50: {(statistics.median(res['postgres']) - statistics.median(res['sqlite'])) * 1e3:+.3f} ms")
    return res


if __name__ == "__main__":
    main()
