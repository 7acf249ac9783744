"""Routers for decisions on the data they were trained from: one fitted on everything, and cross-fitted ones.

A policy evaluated on the tasks its router was trained on is judged in-sample; `crossfitted` gives, per grouped
fold of prompts, a router trained without that fold, so each prompt can be decided by a router that never saw
it (the probe's ``router`` policy runs, `advisor.probe.chain`). `fit_quietly` is the fit both use: inner folds
scaled to the data's size, sklearn's convergence chatter silenced (a small probe leaves some rungs without
signal, which the router states itself).
"""

from __future__ import annotations

import warnings
from typing import Any

from advisor.router.training.fit import TrainingData, fit_router, grouped_folds


def fit_quietly(data: TrainingData) -> Any:
    """A router fitted on `data` (inner folds: half the examples, between 2 and 5)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_router(data, folds=max(2, min(5, len(data.texts) // 2)))


def crossfitted(data: TrainingData, folds: int = 5, seed: int = 0) -> list[tuple[set[str], Any]]:
    """Per grouped fold of `data`'s prompt groups: (the groups held out, a router fitted without them)."""
    out = []
    for train, test in grouped_folds(data.groups, folds, seed=seed):
        out.append(({data.groups[i] for i in test}, fit_quietly(data.subset(train))))
    return out
