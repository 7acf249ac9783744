"""Benchmark: advisor's TritonClient against a bare tritonclient.grpc.aio streaming loop, same run, same requests.

Starts `advisor triton serve` (the embedded Triton) in a separate process with one stand-in rung that answers
at once, then, for each concurrency level, runs the same number of requests through

  * bare:    tritonclient.grpc.aio `stream_infer`, one stream per request, the vLLM-backend tensors, reading
             text_output and the token counts (what a careful hand-written client does), and
  * advisor: `TritonClient.generate` (contract check cached, retries armed, result object built).

Rounds alternate bare/advisor to share out drift. Prints requests/s and p50/p99 latency per client and the
advisor/bare throughput ratio (goal: >= 0.80).

    .venv/bin/python benchmarks/client_throughput.py [--requests 2000] [--rounds 3] [--concurrency 1 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INSTANT_LADDER = """\
version: 1
name: bench
description: one SIMULATED stand-in rung that answers at once (benchmark only)
simulated: true
rungs:
  - name: instant
    hf_id: bench/instant
    params_total_b: 1
    triton_model: standin_instant
    price: {basis: tokens, usd_per_m_input: 0.1, usd_per_m_output: 0.1, source: benchmark, as_of: "2026-11"}
    context_length: 4096
    tool_call_format: hermes
    standin: {capability: 0.0, latency_ms: 0}
"""
MODEL = "standin_instant"
PROMPT = "Summarise the ticket in one line: the printer on floor 3 jams on every duplex job."
MAX_TOKENS = 16


def start_server(ladder: Path) -> tuple[subprocess.Popen, str]:
    """Run `advisor triton serve` in its own process; return it and its gRPC address once ready."""
    cmd = [sys.executable, "-c", "from advisor.cli import console; console()", "triton", "serve",
           "--ladder", str(ladder)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"server exited: {proc.stderr.read()}")
        if line.startswith("ready "):
            fields = dict(f.split("=", 1) for f in line.split()[1:])
            return proc, fields["grpc"]
    proc.kill()
    raise SystemExit("server did not become ready")


def bare_runner(url: str):
    """A bare tritonclient.grpc.aio loop doing the same request; returns (send, close)."""
    import numpy as np
    import tritonclient.grpc.aio as grpcclient
    from tritonclient.grpc import InferInput

    client = grpcclient.InferenceServerClient(url)
    flags = []
    for name, value in (("stream", False), ("exclude_input_in_output", True), ("return_finish_reason", True),
                        ("return_num_input_tokens", True), ("return_num_output_tokens", True)):
        t = InferInput(name, [1], "BOOL")
        t.set_data_from_numpy(np.array([value], dtype=bool))
        flags.append(t)
    sampling = json.dumps({"max_tokens": MAX_TOKENS}).encode()

    async def send(prompt: str):
        text = InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
        params = InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(np.array([sampling], dtype=np.object_))

        async def requests():
            yield {"model_name": MODEL, "inputs": [text, params, *flags]}

        out, n_out = b"", 0
        async for result, error in client.stream_infer(requests()):
            if error is not None:
                raise RuntimeError(error)
            t = result.as_numpy("text_output")
            if t is not None:
                out += t[0]
                n_out += int(result.as_numpy("num_output_tokens").sum())
        return out, n_out

    return send, client.close


def advisor_runner(url: str):
    """advisor's client doing the same request; returns (send, close)."""
    from advisor.triton.client import TritonClient

    client = TritonClient(url)

    async def send(prompt: str):
        r = await client.generate(MODEL, prompt, max_tokens=MAX_TOKENS)
        return r.text, r.output_tokens

    return send, client.close


async def measure(make, url: str, requests: int, concurrency: int) -> dict:
    """Run `requests` requests with `concurrency` workers; return rps and latency percentiles."""
    send, close = make(url)
    for _ in range(min(20, requests)):  # warm-up: channel, first model checks
        await send(PROMPT)
    latencies: list[float] = []
    todo = iter(range(requests))

    async def worker():
        for i in todo:
            t0 = time.perf_counter()
            await send(f"{PROMPT} #{i}")
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await close()
    lat = sorted(latencies)
    return {"rps": requests / elapsed, "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per client per round at c>1")
    parser.add_argument("--requests-c1", type=int, default=600, help="requests per client per round at c=1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ladder = Path(tmp) / "bench.yaml"
        ladder.write_text(INSTANT_LADDER)
        proc, url = start_server(ladder)
        try:
            rows = []
            for c in args.concurrency:
                n = args.requests_c1 if c == 1 else args.requests
                runs: dict[str, list[dict]] = {"bare": [], "advisor": []}
                for rnd in range(args.rounds):
                    order = ("bare", "advisor") if rnd % 2 == 0 else ("advisor", "bare")
                    for name in order:
                        make = bare_runner if name == "bare" else advisor_runner
                        runs[name].append(asyncio.run(measure(make, url, n, c)))
                for name in ("bare", "advisor"):
                    rows.append((c, name, n * args.rounds,
                                 statistics.median(r["rps"] for r in runs[name]),
                                 statistics.median(r["p50_ms"] for r in runs[name]),
                                 statistics.median(r["p99_ms"] for r in runs[name])))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)

    print(f"\nclient throughput against one instant stand-in rung ({os.cpu_count()} cores, server in its own "
          f"process, {args.rounds} alternating rounds, medians)")
    print(f"{'conc':>4}  {'client':<8} {'requests':>8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}  {'advisor/bare':>12}")
    bare_rps = {}
    ok = True
    for c, name, n, rps, p50, p99 in rows:
        ratio = ""
        if name == "bare":
            bare_rps[c] = rps
        else:
            ratio = f"{rps / bare_rps[c]:.0%}"
            ok &= rps >= 0.8 * bare_rps[c]
        print(f"{c:>4}  {name:<8} {n:>8} {rps:>8.0f} {p50:>8.2f} {p99:>8.2f}  {ratio:>12}")
    print(f"\ngoal advisor >= 80% of bare: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
