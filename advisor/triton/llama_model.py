"""A real GGUF model (llama.cpp) as a decoupled Triton inference function speaking the vLLM backend's tensors.

The embedded server binds one of these per ladder model with a ``llama_cpp`` block (``ladders/cpu.yaml``). The
request is decoded like a stand-in's (`advisor.triton.standin_model.parse_request`: vLLM's defaults, bad
sampling parameters are an error for that request only); the prompt arrives with the model's chat template
already applied (the client renders it from the GGUF metadata). One llama context per model, with its own
single worker thread, so requests to one model are served one at a time (a llama context is not thread-safe)
while the server keeps answering others. Token counts come from the model's own tokenizer: the prompt as
llama.cpp tokenized it, the output tokens as generated (a stream counts its text with the tokenizer at the end).
The finish reason is llama.cpp's: ``stop`` (end of turn or a stop string) or ``length``. A prompt longer than
the context is an error for that request; max_tokens is cut to what the context leaves.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from advisor.errors import ConfigError
from advisor.triton.standin_model import BadRequest, parse_request
from advisor.triton.weights import gguf_path

#: vLLM sampling parameters passed to llama.cpp (the rest are ignored).
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed", "stop", "repeat_penalty", "min_p")


def load_llama(model) -> Any:
    """A llama.cpp context for a ladder model (weights checked first; ConfigError naming what to install)."""
    path = gguf_path(model)
    try:  # heavy: llama.cpp (the optional cpu-models extra), loaded only to serve a llama_cpp model
        from llama_cpp import Llama
    except ImportError:
        raise ConfigError(f"rung {model.name!r} runs on llama.cpp: install the cpu-models extra "
                          "(make cpu-models, or pip install -e '.[cpu-models]' with the Makefile's CPU_CMAKE_ARGS "
                          "as CMAKE_ARGS)") from None
    params = model.llama_cpp
    return Llama(model_path=str(path), n_ctx=params.n_ctx, n_threads=params.threads, n_threads_batch=params.threads,
                 n_batch=256, verbose=False, seed=0)


class LlamaServer:
    """One model's llama context and the single thread it runs on."""

    def __init__(self, model, llama: Any | None = None):
        self.model = model
        self.llama = llama if llama is not None else load_llama(model)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"llama-{model.name}")
        self.lock = threading.Lock()  # belt and braces: one generation at a time on this context

    def count(self, text: str) -> int:
        """Tokens of `text` by the model's tokenizer (no BOS added)."""
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0

    def _kwargs(self, prompt: str, sampling: dict) -> dict:
        n_prompt = len(self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
        room = self.llama.n_ctx() - n_prompt
        if room < 1:
            raise BadRequest(f"the prompt has {n_prompt} tokens; the context of {self.model.name} holds "
                             f"{self.llama.n_ctx()}")
        kwargs = {k: sampling[k] for k in SAMPLING_KEYS if sampling.get(k) is not None}
        if "repetition_penalty" in sampling and "repeat_penalty" not in kwargs:
            kwargs["repeat_penalty"] = sampling["repetition_penalty"]
        kwargs.setdefault("temperature", 1.0)  # vLLM's default
        kwargs["max_tokens"] = min(int(sampling["max_tokens"]), room)
        return kwargs

    def complete(self, prompt: str, sampling: dict) -> tuple[str, str, int, int]:
        """(text, finish reason, input tokens, output tokens) of one whole generation."""
        with self.lock:
            out = self.llama.create_completion(prompt, **self._kwargs(prompt, sampling))
        choice, usage = out["choices"][0], out.get("usage") or {}
        return (choice.get("text") or "", choice.get("finish_reason") or "stop",
                int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))

    def stream(self, prompt: str, sampling: dict, push) -> None:
        """Generate with streaming, calling push(text, finish or None) per piece and push(None, ...) at the end."""
        with self.lock:
            finish = None
            for chunk in self.llama.create_completion(prompt, stream=True, **self._kwargs(prompt, sampling)):
                choice = chunk["choices"][0]
                finish = choice.get("finish_reason") or finish
                if choice.get("text"):
                    push(choice["text"], None)
            push(None, finish or "stop")

    def close(self) -> None:
        """Free the context and the thread."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        close = getattr(self.llama, "close", None)
        if close:
            close()


def _response(text: str, n_out: int | None, n_in: int, finish: str | None, flags: dict) -> dict:
    out: dict[str, np.ndarray] = {"text_output": np.array([text.encode("utf-8")], dtype=np.object_)}
    if flags["return_finish_reason"] and finish is not None:
        out["finish_reason"] = np.array([finish.encode()], dtype=np.object_)
    if flags["return_num_input_tokens"]:
        out["num_input_tokens"] = np.array([n_in], dtype=np.uint32)
    if flags["return_num_output_tokens"] and n_out is not None:
        out["num_output_tokens"] = np.array([n_out], dtype=np.uint32)
    return out


def infer_function(server: LlamaServer):
    """The async-generator inference function PyTriton runs for one llama.cpp model."""

    async def infer(requests):
        loop = asyncio.get_running_loop()
        for request in requests:
            prompt, sampling, flags = parse_request(request)
            if not flags["stream"]:
                text, finish, n_in, n_out = await loop.run_in_executor(server.executor, server.complete, prompt,
                                                                        sampling)
                shown = text if flags["exclude_input_in_output"] else prompt + text
                yield [_response(shown, n_out, n_in, finish, flags)]
                continue
            queue: asyncio.Queue = asyncio.Queue()

            def push(piece, finish):
                loop.call_soon_threadsafe(queue.put_nowait, (piece, finish))

            job = loop.run_in_executor(server.executor, server.stream, prompt, sampling, push)
            n_in = await loop.run_in_executor(None, server.count, prompt)
            pieces = [] if flags["exclude_input_in_output"] else [prompt]
            if pieces:
                yield [_response(prompt, 0, n_in, None, flags)]
            while True:
                got = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({got, job}, return_when=asyncio.FIRST_COMPLETED)
                if got not in done and job.exception() is not None:
                    got.cancel()
                    raise job.exception()
                piece, finish = await got  # what the finished generation pushed last is already queued
                if piece is None:
                    break
                pieces.append(piece)
                yield [_response(piece, 0, n_in, None, flags)]
            await job
            generated = "".join(pieces[0 if flags["exclude_input_in_output"] else 1:])
            n_out = await loop.run_in_executor(None, server.count, generated)
            yield [_response("", n_out, n_in, finish, flags)]

    return infer
