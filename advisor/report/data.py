"""Everything a sizing report shows, read from the store and the floor finder (no rendering here).

Tables come from the store's report queries (`advisor.store.Store.rung_table` and its neighbours, so a test
can recompute each number with its own query); floors, intervals and money come from `advisor.floors`. Only fixed-policy probe and imported runs of one suite count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from advisor.errors import DataError, StoreError, did_you_mean
from advisor.floors import FloorReport, FloorSettings, find_floors, resolve_suite
from advisor.report.analysis import recommend, stored_comparison
from advisor.report.live import live_section
from advisor.report.savings import report_savings
from advisor.store import RunStore
from advisor.store import open_store as open_role
from advisor.version import __version__


@dataclass
class SummaryRow:
    """One line of the manager summary: what to run for a class and what it costs."""

    task_class: str
    condition: str | None  #: the condition of the recommendation (baseline | skill)
    recommended: str | None
    floor: str | None
    floor_status: str
    cost_per_usable: float | None
    usable_rate: float | None  #: single-attempt usable rate of the recommended rung
    largest: str
    largest_cost_per_usable: float | None
    volume: int | None  #: usable results needed per month
    monthly_cost: float | None
    monthly_cost_largest: float | None
    first_time: str | None
    note: str


@dataclass
class ReportData:
    """The content of one sizing report."""

    suite: str
    settings: FloorSettings
    floors: FloorReport
    summary: list[SummaryRow]
    rung_table: list[dict[str, Any]]  #: per rung and condition (paired tasks): IF, TC, overall, $/task, near-zero
    paired_tasks: int  #: tasks with a skill: the rung table and the lift are over these (0: all tasks, baseline)
    lift: list[dict[str, Any]]  #: per rung: skill minus baseline for IF, TC, overall, $/task
    scores: dict[str, dict[str, list[float]]]  #: rung -> condition -> overall scores (scored runs)
    gaps: list[dict[str, Any]]  #: tasks a larger rung passes while a smaller one is near zero
    unscored: list[dict[str, Any]]  #: unscored runs grouped by rung, condition and reason
    provenance: dict[str, Any]
    simulated: bool
    simulated_runs: int
    rung_order: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    policies: list[Any] = field(default_factory=list)  #: `advisor.report.analysis.Arm`s, when policies ran
    #: (class, condition) -> (policy to run, why): `advisor.report.analysis.recommend`, computed once
    policy_advice: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    live: dict[str, Any] | None = None  #: the Live section (`advisor.report.live.live_section`), when served
    savings: Any = None  #: `advisor.report.savings.Savings`, when the suite was made from captured traffic


def _policy_arms(store, suite: str, settings: FloorSettings, classes: Sequence[str] | None) -> list[Any]:
    """Rungs vs policies (`advisor.report.analysis`) when the store holds policy runs of the suite."""
    arms = stored_comparison(store, suite, settings)
    return [a for a in arms if not classes or a.task_class in classes]


def parse_volumes(items: Sequence[str] | None) -> dict[str, int]:
    """Parse ``class=N`` or ``class=N/month`` items (DataError naming the bad item)."""
    out = {}
    for item in items or ():
        m = re.fullmatch(r"\s*([^=\s]+)\s*=\s*([0-9][0-9_,]*)\s*(/\s*month)?\s*", item)
        if not m:
            raise DataError(f"--volume {item!r}: expected CLASS=N or CLASS=N/month, e.g. api_calls=20000/month")
        out[m.group(1)] = int(m.group(2).replace("_", "").replace(",", ""))
    return out


def open_store(path: str | Path):
    """Open a store of runs for reporting: it must exist; older schemas are migrated forward on open."""
    if str(path) != ":memory:" and not Path(path).exists():
        raise StoreError(f"{path}: no store here yet (run `advisor probe` or `advisor import` first)")
    return open_role(path, role=RunStore)


def collect(store, suite: str | None = None, settings: FloorSettings | None = None,
            classes: Sequence[str] | None = None, volumes: dict[str, int] | None = None) -> ReportData:
    """Gather the report's content for one suite (the store's only suite when None)."""
    settings = settings or FloorSettings()
    name = resolve_suite(store, suite)
    floors = find_floors(store, name, settings, classes=classes)
    known = sorted({c.task_class for c in floors.classes})
    for c in volumes or {}:
        if c not in known:
            raise DataError(f"--volume names class {c!r}, which suite {name!r} does not have."
                            f"{did_you_mean(c, known)}")
    order = store.rung_order(name, classes)
    # baseline -> with skill compares the same tasks: when any task has skill runs, the table keeps those tasks
    paired = store.paired_task_count(name, classes)
    rung_table = store.rung_table(name, settings.bar, settings.near_zero, classes, paired_only=bool(paired))
    scores: dict[str, dict[str, list[float]]] = {}
    for r in store.overall_scores(name, classes):
        scores.setdefault(r["rung"], {}).setdefault(r["condition"], []).append(r["overall"])
    unscored = store.unscored_groups(name, classes)
    policies = _policy_arms(store, name, settings, classes)
    return ReportData(
        suite=name, settings=settings, floors=floors,
        summary=summarise(floors, order, volumes or {}),
        rung_table=rung_table, paired_tasks=paired, lift=skill_lift(rung_table), scores=scores,
        gaps=gap_tasks(store, name, order, settings, classes), unscored=unscored,
        provenance=provenance(store, name, classes), simulated=floors.simulated_runs > 0,
        simulated_runs=floors.simulated_runs, rung_order=order, classes=known,
        policies=policies, policy_advice=recommend(policies, settings.target), live=live_section(store, classes),
        savings=report_savings(store, name, floors))


def skill_lift(rung_table: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rung: with-skill minus baseline for goal completion, IF, overall, $/task and near-zero share."""
    by = {(r["rung"], r["condition"]): r for r in rung_table}
    out = []
    for rung in dict.fromkeys(r["rung"] for r in rung_table):
        base, skill = by.get((rung, "baseline")), by.get((rung, "skill"))
        if not base or not skill:
            continue
        row = {"rung": rung}
        for col in ("goal_completion", "instruction_following", "overall", "usd_per_task", "near_zero_share"):
            a, b = base[col], skill[col]
            row[col] = None if a is None or b is None else b - a
        out.append(row)
    return out


def gap_tasks(store, suite: str, order: Sequence[str], settings: FloorSettings,
              classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Tasks (per condition) whose mean overall on a rung passes the bar while on the next smaller rung it is near
    zero: what stepping one rung down would lose. Largest pair first."""
    rows = store.step_down_pairs(suite, settings.bar, settings.near_zero, classes)
    nxt = {a: b for a, b in zip(order, order[1:])}
    return [r for r in rows if nxt.get(r["smaller"]) == r["larger"]]


def provenance(store, suite: str, classes: Sequence[str] | None = None) -> dict[str, Any]:
    """Ladder and suite hashes, advisor versions and run dates behind the report."""
    runs = store.run_provenance(suite, classes)
    return {
        "ladders": runs["ladders"],
        "suite_hashes": runs["suite_hashes"],
        "run_advisor_versions": runs["advisor_versions"],
        "run_kinds": runs["kinds"],
        "first_run": _iso(runs["first"]), "last_run": _iso(runs["last"]),
        "store": str(store.path), "migrations": store.applied_migrations(),
        "report_advisor_version": __version__,
        "generated_at": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
    }


def _iso(x: Any) -> str | None:
    return x.isoformat(sep=" ") if hasattr(x, "isoformat") else x


def summarise(floors: FloorReport, order: Sequence[str], volumes: dict[str, int]) -> list[SummaryRow]:
    """Per class: the condition and rung with the lowest cost per usable result, against the largest rung."""
    largest = order[-1] if order else ""
    out = []
    for cls in sorted({c.task_class for c in floors.classes}):
        options = [c for c in floors.classes if c.task_class == cls]
        priced = [c for c in options if c.recommended and c.verdict(c.recommended).cost_per_usable is not None]
        best = min(priced, key=lambda c: c.verdict(c.recommended).cost_per_usable) if priced else None
        # nothing recommended: show the condition closest to a decision (a rung still undecided), skill first
        chosen = best or max(options, key=lambda c: (any(v.status == "undecided" for v in c.rungs),
                                                     c.condition == "skill"))
        v = chosen.verdict(chosen.recommended) if chosen.recommended else None
        top = chosen.verdict(largest)
        cpu = v.cost_per_usable if v else None
        top_cpu = top.cost_per_usable if top is not None else None  # always the largest: retried, no escalation
        vol = volumes.get(cls)
        note = f"{chosen.condition}: {chosen.note}"
        if not best:
            note += ("; more runs (replicas) may decide it" if "undecided" in chosen.note
                     else "; nothing to recommend: lower the target or add a larger rung")
        out.append(SummaryRow(
            task_class=cls, condition=chosen.condition if best else None, recommended=chosen.recommended,
            floor=chosen.floor, floor_status=chosen.floor_status, cost_per_usable=cpu,
            usable_rate=v.stats.usable_rate if v else None, largest=largest, largest_cost_per_usable=top_cpu,
            volume=vol, monthly_cost=None if vol is None or cpu is None else vol * cpu,
            monthly_cost_largest=None if vol is None or top_cpu is None else vol * top_cpu,
            first_time=chosen.first_time, note=note))
    return out
