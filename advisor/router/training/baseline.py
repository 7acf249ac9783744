"""The strong simple baseline every evaluation compares the router to.

Per rung, an L2 logistic regression (liblinear, C=1) on the tf-idf of the prompt (word 1-2-grams, sublinear
tf, min_df 2) plus the task class one-hot, trained on the same rows (same folds) as the router; the policy
(`policies.Baseline`) picks argmax_r P_r - lambda x cost_r with cost_r the rung's mean attempt cost in the
training data (no per-request cost model), lambda swept.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from advisor.router.training.linear import fit_linear, rows_for_rung


class TfidfLogistic:
    """Fitted tf-idf + class one-hot logistic models, one per rung, and each rung's mean training cost."""

    def __init__(self, C: float = 1.0) -> None:
        self.C = C
        self.vectorizer = None
        self.classes: list[str] = []
        self.coef: np.ndarray | None = None  #: (n_features, R)
        self.intercept: np.ndarray | None = None
        self.mean_cost = np.zeros(0)

    def _X(self, texts: Sequence[str], classes: Sequence[str | None]):
        # heavy dependency, imported on use: scipy
        import scipy.sparse as sp

        onehot = np.zeros((len(texts), len(self.classes)))
        index = {c: i for i, c in enumerate(self.classes)}
        for row, c in enumerate(classes):
            if c in index:
                onehot[row, index[c]] = 1.0
        return sp.hstack([self.vectorizer.transform(texts), sp.csr_matrix(onehot)], format="csr")

    def fit(self, data) -> "TfidfLogistic":
        """Fit on `train.TrainingData` (fractional outcomes become two weighted rows, as for the router)."""
        # heavy dependency, imported on use: scikit-learn
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, max_features=200000)
        self.vectorizer.fit(data.texts)
        self.classes = sorted({c for c in data.classes if c})
        X = self._X(data.texts, data.classes)
        R = data.usable.shape[1]
        self.coef, self.intercept = np.zeros((X.shape[1], R)), np.zeros(R)
        for j in range(R):
            rows, y, w = rows_for_rung(data.usable, data.runs, j)
            coef, b = fit_linear(X[rows], y, w, self.C, 0)
            if coef is not None:
                self.coef[:, j] = coef
            self.intercept[j] = b
        self.mean_cost = np.nan_to_num(np.nanmean(data.cost, axis=0))
        return self

    def predict(self, texts: Sequence[str], classes: Sequence[str | None]) -> np.ndarray:
        """P(usable), shape (n, R)."""
        z = np.asarray(self._X(texts, classes) @ self.coef) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))
