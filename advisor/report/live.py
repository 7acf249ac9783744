"""The report's **Live** section: how live routed traffic compares with what the probe and the router expected.

Its figures are `advisor.router.feedback.drift.drift_table` (one definition shared with `advisor router drift` and the
service's drift gauges): per class the live verifier accept rate of each rung next to the probe's usable rate,
the mean predicted P(usable) of verified requests next to the share accepted, cost per usable result live
(USD of verified requests / accepted requests) next to predicted (mean expected cost / mean predicted P), and the share of
requests whose class was predicted rather than given. A class is flagged **DRIFT** when a rung's live accept
rate differs from its probe usable rate, or the realised share from the predicted P, by more than the threshold
(0.15) on at least 20 observations. Tables are marked SIMULATED when stand-in rungs answered the traffic.

The section is present only when the store holds live routed requests (`advisor serve` + `advisor store
ingest`); `live_section` returns None otherwise.
"""

from __future__ import annotations

from typing import Any, Sequence

from advisor.money import PER_1K_USABLE, per_1k_usable
from advisor.report.live_sessions import session_summary, session_table
from advisor.report.tables import Table, table_md
from advisor.router.feedback.drift import drift_table
from advisor.shares import share as _share


def live_section(store, classes: Sequence[str] | None = None) -> dict[str, Any] | None:
    """The drift table of the store's live traffic (only `classes` when given), or None without live requests."""
    table = drift_table(store)
    if classes:
        table["classes"] = [c for c in table["classes"] if c["task_class"] in classes]
    if not table["classes"]:
        return None

    table["sessions"] = session_summary(store, classes)
    table["drifting"] = [c["task_class"] or "(no class)" for c in table["classes"] if c["flagged"]]
    table["simulated"] = any(c["simulated"] for c in table["classes"])
    return table


def _diff(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f} pts"


def live_tables(live: dict[str, Any]) -> list:
    """The Live tables (agent sessions when there are any, per class, per class and rung) as report `Table`s."""
    sim = bool(live.get("simulated"))
    per_class = []
    for c in live["classes"]:
        per_class.append([
            c["task_class"] or "(no class)", str(c["requests"]), _share(c["predicted_class_share"]),
            str(c["verified_requests"]), _share(c["p_predicted"]), _share(c["p_realised"]),
            _diff(c["realised_minus_predicted"]), per_1k_usable(c["cost_per_usable_predicted_usd"]),
            per_1k_usable(c["cost_per_usable_live_usd"]),
            ("DRIFT: " + "; ".join(c["reasons"])) if c["flagged"] else "ok"])
    per_rung = []
    for c in live["classes"]:
        for r in c["rungs"]:
            per_rung.append([
                c["task_class"] or "(no class)", r["rung"], f"{_share(r['live_accept_rate'])} of {r['live_attempts']}",
                "-" if r["probe_usable_rate"] is None else f"{_share(r['probe_usable_rate'])} of {r['probe_runs']}",
                _diff(r["difference"]), "DRIFT" if r["drifts"] else "ok"])
    rule = (f"DRIFT: a difference above {100 * live['threshold']:.0f} points on {live['min_n']}+ observations.")

    sessions = session_table(live.get("sessions") or [])
    return [*([sessions] if sessions else []),
        Table("live_classes", "Live: predicted vs realised, per class",
              ["class", "requests", "class predicted", "verified", "predicted P(usable)", "realised (accepted)",
               "realised - predicted", f"$ {PER_1K_USABLE}, predicted", f"$ {PER_1K_USABLE}, live", "drift"], per_class,
              "Routed (not pinned) live requests. Predicted P(usable): the policy's mean for verified requests; "
              "realised: the share whose delivered answer the verifier accepted (a verifier's false accepts "
              "count as accepted). $ per usable: live = total cost / accepted requests; predicted = mean "
              "expected cost / mean predicted P. Class predicted: requests whose class came from the config's "
              "rules rather than the caller. " + rule, sim),
        Table("live_rungs", "Live: verifier accept rate vs probe usable rate, per class and rung",
              ["class", "rung", "live accept", "probe usable", "difference", "drift"], per_rung,
              "Verified live attempts (failovers and errors left out) against the probe's scored runs of the same "
              "class and rung. " + rule, sim),
    ]


def live_markdown(live: dict[str, Any] | None) -> list[str]:
    """The Live section as Markdown lines (empty without live traffic)."""
    if not live:
        return []
    sim = " (SIMULATED)" if live["simulated"] else ""
    out = [f"## Live{sim}", "", drift_line(live), ""]
    out += [table_md(t) for t in live_tables(live)]
    return out


def drift_line(live: dict[str, Any]) -> str:
    """One sentence: which classes drift, or none."""
    if live["drifting"]:
        return f"DRIFT in {len(live['drifting'])} class(es): {', '.join(live['drifting'])}."
    return f"No class drifts past {100 * live['threshold']:.0f} points."
