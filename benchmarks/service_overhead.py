"""Benchmark: what the routing service adds over calling the rung directly, same rung, same run.

Starts the embedded Triton (`advisor triton serve`, the demo ladder's SIMULATED stand-ins, which answer at
once) and `advisor serve --url` to it (one worker, router trained at start from a small stored probe), then for
each concurrency level alternates rounds of

  * direct:  advisor's `TritonClient.generate` on nano-30b with the prompt the service would render, and
  * service: ``POST /v1/chat/completions`` with ``model: auto`` and ``advisor.rungs: [nano-30b]`` (the routing
             decision runs, no embeddings; the answer is parsed, costed, recorded and counted) over httpx
             keep-alive,

and prints requests/s and p50/p99 per path, the service/direct throughput ratio (goal at concurrency 32:
>= 0.85) and the p50 added at concurrency 1 (goal: <= 2 ms).

    .venv/bin/python benchmarks/service_overhead.py [--requests 1000] [--rounds 3] [--concurrency 1 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import DEMO, drive, pct, small_probe, start_service, start_triton, stop  # noqa: E402

RUNG = "nano-30b"
TEXT = "Summarise the ticket in one line: the printer on floor 3 jams on every duplex job."
MAX_TOKENS = 32


async def direct(url: str, n: int, concurrency: int) -> list[float]:
    """n generations through advisor's Triton client at `concurrency`; latencies."""
    from advisor.ladder import load_ladder
    from advisor.service.chat import render_prompt
    from advisor.service.request import parse_request
    from advisor.triton.client import TritonClient

    model = load_ladder(DEMO).rung(RUNG)
    prompt = render_prompt(model, parse_request({"model": RUNG, "messages": [{"role": "user", "content": TEXT}]}, {}))
    latencies: list[float] = []
    remaining = [n]
    async with TritonClient(url) as client:
        await client.generate(model.triton_model, prompt, max_tokens=MAX_TOKENS)  # contract check, warm channel

        async def worker():
            while remaining[0] > 0:
                remaining[0] -= 1
                started = time.perf_counter()
                await client.generate(model.triton_model, prompt, max_tokens=MAX_TOKENS)
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--workers", type=int, default=1, help="Service worker processes.")
    args = parser.parse_args()
    body = {"model": "auto", "max_tokens": MAX_TOKENS, "advisor": {"rungs": [RUNG]},
            "messages": [{"role": "user", "content": TEXT}]}
    triton, url = start_triton()
    results: dict[tuple[str, int], list[tuple[float, list[float]]]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="advisor-overhead-") as tmp:
            store = Path(tmp) / "overhead.duckdb"
            small_probe(url, store)
            service, base = start_service(url, store, args.workers, ["--ingest-every", "0"])
            try:
                asyncio.run(drive(base, [body] * 50, 4))  # warm up
                for c in args.concurrency:
                    for _ in range(args.rounds):
                        started = time.perf_counter()
                        lat = asyncio.run(direct(url, args.requests, c))
                        results.setdefault(("direct", c), []).append((time.perf_counter() - started, lat))
                        started = time.perf_counter()
                        lat, errors = asyncio.run(drive(base, [body] * args.requests, c))
                        if errors:
                            raise SystemExit(f"service errors: {errors[:3]}")
                        results.setdefault(("service", c), []).append((time.perf_counter() - started, lat))
            finally:
                stop(service)
    finally:
        stop(triton)
    print(f"service overhead: {args.requests} requests x {args.rounds} rounds per path, rung {RUNG} (SIMULATED "
          f"stand-in, answers at once), loopback, {args.workers} service worker(s)")
    for c in args.concurrency:
        row = {}
        for path in ("direct", "service"):
            runs = results[(path, c)]
            rps = statistics.median(len(lat) / wall for wall, lat in runs)
            lat = [x for _, ls in runs for x in ls]
            row[path] = (rps, pct(lat, .5), pct(lat, .99))
            print(f"  c={c:<3} {path:<8} {rps:7.0f} req/s  p50 {row[path][1] * 1e3:6.2f} ms  p99 {row[path][2] * 1e3:6.2f} ms")
        ratio = row["service"][0] / row["direct"][0]
        added = (row["service"][1] - row["direct"][1]) * 1e3
        print(f"  c={c:<3} service/direct throughput {ratio:.2f}; p50 added {added:.2f} ms")


if __name__ == "__main__":
    main()
