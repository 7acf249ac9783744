"""Choosing the router's default rule, operating point and chain dependence from out-of-fold predictions.

At training, the out-of-fold calibrated probabilities (`fit.fit_router`) and out-of-fold predicted costs are
routed as if they were new requests, and their recorded outcomes realised. The default rule is the **value
rule** (highest value x P(usable) - expected cost; a target on P(usable) alone sends almost everything to the
cheapest rung). Its operating point, the value V of a usable result, is chosen per mode by a stated criterion:
**parity** -- the cheapest out-of-fold point whose quality reaches that of the best single rung (on the training
data), i.e. "as good as the best single model, for the least money"; when no point reaches it, the point of
highest quality (the cheapest within `TOLERANCE` of it). The sweep is scale-free: V runs over the mean cost of
the dearest rung times 10^-1.5 .. 10^3.5.

The dependence rho of the escalation model (`rule.chain_outcome_batch`) is the grid value whose predicted
mean chain P(usable) is closest to the realised one for the default escalation decisions; V is then chosen
again with that rho.

**Which decision rule** (`choose_rule`, per mode): the chain value rule (``chain_value``: the highest value x
P(usable) - E[cost] over every candidate chain) or the plain rule (``rung_value``: argmax over rungs of value x
P_r - C_r, then up the ladder), with the same out-of-fold P and predicted costs, each swept over the same values;
the higher AIQ (`metrics.aiq`: single-shot over the single rungs' cost range, escalation over the rule's own
range) wins, a tie (within 1e-9) to the chain rule. The artifact records the choice and both figures
(``training.rule``; ``default.rule`` is what the ``default`` policy applies).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor.router.model.curves import aiq
from advisor.router.routing.rule import (PolicyConfig, Preferences, RungFacts, candidate_table, chains_outcome,
                                         chosen_chains, eligible, realised_outcome, rung_value_chains, select)

TOLERANCE = 0.002  #: quality within this of the best counts as a tie (the cheaper point wins)
RHO_GRID = np.round(np.linspace(0.0, 1.0, 21), 3)


def value_grid(mean_costs: np.ndarray) -> np.ndarray:
    """Values of a usable result (USD) swept: 0 and the dearest rung's mean cost x 10^-1.5 .. 10^3.5."""
    scale = float(np.nanmax(mean_costs)) if np.isfinite(mean_costs).any() and np.nanmax(mean_costs) > 0 else 1e-4
    return np.concatenate([[0.0], scale * np.logspace(-1.5, 3.5, 61)])


RULES = ("chain_value", "rung_value")  #: the decision rules `choose_rule` weighs, preferred first on a tie
RULE_HOW = ("out-of-fold P(usable) and predicted costs of the chosen predictor routed by each rule over one sweep "
            "of values; AIQ single-shot over the single rungs' cost range, escalation over the rule's own range; "
            "higher AIQ wins, a tie to chain_value")


def sweep(P, Cp, Y, C, facts, config: PolicyConfig, values, rule: str = "chain_value") -> list[dict[str, float]]:
    """Per value V: realised mean cost and quality, and mean predicted P(usable), of the value rule (`rule`:
    ``chain_value`` over candidate chains, or the plain per-rung ``rung_value``)."""
    table = candidate_table(P, Cp, facts, config) if rule == "chain_value" else None
    keep = eligible(facts, Preferences())[0]
    rows = np.arange(len(P))
    L = 1 if config.mode == "single" else config.max_chain
    out = []
    for v in values:
        if table is not None:
            pick = select(table, 0.0, float(v))
            chains, predicted = chosen_chains(table, pick), table["p_usable"][rows, pick]
        else:
            chains = rung_value_chains(P, Cp, keep, float(v), L)
            predicted = chains_outcome(P, Cp, chains, facts, config)[1]
        cost, qual = realised_outcome(Y, C, chains, config)
        out.append({"value_usd": float(v), "cost": float(np.mean(cost)), "quality": float(np.mean(qual)),
                    "predicted": float(np.mean(predicted))})
    return out


def sweep_aiq(points: list[dict[str, float]], mode: str, rung_costs: np.ndarray) -> float:
    """A sweep's AIQ: single-shot over the single rungs' cost range, escalation over its own range."""
    xy = [(p["cost"], p["quality"]) for p in points]
    if mode == "single":
        return aiq(xy, float(rung_costs.min()), float(rung_costs.max()))
    return aiq(xy, min(c for c, _ in xy), max(c for c, _ in xy))


def choose_rule(sweeps: dict[str, list[dict[str, float]]], mode: str, rung_costs: np.ndarray) -> tuple[str, dict]:
    """The rule of higher AIQ among `sweeps` (rule -> its sweep), a tie to the earlier in `RULES`; and the
    figures per rule."""
    figures = {r: sweep_aiq(pts, mode, rung_costs) for r, pts in sweeps.items()}
    best = max(figures.values())
    chosen = next(r for r in RULES if r in figures and figures[r] >= best - 1e-9)
    return chosen, figures


def pick_point(points: list[dict[str, float]], quality: float) -> dict[str, float]:
    """The criterion of the module docstring on a sweep: the cheapest point reaching `quality`, else the best."""
    ok = [p for p in points if p["quality"] >= quality - 1e-12]
    if ok:
        return min(ok, key=lambda p: p["cost"])
    best = max(p["quality"] for p in points)
    return min((p for p in points if p["quality"] >= best - TOLERANCE), key=lambda p: p["cost"])


def tune_default(model, data, P_oof: np.ndarray, C_oof: np.ndarray) -> dict[str, Any]:
    """Set `model.default` and `model.dependence` from out-of-fold predictions (module docstring)."""
    keep = (np.isfinite(P_oof).all(axis=1) & np.isfinite(data.usable).all(axis=1)
            & np.isfinite(data.cost).all(axis=1))
    if keep.sum() < 10:
        return {}
    P, Cp, Y, C = P_oof[keep], C_oof[keep], data.usable[keep], data.cost[keep]
    facts = [RungFacts(r.name, r.self_hosted, r.latency_s) for r in model.rungs]
    q, c = Y.mean(axis=0), C.mean(axis=0)
    best = int(max(range(len(q)), key=lambda j: (q[j], -c[j])))
    values = value_grid(c)
    chosen, rho, gaps = {}, 0.0, {}
    esc0 = PolicyConfig(mode="escalate")
    first = pick_point(sweep(P, Cp, Y, C, facts, esc0, values), float(q[best]))
    for r in RHO_GRID:
        pt = sweep(P, Cp, Y, C, facts, PolicyConfig(mode="escalate", dependence=float(r)), [first["value_usd"]])[0]
        gaps[float(r)] = pt["predicted"] - pt["quality"]
    rho = min(gaps, key=lambda r: (abs(gaps[r]), r))
    rules, figures = {}, {}
    for mode, cfg in (("single", PolicyConfig(mode="single")), ("escalate", PolicyConfig(mode="escalate",
                                                                                          dependence=rho))):
        sweeps = {rule: sweep(P, Cp, Y, C, facts, cfg, values, rule) for rule in RULES}
        rules[mode], figures[mode] = choose_rule(sweeps, mode, c)
        chosen[mode] = pick_point(sweeps[rules[mode]], float(q[best]))
    model.dependence = float(rho)
    record = {"chosen": rules, "how": RULE_HOW,
              "candidates": {r: {"aiq_single": figures["single"][r], "aiq_escalate": figures["escalate"][r]}
                             for r in RULES}}
    model.training = {**(model.training or {}), "rule": record}
    model.metrics = {**(model.metrics or {}), "rule": record}
    model.default = {
        "policy": "value", "value_usd": {m: p["value_usd"] for m, p in chosen.items()}, "rule": rules,
        "criterion": (f"value rule ({rules['single']} single-shot, {rules['escalate']} escalation, chosen in CV) "
                      f"at the cheapest out-of-fold point reaching the quality of the best single rung "
                      f"({model.rungs[best].name}, {q[best]:.3f})"),
        "out_of_fold": chosen, "best_single": {"rung": model.rungs[best].name, "quality": float(q[best]),
                                               "cost": float(c[best])},
        "dependence_gap_independent": gaps[0.0], "dependence_gap_fitted": gaps[rho]}
    return model.default
