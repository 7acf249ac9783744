"""Stand-ins acting on tools they do not know (`advisor.standin.tooluse`): schema-valid calls read off the
conversation, answers in text or the JSON asked for, and each rung's failure modes at its calibrated rates."""

import json
from collections import Counter

import jsonschema
import pytest

from advisor.agent.chat import DEFAULT
from advisor.agent.formats import format_for
from advisor.ladder import load_ladder
from advisor.standin import responder_for
from advisor.standin.arguments import Context, fill_object
from advisor.standin.tooluse import asked_json, choose_tools, offered_tools

TOOLS = [
    {"name": "get_order", "description": "Look up an order by its id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}},
    {"name": "refund_order", "description": "Refund an order.",
     "parameters": {"type": "object", "required": ["order_id", "amount_cents", "reason"], "properties": {
         "order_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1},
         "reason": {"type": "string", "enum": ["damaged", "late", "other"],
                    "description": "Why: one of damaged, late, other."}}}},
    {"name": "send_email", "description": "Send an e-mail to a customer.",
     "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"]}},
]
ASK = "Look up order ORD-1042 and refund it in full; it arrived damaged."
SCHEMA = {"type": "object", "properties": {"refund_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
          "required": ["refund_id", "amount_cents"], "additionalProperties": False}


@pytest.fixture(scope="module")
def ladder():
    return load_ladder("ladders/demo.yaml")


def run_tool(name, args):
    if name == "get_order":
        return json.dumps({"order_id": args["order_id"], "total_cents": 1999, "status": "delivered"})
    return json.dumps({"refund_id": "re_8812", "status": "pending", "amount_cents": args["amount_cents"]})


def conversation(responder, fmt, seed, system="", retries=0, max_steps=8):
    """Drive one conversation as a client behind the service would: run each schema-valid call, resend a broken
    step up to `retries` times. Returns (outcome, calls, final text, broken steps seen)."""
    messages = [{"role": "system", "content": "\n\n".join(filter(None, [system, fmt.render_tools(TOOLS)]))},
                {"role": "user", "content": ASK}]
    calls, broken = [], 0
    for _ in range(max_steps):
        for _attempt in range(retries + 1):
            g = responder(DEFAULT.render(messages), {"seed": seed, "max_tokens": 1024})
            parsed = fmt.parse(g.text, TOOLS)
            spec = next((t for t in TOOLS if t["name"] == parsed.name), None)
            ok = parsed.kind == "final" or (parsed.kind == "call" and spec is not None and g.finish_reason == "stop"
                                            and jsonschema.Draft202012Validator(spec["parameters"]).is_valid(
                                                parsed.arguments))
            if ok:
                break
            broken += 1
        if not ok:
            return "broken", calls, None, broken
        if parsed.kind == "final":
            return "final", calls, parsed.final, broken
        calls.append((parsed.name, parsed.arguments))
        messages += [{"role": "assistant", "content": g.text},
                     {"role": "tool", "content": run_tool(parsed.name, parsed.arguments)}]
    return "stuck", calls, None, broken


@pytest.mark.parametrize("rung, fmt_name", [("super-120b", "qwen3_xml"), ("nano-30b", "qwen3_coder"),
                                            ("nano-12b", "nemotron_json")])
def test_calls_the_offered_tools_with_valid_arguments_then_answers(ladder, rung, fmt_name):
    """A converging episode looks the order up, refunds it with the looked-up amount and the enum value the
    message names, and answers with the result, in every format."""
    fmt = format_for(fmt_name)
    for seed in range(60):
        outcome, calls, final, broken = conversation(responder_for(ladder.rung(rung)), fmt, seed)
        if outcome == "final" and len(calls) == 2 and not broken:
            break
    else:
        pytest.fail(f"{rung} never completed the task in 60 seeds")
    assert calls == [("get_order", {"order_id": "ORD-1042"}),
                     ("refund_order", {"order_id": "ORD-1042", "amount_cents": 1999, "reason": "damaged"})]
    assert final.startswith(f"[SIMULATED {rung}]") and "re_8812" in final


def test_completion_rates_follow_the_rungs(ladder):
    """super-120b completes the two-call task nearly always, nano-30b often, nano-12b rarely (one retry per
    broken step, as the service's in-request retry does)."""
    done = {}
    for rung in ("nano-12b", "nano-30b", "super-120b"):
        fmt = format_for(ladder.rung(rung).tool_call_format)
        outcomes = Counter()
        for seed in range(150):
            outcome, calls, final, _ = conversation(responder_for(ladder.rung(rung)), fmt, seed, retries=1)
            outcomes["done" if outcome == "final" and final and "re_8812" in final else outcome] += 1
        done[rung] = outcomes["done"] / 150
    assert done["super-120b"] >= 0.95 and 0.75 <= done["nano-30b"] < done["super-120b"] and done["nano-12b"] <= 0.1


def test_a_retry_usually_fixes_a_slip_but_not_a_failing_episode(ladder):
    """Slips are drawn per attempt (a resent step is answered afresh); an episode below the floor breaks the
    same way every time."""
    fmt = format_for("nemotron_json")
    rescued = repeated = 0
    for seed in range(200):
        _, _, _, no_retry = conversation(responder_for(ladder.rung("nano-12b")), fmt, seed)
        outcome, _, _, with_retry = conversation(responder_for(ladder.rung("nano-12b")), fmt, seed, retries=3)
        rescued += bool(no_retry) and outcome != "broken"
        repeated += outcome == "broken" and with_retry >= 4
    assert rescued >= 3 and repeated >= 10


def test_truncated_call_stops_on_length_and_runs_are_deterministic(ladder):
    fmt = format_for("nemotron_json")
    messages = [{"role": "system", "content": fmt.render_tools(TOOLS)}, {"role": "user", "content": ASK}]
    prompt = DEFAULT.render(messages)
    seen = {}
    for seed in range(300):
        g = responder_for(ladder.rung("nano-12b"))(prompt, {"seed": seed, "max_tokens": 1024})
        seen.setdefault(g.finish_reason, (seed, g))
    assert set(seen) == {"stop", "length"}
    seed, cut = seen["length"]
    assert fmt.parse(cut.text, TOOLS).kind == "invalid"
    assert responder_for(ladder.rung("nano-12b"))(prompt, {"seed": seed, "max_tokens": 1024}) == cut


def test_json_answer_when_the_system_prompt_asks_for_a_schema(ladder):
    fmt = format_for("qwen3_xml")
    system = "Reply with JSON that matches this JSON schema: " + json.dumps(SCHEMA)
    for seed in range(30):
        outcome, calls, final, broken = conversation(responder_for(ladder.rung("super-120b")), fmt, seed, system)
        if outcome == "final" and not broken:
            break
    answer = json.loads(final)
    jsonschema.validate(answer, SCHEMA)
    assert answer == {"refund_id": "re_8812", "amount_cents": 1999}
    r = responder_for(ladder.rung("nano-30b"))  # a plain chat (no tools) asking for JSON gets the JSON alone
    g = r(DEFAULT.render([{"role": "system", "content": "Answer in JSON."},
                          {"role": "user", "content": "Extract the order id from: ORD-1042 late"}]), {"max_tokens": 99})
    assert json.loads(g.text) == {"answer": "ORD-1042"}


def test_reads_tool_lists_of_every_format_and_picks_the_named_tools():
    for name in ("hermes", "hermes_json", "nemotron_json", "qwen3_coder", "qwen3_xml"):
        tools = offered_tools(format_for(name).render_tools(TOOLS))
        assert [t.name for t in tools] == ["get_order", "refund_order", "send_email"], name
        assert tools[1].parameters["required"] == ["order_id", "amount_cents", "reason"], name
        assert asked_json(format_for(name).render_tools(TOOLS)) is None, name  # its own JSON call syntax is no ask
        assert [t.name for t in choose_tools(tools, ASK)] == ["get_order", "refund_order"]
    ctx = Context("Mail ann@example.com about ORD-7: 'parcel lost'", ['{"total_cents": 500}'])
    args = fill_object({"type": "object", "required": ["to", "body", "ids", "amount_cents", "urgent"], "properties": {
        "to": {"type": "string", "format": "email"}, "body": {"type": "string"}, "urgent": {"type": "boolean"},
        "ids": {"type": "array", "items": {"type": "string"}}, "amount_cents": {"type": "integer"}}}, ctx)
    assert args == {"to": "ann@example.com", "body": ctx.user_text, "ids": ["ORD-7"], "amount_cents": 500,
                    "urgent": True}


def test_a_text_argument_takes_the_value_the_prompt_names_not_the_prompt():
    """An unseen tool's text argument is filled as a model would: with the name the message gives for it."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert fill_object(schema, Context("What is the weather in Lisbon right now? Use the tool.")) == {"city": "Lisbon"}
    person = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert fill_object(person, Context("Look up the account of Ada Lovelace, please.")) == {"name": "Ada Lovelace"}


LOOKUPS = [
    {"name": "get_order", "description": "Look up an order by its id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}},
    {"name": "get_customer", "description": "Look up a customer by e-mail address.",
     "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}},
    {"name": "read_doc", "description": "Read a document by its id.",
     "parameters": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]}},
]


@pytest.mark.parametrize("rung", ["super-120b", "nano-30b", "nano-12b"])
def test_two_lookups_the_message_names_go_in_one_reply(ladder, rung):
    """Two look-ups whose arguments the message gives are written as two calls in one reply (in each rung's own
    tool-call format), each read back with its own result; a look-up that needs an earlier result waits for it."""
    fmt = format_for(ladder.rung(rung).tool_call_format)
    ask = "Get order ORD-1042 and the customer ann@example.com, then tell me both."
    responder = responder_for(ladder.rung(rung))
    for seed in range(80):
        messages = [{"role": "system", "content": fmt.render_tools(LOOKUPS)}, {"role": "user", "content": ask}]
        g = responder(DEFAULT.render(messages), {"seed": seed, "max_tokens": 1024})
        parsed = fmt.parse(g.text, LOOKUPS)
        if parsed.kind != "call" or len(parsed.calls) != 2 or parsed.later_error is not None:
            continue
        messages += [{"role": "assistant", "content": g.text},
                     {"role": "tool", "content": '{"order_id": "ORD-1042", "status": "delivered"}'},
                     {"role": "tool", "content": '{"email": "ann@example.com", "name": "Ann"}'}]
        final = fmt.parse(responder(DEFAULT.render(messages), {"seed": seed, "max_tokens": 1024}).text, LOOKUPS)
        if final.kind == "final" and "delivered" in final.final and "Ann" in final.final:
            break
    else:
        pytest.fail(f"{rung} never wrote both look-ups in one reply and answered from both results in 80 seeds")
    assert list(parsed.calls) == [("get_order", {"order_id": "ORD-1042"}), ("get_customer", {"email": "ann@example.com"})]
    # the document's id comes from no message: one call, then the next when its result is known
    from advisor.standin.tooluse import Tool, given_by_message

    assert not given_by_message(Tool(**LOOKUPS[2]), "Find the refund policy and read the doc it points to.")
    assert given_by_message(Tool(**LOOKUPS[1]), ask)
