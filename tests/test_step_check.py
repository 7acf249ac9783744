"""Replies as clients expect them (`advisor.service.api.chat.parse_reply`) and the step check that keeps a broken
step from reaching the client (`advisor.service.checks.step_check`), on the demo ladder's formats; the same cases run
through the real service in tests/test_agent_frameworks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.agent.formats import format_for
from advisor.ladder import load_ladder
from advisor.service.api.chat import parse_reply, stream_shown
from advisor.service.api.parse import parse_request
from advisor.service.checks.step_check import check_step, json_in

REPO = Path(__file__).resolve().parent.parent
ORDER = {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^ORD-"}},
         "required": ["order_id"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_order", "description": "Look an order up.",
                                           "parameters": ORDER}},
         {"type": "function", "function": {"name": "refund", "description": "Refund an order.", "parameters": ORDER}}]


@pytest.fixture(scope="module")
def rungs():
    return {r.name: r for r in load_ladder(REPO / "ladders" / "demo.yaml").rungs}


def _req(**fields):
    return parse_request({"model": "auto", "messages": [{"role": "user", "content": "Refund ORD-1."}], **fields}, {})


def _qwen(rungs):
    """A hermes_json rung: the demo's formats with a bare-JSON parser (Qwen on the CPU ladder writes this)."""
    return rungs["nano-12b"].model_copy(update={"tool_call_format": "hermes_json"})


def test_an_echoed_tool_definition_is_never_a_call_and_the_real_call_after_it_is(rungs):
    req = _req(tools=TOOLS)
    echoed = ('<tools>\n{"type": "function", "function": {"name": "get_order", "description": "Look an order up.", '
              f'"parameters": {json.dumps(ORDER)}}}}}\n</tools>\n'
              '{"name": "get_order", "parameters": ' + json.dumps(ORDER) + '}\n'
              'So: {"name": "get_order", "arguments": {"order_id": "ORD-1"}}')
    reply = parse_reply(_qwen(rungs), echoed, req)
    assert [c["function"]["name"] for c in reply.tool_calls] == ["get_order"]
    assert json.loads(reply.tool_calls[0]["function"]["arguments"]) == {"order_id": "ORD-1"}
    assert check_step(req, reply, "stop") is None and "parameters" not in (reply.content or "")
    only_echo = parse_reply(_qwen(rungs), '{"name": "get_order", "parameters": ' + json.dumps(ORDER) + '}', req)
    assert not only_echo.tool_calls, "a definition alone is no call"


@pytest.mark.parametrize("rung", ["nano-12b", "nano-30b", "super-120b"])
def test_two_calls_in_one_reply_are_two_entries_and_no_call_text_stays_in_content(rungs, rung):
    model = rungs[rung]
    fmt = format_for(model.tool_call_format)
    if model.tool_call_format == "nemotron_json":
        calls = '<TOOLCALL>[{"name": "get_order", "arguments": {"order_id": "ORD-1"}}, ' \
                '{"name": "refund", "arguments": {"order_id": "ORD-1"}}]</TOOLCALL>'
    else:
        calls = fmt.render_call("get_order", {"order_id": "ORD-1"}) + "\n" + fmt.render_call("refund", {"order_id": "ORD-1"})
    text = f"[SIMULATED {rung}] Looking it up.\n{calls}"
    reply = parse_reply(model, text, _req(tools=TOOLS))
    assert [c["function"]["name"] for c in reply.tool_calls] == ["get_order", "refund"]
    assert len({c["id"] for c in reply.tool_calls}) == 2 and reply.content == "Looking it up."
    assert check_step(_req(tools=TOOLS), reply, "stop") is None
    one = parse_reply(model, text, _req(tools=TOOLS, parallel_tool_calls=False))
    assert [c["function"]["name"] for c in one.tool_calls] == ["get_order"]


def test_bare_json_calls_leave_no_json_or_fence_in_content(rungs):
    text = 'I will call both.\n```json\n{"name": "get_order", "arguments": {"order_id": "ORD-1"}}\n' \
           '{"name": "refund", "arguments": {"order_id": "ORD-1"}}\n```'
    reply = parse_reply(_qwen(rungs), text, _req(tools=TOOLS))
    assert reply.content == "I will call both." and len(reply.tool_calls) == 2


@pytest.mark.parametrize("text, finish, kind", [
    ('Next: I will use refund.\n<TOOLCALL>[{"name": "refund", "arguments": {"order_id": "ORD-1', "length", "truncated"),
    ('<TOOLCALL>[{"name": "refund", "arguments": {"order_id": "ORD-1"}]</TOOLCALL>', "stop", "unparseable"),
    ('<TOOLCALL>[{"name": "refund", "arguments": {"order_id": 1042}}]</TOOLCALL>', "stop", "invalid_arguments"),
    ('<TOOLCALL>[{"name": "delete_order", "arguments": {"order_id": "ORD-1"}}]</TOOLCALL>', "stop", "not_offered"),
    ("", "stop", "empty"),
    ("[SIMULATED nano-12b] ", "stop", "empty"),
])
def test_broken_steps_are_named(rungs, text, finish, kind):
    req = _req(tools=TOOLS)
    broken = check_step(req, parse_reply(rungs["nano-12b"], text, req), finish)
    assert broken is not None and broken.kind == kind, broken


def test_tool_choice_forms_are_checked(rungs):
    answer = "I have what I need.\nFINAL ANSWER: refunded"
    model = rungs["nano-12b"]
    for choice in ("required", {"type": "function", "function": {"name": "refund"}},
                   {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
                       {"type": "function", "function": {"name": "refund"}}]}}):
        req = _req(tools=TOOLS, tool_choice=choice)
        assert check_step(req, parse_reply(model, answer, req), "stop").kind == "no_call"
    auto = _req(tools=TOOLS, tool_choice="auto")
    reply = parse_reply(model, answer, auto)
    assert reply.content == "refunded", "the marker is not the client's"
    assert check_step(auto, reply, "stop").kind == "skipped_tool"  # "Refund ORD-1." answered without calling refund
    only_refund = _req(tools=TOOLS, tool_choice={"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "refund"}}]}})
    call = parse_reply(model, '<TOOLCALL>[{"name": "get_order", "arguments": {"order_id": "ORD-1"}}]</TOOLCALL>',
                       only_refund)
    assert check_step(only_refund, call, "stop").kind == "not_offered"


def test_response_format_json_schema_is_checked_and_unwrapped(rungs):
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    req = _req(response_format={"type": "json_schema", "json_schema": {"name": "order", "schema": schema}})
    model = rungs["nano-30b"]
    labelled = parse_reply(model, '[SIMULATED nano-30b] {"order_id": "ORD-1042"}', req)
    assert check_step(req, labelled, "stop") is None and json.loads(labelled.content) == {"order_id": "ORD-1042"}
    fenced = parse_reply(model, 'Here:\n```json\n{"order_id": "ORD-1"}\n```', req)
    assert check_step(req, fenced, "stop") is None and fenced.content == '{"order_id": "ORD-1"}'
    assert check_step(req, parse_reply(model, '{"id": 3}', req), "stop").kind == "schema"
    assert check_step(req, parse_reply(model, "no JSON here", req), "stop").kind == "not_json"
    obj = _req(response_format={"type": "json_object"})
    assert check_step(obj, parse_reply(model, "[1, 2]", obj), "stop").kind == "not_json"
    assert json_in('x {"a": {"b": 1}} y') == ({"a": {"b": 1}}, '{"a": {"b": 1}}')


def test_a_streamed_reply_never_shows_the_label_or_the_marker(rungs):
    model = rungs["nano-30b"]
    full = "[SIMULATED nano-30b] Hello there. FINAL ANSWER: hi"
    shown = [stream_shown(model, full[:n]) for n in range(len(full) + 1)]
    assert all("SIMULATED" not in s and "FINAL" not in s for s in shown)
    assert all(a == b[:len(a)] for a, b in zip(shown, shown[1:])), "what was shown is never taken back"
    assert shown[-1] == "Hello there. "


@pytest.mark.parametrize("text, content", [
    ("Final ANSWER: The entries in the Larkspur audit log are kept for 35 days.",
     "The entries in the Larkspur audit log are kept for 35 days."),  # Qwen2.5-Coder on the CPU ladder, verbatim
    ("Final answer: kept for 35 days [kb-backups]", "kept for 35 days [kb-backups]"),
    ("final answer:[kb-audit]", "[kb-audit]"),
])
def test_the_marker_in_any_case_is_not_the_clients(rungs, text, content):
    req = _req(tools=TOOLS, messages=[{"role": "user", "content": "How long are audit log entries kept?"}])
    reply = parse_reply(_qwen(rungs), text, req)
    assert reply.content == content and reply.final == content and check_step(req, reply, "stop") is None
    plain = parse_reply(rungs["nano-30b"], text, _req())
    assert plain.content == content
    call = parse_reply(_qwen(rungs), 'Final Answer: {"name": "get_order", "arguments": {"order_id": "ORD-1"}}', req)
    assert call.content is None and [c["function"]["name"] for c in call.tool_calls] == ["get_order"]


def test_a_streamed_reply_never_shows_the_marker_in_any_case(rungs):
    model = rungs["nano-30b"]
    full = "Kept for 35 days. Final Answer: 35 days"
    shown = [stream_shown(model, full[:n]) for n in range(len(full) + 1)]
    assert all("Final" not in s for s in shown) and shown[-1] == "Kept for 35 days. "
    assert all(a == b[:len(a)] for a, b in zip(shown, shown[1:])), "what was shown is never taken back"


def test_a_rung_predicted_never_usable_does_not_lead_while_another_is_usable():
    from types import SimpleNamespace

    from advisor.router.routing.rule import PolicyConfig
    from advisor.service.routing.dispatch import never_usable

    rt = SimpleNamespace(ladder=SimpleNamespace(rungs=[SimpleNamespace(name=n) for n in ("smol", "qwen", "big")]))

    def plan(chain, allowed=("smol", "qwen", "big")):
        return SimpleNamespace(chain=list(chain), allowed=list(allowed), p_usable=0.0, explanation={})

    single = plan(["smol"])
    never_usable(rt, single, PolicyConfig(mode="single"), {"smol": 0.00001, "qwen": 0.4, "big": 0.9})
    assert single.chain == ["qwen"] and single.p_usable == 0.4 and "smol" in single.explanation["never_usable"]
    chained = plan(["smol", "big"])
    never_usable(rt, chained, PolicyConfig(mode="escalate"), {"smol": 0.0, "qwen": 0.0, "big": 0.9})
    assert chained.chain == ["big"] or chained.chain[0] == "big"
    alone = plan(["smol"], allowed=("smol",))
    never_usable(rt, alone, PolicyConfig(mode="single"), {"smol": 0.0, "qwen": 0.5, "big": 0.9})
    assert alone.chain == ["smol"], "the only allowed rung stays"
    usable = plan(["smol"])
    never_usable(rt, usable, PolicyConfig(mode="single"), {"smol": 0.2, "qwen": 0.5, "big": 0.9})
    assert usable.chain == ["smol"] and not usable.explanation


def test_the_step_check_can_be_switched_off_in_the_service_config():
    """``api: {step_check: false}``: replies go to the client as the rung wrote them (and stream as they come)."""
    from advisor.service.process.config import ApiConfig
    from advisor.service.checks.step_check import needs_check

    tools = [{"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}]
    asks = [_req(tools=tools), _req(response_format={"type": "json_object"})]
    assert all(needs_check(r, ApiConfig()) for r in asks)
    assert not any(needs_check(r, ApiConfig(step_check=False)) for r in asks)
    assert not needs_check(_req(), ApiConfig())


DOC_TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
    "type": "object", "properties": {p: {"type": "string"}}, "required": [p]}}}
    for n, d, p in (("search_docs", "Search the docs.", "query"), ("read_doc", "Read one page.", "doc_id"))]
ASK = "How long are backups kept? Search the documentation, read the relevant page, and answer."


def _docs_req(*history, **fields):
    return parse_request({"model": "auto", "tools": DOC_TOOLS, **fields, "messages": [
        {"role": "user", "content": ASK}, *history]}, {})


def _searched():
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "search_docs", "arguments": '{"query": "backups"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '[{"doc_id": "kb-backups"}]'}]


def test_an_answer_before_a_tool_the_user_asked_for_is_a_skipped_step(rungs):
    model = rungs["nano-30b"]
    answer = parse_reply(model, "FINAL ANSWER: Backups are kept 35 days [kb-backups].", _docs_req(*_searched()))
    broken = check_step(_docs_req(*_searched()), answer, "stop")
    assert broken is not None and broken.kind == "skipped_tool" and "read_doc" in broken.detail
    read = [*_searched(), {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function",
            "function": {"name": "read_doc", "arguments": '{"doc_id": "kb-backups"}'}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "Backups are kept 35 days."}]
    assert check_step(_docs_req(*read), answer, "stop") is None  # both asked-for verbs were used
    plain = parse_request({"model": "auto", "tools": DOC_TOOLS, "messages": [
        {"role": "user", "content": "What is the capital of France?"}]}, {})
    assert check_step(plain, parse_reply(model, "FINAL ANSWER: Paris.", plain), "stop") is None  # asked no tool
    off = type("Api", (), {"skipped_tools": False, "give_ups": True, "give_up_patterns": ()})()
    assert check_step(_docs_req(*_searched()), answer, "stop", off) is None


def test_the_skipped_tool_rule_reads_words_not_nouns():
    from advisor.service.checks.skipped_tools import asked_for, skipped

    tools = ["search_docs", "read_doc", "read_file", "list_files"]
    assert asked_for(tools, "List the action items from the meeting notes.") == []  # no "file" word
    assert asked_for(tools, "Skills is the list of languages; read the file.") == ["read_file"]
    assert skipped(tools, ["read_doc"], "Read the policy doc, then read the file cv.txt.") == []  # "read" was used
