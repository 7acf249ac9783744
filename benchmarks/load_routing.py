"""Benchmark: routing under load. Three arms in one run on SIMULATED finite-capacity rungs: load-blind (``load:
{enabled: false}``), load-aware (the default) and always the largest rung, each its own `advisor serve` (one
worker) in front of its own capacity stand-in (benchmarks/load_capacity.py: per rung, concurrency slots and a
service time, so queues form as on a GPU), driven by the same seeded open-loop arrivals.

Ladder (SIMULATED, `openai` rungs on loopback): small (2 slots x 0.50 s: 4 requests/s), medium (4 x 0.60 s:
~6.7/s), large (8 x 0.80 s: 10/s), list prices 0.04 / 0.10 / 0.40 USD per M input and 0.16 / 0.40 / 1.60 per M
output. The router is fitted on stated synthetic outcomes (P(usable) 0.85 / 0.88 / 0.90, no text signal), so
that at the requests' value (``advisor.value_usd`` 0.0001) an idle ladder sends everything to small.

Load: Poisson arrivals at --rate (default 1.5/s, under small's capacity) for the whole run, with --bursts bursts
of --burst-rate more (default +8/s, above small's capacity, under small's and medium's together) for --burst-s
seconds each (rates kept low so that the service's own CPU is not the bottleneck on a shared 2-core machine); every request asks for an answer
within --deadline seconds (``advisor.max_latency_s``; the service's attempt limit is --attempt-limit). Loops are
bounded: at most --max-requests arrivals per arm and --duration seconds of arrivals, each request with a client
timeout.

Per arm: p50/p99 latency, deadline misses (late or failed), failovers (``x-advisor-failovers``), USD per usable
result (the service's ``advisor_cost_usd_total`` over the usable results: answered within the deadline and drawn
usable at the answering rung's stated P(usable), the same draw per request in every arm), and the share per rung,
over the whole run and over its idle part (before the first burst) apart.

    python benchmarks/load_routing.py [--duration 45] [--rate 1.5] [--burst-rate 8] [--bursts 2] [--burst-s 6]
        [--deadline 1.5] [--seed 0] [--json OUT]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load_capacity  # noqa: E402
from load_test import ADVISOR, KEY, _read_until, pct, stop  # noqa: E402

#: name, slots, service seconds, USD per M input, per M output, stated P(usable)
RUNGS = [("small", 2, 0.50, 0.04, 0.16, 0.85), ("medium", 4, 0.60, 0.10, 0.40, 0.88),
         ("large", 8, 0.80, 0.40, 1.60, 0.90)]
VALUE_USD = 0.0001  #: the requests' value of a usable result: small wins on an idle ladder
ARMS = ("load-blind", "load-aware", "always-largest")


def write_ladder(path: Path, base: str, rungs=RUNGS) -> Path:
    """A SIMULATED ladder of `openai` rungs served by the capacity stand-in at `base`."""
    import yaml

    out = [{"name": n, "hf_id": f"simulated/{n}", "params_total_b": 10 * (i + 1), "triton_model": n,
            "backend": "openai", "url": base + "/v1", "context_length": 32768, "tool_call_format": "hermes",
            "price": {"basis": "tokens", "usd_per_m_input": pin, "usd_per_m_output": pout,
                      "source": "stated for the load benchmark (SIMULATED)", "as_of": "2026-12"}}
           for i, (n, _, _, pin, pout, _) in enumerate(rungs)]
    path.write_text(yaml.safe_dump({  # `openai` rungs cannot carry a standin block: the name and text say it
        "version": 1, "name": "load-sim", "description": "SIMULATED capacity stand-ins (benchmarks/load_capacity.py)",
        "rungs": out}))
    return path


def write_router(path: Path, rungs=RUNGS, n: int = 400, seed: int = 0) -> Path:
    """A router fitted on stated synthetic outcomes: each rung usable at its P, whatever the text (SIMULATED)."""
    import numpy as np

    from advisor.router.model.artifact import RungModel
    from advisor.router.training.fit import TrainingData, fit_router

    rng = np.random.default_rng(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    texts = [" ".join(rng.choice(words, 6)) for _ in range(n)]
    tin, tout = load_capacity.INPUT_TOKENS, load_capacity.OUTPUT_TOKENS
    models = [RungModel(name, i, pin / 1e6, tout * pout / 1e6, tout, usd_per_output_token=pout / 1e6, latency_s=svc)
              for i, (name, _, svc, pin, pout, _) in enumerate(rungs)]
    usable = np.stack([rng.random(n) < p for *_, p in rungs], axis=1).astype(float)
    cost = np.tile([tin * pin / 1e6 + tout * pout / 1e6 for _, _, _, pin, pout, _ in rungs], (n, 1))
    data = TrainingData(texts=texts, classes=["chat"] * n, groups=[f"g{i}" for i in range(n)], rungs=models,
                        usable=usable, runs=np.ones(usable.shape), cost=cost, input_tokens=np.full(n, float(tin)),
                        provenance={"data_hash": f"load-sim-{seed}", "simulated_runs": n * len(rungs)})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_router(data, folds=2, n_hash=2 ** 10, predictors=["class_rates"]).save(path)


def start_advisor(ladder: Path, router: Path, folder: Path, load: bool, attempt_limit: float,
                  poll_s: float = 0.2):
    """`advisor serve` (one worker) on the ladder, its own store and spool in `folder`; (process, base URL)."""
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "service.yaml"
    config.write_text(f"version: 1\nlimits: {{attempt_timeout_s: {attempt_limit}}}\n"
                      f"load: {{enabled: {str(load).lower()}, poll_interval_s: {poll_s}}}\n")
    env = {**os.environ, "ADVISOR_API_KEYS": KEY}
    proc = subprocess.Popen([*ADVISOR, "serve", "--ladder", str(ladder), "--router", str(router), "--config",
                             str(config), "--store", str(folder / "live.duckdb"), "--spool", str(folder / "spool"),
                             "--port", "0", "--workers", "1", "--ingest-every", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    line = _read_until(proc, "ready http=")
    return proc, "http://" + line.split("=", 1)[1].strip()


def schedule(duration: float, rate: float, burst_rate: float, bursts: int, burst_s: float, seed: int,
             max_requests: int) -> tuple[list[float], list[tuple[float, float]]]:
    """Seeded open-loop arrival times (Poisson at `rate`, plus `burst_rate` inside the bursts) and the bursts'
    (start, end), bursts evenly spread after an idle first third."""
    import numpy as np

    rng = np.random.default_rng(seed)
    windows = [(duration / 3 + k * (2 * duration / 3) / max(bursts, 1), 0.0) for k in range(bursts)]
    windows = [(s, s + burst_s) for s, _ in windows]
    times, t = [], 0.0
    while len(times) < max_requests:
        inside = any(s <= t < e for s, e in windows)
        t += rng.exponential(1.0 / (rate + (burst_rate if inside else 0.0)))
        if t >= duration:
            break
        times.append(t)
    return times, windows


async def drive(base: str, arm: str, times: list[float], deadline: float, draws: list[float],
                timeout_s: float) -> list[dict]:
    """Send one request per arrival time (open loop: nobody waits for an answer before the next is sent)."""
    import httpx

    model = "large" if arm == "always-largest" else "auto"
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    out: list[dict] = []
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits,
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        async def one(i: int, at: float) -> None:
            body = {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": f"Request {i}: "
                    "summarise the ticket in one line."}],
                    "advisor": {"max_latency_s": deadline, "value_usd": VALUE_USD}}
            t0 = time.perf_counter()
            row = {"i": i, "at": at, "rung": None, "failovers": 0, "status": 0, "load": None}
            try:
                r = await client.post(base + "/v1/chat/completions", json=body)
                row.update(status=r.status_code, rung=r.headers.get("x-advisor-rung"),
                           failovers=int(r.headers.get("x-advisor-failovers", 0)), load=r.headers.get("x-advisor-load"))
            except httpx.HTTPError as exc:
                row["status"] = type(exc).__name__
            row["latency_s"] = time.perf_counter() - t0
            p = next((p for name, *_, p in RUNGS if name == row["rung"]), 0.0)
            row["usable"] = row["status"] == 200 and row["latency_s"] <= deadline and draws[i] < p
            out.append(row)

        start = time.perf_counter()
        tasks = []
        for i, at in enumerate(times):
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, at)))
        await asyncio.gather(*tasks)
    return sorted(out, key=lambda r: r["i"])


def cost_usd(base: str) -> float:
    """The service's ``advisor_cost_usd_total`` summed over rungs."""
    import httpx

    text = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("advisor_cost_usd_total{"))


def summary(rows: list[dict], deadline: float, usd: float | None) -> dict:
    """Per arm (or part of one): latency percentiles, misses, failovers, USD per usable, share per rung."""
    lat = [r["latency_s"] for r in rows]
    usable = sum(r["usable"] for r in rows)
    shares = {name: sum(r["rung"] == name for r in rows) / max(len(rows), 1) for name, *_ in RUNGS}
    return {"requests": len(rows), "p50_s": pct(lat, .5) if lat else None, "p99_s": pct(lat, .99) if lat else None,
            "misses": sum(r["status"] != 200 or r["latency_s"] > deadline for r in rows),
            "failovers": sum(r["failovers"] for r in rows), "usable": usable,
            "usd_per_usable": (usd / usable if usd is not None and usable else None), "share": shares,
            "load_moves": sum(bool(r["load"]) and "->" in r["load"] for r in rows)}


def run_arm(arm: str, folder: Path, ladder_of, router: Path, times, draws, args) -> dict:
    """One arm: a fresh capacity stand-in and service, the arrivals, the figures."""
    cap, cap_base = load_capacity.start([f"{n}:{s}:{t}" for n, s, t, *_ in RUNGS])
    try:
        ladder = ladder_of(folder / f"{arm}.yaml", cap_base)
        proc, base = start_advisor(ladder, router, folder / arm, arm != "load-blind", args.attempt_limit)
        try:
            rows = asyncio.run(drive(base, arm, times, args.deadline, draws, args.attempt_limit * 3 + 5))
            usd = cost_usd(base)
        finally:
            stop(proc)
    finally:
        cap.terminate()
        cap.wait(30)
    return {"rows": rows, "usd": usd}


def main(argv: list[str] | None = None) -> dict:
    """Run the three arms and print the table (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=45.0, help="seconds of arrivals per arm")
    ap.add_argument("--rate", type=float, default=1.5, help="base Poisson rate (requests/s)")
    ap.add_argument("--burst-rate", type=float, default=8.0, help="extra rate inside a burst (requests/s)")
    ap.add_argument("--bursts", type=int, default=2)
    ap.add_argument("--burst-s", type=float, default=6.0)
    ap.add_argument("--deadline", type=float, default=1.5, help="advisor.max_latency_s of every request")
    ap.add_argument("--attempt-limit", type=float, default=5.0, help="limits.attempt_timeout_s of the services")
    ap.add_argument("--max-requests", type=int, default=3000, help="bound on arrivals per arm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the figures (and every request) here")
    args = ap.parse_args(argv)
    import numpy as np

    times, windows = schedule(args.duration, args.rate, args.burst_rate, args.bursts, args.burst_s, args.seed,
                              args.max_requests)
    draws = list(np.random.default_rng(args.seed + 1).random(len(times)))
    idle_until = windows[0][0] if windows else args.duration
    results = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="advisor-load-") as tmp:
        folder = Path(tmp)
        router = write_router(folder / "router.json")
        for arm in ARMS:
            res = run_arm(arm, folder, write_ladder, router, times, draws, args)
            rows = res["rows"]
            results[arm] = {"all": summary(rows, args.deadline, res["usd"]),
                            "idle": summary([r for r in rows if r["at"] < idle_until], args.deadline, None),
                            "rows": rows}
    print(f"load routing: {len(times)} requests per arm over {args.duration:g}s (Poisson {args.rate:g}/s, "
          f"{args.bursts} bursts of +{args.burst_rate:g}/s for {args.burst_s:g}s, idle before {idle_until:.1f}s), "
          f"deadline {args.deadline:g}s, attempt limit {args.attempt_limit:g}s, seed {args.seed}; SIMULATED "
          f"capacity stand-ins {', '.join(f'{n} {s}x{t:g}s' for n, s, t, *_ in RUNGS)}; one worker per service; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {time.perf_counter() - t0:.0f}s")
    print(f"  {'arm':<16}{'p50 s':>8}{'p99 s':>8}{'misses':>8}{'failovers':>10}{'USD/usable':>12}  share "
          + "/".join(n for n, *_ in RUNGS) + "   idle part: share, misses")
    for arm, res in results.items():
        a, idle = res["all"], res["idle"]
        usd = "n/a" if a["usd_per_usable"] is None else f"{a['usd_per_usable'] * 1e6:.1f}e-6"
        print(f"  {arm:<16}{a['p50_s']:>8.3f}{a['p99_s']:>8.3f}{a['misses']:>8}{a['failovers']:>10}{usd:>12}  "
              + "/".join(f"{a['share'][n]:.2f}" for n, *_ in RUNGS) + "   "
              + "/".join(f"{idle['share'][n]:.2f}" for n, *_ in RUNGS) + f", {idle['misses']}")
    blind, aware = results["load-blind"]["all"], results["load-aware"]["all"]
    same_idle = [r["rung"] for r in results["load-blind"]["rows"] if r["at"] < idle_until] == \
        [r["rung"] for r in results["load-aware"]["rows"] if r["at"] < idle_until]
    print(f"  load-aware vs load-blind: misses {aware['misses']} vs {blind['misses']}, p99 {aware['p99_s']:.3f} vs "
          f"{blind['p99_s']:.3f} s, USD per usable {_ratio(aware, blind)}; idle part: same rung per request "
          f"{'yes' if same_idle else 'no'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return results


def _ratio(a: dict, b: dict) -> str:
    if a["usd_per_usable"] is None or b["usd_per_usable"] is None:
        return "n/a"
    return f"{a['usd_per_usable'] / b['usd_per_usable']:.2f}x"


if __name__ == "__main__":
    main()
