"""Training the router from the store: per rung, a calibrated probability that a request's answer is usable.

Data: runs (probe and imported) of one suite, aggregated per prompt x rung into a usable fraction (unscored
runs are left out, never counted as failures). Model: per rung an L2 logistic regression on the request
features (`features.py`), task class included when known. Calibration: out-of-fold raw scores from a
**grouped** K-fold (by prompt hash, so one prompt never sits on both sides) are mapped to probabilities by
isotonic regression (sigmoid/Platt when a rung has fewer than 400 examples). Metrics (AUC, Brier score,
expected calibration error) are computed on out-of-fold predictions whose calibration map was fitted on the
other folds (cross-fitted, so not optimistic).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from advisor.errors import RouterError
from advisor.router.artifact import RouterModel, RungModel
from advisor.router.features import Featurizer


@dataclass
class TrainingData:
    """Prompt-level outcomes: one row per prompt, one column per rung (NaN where a rung has no run)."""

    texts: list[str]
    classes: list[str | None]
    groups: list[str]  #: prompt hash (or task id): the unit grouped CV keeps on one side
    rungs: list[RungModel]
    usable: np.ndarray  #: (n, R) fraction of scored runs that were usable
    runs: np.ndarray  #: (n, R) number of scored runs
    cost: np.ndarray  #: (n, R) mean recorded or estimated cost per attempt (USD)
    input_tokens: np.ndarray  #: (n,) input tokens of the prompt
    provenance: dict[str, Any] = field(default_factory=dict)

    def subset(self, idx: Sequence[int]) -> "TrainingData":
        """The rows `idx` (prompt-level) as a new data set."""
        idx = np.asarray(idx)
        return replace(self, texts=[self.texts[i] for i in idx], classes=[self.classes[i] for i in idx],
                       groups=[self.groups[i] for i in idx], usable=self.usable[idx], runs=self.runs[idx],
                       cost=self.cost[idx], input_tokens=self.input_tokens[idx])


def training_data_from_store(store, suite_name: str | None = None, kinds: Sequence[str] = ("probe", "imported"),
                             ladder_name: str | None = None) -> TrainingData:
    """Aggregate the store's scored runs (of one ladder) into prompt-level training data."""
    from advisor.ladder import Ladder

    rows = store.runs(kind=list(kinds), suite_name=suite_name, ladder_name=ladder_name, unscored=False)
    rows = [r for r in rows if r["overall"] is not None]
    if not rows:
        raise RouterError(f"no scored runs in {store.path}" + (f" for suite {suite_name!r}" if suite_name else "")
                          + " (import recorded results with `advisor import` or run `advisor probe`)")
    ladders = {r["ladder_hash"] for r in rows}
    names = {r["ladder_name"] for r in rows}
    if len(names) > 1:
        raise RouterError(f"runs from several ladders ({', '.join(sorted(names))}); pick one with --ladder-name")
    config = None
    for h in ladders:
        config = store.ladder_config(h) or config
    ladder = Ladder.model_validate(config) if config else None
    texts = store.prompt_texts(r["prompt_hash"] for r in rows if r["prompt_hash"])
    rung_names = ([m.name for m in ladder.rungs] if ladder else
                  sorted({r["rung"] for r in rows}, key=lambda n: min(x["rung_position"] for x in rows if x["rung"] == n)))
    rung_names = [n for n in rung_names if any(r["rung"] == n for r in rows)]
    col = {n: j for j, n in enumerate(rung_names)}
    keys: dict[str, int] = {}
    texts_out, classes, groups, tokens = [], [], [], []
    for r in rows:
        key = r["prompt_hash"] or f"{r['suite_hash']}:{r['task_id']}"
        if key not in keys:
            keys[key] = len(keys)
            texts_out.append(texts.get(r["prompt_hash"], "") if r["prompt_hash"] else "")
            classes.append(r["task_class"])
            groups.append(key)
            tokens.append(float(r["input_tokens"]))
    n, R = len(keys), len(rung_names)
    usable_sum, count, cost_sum = np.zeros((n, R)), np.zeros((n, R)), np.zeros((n, R))
    for r in rows:
        i, j = keys[r["prompt_hash"] or f"{r['suite_hash']}:{r['task_id']}"], col[r["rung"]]
        usable_sum[i, j] += r["overall"] >= r["bar"]
        count[i, j] += 1
        cost_sum[i, j] += r["cost_usd"]  # a judge's cost is reported apart (design), not routed on
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.where(count > 0, usable_sum / count, np.nan)
        cost = np.where(count > 0, cost_sum / count, np.nan)
    rungs = []
    for j, name in enumerate(rung_names):
        m = ladder.rung(name) if ladder else None
        pin = m.price.per_token()[0] if m else 0.0
        rr = [r for r in rows if r["rung"] == name]
        fixed = max(0.0, float(np.mean([r["cost_usd"] - r["input_tokens"] * pin for r in rr])))
        lat = [r["latency_s"] for r in rr if r["latency_s"] and r["latency_s"] > 0]
        rungs.append(RungModel(
            name=name, position=j, usd_per_input_token=pin, fixed_cost_usd=fixed,
            mean_output_tokens=float(np.mean([r["output_tokens"] for r in rr])),
            self_hosted=m.self_hosted if m else True, data_leaves_org=m.data_leaves_org if m else False,
            latency_s=float(np.median(lat)) if lat else None, base_rate=float(np.nanmean(usable[:, j]))))
    digest = hashlib.sha256("\x1f".join(sorted(r["run_key"] for r in rows)).encode()).hexdigest()
    prov = {"store": str(store.path), "suite_name": suite_name, "run_kinds": list(kinds),
            "ladder_name": next(iter(names)), "ladder_hashes": sorted(ladders), "runs": len(rows), "prompts": n,
            "classes": sorted({c for c in classes if c}), "bar": sorted({r["bar"] for r in rows}),
            "cost_estimated_runs": sum(bool(r["cost_estimated"]) for r in rows),
            "simulated_runs": sum(bool(r["simulated"]) for r in rows), "data_hash": digest}
    return TrainingData(texts_out, classes, groups, rungs, usable, count, cost, np.array(tokens), prov)


def grouped_folds(groups: Sequence[str], n_folds: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds of row indices such that every group (prompt) falls wholly in one test fold."""
    uniq = sorted(set(groups))
    if len(uniq) < n_folds:
        raise RouterError(f"grouped cross-validation needs at least {n_folds} distinct prompts, got {len(uniq)}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(uniq))
    fold_of = {uniq[g]: i % n_folds for i, g in enumerate(order)}
    assign = np.array([fold_of[g] for g in groups])
    return [(np.flatnonzero(assign != f), np.flatnonzero(assign == f)) for f in range(n_folds)]


def _rows_for_rung(usable: np.ndarray, runs: np.ndarray, j: int):
    """Binary rows (index, label, weight) for rung j; fractional outcomes become two weighted rows."""
    ok = ~np.isnan(usable[:, j])
    idx = np.flatnonzero(ok)
    f, n = usable[idx, j], runs[idx, j]
    pos, neg = f > 0, f < 1
    rows = np.concatenate([idx[pos], idx[neg]])
    y = np.concatenate([np.ones(pos.sum()), np.zeros(neg.sum())])
    w = np.concatenate([(f * n)[pos], ((1 - f) * n)[neg]])
    return rows, y, w


def _fit_linear(X, y, w, C: float, seed: int):
    from sklearn.linear_model import LogisticRegression

    if len(np.unique(y)) < 2:
        return None, (10.0 if y[0] == 1 else -10.0)
    clf = LogisticRegression(C=C, solver="liblinear", max_iter=300, random_state=seed)
    clf.fit(X, y, sample_weight=w)
    return clf.coef_.ravel(), float(clf.intercept_[0])


def _calibrator(raw: np.ndarray, y: np.ndarray, w: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """A monotone map raw score -> probability as (x, y) knots for np.interp."""
    if len(np.unique(y)) < 2:
        rate = float(y[0]) if len(y) else 0.5
        return np.array([0.0]), np.array([rate])
    if method == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y, sample_weight=w)
        return np.asarray(iso.X_thresholds_, float), np.asarray(iso.y_thresholds_, float)
    from sklearn.linear_model import LogisticRegression

    platt = LogisticRegression(C=1e4).fit(raw[:, None], y, sample_weight=w)
    grid = np.linspace(raw.min() - 1.0, raw.max() + 1.0, 256)
    return grid, platt.predict_proba(grid[:, None])[:, 1]


def calibration_metrics(p: np.ndarray, y: np.ndarray, w: np.ndarray, bins: int = 10) -> dict[str, float | None]:
    """AUC, Brier score and expected calibration error (equal-width bins) of weighted binary predictions."""
    from sklearn.metrics import roc_auc_score

    auc = float(roc_auc_score(y, p, sample_weight=w)) if len(np.unique(y)) == 2 else None
    brier = float(np.average((p - y) ** 2, weights=w))
    which = np.minimum((p * bins).astype(int), bins - 1)
    ece = 0.0
    for b in range(bins):
        m = which == b
        if m.any():
            ece += w[m].sum() / w.sum() * abs(np.average(p[m], weights=w[m]) - np.average(y[m], weights=w[m]))
    return {"auc": auc, "brier": brier, "ece": float(ece), "n": int(len(y)), "positive_rate":
            float(np.average(y, weights=w))}


def training_stats(data: TrainingData) -> dict[str, Any]:
    """Per-rung usable rate and mean cost, overall and per class (what the baselines are built from)."""
    rate = np.nanmean(data.usable, axis=0)
    cls = np.array([c or "" for c in data.classes])
    return {"rung_rate": [float(x) for x in rate],
            "rung_mean_cost": [float(x) for x in np.nanmean(data.cost, axis=0)],
            "class_rates": {c: [float(x) if not np.isnan(x) else None
                                for x in np.nanmean(data.usable[cls == c], axis=0)] for c in sorted(set(cls))}}


def fit_router(data: TrainingData, C: float = 1.0, calibration: str = "auto", folds: int = 5, seed: int = 0,
               use_embeddings: bool = False, n_hash: int = 2 ** 16) -> RouterModel:
    """Train the per-rung calibrated models on `data` (see the module docstring)."""
    import scipy.sparse as sp

    if len(data.texts) < 2 * folds:
        raise RouterError(f"too little data to train a router: {len(data.texts)} prompts (need {2 * folds}+)")
    feat = Featurizer(n_hash=n_hash, use_embeddings=use_embeddings).fit(data.texts, data.classes)
    xs, xd = feat.transform(data.texts, data.classes)
    X = sp.hstack([xs, sp.csr_matrix(xd)], format="csr")
    R = len(data.rungs)
    W = np.zeros((feat.n_sparse + feat.n_dense, R), dtype=np.float32)
    bias = np.zeros(R)
    cx, cy, metrics = [], [], {}
    cv = grouped_folds(data.groups, folds, seed)
    for j, rung in enumerate(data.rungs):
        rows, y, w = _rows_for_rung(data.usable, data.runs, j)
        method = calibration if calibration != "auto" else ("isotonic" if len(rows) >= 400 else "sigmoid")
        raw_oof = np.zeros(len(rows))
        fold_of_row = np.zeros(len(rows), dtype=int)
        for f, (_, test_prompts) in enumerate(cv):
            in_test = np.isin(rows, test_prompts)
            fold_of_row[in_test] = f
            coef, b = _fit_linear(X[rows[~in_test]], y[~in_test], w[~in_test], C, seed)
            raw_oof[in_test] = (X[rows[in_test]] @ coef + b) if coef is not None else b
        p_oof = np.zeros(len(rows))
        for f in range(folds):  # cross-fitted calibration for honest metrics
            m = fold_of_row == f
            kx, ky = _calibrator(raw_oof[~m], y[~m], w[~m], method)
            p_oof[m] = np.interp(raw_oof[m], kx, ky)
        metrics[rung.name] = {**calibration_metrics(p_oof, y, w), "calibration": method}
        kx, ky = _calibrator(raw_oof, y, w, method)
        coef, b = _fit_linear(X[rows], y, w, C, seed)
        if coef is not None:
            W[:, j] = coef
        bias[j] = b
        cx.append(kx)
        cy.append(ky)
    stats = training_stats(data)
    aucs = [m["auc"] for m in metrics.values() if m["auc"] is not None]
    summary = {"macro_auc": float(np.mean(aucs)) if aucs else None,
               "macro_brier": float(np.mean([m["brier"] for m in metrics.values()])),
               "macro_ece": float(np.mean([m["ece"] for m in metrics.values()]))}
    return RouterModel(
        featurizer=feat, rungs=list(data.rungs), w_sparse=W[: feat.n_sparse], w_dense=W[feat.n_sparse:],
        bias=bias, calib_x=cx, calib_y=cy, provenance=dict(data.provenance),
        metrics={"per_rung": metrics, **summary, "how": f"{folds}-fold CV grouped by prompt; out-of-fold "
                 "probabilities with cross-fitted calibration"},
        training={"stats": stats, "model": "L2 logistic regression per rung (liblinear)", "C": C, "calibration": calibration,
                  "folds": folds, "seed": seed, "features": {"sparse": feat.n_sparse,
                                                             "dense": feat.dense_names()[:40]}})
