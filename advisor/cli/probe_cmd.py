"""`advisor probe`: run a suite's tasks on every rung of a ladder, score and store every run, summarize.

With no arguments: the embedded Triton serving the SIMULATED demo ladder (`ladders/demo.yaml`) + the bundled
example suite + the store `advisor.duckdb` in the working directory. A rerun resumes: stored runs are
skipped, backend errors are retried.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout


def register(app: typer.Typer) -> None:
    """Add the `probe` command."""
    app.command("probe")(probe)


def _run(config, adaptive: bool, batch: int, bar):
    """Rung runs (adaptive or full grid), then policy runs (always the full grid); the last probe's result."""
    from dataclasses import replace

    from advisor.probe.planners import AdaptivePlanner, FullGridPlanner
    from advisor.probe.session import run_probe

    others = tuple(p for p in config.policies if p != "rung")
    result = None
    if "rung" in config.policies:
        planner = AdaptivePlanner(batch=batch) if adaptive else FullGridPlanner()
        result = run_probe(replace(config, policies=("rung",)), planner, on_start=bar.start, on_result=bar.advance)
    if others:
        if result is not None:
            bar.stop()
        result = run_probe(replace(config, policies=others), FullGridPlanner(), on_start=bar.start,
                           on_result=bar.advance)
    return result


def probe(
    url: Annotated[Optional[str], typer.Option("--url", help="gRPC address of a running Triton (host:port). "
                                               "Without it a simulated ladder is served by an embedded Triton.")] = None,
    ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                   help="Ladder file (default: ladders/demo.yaml).")] = None,
    suite: Annotated[Optional[Path], typer.Option("--suite", exists=True, dir_okay=False,
                                                  help="Suite file (default: suites/example/suite.yaml).")] = None,
    store: Annotated[Path, typer.Option("--store", help="DuckDB store file.")] = Path("advisor.duckdb"),
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Runs per task, rung and condition.")] = 3,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes in flight per rung (a policy "
                                             "of the probe has its own limit: its calls on a rung are not counted "
                                             "against the rung's).")] = 8,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", min=0, help="Stop starting runs once this "
                                                      "probe's model cost reaches this many USD.")] = None,
    max_runs: Annotated[Optional[int], typer.Option("--max-runs", min=0, help="Run at most this many episodes "
                                                    "(stored runs are skipped and not counted).")] = None,
    task: Annotated[Optional[list[str]], typer.Option("--task", help="Only this task (repeatable).")] = None,
    rung: Annotated[Optional[list[str]], typer.Option("--rung", help="Only this rung (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    adaptive: Annotated[bool, typer.Option("--adaptive/--full-grid", help="Adaptive: sample each (class, "
                                           "condition, rung) in batches only until its interval decides it "
                                           "against the target, rungs small to large (advisor.probe.adaptive); "
                                           "--full-grid runs every replica.")] = True,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Adaptive: runs per cell per wave.")] = 5,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write a sizing report to "
                                         "reports/<suite>-<date>/ after the probe.")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (runs, tokens, cost per rung, power "
                                          "per class; as `advisor plan`) and run nothing.")] = False,
    allow_unscored: Annotated[bool, typer.Option("--allow-unscored", help="Probe even when runs would be "
                                                 "unscored whatever the models do (no judge role for judge "
                                                 "criteria; stand-ins on tasks without a reference).")] = False,
    policy: Annotated[Optional[list[str]], typer.Option("--policy", help="What routes each task (repeatable): "
                                                        "'rung' (every rung itself, the default); 'orchestrator' "
                                                        "(the ladder's orchestrator role hands turns to rungs); "
                                                        "'router' (the learned router's rung, single-shot); "
                                                        "'cascade' (cheapest rung first, escalating while the "
                                                        "task-completion checks reject). Policies run the full "
                                                        "grid after the rungs, stored with runs.policy "
                                                        "(docs/standin.md).")] = None,
    router: Annotated[Optional[Path], typer.Option("--router", exists=True, dir_okay=False, help="Router artifact "
                                                   "for --policy router/cascade (default: one trained from the "
                                                   "store's rung runs of this suite and ladder).")] = None,
    allow_unsandboxed: Annotated[bool, typer.Option("--allow-unsandboxed", help="Trusted suites only: where "
                                                    "bubblewrap is unavailable, run run_python and python checks "
                                                    "without a sandbox instead of refusing (docs/sandbox.md); "
                                                    "printed and recorded in every run.")] = False,
) -> None:
    """Probe a suite on a ladder adaptively (each cell until its interval decides it), store every run, answer.

    --full-grid runs every task x rung x {baseline, skill} x replica instead. Ends with the per-class answer
    (rung, floor, usable rate with interval, $ per usable result) and the report's path.

    Exits 3 when some runs ended in backend_error (they are stored unscored and retried by the next probe).
    """
    import os

    from rich.console import Console

    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC logs a line per forked tool subprocess at INFO

    from advisor.probe.session import ProbeConfig
    from advisor.probe.summary import render

    config = ProbeConfig(ladder_path=ladder, suite_path=suite, store_path=store, url=url, replicas=replicas,
                         concurrency=concurrency, max_cost=max_cost, max_runs=max_runs, tasks=task, rungs=rung,
                         allow_unsandboxed=allow_unsandboxed, policies=tuple(dict.fromkeys(policy or ["rung"])),
                         router_path=router)
    if dry_run or not allow_unscored:
        _check_up_front(config, dry_run, as_json)
        if dry_run:
            return
    err = Console(stderr=True)
    config = _without_code_tasks(config, err)
    if allow_unsandboxed:
        from advisor.tools.sandbox import unsandboxed_line

        err.print(unsandboxed_line())
    bar = _Progress(err)
    try:
        result = _run(config, adaptive, batch, bar)
    finally:
        bar.stop()
    out = result.outcome
    done = out.count("done")
    if not done and not out.count("not_run"):
        line = (f"probe: nothing to run: all {result.already_stored} runs already stored; "
                f"served by {result.served_by}; store {store}")
    else:
        line = (f"probe: {done} run{'' if done == 1 else 's'}, {out.count('skipped')} already stored, "
                f"{out.count('not_run')} not run{' (' + out.stopped + ')' if out.stopped else ''}; "
                f"{out.backend_errors} backend errors (stored unscored, retried next time); "
                f"cost ${out.cost_usd:.4f}; {out.elapsed_s:.1f} s; served by {result.served_by}; store {store}")
    if result.summary["simulated"]:
        line = "SIMULATED stand-ins. " + line
    err.print(line)
    for note in result.notes:
        err.print(note)
    files = _report_hook(store, result, err) if report else None
    if as_json:
        typer.echo(jsonout.dumps({"outcome": {"done": out.count("done"), "skipped": out.count("skipped"),
                                           "not_run": out.count("not_run"), "stopped": out.stopped,
                                           "backend_errors": out.backend_errors, "cost_usd": out.cost_usd,
                                           "elapsed_s": out.elapsed_s, "served_by": result.served_by},
                               "summary": result.summary}, indent=2, default=str))
    else:
        render(result.summary)
        _answer(store, result, files)
    if out.backend_errors:
        raise typer.Exit(3)


def _check_up_front(config, dry_run: bool, as_json: bool) -> None:
    """With --dry-run print the plan; else refuse (one message, nothing run) when runs would be unscored."""
    from advisor.errors import ConfigError
    from advisor.probe.budget import cpu_path_problems, make_plan
    from advisor.probe.session import load_inputs

    ladder, suite, _, suite_path = load_inputs(config)
    if dry_run:
        from advisor.cli.plan_cmd import render

        p = make_plan(suite, ladder, config.replicas, tasks=config.tasks, rungs=config.rungs)
        typer.echo(jsonout.dumps(p.as_dict(), indent=2)) if as_json else render(p)
        return
    problems = cpu_path_problems(suite, ladder, config.tasks)
    if problems:
        raise ConfigError(
            f"probe refused before any run: {'; '.join(problems)}. Nothing was run. See what a probe would cost "
            f"and decide with `advisor plan --suite {suite_path}` (add --ladder for a real ladder), probe real models "
            "with --url HOST:PORT and a ladder with a judge role, select runnable tasks with --task, or pass "
            "--allow-unscored to store the unscored runs anyway")


def _without_code_tasks(config, err):
    """Without a sandbox the default suite runs without its code tasks: say so in one line, before any run."""
    from advisor.probe.session import load_inputs, without_code_tasks

    config, line = without_code_tasks(config, load_inputs(config)[1])
    if line:
        err.print(line, soft_wrap=True)
    return config


def _report_hook(store: Path, result, err):
    """Write the sizing report of the suite just probed to reports/<suite>-<date>/ (a failure is one line)."""
    from advisor.errors import AdvisorError
    from advisor.report import open_store, write_report

    try:
        with open_store(store) as s:
            files = write_report(s, "reports", suite=result.suite.name)
        err.print(f"report written: {files.html}")
        return files
    except AdvisorError as exc:
        err.print(f"report not written: {exc}")
        return None


def _answer(store: Path, result, files) -> None:
    """End with the per-class answer (rich table) and the report's path; a store without floors prints nothing."""
    from advisor.errors import AdvisorError
    from advisor.floors import find_floors
    from advisor.report import open_store
    from advisor.report.answer import print_answer

    try:
        with open_store(store) as s:
            floors = find_floors(s, result.suite.name)
    except AdvisorError:
        return
    print_answer(floors, report=files.html if files else None)


class _Progress:
    """A rich progress bar over the planned runs (stderr), tolerant of being stopped before it starts."""

    def __init__(self, console):
        self.console = console
        self.progress = None
        self.task = None
        self.done = 0
        self.cost = 0.0

    def start(self, planned: int, served_by: str) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.progress = Progress(TextColumn("[bold]probe[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
                                 disable=not sys.stderr.isatty())
        self.progress.start()
        self.task = self.progress.add_task(f"({served_by})", total=planned)

    def advance(self, result) -> None:
        if self.progress is None:
            return
        if result.record is not None:
            self.cost += result.record.cost_usd
        self.progress.update(self.task, advance=1, description=f"${self.cost:.4f}")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
