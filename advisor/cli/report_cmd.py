"""`advisor report`: write a sizing report folder (index.html, report.md, floors.json) from a store."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.suite_options import SuiteFileOpt, SuiteNameOpt, stored_suite_name
from advisor.cli.floors_cmd import (BarOpt, ConfidenceOpt, FalseAcceptOpt, FalseRejectOpt, KOpt, LiveStoreOpt,
                                    NearZeroOpt, TargetOpt, settings_options)
from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `report` command."""
    app.command("report")(report)


def report(store: Annotated[Path, typer.Option("--store", help="DuckDB store file.")] = Path(DEFAULT_STORE),
           suite_file: SuiteFileOpt = None, suite_name: SuiteNameOpt = None,
           out: Annotated[Path, typer.Option("--out", help="Folder that receives the report folder.")
                          ] = Path("reports"),
           name: Annotated[Optional[str], typer.Option("--name", help="Report folder name (default: "
                                                       "<suite>-<ladder>, overwritten by the next report).")] = None,
           volume: Annotated[Optional[list[str]], typer.Option("--volume", help="Usable results needed per month "
                                                               "for a class, CLASS=N/month, e.g. api_calls=20000/month "
                                                               "(repeatable; the class must be in the store).")] = None,
           default_volume: Annotated[int, typer.Option("--default-volume", min=1, help="Usable results per month "
                                                       "assumed for classes --volume does not name (stated on the "
                                                       "page).")] = 10_000,
           task_class: Annotated[Optional[list[str]], typer.Option("--class", help="Only this task class "
                                                                   "(repeatable).")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print the written paths as JSON.")] = False,
           bar: BarOpt = 75.0, near_zero: NearZeroOpt = 25.0, target: TargetOpt = 0.8,
           confidence: ConfidenceOpt = 0.9, k: KOpt = 3, false_accept: FalseAcceptOpt = 0.0,
           false_reject: FalseRejectOpt = 0.0, live_store: LiveStoreOpt = None) -> None:
    """Write reports/<name>/ with a self-contained index.html, report.md and floors.json; print the answer."""
    from advisor.report import open_store, parse_volumes, write_report
    from advisor.store import with_live

    settings = settings_options(bar, near_zero, target, confidence, k, false_accept, false_reject)
    volumes = parse_volumes(volume)
    suite = stored_suite_name(suite_file, suite_name)
    with with_live(open_store(store), live_store) as s:
        files = write_report(s, out, name, suite, settings, classes=task_class, volumes=volumes,
                             default_volume=default_volume)
    if as_json:
        typer.echo(jsonout.dumps({k: str(v) for k, v in vars(files).items() if k != "decision"}))
        return
    if files.simulated:
        typer.echo("SIMULATED: this report includes runs from stand-in rungs, not real models")
    typer.echo(f"report written: {files.html}")
    typer.echo(f"  also {files.markdown.name} and {files.json.name} in {files.folder}")
    from rich.console import Console

    from advisor.report.answer import answer_lines, answer_table

    console = Console()
    console.print(answer_table(files.decision, settings, files.html))
    args = "" if str(store) == DEFAULT_STORE else f"--store {shlex.quote(str(store))}"
    for line in answer_lines(files.decision, settings, files.html, probe_args=args):
        console.print(line, markup=False, highlight=False)
