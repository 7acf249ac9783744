"""The one seam between advisor and a model server: the `ModelBackend` protocol and what crosses it.

Every model call (probe, judge, verifier measurement, routing service, `advisor ladder check`) goes through a
`ModelBackend` obtained from `advisor.backends.client_for` / `BackendPool`, chosen by the rung's ``backend:``
name (`BACKENDS`). An answer is a `GenerationResult`: text, finish reason, input/output token counts, and whether
the counts came from the server (else they were estimated and `note` says how). A streamed generation yields
`Part`s; the backend's `result` folds them into a `GenerationResult`. What can fail is in
`advisor.backends.failures`: each backend raises `BackendFailure` with its kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Protocol, runtime_checkable

from advisor.registry import Registry


@dataclass
class GenerationResult:
    """One generation with the server's token counts, finish reason and wall-clock latency."""

    text: str
    finish_reason: str  #: stop | length | (whatever the server said; "unknown" when it said nothing)
    input_tokens: int
    output_tokens: int
    tokens_from_server: bool  #: False when the server returned no counts and they were estimated (see note)
    latency_s: float
    model: str
    note: str | None = None


@dataclass
class Part:
    """One streamed piece of a generation (what a piece lacked is None)."""

    text: str
    finish_reason: str | None
    num_input_tokens: int | None
    num_output_tokens: int | None


@runtime_checkable
class ModelBackend(Protocol):
    """What every caller needs from a model server. `model` is the rung's model name at the endpoint
    (`advisor.ladder.Model.model_id`); `messages` (chat messages, ``role``/``content``) and `tools` (specs: name,
    description, parameters) are given where the caller has them: a chat API uses them, Triton takes the rendered
    `prompt`."""

    endpoint: str
    #: Capabilities, declared by each backend (callers read them, never probe with ``getattr``):
    native_tools: bool  #: sends `tools` as the API's own tool definitions (else only the rendered prompt has them)
    streams: bool  #: `generate_stream` yields parts as the server produces them
    constrained_output: bool  #: can make the server hold its answer to a JSON schema

    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list[dict] | None = None, tools: list[dict] | None = None) -> GenerationResult:
        """One whole generation."""

    def generate_stream(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                        timeout_s: float | None = None, request_id: str | None = None,
                        messages: list[dict] | None = None, tools: list[dict] | None = None) -> AsyncIterator[Part]:
        """The same generation as `Part`s as they arrive."""

    def result(self, model: str, prompt: str, parts: list[Part], latency_s: float) -> GenerationResult:
        """Streamed parts folded into one result."""

    async def server_ready(self) -> bool:
        """True when the endpoint answers (never raises)."""

    async def model_ready(self, model: str) -> bool:
        """True when `model` can be asked now."""

    async def close(self) -> None:
        """Release connections (the backend may be used again afterwards)."""


@dataclass(frozen=True)
class BackendOptions:
    """Caller settings every backend honours."""

    timeout_s: float = 60.0
    retries: int = 2
    protocol: str = "grpc"  #: Triton's wire protocol (grpc | http); other backends ignore it


@dataclass(frozen=True)
class BackendKind:
    """A registered backend: how to build a client for one ladder model, and whether one client serves every
    model at one endpoint (`shared`, as Triton's does) or each model gets its own (its key, format, id)."""

    create: Callable[[str, Any, BackendOptions], ModelBackend]  #: (endpoint, ladder Model, options) -> backend
    shared: bool = True
    description: str = ""
    #: capabilities callers read instead of the backend's name:
    takes_messages: bool = False  #: takes chat messages and tools (else only the prompt the chat template rendered)
    queue_metrics: bool = False  #: the server exports per-model queue metrics (load-aware routing polls them)
    server: str = ""  #: the server advisor starts or watches for this backend ("Triton"), "" for a hosted API


#: Backends by the name a rung's ``backend:`` gives.
BACKENDS: Registry[BackendKind] = Registry(
    "model backend", builtins=("advisor.backends.openai",), entry_points="advisor.backends")


_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """A stated fallback when the server returns no token counts: words and punctuation marks (the rule the
    stand-in rungs tokenize by; about 1.3 per English word), not the model's tokenizer."""
    return len(_WORDS.findall(text))


def result_from_parts(model: str, prompt: str, parts: list[Part], latency_s: float) -> GenerationResult:
    """Fold parts into a result: text joined, the last finish reason, the server's counts (input: the largest
    reported; output: the sum), else estimated with `estimate_tokens` and said so in `note`."""
    text = "".join(p.text for p in parts)
    finish = next((p.finish_reason for p in reversed(parts) if p.finish_reason), None) or "unknown"
    n_in = max((p.num_input_tokens for p in parts if p.num_input_tokens is not None), default=None)
    outs = [p.num_output_tokens for p in parts if p.num_output_tokens is not None]
    n_out = sum(outs) if outs else None
    missing = [name for name, v in (("num_input_tokens", n_in), ("num_output_tokens", n_out)) if v is None]
    note = None
    if missing:
        note = (f"server returned no {' / '.join(missing)}; estimated with the word-and-punctuation count "
                "(advisor.backends.estimate_tokens), not the model's tokenizer")
    return GenerationResult(
        text=text, finish_reason=finish,
        input_tokens=n_in if n_in is not None else estimate_tokens(prompt),
        output_tokens=n_out if n_out is not None else estimate_tokens(text),
        tokens_from_server=not missing, latency_s=latency_s, model=model, note=note)
