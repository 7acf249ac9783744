"""Benchmark: what the embedded Triton (the demo ladder's SIMULATED stand-ins, which answer at once) costs the
machine's CPU per generation, by process, idle and at concurrency 1.

`service_overhead.py` runs the load generator, the service and this Triton on the same cores, so the CPU the
stand-in server spends per request is taken from what the service and the direct path can use, and its share
shapes both goals there. This measures it apart: `advisor triton serve` in its own process (tritonserver,
the Python backend's stub, the multiprocessing helper and advisor's own process, which runs the stand-ins
behind PyTriton), its CPU over an idle spell, then over N generations sent one at a time by
`service_overhead.py`'s direct path (advisor's `TritonClient` on nano-30b, the same prompt and max_tokens; its
one untimed call that opens the channel and checks the contract falls inside the reading), split by process
(user + system time from /proc, threads summed). Beside the wall time per generation it prints Triton's own
request duration for the rung (its statistics API: success time over count, over the same generations) and the
client's latencies by 0.25 ms bin (`service_overhead.bins_line`): how much of a generation's wall time Triton
accounts for, and the 1 ms steps the rest comes in.

    .venv/bin/python benchmarks/triton_cpu.py [--requests 2000] [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import DEMO, start_triton, stop  # noqa: E402
from service_overhead import RUNG, bins_line, cpu_by_process, direct, run_loop  # noqa: E402


def spent(before: dict, after: dict) -> dict:
    """CPU seconds per process between two `cpu_by_process` readings."""
    return {key: after[key] - before.get(key, 0.0) for key in after}


def request_seconds(url: str, model: str) -> tuple[float, int]:
    """(total seconds, count) of the successful requests Triton has served for `model` (its statistics API)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    try:
        stats = client.get_inference_statistics(model_name=model, as_json=True)["model_stats"][0]
    finally:
        client.close()
    success = stats["inference_stats"]["success"]
    return int(success.get("ns", 0)) / 1e9, int(success.get("count", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle reading")
    args = parser.parse_args()
    from advisor.ladder import load_ladder

    model = load_ladder(DEMO).rung(RUNG).model_id
    triton, url = start_triton()
    try:
        time.sleep(2.0)
        before = cpu_by_process(triton.pid)
        time.sleep(args.idle)
        idle = spent(before, cpu_by_process(triton.pid))
        run_loop(direct(url, 50, 1))  # Triton warmed up before the reading
        before, served = cpu_by_process(triton.pid), request_seconds(url, model)
        latencies = run_loop(direct(url, args.requests, 1))
        busy = spent(before, cpu_by_process(triton.pid))
        served_s, served_n = (a - b for a, b in zip(request_seconds(url, model), served))
    finally:
        stop(triton)
    n = args.requests
    print(f"embedded Triton (SIMULATED stand-ins), rung {RUNG}, {n} generations at concurrency 1 through advisor's "
          f"TritonClient; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the end")
    print(f"  idle: {sum(idle.values()) / args.idle * 1e3:.1f} ms of CPU per second over {args.idle:g} s")
    print(f"  busy: {sum(latencies) / n * 1e3:.2f} ms per generation (wall, client included); Triton's CPU "
          f"{sum(busy.values()) / n * 1e3:.2f} ms per generation, by process:")
    rows = sorted(busy.items(), key=lambda kv: -kv[1])
    for (pid, name), seconds in rows:
        if seconds / n >= 0.05e-3:
            label = "advisor triton serve (the stand-ins behind PyTriton)" if pid == triton.pid else name
            print(f"    {seconds / n * 1e3:6.2f} ms  {label} (pid {pid})")
    rest = [seconds for _, seconds in rows if seconds / n < 0.05e-3]
    print(f"    {sum(rest) / n * 1e3:6.2f} ms  {len(rest)} other processes (under 0.05 ms each)")
    print(f"  Triton's own request duration (statistics API): {served_s / max(served_n, 1) * 1e3:.2f} ms per request "
          f"over {served_n}")
    print("  " + bins_line(1, "client", latencies))


if __name__ == "__main__":
    main()
