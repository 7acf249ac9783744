"""The report's tables and cell formatters, shared by the page, the Markdown file and the report's sections.

A `Table` is headers plus rows of already formatted strings; `table_md` writes one as a Markdown section.
Formatting: scores with one decimal, shares as whole percentages, money through `advisor.money`.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.money import usd_delta
from advisor.shares import interval, share


def fmt_score(x: float | None) -> str:
    """A 0-100 score with one decimal, '-' when missing."""
    return "-" if x is None else f"{x:.1f}"


fmt_share = share  #: a 0-1 share as a whole percentage (`advisor.shares.share`)
fmt_interval = interval  #: an interval of shares, "88-100%" (`advisor.shares.interval`)


def fmt_delta(x: float | None, kind: str = "score") -> str:
    """A signed difference (score points, dollars, or percentage points)."""
    if x is None:
        return "-"
    if kind == "usd":
        return usd_delta(x)
    if kind == "share":
        return f"{100 * x:+.0f} pts"
    return f"{x:+.1f}"


def plural(n: int, word: str) -> str:
    """ "1 run", "300 runs"."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


@dataclass
class Table:
    """A titled table of formatted cells."""

    key: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    simulated: bool = False  #: its figures come from stand-in runs (marked SIMULATED)


def table_md(t: Table) -> str:
    """One table as a Markdown section (title, header row, rows, caption)."""

    def cell(c: str) -> str:
        return c.replace("|", "\\|").replace("\n", " ")
    sim = " (SIMULATED)" if t.simulated else ""
    lines = [f"## {t.title}{sim}", "", "| " + " | ".join(cell(h) for h in t.headers) + " |",
             "|" + "---|" * len(t.headers)]
    if not t.rows:  # no table without rows: a header with no body reads as a malformed table
        lines = [f"## {t.title}{sim}", "", "None."]
    else:
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", t.caption]
    return "\n".join(lines) + "\n"
