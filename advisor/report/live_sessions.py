"""Live agent sessions as `advisor floors` and the report show them: beside the probe's runs, never in the floor.

Per class (of a session's first step): sessions, mean steps, how many escalated and why, the start -> final rung
pairs, and USD per session, from the routing service's records (`Store.session_outcomes`, migration m009). A
session's outcome here is its routing path, not its quality: the service does not know whether the trajectory
ended usable (only a verifier's verdicts, which the Live tables count per attempt).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from advisor.report.tables import Table

NOTE = ("Live sessions (routing service): start -> final rung, steps and escalations per class; apart from the "
        "floor, which only probe runs decide")


def session_summary(store, classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per class the live sessions' counts (see the module docstring); empty without session records."""
    by: dict[str, list[dict]] = {}
    for s in store.session_outcomes():
        cls = s["task_class"] or ""
        if classes and cls not in classes:
            continue
        by.setdefault(cls, []).append(s)
    out = []
    for cls, rows in sorted(by.items()):
        reasons = Counter(r for s in rows for r in (s["reasons"] or "").split(",") if r)
        out.append({"task_class": cls, "sessions": len(rows), "mean_steps": sum(s["steps"] for s in rows) / len(rows),
                    "escalated": sum(1 for s in rows if s["escalations"]), "reasons": dict(reasons),
                    "paths": dict(Counter(f"{s['start_rung']}->{s['final_rung']}" for s in rows)),
                    "usd_per_session": sum(s["cost_usd"] or 0.0 for s in rows) / len(rows),
                    "simulated": any(s["simulated"] for s in rows)})
    return out


def _paths(c: dict[str, Any]) -> str:
    return ", ".join(f"{p} {n}" for p, n in sorted(c["paths"].items(), key=lambda kv: -kv[1]))


def _reasons(c: dict[str, Any]) -> str:
    return ", ".join(f"{r} {n}" for r, n in sorted(c["reasons"].items())) or "-"


def session_lines(summary: list[dict[str, Any]]) -> list[str]:
    """The summary as text lines for `advisor floors` (empty without sessions)."""
    if not summary:
        return []
    sim = any(c["simulated"] for c in summary)
    lines = [NOTE + ("; SIMULATED stand-in rungs answered" if sim else "")]
    for c in summary:
        lines.append(f"  {c['task_class'] or '(no class)':<16} {c['sessions']:>5} sessions  {c['mean_steps']:.1f} "
                     f"steps  escalated {c['escalated']} ({_reasons(c)})  start->final: {_paths(c)}  "
                     f"USD/session {c['usd_per_session']:.6f}")
    return lines


def session_table(summary: list[dict[str, Any]]):
    """The report's Live sessions table (None without sessions)."""
    if not summary:
        return None
    rows = [[c["task_class"] or "(no class)", str(c["sessions"]), f"{c['mean_steps']:.1f}", str(c["escalated"]),
             _reasons(c), _paths(c), f"{c['usd_per_session']:.6f}"] for c in summary]
    return Table("live_sessions", "Live: agent sessions, start and final rung", ["class", "sessions", "mean steps",
                 "escalated", "reasons", "start -> final rung", "USD per session"], rows, NOTE + ".",
                 any(c["simulated"] for c in summary))
