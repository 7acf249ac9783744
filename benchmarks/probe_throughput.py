"""Probe throughput: runs per second at several concurrency levels against stand-ins that answer at once.

Measures the probe runner's own overhead (agent loop, sandboxed tools, checks, DuckDB commits, gRPC) on
the real path: the embedded Triton serving the demo ladder's stand-ins (latency 0), the example suite, a
fresh DuckDB file per level. Concurrency is per rung (the demo ladder has 3 rungs).

    .venv/bin/python benchmarks/probe_throughput.py                # 1, 8, 32; 150 runs per level
    .venv/bin/python benchmarks/probe_throughput.py --runs 300 --levels 1 8 32 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


async def _level(specs, ladder, suite, url: str, concurrency: int, db: Path) -> dict:
    from advisor.probe import execute
    from advisor.store import Store
    from advisor.triton.client import TritonClient

    with Store.open(db) as store:
        async with TritonClient(url) as client:
            started = time.perf_counter()
            out = await execute(specs, ladder=ladder, suite=suite, store=store, client_for_rung=lambda m: client,
                                concurrency=concurrency)
            elapsed = time.perf_counter() - started
        calls = sum(r.record.model_calls for r in out.results if r.record)
    return {"concurrency_per_rung": concurrency, "runs": out.count("done"), "model_calls": calls,
            "seconds": round(elapsed, 2), "runs_per_s": round(out.count("done") / elapsed, 1),
            "calls_per_s": round(calls / elapsed, 1), "backend_errors": out.backend_errors}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line (or JSON) per concurrency level."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150, help="Runs per level (the first N of the full grid).")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32], help="Concurrency levels per rung.")
    parser.add_argument("--json", action="store_true", help="Print JSON.")
    args = parser.parse_args(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

    from advisor.ladder import load_ladder
    from advisor.probe import full_grid
    from advisor.suite import load_suite
    from advisor.triton.server import EmbeddedTriton

    ladder = load_ladder(REPO / "ladders" / "demo.yaml")
    suite_path = REPO / "suites" / "example" / "suite.yaml"
    suite = load_suite(suite_path)
    specs = full_grid(suite, ladder, replicas=3)[: args.runs]
    results = []
    with EmbeddedTriton(ladder, suite_paths=(str(suite_path),)) as server, tempfile.TemporaryDirectory() as tmp:
        for level in args.levels:
            row = asyncio.run(_level(specs, ladder, suite, server.grpc_url, level, Path(tmp) / f"c{level}.duckdb"))
            results.append(row)
            if not args.json:
                print(f"concurrency {level:>3}/rung: {row['runs']} runs in {row['seconds']:.2f} s = "
                      f"{row['runs_per_s']:.1f} runs/s ({row['calls_per_s']:.0f} model calls/s)", flush=True)
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "levels": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
