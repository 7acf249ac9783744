"""Benchmark: where the service's routing decision spends its time when the CPU caches are cold, by taking parts away.

`handler_cost.py --steps` times each step of a request alone; this one times the whole decision
(`advisor.service.routing.dispatch.decide`, on the service's own runtime, with `service_overhead.py`'s body:
``model: auto``, ``advisor.rungs: [nano-30b]``, no embeddings) three ways, interleaved call by call so that the
machine's drift falls on all three alike, each call after a `CacheEvictor` (router_overhead.py) as the worker meets
its requests:

  * as is:          the decision as the service takes it;
  * policy free:    the router still featurises and scores the text (`RouterModel.score_one`), but the policy's
                    rule and the `Decision` it builds are taken from the first call (what no policy at all would
                    leave: the most any faster rule could save);
  * router free:    the router's whole work (featurising, scoring, the rule) taken from the first call: what the
                    service's own steps around it cost (class, allowed rungs, context windows, session, load, the
                    step check, the decision id, the metric).

Wall time per call (`time.perf_counter`, as `advisor_routing_decision_seconds` reads it), mean and median per
round; the differences between the three are the parts' costs.

    .venv/bin/python benchmarks/decision_parts.py [--calls 1500] [--rounds 3]

Starts the embedded Triton only for the small probe the router is trained on (`handler_cost.train_router`), then
stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from handler_cost import train_router  # noqa: E402
from load_test import DEMO  # noqa: E402
from router_overhead import CacheEvictor  # noqa: E402
from service_overhead import BODY  # noqa: E402

WAYS = ("as is", "policy free", "router free")


def ways(dispatch) -> dict[str, object]:
    """The three `route_one`s to put in the dispatch: its own, one whose rule is free, one whose router is free."""
    real = dispatch.route_one
    first: dict[str, object] = {}

    def remembered(*args, **kwargs):
        if "decision" not in first:
            first["decision"] = real(*args, **kwargs)
        return first["decision"]

    def policy_free(model, text, task_class, *args, **kwargs):
        model.score_one(text, task_class)  # the featuriser and the model still run
        return remembered(model, text, task_class, *args, **kwargs)

    return dict(zip(WAYS, (real, policy_free, remembered)))


def measure(calls: int, rounds: int, router: Path, spool: Path) -> list[dict[str, list[float]]]:
    """Per round, the wall seconds of each way's decisions (`calls` of each, interleaved, caches evicted before each)."""
    from advisor.service.api.parse import parse_request
    from advisor.service.process import runtime
    from advisor.service.routing import dispatch
    from advisor.service.routing.reload import pin

    rt = runtime.Runtime(runtime.ServeSettings(ladder_path=str(DEMO), router_path=str(router), spool=str(spool),
                                               urls={}, no_auth=True))
    pin(rt)
    req = parse_request(json.loads(json.dumps(BODY)), {})
    routes = ways(dispatch)
    for route in routes.values():  # warm-up; the free ways remember the real decision here
        dispatch.route_one = route
        for _ in range(20):
            dispatch.decide(rt, req, None)
    gc.collect()
    gc.freeze()  # as the service's worker does after its start
    evict = CacheEvictor()
    order = list(routes.items())
    out = []
    try:
        for _ in range(rounds):
            times: dict[str, list[float]] = {name: [] for name in routes}
            for i in range(calls * len(order)):
                name, route = order[i % len(order)]
                dispatch.route_one = route
                evict()
                started = time.perf_counter()
                dispatch.decide(rt, req, None)
                times[name].append(time.perf_counter() - started)
            out.append(times)
    finally:
        dispatch.route_one = routes["as is"]
        asyncio.run(rt.close())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500, help="Decisions per way and round.")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-decision-") as tmp:
        rounds = measure(args.calls, args.rounds, train_router(Path(tmp)), Path(tmp) / "spool")
    print(f"the routing decision's parts, cold caches: {args.calls} decisions per way x {args.rounds} rounds, "
          f"interleaved; router trained on a small probe of the SIMULATED demo ladder, no embeddings; wall us per "
          f"decision, mean (median) per round; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    means = {name: [statistics.mean(r[name]) * 1e6 for r in rounds] for name in WAYS}
    for name in WAYS:
        cells = ", ".join(f"{statistics.mean(r[name]) * 1e6:.0f} ({statistics.median(r[name]) * 1e6:.0f})"
                          for r in rounds)
        print(f"  {name:<12} {cells}")
    parts = {"the policy's rule": ("as is", "policy free"), "featurising and scoring": ("policy free", "router free")}
    for part, (whole, less) in parts.items():
        diffs = [a - b for a, b in zip(means[whole], means[less])]
        print(f"  {part:<24} {statistics.median(diffs):5.0f} us per decision, median over rounds "
              f"[{min(diffs):.0f}, {max(diffs):.0f}]")
    print(f"  {'the service around them':<24} {statistics.median(means['router free']):5.0f} us per decision "
          f"[{min(means['router free']):.0f}, {max(means['router free']):.0f}]")


if __name__ == "__main__":
    main()
