"""Agent sessions through the real service: `advisor serve` on the embedded Triton, driven with the openai client.

A session is latched to the rung of its first step; repeated tool errors or a stuck loop escalate it once, and
it stays above, with the reason in ``x-advisor-escalation`` and in the store (`advisor.service.sessions.latch`).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.test_service import AUTH, DEMO, KEY, SUITE, Service, _chat

pytestmark = pytest.mark.triton
KEY_B = "sk-test-teamb"  #: a second tenant's key


@pytest.fixture(scope="module")
def session_service(tmp_path_factory, triton_server):
    """A service whose class `agent` starts on nano-12b (a one-rung cascade, so the first rung is known)."""
    from advisor.probe import ProbeConfig, run_probe
    from advisor.suite import load_suite

    tmp = tmp_path_factory.mktemp("sessions")
    suite = load_suite(SUITE)
    tasks = []  # one task of each class, three of extraction (the session start needs 3 runs per rung)
    for t in suite.tasks:
        if sum(x.task_class == t.task_class for x in tasks) < (3 if t.task_class == "extraction" else 1):
            tasks.append(t)
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url,
                          store_path=tmp / "probe.duckdb", replicas=1, conditions=("baseline",),
                          tasks=[t.id for t in tasks]))
    (tmp / "keys.txt").write_text(f"full {KEY}\nteamb {KEY_B}\n")
    from advisor.cli import main

    assert main(["router", "train", "--store", str(tmp / "probe.duckdb"), "--out", str(tmp / "candidate.json"),
                 "--C", "0.05", "--folds", "2"]) == 0  # the shadow candidate
    (tmp / "service.yaml").write_text(f"""version: 1
default_class: chat
classes:
  chat: {{verifier: none}}
  agent: {{chain: [nano-12b], verifier: none}}
  checked:
    match: ['(?i)\\bcheck\\b']
    verifier: {{checks: [{{type: regex, pattern: '\\w'}}]}}
sessions: {{tool_errors: 2}}
shadow: {{artifact: {tmp / "candidate.json"}}}
""")
    store = tmp / "live.duckdb"
    shutil.copy(tmp / "probe.duckdb", store)
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(tmp / "keys.txt"),
                   "--config", str(tmp / "service.yaml"), "--ingest-every", "0", "--workers", "2"], store)
    yield svc
    assert svc.stop() == 0, "".join(svc.lines)


TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]


def _call(i: int, path: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]}


def _result(i: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": text}


def test_six_calls_of_one_session_land_on_one_rung(session_service):
    client = session_service.client()
    texts = ["Say hello.", "Extract the name from: Ada Lovelace, 1815.", "Write a haiku about rust.",
             "What is 2 + 2?", "Extract the JSON field id from {\"id\": 3}.", "Summarise the plot of Hamlet."]
    rungs, ids = [], []
    for i, text in enumerate(texts, start=1):
        _, h = _chat(client, model="auto", messages=[{"role": "user", "content": text}],
                     extra_headers={"x-advisor-session": "six-calls"})
        assert h["x-advisor-session"] == "six-calls" and h["x-advisor-session-step"] == str(i)
        assert "x-advisor-escalation" not in h
        rungs.append(h["x-advisor-rung"])
        ids.append(h["x-advisor-decision-id"])
    assert len(set(rungs)) == 1, rungs
    rows = [session_service.records(d)[0] for d in ids]
    assert [r["session_step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert {r["session_id"] for r in rows} == {"six-calls"} and {r["session_source"] for r in rows} == {"given"}
    assert rows[1]["policy"] == "session" and rows[0]["policy"] != "session"
    _, attempts = session_service.records(ids[-1])
    assert attempts[0]["session_id"] == "six-calls" and attempts[0]["session_step"] == 6


def test_repeated_tool_errors_escalate_once_and_latch_above(session_service):
    client = session_service.client()
    convo = [{"role": "user", "content": "Read the config and report the port."}]
    steps = [[], [_call(1, "a.cfg"), _result(1, "ERROR: no such file a.cfg")],
             [_call(2, "b.cfg"), _result(2, "ERROR: no such file b.cfg")],
             [_call(3, "c.cfg"), _result(3, "port = 80")], [_call(4, "d.cfg"), _result(4, "ok")]]
    seen = []
    for extra in steps:
        convo = convo + extra
        _, h = _chat(client, model="auto", messages=convo, tools=TOOLS,
                     extra_headers={"x-advisor-session": "tool-errors", "x-advisor-class": "agent"})
        seen.append((h["x-advisor-rung"], h.get("x-advisor-escalation"), h["x-advisor-decision-id"]))
    assert [s[0] for s in seen] == ["nano-12b", "nano-12b", "nano-30b", "nano-30b", "nano-30b"]
    assert [s[1] for s in seen] == [None, None, "tool_errors nano-12b->nano-30b", None, None]
    row, _ = session_service.records(seen[2][2])
    assert row["escalation"] == "tool_errors nano-12b->nano-30b" and row["session_start_rung"] == "nano-12b"
    assert row["session_step"] == 3 and row["chosen_rung"] == "nano-30b"
    later, _ = session_service.records(seen[4][2])
    assert later["escalation"] is None and later["chosen_rung"] == "nano-30b"
    metrics = client._client.get(session_service.base + "/metrics", headers=AUTH).text  # summed over the two workers
    assert 'advisor_session_escalations_total{from_rung="nano-12b",reason="tool_errors",to_rung="nano-30b"} 1.0' \
        in metrics


def test_stuck_loop_escalates_a_derived_session_once(session_service):
    client = session_service.client()
    convo = [{"role": "system", "content": "You are a careful agent."},
             {"role": "user", "content": "Find the port in the config (stuck-loop test)."}]
    out = []
    for i in range(5):
        if i:  # the same call twice, then progress on the rung above (new calls)
            convo = convo + [_call(i, "same.cfg" if i <= 2 else f"other-{i}.cfg"), _result(i, "nothing here")]
        _, h = _chat(client, model="auto", messages=convo, tools=TOOLS, extra_body={"advisor": {"class": "agent"}})
        out.append((h["x-advisor-rung"], h.get("x-advisor-escalation"), h["x-advisor-session"]))
    assert len({o[2] for o in out}) == 1 and out[0][2].startswith("drv_")
    # the second identical call is stuck by the session rule (stuck_repeats 2), before the agent loop's own 3
    assert [o[0] for o in out] == ["nano-12b", "nano-12b", "nano-30b", "nano-30b", "nano-30b"]
    assert [o[1] for o in out] == [None, None, "stuck nano-12b->nano-30b", None, None]
    metrics = client._client.get(session_service.base + "/metrics", headers=AUTH).text
    assert 'advisor_session_escalations_total{from_rung="nano-12b",reason="stuck",to_rung="nano-30b"} 1.0' in metrics


def test_a_session_with_tools_starts_on_the_least_usd_per_usable_trajectory(session_service):
    client = session_service.client()
    assert any("session start: least expected USD per usable trajectory, from" in line and "extraction" in line
               for line in session_service.lines), "".join(session_service.lines)
    convo = [{"role": "user", "content": "Extract the invoice number from the attached note (session start)."}]
    extraction = {"advisor": {"task_class": "extraction"}}
    _, h = _chat(client, model="auto", messages=convo, tools=TOOLS, extra_body=extraction,
                 extra_headers={"x-advisor-session": "start-maths"})
    row, _ = session_service.records(h["x-advisor-decision-id"])
    assert row["policy"].startswith("session-start:") and row["router_version"] in row["policy"], row["policy"]
    options = json.loads(row["explanation_json"])["session_start"]
    assert set(options) == {"nano-12b", "nano-30b", "super-120b"}
    per_usable = {r: o["expected_usd"] / o["p_usable"] for r, o in options.items() if o["p_usable"] > 0}
    assert h["x-advisor-rung"] == min(per_usable, key=per_usable.get)
    convo = convo + [_call(1, "note.txt"), _result(1, "invoice INV-7")]
    _, later = _chat(client, model="auto", messages=convo, tools=TOOLS, extra_body=extraction,
                     extra_headers={"x-advisor-session": "start-maths"})
    assert later["x-advisor-rung"] == h["x-advisor-rung"] and "x-advisor-escalation" not in later
    # without tools (a plain chat) or for a class the probe measured too little, the router's policy starts it
    _, plain = _chat(client, model="auto", messages=[{"role": "user", "content": "Extract the id from {\"id\": 4}."}],
                     extra_body={"advisor": {"task_class": "extraction"}}, extra_headers={"x-advisor-session": "plain"})
    assert not session_service.records(plain["x-advisor-decision-id"])[0]["policy"].startswith("session-start")
    _, thin = _chat(client, model="auto", messages=[{"role": "user", "content": "Fix the bug in app.py."}], tools=TOOLS,
                    extra_body={"advisor": {"task_class": "code_change"}}, extra_headers={"x-advisor-session": "thin"})
    assert not session_service.records(thin["x-advisor-decision-id"])[0]["policy"].startswith("session-start")


def test_shadow_candidate_is_recorded_beside_and_reported(session_service, capsys):
    from advisor.cli import main
    from advisor.service.launch import ingest_now

    client = session_service.client()
    ids = []
    for i in range(30):
        _, h = _chat(client, model="auto", messages=[{"role": "user", "content": f"Check item {i}: is it in stock?"}])
        assert h["x-advisor-class"] == "checked"
        ids.append(h["x-advisor-decision-id"])
    row, _ = session_service.records(ids[-1])
    assert row["shadow_rung"] in ("nano-12b", "nano-30b", "super-120b") and row["shadow_version"]
    assert row["chosen_rung"] == json.loads(row["chain_json"])[0]
    ingest_now(session_service.spool, session_service.store)
    capsys.readouterr()
    assert main(["router", "shadow-report", "--store", str(session_service.store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED traffic") and f"shadow candidate {row['shadow_version']}" in out
    assert "direct method" in out
    assert "cost per request (USD, first attempt): candidate" in out, out
    assert "usable rate (verifier accept, first attempt)" in out


def test_floors_and_report_show_live_sessions_apart_from_the_floor(session_service, capsys):
    from advisor.cli import main
    from advisor.report.live import live_section, live_tables
    from advisor.service.launch import ingest_now
    from advisor.store import Store

    convo = [{"role": "user", "content": "Read the settings (floors view)."}]
    ids = []
    for i in range(3):
        if i:
            convo = convo + [_call(i, f"s{i}.cfg"), _result(i, f"ERROR: no such file s{i}.cfg")]
        _, h = _chat(session_service.client(), model="auto", messages=convo, tools=TOOLS,
                     extra_headers={"x-advisor-session": "floors-view", "x-advisor-class": "agent"})
        ids.append(h["x-advisor-decision-id"])
    for d in ids:  # every step in the store (the two workers' segments close apart)
        session_service.records(d)
    capsys.readouterr()
    assert main(["floors", "--store", str(session_service.store)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("agent "))
    assert "escalated" in line and "nano-12b->nano-30b" in line and "tool_errors " in line, line
    assert "Live sessions (routing service)" in out and "apart from the floor" in out
    with Store.open(session_service.store, read_only=True) as s:
        tables = live_tables(live_section(s))
    sessions = next(t for t in tables if t.key == "live_sessions")
    assert sessions.simulated and any(r[0] == "agent" for r in sessions.rows)



def _malformed_first_step(rung: str):
    """A (task, seed) whose first reply on the stand-in `rung` is an unclosed tool call (the stand-in's own plan)."""
    from advisor.ladder import load_ladder
    from advisor.standin.behaviour import make_plan
    from advisor.suite import load_suite

    params = load_ladder(DEMO).rung(rung).standin
    for task in load_suite(SUITE).tasks:
        for seed in range(300):
            if make_plan(params, task, False, seed, "baseline").action_at(0).kind == "malformed":
                return task, seed
    raise AssertionError(f"no task and seed gives a malformed first reply on {rung}")


def test_a_broken_streamed_step_never_reaches_the_client(session_service):
    """A streamed step with tools is checked before it is sent (advisor.service.checks.step_check): the stand-in's own
    unclosed first call is retried or escalated inside the request, the client gets a well-formed step, and the
    session stays latched where the step was answered."""
    from tests.test_service import _task_tools

    task, seed = _malformed_first_step("nano-12b")
    client = session_service.client()
    convo = [{"role": "user", "content": task.instructions}]
    tools = _task_tools(task)
    headers = {"x-advisor-session": "streamed", "x-advisor-class": "agent"}
    with client.chat.completions.with_streaming_response.create(model="auto", messages=convo, tools=tools, seed=seed,
                                                                 stream=True, extra_headers=headers) as resp:
        assert resp.headers["x-advisor-session-step"] == "1"
        assert resp.headers["x-advisor-broken-steps"].split(",")[0] in ("unparseable@nano-12b", "truncated@nano-12b")
        rung = resp.headers["x-advisor-rung"]
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert "<TOOLCALL>" not in text and "<tool_call>" not in text, text
    for call in calls:
        assert call.function.name in {t["function"]["name"] for t in tools} and json.loads(call.function.arguments)
    assert calls or text.strip()
    convo = convo + [{"role": "assistant", "content": text or None,
                      **({"tool_calls": [c.model_dump(exclude={"index"}) for c in calls]} if calls else {})}]
    convo += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in calls]
    _, h = _chat(client, model="auto", messages=convo, tools=tools, seed=seed, extra_headers=headers)
    assert h["x-advisor-session-step"] == "2" and h["x-advisor-rung"] == rung, "latched where step 1 was answered"


def test_one_session_id_under_two_keys_is_two_sessions(session_service):
    """Tenant B, sending tool errors under tenant A's session id (given, then derived), moves only its own.
    (Last in the module: its requests would change the traffic the shadow report above reads.)"""
    a, b = session_service.client(), session_service.client(KEY_B)
    errors = [_call(1, "x.cfg"), _result(1, "ERROR: no such file x.cfg"),
              _call(2, "y.cfg"), _result(2, "ERROR: no such file y.cfg")]
    for header in ({"x-advisor-session": "shared-by-two-keys"}, {}):  # given, then derived (drv_ of the convo)
        convo = [{"role": "system", "content": f"Tenant test {bool(header)}."},
                 {"role": "user", "content": "Read the config and report the port."},
                 {"role": "assistant", "content": "I will read it."}]
        kw = dict(model="auto", tools=TOOLS, extra_headers={**header, "x-advisor-class": "agent"})
        _, ha = _chat(a, messages=convo, **kw)
        _, hb = _chat(b, messages=convo + errors, **kw)
        if header:  # the same id (a derived one is A's own from its first reply's calls on: `continued_id`) ...
            assert ha["x-advisor-session"] == hb["x-advisor-session"]
        assert (hb["x-advisor-session-step"], hb["x-advisor-rung"], hb.get("x-advisor-escalation")) == \
            ("1", "nano-12b", None)  # ... but B's first step of its own session: A's latch is not B's to move
        _, ha2 = _chat(a, messages=convo + [_call(1, "z.cfg"), _result(1, "port = 80")], **kw)
        assert (ha2["x-advisor-session-step"], ha2["x-advisor-rung"], ha2.get("x-advisor-escalation")) == \
            ("2", "nano-12b", None)
