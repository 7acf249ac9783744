"""The per-request cost model: each rung's predicted USD for one attempt at one request.

attempt cost(request, rung) = input tokens x the rung's input price + predicted remainder, where
- input tokens = characters x the rung's tokens-per-character ratio learned from the recorded input token
  counts (probe runs count them with the rung's own tokenizer); without recorded counts, the stated estimate
  of 4 characters per token;
- the remainder (what input tokens do not explain: output tokens x output price, or a recorded per-call cost)
  is predicted from the request's cues and class by a ridge regression on log(remainder) per rung, with a
  smearing factor so that its mean is unbiased (code answers are long: the class and the code/math cues carry
  most of it).

Where the data has no recorded output tokens or costs (every cost estimated at import from a stated
output-token assumption), the remainder is that assumption and the model learns a constant; the training
report says so (`estimated` per rung).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import mul
from typing import Any

import numpy as np

from advisor.router.model.cache import cache_of, derived

CHARS_PER_TOKEN = 4.0  #: the stated estimate when no token counts are recorded


@dataclass
class CostModel:
    """Fitted per-rung cost model (plain arrays, see the module docstring)."""

    n_features: int  #: leading dense features used (cues + class one-hot + unknown flag)
    weights: np.ndarray  #: (n_features, R) on log(remainder + floor)
    intercept: np.ndarray  #: (R,)
    smear: np.ndarray  #: (R,) mean exp(residual)
    tokens_per_char: np.ndarray  #: (R,)
    usd_per_input_token: np.ndarray  #: (R,)
    floor_usd: np.ndarray  #: (R,) offset that keeps log() finite for zero remainders

    def predict(self, chars: np.ndarray, dense: np.ndarray) -> np.ndarray:
        """Predicted USD per attempt, shape (n, R), from characters (n,) and leading dense features."""
        log_rem = dense @ self.weights + self.intercept
        rem = np.maximum(0.0, np.exp(np.minimum(log_rem, 50.0)) * self.smear - self.floor_usd)
        return (chars[:, None] * self.tokens_per_char) * self.usd_per_input_token + rem

    def predict_one(self, chars: int, dense: list[float]) -> list[float]:
        """`predict` for one request in Python floats (`RouterModel.score_one`: no numpy call)."""
        arrays = (self.weights, self.intercept, self.smear, self.floor_usd, self.tokens_per_char,
                  self.usd_per_input_token)
        cols, intercept, smear, floor, per_char = derived(cache_of(self), "plain",
                                                          arrays, lambda: (
            self.weights.T.tolist(), self.intercept.tolist(), self.smear.tolist(), self.floor_usd.tolist(),
            (self.tokens_per_char * self.usd_per_input_token).tolist()))
        x = dense[: self.n_features]
        rem = (max(0.0, math.exp(min(sum(map(mul, x, w)) + b, 50.0)) * sm - fl)
               for w, b, sm, fl in zip(cols, intercept, smear, floor))
        return [chars * pc + r for pc, r in zip(per_char, rem)]

    def state(self) -> dict[str, Any]:
        """Plain state for the artifact."""
        return {"n_features": self.n_features, "weights": self.weights, "intercept": self.intercept,
                "smear": self.smear, "tokens_per_char": self.tokens_per_char,
                "usd_per_input_token": self.usd_per_input_token, "floor_usd": self.floor_usd}

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> "CostModel":
        """Rebuild from `state()` (validated by `schema.py` first)."""
        f = lambda k: np.asarray(s[k], dtype=np.float64)  # noqa: E731
        return cls(int(s["n_features"]), f("weights"), f("intercept"), f("smear"), f("tokens_per_char"),
                   f("usd_per_input_token"), f("floor_usd"))


def fit_cost_model(chars: np.ndarray, input_tokens: np.ndarray, cost: np.ndarray, pin: np.ndarray,
                   dense: np.ndarray, alpha: float = 3.0) -> CostModel:
    """Fit on prompt-level data: chars (n,), recorded input tokens (n,), mean cost per attempt (n, R; NaN where
    a rung has no run), input prices (R,), dense features (n, n_features)."""
    # heavy dependency, imported on use: scikit-learn
    from sklearn.linear_model import Ridge

    n, R = cost.shape
    ok_tok = (chars > 0) & np.isfinite(input_tokens) & (input_tokens > 0)
    ratio = float(input_tokens[ok_tok].sum() / chars[ok_tok].sum()) if ok_tok.any() else 1.0 / CHARS_PER_TOKEN
    tpc = np.full(R, ratio)
    W, b, smear, floor = np.zeros((dense.shape[1], R)), np.zeros(R), np.ones(R), np.zeros(R)
    for j in range(R):
        m = np.isfinite(cost[:, j])
        rem = np.maximum(0.0, cost[m, j] - input_tokens[m] * pin[j]) if m.any() else np.zeros(0)
        floor[j] = 1e-3 * float(rem.mean()) + 1e-12 if len(rem) else 1e-12
        if len(rem) < 2:
            b[j] = np.log(floor[j] + (rem.mean() if len(rem) else 0.0))
            continue
        y = np.log(rem + floor[j])
        if np.ptp(y) < 1e-9:
            b[j] = float(y[0])
            continue
        reg = Ridge(alpha=alpha).fit(dense[m], y)
        W[:, j], b[j] = reg.coef_, float(reg.intercept_)
        smear[j] = float(np.mean(np.exp(y - reg.predict(dense[m]))))
    return CostModel(dense.shape[1], W, b, smear, tpc, np.asarray(pin, float), floor)


def mdape(pred: np.ndarray, actual: np.ndarray) -> list[float | None]:
    """Median absolute percentage error per rung (columns), over cells with a positive recorded cost."""
    out = []
    for j in range(actual.shape[1]):
        m = np.isfinite(actual[:, j]) & (actual[:, j] > 0)
        out.append(float(np.median(np.abs(pred[m, j] - actual[m, j]) / actual[m, j])) if m.any() else None)
    return out
