"""Fast tests of the service's parts without a server: config, keys, request parsing, reply parsing, records."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def test_config_errors_name_file_key_and_line(tmp_path):
    from advisor.ladder import load_ladder
    from advisor.service.process.config import load_config

    bad = tmp_path / "s.yaml"
    bad.write_text("version: 1\nclasses:\n  a:\n    verifier:\n      checks:\n        - {type: file, path: x}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:6: classes.a.verifier.checks.0: .*does not apply to a reply"):
        load_config(bad)
    bad.write_text("version: 1\nclasses:\n  a:\n    retries: 2\n    bogus: 1\n")
    with pytest.raises(ConfigError, match=r"s.yaml:5: classes.a.bogus: unknown key"):
        load_config(bad)
    bad.write_text("version: 1\nclasses:\n  a:\n    chain: [nano-12b, nano-31b]\n")
    with pytest.raises(ConfigError, match=r"s.yaml:4: classes.a.chain.1: .*Did you mean 'nano-30b'"):
        load_config(bad, load_ladder(REPO / "ladders" / "demo.yaml"))
    bad.write_text("version: 1\nclasses:\n  a: {verifier: nonee}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:3: classes.a.verifier: .*'nonee' is not a verifier: write `none`"):
        load_config(bad)
    # what a suite's loader refuses in a check is refused here too, and a policy the registry lacks
    bad.write_text("version: 1\nclasses:\n  a:\n    verifier:\n      checks:\n        - {type: regex, pattern: 'a(b'}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:6: classes.a.verifier.checks.0: .*pattern: invalid regex"):
        load_config(bad)
    bad.write_text("version: 1\nclasses:\n  a:\n    verifier:\n      checks:\n"
                   "        - {type: json_schema, schema: {type: objec}}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:6: classes.a.verifier.checks.0: .*schema: not a JSON Schema"):
        load_config(bad)
    bad.write_text("version: 1\nrouting:\n  policy: routr\n")
    with pytest.raises(ConfigError, match=r"s.yaml:3: routing.policy: .*unknown routing policy 'routr'.*Did you mean "
                                          r"'router'"):
        load_config(bad)
    bad.write_text("version: 2\n")
    with pytest.raises(ConfigError, match="version 2"):
        load_config(bad)


def test_class_prediction_by_rules_then_default(tmp_path):
    from advisor.service.process.config import load_config

    path = tmp_path / "s.yaml"
    path.write_text("version: 1\ndefault_class: chat\nclasses:\n  chat: {verifier: none}\n"
                    "  extraction:\n    match: ['(?i)\\bextract\\b']\n"
                    "    verifier: {checks: [{type: regex, pattern: 'ORD-\\d+'}]}\n")
    config = load_config(path)
    assert config.predict_class("Please EXTRACT the id")[0] == "extraction"
    assert config.predict_class("hello") == ("chat", "predicted: default_class (no rule matched)")
    assert config.class_config("extraction").verifier_config.checks[0].type == "regex"
    assert config.class_config("unknown").verifier_config is None


def test_keys_are_kept_hashed_and_limit_rungs(tmp_path):
    from advisor.service.process.auth import key_hash, load_keys

    f = tmp_path / "keys"
    f.write_text(f"# comment\nalice sk-a\nbob sha256:{key_hash('sk-b')} nano-12b\n")
    ring = load_keys(f, ["nano-12b", "nano-30b"], environ={"ADVISOR_API_KEYS": "sk-c, "})
    assert len(ring) == 3 and "sk-a" not in json.dumps(ring.to_state())
    assert ring.lookup("Bearer sk-a").name == "alice" and ring.lookup("Bearer sk-x") is None
    assert ring.lookup(None) is None and ring.lookup("sk-a") is None
    bob = ring.lookup("Bearer sk-b")
    assert bob.may_use("nano-12b") and not bob.may_use("nano-30b")
    assert ring.lookup("Bearer sk-c").name == "env-1"
    f.write_text("carol sk-c nano-13b\n")
    with pytest.raises(ConfigError, match=r"keys:1: unknown rung 'nano-13b'"):
        load_keys(f, ["nano-12b", "nano-30b"], environ={})


def test_unhonoured_fields_are_accepted_and_named_and_header_preferences():
    from advisor.service.api.request import RequestError
    from advisor.service.api.parse import parse_request

    msgs = [{"role": "user", "content": "hi"}]
    assert parse_request({"model": "auto", "messages": msgs, "logprobs": True}, {}).ignored == ["logprobs"]
    assert parse_request({"model": "auto", "messages": msgs, "n": 2}, {}).ignored == ["n"]
    assert parse_request({"model": "auto", "messages": msgs, "n": 1}, {}).ignored == []
    req = parse_request({"model": "auto", "messages": msgs, "advisor": {"target": 0.5}},
                        {"x-advisor-class": "chat", "x-advisor-rungs": "nano-12b, nano-30b", "x-advisor-target": "0.9"})
    assert req.advisor.task_class == "chat" and req.advisor.rungs == ["nano-12b", "nano-30b"]
    assert req.advisor.target == 0.5, "the body wins over headers"
    assert parse_request({"model": "auto", "messages": msgs, "stop": "x", "seed": 3}, {}).sampling() == \
        {"seed": 3, "stop": ["x"]}
    assert parse_request({"model": "auto", "messages": msgs, "presence_penalty": 0.5, "frequency_penalty": -1},
                         {}).sampling() == {"presence_penalty": 0.5, "frequency_penalty": -1}
    with pytest.raises(RequestError, match="'frequency_penalty'") as err:
        parse_request({"model": "auto", "messages": msgs, "frequency_penalty": 2.5}, {})
    assert err.value.param == "frequency_penalty"
    assert parse_request({"model": "auto", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}, {}).messages[0].text() == "ab"
    image = parse_request({"model": "auto", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "http://example.invalid/a.png"}}]}]},
        {})  # a part advisor cannot send to a rung is ignored and named
    assert image.messages[0].text() == "a" and image.ignored == ["messages[].content[].image_url"]
    # inside a union (content: a string or a list of parts) the error names the branch the input went into
    with pytest.raises(RequestError, match="Input should be a valid string") as err:
        parse_request({"model": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, {})
    assert err.value.param == "messages.0.content.0.text"
    with pytest.raises(RequestError) as err:
        parse_request({"model": "auto", "messages": msgs, "stop": ["x", 1]}, {})
    assert err.value.param == "stop.1"
    with pytest.raises(RequestError, match="invalid header 'x-advisor-max-latency-s'") as err:
        parse_request({"model": "auto", "messages": msgs}, {"x-advisor-max-latency-s": "soon"})
    assert err.value.param == "x-advisor-max-latency-s"
    with pytest.raises(RequestError) as err:  # the body's value wins, so the body's field is the one named
        parse_request({"model": "auto", "messages": msgs, "advisor": {"max_latency_s": -1}},
                      {"x-advisor-max-latency-s": "2"})
    assert err.value.param == "advisor.max_latency_s"
    with pytest.raises(RequestError) as err:  # not an object: a 400 naming it, with or without headers
        parse_request({"model": "auto", "messages": msgs, "advisor": "fast"}, {"x-advisor-target": "0.5"})
    assert err.value.status == 400 and err.value.param == "advisor"
    assert parse_request({"model": "auto", "messages": msgs, "stream_options": {"include_usage": True}},
                         {}).ignored == ["stream_options"], "without stream it has nothing to do"
    with pytest.raises(RequestError, match="at least 1 item") as err:  # no rung at all is not "any rung"
        parse_request({"model": "auto", "messages": msgs, "advisor": {"rungs": []}}, {})
    assert err.value.param == "advisor.rungs"


def test_body_decoding_refuses_what_json_or_utf8_do_not_allow():
    from advisor.service.api.request import RequestError
    from advisor.service.api.parse import decode_body

    assert decode_body('{"a": ["\\ud83d\\ude00", "\\\\ud800"]}'.encode()) == {"a": ["\U0001F600", "\\ud800"]}
    for raw, param, why in ((b'{"a": [{"b": "x \\uD800"}]}', "a.0.b", "lone UTF-16 surrogate"),
                            (b'{"k\\udc00": 1}', "k\\udc00", "lone UTF-16 surrogate"),  # the key, printable
                            (b'{"a": NaN}', None, "NaN is not a JSON value"),
                            (b'{"a": -Infinity}', None, "-Infinity is not a JSON value"),
                            (b'{"a": "\xff"}', None, "not UTF-8"),
                            (b'{"a": ', None, "not JSON")):
        with pytest.raises(RequestError, match=why) as err:
            decode_body(raw)
        assert err.value.status == 400 and err.value.param == param
        err.value.args[0].encode("utf-8")  # the message can be sent


def test_fields_a_rung_would_refuse_are_refused_first():
    from advisor.service.api.request import RequestError
    from advisor.service.api.parse import parse_request

    msgs = [{"role": "user", "content": "hi"}]
    tool = {"type": "function", "function": {"name": "get_weather"}}
    for extra, param, why in (({"stop": ""}, "stop", "must not be empty"),
                              ({"stop": ["x", ""]}, "stop", "must not be empty"),
                              ({"seed": 2 ** 64}, "seed", "less than or equal to 9223372036854775807"),
                              ({"tools": [tool, tool]}, "tools", "'get_weather' more than once"),
                              ({"tools": [{"type": "function", "function": {"name": "get weather"}}]},
                               "tools.0.function.name", "should match pattern"),
                              ({"tools": [tool, {"type": "function", "function": {"name": "g", "parameters": {
                                  "type": "object", "properties": {"city": {"type": "strin"}}}}}]},
                               "tools.1.function.parameters", r"not a JSON Schema .* at \$\.properties\.city\.type"),
                              # JSON's types as they are: no boolean as a number, no text as an integer
                              ({"temperature": True}, "temperature", "valid number"),
                              ({"max_tokens": "12"}, "max_tokens", "valid integer"),
                              ({"max_tokens": 12.0}, "max_tokens", "valid integer"),
                              ({"stream": 1}, "stream", "valid boolean"),
                              # fields of one role on another's message
                              ({"messages": [{"role": "tool", "content": "42"}]}, "messages.0.tool_call_id",
                               "needs the tool_call_id"),
                              ({"messages": [{"role": "user", "content": "x", "tool_call_id": "c1"}]},
                               "messages.0.tool_call_id", "only a tool message"),
                              ({"messages": [{"role": "user", "content": "x", "tool_calls": [
                                  {"id": "c1", "function": {"name": "f"}}]}]}, "messages.0.tool_calls",
                               "only an assistant message")):
        with pytest.raises(RequestError, match=why) as err:
            parse_request({"model": "auto", "messages": msgs, **extra}, {})
        assert err.value.status == 400 and err.value.param == param
    for header in ("inf", "nan", "-inf"):  # a header's text parses to a float: a finite one only
        with pytest.raises(RequestError, match="finite number") as err:
            parse_request({"model": "auto", "messages": msgs}, {"x-advisor-value-usd": header})
        assert err.value.param == "x-advisor-value-usd"
    assert parse_request({"model": "auto", "messages": msgs, "seed": -2 ** 63, "stop": ["x"]}, {}).seed == -2 ** 63
    assert parse_request({"model": "auto", "messages": msgs, "temperature": 1}, {}).temperature == 1.0  # 1 is 1.0
    # headers are text, parsed leniently; an invalid one the body overrides is not read at all
    req = parse_request({"model": "auto", "messages": msgs, "advisor": {"target": 0.5}},
                        {"x-advisor-target": "soon", "x-advisor-self-hosted-only": "true", "x-advisor-max-cost-usd": "1e-3"})
    assert (req.advisor.target, req.advisor.self_hosted_only, req.advisor.max_cost_usd) == (0.5, True, 0.001)
    # header bytes arrive decoded as Latin-1 (ASGI): a UTF-8 class name is read as the client wrote it
    latin1 = "extracción".encode("utf-8").decode("latin-1")
    assert parse_request({"model": "auto", "messages": msgs}, {"x-advisor-class": latin1}).advisor.task_class == \
        "extracción"
    assert parse_request({"model": "auto", "messages": msgs}, {"x-advisor-class": "caf\xe9"}).advisor.task_class == \
        "caf\xe9", "Latin-1 bytes that are no UTF-8 stay as they were decoded"


def test_tool_calls_round_trip_through_each_format():
    from advisor.agent.chat import parse_default
    from advisor.ladder import load_ladder
    from advisor.service.api.chat import parse_reply, render_prompt
    from advisor.service.api.parse import parse_request

    ladder = load_ladder(REPO / "ladders" / "demo.yaml")
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    req = parse_request({"model": "auto", "tools": tools, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"}]}, {})
    for rung in ladder.rungs:
        from advisor.agent.formats import format_for

        fmt = format_for(rung.tool_call_format)
        messages = parse_default(render_prompt(rung, req))
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
        assert "Be brief." in messages[0]["content"] and "read_file" in messages[0]["content"]
        assert fmt.parse(messages[2]["content"], [t["function"] for t in tools]).name == "read_file"
        reply = parse_reply(rung, "Reading.\n" + fmt.render_call("read_file", {"path": "b.py"}), req)
        assert reply.finish_reason == "tool_calls" and reply.content == "Reading."
        assert json.loads(reply.tool_calls[0]["function"]["arguments"]) == {"path": "b.py"}
        final = parse_reply(rung, "Done.\nFINAL ANSWER: 42", req)
        assert final.final == "42" and final.content == "42" and not final.tool_calls, "the marker is the prompt's"


def test_segments_ingest_once_skip_torn_lines_and_wait_for_open_ones(tmp_path):
    from advisor.service.records.recording import SegmentWriter, ingest
    from advisor.store import Store, now

    spool = tmp_path / "spool"
    writer = SegmentWriter(spool, "w1")
    rows = [{"record": "decision", "decision_id": "d1", "created_at": now(), "request_hash": "h", "policy": "p",
             "mode": "single", "chosen_rung": "r", "status": "ok"},
            {"record": "attempt", "decision_id": "d1", "attempt": 1, "rung": "r", "created_at": now(),
             "failover": False}]
    writer.write(rows)
    with Store.open(tmp_path / "s.duckdb") as store:
        assert ingest(spool, store)["segments"] == 0, "an open segment of a live process is not touched"
        writer.close()
        seg = next(spool.glob("*.jsonl"))
        copy = spool / "w1-copy-000009.jsonl"
        copy.write_text(seg.read_text() + '{"record": "decision", "decision_id": "d2"')  # a torn last line
        counts = ingest(spool, store)
        assert counts == {"segments": 2, "decisions": 1, "attempts": 1, "torn_lines": 1, "quarantined_lines": 0}
        assert not list(spool.iterdir())
        dead = spool / f"w2-{_dead_pid()}-000001.open"
        dead.write_text(json.dumps({**rows[0], "decision_id": "d3", "created_at": str(now())}) + "\n")
        assert ingest(spool, store)["decisions"] == 1, "the open segment of a dead process is ingested"
        assert [r["decision_id"] for r in store.query("SELECT decision_id FROM routing_decisions ORDER BY 1")] == \
            ["d1", "d3"]


def _corrupt_segment(spool: Path, pid: int) -> Path:
    """A closed segment: decision d1, a 0xFF byte line, a ``[1,2,3]`` line, decision d2 (issue 38, case 9)."""
    from advisor.store import now

    spool.mkdir(parents=True, exist_ok=True)
    good = [json.dumps({"record": "decision", "decision_id": d, "created_at": str(now()), "request_hash": "h",
                        "policy": "p", "mode": "single", "chosen_rung": "r"}).encode() for d in ("d1", "d2")]
    path = spool / f"w1-{pid}-000001.jsonl"
    path.write_bytes(b"\n".join([good[0], b'{"record": "decision", "decision_id": "d\xff"}', b"[1,2,3]", good[1]])
                     + b"\n")
    return path


def test_a_corrupt_spool_line_is_quarantined_and_the_rest_ingested(tmp_path, caplog):
    """A 0xFF byte and a ``[1,2,3]`` line: both go byte for byte to <spool>.quarantine/, one warning names the
    segment and the lines, the good records of the same segment are stored and the segment is gone."""
    from advisor.service.records.recording import ingest
    from advisor.store import Store

    spool = tmp_path / "s.duckdb.live"
    segment = _corrupt_segment(spool, _dead_pid())
    with Store.open(tmp_path / "s.duckdb") as store, caplog.at_level("WARNING", logger="advisor.spool"):
        counts = ingest(spool, store)
        ids = [r["decision_id"] for r in store.query("SELECT decision_id FROM routing_decisions ORDER BY 1")]
    assert counts["decisions"] == 2 and counts["quarantined_lines"] == 2 and ids == ["d1", "d2"]
    assert not segment.exists()
    kept = tmp_path / "s.duckdb.live.quarantine" / f"{segment.stem}.bad"
    assert kept.read_bytes() == b'{"record": "decision", "decision_id": "d\xff"}\n[1,2,3]\n'
    warnings = [r.getMessage() for r in caplog.records if r.name == "advisor.spool"]
    assert len(warnings) == 1 and str(segment) in warnings[0] and str(kept) in warnings[0]
    assert "line 2 (not UTF-8" in warnings[0] and "3 (a JSON list" in warnings[0]


def test_a_record_the_store_refuses_is_quarantined_and_the_rest_ingested(tmp_path, caplog):
    """A record that parses but that DuckDB refuses (text in a number column, a column the table lacks) does not
    hold its segment, or the ones after it, out of the store: the segment's records are tried one by one, the
    refused ones go to the quarantine with the store's reason, and a second ingest finds nothing left."""
    from advisor.service.records.recording import ingest
    from advisor.store import Store, now

    spool = tmp_path / "s.duckdb.live"
    spool.mkdir()
    rows = [{"record": "decision", "decision_id": d, "created_at": str(now()), "request_hash": "h", "policy": "p",
             "mode": "single", "chosen_rung": "r"} for d in ("d1", "d2", "d3", "d4")]
    rows[1]["latency_s"] = "not a number"
    rows[2]["no_such_column"] = 1
    segment = spool / f"w1-{_dead_pid()}-000001.jsonl"
    segment.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Store.open(tmp_path / "s.duckdb") as store, caplog.at_level("WARNING", logger="advisor.spool"):
        counts = ingest(spool, store)
        again = ingest(spool, store)
        ids = [r["decision_id"] for r in store.query("SELECT decision_id FROM routing_decisions ORDER BY 1")]
    assert ids == ["d1", "d4"] and counts["decisions"] == 2 and counts["quarantined_lines"] == 2
    assert again["segments"] == 0 and not segment.exists()
    kept = (tmp_path / "s.duckdb.live.quarantine" / f"{segment.stem}.bad").read_text().splitlines()
    assert [json.loads(line)["decision_id"] for line in kept] == ["d2", "d3"]
    warning = next(r.getMessage() for r in caplog.records if r.name == "advisor.spool")
    assert "line 2 (" in warning and "3 (" in warning and "Exception" in warning


def test_store_ingest_command_quarantines_a_corrupt_line(tmp_path, capsys):
    """`advisor store ingest` on the same segment: exit 0, no traceback, the count of quarantined lines."""
    from advisor.cli import main

    _corrupt_segment(tmp_path / "spool", _dead_pid())
    assert main(["store", "ingest", "--store", str(tmp_path / "s.duckdb"), "--spool", str(tmp_path / "spool")]) == 0
    out, err = capsys.readouterr()
    assert "2 decisions, 0 attempts ingested" in out and "2 bad lines quarantined" in out
    assert "Traceback" not in err


def test_the_ingest_thread_outlives_a_corrupt_segment(tmp_path):
    """`advisor serve`'s periodic ingest (the real loop, in its thread) takes the good lines of a corrupt segment
    and, a round later, a segment written after it: the thread is still alive."""
    import threading
    import time

    from advisor.service.launch import ServeOptions, _ingest_loop
    from advisor.store import Store

    store_path, spool = tmp_path / "s.duckdb", tmp_path / "s.duckdb.live"
    _corrupt_segment(spool, _dead_pid())
    stop, lines = threading.Event(), []
    options = ServeOptions(store_path=store_path, ingest_every_s=0.1)
    thread = threading.Thread(target=_ingest_loop, args=(spool, options, stop, lines.append), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while list(spool.glob("*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        later = _corrupt_segment(spool, _dead_pid())
        later.write_bytes(later.read_bytes().replace(b'"d1"', b'"d3"'))
        while later.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread.is_alive() and not later.exists(), lines
    finally:
        stop.set()
        thread.join(10)
    with Store.open(store_path, read_only=True) as store:
        assert [r["decision_id"] for r in store.query("SELECT decision_id FROM routing_decisions ORDER BY 1")] == \
            ["d1", "d2", "d3"]


def test_a_store_held_by_another_process_loses_no_record_and_says_so(tmp_path):
    """At stop, a store another process holds cannot take the records: the error says where they wait and how
    to move them in, and they are all there once it is free. Training a router from it names the lock."""
    import subprocess
    import sys

    from advisor.errors import RouterError, StoreError
    from advisor.ladder import load_ladder
    from advisor.service.launch import ServeOptions, final_ingest, train_from_store
    from advisor.service.records.recording import SegmentWriter
    from advisor.store import Store, now

    store_path, spool = tmp_path / "s.duckdb", tmp_path / "s.duckdb.live"
    Store.open(store_path).close()
    writer = SegmentWriter(spool, "w1")
    writer.write([{"record": "decision", "decision_id": "d1", "created_at": now(), "request_hash": "h",
                   "policy": "p", "mode": "single", "chosen_rung": "r", "status": "ok"}])
    writer.close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(120)", str(store_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError) as err:
            final_ingest(spool, ServeOptions(store_path=store_path))
        message = str(err.value)
        assert "the store is in use" in message and "Nothing is lost" in message and str(spool) in message
        assert f"`advisor store ingest --store {store_path}`" in message
        assert len(list(spool.glob("*.jsonl"))) == 1, "the segment waits in the spool"
        with pytest.raises(RouterError, match="the store is in use") as err:
            train_from_store(store_path, load_ladder(REPO / "ladders" / "demo.yaml"))
        assert "--router FILE" in str(err.value) and "run `advisor probe` first" not in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    assert final_ingest(spool, ServeOptions(store_path=store_path))["decisions"] == 1
    assert not list(spool.glob("*.jsonl"))


def _dead_pid() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def test_store_ingest_command(tmp_path, capsys):
    from advisor.cli import main
    from advisor.service.records.recording import SegmentWriter
    from advisor.store import Store, now

    writer = SegmentWriter(tmp_path / "spool", "w1")
    writer.write([{"record": "decision", "decision_id": "d9", "created_at": now(), "request_hash": "h",
                   "policy": "pinned", "mode": "pinned", "chosen_rung": "r"}])
    writer.close()
    store = tmp_path / "s.duckdb"
    assert main(["store", "ingest", "--store", str(store), "--spool", str(tmp_path / "spool")]) == 0
    assert "1 decisions, 0 attempts ingested" in capsys.readouterr().out
    with Store.open(store, read_only=True) as s:
        assert s.query("SELECT decision_id, policy FROM routing_decisions") == [{"decision_id": "d9", "policy": "pinned"}]


def test_tool_choice_is_honoured_or_refused():
    from advisor.ladder import load_ladder
    from advisor.service.api.chat import render_prompt
    from advisor.service.api.request import RequestError
    from advisor.service.api.parse import parse_request

    rung = load_ladder(REPO / "ladders" / "demo.yaml").rungs[0]
    tools = [{"type": "function", "function": {"name": name, "description": f"the {name} tool"}}
             for name in ("read_file", "write_file")]
    msgs = [{"role": "user", "content": "Go"}]

    def prompt(choice):
        return render_prompt(rung, parse_request({"model": "auto", "messages": msgs, "tools": tools,
                                                  "tool_choice": choice}, {}))

    assert "the read_file tool" in prompt("auto") and "You must call" not in prompt("auto")
    assert "the read_file tool" not in prompt("none")
    assert "You must call one of these functions now." in prompt("required")
    named = prompt({"type": "function", "function": {"name": "write_file"}})
    assert "the write_file tool" in named and "the read_file tool" not in named
    assert "You must call the function write_file now." in named
    for body, why in ((dict(tools=tools, tool_choice={"type": "function", "function": {"name": "delete"}}),
                       "not among the request's tools"),
                      (dict(tool_choice="required"), "needs tools"),
                      (dict(tools=tools, tool_choice={"type": "function"}), "needs the function's name"),
                      (dict(tools=tools, tool_choice={"type": "tool"}), "must be")):
        with pytest.raises(RequestError, match=why) as err:
            parse_request({"model": "auto", "messages": msgs, **body}, {})
        assert err.value.param.startswith("tool_choice") and err.value.status == 400


def test_the_example_config_is_the_documented_one_and_loads_on_the_demo_ladder(tmp_path):
    from advisor.ladder import load_ladder
    from advisor.service.process.config import load_config

    example = REPO / "service.example.yaml"
    docs = (REPO / "docs" / "service.md").read_text()
    at = docs.index("`service.example.yaml`")
    start = docs.index("```yaml\n", at) + len("```yaml\n")
    assert docs[start: docs.index("```\n", start)] == example.read_text(), "docs/service.md shows the file as it is"
    config = load_config(example, load_ladder(REPO / "ladders" / "demo.yaml"))
    assert {"chat", "extraction", "agent_step"} <= set(config.classes)
    judged = tmp_path / "judged.yaml"  # a judge verifier on a ladder without a judge: refused at load, with its line
    judged.write_text("version: 1\nclasses:\n  prose:\n    verifier:\n      judge: {rubric: cites}\n")
    with pytest.raises(ConfigError, match=r"judged.yaml:5: classes.prose.verifier.judge: ladder 'demo' has no "
                                          r"roles.judge"):
        load_config(judged, load_ladder(REPO / "ladders" / "demo.yaml"))


def test_a_failed_hot_reload_keeps_the_router_and_the_watcher(tmp_path, capsys):
    """Whatever the promoted pointer holds (damaged JSON, an artifact that is no path, a missing artifact), the
    reload fails once per distinct error, is counted, and the worker keeps serving the router it has. `check`
    never raises: an exception would end the watcher task, and with it every later reload of this worker."""
    import asyncio
    from types import SimpleNamespace

    from advisor.router.feedback.pointers import POINTER_FORMAT
    from advisor.service.routing.reload import check

    class Count:
        def __init__(self):
            self.n = {}

        def labels(self, result):
            return SimpleNamespace(inc=lambda: self.n.__setitem__(result, self.n.get(result, 0) + 1))

    pointer = tmp_path / "promoted.json"
    serving = SimpleNamespace(pointer=str(pointer), sha256="old", version="v1")
    from advisor.service.process.runtime import Runtime

    rt = SimpleNamespace(serving=serving, ladder=None, metrics=SimpleNamespace(reloads=Count()), reload_error=None)
    rt.reload_failed = lambda why: Runtime.reload_failed(rt, why)  # the runtime's own methods, on this stand-in
    rt.serve_router = lambda new: Runtime.serve_router(rt, new)
    bodies = ["{not json", json.dumps({"format": POINTER_FORMAT, "artifact": 5, "sha256": "new"}),
              json.dumps({"format": POINTER_FORMAT, "artifact": "gone.json", "sha256": "new"})]
    for body in bodies:
        pointer.write_text(body)
        assert asyncio.run(check(rt)) is False and asyncio.run(check(rt)) is False
        assert rt.serving is serving
    assert rt.metrics.reloads.n == {"failed": 3}, "each distinct failure counted once"
    err = capsys.readouterr().err
    assert err.count("router reload failed (still serving v1)") == 3 and "TypeError" in err


def test_stop_line_says_what_the_store_holds_when_the_periodic_ingest_took_everything(tmp_path):
    """The periodic ingest moved this run's records in before the stop: the last ingest finds nothing, and the
    stop line still says what the run left in the store (not '0 decisions and 0 attempts ingested')."""
    from advisor.service.launch import final_ingest, ingest_now, live_counts, stop_line
    from advisor.service.records.recording import SegmentWriter
    from advisor.store import now

    store, spool = tmp_path / "s.duckdb", tmp_path / "spool"
    assert live_counts(store) == (0, 0)  # no store yet

    def record(decision_id: str) -> None:
        writer = SegmentWriter(spool, f"w-{decision_id}")
        writer.write([{"record": "decision", "decision_id": decision_id, "created_at": now(), "request_hash": "h",
                       "policy": "pinned", "mode": "pinned", "chosen_rung": "r"}])
        writer.close()

    record("earlier")
    ingest_now(spool, store)  # a previous run's record
    before = live_counts(store)
    record("d1")
    record("d2")
    assert ingest_now(spool, store)["decisions"] == 2  # the periodic ingest, while serving
    counts = final_ingest(spool, SimpleNamespace(store_path=store, spool=None))
    assert counts["decisions"] == 0
    assert stop_line(store, before, counts["torn_lines"]) == (
        f"stopped; {store} holds 2 decisions and 0 attempts recorded while serving (3 and 0 in all)")


def test_attempt_errors_are_kinds_not_strings_matched():
    """An attempt's error is recorded as "<kind>: <detail>" (the stored column) with its kind as an enum, which
    the chain walk, the orchestrator mode and the failover metric read instead of matching the text."""
    from advisor.service.routing.attempts import Attempt, AttemptError

    late = Attempt("nano").fail(AttemptError.DEADLINE, "no time left for this attempt")
    assert late.out_of_time and late.error == "deadline: no time left for this attempt" and not late.failover
    down = Attempt("nano").fail(AttemptError.DOWN, "connection refused: deadline exceeded", failover=True)
    assert not down.out_of_time and down.failover and down.error_kind is AttemptError.DOWN
    assert [k.value for k in AttemptError] == ["deadline", "timeout", "down", "stream broke", "client disconnected"]


def test_the_service_config_is_as_strict_as_the_ladder(tmp_path):
    """One strict base model (advisor.strict.StrictModel): "3" is no integer in a service config either."""
    from advisor.errors import ConfigError
    from advisor.ladder import Ladder
    from advisor.service.process.config import ServiceConfig, load_config
    from advisor.strict import StrictModel

    assert issubclass(ServiceConfig, StrictModel) and issubclass(Ladder, StrictModel)
    path = tmp_path / "service.yaml"
    path.write_text('version: 1\nlimits: {max_messages: "3"}\n')
    with pytest.raises(ConfigError, match="max_messages"):
        load_config(path)
    path.write_text("version: 1\nlimits: {max_messages: 3}\n")
    assert load_config(path).limits.max_messages == 3


def test_episodic_policies_are_served_through_the_registry():
    """``model: "orchestrator"`` is the episodic policy ``orchestrator`` of POLICIES, served because the service
    registered it (`advisor.service.routing.served.SERVED`) and the ladder has the role; without the role it is not
    offered, and an unknown model's 404 names what is."""
    from advisor.ladder import load_ladder
    from advisor.router.routing.policies import episodic_policies
    from advisor.service.routing.served import SERVED, served_policies, served_policy

    demo = load_ladder(REPO / "ladders" / "demo.yaml")
    bare = demo.model_copy(update={"roles": demo.roles.model_copy(update={"orchestrator": None})})
    assert set(SERVED.names()) <= set(episodic_policies())
    assert served_policies(SimpleNamespace(ladder=demo)) == ["orchestrator"]
    assert served_policies(SimpleNamespace(ladder=bare)) == [] and served_policy(SimpleNamespace(ladder=bare),
                                                                                 "orchestrator") is None
    assert served_policy(SimpleNamespace(ladder=demo), "pinned") is None


def test_only_the_runtime_module_changes_the_runtime():
    """Every part of a worker's runtime is declared and built in `advisor.service.process.runtime`: no other service module
    assigns an attribute on it or reads a private one (`getattr(rt, "_...")`)."""
    import re

    assign = re.compile(r"\brt\.[A-Za-z_]\w* *(?:=|\+=|-=)(?!=)")
    private = re.compile(r"getattr\(\s*rt\s*,\s*[\"']_|\brt\._[a-z]")
    found = []
    for path in sorted((REPO / "advisor" / "service").rglob("*.py")):
        if path.name == "runtime.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if assign.search(line) or private.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_a_step_concludes_in_one_place():
    """The session latch learns a step's outcome from one call (`response.conclude`), whichever way the step was
    answered; the in-flight slot is taken in the app and given back in one function of it (a stream's once its
    body has ended)."""
    import ast
    import re

    calls, takes = [], []
    for path in sorted((REPO / "advisor").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if re.search(r"\bafter_step\(", code) and not code.lstrip().startswith("def "):
                calls.append(f"{path.relative_to(REPO)}:{n}")
            if re.search(r"\.take_slot\(", code):
                takes.append(f"{path.relative_to(REPO)}:{n}")
    assert len(calls) == 1 and calls[0].startswith("advisor/service/http/response.py:"), calls
    assert len(takes) == 1 and takes[0].startswith("advisor/service/http/app.py"), takes
    def releases(node) -> bool:
        return any(isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "release_slot" for n in ast.walk(node))

    owners = set()  # the module-level functions and methods that give a slot back, however deep inside them
    for path in sorted((REPO / "advisor").rglob("*.py")):
        for top in ast.parse(path.read_text()).body:
            for fn in top.body if isinstance(top, ast.ClassDef) else [top]:
                if releases(fn):
                    owners.add(f"{path.relative_to(REPO)}:{getattr(fn, 'name', '?')}")
    assert owners == {"advisor/service/http/app.py:_slot_back_when_sent"}, owners
