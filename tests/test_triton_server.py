"""The embedded Triton: a real tritonserver whose stand-ins speak exactly the vLLM backend's contract.

Most tests talk to it with a bare tritonclient gRPC streaming client written only from the documented
contract (no advisor code on the client side).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from advisor.errors import BackendError, ConfigError
from advisor.ladder import load_ladder
from advisor.triton.contract import INPUTS, OUTPUTS, contract_problems
from advisor.triton.server import EmbeddedTriton, free_port

pytestmark = pytest.mark.triton
REPO = Path(__file__).resolve().parent.parent


async def bare_generate(url: str, model: str, prompt: str, **inputs) -> list[dict]:
    """Stream one request with the vLLM backend's tensors; return every response's outputs (errors as {'error'})."""
    import tritonclient.grpc.aio as grpcclient
    from tritonclient.grpc import InferInput

    tensors = []
    for name, value in {"text_input": prompt, **inputs}.items():
        if isinstance(value, bool):
            t = InferInput(name, [1], "BOOL")
            t.set_data_from_numpy(np.array([value], dtype=bool))
        else:
            t = InferInput(name, [1], "BYTES")
            t.set_data_from_numpy(np.array([str(value).encode()], dtype=np.object_))
        tensors.append(t)

    async def requests():
        yield {"model_name": model, "inputs": tensors}

    client = grpcclient.InferenceServerClient(url)
    out = []
    try:
        async for result, error in client.stream_infer(requests()):
            if error is not None:
                out.append({"error": str(error)})
                continue
            names = [o.name for o in result.get_response().outputs]
            out.append({n: result.as_numpy(n).tolist() for n in names})
    finally:
        await client.close()
    return [r for r in out if r]  # an empty final (flags-only) response carries no outputs


FLAGS = dict(exclude_input_in_output=True, return_finish_reason=True, return_num_input_tokens=True,
             return_num_output_tokens=True)


async def test_every_rung_answers_a_contract_only_client(triton_server):
    for model in triton_server.ladder.models():
        responses = await bare_generate(triton_server.grpc_url, model.triton_model, "Say hello.",
                                        sampling_parameters=json.dumps({"max_tokens": 12}), **FLAGS)
        assert len(responses) == 1, responses
        r = responses[0]
        assert r["text_output"][0], model.name
        assert r["finish_reason"][0] in (b"stop", b"length")
        assert r["num_input_tokens"][0] > 0 and 0 < r["num_output_tokens"][0] <= 12


async def test_metadata_is_exactly_the_contract(triton_server):
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(triton_server.grpc_url)
    try:
        for model in triton_server.ladder.models():
            meta = await client.get_model_metadata(model.triton_model, as_json=True)
            config = await client.get_model_config(model.triton_model, as_json=True)
            assert contract_problems(meta, config, exact=True) == []
            assert {t["name"] for t in meta["inputs"]} == {t.name for t in INPUTS}
            assert {t["name"] for t in meta["outputs"]} == {t.name for t in OUTPUTS}
    finally:
        await client.close()


async def test_stream_gives_partial_responses_that_add_up(triton_server):
    model = triton_server.ladder.rungs[-1].triton_model
    sampling = json.dumps({"max_tokens": 40})
    whole = (await bare_generate(triton_server.grpc_url, model, "Plan the task.", sampling_parameters=sampling,
                                 **FLAGS))[0]
    parts = await bare_generate(triton_server.grpc_url, model, "Plan the task.", sampling_parameters=sampling,
                                stream=True, **FLAGS)
    assert len(parts) > 1
    assert b"".join(p["text_output"][0] for p in parts) == whole["text_output"][0]
    assert sum(p["num_output_tokens"][0] for p in parts) == whole["num_output_tokens"][0]
    assert "finish_reason" not in parts[0] and parts[-1]["finish_reason"] == whole["finish_reason"]


async def test_vllm_defaults_max_tokens_16_and_prompt_echo(triton_server):
    model = triton_server.ladder.rungs[-1].triton_model
    r = (await bare_generate(triton_server.grpc_url, model, "ECHO-ME ", return_num_output_tokens=True))[0]
    assert r["text_output"][0].startswith(b"ECHO-ME ")  # exclude_input_in_output defaults to false
    assert r["num_output_tokens"][0] <= 16
    assert set(r) == {"text_output", "num_output_tokens"}  # only the outputs that were asked for


async def test_logprob_outputs_when_asked(triton_server):
    model = triton_server.ladder.rungs[0].triton_model
    r = (await bare_generate(triton_server.grpc_url, model, "x", return_cumulative_logprob=True,
                             return_logprobs=True, sampling_parameters='{"max_tokens": 4, "logprobs": 1}'))[0]
    assert r["cumulative_logprob"][0] <= 0
    assert isinstance(json.loads(r["logprobs"][0]), list)


async def test_bad_sampling_json_is_an_error_response_not_a_crash(triton_server):
    model = triton_server.ladder.rungs[0].triton_model
    bad = await bare_generate(triton_server.grpc_url, model, "x", sampling_parameters="{not json", **FLAGS)
    assert len(bad) == 1 and "not valid JSON" in bad[0]["error"]
    again = await bare_generate(triton_server.grpc_url, model, "x", sampling_parameters='{"max_tokens": 3}', **FLAGS)
    assert again[0]["num_output_tokens"][0] <= 3


def test_real_ladder_is_refused():
    with pytest.raises(ConfigError, match="vLLM backend"):
        EmbeddedTriton(load_ladder(REPO / "ladders" / "nemotron.yaml"))


def test_busy_port_is_a_clear_error(triton_server):
    busy = int(triton_server.grpc_url.rsplit(":", 1)[1])
    with pytest.raises(BackendError, match=f"grpc port 127.0.0.1:{busy} is already in use"):
        EmbeddedTriton(triton_server.ladder, grpc_port=busy).start()


SLOW_LADDER = """\
version: 1
name: slow
simulated: true
rungs:
  - name: slow
    hf_id: test/slow
    params_total_b: 1
    triton_model: standin_slow
    price: {basis: tokens, usd_per_m_input: 0.1, usd_per_m_output: 0.1, source: test, as_of: "2026-11"}
    context_length: 4096
    tool_call_format: hermes
    standin: {capability: 0.0, latency_ms: 400}
"""


@pytest.mark.slow
async def test_slow_stand_in_serves_requests_concurrently(tmp_path, monkeypatch):
    """16 requests of 0.4 s each: the server has many of them in flight at once (started, not yet answered)."""
    import advisor.triton.server as server_module

    started: list[float] = []  # one entry per request the server began to serve (its responder ran)
    real = server_module.standin_responder

    def counting(model, suite_paths=()):
        respond = real(model, suite_paths)

        def wrapped(prompt, sampling):
            started.append(time.monotonic())
            return respond(prompt, sampling)

        return wrapped

    monkeypatch.setattr(server_module, "standin_responder", counting)
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW_LADDER)
    in_flight: list[int] = []  # at each answer: requests started minus those already answered

    async def one(i: int):
        out = await bare_generate(server.grpc_url, "standin_slow", f"q{i}", **args)
        in_flight.append(len(started) - len(in_flight))
        return out

    with EmbeddedTriton(load_ladder(path)) as server:
        args = dict(sampling_parameters='{"max_tokens": 4}', **FLAGS)
        results = await asyncio.gather(*(one(i) for i in range(16)))
    assert all(r and "text_output" in r[0] for r in results)
    assert len(started) == 16
    assert max(in_flight) >= 8, f"at most {max(in_flight)} of 16 slow requests in flight: not served concurrently"


@pytest.mark.slow
async def test_a_stop_lets_the_requests_in_flight_finish(tmp_path):
    """The server is started without an exit timeout (so a stop does not wait for its models to unload), and a
    request begun before the stop is still answered whole."""
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW_LADDER.replace("latency_ms: 400", "latency_ms: 2200"))
    server = EmbeddedTriton(load_ladder(path)).start()
    try:
        asking = asyncio.ensure_future(bare_generate(server.grpc_url, "standin_slow", "q", **FLAGS,
                                                     sampling_parameters='{"max_tokens": 4}'))
        await asyncio.sleep(0.5)
    finally:
        began = time.monotonic()
        await asyncio.to_thread(server.stop)
        stopping = time.monotonic() - began
    answer = await asking
    assert answer and "text_output" in answer[0], answer
    assert stopping < 1.7 + 3.0, f"the stop took {stopping:.1f} s"


@pytest.mark.slow
def test_cli_serve_prints_ready_line_and_stops_on_sigterm():
    ports = [free_port() for _ in range(3)]
    cmd = [sys.executable, "-c", "from advisor.cli import console; console()", "triton", "serve",
           "--ladder", str(REPO / "ladders" / "demo.yaml"),
           "--grpc-port", str(ports[0]), "--http-port", str(ports[1]), "--metrics-port", str(ports[2])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        ready = None
        while time.monotonic() < deadline and ready is None:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("ready "):
                ready = line.strip()
        assert ready == (f"ready grpc=127.0.0.1:{ports[0]} http=http://127.0.0.1:{ports[1]} "
                         f"metrics=http://127.0.0.1:{ports[2]}/metrics"), proc.stderr.read() if ready is None else ready
        for model in load_ladder(REPO / "ladders" / "demo.yaml").models():  # a contract-only client, every rung
            r = asyncio.run(bare_generate(f"127.0.0.1:{ports[0]}", model.triton_model, "hi", **FLAGS))
            assert r[0]["text_output"][0] and r[0]["num_input_tokens"][0] > 0 and r[0]["num_output_tokens"][0] > 0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "stopped" in out and "Traceback" not in err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_started_inside_an_event_loop_no_thread_fails_after_the_loop_closes(monkeypatch):
    """PyTriton starts tritonserver with `sh`, whose output thread calls back the event loop that was running
    where the process was started, once the process ends. Started inside a loop that closed before the server
    stopped, that call raised 'Event loop is closed' in the thread. The server is started so that the thread
    binds to no loop."""
    import threading

    failed: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failed.append(args.exc_value))

    async def start():
        return EmbeddedTriton(load_ladder(REPO / "ladders" / "demo.yaml")).start()

    before = set(threading.enumerate())  # (another server's output thread, if any, runs until that one stops)
    server = asyncio.run(start())  # the loop closes here, the server runs on
    server.stop()
    for thread in set(threading.enumerate()) - before:
        if thread.name.startswith("STDOUT/ERR thread"):
            thread.join(timeout=30)
            assert not thread.is_alive(), "the server's output thread outlived it"
    assert not failed, failed
