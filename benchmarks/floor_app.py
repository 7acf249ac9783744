"""The least HTTP service in front of a rung: the "floor" arm of benchmarks/service_overhead.py.

A minimal Starlette app on uvicorn, run with the uvicorn settings `advisor serve` uses (advisor/service/launch.py:
asyncio loop, httptools when installed, no access log, log level warning, one worker in this process, same
backlog and keep-alive), whose single endpoint ``POST /v1/chat/completions`` reads the JSON body, calls advisor's
`TritonClient.generate` (one client, reused) on one rung with the prompt the service would render for the
benchmark's message (rendered once at start) and the body's ``max_tokens``, and returns ``{"text": ...}``. No
routing, no validation beyond JSON, no auth, records, metrics or costs: what is left is what any service that
puts advisor's Triton client behind HTTP must pay. It prints ``ready http=HOST:PORT`` once it accepts
connections.

    .venv/bin/python benchmarks/floor_app.py --url GRPC_ADDRESS [--rung nano-30b] [--text ...] [--port 0]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def create_app(url: str, rung: str, text: str):
    """The floor app: one POST endpoint in front of `TritonClient.generate` on `rung` at `url`."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from advisor.ladder import load_ladder
    from advisor.service.api.chat import render_prompt
    from advisor.service.api.parse import parse_request
    from advisor.triton.client import TritonClient
    from load_test import DEMO

    model = load_ladder(DEMO).rung(rung)
    prompt = render_prompt(model, parse_request({"model": rung, "messages": [{"role": "user", "content": text}]},
                                                {}))
    state = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with TritonClient(url) as client:
            state["client"] = client
            yield

    async def complete(request: Request):
        body = await request.json()
        result = await state["client"].generate(model.model_id, prompt, max_tokens=int(body["max_tokens"]))
        return JSONResponse({"text": result.text})

    return Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"])], lifespan=lifespan)


def _announce(host: str, port: int) -> None:
    """Print the ready line once the port accepts connections (no second endpoint for a health check)."""
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                print(f"ready http={host}:{port}", flush=True)
                return
        except OSError:
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="Triton's gRPC address.")
    parser.add_argument("--rung", default="nano-30b")
    parser.add_argument("--text", required=True, help="The user message whose rendered prompt is sent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port.")
    args = parser.parse_args()
    import uvicorn

    from advisor.service.launch import _has
    from advisor.triton.server import free_port

    port = args.port or free_port(args.host)
    app = create_app(args.url, args.rung, args.text)
    threading.Thread(target=_announce, args=(args.host, port), daemon=True).start()
    # the settings of advisor.service.launch._run_uvicorn, workers=1 (the app object runs in this process)
    uvicorn.run(app, host=args.host, port=port, workers=1, loop="asyncio",
                http="httptools" if _has("httptools") else "h11", log_level="warning", access_log=False,
                backlog=4096, limit_concurrency=None, timeout_keep_alive=75)


if __name__ == "__main__":
    main()
