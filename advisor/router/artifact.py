"""The router artifact: a versioned file holding a trained router and everything needed to trust it.

Content: format name and version, advisor version, training provenance (store, suite, ladder and its hash,
runs, prompts, classes, bar, how many costs were estimated), the featuriser state, per-rung linear weights and
calibration maps (piecewise linear, raw score -> probability), per-rung cost and latency model, and the
cross-validated metrics. It is plain data (no pickled code): ``.json`` (arrays base64-encoded) or ``.joblib``.
Loading a file of another format version is a `RouterError`.

Scoring is numpy only (no sklearn call in the hot path): a sparse dot product of the hashed n-grams with the
weight rows they touch, a dense dot product, and ``np.interp`` through each rung's calibration map.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from advisor.errors import RouterError
from advisor.router.features import Featurizer

FORMAT = "advisor-router"
FORMAT_VERSION = 1


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

    def attempt_cost(self, input_tokens: float) -> float:
        """Estimated USD of one attempt for a prompt of `input_tokens`."""
        return input_tokens * self.usd_per_input_token + self.fixed_cost_usd


@dataclass
class RouterModel:
    """A trained router: featuriser + per-rung calibrated logistic models + rung cost facts."""

    featurizer: Featurizer
    rungs: list[RungModel]
    w_sparse: np.ndarray  #: (n_sparse, R) float32
    w_dense: np.ndarray  #: (n_dense, R) float32
    bias: np.ndarray  #: (R,)
    calib_x: list[np.ndarray]  #: per rung, increasing raw scores
    calib_y: list[np.ndarray]  #: per rung, calibrated probabilities at calib_x
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    @property
    def rung_names(self) -> list[str]:
        """Rung names in ladder order."""
        return [r.name for r in self.rungs]

    @property
    def version_tag(self) -> str:
        """Short identifier recorded with routing decisions."""
        return f"{FORMAT}/{FORMAT_VERSION}:{self.provenance.get('data_hash', '')[:12]}"

    # ------------------------------------------------------------------ scoring
    def _calibrate(self, raw: np.ndarray) -> np.ndarray:
        out = np.empty_like(raw, dtype=np.float64)
        for j in range(raw.shape[-1]):
            out[..., j] = np.interp(raw[..., j], self.calib_x[j], self.calib_y[j])
        return out

    def predict_one(self, text: str, task_class: str | None = None) -> np.ndarray:
        """Calibrated P(usable) per rung for one request (the fast path)."""
        idx, val, dense = self.featurizer.transform_one(text, task_class)
        raw = val @ self.w_sparse[idx] + dense @ self.w_dense + self.bias
        return self._calibrate(raw)

    def raw_scores(self, texts: Sequence[str], classes: Sequence[str | None]) -> np.ndarray:
        """Uncalibrated linear scores, shape (n, R)."""
        xs, xd = self.featurizer.transform(texts, classes)
        return np.asarray(xs @ self.w_sparse) + xd @ self.w_dense + self.bias

    def predict(self, texts: Sequence[str], classes: Sequence[str | None] | None = None) -> np.ndarray:
        """Calibrated P(usable), shape (n, R), for many requests."""
        classes = classes if classes is not None else [None] * len(texts)
        return self._calibrate(self.raw_scores(texts, classes))

    def attempt_costs(self, texts: Sequence[str]) -> np.ndarray:
        """Estimated USD per attempt, shape (n, R): input tokens = characters / 4."""
        tokens = np.array([len(t) / 4.0 for t in texts])
        pin = np.array([r.usd_per_input_token for r in self.rungs])
        fixed = np.array([r.fixed_cost_usd for r in self.rungs])
        return tokens[:, None] * pin[None, :] + fixed[None, :]

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        """Plain-data state of the artifact."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "advisor_version": _advisor_version(),
            "provenance": self.provenance, "training": self.training, "metrics": self.metrics,
            "featurizer": self.featurizer.state(), "rungs": [r.__dict__ for r in self.rungs],
            "w_sparse": self.w_sparse, "w_dense": self.w_dense, "bias": self.bias,
            "calib_x": list(self.calib_x), "calib_y": list(self.calib_y)}

    @classmethod
    def from_state(cls, state: dict[str, Any], source: str = "<state>") -> "RouterModel":
        """Rebuild from `to_state()`, checking the format and its version."""
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise RouterError(f"{source}: not an advisor router artifact")
        version = state.get("format_version")
        if version != FORMAT_VERSION:
            raise RouterError(f"{source}: router artifact format version {version} (written by advisor "
                              f"{state.get('advisor_version', '?')}); this advisor reads version {FORMAT_VERSION}. "
                              "Retrain it with `advisor router train`.")
        try:
            return cls(
                featurizer=Featurizer.from_state(state["featurizer"]),
                rungs=[RungModel(**r) for r in state["rungs"]],
                w_sparse=np.asarray(state["w_sparse"], dtype=np.float32),
                w_dense=np.asarray(state["w_dense"], dtype=np.float32),
                bias=np.asarray(state["bias"], dtype=np.float64),
                calib_x=[np.asarray(x, dtype=np.float64) for x in state["calib_x"]],
                calib_y=[np.asarray(y, dtype=np.float64) for y in state["calib_y"]],
                provenance=state.get("provenance", {}), metrics=state.get("metrics", {}),
                training=state.get("training", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise RouterError(f"{source}: damaged router artifact ({exc})") from None

    def save(self, path: str | Path) -> Path:
        """Write the artifact as .json (portable) or .joblib (compact)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = self.to_state()
        if path.suffix == ".joblib":
            import joblib

            joblib.dump(state, path, compress=3)
        elif path.suffix == ".json":
            path.write_text(json.dumps(_encode(state)))
        else:
            raise RouterError(f"{path}: router artifacts end in .json or .joblib")
        return path


def load_router(path: str | Path) -> RouterModel:
    """Load a router artifact; RouterError when missing, damaged or of another format version."""
    path = Path(path)
    if not path.exists():
        raise RouterError(f"{path}: no router artifact here (train one with `advisor router train`)")
    try:
        if path.suffix == ".joblib":
            import joblib

            state = joblib.load(path)
        else:
            state = _decode(json.loads(path.read_text()))
    except (ValueError, EOFError, OSError) as exc:
        raise RouterError(f"{path}: cannot read router artifact ({exc})") from None
    return RouterModel.from_state(state, str(path))


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {"__ndarray__": base64.b64encode(arr.tobytes()).decode(), "dtype": str(arr.dtype),
                "shape": list(arr.shape)}
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return np.frombuffer(base64.b64decode(obj["__ndarray__"]), dtype=obj["dtype"]).reshape(obj["shape"]).copy()
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def _advisor_version() -> str:
    try:
        from importlib.metadata import version

        return version("advisor")
    except Exception:  # pragma: no cover
        return "unknown"
