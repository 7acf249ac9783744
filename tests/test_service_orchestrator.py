"""``model: "orchestrator"`` in the routing service: `advisor serve` in a subprocess, the official `openai`
client, the embedded Triton's SIMULATED orchestrator stand-in choosing the rung, records in a real DuckDB file."""

from __future__ import annotations

import shutil

import pytest

from test_service import DEMO, KEY, SUITE, Service, _chat

pytestmark = pytest.mark.triton
RUNGS = {"nano-12b", "nano-30b", "super-120b"}


@pytest.fixture(scope="module")
def orch_service(tmp_path_factory, triton_server):
    """A service trained from a small probe, no service config (no verifier)."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("orch-service")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url,
                          store_path=tmp / "probe.duckdb", replicas=1, conditions=("baseline",),
                          tasks=["api-refund-order", "api-cancel-order", "docs-rate-limit-pro", "code-slugify",
                                 "extract-orders-revenue", "docs-backup-retention"]))
    (tmp / "keys.txt").write_text(f"full {KEY}\nsmall sk-small nano-12b\n")
    store = tmp / "live.duckdb"
    shutil.copy(tmp / "probe.duckdb", store)
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(tmp / "keys.txt"),
                   "--ingest-every", "0"], store)
    yield svc
    assert svc.stop() == 0, "".join(svc.lines)


def test_models_lists_the_orchestrator(orch_service):
    models = {m.id: m for m in orch_service.client().models.list()}
    assert "orchestrator" in models and RUNGS <= set(models)
    assert models["orchestrator"].model_extra["advisor"]["policy"] == "orchestrator"
    assert models["orchestrator"].model_extra["advisor"]["simulated"] is True  # the demo's orchestrator is a stand-in


def test_orchestrator_picks_an_expert_rung_and_both_calls_are_costed_and_recorded(orch_service):
    reply, headers = _chat(orch_service.client(), model="orchestrator",
                           messages=[{"role": "user", "content": "Summarise our refund policy in one line."}])
    assert reply.choices[0].message.content
    assert reply.model in RUNGS and headers["x-advisor-rung"] == reply.model  # the expert's reply is the answer
    assert headers["x-advisor-policy"] == "orchestrator" and headers["x-advisor-attempts"] == "2"
    extra = reply.usage.model_extra["advisor"]
    assert [a["rung"] for a in extra["attempts"]] == ["orchestrator-8b", reply.model]
    assert all(a["cost_usd"] > 0 for a in extra["attempts"])
    # stand-ins answered both calls (the orchestrator role included): labelled SIMULATED in the response too
    assert headers["x-advisor-simulated"] == "true" and all(a["simulated"] is True for a in extra["attempts"])
    assert extra["cost_usd"] == pytest.approx(sum(a["cost_usd"] for a in extra["attempts"]))
    decision, attempts = orch_service.records(headers["x-advisor-decision-id"])
    assert decision["policy"] == "orchestrator" and decision["final_rung"] == reply.model
    assert decision["chosen_rung"] == reply.model and decision["simulated"]
    assert [a["rung"] for a in attempts] == ["orchestrator-8b", reply.model]
    assert all(a["simulated"] and a["input_tokens"] > 0 for a in attempts)
    assert decision["total_cost_usd"] == pytest.approx(sum(a["cost_usd"] for a in attempts))


def test_orchestrator_only_offers_the_rungs_a_key_may_use_and_refuses_streaming(orch_service):
    import openai

    reply, headers = _chat(orch_service.client("sk-small"), model="orchestrator",
                           messages=[{"role": "user", "content": "Hello there."}])
    assert reply.model == "nano-12b"  # the only expert this key may use
    with pytest.raises(openai.BadRequestError) as err:
        orch_service.client().chat.completions.create(model="orchestrator", stream=True,
                                                      messages=[{"role": "user", "content": "hi"}])
    assert "does not stream" in str(err.value)
    with pytest.raises(openai.NotFoundError) as err:
        orch_service.client().chat.completions.create(model="orchestrater", messages=[{"role": "user", "content": "x"}])
    assert "Did you mean 'orchestrator'" in str(err.value)
