"""Text tables of an evaluation summary (`advisor router eval` and `benchmarks/router_nim9.py` print these).

One table per mode: the router's **default** operating point first (the headline), the best point of its
sweep beside it, the point at parity with the best single rung; then the tf-idf logistic baseline, the
cascade, the per-class floor, the threshold router, the best single rung and the oracle; then the paired
bootstrap differences, the dominance check of the default and, in escalation mode, predicted vs realised chain
P(usable) under the fitted dependence and under independence. Costs in USD per 1,000 requests.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _row(label: str, p: dict | None, aiq: float | None = None) -> str:
    if p is None:
        return f"  {label:<46}{'never':>9}"
    pred = p.get("predicted")
    return (f"  {label:<46}{p['quality']:>9.3f}{p['cost'] * 1e3:>10.4f}"
            f"{'' if aiq is None else format(aiq, '.3f'):>8}{'' if pred is None else format(pred, '.3f'):>11}")


def _parity_point(pts: list[dict], quality: float) -> dict | None:
    ok = [p for p in pts if p["quality"] >= quality - 1e-12]
    return min(ok, key=lambda p: p["cost"]) if ok else None


def _ci(b: dict | None, scale: float = 1.0, unit: str = "") -> str:
    if not b or b.get("estimate") is None:
        return "n/a"
    lo = "?" if b["lo"] is None else f"{b['lo'] * scale:+.4f}"
    hi = "?" if b["hi"] is None else f"{b['hi'] * scale:+.4f}"
    return f"{b['estimate'] * scale:+.4f}{unit} [95% {lo}, {hi}]"


def mode_table(summary: dict[str, Any], mode: str) -> str:
    """The table of one mode (module docstring)."""
    s = summary[mode]
    curves, aiq, best = s["curves"], s["aiq"], s["best_single"]
    sim = "SIMULATED runs -- " if summary.get("simulated") else ""
    lines = [f"=== {sim}{mode} mode (cost = USD per 1,000 requests; quality = usable rate; AIQ over "
             f"{'the single rungs' if mode == 'single' else 'each policy'}'s cost range) ===",
             f"  {'policy':<46}{'quality':>9}{'cost/1k':>10}{'AIQ':>8}{'predicted':>11}"]
    router = "router_value"
    if "default" in s:
        lines.append(_row("router DEFAULT (chosen in CV at training)", s["default"], aiq.get(router)))
    if router in curves:
        bp = s["best_point"][router]
        lines.append(_row(f"router best point of sweep (V={bp['param']:.3g})", bp))
        lines.append(_row("router at parity with best single", _parity_point(curves[router], best["quality"])))
        lines.append(_row("router target rule (best point)", s["best_point"]["router"], aiq.get("router")))
    if "router_rung" in curves:
        lines.append(_row("plain rule argmax P - cost/V (best point)", s["best_point"]["router_rung"],
                          aiq["router_rung"]))
    if "baseline" in curves:
        lines.append(_row("tf-idf logistic baseline (best point)", s["best_point"]["baseline"], aiq["baseline"]))
        lines.append(_row("baseline at parity with best single", _parity_point(curves["baseline"], best["quality"])))
    if "cascade" in curves:
        lines.append(_row("cheapest-first cascade (all rungs)", curves["cascade"][0], aiq["cascade"]))
    lines.append(_row("per-class floor (best point)", s["best_point"]["class_floor"], aiq["class_floor"]))
    lines.append(_row("per-class floor at parity with best single",
                      _parity_point(curves["class_floor"], best["quality"])))
    lines.append(_row("threshold router (best point)", s["best_point"]["threshold"], aiq["threshold"]))
    if "router_prob_order" in curves:
        lines.append(_row("router, escalating by probability (best)", s["best_point"]["router_prob_order"],
                          aiq["router_prob_order"]))
    lines.append(_row(f"best single rung: {best['rung']}", curves[f"rung:{best['rung']}"][0]))
    cheapest = min((k for k in curves if k.startswith("rung:")), key=lambda k: curves[k][0]["cost"])
    lines.append(_row(f"cheapest rung: {cheapest[5:]}", curves[cheapest][0]))
    lines.append(_row("random rung", curves["random"][0]))
    lines.append(_row("oracle (cheapest best recorded rung)", s["oracle"]))
    b = s.get("bootstrap", {})
    if "aiq" in b:
        lines.append(f"  router minus baseline: AIQ {_ci(b['aiq'])}; quality at the default's cost "
                     f"{_ci(b['quality_at_default_cost'])}; cost at parity {_ci(b['cost_at_parity'], 1e3, '/1k')}")
    if "quality_at_cascade_cost_vs_cascade" in b:
        lines.append(f"  router minus cascade: quality at the cascade's cost "
                     f"{_ci(b['quality_at_cascade_cost_vs_cascade'])}; cost at its quality "
                     f"{_ci(b['cost_at_cascade_quality_vs_cascade'], 1e3, '/1k')}")
    par = {k: v["cost"] for k, v in s["parity"].items() if k in ("router_value", "router_rung", "baseline", "class_floor")}
    lines.append("  cost at parity with best single (" + f"{best['rung']}, quality {best['quality']:.3f}, "
                 f"{best['cost'] * 1e3:.4f}/1k): " + ", ".join(
                     f"{k} {'never' if v is None else format(v * 1e3, '.4f')}" for k, v in par.items()))
    if "default" in s:
        dom = s["default"]["dominated_by"]
        lines.append("  default point dominated by: " + ("nothing (no baseline point has higher quality at a lower "
                     "cost)" if not dom else "; ".join(f"{d['policy']}@{d['param']} q {d['quality']:.3f} "
                                                       f"cost {d['cost'] * 1e3:.4f}" for d in dom[:5])))
        d = s["default"]
        if mode == "escalate" and d.get("predicted") is not None:
            ind = d.get("predicted_independent")
            lines.append(f"  chain P(usable) of the default: predicted {d['predicted']:.3f} (dependence model), "
                         f"{'n/a' if ind is None else format(ind, '.3f')} (independent failures), realised "
                         f"{d['quality']:.3f}: gap {d['predicted'] - d['quality']:+.3f}"
                         + ("" if ind is None else f" vs {ind - d['quality']:+.3f}"))
    return "\n".join(lines)


def model_lines(fold_metrics: Sequence[dict], rungs: Sequence[str]) -> list[str]:
    """Per rung: mean inner-CV AUC (overall and within class), Brier, ECE and cost MdAPE over the outer folds
    (with the estimated share)."""
    out = ["per rung (mean over outer folds of the inner CV): AUC, AUC within class (0.5 = the text adds nothing "
           "to the class), Brier, ECE, cost MdAPE"]
    for r in rungs:
        ms = [m["per_rung"][r] for m in fold_metrics if r in m["per_rung"]]

        def mean(key: str) -> float | None:
            vals = [m[key] for m in ms if m.get(key) is not None]
            return float(np.mean(vals)) if vals else None

        auc, mdape, est, wc = mean("auc"), mean("cost_mdape"), mean("cost_estimated_share"), mean("auc_within_class")
        note = "" if est is None else (" (costs estimated: stated output-token assumption)" if est >= 0.999 else
                                       f" ({est:.0%} of costs estimated)")
        fb = " [class-rate fallback]" if any(m.get("fallback") for m in ms) else ""
        out.append(f"  {r:<34} AUC {'n/a' if auc is None else format(auc, '.3f')}  "
                   f"in class {'n/a' if wc is None else format(wc, '.3f')}  Brier {mean('brier'):.3f}  "
                   f"ECE {mean('ece'):.3f}  cost MdAPE {'n/a' if mdape is None else format(mdape, '.1%')}{note}{fb}")
    return out


def predictor_lines(fold_metrics: Sequence[dict]) -> list[str]:
    """The per-rung probability model chosen in each outer fold's training (grouped CV inside the fold), and per
    candidate its inner-CV AIQ (single-shot, escalation, mean) and Brier, averaged over the outer folds."""
    records = [m["predictor"] for m in fold_metrics if m.get("predictor")]
    if not records:
        return ["predictor: not chosen (models trained before the choice existed)"]
    chosen = [r["chosen"] for r in records]
    counts = ", ".join(f"{name} in {chosen.count(name)} of {len(chosen)}" for name in dict.fromkeys(chosen))
    out = [f"predictor chosen by grouped CV inside each outer fold's training data: {counts}",
           "  candidate      inner-CV AIQ single  escalate  mean    Brier   (mean over the outer folds)"]
    for name in records[0]["candidates"]:
        figs = [r["candidates"][name] for r in records if name in r["candidates"]]

        def mean(key: str) -> str:
            vals = [f[key] for f in figs if f.get(key) is not None]
            return f"{np.mean(vals):.4f}" if vals else "n/a"

        mark = " <- chosen" if chosen.count(name) == len(chosen) else ""
        out.append(f"  {name:<14} {mean('aiq_single'):>19}  {mean('aiq_escalate'):>8}  {mean('aiq'):>6}  "
                   f"{mean('brier'):>6}{mark}")
    return out


def rule_lines(fold_metrics: Sequence[dict]) -> list[str]:
    """The decision rule chosen per mode in each outer fold's training (grouped CV inside the fold), and per
    rule its inner-CV AIQ per mode, averaged over the outer folds."""
    records = [m["rule"] for m in fold_metrics if m.get("rule")]
    if not records:
        return ["decision rule: not chosen (models trained before the choice existed)"]
    out = []
    for mode in ("single", "escalate"):
        chosen = [r["chosen"][mode] for r in records]
        out.append(f"decision rule chosen by grouped CV inside each outer fold's training data, {mode}: "
                   + ", ".join(f"{name} in {chosen.count(name)} of {len(chosen)}" for name in dict.fromkeys(chosen)))
    out.append("  rule           inner-CV AIQ single  escalate   (mean over the outer folds)")
    for name in records[0]["candidates"]:
        figs = [r["candidates"][name] for r in records if name in r["candidates"]]
        out.append(f"  {name:<14} {np.mean([f['aiq_single'] for f in figs]):>19.4f}  "
                   f"{np.mean([f['aiq_escalate'] for f in figs]):>8.4f}")
    return out
