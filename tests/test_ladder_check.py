"""`advisor ladder check` against the session's embedded Triton, and against nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import BackendError
from advisor.probe.ladder_check import check_ladder

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"


@pytest.mark.triton
async def test_every_demo_model_passes(triton_server):
    rows = await check_ladder(triton_server.ladder, triton_server.grpc_url)
    assert [r.name for r in rows] == [m.name for m in triton_server.ladder.models()]
    for r in rows:
        assert r.ok, r
        assert r.output_tokens and r.input_tokens and r.tokens_from_server and r.latency_ms > 0
    assert rows[-1].role == "orchestrator"


@pytest.mark.triton
def test_cli_table_and_json(triton_server, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["ladder", "check", "--url", triton_server.grpc_url, str(DEMO)]) == 0
    out = capsys.readouterr().out
    assert "standin_super_120b" in out and out.count(" ok ") >= 4 and "FAIL" not in out
    assert main(["ladder", "check", "--url", triton_server.http_url, "--protocol", "http", str(DEMO), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 4 and all(r["ok"] and r["output_tokens"] > 0 for r in data)


@pytest.mark.triton
def test_missing_model_fails_with_a_suggestion(triton_server, tmp_path, capsys):
    text = DEMO.read_text().replace("triton_model: standin_nano_30b", "triton_model: standin_nano_30")
    ladder = tmp_path / "ladder.yaml"
    ladder.write_text(text)
    assert main(["ladder", "check", "--url", triton_server.grpc_url, str(ladder), "--json"]) == 1
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert not rows["nano-30b"]["ok"] and rows["nano-30b"]["ready"] is False
    assert "Did you mean 'standin_nano_30b'" in rows["nano-30b"]["error"]
    assert rows["nano-12b"]["ok"] and rows["super-120b"]["ok"]


async def test_unreachable_server_raises_one_backend_error():
    from advisor.ladder import load_ladder

    with pytest.raises(BackendError, match="cannot reach Triton at 127.0.0.1:1"):
        await check_ladder(load_ladder(DEMO), "127.0.0.1:1")


def test_cli_unreachable_is_one_line_without_traceback():
    cmd = [sys.executable, "-c", "from advisor.cli import console; console()",
           "ladder", "check", "--url", "127.0.0.1:1", str(DEMO)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach Triton at 127.0.0.1:1"), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.triton
async def test_orchestrator_answers_the_expert_probe_in_hermes(triton_server):
    rows = await check_ladder(triton_server.ladder, triton_server.grpc_url)
    orch = next(r for r in rows if r.role == "orchestrator")
    assert orch.tool_format is True and orch.tool_call in {"expert-1", "expert-2", "expert-3"}
    assert all(r.tool_format is None for r in rows if r.role != "orchestrator")


@pytest.mark.triton
def test_orchestrator_that_does_not_speak_hermes_fails_with_a_clear_message(triton_server, tmp_path, capsys):
    # the orchestrator role pointed at a rung stand-in (swapped with the smallest rung, as each model must be
    # distinct): it is served and generates, but answers in prose
    text = (DEMO.read_text().replace("triton_model: standin_orchestrator_8b", "triton_model: SWAP")
            .replace("triton_model: standin_nano_12b", "triton_model: standin_orchestrator_8b")
            .replace("triton_model: SWAP", "triton_model: standin_nano_12b"))
    ladder = tmp_path / "ladder.yaml"
    ladder.write_text(text)
    assert main(["ladder", "check", "--url", triton_server.grpc_url, str(ladder), "--json"]) == 1
    rows = {r["role"]: r for r in json.loads(capsys.readouterr().out)}
    orch = rows["orchestrator"]
    assert orch["generated"] is True and orch["tool_format"] is False and not orch["ok"]
    assert "orchestrator hermes check" in orch["error"] and "not in hermes tool-call format" in orch["error"]
    assert "rung" in rows and rows["rung"]["tool_format"] is None  # rungs are not asked for the expert probe


@pytest.mark.parametrize("reply, why", [
    ('<tool_call>{"name": "call_expert", "arguments": {"expert": "expert-9"}}</tool_call>', "not one of the offered"),
    ('<tool_call>{"name": "call_expert", "arguments": {"expert": </tool_call>', "not valid JSON"),
    ('<tool_call>{"name": "call_expert", "arguments": {"expert": "expert-1"}}', "not closed"),
    ('<tool_call>{"name": "lookup", "arguments": {}}</tool_call>', "called 'lookup'"),
    ("The order has shipped.", "answered in prose"),
])
def test_expert_probe_reply_errors_say_what_is_wrong(reply, why):
    from advisor.ladder import load_ladder
    from advisor.orchestrator.formatcheck import format_probe, judge_reply

    lad = load_ladder(DEMO)
    probe = format_probe(lad, lad.roles.orchestrator)
    assert "call_expert" in probe.prompt and probe.aliases == ("expert-1", "expert-2", "expert-3")
    alias, error = judge_reply(probe, reply)
    assert alias is None and why in error
    ok = '<think>easy</think>\n<tool_call>\n{"name": "call_expert", "arguments": {"expert": "expert-2"}}\n</tool_call>'
    assert judge_reply(probe, ok) == ("expert-2", None)
    assert "cut off" in judge_reply(probe, ok, "length")[1]
