"""Graceful shutdown of `advisor serve`: SIGTERM while requests are in flight drains them, refuses new ones,
exits 0, and every completed request's decision and attempt reaches the store.

The service starts its own embedded Triton with the demo ladder whose stand-ins wait a simulated latency per
generation (so requests are certainly in flight when the signal comes); the router is trained at startup from
a small probe of the session's Triton stored in a real DuckDB file.
"""

from __future__ import annotations

import concurrent.futures
import signal
import time
from pathlib import Path

import pytest
import yaml

from advisor.store import Store

pytestmark = [pytest.mark.triton, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "suites" / "example" / "suite.yaml"
LATENCY_MS = 2500
IN_FLIGHT = 6


@pytest.fixture
def slow_service(tmp_path, triton_server):
    """`advisor serve` on an embedded Triton whose rungs take LATENCY_MS per generation, at most IN_FLIGHT
    requests in flight."""
    from advisor.probe import ProbeConfig, run_probe
    from test_service import Service, one_task_per_class

    data = yaml.safe_load((REPO / "ladders" / "demo.yaml").read_text())
    for model in data["rungs"]:
        model["standin"]["latency_ms"] = LATENCY_MS
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(data))
    store = tmp_path / "drain.duckdb"
    run_probe(ProbeConfig(ladder_path=REPO / "ladders" / "demo.yaml", suite_path=SUITE, url=triton_server.grpc_url,
                          store_path=store, replicas=1, conditions=("baseline",), tasks=one_task_per_class()))
    (tmp_path / "keys.txt").write_text("drain sk-drain\n")
    (tmp_path / "service.yaml").write_text(f"version: 1\nlimits: {{concurrency: {IN_FLIGHT}}}\n")
    svc = Service(["--ladder", str(tmp_path / "slow.yaml"), "--keys", str(tmp_path / "keys.txt"),
                   "--config", str(tmp_path / "service.yaml"), "--ingest-every", "0"], store)
    yield svc
    if svc.proc.poll() is None:  # a failed test: do not leave the service (and its Triton) behind
        svc.proc.kill()
        svc.proc.wait(timeout=30)


def _in_flight(base: str) -> float:
    import httpx

    text = httpx.get(base + "/metrics", headers={"authorization": "Bearer sk-drain"}, timeout=5).text
    line = next(ln for ln in text.splitlines() if ln.startswith("advisor_in_flight_requests"))
    return float(line.split()[-1])


def test_sigterm_drains_in_flight_requests_refuses_new_ones_and_records_all(slow_service):
    import httpx

    svc = slow_service
    client = svc.client("sk-drain")

    def one(i: int):
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": f"Request {i}: summarise the release notes."}])
        return raw.http_response.status_code, raw.headers["x-advisor-decision-id"], raw.parse(), time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT) as pool:
        futures = [pool.submit(one, i) for i in range(IN_FLIGHT)]
        end = time.monotonic() + LATENCY_MS / 1000
        while _in_flight(svc.base) < IN_FLIGHT:
            assert time.monotonic() < end, "the requests should all be in flight within one generation"
            time.sleep(0.05)
        assert not any(f.done() for f in futures)
        svc.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        time.sleep(0.5)
        # a new request after the signal is refused (the listening socket is closed) or answered 503
        try:
            late = httpx.post(svc.base + "/v1/chat/completions", headers={"Authorization": "Bearer sk-drain"},
                              json={"model": "auto", "messages": [{"role": "user", "content": "late"}]}, timeout=10)
            assert late.status_code == 503, late.text
        except httpx.TransportError:
            pass
        results = [f.result(timeout=60) for f in futures]
    assert all(status == 200 and reply.choices[0].message.content for status, _, reply, _ in results)
    assert all(done > signalled for *_, done in results)  # in flight at the signal, answered after it: drained
    assert svc.proc.wait(timeout=90) == 0, "".join(svc.lines)
    svc._drain.join(timeout=5)
    stopped = svc.line_with("stopped;")
    ids = [decision_id for _, decision_id, _, _ in results]
    with Store.open(svc.store, read_only=True) as s:
        rows = s.query("SELECT decision_id, status, http_status, attempts FROM routing_decisions")
        attempts = s.query("SELECT decision_id, count(*) AS n FROM live_outcomes GROUP BY decision_id")
    assert sorted(r["decision_id"] for r in rows) == sorted(ids), "every completed request, and nothing else"
    assert all(r["status"] == "ok" and r["http_status"] == 200 for r in rows)
    assert {a["decision_id"]: a["n"] for a in attempts} == {r["decision_id"]: r["attempts"] for r in rows}
    assert f"{IN_FLIGHT} decisions" in stopped
    assert not list(svc.spool.glob("*.*")), "every segment was ingested"


def test_a_stream_reaches_the_client_while_the_rung_generates(slow_service):
    """Streamed from Triton's decoupled stream as parts arrive, not buffered to the end: on stand-ins that spread
    LATENCY_MS over their parts, the content chunks reach the client spread over that time."""
    import json

    import httpx

    body = {"model": "nano-30b", "stream": True, "messages": [{"role": "user", "content": "Tell me a story."}]}
    arrivals = []
    with httpx.stream("POST", slow_service.base + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": "Bearer sk-drain"}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    arrivals.append(time.monotonic())
    assert len(arrivals) >= 3
    spread = arrivals[-1] - arrivals[0]
    assert spread > 0.3 * LATENCY_MS / 1000, f"{len(arrivals)} content chunks arrived within {spread:.3f} s"
    assert slow_service.stop() == 0


def test_past_the_concurrency_limit_requests_get_429_at_once(slow_service):
    """IN_FLIGHT slow requests fill the worker; the ones past the limit are refused with 429 and retry-after at
    once (not queued behind the slow ones), and the ones inside it are answered."""
    import openai

    client = slow_service.client("sk-drain")

    def one(i: int):
        started = time.monotonic()
        try:
            client.chat.completions.create(model="auto", messages=[{"role": "user", "content": f"Request {i}"}])
            return 200, None, time.monotonic() - started
        except openai.RateLimitError as exc:
            return exc.status_code, exc.response.headers.get("retry-after"), time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT + 2) as pool:
        first = [pool.submit(one, i) for i in range(IN_FLIGHT)]
        end = time.monotonic() + LATENCY_MS / 1000
        while _in_flight(slow_service.base) < IN_FLIGHT:
            assert time.monotonic() < end, "the requests should all be in flight within one generation"
            time.sleep(0.05)
        past = [pool.submit(one, IN_FLIGHT + i) for i in range(2)]
        refused = [f.result(timeout=60) for f in past]
        answered = [f.result(timeout=60) for f in first]
    assert [(status, retry) for status, retry, _ in refused] == [(429, "1"), (429, "1")]
    assert all(took < LATENCY_MS / 2000 for *_, took in refused), refused
    assert [status for status, *_ in answered] == [200] * IN_FLIGHT
    assert slow_service.stop() == 0


def test_a_client_that_leaves_mid_stream_is_recorded_and_frees_its_slot(slow_service):
    """A client that closes the connection after the first content chunk: the service stops relaying, frees the
    request's in-flight slot and records the request as one the client left (HTTP status 499)."""
    import json

    import httpx

    body = {"model": "nano-30b", "stream": True, "messages": [{"role": "user", "content": "Tell me a long story."}]}
    with httpx.stream("POST", slow_service.base + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": "Bearer sk-drain"}) as resp:
        decision_id = resp.headers["x-advisor-decision-id"]
        for line in resp.iter_lines():
            if line.startswith("data: {") and (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("content"):
                break  # leave after the first content chunk: the context closes the connection
    end = time.monotonic() + LATENCY_MS / 1000 + 5
    while _in_flight(slow_service.base) > 0:
        assert time.monotonic() < end, "the request's slot was not freed after the client left"
        time.sleep(0.05)
    assert slow_service.stop() == 0
    with Store.open(slow_service.store, read_only=True) as s:
        rows = s.query("SELECT decision_id, status, http_status FROM routing_decisions")
        attempts = s.query("SELECT error FROM live_outcomes")
    assert [(r["decision_id"], r["status"], r["http_status"]) for r in rows] == [(decision_id, "error", 499)]
    assert [a["error"] for a in attempts] == ["client disconnected"]
