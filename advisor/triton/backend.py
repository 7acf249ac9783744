"""The ``triton`` backend: `advisor.triton.client.TritonClient`, one per server address (gRPC by default)."""

from __future__ import annotations

from advisor.backends.base import BACKENDS, BackendKind, BackendOptions


def _create(endpoint: str, model, options: BackendOptions):
    # lazy: the client stands above the seam it implements (a module-level import would run up a layer)
    from advisor.triton.client import TritonClient

    return TritonClient(endpoint, protocol=options.protocol, timeout_s=options.timeout_s, retries=options.retries)


BACKENDS.add("triton", BackendKind(_create, shared=True,
                                   description="Triton Inference Server, vLLM backend tensor contract (gRPC/HTTP)",
                                   queue_metrics=True, server="Triton"))
