"""The probe summary: per rung, task completion (TC), IF, overall, $/task, near-zero share, baseline -> skill.

The rung table compares the two conditions on the **paired** tasks (those with a skill document, run both
ways), as the published table does; a second table gives, per task class and rung, mean overall and usable
share per condition (all tasks for baseline), which shows where each rung's floor is. Unscored runs (NULL
scores, e.g. backend errors) are counted apart and left out of every mean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from advisor.money import column_scale, per_label, usd
from advisor.records import RunKind
from advisor.scores import Thresholds


@dataclass
class Cell:
    """Aggregates of a set of runs (means over scored runs)."""

    runs: int = 0
    unscored: int = 0
    tc: float | None = None
    if_: float | None = None
    overall: float | None = None
    scenario: float | None = None  #: mean of the source scenario's own weighted score (imported suites)
    usable: float | None = None  #: share of scored runs with overall >= bar
    near_zero: float | None = None  #: share of scored runs with overall < near_zero
    cost_per_task: float | None = None  #: mean model cost of a run, USD (every run, scored or not)
    turns: float | None = None  #: mean model calls per run
    stop_reasons: dict[str, int] | None = None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cell(rows: Iterable[dict[str, Any]], thresholds: Thresholds = Thresholds()) -> Cell:
    """Aggregate stored run rows into a `Cell`."""
    rows = list(rows)
    scored = [r for r in rows if not r["unscored"] and r["overall"] is not None]
    reasons: dict[str, int] = {}
    for r in rows:
        reasons[r["stop_reason"]] = reasons.get(r["stop_reason"], 0) + 1
    return Cell(
        runs=len(rows), unscored=len(rows) - len(scored),
        tc=_mean([r["tc_score"] for r in scored]), if_=_mean([r["if_score"] for r in scored]),
        overall=_mean([r["overall"] for r in scored]),
        scenario=_mean([r["scenario_score"] for r in scored if r.get("scenario_score") is not None]),
        usable=_mean([1.0 if thresholds.usable(r["overall"]) else 0.0 for r in scored]),
        near_zero=_mean([1.0 if thresholds.is_near_zero(r["overall"]) else 0.0 for r in scored]),
        cost_per_task=_mean([r["cost_usd"] for r in rows]), turns=_mean([r["turns"] for r in rows]),
        stop_reasons=reasons)


def summarize(store: Any, *, suite_hash: str, ladder_hash: str, ladder: Any,
              thresholds: Thresholds = Thresholds()) -> dict[str, Any]:
    """The summary of the probe runs of one suite on one ladder, as a JSON-ready dict."""
    rows = store.runs(kind=RunKind.PROBE, suite_hash=suite_hash, ladder_hash=ladder_hash)
    paired_tasks = {r["task_id"] for r in rows if r["condition"] == "skill"}
    classes = sorted({r["task_class"] for r in rows})
    out: dict[str, Any] = {
        "suite": rows[0]["suite_name"] if rows else None, "ladder": ladder.name, "suite_hash": suite_hash,
        "ladder_hash": ladder_hash, "simulated": any(r["simulated"] for r in rows) or bool(ladder.simulated),
        "runs": len(rows), "unscored": sum(bool(r["unscored"]) for r in rows),
        "bar": thresholds.bar, "near_zero": thresholds.near_zero, "paired_tasks": len(paired_tasks),
        "rungs": [], "classes": [],
    }
    for rung in ladder.rungs:
        mine = [r for r in rows if r["rung"] == rung.name]
        out["rungs"].append({
            "rung": rung.name,
            "all_baseline": asdict(cell((r for r in mine if r["condition"] == "baseline"), thresholds)),
            "paired_baseline": asdict(cell((r for r in mine if r["condition"] == "baseline"
                                            and r["task_id"] in paired_tasks), thresholds)),
            "paired_skill": asdict(cell((r for r in mine if r["condition"] == "skill"), thresholds)),
        })
    for cls in classes:
        for rung in ladder.rungs:
            mine = [r for r in rows if r["rung"] == rung.name and r["task_class"] == cls]
            out["classes"].append({
                "class": cls, "rung": rung.name,
                "baseline": asdict(cell((r for r in mine if r["condition"] == "baseline"), thresholds)),
                "skill": asdict(cell((r for r in mine if r["condition"] == "skill"), thresholds)),
            })
    return out


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _usd(x: float | None, scale: int) -> str:
    return usd(None if x is None else x * scale)


def _pair(a: dict, b: dict, key: str, fmt: str = "{:.1f}") -> str:
    return f"{_num(a[key], fmt)} -> {_num(b[key], fmt)}"


def render(summary: dict[str, Any], console: Any = None) -> None:
    """Print the summary tables with rich (to `console`, default stdout), each within 80 columns: per rung one
    row per condition (tasks with a skill, or every task when none has one), then per class and condition."""
    # heavy dependency, imported on use: rich
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if summary["simulated"]:
        console.print("[bold yellow]SIMULATED[/]: stand-in rungs answered (a seeded parametric agent model, "
                      "docs/standin.md). These figures demonstrate the method, not the real models.")
    console.print(f"suite {summary['suite']} on ladder {summary['ladder']}: {summary['runs']} runs, "
                  f"{summary['unscored']} unscored (left out of every score)")
    pct = "{:.0%}"
    sim = " [SIMULATED]" if summary["simulated"] else ""
    paired = summary["paired_tasks"]
    conditions = [("baseline", "paired_baseline"), ("skill", "paired_skill")] if paired else [("baseline",
                                                                                                "all_baseline")]
    scope = f"the {paired} tasks with a skill, without / with it" if paired else "every task (none has a skill)"
    t = Table(title=f"Per rung: {scope}{sim}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    scenario = any(row[k].get("scenario") is not None for row in summary["rungs"] for _, k in conditions)
    scale = column_scale([row[k]["cost_per_task"] for row in summary["rungs"] for _, k in conditions])
    money = "$/1k\ntasks" if scale == 1000 else f"$\n{per_label('task', scale)}"
    for col in ("rung", "skill", "TC", "IF", "overall", *(["source\nscore"] if scenario else []), money,
                "near-\nzero", "usable", "turns"):
        t.add_column(col, justify="left" if col in ("rung", "skill") else "right")
    for row in summary["rungs"]:
        for n, (cond, key) in enumerate(conditions):
            c = row[key]
            t.add_row(row["rung"] if n == 0 else "", "with" if cond == "skill" else "no",
                      _num(c["tc"]), _num(c["if_"]), _num(c["overall"]),
                      *([_num(c["scenario"])] if scenario else []), _usd(c["cost_per_task"], scale),
                      _num(c["near_zero"], pct), _num(c["usable"], pct), _num(c["turns"]))
    console.print(t)
    console.print(f"TC task completion, IF instruction following (0-100); overall = (4 IF + 3 TC) / 7; usable: "
                  f"overall >= {summary['bar']:g}; near-zero: overall < {summary['near_zero']:g}"
                  + ("; source score: the imported scenario's own weighted score" if scenario else ""),
                  markup=False, highlight=False)
    rungs = [r["rung"] for r in summary["rungs"]]
    c = Table(title=f"Per class: mean overall (usable share){sim}", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)
    c.add_column("class")
    c.add_column("skill")
    for name in rungs:
        c.add_column(name, justify="right", overflow="fold")
    by_class: dict[str, dict[str, dict]] = {}
    for row in summary["classes"]:
        by_class.setdefault(row["class"], {})[row["rung"]] = row
    for cls, per_rung in by_class.items():
        for cond in ("baseline", "skill"):
            if cond == "skill" and not any(r[cond]["runs"] for r in per_rung.values()):
                continue
            cells = []
            for name in rungs:
                row = per_rung.get(name)
                cell_ = row[cond] if row is not None else None
                cells.append("-" if not cell_ or not cell_["runs"] else
                             f"{_num(cell_['overall'], '{:.0f}')} ({_num(cell_['usable'], pct)})")
            c.add_row(cls if cond == "baseline" else "", "with" if cond == "skill" else "no", *cells)
    console.print(c)
