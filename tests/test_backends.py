"""The backend seam: one client function per rung, shared Triton clients, the `openai` backend's wire behaviour
(retries on 429/5xx, a refused key, usage counts, native tool calls written in the rung's format), with httpx's
mock transport; the real-server tests are in tests/test_backend_openai_live.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from advisor.backends import BACKENDS, BackendPool, ModelBackend, client_for
from advisor.backends.openai import OpenAIBackend
from advisor.errors import BackendError, ConfigError
from advisor.ladder import Model, load_ladder

REPO = Path(__file__).resolve().parent.parent


def _rung(**extra) -> Model:
    return Model.model_validate({
        "name": "hosted", "hf_id": "example/hosted", "params_total_b": 1, "triton_model": "ex/hosted",
        "context_length": 8192, "tool_call_format": "hermes",
        "price": {"basis": "tokens", "usd_per_m_input": 0.1, "usd_per_m_output": 0.4, "source": "x",
                  "as_of": "2026-12"}, **extra})


def test_every_ladder_rung_gets_its_client_through_the_registry():
    from advisor.triton.client import TritonClient

    assert BACKENDS.names() == ["openai", "triton"]
    demo = load_ladder(REPO / "ladders" / "demo.yaml")
    pool = BackendPool(demo)
    clients = {id(pool(m)) for m in demo.models()}
    assert len(clients) == 1 and isinstance(pool(demo.rungs[0]), TritonClient)  # one channel per Triton server
    assert isinstance(pool(demo.rungs[0]), ModelBackend)
    hosted = _rung(backend="openai", url="http://127.0.0.1:9/v1", api_key_env="EXAMPLE_KEY")
    assert isinstance(client_for(hosted), OpenAIBackend) and isinstance(client_for(hosted), ModelBackend)
    nim = load_ladder(REPO / "ladders" / "nemotron-nim.yaml")
    assert {m.backend for m in nim.rungs} == {"openai"} and all(m.api_key_env for m in nim.rungs)


def test_a_rung_needs_a_known_backend_and_an_openai_rung_its_url():
    with pytest.raises(ValueError, match="unknown backend 'opnai'. Did you mean 'openai'"):
        _rung(backend="opnai", url="http://x/v1")
    with pytest.raises(ValueError, match="backend 'openai' needs the model's url"):
        _rung(backend="openai")


def _backend(handler, **kwargs) -> OpenAIBackend:
    backend = OpenAIBackend("http://mock/v1", rung="hosted", **kwargs)
    backend._http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return backend


def _answer(content="hi", tool_calls=None, usage=True, finish="stop"):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage:
        body["usage"] = {"prompt_tokens": 17, "completion_tokens": 3}
    return httpx.Response(200, json=body)


def test_openai_backend_retries_429_and_5xx_then_counts_usage(monkeypatch):
    monkeypatch.setattr("advisor.backends.openai.BACKOFF_S", 0.01)
    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        if len(seen) == 1:
            return httpx.Response(429, headers={"retry-after": "0"}, text="slow down")
        if len(seen) == 2:
            return httpx.Response(503, text="busy")
        return _answer()

    async def go():
        backend = _backend(handler, retries=2)
        backend._loop = asyncio.get_running_loop()
        return await backend.generate("ex/hosted", "p", max_tokens=5, sampling={"temperature": 0, "best_of": 2},
                                      messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                                {"role": "tool", "content": "obs"}])

    result = asyncio.run(go())
    assert (result.text, result.input_tokens, result.output_tokens, result.tokens_from_server) == ("hi", 17, 3, True)
    assert len(seen) == 3 and seen[0]["max_tokens"] == 5 and seen[0]["temperature"] == 0 and "best_of" not in seen[0]
    assert seen[0]["messages"][2] == {"role": "user", "content": "<tool_response>\nobs\n</tool_response>"}


def test_openai_backend_refused_key_and_missing_variable_are_one_line(monkeypatch):
    monkeypatch.setenv("EXAMPLE_KEY", "wrong")

    async def go(backend):
        backend._loop = asyncio.get_running_loop()
        return await backend.generate("ex/hosted", "p", max_tokens=5)

    backend = _backend(lambda r: httpx.Response(401, json={"error": "bad key"}), api_key_env="EXAMPLE_KEY")
    with pytest.raises(BackendError, match=r"rung 'hosted' at http://mock/v1 refused the API key \(key from "
                                           r"EXAMPLE_KEY\): HTTP 401") as err:
        asyncio.run(go(backend))
    assert "\n" not in str(err.value)
    monkeypatch.delenv("EXAMPLE_KEY")
    with pytest.raises(BackendError, match="environment variable EXAMPLE_KEY .* is not set"):
        asyncio.run(go(_backend(lambda r: _answer(), api_key_env="EXAMPLE_KEY")))


def test_native_tool_calls_come_back_in_the_rungs_format_and_a_refusal_falls_back_to_text():
    call = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]
    spec = [{"name": "read_file", "description": "read", "parameters": {"type": "object"}}]
    bodies = []

    def native(request):
        bodies.append(json.loads(request.content))
        return _answer(content=None, tool_calls=call, finish="tool_calls")

    async def go(backend):
        backend._loop = asyncio.get_running_loop()
        return await backend.generate("ex/hosted", "p", max_tokens=50, tools=spec)

    result = asyncio.run(go(_backend(native, tool_call_format="nemotron_json")))
    assert bodies[0]["tools"][0]["function"]["name"] == "read_file"
    assert result.text == '<TOOLCALL>[{"name": "read_file", "arguments": {"path": "a.txt"}}]</TOOLCALL>'
    assert result.finish_reason == "stop"

    def no_tools(request):
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(400, text="tools not supported") if "tools" in body else _answer("plain")

    backend = _backend(no_tools)
    assert asyncio.run(go(backend)).text == "plain" and backend.native_tools is False
    assert "tools" in bodies[-2] and "tools" not in bodies[-1]


def test_openai_backend_streams_parts_with_usage_at_the_end():
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
              {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "length"}]},
              {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}]
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"

    def handler(request):
        assert json.loads(request.content)["stream_options"] == {"include_usage": True}
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    async def go():
        backend = _backend(handler)
        backend._loop = asyncio.get_running_loop()
        parts = [p async for p in backend.generate_stream("ex/hosted", "p", max_tokens=2)]
        return backend.result("ex/hosted", "p", parts, 0.1)

    result = asyncio.run(go())
    assert (result.text, result.finish_reason, result.input_tokens, result.output_tokens) == ("Hello", "length", 9, 2)
    assert result.tokens_from_server


def test_an_endpoint_that_is_down_is_one_line_naming_rung_and_endpoint():
    backend = client_for(_rung(backend="openai", url="http://127.0.0.1:9/v1"))
    backend.retries = 0
    with pytest.raises(BackendError, match=r"^cannot reach rung 'hosted' at http://127.0.0.1:9/v1: ConnectError"):
        asyncio.run(backend.generate("ex/hosted", "p", max_tokens=5))
    assert asyncio.run(backend.server_ready()) is False


def test_existing_ladders_keep_their_config_hash():
    """Stored runs are matched by ladder hash: the new rung fields must not change the hash of a ladder that
    does not use them (the hash is the dump without them, as before they existed)."""
    import hashlib

    demo = load_ladder(REPO / "ladders" / "demo.yaml")
    data = demo.model_dump(mode="json")
    for m in [*data["rungs"], *(m for m in data["roles"].values() if m)]:
        for key in ("backend", "api_key_env", "llama_cpp"):
            m.pop(key)
    assert demo.config_hash() == hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    hosted = load_ladder(REPO / "ladders" / "nemotron-nim.yaml")
    moved = hosted.model_copy(update={"rungs": [hosted.rungs[0].model_copy(update={"api_key_env": "OTHER"})]})
    assert moved.config_hash() != hosted.model_copy(update={"rungs": hosted.rungs[:1]}).config_hash()


def test_a_rungs_model_id_has_a_neutral_name_and_ladders_with_triton_model_keep_loading():
    """``model_id`` and ``triton_model`` are one key: the same rung, the same dump and config hash (stored runs keep
    matching), and a model's capabilities are declared by its backend, not probed."""
    old = _rung()
    data = {k: v for k, v in old.model_dump().items() if k != "triton_model"}
    new = Model.model_validate({**data, "model_id": "ex/hosted"})
    assert new == old and new.model_id == old.triton_model == "ex/hosted"
    assert new.model_dump() == old.model_dump() and "triton_model" in old.model_dump()
    backend = client_for(_rung(backend="openai", url="http://127.0.0.1:9/v1"))
    assert (backend.native_tools, backend.streams, backend.constrained_output) == (True, True, False)
    demo = load_ladder(REPO / "ladders" / "demo.yaml")
    triton = client_for(demo.rungs[0], demo)
    assert (triton.native_tools, triton.streams, triton.constrained_output) == (False, True, False)
