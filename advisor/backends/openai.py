"""The ``openai`` backend: any OpenAI-compatible ``/chat/completions`` endpoint, over httpx.

NVIDIA NIM (the hosted Nemotron models), ``vllm serve``, llama.cpp's server, Ollama, Triton's OpenAI frontend and
advisor's own ``advisor serve`` all speak it. The rung's ``url`` is the API base (``http://host:port/v1``), its
``model_id`` (``triton_model``: the same key) the ``model`` id sent, and its ``api_key_env`` names the environment
variable holding the key (read when the first request is sent, never from the ladder file). Token counts come
from the answer's ``usage`` (else estimated, and the result says so). 429 and 5xx answers and dropped connections
are retried with exponential backoff (a ``Retry-After`` header is honoured); 401/403 is one line naming the rung,
the endpoint and the variable. Failures are classified for the seam (`advisor.backends.failures`): past the time
limit ``timeout``, unreachable or 5xx ``down``, 401/403 ``key refused``, 429 after the retries ``overloaded``, an
answer outside the API ``bad output``. When the caller offers tools they are sent as OpenAI ``tools``; a call the endpoint returns in
``tool_calls`` is written back as text in the rung's ``tool_call_format``, so the loop parses native and text
calls alike. An endpoint that refuses ``tools`` (HTTP 400/422) is asked again without them, and not offered
them again: the tool list is in the system prompt in the rung's text format either way.

The endpoint is held to bounds (`advisor.backends.http_bounds`), streamed or not: at most the rung's
``max_response_bytes`` (4 MiB by default), the time limit of the call (the request's deadline in the routing
service) for the whole exchange, retries included, and never longer than the backend's ``timeout_s`` for the
answer's head or its next chunk. An answer outside the API (not JSON, no ``choices``, a redirect, a stream
request answered without server-sent events or ended before ``[DONE]``, one tool call's arguments past the
rung's ``max_tool_arguments_bytes``) is an error, never an empty answer. Every text taken from an answer is
scrubbed of the rung's key and anything shaped like a credential (`advisor.redaction.scrub`) before it goes
into an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, AsyncIterator

import httpx

from advisor.backends.base import BACKENDS, BackendKind, BackendOptions, GenerationResult, Part, result_from_parts
from advisor.backends.http_bounds import Bounds, closed, error_text, read_body, sse_payloads, within
from advisor.backends.failures import BackendFailure, FailureKind, GenerationTimeout, KeyRefusedError
from advisor.backends.retry import Retry, retried
from advisor.errors import BackendError, UnknownModelError
from advisor.redaction import REDACTED, PieceScrubber, scrub
from advisor.toolcalls import format_for, spec_dict

#: Seconds before the first retry (`advisor.backends.retry`); doubled for each further one (plus jitter): a hosted
#: endpoint's 429 asks for more patience than a local Triton's UNAVAILABLE.
BACKOFF_S = 0.5
#: HTTP statuses after which a retry may succeed.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: SamplingParams keys passed through to the chat-completions body (others are vLLM-only and dropped).
SAMPLING_KEYS = ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")
#: The most bytes an answer may hold, and one tool call's arguments, unless the rung says otherwise
MAX_RESPONSE_BYTES = 4 * 2**20
MAX_TOOL_ARGUMENTS_BYTES = 256 * 2**10


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
    return [{"type": "function", "function": spec_dict(s)} for s in specs]


class OpenAIBackend:
    """Client of one OpenAI-compatible endpoint for one ladder model (its key variable and tool-call format)."""

    native_tools = True  #: tools go as OpenAI ``tools`` (an instance sets it False once its endpoint refused them)
    streams = True  #: server-sent events
    constrained_output = False  #: no ``response_format`` is sent

    def __init__(self, endpoint: str, *, rung: str = "", api_key_env: str | None = None,
                 tool_call_format: str = "hermes", timeout_s: float = 60.0, retries: int = 2,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, max_tool_arguments_bytes: int = MAX_TOOL_ARGUMENTS_BYTES):
        self.endpoint = endpoint.rstrip("/")
        self.max_response_bytes, self.max_tool_arguments_bytes = max_response_bytes, max_tool_arguments_bytes
        self.rung = rung
        self.api_key_env = api_key_env
        self.tool_call_format = tool_call_format
        self.timeout_s = timeout_s
        self.retries = retries
        self._http = None
        self._loop = None

    # plumbing ------------------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"rung {self.rung!r} at {self.endpoint}" if self.rung else self.endpoint

    def _secret(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _clean(self, text: str, most: int = 200) -> str:
        """An answer's text for an error message: scrubbed of the key (and credentials), one line, cut short."""
        secret = os.environ.get(self.api_key_env) if self.api_key_env else None
        return " ".join(scrub(text, [secret]).split())[:most]

    def _bounds(self, seconds: float | None) -> Bounds:
        return Bounds.within(self.timeout_s if seconds is None else seconds, self.timeout_s, self.max_response_bytes)

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

    def connections(self) -> tuple[int, int]:
        """(open, busy) upstream connections in this client's pool, for the service's /metrics (0, 0 before the
        first call). httpx exposes its pool only as private attributes: read defensively."""
        pool = getattr(getattr(self._http, "_transport", None), "_pool", None)
        conns = [c for c in getattr(pool, "connections", []) if not c.is_closed()]
        return len(conns), sum(not c.is_idle() for c in conns)

    def _refused(self, status: int, text: str, model: str) -> BackendError:
        detail = self._clean(text)
        if status in (401, 403):
            key = f" (key from {self.api_key_env})" if self.api_key_env else " (no api_key_env on the rung)"
            return KeyRefusedError(f"{self._where()} refused the API key{key}: HTTP {status} {detail}")
        if status == 404:
            return UnknownModelError(f"{self._where()}: no model {model!r} (or no /chat/completions): HTTP 404 {detail}")
        kind = FailureKind.OVERLOADED if status == 429 else FailureKind.DOWN
        return BackendFailure(f"{self._where()} answered HTTP {status}: {detail}", kind)

    def _broke_off(self, exc: Exception) -> BackendFailure:
        """The failure of an answer whose connection ended before its body did (a ``down`` rung)."""
        return BackendFailure(f"{self._where()} broke off its answer: {type(exc).__name__} "
                              f"{self._clean(str(exc))}".rstrip(), FailureKind.DOWN)

    async def _post(self, path: str, body: dict, model: str, bounds: Bounds):
        """POST with retries on 429/5xx and dropped connections (`advisor.backends.retry`), each within `bounds`;
        returns the open response of a 2xx answer (the caller reads its body within the bounds and closes it)."""
        client = self._client()
        headers = self._headers()

        async def attempt(n: int):
            try:
                request = client.build_request("POST", self.endpoint + path, json=body, headers=headers)
                response = await within(bounds, client.send(request, stream=True))
            except httpx.TransportError as exc:
                kind = FailureKind.TIMEOUT if isinstance(exc, httpx.ReadTimeout) else FailureKind.DOWN
                raise Retry(BackendFailure(f"cannot reach {self._where()}: {type(exc).__name__} "
                                           f"{self._clean(str(exc))}".rstrip(), kind)) from None
            if 200 <= response.status_code < 300:
                return response
            text = await error_text(response, bounds, self._where())
            await closed(response)
            if response.status_code < 400:
                where = response.headers.get("location")
                raise BackendError(f"{self._where()} answered HTTP {response.status_code}"
                                   + (f" (to {self._clean(where)})" if where else "") + ": advisor follows no "
                                   "redirect; set the rung's url to the endpoint itself")
            if response.status_code in (400, 422) and "tools" in body:
                raise _ToolsRefused(text)
            refused = self._refused(response.status_code, text, model)
            if response.status_code not in RETRY_STATUSES:
                raise refused
            raise Retry(refused, _retry_after(response.headers.get("retry-after")))

        return await retried(attempt, self.retries, deadline=bounds.deadline, base=BACKOFF_S)

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

    def _calls_as_text(self, calls: list) -> str:
        fmt = format_for(self.tool_call_format)
        out = []
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name") or "", str) or \
                    not isinstance(fn.get("arguments") or "", str):
                raise _bad_output(f"{self._where()} answered a tool call outside the API: "
                                   f"{self._clean(json.dumps(call))!r}")
            size = len((fn.get("arguments") or "").encode("utf-8", "surrogatepass"))
            if size > self.max_tool_arguments_bytes:
                raise _bad_output(f"{self._where()} answered a tool call ({self._clean(fn.get('name') or '', 60)!r}) "
                                   f"with {size:,} bytes of arguments: the rung's max_tool_arguments_bytes is "
                                   f"{self.max_tool_arguments_bytes:,}")
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
            # every wait inside is bounded by `limit` already; the outer bound is a backstop a little later, so
            # that the inner one ends the call and closes its connection (cancelling both at one instant left the
            # connection ACTIVE in the pool: a stalled upstream then filled the pool, one socket a timeout)
            data = await asyncio.wait_for(self._complete(body, model, self._bounds(limit)),
                                          timeout=limit + CLOSE_GRACE_S)
        except asyncio.TimeoutError:
            raise GenerationTimeout(f"generation on {self._where()} timed out after {limit:g}s") from None
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
            if not isinstance(message, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError, AttributeError):
            raise _bad_output(f"{self._where()} answered without choices: {self._clean(json.dumps(data))}") from None
        text = message.get("content") or ""
        if not isinstance(text, str) or not isinstance(message.get("tool_calls") or [], list):
            raise _bad_output(f"{self._where()} answered a message outside the API: {self._clean(json.dumps(message))}")
        if message.get("tool_calls"):
            text = "\n".join(filter(None, [text, self._calls_as_text(message["tool_calls"])]))
        secret = self._secret()
        if secret and len(secret) >= 4 and secret in text:  # an upstream that echoes the key never passes it on
            text = text.replace(secret, REDACTED)
        usage = data.get("usage") or {}
        part = Part(text, _finish(choice.get("finish_reason")), usage.get("prompt_tokens"),
                    usage.get("completion_tokens"))
        return result_from_parts(model, prompt, [part], time.perf_counter() - started)

    async def _open(self, body: dict, model: str, bounds: Bounds):
        """The open 2xx response to a chat request (asked again without tools when the endpoint refused them)."""
        try:
            return await self._post("/chat/completions", body, model, bounds)
        except _ToolsRefused:
            self.native_tools = False
            body.pop("tools", None)
            return await self._post("/chat/completions", body, model, bounds)

    async def _complete(self, body: dict, model: str, bounds: Bounds) -> dict:
        response = await self._open(body, model, bounds)
        try:
            raw = await read_body(response, bounds, self._where())
        except httpx.TransportError as exc:
            raise self._broke_off(exc) from None
        finally:
            await closed(response)
        try:
            data = json.loads(raw)
        except ValueError:
            raise _bad_output(f"{self._where()} answered with something that is not JSON: "
                               f"{self._clean(raw[:400].decode('utf-8', 'replace'))!r}") from None
        if not isinstance(data, dict):
            raise _bad_output(f"{self._where()} answered JSON that is not an object: {self._clean(json.dumps(data))}")
        return data

    async def generate_stream(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                              timeout_s: float | None = None, request_id: str | None = None,
                              messages: list | None = None, tools: list | None = None) -> AsyncIterator[Part]:
        """Server-sent chunks as `Part`s; the last carries ``usage`` (asked with ``stream_options``). The whole
        stream is bounded (`advisor.backends.http_bounds`): past the time limit a `GenerationTimeout`, past the
        bytes or outside the API a `BackendError`."""
        body = self._body(model, prompt, max_tokens, sampling, messages, tools)
        body.update(stream=True, stream_options={"include_usage": True})
        limit = self.timeout_s if timeout_s is None else timeout_s
        bounds = self._bounds(limit)
        try:
            response = await self._open(body, model, bounds)
            try:
                async for part in self._parts(response, bounds):
                    yield part
            finally:
                await closed(response)
        except httpx.TransportError as exc:
            raise self._broke_off(exc) from None
        except asyncio.TimeoutError:
            raise GenerationTimeout(f"generation on {self._where()} timed out after {limit:g}s "
                                    f"(streamed; no chunk for {min(limit, self.timeout_s):g}s, or not done)") from None

    async def _parts(self, response, bounds: Bounds) -> AsyncIterator[Part]:
        """The parts of an open server-sent-events answer; tool calls last, as text in the rung's format."""
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "text/event-stream":
            sample = await error_text(response, bounds, self._where())
            raise _bad_output(f"{self._where()} answered a stream request with {kind or 'no content-type'}, not "
                               f"server-sent events: {self._clean(sample)!r}")
        calls: dict[int, dict] = {}
        finish, done, chunks = None, False, 0
        content = PieceScrubber([self._secret()])  # an upstream that echoes the key never passes it on
        async for payload in sse_payloads(response, bounds, self._where()):
            if payload == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(payload)
            except json.JSONDecodeError:
                raise _bad_output(f"{self._where()} sent a stream chunk that is not JSON: "
                                   f"{self._clean(payload, 120)!r}") from None
            if not isinstance(chunk, dict):
                raise _bad_output(f"{self._where()} sent a stream chunk that is not an object: "
                                   f"{self._clean(payload, 120)!r}")
            if "error" in chunk:
                raise BackendError(f"{self._where()} failed mid-stream: {self._clean(json.dumps(chunk['error']))}")
            if not isinstance(chunk.get("choices"), list):
                raise _bad_output(f"{self._where()} sent a stream chunk without choices: {self._clean(payload, 120)!r}")
            chunks += 1
            usage = chunk.get("usage") or {}
            for choice in chunk["choices"]:
                delta = (choice.get("delta") if isinstance(choice, dict) else None) or {}
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc.get("index", 0), {"function": {"name": "", "arguments": ""}})
                    fn = tc.get("function") or {}
                    slot["function"]["name"] += str(fn.get("name") or "")
                    slot["function"]["arguments"] += str(fn.get("arguments") or "")
                    if len(slot["function"]["arguments"]) > self.max_tool_arguments_bytes:
                        self._calls_as_text([slot])  # refuses it, naming the bound
                finish = _finish(choice.get("finish_reason")) or finish
                if isinstance(delta.get("content"), str) and delta["content"]:
                    shown = content.feed(delta["content"])
                    if shown:
                        yield Part(shown, None, None, None)
            if usage:
                yield Part("", None, usage.get("prompt_tokens"), usage.get("completion_tokens"))
        if not chunks or not (done or finish):
            raise _bad_output(f"{self._where()} ended its stream " + (
                "without a chunk" if not chunks else "before [DONE] and without a finish_reason") + " (cut short?)")
        text = content.flush() + (self._calls_as_text([calls[i] for i in sorted(calls)]) if calls else "")
        secret = self._secret()
        yield Part(text.replace(secret, REDACTED) if secret and len(secret) >= 4 else text, finish or "unknown",
                   None, None)

    def result(self, model: str, prompt: str, parts: list[Part], latency_s: float) -> GenerationResult:
        """Streamed parts folded into one result (counts from the final ``usage`` chunk)."""
        return result_from_parts(model, prompt, parts, latency_s)

    async def models(self) -> list[str]:
        """The model ids ``GET /models`` lists (BackendError when the endpoint cannot be asked)."""
        bounds = self._bounds(None)
        client = self._client()
        try:
            request = client.build_request("GET", self.endpoint + "/models", headers=self._headers())
            response = await within(bounds, client.send(request, stream=True))
            try:
                if response.status_code >= 300:
                    raise self._refused(response.status_code, await error_text(response, bounds, self._where()), "")
                raw = await read_body(response, bounds, self._where())
            finally:
                await closed(response)
        except httpx.TransportError as exc:
            raise BackendError(f"cannot reach {self._where()}: {type(exc).__name__} "
                               f"{self._clean(str(exc))}".rstrip()) from None
        except asyncio.TimeoutError:
            raise GenerationTimeout(f"{self._where()}: /models did not answer within {self.timeout_s:g}s") from None
        try:
            return [m["id"] for m in json.loads(raw).get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _bad_output(f"{self._where()}: /models answered "
                               f"{self._clean(raw[:400].decode('utf-8', 'replace'))!r}") from None

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


def _bad_output(message: str) -> BackendFailure:
    """The endpoint answered outside the OpenAI API (`FailureKind.BAD_OUTPUT`)."""
    return BackendFailure(message, FailureKind.BAD_OUTPUT)


def _finish(reason: str | None) -> str | None:
    return {"tool_calls": "stop", "function_call": "stop", "content_filter": "stop"}.get(reason, reason) if reason else None


#: Seconds the backstop bound of a buffered call waits past its limit for the inner bound to close the connection.
CLOSE_GRACE_S = 1.0


def _retry_after(value: str | None) -> float | None:
    try:
        return min(30.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None


def _create(endpoint: str, model, options: BackendOptions) -> OpenAIBackend:
    return OpenAIBackend(endpoint, rung=getattr(model, "name", ""), api_key_env=getattr(model, "api_key_env", None),
                         tool_call_format=getattr(model, "tool_call_format", "hermes"),
                         timeout_s=options.timeout_s, retries=options.retries,
                         max_response_bytes=getattr(model, "max_response_bytes", MAX_RESPONSE_BYTES),
                         max_tool_arguments_bytes=getattr(model, "max_tool_arguments_bytes", MAX_TOOL_ARGUMENTS_BYTES))


BACKENDS.add("openai", BackendKind(_create, shared=False,
                                   description="OpenAI-compatible /chat/completions (NIM, vLLM, llama.cpp, Ollama)",
                                   takes_messages=True))
