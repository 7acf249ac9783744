"""`advisor floors`: the smallest usable rung per task class and condition, from the runs in a store."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.suite_options import SuiteFileOpt, SuiteNameOpt, stored_suite_name
from advisor.store import DEFAULT_STORE

StoreOpt = Annotated[Path, typer.Option("--store", help="DuckDB store file.")]
#: floors, report, router train --live and router drift: live records from PostgreSQL instead of the store file
LiveStoreOpt = Annotated[Optional[str], typer.Option("--live-store", envvar="ADVISOR_STORE_URL",
                                                     help="PostgreSQL store of the service's live records "
                                                     "(postgresql://...); default: the --store file's.")]


def settings_options(bar: float, near_zero: float, target: float, confidence: float, k: int,
                     false_accept: float, false_reject: float):
    """FloorSettings from CLI options (shared with `advisor report`)."""
    from advisor.floors import FloorSettings

    return FloorSettings(bar=bar, near_zero=near_zero, target=target, confidence=confidence, k=k,
                         false_accept=false_accept, false_reject=false_reject)


# Option declarations shared by `floors` and `report`.
BarOpt = Annotated[float, typer.Option("--bar", help="A run is usable when overall >= bar (0-100).")]
NearZeroOpt = Annotated[float, typer.Option("--near-zero", help="A run is near-zero when overall < this.")]
TargetOpt = Annotated[float, typer.Option("--target", help="Usable rate a class needs (0-1).")]
ConfidenceOpt = Annotated[float, typer.Option("--confidence", help="Two-sided level of the Wilson interval.")]
KOpt = Annotated[int, typer.Option("--k", help="Attempts per rung before escalating (with a verifier).")]
FalseAcceptOpt = Annotated[float, typer.Option("--false-accept", help="Verifier P(accept | not usable).")]
FalseRejectOpt = Annotated[float, typer.Option("--false-reject", help="Verifier P(reject | usable).")]


def register(app: typer.Typer) -> None:
    """Add the `floors` command."""
    app.command("floors")(floors)


def floors(store: StoreOpt = Path(DEFAULT_STORE),
           suite_file: SuiteFileOpt = None, suite_name: SuiteNameOpt = None,
           task_class: Annotated[Optional[list[str]], typer.Option("--class", help="Only this task class "
                                                                   "(repeatable).")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
           bar: BarOpt = 75.0, near_zero: NearZeroOpt = 25.0, target: TargetOpt = 0.8,
           confidence: ConfidenceOpt = 0.9, k: KOpt = 3, false_accept: FalseAcceptOpt = 0.0,
           false_reject: FalseRejectOpt = 0.0, live_store: LiveStoreOpt = None) -> None:
    """Per class and condition: usable rate with its interval per rung, the plan (the recommendation, with
    retries) and the single-attempt floor beside it; then the answer, per class."""
    from advisor.floors import LIVE_NOTE, find_floors, live_acceptance
    from advisor.report.live_sessions import session_lines, session_summary
    from advisor.store import RunStore, open_store, with_live

    settings = settings_options(bar, near_zero, target, confidence, k, false_accept, false_reject)
    suite = stored_suite_name(suite_file, suite_name)
    with with_live(open_store(store, read_only=True, role=RunStore), live_store) as s:
        result = find_floors(s, suite, settings, classes=task_class)
        live = live_acceptance(s, task_class)
        sessions = session_summary(s, task_class)
    if as_json:
        typer.echo(jsonout.dumps({"simulated": result.simulated_runs > 0, **result.to_dict(),
                                  "live": {"note": LIVE_NOTE, "cells": [c.to_dict() for c in live],
                                           "sessions": sessions}}, indent=2, default=str))
        return
    typer.echo(render_text(result, live))
    for line in session_lines(sessions):
        typer.echo(line)
    from advisor.report.answer import print_answer

    typer.echo("")
    print_answer(result, report=None,
                 probe_args="" if str(store) == DEFAULT_STORE else f"--store {shlex.quote(str(store))}")


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _live_cell(cell) -> str:
    if cell is None:
        return "-"
    return f"{cell.accept_rate:.0%} ({cell.attempts})" + ("*" if cell.simulated else "")


def render_text(result, live=()) -> str:
    """The floors as plain text, one block per class and condition; `live` (`LiveAcceptance` cells) adds the
    routing service's live accept rate per class and rung beside the probe's rates (not used for the floor)."""
    s = result.settings
    from advisor.floors import LIVE_NOTE
    from advisor.report.answer import class_note, condition_name, plan_phrase, rung_verdict, single_attempt_phrase
    from advisor.money import compact

    live_by = {(c.task_class, c.rung): c for c in live}

    lines = [f"suite {result.suite}: {result.runs} runs ({result.unscored} unscored, left out of rates)",
             f"bar {s.bar:g}, near-zero < {s.near_zero:g}, target usable rate {s.target:.0%} at "
             f"{s.confidence:.0%} confidence, verifier false accept {s.false_accept:g} / false reject "
             f"{s.false_reject:g}",
             f"usable (interval): one attempt's usable rate with its {s.confidence:.0%} Wilson interval; a plan's "
             "rate is end to end, with its attempts (xN), and its interval in [ ]",
             f"$/1k/usable from here: the cost of 1,000 usable results starting at this rung, with up to {s.k} "
             "attempts a rung and escalation up the ladder (blank where the rung had no usable run)"]
    if result.simulated_runs:
        lines.append(f"SIMULATED: {result.simulated_runs} runs come from stand-in rungs, not real models")
    if 0 < result.simulated_runs < result.runs:
        lines.append(f"MIXED: this table holds {result.simulated_runs} SIMULATED stand-in runs and "
                     f"{result.runs - result.simulated_runs} real runs of the same suite; compare rungs of one kind "
                     "only (a store per ladder keeps them apart)")
    if live_by:
        lines.append(LIVE_NOTE + ("; * = SIMULATED stand-in rungs answered" if any(c.simulated for c in live) else ""))
    plans = {(p.task_class, p.condition): p for p in result.plans}
    width = max([len("rung")] + [len(v.stats.rung) for cf in result.classes for v in cf.rungs]) + 2
    for cf in result.classes:
        lines.append("")
        plan = plans.get((cf.task_class, cf.condition))
        in_plan = {step.rung: step.attempts for step in (plan.plan.steps if plan is not None and plan.plan else ())}
        lines.append(f"{cf.task_class} [{condition_name(cf.condition)}]  plan: {plan_phrase(plan)}  "
                     f"single attempt: {single_attempt_phrase(cf)}")
        scale, unit = 1000, "$/1k"  # one unit everywhere: per 1,000 attempts and per 1,000 usable results
        lines.append(f"  {'rung':<{width}}{'runs':>5}{'unsc':>5} {'usable (interval)':<22}{'near0':>6}{'noconv':>7}"
                     f"{'overall':>8}{'turns ok/fail':>14}{unit + '/attempt':>13}{unit + '/usable from here':>23}{'pts/$':>8}"
                     + (f"{'live acc (n)':>14}" if live_by else "") + "  status")
        for v in cf.rungs:
            c = v.stats
            lo, hi = c.interval
            rate = "-" if c.usable_rate is None else f"{c.usable_rate:.0%} ({lo:.0%}-{hi:.0%})"
            turns = f"{_num(c.turns_success)}/{_num(c.turns_failure)}"
            lines.append(f"  {c.rung:<{width}}{c.runs:>5}{c.unscored:>5} {rate:<22}{_num(c.near_zero_rate, '{:.0%}'):>6}"
                         f"{_num(c.nonconvergence_rate, '{:.0%}'):>7}{_num(c.mean_overall):>8}{turns:>14}"
                         f"{_money(c.cost_per_attempt, scale):>13}"
                         f"{(_money(v.cost_per_usable, scale) if c.usable else ''):>23}"
                         f"{compact(v.points_per_dollar):>8}"
                         + (f"{_live_cell(live_by.get((cf.task_class, c.rung))):>14}" if live_by else "")
                         + f"  {rung_verdict(v, in_plan)}")
        others = [c for (cls, rung), c in live_by.items() if cls == cf.task_class and cf.verdict(rung) is None]
        if others:
            lines.append("  live only (no probe runs): " + ", ".join(f"{c.rung} {_live_cell(c)}" for c in others))
        lines.append(f"  note: {class_note(cf, in_plan)}")
    probed = {cf.task_class for cf in result.classes}
    elsewhere = [c for c in live if c.task_class not in probed]
    if elsewhere:
        lines.append("")
        lines.append("live traffic in classes without probe runs in this suite: " + ", ".join(
            f"{c.task_class}/{c.rung} {_live_cell(c)}" for c in elsewhere))
    return "\n".join(lines)


def _money(x: float | None, scale: int = 1) -> str:
    from advisor.money import usd

    return usd(None if x is None else x * scale)
