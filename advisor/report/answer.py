"""The answer, per class: the rows `advisor probe`, `advisor floors` and the report open with (one renderer).

One row per class: the recommended plan (rungs, attempts per rung, with or without the skill), its usable rate
with the interval from the per-rung posteriors, $ per 1k usable results, the floor and the rung to use when
results must be usable the first time, and one next step where the class has no plan. `answer_rows` formats
them; `answer_table` lays them out for the terminal (rich); `advisor.report.render.decision_table` puts the
same rows at the top of the report.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from advisor.money import PER_1K_USABLE, per_1k_usable
from advisor.report.decision import decide_floors

#: The answer's columns, in order (the report adds its monthly columns after them).
ANSWER_HEADERS = ["class", "plan", "usable", "$", "single attempt", "next step"]


def condition_name(condition: str) -> str:
    """A condition as every output names it: "with skill" or "no skill" (the store's values are skill and
    baseline)."""
    return "with skill" if condition == "skill" else "no skill"


def _plan_cell(o) -> str:
    cond = condition_name(o.condition)
    if o.plan is not None:
        return f"{o.plan} ({cond})"
    if o.best_plan is not None:
        return f"none clears yet; best: {o.best_plan} ({cond})"
    return "none clears the target"


def _usable_cell(o) -> str:
    if o.plan_usable is None:
        return "-"
    lo, hi = o.plan_interval
    return f"{100 * o.plan_usable:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]"


def _floor_cell(o) -> str:
    floor = (o.floor + ("*" if o.floor_status == "provisional" else "")) if o.floor else "none"
    return floor if not o.first_time or o.first_time == o.floor else f"{floor} ({o.first_time})"


def plan_phrase(plan) -> str:
    """The plan of one class and condition in the answer's words: "super-120b x2, 94% [82-98]", or
    "none clears yet (best: ...)"."""
    if plan is None:
        return "none (no plan computed)"
    shown = plan.plan or plan.best
    if shown is None:
        return "none (no usable run yet)"
    lo, hi = shown.interval
    text = f"{shown.describe()}, {100 * shown.usable:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]"
    return text if plan.plan is not None else f"none clears yet (best: {text})"


def rung_verdict(v, in_plan: dict[str, int]) -> str:
    """A rung's verdict as the plan sees it (`in_plan`: rung -> attempts of the class's plan): a rung the plan uses
    is never "below" (one attempt is not what the plan relies on); the others keep the single-attempt verdict."""
    if v.stats.rung in in_plan:
        return f"in the plan (x{in_plan[v.stats.rung]}); one attempt alone: {v.reason}"
    return f"{v.status}: {v.reason}"


def class_note(cf, in_plan: dict[str, int]) -> str:
    """A class's closing note; with a plan that clears, what one attempt cannot do is said as what the plan does."""
    if in_plan and cf.floor is None:
        return "one attempt is not enough on any rung; the plan's retries under the class's verifier clear the target"
    return cf.note


def single_attempt_phrase(cf) -> str:
    """The floor of one class and condition as the answer's "single attempt" column says it."""
    if cf.floor is None:
        return "no rung clears the target"
    first = f"; usable the first time: {cf.first_time}" if cf.first_time and cf.first_time != cf.floor else ""
    return f"floor {cf.floor} ({cf.floor_status}){first}"


def answer_rows(dec) -> tuple[list[list[str]], str]:
    """The answer's rows (formatted, `ANSWER_HEADERS` order; skipped classes last) and the unit of its money
    column (always per 1k usable results, as everywhere)."""
    rows = []
    for c in dec.classes:
        o = c.chosen
        cost = per_1k_usable(o.cost_per_usable)
        rows.append([c.task_class, _plan_cell(o), _usable_cell(o), cost, _floor_cell(o),
                     "-" if o.plan is not None and not o.next_step else (o.next_step or "-")])
    for k in dec.skipped:
        rows.append([k.task_class, f"skipped: {k.short}", "-", "-", "-", f"skipped: {k.reason}; to probe it: {k.fix}"])
    return rows, PER_1K_USABLE


def answer_notes(dec, settings) -> list[str]:
    """What the columns mean (printed under the terminal table and the report's)."""
    verifiers = sorted({c.chosen.verifier for c in dec.classes if c.chosen.verifier})
    notes = [f"plan: the recommendation: rungs in order, xN attempts each while the verifier rejects; usable: its "
             f"end-to-end usable rate [{settings.confidence:.0%} interval]; it clears when the lower end >= the "
             f"target {settings.target:.0%}; $: per 1,000 usable results, retries included",
             f"single attempt: the smallest rung whose one attempt clears {settings.target:.0%} without retries (the "
             "floor; * provisional; in brackets the rung when results must be usable the first time); none: no "
             "rung does"]
    notes += [f"assumed: {v}" for v in verifiers]
    return notes


def answer_table(dec, settings, report: Any = None):
    """The per-class answer for the terminal: a rich Table of the rows without the next step, within 80 columns
    (`answer_lines` gives the next steps, the notes and the report path)."""
    # heavy dependency, imported on use: rich
    from rich import box
    from rich.table import Table

    rows, unit = answer_rows(dec)
    title = "The answer, per class" + (" [SIMULATED]" if dec.simulated else "")
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ANSWER_HEADERS[:-1]:
        header = {"$": "$/1k\nusable", "single attempt": "single\nattempt"}.get(col, col)
        t.add_column(header, overflow="fold", justify="right" if col == "$" else "left",
                     no_wrap=col in ("usable", "$"), min_width=20 if col == "plan" else None)
    for row in rows:
        t.add_row(*row[:-1])
    return t


def advisor_command() -> str:
    """How to run advisor from here: ``advisor`` when that name on PATH is this advisor (its venv is active), else
    the path of this advisor's script (``.venv/bin/advisor`` from the checkout)."""
    script = Path(sys.executable).parent / "advisor"
    found = shutil.which("advisor")
    if found is not None and Path(found).resolve() == script.resolve():
        return "advisor"
    if not script.exists():
        return "advisor"
    rel = os.path.relpath(script)
    return rel if not rel.startswith("..") else str(script)


def answer_lines(dec, settings, report: Any = None, probe_args: str = "") -> list[str]:
    """What the terminal prints under the answer table: next steps, notes, the report path. `probe_args` (e.g.
    ``--store other.duckdb``) go into the `advisor probe` commands the next steps name, so they run as printed."""
    rows, _ = answer_rows(dec)
    lines = [f"next for {row[0]}: {row[-1]}" for row in rows if row[-1] != "-"]
    if probe_args:
        lines = [line.replace("`advisor probe", f"`advisor probe {probe_args}") for line in lines]
    command = advisor_command()
    if command != "advisor":  # the venv is not active: the commands say where advisor is, so they run as printed
        lines = [line.replace("`advisor ", f"`{command} ") for line in lines]
    lines += answer_notes(dec, settings)
    lines.append(f"report: {report}" if report else "no report written (`advisor report` writes one)")
    return lines


def print_answer(floors, report: Any = None, console: Any = None, probe_args: str = "") -> None:
    """Print the per-class answer of a `FloorReport` (to `console`, default stdout); `probe_args` as for
    `answer_lines`."""
    # heavy dependency, imported on use: rich
    from rich.console import Console

    console = console or Console()
    dec = decide_floors(floors)
    console.print(answer_table(dec, floors.settings, report))
    for line in answer_lines(dec, floors.settings, report, probe_args):
        console.print(line, markup=False, highlight=False)
