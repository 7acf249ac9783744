"""Wire transports behind `TritonClient`: gRPC streaming (tritonclient.grpc.aio) and HTTP /generate (httpx).

A transport does one wire call and reports failures as `Transient` (retry may help) or `ServerError` (the
server answered with an error). Which is which is decided by the protocol's status, never by message text:

- gRPC: the call's `grpc.StatusCode` (``TRANSIENT_GRPC_CODES``: UNAVAILABLE, which gRPC reports for a refused
  or reset connection, a closed socket, a GOAWAY and a server that is not serving); an error a stream
  response carries (the model failed the request) has no status and is a `ServerError`;
- HTTP: the response status (``TRANSIENT_HTTP_STATUSES``: 503) and httpx's connection-level exception types
  (connect, read, write, protocol errors).

It knows nothing of retries or advisor errors.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol
from urllib.parse import urlsplit

from advisor.backends.base import Part
from advisor.errors import ConfigError

#: Boolean inputs sent with every generation (values: stream false, the rest true).
FLAG_INPUTS = ("stream", "exclude_input_in_output", "return_finish_reason", "return_num_input_tokens",
               "return_num_output_tokens")
#: gRPC status codes (names of `grpc.StatusCode`) after which a retry may succeed.
TRANSIENT_GRPC_CODES = frozenset({"UNAVAILABLE"})
#: HTTP statuses after which a retry may succeed.
TRANSIENT_HTTP_STATUSES = frozenset({503})


class Transient(Exception):
    """The server could not be reached (or dropped the connection); the call may succeed if retried."""

    def __init__(self, message: str, status: str | int | None = None):
        super().__init__(message)
        self.status = status  #: the gRPC status code name or HTTP status; None for a connection-level error


class ServerError(Exception):
    """The server answered with an error (unknown model, bad request, contract mismatch, ...)."""

    def __init__(self, message: str, status: str | int | None = None):
        super().__init__(message)
        self.status = status  #: the gRPC status code name or HTTP status; None for an in-stream model error


def grpc_status(exc: BaseException) -> str | None:
    """The gRPC status code name of an error: a `grpc.RpcError`'s ``code()``, or the ``StatusCode.X`` string
    tritonclient's `InferenceServerException` keeps in ``status()``; None when it has none."""
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            value = code()
        except Exception:  # noqa: BLE001 - an error object whose code() fails has no usable status
            value = None
        if value is not None and hasattr(value, "name"):
            return str(value.name)
    status = getattr(exc, "status", None)
    value = status() if callable(status) else status
    if isinstance(value, str) and value.startswith("StatusCode."):
        return value[len("StatusCode."):]
    return None


def classify_grpc(exc: BaseException) -> Transient | ServerError:
    """`Transient` when the error's gRPC status code is in TRANSIENT_GRPC_CODES, else `ServerError`."""
    status = grpc_status(exc)
    details = exc.details() if callable(getattr(exc, "details", None)) else None
    message_fn = getattr(exc, "message", None)
    message = clean_message(details or (message_fn() if callable(message_fn) else None) or str(exc))
    if status in TRANSIENT_GRPC_CODES:
        return Transient(message, status)
    return ServerError(message, status)


class Transport(Protocol):
    """What `TritonClient` needs from a wire protocol."""

    async def generate(self, model: str, prompt: str, sampling_json: str, request_id: str) -> list[Part]: ...
    def stream(self, model: str, prompt: str, sampling_json: str, request_id: str): ...  # async iterator of Part
    async def server_ready(self) -> bool: ...
    async def model_ready(self, model: str) -> bool: ...
    async def model_metadata(self, model: str) -> dict: ...
    async def model_config(self, model: str) -> dict: ...
    async def repository_index(self) -> list[str]: ...
    async def close(self) -> None: ...


def clean_message(message: str) -> str:
    """One line from a server error: the last line of a Python traceback without its exception class path."""
    text = message.strip()
    if "Traceback (most recent call last)" in text:
        text = [ln for ln in text.splitlines() if ln.strip()][-1]
        text = re.sub(r"^[\w.]+(Error|Exception|Request): ", "", text.strip())
    return " ".join(text.split())


def _split(url: str):
    """`url` split (a bare host:port too); ConfigError naming it when it is no URL (an unclosed IPv6 bracket)."""
    try:
        parts = urlsplit(url if "://" in url else f"//{url}")
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise ConfigError(f"{url!r} is not a valid address ({exc}); give host:port or http://host:port") from None
    return parts


def _host_port(url: str) -> str:
    return _split(url).netloc or url


def default_metrics_url(url: str) -> str:
    """Triton's default metrics endpoint (port 8002) on the host of `url`."""
    host = _split(url).hostname or "localhost"
    return f"http://{host}:8002/metrics"


def make_transport(url: str, protocol: str) -> Transport:
    """A transport for `url` ('grpc' or 'http')."""
    return GrpcTransport(url) if protocol == "grpc" else HttpTransport(url)


def _first(value: Any):
    while isinstance(value, list):
        value = value[0] if value else None
    return value


class GrpcTransport:
    """gRPC via tritonclient.grpc.aio: one channel, one bidirectional stream per generation."""

    def __init__(self, url: str):
        # heavy dependency, imported on use: numpy, tritonclient
        import numpy as np
        import tritonclient.grpc.aio as grpcclient
        from tritonclient.grpc import InferInput

        self._np = np
        self._InferInput = InferInput
        self.url = _host_port(url)
        self._client = grpcclient.InferenceServerClient(self.url)
        flags = []
        for name in FLAG_INPUTS:
            tensor = InferInput(name, [1], "BOOL")
            tensor.set_data_from_numpy(np.array([name != "stream"], dtype=bool))
            flags.append(tensor)
        self._flags = flags  # immutable after this point: shared by every request

    async def _guard(self, coro):
        # heavy dependency, imported on use: grpc, tritonclient
        import grpc
        from tritonclient.utils import InferenceServerException

        try:
            return await coro
        except (InferenceServerException, grpc.RpcError) as exc:
            raise classify_grpc(exc) from None

    async def generate(self, model: str, prompt: str, sampling_json: str, request_id: str) -> list[Part]:
        """Send one request on its own stream; collect responses until the server closes the stream."""
        request = self._request(model, prompt, sampling_json, request_id)
        return [part async for part in self._parts(request)]

    async def stream(self, model: str, prompt: str, sampling_json: str, request_id: str):
        """Like `generate` with the contract's ``stream`` flag on: yield each partial response as it arrives."""
        request = self._request(model, prompt, sampling_json, request_id, stream=True)
        async for part in self._parts(request):
            yield part

    def _request(self, model: str, prompt: str, sampling_json: str, request_id: str, stream: bool = False) -> dict:
        np = self._np
        text = self._InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([prompt.encode("utf-8")], dtype=np.object_))
        params = self._InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(np.array([sampling_json.encode("utf-8")], dtype=np.object_))
        flags = self._flags
        if stream:
            flag = self._InferInput("stream", [1], "BOOL")
            flag.set_data_from_numpy(np.array([True], dtype=bool))
            flags = [flag, *flags[1:]]
        return {"model_name": model, "inputs": [text, params, *flags], "request_id": request_id}

    async def _parts(self, request: dict):
        """The responses of one request on its own stream, until the server closes the stream."""
        # heavy dependency, imported on use: grpc, tritonclient
        import grpc
        from tritonclient.utils import InferenceServerException

        async def requests():
            yield request

        try:
            async for result, error in self._client.stream_infer(requests()):
                if error is not None:
                    raise ServerError(clean_message(str(error.message() if hasattr(error, "message") else error)))
                part = self._part(result)
                if part is not None:
                    yield part
        except (InferenceServerException, grpc.RpcError) as exc:
            raise classify_grpc(exc) from None

    def _part(self, result) -> Part | None:
        out = {o.name for o in result.get_response().outputs}
        if not out:
            return None  # an empty flags-only final response
        def get(name):
            return result.as_numpy(name) if name in out else None
        text, finish, n_in, n_out = get("text_output"), get("finish_reason"), get("num_input_tokens"), get("num_output_tokens")
        return Part(
            text="".join(t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in text.reshape(-1))
            if text is not None else "",
            finish_reason=_decode(finish),
            num_input_tokens=int(n_in.reshape(-1)[0]) if n_in is not None and n_in.size else None,
            num_output_tokens=int(n_out.sum()) if n_out is not None else None)

    async def server_ready(self) -> bool:
        return bool(await self._guard(self._client.is_server_ready()))

    async def model_ready(self, model: str) -> bool:
        return bool(await self._guard(self._client.is_model_ready(model)))

    async def model_metadata(self, model: str) -> dict:
        meta = await self._guard(self._client.get_model_metadata(model, as_json=True))
        for key in ("inputs", "outputs"):
            for t in meta.get(key, []):
                t["shape"] = [int(d) for d in t.get("shape", [])]
        return meta

    async def model_config(self, model: str) -> dict:
        return await self._guard(self._client.get_model_config(model, as_json=True))

    async def repository_index(self) -> list[str]:
        index = await self._guard(self._client.get_model_repository_index(as_json=True))
        names = {m["name"] for m in index.get("models", [])}
        try:  # models loaded through the API (PyTriton) are not in the index; statistics list them
            stats = await self._guard(self._client.get_inference_statistics(as_json=True))
            names |= {m["name"] for m in stats.get("model_stats", [])}
        except ServerError:
            pass
        return sorted(names)

    async def close(self) -> None:
        await self._client.close()


def _decode(value) -> str | None:
    if value is None or value.size == 0:
        return None
    v = value.reshape(-1)[-1]
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class HttpTransport:
    """HTTP via httpx: the generate extension for decoupled models, the v2 REST API for the rest."""

    def __init__(self, url: str):
        # heavy dependency, imported on use: httpx
        import httpx

        self._httpx = httpx
        base = url if "://" in url else f"http://{url}"
        self.url = base.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.url, timeout=None)

    async def _request(self, method: str, path: str, **kwargs):
        httpx = self._httpx
        try:
            resp = await self._client.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError,
                httpx.ConnectTimeout) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from None
        if resp.status_code in TRANSIENT_HTTP_STATUSES:
            raise Transient(f"HTTP {resp.status_code} {resp.text[:200]}", resp.status_code)
        return resp

    @staticmethod
    def _error(resp) -> ServerError:
        try:
            message = resp.json().get("error", resp.text)
        except ValueError:
            message = resp.text
        return ServerError(f"HTTP {resp.status_code}: {clean_message(message)}", resp.status_code)

    async def generate(self, model: str, prompt: str, sampling_json: str, request_id: str) -> list[Part]:
        body: dict[str, Any] = {"text_input": prompt, "sampling_parameters": sampling_json}
        body.update({name: name != "stream" for name in FLAG_INPUTS})
        if request_id:
            body["id"] = request_id
        resp = await self._request("POST", f"/v2/models/{model}/generate", json=body)
        if resp.status_code != 200:
            raise self._error(resp)
        data = resp.json()
        n_in, n_out = _first(data.get("num_input_tokens")), data.get("num_output_tokens")
        n_out = sum(n_out) if isinstance(n_out, list) else n_out
        text = data.get("text_output", "")
        return [Part(text="".join(text) if isinstance(text, list) else str(text or ""),
                     finish_reason=_first(data.get("finish_reason")),
                     num_input_tokens=int(n_in) if n_in is not None else None,
                     num_output_tokens=int(n_out) if n_out is not None else None)]

    async def stream(self, model: str, prompt: str, sampling_json: str, request_id: str):
        """HTTP has no token stream here: the whole generation as one part."""
        for part in await self.generate(model, prompt, sampling_json, request_id):
            yield part

    async def server_ready(self) -> bool:
        return (await self._request("GET", "/v2/health/ready")).status_code == 200

    async def model_ready(self, model: str) -> bool:
        return (await self._request("GET", f"/v2/models/{model}/ready")).status_code == 200

    async def model_metadata(self, model: str) -> dict:
        resp = await self._request("GET", f"/v2/models/{model}")
        if resp.status_code != 200:
            raise self._error(resp)
        return resp.json()

    async def model_config(self, model: str) -> dict:
        resp = await self._request("GET", f"/v2/models/{model}/config")
        if resp.status_code != 200:
            raise self._error(resp)
        return resp.json()

    async def repository_index(self) -> list[str]:
        resp = await self._request("POST", "/v2/repository/index", content=json.dumps({}))
        if resp.status_code != 200:
            raise self._error(resp)
        names = {m["name"] for m in resp.json()}
        stats = await self._request("GET", "/v2/models/stats")  # API-loaded models (PyTriton) are not indexed
        if stats.status_code == 200:
            names |= {m["name"] for m in stats.json().get("model_stats", [])}
        return sorted(names)

    async def close(self) -> None:
        await self._client.aclose()
