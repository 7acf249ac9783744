"""docs/extending.md's worked examples, executed: a toy check, tool, tool-call format, importer, routing policy,
model backend, store and verifier are registered from the page's own code blocks and then used the way the page
says."""

from __future__ import annotations

import asyncio
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from advisor.agent.formats import FORMATS, format_for
from advisor.checks import CHECKS, CheckError, get_check, score_episode
from advisor.errors import ConfigError, DataError
from advisor.importers import IMPORTERS, get_importer
from advisor.records import Episode
from advisor.suite import load_suite
from advisor.tools import Environment, available_tools
from advisor.tools.base import TOOLS

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
_BLOCK = re.compile(r"```(python|yaml)\n# example: ([\w ]+)\n(.*?)```", re.S)


def blocks() -> dict[str, str]:
    """The page's example blocks by name (``# example: NAME`` on their first line)."""
    return {name.strip(): body for _, name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8"))}


@pytest.fixture
def registries(monkeypatch):
    """Every registry restored after the test, so the toy parts do not leak into other tests."""
    from advisor.router.routing.policies import POLICIES

    regs = [CHECKS, TOOLS, FORMATS, IMPORTERS, POLICIES]
    for reg in regs:
        monkeypatch.setattr(reg, "_items", dict(reg.items()))
    return regs


def run_example(name: str, **namespace) -> types.ModuleType:
    """Execute one example block as a module of its own (it registers its part on import)."""
    module = types.ModuleType(f"advisor_docs_example_{name.replace(' ', '_')}")
    module.__dict__.update(namespace)
    sys.modules[module.__name__] = module
    try:
        exec(compile(blocks()[name], f"{DOC}:{name}", "exec"), module.__dict__)
    finally:
        sys.modules.pop(module.__name__, None)
    return module


def test_the_page_has_an_example_of_every_part():
    assert {"check", "check suite", "tool", "format", "importer", "policy", "fake", "backend", "store", "verifier",
            "verifier config", "session signal"} <= set(blocks())


def test_a_check_is_one_module_plus_a_registration(registries, tmp_path):
    with pytest.raises(CheckError):
        get_check("word_count")
    run_example("check")
    path = tmp_path / "suite.yaml"
    text = "# example: check suite\n" + blocks()["check suite"]  # the file as copied from the page
    path.write_text(text)
    suite = load_suite(path, set(available_tools()))
    task = suite.task("capital")
    good = asyncio.run(score_episode(task, Episode(final="Paris.", stop_reason="final")))
    long = asyncio.run(score_episode(task, Episode(final="The capital of France is Paris.", stop_reason="final")))
    assert (good.if_score, good.tc_score) == (100.0, 100.0)
    assert long.if_score == 0.0 and long.criteria[0].detail == "6 words, more than 5"
    path.write_text(text.replace("max_words: 5", "max_words: many"))
    with pytest.raises(ConfigError, match=r"suite.yaml:10: tasks.0.instruction_following.0.check.max_words"):
        load_suite(path)
    path.write_text(text.replace("type: word_count", "type: word_cout"))
    with pytest.raises(ConfigError, match=r"suite.yaml:10: tasks.0.instruction_following.0.check: Value error, "
                                          "unknown check type 'word_cout'. Did you mean 'word_count'"):
        load_suite(path)


def test_a_tool_is_one_module_plus_a_registration(registries, tmp_path):
    run_example("tool")
    assert "count_lines" in available_tools()
    task = load_suite(_suite_with_tool(tmp_path), set(available_tools())).task("t")

    async def calls():
        with Environment.create(task, tmp_path) as env:
            return (await env.call("count_lines", {"path": "a.txt"}),
                    await env.call("count_lines", {"path": "../etc/passwd"}),
                    await env.call("count_lines", {}))

    ok, escape, bad = asyncio.run(calls())
    assert ok.ok and ok.observation == "2"
    assert not escape.ok and "escapes the workspace" in escape.observation
    assert not bad.ok and "'path' is a required property" in bad.observation


def _suite_with_tool(tmp_path: Path) -> Path:
    path = tmp_path / "tool-suite.yaml"
    path.write_text("""\
version: 1
name: tools
classes: [{name: c}]
tasks:
  - id: t
    class: c
    instructions: Count the lines of a.txt.
    tools: [count_lines]
    fixtures: {files: {a.txt: "one\\ntwo\\n"}}
    instruction_following: [{name: n, weight: 100, check: {type: tool_call, tool: count_lines}}]
    task_completion: [{name: two, weight: 100, check: {type: regex, pattern: "2"}}]
""")
    return path


def test_a_format_is_one_module_plus_a_registration(registries):
    run_example("format")
    fmt = format_for("call_line")
    call = fmt.render_call("read_file", {"path": "a.py"})
    parsed = fmt.parse(call + "\n" + call)
    assert (parsed.kind, parsed.name, parsed.arguments, parsed.extra_calls) == ("call", "read_file", {"path": "a.py"}, 1)
    assert fmt.parse("thinking...\nFINAL ANSWER: 42").final == "42"
    assert fmt.parse("CALL {oops").kind == "invalid"
    with pytest.raises(ConfigError, match="Did you mean 'call_line'"):
        format_for("call_lines")


def test_an_importer_is_one_module_plus_a_registration(registries, tmp_path):
    run_example("importer")
    src = tmp_path / "qa.csv"
    src.write_text("id,class,question,answer_regex\nq1,geo,Capital of France?,(?i)paris\nq2,math,2+2?,\\b4\\b\n")
    importer = get_importer("qa_csv")
    assert importer.produces == "suite" and importer.description.startswith("A CSV of id, class")
    out = importer(src, tmp_path / "qa.yaml")
    suite = load_suite(out)
    assert [t.id for t in suite.tasks] == ["q1", "q2"] and [c.name for c in suite.classes] == ["geo", "math"]
    card = asyncio.run(score_episode(suite.task("q2"), Episode(final="4", stop_reason="final")))
    assert card.overall == 100.0
    src.write_text("id,class,question,answer_regex\nq1,geo,,x\n")
    with pytest.raises(DataError, match=r"qa.csv:2: empty question"):
        importer(src, tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()


def test_the_fake_model_drives_the_loop_with_the_new_check_tool_and_format(registries, tmp_path):
    run_example("check")
    run_example("tool")
    run_example("format")
    run_example("fake", tmp_path=tmp_path)  # the block asserts its own outcome


def test_a_routing_policy_is_one_module_plus_a_registration(registries):
    import advisor.router.routing.policies as policies
    from advisor.registry import UnknownNameError
    from advisor.router.routing.rule import PolicyConfig

    run_example("policy")
    rungs = [SimpleNamespace(name=n, self_hosted=True, latency_s=1.0) for n in ("small", "mid", "big")]
    model = SimpleNamespace(rungs=rungs, rung_names=[r.name for r in rungs])  # a router's view of its rungs
    P = np.array([[0.9, 0.95, 0.99], [0.2, 0.8, 0.9], [0.1, 0.2, 0.5]])  # P(usable) per request and rung
    C = np.tile([1e-4, 1e-3, 1e-2], (3, 1))  # USD per attempt
    for mode, chains in (("escalate", [["small", "mid", "big"], ["mid", "big"], ["big"]]),
                         ("single", [["small"], ["mid"], ["big"]])):
        ctx = policies.Context(model, PolicyConfig(mode=mode))
        policy = policies.make_policy("cheapest_likely", ctx, p=0.7)
        batch = policies.Requests(["a", "b", "c"], [None] * 3, P, C)
        decisions = policies.to_decisions(policy.decide(batch), batch, ctx, policy.excluded)
        assert [d.chain for d in decisions] == chains
        assert all(d.reason["rule"] == "cheapest_likely" and d.reason["p"] == 0.7 for d in decisions)
    with pytest.raises(UnknownNameError, match="Did you mean 'cheapest_likely'"):
        policies.make_policy("cheapest_likley", ctx)


def test_a_backend_is_one_class_plus_a_registration(monkeypatch, tmp_path):
    from advisor.backends import BACKENDS, client_for
    from advisor.ladder import load_ladder

    monkeypatch.setattr(BACKENDS, "_items", dict(BACKENDS.items()))
    run_example("backend")
    ladder_text = """version: 1
name: toy
rungs:
  - name: loud
    hf_id: example/loud
    params_total_b: 1
    triton_model: loud
    backend: function
    url: "func:shout"
    price: {basis: tokens, usd_per_m_input: 0.1, usd_per_m_output: 0.4, source: example, as_of: "2026-12"}
    context_length: 8192
    tool_call_format: hermes
"""
    path = tmp_path / "ladder.yaml"
    path.write_text(ladder_text)
    rung = load_ladder(path).rungs[0]
    client = client_for(rung, load_ladder(path))
    result = asyncio.run(client.generate(rung.triton_model, "say hi", max_tokens=8))
    assert (result.text, result.finish_reason, result.tokens_from_server) == ("SAY HI", "stop", False)
    path.write_text(ladder_text.replace("backend: function", "backend: functon"))
    with pytest.raises(ConfigError, match=r"ladder.yaml:8: rungs.0.backend: Value error, unknown backend "
                                          "'functon'. Did you mean 'function'"):
        load_ladder(path)


def test_a_store_is_one_class_plus_a_registration(monkeypatch, tmp_path):
    from advisor.errors import StoreError
    from advisor.store import STORES, RouterRegistry, RunStore, open_store

    monkeypatch.setattr(STORES, "_items", dict(STORES.items()))
    run_example("store")
    url = f"folder://{tmp_path / 'routers'}"
    registry = open_store(url, role=RouterRegistry)
    assert registry.put_artifact("abc", ".json", "v1", b"{}") and not registry.put_artifact("abc", ".json", "v1", b"")
    registry.set_pointer("abc", "v1", "p1")
    registry.add_promotion({"promotion_id": "p1", "action": "promote"})
    again = open_store(url, read_only=True)  # what one process wrote, another reads
    assert again.pointer()["sha256"] == "abc" and again.artifact("abc") == (".json", b"{}")
    assert [p["promotion_id"] for p in again.promotions()] == ["p1"]
    with pytest.raises(StoreError, match=r"routers: a folder store does not keep RunStore"):
        open_store(url, role=RunStore)
    with pytest.raises(StoreError, match=r"folderr://: unknown store scheme. Did you mean 'folder'"):
        open_store(url.replace("folder://", "folderr://"))


def test_a_verifier_is_one_class_plus_a_registration(monkeypatch, tmp_path):
    from advisor.service.process.config import load_config
    from advisor.verifier.base import VERIFIERS, VerifiedText
    from advisor.verifier.build import build_verifier

    monkeypatch.setattr(VERIFIERS, "_items", dict(VERIFIERS.items()))
    run_example("verifier")
    path = tmp_path / "service.yaml"
    text = "# example: verifier config\n" + blocks()["verifier config"]
    path.write_text(text)
    config = load_config(path)
    verifier = build_verifier(config.classes["chat"].verifier_config, None, None)
    short = asyncio.run(verifier.verify(VerifiedText("Hello there.", []), "hello"))
    long = asyncio.run(verifier.verify(VerifiedText("Hello there, how are you today?", []), "hello"))
    call = asyncio.run(verifier.verify(VerifiedText(None, [("read_file", {"path": "a"})]), "hello"))
    assert (short.accepted, short.detail) == (True, "2 words (at most 5)")
    assert (long.accepted, call.accepted) == (False, False)
    path.write_text(text.replace("type: word_limit", "type: word_limt"))
    with pytest.raises(ConfigError, match=r"service.yaml:6: classes.chat.verifier.type: Value error, unknown "
                                          "verifier 'word_limt'. Did you mean 'word_limit'"):
        load_config(path)


def test_a_session_signal_is_one_function_plus_an_entry(monkeypatch):
    """The page's signal fires on the step that shows it, after the builtins (their order is their strength)."""
    from advisor.service.process.config import SessionConfig
    from advisor.service.api.parse import parse_request
    from advisor.service.sessions.latch import SIGNALS, signals

    monkeypatch.setattr("advisor.service.sessions.latch.SIGNALS", dict(SIGNALS))
    import advisor.service.sessions.latch as sessions

    run_example("session signal")
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
    req = parse_request({"model": "auto", "messages": [
        {"role": "user", "content": "refund ORD-1"}, call,
        {"role": "tool", "tool_call_id": "c1", "content": "Policy: escalate to a human for refunds over $500."}]}, {})
    assert list(sessions.SIGNALS)[-1] == "asked_for_a_human"
    assert signals(req.messages[1:], SessionConfig()) == ["asked_for_a_human"]
    assert signals(req.messages[:1], SessionConfig()) == []
