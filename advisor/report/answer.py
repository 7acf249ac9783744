"""The terminal's last word: a compact per-class table (rich) that `advisor probe` and `advisor floors` end with.

One line per class: the rung to run (and with or without a skill), the floor, the usable rate with its
interval and run count, the cost per usable result, and where the full report is.
"""

from __future__ import annotations

from typing import Any

from advisor.money import column_scale, usd


def answer_rows(dec, settings) -> tuple[list[list[str]], str]:
    """The table's rows (formatted) and the unit of its money column."""
    scale = column_scale([c.chosen.cost_per_usable for c in dec.classes])
    rows = []
    for c in dec.classes:
        o = c.chosen
        run = "none clears the target" if o.rung is None else (
            f"{o.rung} {'+ skill' if o.condition == 'skill' else '(no skill)'}")
        if o.first_time and o.rung and o.first_time != o.rung:
            run += f" (first time: {o.first_time})"
        floor = (o.floor + ("*" if o.floor_status == "provisional" else "")) if o.floor else "none"
        if o.usable_rate is None:
            rate = "-"
        else:
            lo, hi = o.interval
            rate = f"{100 * o.usable_rate:.0f}% {100 * lo:.0f}-{100 * hi:.0f}% n={o.scored}"
            if o.rung is None:
                rate = f"best {o.best_rung}: {rate}"
        cost = usd(None if o.cost_per_usable is None else o.cost_per_usable * scale)
        rows.append([c.task_class, run, floor, rate, cost])
    return rows, "per 1k usable results" if scale != 1 else "per usable result"


def answer_table(dec, settings, report: Any = None):
    """A rich Table of the per-class answer; its caption names the report path when there is one."""
    from rich import box
    from rich.table import Table

    rows, unit = answer_rows(dec, settings)
    title = "The answer, per class" + (" [SIMULATED]" if dec.simulated else "")
    notes = [f"$: cost {unit}, retries and escalation included"]
    if any(c.chosen.floor_status == "provisional" for c in dec.classes):
        notes.append("* provisional floor: a smaller rung is still undecided")
    if any(c.chosen.rung is None for c in dec.classes):
        notes.append("none: no rung clears the target yet (best rung shown)")
    notes.append(f"report: {report}" if report else "no report written (`advisor report` writes one)")
    caption = "\n".join(notes)
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)
    for col in ("class", "run", "floor", f"usable ({settings.confidence:.0%} CI)\nruns", "$"):
        t.add_column(col, overflow="fold", justify="right" if col.startswith("$") else "left")
    for row in rows:
        t.add_row(*row)
    return t


def print_answer(floors, report: Any = None, console: Any = None) -> None:
    """Print the per-class answer of a `FloorReport` (to `console`, default stdout)."""
    from rich.console import Console

    from advisor.report.decision import decide_floors

    console = console or Console()
    console.print(answer_table(decide_floors(floors), floors.settings, report))
