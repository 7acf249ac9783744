"""Triton: the client every caller uses, the embedded stand-in server, model-repository rendering, checks.

Importing this package loads no Triton library; tritonclient and pytriton are imported when first used.
"""

from advisor.triton.client import GenerationResult, GenerationTimeout, TritonClient
from advisor.triton.contract import INPUTS, OUTPUTS, TensorSpec, check_model, contract_problems
from advisor.triton.metrics import metric_total, parse_prometheus
from advisor.triton.server import EmbeddedTriton

__all__ = [
    "GenerationResult", "GenerationTimeout", "TritonClient",
    "INPUTS", "OUTPUTS", "TensorSpec", "check_model", "contract_problems",
    "metric_total", "parse_prometheus",
    "EmbeddedTriton",
]
