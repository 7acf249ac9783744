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
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from advisor.errors import RouterError
from advisor.ladder import Ladder
from advisor.router.model.artifact import RouterModel, RungModel
from advisor.router.model.costmodel import fit_cost_model, mdape
from advisor.router.model.features import CUE_NAMES, WINDOW, Featurizer
from advisor.router.training.linear import class_means, class_names, class_rates, fit_linear, rows_for_rung
from advisor.router.training.predictors import FitContext, Fitted, choose_predictor
from advisor.router.training.tuning import tune_default


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
    cost_estimated: np.ndarray | None = None  #: (n, R) fraction of the runs whose cost was estimated at import

    def subset(self, idx: Sequence[int]) -> "TrainingData":
        """The rows `idx` (prompt-level) as a new data set."""
        idx = np.asarray(idx)
        return replace(self, texts=[self.texts[i] for i in idx], classes=[self.classes[i] for i in idx],
                       groups=[self.groups[i] for i in idx], usable=self.usable[idx], runs=self.runs[idx],
                       cost=self.cost[idx], input_tokens=self.input_tokens[idx],
                       cost_estimated=None if self.cost_estimated is None else self.cost_estimated[idx])


def training_data_from_store(store, suite_name: str | None = None, kinds: Sequence[str] = ("probe", "imported"),
                             ladder_name: str | None = None) -> TrainingData:
    """Aggregate the store's scored runs (of one ladder) into prompt-level training data."""
    rows = store.runs(kind=list(kinds), suite_name=suite_name, ladder_name=ladder_name, unscored=False,
                      policy="fixed")  # policy runs (orchestrator, router, cascade) are not rung outcomes
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
    usable_sum, count, cost_sum, est_sum = (np.zeros((n, R)) for _ in range(4))
    for r in rows:
        i, j = keys[r["prompt_hash"] or f"{r['suite_hash']}:{r['task_id']}"], col[r["rung"]]
        usable_sum[i, j] += r["overall"] >= r["bar"]
        count[i, j] += 1
        cost_sum[i, j] += r["cost_usd"]  # a judge's cost is reported apart (design), not routed on
        est_sum[i, j] += bool(r["cost_estimated"])
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.where(count > 0, usable_sum / count, np.nan)
        cost = np.where(count > 0, cost_sum / count, np.nan)
        estimated = np.where(count > 0, est_sum / count, np.nan)
    rungs = []
    for j, name in enumerate(rung_names):
        m = ladder.rung(name) if ladder else None
        pin, pout = m.price.per_token()[:2] if m else (0.0, 0.0)
        rr = [r for r in rows if r["rung"] == name]
        fixed = max(0.0, float(np.mean([r["cost_usd"] - r["input_tokens"] * pin for r in rr])))
        lat = [r["latency_s"] for r in rr if r["latency_s"] and r["latency_s"] > 0]
        rungs.append(RungModel(
            name=name, position=j, usd_per_input_token=pin, fixed_cost_usd=fixed,
            mean_output_tokens=float(np.mean([r["output_tokens"] for r in rr])),
            self_hosted=m.self_hosted if m else True, data_leaves_org=m.data_leaves_org if m else False,
            latency_s=float(np.median(lat)) if lat else None, base_rate=float(np.nanmean(usable[:, j])),
            usd_per_output_token=float(pout)))
    digest = hashlib.sha256("\x1f".join(sorted(r["run_key"] for r in rows)).encode()).hexdigest()
    prov = {"store": str(store.path), "suite_name": suite_name, "run_kinds": list(kinds),
            "ladder_name": next(iter(names)), "ladder_hashes": sorted(ladders), "runs": len(rows), "prompts": n,
            "classes": sorted({c for c in classes if c}), "bar": sorted({r["bar"] for r in rows}),
            "cost_estimated_runs": sum(bool(r["cost_estimated"]) for r in rows),
            "simulated_runs": sum(bool(r["simulated"]) for r in rows), "data_hash": digest}
    return TrainingData(texts_out, classes, groups, rungs, usable, count, cost, np.array(tokens), prov, estimated)


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


def _calibrator(raw: np.ndarray, y: np.ndarray, w: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """A monotone map raw score -> probability as (x, y) knots for np.interp."""
    if len(np.unique(y)) < 2:
        rate = float(y[0]) if len(y) else 0.5
        return np.array([0.0]), np.array([rate])
    if method == "isotonic":
        # heavy dependency, imported on use: scikit-learn
        from sklearn.isotonic import IsotonicRegression

        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y, sample_weight=w)
        return np.asarray(iso.X_thresholds_, float), np.asarray(iso.y_thresholds_, float)
    # heavy dependency, imported on use: scikit-learn
    from sklearn.linear_model import LogisticRegression

    platt = LogisticRegression(C=1e4).fit(raw[:, None], y, sample_weight=w)
    grid = np.linspace(raw.min() - 1.0, raw.max() + 1.0, 256)
    return grid, platt.predict_proba(grid[:, None])[:, 1]


def calibration_metrics(p: np.ndarray, y: np.ndarray, w: np.ndarray, bins: int = 10) -> dict[str, float | None]:
    """AUC, Brier score and expected calibration error (equal-width bins) of weighted binary predictions."""
    # heavy dependency, imported on use: scikit-learn
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


def within_class_auc(p: np.ndarray, y: np.ndarray, w: np.ndarray, classes: Sequence[str | None]) -> float | None:
    """AUC inside each task class, averaged with the classes' weights (classes with one outcome only are left
    out): how well a model ranks requests of the same class, which the class alone cannot do. About 0.5 means
    the text adds nothing beyond the class."""
    # heavy dependency, imported on use: scikit-learn
    from sklearn.metrics import roc_auc_score

    cls = np.array([c or "" for c in classes])
    aucs, weights = [], []
    for c in np.unique(cls):
        m = cls == c
        if len(np.unique(y[m])) == 2:
            aucs.append(roc_auc_score(y[m], p[m], sample_weight=w[m]))
            weights.append(w[m].sum())
    return float(np.average(aucs, weights=weights)) if aucs else None


def training_stats(data: TrainingData) -> dict[str, Any]:
    """Per-rung usable rate and mean cost, overall and per class (what the baselines are built from)."""
    rate = np.nanmean(data.usable, axis=0)
    cls = np.array([c or "" for c in data.classes])
    return {"rung_rate": [float(x) for x in rate],
            "rung_mean_cost": [float(x) for x in np.nanmean(data.cost, axis=0)],
            "class_rates": {c: [float(x) if not np.isnan(x) else None
                                for x in np.nanmean(data.usable[cls == c], axis=0)] for c in sorted(set(cls))}}


AUC_FLOOR = 0.55  #: below this cross-validated AUC a rung's model has no signal: class-level rate instead


def fit_router(data: TrainingData, C: float = 1.0, calibration: str = "auto", folds: int = 5, seed: int = 0,
               use_embeddings: bool = False, n_hash: int = 2 ** 16, tune: bool = True,
               stack: bool = True, predict_classes: bool = True,
               window: tuple[int, int] | None = WINDOW, predictors: Sequence[str] | None = None) -> RouterModel:
    """Train the per-rung calibrated models and the cost model on `data` (see the module docstring); with
    `tune`, choose the default operating point and the chain dependence on out-of-fold predictions; with
    `predict_classes`, the featuriser carries a class model for requests without a class (`classpred.py`);
    `window`: the (head, tail) characters of a long prompt the features read (`features.text_window`; None:
    the whole text); `predictors`: the candidate probability models to choose among in cross-validation
    (`predictors.py`; default every registered one)."""
    # heavy dependency, imported on use: scipy
    import scipy.sparse as sp

    if len(data.texts) < 2 * folds:
        raise RouterError(f"too little data to train a router: {len(data.texts)} prompts (need {2 * folds}+)")
    feat = Featurizer(n_hash=n_hash, use_embeddings=use_embeddings,
                      predict_classes=predict_classes, window=window).fit(data.texts, data.classes)
    xs, xd = feat.transform(data.texts, data.classes)
    X = sp.hstack([xs, sp.csr_matrix(xd)], format="csr")
    n, R = len(data.texts), len(data.rungs)
    W = np.zeros((feat.n_sparse + feat.n_dense, R), dtype=np.float32)
    bias = np.zeros(R)
    cx, cy, metrics, fallback = [], [], {}, []
    cv = grouped_folds(data.groups, folds, seed)
    P_oof = np.full((n, R), np.nan)
    base = feat.n_sparse + len(CUE_NAMES)
    for j, rung in enumerate(data.rungs):
        rows, y, w = rows_for_rung(data.usable, data.runs, j)
        method = calibration if calibration != "auto" else ("isotonic" if len(rows) >= 400 else "sigmoid")
        raw_oof = np.zeros(len(rows))
        fold_of_row = np.zeros(len(rows), dtype=int)
        for f, (_, test_prompts) in enumerate(cv):
            in_test = np.isin(rows, test_prompts)
            fold_of_row[in_test] = f
            coef, b = fit_linear(X[rows[~in_test]], y[~in_test], w[~in_test], C, seed)
            raw_oof[in_test] = (X[rows[in_test]] @ coef + b) if coef is not None else b
        p_oof = np.zeros(len(rows))
        for f in range(folds):  # cross-fitted calibration for honest metrics
            m = fold_of_row == f
            kx, ky = _calibrator(raw_oof[~m], y[~m], w[~m], method)
            p_oof[m] = np.interp(raw_oof[m], kx, ky)
        metrics[rung.name] = {**calibration_metrics(p_oof, y, w), "calibration": method,
                              "auc_within_class": within_class_auc(p_oof, y, w, [data.classes[i] for i in rows])}
        auc = metrics[rung.name]["auc"]
        if auc is not None and auc < AUC_FLOOR:
            # no signal: the class-level rate (out of fold for the metrics, all data for the artifact)
            fallback.append(rung.name)
            warnings.warn(f"rung {rung.name!r}: its probe runs do not show which prompts it answers well (no "
                          f"signal: cross-validated AUC {auc:.2f} < {AUC_FLOOR}), so it is routed on its usable rate "
                          "per task class; this is normal for a small probe", stacklevel=2)
            cls_of = np.array([feat.classes.index(c) if c in feat.classes else -1 for c in data.classes])
            for f, (train_prompts, test_prompts) in enumerate(cv):
                rates = class_rates(data.usable[train_prompts], [data.classes[i] for i in train_prompts],
                                     feat.classes, j)
                P_oof[test_prompts, j] = np.where(cls_of[test_prompts] >= 0, rates[cls_of[test_prompts]],
                                                  float(np.mean(rates)) if len(rates) else 0.5)
            m2 = np.isfinite(data.usable[:, j])
            P_oof[~m2, j] = np.nan
            metrics[rung.name]["fallback"] = "class-level rate (AUC below %.2f)" % AUC_FLOOR
            rates = class_rates(data.usable, data.classes, feat.classes, j)
            W[base: base + len(feat.classes), j] = np.log(rates / (1 - rates))
            grid = np.linspace(-12.0, 12.0, 97)
            cx.append(grid)
            cy.append(1.0 / (1.0 + np.exp(-grid)))
            continue
        P_oof[rows, j] = p_oof
        kx, ky = _calibrator(raw_oof, y, w, method)
        coef, b = fit_linear(X[rows], y, w, C, seed)
        if coef is not None:
            W[:, j] = coef
        bias[j] = b
        cx.append(kx)
        cy.append(ky)
    # the per-request cost model, with its cross-validated error
    n_cost = len(CUE_NAMES) + len(feat.classes) + 1
    chars = np.array([len(t) for t in data.texts], float)
    pin = np.array([r.usd_per_input_token for r in data.rungs])
    C_oof = np.zeros((n, R))
    for train_prompts, test_prompts in cv:
        cm = fit_cost_model(chars[train_prompts], data.input_tokens[train_prompts], data.cost[train_prompts], pin,
                            xd[train_prompts, :n_cost])
        C_oof[test_prompts] = cm.predict(chars[test_prompts], xd[test_prompts, :n_cost])
    cost_model = fit_cost_model(chars, data.input_tokens, data.cost, pin, xd[:, :n_cost])
    errors = mdape(C_oof, data.cost)
    est = (np.nanmean(data.cost_estimated, axis=0) if data.cost_estimated is not None else np.full(R, np.nan))
    for j, rung in enumerate(data.rungs):
        metrics[rung.name]["cost_mdape"] = errors[j]
        metrics[rung.name]["cost_estimated_share"] = None if np.isnan(est[j]) else float(est[j])
    stack_w = stack_b = None
    if stack:
        stack_w, stack_b, P_oof = _fit_stack(P_oof, xd[:, len(CUE_NAMES): n_cost], data, cv, C, seed, metrics)
    router = Fitted(W, bias, cx, cy, stack_w, stack_b, P_oof)
    chosen, fitted, choice = choose_predictor(FitContext(data, X, feat, cv, C, seed, router=router), C_oof, predictors)
    W, bias, cx, cy = fitted.w, fitted.bias, fitted.calib_x, fitted.calib_y
    stack_w, stack_b, P_oof = fitted.stack_w, fitted.stack_b, fitted.p_oof
    stats = training_stats(data)
    aucs = [m["auc"] for m in metrics.values() if m["auc"] is not None]
    summary = {"macro_auc": float(np.mean(aucs)) if aucs else None,
               "macro_brier": float(np.mean([m["brier"] for m in metrics.values()])),
               "macro_ece": float(np.mean([m["ece"] for m in metrics.values()]))}
    model = RouterModel(
        featurizer=feat, rungs=list(data.rungs), w_sparse=W[: feat.n_sparse], w_dense=W[feat.n_sparse:],
        bias=bias, calib_x=cx, calib_y=cy, cost_model=cost_model, stack_w=stack_w, stack_b=stack_b,
        provenance=dict(data.provenance),
        metrics={"per_rung": metrics, **summary, "how": f"{folds}-fold CV grouped by prompt; out-of-fold "
                 "probabilities with cross-fitted calibration; cost error = median absolute percentage error "
                 "of the out-of-fold predicted attempt cost (per-rung figures: the router candidate)",
                 "fallback_rungs": fallback, "predictor": choice},
        training={"stats": stats, "predictor": choice, "model": (
                      "L2 logistic regression per rung (liblinear)"
                      + (" + a second stage across rungs (stacked logits and class)" if stack else "")
                      if chosen == "router" else choice["description"]), "C": C, "calibration": calibration,
                  "folds": folds, "seed": seed, "features": {"sparse": feat.n_sparse,
                                                             "dense": feat.dense_names()[:40]}})
    if tune:
        tune_default(model, data, P_oof, C_oof)
    return model


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _impute_by_class(P: np.ndarray, classes: Sequence[str | None]) -> np.ndarray:
    """P with each missing (prompt, rung) cell set to the rung's mean out-of-fold P over the prompt's class.

    Live outcomes only hold the rungs a chain tried (a rung after an accepted attempt is never tried), so
    dropping prompts with a missing rung would keep only the rejected first attempts and bias the second stage;
    the class mean carries no label of the prompt itself."""
    out = P.copy()
    cls = class_names(classes)
    for j in range(P.shape[1]):
        miss = ~np.isfinite(P[:, j])
        if miss.any():
            means, overall = class_means(P[:, j], cls)
            out[miss, j] = [means.get(c, overall) for c in cls[miss]]
    return out


def _fit_stack(P_oof: np.ndarray, onehot: np.ndarray, data: TrainingData, cv, C: float, seed: int, metrics: dict):
    """Second stage sharing strength across rungs: per rung, a logistic regression on every rung's out-of-fold
    logit and the class one-hot (a request hard for one rung tends to be hard for the others). Returns the
    weights (R + n_class, R), biases (R,) and the second stage's out-of-fold probabilities; metrics per rung
    are replaced by the second stage's (`stacked: true`)."""
    n, R = P_oof.shape
    Z = np.hstack([_logit(_impute_by_class(P_oof, data.classes)), onehot])
    W, b = np.zeros((Z.shape[1], R)), np.zeros(R)
    out = np.full_like(P_oof, np.nan)
    for j, rung in enumerate(data.rungs):
        rows, y, w = rows_for_rung(data.usable, data.runs, j)
        p2 = np.zeros(len(rows))
        for _, test_prompts in cv:
            m = np.isin(rows, test_prompts)
            coef, bb = fit_linear(Z[rows[~m]], y[~m], w[~m], C, seed)
            p2[m] = 1 / (1 + np.exp(-((Z[rows[m]] @ coef + bb) if coef is not None else bb)))
        out[rows, j] = p2
        metrics[rung.name].update({**calibration_metrics(p2, y, w), "stacked": True,
                                   "auc_within_class": within_class_auc(p2, y, w, [data.classes[i] for i in rows])})
        coef, bb = fit_linear(Z[rows], y, w, C, seed)
        if coef is not None:
            W[:, j] = coef
        b[j] = bb
    return W, b, out
