"""Failures through the seam: an `openai` rung that is too slow is a ``timeout`` attempt (recorded, failed over and
counted as one), on the buffered and the streamed path, against real HTTP servers on loopback."""

from __future__ import annotations

import asyncio
import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from loopback import Loopback

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"


class _Endpoint(Loopback):
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

        super().__init__(Handler)


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


def _buffered(rt):
    """The outcome of a buffered ``hi`` through the service's walk of `_plan`."""
    from advisor.service.api.parse import parse_request
    from advisor.service.routing.dispatch import run

    req = parse_request({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, {})

    async def go():
        try:
            return await run(rt, req, _plan(rt))
        finally:
            await rt.client_for.close()

    return asyncio.run(go())


def _assert_timeout_then_failover(rt, attempts):
    slow = rt.ladder.rungs[0].name
    assert attempts[0].rung == slow and attempts[0].error.startswith("timeout: ") and attempts[0].failover
    assert attempts[0].latency_s < 10, "the attempt's time limit, not the server, ended it"
    text = rt.metrics.render()[0].decode()
    assert f'advisor_failovers_total{{reason="timeout",rung="{slow}"}} 1.0' in text
    assert 'reason="down"' not in text


def test_an_openai_rung_that_times_out_is_a_timeout_attempt(tmp_path, endpoints):
    rt = _runtime(tmp_path, *endpoints)
    out = _buffered(rt)
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


class _Fixed(Loopback):
    """An OpenAI-compatible endpoint that answers every POST with the same status, type and body; with `promised`
    the body's announced length is longer than what is sent, and the connection ends mid-body."""

    def __init__(self, status: int, kind: str, body: bytes, promised: int | None = None):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["content-length"]))
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(promised or len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

        super().__init__(Handler)


def _breaking() -> _Fixed:
    """A stream that sends one token, then its connection ends mid-body."""
    piece = f"data: {json.dumps({'choices': [{'delta': {'content': 'hel'}, 'finish_reason': None}]})}\n\n"
    return _Fixed(200, "text/event-stream", piece.encode(), promised=100000)


def _refusing() -> _Fixed:
    """Every chat completion's key refused (401, as the API answers it)."""
    return _Fixed(401, "application/json", json.dumps({"error": {
        "message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}).encode())


def test_a_rung_that_refuses_the_key_is_failed_over_and_its_record_keeps_the_kind(tmp_path, endpoints):
    """A refused key is a failover (the metric's word: ``down``), and the attempt's record says how the rung
    failed: ``down: key refused: ...`` (the seam's kind, not only the failover's word)."""
    with _refusing() as refusing:
        rt = _runtime(tmp_path, refusing, endpoints[1])
        out = _buffered(rt)
    first = rt.ladder.rungs[0].name
    assert out.status == 200 and out.rung == rt.ladder.rungs[1].name
    assert out.attempts[0].rung == first and out.attempts[0].failover
    assert out.attempts[0].error.startswith("down: key refused: "), out.attempts[0].error
    assert f'advisor_failovers_total{{reason="down",rung="{first}"}} 1.0' in rt.metrics.render()[0].decode()


def test_a_stream_is_recorded_and_counted_as_every_attempt_and_a_break_mid_stream_too(tmp_path, endpoints):
    """A relayed stream's attempt has its tokens and cost, its call and its result counted (as a buffered
    attempt's are); a rung whose stream breaks after its first token is a ``stream broke`` attempt that keeps the
    backend's kind of failure (a connection ended mid-body: ``down``), the client gets an error event, and the
    failed call is counted."""
    from advisor.service.api.parse import parse_request
    from advisor.service.http.streaming import open_stream, relay
    from advisor.service.routing.attempts import Outcome

    with _breaking() as breaking:
        rt = _runtime(tmp_path, breaking, endpoints[1])
        req = parse_request({"model": "auto", "stream": True, "messages": [{"role": "user", "content": "hi"}]}, {})
        first, second = (r.name for r in rt.ladder.rungs[:2])

        async def streamed(rung: str):
            plan = _plan(rt)
            plan.chain, plan.mode = [rung], "pinned"
            out = Outcome(plan, [])
            opened = await open_stream(rt, req, plan, out, time.monotonic() + 30)
            events = [e async for e in relay(rt, req, out, opened, "chatcmpl-x", 0)]
            await opened[2].aclose()
            return out, b"".join(events).decode()

        async def go():
            try:
                return await streamed(second), await streamed(first)
            finally:
                await rt.client_for.close()

        (whole, sent), (broken, cut) = asyncio.run(go())
    done = whole.attempts[-1]
    assert (whole.status, whole.rung, whole.verdict, whole.reply.content) == (200, second, "unverified", "hello")
    assert done.error is None and done.input_tokens == 7 and done.cost_usd > 0 and '"hello"' in sent
    assert broken.status == 502 and broken.attempts[-1].error.startswith("stream broke: down: ") and "rung_failed" in cut
    text = rt.metrics.render()[0].decode()
    assert f'advisor_attempts_total{{result="error",rung="{first}",simulated="false"}} 1.0' in text, text
    assert f'rung="{second}"' in text and "unverified" in text


def test_an_answer_whose_connection_ends_before_its_body_is_a_down_attempt_and_failed_over(tmp_path, endpoints):
    with _breaking() as breaking:
        rt = _runtime(tmp_path, breaking, endpoints[1])
        out = _buffered(rt)
    assert out.status == 200 and out.rung == rt.ladder.rungs[1].name and out.reply.content == "hello"
    assert out.attempts[0].error.startswith("down: ") and "broke off its answer" in out.attempts[0].error
    assert out.attempts[0].failover
