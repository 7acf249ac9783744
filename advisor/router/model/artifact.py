"""The router artifact: a versioned file holding a trained router and everything needed to trust it.

Content: format name and version, advisor version, training provenance (store, suite, ladder and its hash,
runs, prompts, classes, bar, how many costs were estimated or simulated), the featuriser state, per-rung linear
weights and calibration maps (piecewise linear, raw score -> probability), the per-request cost model
(`costmodel.py`), the chain dependence, the default rule chosen in cross-validation, and the metrics.

It is plain data, never code: ``.json`` (arrays base64-encoded with their dtype and shape) or ``.npz`` (numpy
arrays, read with ``allow_pickle=False``, beside a JSON skeleton; every member's dtype, shape and size is checked
from the zip and ``.npy`` headers before an array is read, `npz.py`). Pickle and joblib files are refused *before
reading a byte* (unpickling runs code). Every load is validated against the schema (`schema.py`): known
version, array shapes, finite values, probabilities in [0, 1], non-negative costs; a bad file is one
`RouterError` line.

Scoring is numpy only (no sklearn call in the hot path): a sparse dot product of the hashed n-grams with the
weight rows they touch, a dense dot product, and ``np.interp`` through each rung's calibration map.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zipfile
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from operator import mul
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from advisor.version import __version__
from advisor.errors import RouterError
from advisor.nesting import load_json
from advisor.router.model.cache import cache_of, derived
from advisor.router.model.costmodel import CostModel
from advisor.router.model.features import CUE_NAMES, Featurizer
from advisor.router.model.npz import MAX_ARTIFACT_ENV, max_artifact_bytes, read_npz
from advisor.router.model.schema import FORMAT, FORMAT_VERSION, validate_state

try:  # np.interp without its Python-level argument checks (a tenth of one request's scoring: one call per rung)
    from numpy.core.multiarray import interp as _interp
except ImportError:  # pragma: no cover - numpy 2 moved it
    from numpy._core.multiarray import interp as _interp

SUFFIXES = (".json", ".npz")


@dataclass
class RungModel:
    """What the router knows about one rung besides its probability model."""

    name: str
    position: int
    usd_per_input_token: float
    fixed_cost_usd: float  #: mean per-attempt cost not explained by input tokens (output tokens x price)
    mean_output_tokens: float
    self_hosted: bool = True
    data_leaves_org: bool = False
    latency_s: float | None = None  #: median recorded latency; None when the data has none
    base_rate: float = 0.0  #: usable rate in the training data
    usd_per_output_token: float = 0.0

    def attempt_cost(self, input_tokens: float) -> float:
        """Mean-remainder estimate of one attempt's USD (the simple cost the baseline uses)."""
        return input_tokens * self.usd_per_input_token + self.fixed_cost_usd


def _interp_one(x: float, xs: list[float], ys: list[float]) -> float:
    """`np.interp(x, xs, ys)` for one number (xs non-decreasing; clamped to the end values outside them; at a
    repeated knot, the value of its last copy, as np.interp gives)."""
    if x < xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    j = bisect_right(xs, x) - 1  # xs[j] <= x < xs[j + 1]
    return ys[j] + (ys[j + 1] - ys[j]) * (x - xs[j]) / (xs[j + 1] - xs[j])


@dataclass
class RouterModel:
    """A trained router: featuriser + per-rung calibrated logistic models + cost model + rung facts."""

    featurizer: Featurizer
    rungs: list[RungModel]
    w_sparse: np.ndarray  #: (n_sparse, R) float32
    w_dense: np.ndarray  #: (n_dense, R) float32
    bias: np.ndarray  #: (R,)
    calib_x: list[np.ndarray]  #: per rung, increasing raw scores
    calib_y: list[np.ndarray]  #: per rung, calibrated probabilities at calib_x
    cost_model: CostModel | None = None
    stack_w: np.ndarray | None = None  #: (R + n_class + 1, R) second stage on logits + class (see train._fit_stack)
    stack_b: np.ndarray | None = None  #: (R,)
    dependence: float = 0.0  #: chain failure dependence rho (see rule.chain_outcome_batch)
    default: dict[str, Any] = field(default_factory=dict)  #: the rule and operating point chosen in CV
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    @property
    def rung_names(self) -> list[str]:
        """Rung names in ladder order."""
        return [r.name for r in self.rungs]

    @property
    def simulated(self) -> bool:
        """True when the router was trained on runs of stand-in (simulated) rungs."""
        return bool(self.provenance.get("simulated_runs"))

    @property
    def version_tag(self) -> str:
        """Short identifier recorded with routing decisions."""
        return f"{FORMAT}/{FORMAT_VERSION}:{self.provenance.get('data_hash', '')[:12]}"

    # ------------------------------------------------------------------ scoring
    def _calibrate(self, raw: np.ndarray, dense: np.ndarray) -> np.ndarray:
        out = np.empty_like(raw, dtype=np.float64)
        raw = np.asarray(raw, dtype=np.float64)
        for j in range(raw.shape[-1]):  # the maps are float64 already (from_state): np.interp's own C routine
            out[..., j] = _interp(raw[..., j], self.calib_x[j], self.calib_y[j], None, None)
        if self.stack_w is None:
            return out
        z = np.log(np.clip(out, 1e-4, 1 - 1e-4) / (1 - np.clip(out, 1e-4, 1 - 1e-4)))
        R = out.shape[-1]
        onehot = dense[..., len(CUE_NAMES): len(CUE_NAMES) + self.stack_w.shape[0] - R]
        return 1.0 / (1.0 + np.exp(-(z @ self.stack_w[:R] + onehot @ self.stack_w[R:] + self.stack_b)))

    @property
    def predictor(self) -> dict[str, Any]:
        """Which per-rung probability model the artifact carries and the cross-validated figures it was chosen by
        (`advisor.router.training.predictors`); an artifact written before the choice carries the router's."""
        return (self.training or {}).get("predictor") or {
            "chosen": "router", "candidates": {}, "how": "artifact written before the predictor was chosen in CV"}

    @property
    def rule(self) -> dict[str, Any]:
        """Which decision rule the default applies per mode and the cross-validated figures it was chosen by
        (`advisor.router.training.tuning.choose_rule`); an artifact written before the choice applies the chain
        value rule."""
        return (self.training or {}).get("rule") or {
            "chosen": {"single": "chain_value", "escalate": "chain_value"}, "candidates": {},
            "how": "artifact written before the decision rule was chosen in CV"}

    def predict_one(self, text: str, task_class: str | None = None) -> np.ndarray:
        """Calibrated P(usable) per rung for one request."""
        return self.score_one(text, task_class)[0]

    def score_one(self, text: str, task_class: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(calibrated P(usable) per rung, predicted attempt cost per rung) for one request (the fast path).

        The same model as `predict_with_costs`, computed with as few numpy calls as possible: the sparse block
        in one gather (`Featurizer.features_one`; its sums by einsum, not `@`: a BLAS gemv over ~1,000 touched
        rows hands work to BLAS threads, whose wake-up on a busy machine was the tail of one decision), and the
        small rest (R rungs, a few dozen dense features) in Python floats (`_plain_head`), because between live
        requests the CPU caches are cold and each numpy call then costs microseconds. Tests check that both
        paths agree."""
        _, dense, sums = self.featurizer.features_one(text, task_class, self.w_sparse)
        head = self._plain_head()
        raw = [s + sum(map(mul, dense, w)) + b for s, w, b in zip(sums, head["w_dense"], head["bias"])]
        p = [_interp_one(x, xs, ys) for x, xs, ys in zip(raw, head["calib_x"], head["calib_y"])]
        if head["stack_w"] is not None:
            z = [math.log(q / (1 - q)) for q in (min(max(q, 1e-4), 1 - 1e-4) for q in p)]
            onehot = dense[len(CUE_NAMES): len(CUE_NAMES) + head["stack_onehot"]]
            p = [1.0 / (1.0 + math.exp(-(sum(map(mul, z, wz)) + sum(map(mul, onehot, wo)) + b)))
                 for wz, wo, b in zip(*head["stack_w"], head["stack_b"])]
        if self.cost_model is not None:
            cost = self.cost_model.predict_one(len(text), dense)
        else:
            cost = self.simple_costs(np.array([len(text)], float))[0]
        return np.array(p), np.asarray(cost, dtype=np.float64)

    def _plain_head(self) -> dict[str, Any]:
        """The small arrays `score_one` reads, as Python lists by rung."""
        def build() -> dict[str, Any]:
            R = len(self.rungs)
            head = {"w_dense": np.asarray(self.w_dense, dtype=np.float64).T.tolist(),
                    "bias": np.asarray(self.bias, dtype=np.float64).tolist(),
                    "calib_x": [np.asarray(x, dtype=np.float64).tolist() for x in self.calib_x],
                    "calib_y": [np.asarray(y, dtype=np.float64).tolist() for y in self.calib_y],
                    "stack_w": None, "stack_b": None, "stack_onehot": 0}
            if self.stack_w is not None:
                w = np.asarray(self.stack_w, dtype=np.float64)
                head.update(stack_w=(w[:R].T.tolist(), w[R:].T.tolist()),
                            stack_b=np.asarray(self.stack_b, dtype=np.float64).tolist(), stack_onehot=w.shape[0] - R)
            return head

        return derived(cache_of(self), "plain_head", (self.w_dense, self.bias, self.calib_x, self.calib_y, self.stack_w,
                                                    self.stack_b), build)

    def raw_scores(self, texts: Sequence[str], classes: Sequence[str | None]) -> np.ndarray:
        """Uncalibrated linear scores, shape (n, R)."""
        xs, xd = self.featurizer.transform(texts, classes)
        return np.asarray(xs @ self.w_sparse) + xd @ self.w_dense + self.bias

    def predict_with_costs(self, texts: Sequence[str],
                           classes: Sequence[str | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(calibrated P(usable), predicted USD per attempt), both (n, R), features computed once."""
        classes = classes if classes is not None else [None] * len(texts)
        xs, xd = self.featurizer.transform(texts, classes)
        raw = np.asarray(xs @ self.w_sparse) + xd @ self.w_dense + self.bias
        return self._calibrate(raw, xd), self._costs(np.array([len(t) for t in texts], float), xd)

    def predict(self, texts: Sequence[str], classes: Sequence[str | None] | None = None) -> np.ndarray:
        """Calibrated P(usable), shape (n, R), for many requests."""
        return self.predict_with_costs(texts, classes)[0]

    def _costs(self, chars: np.ndarray, dense: np.ndarray) -> np.ndarray:
        if self.cost_model is not None:
            return self.cost_model.predict(chars, dense[:, : self.cost_model.n_features])
        return self.simple_costs(chars)

    def simple_costs(self, chars: np.ndarray) -> np.ndarray:
        """Characters/4 x input price + each rung's mean remainder, shape (n, R) (the pre-cost-model estimate)."""
        pin = np.array([r.usd_per_input_token for r in self.rungs])
        fixed = np.array([r.fixed_cost_usd for r in self.rungs])
        return (np.asarray(chars, float) / 4.0)[:, None] * pin[None, :] + fixed[None, :]

    def attempt_costs(self, texts: Sequence[str], classes: Sequence[str | None] | None = None) -> np.ndarray:
        """Predicted USD per attempt, shape (n, R) (the cost model; see `costmodel.py`)."""
        return self.predict_with_costs(texts, classes)[1]

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        """Plain-data state of the artifact."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "advisor_version": __version__,
            "provenance": self.provenance, "training": self.training, "metrics": self.metrics,
            "featurizer": self.featurizer.state(), "rungs": [asdict(r) for r in self.rungs],
            "w_sparse": self.w_sparse, "w_dense": self.w_dense, "bias": self.bias,
            "calib_x": list(self.calib_x), "calib_y": list(self.calib_y),
            "cost_model": self.cost_model.state() if self.cost_model else None,
            "stack_w": self.stack_w, "stack_b": self.stack_b,
            "dependence": float(self.dependence), "default": self.default}

    @classmethod
    def from_state(cls, state: dict[str, Any], source: str = "<state>") -> "RouterModel":
        """Rebuild from `to_state()` after validating it (`schema.validate_state`)."""
        validate_state(state, source)
        try:
            return cls(
                featurizer=Featurizer.from_state(state["featurizer"]),
                rungs=[RungModel(**r) for r in state["rungs"]],
                w_sparse=np.asarray(state["w_sparse"], dtype=np.float32),
                w_dense=np.asarray(state["w_dense"], dtype=np.float32),
                bias=np.asarray(state["bias"], dtype=np.float64),
                calib_x=[np.asarray(x, dtype=np.float64) for x in state["calib_x"]],
                calib_y=[np.asarray(y, dtype=np.float64) for y in state["calib_y"]],
                cost_model=CostModel.from_state(state["cost_model"]) if state.get("cost_model") else None,
                stack_w=None if state.get("stack_w") is None else np.asarray(state["stack_w"], dtype=np.float64),
                stack_b=None if state.get("stack_b") is None else np.asarray(state["stack_b"], dtype=np.float64),
                dependence=float(state.get("dependence", 0.0)), default=dict(state.get("default") or {}),
                provenance=state.get("provenance", {}), metrics=state.get("metrics", {}),
                training=state.get("training", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise RouterError(f"{source}: damaged router artifact ({type(exc).__name__}: {exc})") from None

    def save(self, path: str | Path) -> Path:
        """Write the artifact as .json (portable, one text file) or .npz (numpy arrays + JSON skeleton)."""
        path = Path(path)
        if path.suffix not in SUFFIXES:
            raise RouterError(f"{path}: router artifacts end in .json or .npz (plain data; pickle/joblib are "
                              "not written because loading them can run code)")
        path.parent.mkdir(parents=True, exist_ok=True)
        state = self.to_state()
        if path.suffix == ".npz":
            arrays: dict[str, np.ndarray] = {}
            skeleton = _encode(state, arrays)
            np.savez_compressed(path, __skeleton__=np.frombuffer(json.dumps(skeleton).encode(), dtype=np.uint8),
                                **arrays)
        else:
            path.write_text(json.dumps(_encode(state)))
        return path


#: JSON values (counted by their separators) a .json artifact may hold: a trained one has a few hundred, its arrays
#: base64 text; a list of numbers instead costs Python about 50 bytes a value, so this bounds what loading takes
MAX_JSON_VALUES = 1_000_000


def load_router(path: str | Path) -> RouterModel:
    """Load and validate a router artifact; RouterError (one line) when missing, unsafe, damaged or of another
    version. Nothing in the file is executed: pickle/joblib are refused by name before opening."""
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise RouterError(f"{path}: not loaded: router artifacts are .json or .npz (plain data); pickle/joblib "
                          "files are refused because loading them can run code. Retrain with "
                          "`advisor router train --out router.json`.")
    if not path.is_file():
        raise RouterError(f"{path}: no router artifact here (train one with `advisor router train`)")
    try:
        if path.suffix == ".npz":
            arrays = read_npz(path)
            skeleton = load_json(arrays.pop("__skeleton__").tobytes().decode(), f"{path} (skeleton)", RouterError)
            state = _decode(skeleton, arrays)
        else:
            size, limit = path.stat().st_size, max_artifact_bytes()
            if size > limit * 4 // 3 + 2**20:  # base64 text of at most `limit` bytes of arrays, plus the JSON
                raise RouterError(f"{path}: {size / 2**20:.0f} MiB is over the limit on router artifacts "
                                  f"({MAX_ARTIFACT_ENV}={limit / 2**20:g} MiB of arrays)")
            text = path.read_text(encoding="utf-8")
            if text.count(",") + text.count(":") > MAX_JSON_VALUES:  # each parsed value costs ~50x its text
                raise RouterError(f"{path}: holds more than {MAX_JSON_VALUES:,} JSON values; an artifact keeps "
                                  "its arrays as base64 (as `advisor router train` writes them), not as JSON lists")
            state = _decode(load_json(text, str(path), RouterError))
    except (ValueError, KeyError, TypeError, EOFError, OSError, UnicodeDecodeError, binascii.Error,
            zipfile.BadZipFile) as exc:
        raise RouterError(f"{path}: cannot read router artifact ({type(exc).__name__}: {exc}); "
                          "retrain it with `advisor router train`") from None
    return RouterModel.from_state(state, str(path))


def _encode(obj: Any, arrays: dict[str, np.ndarray] | None = None) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            raise RouterError("router artifacts hold numeric arrays only")
        if arrays is not None:
            key = f"a{len(arrays)}"
            arrays[key] = arr
            return {"__npz__": key}
        return {"__ndarray__": base64.b64encode(arr.tobytes()).decode(), "dtype": str(arr.dtype),
                "shape": list(arr.shape)}
    if isinstance(obj, dict):
        return {k: _encode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


_DTYPES = {"float32", "float64", "int32", "int64", "uint8", "bool"}


def _decode(obj: Any, arrays: dict[str, np.ndarray] | None = None) -> Any:
    if isinstance(obj, dict):
        if "__npz__" in obj:
            return arrays[obj["__npz__"]]
        if "__ndarray__" in obj:
            dtype = obj.get("dtype")
            if dtype not in _DTYPES:
                raise ValueError(f"array without a known numeric dtype (dtype {dtype!r})")
            shape = obj.get("shape")
            if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
                raise ValueError(f"array with a bad shape {shape!r}")
            return np.frombuffer(base64.b64decode(obj["__ndarray__"], validate=True), dtype=dtype).reshape(shape).copy()
        return {k: _decode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, arrays) for v in obj]
    return obj

