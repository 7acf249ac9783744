"""The `openai` backend against a hostile OpenAI-compatible server on loopback: huge, endless, dripping, silent and
malformed answers, and one that echoes the API key it received. Each is a bounded attempt error (in time and
bytes) and a failover to the next rung, never an empty 200, and the key reaches neither the client, the store,
the log nor `advisor ladder check` (issue 38 cases 2, 5, 6, 7).

The server (`Hostile`) answers rung ``nano-12b`` at ``/hostile/v1`` as `Hostile.mode` says, and the other rungs
at ``/good/v1`` with a plain answer. The service is `advisor serve` with those three rungs as `openai` rungs.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
import yaml

from loopback import Loopback
from test_service import DEMO, KEY, SUITE, Service, one_task_per_class

KEY_ENV = "ADVISOR_TEST_HOSTILE_KEY"
UPSTREAM_KEY = "sk-upstream-secret-4242"
MB = 2**20
ATTEMPT_S = 3.0  #: the service's attempt_timeout_s (and the backend's time limit in the direct tests)


class Hostile:
    """A threaded HTTP server on loopback; `mode` picks how ``/hostile/v1`` answers."""

    def __init__(self):
        self.mode = "good"
        self.sent = 0  #: bytes the last hostile answer wrote before the client went away
        self.active = 0  #: hostile answers being written now (a client that left ends one at the next write)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/hostile/") and outer.mode == "leak":
                    return outer.leak(self)
                outer.send(self, 200, {"object": "list", "data": [{"id": n} for n in ("nano-12b", "nano-30b",
                                                                                      "super-120b")]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path.startswith("/hostile/"):
                    with outer.lock:
                        outer.active += 1
                    try:
                        return getattr(outer, outer.mode.replace("-", "_"))(self, body)
                    finally:
                        with outer.lock:
                            outer.active -= 1
                return outer.good(self, body)

        self.loopback = Loopback(Handler)
        self.base = self.loopback.base

    def close(self):
        self.stop.set()
        self.loopback.close()

    # ------------------------------------------------------------------------------------------- plumbing
    @staticmethod
    def send(h, status: int, payload, ctype: str = "application/json", headers: dict | None = None):
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(raw)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)

    def pour(self, h, head: bytes, piece: bytes, every_s: float = 0.0, total: int = 1 << 40, ctype="text/event-stream"):
        """Write `head`, then `piece` again and again (every `every_s`) until `total` bytes or the client leaves."""
        h.send_response(200)
        h.send_header("content-type", ctype)
        h.send_header("connection", "close")
        if total < 1 << 40:
            h.send_header("content-length", str(total))
        h.end_headers()
        self.sent = 0
        try:
            h.wfile.write(head)
            self.sent = len(head)
            while self.sent < total and not self.stop.is_set():
                h.wfile.write(piece[: total - self.sent])
                h.wfile.flush()
                self.sent += len(piece)
                if every_s:
                    time.sleep(every_s)
        except OSError:
            pass  # the client went away: what a bounded client does
        h.close_connection = True

    @staticmethod
    def completion(text: str = "hello from the good rung", calls: list | None = None) -> dict:
        message = {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}

    @staticmethod
    def sse(obj) -> bytes:
        return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"

    def chunk(self, text: str) -> bytes:
        return self.sse({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta":
                                                                                   {"content": text}}]})

    # ------------------------------------------------------------------------------------------- answers
    def good(self, h, body):
        if not body.get("stream"):
            return self.send(h, 200, self.completion())
        done = self.sse({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 5}}) + b"data: [DONE]\n\n"
        self.send(h, 200, self.chunk("hello ") + self.chunk("from the good rung") + done, "text/event-stream")

    def huge(self, h, body):  # 200 MB, streamed or not
        if body.get("stream"):
            return self.pour(h, b"", self.chunk("x" * 65536))
        self.pour(h, b'{"choices": [{"message": {"content": "', b"x" * MB, total=200 * MB, ctype="application/json")

    def endless(self, h, body):  # a chunk every 10 ms, forever
        if not body.get("stream"):
            return self.pour(h, b'{"choices": [', b" ", every_s=0.01, ctype="application/json")
        self.pour(h, b"", self.chunk("tick "), every_s=0.01)

    def drip(self, h, body):  # the head, then one byte a second
        self.pour(h, b"", b" ", every_s=1.0, ctype="text/event-stream" if body.get("stream") else "application/json")

    def silent(self, h, body):  # never a byte of the answer
        self.stop.wait(60)

    def bad_json(self, h, body):
        if body.get("stream"):
            return self.send(h, 200, self.sse(b"{not json") + b"data: [DONE]\n\n", "text/event-stream")
        self.send(h, 200, b"{not json", "application/json")

    def no_choices(self, h, body):
        if body.get("stream"):
            return self.send(h, 200, self.sse({"id": "x"}) + b"data: [DONE]\n\n", "text/event-stream")
        self.send(h, 200, {"id": "x", "object": "chat.completion"})

    def redirect(self, h, body):
        self.send(h, 302, b"", "text/plain", {"location": "http://127.0.0.1:9/elsewhere"})

    def not_sse(self, h, body):  # a stream request answered as if it were not one
        self.send(h, 200, self.completion("plain JSON"))

    def big_args(self, h, body):  # one tool call with 2 MB of arguments
        args = json.dumps({"path": "x" * (2 * MB)})
        call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": args}}
        if not body.get("stream"):
            return self.send(h, 200, self.completion("", [call]))
        piece = self.sse({"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]},
                                                  "finish_reason": "tool_calls"}]})
        self.send(h, 200, piece + b"data: [DONE]\n\n", "text/event-stream")

    def echo(self, h, body):  # a 200 whose content echoes the key it received (split across stream chunks)
        key = h.headers.get("authorization", "").split(" ", 1)[-1]
        text = f"your key is {key}, keep it safe"
        if not body.get("stream"):
            return self.send(h, 200, self.completion(text))
        cut = text.index(key) + len(key) // 2
        done = self.sse({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 5}}) + b"data: [DONE]\n\n"
        self.send(h, 200, self.chunk(text[:cut]) + self.chunk(text[cut:]) + done, "text/event-stream")

    def leak(self, h, body=None):  # a 500 that echoes the Authorization header it received
        self.send(h, 500, {"error": {"message": f"upstream failure for {h.headers.get('authorization')}"}})


@pytest.fixture(scope="module")
def hostile():
    server = Hostile()
    yield server
    server.close()


def hostile_ladder(path, base: str):
    """The demo ladder's rungs as `openai` rungs (named as in the demo ladder, so a demo probe trains the router):
    nano-12b at the hostile path, the others at the good one."""
    demo = yaml.safe_load(DEMO.read_text())
    rungs = []
    for r in demo["rungs"]:
        r = {k: v for k, v in r.items() if k != "standin"}
        where = "hostile" if r["name"] == "nano-12b" else "good"
        r.update(triton_model=r["name"], backend="openai", url=f"{base}/{where}/v1", api_key_env=KEY_ENV)
        rungs.append(r)
    path.write_text(yaml.safe_dump({"version": 1, "name": "demo", "simulated": False, "rungs": rungs}))
    return path


# ------------------------------------------------------------------------------------------- the backend alone
MODES = ["huge", "endless", "drip", "silent", "bad-json", "no-choices", "redirect", "big-args", "leak"]


def _backend(hostile):
    from advisor.backends.openai import OpenAIBackend

    return OpenAIBackend(f"{hostile.base}/hostile/v1", rung="nano-12b", api_key_env=KEY_ENV, timeout_s=ATTEMPT_S,
                         retries=0)


async def _stream_text(backend) -> str:
    return "".join([p.text async for p in backend.generate_stream("m", "hi", max_tokens=8, timeout_s=ATTEMPT_S)])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("mode", MODES + ["not-sse"])
def test_each_hostile_answer_is_a_bounded_error_without_the_key(hostile, mode, stream, monkeypatch):
    from advisor.errors import BackendError

    if mode == "not-sse" and not stream:
        pytest.skip("a plain request answered with plain JSON is the ordinary case")
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    hostile.mode = mode
    backend = _backend(hostile)
    started = time.monotonic()
    call = _stream_text(backend) if stream else backend.generate("m", "hi", max_tokens=8, timeout_s=ATTEMPT_S)
    with pytest.raises(BackendError) as err:
        asyncio.run(call)
    took = time.monotonic() - started
    message = str(err.value)
    assert took < ATTEMPT_S + 1.5, (mode, took, message)
    assert UPSTREAM_KEY not in message and "rung 'nano-12b'" in message, message
    if mode == "huge":
        assert "max_response_bytes" in message and hostile.sent < 40 * MB, (hostile.sent, message)
    if mode in ("endless", "drip", "silent"):
        assert "timed out" in message
    if mode == "big-args":
        assert "max_tool_arguments_bytes" in message or "max_response_bytes" not in message, message


# ------------------------------------------------------------------------------------------- through the service
@pytest.fixture(scope="module")
def hostile_service(tmp_path_factory, triton_server, hostile):
    """`advisor serve` on the hostile ladder: class chat starts on nano-12b; a failed attempt fails over above
    (load-aware routing off: the slow hostile answers must not move later requests off nano-12b)."""
    import os

    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("hostile")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=tmp / "p.duckdb",
                          replicas=1, conditions=("baseline",), tasks=one_task_per_class()))
    shutil.copy(tmp / "p.duckdb", tmp / "live.duckdb")
    (tmp / "keys.txt").write_text(f"full {KEY}\n")
    (tmp / "service.yaml").write_text(f"""version: 1
default_class: chat
classes:
  chat: {{chain: [nano-12b], verifier: none}}
sessions: {{enabled: false}}
limits: {{attempt_timeout_s: {ATTEMPT_S}, deadline_s: 12}}
load: {{enabled: false}}
""")
    ladder = hostile_ladder(tmp / "hostile.yaml", hostile.base)
    os.environ[KEY_ENV] = UPSTREAM_KEY  # the service inherits the key variable
    try:
        svc = Service(["--ladder", str(ladder), "--keys", str(tmp / "keys.txt"), "--config", str(tmp / "service.yaml"),
                       "--ingest-every", "0"], tmp / "live.duckdb")
    finally:
        os.environ.pop(KEY_ENV, None)
    svc.ladder = ladder
    yield svc
    hostile.mode = "good"
    assert svc.stop() == 0, "".join(svc.lines)


def _post(svc, body: dict, timeout: float = 30) -> httpx.Response:
    return httpx.post(svc.base + "/v1/chat/completions", json=body, timeout=timeout,
                      headers={"authorization": f"Bearer {KEY}"})


MSGS = [{"role": "user", "content": "Say hello."}]


@pytest.mark.parametrize("mode", ["huge", "drip", "silent", "bad-json", "no-choices", "redirect", "big-args", "leak"])
@pytest.mark.triton
@pytest.mark.slow
def test_a_hostile_rung_fails_over_with_its_error_stored(hostile_service, hostile, mode):
    hostile.mode = mode
    started = time.monotonic()
    answer = _post(hostile_service, {"model": "auto", "messages": MSGS})
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-advisor-rung"] == "nano-30b" and answer.headers["x-advisor-failovers"] == "1"
    assert answer.json()["choices"][0]["message"]["content"] == "hello from the good rung"
    assert took < ATTEMPT_S + 4, took
    _, attempts = hostile_service.records(answer.headers["x-advisor-decision-id"])
    assert attempts[0]["rung"] == "nano-12b" and attempts[0]["error"], attempts[0]
    assert UPSTREAM_KEY not in json.dumps(attempts, default=str)


@pytest.mark.parametrize("mode", ["bad-json", "no-choices", "redirect", "not-sse", "big-args", "leak", "silent"])
@pytest.mark.triton
@pytest.mark.slow
def test_a_hostile_rung_fails_a_stream_over_before_its_first_chunk(hostile_service, hostile, mode):
    hostile.mode = mode
    with httpx.stream("POST", hostile_service.base + "/v1/chat/completions", timeout=30,
                      json={"model": "auto", "messages": MSGS, "stream": True},
                      headers={"authorization": f"Bearer {KEY}"}) as answer:
        text = "".join(answer.iter_text())
    assert answer.status_code == 200 and answer.headers["x-advisor-rung"] == "nano-30b", text
    assert "hello from the good rung" in "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        for line in text.splitlines() if line.startswith("data: {") and '"choices"' in line)
    assert UPSTREAM_KEY not in text


@pytest.mark.parametrize("mode", ["huge", "endless", "drip"])
@pytest.mark.triton
@pytest.mark.slow
def test_a_stream_that_never_ends_is_cut_at_the_attempt_limit(hostile_service, hostile, mode):
    hostile.mode = mode
    started = time.monotonic()
    with httpx.stream("POST", hostile_service.base + "/v1/chat/completions", timeout=30,
                      json={"model": "nano-12b", "messages": MSGS, "stream": True},
                      headers={"authorization": f"Bearer {KEY}"}) as answer:
        size = sum(len(piece) for piece in answer.iter_bytes())
    took = time.monotonic() - started
    assert took < ATTEMPT_S + 4 and size < 16 * MB, (took, size)


@pytest.mark.triton
@pytest.mark.slow
def test_the_upstream_key_and_urls_stay_out_of_the_503_the_log_and_ladder_check(hostile_service, hostile,
                                                                               monkeypatch, capsys):
    from advisor.cli import main

    hostile.mode = "leak"
    refused = _post(hostile_service, {"model": "nano-12b", "messages": MSGS})  # pinned: no failover
    assert refused.status_code == 503, refused.text
    message = refused.json()["error"]["message"]
    assert UPSTREAM_KEY not in message and hostile.base not in message and "nano-12b" in message, message
    assert "[redacted]" in message
    _, attempts = hostile_service.records(refused.headers["x-advisor-decision-id"])
    assert UPSTREAM_KEY not in str(attempts[0]["error"]) and "[redacted]" in attempts[0]["error"]
    log = "".join(hostile_service.lines)
    assert UPSTREAM_KEY not in log and "Triton at" not in log, log[-2000:]

    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    assert main(["ladder", "check", str(hostile_service.ladder), "--json"]) != 0
    out = capsys.readouterr()
    assert UPSTREAM_KEY not in out.out + out.err and "[redacted]" in out.out


@pytest.mark.slow
def test_the_probe_stores_upstream_errors_without_the_key(hostile, tmp_path, monkeypatch):
    from advisor.probe import ProbeConfig, run_probe
    from advisor.store import Store

    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    hostile.mode = "leak"
    ladder = hostile_ladder(tmp_path / "hostile.yaml", hostile.base)
    run_probe(ProbeConfig(ladder_path=ladder, suite_path=SUITE, store_path=tmp_path / "s.duckdb", replicas=1,
                          conditions=("baseline",), tasks=one_task_per_class()[:1], client_timeout_s=10))
    with Store.open(tmp_path / "s.duckdb", read_only=True) as s:
        errors = [r["error"] for r in s.query("SELECT error FROM runs WHERE rung = 'nano-12b'")]
    assert errors and all(e and UPSTREAM_KEY not in e and "[redacted]" in e for e in errors), errors


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_key_echoed_inside_a_200_never_passes(hostile, stream, monkeypatch):
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    hostile.mode = "echo"
    backend = _backend(hostile)

    async def go():
        try:
            if stream:
                return await _stream_text(backend)
            return (await backend.generate("m", "hi", max_tokens=8, timeout_s=ATTEMPT_S)).text
        finally:
            await backend.close()

    text = asyncio.run(go())
    assert UPSTREAM_KEY not in text and UPSTREAM_KEY[:12] not in text, text
    assert text == "your key is [redacted], keep it safe"


@pytest.fixture
def own_hostile():
    """A server of this test's own (the module's may still be writing answers other tests left)."""
    server = Hostile()
    yield server
    server.close()


@pytest.mark.parametrize("mode", ["drip", "endless"])
def test_a_timed_out_call_leaves_no_upstream_connection_open(own_hostile, mode, monkeypatch):
    """Five calls that time out on a stalled upstream: each connection is closed (the upstream sees the client
    leave at its next write), so the pool never fills with sockets whose body was never read."""
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    hostile = own_hostile
    hostile.mode = mode
    from advisor.backends.openai import OpenAIBackend

    backend = OpenAIBackend(f"{hostile.base}/hostile/v1", rung="nano-12b", api_key_env=KEY_ENV, timeout_s=1.0,
                            retries=0)

    async def go():
        from advisor.backends import BackendError

        try:
            for _ in range(5):
                with pytest.raises(BackendError):
                    await backend.generate("m", "hi", max_tokens=8, timeout_s=1.0)
            await asyncio.sleep(0.2)
            return len(backend._client()._transport._pool.connections), backend.connections()
        finally:
            await backend.close()

    pooled, seen = asyncio.run(go())
    assert pooled == 0, f"{pooled} connections left in the pool"
    assert seen == (0, 0)  # what /metrics shows (advisor_upstream_connections)
    deadline = time.monotonic() + 10
    while hostile.active and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hostile.active == 0, f"{hostile.active} upstream answers still being written to a client that left"


def test_the_pool_reports_its_open_and_busy_connections(own_hostile, monkeypatch):
    """`connections()` (the service's ``advisor_upstream_connections``): one kept-alive connection after a good
    call, none busy; a `BackendPool` reports it under the rung's name (nothing before its first client)."""
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    from advisor.backends import BackendPool
    from advisor.ladder import Model

    rung = Model.model_validate({
        "name": "hosted", "hf_id": "example/hosted", "params_total_b": 1, "triton_model": "m", "context_length": 8192,
        "tool_call_format": "hermes", "backend": "openai", "url": f"{own_hostile.base}/hostile/v1",
        "api_key_env": KEY_ENV, "price": {"basis": "tokens", "usd_per_m_input": 0.1, "usd_per_m_output": 0.4,
                                          "source": "x", "as_of": "2026-12"}})

    async def go():
        async with BackendPool() as pool:
            before = pool.connections()
            await pool(rung).generate("m", "hi", max_tokens=8, timeout_s=5.0)
            return before, pool.connections()

    before, after = asyncio.run(go())
    assert before == {} and after == {"hosted": (1, 0)}
