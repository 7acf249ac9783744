"""`advisor verifier measure|show`: the routing service's verifiers against the full scores of probe runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.suite_options import SuiteFileOpt, SuiteNameOpt, stored_suite_name
from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `verifier` command group."""
    group = typer.Typer(help="Measure the routing service's verifiers on stored probe runs.", no_args_is_help=True)
    group.command("measure")(measure)
    group.command("show")(show)
    app.add_typer(group, name="verifier")


def _rate(value: float | None, errors: int, n: int) -> str:
    return "n/a (0 runs)" if value is None else f"{value:.1%} ({errors}/{n})"


def render_rows(rows: list[dict]) -> list[str]:
    """Lines for the ``verifier_rates`` rows of one measurement (pooled first)."""
    lines = []
    for r in rows:
        where = "all rungs" if r["rung"] == "*" else f"rung {r['rung']}"
        lines.append(f"  {r['task_class']:<16}{where:<20} runs {r['runs']:>4}  false accept "
                     f"{_rate(r['false_accept'], r['false_accepts'], r['negatives'])}, false reject "
                     f"{_rate(r['false_reject'], r['false_rejects'], r['positives'])}"
                     + (f"; {r['unverifiable']} not gradable" if r["unverifiable"] else ""))
    return lines


def measure(
    config: Annotated[Path, typer.Option("--config", exists=True, dir_okay=False, help="Service config YAML whose "
                                         "class verifiers are measured.")],
    store: Annotated[Path, typer.Option("--store", help="DuckDB store with the probe runs.")] = Path(DEFAULT_STORE),
    ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False, help="Only runs on this "
                                                   "ladder; its judge role grades judge verifiers.")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="gRPC address of the Triton serving the judge "
                                               "(judge verifiers only; default: the ladder's).")] = None,
    suite_file: SuiteFileOpt = None, suite_name: SuiteNameOpt = None,
    task_class: Annotated[Optional[list[str]], typer.Option("--class", help="Only this class (repeatable).")] = None,
    bar: Annotated[float, typer.Option("--bar", min=0, max=100, help="A run is usable when overall >= bar.")] = 75.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored rows as JSON.")] = False,
) -> None:
    """Apply each class's verifier to the class's stored probe runs; store its false-accept / false-reject rates.

    Truth is the run's full score (usable when overall >= bar). `advisor serve` then uses the pooled rates of the
    newest measurement of each class's verifier (config rates when none); `advisor verifier show` lists them.
    """
    from advisor.ladder import load_ladder
    from advisor.service.process.config import load_config
    from advisor.store import RunStore, open_store
    from advisor.verifier.calibration import measure_verifiers, save_measurement

    suite = stored_suite_name(suite_file, suite_name)
    lad = load_ladder(ladder) if ladder else None
    cfg = load_config(config, lad)
    from advisor.backends import BackendPool

    client_for = BackendPool(lad, url=url)

    async def run(db):
        try:
            return await measure_verifiers(db, cfg, lad, client_for, bar=bar, suite_name=suite, classes=task_class)
        finally:
            await client_for.close()

    with open_store(store, role=RunStore) as db:
        measurements = asyncio.run(run(db))
        measurement_id = save_measurement(db, measurements, bar=bar, config_path=str(config))
        rows = [r for r in db.verifier_rate_rows() if r["measurement_id"] == measurement_id]
    if as_json:
        typer.echo(jsonout.dumps(rows, indent=2, default=str))
        return
    simulated = any(m.simulated for m in measurements)
    typer.echo(("SIMULATED runs. " if simulated else "") + f"measurement {measurement_id}: "
               f"{sum(m.runs for m in measurements)} probe run(s) verified, usable at overall >= {bar:g}")
    for line in render_rows(rows):
        typer.echo(line)
    for m in measurements:
        if not m.runs:
            typer.echo(f"  class {m.task_class!r}: no scored probe run in {store}; its config rates stay in use")
    typer.echo("stored; `advisor serve --config` uses the pooled (all rungs) rates of each class")


def show(store: Annotated[Path, typer.Option("--store", help="DuckDB store.")] = Path(DEFAULT_STORE),
         task_class: Annotated[Optional[str], typer.Option("--class", help="Only this class.")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="Rows as JSON.")] = False) -> None:
    """Print the stored verifier measurements, newest first."""
    from advisor.store import RunStore, open_store

    with open_store(store, read_only=True, role=RunStore) as db:
        rows = db.verifier_rate_rows(task_class)
    if as_json:
        typer.echo(jsonout.dumps(rows, indent=2, default=str))
        return
    if not rows:
        typer.echo("no verifier measured yet; run `advisor verifier measure --config FILE`")
        return
    seen: dict[str, list[dict]] = {}
    for r in rows:
        seen.setdefault(r["measurement_id"], []).append(r)
    for mid, group in seen.items():
        first = group[0]
        typer.echo(f"{first['measured_at']:%Y-%m-%d %H:%M} {mid}" + (" SIMULATED runs" if first["simulated"] else "")
                   + f" (bar {first['bar']:g}, config {first['config_path']})")
        for line in render_rows(group):
            typer.echo(line)
