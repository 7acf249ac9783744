"""Benchmark: what ingesting captured steps costs the store (`advisor.store._capture_queries.add_captures`).

3,000 capture records of three tenants (each bounded at 1,500 kept steps), added to a fresh DuckDB store in one
batch, then the same batch again (every step already stored): the wall time of each.

    .venv/bin/python benchmarks/capture_ingest.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_capture_units import step  # noqa: E402  (the tests' capture record, so both stay one shape)
from advisor.store import Store  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        with Store.open(f"{folder}/s.duckdb") as store:
            rows = [step(f"dec_{i}", tenant=f"t{i % 3}", keep_steps=1500) for i in range(3000)]
            t = time.perf_counter()
            store.add_live([], [], rows)
            first = time.perf_counter() - t
            t = time.perf_counter()
            store.add_live([], [], rows)
            again = time.perf_counter() - t
            kept = [c["steps"] for c in store.capture_counts()]
    print(f"3,000 capture records: first ingest {first:.2f} s, the same batch again {again:.2f} s; kept per tenant "
          f"{kept}")


if __name__ == "__main__":
    main()
