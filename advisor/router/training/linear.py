"""The linear pieces every per-rung model is fitted from: binary rows of a rung's outcomes, one weighted L2
logistic regression, and per-class usable rates (shared by the router, its predictor candidates and the
baseline)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def rows_for_rung(usable: np.ndarray, runs: np.ndarray, j: int):
    """Binary rows (index, label, weight) for rung j; fractional outcomes become two weighted rows."""
    ok = ~np.isnan(usable[:, j])
    idx = np.flatnonzero(ok)
    f, n = usable[idx, j], runs[idx, j]
    pos, neg = f > 0, f < 1
    rows = np.concatenate([idx[pos], idx[neg]])
    y = np.concatenate([np.ones(pos.sum()), np.zeros(neg.sum())])
    w = np.concatenate([(f * n)[pos], ((1 - f) * n)[neg]])
    return rows, y, w


def fit_linear(X, y, w, C: float, seed: int):
    """An L2 logistic regression (liblinear) of weighted binary rows: (coefficients, intercept); (None, +-10)
    when every label is the same, (None, 0.0), an even chance, when there is no row (a rung scored only on
    prompts of the held-out fold)."""
    # heavy dependency, imported on use: scikit-learn
    from sklearn.linear_model import LogisticRegression

    if len(y) == 0:
        return None, 0.0
    if len(np.unique(y)) < 2:
        return None, (10.0 if y[0] == 1 else -10.0)
    clf = LogisticRegression(C=C, solver="liblinear", max_iter=300, random_state=seed)
    clf.fit(X, y, sample_weight=w)
    return clf.coef_.ravel(), float(clf.intercept_[0])


def class_means(col: np.ndarray, cls: np.ndarray) -> tuple[dict[str, float], float]:
    """Per class of `cls` (an array of class names, "" for none) the mean of `col`'s finite values, and the
    overall mean (0.5 when `col` has none)."""
    known = np.isfinite(col)
    overall = float(col[known].mean()) if known.any() else 0.5
    return {c: float(col[known & (cls == c)].mean()) for c in np.unique(cls[known])}, overall


def class_names(classes: Sequence[str | None]) -> np.ndarray:
    """Class names as an array, "" for none."""
    return np.array([c or "" for c in classes])


def class_rates(usable: np.ndarray, classes: Sequence[str | None], names: Sequence[str], j: int) -> np.ndarray:
    """Per class in `names` the mean usable fraction of rung j (the rung's overall rate for an absent class)."""
    means, overall = class_means(usable[:, j], class_names(classes))
    return np.clip(np.array([means.get(c, overall) for c in names]), 1e-3, 1 - 1e-3)
