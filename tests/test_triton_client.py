"""advisor's Triton client: generation, token counts, errors, retries, metrics, both protocols."""

from __future__ import annotations

import asyncio

import pytest

from advisor.backends import GenerationTimeout
from advisor.errors import BackendError, ContractError, UnknownModelError
from advisor.triton import _transport as tp
from advisor.triton.client import TritonClient
from advisor.triton.contract import check_model, contract_problems
from advisor.triton.metrics import metric_total, parse_prometheus


def _model(server, i=0):
    return server.ladder.rungs[i].triton_model


@pytest.mark.triton
@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_generate_returns_server_counts(triton_server, protocol):
    url = triton_server.grpc_url if protocol == "grpc" else triton_server.http_url
    async with TritonClient(url, protocol=protocol) as client:
        for model in triton_server.ladder.models():
            r = await client.generate(model.triton_model, "Do the task.", max_tokens=5)
            assert r.tokens_from_server and r.note is None
            assert r.model == model.triton_model and r.text
            assert r.input_tokens > 0 and 0 < r.output_tokens <= 5
            assert r.finish_reason in ("stop", "length") and r.latency_s > 0


@pytest.mark.triton
async def test_max_tokens_is_always_sent_and_wins(triton_server):
    async with TritonClient(triton_server.grpc_url) as client:
        short = await client.generate(_model(triton_server, 2), "x", max_tokens=2, sampling={"max_tokens": 500})
        assert short.output_tokens == 2 and short.finish_reason == "length"
        long = await client.generate(_model(triton_server, 2), "x", max_tokens=400)
        assert long.output_tokens > 16  # more than vLLM's default, so max_tokens reached the server


@pytest.mark.triton
async def test_many_concurrent_generations_on_one_client(triton_server):
    async with TritonClient(triton_server.grpc_url) as client:
        models = [m.triton_model for m in triton_server.ladder.rungs]
        results = await asyncio.gather(*(client.generate(models[i % 3], f"task {i}", max_tokens=8)
                                         for i in range(96)))
    assert len(results) == 96 and all(r.tokens_from_server and r.output_tokens > 0 for r in results)
    assert [r.model for r in results[:3]] == models


@pytest.mark.triton
async def test_unknown_model_suggests_the_close_name(triton_server):
    async with TritonClient(triton_server.grpc_url) as client:
        with pytest.raises(UnknownModelError) as info:
            await client.generate("standin_nano_12", "x", max_tokens=3)
    msg = str(info.value)
    assert "no model 'standin_nano_12'" in msg and "Did you mean 'standin_nano_12b'" in msg and "\n" not in msg


async def test_unreachable_server_is_one_line_after_bounded_retries():
    async with TritonClient("127.0.0.1:1", retries=1) as client:
        assert await client.server_ready() is False
        with pytest.raises(BackendError) as info:
            await client.generate("m", "x", max_tokens=3)
    msg = str(info.value)
    assert msg.startswith("cannot reach Triton at 127.0.0.1:1") and "2 attempts" in msg and "\n" not in msg


@pytest.mark.triton
async def test_timeout_is_a_backend_error(triton_server):
    async with TritonClient(triton_server.grpc_url) as client:
        await client.generate(_model(triton_server), "warm", max_tokens=2)
        with pytest.raises(GenerationTimeout, match="timed out after"):
            await client.generate(_model(triton_server), "x", max_tokens=3, timeout_s=1e-6)
    assert issubclass(GenerationTimeout, BackendError)


@pytest.mark.triton
async def test_health_metadata_contract_and_metrics(triton_server):
    model = _model(triton_server)
    async with TritonClient(triton_server.grpc_url) as client:
        assert await client.server_ready() and await client.model_ready(model)
        assert not await client.model_ready("nope")
        meta = await client.model_metadata(model)
        assert {"name": "text_input", "datatype": "BYTES", "shape": [1]} in meta["inputs"]
        await client.check_contract(model)
        await client.generate(model, "count me", max_tokens=2)
        metrics = await client.metrics(triton_server.metrics_url)
    assert metric_total(metrics, "nv_inference_request_success", model=model) >= 1
    assert any(k.startswith("nv_inference_request_failure") for k in metrics)


def test_prometheus_parsing():
    text = ('# HELP x help\n# TYPE x counter\nx{model="a",version="1"} 3\nx{model="b",version="1"} 4.5\n'
            'up 1\nweird{a="b"} NaN\n')
    m = parse_prometheus(text)
    assert m['x{model="a",version="1"}'] == 3 and m["up"] == 1
    assert metric_total(m, "x") == 7.5 and metric_total(m, "x", model="b") == 4.5 and metric_total(m, "y") == 0


class _FlakyTransport:
    """Fails with `exc` for the first `fails` generate calls, then answers."""

    def __init__(self, fails: int, exc: Exception, counts: bool = True):
        self.fails, self.exc, self.counts, self.calls = fails, exc, counts, 0

    async def generate(self, model, prompt, sampling_json, request_id):
        self.calls += 1
        if self.calls <= self.fails:
            raise self.exc
        n = 3 if self.counts else None
        return [tp.Part("one two", None, n, 1 if n else None), tp.Part(" three", "stop", n, 2 if n else None)]

    async def model_ready(self, model):
        return True

    async def close(self):
        pass


def _client_with(monkeypatch, transport, retries=2) -> TritonClient:
    client = TritonClient("127.0.0.1:9", retries=retries)
    monkeypatch.setattr(tp, "make_transport", lambda url, protocol: transport)

    async def no_check(model):
        return None

    monkeypatch.setattr(client, "check_contract", no_check)
    monkeypatch.setattr("advisor.triton.client.BACKOFF_S", 0.001)
    return client


async def test_transient_errors_are_retried_then_succeed(monkeypatch):
    transport = _FlakyTransport(2, tp.Transient("connection reset by peer"))
    r = await _client_with(monkeypatch, transport).generate("m", "p", max_tokens=4)
    assert transport.calls == 3 and r.text == "one two three"
    assert r.output_tokens == 3 and r.input_tokens == 3 and r.finish_reason == "stop"  # summed over the stream


async def test_server_errors_are_not_retried(monkeypatch):
    transport = _FlakyTransport(5, tp.ServerError("Request for unknown model: 'm' is not found"))
    with pytest.raises(UnknownModelError):
        await _client_with(monkeypatch, transport).generate("m", "p", max_tokens=4)
    assert transport.calls == 1
    transport = _FlakyTransport(5, tp.ServerError("unexpected inference input 'stream' for model 'm'"))
    with pytest.raises(ContractError):
        await _client_with(monkeypatch, transport).generate("m", "p", max_tokens=4)
    assert transport.calls == 1


async def test_missing_counts_are_estimated_and_said(monkeypatch):
    r = await _client_with(monkeypatch, _FlakyTransport(0, None, counts=False)).generate("m", "a b c", max_tokens=4)
    assert not r.tokens_from_server and r.output_tokens == 3 and r.input_tokens == 3
    assert "estimated" in r.note


def test_contract_checker_reports_each_difference():
    meta = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1]},
                       {"name": "stream", "datatype": "INT32", "shape": [1]}],
            "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]}
    problems = contract_problems(meta, {"config": {"model_transaction_policy": {}}})
    assert "input stream is INT32, expected BOOL" in problems
    assert "missing input sampling_parameters (BYTES)" in problems
    assert "missing output finish_reason (BYTES)" in problems
    assert any("not decoupled" in p for p in problems)
    with pytest.raises(ContractError, match="'m' does not match the vLLM backend contract"):
        check_model("m", meta)


def test_transport_cleans_server_tracebacks():
    tb = ('Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
          'advisor.triton.standin_model.BadRequest: sampling_parameters is not valid JSON: oops\n')
    assert tp.clean_message(tb) == "sampling_parameters is not valid JSON: oops"
    assert tp.default_metrics_url("grpc://10.0.0.5:8001") == "http://10.0.0.5:8002/metrics"


def test_unknown_protocol_is_refused():
    with pytest.raises(BackendError, match="unknown Triton protocol"):
        TritonClient("x:1", protocol="websocket")


async def test_model_going_away_is_not_called_unknown(monkeypatch):
    transport = _FlakyTransport(5, tp.ServerError("Request for unknown model: 'm' has no available versions"))
    with pytest.raises(BackendError) as info:
        await _client_with(monkeypatch, transport).generate("m", "p", max_tokens=4)
    assert not isinstance(info.value, UnknownModelError) and "not available" in str(info.value)


class _HangingTransport(_FlakyTransport):
    """A server that keeps the stream open with no answer, then stops being ready (shutting down)."""

    def __init__(self):
        super().__init__(0, None)
        self.ready_checks = 0

    async def generate(self, model, prompt, sampling_json, request_id):
        await asyncio.sleep(3600)

    async def server_ready(self):
        self.ready_checks += 1
        return self.ready_checks < 2


async def test_a_server_that_stops_being_ready_does_not_hang_a_generation(monkeypatch):
    transport = _HangingTransport()
    client = _client_with(monkeypatch, transport)
    monkeypatch.setattr("advisor.triton.client.HEALTH_POLL_S", 0.02)
    with pytest.raises(BackendError, match="stopped being ready"):
        await asyncio.wait_for(client.generate("m", "p", max_tokens=4), 5)
    assert transport.ready_checks == 2
