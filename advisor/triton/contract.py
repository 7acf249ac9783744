"""The vLLM backend's tensor contract, as data, and a checker for what a server says a model exposes.

Every model the advisor calls speaks this contract (Triton's vLLM backend, `triton-inference-server/vllm_backend`):
a decoupled model with the inputs and outputs below. The embedded stand-in server builds its tensors from these
tables, and `check_model` compares a model's metadata and config (as returned by Triton) against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from advisor.errors import ContractError


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor of the contract."""

    name: str
    datatype: str  #: Triton wire datatype: BYTES, BOOL, FP32, UINT32
    dims: tuple[int, ...]
    optional: bool = False
    meaning: str = ""


INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("text_input", "BYTES", (1,), False, "the prompt (chat template already applied)"),
    TensorSpec("stream", "BOOL", (1,), True, "stream partial outputs"),
    TensorSpec("sampling_parameters", "BYTES", (1,), True, "JSON of vLLM SamplingParams (max_tokens defaults to 16)"),
    TensorSpec("exclude_input_in_output", "BOOL", (1,), True, "do not echo the prompt"),
    TensorSpec("return_finish_reason", "BOOL", (1,), True, "ask for finish_reason"),
    TensorSpec("return_cumulative_logprob", "BOOL", (1,), True, "ask for cumulative_logprob"),
    TensorSpec("return_logprobs", "BOOL", (1,), True, "ask for logprobs"),
    TensorSpec("return_num_input_tokens", "BOOL", (1,), True, "ask for num_input_tokens"),
    TensorSpec("return_num_output_tokens", "BOOL", (1,), True, "ask for num_output_tokens"),
)

OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec("text_output", "BYTES", (-1,), meaning="generated text (a delta when streaming)"),
    TensorSpec("finish_reason", "BYTES", (-1,), meaning="stop | length"),
    TensorSpec("cumulative_logprob", "FP32", (-1,), meaning="sum of the sampled tokens' log-probabilities"),
    TensorSpec("logprobs", "BYTES", (-1,), meaning="JSON per-token log-probabilities (null unless asked)"),
    TensorSpec("num_input_tokens", "UINT32", (1,), meaning="prompt tokens"),
    TensorSpec("num_output_tokens", "UINT32", (-1,), meaning="tokens generated in this response"),
)

#: What the advisor's client sends with every generation (all must exist with these types).
CLIENT_INPUTS = ("text_input", "stream", "sampling_parameters", "exclude_input_in_output",
                 "return_finish_reason", "return_num_input_tokens", "return_num_output_tokens")
#: Outputs the advisor needs; token counts may be missing (then estimated, and the result says so).
CLIENT_OUTPUTS = ("text_output", "finish_reason")
TOKEN_OUTPUTS = ("num_input_tokens", "num_output_tokens")

_BY_NAME = {t.name: t for t in (*INPUTS, *OUTPUTS)}
_CONFIG_TYPES = {"TYPE_STRING": "BYTES", "TYPE_BOOL": "BOOL", "TYPE_FP32": "FP32", "TYPE_UINT32": "UINT32"}


def spec(name: str) -> TensorSpec:
    """The contract's spec of tensor `name` (KeyError when it is not part of the contract)."""
    return _BY_NAME[name]


def _dims(raw: Iterable[Any]) -> tuple[int, ...]:
    # gRPC JSON gives int64 dims as strings; HTTP gives ints.
    return tuple(int(d) for d in raw)


def _tensors(meta: dict, key: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {t["name"]: (t.get("datatype", ""), _dims(t.get("shape", ()))) for t in meta.get(key, []) or []}


def contract_problems(metadata: dict, config: dict | None = None, *, exact: bool = False) -> list[str]:
    """Differences between a model's Triton metadata (and config) and the contract, one string each.

    By default only what the advisor's client relies on is required (`CLIENT_INPUTS`, `CLIENT_OUTPUTS` and,
    when present, the token-count outputs with the right types); `exact=True` requires every tensor of the
    contract and no required input beyond text_input. `config` is the model config (``{"config": ...}`` or
    the bare config); when given, the model must be decoupled.
    """
    problems: list[str] = []
    ins, outs = _tensors(metadata, "inputs"), _tensors(metadata, "outputs")
    need_in = [t.name for t in INPUTS] if exact else list(CLIENT_INPUTS)
    need_out = [t.name for t in OUTPUTS] if exact else list(CLIENT_OUTPUTS)
    for kind, have, need in (("input", ins, need_in), ("output", outs, need_out)):
        for name in need:
            if name not in have:
                problems.append(f"missing {kind} {name} ({spec(name).datatype})")
        for name, (dtype, dims) in have.items():
            if name not in _BY_NAME:
                continue
            want = spec(name)
            if dtype != want.datatype:
                problems.append(f"{kind} {name} is {dtype or '?'}, expected {want.datatype}")
            elif kind == "input" and dims not in (want.dims, (-1, *want.dims)):
                problems.append(f"input {name} has dims {list(dims)}, expected {list(want.dims)}")
    if config is not None:
        cfg = config.get("config", config)
        problems += _config_problems(cfg, exact)
    return problems


def _config_problems(cfg: dict, exact: bool) -> list[str]:
    problems = []
    if not (cfg.get("model_transaction_policy") or {}).get("decoupled", False):
        problems.append("model is not decoupled (model_transaction_policy.decoupled must be true)")
    if exact:
        for item in cfg.get("input", []) or []:
            name = item.get("name")
            if name in _BY_NAME and name != "text_input" and not item.get("optional", False):
                problems.append(f"input {name} must be optional")
    return problems


def check_model(model: str, metadata: dict, config: dict | None = None, *, exact: bool = False) -> None:
    """Raise `ContractError` naming the model and every difference from the vLLM-backend contract."""
    problems = contract_problems(metadata, config, exact=exact)
    if problems:
        raise ContractError(f"model {model!r} does not match the vLLM backend contract: " + "; ".join(problems))


def config_datatype(config_type: str) -> str:
    """Map a model-config type name (TYPE_STRING) to the wire datatype (BYTES)."""
    return _CONFIG_TYPES.get(config_type, config_type.removeprefix("TYPE_"))
