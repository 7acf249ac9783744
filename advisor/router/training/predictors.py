"""The per-rung probability model is a registered choice, picked by grouped cross-validation at training.

Candidates (`PREDICTORS`, in order of preference on a tie):

- ``router``: per rung an L2 logistic regression on every request feature (hashed character and word n-grams,
  cues, class), calibrated (isotonic or Platt), with the second stage across rungs (`fit.fit_router`);
- ``tfidf``: per rung an L2 logistic regression (liblinear, C as for the router) on the hashed word 1-2-gram
  tf-idf block and the class one-hot only, its logistic output as the probability, no second stage: the
  project's strong simple baseline (`baseline.TfidfLogistic`) in the artifact's own features, so that it is
  served on the same one-request path;
- ``class_rates``: each rung's usable rate in the request's class on the training data; nothing from the text.

Every candidate's out-of-fold P(usable) comes from the same grouped folds (by prompt) as the router's. Each is
routed with the value rule over one sweep of values (`tuning.sweep`, the out-of-fold predicted costs) and its
recorded outcomes realised; the figure is the AIQ (`metrics.aiq`) in single-shot mode (over the single rungs'
cost range) and in escalation mode (over its own range, rho = 0), and their mean. The candidate with the
highest mean AIQ is chosen; its arrays go into the artifact, and the artifact records the choice and every
candidate's figures (``training.predictor``; `RouterModel.predictor` reads it, and names the router for an
artifact written before the choice existed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from advisor.errors import RouterError
from advisor.registry import Registry
from advisor.router.model.curves import aiq
from advisor.router.model.features import CUE_NAMES
from advisor.router.routing.rule import PolicyConfig, RungFacts
from advisor.router.training.linear import class_rates, fit_linear, rows_for_rung
from advisor.router.training.tuning import sweep, value_grid

IDENTITY_GRID = np.linspace(-12.0, 12.0, 97)  #: calibration knots that leave a logistic output as it is
HOW = ("grouped K-fold by prompt (the router's folds); out-of-fold P(usable) of each candidate routed with the "
       "value rule over one sweep of values and out-of-fold predicted costs; AIQ single-shot (single rungs' cost "
       "range) and escalation (own range, rho 0); chosen: highest mean AIQ, ties to the earlier candidate")


@dataclass
class Fitted:
    """A candidate's arrays for the artifact and its out-of-fold probabilities."""

    w: np.ndarray  #: (n_sparse + n_dense, R) linear weights
    bias: np.ndarray  #: (R,)
    calib_x: list[np.ndarray]
    calib_y: list[np.ndarray]
    stack_w: np.ndarray | None
    stack_b: np.ndarray | None
    p_oof: np.ndarray  #: (n, R) out-of-fold P(usable), NaN where a rung has no outcome


@dataclass
class FitContext:
    """What every candidate is fitted from (built once by `fit.fit_router`)."""

    data: Any  #: `fit.TrainingData`
    X: Any  #: CSR (n, n_sparse + n_dense): the featuriser's sparse block then its dense block
    featurizer: Any
    cv: list[tuple[np.ndarray, np.ndarray]]
    C: float
    seed: int
    router: Fitted | None = None  #: today's model, fitted by `fit_router` before the choice


class Predictor(Protocol):
    """One candidate: its name, what it is, and its fit (arrays for the artifact and out-of-fold P)."""

    name: str
    description: str

    def fit(self, ctx: FitContext) -> Fitted:
        """Fit on `ctx` (module docstring)."""
        ...


#: Every candidate by name, in order of preference on a tie.
PREDICTORS: Registry[Predictor] = Registry("router predictor")


@dataclass(frozen=True)
class Candidate:
    """A registered `Predictor` made of a name, a description and a fit function."""

    name: str
    description: str
    fit_with: Callable[[FitContext], Fitted]

    def fit(self, ctx: FitContext) -> Fitted:
        """Fit on `ctx`."""
        return self.fit_with(ctx)


def _class_columns(ctx: FitContext) -> np.ndarray:
    base = ctx.featurizer.n_sparse + len(CUE_NAMES)
    return np.arange(base, base + len(ctx.featurizer.classes))


def _identity(R: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    y = 1.0 / (1.0 + np.exp(-IDENTITY_GRID))
    return [IDENTITY_GRID.copy() for _ in range(R)], [y.copy() for _ in range(R)]


def fit_router_candidate(ctx: FitContext) -> Fitted:
    """Today's model, fitted by `fit.fit_router` before the choice (its arrays and out-of-fold P are reused)."""
    if ctx.router is None:  # pragma: no cover - fit_router always fits it first
        raise RouterError("the router candidate is fitted by fit_router")
    return ctx.router


def fit_tfidf(ctx: FitContext) -> Fitted:
    """The tf-idf baseline in the artifact's features: weights only on the word n-gram and class columns."""
    feat, data = ctx.featurizer, ctx.data
    cols = np.concatenate([np.arange(feat.n_hash, feat.n_sparse), _class_columns(ctx)])
    Xc = ctx.X[:, cols]
    n, R = data.usable.shape
    W, bias, p_oof = np.zeros((ctx.X.shape[1], R)), np.zeros(R), np.full((n, R), np.nan)
    for j in range(R):
        rows, y, w = rows_for_rung(data.usable, data.runs, j)
        for train_prompts, test_prompts in ctx.cv:
            test = np.isin(rows, test_prompts)
            coef, b = fit_linear(Xc[rows[~test]], y[~test], w[~test], ctx.C, ctx.seed)
            z = (Xc[rows[test]] @ coef + b) if coef is not None else np.full(test.sum(), b)
            p_oof[rows[test], j] = 1.0 / (1.0 + np.exp(-z))
        coef, b = fit_linear(Xc[rows], y, w, ctx.C, ctx.seed)
        if coef is not None:
            W[cols, j] = coef
        bias[j] = b
    cx, cy = _identity(R)
    return Fitted(W, bias, cx, cy, None, None, p_oof)


def fit_class_rates(ctx: FitContext) -> Fitted:
    """The class alone: weights on the class one-hot only (logit of the training rates), no bias."""
    feat, data = ctx.featurizer, ctx.data
    n, R = data.usable.shape
    cols = _class_columns(ctx)
    cls_of = np.array([feat.classes.index(c) if c in feat.classes else -1 for c in data.classes])
    W, p_oof = np.zeros((ctx.X.shape[1], R)), np.full((n, R), np.nan)
    for j in range(R):
        for train_prompts, test_prompts in ctx.cv:
            rates = class_rates(data.usable[train_prompts], [data.classes[i] for i in train_prompts],
                                feat.classes, j)
            p_oof[test_prompts, j] = np.where(cls_of[test_prompts] >= 0, rates[cls_of[test_prompts]],
                                              float(np.mean(rates)) if len(rates) else 0.5)
        p_oof[~np.isfinite(data.usable[:, j]), j] = np.nan
        rates = class_rates(data.usable, data.classes, feat.classes, j)
        W[cols, j] = np.log(rates / (1 - rates))
    cx, cy = _identity(R)
    return Fitted(W, np.zeros(R), cx, cy, None, None, p_oof)


for _candidate in (
        Candidate("router", "per-rung L2 logistic regression on every feature (character and word n-grams, cues, "
                  "class), calibrated, with the second stage across rungs", fit_router_candidate),
        Candidate("tfidf", "per-rung L2 logistic regression on the word 1-2-gram tf-idf block and the class "
                  "one-hot, logistic output, no second stage", fit_tfidf),
        Candidate("class_rates", "each rung's training usable rate in the request's class (nothing from the text)",
                  fit_class_rates)):
    PREDICTORS.add(_candidate.name, _candidate)


def cv_figures(p_oof: np.ndarray, c_oof: np.ndarray, data: Any) -> dict[str, float | None]:
    """A candidate's figures on the training data: AIQ single-shot, escalation and their mean, and the Brier
    score of its out-of-fold P(usable) against the recorded usable fractions (module docstring)."""
    keep = np.isfinite(p_oof).all(axis=1) & np.isfinite(data.usable).all(axis=1) & np.isfinite(data.cost).all(axis=1)
    if keep.sum() < 10:
        return {"aiq_single": None, "aiq_escalate": None, "aiq": None, "brier": None, "prompts": int(keep.sum())}
    P, Cp, Y, C = p_oof[keep], c_oof[keep], data.usable[keep], data.cost[keep]
    facts = [RungFacts(r.name, r.self_hosted, r.latency_s) for r in data.rungs]
    costs = C.mean(axis=0)
    values = value_grid(costs)
    single = [(p["cost"], p["quality"]) for p in sweep(P, Cp, Y, C, facts, PolicyConfig(mode="single"), values)]
    esc = [(p["cost"], p["quality"]) for p in sweep(P, Cp, Y, C, facts, PolicyConfig(mode="escalate"), values)]
    a_single = aiq(single, float(costs.min()), float(costs.max()))
    a_esc = aiq(esc, min(c for c, _ in esc), max(c for c, _ in esc))
    return {"aiq_single": a_single, "aiq_escalate": a_esc, "aiq": (a_single + a_esc) / 2,
            "brier": float(np.mean((P - Y) ** 2)), "prompts": int(keep.sum())}


def choose_predictor(ctx: FitContext, c_oof: np.ndarray,
                     names: Sequence[str] | None = None) -> tuple[str, Fitted, dict[str, Any]]:
    """Fit every candidate in `names` (default: all registered), judge each by `cv_figures`, and return the
    chosen name, its fit and the record the artifact keeps."""
    available = list(PREDICTORS.items())
    names = list(names) if names else available
    for name in names:
        PREDICTORS.get(name)  # unknown name: one line with did-you-mean
    names = [n for n in available if n in names]
    fits, figures = {}, {}
    for name in names:
        fits[name] = PREDICTORS.get(name).fit(ctx)
        figures[name] = cv_figures(fits[name].p_oof, c_oof, ctx.data)
    scored = [n for n in names if figures[n]["aiq"] is not None]
    chosen = max(scored, key=lambda n: (figures[n]["aiq"], -names.index(n))) if scored else names[0]
    record = {"chosen": chosen, "description": PREDICTORS.get(chosen).description, "how": HOW,
              "candidates": {n: {"description": PREDICTORS.get(n).description, **figures[n]} for n in names}}
    return chosen, fits[chosen], record
