"""The routing service end to end: `advisor serve` in a subprocess, driven over loopback HTTP with the official
`openai` client, against a real tritonserver (the embedded one) and a real DuckDB file.

The router is trained by the service itself from a small probe stored in a temporary DuckDB file; records
reach that file through the per-worker segments and the ingest (as in production).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.service.launch import ingest_now
from advisor.store import Store

pytestmark = pytest.mark.triton

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"
SUITE = REPO / "suites" / "example" / "suite.yaml"
KEY, LIMITED_KEY = "sk-test-full", "sk-test-small"
AUTH = {"authorization": f"Bearer {KEY}"}  #: what /metrics, /v1/models and a detailed /readyz need
MEASURED = "doc_retrieval"  #: a suite class whose service verifier is measured on the probe runs


# ------------------------------------------------------------------------------------------- helpers
class Service:
    """One `advisor serve` subprocess: started, read up to its ready line, stopped with SIGTERM."""

    def __init__(self, args: list[str], store: Path, timeout: float = 180.0):
        self.store, self.spool = store, Path(f"{store}.live")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("ADVISOR_API_KEYS", None)
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "advisor"), "serve", "--store", str(store), "--port", "0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=REPO)
        self.lines: list[str] = []
        end = time.monotonic() + timeout
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"advisor serve exited ({self.proc.wait()}): {''.join(self.lines)}")
            self.lines.append(line)
            if line.startswith("ready http="):
                self.base = "http://" + line.split("=", 1)[1].strip()
                break
            assert time.monotonic() < end, f"no ready line: {''.join(self.lines)}"
        self._drain = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._drain.start()

    def line_with(self, text: str) -> str:
        return next(ln for ln in self.lines if text in ln)

    def client(self, key: str = KEY, **kwargs):
        import openai

        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=30, **kwargs)

    def stop(self, timeout: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self._drain.join(timeout=5)
        return code

    def records(self, decision_id: str, timeout: float = 10.0) -> tuple[dict, list[dict]]:
        """Ingest the spool (from this process) until the decision is in the store; its row and attempts."""
        end = time.monotonic() + timeout
        while True:
            ingest_now(self.spool, self.store)
            with Store.open(self.store, read_only=True) as s:
                rows = s.query("SELECT * FROM routing_decisions WHERE decision_id = ?", [decision_id])
                attempts = s.query("SELECT * FROM live_outcomes WHERE decision_id = ? ORDER BY attempt", [decision_id])
            if rows:
                return rows[0], attempts
            assert time.monotonic() < end, f"decision {decision_id} never reached the store"
            time.sleep(0.3)


def _chat(client, **kwargs):
    """(parsed completion, headers) of one chat completion."""
    raw = client.chat.completions.with_raw_response.create(**kwargs)
    return raw.parse(), raw.headers


def _task_tools(task) -> list[dict]:
    from advisor.tools.base import available_tools

    specs = available_tools()
    return [{"type": "function", "function": {"name": n, "description": specs[n].description,
                                              "parameters": specs[n].parameters}} for n in task.tools]


def _first_action(ladder, rung: str, task):
    from advisor.standin.behaviour import make_plan

    return make_plan(ladder.rung(rung).standin, task, False, None, "baseline").action_at(0)



def one_task_per_class(suite: Path = SUITE) -> list[str]:
    """The first task of each class of `suite`: a probe of these gives a router enough prompts to train on."""
    from advisor.suite import load_suite

    first: dict[str, str] = {}
    for task in load_suite(suite).tasks:
        first.setdefault(task.task_class, task.id)
    return list(first.values())

@pytest.fixture(scope="module")
def suite():
    from advisor.suite import load_suite

    return load_suite(SUITE)


@pytest.fixture(scope="module")
def escalation_task(suite, triton_server):
    """A task whose first step nano-12b gets wrong with a well-formed reply (no call of the first reference tool;
    a malformed call is a broken step, retried before any verifier: advisor.service.checks.step_check) and nano-30b
    right."""
    for task in suite.tasks:
        tool = task.reference.steps[0].tool
        small, mid = (_first_action(triton_server.ladder, r, task) for r in ("nano-12b", "nano-30b"))
        if small.kind != "malformed" and not (small.kind == "call" and small.name == tool) and \
                mid.kind == "call" and mid.name == tool:
            return task
    pytest.fail("no example task separates nano-12b from nano-30b on its first step")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, triton_server, suite, escalation_task):
    """A store with a small probe (the router's training data), a key file and a service config."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("service")
    by_class: dict[str, list[str]] = {}
    for t in suite.tasks:
        by_class.setdefault(t.task_class, []).append(t.id)
    tasks = [i for ids in by_class.values() for i in ids[:2]]
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=tmp / "probe.duckdb",
                          replicas=1, conditions=("baseline",), tasks=tasks))
    digest = hashlib.sha256(LIMITED_KEY.encode()).hexdigest()
    (tmp / "keys.txt").write_text(f"# test keys\nfull {KEY}\nsmall sha256:{digest} nano-12b\n")
    tool = escalation_task.reference.steps[0].tool
    (tmp / "service.yaml").write_text(f"""version: 1
default_class: chat
classes:
  chat: {{verifier: none}}
  agent_step:
    chain: [nano-12b, nano-30b, super-120b]
    retries: 2
    verifier:
      checks:
        - {{type: tool_call, tool: {tool}}}
  extraction:
    match: ['(?i)\\bextract\\b']
    verifier: none
  {MEASURED}:
    retries: 2
    verifier:
      checks: [{{type: regex, pattern: '\\w'}}]
      false_accept: 0.37
      false_reject: 0.41
limits: {{max_body_bytes: 65536, max_tokens: 2048, deadline_s: 20, attempt_timeout_s: 5}}
""")
    from advisor.cli import main

    assert main(["verifier", "measure", "--config", str(tmp / "service.yaml"), "--store", str(tmp / "probe.duckdb"),
                 "--class", MEASURED]) == 0  # the service reads these rates at startup
    return tmp


@pytest.fixture(scope="module")
def service(workdir, triton_server):
    """`advisor serve --url` to the session's embedded Triton; router trained from the store at start."""
    store = workdir / "live.duckdb"
    shutil.copy(workdir / "probe.duckdb", store)
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(workdir / "keys.txt"),
                   "--config", str(workdir / "service.yaml"), "--ingest-every", "0"], store)
    yield svc
    assert svc.stop() == 0, "".join(svc.lines)


# ------------------------------------------------------------------------------------------- tests
def test_plain_chat_is_routed_answered_costed_and_recorded(service):
    reply, headers = _chat(service.client(), model="auto", messages=[{"role": "user", "content": "Say hello."}],
                           user="end-user-42", temperature=0.2, top_p=0.9, seed=7, presence_penalty=0.5,
                           frequency_penalty=0.1)  # every sampling field is accepted (sampling(): test_service_units)
    assert reply.choices[0].message.content and reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content.startswith("Hello")  # not the give-up line
    # simulated: said in headers, model and system_fingerprint, never inside what the content says
    assert "SIMULATED" not in reply.choices[0].message.content and reply.system_fingerprint == "fp_advisor_simulated"
    assert reply.model == headers["x-advisor-rung"] in headers["x-advisor-chain"].split(",")
    assert headers["x-advisor-simulated"] == "true" and headers["x-advisor-class"] == "chat"
    assert headers["x-advisor-class-source"].startswith("predicted: default_class")
    assert 0 <= float(headers["x-advisor-p-usable"]) <= 1 and headers["x-advisor-attempts"] == "1"
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    extra = usage.model_extra["advisor"]
    assert extra["cost_usd"] > 0 and extra["attempts"][0]["rung"] == reply.model
    decision, attempts = service.records(headers["x-advisor-decision-id"])
    from advisor.router.routing.policies import POLICIES

    assert decision["policy"].split(":")[0] in POLICIES and decision["final_rung"] == reply.model
    assert headers["x-advisor-policy"] == decision["policy"] and json.loads(decision["explanation_json"])["rule"]
    assert decision["prompt_text"] is None and len(decision["request_hash"]) == 64  # hash only by default
    assert decision["simulated"] and decision["class_source"].startswith("predicted")
    assert decision["end_user"] == "end-user-42" and decision["api_key"] == "full"
    assert [a["rung"] for a in attempts] == [reply.model] and attempts[0]["simulated"]
    assert attempts[0]["input_tokens"] == usage.prompt_tokens
    assert attempts[0]["cost_usd"] == pytest.approx(extra["cost_usd"])


def _readme_curl() -> tuple[str, dict]:
    """The README's `advisor serve --config ...` file and the JSON body of its curl example."""
    import re

    text = (REPO / "README.md").read_text()
    config = re.search(r"advisor serve --config (\S+)", text).group(1)
    body = re.search(r"curl -s localhost:8000/v1/chat/completions.*?-d '(\{.*?\})'", text, re.S).group(1)
    return config, json.loads(body)


def test_readme_curl_example_is_answered_on_the_demo_ladder(workdir, triton_server):
    """The README's service example (its config, its curl body) on the demo ladder gets a labelled simulated
    answer that does the asked-for thing, not the stand-ins' give-up line."""
    import re

    import httpx

    from advisor.standin.behaviour import GIVE_UP_TEXT

    config, body = _readme_curl()
    store = workdir / "readme.duckdb"
    shutil.copy(workdir / "probe.duckdb", store)
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(workdir / "keys.txt"),
                   "--config", str(REPO / config), "--ingest-every", "0"], store)
    try:
        r = httpx.post(svc.base + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                       timeout=30)
        assert r.status_code == 200, r.text
        content = r.json()["choices"][0]["message"]["content"]
        assert GIVE_UP_TEXT not in content and "SIMULATED" not in content
        assert r.headers["x-advisor-simulated"] == "true" and r.headers["x-advisor-verdict"] == "accepted"
        asked = body["messages"][-1]["content"]
        for ident in re.findall(r"\b[A-Z]{2,}-\d+\b", asked) if "xtract" in asked else ():
            assert ident in content  # the extraction is done, not just acknowledged
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
    attempts = r.json()["usage"]["advisor"]["attempts"]
    assert svc.line_with("stopped; ").startswith(  # what the store holds, whichever ingest moved it in
        f"stopped; {store} holds 1 decision and {len(attempts)} attempt")


def test_streamed_chat_sends_chunks_before_the_end(service):
    import httpx

    body = {"model": "nano-30b", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Tell me a story about a lighthouse keeper."}]}
    events = []
    with httpx.stream("POST", service.base + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {KEY}"}) as resp:
        assert resp.status_code == 200 and resp.headers["x-advisor-rung"] == "nano-30b"
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    content = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert len([c for c in content if c]) >= 3, "the answer came as several content chunks"
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    # the official client reads the same stream
    stream = service.client().chat.completions.create(model="nano-30b", stream=True, messages=body["messages"])
    texts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(texts) >= 3 and "".join(texts) == "".join(c for c in content if c)


def _task_whose_first_action_is_a_call(suite, rung: str = "super-120b"):
    """A task on which the rung's stand-in (no seed, no skill in the prompt) starts with the reference's first call."""
    from advisor.ladder import load_ladder
    from advisor.standin.behaviour import make_plan

    params = load_ladder(REPO / "ladders" / "demo.yaml").rung(rung).standin
    for task in suite.tasks:
        first = make_plan(params, task, False, None, "baseline").actions[0]
        step = task.reference.steps[0]
        if first.kind == "call" and first.name == step.tool and first.arguments == step.arguments:
            return task
    raise AssertionError("no task whose plan starts with its reference call")


def test_tool_call_comes_back_as_openai_tool_calls(service, suite):
    task = _task_whose_first_action_is_a_call(suite)
    reply, headers = _chat(service.client(), model="super-120b", tools=_task_tools(task),
                           messages=[{"role": "user", "content": task.instructions}])
    choice = reply.choices[0]
    assert headers["x-advisor-policy"] == "pinned" and reply.model == "super-120b"
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    step = task.reference.steps[0]
    assert call.function.name == step.tool and json.loads(call.function.arguments) == step.arguments
    # the conversation goes on: the call and its result are rendered back in the rung's own format
    follow, _ = _chat(service.client(), model="super-120b", tools=_task_tools(task), messages=[
        {"role": "user", "content": task.instructions},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "HTTP 200 {}"}])
    assert follow.choices[0].message.tool_calls or follow.choices[0].message.content


def test_a_stand_in_works_a_clients_own_tools_through_the_service(service):
    """Tools that are no suite task's (an agent framework's): the demo rung looks the order up, refunds it with
    the looked-up amount, reads the results and answers (`advisor.standin.tooluse`)."""
    from test_standin_tools import ASK, TOOLS, run_tool

    tools = [{"type": "function", "function": t} for t in TOOLS]
    messages = [{"role": "user", "content": ASK}]
    calls = []
    for _ in range(6):
        reply, headers = _chat(service.client(), model="super-120b", tools=tools, messages=messages, seed=3)
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        call = message.tool_calls[0]
        args = json.loads(call.function.arguments)
        calls.append((call.function.name, args))
        messages += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                     {"role": "tool", "tool_call_id": call.id, "content": run_tool(call.function.name, args)}]
    assert calls == [("get_order", {"order_id": "ORD-1042"}),
                     ("refund_order", {"order_id": "ORD-1042", "amount_cents": 1999, "reason": "damaged"})]
    assert "re_8812" in message.content and headers["x-advisor-simulated"] == "true"


def test_two_lookups_come_back_as_parallel_tool_calls(service):
    """Two look-ups the message names: one reply with two `tool_calls` (ids apart), both results sent back, an
    answer from both; with `parallel_tool_calls: false` the same step gives the first call only."""
    from test_standin_tools import LOOKUPS

    tools = [{"type": "function", "function": t} for t in LOOKUPS]
    ask = "Get order ORD-1042 and the customer ann@example.com, then tell me both."
    results = {"get_order": '{"order_id": "ORD-1042", "status": "delivered"}',
               "get_customer": '{"email": "ann@example.com", "name": "Ann"}'}
    for seed in range(12):
        messages = [{"role": "user", "content": ask}]
        reply, _ = _chat(service.client(), model="super-120b", tools=tools, messages=messages, seed=seed)
        calls = reply.choices[0].message.tool_calls or []
        if len(calls) != 2:
            continue
        messages += [{"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]},
                     *[{"role": "tool", "tool_call_id": c.id, "content": results[c.function.name]} for c in calls]]
        answer, _ = _chat(service.client(), model="super-120b", tools=tools, messages=messages, seed=seed)
        if answer.choices[0].message.content and "Ann" in answer.choices[0].message.content:
            break
    else:
        raise AssertionError("super-120b never made both look-ups in one reply and answered from both in 12 seeds")
    assert [c.function.name for c in calls] == ["get_order", "get_customer"] and calls[0].id != calls[1].id
    assert reply.choices[0].finish_reason == "tool_calls" and "delivered" in answer.choices[0].message.content
    one, _ = _chat(service.client(), model="super-120b", tools=tools, messages=messages[:1], seed=seed,
                   parallel_tool_calls=False)
    assert [c.function.name for c in one.choices[0].message.tool_calls] == ["get_order"]


def test_pinned_rung_and_unknown_rung(service):
    reply, headers = _chat(service.client(), model="nano-12b", messages=[{"role": "user", "content": "hi"}])
    assert reply.model == "nano-12b" and headers["x-advisor-chain"] == "nano-12b"
    decision, _ = service.records(headers["x-advisor-decision-id"])
    assert decision["policy"] == "pinned" and decision["chosen_rung"] == "nano-12b"
    import openai

    with pytest.raises(openai.NotFoundError) as err:
        service.client().chat.completions.create(model="nano12b", messages=[{"role": "user", "content": "hi"}])
    assert "Did you mean 'nano-12b'" in str(err.value) and err.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as err:  # a pinned rung the request's own rungs leave out
        service.client().chat.completions.create(model="nano-12b", messages=[{"role": "user", "content": "hi"}],
                                                 extra_body={"advisor": {"rungs": ["super-120b"]}})
    assert err.value.body["param"] == "advisor.rungs"
    models = {m.id for m in service.client().models.list()}
    assert models == {"auto", "orchestrator", "nano-12b", "nano-30b", "super-120b"}  # the demo has an orchestrator
    card = service.client().models.retrieve("nano-12b")  # GET /v1/models/{id}
    assert card.id == "nano-12b" and card.model_extra["advisor"]["simulated"] is True
    with pytest.raises(openai.NotFoundError) as err:
        service.client().models.retrieve("nano12b")
    assert "Did you mean 'nano-12b'" in str(err.value) and err.value.body["code"] == "model_not_found"


def test_keys_bounds_and_unsupported_fields(service):
    import openai

    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError):
        service.client(key="sk-wrong").chat.completions.create(model="auto", messages=msgs)
    with pytest.raises(openai.PermissionDeniedError):
        service.client(key=LIMITED_KEY).chat.completions.create(model="super-120b", messages=msgs)
    reply = service.client(key=LIMITED_KEY).chat.completions.create(model="auto", messages=msgs)
    assert reply.model == "nano-12b", "a key limited to nano-12b is routed to it"
    with pytest.raises(openai.APIStatusError) as err:
        service.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "x" * 70000}])
    assert err.value.status_code == 413
    ignored = service.client().chat.completions.with_raw_response.create(model="auto", messages=msgs,
                                                                       logit_bias={"1": 2})
    assert ignored.headers["x-advisor-ignored"] == "logit_bias", "a field the API defines is accepted and named"
    with pytest.raises(openai.BadRequestError) as err:
        service.client().chat.completions.create(model="auto", messages=msgs, max_tokens=100000)
    assert err.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError) as err:  # a preference header is named as the header
        service.client().chat.completions.create(model="auto", messages=msgs,
                                                 extra_headers={"x-advisor-max-latency-s": "soon"})
    assert err.value.body["param"] == "x-advisor-max-latency-s"
    with pytest.raises(openai.BadRequestError) as err:  # with a header too, a non-object `advisor` is a 400
        service.client().chat.completions.create(model="auto", messages=msgs, extra_body={"advisor": "fast"},
                                                 extra_headers={"x-advisor-target": "0.5"})
    assert err.value.body["param"] == "advisor"
    import httpx

    # a lone surrogate decodes from JSON but is no UTF-8: a 400 naming the field (it was a 500 from the encoder)
    raw = b'{"model": "auto", "messages": [{"role": "user", "content": "a \\ud800 b"}]}'
    lone = httpx.post(service.base + "/v1/chat/completions", content=raw, timeout=30,
                      headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert lone.status_code == 400 and lone.json()["error"]["param"] == "messages.0.content"
    # a class name no header can carry as it is comes back percent-encoded (it was a 500 once the work was done)
    from urllib.parse import unquote

    for name in ("分类", "a\r\nx-injected: 1"):
        reply, headers = _chat(service.client(), model="auto", messages=msgs, extra_body={"advisor": {"class": name}})
        assert unquote(headers["x-advisor-class"]) == name and "x-injected" not in headers
        decision, _ = service.records(headers["x-advisor-decision-id"])
        assert decision["task_class"] == name, "the store keeps the class as it was sent"


def test_verifier_rejects_the_small_rung_and_a_larger_one_answers(service, escalation_task):
    task = escalation_task
    reply, headers = _chat(service.client(), model="auto", tools=_task_tools(task),
                           messages=[{"role": "user", "content": task.instructions}],
                           extra_body={"advisor": {"class": "agent_step"}})
    assert headers["x-advisor-policy"].startswith("chain:") and headers["x-advisor-class-source"] == "given"
    assert headers["x-advisor-verdict"] == "accepted" and reply.model != "nano-12b"
    assert reply.choices[0].message.tool_calls[0].function.name == task.reference.steps[0].tool
    decision, attempts = service.records(headers["x-advisor-decision-id"])
    rungs = [a["rung"] for a in attempts]
    assert rungs[:2] == ["nano-12b", "nano-12b"], "k=2 attempts on the first rung"
    assert [a["accepted"] for a in attempts] == [False] * (len(attempts) - 1) + [True]
    assert all(a["verified"] for a in attempts) and decision["attempts"] == len(attempts) == int(headers["x-advisor-attempts"])
    assert decision["final_rung"] == reply.model == rungs[-1] and decision["status"] == "ok"
    assert decision["total_cost_usd"] == pytest.approx(sum(a["cost_usd"] for a in attempts))
    metrics = service.client()._client.get(service.base + "/metrics", headers=AUTH).text
    assert 'advisor_escalations_total{from_rung="nano-12b",to_rung="nano-30b"}' in metrics
    assert 'advisor_verifier_verdicts_total{task_class="agent_step",verdict="rejected"}' in metrics



def test_a_stream_with_a_verifier_delivers_the_accepted_answer_as_chunks(service, escalation_task):
    """With a verifier the answer is verified before anything is sent (docs/service.md): the stream carries the
    accepted answer of the larger rung, as chunks, and every attempt is in the store."""
    task = escalation_task
    stream = service.client().chat.completions.with_raw_response.create(
        model="auto", tools=_task_tools(task), messages=[{"role": "user", "content": task.instructions}],
        extra_body={"advisor": {"class": "agent_step"}}, stream=True)
    headers = stream.headers
    chunks = list(stream.parse())
    calls = [c for ch in chunks if ch.choices for c in ch.choices[0].delta.tool_calls or []]
    assert headers["x-advisor-verdict"] == "accepted" and headers["x-advisor-rung"] != "nano-12b"
    assert [c.function.name for c in calls] == [task.reference.steps[0].tool]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    decision, attempts = service.records(headers["x-advisor-decision-id"])
    assert [a["rung"] for a in attempts][:2] == ["nano-12b", "nano-12b"] and attempts[-1]["accepted"]
    assert decision["final_rung"] == headers["x-advisor-rung"] and len(attempts) == int(headers["x-advisor-attempts"])

def test_policy_uses_the_verifier_rates_measured_on_probe_runs(service, capsys):
    with Store.open(service.store, read_only=True) as s:
        pooled = s.query("SELECT * FROM verifier_rates WHERE task_class = ? AND rung = '*'", [MEASURED])[0]
    assert pooled["runs"] > 0
    line = service.line_with(f"verifier rates of class {MEASURED!r}")
    assert ("measured" in line) and pooled["measurement_id"] in line
    assert "class 'agent_step': config" in service.line_with("class 'agent_step'")
    _, headers = _chat(service.client(), model="auto", messages=[{"role": "user", "content": "Where is the doc?"}],
                       extra_body={"advisor": {"class": MEASURED}})
    decision, _ = service.records(headers["x-advisor-decision-id"])
    reason = json.loads(decision["explanation_json"])["reason"]
    assert reason["mode"] == "escalate" and reason["k"] == 2
    for side, stated in (("false_accept", 0.37), ("false_reject", 0.41)):  # measured where measurable, else stated
        assert reason[side] == pytest.approx(stated if pooled[side] is None else pooled[side])
    assert (reason["false_accept"], reason["false_reject"]) != (0.37, 0.41)
    # `advisor floors` shows this live traffic beside the probe's usable rates (and decides from the probe)
    from advisor.cli import main

    capsys.readouterr()
    assert main(["floors", "--store", str(service.store), "--class", MEASURED, "--json"]) == 0
    cells = {c["rung"]: c for c in json.loads(capsys.readouterr().out)["live"]["cells"]}
    with Store.open(service.store, read_only=True) as s:
        tried = s.query("SELECT rung, count(*) AS n, count(*) FILTER (WHERE accepted) AS ok FROM live_outcomes "
                        "JOIN routing_decisions USING (decision_id) WHERE task_class = ? AND verified "
                        "AND NOT failover GROUP BY rung", [MEASURED])
    assert tried and {r["rung"]: (r["n"], r["ok"]) for r in tried} == {
        rung: (c["attempts"], c["accepted"]) for rung, c in cells.items()}


def test_metrics_health_and_readiness(service):
    import httpx

    _chat(service.client(), model="auto", messages=[{"role": "user", "content": "hi"}])  # labels exist once used
    assert httpx.get(service.base + "/healthz").json()["status"] == "ok"
    ready = httpx.get(service.base + "/readyz", headers=AUTH)
    assert ready.status_code == 200 and "nano-12b" in ready.json()["detail"]
    text = httpx.get(service.base + "/metrics", headers=AUTH).text
    for name in ("advisor_requests_total", "advisor_attempts_total", "advisor_cost_usd_total",
                 "advisor_routing_decision_seconds_bucket", "advisor_request_seconds_bucket",
                 "advisor_in_flight_requests", "advisor_refused_requests_total"):
        assert name in text, name
    assert 'simulated="true"' in text
    import openai

    with pytest.raises(openai.NotFoundError) as err:  # an endpoint advisor does not serve: OpenAI's error shape
        service.client().embeddings.create(model="auto", input="hi")
    assert err.value.body["code"] == "unknown_url" and "POST /v1/chat/completions" in err.value.body["message"]
    wrong = httpx.get(service.base + "/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert wrong.headers["allow"] == "POST"


@pytest.mark.slow
def test_embedded_default_fails_over_when_a_rung_is_killed(workdir, tmp_path):
    """No --url: the service starts its own embedded Triton; a rung unloaded mid-test is failed over."""
    import tritonclient.grpc as grpcclient

    store = tmp_path / "embedded.duckdb"
    shutil.copy(workdir / "probe.duckdb", store)
    svc = Service(["--keys", str(workdir / "keys.txt"), "--ingest-every", "0"], store)
    try:
        grpc_url = svc.line_with("embedded Triton").split("grpc=")[1].split()[0]
        client = svc.client()
        msgs = [{"role": "user", "content": "Summarise the release notes."}]
        _, headers = _chat(client, model="auto", messages=msgs)
        victim = headers["x-advisor-rung"]
        from advisor.ladder import load_ladder

        grpcclient.InferenceServerClient(grpc_url).unload_model(load_ladder(DEMO).rung(victim).triton_model)
        started = time.monotonic()
        reply, headers = _chat(client, model="auto", messages=msgs)
        assert time.monotonic() - started < 15, "a dead rung must not hang the request"
        assert reply.model != victim and headers["x-advisor-failovers"] == "1"
        decision, attempts = svc.records(headers["x-advisor-decision-id"])
        assert attempts[0]["rung"] == victim and attempts[0]["failover"] and attempts[0]["error"].startswith("down")
        assert attempts[1]["rung"] == reply.model and attempts[1]["error"] is None
        assert decision["failovers"] == 1 and decision["status"] == "ok"
        metrics = client._client.get(svc.base + "/metrics", headers=AUTH).text
        assert f'advisor_failovers_total{{reason="down",rung="{victim}"}} 1.0' in metrics
    finally:
        assert svc.stop() == 0, "".join(svc.lines)


@pytest.mark.slow
def test_triton_unreachable_gives_503_and_red_readiness(workdir, tmp_path):
    import warnings

    from advisor.router.training.fit import fit_router, training_data_from_store
    from advisor.triton.server import free_port

    with Store.open(workdir / "probe.duckdb", read_only=True) as s, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a tiny probe: some rungs have no signal (the router says so)
        fit_router(training_data_from_store(s), folds=2).save(tmp_path / "router.json")
    svc = Service(["--url", f"127.0.0.1:{free_port()}", "--ladder", str(DEMO), "--router", str(tmp_path / "router.json"),
                   "--keys", str(workdir / "keys.txt")], tmp_path / "none.duckdb")
    try:
        import httpx
        import openai

        assert httpx.get(svc.base + "/readyz").status_code == 503
        with pytest.raises(openai.APIStatusError) as err:
            svc.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
        assert err.value.status_code == 503 and "Is Triton" in err.value.message
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
    with Store.open(tmp_path / "none.duckdb", read_only=True) as s:  # the failed request is recorded too
        assert s.query("SELECT status, http_status FROM routing_decisions") == [{"status": "error", "http_status": 503}]


@pytest.mark.slow
def test_two_workers_lose_no_record_under_a_burst(workdir, triton_server, tmp_path):
    store = tmp_path / "burst.duckdb"
    shutil.copy(workdir / "probe.duckdb", store)
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(workdir / "keys.txt"),
                   "--workers", "2", "--ingest-every", "1"], store)
    try:
        client = svc.client()

        def one(i):
            raw = client.chat.completions.with_raw_response.create(
                model="auto", messages=[{"role": "user", "content": f"Request number {i}: say hi."}])
            return raw.headers["x-advisor-decision-id"]

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            ids = list(pool.map(one, range(500)))
        assert len(set(ids)) == 500
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
    with Store.open(store, read_only=True) as s:
        rows = s.query("SELECT count(*) AS n, count(DISTINCT worker) AS workers FROM routing_decisions")[0]
        attempts = s.query("SELECT count(*) AS n FROM live_outcomes")[0]["n"]
    assert rows["n"] == 500 and attempts >= 500
    assert 1 <= rows["workers"] <= 2  # how the kernel spreads connections over the two workers is its business
    assert not list(svc.spool.glob("*.*")), "every segment was ingested"


@pytest.mark.slow
def test_a_rung_predicted_never_usable_is_not_picked_while_another_is(workdir, triton_server, tmp_path):
    """A rung predicted never usable does not lead while another is usable (a value rule with a tiny value, or a
    target of 0, would take the cheapest rung whatever its P(usable)). The probe's nano-12b runs are all unusable,
    so the router the service trains predicts it never usable; asked with a value so small that the cheapest rung
    has the best net value, another rung leads and the record says why."""
    import duckdb

    store = tmp_path / "never.duckdb"
    shutil.copy(workdir / "probe.duckdb", store)
    with duckdb.connect(str(store)) as con:
        changed = con.execute("UPDATE runs SET overall = 0, if_score = 0, tc_score = 0 WHERE rung = 'nano-12b' "
                              "RETURNING run_key").fetchall()
    assert changed, "the probe ran nano-12b"
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(workdir / "keys.txt")], store)
    try:
        raw = svc.client().chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "Say hi to the new team member."}],
            extra_body={"advisor": {"value_usd": 1e-9}})  # worth nothing: the cheapest rung has the best net value
        chain, p_usable = raw.headers["x-advisor-chain"].split(","), float(raw.headers["x-advisor-p-usable"])
        decision, _ = svc.records(raw.headers["x-advisor-decision-id"])
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
    assert chain[0] != "nano-12b" and raw.headers["x-advisor-rung"] != "nano-12b"
    assert p_usable >= 0.005
    assert json.loads(decision["explanation_json"])["never_usable"].startswith("nano-12b: P(usable) 0.00")


def test_an_internal_error_is_a_500_in_openai_shape(workdir, monkeypatch, tmp_path):
    """A bug inside a request (here a routing decision that raises) answers OpenAI's error shape, not plain text
    (the ASGI app in process: no way to make the real service fail like this on purpose)."""
    from starlette.testclient import TestClient

    from advisor.ladder import load_ladder
    from advisor.service.http import app as service_app
    from advisor.service.launch import train_from_store
    from advisor.service.process.runtime import ServeSettings

    router = train_from_store(workdir / "probe.duckdb", load_ladder(DEMO)).save(tmp_path / "router.json")

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(service_app, "decide", broken)
    settings = ServeSettings(ladder_path=str(DEMO), router_path=str(router), spool=str(tmp_path / "spool"), urls={},
                             no_auth=True)
    with TestClient(service_app.create_app(settings), raise_server_exceptions=False) as client:
        r = client.post("/v1/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
        assert client.get("/healthz").status_code == 200, "the service goes on"
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error" and "RuntimeError: a bug" in r.json()["error"]["message"]


def test_a_closing_worker_stops_its_load_poller_and_closes_its_client(workdir, tmp_path):
    """The runtime's close stops the load board's poller and closes its HTTP client."""
    import asyncio

    from advisor.ladder import load_ladder
    from advisor.service.launch import train_from_store
    from advisor.service.process.runtime import Runtime, ServeSettings

    router = train_from_store(workdir / "probe.duckdb", load_ladder(DEMO)).save(tmp_path / "router.json")
    rt = Runtime(ServeSettings(ladder_path=str(DEMO), router_path=str(router), spool=str(tmp_path / "spool"),
                               urls={}, no_auth=True))

    async def run():
        rt.load_board.ensure_polling()
        await asyncio.sleep(0.05)  # the poller has built its client and polled once
        task = rt.load_board._task
        assert task is not None and not task.done()
        await rt.close()
        return task

    task = asyncio.run(run())
    assert task.done() and rt.load_board._http is None
