"""Benchmark: the CPU one chat request costs the service's own code, in process, against the floor app.

`service_overhead.py` measures the service over HTTP next to Triton, where its cost mixes with the HTTP layer,
the gRPC client and the two shared cores. This benchmark isolates the handler: it calls the ASGI apps directly
(no HTTP server, no socket) with an instant fake Triton client that returns a fixed answer, and times each
request with the thread's CPU clock:

  * service: `advisor.service.http.app.create_app` (auth, validation, the routing decision on a router trained from a
             small probe of the demo ladder's SIMULATED stand-ins, prompt rendering, reply parsing, costs,
             headers, metrics, and the records written to a spool folder after the response), with the same
             body as `service_overhead.py` (``model: auto``, ``advisor.rungs: [nano-30b]``, no embeddings);
  * floor:   benchmarks/floor_app.py (read the JSON body, call the client, answer ``{"text": ...}``).

Each is timed warm (requests back to back) and cold: before each request a `CacheEvictor` (router_overhead.py)
writes over a buffer larger than the CPU caches, as the service meets its requests when Triton, the HTTP layer
and the load generator run on the same cores between two of them. The cold figure is a bound, not the live
one: in the service the caches are partly warm.

For the service it also prints the mean wall time of its routing decisions per mode, read from the app's own
`/metrics` (`advisor_routing_decision_seconds`, the same readout as service_overhead.py's for the worker).

`--steps` then splits the service's request into its steps and times each alone, warm and cold (the same
evictor before each call), on the service's own runtime: reading the body's JSON, validating the request, the
routing decision, rendering the prompt, the attempt's costs, parsing the reply, the headers, the response's
JSON, counting the call in the metrics, and (after the response is sent, so not on the latency) building the
records. Each step alone pays its own cold start, so the steps add up to more than the request's cold figure.

    .venv/bin/python benchmarks/handler_cost.py [--requests 1000] [--rounds 3] [--steps]

Starts the embedded Triton only for the small probe the router is trained on, then stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import DEMO, KEY, small_probe, start_triton, stop  # noqa: E402
from service_overhead import BODY, RUNG, TEXT, decision_seconds_in  # noqa: E402


class InstantClient:
    """A Triton client that answers at once (the same answer every time); an async context manager like
    `TritonClient`, for the floor app."""

    def __init__(self, url: str = "") -> None:
        from advisor.triton.client import GenerationResult

        self.result = GenerationResult(text="The printer on floor 3 jams on duplex jobs.", finish_reason="stop",
                                       input_tokens=40, output_tokens=9, tokens_from_server=True, latency_s=0.0,
                                       model=RUNG)

    async def generate(self, model, prompt, *, max_tokens, sampling=None, timeout_s=None, request_id=None, **chat):
        return self.result

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def train_router(tmp: Path) -> Path:
    """A router trained as `advisor serve` trains one from a store (`train_from_store`): on a small probe of the
    demo ladder."""
    from advisor.ladder import load_ladder
    from advisor.service.launch import train_from_store

    store = tmp / "probe.duckdb"
    triton, url = start_triton()
    try:
        small_probe(url, store)
    finally:
        stop(triton)
    return train_from_store(store, load_ladder(DEMO)).save(tmp / "router.json")


def service_app(router: Path, spool: Path):
    """The service's ASGI app with an instant client for every rung (API key `KEY`)."""
    from advisor.service.process import runtime
    from advisor.service.http.app import create_app
    from advisor.service.process.auth import load_keys

    client = InstantClient()
    runtime.Runtime.client_for = lambda self, model: client
    settings = runtime.ServeSettings(ladder_path=str(DEMO), router_path=str(router), spool=str(spool), urls={},
                                     keys=load_keys(None, environ={"ADVISOR_API_KEYS": KEY}).to_state())
    return create_app(settings)


def floor_app():
    """benchmarks/floor_app.py's app with the instant client."""
    import floor_app as floor

    from advisor.triton import client as triton_client

    triton_client.TritonClient = InstantClient  # floor_app imports it when it builds the app
    return floor.create_app("unused", RUNG, TEXT)


class Driver:
    """Calls one ASGI app the way uvicorn would for one request, and checks the answer is a 200."""

    def __init__(self, app) -> None:
        self.app = app
        self.state: dict = {}  #: the lifespan state, copied into every request's scope (as uvicorn does)
        self.body = json.dumps(BODY).encode()
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                      "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
                      "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
                      "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                                  (b"authorization", f"Bearer {KEY}".encode()),
                                  (b"content-length", str(len(self.body)).encode())]}

    async def call(self, scope: dict, body: bytes) -> list[dict]:
        """Call the app once with `scope` and `body`, as uvicorn would; the messages it sent."""
        sent: list[dict] = []
        scope = {**scope, "state": dict(self.state)}
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return pending.pop() if pending else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await self.app(scope, receive, send)
        return sent

    async def request(self) -> None:
        sent = await self.call(dict(self.scope), self.body)
        if sent[0]["status"] != 200:
            raise SystemExit(f"the app answered {sent[0]['status']}: {sent[1:]}")

    async def get(self, path: str) -> tuple[int, str]:
        """(status, body text) of a GET of `path`."""
        scope = {**self.scope, "method": "GET", "path": path, "raw_path": path.encode(),
                 "headers": [(b"authorization", f"Bearer {KEY}".encode())]}  # /metrics needs the key too
        sent = await self.call(scope, b"")
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()

    async def decisions(self) -> tuple[float, float]:
        """(sum, count) of the app's `advisor_routing_decision_seconds` ((0, 0) for an app without metrics)."""
        status, text = await self.get("/metrics")
        return decision_seconds_in(text) if status == 200 else (0.0, 0.0)

    async def lifespan(self):
        """Start the app's lifespan; return the coroutine that shuts it down."""
        inbox: asyncio.Queue = asyncio.Queue()
        outbox: asyncio.Queue = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})
        task = asyncio.ensure_future(self.app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": self.state},
                                              inbox.get,
                                              outbox.put))
        started = await outbox.get()
        if started["type"] != "lifespan.startup.complete":
            raise SystemExit(f"the app did not start: {started}")

        async def shutdown():
            await inbox.put({"type": "lifespan.shutdown"})
            await task

        return shutdown


async def measure(app, n: int, rounds: int, evict) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per mode (warm, cold), the median thread-CPU microseconds per request of each round; and per mode the
    mean wall microseconds of the app's routing decisions (its `advisor_routing_decision_seconds`; NaN for an
    app without metrics)."""
    driver = Driver(app)
    shutdown = await driver.lifespan()
    try:
        for _ in range(300):
            await driver.request()
        out: dict[str, list[float]] = {"warm": [], "cold": []}
        decided = {mode: [0.0, 0.0] for mode in out}  # seconds, decisions
        for _ in range(rounds):
            for mode in out:
                s0, n0 = await driver.decisions()
                times = []
                for _ in range(n):
                    if mode == "cold":
                        evict()
                    started = time.thread_time()
                    await driver.request()
                    times.append(time.thread_time() - started)
                out[mode].append(statistics.median(times) * 1e6)
                s1, n1 = await driver.decisions()
                decided[mode][0] += s1 - s0
                decided[mode][1] += n1 - n0
        return out, {mode: (s / k * 1e6 if k else float("nan")) for mode, (s, k) in decided.items()}
    finally:
        await shutdown()


def step_calls(router: Path, spool: Path) -> dict[str, object]:
    """The steps of one service request of `BODY` (see the module docstring), each a no-argument call on the
    service's runtime, in request order."""
    from advisor.service.process import runtime
    from advisor.service.routing.attempts import Attempt, Outcome, fill_attempt
    from advisor.service.api.chat import parse_reply, render_prompt
    from advisor.service.routing.dispatch import decide, records
    from advisor.service.routing.reload import pin
    from advisor.service.api.parse import parse_request
    from advisor.service.http.response import headers_of, usage_of

    rt = runtime.Runtime(runtime.ServeSettings(ladder_path=str(DEMO), router_path=str(router), spool=str(spool),
                                               urls={}, no_auth=True))
    pin(rt)
    raw = json.dumps(BODY).encode()
    req = parse_request(json.loads(raw), {})
    plan = decide(rt, req, None)
    model = rt.rungs[RUNG]
    result = InstantClient().result
    attempt = Attempt(RUNG)
    fill_attempt(attempt, model, result)
    out = Outcome(plan, [attempt], reply=parse_reply(model, result.text, req), rung=RUNG)

    def response() -> str:
        return json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": out.rung,
                           "choices": [{"index": 0, "message": out.reply.message(), "finish_reason": "stop",
                                        "logprobs": None}], "usage": usage_of(rt, out)}, default=str)

    return {"body JSON": lambda: json.loads(raw), "validate request": lambda: parse_request(json.loads(raw), {}),
            "routing decision": lambda: decide(rt, req, None), "render prompt": lambda: render_prompt(model, req),
            "attempt costs": lambda: fill_attempt(Attempt(RUNG), model, result),
            "parse reply": lambda: parse_reply(model, result.text, req), "headers": lambda: headers_of(rt, out),
            "response JSON": response, "count call": lambda: rt.metrics.count_call(attempt, True),
            "records (after send)": lambda: records(rt, out, None, "2026-01-01 00:00:00", 0.01)}


def time_steps(steps: dict[str, object], n: int, rounds: int, evict) -> dict[str, dict[str, list[float]]]:
    """Per step and mode (warm, cold): the median thread-CPU microseconds of one call, per round."""
    out: dict[str, dict[str, list[float]]] = {name: {"warm": [], "cold": []} for name in steps}
    for _ in range(rounds):
        for name, call in steps.items():
            for _ in range(50):
                call()
            for mode in ("warm", "cold"):
                times = []
                for _ in range(n):
                    if mode == "cold":
                        evict()
                    started = time.thread_time()
                    call()
                    times.append(time.thread_time() - started)
                out[name][mode].append(statistics.median(times) * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="Requests per round and mode.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", action="store_true", help="Also time each step of the service's request alone.")
    args = parser.parse_args()
    from router_overhead import CacheEvictor

    evict = CacheEvictor()
    with tempfile.TemporaryDirectory(prefix="advisor-handler-") as tmp:
        router = train_router(Path(tmp))
        results, decisions = {}, {}
        for name, app in (("floor", floor_app()), ("service", service_app(router, Path(tmp) / "spool"))):
            results[name], decisions[name] = asyncio.run(measure(app, args.requests, args.rounds, evict))
        step_n = max(args.requests // 2, 1)
        steps = time_steps(step_calls(router, Path(tmp) / "spool-steps"), step_n, args.rounds,
                           evict) if args.steps else {}
    print(f"handler cost in process: {args.requests} requests x {args.rounds} rounds per app and mode, instant fake "
          f"Triton client, router trained on a small probe of the SIMULATED demo ladder, no embeddings; thread CPU "
          f"per request, median round [rounds]; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for mode in ("warm", "cold"):
        med = {app: statistics.median(r[mode]) for app, r in results.items()}
        for app, r in results.items():
            print(f"  {mode:<4} {app:<8} {med[app]:7.0f} us  [{', '.join(f'{x:.0f}' for x in r[mode])}]")
        print(f"  {mode:<4} service - floor {med['service'] - med['floor']:5.0f} us per request; the service's routing "
              f"decision (advisor_routing_decision_seconds, wall) {decisions['service'][mode]:.0f} us per request")

    if steps:
        print(f"  the service's steps, each alone ({step_n} calls per round and mode), thread CPU "
              f"per call, median round [rounds], warm / cold:")
        for name, r in steps.items():
            print(f"    {name:<22} {statistics.median(r['warm']):6.0f} / {statistics.median(r['cold']):6.0f} us  "
                  f"[{', '.join(f'{x:.0f}' for x in r['cold'])}]")


if __name__ == "__main__":
    main()
