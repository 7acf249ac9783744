"""Offline evaluation of the router on held-out prompts: cost-quality curves against baselines.

Held-out data: grouped K-fold by prompt over the store (a router is trained per fold and judged on prompts it
never saw), or an artifact judged on a separately imported file. Realised outcomes come from the recorded
results: quality = the recorded usable fraction of the answer (0/1 for one recorded answer), cost = the
recorded (or estimated, see the import) cost. In escalation mode the chain's expected cost and quality are
computed with `chain_outcome_batch` from those recorded outcomes and the verifier's error rates (with one
recorded answer per prompt x rung, a retry on the same rung repeats that outcome, so k > 1 only matters for
fractional outcomes).

Policies: the router (sweeping its P(usable) target; `router_value`: sweeping the stated value of a usable
result instead), every single rung, always-largest, always-smallest,
random (uniform over rungs, in expectation), per-class floor (per class the cheapest rung whose training usable
rate reaches a target, swept), a RouteLLM-style threshold router (weak = cheapest rung, strong = best rung on
training data; weak when the router's calibrated P(usable | weak) >= threshold, swept), and the per-request
oracle (cheapest rung with the best recorded outcome). Summary figures: area under the non-decreasing
cost-quality curve over the single rungs' cost range (AIQ, linear between points, normalised), cost at quality
parity with the best and the largest single rung, and the gap to the oracle.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from advisor.router.artifact import RouterModel
from advisor.router.policy import (PolicyConfig, RungFacts, candidate_table, chain_outcome_batch, chosen_chains,
                                   select)
from advisor.router.train import TrainingData, fit_router, grouped_folds

TARGETS = np.round(np.linspace(0.0, 1.0, 41), 3)
#: values of a usable result (USD) swept for the `router_value` curve
VALUES = np.concatenate([[0.0], np.logspace(-6, -1, 51)])


def _facts(model: RouterModel) -> list[RungFacts]:
    return [RungFacts(r.name, r.self_hosted, r.latency_s) for r in model.rungs]


def _realise(Y: np.ndarray, C: np.ndarray, chains: np.ndarray, config: PolicyConfig, names: Sequence[str]):
    """Realised (cost, quality) per request of the chain (rung indices, -1 padded) chosen for each request."""
    valid = chains >= 0
    idx = np.where(valid, chains, 0)
    rows = np.arange(len(Y))[:, None]
    if config.mode == "single":
        return C[rows[:, 0], idx[:, 0]], Y[rows[:, 0], idx[:, 0]]
    k = config.k if isinstance(config.k, int) else 1  # per-rung k would need per-position k; uniform here
    ks = [k] * chains.shape[1]
    return chain_outcome_batch(Y[rows, idx], C[rows, idx], ks, config.verifier, valid)


def _fixed_chain(start: int, R: int, config: PolicyConfig, n: int) -> np.ndarray:
    L = 1 if config.mode == "single" else config.max_chain
    chain = [start, *range(start + 1, R)][:L]
    out = -np.ones((n, L), dtype=int)
    out[:, : len(chain)] = chain
    return out


def fold_outcomes(model: RouterModel, test: TrainingData, config: PolicyConfig, seed: int = 0) -> dict[str, Any]:
    """Realised per-request (cost, quality) arrays of every policy on `test`, for one trained router."""
    Y, C = test.usable, test.cost
    n, R = Y.shape
    names = model.rung_names
    P = model.predict(test.texts, test.classes)
    Cp = model.attempt_costs(test.texts)
    out: dict[str, Any] = {}
    table = candidate_table(P, Cp, _facts(model), config)
    for t in TARGETS:
        pick = select(table, float(t))
        out[("router", float(t))] = _realise(Y, C, chosen_chains(table, pick), config, names)
    table = candidate_table(P, Cp, _facts(model), config)
    for v in VALUES:  # the same router with a stated value of a usable result instead of a target
        pick = select(table, 0.0, float(v))
        out[("router_value", float(v))] = _realise(Y, C, chosen_chains(table, pick), config, names)
    if config.mode == "escalate" and config.order == "ladder":  # the same router, escalating by probability
        alt = replace(config, order="probability")
        table = candidate_table(P, Cp, _facts(model), alt)
        for t in TARGETS:
            pick = select(table, float(t))
            out[("router_prob_order", float(t))] = _realise(Y, C, chosen_chains(table, pick), alt, names)
    alone = replace(config, max_chain=1)  # a single rung on its own (retried up to k times with a verifier)
    for j, name in enumerate(names):
        out[("rung", name)] = _realise(Y, C, _fixed_chain(j, R, alone, n), alone, names)
    out[("always_smallest", 0.0)] = out[("rung", names[0])]
    out[("always_largest", 0.0)] = out[("rung", names[-1])]
    if config.mode == "escalate":
        out[("smallest_escalating", 0.0)] = _realise(Y, C, _fixed_chain(0, R, config, n), config, names)
    costs_all = np.stack([out[("rung", nm)][0] for nm in names])
    quals_all = np.stack([out[("rung", nm)][1] for nm in names])
    out[("random", 0.0)] = (costs_all.mean(axis=0), quals_all.mean(axis=0))
    stats = model.training["stats"]
    rate, mcost = np.array(stats["rung_rate"]), np.array(stats["rung_mean_cost"])
    for t in TARGETS:  # per-class floor
        start = np.empty(n, dtype=int)
        for i, c in enumerate(test.classes):
            rates = np.array([x if x is not None else np.nan for x in stats["class_rates"].get(c or "", rate)])
            rates = np.where(np.isnan(rates), rate, rates)
            ok = np.flatnonzero(rates >= t)
            start[i] = ok[np.argmin(mcost[ok])] if len(ok) else int(np.argmax(rates))
        chains = np.stack([_fixed_chain(s, R, config, 1)[0] for s in range(R)])[start]
        out[("class_floor", float(t))] = _realise(Y, C, chains, config, names)
    strong = int(np.argmax(rate))
    weak = int(min(range(R), key=lambda j: (mcost[j], -rate[j])))
    for t in TARGETS:  # RouteLLM-style threshold router
        use_weak = P[:, weak] >= t
        L = 1 if config.mode == "single" else 2
        chains = -np.ones((n, L), dtype=int)
        chains[:, 0] = np.where(use_weak, weak, strong)
        if L == 2 and weak != strong:
            chains[:, 1] = np.where(use_weak, strong, -1)
        out[("threshold", float(t))] = _realise(Y, C, chains, config, names)
    best = Y.max(axis=1)
    masked = np.where(Y >= best[:, None], C, np.inf)
    o = masked.argmin(axis=1)
    out[("oracle", 0.0)] = (C[np.arange(n), o], Y[np.arange(n), o])
    out["_pair"] = {"weak": names[weak], "strong": names[strong]}
    return out


def cross_validate(data: TrainingData, config_single: PolicyConfig, config_escalate: PolicyConfig, folds: int = 5,
                   seed: int = 0, fit_kwargs: dict | None = None, progress=None) -> dict[str, Any]:
    """Grouped K-fold: train a router per fold, collect every policy's realised outcomes on the held-out fold."""
    keep = ~np.isnan(data.usable).any(axis=1) & ~np.isnan(data.cost).any(axis=1)
    dropped = int((~keep).sum())
    data = data.subset(np.flatnonzero(keep))
    merged: dict[str, dict] = {"single": {}, "escalate": {}}
    pairs = []
    for f, (train_idx, test_idx) in enumerate(grouped_folds(data.groups, folds, seed)):
        assert not set(data.groups[i] for i in train_idx) & set(data.groups[i] for i in test_idx)
        model = fit_router(data.subset(train_idx), seed=seed, **{"folds": 3, **(fit_kwargs or {})})
        test = data.subset(test_idx)
        for mode, cfg in (("single", config_single), ("escalate", config_escalate)):
            res = fold_outcomes(model, test, cfg, seed)
            pairs.append(res.pop("_pair"))
            for key, (c, q) in res.items():
                prev = merged[mode].get(key)
                merged[mode][key] = (c, q) if prev is None else (np.concatenate([prev[0], c]),
                                                                 np.concatenate([prev[1], q]))
        if progress:
            progress(f"fold {f + 1}/{folds} done")
    return {"outcomes": merged, "prompts": len(data.texts), "dropped_incomplete": dropped, "pairs": pairs,
            "rungs": [r.name for r in data.rungs]}


def _envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    pts = sorted(points)
    out, best = [], -1.0
    for c, q in pts:
        if q > best:
            out.append((c, q))
            best = q
    return out


def aiq(points: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Area under the non-decreasing cost-quality curve on [lo, hi], normalised by hi - lo (quality 0 below
    the cheapest point, linear between envelope points, flat after the last)."""
    env = _envelope(points)
    if hi <= lo or not env:
        return float(env[-1][1]) if env else 0.0
    grid = np.linspace(lo, hi, 2001)
    xs, ys = np.array([c for c, _ in env]), np.array([q for _, q in env])
    vals = np.where(grid < xs[0], 0.0, np.interp(grid, xs, ys))
    return float(np.trapz(vals, grid) / (hi - lo))


def min_cost_at(points: list[tuple[float, float]], quality: float) -> float | None:
    """Cheapest cost at which a curve reaches `quality` (None when it never does)."""
    ok = [c for c, q in points if q >= quality - 1e-12]
    return min(ok) if ok else None


def summarise(cv: dict[str, Any]) -> dict[str, Any]:
    """Per mode: every policy's curve (mean cost and quality per request), AIQ, parity and oracle gap."""
    out: dict[str, Any] = {"prompts": cv["prompts"], "dropped_incomplete": cv["dropped_incomplete"],
                           "threshold_pairs": sorted({(p["weak"], p["strong"]) for p in cv["pairs"]})}
    for mode, res in cv["outcomes"].items():
        curves: dict[str, list] = {}
        for (policy, param), (c, q) in res.items():
            curves.setdefault(policy if policy != "rung" else f"rung:{param}", []).append(
                {"param": param, "cost": float(np.mean(c)), "quality": float(np.mean(q))})
        singles = {k[5:]: v[0] for k, v in curves.items() if k.startswith("rung:")}
        lo = min(v["cost"] for v in singles.values())
        hi = max(v["cost"] for v in singles.values())
        best_name = max(singles, key=lambda k: (singles[k]["quality"], -singles[k]["cost"]))
        largest = cv["rungs"][-1]
        summary = {}
        for name, pts in curves.items():
            xy = [(p["cost"], p["quality"]) for p in pts]
            summary[name] = {"aiq": aiq(xy, lo, hi), "max_quality": max(q for _, q in xy),
                             "min_cost": min(c for c, _ in xy)}
        oracle = curves["oracle"][0]
        by_policy = {}
        for name, pts in curves.items():
            if len(pts) == 1:
                continue
            xy = [(p["cost"], p["quality"]) for p in pts]
            by_policy[name] = {}
            for label, ref in (("best_single", best_name), ("largest", largest)):
                q_ref, c_ref = singles[ref]["quality"], singles[ref]["cost"]
                c = min_cost_at(xy, q_ref)
                by_policy[name][label] = {"rung": ref, "quality": q_ref, "cost": c_ref, "router_cost": c,
                                          "saving": None if c is None else 1 - c / c_ref}
        routers = [n for n in curves if n.startswith("router")]
        rq = max(p["quality"] for n in routers for p in curves[n])
        out[mode] = {"curves": curves, "summary": summary, "parity": by_policy["router"],
                     "parity_by_policy": by_policy,
                     "oracle": {**oracle, "quality_gap_to_router_best": oracle["quality"] - rq},
                     "cost_range": [lo, hi]}
    return out


def plot(summary: dict[str, Any], folder: str | Path) -> list[Path]:
    """One cost-quality PNG per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for mode in ("single", "escalate"):
        curves = summary[mode]["curves"]
        fig, ax = plt.subplots(figsize=(7, 5))
        for name in ("router", "router_value", "router_prob_order", "threshold", "class_floor"):
            if name not in curves:
                continue
            env = _envelope([(p["cost"], p["quality"]) for p in curves[name]])
            ax.plot([c * 1e6 for c, _ in env], [q for _, q in env], marker=".", label=name)
        for name, pts in curves.items():
            if name.startswith("rung:") or name in ("random", "oracle", "smallest_escalating"):
                p = pts[0]
                ax.scatter(p["cost"] * 1e6, p["quality"], marker="*" if name == "oracle" else "o")
                ax.annotate(name.replace("rung:", ""), (p["cost"] * 1e6, p["quality"]), fontsize=6)
        ax.set_xlabel("cost per request (USD per million requests)")
        ax.set_ylabel("usable rate")
        ax.set_title(f"cost-quality, {mode} mode")
        ax.legend(fontsize=8)
        path = folder / f"cost_quality_{mode}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        files.append(path)
    return files


def write_summary(summary: dict[str, Any], path: str | Path) -> Path:
    """The JSON summary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, default=str))
    return path


def evaluate_artifact(model: RouterModel, test: TrainingData, config_single: PolicyConfig,
                      config_escalate: PolicyConfig) -> dict[str, Any]:
    """Judge a trained artifact on separately imported held-out data (no retraining); same shape as
    `cross_validate`'s result, for `summarise`. Rungs are matched by name; prompts missing a rung are dropped."""
    from advisor.errors import RouterError

    names = [r.name for r in test.rungs]
    missing = [n for n in model.rung_names if n not in names]
    if missing:
        raise RouterError(f"the held-out data has no runs for rungs {', '.join(missing)} of the router")
    order = [names.index(n) for n in model.rung_names]
    test.usable, test.cost, test.runs = test.usable[:, order], test.cost[:, order], test.runs[:, order]
    test.rungs = [test.rungs[i] for i in order]
    keep = ~np.isnan(test.usable).any(axis=1) & ~np.isnan(test.cost).any(axis=1)
    data = test.subset(np.flatnonzero(keep))
    merged = {}
    pairs = []
    for mode, cfg in (("single", config_single), ("escalate", config_escalate)):
        res = fold_outcomes(model, data, cfg)
        pairs.append(res.pop("_pair"))
        merged[mode] = res
    return {"outcomes": merged, "prompts": len(data.texts), "dropped_incomplete": int((~keep).sum()),
            "pairs": pairs, "rungs": model.rung_names}
