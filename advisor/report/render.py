"""Render a sizing report's content as tables shared by the HTML page, the Markdown file and `floors.json`.

Each table is built once (`tables(data, decision)`) as headers plus rows of formatted strings, so `index.html`
(a jinja2 template with autoescape, `templates/report.html.j2`) and `report.md` always show the same numbers.
Formatting: scores with one decimal, shares as whole percentages, money through `advisor.money` (significant
figures; a column of per-item figures under a cent is shown per 1k items, and its header says so).
"""

from __future__ import annotations

import base64
from dataclasses import asdict
from typing import Any, Callable

from advisor.plans import MAX_ATTEMPTS
from advisor.money import PER_1K_USABLE, column_scale, compact, per_1k_usable, per_label, usd
from advisor.report.analysis import advice_rows
from advisor.report.answer import (ANSWER_HEADERS, answer_notes, answer_rows, class_note, condition_name,
                                   plan_phrase, rung_verdict, single_attempt_phrase)
from advisor.report.decision import LARGE_LIFT, to_dict
from advisor.report.glossary import glossary
from advisor.report.live import drift_line, live_markdown, live_tables
from advisor.report.savings import savings_intro, savings_markdown, savings_tables
from advisor.report.policies import policies_markdown, policies_view
from advisor.report.tables import Table, fmt_delta, fmt_interval, fmt_score, fmt_share, plural, table_md


def _scaled(values: list[float | None], unit: str) -> tuple[Callable[[float | None], str], str]:
    """A formatter for a money column and its unit label ("per task" or "per 1k tasks")."""
    scale = column_scale(values)
    return (lambda x: usd(None if x is None else x * scale)), per_label(unit, scale)


# ------------------------------------------------------------------------------------------ the first screen
def decision_table(data, dec) -> Table:
    """The first screen: the answer per class (the same rows as the terminal's, `advisor.report.answer`), then
    what it costs a month against always running the largest rung."""
    rows, unit = answer_rows(dec)
    largest = data.rung_order[-1] if data.rung_order else "the largest rung"
    for row, c in zip(rows, dec.classes):
        vol = f"{c.volume:,}" + (" (assumed)" if c.volume_assumed else "")
        row += [vol, usd(c.monthly), usd(c.monthly_largest)]
    for row in rows[len(dec.classes):]:  # skipped classes: no runs, no money
        row += ["-", "-", "-"]
    headers = [f"$ {unit}" if h == "$" else h for h in ANSWER_HEADERS]
    return Table("decision", "The answer, per class", headers + ["usable results / month", "$ / month",
                                                                  f"$ / month, always {largest}"], rows,
                 " ".join(n[0].upper() + n[1:] + "." for n in answer_notes(dec, data.settings))
                 + " The plan is the cheaper per usable result of the two conditions; cost per usable result counts "
                 "retries and escalation (see the glossary). Per month = volume x cost per usable result.",
                 simulated=dec.simulated)


def total_line(dec, largest: str) -> str:
    """The total against always the largest rung."""
    if dec.total_monthly is None:
        return "Total: no class has a priced recommendation yet."
    saving = 1 - dec.total_monthly / dec.total_monthly_largest if dec.total_monthly_largest else None
    text = (f"Total: {usd(dec.total_monthly)}/month with these recommendations vs "
            f"{usd(dec.total_monthly_largest)}/month always running {largest}")
    if saving is not None:
        text += f" ({fmt_share(saving)} less)"
    if dec.incomplete_total:
        text += f"; left out (nothing clears): {', '.join(dec.incomplete_total)}"
    return text + "."


def volume_line(dec, classes: list[str]) -> str:
    """The stated volume assumption and how to change it (an example that works with this suite)."""
    assumed = [c.task_class for c in dec.classes if c.volume_assumed]
    example = classes[0] if classes else "CLASS"
    if not assumed:
        return "Volumes as given with --volume."
    return (f"Assumption: {dec.default_volume:,} usable results per month for "
            f"{'every class' if len(assumed) == len(dec.classes) else ', '.join(assumed)}. "
            f"To change it, write the report with `advisor report --volume {example}=20000/month`.")


def next_lines(dec, limit: int = 6) -> list[str]:
    """What to do next, most useful first (more runs before skills), at most `limit` plus a count of the rest."""
    order = {"skipped": 0, "more_runs": 1, "write_skill": 2, "larger_rung": 3, "keep_skill": 4}
    steps = sorted(dec.next_steps, key=lambda s: order.get(s.kind, 9))
    keep = [s for s in steps if s.kind == "keep_skill"]
    lines = [s.text for s in steps if s.kind != "keep_skill"]
    if keep:  # one line for every class whose skill carries it
        lifts = ", ".join(f"{s.task_class} +{100 * s.lift:.0f} on {s.rung}" for s in keep)
        lines.append(f"Keep the skill documents in the prompt and current: they lift the usable rate by "
                     f"{LARGE_LIFT * 100:.0f} points or more ({lifts}).")
    more = len(lines) - limit
    lines = lines[:limit]
    if more > 0:
        lines.append(f"... and {more} more (see floors.json, decision.next_steps)")
    return lines or ["Nothing pending: every recommendation is decided."]


# ------------------------------------------------------------------------------------------ the evidence
def rung_table(data) -> Table:
    """The background.md-style table: per rung, baseline -> with skill."""
    by = {(r["rung"], r["condition"]): r for r in data.rung_table}
    money, unit = _scaled([r["usd_per_task"] for r in data.rung_table], "task")
    rows = []
    for rung in data.rung_order:
        b, s = by.get((rung, "baseline")), by.get((rung, "skill"))
        rows.append([rung, _pair(b, s, "goal_completion", fmt_score), _pair(b, s, "instruction_following", fmt_score),
                     _pair(b, s, "overall", fmt_score), _pair(b, s, "usd_per_task", money),
                     _pair(b, s, "near_zero_share", fmt_share), _pair(b, s, "usable_share", fmt_share),
                     _pair(b, s, "runs", str), _pair(b, s, "unscored", str)])
    scope = (f"the {data.paired_tasks} tasks that have a skill, each run with and without it" if data.paired_tasks
             else "every task (no task has a skill)")
    return Table("rungs", "Per rung (baseline -> with skill)",
                 ["rung", "TC (task completion)", "IF (instruction following)", "overall", f"$ {unit}",
                  f"near-zero share (overall < {data.settings.near_zero:g})",
                  f"usable share (overall >= {data.settings.bar:g})", "runs", "unscored"], rows,
                 f"Over {scope}. Means over scored runs; $ per task over every run (unscored runs cost money too). "
                 "The per-class tables below use every task.", simulated=data.simulated)


def _pair(base: dict | None, skill: dict | None, col: str, f) -> str:
    a = f(base[col]) if base else "-"
    if skill is None:
        return a
    return f"{a} -> {f(skill[col])}"


def lift_table(data) -> Table:
    """The skill's lift per rung (with skill minus baseline)."""
    scale = column_scale([r["usd_per_task"] for r in data.lift])
    rows = [[r["rung"], fmt_delta(r["goal_completion"]), fmt_delta(r["instruction_following"]),
             fmt_delta(r["overall"]), fmt_delta(None if r["usd_per_task"] is None else r["usd_per_task"] * scale, "usd"),
             fmt_delta(r["near_zero_share"], "share")]
            for r in data.lift]
    return Table("lift", "The skill's lift per rung", ["rung", "TC", "IF", "overall", f"$ {per_label('task', scale)}",
                                                       "near-zero share"], rows, simulated=data.simulated)


def floor_tables(data) -> list[Table]:
    """One table per class and condition: each rung's statistics, money and verdict."""
    out = []
    plans = {(p.task_class, p.condition): p for p in data.floors.plans}
    for cf in data.floors.classes:
        plan = plans.get((cf.task_class, cf.condition))
        in_plan = {s.rung: s.attempts for s in (plan.plan.steps if plan is not None and plan.plan else ())}
        attempt, a_unit = _scaled([v.stats.cost_per_attempt for v in cf.rungs], "attempt")
        rows = []
        for v in cf.rungs:
            c = v.stats
            rate = "-" if c.usable_rate is None else f"{fmt_share(c.usable_rate)} ({fmt_interval(c.interval)})"
            rows.append([c.rung + (" (SIMULATED)" if c.simulated_runs else ""), str(c.runs), str(c.unscored), rate,
                         fmt_share(c.near_zero_rate), fmt_share(c.nonconvergence_rate), fmt_score(c.mean_if),
                         fmt_score(c.mean_tc), fmt_score(c.mean_overall),
                         f"{fmt_score(c.turns_success)} / {fmt_score(c.turns_failure)}",
                         attempt(c.cost_per_attempt), per_1k_usable(v.cost_per_usable) if c.usable else "",
                         compact(v.points_per_dollar), rung_verdict(v, in_plan)])
        heading = (f"{cf.task_class} ({condition_name(cf.condition)}): plan {plan_phrase(plan)}; "
                   f"single attempt: {single_attempt_phrase(cf)}")
        out.append(Table(f"floor-{cf.task_class}-{cf.condition}", heading,
                         ["model", "runs", "unscored", "usable in one attempt (interval)", "near-zero",
                          "does not finish", "instructions followed", "task completed", "overall",
                          "turns usable / failed", f"$ {a_unit}", f"$ {PER_1K_USABLE} from this model on",
                          "points/$", "verdict"], rows, class_note(cf, in_plan),
                         simulated=any(v.stats.simulated_runs for v in cf.rungs)))
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


def price_table(prices: list[dict[str, Any]]) -> Table:
    """Each rung's price and where it comes from (list price, proxy, or GPU-hour)."""
    rows = []
    for p in prices:
        price = p.get("price") or {}
        if price.get("basis") == "gpu_hour":
            cost = (f"{usd(price.get('usd_per_gpu_hour'))}/GPU-hour x {price.get('gpus')} GPU(s) / measured "
                    "throughput")
        else:
            cost = f"{usd(price.get('usd_per_m_input'))} in, {usd(price.get('usd_per_m_output'))} out per M tokens"
        rows.append([p["rung"], price.get("basis", "-"), cost, str(price.get("source") or "-"),
                     str(price.get("as_of") or "-")])
    return Table("prices", "Prices behind every dollar figure", ["rung", "basis", "price", "source", "as of"], rows,
                 "Token prices are published list prices (a rung without one uses the nearest rung's as a proxy, "
                 "as its source says). Self-hosting is priced instead per GPU-hour over measured throughput: set "
                 "price: {basis: gpu_hour, ...} in the ladder file and probe again.")


def settings_rows(data) -> list[tuple[str, str]]:
    """The settings every number depends on."""
    s = data.settings
    return [("usable bar", f"overall >= {s.bar:g}"), ("near-zero", f"overall < {s.near_zero:g}"),
            ("target usable rate", fmt_share(s.target)),
            ("confidence", f"{s.confidence:.0%} two-sided Wilson interval"),
            ("attempts per rung", f"a plan uses 1 to {MAX_ATTEMPTS} (shown as xN); the per-rung $ per usable "
                                  f"result from a rung assumes {s.k}"),
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


def tables(data, dec, prices: list[dict[str, Any]] | None = None) -> list[Table]:
    """Every table of the report, in page order: the decision first, then the evidence."""
    return [decision_table(data, dec), rung_table(data), lift_table(data), *floor_tables(data),
            gap_table(data), unscored_table(data), price_table(prices or [])]


BANNER = ("SIMULATED: {n} of these runs come from stand-in rungs (CPU simulations), not real models. "
          "The figures show the calibrated shape, not measured model quality.")

#: Figures in page order: (file stem, title, caption).
FIGURES = [
    ("frontier", "Cost vs usable rate: one attempt and the plan",
     "Per class: $ per 1k usable results against the usable rate with its interval. Hollow circles: each rung on "
     "one attempt (what holds without retries). Stars: the plan the answer recommends, its end-to-end usable rate "
     "with retries and escalation (filled when it clears the target, hollow for the best plan when none does). A "
     "rung without a single usable run has no cost per usable result and is not drawn."),
    ("scores", "Score distributions", "Runs are mostly near-perfect or near-total failures (bimodal)."),
    ("turns", "Turns by outcome", "How long runs that pass and runs that fail take."),
]


def _view(data, dec, title: str, prices: list[dict[str, Any]] | None) -> dict[str, Any]:
    ts = tables(data, dec, prices)
    largest = data.rung_order[-1] if data.rung_order else "the largest rung"

    live = data.live
    return {"live": live, "live_tables": live_tables(live) if live else [],
            "savings": data.savings, "savings_tables": savings_tables(data.savings) if data.savings else [],
            "savings_intro": savings_intro(data.savings) if data.savings else "",
            "live_drift": drift_line(live) if live else "",
            "title": title, "data": data, "decision": ts[0], "evidence": ts[1:], "total": total_line(dec, largest),
            "volume": volume_line(dec, data.classes), "next": next_lines(dec), "glossary": glossary(data.settings, largest,
                                                                                                 data.simulated),
            "settings": settings_rows(data), "provenance": provenance_rows(data),
            "banner": BANNER.format(n=data.simulated_runs) if data.simulated else "",
            "intro": f"Suite {data.suite}: {plural(data.floors.runs, 'run')}, {data.floors.unscored} unscored "
                     f"(left out of every rate), {len(data.classes)} classes, target usable rate "
                     f"{fmt_share(data.settings.target)} at {data.settings.confidence:.0%} confidence."}


def to_html(data, dec, images: dict[str, bytes], title: str, prices: list[dict[str, Any]] | None = None) -> str:
    """The self-contained HTML page (jinja2, autoescaped): inline CSS and base64 PNG figures, no scripts."""
    # heavy dependency, imported on use: jinja2
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("advisor.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    figures = [{"key": k, "title": t, "caption": c, "b64": base64.b64encode(images[k]).decode()}
               for k, t, c in FIGURES if k in images]

    return env.get_template("report.html.j2").render(figures=figures, policies=policies_view(data, images.get("policies")),
                                                     **_view(data, dec, title, prices))


def to_markdown(data, dec, title: str, image_files: dict[str, str] | None = None,
                prices: list[dict[str, Any]] | None = None) -> str:
    """The Markdown report: the same first screen, glossary and tables as the HTML page."""
    v = _view(data, dec, title, prices)
    out = [f"# {title}", ""]
    if v["banner"]:
        out += [f"> **{v['banner']}**", ""]
    out += [v["intro"], "", table_md(v["decision"]), f"**{v['total']}**", "", v["volume"], "",
            "### What to do next", ""]
    out += [f"- {line}" for line in v["next"]]
    out += ["", "## Glossary", ""] + [f"- **{k}**: {d}" for k, d in v["glossary"]] + [""]
    for t in v["evidence"]:
        out.append(table_md(t))

    out.append(policies_markdown(data, (image_files or {}).get("policies")))
    sim = " (SIMULATED)" if data.simulated else ""
    for key, t, caption in FIGURES:
        if key in (image_files or {}):
            out.append(f"## {t}{sim}\n\n![{t}{sim}]({image_files[key]})\n\n{caption}\n")

    out += live_markdown(data.live)
    out += savings_markdown(data.savings)
    out.append("## Settings\n")
    out += [f"- {k}: {val}" for k, val in v["settings"]]
    out.append("\n## Provenance\n")
    out += [f"- {k}: {val}" for k, val in v["provenance"]]
    return "\n".join(out) + "\n"


def to_json(data, dec, prices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`floors.json`: raw numbers (not formatted) behind every table, settings and provenance."""
    return {"schema": "advisor.report/2", "suite": data.suite, "simulated": data.simulated,
            "simulated_runs": data.simulated_runs, "settings": asdict(data.settings),
            "decision": to_dict(dec), "rung_table": data.rung_table,
            "paired_tasks": data.paired_tasks, "lift": data.lift,
            "floors": data.floors.to_dict(), "gaps": data.gaps, "unscored": data.unscored,
            "prices": prices or [], "provenance": data.provenance, "rung_order": data.rung_order,
            "policies": [a.to_dict() for a in data.policies], "policy_advice": advice_rows(data.policy_advice),
            "live": data.live, "savings": data.savings.to_json() if data.savings else None}
