"""Capture, the suite from traffic, the replayed step and the savings arms, piece by piece (real DuckDB and
PostgreSQL stores; the whole path through the real service is tests/test_traffic.py)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
import yaml

from advisor.agent.conversation import Conversation, Turn, conversation_messages
from advisor.agent.fake import FakeModel
from advisor.agent.formats import format_for
from advisor.agent.loop import run_episode
from advisor.records import now
from advisor.store import Store, open_store
from advisor.suite import Limits, load_suite

SPECS = [{"name": "read_file", "description": "Read a file.",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
RUNG = SimpleNamespace(name="m", model_id="m_triton", tool_call_format="hermes", tokenizer_path=None,
                       max_output_tokens=256, chat_template=None)


def step(decision: str, tenant: str = "A", created=None, *, ok: bool = True, session: str | None = None,
         calls=(("read_file", {"path": "a.txt"}),), final: str | None = None, keep_steps: int | None = 100,
         keep_days: float | None = 30.0, task_class: str = "agent") -> dict:
    conversation = Conversation([Turn("system", "You help."), Turn("user", f"Read a.txt ({decision})")], SPECS)
    return {"decision_id": decision, "tenant": tenant, "created_at": created or now(), "task_class": task_class,
            "session_id": session, "session_step": 1, "rung": "nano-12b", "status": "ok",
            "verdict": "unverified", "reference_ok": ok, "simulated": True, "cost_usd": 0.001,
            "request_json": json.dumps(conversation.to_json()),
            "reply_json": json.dumps({"content": final, "final": final, "calls": [list(c) for c in calls]}),
            "size_bytes": 100, "keep_steps": keep_steps, "keep_days": keep_days}


# --------------------------------------------------------------------------------------------- the store
def _bounds(store) -> None:
    store.add_live([], [], [step("dec_1"), step("dec_2"), step("dec_3", keep_steps=2),
                            {"tenant": "A", "dropped": "too_large"}, step("dec_1")])
    store.add_live([], [], [step("dec_b", tenant="B")])
    assert [r["decision_id"] for r in store.captured_steps(tenant="A")] == ["dec_1", "dec_2"]
    counts = {c["tenant"]: c for c in store.capture_counts()}
    assert counts["A"]["steps"] == 2 and counts["A"]["drops"] == {"full": 1, "too_large": 1}
    assert counts["B"]["steps"] == 1 and counts["B"]["drops"] == {}
    # retention: a step older than keep_days goes when the tenant's next step is added
    store.add_live([], [], [step("dec_old", tenant="C", created=now() - timedelta(days=40))])
    store.add_live([], [], [step("dec_new", tenant="C", keep_days=30)])
    assert [r["decision_id"] for r in store.captured_steps(tenant="C")] == ["dec_new"]
    assert [r["decision_id"] for r in store.captured_steps(since=now() - timedelta(hours=1), tenant="B")] == ["dec_b"]


def test_the_duckdb_store_keeps_steps_within_their_bounds_and_counts_the_rest(tmp_path):
    with Store.open(tmp_path / "s.duckdb") as store:
        _bounds(store)


def test_the_postgres_store_keeps_steps_within_their_bounds_and_counts_the_rest(postgres_server):
    with open_store(postgres_server.new_database("capture_bounds")) as store:
        _bounds(store)


# --------------------------------------------------------------------------------------------- the suite
def test_a_broken_step_is_never_a_reference_and_duplicates_are_one_task(tmp_path):
    from advisor.importers.traffic import suite_from_traffic
    from advisor.service.process.config import ServiceConfig

    with Store.open(tmp_path / "s.duckdb") as store:
        first = step("dec_a", session="s1")
        dup = step("dec_dup")
        dup["request_json"] = first["request_json"]
        store.add_live([], [], [first, dup, step("dec_broken", ok=False, session="s1"),
                                step("dec_checked", ok=False, task_class="checked", session="s2"),
                                step("dec_final", calls=(), final="The port is 8443.", session="s3"),
                                step("dec_answers_call", task_class="answers", session="s4"),
                                step("dec_answers_final", calls=(), final="8443", task_class="answers", session="s5")])
        config = ServiceConfig.model_validate({"version": 1, "classes": {
            "checked": {"verifier": {"checks": [{"type": "tool_call", "tool": "read_file"}]}},
            "answers": {"verifier": {"checks": [{"type": "regex", "pattern": "\\d+"}]}}}})
        summary = suite_from_traffic(store, tmp_path / "out", service_config=config, heldout=0.0)
    suite = yaml.safe_load((tmp_path / "out" / "suite.yaml").read_text())
    tasks = {t["replay"]["decision_id"]: t for t in suite["tasks"]}
    assert set(tasks) == {"dec_a", "dec_checked", "dec_final", "dec_answers_call", "dec_answers_final"}
    # an answer verifier judges final answers only (as the service does): a tool-call step keeps its reference
    assert tasks["dec_answers_call"]["replay"]["check"] == "reference"
    assert tasks["dec_answers_final"]["replay"]["check"] == "verifier"
    assert tasks["dec_checked"]["replay"]["check"] == "verifier" and tasks["dec_checked"]["replay"]["reference"] is None
    assert tasks["dec_a"]["replay"]["reference"]["calls"] == [["read_file", {"path": "a.txt"}]]
    assert summary.left_out == {
        "duplicates (the same conversation as another step)": 1,
        "without a check (the live reply was broken, cut or rejected, and the class has no verifier)": 1}
    loaded = load_suite(tmp_path / "out" / "suite.yaml", {"read_file"})
    assert {t.task_class for t in loaded.tasks} == {"agent", "checked", "answers"}


def test_several_tenants_are_mixed_in_one_suite_only_when_asked(tmp_path):
    from advisor.errors import ConfigError
    from advisor.importers.traffic import suite_from_traffic

    with Store.open(tmp_path / "s.duckdb") as store:
        store.add_live([], [], [step("dec_a1", tenant="A"), step("dec_b1", tenant="B")])
        with pytest.raises(ConfigError, match=r"2 tenants \(A, B\): give --tenant NAME .* or --all-tenants"):
            suite_from_traffic(store, tmp_path / "out", heldout=0.0)
        assert not (tmp_path / "out").exists()
        assert suite_from_traffic(store, tmp_path / "a", tenant="A", heldout=0.0).tenants == ["A"]
        assert suite_from_traffic(store, tmp_path / "ab", heldout=0.0, all_tenants=True).tenants == ["A", "B"]


def test_with_judge_a_final_answer_is_judged_against_the_served_one(tmp_path):
    from advisor.importers.traffic import JUDGE_RUBRIC, suite_from_traffic

    with Store.open(tmp_path / "s.duckdb") as store:
        store.add_live([], [], [step("dec_f", calls=(), final="Backups are kept 30 days [kb-backups]."),
                                step("dec_c")])
        suite_from_traffic(store, tmp_path / "out", heldout=0.0, judge_finals=True)
    tasks = {t["replay"]["decision_id"]: t for t in yaml.safe_load((tmp_path / "out" / "suite.yaml").read_text())["tasks"]}
    judged = tasks["dec_f"]["task_completion"][0]["check"]
    assert tasks["dec_f"]["replay"]["check"] == "judge" and judged["type"] == "judge"
    assert judged["rubric"] == JUDGE_RUBRIC + "Backups are kept 30 days [kb-backups]."
    assert tasks["dec_c"]["replay"]["check"] == "reference"  # a tool call keeps its deterministic check


def test_the_held_out_split_keeps_a_sessions_steps_together(tmp_path):
    from advisor.importers.traffic import suite_from_traffic

    with Store.open(tmp_path / "s.duckdb") as store:
        store.add_live([], [], [step(f"dec_{s}_{i}", session=f"sess{s}") for s in range(20) for i in range(3)])
        summary = suite_from_traffic(store, tmp_path / "out", heldout=0.3)
    assert 0 < summary.tasks["heldout"] < summary.tasks["suite"]
    splits = {}
    for split in ("suite", "heldout"):
        for t in yaml.safe_load((tmp_path / "out" / f"{split}.yaml").read_text())["tasks"]:
            splits.setdefault(t["replay"]["session_id"], set()).add(split)
    assert all(len(s) == 1 for s in splits.values())


# --------------------------------------------------------------------------------------------- the replay
def _replay_task(reference: dict) -> SimpleNamespace:
    conversation = Conversation([Turn("user", "Read a.txt"), Turn("assistant", "", (("read_file", '{"path": "b"}'),)),
                                 Turn("tool", "no such file b")], SPECS)
    return SimpleNamespace(instructions="Read a.txt", skill_text=None, replay=SimpleNamespace(
        conversation=conversation.to_json(), reference=reference, sampling={"seed": 7}))


def test_a_replayed_call_is_recorded_not_run_and_compared_with_the_reference():
    from advisor.checks.base import get_check
    from advisor.checks.replay import SameStepCheck

    call = format_for("hermes").render_call("read_file", {"path": " A.TXT "})
    task = _replay_task({"calls": [["read_file", {"path": "a.txt"}]], "final": None})
    client = FakeModel([call])
    result = asyncio.run(run_episode(task, RUNG, client, None, Limits(), sampling={"seed": 99, "temperature": 0.6}))
    ep = result.episode
    assert ep.stop_reason == "step" and [(c.name, c.arguments) for c in ep.calls] == [("read_file", {"path": " A.TXT "})]
    assert len(client.calls) == 1 and "no such file b" in client.prompts[0]  # the recorded tool result, replayed
    assert client.sampling == [{"seed": 7}]  # drawn as the live request was, not with the probe's seed
    grade = get_check("same_step")
    assert asyncio.run(grade(SameStepCheck(type="same_step", part="content"), task, ep)).score == 1.0
    other = asyncio.run(run_episode(task, RUNG, FakeModel(["FINAL ANSWER: done"]), None, Limits())).episode
    assert other.stop_reason == "final" and other.final == "done"
    assert asyncio.run(grade(SameStepCheck(type="same_step", part="content"), task, other)).score == 0.0
    assert asyncio.run(grade(SameStepCheck(type="same_step", part="form"), task, other)).score == 1.0


def test_the_service_and_the_replay_render_the_same_prompt():
    from advisor.service.api.chat import conversation_of, prompt_messages
    from advisor.service.api.parse import parse_request

    body = {"model": "auto", "tools": [{"type": "function", "function": SPECS[0]}], "tool_choice": "required",
            "messages": [{"role": "system", "content": "You help."}, {"role": "user", "content": "Read a.txt"},
                         {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "read_file", "arguments": "{\"path\": \"b\"}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "no such file b"}]}
    req = parse_request(body, {})
    stored = Conversation.from_json(json.loads(json.dumps(conversation_of(req).to_json())))
    assert conversation_messages(RUNG, stored) == prompt_messages(RUNG, req)
    assert "You must call one of these functions now." in prompt_messages(RUNG, req)[0]["content"]


# --------------------------------------------------------------------------------------------- capture
def test_capture_redacts_before_writing_and_drops_what_is_too_large(monkeypatch):
    from advisor.service.records.capture import Capture
    from advisor.service.api.chat import Reply
    from advisor.service.process.config import CaptureConfig
    from advisor.service.api.parse import parse_request

    monkeypatch.setenv("RUNG_KEY_FOR_TEST", "rung-secret-123456")
    ladder = SimpleNamespace(models=lambda: [SimpleNamespace(api_key_env="RUNG_KEY_FOR_TEST")])
    cap = Capture(CaptureConfig(enabled=True, redact=[r"ACCT-\d+"]), ladder)
    req = parse_request({"model": "auto", "messages": [{"role": "user", "content":
        "key sk-abcdefghijklmnopqrstuvwx, rung-secret-123456, account ACCT-991, password=hunter22"}]}, {})
    plan = SimpleNamespace(decision_id="dec_x", task_class="chat", session=None)
    out = SimpleNamespace(plan=plan, status=200, reply=Reply(content="ok", final="ok"), rung="nano-12b",
                          verdict="unverified", attempts=[SimpleNamespace(rung="nano-12b", error=None, verdict=None)],
                          cost_usd=0.001)
    rt = SimpleNamespace(simulated=lambda rung: True)
    row = cap.record(rt, req, out, None, now())
    text = row["request_json"]
    for secret in ("sk-abcdefghijklmnopqrstuvwx", "rung-secret-123456", "ACCT-991", "hunter22"):
        assert secret not in text
    assert row["tenant"] == "default" and row["reference_ok"] is True
    small = Capture(CaptureConfig(enabled=True, max_step_bytes=1024), ladder)
    big = parse_request({"model": "auto", "messages": [{"role": "user", "content": "x " * 2000}]}, {})
    assert small.record(rt, big, out, None, now()) == {"record": "capture", "tenant": "default", "dropped": "too_large"}
    assert Capture(CaptureConfig(enabled=True, tenants=["A"]), ladder).record(rt, req, out, None, now()) is None


def test_sampling_keeps_or_leaves_a_whole_session():
    from advisor.service.records.capture import Capture
    from advisor.service.process.config import CaptureConfig

    cap = Capture(CaptureConfig(enabled=True, sample=0.3), SimpleNamespace(models=lambda: []))
    kept = [cap.wants("A", "agent", f"session-{i}") for i in range(1000)]
    assert 0.25 < sum(kept) / 1000 < 0.35
    assert all(cap.wants("A", "agent", f"session-{i}") == k for i, k in enumerate(kept))


# --------------------------------------------------------------------------------------------- savings arms
def test_a_chain_walk_and_a_cost_matched_mix():
    from advisor.report.savings import Step, _mix, _walk

    rates = {"s": (0.5, 1.0), "l": (1.0, 4.0)}
    assert _walk(rates, [("s", 1)]) == (1.0, 0.5)
    cost, usable = _walk(rates, [("s", 2), ("l", 1)])
    assert usable == pytest.approx(1.0) and cost == pytest.approx(1.0 + 0.5 * 1.0 + 0.25 * 4.0)
    steps = [Step("d", "c", 0.0, True, ["s"], False, rates, True)]
    share, note = _mix(steps, ["s", "l"], 2.5)
    assert share == pytest.approx({"s": 0.5, "l": 0.5}) and note == "50% s, 50% l"
    assert _mix(steps, ["s", "l"], 0.1)[0] == {"s": 1.0}


def test_the_router_beats_the_mix_only_when_the_whole_interval_is_above_zero():
    from advisor.report.savings import router_verdict

    assert router_verdict("on 8 steps", 0.33, 0.11, 0.67).startswith("the router beats the cost-matched static mix")
    reaches = router_verdict("on 6 steps", 0.30, 0.0, 0.60)
    assert "does not beat" in reaches and "beyond chance" in reaches and "+30 points usable [+0, +60]" in reaches
    worse = router_verdict("on 6 steps", -0.40, -0.70, -0.10)
    assert "does not beat" in worse and "the mix does better" in worse


def test_the_postgres_store_gives_the_served_record_of_captured_steps(postgres_server):
    with open_store(postgres_server.new_database("capture_served")) as store:
        store.add_live([{"decision_id": "dec_s", "created_at": now(), "request_hash": "h", "policy": "router",
                         "mode": "single", "chosen_rung": "nano-12b", "status": "ok", "final_rung": "nano-12b",
                         "total_cost_usd": 0.002, "chain_json": '["nano-12b"]'}], [], [step("dec_s")])
        served = store.served_cost(["dec_s", "dec_unknown"])
    assert [(r["decision_id"], r["final_rung"], r["total_cost_usd"]) for r in served] == [("dec_s", "nano-12b", 0.002)]
