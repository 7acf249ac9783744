"""Render a sizing report's content as tables shared by the HTML page and the Markdown file.

Each table is built once (`tables(data)`) as headers plus rows of formatted strings, so `index.html` and
`report.md` always show the same numbers. Formatting: scores with one decimal, dollars with four, shares as
whole percentages (`fmt_*` below, also used by the tests that recompute the tables with SQL).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any


def fmt_score(x: float | None) -> str:
    """A 0-100 score with one decimal, '-' when missing."""
    return "-" if x is None else f"{x:.1f}"


def fmt_usd(x: float | None) -> str:
    """Dollars with four decimals, or three significant digits below a cent ($0.000512)."""
    if x is None:
        return "-"
    return f"${x:,.{_decimals(x)}f}"


def _decimals(x: float) -> int:
    import math

    return 4 if x == 0 or abs(x) >= 0.01 else max(4, 2 - math.floor(math.log10(abs(x))))


def fmt_month(x: float | None) -> str:
    """Monthly dollars with two decimals."""
    return "-" if x is None else f"${x:,.2f}"


def fmt_share(x: float | None) -> str:
    """A 0-1 share as a whole percentage."""
    return "-" if x is None else f"{100 * x:.0f}%"


def fmt_delta(x: float | None, kind: str = "score") -> str:
    """A signed difference (score points, dollars, or percentage points)."""
    if x is None:
        return "-"
    if kind == "usd":
        return f"{'+' if x >= 0 else '-'}{fmt_usd(abs(x))}"
    if kind == "share":
        return f"{100 * x:+.0f} pts"
    return f"{x:+.1f}"


@dataclass
class Table:
    """A titled table of formatted cells."""

    key: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


def _pair(base: dict | None, skill: dict | None, col: str, f) -> str:
    a = f(base[col]) if base else "-"
    if skill is None:
        return a
    return f"{a} -> {f(skill[col])}"


def summary_table(data) -> Table:
    """The manager summary: per class the recommended rung, floor, cost per usable result, monthly costs."""
    rows = []
    for s in data.summary:
        rec = f"{s.recommended} ({s.condition})" if s.recommended else "none clears the target"
        saving = None
        if s.monthly_cost is not None and s.monthly_cost_largest:
            saving = 1 - s.monthly_cost / s.monthly_cost_largest
        rows.append([s.task_class, rec, f"{s.floor or 'none'} ({s.floor_status})", fmt_usd(s.cost_per_usable),
                     fmt_share(s.usable_rate), "-" if s.volume is None else f"{s.volume:,}",
                     fmt_month(s.monthly_cost), fmt_month(s.monthly_cost_largest),
                     fmt_share(saving), s.first_time or "-", s.note])
    largest = data.rung_order[-1] if data.rung_order else "largest"
    return Table("summary", "Summary", ["class", "recommended", "floor", "$ per usable result", "usable rate",
                                        "usable results / month", "monthly cost",
                                        f"monthly cost, always {largest}", "saving", "if usable first time",
                                        "note"], rows,
                 "Cost per usable result counts retries and escalation; monthly cost = volume x cost per usable "
                 "result.")


def rung_table(data) -> Table:
    """The background.md-style table: per rung, baseline -> with skill."""
    by = {(r["rung"], r["condition"]): r for r in data.rung_table}
    rows = []
    for rung in data.rung_order:
        b, s = by.get((rung, "baseline")), by.get((rung, "skill"))
        rows.append([rung, _pair(b, s, "goal_completion", fmt_score), _pair(b, s, "instruction_following", fmt_score),
                     _pair(b, s, "overall", fmt_score), _pair(b, s, "usd_per_task", fmt_usd),
                     _pair(b, s, "near_zero_share", fmt_share), _pair(b, s, "usable_share", fmt_share),
                     _pair(b, s, "runs", str), _pair(b, s, "unscored", str)])
    scope = (f"the {data.paired_tasks} tasks that have a skill, each run with and without it" if data.paired_tasks
             else "every task (no task has a skill)")
    return Table("rungs", "Per rung (baseline -> with skill)",
                 ["rung", "goal completion", "instruction following", "overall", "$/task",
                  f"near-zero share (overall < {data.settings.near_zero:g})",
                  f"usable share (overall >= {data.settings.bar:g})", "runs", "unscored"], rows,
                 f"Over {scope}. Means over scored runs; $/task over every run (unscored runs cost money too). "
                 "The per-class tables below use every task.")


def lift_table(data) -> Table:
    """The skill's lift per rung (with skill minus baseline)."""
    rows = [[r["rung"], fmt_delta(r["goal_completion"]), fmt_delta(r["instruction_following"]),
             fmt_delta(r["overall"]), fmt_delta(r["usd_per_task"], "usd"), fmt_delta(r["near_zero_share"], "share")]
            for r in data.lift]
    return Table("lift", "The skill's lift per rung", ["rung", "goal completion", "instruction following", "overall",
                                                       "$/task", "near-zero share"], rows)


def floor_tables(data) -> list[Table]:
    """One table per class and condition: each rung's statistics, money and verdict."""
    out = []
    for cf in data.floors.classes:
        rows = []
        for v in cf.rungs:
            c = v.stats
            lo, hi = c.interval
            rate = "-" if c.usable_rate is None else f"{fmt_share(c.usable_rate)} ({fmt_share(lo)}-{fmt_share(hi)})"
            rows.append([c.rung, str(c.runs), str(c.unscored), rate, fmt_share(c.near_zero_rate),
                         fmt_share(c.nonconvergence_rate), fmt_score(c.mean_if), fmt_score(c.mean_tc),
                         fmt_score(c.mean_overall), f"{fmt_score(c.turns_success)} / {fmt_score(c.turns_failure)}",
                         fmt_usd(c.cost_per_attempt), fmt_usd(v.cost_per_usable),
                         "-" if v.points_per_dollar is None else f"{v.points_per_dollar:,.0f}",
                         f"{v.status}: {v.reason}"])
        out.append(Table(f"floor-{cf.task_class}-{cf.condition}",
                         f"{cf.task_class} ({cf.condition}): floor {cf.floor or 'none'} ({cf.floor_status}), "
                         f"recommended {cf.recommended or '-'}",
                         ["rung", "runs", "unscored", "usable rate (interval)", "near-zero", "non-converged", "IF",
                          "TC", "overall", "turns usable / failed", "$/attempt", "$/usable result", "points/$",
                          "verdict"], rows, cf.note))
    return out


def gap_table(data, limit: int = 60) -> Table:
    """Tasks a larger rung passes while a smaller one is near zero."""
    rows = [[g["task_class"], g["task_id"], g["condition"], f"{g['smaller']} {fmt_score(g['smaller_overall'])}",
             f"{g['larger']} {fmt_score(g['larger_overall'])}"] for g in data.gaps[:limit]]
    more = f" Showing {limit} of {len(data.gaps)}." if len(data.gaps) > limit else ""
    pairs = {}
    for g in data.gaps:
        pairs[(g["smaller"], g["larger"])] = pairs.get((g["smaller"], g["larger"]), 0) + 1
    counts = "; ".join(f"{b} passes, {a} near zero: {n}" for (a, b), n in pairs.items())
    return Table("gaps", f"Tasks a rung passes while the next smaller rung is near zero ({len(data.gaps)})",
                 ["class", "task", "condition", "smaller rung (mean overall)", "larger rung (mean overall)"], rows,
                 f"{counts + '. ' if counts else ''}Per task and condition, mean overall over its replicas.{more}")


def unscored_table(data) -> Table:
    """Unscored runs by rung, condition, reason and stop reason."""
    rows = [[u["rung"], u["condition"], u["reason"], u["stop_reason"], str(u["runs"]),
             ", ".join(u["tasks"][:8]) + (" ..." if len(u["tasks"]) > 8 else "")] for u in data.unscored]
    total = sum(u["runs"] for u in data.unscored)
    return Table("unscored", f"Unscored runs ({total}, left out of every rate)",
                 ["rung", "condition", "reason", "stop reason", "runs", "tasks"], rows)


def settings_rows(data) -> list[tuple[str, str]]:
    """The settings every number depends on."""
    s = data.settings
    return [("usable bar", f"overall >= {s.bar:g}"), ("near-zero", f"overall < {s.near_zero:g}"),
            ("target usable rate", fmt_share(s.target)),
            ("confidence", f"{s.confidence:.0%} two-sided Wilson interval"),
            ("attempts per rung (k)", str(s.k)),
            ("verifier", f"false accept {s.false_accept:g}, false reject {s.false_reject:g}")]


def provenance_rows(data) -> list[tuple[str, str]]:
    """Where the numbers come from."""
    p = data.provenance
    return [("suite", data.suite), ("suite hashes", ", ".join(p["suite_hashes"])),
            ("ladders", ", ".join(f"{l['ladder_name']} {l['ladder_hash'][:16]}" for l in p["ladders"])),
            ("run kinds", ", ".join(p["run_kinds"] or [])),
            ("advisor versions of runs", ", ".join(v or "?" for v in p["run_advisor_versions"])),
            ("report advisor version", p["report_advisor_version"]), ("first run", str(p["first_run"])),
            ("last run", str(p["last_run"])), ("generated", p["generated_at"]), ("store", p["store"])]


def tables(data) -> list[Table]:
    """Every table of the report, in page order."""
    return [summary_table(data), rung_table(data), lift_table(data), *floor_tables(data), gap_table(data),
            unscored_table(data)]


BANNER = ("SIMULATED: {n} of these runs come from stand-in rungs (CPU simulations), not real models. "
          "The figures show the calibrated shape, not measured model quality.")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#222;
padding:0 16px}
h1{font-size:24px;margin-bottom:4px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px} th,td{border:1px solid #ccc;padding:3px 7px;
text-align:left;vertical-align:top} th{background:#f3f3f3} td.num{text-align:right;white-space:nowrap}
.banner{background:#b00020;color:#fff;font-weight:bold;padding:10px 14px;border-radius:4px;margin:8px 0 16px}
.caption{color:#555;font-size:12px;margin:2px 0 10px} img{max-width:100%;border:1px solid #eee}
.kv td:first-child{font-weight:600;background:#fafafa}
"""


def _table_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        cells = "".join(f"<td>{html.escape(c)}</td>" for c in row)
        body.append(f"<tr>{cells}</tr>")
    rows = "".join(body) or f'<tr><td colspan="{len(t.headers)}">none</td></tr>'
    cap = f'<p class="caption">{html.escape(t.caption)}</p>' if t.caption else ""
    return f'<h2 id="{html.escape(t.key)}">{html.escape(t.title)}</h2><table><tr>{head}</tr>{rows}</table>{cap}'


def _kv_html(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<h2>{html.escape(title)}</h2><table class=\"kv\">{body}</table>"


def to_html(data, images: dict[str, bytes], title: str) -> str:
    """The self-contained HTML page: inline CSS and base64 PNG figures, no scripts, no external resources."""
    ts = tables(data)
    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="caption">Sizing report for suite {html.escape(data.suite)}: {data.floors.runs} runs, '
             f'{data.floors.unscored} unscored.</p>']
    if data.simulated:
        banner = html.escape(BANNER.format(n=data.simulated_runs))
        parts.append(f'<div class="banner" id="simulated-banner">{banner}</div>')
    parts.append(_table_html(ts[0]))
    captions = {"scores": "Score distributions per rung: runs are mostly near-perfect or near-total failures.",
                "frontier": "Cost per attempt vs usable rate per class (error bars: the confidence interval).",
                "turns": "Turns by outcome: how long runs that pass and runs that fail take."}
    figs = {"scores": "Score distributions", "frontier": "Cost vs usable rate (the frontier)",
            "turns": "Turns by outcome"}
    parts += [_table_html(ts[1]), _table_html(ts[2])]
    for key in ("scores", "frontier", "turns"):
        if key in images:
            b64 = base64.b64encode(images[key]).decode()
            parts.append(f'<h2>{figs[key]}</h2><img id="fig-{key}" alt="{html.escape(captions[key])}" '
                         f'src="data:image/png;base64,{b64}"><p class="caption">{html.escape(captions[key])}</p>')
    parts += [_table_html(t) for t in ts[3:]]
    parts.append(_kv_html("Settings", settings_rows(data)))
    parts.append(_kv_html("Provenance", provenance_rows(data)))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{html.escape(title)}</title><style>{_CSS}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")


def _table_md(t: Table) -> str:
    def cell(c: str) -> str:
        return c.replace("|", "\\|").replace("\n", " ")
    lines = [f"## {t.title}", "", "| " + " | ".join(cell(h) for h in t.headers) + " |",
             "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows] or ["| none |"]
    if t.caption:
        lines += ["", t.caption]
    return "\n".join(lines) + "\n"


def to_markdown(data, title: str, image_files: dict[str, str] | None = None) -> str:
    """The Markdown report: the same tables as the HTML page."""
    out = [f"# {title}", ""]
    if data.simulated:
        out += [f"> **{BANNER.format(n=data.simulated_runs)}**", ""]
    out += [f"Suite {data.suite}: {data.floors.runs} runs, {data.floors.unscored} unscored.", ""]
    for t in tables(data):
        out.append(_table_md(t))
    for key, path in (image_files or {}).items():
        out.append(f"![{key}]({path})\n")
    out.append("## Settings\n")
    out += [f"- {k}: {v}" for k, v in settings_rows(data)]
    out.append("\n## Provenance\n")
    out += [f"- {k}: {v}" for k, v in provenance_rows(data)]
    return "\n".join(out) + "\n"


def to_json(data) -> dict[str, Any]:
    """`floors.json`: raw numbers (not formatted) behind every table, settings and provenance."""
    from dataclasses import asdict

    return {"schema": "advisor.report/1", "suite": data.suite, "simulated": data.simulated,
            "simulated_runs": data.simulated_runs, "settings": asdict(data.settings),
            "summary": [asdict(s) for s in data.summary], "rung_table": data.rung_table,
            "paired_tasks": data.paired_tasks, "lift": data.lift,
            "floors": data.floors.to_dict(), "gaps": data.gaps, "unscored": data.unscored,
            "provenance": data.provenance, "rung_order": data.rung_order}
