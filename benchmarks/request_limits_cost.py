"""Benchmark: what the service's request limits add to reading a chat request (advisor/service/api/limits.py).

Times, in process and on the event loop, the receive path's parsing of a request before and after the limits:

  * before: `decode_body` then `parse_request` (the JSON, then the request model);
  * after:  `check_header_values` then `parse_bounded` (the x-advisor-* lengths, the bracket count and depth
            check, the JSON, the tools' number and size, the request model, the stored labels' lengths).

Two bodies: the plain body of service_overhead.py (one message, `advisor.rungs`) and an agent step (12 messages,
4 small tools, cached schemas). Each is timed over 2,000 calls per round, before and after alternating, 5 rounds;
it prints the medians, their ratio and the spread of the per-round ratios. Noisy when other work runs.

    .venv/bin/python benchmarks/request_limits_cost.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

from starlette.datastructures import Headers

from advisor.service.process.config import Limits
from advisor.service.api.limits import check_header_values, parse_bounded
from advisor.service.api.parse import decode_body, parse_request

LIMITS = Limits()
HEADERS = Headers(raw=[(b"host", b"x"), (b"authorization", b"Bearer sk-x"), (b"content-type", b"application/json"),
                       (b"user-agent", b"bench")])
TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
BODIES = {
    "plain": {"model": "auto", "messages": [{"role": "user", "content": "Say hello."}],
              "advisor": {"rungs": ["nano-30b"]}},
    "agent step (12 messages, 4 tools)": {
        "model": "auto", "messages": [{"role": "user", "content": "step [1] of the task"}] * 12,
        "tools": [{**TOOL, "function": {**TOOL["function"], "name": f"t{i}"}} for i in range(4)]},
}
CALLS, ROUNDS = 2000, 5


async def after(raw: bytes):
    check_header_values(HEADERS, LIMITS)
    return await parse_bounded(raw, HEADERS, LIMITS)


async def before(raw: bytes):
    return parse_request(decode_body(raw), HEADERS)


async def main() -> None:
    for name, body in BODIES.items():
        raw = json.dumps(body).encode()
        await before(raw), await after(raw)  # warm: imports, the schema cache
        per_call: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(ROUNDS):
            for label, parse in (("before", before), ("after", after)):
                started = time.perf_counter()
                for _ in range(CALLS):
                    await parse(raw)
                per_call[label].append((time.perf_counter() - started) / CALLS * 1e6)
        b, a = statistics.median(per_call["before"]), statistics.median(per_call["after"])
        ratios = [x / y for x, y in zip(per_call["after"], per_call["before"])]
        print(f"{name} ({len(raw)} B): before {b:.1f} us, after {a:.1f} us (+{a - b:.1f} us), ratio {a / b:.2f} "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    asyncio.run(main())
