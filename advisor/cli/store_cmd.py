"""`advisor store info|export`: look inside a store file and export it to Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor import jsonout
from advisor.store import DEFAULT_STORE, RunStore, open_store

StoreOpt = Annotated[Path, typer.Option("--store", help="DuckDB store file.")]


def register(app: typer.Typer) -> None:
    """Add the `store` command group."""
    group = typer.Typer(help="Inspect and export the DuckDB store.", no_args_is_help=True)
    group.command("info")(info)
    group.command("export")(export)
    from advisor.cli.serve_cmd import ingest

    group.command("ingest")(ingest)
    app.add_typer(group, name="store")


def info(store: StoreOpt = Path(DEFAULT_STORE),
         as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Schema migrations and run counts by kind, suite and rung (simulated runs marked)."""
    with open_store(store, read_only=True, role=RunStore) as s:
        rows = s.run_counts()
        out = {"store": str(store), "migrations": s.applied_migrations(), "runs": rows}
    if as_json:
        typer.echo(jsonout.dumps(out, indent=2, default=str))
        return
    typer.echo(f"{store}: migrations {', '.join(out['migrations'])}")
    if not rows:
        typer.echo("no runs yet")
    for r in rows:
        sim = "  [SIMULATED]" if r["simulated"] else ""
        typer.echo(f"  {r['kind']:<9} {r['suite_name']:<24} {r['rung']:<28} {r['runs']:>7} runs "
                   f"({r['unscored']} unscored){sim}")


def export(folder: Annotated[Path, typer.Argument(help="Folder to write <table>.parquet files into.")],
           store: StoreOpt = Path(DEFAULT_STORE)) -> None:
    """Export every table of the store to Parquet files."""
    with open_store(store, read_only=True, role=RunStore) as s:
        files = s.export_parquet(folder)
    for f in files:
        typer.echo(str(f))
