"""One stand-in model as a decoupled Triton inference function speaking the vLLM backend's tensor contract.

The embedded server binds one of these per SIMULATED model. It decodes the contract's inputs, applies vLLM's
defaults (max_tokens 16, prompt echoed unless exclude_input_in_output), calls the stand-in responder in a
thread pool (so a slow responder never blocks other requests), waits the model's simulated latency without
blocking, and yields one response, or several partial ones when `stream` is true. Bad sampling parameters
become an error response for that request only.
"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import Executor
from typing import Any, Callable

import numpy as np

from advisor.triton.contract import INPUTS, OUTPUTS

_NUMPY = {"BYTES": bytes, "BOOL": np.bool_, "FP32": np.float32, "UINT32": np.uint32}
_PIECE = re.compile(r"\w+\s*|[^\w\s]\s*|\s+", re.UNICODE)
#: Stand-in tokens per streamed partial response.
STREAM_CHUNK_TOKENS = 4


class BadRequest(ValueError):
    """A request that breaks the contract (bad sampling_parameters JSON, missing text_input)."""


def pytriton_tensors():
    """(inputs, outputs) as PyTriton `Tensor`s built from the contract tables."""
    # heavy dependency, imported on use: pytriton
    from pytriton.model_config import Tensor

    inputs = [Tensor(name=t.name, dtype=_NUMPY[t.datatype], shape=t.dims, optional=t.optional) for t in INPUTS]
    outputs = [Tensor(name=t.name, dtype=_NUMPY[t.datatype], shape=t.dims) for t in OUTPUTS]
    return inputs, outputs


def _flag(request, name: str, default: bool = False) -> bool:
    value = request.data.get(name)
    return default if value is None or value.size == 0 else bool(value.reshape(-1)[0])


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, (bytes, np.bytes_)) else str(value)


def parse_request(request) -> tuple[str, dict[str, Any], dict[str, bool]]:
    """(prompt, sampling parameters, flags) of one request; `BadRequest` when it breaks the contract."""
    if "text_input" not in request.data or request.data["text_input"].size == 0:
        raise BadRequest("text_input is required")
    prompt = _text(request.data["text_input"].reshape(-1)[0])
    raw = request.data.get("sampling_parameters")
    if raw is not None and raw.size:
        text = _text(raw.reshape(-1)[0])
    else:  # like the vLLM backend, fall back to the request parameters
        params = dict(request.parameters or {})
        text = json.dumps(params) if params else "{}"
    try:
        sampling = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise BadRequest(f"sampling_parameters is not valid JSON: {exc}") from None
    if not isinstance(sampling, dict):
        raise BadRequest("sampling_parameters must be a JSON object")
    sampling.setdefault("max_tokens", 16)  # vLLM's SamplingParams default
    try:
        sampling["max_tokens"] = int(sampling["max_tokens"])
    except (TypeError, ValueError):
        raise BadRequest(f"max_tokens must be an integer, got {sampling['max_tokens']!r}") from None
    if sampling["max_tokens"] < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {sampling['max_tokens']}")
    names = ("stream", "exclude_input_in_output", "return_finish_reason", "return_cumulative_logprob",
             "return_logprobs", "return_num_input_tokens", "return_num_output_tokens")
    flags = {name: _flag(request, name) for name in names}
    return prompt, sampling, flags


def _chunks(text: str, total_tokens: int, per_chunk: int) -> list[tuple[str, int]]:
    """Split text into (piece, tokens) parts whose token counts sum to `total_tokens`."""
    pieces = _PIECE.findall(text) or [text]
    parts = ["".join(pieces[i:i + per_chunk]) for i in range(0, len(pieces), per_chunk)] or [""]
    counts = [min(per_chunk, max(0, total_tokens - i * per_chunk)) for i in range(len(parts))]
    counts[-1] += max(0, total_tokens - sum(counts))
    return list(zip(parts, counts))


def _response(text: str, n_out: int, n_in: int, finish: str | None, flags: dict[str, bool], sampling: dict) -> dict:
    out: dict[str, np.ndarray] = {"text_output": np.array([text.encode("utf-8")], dtype=np.object_)}
    if flags["return_finish_reason"] and finish is not None:
        out["finish_reason"] = np.array([finish.encode()], dtype=np.object_)
    if flags["return_num_input_tokens"]:
        out["num_input_tokens"] = np.array([n_in], dtype=np.uint32)
    if flags["return_num_output_tokens"]:
        out["num_output_tokens"] = np.array([n_out], dtype=np.uint32)
    if flags["return_cumulative_logprob"]:  # simulated: a fixed -0.05 nats per token
        out["cumulative_logprob"] = np.array([-0.05 * n_out], dtype=np.float32)
    if flags["return_logprobs"]:
        value = None if sampling.get("logprobs") is None else [{"logprob": -0.05}] * n_out
        out["logprobs"] = np.array([json.dumps(value).encode()], dtype=np.object_)
    return out


def infer_function(respond: Callable, latency_s: float, executor: Executor):
    """The async-generator inference function PyTriton runs for one stand-in model.

    PyTriton schedules each request batch as its own task on one event loop, so requests are served
    concurrently; the responder runs in `executor` and the simulated latency is an `asyncio.sleep`.
    """

    async def infer(requests):
        loop = asyncio.get_running_loop()
        parsed = [parse_request(r) for r in requests]  # BadRequest -> an error response, server keeps going
        started = loop.time()
        gens = await asyncio.gather(*(loop.run_in_executor(executor, respond, p, s) for p, s, _ in parsed))
        remaining = latency_s - (loop.time() - started)
        single_stream = len(requests) == 1 and parsed[0][2]["stream"]
        if not single_stream:
            if remaining > 0:
                await asyncio.sleep(remaining)
            responses = []
            for (prompt, sampling, flags), gen in zip(parsed, gens):
                text = gen.text if flags["exclude_input_in_output"] else prompt + gen.text
                responses.append(_response(text, gen.num_output_tokens, gen.num_input_tokens,
                                           gen.finish_reason, flags, sampling))
            yield responses
            return
        (_, sampling, flags), gen = parsed[0], gens[0]
        parts = _chunks(gen.text, gen.num_output_tokens, STREAM_CHUNK_TOKENS)
        for i, (piece, n_out) in enumerate(parts):
            if remaining > 0:
                await asyncio.sleep(remaining / len(parts))
            last = i == len(parts) - 1
            yield [_response(piece, n_out, gen.num_input_tokens, gen.finish_reason if last else None,
                             flags, sampling)]

    return infer
