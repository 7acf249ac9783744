"""THE Triton client every caller uses: async generation over the vLLM backend's tensor contract.

One `TritonClient` per server address, shared by many concurrent `generate` calls (the probe runner and the
routing service do exactly that). gRPC streaming (`tritonclient.grpc.aio`) is the default transport; HTTP
`POST /v2/models/<m>/generate` is the fallback (`protocol="http"`). Every generation sends max_tokens and asks
for the prompt to be left out and for finish reason and token counts; counts come from the server, and when
it returns none they are estimated and the result says so. Transient failures (gRPC UNAVAILABLE, HTTP 503,
a refused or dropped connection: see `advisor.triton._transport`) are retried with backoff; unknown models
and contract mismatches are not. Which permanent failure it was (unknown model, model unloaded, contract) is
read from the server's message, since Triton's in-stream errors carry no status code. Failures are classified
for the seam (`advisor.backends.failures`): a generation past its limit is ``timeout`` (`GenerationTimeout`), an
unreachable server or an unavailable model ``down``.
"""

from __future__ import annotations

import asyncio
import json
import time

from advisor.backends.base import GenerationResult, estimate_tokens, result_from_parts
from advisor.backends.failures import BackendFailure, FailureKind, GenerationTimeout, time_limit
from advisor.backends.retry import Retry, retried
from advisor.errors import BackendError, ContractError, UnknownModelError, did_you_mean
from advisor.triton import _transport as tp
from advisor.triton.contract import check_model
from advisor.triton.metrics import parse_prometheus, scrape

#: Seconds before the first retry (`advisor.backends.retry`); doubled for each further one (plus jitter).
BACKOFF_S = 0.2
#: A generation running longer than this checks every as many seconds that the server is still ready.
HEALTH_POLL_S = 2.0


class TritonClient:
    """Async client for models served with the vLLM backend's contract (or the embedded stand-ins).

    `url` is ``host:port`` of the gRPC endpoint (``grpc://`` accepted) or, with ``protocol="http"``, the
    HTTP endpoint (``http://host:port``). Safe for many concurrent calls from one event loop; the gRPC channel
    is created lazily and reused, and per-model readiness/contract checks are cached.
    """

    native_tools = False  #: Triton takes the prompt the chat template rendered (tools included)
    streams = True  #: the decoupled model streams its parts
    constrained_output = False  #: no JSON schema is sent with the sampling parameters

    def __init__(self, url: str, *, protocol: str = "grpc", timeout_s: float = 60.0, retries: int = 2):
        if protocol not in ("grpc", "http"):
            raise BackendError(f"unknown Triton protocol {protocol!r}: use 'grpc' or 'http'")
        self.url = url
        self.protocol = protocol
        self.timeout_s = timeout_s
        self.retries = retries
        self._transport: tp.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checked: dict[str, asyncio.Future] = {}

    @property
    def endpoint(self) -> str:
        """The server address (`advisor.backends.ModelBackend.endpoint`)."""
        return self.url

    # plumbing ------------------------------------------------------------------------------------------
    def _t(self) -> tp.Transport:
        loop = asyncio.get_running_loop()
        if self._transport is None or self._loop is not loop:
            # a channel belongs to one event loop: a new loop (asyncio.run again) gets a new one
            self._transport = tp.make_transport(self.url, self.protocol)
            self._loop = loop
            self._checked = {}
        return self._transport

    async def _call(self, what: str, fn, *args, limit: float | None = None):
        """Run a transport call, retrying transient errors with backoff (`advisor.backends.retry`); map failures to
        BackendError.

        `limit` bounds each attempt (seconds); generation is bounded by its caller instead.
        """
        async def attempt(n: int):
            try:
                if limit is None:
                    return await fn(*args)
                async with time_limit(limit):
                    return await fn(*args)
            except asyncio.TimeoutError:
                if limit is None:
                    raise
                raise BackendFailure(f"Triton at {self.url} did not answer ({what}) within {limit:g}s") from None
            except tp.Transient as exc:
                raise Retry(BackendFailure(f"cannot reach Triton at {self.url}: {exc} ({what}, "
                                           f"{n + 1} attempt{'s' if n else ''})")) from None

        return await retried(attempt, self.retries, base=BACKOFF_S)

    async def close(self) -> None:
        """Close the channel (the client can be used again afterwards; it reconnects)."""
        transport, self._transport = self._transport, None
        self._checked = {}
        if transport is not None:
            await transport.close()

    async def __aenter__(self) -> "TritonClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # health and metadata ---------------------------------------------------------------------------------
    async def server_ready(self) -> bool:
        """True when the server answers and says it is ready; False when it is down (never raises)."""
        try:
            async with time_limit(self.timeout_s):
                return await self._t().server_ready()
        except (tp.Transient, tp.ServerError, asyncio.TimeoutError):
            return False

    async def model_ready(self, model: str) -> bool:
        """True when `model` is loaded and ready (BackendError when the server cannot be reached)."""
        try:
            return await self._call(f"ready {model}", self._t().model_ready, model, limit=self.timeout_s)
        except tp.ServerError:
            return False

    async def repository_index(self) -> list[str]:
        """Names of every model in the server's repository (loaded or not)."""
        try:
            return await self._call("repository index", self._t().repository_index, limit=self.timeout_s)
        except tp.ServerError as exc:
            raise BackendError(f"Triton at {self.url} refused the repository index: {exc}") from None

    async def model_metadata(self, model: str) -> dict:
        """The model's metadata: name, versions, inputs/outputs with datatype and integer shapes."""
        await self._require_model(model)
        try:
            return await self._call(f"metadata {model}", self._t().model_metadata, model, limit=self.timeout_s)
        except tp.ServerError as exc:
            raise BackendError(f"Triton at {self.url}: metadata of {model!r}: {exc}") from None

    async def model_config(self, model: str) -> dict:
        """The model's configuration (decoupled policy, tensors, parameters) as a dict."""
        await self._require_model(model)
        try:
            return await self._call(f"config {model}", self._t().model_config, model, limit=self.timeout_s)
        except tp.ServerError as exc:
            raise BackendError(f"Triton at {self.url}: config of {model!r}: {exc}") from None

    async def check_contract(self, model: str) -> None:
        """Raise `ContractError` when `model`'s tensors or policy do not match the vLLM backend contract."""
        meta = await self.model_metadata(model)
        config = await self.model_config(model)
        check_model(model, meta, config)

    async def metrics(self, metrics_url: str | None = None) -> dict[str, float]:
        """Scrape Prometheus text from the metrics port (default: this host, port 8002) and parse it.

        Keys are series as printed, e.g. ``nv_inference_request_success{model="m",version="1"}``.
        """
        url = metrics_url or tp.default_metrics_url(self.url)
        return parse_prometheus(await scrape(url))

    async def _require_model(self, model: str) -> None:
        """UnknownModelError (with suggestions) unless the server knows `model`; BackendError if not ready."""
        if await self.model_ready(model):
            return
        names = await self.repository_index()
        if model not in names:
            raise UnknownModelError(f"Triton at {self.url} has no model {model!r}.{did_you_mean(model, names)}")
        raise BackendFailure(f"model {model!r} on Triton at {self.url} is not ready (still loading or failed)")

    async def _ensure_checked(self, model: str) -> None:
        """Readiness and contract check, once per model per client (concurrent callers share it)."""
        fut = self._checked.get(model)
        if fut is None:
            fut = self._checked[model] = asyncio.ensure_future(self.check_contract(model))
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "exception not retrieved"
        try:
            await asyncio.shield(fut)
        except BaseException:
            if self._checked.get(model) is fut and fut.done():
                del self._checked[model]  # not cached: the next call asks again
            raise

    # generation -------------------------------------------------------------------------------------------
    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list | None = None, tools: list | None = None) -> GenerationResult:
        """Generate from `model` and return text, finish reason, token counts and latency.

        `sampling` holds further vLLM SamplingParams (temperature, stop, seed, ...); `max_tokens` always wins.
        `messages` and `tools` are ignored: Triton takes the prompt the chat template rendered from them.
        Raises UnknownModelError, ContractError, GenerationTimeout or BackendError.
        """
        if max_tokens < 1:
            raise BackendError(f"max_tokens must be at least 1, got {max_tokens}")
        params = dict(sampling or {})
        params["max_tokens"] = int(max_tokens)
        try:
            params_json = json.dumps(params)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"sampling parameters for {model!r} are not JSON: {exc}") from None
        limit = self.timeout_s if timeout_s is None else timeout_s
        started = time.perf_counter()
        transport = self._t()
        try:
            async with time_limit(limit):
                fut = self._checked.get(model)
                if fut is None or not fut.done() or fut.cancelled() or fut.exception() is not None:
                    await self._ensure_checked(model)
                parts = await self._watched(self._call(f"generate {model}", transport.generate, model, prompt,
                                                       params_json, request_id or ""), model)
        except asyncio.TimeoutError:
            raise GenerationTimeout(f"generation on {model!r} at {self.url} timed out after {limit:g}s") from None
        except tp.ServerError as exc:
            raise self._map_error(model, str(exc)) from None
        return self._result(model, prompt, parts, time.perf_counter() - started)

    async def generate_stream(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                              timeout_s: float | None = None, request_id: str | None = None,
                              messages: list | None = None, tools: list | None = None):
        """Stream a generation: yield each partial `Part` as Triton's decoupled stream delivers it.

        Same checks and errors as `generate` (no retry once parts have arrived); the time limit covers the
        whole stream. `result(model, prompt, parts, latency_s)` turns the collected parts into a
        `GenerationResult` with the server's token counts.
        """
        if max_tokens < 1:
            raise BackendError(f"max_tokens must be at least 1, got {max_tokens}")
        params_json = json.dumps({**(sampling or {}), "max_tokens": int(max_tokens)})
        limit = self.timeout_s if timeout_s is None else timeout_s
        transport = self._t()
        try:
            async with time_limit(limit):
                await self._ensure_checked(model)
                try:
                    async for part in transport.stream(model, prompt, params_json, request_id or ""):
                        yield part
                except tp.Transient as exc:
                    raise BackendFailure(f"cannot reach Triton at {self.url}: {exc} (stream {model})") from None
        except asyncio.TimeoutError:
            raise GenerationTimeout(f"generation on {model!r} at {self.url} timed out after {limit:g}s") from None
        except tp.ServerError as exc:
            raise self._map_error(model, str(exc)) from None

    def result(self, model: str, prompt: str, parts: list, latency_s: float) -> GenerationResult:
        """A `GenerationResult` from streamed parts (token counts from the server, else estimated)."""
        return self._result(model, prompt, parts, latency_s)

    async def _watched(self, call, model: str):
        """Await `call`; while it runs longer than HEALTH_POLL_S, check every HEALTH_POLL_S that the server is
        still ready, and give up with a BackendError when it is not (a server that is shutting down can keep
        a stream open with no answer coming)."""
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=HEALTH_POLL_S)
                if done:
                    return task.result()
                if not await self.server_ready():
                    raise BackendFailure(f"Triton at {self.url} stopped being ready while {model!r} was generating")
        finally:
            if not task.done():
                task.cancel()

    def _map_error(self, model: str, message: str) -> BackendError:
        low = message.lower()
        if "no available versions" in low or "is not ready" in low or "unavailable" in low:
            self._checked.pop(model, None)  # ask again next time: it may come back
            return BackendFailure(f"model {model!r} on Triton at {self.url} is not available (unloaded or "
                                  f"shutting down): {message}", FailureKind.DOWN)
        if "unknown model" in low or ("model" in low and "not found" in low):
            self._checked.pop(model, None)
            return UnknownModelError(f"Triton at {self.url} has no model {model!r}: {message}")
        if "unexpected inference input" in low or "unexpected inference output" in low or "datatype" in low:
            return ContractError(f"model {model!r} rejected the vLLM backend contract: {message}")
        return BackendError(f"model {model!r} on Triton at {self.url} failed: {message}")

    def _result(self, model: str, prompt: str, parts: list[tp.Part], latency_s: float) -> GenerationResult:
        return result_from_parts(model, prompt, parts, latency_s)


__all__ = ["TritonClient"]
