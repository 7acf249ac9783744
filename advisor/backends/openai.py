"""The ``openai`` backend: any OpenAI-compatible ``/chat/completions`` endpoint, over httpx.

NVIDIA NIM (the hosted Nemotron models), ``vllm serve``, llama.cpp's server, Ollama, Triton's OpenAI frontend and
advisor's own ``advisor serve`` all speak it. The rung's ``url`` is the API base (``http://host:port/v1``), its
``triton_model`` the ``model`` id sent, and its ``api_key_env`` names the environment variable holding the key
(read when the first request is sent, never from the ladder file). Token counts come from the answer's
``usage`` (else estimated, and the result says so). 429 and 5xx answers and dropped connections are retried with
exponential backoff (a ``Retry-After`` header is honoured); 401/403 is one line naming the rung, the endpoint and
the variable. When the caller offers tools they are sent as OpenAI ``tools``; a call the endpoint returns in
``tool_calls`` is written back as text in the rung's ``tool_call_format``, so the loop parses native and text
calls alike. An endpoint that refuses ``tools`` (HTTP 400/422) is asked again without them, and not offered
them again: the tool list is in the system prompt in the rung's text format either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import Any, AsyncIterator

import httpx

from advisor.agent.formats import _spec_dict, format_for
from advisor.backends.base import BACKENDS, BackendKind, BackendOptions, GenerationResult, Part, result_from_parts
from advisor.errors import BackendError, KeyRefusedError, UnknownModelError

#: Seconds before the first retry; doubled for each further one (plus jitter).
BACKOFF_S = 0.5
#: HTTP statuses after which a retry may succeed.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: SamplingParams keys passed through to the chat-completions body (others are vLLM-only and dropped).
SAMPLING_KEYS = ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")


def chat_messages(messages: list[dict] | None, prompt: str) -> list[dict]:
    """Messages for the API: tool observations become user turns (a text-format call has no tool_call_id);
    without messages, the prompt is one user message."""
    if not messages:
        return [{"role": "user", "content": prompt}]
    out = []
    for m in messages:
        if m.get("role") == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{m.get('content', '')}\n</tool_response>"})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return out


def openai_tools(specs: list | None) -> list[dict] | None:
    """Tool specs (name, description, parameters) as OpenAI ``tools``."""
    if not specs:
        return None
    return [{"type": "function", "function": _spec_dict(s)} for s in specs]


class OpenAIBackend:
    """Client of one OpenAI-compatible endpoint for one ladder model (its key variable and tool-call format)."""

    def __init__(self, endpoint: str, *, rung: str = "", api_key_env: str | None = None,
                 tool_call_format: str = "hermes", timeout_s: float = 60.0, retries: int = 2):
        self.endpoint = endpoint.rstrip("/")
        self.rung = rung
        self.api_key_env = api_key_env
        self.tool_call_format = tool_call_format
        self.timeout_s = timeout_s
        self.retries = retries
        self.native_tools = True  #: False once the endpoint refused ``tools``
        self._http = None
        self._loop = None

    # plumbing ------------------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"rung {self.rung!r} at {self.endpoint}" if self.rung else self.endpoint

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise BackendError(f"{self._where()}: environment variable {self.api_key_env} (the ladder's "
                                   "api_key_env) is not set; export the API key in it")
            headers["authorization"] = f"Bearer {key}"
        return headers

    def _client(self):
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)))
            self._loop = loop
        return self._http

    def _refused(self, status: int, text: str, model: str) -> BackendError:
        detail = " ".join(text.split())[:200]
        if status in (401, 403):
            key = f" (key from {self.api_key_env})" if self.api_key_env else " (no api_key_env on the rung)"
            return KeyRefusedError(f"{self._where()} refused the API key{key}: HTTP {status} {detail}")
        if status == 404:
            return UnknownModelError(f"{self._where()}: no model {model!r} (or no /chat/completions): HTTP 404 {detail}")
        return BackendError(f"{self._where()} answered HTTP {status}: {detail}")

    async def _post(self, path: str, body: dict, model: str, stream: bool = False):
        """POST with retries on 429/5xx and dropped connections; returns the response (open when `stream`)."""
        client = self._client()
        headers = self._headers()
        attempt = 0
        while True:
            try:
                request = client.build_request("POST", self.endpoint + path, json=body, headers=headers)
                response = await client.send(request, stream=stream)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise BackendError(f"cannot reach {self._where()}: {type(exc).__name__} {exc}".rstrip()) from None
                wait = None
            else:
                if response.status_code < 400:
                    return response
                text = (await response.aread()).decode(errors="replace")
                await response.aclose()
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    if response.status_code in (400, 422) and "tools" in body:
                        raise _ToolsRefused(text)
                    raise self._refused(response.status_code, text, model)
                wait = _retry_after(response.headers.get("retry-after"))
            await asyncio.sleep(wait if wait is not None else BACKOFF_S * (2 ** attempt) * (1 + random.random() / 2))
            attempt += 1

    def _body(self, model: str, prompt: str, max_tokens: int, sampling: dict | None, messages, tools) -> dict:
        if max_tokens < 1:
            raise BackendError(f"max_tokens must be at least 1, got {max_tokens}")
        body: dict[str, Any] = {"model": model, "messages": chat_messages(messages, prompt),
                                "max_tokens": int(max_tokens)}
        body.update({k: v for k, v in (sampling or {}).items() if k in SAMPLING_KEYS and v is not None})
        offered = openai_tools(tools) if self.native_tools else None
        if offered:
            body["tools"] = offered
        return body

    def _calls_as_text(self, calls: list[dict]) -> str:
        fmt = format_for(self.tool_call_format)
        out = []
        for call in calls:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {"_raw": fn.get("arguments")}
            out.append(fmt.render_call(fn.get("name") or "", args if isinstance(args, dict) else {"_": args}))
        return "\n".join(out)

    # the protocol --------------------------------------------------------------------------------------
    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list | None = None, tools: list | None = None) -> GenerationResult:
        """One chat completion; tool calls come back as text in the rung's format."""
        started = time.perf_counter()
        body = self._body(model, prompt, max_tokens, sampling, messages, tools)
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            data = await asyncio.wait_for(self._complete(body, model), timeout=limit)
        except asyncio.TimeoutError:
            raise BackendError(f"generation on {self._where()} timed out after {limit:g}s") from None
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{self._where()} answered without choices: {str(data)[:200]}") from None
        text = message.get("content") or ""
        if message.get("tool_calls"):
            text = "\n".join(filter(None, [text, self._calls_as_text(message["tool_calls"])]))
        usage = data.get("usage") or {}
        part = Part(text, _finish(choice.get("finish_reason")), usage.get("prompt_tokens"),
                    usage.get("completion_tokens"))
        return result_from_parts(model, prompt, [part], time.perf_counter() - started)

    async def _complete(self, body: dict, model: str) -> dict:
        try:
            response = await self._post("/chat/completions", body, model)
        except _ToolsRefused:
            self.native_tools = False
            body = {k: v for k, v in body.items() if k != "tools"}
            response = await self._post("/chat/completions", body, model)
        try:
            return response.json()
        except ValueError:
            raise BackendError(f"{self._where()} answered with something that is not JSON: "
                               f"{response.text[:200]!r}") from None

    async def generate_stream(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                              timeout_s: float | None = None, request_id: str | None = None,
                              messages: list | None = None, tools: list | None = None) -> AsyncIterator[Part]:
        """Server-sent chunks as `Part`s; the last carries ``usage`` (asked with ``stream_options``)."""
        body = self._body(model, prompt, max_tokens, sampling, messages, tools)
        body.update(stream=True, stream_options={"include_usage": True})
        try:
            response = await self._post("/chat/completions", body, model, stream=True)
        except _ToolsRefused:
            self.native_tools = False
            body.pop("tools", None)
            response = await self._post("/chat/completions", body, model, stream=True)
        calls: dict[int, dict] = {}
        finish = None
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    chunk = json.loads(payload)
                except json.JSONDecodeError:
                    raise BackendError(f"{self._where()} sent a stream chunk that is not JSON: {payload[:120]!r}") from None
                if "error" in chunk:
                    raise BackendError(f"{self._where()} failed mid-stream: {str(chunk['error'])[:200]}")
                usage = chunk.get("usage") or {}
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    for tc in delta.get("tool_calls") or []:
                        slot = calls.setdefault(tc.get("index", 0), {"function": {"name": "", "arguments": ""}})
                        fn = tc.get("function") or {}
                        slot["function"]["name"] += fn.get("name") or ""
                        slot["function"]["arguments"] += fn.get("arguments") or ""
                    finish = _finish(choice.get("finish_reason")) or finish
                    if delta.get("content"):
                        yield Part(delta["content"], None, None, None)
                if usage:
                    yield Part("", None, usage.get("prompt_tokens"), usage.get("completion_tokens"))
        finally:
            await response.aclose()
        text = self._calls_as_text([calls[i] for i in sorted(calls)]) if calls else ""
        yield Part(text, finish or "unknown", None, None)

    def result(self, model: str, prompt: str, parts: list[Part], latency_s: float) -> GenerationResult:
        """Streamed parts folded into one result (counts from the final ``usage`` chunk)."""
        return result_from_parts(model, prompt, parts, latency_s)

    async def models(self) -> list[str]:
        """The model ids ``GET /models`` lists (BackendError when the endpoint cannot be asked)."""
        try:
            response = await self._client().get(self.endpoint + "/models", headers=self._headers())
        except httpx.TransportError as exc:
            raise BackendError(f"cannot reach {self._where()}: {type(exc).__name__} {exc}".rstrip()) from None
        if response.status_code >= 400:
            raise self._refused(response.status_code, response.text, "")
        try:
            return [m["id"] for m in response.json().get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BackendError(f"{self._where()}: /models answered {response.text[:200]!r}") from None

    async def repository_index(self) -> list[str]:
        """Same as `models` (what `advisor ladder check` lists when a model is missing)."""
        return await self.models()

    async def check_contract(self, model: str) -> None:
        """Nothing to check beyond the OpenAI API itself (the generation step checks the answer)."""

    async def server_ready(self) -> bool:
        """True when ``GET /models`` answers (never raises)."""
        try:
            await self.models()
            return True
        except BackendError:
            return False

    async def model_ready(self, model: str) -> bool:
        """True when the endpoint lists `model` (an endpoint whose list is empty is taken at its word: ready)."""
        ids = await self.models()
        return not ids or model in ids

    async def close(self) -> None:
        """Close the HTTP connections (reopened on the next call)."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()


class _ToolsRefused(Exception):
    """The endpoint answered 400/422 to a request that offered tools."""


def _finish(reason: str | None) -> str | None:
    return {"tool_calls": "stop", "function_call": "stop", "content_filter": "stop"}.get(reason, reason) if reason else None


def _retry_after(value: str | None) -> float | None:
    try:
        return min(30.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None


def _create(endpoint: str, model, options: BackendOptions) -> OpenAIBackend:
    return OpenAIBackend(endpoint, rung=getattr(model, "name", ""), api_key_env=getattr(model, "api_key_env", None),
                         tool_call_format=getattr(model, "tool_call_format", "hermes"),
                         timeout_s=options.timeout_s, retries=options.retries)


BACKENDS.add("openai", BackendKind(_create, shared=False,
                                   description="OpenAI-compatible /chat/completions (NIM, vLLM, llama.cpp, Ollama)"))
