"""The cases of issue 36, through the real service: `advisor serve` whose rungs (the demo ladder's names, router
trained on the demo's probe on the embedded Triton) are served by a scripted OpenAI-compatible endpoint on loopback
(the `openai` backend). Its smallest rung writes what real small models wrote: an echoed tool definition before the
call, two calls in one reply, a truncated call with a length stop, an empty reply; the rungs above write a call,
then an answer.

Each case asserts what the client receives (well-formed `tool_calls`, no call text in `content`) and what the
service did about it (in-request retries and escalations in headers, metrics and the store); plus the agent SDK's
default tool-error text escalating a session, and three concurrent identical runs keeping three latches.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from tests.test_service import DEMO, KEY, SUITE, Service, _chat, one_task_per_class

pytestmark = pytest.mark.triton

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"],
         "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_order", "description": "Look an order up.",
                                           "parameters": ORDER}},
         {"type": "function", "function": {"name": "refund", "description": "Refund an order.", "parameters": ORDER}}]
CALL = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "ORD-1042"}}\n</tool_call>'
REFUND = '<tool_call>\n{"name": "refund", "arguments": {"order_id": "ORD-1042"}}\n</tool_call>'
ECHO = ('<tools>\n{"type": "function", "function": {"name": "get_order", "description": "Look an order up.", '
        f'"parameters": {json.dumps(ORDER)}}}}}\n</tools>\n'
        '{"name": "get_order", "parameters": ' + json.dumps(ORDER) + '}\n'
        '{"name": "get_order", "arguments": {"order_id": "ORD-1042"}}')
CUT = 'Next: I will use get_order.\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": "ORD-10'


def scripted(model: str, case: str, seed: int | None, last: str) -> tuple[str, str]:
    """(text, finish_reason) a scripted rung writes: the small one as the case (named in the last user message)
    and seed say, the larger ones a call, then an answer once a tool result is in (`last`: the last role)."""
    if model != "scripted-small":
        return ("Refunded.\nFINAL ANSWER: ORD-1042 is refunded.", "stop") if last == "tool" else (CALL, "stop")
    if case == "echo":
        return ECHO, "stop"
    if case == "two":
        return f"Looking it up, then refunding.\n{CALL}\n{REFUND}", "stop"
    if case == "truncated-once":  # the retry (another seed) writes the call whole
        return (CUT, "length") if not seed else (CALL, "stop")
    if case == "truncated":
        return CUT, "length"
    if case == "empty":
        return "", "stop"
    if case == "longcut":  # a long answer cut at the rung's own output cap
        return "Here is a long explanation of the refund policy, which goes on and on", "length"
    if case == "greet":  # a chat reply: no tool call
        return "Hello! What can I do for you?", "stop"
    if case == "lookup":  # a call, then the JSON answer once the tool result is in
        return ('FINAL ANSWER: {"order_id": "ORD-1042"}', "stop") if last == "tool" else (CALL, "stop")
    if case == "skip-once":  # claims the refund without calling refund; the retry (another seed) calls it
        return ("FINAL ANSWER: ORD-1042 is refunded.", "stop") if not seed else (REFUND, "stop")
    if case == "giveup":  # the stand-ins' and small models' give-up, delivered as a well-formed answer
        return "I was not able to complete this task with the tools available.", "stop"
    return (REFUND if last == "tool" else CALL), "stop"  # look the order up, then refund it


class Scripted(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers `scripted` (and lists one model)."""

    def log_message(self, *args):
        pass

    def _send(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"object": "list", "data": [{"id": f"scripted-{s}", "object": "model"}
                                               for s in ("small", "mid", "big")]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        users = [m.get("content") or "" for m in body["messages"] if m["role"] == "user"]
        asked = next((u for u in reversed(users) if "CASE " in u), "")  # (a tool result may be the last user turn)
        case = asked.split("CASE ", 1)[1].split()[0] if asked else ""
        last = body["messages"][-1]  # (the openai backend sends a tool result as a <tool_response> user turn)
        role = "tool" if last["role"] == "tool" or "<tool_response>" in (last.get("content") or "") else last["role"]
        text, finish = scripted(body["model"], case, body.get("seed"), role)
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": finish}],
                    "usage": {"prompt_tokens": 50, "completion_tokens": max(len(text) // 4, 1),
                              "total_tokens": 50 + max(len(text) // 4, 1)}})


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def service(tmp_path_factory, triton_server, endpoint):
    """The demo ladder's rungs served by the scripted endpoint (hermes_json, as Qwen on the CPU ladder writes):
    nano-12b as each case says, the two above well. The router is trained on the demo's probe (same rung names)."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("step-cases")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url,
                          store_path=tmp / "probe.duckdb", replicas=1, conditions=("baseline",),
                          tasks=one_task_per_class()))
    ladder = yaml.safe_load(DEMO.read_text())
    for rung, size in zip(ladder["rungs"], ("small", "mid", "big")):
        rung.update(backend="openai", url=endpoint, triton_model=f"scripted-{size}", tool_call_format="hermes_json")
        rung.pop("standin")
    ladder["simulated"] = False
    ladder.pop("roles")
    (tmp / "ladder.yaml").write_text(yaml.safe_dump(ladder, sort_keys=False))
    (tmp / "keys.txt").write_text(f"full {KEY}\n")
    (tmp / "service.yaml").write_text("""version: 1
default_class: orders
classes:
  orders: {chain: [nano-12b], verifier: none}
  extraction:
    match: ['(?i)\\bextract\\b']
    chain: [nano-12b]
    verifier: {checks: [{type: json_schema, schema: {type: object, required: [order_id]}}]}
  routed: {match: ['ROUTED'], verifier: none}
sessions: {tool_errors: 2, start: router}
limits: {max_body_bytes: 4000000}
""")
    store = tmp / "live.duckdb"
    shutil.copy(tmp / "probe.duckdb", store)
    svc = Service(["--ladder", str(tmp / "ladder.yaml"), "--keys",
                   str(tmp / "keys.txt"), "--config", str(tmp / "service.yaml"), "--ingest-every", "0"], store)
    yield svc
    assert svc.stop() == 0, "".join(svc.lines)


def _ask(service, case: str, session: str | None = None, **kw):
    headers = {"x-advisor-session": session} if session else {}
    return _chat(service.client(), model="auto", tools=TOOLS, extra_headers=headers,
                 messages=[{"role": "user", "content": f"Refund order ORD-1042. CASE {case}"}], **kw)


def test_an_echoed_tool_definition_is_never_called(service):
    reply, h = _ask(service, "echo")
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_order"], "the definitions echoed first are no calls"
    assert json.loads(calls[0].function.arguments) == {"order_id": "ORD-1042"}
    assert "parameters" not in (reply.choices[0].message.content or "") and h["x-advisor-attempts"] == "1"


def test_two_calls_in_one_reply_are_two_tool_calls_with_no_call_text(service):
    reply, _ = _ask(service, "two")
    message = reply.choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_order", "refund"]
    assert message.content == "Looking it up, then refunding." and reply.choices[0].finish_reason == "tool_calls"
    with service.client().chat.completions.with_streaming_response.create(
            model="auto", tools=TOOLS, stream=True,
            messages=[{"role": "user", "content": "Refund order ORD-1042. CASE two"}]) as resp:
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    streamed = [t.function.name for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert streamed == ["get_order", "refund"] and "<tool_call>" not in text and "```" not in text
    one, _ = _ask(service, "two", parallel_tool_calls=False)
    assert [c.function.name for c in one.choices[0].message.tool_calls] == ["get_order"]


def test_a_truncated_call_is_retried_on_the_same_rung(service):
    reply, h = _ask(service, "truncated-once")
    assert reply.choices[0].message.tool_calls[0].function.name == "get_order"
    assert h["x-advisor-rung"] == "nano-12b" and h["x-advisor-attempts"] == "2"
    assert h["x-advisor-broken-steps"] == "truncated@nano-12b"
    decision, attempts = service.records(h["x-advisor-decision-id"])
    assert (attempts[0]["verdict"] or "").startswith("invalid: truncated")
    assert attempts[0]["finish_reason"] == "length" and attempts[1]["accepted"] is None


def test_a_call_truncated_on_every_try_escalates_and_the_latch_moves_with_it(service):
    reply, h = _ask(service, "truncated", session="cut-every-time")
    assert h["x-advisor-rung"] == "nano-30b" and h["x-advisor-attempts"] == "3"
    assert h["x-advisor-broken-steps"] == "truncated@nano-12b,truncated@nano-12b"
    assert h["x-advisor-escalation"] == "broken_step nano-12b->nano-30b"
    message = reply.choices[0].message
    assert "<tool_call>" not in (message.content or "") and (message.tool_calls or message.content)
    _, later = _ask(service, "anything", session="cut-every-time")
    assert later["x-advisor-rung"] == "nano-30b" and later["x-advisor-session-step"] == "2"
    metrics = service.client()._client.get(service.base + "/metrics", headers={"authorization": f"Bearer {KEY}"}).text
    assert re.search(r'advisor_broken_steps_total\{(kind="truncated",rung="nano-12b"|rung="nano-12b",kind="truncated")\} [1-9]',
                     metrics), [ln for ln in metrics.splitlines() if "broken" in ln]


def test_an_empty_reply_never_reaches_the_client(service):
    reply, h = _ask(service, "empty")
    assert h["x-advisor-broken-steps"].startswith("empty@nano-12b") and h["x-advisor-rung"] != "nano-12b"
    assert reply.choices[0].message.content or reply.choices[0].message.tool_calls


def test_the_agents_sdk_tool_error_text_escalates_a_session(service):
    client = service.client()
    sdk = "An error occurred while running the tool. Please try again. Error: order service down"
    convo = [{"role": "user", "content": "Refund order ORD-1042. CASE call"}]
    rungs = []
    for result in (sdk, '{"error": "down"}', None):  # two error results in a row: tool_errors 2
        reply, h = _chat(client, model="auto", tools=TOOLS, messages=convo,
                         extra_headers={"x-advisor-session": "sdk-errors"})
        rungs.append((h["x-advisor-rung"], h.get("x-advisor-escalation")))
        if result is not None:
            call = reply.choices[0].message.tool_calls[0]
            convo = convo + [reply.choices[0].message.model_dump(exclude_none=True),
                             {"role": "tool", "tool_call_id": call.id, "content": result}]
    assert rungs == [("nano-12b", None), ("nano-12b", None), ("nano-30b", "tool_errors nano-12b->nano-30b")]


def test_three_concurrent_identical_runs_keep_three_latches(service):
    """Three runs that open the same way (derived sessions): one run's tool errors move only its own latch."""
    client = service.client()
    opening = [{"role": "system", "content": "You handle refunds."},
               {"role": "user", "content": "Refund order ORD-1042. CASE call"}]

    def first(_):
        return _chat(client, model="auto", tools=TOOLS, messages=opening)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        starts = list(pool.map(first, range(3)))
    sessions = [h["x-advisor-session"] for _, h in starts]
    assert len(set(sessions)) == 3 and all(s.startswith("drv_") for s in sessions)

    def step(run, result: str):
        reply, _ = run
        message = reply.choices[0].message
        convo = opening + [message.model_dump(exclude_none=True),
                           {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": result}]
        return convo, _chat(client, model="auto", tools=TOOLS, messages=convo)

    convo_a, (reply_a, ha) = step(starts[0], "Error: order service down")
    assert ha["x-advisor-session"] == sessions[0] and ha["x-advisor-session-step"] == "2"
    call = reply_a.choices[0].message
    convo_a = convo_a + [call.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "Error: still down"}]
    _, ha3 = _chat(client, model="auto", tools=TOOLS, messages=convo_a)
    assert ha3["x-advisor-escalation"] == "tool_errors nano-12b->nano-30b" and ha3["x-advisor-session"] == sessions[0]
    for run, sid in zip(starts[1:], sessions[1:]):
        _, (_, h) = step(run, "order ORD-1042: 19.99 EUR")
        assert (h["x-advisor-session"], h["x-advisor-session-step"], h["x-advisor-rung"]) == (sid, "2", "nano-12b")
        assert "x-advisor-escalation" not in h, "another run's errors did not move this latch"


def test_a_tool_call_in_a_class_with_an_answer_verifier_is_not_judged_by_it(service):
    """The extraction class's json_schema check judges answers: the agent's tool-call step passes through on the
    first attempt, unverified; the answer after the tool result is judged."""
    convo = [{"role": "user", "content": "Extract the order ORD-1042 as JSON. CASE lookup"}]
    reply, h = _chat(service.client(), model="auto", tools=TOOLS, messages=convo)
    message = reply.choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_order"]
    assert h["x-advisor-verdict"] == "unverified" and h["x-advisor-attempts"] == "1", dict(h)
    decision, attempts = service.records(h["x-advisor-decision-id"])
    assert decision["task_class"] == "extraction" and attempts[0]["verified"] in (None, False)
    convo += [message.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": '{"order_id": "ORD-1042"}'}]
    answer, later = _chat(service.client(), model="auto", tools=TOOLS, messages=convo)
    assert json.loads(answer.choices[0].message.content) == {"order_id": "ORD-1042"}
    assert later["x-advisor-verdict"] == "accepted", "the answer is judged, and passes"


def test_a_give_up_on_the_cheapest_rung_escalates_and_moves_the_session(service):
    reply, h = _ask(service, "giveup", session="gives-up")
    assert h["x-advisor-broken-steps"].startswith("gave_up@nano-12b") and h["x-advisor-rung"] == "nano-30b"
    assert h["x-advisor-escalation"] == "gave_up nano-12b->nano-30b"
    assert reply.choices[0].message.tool_calls, "the rung above did the work"
    _, later = _ask(service, "anything", session="gives-up")
    assert later["x-advisor-rung"] == "nano-30b" and later["x-advisor-session-step"] == "2"


def test_an_answer_that_skips_the_tool_the_user_asked_for_is_retried(service):
    """"Refund order ORD-1042." answered "refunded" without calling refund is a skipped step: retried on the rung
    (another seed), which then calls refund; the client gets the call, never the claim."""
    reply, h = _ask(service, "skip-once")
    assert h["x-advisor-broken-steps"] == "skipped_tool@nano-12b" and h["x-advisor-rung"] == "nano-12b"
    message = reply.choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["refund"] and "refunded" not in (message.content or "")


def test_a_prompt_too_long_for_a_rung_passes_it_over_and_too_long_for_all_is_400(service):
    """nano-12b holds 131,072 tokens, the two above 262,144 (demo ladder); the prompt is estimated at 4 characters
    a token."""
    client = service.client()
    mid = "ROUTED " + "word " * 120_000  # about 150k tokens: too long for nano-12b only
    _, h = _chat(client, model="auto", messages=[{"role": "user", "content": mid}])
    assert h["x-advisor-rung"] != "nano-12b"
    chained = client._client.post(service.base + "/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                                  json={"model": "auto", "messages": [{"role": "user", "content": mid[7:]}]},
                                  timeout=60)  # class orders: its chain is nano-12b alone
    assert chained.status_code == 400 and chained.json()["error"]["code"] == "context_length_exceeded"
    huge = "word " * 600_000  # about 750k tokens: too long for every rung
    raw = client._client.post(service.base + "/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                              json={"model": "auto", "messages": [{"role": "user", "content": huge}]}, timeout=60)
    assert raw.status_code == 400, raw.text
    error = raw.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "127.0.0.1" not in raw.text and "http" not in error["message"]
    pinned = client._client.post(service.base + "/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                                 json={"model": "nano-12b", "messages": [{"role": "user", "content": mid}]}, timeout=60)
    assert pinned.status_code == 400 and pinned.json()["error"]["code"] == "context_length_exceeded"


def test_a_failure_that_would_repeat_says_so(service):
    """Every rung's step truncated at the client's own max_tokens: 502, and x-should-retry false so that the SDK
    does not send it three times."""
    raw = service.client()._client.post(
        service.base + "/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
        json={"model": "nano-12b", "tools": TOOLS, "max_tokens": 5,
              "messages": [{"role": "user", "content": "Refund order ORD-1042. CASE truncated"}]}, timeout=60)
    assert raw.status_code == 502, raw.text
    assert raw.headers["x-should-retry"] == "false"


def test_the_bearer_scheme_is_matched_in_any_case(service):
    """RFC 7235: the auth scheme is case-insensitive."""
    for scheme in ("bearer", "BEARER", "Bearer"):
        raw = service.client()._client.get(service.base + "/v1/models", headers={"authorization": f"{scheme} {KEY}"})
        assert raw.status_code == 200, (scheme, raw.text)


def test_a_tool_result_for_a_call_nobody_made_is_400(service):
    raw = service.client()._client.post(
        service.base + "/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
        json={"model": "auto", "tools": TOOLS, "messages": [
            {"role": "user", "content": "Refund order ORD-1042."},
            {"role": "tool", "tool_call_id": "call_nobody_made", "content": "{}"}]}, timeout=30)
    assert raw.status_code == 400, raw.text
    error = raw.json()["error"]
    assert error["param"] == "messages.1.tool_call_id" and "call_nobody_made" in error["message"]


def test_readiness_names_rungs_never_addresses(service, endpoint):
    raw = service.client()._client.get(service.base + "/readyz", headers={"authorization": f"Bearer {KEY}"})
    host_port = endpoint.split("//", 1)[1].split("/", 1)[0]
    assert raw.status_code == 200 and "nano-12b" in raw.text
    assert host_port not in raw.text and "http://" not in raw.text, raw.text


def test_a_refused_body_closes_its_connection(service):
    """A 413 (the declared body is over the limit): the service answers and closes the connection, which is not
    kept alive for a client that would send the refused body on it."""
    import socket

    host, port = service.base.split("//", 1)[1].rsplit(":", 1)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {KEY}\r\n"
            f"content-type: application/json\r\ncontent-length: 4100000\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        got = b""
        while True:
            piece = sock.recv(65536)  # b"" once the service closed the connection; a timeout if it never does
            if not piece:
                break
            got += piece
    assert got.startswith(b"HTTP/1.1 413"), got[:200]
    assert b"connection: close" in got.lower()


def test_two_people_with_the_same_opening_never_share_a_session(service):
    """Two users send the same system prompt, tools and "Hello", and get the same greeting back; their next
    messages differ. One user's tool errors escalate only that user's session; the other's next turn starts on
    the cheapest rung, as its own session (no client header: derived ids). The request's `user` field alone
    separates two otherwise identical openings too."""
    client = service.client()
    opening = [{"role": "system", "content": "You are the shop's assistant."},
               {"role": "user", "content": "Hello CASE greet"}]

    def chat(messages, **kw):
        return _chat(client, model="auto", tools=TOOLS, messages=messages, **kw)

    greet_a, ha1 = chat(opening)
    greet_b, hb1 = chat(opening)
    assert greet_a.choices[0].message.content == greet_b.choices[0].message.content
    a = opening + [greet_a.choices[0].message.model_dump(exclude_none=True),
                   {"role": "user", "content": "Refund order ORD-1042 please. CASE call"}]
    rungs_a = []
    for result in ("Error: order service down", "Error: still down", None):
        reply, h = chat(a)
        rungs_a.append((h["x-advisor-rung"], h.get("x-advisor-escalation")))
        if result is not None:
            call = reply.choices[0].message
            a = a + [call.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": result}]
    assert rungs_a[-1] == ("nano-30b", "tool_errors nano-12b->nano-30b"), rungs_a
    b = opening + [greet_b.choices[0].message.model_dump(exclude_none=True),
                   {"role": "user", "content": "Where is my parcel ORD-7? CASE call"}]
    _, hb2 = chat(b)
    assert hb2["x-advisor-rung"] == "nano-12b" and hb2["x-advisor-session"] != h["x-advisor-session"]
    assert hb2["x-advisor-session-step"] == "1" and "x-advisor-escalation" not in hb2
    _, hu1 = chat(opening + [{"role": "assistant", "content": "Hi"}], user="alice")
    _, hu2 = chat(opening + [{"role": "assistant", "content": "Hi"}], user="bob")
    assert hu1["x-advisor-session"] != hu2["x-advisor-session"]


def test_a_cut_at_the_rungs_own_cap_is_escalated_and_a_cut_the_client_asked_for_is_incomplete(service):
    """`/v1/responses` with tools and no max_output_tokens: nano-12b's reply stops at its own length limit, which
    the client never asked for, so the step goes to the rung above and the response is completed (the Agents SDK
    raises on an incomplete one). With max_output_tokens set, the same cut is the client's: incomplete."""
    tools = [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
              "parameters": t["function"]["parameters"]} for t in TOOLS]
    client = service.client()
    raw = client.responses.with_raw_response.create(model="auto", tools=tools,
                                                    input="Explain the refund policy. CASE longcut")
    done = raw.parse()
    assert done.status == "completed" and raw.headers["x-advisor-rung"] != "nano-12b"
    assert raw.headers["x-advisor-broken-steps"].startswith("cut_at_cap@nano-12b")
    asked = client.responses.with_raw_response.create(model="nano-12b", tools=tools, max_output_tokens=64,
                                                      input="Explain the refund policy. CASE longcut")
    cut = asked.parse()
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
