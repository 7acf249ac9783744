"""The report's Policies section: the floor rung vs the orchestrator, the learned router and the cascade.

Shown when the store holds policy runs of the suite (``advisor probe --policy ...``). Three parts, from the
arms of `advisor.report.analysis` (the same numbers ``advisor policies`` prints):

- a table per class and condition: the floor rung and each policy's usable rate with its interval, $ per
  usable result (retries and escalations counted alike), latency, rung calls, the two biases and the cascade
  verifier's measured error rates;
- a figure of the **rung-call distribution** per policy and class (orchestrator: turns handed to each rung;
  router and cascade: attempts per rung), marked SIMULATED when stand-ins answered;
- one line per class and condition saying which policy a platform team should run and why
  (`advisor.report.analysis.recommend`).
"""

from __future__ import annotations

import base64
from typing import Any

from advisor.money import PER_1K_USABLE, per_1k_usable
from advisor.report.analysis import side_by_side
from advisor.report.tables import Table, fmt_interval, fmt_share, table_md

TITLE = "Policies: floor rung vs orchestrator, learned router and cascade"
FIGURE_TITLE = "Rung calls per policy and class"
FIGURE_CAPTION = ("Share of each policy's rung calls that went to each rung, per class (both conditions): the "
                  "orchestrator's turns handed to a rung, the router's and the cascade's attempts. A tall top "
                  "segment is strongest-tool defaulting.")


def policies_table(data: Any):
    """The side-by-side table (the floor rung and each policy per class and condition)."""
    rows = []
    for a in side_by_side(data.policies):
        dist = ", ".join(f"{k} {v}" for k, v in a.expert_calls.items()) or "-"
        verifier = f"{fmt_share(a.false_accept)} / {fmt_share(a.false_reject)}" if a.verified else "-"
        rows.append([a.task_class, a.condition, a.label, f"{fmt_share(a.usable_rate)} {fmt_interval(a.interval)}",
                     per_1k_usable(a.cost_per_usable), "-" if a.latency_s is None else f"{a.latency_s:.2f} s", dist,
                     fmt_share(a.strongest_share), fmt_share(a.own_family_share), verifier])
    return Table("policies", TITLE,
                 ["class", "condition", "floor rung or policy", "usable (interval)", f"$ {PER_1K_USABLE}",
                  "latency", "rung calls", "to strongest", "to own family", "verifier false accept / reject"], rows,
                 "Same tasks, same bar. $ per usable result = mean cost per attempt / usable rate (retry until "
                 "usable; the orchestrator's tokens, every rung it called and every escalation included). Floor "
                 "rung: the fixed rung the floor finder recommends for the class (the largest rung where no rung "
                 "clears the floor). Router: the learned router's "
                 "rung, single-shot (no verifier). Cascade: cheapest rung first, escalating while the task's "
                 "deterministic task-completion checks reject (the verifier; its measured error rates shown). "
                 "To strongest / to own family: shares of the orchestrator's calls (strongest-tool defaulting; "
                 "self-enhancement).", policies_simulated(data))


def policies_simulated(data: Any) -> bool:
    """True when a stand-in answered any policy run or fixed-rung run the section shows."""
    return bool(data.simulated or any(x.simulated for x in data.policies))


def advice_lines(data: Any) -> list[str]:
    """One line per class and condition: which policy to run and why."""
    return [f"{c} ({k}): run {run}: {why}" for (c, k), (run, why) in data.policy_advice.items()]


def call_distribution(data: Any) -> dict[str, dict[str, dict[str, int]]]:
    """policy -> class -> rung -> calls, both conditions summed."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for a in data.policies:
        if a.policy == "fixed":
            continue
        cell = out.setdefault(a.policy, {}).setdefault(a.task_class, {})
        for rung, n in a.expert_calls.items():
            cell[rung] = cell.get(rung, 0) + n
    return out


def policies_view(data: Any, png: bytes | None) -> dict[str, Any] | None:
    """What the HTML template's Policies block shows (None when the store holds no policy runs)."""
    if not data.policies:
        return None
    return {"table": policies_table(data), "advice": advice_lines(data), "figure_title": FIGURE_TITLE,
            "simulated": policies_simulated(data),
            "caption": FIGURE_CAPTION, "b64": base64.b64encode(png).decode() if png else None}


def policies_markdown(data: Any, image_file: str | None) -> str:
    """The Policies section in Markdown ("" when there are no policy runs)."""
    if not data.policies:
        return ""
    sim = " (SIMULATED)" if policies_simulated(data) else ""
    out = [table_md(policies_table(data)), f"### Which policy to run{sim}", ""]
    out += [f"- {line}" for line in advice_lines(data)] + [""]
    if image_file:
        out += [f"### {FIGURE_TITLE}{sim}", "", f"![{FIGURE_TITLE}{sim}]({image_file})", "", FIGURE_CAPTION, ""]
    return "\n".join(out)
