"""Model backends: one protocol (`ModelBackend`), a registry by name (`BACKENDS`), one way to get a client, and
the failures every backend classifies itself (`BackendFailure` with a `FailureKind`), and the one attempt walker
(`walk_attempts`: a chain of rungs in order, with deadline, failover and a per-step check).

Built in: ``triton`` (the vLLM backend's tensor contract, `advisor.triton.client.TritonClient`) and ``openai``
(any OpenAI-compatible chat-completions endpoint, `advisor.backends.openai`). docs/extending.md shows how to add one.
Callers import results, parts and failures from here, never from a backend's module.
"""

from advisor.backends.base import (BACKENDS, BackendKind, BackendOptions, GenerationResult, ModelBackend, Part,
                                   estimate_tokens, result_from_parts)
from advisor.backends.failures import (BackendError, BackendFailure, FailureKind, GenerationTimeout, KeyRefusedError,
                                       failure_kind, time_limit)
from advisor.backends.pool import BackendPool, backend_kind, backend_name, client_for, endpoint_of
from advisor.backends.walk import Try, walk_attempts

__all__ = ["BACKENDS", "BackendError", "BackendFailure", "BackendKind", "BackendOptions", "BackendPool", "FailureKind",
           "GenerationResult", "GenerationTimeout", "KeyRefusedError", "ModelBackend", "Part", "backend_kind", "backend_name",
           "Try", "client_for", "endpoint_of", "estimate_tokens", "failure_kind", "result_from_parts", "time_limit",
           "walk_attempts"]
