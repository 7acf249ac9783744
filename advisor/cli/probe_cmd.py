"""`advisor probe`: run a suite's tasks on every rung of a ladder, score and store every run, summarize.

With no arguments: the embedded Triton serving the SIMULATED demo ladder (`ladders/demo.yaml`) + the bundled
example suite + the store `advisor.duckdb` in the working directory. A rerun resumes: stored runs are
skipped, backend errors are retried.
"""

from __future__ import annotations

import contextlib
import signal
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
        result = run_probe(replace(config, policies=("rung",)), planner, on_start=bar.start, on_result=bar.advance,
                           on_wave=bar.on_wave)
    if others:
        if result is not None:
            bar.stop()
        result = run_probe(replace(config, policies=others), FullGridPlanner(), on_start=bar.start,
                           on_result=bar.advance, on_wave=bar.on_wave)
    return result


WHAT, HOW, LIMITS, OUT = "What to probe", "How", "Limits", "Output"


def probe(
    ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False, metavar="FILE",
                                                   rich_help_panel=WHAT,
                                                   help="Ladder (default: ladders/demo.yaml).")] = None,
    suite: Annotated[Optional[Path], typer.Option("--suite", exists=True, dir_okay=False, metavar="FILE",
                                                  rich_help_panel=WHAT,
                                                  help="Suite (default: suites/example/suite.yaml).")] = None,
    url: Annotated[Optional[str], typer.Option("--url", metavar="HOST:PORT", rich_help_panel=WHAT,
                                               help="A running Triton (gRPC); default: an embedded one serving "
                                               "the simulated ladder.")] = None,
    task: Annotated[Optional[list[str]], typer.Option("--task", metavar="ID", rich_help_panel=WHAT,
                                                      help="Only this task (repeatable).")] = None,
    rung: Annotated[Optional[list[str]], typer.Option("--rung", metavar="NAME", rich_help_panel=WHAT,
                                                      help="Only this rung (repeatable).")] = None,
    more: Annotated[Optional[list[str]], typer.Option("--more", metavar="CLASS", rich_help_panel=WHAT,
                                                      help="Buy the runs CLASS's undecided answer asks for "
                                                      "(its `next` line; repeatable).")] = None,
    policy: Annotated[Optional[list[str]], typer.Option("--policy", metavar="NAME", rich_help_panel=WHAT,
                                                        help="Also route each task by a policy: rung (default), "
                                                        "orchestrator, router, cascade (docs/standin.md).")] = None,
    router: Annotated[Optional[Path], typer.Option("--router", exists=True, dir_okay=False, metavar="FILE",
                                                   rich_help_panel=WHAT, help="Router of --policy router/cascade "
                                                   "(default: trained from the store).")] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=10_000, metavar="N", rich_help_panel=HOW,
                                          help="Runs per task, rung and condition.")] = 3,
    adaptive: Annotated[bool, typer.Option("--adaptive/--full-grid", rich_help_panel=HOW,
                                           help="Sample each cell until its interval decides it, or run every "
                                           "replica.")] = True,
    batch: Annotated[int, typer.Option("--batch", min=1, metavar="N", rich_help_panel=HOW,
                                       help="Adaptive: runs per cell per wave.")] = 5,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, metavar="N", rich_help_panel=HOW,
                                             help="Episodes in flight per rung.")] = 8,
    allow_unscored: Annotated[bool, typer.Option("--allow-unscored", rich_help_panel=HOW,
                                                 help="Probe even when runs cannot be scored (no judge).")] = False,
    allow_unsandboxed: Annotated[bool, typer.Option("--allow-unsandboxed", rich_help_panel=HOW,
                                                    help="Trusted suites only: run code without bubblewrap "
                                                    "(docs/sandbox.md).")] = False,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", min=0, metavar="USD", rich_help_panel=LIMITS,
                                                      help="Stop starting runs once this probe spent this.")] = None,
    max_runs: Annotated[Optional[int], typer.Option("--max-runs", min=0, metavar="N", rich_help_panel=LIMITS,
                                                    help="Run at most N episodes (stored ones not counted).")] = None,
    store: Annotated[Path, typer.Option("--store", metavar="FILE", rich_help_panel=OUT,
                                        help="DuckDB store.")] = Path("advisor.duckdb"),
    report: Annotated[bool, typer.Option("--report/--no-report", rich_help_panel=OUT,
                                         help="Write reports/<suite>-<ladder>/ after the probe.")] = True,
    as_json: Annotated[bool, typer.Option("--json", rich_help_panel=OUT, help="The summary as JSON.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", rich_help_panel=OUT,
                                          help="Print the plan (as `advisor plan`); run nothing.")] = False,
) -> None:
    """Probe a suite on a ladder adaptively, store every run, and answer per class.

    Adaptive by default: each (class, condition, rung) is sampled until its interval decides it.

    Ends with the answer per class: the plan, its usable rate, $ per usable result, the single-attempt floor.

    Exits 3 when some runs ended in backend_error (stored unscored, retried by the next probe).
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
    if more:
        config = _more(config, more, err)
        if config is None:
            return
        adaptive = False
    config = _without_code_tasks(config, err)
    if allow_unsandboxed:
        from advisor.tools.sandbox import unsandboxed_line

        err.print(unsandboxed_line())
    bar = _Progress(err, adaptive=adaptive)
    with _terminated_as_interrupt():  # a SIGTERM (a time limit, `kill`) stops the servers and cleans up as Ctrl-C
        try:
            result = _run(config, adaptive, batch, bar)
        finally:
            bar.stop()
    out = result.outcome
    done = out.count("done")
    if not done and not out.count("not_run"):
        line = (f"probe: nothing to run: all {result.already_stored} runs already stored, so no server was "
                f"started; store {store}")
    else:
        line = (f"probe: {done} run{'' if done == 1 else 's'}, {result.already_stored} already stored, "
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
        _answer(store, result, files, config)
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


def _more(config, classes: list[str], err):
    """The probe config of `--more` (None when there is nothing to buy: each class's line says why, then the
    answer as it stands)."""
    from advisor.errors import AdvisorError
    from advisor.floors import find_floors
    from advisor.probe.more import more_runs
    from advisor.probe.session import load_inputs
    from advisor.report import open_store
    from advisor.report.decision import decide_floors

    suite = load_inputs(config)[1]
    try:
        with open_store(config.store_path) as s:
            floors = find_floors(s, suite.name)
    except AdvisorError:  # no store or no runs of this suite yet: every class is probed as a first probe would
        floors = None
    chosen = {c.task_class: c.chosen.condition for c in decide_floors(floors).classes} if floors else {}
    more = more_runs(config, suite, floors, classes, chosen)
    for line in more.lines:
        err.print(line, soft_wrap=True, markup=False, highlight=False)
    if more.config is None and floors is not None:
        from advisor.report.answer import print_answer

        print_answer(floors, report=None, probe_args=_probe_args(config))
    return more.config


def _without_code_tasks(config, err):
    """Without a sandbox the default suite runs without its code tasks: say so in one line, before any run."""
    from advisor.probe.session import load_inputs, without_code_tasks

    config, line = without_code_tasks(config, load_inputs(config)[1])
    if line:
        err.print(line, soft_wrap=True)
    return config


def _report_hook(store: Path, result, err):
    """Write the sizing report of the suite just probed to reports/<suite>-<ladder>/ (a failure is one line)."""
    from advisor.errors import AdvisorError
    from advisor.report import open_store, write_report

    kept = _unchanged_report(result)
    if kept is not None:
        err.print(f"report: {kept.html} (unchanged: nothing new ran)")
        return kept
    try:
        with open_store(store) as s:
            files = write_report(s, "reports", suite=result.suite.name)
        err.print(f"report written: {files.html}")
        return files
    except AdvisorError as exc:
        err.print(f"report not written: {exc}")
        return None


def _unchanged_report(result):
    """The report of the suite and ladder just probed, when nothing ran and it was written already (the probe
    wrote it when its runs were stored); else None."""
    from advisor.report.build import ReportFiles, default_name

    if result.outcome.count("done") or result.outcome.count("not_run"):
        return None
    folder = Path("reports") / default_name(result.suite.name, result.ladder.name)
    files = ReportFiles(folder, folder / "index.html", folder / "report.md", folder / "floors.json",
                        bool(result.summary.get("simulated")))
    return files if all(f.is_file() for f in (files.html, files.markdown, files.json)) else None


def _probe_args(config) -> str:
    """The options a follow-up `advisor probe` needs to probe the same ladder, suite and store."""
    import shlex

    args = [("--ladder", config.ladder_path), ("--suite", config.suite_path), ("--url", config.url),
            ("--store", None if str(config.store_path) == "advisor.duckdb" else config.store_path)]
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in args if value)


def _answer(store: Path, result, files, config) -> None:
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
    print_answer(floors, report=files.html if files else None, probe_args=_probe_args(config))


#: Seconds between progress lines when stderr is not a terminal (a log file, CI).
PROGRESS_EVERY_S = 30.0


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def _lane(spec) -> str:
    """The runs that share a server's slots: a rung's own, or a policy's (`advisor.probe.runner`: concurrency is
    per rung and per policy, so lanes finish at their own pace)."""
    policy = getattr(spec, "policy", "fixed")
    return getattr(spec, "rung", "") if policy == "fixed" else f"policy:{policy}"


def wave_time_left(elapsed: float, lanes: dict[str, list]) -> tuple[float | None, bool]:
    """The wave's time left, `elapsed` seconds into it; `lanes`: per lane [runs planned, runs done, seconds into
    the wave at its last finish]. Lanes run side by side, so it is the slowest lane's; a lane's pace is its time
    per run finished (its slots busy since the wave started), counted from its last finish (the run in flight
    is partly done), and never less than the pace of the runs after that one. (seconds, False); (seconds,
    True) when a lane with runs left has finished none yet (the figure is then a lower bound); (None, False)
    while no lane with runs left has finished a run. Per lane, because a fast rung finishes first: one rate over
    the wave would promise too little while the slow rung's runs are left."""
    known, unknown = [], False
    for planned, done, last in lanes.values():
        if planned <= done:
            continue
        if done:
            pace, left = last / done, planned - done
            known.append(max(pace * left - (elapsed - last), pace * (left - 1)))
        else:
            unknown = True
    if not known:
        return None, False
    return max(known), unknown


@contextlib.contextmanager
def _terminated_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the probe runs, so the embedded Triton and its shared memory are
    closed and every finished run stays stored (the default handler ends the process on the spot, and Python's
    resource tracker then reports the shared memory it leaked). A shell starts a command in the background with
    SIGINT ignored (``advisor probe &`` in a script), which would make SIGTERM's SIGINT do nothing: while the probe
    runs, SIGINT is Python's default then, so a ``kill`` stops it (and so does Ctrl-C on the script)."""
    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup (its servers' own SIGTERMs) must finish
        signal.raise_signal(signal.SIGINT)  # as Ctrl-C: inside asyncio.run its runner cancels the waves cleanly

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:  # (asyncio.run installs its own SIGINT handler only over the default one)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        print("probe interrupted: every finished run is stored; run the same command again to go on",
              file=sys.stderr)
        sys.unraisablehook = lambda unraisable: None  # what the stopped event loop left is collected in silence
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Progress:
    """Progress over the planned runs on stderr: a rich bar on a terminal; elsewhere (a file, a pipe) one plain
    line per wave and at least every `PROGRESS_EVERY_S` seconds (runs done, the wave, elapsed, ETA), written by a
    timer thread so that a slow run does not silence it. The wave's ETA is per lane (`wave_time_left`)."""

    def __init__(self, console, every_s: float | None = None, tty: bool | None = None, adaptive: bool = False):
        self.console = console
        self.adaptive = adaptive  #: the planned runs are the full grid's, an upper bound
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.progress = None
        self.task = None
        self.done = 0  #: runs finished by this probe (stored ones skipped are not counted)
        self.cost = 0.0
        self.planned = 0
        self.wave = (0, 0, 0)  #: (wave number, runs in it, done when it started)
        self.lanes: dict[str, list] = {}  #: this wave's runs per lane: [planned, done, seconds in at last done]
        self.started = 0.0
        self.wave_started = 0.0
        self._stop = None
        self._thread = None

    def start(self, planned: int, served_by: str) -> None:
        import time

        self.planned, self.started = planned, time.monotonic()
        self.wave_started = self.started
        if not self.tty:
            import threading

            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._tick, name="probe-progress", daemon=True)
            self._thread.start()
            return
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.progress = Progress(TextColumn("[bold]probe[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=self.console)
        self.progress.start()
        self.task = self.progress.add_task(f"({served_by})", total=planned)

    def on_wave(self, n: int, specs) -> None:
        """A wave starts: remember it, and say so in a plain line when not on a terminal."""
        import time

        self.wave, self.wave_started = (n, len(specs), self.done), time.monotonic()
        lanes: dict[str, list] = {}  # built whole, then swapped in: the timer thread reads it
        for spec in specs:
            lanes.setdefault(_lane(spec), [0, 0, 0.0])[0] += 1
        self.lanes = lanes
        if not self.tty:
            self.console.print(f"probe: wave {n}: {len(specs)} runs (stored ones skipped); {self.done} runs done so "
                               f"far, {_duration(self.wave_started - self.started)}", highlight=False, soft_wrap=True)

    def line(self) -> str:
        """The plain progress line: runs done / total, the wave, elapsed, ETA of the wave."""
        import time

        now = time.monotonic()
        n, size, at = self.wave
        in_wave = self.done - at
        eta = ""
        left, bound = wave_time_left(now - self.wave_started, self.lanes)
        if left is not None and size > in_wave:
            eta = f", {'more than' if bound else 'about'} {_duration(left)} left in this wave"
        wave = f" (wave {n}: {in_wave}/{size})" if n else ""
        total = f"{self.done} runs done (at most {self.planned})" if self.adaptive else \
            f"{self.done}/{self.planned} runs done"
        return (f"probe: {total}{wave}, ${self.cost:.4f}, "
                f"{_duration(now - self.started)} elapsed{eta}")

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self.console.print(self.line(), highlight=False, soft_wrap=True)

    def advance(self, result) -> None:
        import time

        if result.status == "done":
            self.done += 1
            lane = self.lanes.get(_lane(result.spec))
            if lane is not None:
                lane[1] += 1
                lane[2] = time.monotonic() - self.wave_started
        if result.record is not None:
            self.cost += result.record.cost_usd
        if self.progress is not None:
            self.progress.update(self.task, advance=1, description=f"${self.cost:.4f}")

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
