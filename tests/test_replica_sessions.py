"""Agent sessions across two replicas that share nothing but a real PostgreSQL: two `advisor serve` processes,
each with its own working directory and spool, a client alternating between them step by step. Every session
stays on one rung, an escalation holds on the other replica, and killing one replica mid-session loses nothing:
the survivor continues each session at its next step on its latched rung (`advisor.store.pg_latches`)."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import load_test  # noqa: E402

from tests.test_replicas import _promote, _wait, routers  # noqa: E402,F401  (routers: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.triton]
CONFIG = """version: 1
default_class: chat
classes:
  chat: {verifier: none}
  agent: {chain: [nano-12b], verifier: none}
sessions: {tool_errors: 2, unparseable: 0, stuck: false}
api: {step_retries: 4, give_ups: false}
"""  # only the tool errors the client sends escalate: the stand-ins' own slips and give-ups would move a session at
# random (a broken step is retried on its rung, redrawn, before it could escalate)
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


class Replica:
    """One `advisor serve --store postgresql://...` in its own working directory with its own spool."""

    def __init__(self, grpc: str, url: str, home: Path):
        self.grpc, self.url, self.home = grpc, url, home
        home.mkdir(parents=True, exist_ok=True)
        (home / "service.yaml").write_text(CONFIG)
        self.start()

    def start(self) -> None:
        self.proc, self.base = load_test.start_service(
            self.grpc, self.url, 1, ["--spool", str(self.home / "spool"), "--ingest-every", "1",
                                     "--config", str(self.home / "service.yaml")], cwd=self.home)


def _call(i: int, path: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": "read_file",
                                                            "arguments": json.dumps({"path": path})}}]}


def _result(i: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": text}


#: the messages each step adds: two tool errors in a row (steps 2, 3) escalate at step 3, then plain results
STEPS = [[], [_call(1, "a.cfg"), _result(1, "ERROR: no such file a.cfg")],
         [_call(2, "b.cfg"), _result(2, "ERROR: no such file b.cfg")]] + \
        [[_call(i, f"{i}.cfg"), _result(i, f"port = {i}")] for i in range(3, 8)]


def test_sessions_hold_across_two_replicas_and_a_kill(postgres_server, triton_server, routers, tmp_path):  # noqa: F811
    import httpx

    from advisor.store import open_store

    url = postgres_server.new_database("replica_sessions")
    _promote(url, routers[0])
    replicas = [Replica(triton_server.grpc_url, url, tmp_path / f"replica{i}") for i in range(2)]
    sessions = [f"agent-{n}" for n in range(4)]
    convos = {s: [{"role": "user", "content": f"Read the config of service {s} and report its port."}]
              for s in sessions}
    seen: dict[str, list[tuple]] = {s: [] for s in sessions}
    decisions: list[str] = []
    alive = [0, 1]
    try:
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {load_test.KEY}"}) as client:
            for step, extra in enumerate(STEPS, start=1):
                if step == 5:  # mid-session: replica 0 crashes (no drain); every later step lands on replica 1
                    replicas[0].proc.send_signal(signal.SIGKILL)
                    replicas[0].proc.wait(30)
                    alive = [1]
                for n, s in enumerate(sessions):
                    convos[s] = convos[s] + extra
                    replica = replicas[alive[(step + n) % len(alive)]]  # the next step of a session: the other one
                    resp = client.post(replica.base + "/v1/chat/completions", json={
                        "model": "auto", "max_tokens": 256, "messages": convos[s], "tools": TOOLS},
                        headers={"x-advisor-session": s, "x-advisor-class": "agent"})
                    assert resp.status_code == 200, resp.text[:300]
                    h = resp.headers
                    seen[s].append((int(h["x-advisor-session-step"]), h["x-advisor-rung"],
                                    h.get("x-advisor-escalation"), replicas.index(replica)))
                    decisions.append(h["x-advisor-decision-id"])
        replicas[0].start()  # the killed replica restarts on its spool and ships what it had not
        for s in sessions:
            steps, rungs, escalations, where = zip(*seen[s])
            assert list(steps) == list(range(1, len(STEPS) + 1)), seen[s]  # no step lost or counted twice
            assert rungs == ("nano-12b",) * 2 + ("nano-30b",) * (len(STEPS) - 2), seen[s]
            assert escalations == (None, None, "tool_errors nano-12b->nano-30b") + (None,) * (len(STEPS) - 3)
            assert set(where[:4]) == {0, 1}  # the session did alternate between the replicas
        with open_store(url) as db:
            _wait(lambda: len(db.query("SELECT decision_id FROM routing_decisions")) >= len(decisions), 120)
            rows = {r["decision_id"]: r for r in db.query(
                "SELECT decision_id, session_id, session_step, chosen_rung FROM routing_decisions")}
        assert all(d in rows for d in decisions)
        assert sorted((rows[d]["session_id"], rows[d]["session_step"]) for d in decisions) == \
            sorted((s, i) for s in sessions for i in range(1, len(STEPS) + 1))
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                assert load_test.stop(r.proc) == 0


def test_a_running_session_is_refused_not_split_while_the_database_is_away(postgres_server, triton_server, routers,
                                                                           tmp_path):  # noqa: F811
    """With the database stopped, a running session's next step gets 503 with retry-after (its latch would live on
    this replica only and split from the others'), counted in /metrics; a new conversation is still answered; once
    the database is back the session goes on at its next step, on its rung."""
    import httpx

    from tests.test_replicas import _up

    url = postgres_server.new_database("outage_sessions")
    _promote(url, routers[0])
    replica = Replica(triton_server.grpc_url, url, tmp_path / "replica")
    convo = [{"role": "user", "content": "Read the config of service outage-1 and report its port."}]
    headers = {"Authorization": f"Bearer {load_test.KEY}"}
    session = {"x-advisor-session": "outage-1", "x-advisor-class": "agent"}

    def step(messages, extra=None):
        return client.post(replica.base + "/v1/chat/completions", headers={**headers, **(extra or {})},
                           json={"model": "auto", "max_tokens": 256, "messages": messages, "tools": TOOLS})

    try:
        with httpx.Client(timeout=60) as client:
            first = step(convo, session)
            assert first.status_code == 200 and first.headers["x-advisor-session-step"] == "1", first.text[:300]
            postgres_server.stop()
            convo = convo + [_call(1, "a.cfg"), _result(1, "port = 1")]
            refused = step(convo, session)
            assert refused.status_code == 503 and refused.headers["retry-after"], refused.text[:300]
            assert "session latch is away" in refused.json()["error"]["message"]
            fresh = step([{"role": "user", "content": "What is 2 + 2?"}])
            assert fresh.status_code == 200, fresh.text[:300]
            metrics = client.get(replica.base + "/metrics", headers=headers).text
            assert "advisor_session_steps_refused_total 1.0" in metrics
            postgres_server.restart()
            _wait(lambda: _up(url), 60)
            deadline = time.monotonic() + 30  # the latch tries the database again after its retry_s
            while (again := step(convo, session)).status_code == 503 and time.monotonic() < deadline:
                time.sleep(1)
            assert again.status_code == 200, again.text[:300]
            assert again.headers["x-advisor-session-step"] == "2" and \
                again.headers["x-advisor-rung"] == first.headers["x-advisor-rung"]
    finally:
        if not _up(url):
            postgres_server.restart()
        assert load_test.stop(replica.proc) == 0
