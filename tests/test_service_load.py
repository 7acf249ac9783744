"""Load as a term in the rung choice (`advisor.service.routing.load`): the per-rung wait estimate, the chain move, and the
real service in front of a finite-capacity stand-in (benchmarks/load_capacity.py, SIMULATED): a rung whose slots
are full sends a deadline-bound request to the next rung; an idle ladder decides as without load-awareness."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.service.routing.load import LoadBoard, RungObserver, apply, load_headers, triton_waits

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import load_capacity  # noqa: E402
import load_routing  # noqa: E402
from load_test import KEY, stop  # noqa: E402


def test_an_observer_sees_no_wait_when_idle_and_the_queue_when_calls_pile_up():
    obs = RungObserver()
    assert obs.wait_s(5.0) == 0.0  # nothing seen yet
    for _ in range(10):
        obs.done.append((time.monotonic(), 0.2))
    assert obs.service_s() == 0.2 and obs.wait_s(5.0) == 0.0
    token = obs.start()
    t0, n = obs.started[token]
    obs.started[token] = (t0 - 1.0, n)  # a call in flight for a second already: 0.8 s of it was waiting
    assert obs.wait_s(5.0) == pytest.approx(0.8, abs=0.01)
    obs.end(token)
    assert not obs.started and obs.wait_s(5.0) == 0.0  # its latency is recent but the median is still 0.2


def test_calls_in_flight_past_the_slots_seen_give_a_wait_at_once():
    obs = RungObserver()
    obs.service = 0.5
    tokens = [obs.start(), obs.start()]
    for t in tokens:
        obs.end(t)  # two at once, both served at about the service time: two slots
    assert obs.slots == 2 and obs.queue_wait_s() == 0.0
    for _ in range(3):
        obs.start()
    assert obs.queue_wait_s() == pytest.approx((3 + 1 - 2) / 2 * 0.5)  # a call sent now: one service time


TRITON = {
    'nv_inference_pending_request_count{model="standin_nano_12b",version="1"}': 3.0,
    'nv_inference_queue_duration_us{model="standin_nano_12b",version="1"}': 9_000_000.0,
    'nv_inference_request_success{model="standin_nano_12b",version="1"}': 20.0,
    'nv_inference_pending_request_count{model="standin_nano_30b",version="1"}': 0.0,
    'nv_inference_queue_duration_us{model="standin_nano_30b",version="1"}': 5_000_000.0,
    'nv_inference_request_success{model="standin_nano_30b",version="1"}': 50.0,
    'vllm:num_requests_waiting{model_name="big"}': 2.0,
    'vllm:time_to_first_token_seconds_sum{model_name="big"}': 12.0,
    'vllm:time_to_first_token_seconds_count{model_name="big"}': 8.0,
}


def test_triton_and_vllm_metrics_give_the_recent_queue_time_while_requests_wait():
    before = {k: v / 2 if "pending" not in k and "waiting" not in k else 0.0 for k, v in TRITON.items()}
    waits = triton_waits(TRITON, before)
    assert waits["standin_nano_12b"] == pytest.approx(4.5 / 10)  # 4.5 s of queue over 10 requests since then
    assert waits["standin_nano_30b"] == 0.0  # nothing pending: no wait, whatever its past
    assert waits["big"] == pytest.approx(6.0 / 4)  # vLLM: mean time to first token while requests wait


def _rt(waits: dict[str, float], enabled: bool = True):
    metrics = SimpleNamespace(moves=[], load_moves="moves", expected_wait="wait")
    metrics.child = lambda metric, *labels: SimpleNamespace(inc=lambda: metrics.moves.append(labels),
                                                            set=lambda v: None)
    rungs = [SimpleNamespace(name=n, backend="openai") for n in ("small", "medium", "large")]
    router = SimpleNamespace(rung_names=["small", "medium", "large"],
                             rungs=[SimpleNamespace(latency_s=0.2)] * 3)
    rt = SimpleNamespace(config=SimpleNamespace(load=SimpleNamespace(enabled=enabled, poll_interval_s=1.0,
                                                                     window_s=5.0, min_wait_s=0.05),
                                                limits=SimpleNamespace(attempt_timeout_s=30.0)),
                         ladder=SimpleNamespace(rungs=rungs), router=router, metrics=metrics)
    rt.load_board = LoadBoard(rt, rt.config.load) if enabled else None
    if rt.load_board is not None:
        rt.load_board.waits = waits
    return rt


def _plan(chain, mode="single"):
    return SimpleNamespace(chain=list(chain), mode=mode, allowed=["small", "medium", "large"], explanation={},
                           policy="router:x", session=None)


def _req(max_latency_s=None):
    return SimpleNamespace(advisor=SimpleNamespace(max_latency_s=max_latency_s))


def test_a_first_rung_whose_wait_breaks_the_deadline_is_passed_over():
    rt = _rt({"small": 2.0, "medium": 0.0, "large": 0.0})
    plan = _plan(["small"])
    apply(rt, _req(1.0), plan)
    assert plan.chain == ["medium"] and rt.metrics.moves == [("small", "medium")]
    assert plan.explanation["load"]["moved"] == "small->medium"
    assert "expected wait 2.00s + service 0.20s > deadline 1.00s" in load_headers(plan)["x-advisor-load"]
    chain = _plan(["small", "medium", "large"], "escalate")
    apply(_rt({"small": 2.0, "medium": 5.0, "large": 0.0}), _req(1.0), chain)
    assert chain.chain == ["large", "small", "medium"]  # the ones that cannot meet it are demoted, in order


def test_no_move_within_the_deadline_nor_when_nothing_meets_it():
    plan = _plan(["small"])
    apply(_rt({"small": 0.5}), _req(1.0), plan)  # 0.5 + 0.2 <= 1.0
    assert plan.chain == ["small"] and "moved" not in plan.explanation["load"]
    plan = _plan(["small"])
    apply(_rt({"small": 3.0, "medium": 3.0, "large": 3.0}), _req(1.0), plan)
    assert plan.chain == ["small"] and "no allowed rung meets" in plan.explanation["load"]["kept"]
    plan = _plan(["small"])
    apply(_rt({"small": 3.0}), _req(None), plan)  # no preference: the attempt limit (30 s) is the deadline
    assert plan.chain == ["small"]


def test_an_idle_ladder_or_the_off_switch_leaves_the_decision_as_it_was():
    for rt in (_rt({"small": 0.0, "medium": 0.0, "large": 0.0}), _rt({"small": 9.0}, enabled=False)):
        plan = _plan(["small", "medium"], "escalate")
        apply(rt, _req(0.1), plan)
        assert plan.chain == ["small", "medium"] and plan.policy == "router:x" and not rt.metrics.moves


@pytest.mark.triton
def test_the_poller_reads_the_real_triton_metrics_endpoint(triton_server):
    from advisor.service.routing.load import _scrape

    parsed = asyncio.run(_scrape(triton_server.metrics_url))
    assert parsed and any(k.startswith("nv_inference_pending_request_count") for k in parsed)
    assert all(w == 0.0 for w in triton_waits(parsed, parsed).values())  # idle: nothing pending


# --------------------------------------------------------------------------------------- the real service
@pytest.fixture(scope="module")
def ladder_and_router(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("load")
    cap, base = load_capacity.start(["small:1:0.4", "medium:4:0.3", "large:8:0.5"])
    try:
        yield tmp, load_routing.write_ladder(tmp / "ladder.yaml", base), load_routing.write_router(tmp / "r.json")
    finally:
        cap.terminate()
        cap.wait(30)


def _ask(base: str, model: str = "auto", max_latency_s: float | None = None, text: str = "hello"):
    import httpx

    prefs = {"value_usd": load_routing.VALUE_USD, **({"max_latency_s": max_latency_s} if max_latency_s else {})}
    return httpx.post(base + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                      json={"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": text}],
                            "advisor": prefs})


def test_a_full_rung_sends_a_deadline_bound_request_to_the_next_rung(ladder_and_router):
    import httpx

    tmp, ladder, router = ladder_and_router
    proc, base = load_routing.start_advisor(ladder, router, tmp / "aware", True, 10.0, poll_s=0.1)
    try:
        for _ in range(3):  # small's service time, seen by advisor
            assert _ask(base).headers["x-advisor-rung"] == "small"

        async def fill():  # six calls pinned to small's one slot: 2.4 s of queue
            async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as client:
                body = {"model": "small", "max_tokens": 8, "messages": [{"role": "user", "content": "busy"}]}
                calls = [asyncio.create_task(client.post(base + "/v1/chat/completions", json=body)) for _ in range(6)]
                await asyncio.sleep(1.2)
                loop = asyncio.get_running_loop()
                bound = await loop.run_in_executor(None, lambda: _ask(base, max_latency_s=1.0))
                unbound = await loop.run_in_executor(None, lambda: _ask(base))
                await asyncio.gather(*calls)
                return bound, unbound

        bound, unbound = asyncio.run(fill())
        assert bound.status_code == 200 and bound.headers["x-advisor-rung"] == "medium", dict(bound.headers)
        assert bound.headers["x-advisor-load"].startswith("small->medium (small: expected wait")
        assert bound.headers["x-advisor-failovers"] == "0"
        assert unbound.headers["x-advisor-rung"] == "small" and "x-advisor-load" not in unbound.headers  # 10 s limit
        metrics = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
        assert 'advisor_load_moves_total{from_rung="small",to_rung="medium"} 1.0' in metrics
        assert 'advisor_rung_expected_wait_seconds{rung="small"}' in metrics
    finally:
        assert stop(proc) == 0


def test_an_idle_ladder_decides_as_without_load_awareness(ladder_and_router):
    tmp, ladder, router = ladder_and_router
    texts = [f"Request {i}: {w}" for i, w in enumerate(["sum 2 and 3", "write a poem", "extract the date",
                                                          "translate hello", "fix this bug"])]
    chains = {}
    for name, load in (("off", False), ("on", True)):
        proc, base = load_routing.start_advisor(ladder, router, tmp / f"idle-{name}", load, 10.0, poll_s=0.1)
        try:
            seen = []
            for t in texts:
                for deadline in (None, 1.0):
                    r = _ask(base, max_latency_s=deadline, text=t)
                    assert r.status_code == 200 and "x-advisor-load" not in r.headers
                    seen.append(r.headers["x-advisor-chain"])
                    time.sleep(0.05)
            chains[name] = seen
        finally:
            assert stop(proc) == 0
    assert chains["on"] == chains["off"]


def test_a_session_step_moves_for_load_without_touching_its_latch():
    rt = _rt({"small": 2.0})
    plan = _plan(["small"])
    plan.session = SimpleNamespace(escalation=None, session_id="s1")
    plan.policy = "session"
    apply(rt, _req(1.0), plan)
    assert plan.chain == ["medium"] and plan.session.escalation == "load small->medium"
    assert plan.policy == "session+load"  # the latch (in the latch store) is not written by the load move
