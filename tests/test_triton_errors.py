"""Transient vs permanent Triton errors: decided by gRPC status codes and HTTP statuses, not message text."""

from __future__ import annotations

import grpc
import httpx
import pytest
from grpc.aio import AioRpcError, Metadata
from tritonclient.utils import InferenceServerException

from advisor.errors import BackendError
from advisor.standin import count_tokens
from advisor.triton import _transport as tp
from advisor.triton.client import TritonClient, estimate_tokens


def _rpc(code: grpc.StatusCode, details: str) -> AioRpcError:
    return AioRpcError(code, Metadata(), Metadata(), details=details)


@pytest.mark.parametrize("exc", [
    _rpc(grpc.StatusCode.UNAVAILABLE, "anything at all"),
    InferenceServerException("some text", status="StatusCode.UNAVAILABLE"),
])
def test_grpc_unavailable_is_transient_whatever_the_message(exc):
    got = tp.classify_grpc(exc)
    assert isinstance(got, tp.Transient) and got.status == "UNAVAILABLE"


@pytest.mark.parametrize("code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.NOT_FOUND,
                                  grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNKNOWN])
def test_other_grpc_codes_are_permanent_even_when_the_text_sounds_transient(code):
    got = tp.classify_grpc(_rpc(code, "connection reset by peer; socket closed; unavailable"))
    assert isinstance(got, tp.ServerError) and got.status == code.name
    assert str(got) == "connection reset by peer; socket closed; unavailable"


def test_an_error_without_a_status_is_permanent():
    got = tp.classify_grpc(InferenceServerException("Failed to connect: unavailable"))  # an in-stream error
    assert isinstance(got, tp.ServerError) and got.status is None


def _http(handler) -> tp.HttpTransport:
    transport = tp.HttpTransport("http://127.0.0.1:9")
    transport._client = httpx.AsyncClient(base_url=transport.url, transport=httpx.MockTransport(handler))
    return transport


async def test_http_503_is_transient_and_other_statuses_are_not():
    busy = _http(lambda request: httpx.Response(503, json={"error": "model is fine"}))
    with pytest.raises(tp.Transient) as info:
        await busy.model_metadata("m")
    assert info.value.status == 503
    bad = _http(lambda request: httpx.Response(400, json={"error": "connection reset, unavailable"}))
    with pytest.raises(tp.ServerError) as info:
        await bad.model_metadata("m")
    assert info.value.status == 400 and "connection reset" in str(info.value)


async def test_http_connection_errors_are_transient():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(tp.Transient):
        await _http(refuse).server_ready()


async def test_unreachable_http_server_is_retried_then_one_line():
    async with TritonClient("http://127.0.0.1:1", protocol="http", retries=1) as client:
        assert await client.server_ready() is False
        with pytest.raises(BackendError) as info:
            await client.generate("m", "x", max_tokens=3)
    msg = str(info.value)
    assert msg.startswith("cannot reach Triton at http://127.0.0.1:1") and "2 attempts" in msg and "\n" not in msg


@pytest.mark.triton
@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_a_real_server_error_is_permanent_with_its_status(triton_server, protocol):
    url = triton_server.grpc_url if protocol == "grpc" else triton_server.http_url
    transport = tp.make_transport(url, protocol)
    try:
        with pytest.raises(tp.ServerError) as info:
            await transport.model_config("no_such_model")
    finally:
        await transport.close()
    assert info.value.status is not None and info.value.status not in (*tp.TRANSIENT_GRPC_CODES,
                                                                        *tp.TRANSIENT_HTTP_STATUSES)


def test_the_token_estimate_matches_the_stand_ins_rule():
    for text in ["Hello, world!", "  ", "naïve café — 3.5 tokens/word?", "<tool_call>{\"a\": 1}</tool_call>"]:
        assert estimate_tokens(text) == count_tokens(text)


def test_the_wire_client_does_not_import_the_stand_ins():
    import subprocess
    import sys

    code = "import sys, advisor.triton.client; print('advisor.standin' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
