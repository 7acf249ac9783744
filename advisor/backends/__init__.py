"""Model backends: one protocol (`ModelBackend`), a registry by name (`BACKENDS`), one way to get a client.

Built in: ``triton`` (the vLLM backend's tensor contract, `advisor.triton.client.TritonClient`) and ``openai``
(any OpenAI-compatible chat-completions endpoint, `advisor.backends.openai`). docs/extending.md shows how to add one.
"""

from advisor.backends.base import (BACKENDS, BackendKind, BackendOptions, GenerationResult, ModelBackend, Part,
                                   estimate_tokens, result_from_parts)
from advisor.backends.pool import BackendPool, backend_name, client_for, endpoint_of

__all__ = ["BACKENDS", "BackendKind", "BackendOptions", "BackendPool", "GenerationResult", "ModelBackend", "Part",
           "backend_name", "client_for", "endpoint_of", "estimate_tokens", "result_from_parts"]
