"""Session rules without a server: ids, escalation signals, the rung above, and the latch file shared by workers."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from advisor.service.process.config import SessionConfig
from advisor.service.api.parse import parse_request
from advisor.service.sessions.latch import SessionState, derived_id, rung_above, session_of, signals
from advisor.store.latches import LatchStore


def _req(messages, **extra):
    return parse_request({"model": "auto", "messages": messages, **extra}, {})


def _call(i, name="read", args=None):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args or {})}}]}


def _tool(i, text):
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


def test_session_id_from_header_body_or_derived():
    user = [{"role": "user", "content": "task"}]
    cfg = SessionConfig()
    assert session_of(parse_request({"model": "auto", "messages": user}, {"x-advisor-session": "s1"}), cfg) == ("s1", "given")
    assert session_of(_req(user, advisor={"session": "s2"}), cfg) == ("s2", "given")
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    sid, source = session_of(_req(user, tools=tools), cfg)
    later = _req(user + [_call(1), _tool(1, "ok")], tools=tools)
    assert source == "derived" and sid == derived_id(later) and sid.startswith("drv_")
    assert derived_id(_req([{"role": "user", "content": "other task"}], tools=tools)) != sid
    assert session_of(_req(user, tools=tools), SessionConfig(derive=False)) is None
    assert session_of(_req(user, advisor={"session": "s2"}), SessionConfig(enabled=False)) is None
    # a conversation without tools (none offered, none called) derives no session: its next turn could never
    # share the id, so a latch written for it would never be read
    chat = user + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
    assert session_of(_req(user), cfg) is None and session_of(_req(chat), cfg) is None
    assert session_of(_req(chat, advisor={"session": "s3"}), cfg) == ("s3", "given")


def test_signals_tool_errors_in_a_row_stuck_and_unparseable():
    cfg = SessionConfig(tool_errors=2)
    msgs = lambda raw: _req([{"role": "user", "content": "t"}, *raw]).messages[1:]  # noqa: E731
    assert signals(msgs([_call(1, "a"), _tool(1, "ERROR: x"), _call(2, "b"), _tool(2, "fine"), _call(3, "c"),
                         _tool(3, "Error y")]),
                   cfg) == []
    assert signals(msgs([_call(1), _tool(1, "ERROR: x"), _call(2, "b"), _tool(2, "Traceback (most recent call last)")]),
                   cfg) == ["tool_errors"]
    same = [m for i in range(3) for m in (_call(i, "read", {"p": 1}), _tool(i, "ok"))]
    assert signals(msgs(same), cfg) == ["stuck"]
    alternating = [m for i in range(6) for m in (_call(i, "ab"[i % 2]), _tool(i, "ok"))]
    assert signals(msgs(alternating), cfg) == ["stuck"]
    assert signals(msgs(same), SessionConfig(stuck=False)) == []
    assert signals(msgs([_call(1), _tool(1, "ERROR: could not parse your reply: no JSON")]), cfg) == \
        ["unparseable_tool_call"]


def test_rung_above_never_down():
    names = ["a", "b", "c", "d"]
    assert rung_above(names, names, "a", 1) == "b"
    assert rung_above(names, ["a", "c", "d"], "a", 1) == "c"
    assert rung_above(names, names, "b", 5) == "d"
    assert rung_above(names, names, "d", 1) is None


def _bump(path, n):
    store = LatchStore(path, SessionState)
    for _ in range(n):
        store.update("s", lambda old: SessionState("a", "a", None, step=(old.step + 1) if old else 1))


def test_latch_store_is_shared_and_atomic_across_processes(tmp_path):
    path = tmp_path / "latch.sqlite"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(path, 50)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert LatchStore(path, SessionState).get("s").step == 150  # no lost update: each step is one IMMEDIATE transaction
    assert LatchStore(path, SessionState, ttl_s=1e-9).get("s") is None  # expired


def _open_at_once(folder, barrier, rounds, errors):
    for i in range(rounds):
        barrier.wait()
        try:
            LatchStore(folder / f"{i}.sqlite", SessionState).update("s", lambda old: SessionState("a", "a", None))
        except Exception as exc:  # the test counts them
            errors.put(f"{type(exc).__name__}: {exc}")


def test_workers_opening_a_new_latch_file_at_once_all_get_it(tmp_path):
    """The service's workers open the latch file on their first request, often the same instant, and SQLite does
    not wait while a new file is switched to WAL: opening it must retry "database is locked" (without the retry,
    this test fails)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, errors = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_open_at_once, args=(tmp_path, barrier, 30, errors)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, found[:3]


def test_the_latch_store_keeps_at_most_max_sessions(tmp_path):
    from advisor.service.sessions.latch import SessionState
    from advisor.store.latches import LatchStore

    store = LatchStore(tmp_path / "latch.sqlite", SessionState, max_sessions=100)
    for i in range(250):
        store.update(f"s{i}", lambda old, i=i: old or SessionState("nano-12b", "nano-12b", None))
        if i == 120:
            store.update("s0", lambda old: old or SessionState("nano-12b", "nano-12b", None))  # s0 is used again
    assert store._con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 100
    assert store.get("s149") is None and store.get("s150") is not None and store.get("s249") is not None
    store.close()


def test_a_first_step_is_put_without_a_read_and_counts_toward_the_bound(tmp_path):
    """`put` (a session's first step) writes whatever was there, in one statement, and keeps the bound `update`
    keeps."""
    from advisor.service.sessions.latch import SessionState
    from advisor.store.latches import LatchStore

    store = LatchStore(tmp_path / "latch.sqlite", SessionState, max_sessions=100)
    store.put("s0", SessionState("nano-12b", "nano-12b", None))
    assert store.put("s0", SessionState("nano-30b", "nano-30b", "x")).rung == "nano-30b"
    assert (store.get("s0").rung, store.get("s0").task_class) == ("nano-30b", "x")
    for i in range(1, 250):
        store.put(f"s{i}", SessionState("nano-12b", "nano-12b", None))
    assert store._con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 100
    assert store.get("s149") is None and store.get("s249") is not None
    store.close()


@pytest.mark.parametrize("result", [
    "An error occurred while running the tool. Please try again. Error: timeout",  # OpenAI Agents SDK default
    '{"error": "file not found"}', '  {"error": {"code": 404}}',  # a tool's JSON error
    "Error: ValueError('bad path')\n Please fix your mistakes.",  # LangGraph ToolNode's error template
    "Traceback (most recent call last):", "HTTP 503 Service Unavailable"])
def test_the_frameworks_default_tool_error_texts_are_tool_errors(result):
    cfg = SessionConfig(tool_errors=2)
    msgs = _req([{"role": "user", "content": "t"}, _call(1, "a"), _tool(1, result), _call(2, "b"),
                 _tool(2, result)]).messages[1:]
    assert signals(msgs, cfg) == ["tool_errors"]
    fine = _req([{"role": "user", "content": "t"}, _call(1, "a"), _tool(1, '{"result": "no error here"}'),
                 _call(2, "b"), _tool(2, "The error rate fell.")]).messages[1:]
    assert signals(fine, cfg) == []


def test_concurrent_runs_that_open_the_same_way_get_their_own_derived_ids():
    from advisor.service.sessions.latch import continued_id, first_call_ids

    opening = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    base = derived_id(_req(opening))
    runs = [_req(opening + [_call(i, "a"), _tool(i, "ok")]) for i in (1, 2)]
    assert [derived_id(r) for r in runs] == [base, base], "the base id cannot tell them apart"
    own = [continued_id(base, first_call_ids(r)) for r in runs]
    assert own[0] != own[1] and all(o.startswith("drv_") for o in own)
    assert first_call_ids(_req(opening + [{"role": "assistant", "content": "hi"}])) == []
