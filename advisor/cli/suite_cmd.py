"""`advisor suite validate|show|import tessl|from-traffic`: check, inspect, import and capture task suites."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from advisor import jsonout

SuiteArg = Annotated[Path, typer.Argument(help="Suite YAML file.", exists=True, dir_okay=False)]


def register(app: typer.Typer) -> None:
    """Add the `suite` command group."""
    group = typer.Typer(help="Validate, show and import task suites.", no_args_is_help=True)
    group.command("validate")(validate)
    group.command("show")(show)
    importer = typer.Typer(help="Import suites from public formats.", no_args_is_help=True)
    importer.command("tessl")(import_tessl_cmd)
    group.add_typer(importer, name="import")
    group.command("from-traffic")(from_traffic_cmd)
    app.add_typer(group, name="suite")


def _load(path: Path):
    from advisor.suite import load_suite
    from advisor.tools import available_tools

    return load_suite(path, set(available_tools()))


def suite_summary(suite) -> dict:
    """Counts per class: tasks, tasks with a skill, check types, reference steps (the `show` data)."""
    rows = []
    for cls in suite.classes:
        tasks = [t for t in suite.tasks if t.task_class == cls.name]
        checks = Counter(c.check.type for t in tasks for c in t.criteria())
        steps = [len(t.reference.steps) for t in tasks if t.reference]
        rows.append({"class": cls.name, "tasks": len(tasks), "with_skill": sum(t.has_skill for t in tasks),
                     "checks": dict(sorted(checks.items())), "judge_criteria": checks.get("judge", 0),
                     "mean_reference_steps": round(sum(steps) / len(steps), 1) if steps else None,
                     "description": cls.description})
    return {"name": suite.name, "hash": suite.config_hash(), "source": suite.source, "tasks": len(suite.tasks),
            "with_skill": sum(t.has_skill for t in suite.tasks), "classes": rows}


def validate(
    suite: SuiteArg,
    selftest: Annotated[bool, typer.Option("--selftest", help="Replay each reference trajectory and check it "
                                           "scores 100 (and its sloppy/wrong variants lose IF/TC).")] = False,
) -> None:
    """Validate a suite file (keys, classes, tools, weights, skill files); optionally self-test its references."""
    loaded = _load(suite)
    info = suite_summary(loaded)
    typer.echo(f"{suite}: ok: suite {loaded.name!r}, {info['tasks']} tasks in {len(loaded.classes)} classes, "
               f"{info['with_skill']} with a skill, hash {info['hash']}")
    from advisor.probe.budget import suite_warnings

    for warning in suite_warnings(loaded):
        typer.echo(f"warning: {warning}")
    if not selftest:
        return
    from advisor.checks.selftest import selftest_task

    async def run():
        return [await selftest_task(t) for t in loaded.tasks if t.reference is not None]

    results = asyncio.run(run())
    failed = [r for r in results if not r.ok]
    for r in failed:
        for problem in r.problems:
            typer.echo(f"  {r.task_id}: {problem}", err=True)
    typer.echo(f"self-test: {len(results) - len(failed)}/{len(results)} references behave as designed")
    if failed:
        raise typer.Exit(1)


def show(suite: SuiteArg,
         as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (the whole suite).")] = False) -> None:
    """Show a suite's classes and tasks: skills, tools, checks, reference lengths."""
    loaded = _load(suite)
    if as_json:
        body = loaded.model_dump(mode="json", by_alias=True)
        body["summary"] = suite_summary(loaded)
        typer.echo(jsonout.dumps(body, indent=2))
        return
    info = suite_summary(loaded)
    console = Console()
    table = Table(title=f"suite {loaded.name} ({info['hash']}): {info['tasks']} tasks, {info['with_skill']} with a skill")
    for col in ("class", "tasks", "with skill", "checks", "mean ref. steps"):
        table.add_column(col)
    for row in info["classes"]:
        checks = ", ".join(f"{k} {v}" for k, v in row["checks"].items())
        table.add_row(row["class"], str(row["tasks"]), str(row["with_skill"]), checks,
                      "-" if row["mean_reference_steps"] is None else f"{row['mean_reference_steps']:g}")
    console.print(table)
    tasks = Table(title="tasks")
    for col in ("id", "class", "skill", "tools", "IF", "TC", "ref. steps"):
        tasks.add_column(col)
    for t in loaded.tasks:
        tasks.add_row(t.id, t.task_class, t.skill or "-", ", ".join(t.tools), str(len(t.instruction_following)),
                      str(len(t.task_completion)), str(len(t.reference.steps)) if t.reference else "-")
    console.print(tasks)


def import_tessl_cmd(
    src: Annotated[Path, typer.Argument(help="A Tessl scenario folder, a tile folder, or any folder tree holding "
                                         "tiles and scenarios (walked at any depth).", exists=True, file_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Suite YAML to write (skills are copied to skills/ beside it; "
                                      "the IF/TC assignment to <out>.assign.yaml).")],
    name: Annotated[Optional[str], typer.Option("--name", help="Suite name (default: the folder name).")] = None,
    class_by: Annotated[str, typer.Option("--class-by", help="Task classes by: skill (the skill a scenario runs "
                                          "with, else its tile), tile, or capability (capability.txt).")] = "skill",
    assign: Annotated[Optional[Path], typer.Option("--assign", exists=True, dir_okay=False, help="IF/TC mapping "
                                                   "file (YAML {task id or '*': {criterion: if|tc}}), e.g. an "
                                                   "edited <out>.assign.yaml.")] = None,
) -> None:
    """Import Tessl scenarios into a suite: readable ids, classes, fixtures, skill documents, original weights."""
    from advisor.importers.tessl import import_tessl

    summary = import_tessl(src, out, name, class_by=class_by, assign_file=assign)
    for line in summary.lines():
        typer.echo(line)


def since_time(text: str | None):
    """``--since``: a duration back from now (``7d``, ``12h``, ``30m``) or an ISO date/time (UTC), as a naive UTC
    datetime; None for None."""
    import re
    from datetime import datetime, timedelta

    from advisor.errors import ConfigError
    from advisor.records import now

    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhm])\s*", text)
    if m:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        return now() - timedelta(**{unit: float(m.group(1))})
    try:
        return datetime.fromisoformat(text).replace(tzinfo=None)
    except ValueError:
        raise ConfigError(f"--since {text!r}: give a duration (7d, 12h, 30m) or a date (2026-12-01)") from None


def from_traffic_cmd(
    out: Annotated[Path, typer.Option("--out", help="Folder to write suite.yaml, heldout.yaml and traffic.json "
                                      "into.")],
    store: Annotated[str, typer.Option("--store", help="The store the service records into (DuckDB file or "
                                       "postgresql:// URL).")] = "advisor.duckdb",
    since: Annotated[Optional[str], typer.Option("--since", help="Steps captured since: 7d, 12h, 30m or a date.")]
    = None,
    tenant: Annotated[Optional[str], typer.Option("--tenant", help="Only this tenant's steps (the key's name; "
                                                  "'default' without keys).")] = None,
    all_tenants: Annotated[bool, typer.Option("--all-tenants", help="Without --tenant, mix the steps of several "
                                              "tenants in one suite (refused otherwise).")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False, help="The service "
                                                   "config: its classes' verifiers check the steps.")] = None,
    heldout: Annotated[float, typer.Option("--heldout", min=0.0, max=1.0, help="Share of sessions written to "
                                           "heldout.yaml.")] = 0.2,
    name: Annotated[Optional[str], typer.Option("--name", help="Suite name (default traffic-<tenant|all>).")] = None,
    judge: Annotated[bool, typer.Option("--judge", help="Check final answers with the ladder's judge against the "
                                        "served answer (needs a ladder with roles.judge); default: the same text, "
                                        "whitespace and case aside.")] = False,
) -> None:
    """Write a suite from the live steps `advisor serve` captured (capture: {enabled: true}): one task per step,
    replayed on every rung without live tools, checked by the class's verifier or the served reply."""
    from advisor.importers.traffic import suite_from_traffic
    from advisor.service.process.config import load_config
    from advisor.store import LiveRecords, open_store

    cfg = load_config(config) if config is not None else None
    with open_store(store, read_only=True, role=LiveRecords) as s:
        summary = suite_from_traffic(s, out, since=since_time(since), tenant=tenant, service_config=cfg,
                                     heldout=heldout, name=name, judge_finals=judge, all_tenants=all_tenants)
    for line in summary.lines():
        typer.echo(line)
    if summary.tasks.get("suite"):
        typer.echo(f"next: advisor probe --suite {out / 'suite.yaml'}")
