"""Validation of a router artifact's state before anything is built from it (one `RouterError` line).

Checked: format name and a known version; every required key; array shapes against the featuriser and the
number of rungs; bounded text window and caps; finite values everywhere; calibration knots increasing with probabilities in [0, 1];
non-negative prices, costs and cost-model outputs; a dependence in [0, 1].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor.errors import RouterError
from advisor.router.model.features import CUE_NAMES

FORMAT = "advisor-router"
FORMAT_VERSION = 2

MAX_WINDOW_CHARS = 20_000  #: largest head or tail of the text window (trained routers use 300 and 200)
MAX_TEXT_CAP = 200_000  #: largest char_cap / word_cap (characters the n-grams read; default 1000 / 6000)
REQUIRED = ("featurizer", "rungs", "w_sparse", "w_dense", "bias", "calib_x", "calib_y")


def _arr(state: dict, key: str, source: str) -> np.ndarray:
    value = state.get(key)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise RouterError(f"{source}: damaged router artifact: {key} is not a numeric array") from None
    if not np.all(np.isfinite(arr)):
        raise RouterError(f"{source}: damaged router artifact: {key} holds NaN or infinite values")
    return arr


def _shape(arr: np.ndarray, want: tuple, key: str, source: str) -> None:
    if arr.shape != want:
        raise RouterError(f"{source}: damaged router artifact: {key} has shape {arr.shape}, expected {want}")


def validate_state(state: Any, source: str) -> None:
    """Raise `RouterError` naming the first problem of an artifact state (see the module docstring)."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise RouterError(f"{source}: not an advisor router artifact")
    version = state.get("format_version")
    if version != FORMAT_VERSION:
        raise RouterError(f"{source}: router artifact format version {version} (written by advisor "
                          f"{state.get('advisor_version', '?')}); this advisor reads version {FORMAT_VERSION}. "
                          "Retrain it with `advisor router train`.")
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise RouterError(f"{source}: damaged router artifact: missing {', '.join(missing)}")
    feat, rungs = state["featurizer"], state["rungs"]
    if not isinstance(feat, dict) or not isinstance(rungs, list) or not rungs:
        raise RouterError(f"{source}: damaged router artifact: featurizer or rungs malformed")
    try:
        n_hash, classes = int(feat["n_hash"]), list(feat["classes"])
    except (KeyError, TypeError, ValueError):
        raise RouterError(f"{source}: damaged router artifact: featurizer without n_hash/classes") from None
    window = feat.get("window")  # the text window (features.text_window); older artifacts have none
    if window is not None and not (isinstance(window, list) and len(window) == 2 and sum(window) > 0
                                   and all(type(v) is int and 0 <= v <= MAX_WINDOW_CHARS for v in window)):
        raise RouterError(f"{source}: damaged router artifact: featurizer.window {window!r} is not [head, tail] "
                          f"character counts, each 0-{MAX_WINDOW_CHARS} (MAX_WINDOW_CHARS)")
    for key in ("char_cap", "word_cap"):
        cap = feat.get(key)
        if type(cap) is not int or not 0 < cap <= MAX_TEXT_CAP:
            raise RouterError(f"{source}: damaged router artifact: featurizer.{key} {cap!r} is not a character "
                              f"count in 1-{MAX_TEXT_CAP} (MAX_TEXT_CAP)")
    R = len(rungs)
    n_dense = len(CUE_NAMES) + len(classes) + 1 + (384 if feat.get("use_embeddings") else 0)
    for key, want in (("idf", (2 * n_hash,)), ("cue_mean", (len(CUE_NAMES),)), ("cue_std", (len(CUE_NAMES),)),
                      ("class_freq", (len(classes),))):
        _shape(_arr(feat, key, source), want, f"featurizer.{key}", source)
    if feat.get("class_w") is not None:  # the class model (classpred.py); older artifacts have none
        _shape(_arr(feat, "class_w", source), (2 * n_hash + len(CUE_NAMES), len(classes)), "featurizer.class_w",
               source)
        _shape(_arr(feat, "class_b", source), (len(classes),), "featurizer.class_b", source)
    _shape(_arr(state, "w_sparse", source), (2 * n_hash, R), "w_sparse", source)
    _shape(_arr(state, "w_dense", source), (n_dense, R), "w_dense", source)
    _shape(_arr(state, "bias", source), (R,), "bias", source)
    for key in ("calib_x", "calib_y"):
        if not isinstance(state[key], list) or len(state[key]) != R:
            raise RouterError(f"{source}: damaged router artifact: {key} needs one map per rung ({R})")
    for j in range(R):
        x, y = _arr({"x": state["calib_x"][j]}, "x", source), _arr({"y": state["calib_y"][j]}, "y", source)
        if x.ndim != 1 or x.shape != y.shape or not len(x) or np.any(np.diff(x) < 0):
            raise RouterError(f"{source}: damaged router artifact: calibration map of rung {j} is not an increasing "
                              "list of knots")
        if np.any((y < 0) | (y > 1)):
            raise RouterError(f"{source}: damaged router artifact: calibration of rung {j} leaves [0, 1]")
    for r in rungs:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise RouterError(f"{source}: damaged router artifact: a rung without a name")
        for key in ("usd_per_input_token", "fixed_cost_usd", "usd_per_output_token", "mean_output_tokens"):
            v = r.get(key, 0.0)
            if not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise RouterError(f"{source}: damaged router artifact: rung {r['name']!r} has {key} = {v!r} "
                                  "(must be a finite non-negative number)")
    if state.get("stack_w") is not None:
        _shape(_arr(state, "stack_w", source), (R + len(classes) + 1, R), "stack_w", source)
        _shape(_arr(state, "stack_b", source), (R,), "stack_b", source)
    dep = state.get("dependence", 0.0)
    if not isinstance(dep, (int, float)) or not 0 <= dep <= 1:
        raise RouterError(f"{source}: damaged router artifact: dependence {dep!r} outside [0, 1]")
    cm = state.get("cost_model")
    if cm is not None:
        if not isinstance(cm, dict):
            raise RouterError(f"{source}: damaged router artifact: cost_model malformed")
        nf = int(cm.get("n_features", -1))
        if not 0 <= nf <= n_dense:
            raise RouterError(f"{source}: damaged router artifact: cost_model.n_features {nf} out of range")
        _shape(_arr(cm, "weights", source), (nf, R), "cost_model.weights", source)
        for key in ("intercept", "smear", "tokens_per_char", "usd_per_input_token", "floor_usd"):
            arr = _arr(cm, key, source)
            _shape(arr, (R,), f"cost_model.{key}", source)
            if key != "intercept" and np.any(arr < 0):
                raise RouterError(f"{source}: damaged router artifact: cost_model.{key} has negative values")
