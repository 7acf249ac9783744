"""The orchestrator and its experts on `openai` rungs: every model call sends its conversation as native chat
messages and its tools as native OpenAI ``tools`` (the orchestrator: the task's tools and ``call_expert``; an
expert: the task's tools), to a real loopback HTTP server that records each request body and answers as an
OpenAI-compatible endpoint would (a native tool call, then a final answer)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from advisor.backends import BackendPool
from advisor.ladder import load_ladder
from advisor.orchestrator.experts import experts_for
from advisor.orchestrator.loop import run_orchestrated
from advisor.suite import Limits, Task
from advisor.tools import Environment

REPO = Path(__file__).resolve().parent.parent
TASK = Task.model_validate({
    "id": "lines", "class": "files", "instructions": "How many lines has notes.txt?", "tools": ["read_file"],
    "fixtures": {"files": {"notes.txt": "a\nb\nc\n"}},
    "instruction_following": [{"name": "short", "weight": 100, "check": {"type": "regex", "pattern": "^\\S+$"}}],
    "task_completion": [{"name": "three", "weight": 100, "check": {"type": "regex", "pattern": "^3$"}}]})
#: What the server answers, in order: the orchestrator hands the turn to expert-1, the expert answers.
REPLIES = [{"role": "assistant", "content": None, "tool_calls": [
               {"id": "call_1", "type": "function",
                "function": {"name": "call_expert", "arguments": json.dumps({"expert": "expert-1"})}}]},
           {"role": "assistant", "content": "FINAL ANSWER: 3"}]


class Recorder(BaseHTTPRequestHandler):
    """Records each POST body; answers with the next of `REPLIES` and token counts."""

    def do_POST(self):  # noqa: N802 - the http.server name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        bodies = self.server.bodies
        bodies.append(body)
        message = REPLIES[min(len(bodies), len(REPLIES)) - 1]
        data = json.dumps({"id": f"r{len(bodies)}", "object": "chat.completion", "model": body["model"],
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def openai_ladder(path: Path, base: str) -> Path:
    """The demo ladder with its rungs and orchestrator role as `openai` rungs at `base`."""
    demo = yaml.safe_load((REPO / "ladders" / "demo.yaml").read_text())

    def openai(model: dict) -> dict:
        model = {k: v for k, v in model.items() if k != "standin"}
        return {**model, "backend": "openai", "url": base}

    roles = {"orchestrator": openai(demo["roles"]["orchestrator"])}
    path.write_text(yaml.safe_dump({"version": 1, "name": "via-openai", "simulated": False,
                                    "rungs": [openai(r) for r in demo["rungs"]], "roles": roles}))
    return path


def test_an_orchestrator_on_an_openai_rung_sends_native_messages_and_tools(endpoint, tmp_path):
    ladder = load_ladder(openai_ladder(tmp_path / "ladder.yaml", f"http://127.0.0.1:{endpoint.server_port}/v1"))

    async def main():
        async with BackendPool(ladder) as pool:
            with Environment.create(TASK, tmp_path) as env:
                return await run_orchestrated(TASK, ladder.roles.orchestrator, experts_for(ladder), pool, env,
                                              Limits())

    res = asyncio.run(main())
    assert res.episode.stop_reason == "final" and res.episode.final == "3"
    assert res.expert_sequence() == [ladder.rungs[0].name]
    orchestrator, expert = endpoint.bodies
    assert orchestrator["model"] == ladder.roles.orchestrator.triton_model
    assert [t["function"]["name"] for t in orchestrator["tools"]] == ["read_file", "call_expert"]
    assert orchestrator["tools"][1]["function"]["parameters"]["properties"]["expert"]["enum"] == [
        "expert-1", "expert-2", "expert-3"]
    assert [m["role"] for m in orchestrator["messages"]] == ["system", "user"]
    assert orchestrator["messages"][1]["content"] == TASK.instructions
    assert expert["model"] == ladder.rungs[0].triton_model
    assert [t["function"]["name"] for t in expert["tools"]] == ["read_file"]
    assert [m["role"] for m in expert["messages"]] == ["system", "user"]
    assert (res.input_tokens, res.output_tokens) == (22, 14) and res.tokens_from_server
