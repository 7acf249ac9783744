"""A SIMULATED OpenAI-compatible model server with finite capacity: per model a number of concurrency slots and a
service time, so that queues form as they would on a GPU (a request waits for a free slot, then holds it for the
service time). Used by benchmarks/load_routing.py and tests/test_service_load.py; loopback only.

Every answer is the fixed text ``SIMULATED answer of <model>`` with fixed token counts (`INPUT_TOKENS`,
`OUTPUT_TOKENS`), so a rung's cost per attempt is its ladder price times those. ``GET /v1/models`` lists the
models; ``GET /stats`` gives per model the requests served, in service and waiting.

    python benchmarks/load_capacity.py --model small:4:0.25 --model large:16:0.6 [--port 0]

prints ``ready http=http://127.0.0.1:PORT`` once it listens (MODEL:SLOTS:SERVICE_SECONDS per model).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

INPUT_TOKENS = 200
OUTPUT_TOKENS = 50


@dataclass
class Capacity:
    """One model's slots and service time, and what it is doing."""

    slots: int
    service_s: float
    served: int = 0
    busy: int = 0
    waiting: int = 0
    gate: asyncio.Semaphore | None = field(default=None, repr=False)

    async def serve(self) -> float:
        """Wait for a free slot, hold it for the service time; returns the seconds waited."""
        if self.gate is None:
            self.gate = asyncio.Semaphore(self.slots)
        t0 = time.monotonic()
        self.waiting += 1
        async with self.gate:
            self.waiting -= 1
            self.busy += 1
            waited = time.monotonic() - t0
            try:
                await asyncio.sleep(self.service_s)
            finally:
                self.busy -= 1
                self.served += 1
        return waited


def parse_model(spec: str) -> tuple[str, Capacity]:
    """``NAME:SLOTS:SERVICE_SECONDS`` -> (name, Capacity); a one-line error otherwise."""
    try:
        name, slots, service = spec.split(":")
        cap = Capacity(int(slots), float(service))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--model takes NAME:SLOTS:SERVICE_SECONDS, not {spec!r}") from None
    if cap.slots < 1 or cap.service_s < 0:
        raise argparse.ArgumentTypeError(f"--model {spec!r}: slots must be >= 1 and the service time >= 0")
    return name, cap


def app(models: dict[str, Capacity]):
    """The Starlette app of the server (module docstring)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request):
        body = await request.json()
        name = body.get("model")
        cap = models.get(name)
        if cap is None:
            return JSONResponse({"error": {"message": f"no model {name!r}"}}, status_code=404)
        waited = await cap.serve()
        return JSONResponse({
            "id": "chatcmpl-sim", "object": "chat.completion", "model": name, "created": int(time.time()),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"SIMULATED answer of {name}"}}],
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                      "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}}, headers={"x-queue-wait-s": f"{waited:.4f}"})

    async def listing(request: Request):
        return JSONResponse({"object": "list", "data": [{"id": n, "object": "model"} for n in models]})

    async def stats(request: Request):
        return JSONResponse({n: {"served": c.served, "busy": c.busy, "waiting": c.waiting} for n, c in models.items()})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/models", listing), Route("/stats", stats)])


def serve(models: dict[str, Capacity], port: int = 0) -> None:
    """Listen on 127.0.0.1:`port` (0: a free one), print the ready line, serve until stopped."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app(models), log_level="warning", access_log=False,
                                           timeout_keep_alive=30, backlog=2048))
    print(f"ready http=http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


def start(models: list[str]) -> tuple[subprocess.Popen, str]:
    """This server in its own process; (process, base URL without /v1)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from load_test import _read_until

    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *(a for m in models for a in ("--model", m))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, _read_until(proc, "ready http=", timeout=60).split("=", 1)[1].strip()


def main(argv: list[str] | None = None) -> None:
    """Parse the models and serve."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", type=parse_model, required=True,
                    help="NAME:SLOTS:SERVICE_SECONDS (repeat per model)")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    serve(dict(args.model), args.port)


if __name__ == "__main__":
    main()
