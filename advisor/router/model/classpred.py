"""Class prediction for requests that come without a task class.

The router's probabilities lean on the task class (within a class the text adds little; see
`docs/router-results.md`), so a request without a class loses most of what the router knows. The featuriser
therefore carries a multinomial logistic regression from the request's own features (the hashed tf-idf block
and the standardised cues, nothing else) to the training classes. For a request without a class (or with a
class never seen in training) the class block of the features holds the predicted class probabilities
instead of the training class frequencies, and the "unknown" flag stays set.

Cheap for one request: one sparse dot product over the request's n-gram buckets (those the router's own
linear model already touches) plus a softmax over the classes.
"""

from __future__ import annotations

import math
import warnings
from operator import mul
from typing import Sequence

import numpy as np

CLASS_C = 10.0  #: inverse L2 strength of the class model (fixed, not tuned: classes are easy to tell apart)
MAX_ITER = 50  #: L-BFGS iterations: in one unscripted check on llmrouter-nim9 dev (fold 0) held-out class
#: accuracy was the same as at 100 for a fifth of the time; the fit stops there on purpose
MIN_PER_CLASS = 2  #: classes with fewer labelled examples than this are not predicted


def fit_class_model(x_sparse, cue_block: np.ndarray, classes: Sequence[str | None],
                    names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Weights (n_sparse + n_cues, K) float32 and biases (K,) of a multinomial logistic regression from the
    features to the classes `names` (in that order), fitted on the rows that have one of them; None when fewer
    than two classes have `MIN_PER_CLASS` examples (nothing to predict)."""
    # heavy dependency, imported on use: scipy, scikit-learn
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    index = {c: i for i, c in enumerate(names)}
    rows = np.array([i for i, c in enumerate(classes) if c in index], dtype=int)
    labels = np.array([index[classes[i]] for i in rows], dtype=int)
    counts = np.bincount(labels, minlength=len(names)) if len(labels) else np.zeros(len(names), int)
    if (counts >= MIN_PER_CLASS).sum() < 2:
        return None
    X = sp.hstack([sp.csr_matrix(x_sparse)[rows], sp.csr_matrix(cue_block[rows])], format="csr")

    # heavy dependency, imported on use: scikit-learn
    from sklearn.exceptions import ConvergenceWarning

    clf = LogisticRegression(C=CLASS_C, max_iter=MAX_ITER)
    with warnings.catch_warnings():  # stopped early on purpose (MAX_ITER)
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, labels)
    W = np.zeros((X.shape[1], len(names)), dtype=np.float32)
    b = np.full(len(names), -30.0)  # a class absent from the fit is never predicted
    if len(clf.classes_) == 2:  # sklearn's binary case has one column: class 1 against class 0
        W[:, clf.classes_[1]] = clf.coef_[0] / 2
        W[:, clf.classes_[0]] = -clf.coef_[0] / 2
        b[clf.classes_] = [-clf.intercept_[0] / 2, clf.intercept_[0] / 2]
    else:
        W[:, clf.classes_] = clf.coef_.T
        b[clf.classes_] = clf.intercept_
    return W, b


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax (stable)."""
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def class_proba(x_sparse, cue_block: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Predicted class probabilities (n, K) of many requests from their normalised sparse block and cues."""
    n_sparse = W.shape[0] - cue_block.shape[1]
    z = np.asarray(x_sparse @ W[:n_sparse]) + cue_block @ W[n_sparse:] + b
    return softmax(z).astype(np.float32)


def class_proba_plain(sparse_z: list[float], cue_vec: list[float], cue_w: list[list[float]],
                      b: list[float]) -> list[float]:
    """Predicted class probabilities of one request in Python floats (the hot path, `Featurizer.features_one`):
    `sparse_z` its sparse block's class sums, `cue_w` the cue rows of W by class (K lists), `b` the biases."""
    z = [s + sum(map(mul, cue_vec, w)) + bias for s, w, bias in zip(sparse_z, cue_w, b)]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    total = sum(e)
    return [v / total for v in e]
