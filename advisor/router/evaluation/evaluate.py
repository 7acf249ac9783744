"""Offline evaluation of the router on held-out prompts: realised cost and quality of every policy.

Held-out data: grouped K-fold by prompt over the store (a router and the baseline are trained per fold and
judged on prompts they never saw), or an artifact judged on a separately imported file. Realised outcomes come
from the recorded results: quality = the recorded usable fraction (0/1 for one recorded answer), cost = the
recorded (or import-estimated) cost. In escalation mode a chain's realised cost and quality come from the
recorded outcomes of its rungs and the verifier's error rates (`rule.realised_outcome`; a retry on the same
rung repeats the recorded answer).

Policies, all through `policies.POLICIES`: the router's **default** (the operating point chosen in CV at
training), its value rule swept (``router_value``), the plain per-rung rule argmax P - lambda x predicted cost
with the same predictor and costs swept (``router_rung``) and its target rule swept (``router``), the tf-idf logistic
**baseline** (argmax P - lambda x mean cost, lambda swept; fitted on the same training folds), the
cheapest-first **cascade**, every single rung, the per-class floor (target swept), the threshold router,
random and the per-request oracle (cheapest rung with the best recorded outcome). `metrics.summarise` turns
the outcomes into curves, AIQ, parity and paired bootstrap intervals.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from advisor.errors import RouterError
from advisor.router.evaluation.metrics import plot, summarise, write_summary  # noqa: F401  (re-exported)
from advisor.router.model.artifact import RouterModel
from advisor.router.routing.policies import Requests, make_policy, predicted_outcome
from advisor.router.routing.route import context
from advisor.router.routing.rule import PolicyConfig, realised_outcome
from advisor.router.training.baseline import TfidfLogistic
from advisor.router.training.fit import TrainingData, fit_router, grouped_folds
from advisor.router.training.tuning import value_grid

TARGETS = np.round(np.linspace(0.0, 1.0, 41), 3)


def fold_outcomes(model: RouterModel, test: TrainingData, config: PolicyConfig, baseline=None,
                  values: np.ndarray | None = None) -> dict[tuple, dict]:
    """Per (policy, parameter): realised cost and quality and predicted P(usable) arrays on `test` (`values`:
    the values of a usable result swept, the same for every fold)."""
    Y, C = test.usable, test.cost
    n, R = Y.shape
    names = model.rung_names
    batch = Requests.score(model, test.texts, test.classes)
    ctx = context(model, config, baseline=baseline)
    out: dict[tuple, dict] = {}

    def run(key: tuple, name: str, c: Any = ctx, **params: Any) -> None:
        choice = make_policy(name, c, **params).decide(batch)
        cost, qual = realised_outcome(Y, C, choice.chains, c.config)
        out[key] = {"cost": cost, "quality": qual, "predicted": choice.p_usable}
        if key[0] == "default" and c.config.mode == "escalate":
            out[key]["predicted_independent"] = predicted_outcome(
                batch.P, batch.C, choice.chains, replace(c, config=replace(c.config, dependence=0.0)))[1]

    if model.default:
        run(("default", 0.0), "default")
    if values is None:
        values = value_grid(np.array(model.training["stats"]["rung_mean_cost"], float))
    for v in values:
        run(("router_value", float(v)), "router", value_usd=float(v))
        run(("router_rung", float(v)), "rung_value", value_usd=float(v))
        if baseline is not None:
            run(("baseline", float(v)), "baseline", value_usd=float(v))
    for t in TARGETS:
        run(("router", float(t)), "router", target=float(t))
        run(("class_floor", float(t)), "class_floor", target=float(t))
        run(("threshold", float(t)), "threshold", threshold=float(t))
    if config.mode == "escalate":
        run(("cascade", 0.0), "cascade")
        if config.order == "ladder":
            alt = replace(ctx, config=replace(ctx.config, order="probability"))
            for t in TARGETS:
                run(("router_prob_order", float(t)), "router", c=alt, target=float(t))
    alone = replace(ctx, config=replace(ctx.config, max_chain=1))
    for name in names:
        run(("rung", name), "always", c=alone, rung=name)
    out[("random", 0.0)] = {k: np.mean([out[("rung", m)][k] for m in names], axis=0)
                            for k in ("cost", "quality", "predicted")}
    best = Y.max(axis=1)
    o = np.where(Y >= best[:, None], C, np.inf).argmin(axis=1)
    out[("oracle", 0.0)] = {"cost": C[np.arange(n), o], "quality": Y[np.arange(n), o],
                            "predicted": np.full(n, np.nan)}
    return out


def _merge(into: dict, part: dict) -> None:
    for key, arrays in part.items():
        prev = into.get(key)
        into[key] = dict(arrays) if prev is None else {k: np.concatenate([prev[k], v]) for k, v in arrays.items()}


def _complete(data: TrainingData) -> tuple[TrainingData, int]:
    keep = ~np.isnan(data.usable).any(axis=1) & ~np.isnan(data.cost).any(axis=1)
    return data.subset(np.flatnonzero(keep)), int((~keep).sum())


def cross_validate(data: TrainingData, config_single: PolicyConfig, config_escalate: PolicyConfig, folds: int = 5,
                   seed: int = 0, fit_kwargs: dict | None = None, progress: Callable[[str], None] | None = None,
                   with_baseline: bool = True, hide_test_classes: bool = False) -> dict[str, Any]:
    """Grouped K-fold: train a router (and the baseline) per fold, collect every policy's realised outcomes.
    With `hide_test_classes`, the held-out requests come without their class (every policy sees None), which
    measures routing of requests without a class (class prediction, `classpred.py`)."""
    data, dropped = _complete(data)
    merged: dict[str, dict] = {"single": {}, "escalate": {}}
    metrics = []
    values = value_grid(np.nanmean(data.cost, axis=0))
    for f, (train_idx, test_idx) in enumerate(grouped_folds(data.groups, folds, seed)):
        assert not set(data.groups[i] for i in train_idx) & set(data.groups[i] for i in test_idx)
        train = data.subset(train_idx)
        model = fit_router(train, seed=seed, **{"folds": 3, **(fit_kwargs or {})})
        metrics.append(model.metrics)
        baseline = TfidfLogistic().fit(train) if with_baseline else None
        test = data.subset(test_idx)
        if hide_test_classes:
            test = replace(test, classes=[None] * len(test.texts))
        for mode, cfg in (("single", config_single), ("escalate", config_escalate)):
            _merge(merged[mode], fold_outcomes(model, test, cfg, baseline, values))
        if progress:
            progress(f"fold {f + 1}/{folds} done")
    return {"outcomes": merged, "prompts": len(data.texts), "dropped_incomplete": dropped,
            "rungs": [r.name for r in data.rungs], "fold_metrics": metrics,
            "simulated": bool(data.provenance.get("simulated_runs")),
            "how": f"{folds}-fold CV grouped by prompt" + ("; test requests without their class"
                                                           if hide_test_classes else "")}


def evaluate_artifact(model: RouterModel, test: TrainingData, config_single: PolicyConfig,
                      config_escalate: PolicyConfig, baseline_folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Judge a trained artifact on separately imported held-out data (no retraining of the router); same shape
    as `cross_validate`'s result. Rungs are matched by name; prompts missing a rung are dropped. The baseline,
    which has no artifact, is fitted by grouped K-fold on the held-out file itself (which favours it)."""
    names = [r.name for r in test.rungs]
    missing = [n for n in model.rung_names if n not in names]
    if missing:
        raise RouterError(f"the held-out data has no runs for rungs {', '.join(missing)} of the router")
    order = [names.index(n) for n in model.rung_names]
    test = replace(test, usable=test.usable[:, order], cost=test.cost[:, order], runs=test.runs[:, order],
                   rungs=[test.rungs[i] for i in order],
                   cost_estimated=None if test.cost_estimated is None else test.cost_estimated[:, order])
    data, dropped = _complete(test)
    merged: dict[str, dict] = {"single": {}, "escalate": {}}
    k = min(baseline_folds, len(set(data.groups)))
    values = value_grid(np.array(model.training["stats"]["rung_mean_cost"], float))
    for train_idx, test_idx in grouped_folds(data.groups, k, seed):
        baseline = TfidfLogistic().fit(data.subset(train_idx))
        part = data.subset(test_idx)
        for mode, cfg in (("single", config_single), ("escalate", config_escalate)):
            _merge(merged[mode], fold_outcomes(model, part, cfg, baseline, values))
    return {"outcomes": merged, "prompts": len(data.texts), "dropped_incomplete": dropped,
            "rungs": model.rung_names, "simulated": model.simulated or bool(data.provenance.get("simulated_runs")),
            "how": f"artifact judged on held-out data; baseline fitted by {k}-fold CV on that data"}
