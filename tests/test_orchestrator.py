"""The orchestrator policy without a server: tool schema and price table (golden), hermes turns, limits,
preferences, per-rung cost. The same loop against the embedded Triton is in test_orchestrator_probe.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from advisor.agent.fake import FakeModel, Reply
from advisor.agent.formats import format_for
from advisor.ladder import load_ladder
from advisor.orchestrator.experts import TABLE_HEADER, expert_tool, experts_for
from advisor.orchestrator.loop import OrchestratorConfig, run_orchestrated
from advisor.orchestrator.prompt import offered, render_preferences
from advisor.router.routing.rule import Preferences
from advisor.suite import Limits, Task
from advisor.tools import Environment

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "fixtures" / "orchestrator_tools.txt"
LADDER = load_ladder(REPO / "ladders" / "demo.yaml")
ORCH = LADDER.roles.orchestrator
HERMES = format_for("hermes")
FACTS = {"nano-12b": {"usable": {"api_calls": (1, 4)}, "latency_s": 0.5},
         "nano-30b": {"usable": {"api_calls": (3, 4), "code_change": (2, 4)}, "latency_s": 1.25},
         "super-120b": {"usable": {"api_calls": (4, 4)}, "latency_s": 3.0}}
TASK = Task.model_validate({
    "id": "lines", "class": "files", "instructions": "How many lines has notes.txt?", "tools": ["read_file"],
    "fixtures": {"files": {"notes.txt": "a\nb\nc\n", "other.txt": "x\n"}},
    "instruction_following": [{"name": "short", "weight": 100, "check": {"type": "regex", "pattern": "^\\S+$"}}],
    "task_completion": [{"name": "three", "weight": 100, "check": {"type": "regex", "pattern": "^3$"}}]})


def call(name, **arguments):
    return HERMES.render_call(name, arguments)


def scripted(per_model: dict[str, list]) -> FakeModel:
    """A FakeModel answering each Triton model from its own queue (the last reply repeats)."""
    queues = {k: list(v) for k, v in per_model.items()}

    def answer(c):
        q = queues[c.model]
        return q.pop(0) if len(q) > 1 else q[0]

    return FakeModel(answer)


def run(model: FakeModel, tmp_path, *, prefs=None, config=OrchestratorConfig(), facts=None, limits=Limits()):
    async def go():
        with Environment.create(TASK, tmp_path) as env:
            return await run_orchestrated(TASK, ORCH, experts_for(LADDER, facts), lambda m: model, env, limits,
                                          prefs=prefs, config=config, sampling={"seed": 1})
    return asyncio.run(go())


def test_tool_schema_and_price_table_match_the_golden_file():
    spec = expert_tool(experts_for(LADDER, FACTS))
    assert spec.parameters["properties"]["expert"]["enum"] == ["expert-1", "expert-2", "expert-3"]
    assert spec.parameters["required"] == ["expert"]
    table = spec.description.splitlines()[-4:]
    assert table[0] == TABLE_HEADER
    assert table[1:] == ["expert-1 | $0.04 | $0.16 | 0.50 s", "expert-2 | $0.05 | $0.20 | 1.25 s",
                         "expert-3 | $0.10 | $0.50 | 3.00 s"]
    assert "expert-2: a 30B-parameter mixture-of-experts model (3B active per token)" in spec.description
    assert "api_calls 3/4, code_change 2/4" in spec.description
    rendered = HERMES.render_tools([spec])
    assert rendered == GOLDEN.read_text(encoding="utf-8"), "regenerate tests/fixtures/orchestrator_tools.txt if intended"
    # without a store: latency unknown, no measured usable rates
    bare = expert_tool(experts_for(LADDER)).description
    assert bare.splitlines()[-1] == "expert-3 | $0.10 | $0.50 | unknown" and "Measured" not in bare


def test_expert_reply_replaces_the_turn_and_costs_are_per_rung(tmp_path):
    nano30 = format_for(LADDER.rung("nano-30b").tool_call_format)
    model = scripted({
        ORCH.triton_model: [Reply(call("call_expert", expert="expert-2"), input_tokens=1000, output_tokens=20),
                            Reply("FINAL ANSWER: 3", input_tokens=1200, output_tokens=5)],
        "standin_nano_30b": [Reply(nano30.render_call("read_file", {"path": "notes.txt"}), input_tokens=800,
                                   output_tokens=30)]})
    res = run(model, tmp_path)
    assert res.episode.stop_reason == "final" and res.episode.final == "3"
    assert [c.name for c in res.episode.calls] == ["read_file"] and res.episode.calls[0].observation.startswith("a")
    assert [(c.model, c.role) for c in res.calls] == [("orchestrator-8b", "orchestrator"), ("nano-30b", "expert"),
                                                      ("orchestrator-8b", "orchestrator")]
    assert res.expert_sequence() == ["nano-30b"]
    by_model = res.cost_by_model()
    assert by_model["orchestrator-8b"] == pytest.approx(ORCH.attempt_cost(2200, 25))
    assert by_model["nano-30b"] == pytest.approx(LADDER.rung("nano-30b").attempt_cost(800, 30))
    assert res.cost() == pytest.approx(sum(by_model.values()))
    assert (res.input_tokens, res.output_tokens, res.model_calls) == (3000, 55, 3)
    # the expert saw the conversation in its own format, not the orchestrator's call_expert turn
    expert_prompt = model.calls[1].prompt
    assert "call_expert" not in expert_prompt and "How many lines has notes.txt?" in expert_prompt
    # the orchestrator saw the expert's action rewritten in hermes, marked with the alias
    assert "[expert-2] <tool_call>" in model.calls[2].prompt


def test_only_the_first_call_of_a_turn_is_executed(tmp_path):
    two = call("read_file", path="notes.txt") + "\n" + call("read_file", path="other.txt")
    model = scripted({ORCH.triton_model: [two, "FINAL ANSWER: 3"]})
    res = run(model, tmp_path)
    assert [c.arguments["path"] for c in res.episode.calls] == ["notes.txt"]
    assert "1 more ignored" in res.turns[0].observation


def test_invalid_json_repeats_the_turn_and_is_counted(tmp_path):
    model = scripted({ORCH.triton_model: ['<tool_call>{"name": "read_file", "arguments": {</tool_call>',
                                          "FINAL ANSWER: 3"]})
    res = run(model, tmp_path)
    assert res.invalid_turns == 1 and res.episode.stop_reason == "final"
    assert res.turns[0].action == "invalid" and "not valid JSON" in res.turns[0].observation
    assert "not valid JSON" in model.calls[1].prompt  # the repeated turn sees the error
    # max_invalid in a row ends the episode
    bad = scripted({ORCH.triton_model: ["<tool_call>{oops</tool_call>"]})
    res = run(bad, tmp_path / "b", limits=Limits(max_invalid=2))
    assert res.episode.stop_reason == "invalid_output" and res.invalid_turns == 2


def test_unknown_alias_is_an_error_observation(tmp_path):
    model = scripted({ORCH.triton_model: [call("call_expert", expert="expert-9"), "FINAL ANSWER: 3"]})
    res = run(model, tmp_path)
    assert res.unknown_experts == 1 and res.episode.stop_reason == "final"
    assert res.turns[0].observation.startswith("ERROR: unknown expert 'expert-9'")
    assert "ERROR: unknown expert 'expert-9'; call_expert takes one of expert-1, expert-2, expert-3" in model.calls[1].prompt
    assert [c.role for c in res.calls] == ["orchestrator", "orchestrator"]


def test_round_limit(tmp_path):
    model = FakeModel(lambda c: call("read_file", path=f"n{len(model.calls)}.txt"))  # never stuck, never done
    res = run(model, tmp_path, config=OrchestratorConfig(max_rounds=4))
    assert res.episode.stop_reason == "max_turns" and res.model_calls == 4
    assert "4 rounds" in res.episode.error
    assert OrchestratorConfig().max_rounds == 50


def test_preferences_rendering_and_modes(tmp_path):
    prefs = Preferences(allowed=["nano-12b", "nano-30b"], self_hosted_only=True, max_latency_s=2.0,
                        weights={"nano-12b": 2.0, "super-120b": 0.0})
    experts = experts_for(LADDER, FACTS)
    text = render_preferences(prefs, experts)
    assert text.startswith("# User preferences")
    assert "- Call only these experts: expert-1, expert-2." in text
    assert "- Call only self-hosted experts." in text
    assert "- Each expert call should take at most 2 s on average; over that limit: expert-3." in text
    assert "expert-1 2, expert-3 0." in text
    assert render_preferences(Preferences(), experts) == ""
    assert [e.alias for e in offered(experts, prefs, "enforce")] == ["expert-1", "expert-2"]
    assert [e.alias for e in offered(experts, prefs, "prompt")] == ["expert-1", "expert-2", "expert-3"]
    # prompt mode: stated, expert-3 still callable, and its call is recorded as not respecting the preferences
    model = scripted({ORCH.triton_model: [call("call_expert", expert="expert-3"), "FINAL ANSWER: 3"],
                      "standin_super_120b": ["FINAL ANSWER: 3"]})
    res = run(model, tmp_path, prefs=prefs, facts=FACTS)
    assert "# User preferences" in model.calls[0].prompt
    assert [(c.model, c.respects) for c in res.calls if c.role == "expert"] == [("super-120b", False)]
    # enforce mode: expert-3 is not in the enum, calling it is an unknown expert
    model = scripted({ORCH.triton_model: [call("call_expert", expert="expert-3"), "FINAL ANSWER: 3"]})
    res = run(model, tmp_path / "e", prefs=prefs, facts=FACTS, config=OrchestratorConfig(prefs="enforce"))
    assert res.unknown_experts == 1 and '"enum": ["expert-1", "expert-2"]' in model.calls[0].prompt
    # off: not rendered
    model = scripted({ORCH.triton_model: ["FINAL ANSWER: 3"]})
    run(model, tmp_path / "o", prefs=prefs, config=OrchestratorConfig(prefs="off"))
    assert "# User preferences" not in model.calls[0].prompt


def test_bad_config_is_one_clear_error():
    from advisor.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown preferences mode 'strict'"):
        OrchestratorConfig(prefs="strict")


def test_standin_orchestrator_reads_the_prompt_and_its_parameters_matter(tmp_path):
    import random

    from advisor.agent.chat import DEFAULT
    from advisor.ladder import OrchestratorStandin
    from advisor.orchestrator.prompt import orchestrator_prompt
    from advisor.standin import responder_for
    from advisor.standin.orchestrator import choose, offered_experts

    system = orchestrator_prompt(HERMES.render_tools([expert_tool(experts_for(LADDER, FACTS))]))
    assert offered_experts(system) == ["expert-1", "expert-2", "expert-3"]  # cheapest first, read from the table
    aliases = ["expert-1", "expert-2", "expert-3"]
    always = OrchestratorStandin(match=0.0, default_strongest=1.0)
    assert {choose(always, aliases, 0.5, random.Random(i))[0] for i in range(20)} == {"expert-3"}
    matcher = OrchestratorStandin(match=1.0, default_strongest=0.0)
    assert choose(matcher, aliases, 1.5, random.Random(0))[0] == "expert-2"  # believed 0, 2, 4 >= 1.5 + 0.3
    assert choose(matcher, aliases, 0.5, random.Random(0))[0] == "expert-2"
    assert choose(matcher, aliases, -0.5, random.Random(0))[0] == "expert-1"
    assert choose(matcher, aliases, 3.9, random.Random(0))[0] == "expert-3"
    guesser = OrchestratorStandin(match=0.0, default_strongest=0.0)
    assert len({choose(guesser, aliases, 1.0, random.Random(i))[0] for i in range(50)}) == 3
    # served: a hermes call_expert with an offered alias, for a task it knows
    suite = REPO / "suites" / "example" / "suite.yaml"
    from advisor.suite import load_suite

    task = load_suite(suite).tasks[0]
    respond = responder_for(ORCH, [suite])
    prompt = DEFAULT.render([{"role": "system", "content": system}, {"role": "user", "content": task.instructions}])
    gen = respond(prompt, {"seed": 3, "max_tokens": 512})
    parsed = HERMES.parse(gen.text)
    assert gen.text.startswith("<think>") and parsed.name == "call_expert" and parsed.arguments["expert"] in aliases
    assert respond(prompt, {"seed": 3, "max_tokens": 512}).text == gen.text  # seeded
