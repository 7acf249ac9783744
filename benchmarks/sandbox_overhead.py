"""Benchmark: wall time of one run_python call in the bubblewrap sandbox vs. unsandboxed (plain subprocess).

Each call runs ``print(1)`` in a fresh workspace; the unsandboxed figure is taken with bwrap hidden from PATH
and running unsandboxed allowed (what ``advisor probe --allow-unsandboxed`` does where bwrap is missing).

    .venv/bin/python benchmarks/sandbox_overhead.py [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from advisor.tools import sandbox as sb


async def _median_ms(workspace: Path, calls: int, mode: str) -> float:
    times = []
    with sb.unsandboxed_allowed(mode == "unsandboxed"):
        for _ in range(calls):
            start = time.perf_counter()
            result = await sb.run_sandboxed(workspace, "code", "print(1)")
            times.append(time.perf_counter() - start)
            assert result.stdout.strip() == "1" and result.mode == mode, result
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sandboxed = asyncio.run(_median_ms(Path(tmp), args.calls, "bubblewrap"))
        os.environ["PATH"] = ""
        sb.sandbox_status.cache_clear()
        plain = asyncio.run(_median_ms(Path(tmp), args.calls, "unsandboxed"))
    print(f"run_python print(1), median of {args.calls} calls: bubblewrap {sandboxed:.0f} ms, "
          f"unsandboxed {plain:.0f} ms, sandbox overhead {sandboxed - plain:.0f} ms per call")


if __name__ == "__main__":
    main()
