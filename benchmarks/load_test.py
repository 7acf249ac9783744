"""Load test of the routing service on loopback: N requests at C concurrent clients against the embedded demo.

Starts `advisor triton serve` (the embedded Triton with the demo ladder's SIMULATED stand-ins, which answer at
once and know the example suite) in its own process, stores a small probe of it in a temporary DuckDB file (the router's training data),
then starts `advisor serve --url ... --workers W` (router trained from that store at start) and sends the
requests with httpx (keep-alive, one client, C tasks). Bounded: loopback only, a fixed number of requests, a
timeout per request. At the end the service is stopped with SIGTERM (it drains and ingests its records) and the
store is asked how many decisions and attempts it holds. Prints errors, requests/s, p50/p99 latency and
decisions recorded vs requests sent.

    .venv/bin/python benchmarks/load_test.py [--requests 10000] [--concurrency 64] [--workers 2]

With ``--postgres N`` the same requests are then sent, in the same run, to N `advisor serve --store
postgresql://...` processes (each with ``--workers``) on one throwaway PostgreSQL (`LocalPostgres`: Debian's
binaries in a temporary folder), round robin from the one client, the router promoted into the database first;
it prints that throughput beside the DuckDB one and the decisions stored in PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"
SUITE = REPO / "suites" / "example" / "suite.yaml"
KEY = "sk-bench"
#: Run the CLI without the working directory on sys.path (`python -c` puts it first): another checkout's
#: interpreter (service_overhead.py --against) must import its own advisor, not the one of the folder it is
#: started from.
NOT_CWD = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
ADVISOR = [sys.executable, "-c", NOT_CWD + "from advisor.cli import console; console()"]


def _read_until(proc: subprocess.Popen, prefix: str, timeout: float = 180.0) -> str:
    lines, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"process exited ({proc.wait()}): {''.join(lines)}")
        lines.append(line)
        if line.startswith(prefix):
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # keep the pipe drained
            return line.strip()
    raise SystemExit(f"no {prefix!r} line within {timeout:.0f}s: {''.join(lines)}")


def start_triton(ladder: Path = DEMO, suite: Path = SUITE) -> tuple[subprocess.Popen, str]:
    """`advisor triton serve` in its own process; (process, gRPC address)."""
    proc = subprocess.Popen([*ADVISOR, "triton", "serve", "--ladder", str(ladder), "--suite", str(suite)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = _read_until(proc, "ready ")
    return proc, line.split("grpc=")[1].split()[0]


def small_probe(url: str, store: Path) -> None:
    """Two example tasks per class, baseline only, one replica: enough runs to train a router."""
    from advisor.probe import ProbeConfig, run_probe
    from advisor.suite import load_suite

    by_class: dict[str, list[str]] = {}
    for t in load_suite(SUITE).tasks:
        by_class.setdefault(t.task_class, []).append(t.id)
    tasks = [i for ids in by_class.values() for i in ids[:2]]
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=url, store_path=store, replicas=1,
                          conditions=("baseline",), tasks=tasks))


def start_service(url: str, store: Path, workers: int, extra: list[str] = (),
                  advisor: list[str] | None = None, ladder: Path = DEMO,
                  cwd: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`advisor serve --url` in its own process, run by the `advisor` command (default: this interpreter's,
    `ADVISOR`), in `cwd` (default: this one); (process, base URL)."""
    env = {**os.environ, "ADVISOR_API_KEYS": KEY}
    proc = subprocess.Popen([*(advisor or ADVISOR), "serve", "--url", url, "--ladder", str(ladder), "--store", str(store),
                             "--port", "0", "--workers", str(workers), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    line = _read_until(proc, "ready http=")
    return proc, "http://" + line.split("=", 1)[1]


def stop(proc: subprocess.Popen, timeout: float = 120.0) -> int:
    """SIGTERM and wait."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout)


async def pool(call, n: int, concurrency: int) -> tuple[list[float], list[str]]:
    """Run `call()` n times from `concurrency` tasks sharing one counter; (latencies of successes, errors).
    `call` returns None on success, else an error string (the same loop and clock for every path)."""
    latencies: list[float] = []
    errors: list[str] = []
    remaining = [n]

    async def worker():
        while remaining[0] > 0:
            remaining[0] -= 1
            started = time.perf_counter()
            error = await call()
            if error:
                errors.append(error)
            else:
                latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors


async def drive(base: str | list[str], bodies, concurrency: int,
                timeout_s: float = 30.0) -> tuple[list[float], list[str]]:
    """Send every body (a list of dicts) with `concurrency` tasks, round robin over the base URLs; (latencies of
    successes, error strings)."""
    import httpx

    bases = [base] if isinstance(base, str) else list(base)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    queue = list(reversed(bodies))
    async with httpx.AsyncClient(limits=limits, timeout=timeout_s,
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        async def call():
            try:
                target = bases[len(queue) % len(bases)]
                resp = await client.post(target + "/v1/chat/completions", json=queue.pop())
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {exc}"
            return None if resp.status_code == 200 else f"HTTP {resp.status_code}: {resp.text[:120]}"

        return await pool(call, len(queue), concurrency)


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0-1) of values."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--postgres", type=int, default=0, metavar="N",
                        help="then N `advisor serve --store postgresql://...` processes on one PostgreSQL")
    args = parser.parse_args()
    from advisor.store import Store

    triton, url = start_triton()
    try:
        with tempfile.TemporaryDirectory(prefix="advisor-load-") as tmp:
            store = Path(tmp) / "load.duckdb"
            small_probe(url, store)
            service, base = start_service(url, store, args.workers)
            bodies = [{"model": "auto", "max_tokens": 64,
                       "messages": [{"role": "user", "content": f"Request {i}: summarise ticket #{i % 97} in one line."}]}
                      for i in range(args.requests)]
            try:
                started = time.perf_counter()
                latencies, errors = asyncio.run(drive(base, bodies, args.concurrency))
                wall = time.perf_counter() - started
            finally:
                code = stop(service)
            with Store.open(store, read_only=True) as s:
                decisions = s.query("SELECT count(*) AS n FROM routing_decisions")[0]["n"]
                attempts = s.query("SELECT count(*) AS n FROM live_outcomes")[0]["n"]
            pg = postgres_round(url, store, Path(tmp), args, bodies) if args.postgres else None
    finally:
        stop(triton)
    print(f"load test: {args.requests} requests, {args.concurrency} concurrent clients, {args.workers} workers, "
          f"loopback, SIMULATED stand-in rungs (demo ladder, instant)")
    print(f"  errors {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"  {len(latencies) / wall:.0f} requests/s over {wall:.1f}s; latency p50 {pct(latencies, .5) * 1e3:.1f} ms, "
          f"p99 {pct(latencies, .99) * 1e3:.1f} ms, mean {statistics.mean(latencies) * 1e3:.1f} ms")
    print(f"  decisions recorded {decisions} (requests sent {args.requests}), attempts {attempts}; "
          f"service exit code {code}")
    failed = bool(errors or decisions != args.requests or code != 0)
    if pg is not None:
        print(f"  PostgreSQL: {args.postgres} processes x {args.workers} workers, same requests: errors "
              f"{len(pg['errors'])}; {pg['rps']:.0f} requests/s ({pg['rps'] / (len(latencies) / wall):.2f} x the "
              f"DuckDB replica); latency p50 {pg['p50'] * 1e3:.1f} ms, p99 {pg['p99'] * 1e3:.1f} ms; decisions "
              f"stored {pg['decisions']} ({pg['distinct']} distinct), attempts {pg['attempts']}; exit codes "
              f"{pg['codes']}")
        failed = failed or bool(pg["errors"]) or pg["decisions"] != args.requests or any(pg["codes"])
    if failed:
        sys.exit(1)


def postgres_round(url: str, store: Path, tmp: Path, args, bodies) -> dict:
    """The same requests against `args.postgres` services on one throwaway PostgreSQL (see the docstring)."""
    from advisor.ladder import load_ladder
    from advisor.router.feedback.promotion import promote
    from advisor.service.launch import train_from_store
    from advisor.store import open_store
    sys.path.insert(0, str(REPO))  # the test PostgreSQL server lives with the tests
    from tests.local_postgres import LocalPostgres

    with LocalPostgres() as pg:
        router = train_from_store(store, load_ladder(DEMO)).save(tmp / "router.json")
        with open_store(pg.url) as db:
            promote(router, db, pg.url)
        services = [start_service(url, pg.url, args.workers, ["--spool", str(tmp / f"spool{i}")])
                    for i in range(args.postgres)]
        try:
            started = time.perf_counter()
            latencies, errors = asyncio.run(drive([b for _, b in services], bodies, args.concurrency))
            wall = time.perf_counter() - started
        finally:
            codes = [stop(proc) for proc, _ in services]
        with open_store(pg.url) as db:
            counts = db.query("SELECT count(*) AS n, count(DISTINCT decision_id) AS d FROM routing_decisions")[0]
            attempts = db.query("SELECT count(*) AS n FROM live_outcomes")[0]["n"]
    return {"errors": errors, "rps": len(latencies) / wall, "p50": pct(latencies, .5), "p99": pct(latencies, .99),
            "decisions": counts["n"], "distinct": counts["d"], "attempts": attempts, "codes": codes}


if __name__ == "__main__":
    main()
