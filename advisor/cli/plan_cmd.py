"""`advisor plan`: what a probe would run and cost per rung, and whether its replicas can decide each class."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout


def register(app: typer.Typer) -> None:
    """Add the `plan` command."""
    app.command("plan")(plan)


def load(ladder: Path | None, suite: Path | None):
    """(ladder, suite) with the probe's defaults (demo ladder, example suite)."""
    from advisor.probe.session import ProbeConfig, load_inputs

    lad, loaded, _, _ = load_inputs(ProbeConfig(ladder_path=ladder, suite_path=suite))
    return lad, loaded


def render(p) -> None:
    """Print a `ProbeBudget` as tables (stdout)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    sim = any(r.simulated for r in p.rungs)
    table = Table(title=f"plan: suite {p.suite} on ladder {p.ladder}{' (SIMULATED)' if sim else ''}, "
                        f"{p.replicas} replica(s): {p.runs} runs", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("rung", "runs", "input tokens", "output tokens", "cost USD"):
        table.add_column(col, justify="left" if col == "rung" else "right")
    for r in p.rungs:
        table.add_row(r.rung + (" (SIMULATED)" if r.simulated else ""), str(r.runs), f"{r.input_tokens:,}",
                      f"{r.output_tokens:,}", f"{r.cost_usd:.4f}")
    console.print(table)
    judge = ("no judge-graded criteria" if p.judge_calls == 0 else
             f"judge {p.judge}: {p.judge_calls} calls, {p.judge_input_tokens:,} in / {p.judge_output_tokens:,} out "
             f"tokens, ${p.judge_cost_usd:.4f} (apart from the rungs)" if p.judge else
             f"{p.judge_calls} judge calls needed but the ladder has no judge role")
    console.print(judge)
    rate = {c.assumed_rate for c in p.power}
    at = f"at {rate.pop():g}" if len(rate) == 1 else "at rate"
    power = Table(title=f"power: can a cell clear target {p.target:g} at {p.confidence:.0%} (Wilson, z={p.z:.3f})?",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("class", "condition", "tasks", "runs\n/cell", "runs to\nclear", "replicas\nat 1.0",
                f"replicas\n{at}", "decidable"):
        power.add_column(col, no_wrap=True, justify="left" if col in ("class", "condition", "decidable") else "right")
    for c in p.power:
        power.add_row(c.task_class, c.condition, str(c.tasks), str(c.runs_per_cell), str(c.min_runs_to_clear),
                      str(c.replicas_best_case),
                      str(c.replicas_at_assumed_rate) + ("" if len(rate) == 0 else f" (at {c.assumed_rate:g})"),
                      "yes" if c.can_clear else "NO")
    console.print(power)
    if not all(c.can_clear for c in p.power):
        console.print("NO: too few runs to clear the target even if every run is usable (add replicas or tasks)")
    console.print(f"assumptions: {p.assumptions}")
    for problem in p.problems:
        console.print(f"[bold]would be unscored:[/] {problem}")


def plan(
    ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                   help="Ladder file (default: ladders/demo.yaml).")] = None,
    suite: Annotated[Optional[Path], typer.Option("--suite", exists=True, dir_okay=False,
                                                  help="Suite file (default: suites/example/suite.yaml).")] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=10_000, help="Runs per task, rung and "
                                          "condition.")] = 3,
    target: Annotated[float, typer.Option("--target", help="Usable rate a class needs.")] = 0.8,
    confidence: Annotated[float, typer.Option("--confidence", help="Two-sided Wilson interval level.")] = 0.9,
    margin: Annotated[float, typer.Option("--margin", help="Assumed true usable rate = target + margin, for the "
                                          "second replica figure.")] = 0.1,
    task: Annotated[Optional[list[str]], typer.Option("--task", help="Only this task (repeatable).")] = None,
    rung: Annotated[Optional[list[str]], typer.Option("--rung", help="Only this rung (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Plan a probe without running it: runs, expected tokens and cost per rung (judge apart), power per class."""
    from advisor.floors import FloorSettings
    from advisor.probe.budget import make_plan

    FloorSettings(target=target, confidence=confidence)  # one line on a bad target or confidence
    if not 0.0 <= target + margin <= 1.0:
        raise typer.BadParameter(f"target {target:g} + margin {margin:g} = {target + margin:g} is no usable rate "
                                 "(between 0 and 1)", param_hint="'--margin'")
    lad, loaded = load(ladder, suite)
    p = make_plan(loaded, lad, replicas, target, confidence, margin, tasks=task, rungs=rung)
    if as_json:
        typer.echo(jsonout.dumps(p.as_dict(), indent=2))
    else:
        render(p)
