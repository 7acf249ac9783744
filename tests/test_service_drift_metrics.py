"""The service's drift gauges: computed at /metrics time from the summed per-(class, rung) verdict counter and
the serving router's training rates, in one process and summed over worker processes (multiprocess mode).
The service end to end (a real /metrics over the embedded Triton) is tests/test_feedback.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from advisor.service.records.metrics import Metrics, reference_rates


class _Model:
    """Just what `reference_rates` reads from a router artifact."""

    rung_names = ["small", "large"]
    training = {"stats": {"class_rates": {"a": [0.8, 0.9], "b": [None, 0.5]}}}


def _gauges(text: str) -> dict[tuple[str, str], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("advisor_drift_"):
            name_labels, value = line.rsplit(" ", 1)
            out[(name_labels.split("{")[0], name_labels)] = float(value)
    return out


def _value(gauges, name: str, cls: str, rung: str, sim: str = "true") -> float | None:
    key = (name, f'{name}{{rung="{rung}",simulated="{sim}",task_class="{cls}"}}')
    return gauges.get(key)


def test_reference_rates_from_the_router_training_stats():
    assert reference_rates(_Model()) == {("a", "small"): 0.8, ("a", "large"): 0.9, ("b", "large"): 0.5}


def test_drift_gauges_flag_a_rung_whose_live_accept_rate_left_its_reference():
    m = Metrics()
    m.set_reference(_Model())
    for _ in range(25):  # class a, small: 25 rejected of 25 (reference 0.8) -> drift
        m.rung_verdicts.labels("a", "small", "rejected", "true").inc()
    for i in range(30):  # class a, large: 26 of 30 accepted (0.87 vs 0.9) -> no drift
        m.rung_verdicts.labels("a", "large", "accepted" if i < 26 else "rejected", "true").inc()
    for _ in range(5):  # class b, large: 0 of 5 (reference 0.5): too few attempts to flag
        m.rung_verdicts.labels("b", "large", "rejected", "true").inc()
    m.rung_verdicts.labels("c", "small", "accepted", "false").inc()  # no reference for class c
    g = _gauges(m.render()[0].decode())
    assert _value(g, "advisor_drift_live_accept_rate", "a", "small") == 0.0
    assert _value(g, "advisor_drift_reference_usable_rate", "a", "small") == 0.8
    assert abs(_value(g, "advisor_drift_accept_minus_reference", "a", "small") + 0.8) < 1e-9
    assert _value(g, "advisor_drift_flag", "a", "small") == 1.0
    assert abs(_value(g, "advisor_drift_live_accept_rate", "a", "large") - 26 / 30) < 1e-9
    assert _value(g, "advisor_drift_flag", "a", "large") == 0.0
    assert _value(g, "advisor_drift_flag", "b", "large") == 0.0
    assert _value(g, "advisor_drift_live_accept_rate", "c", "small", "false") == 1.0
    assert _value(g, "advisor_drift_flag", "c", "small", "false") is None


def test_drift_gauges_sum_over_worker_processes(tmp_path):
    """Two worker processes count verdicts into one multiprocess directory; the gauges use the sums."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    worker = textwrap.dedent("""
        import sys
        from advisor.service.records.metrics import Metrics
        m = Metrics()
        for _ in range(int(sys.argv[1])):
            m.rung_verdicts.labels("a", "small", sys.argv[2], "true").inc()
    """)
    for n, verdict in ((15, "rejected"), (10, "accepted")):
        subprocess.run([sys.executable, "-c", worker, str(n), verdict], env=env, check=True)
    reader = textwrap.dedent("""
        from advisor.service.records.metrics import Metrics
        m = Metrics()
        class Model:
            rung_names = ["small"]
            training = {"stats": {"class_rates": {"a": [0.8]}}}
        m.set_reference(Model())
        print(m.render()[0].decode())
    """)
    text = subprocess.run([sys.executable, "-c", reader], env=env, check=True, capture_output=True, text=True).stdout
    g = _gauges(text)
    assert abs(_value(g, "advisor_drift_live_accept_rate", "a", "small") - 10 / 25) < 1e-9
    assert _value(g, "advisor_drift_flag", "a", "small") == 1.0


def test_orchestrated_requests_count_attempts_and_verdicts_like_the_other_modes():
    """``model: "orchestrator"`` counts each call (cost, or error) and each answered attempt's result with the
    same `Metrics` helpers as the routed and pinned modes, so its verified answers reach the drift gauges."""
    import asyncio
    import time
    from pathlib import Path
    from types import SimpleNamespace

    from advisor.agent.formats import format_for
    from advisor.ladder import load_ladder
    from advisor.orchestrator.experts import EXPERT_TOOL, experts_for
    from advisor.service.routing.attempts import RequestPlan
    from advisor.service.process.config import load_config
    from advisor.service.routing.orchestrated import serve_orchestrated
    from advisor.service.api.parse import parse_request
    from advisor.triton.client import GenerationResult

    ladder = load_ladder(Path(__file__).resolve().parent.parent / "ladders" / "demo.yaml")
    orch = ladder.roles.orchestrator
    expert = experts_for(ladder)[1]
    pick = format_for(orch.tool_call_format).render_call(EXPERT_TOOL, {"expert": expert.alias})

    class Client:
        async def generate(self, triton_model, prompt, **kw):
            text = pick if triton_model == orch.triton_model else "The refund window is 30 days."
            return GenerationResult(text, "stop", 20, 8, True, 0.01, triton_model)

    class Verifier:
        async def verify(self, reply, text):
            return SimpleNamespace(accepted=True, detail="accepted: fake", cost_usd=0.0)

    metrics = Metrics()
    metrics.set_reference(_Model())  # class "a" is known: it keeps its own label
    rt = SimpleNamespace(ladder=ladder, rungs={r.name: r for r in ladder.rungs}, config=load_config(None, ladder),
                         metrics=metrics, simulated=lambda name: True, client_for=lambda model: Client())
    req = parse_request({"model": "orchestrator", "messages": [{"role": "user", "content": "Refund window?"}]}, {})
    plan = RequestPlan("dec_x", "Refund window?", "a", "given", "orchestrator", "orchestrator", [], 1, Verifier(),
                [r.name for r in ladder.rungs])
    out = asyncio.run(serve_orchestrated(rt, req, plan, time.monotonic() + 30))
    assert out.status == 200 and out.rung == expert.name and out.verdict == "accepted"
    text = metrics.render()[0].decode()
    assert f'advisor_attempts_total{{result="unverified",rung="{orch.name}",simulated="true"}} 1.0' in text
    assert f'advisor_attempts_total{{result="accepted",rung="{expert.name}",simulated="true"}} 1.0' in text
    assert (f'advisor_live_verdicts_total{{rung="{expert.name}",simulated="true",task_class="a",'
            f'verdict="accepted"}} 1.0') in text
    assert f'advisor_verifier_verdicts_total{{task_class="a",verdict="accepted"}} 1.0' in text
    for rung in (orch.name, expert.name):
        assert f'advisor_cost_usd_total{{rung="{rung}",simulated="true"}} 0.0' not in text
        assert f'advisor_cost_usd_total{{rung="{rung}",simulated="true"}}' in text
    g = _gauges(text)
    assert _value(g, "advisor_drift_live_accept_rate", "a", expert.name) == 1.0


def test_classes_clients_invent_share_one_label():
    """The class is the client's word: a class neither the config nor the router knows is counted as "other",
    so that invented names cannot grow the series without bound; known classes keep their own label."""
    m = Metrics()
    m.set_reference(_Model(), config_classes=["extraction"])
    for i in range(50):
        m.count_result("small", f"made-up-{i}", "rejected", True)
    m.count_result("small", "extraction", "accepted", True)
    m.count_result("small", "a", "accepted", True)  # known from the router's training stats
    m.count_result("small", None, "accepted", True)
    text = m.render()[0].decode()
    labels = {line.split('task_class="')[1].split('"')[0] for line in text.splitlines()
              if line.startswith("advisor_verifier_verdicts_total{")}
    assert labels == {"other", "extraction", "a", ""}
    assert 'advisor_verifier_verdicts_total{task_class="other",verdict="rejected"} 50.0' in text
