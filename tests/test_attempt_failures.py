"""Failures through the seam: an `openai` rung that is too slow is a ``timeout`` attempt (recorded, failed over and
counted as one), on the buffered and the streamed path, against real HTTP servers on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"


class _Endpoint:
    """An OpenAI-compatible endpoint on loopback that waits `delay_s` before each chat completion."""

    def __init__(self, delay_s: float):
        delay = delay_s

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: bytes, kind: str = "application/json"):
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(json.dumps({"data": []}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                time.sleep(delay)
                usage = {"prompt_tokens": 7, "completion_tokens": 1}
                if body.get("stream"):
                    chunks = [{"choices": [{"delta": {"content": "hello"}, "finish_reason": "stop"}]},
                              {"choices": [], "usage": usage}]
                    self._send("".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n",
                               "text/event-stream")
                else:
                    self._send(json.dumps({"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}],
                                           "usage": usage}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoints():
    slow, fast = _Endpoint(20.0), _Endpoint(0.0)
    yield slow, fast
    slow.close()
    fast.close()


def _runtime(tmp_path, slow, fast):
    """A service runtime whose first demo rung is the slow endpoint and the others the fast one (openai rungs)."""
    from advisor.backends import BackendPool
    from advisor.ladder import load_ladder
    from advisor.service.process.config import load_config
    from advisor.service.records.metrics import Metrics

    demo = yaml.safe_load(DEMO.read_text())
    rungs = []
    for i, r in enumerate(demo["rungs"]):
        r = {k: v for k, v in r.items() if k != "standin"}
        rungs.append({**r, "triton_model": r["name"], "backend": "openai", "url": (slow if i == 0 else fast).url})
    (tmp_path / "ladder.yaml").write_text(yaml.safe_dump({"version": 1, "name": "loopback", "simulated": False,
                                                          "rungs": rungs}))
    (tmp_path / "service.yaml").write_text("version: 1\nlimits: {deadline_s: 30, attempt_timeout_s: 2}\n")
    ladder = load_ladder(tmp_path / "ladder.yaml")
    return SimpleNamespace(ladder=ladder, rungs={r.name: r for r in ladder.rungs}, metrics=Metrics(),
                           config=load_config(tmp_path / "service.yaml", ladder), client_for=BackendPool(ladder),
                           simulated=lambda name: False, settings=SimpleNamespace(served_by="loopback"))


def _plan(rt):
    from advisor.service.routing.attempts import RequestPlan

    names = [r.name for r in rt.ladder.rungs]
    return RequestPlan("dec_test", "hi", None, "given", "cascade", "single", names[:2], 1, None, names)


def _assert_timeout_then_failover(rt, attempts):
    slow = rt.ladder.rungs[0].name
    assert attempts[0].rung == slow and attempts[0].error.startswith("timeout: ") and attempts[0].failover
    assert attempts[0].latency_s < 10, "the attempt's time limit, not the server, ended it"
    text = rt.metrics.render()[0].decode()
    assert f'advisor_failovers_total{{reason="timeout",rung="{slow}"}} 1.0' in text
    assert 'reason="down"' not in text


def test_an_openai_rung_that_times_out_is_a_timeout_attempt(tmp_path, endpoints):
    from advisor.service.routing.dispatch import run
    from advisor.service.api.parse import parse_request

    rt = _runtime(tmp_path, *endpoints)
    req = parse_request({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, {})

    async def go():
        try:
            return await run(rt, req, _plan(rt))
        finally:
            await rt.client_for.close()

    out = asyncio.run(go())
    assert out.status == 200 and out.rung == rt.ladder.rungs[1].name and out.reply.content == "hello"
    _assert_timeout_then_failover(rt, out.attempts)
    assert out.attempts[1].error is None and out.attempts[1].input_tokens == 7


def test_an_openai_rung_that_times_out_before_its_first_token_is_a_timeout_attempt(tmp_path, endpoints):
    from advisor.service.routing.attempts import Outcome
    from advisor.service.api.parse import parse_request
    from advisor.service.http.streaming import open_stream

    rt = _runtime(tmp_path, *endpoints)
    req = parse_request({"model": "auto", "stream": True, "messages": [{"role": "user", "content": "hi"}]}, {})
    plan = _plan(rt)
    out = Outcome(plan, [])

    async def go():
        try:
            opened = await open_stream(rt, req, plan, out, time.monotonic() + 30)
            await opened[2].aclose()
            return opened
        finally:
            await rt.client_for.close()

    opened = asyncio.run(go())
    assert opened[0] == rt.ladder.rungs[1].name and opened[1].text == "hello"
    _assert_timeout_then_failover(rt, out.attempts)
