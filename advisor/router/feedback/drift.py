"""Drift of live traffic from what the probe and the router expected, per task class.

Per class, from the store's live tables and probe/imported runs:

- **accept vs usable**: per rung, the live verifier accept rate of verified attempts next to the probe's usable
  rate of that rung in that class (the verifier's own error rates are not removed: a stated verifier with
  false accepts raises the live rate);
- **predicted vs realised P(usable)**: the mean P(usable) the policy predicted for its decisions (verified
  requests) next to the share whose delivered answer was accepted;
- **cost per usable result**: live (total USD / accepted requests) next to predicted (mean expected cost /
  mean predicted P);
- **predicted class share**: the share of the class's requests whose class was predicted (not given).

A class is **flagged** when a rung's live accept rate differs from its probe usable rate, or the realised rate
from the predicted one, by more than the threshold (default 0.15) on at least `MIN_N` (20) observations.
The routing service exports the raw counters (`advisor_verifier_verdicts_total`,
`advisor_predicted_p_usable_total`, `advisor_requests_total`) for the same comparison in Prometheus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.store.protocols import LiveRecords

DEFAULT_THRESHOLD = 0.15
MIN_N = 20


def drifts(difference: float | None, n: int, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """The drift rule: |difference| past `threshold` on at least `MIN_N` observations."""
    return difference is not None and abs(difference) > threshold and n >= MIN_N


def drift_table(store: LiveRecords, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """Per class the drift figures and flag (see the module docstring); empty classes when no live traffic."""
    probe = {(r["task_class"], r["rung"]): r for r in store.probe_usable_rates()}
    rungs: dict[str, list[dict]] = {}
    for r in store.live_accept_counts(unclassified=True):
        p = probe.get((r["task_class"], r["rung"]))
        rate = r["accepted"] / r["attempts"]
        diff = None if p is None else rate - float(p["rate"])
        rungs.setdefault(r["task_class"], []).append({
            "rung": r["rung"], "live_attempts": int(r["attempts"]), "live_accept_rate": rate,
            "probe_runs": int(p["n"]) if p else 0, "probe_usable_rate": float(p["rate"]) if p else None,
            "difference": diff, "drifts": drifts(diff, r["attempts"], threshold),
            "simulated": bool(r["simulated"] or (p and p["simulated"]))})
    classes = []
    for d in store.live_class_summary():
        c = d["task_class"]
        pred, real = d["p_predicted"], d["p_realised"]
        gap = None if pred is None or real is None else float(real) - float(pred)
        per_usable_live = float(d["cost"]) / d["accepted"] if d["accepted"] else None
        per_usable_pred = (float(d["expected_cost"]) / float(pred) if pred and d["expected_cost"] is not None
                           else None)
        rows = rungs.get(c, [])
        reasons = [f"{r['rung']}: live accept {r['live_accept_rate']:.2f} vs probe usable {r['probe_usable_rate']:.2f}"
                   for r in rows if r["drifts"]]
        if drifts(gap, d["n_verified"], threshold):
            reasons.append(f"realised {real:.2f} vs predicted P(usable) {pred:.2f}")
        classes.append({"task_class": c, "requests": int(d["n"]), "predicted_class_share": float(d["predicted_share"]),
                        "verified_requests": int(d["n_verified"]), "p_predicted": pred, "p_realised": real,
                        "realised_minus_predicted": gap, "cost_per_usable_live_usd": per_usable_live,
                        "cost_per_usable_predicted_usd": per_usable_pred, "rungs": rows,
                        "flagged": bool(reasons), "reasons": reasons,
                        "simulated": bool(d["simulated"]) or any(r["simulated"] for r in rows)})
    return {"threshold": threshold, "min_n": MIN_N, "classes": classes}


def render_lines(table: dict[str, Any]) -> list[str]:
    """The drift table as terminal lines."""
    if not table["classes"]:
        return ["no live requests in the store yet (run `advisor serve` and `advisor store ingest`)"]
    out = [f"drift per class (flag: a difference above {table['threshold']:g} on {table['min_n']}+ observations)"]
    for c in table["classes"]:
        sim = " SIMULATED" if c["simulated"] else ""
        flag = "  DRIFT: " + "; ".join(c["reasons"]) if c["flagged"] else ""
        pr = (f"predicted P {c['p_predicted']:.2f} realised {c['p_realised']:.2f}" if c["p_predicted"] is not None
              else "unverified")
        out.append(f"{c['task_class'] or '(no class)'}{sim}: {c['requests']} requests ({c['predicted_class_share']:.0%}"
                   f" class predicted), {pr}{flag}")
        for r in c["rungs"]:
            probe = "n/a" if r["probe_usable_rate"] is None else f"{r['probe_usable_rate']:.2f} ({r['probe_runs']} runs)"
            out.append(f"  {r['rung']:<14} live accept {r['live_accept_rate']:.2f} ({r['live_attempts']} attempts)"
                       f"  probe usable {probe}")
    return out
