"""Benchmark: what the routing service adds over calling the rung directly, same rung, same run.

Starts the embedded Triton (`advisor triton serve`, the demo ladder's SIMULATED stand-ins, which answer at
once), benchmarks/floor_app.py and `advisor serve --url` to it (one worker, router trained at start from a
small stored probe), then for each concurrency level alternates rounds of

  * direct:  advisor's `TritonClient.generate` on nano-30b with the prompt the service would render (one gRPC
             channel, reused), and
  * floor:   the same ``POST /v1/chat/completions`` (same body, same client, same connections) to
             benchmarks/floor_app.py: the least HTTP service in front of the rung, a minimal Starlette app on
             uvicorn with `advisor serve`'s uvicorn settings (asyncio loop, httptools, no access log, one worker)
             that reads the JSON body, calls the same `TritonClient.generate` (same rung, same rendered prompt,
             the body's max_tokens, one client reused) and returns ``{"text": ...}`` (`--no-floor` leaves it out),
  * service: ``POST /v1/chat/completions`` with ``model: auto`` and ``advisor.rungs: [nano-30b]`` (the routing
             decision runs, no embeddings; the answer is parsed, costed, recorded and counted) over keep-alive
             HTTP connections (aiohttp by default: `--client httpx` for the load test's client),

and prints requests/s and p50/p99 per path, the floor/direct and service/direct throughput ratios (goal at
concurrency 32: >= 0.85) and the p50 they add (goal at concurrency 1: <= 2 ms), and service over floor: the
throughput ratio, p50 and server CPU per request that advisor's own code adds on top of the least possible
service, and at concurrency above 1 an estimate of what the throughput goal leaves the server if the cores
are the limit (`cpu_budget_line`: every process here shares them, the stand-in Triton too, whose CPU per
request drifts with the machine's speed; benchmarks/triton_cpu.py measures it apart). The floor reads the
goals: a floor that alone adds about 2 ms at concurrency 1 (or reaches under 0.85 at 32) would say that no
code of advisor's can meet them on this machine; a floor well inside them puts the gap on advisor's code.

Paired rounds: the machine's speed drifts during a run (other jobs and, on a shared host, other tenants), and
figures pooled over the rounds mix that drift into the comparison. So each path is also compared with the
direct round run next to it, round by round: the last lines give, per path, the median over the rounds of the
throughput ratio and of the p50 added, their range, and how many rounds are within each goal. Many short
rounds pair better than a few long ones (e.g. ``--requests 300 --rounds 10``).

Fairness: all paths run in this one load-generator process on asyncio's default event loop, with the same
`concurrency` tasks taking requests from one counter, one warmed, reused connection (pool) per path, and the
same latency clock around one call. The load generator shares the 2 cores with the service and Triton, so its
own CPU is part of either path's cost: every round prints the CPU milliseconds per request of the load
generator, of the service's process tree and of Triton's (from /proc), so that the costs can be compared side
by side (the server column is the path's server: the floor app's process or the service's tree; for the direct
path, the idle service's). httpx cost the load generator about three times aiohttp's CPU per request at 32
connections (3.1 vs 0.3-0.4 ms, measured with `--client httpx`), which would be charged to the HTTP paths only. (aiohttp
comes with the `tritonclient[http]` dependency.)

`--against` runs the other checkout's code: the service is started without the working directory on sys.path
(`load_test.NOT_CWD`), the benchmark checks that the two interpreters import advisor from different folders,
and the output names both. (Before this check, `python -c` put the working directory first on sys.path, so an
`--against` service started from a checkout ran that checkout's code, not its interpreter's: both services ran
the same code.)

    .venv/bin/python benchmarks/service_overhead.py [--requests 1000] [--rounds 3] [--concurrency 1 32]
        [--client aiohttp|httpx] [--no-floor] [--against OTHER_CHECKOUT/.venv/bin/python] [--memoised] [--pin]
        [--postgres] [--capture] [--session ID]

`--memoised` adds a service whose routing decisions are memoised (benchmarks/memoised_route.py: every request
here has the same text and settings, so it decides once): the service less its routing decision, run beside the
real one, which measures what the decision costs inside the worker.

`--pin` binds the servers (the floor app and the services) to CPU 0, and the load generator and Triton to the
other CPUs (`pin_tree`: every thread of each process tree; what they start later inherits it). The service then
has a core of its own, nearer a deployment where Triton runs on other hardware (on the direct path CPU 0 holds
only the idle servers). At concurrency 32 the one core left to Triton and the load generator limits every
path, the floor's too, so the throughput ratios there do not read as a deployment's; the CPU budget line is
left out.

At concurrency 1 it also prints each path's most common latencies in 0.25 ms bins (`bins_line`): on the
stand-in rung they come in steps of 1 ms, which a p50 moves by.

For each service (not the floor app), the mean wall time of its routing decisions in the worker at each
concurrency is read from its own `/metrics` (`advisor_routing_decision_seconds`, sum over count, before and
after that concurrency's rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import (ADVISOR, DEMO, KEY, NOT_CWD, _read_until, drive, pct, pool, small_probe,  # noqa: E402
                       start_service, start_triton, stop)

RUNG = "nano-30b"
TEXT = "Summarise the ticket in one line: the printer on floor 3 jams on every duplex job."
MAX_TOKENS = 32
#: The chat request of the floor and service paths (the routing decision runs: ``model: auto``, one allowed rung)
BODY = {"model": "auto", "max_tokens": MAX_TOKENS, "advisor": {"rungs": [RUNG]},
        "messages": [{"role": "user", "content": TEXT}]}


async def direct(url: str, n: int, concurrency: int) -> list[float]:
    """n generations through advisor's Triton client at `concurrency`; latencies."""
    from advisor.ladder import load_ladder
    from advisor.service.api.chat import render_prompt
    from advisor.service.api.parse import parse_request
    from advisor.triton.client import TritonClient

    model = load_ladder(DEMO).rung(RUNG)
    prompt = render_prompt(model, parse_request({"model": RUNG, "messages": [{"role": "user", "content": TEXT}]}, {}))
    async with TritonClient(url) as client:
        await client.generate(model.model_id, prompt, max_tokens=MAX_TOKENS)  # contract check, warm channel

        async def call():
            await client.generate(model.model_id, prompt, max_tokens=MAX_TOKENS)

        return (await pool(call, n, concurrency))[0]


async def via_service(base: str, body: dict, n: int, concurrency: int, client: str) -> tuple[list[float], list[str]]:
    """n chat completions through the service (or the floor app: same endpoint, same body) at `concurrency` over
    keep-alive HTTP; (latencies, errors)."""
    if client == "httpx":
        return await drive(base, [body] * n, concurrency)
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base, connector=connector, headers={"Authorization": f"Bearer {KEY}"},
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def call():
            try:
                async with session.post("/v1/chat/completions", json=body) as resp:
                    await resp.read()
                    return None if resp.status == 200 else f"HTTP {resp.status}"
            except aiohttp.ClientError as exc:
                return f"{type(exc).__name__}: {exc}"

        return await pool(call, n, concurrency)


def run_loop(coro):
    """The event loop of both paths: asyncio's default loop (grpc.aio, the direct path's client, was measured
    slower on uvloop, which would charge the direct path for the choice)."""
    return asyncio.run(coro)


def process_tree(root: int) -> dict[int, list[Path]]:
    """A live process and its live descendants: pid -> the /proc folders of its threads (Linux)."""
    out: dict[int, list[Path]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            out[pid] = list(Path(f"/proc/{pid}/task").iterdir())
            for task in out[pid]:
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return out


def cpu_by_process(root: int) -> dict[tuple[int, str], float]:
    """User + system CPU seconds of a live process and each of its live descendants, by (pid, program name)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[tuple[int, str], float] = {}
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        out[(pid, Path(program).name or "?")] = (int(fields[11]) + int(fields[12])) / tick
    return out


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process and all its live descendants."""
    return sum(cpu_by_process(pid).values())


def decision_seconds(base: str) -> tuple[float, float]:
    """(sum, count) of the service's `advisor_routing_decision_seconds` histogram, read from its /metrics: the
    wall time of its routing decisions in the worker (the floor app has none: (0, 0))."""
    import urllib.request

    try:
        request = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return decision_seconds_in(resp.read().decode())
    except OSError:
        return 0.0, 0.0


def decision_seconds_in(metrics_text: str) -> tuple[float, float]:
    """(sum, count) of `advisor_routing_decision_seconds` in a Prometheus text exposition ((0, 0) without it)."""
    values = {}
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("advisor_routing_decision_seconds_sum", "advisor_routing_decision_seconds_count"):
            values[name.rsplit("_", 1)[1]] = float(value)
    return values.get("sum", 0.0), values.get("count", 0.0)


def pin_tree(pid: int, cpus: set[int]) -> int:
    """Bind every thread of a live process and of its live descendants to `cpus` (threads and processes they
    start later inherit it); the number of threads bound."""
    bound = 0
    for tasks in process_tree(pid).values():
        for task in tasks:
            try:
                os.sched_setaffinity(int(task.name), cpus)
                bound += 1
            except OSError:  # a thread that has ended
                continue
    return bound


def timed(fn, procs: dict[str, int]):
    """Run fn(); return (its result, wall seconds, CPU seconds per process tree incl. this load generator)."""
    before = {name: tree_cpu_s(pid) for name, pid in procs.items()}
    gen0, started = time.process_time(), time.perf_counter()
    result = fn()
    wall, gen = time.perf_counter() - started, time.process_time() - gen0
    cpu = {name: tree_cpu_s(pid) - before[name] for name, pid in procs.items()}
    return result, wall, {"load generator": gen, **cpu}


def start_floor(url: str) -> tuple:
    """benchmarks/floor_app.py (the least HTTP service in front of the rung) in its own process; (process,
    base URL)."""
    import subprocess

    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parent / "floor_app.py"), "--url", url,
                             "--rung", RUNG, "--text", TEXT, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = _read_until(proc, "ready http=")
    return proc, "http://" + line.split("=", 1)[1]


def advisor_source(python: str) -> str:
    """The folder `python` imports advisor from (as `advisor serve` started by `load_test.ADVISOR` would)."""
    import subprocess

    return subprocess.run([python, "-c", NOT_CWD + "import advisor, os; print(os.path.dirname(advisor.__file__))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def probe_with(python: str, url: str, store: Path) -> None:
    """`small_probe` run by another interpreter into its own store: another checkout's code may not read a store
    migrated by this one (a newer migration), so the 'against' service gets the same small probe made by its
    own code."""
    import subprocess

    here = str(Path(__file__).resolve().parent)
    subprocess.run([python, "-c", NOT_CWD + f"sys.path.insert(0, {here!r}); from pathlib import Path; import load_test; "
                    f"load_test.small_probe({url!r}, Path({str(store)!r}))"], check=True, capture_output=True)


def start_services(url: str, store: Path, workers: int, against: str | None, floor: bool = True,
                   memoised: bool = False, sessions_off: bool = False,
                   postgres_url: str | None = None, capture: bool = False) -> dict[str, tuple]:
    """The floor app (unless `floor` is false), the service under test, with `against` a second service run
    by that interpreter (another checkout's ``.venv/bin/python``: the code before a change) on a store that
    interpreter probed (`probe_with`), with `memoised` one whose routing decisions are memoised
    (`memoised_route`), with `sessions_off` the same code with ``sessions: {enabled: false}`` (every request
    routed on its own: the service less its session step), with `capture` the same code with ``capture: {enabled:
    true}`` (every step captured: `advisor.service.records.capture`), and with `postgres_url` the same code on that
    PostgreSQL store ('pg-store': its session latch in PostgreSQL, the router trained from `store`);
    name -> (process, base URL)."""
    import shutil

    services = {"floor": start_floor(url)} if floor else {}
    services["service"] = start_service(url, store, workers, ["--ingest-every", "0"])
    if against:
        other = store.with_name("against.duckdb")
        probe_with(against, url, other)
        services["against"] = start_service(url, other, workers, ["--ingest-every", "0"],
                                            advisor=[against, *ADVISOR[1:]])
    def with_config(name: str, text: str) -> None:  # the same code and store, another service config
        other, config = store.with_name(f"{name}.duckdb"), store.with_name(f"{name}.yaml")
        shutil.copy(store, other)
        config.write_text(f"version: 1\n{text}\n")
        services[name] = start_service(url, other, workers, ["--ingest-every", "0", "--config", str(config)])

    if sessions_off:
        with_config("no-sessions", "sessions: {enabled: false}")
    if capture:
        with_config("capture", "capture: {enabled: true}")
    if postgres_url:
        artifact = store.with_name("pg-router.json")
        subprocess.run([*ADVISOR, "router", "train", "--store", str(store), "--out", str(artifact), "--folds", "2"],
                       check=True, capture_output=True)
        services["pg-store"] = start_service(url, postgres_url, workers, [
            "--ingest-every", "0", "--router", str(artifact), "--spool", str(store.with_name("pg-spool"))])
    if memoised:
        other = store.with_name("memoised.duckdb")
        shutil.copy(store, other)
        here = str(Path(__file__).resolve().parent)
        services["memoised"] = start_service(url, other, workers, ["--ingest-every", "0"], advisor=[
            sys.executable, "-c", NOT_CWD + f"sys.path.insert(0, {here!r}); import memoised_route; "
            "memoised_route.install(); from advisor.cli import console; console()"])
    return services


def paired(runs: list[tuple[float, list[float], dict]], direct_runs: list[tuple[float, list[float], dict]]
           ) -> tuple[list[float], list[float]]:
    """Per round, a path against the direct path's round run next to it: (throughput ratios, p50 added in ms).

    The machine's speed drifts over a run (other jobs, other tenants of the host), and a pooled figure mixes
    the drift into the comparison; rounds taken back to back are compared in the same conditions."""
    ratios, added = [], []
    for (wall, lat, _), (dwall, dlat, _) in zip(runs, direct_runs):
        ratios.append((len(lat) / wall) / (len(dlat) / dwall))
        added.append((pct(lat, .5) - pct(dlat, .5)) * 1e3)
    return ratios, added


def paired_line(c: int, path: str, runs, direct_runs) -> str:
    """The paired-rounds summary of one path at concurrency `c`: medians, ranges, and the rounds within each
    goal (throughput >= 0.85 of direct at 32, p50 added <= 2 ms at 1)."""
    ratios, added = paired(runs, direct_runs)
    n = len(ratios)
    return (f"c={c:<3} {path}/direct paired by round (median [min, max] over {n}): throughput "
            f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}], {sum(r >= 0.85 for r in ratios)}"
            f"/{n} rounds >= 0.85; p50 added {statistics.median(added):+.2f} ms [{min(added):+.2f}, {max(added):+.2f}],"
            f" {sum(a <= 2.0 for a in added)}/{n} rounds <= 2 ms")


def bins_line(c: int, path: str, latencies: list[float], width_ms: float = 0.25, top: int = 3) -> str:
    """The most common latencies of a path, in bins of `width_ms`: how the requests' latencies are spread.

    At concurrency 1 the stand-in path's latencies come in steps of a whole millisecond on this machine (in the
    hand-offs between tritonserver's Python backend and PyTriton's proxy, not located further; the direct path's
    too: benchmarks/triton_cpu.py), so a p50 moves by steps of about 1 ms, and a p50 added reads as the number
    of steps a path falls behind, not as a continuous cost."""
    from collections import Counter

    common = Counter(round(x * 1e3 / width_ms) * width_ms for x in latencies).most_common(top)
    return (f"c={c:<3} {path} latencies by {width_ms} ms bin (top {top}): "
            + ", ".join(f"{b:.2f} ms {n / len(latencies):.0%}" for b, n in common))


def cpu_budget_line(c: int, cpu: dict[str, dict[str, float]], goal: float = 0.85) -> str:
    """What the throughput goal leaves the server, if the machine's cores are the limit (every process of the
    benchmark shares them): the throughput ratio of a path is then about the direct path's CPU per request
    (load generator + Triton) over the path's (load generator + its server + Triton), so the path's server
    may use at most direct / goal - load generator - Triton of CPU per request. An estimate from the median
    rounds' CPU columns, printed beside the measured ratios to read them; not a measurement."""
    def total(path: str, server: bool = True) -> float:
        return cpu[path]["load generator"] + cpu[path]["triton"] + (cpu[path]["server"] if server else 0.0)

    direct = total("direct", server=False)
    parts = [f"{path} {direct / total(path):.2f}" for path in cpu if path != "direct"]
    budgets = [f"{path} {direct / goal - total(path, server=False):.2f} (uses {cpu[path]['server']:.2f})"
               for path in cpu if path != "direct"]
    return (f"c={c:<3} if the cores are the limit (estimate from the CPU columns): throughput vs direct about "
            f"{', '.join(parts)}; server CPU per request the {goal:.2f} goal leaves, ms: {', '.join(budgets)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--workers", type=int, default=1, help="Service worker processes.")
    parser.add_argument("--client", choices=["aiohttp", "httpx"], default="aiohttp",
                        help="HTTP client of the service path (see the module docstring).")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="Leave out the floor arm (benchmarks/floor_app.py; see the module docstring).")
    parser.add_argument("--against", default=None, metavar="PYTHON",
                        help="Also time a second service run by this interpreter (e.g. a checkout of main's "
                             ".venv/bin/python), rounds alternated with the others: before/after in one run.")
    parser.add_argument("--memoised", action="store_true",
                        help="Also time a service whose routing decisions are memoised (one worker only).")
    parser.add_argument("--sessions-off", action="store_true",
                        help="Also time the same service with sessions: {enabled: false} ('no-sessions'): what the "
                             "session step adds, in the same run.")
    parser.add_argument("--capture", action="store_true",
                        help="Also time the same service with capture: {enabled: true} ('capture'): what capturing "
                             "every step adds, in the same run.")
    parser.add_argument("--postgres", action="store_true",
                        help="Also time the same service on a PostgreSQL store ('pg-store', a local PostgreSQL "
                             "started for the run): its session latch lives in PostgreSQL, the service's in SQLite.")
    parser.add_argument("--session", default=None, metavar="ID",
                        help="Every request a later step of this one session (advisor.session): each request reads "
                             "and writes the latch (default: a derived session, new with every request).")
    parser.add_argument("--pin", action="store_true",
                        help="Give the servers (floor app and services) CPU 0 and the load generator and Triton the "
                             "other CPUs: the service on a core of its own, apart from the model server and the "
                             "clients, as in a deployment (see the module docstring).")
    args = parser.parse_args()
    if args.memoised and args.workers != 1:
        raise SystemExit("--memoised needs --workers 1 (the memo is installed in the serving process)")
    sources = {"service": advisor_source(sys.executable)}
    if args.against:
        sources["against"] = advisor_source(args.against)
        if sources["against"] == sources["service"]:
            raise SystemExit(f"--against {args.against} imports advisor from {sources['service']}, as this "
                             "interpreter does: both services would run the same code")
    if args.session:
        BODY["advisor"] = {**BODY["advisor"], "session": args.session}
    triton, url = start_triton()
    pg = None
    if args.postgres:
        from advisor.store.local_postgres import LocalPostgres

        pg = LocalPostgres().start()
    results: dict[tuple[str, int], list[tuple[float, list[float], dict[str, float]]]] = {}
    decisions: dict[tuple[str, int], float] = {}  #: mean seconds of a routing decision in the worker
    try:
        with tempfile.TemporaryDirectory(prefix="advisor-overhead-") as tmp:
            store = Path(tmp) / "overhead.duckdb"
            small_probe(url, store)
            services = start_services(url, store, args.workers, args.against, args.floor, args.memoised,
                                      args.sessions_off, pg.new_database("overhead") if pg else None,
                                      args.capture)
            if args.pin:
                rest = set(range(1, os.cpu_count() or 1)) or {0}
                for proc, _ in services.values():
                    pin_tree(proc.pid, {0})
                pin_tree(triton.pid, rest)
                pin_tree(os.getpid(), rest)
            try:
                for _, base in services.values():
                    run_loop(via_service(base, BODY, 50, 4, args.client))  # warm up
                for c in args.concurrency:
                    before = {path: decision_seconds(base) for path, (_, base) in services.items() if path != "floor"}
                    for r in range(args.rounds):
                        order = ["direct", *services]
                        for path in order if r % 2 == 0 else order[::-1]:  # alternate who goes first
                            # the server of the path (the direct path: the idle service)
                            pid = services[path][0].pid if path in services else services["service"][0].pid
                            procs = {"server": pid, "triton": triton.pid}
                            if path == "direct":
                                lat, wall, cpu = timed(lambda: run_loop(direct(url, args.requests, c)), procs)
                            else:
                                (lat, errors), wall, cpu = timed(lambda: run_loop(
                                    via_service(services[path][1], BODY, args.requests, c, args.client)), procs)
                                if errors:
                                    raise SystemExit(f"{path} errors: {errors[:3]}")
                            results.setdefault((path, c), []).append((wall, lat, cpu))
                    for path, (s0, n0) in before.items():
                        s1, n1 = decision_seconds(services[path][1])
                        decisions[(path, c)] = (s1 - s0) / (n1 - n0) if n1 > n0 else float("nan")
            finally:
                for proc, _ in services.values():
                    stop(proc)
    finally:
        stop(triton)
        if pg is not None:
            pg.close()
    print(f"service overhead: {args.requests} requests x {args.rounds} rounds per path, rung {RUNG} (SIMULATED "
          f"stand-in, answers at once), loopback, {args.workers} service worker(s), service path over "
          f"{args.client}" + (f", 'against' = the service run by {args.against}" if args.against else "")
          + (", 'memoised' = the service with its routing decisions memoised" if args.memoised else "")
          + (", 'no-sessions' = the service with sessions: {enabled: false}" if args.sessions_off else "")
          + (", 'capture' = the service with capture: {enabled: true}" if args.capture else "")
          + (", 'pg-store' = the service on a local PostgreSQL store (latch in PostgreSQL)" if args.postgres else "")
          + (f", every request a step of session {args.session!r}" if args.session else "")
          + ("; PINNED: the servers on CPU 0, the load generator and Triton on the other CPUs" if args.pin else "")
          + f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the end")
    print("  code: " + ", ".join(f"{name} from {src}" for name, src in sources.items()))
    print("  CPU ms per request (median round): load generator (this process) / server tree (the path's: floor "
          "app or service; direct: the idle service) / triton tree")
    paths = ["direct", *(["floor"] if args.floor else []), "service", *(["against"] if args.against else []),
             *(["memoised"] if args.memoised else []), *(["no-sessions"] if args.sessions_off else []),
             *(["pg-store"] if args.postgres else []), *(["capture"] if args.capture else [])]
    for c in args.concurrency:
        row, path_cpu, pooled = {}, {}, {}
        for path in paths:
            runs = results[(path, c)]
            rps = statistics.median(len(lat) / wall for wall, lat, _ in runs)
            lat = pooled[path] = [x for _, ls, _ in runs for x in ls]
            cpu = {k: statistics.median(r[2][k] / len(r[1]) * 1e3 for r in runs) for k in runs[0][2]}
            row[path], path_cpu[path] = (rps, pct(lat, .5), pct(lat, .99)), cpu
            print(f"  c={c:<3} {path:<8} {rps:7.0f} req/s  p50 {row[path][1] * 1e3:6.2f} ms  p99 "
                  f"{row[path][2] * 1e3:6.2f} ms   CPU {cpu['load generator']:.2f} / {cpu['server']:.2f} / "
                  f"{cpu['triton']:.2f} ms")
        for path in row:
            if path != "direct":
                print(f"  c={c:<3} {path}/direct throughput {row[path][0] / row['direct'][0]:.2f}; p50 added "
                      f"{(row[path][1] - row['direct'][1]) * 1e3:.2f} ms")
        for path in row:
            if path != "direct":
                print("  " + paired_line(c, path, results[(path, c)], results[("direct", c)]))
        for path in ("against", "no-sessions", "pg-store"):  # before/after in one run: service's rounds vs these
            if path in row:
                diff = [(pct(lat, .5) - pct(olat, .5)) * 1e3
                        for (_, lat, _), (_, olat, _) in zip(results[("service", c)], results[(path, c)])]
                print(f"  c={c:<3} service - {path}, p50 paired by round (median [min, max] over {len(diff)}): "
                      f"{statistics.median(diff):+.2f} ms [{min(diff):+.2f}, {max(diff):+.2f}]")
        if "capture" in row:  # what capturing every step costs a request: capture's rounds vs the service's
            diff = [(pct(lat, .5) - pct(slat, .5)) * 1e3
                    for (_, lat, _), (_, slat, _) in zip(results[("capture", c)], results[("service", c)])]
            print(f"  c={c:<3} capture - service, p50 paired by round (median [min, max] over {len(diff)}): "
                  f"{statistics.median(diff):+.2f} ms [{min(diff):+.2f}, {max(diff):+.2f}] (goal: <= +0.3 ms)")
        if c == 1:
            for path in row:
                print("  " + bins_line(c, path, pooled[path]))
        for path in row:
            if (path, c) in decisions:
                print(f"  c={c:<3} {path} routing decision in the worker (advisor_routing_decision_seconds, "
                      f"wall): mean {decisions[(path, c)] * 1e3:.3f} ms")
        if c > 1 and not args.pin:  # with --pin the cores are not shared alike
            print("  " + cpu_budget_line(c, path_cpu))
        for path in row:
            if "floor" in row and path not in ("direct", "floor"):  # what advisor's code adds over the least service
                print(f"  c={c:<3} {path}/floor throughput {row[path][0] / row['floor'][0]:.2f}; p50 added over "
                      f"floor {(row[path][1] - row['floor'][1]) * 1e3:.2f} ms; server CPU added over floor "
                      f"{path_cpu[path]['server'] - path_cpu['floor']['server']:.2f} ms per request")


if __name__ == "__main__":
    main()
