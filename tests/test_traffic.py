"""Sizing from a team's own traffic, end to end through the real service, the real store and the real Triton.

Two tenants run agent sessions through `advisor serve` (demo ladder, embedded Triton) with ``capture: {enabled:
true}``; one message carries a secret. Then: the secret is in no table; `advisor suite from-traffic --tenant A`
writes a suite that validates, holds only tenant A's steps and replays without live tools; `advisor probe` on it
prints a per-class answer; `advisor savings --json` gives every arm with its usable rate and interval.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_service import DEMO, KEY, REPO, SUITE, Service, _chat, one_task_per_class

pytestmark = pytest.mark.triton
KEY_B = "sk-test-tenant-b"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
ADVISOR = str(Path(sys.executable).parent / "advisor")

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "search_docs", "description": "Search the team's documents.",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                     "required": ["query"]}}},
]
ASKS = ["Find the port the billing service listens on and report it.",
        "Read config/app.yaml and tell me which database the app uses.",
        "Look up our refund policy in the documents and summarise it in one sentence.",
        "Which file defines the retry limit of the payment client? Read it and report the limit.",
        "Search the docs for the on-call rota and say who is on call this week.",
        "Read README.md and list the commands it says to run first."]


def run_session(client, ask: str, user: str, steps: int = 3) -> list[str]:
    """An agent session of up to `steps` requests (tool results made up by the client); its decision ids."""
    messages = [{"role": "system", "content": "You are the team's repository assistant. Use the tools."},
                {"role": "user", "content": ask}]
    ids = []
    for i in range(steps):
        reply, h = _chat(client, model="auto", messages=messages, tools=TOOLS, user=user)
        ids.append(h["x-advisor-decision-id"])
        msg = reply.choices[0].message
        if not msg.tool_calls:
            break
        call = msg.tool_calls[0]
        messages.append({"role": "assistant", "content": msg.content,
                         "tool_calls": [{"id": call.id, "type": "function",
                                         "function": {"name": call.function.name,
                                                      "arguments": call.function.arguments}}]})
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": f"result {i + 1} of {call.function.name}: port = 8443, database = postgres"})
    return ids


@pytest.fixture(scope="module")
def traffic(tmp_path_factory, triton_server):
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("traffic")
    store = tmp / "live.duckdb"
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=store,
                          replicas=1, conditions=("baseline",), tasks=one_task_per_class()))  # the router's data
    (tmp / "keys.txt").write_text(f"A {KEY}\nB {KEY_B}\n")
    (tmp / "service.yaml").write_text("version: 1\ndefault_class: agent\nclasses:\n  agent:\n    verifier:\n"
                                      "      checks: [{type: regex, pattern: '\\w'}]\ncapture: {enabled: true}\n")
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(tmp / "keys.txt"),
                   "--config", str(tmp / "service.yaml"), "--ingest-every", "0"], store)
    ids = {"A": [], "B": []}
    try:
        a, b = svc.client(KEY), svc.client(KEY_B)
        for i, ask in enumerate(ASKS):
            ids["A"] += run_session(a, ask, user=f"a{i}")
        ids["B"] += run_session(b, f"My deploy key is {SECRET}; check it is in config/keys.yaml.", user="b0")
        ids["A"] += run_session(a, f"Here is the token {SECRET}, read secrets.env and compare.", user="a-secret")
        svc.records(ids["A"][-1])
        svc.records(ids["B"][-1])
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
    return tmp, store, ids


def advisor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([ADVISOR, *args], capture_output=True, text=True, cwd=cwd, timeout=900)


def test_a_secret_in_a_message_is_in_no_table(traffic):
    from advisor.store import Store

    _, store, ids = traffic
    with Store.open(store, read_only=True) as s:
        steps = s.captured_steps()
        assert {r["tenant"] for r in steps} == {"A", "B"}
        assert len(steps) == len(ids["A"]) + len(ids["B"])
        for table in [r["table_name"] for r in s.query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")]:
            columns = [r["column_name"] for r in s.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND data_type = 'VARCHAR'",
                [table])]
            for col in columns:
                hits = s.query(f'SELECT count(*) AS n FROM "{table}" WHERE "{col}" LIKE ?', [f"%{SECRET[8:30]}%"])
                assert hits[0]["n"] == 0, (table, col)
        redacted = [r for r in steps if "[redacted]" in r["request_json"]]
        assert {r["tenant"] for r in redacted} == {"A", "B"}


@pytest.fixture(scope="module")
def probed(traffic, triton_server):
    """Tenant A's suite from traffic, validated, then probed into the same store: (suite, the commands' output)."""
    tmp, store, _ = traffic
    out = tmp / "suite-a"
    made = advisor("suite", "from-traffic", "--store", str(store), "--tenant", "A", "--out", str(out),
                   "--heldout", "0", "--config", str(tmp / "service.yaml"))
    assert made.returncode == 0, made.stdout + made.stderr
    valid = advisor("suite", "validate", str(out / "suite.yaml"))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    probe = advisor("probe", "--suite", str(out / "suite.yaml"), "--ladder", str(DEMO), "--url",
                    triton_server.grpc_url, "--store", str(store), "--replicas", "2", "--no-report")
    assert probe.returncode == 0, probe.stdout + probe.stderr
    return yaml.safe_load((out / "suite.yaml").read_text()), json.loads((out / "traffic.json").read_text()), probe


def test_a_suite_from_one_tenants_traffic_validates_replays_and_probes(traffic, probed):
    tmp, store, ids = traffic
    suite, manifest, probe = probed
    decisions = {t["replay"]["decision_id"] for t in suite["tasks"]}
    assert decisions and decisions <= set(ids["A"]) and not decisions & set(ids["B"])
    assert all(t["replay"]["tenant"] == "A" and not t.get("tools") for t in suite["tasks"])
    assert manifest["tenants"] == ["A"] and manifest["steps"] == len(ids["A"])
    assert sum(manifest["left_out"].values()) + len(suite["tasks"]) == len(ids["A"])
    checks = {t["replay"]["check"] for t in suite["tasks"]}
    assert checks == {"verifier", "reference"}, checks  # answers by the class's verifier, tool calls by reference
    assert "The answer, per class" in probe.stdout and "agent" in probe.stdout, probe.stdout  # the per-class answer
    assert "SIMULATED" in probe.stdout.upper(), probe.stdout
    from advisor.store import Store

    with Store.open(store, read_only=True) as s:
        runs = s.query("SELECT task_id, rung, stop_reason, overall, unscored FROM runs WHERE suite_name = ?",
                       [suite["name"]])
    assert runs and {r["rung"] for r in runs} == {"nano-12b", "nano-30b", "super-120b"}
    assert not [r for r in runs if r["unscored"]], runs
    assert {r["stop_reason"] for r in runs} <= {"final", "step", "invalid_output"}
    with Store.open(store, read_only=True) as s:  # no tool ran: a replayed call is recorded, not run
        called = s.query("SELECT t.observation FROM turns t JOIN runs r USING (run_key) WHERE r.suite_name = ? "
                         "AND t.action <> 'final' AND t.action <> 'invalid'", [suite["name"]])
    assert called and {c["observation"] for c in called} == {"(not run: a replayed step ends at its tool call)"}
    trained = advisor("router", "train", "--store", str(store), "--suite-name", suite["name"], "--folds", "2",
                      "--out", str(tmp / "traffic-router.json"))  # the traffic's runs train the router
    assert trained.returncode == 0 and "router over 3 rungs" in trained.stdout, trained.stdout + trained.stderr


def test_savings_gives_every_arm_with_its_interval_and_the_report_has_the_section(traffic, probed):
    tmp, store, _ = traffic
    savings = advisor("savings", "--store", str(store), "--json")
    assert savings.returncode == 0, savings.stdout + savings.stderr
    data = json.loads(savings.stdout)
    total = data["total"]
    assert {a["arm"] for a in total["arms"]} == {"as served", "always largest", "always smallest",
                                                "recommended plan", "current router", "static mix"}
    for arm in total["arms"]:
        assert arm["cost_interval"][0] <= arm["cost"] <= arm["cost_interval"][1]
        assert arm["usable_interval"][0] <= arm["usable"] <= arm["usable_interval"][1]
    largest = next(a for a in total["arms"] if a["arm"] == "always largest")
    smallest = next(a for a in total["arms"] if a["arm"] == "always smallest")
    assert smallest["cost"] < largest["cost"]
    assert "static mix" in total["verdict"] and data["simulated"] is True
    report = advisor("report", "--store", str(store), "--suite-name", "traffic-A", "--out", str(tmp / "reports"))
    assert report.returncode == 0, report.stdout + report.stderr
    md = (tmp / "reports" / "traffic-A-demo" / "report.md").read_text()
    assert "## What routing saves on your traffic (SIMULATED)" in md and "static mix" in md
    html = (tmp / "reports" / "traffic-A-demo" / "index.html").read_text()
    assert 'id="savings"' in html
