"""`advisor judge agreement|show`: measure the judge against deterministic checks, and read the measurements."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout


def register(app: typer.Typer) -> None:
    """Add the `judge` command group."""
    group = typer.Typer(help="Measure the judge model against deterministic checks.", no_args_is_help=True)
    group.command("agreement")(agreement)
    group.command("show")(show)
    app.add_typer(group, name="judge")


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def render(result: dict) -> list[str]:
    """Lines describing one measurement (`Agreement.as_dict()`)."""
    c, r = result["criteria"], result["run_level"]
    lines = [("SIMULATED runs. " if result["simulated"] else "") +
             f"judge {result['judge']} on suite {result['suite_name']}: {result['runs']} run(s) re-graded",
             f"  criteria: {c['positives'] + c['negatives']} ({c['positives']} passed, {c['negatives']} failed the "
             f"deterministic check): false accept {_rate(c['false_accept'])} ({c['false_accepts']}/{c['negatives']}), "
             f"false reject {_rate(c['false_reject'])} ({c['false_rejects']}/{c['positives']}); "
             f"{result['unparsed']} not graded",
             f"  runs (usable at the bar, all criteria deterministic): {r['positives'] + r['negatives']}: false accept "
             f"{_rate(r['false_accept'])}, false reject {_rate(r['false_reject'])}",
             f"  rebuilt episodes: {result['limits']}"]
    return lines


def agreement(
    suite: Annotated[Path, typer.Option("--suite", exists=True, dir_okay=False, help="Suite whose stored runs "
                                        "are re-graded (its deterministically checked criteria).")],
    ladder: Annotated[Path, typer.Option("--ladder", exists=True, dir_okay=False, help="Ladder with the judge "
                                         "role to measure.")],
    store: Annotated[Path, typer.Option("--store", help="DuckDB store with the runs.")] = Path("advisor.duckdb"),
    url: Annotated[Optional[str], typer.Option("--url", help="gRPC address of the Triton serving the judge "
                                               "(default: the ladder's).")] = None,
    max_runs: Annotated[Optional[int], typer.Option("--max-runs", min=1, help="Re-grade at most this many runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurement as JSON.")] = False,
) -> None:
    """Grade stored runs' deterministically checked criteria with the judge; store and print its error rates.

    The run-level rates are verifier error rates: pass them to `advisor floors --false-accept/--false-reject`
    (the routing service and router policy read the latest measurement from the store).
    """
    from advisor.checks.agreement import measure_agreement, save_agreement
    from advisor.checks.judge import TritonJudge
    from advisor.ladder import load_ladder
    from advisor.store import RunStore, open_store
    from advisor.suite import load_suite

    lad = load_ladder(ladder)
    loaded = load_suite(suite)
    judge = TritonJudge.from_ladder(lad, url)

    async def run():
        try:
            return await measure_agreement(db, loaded, judge, lad.roles.judge.name, max_runs=max_runs)
        finally:
            await judge.client.close()

    with open_store(store, role=RunStore) as db:
        result = asyncio.run(run())
        result.simulated = result.simulated or lad.roles.judge.simulated
        save_agreement(db, result)
    body = result.as_dict()
    if as_json:
        typer.echo(jsonout.dumps(body, indent=2))
        return
    for line in render(body):
        typer.echo(line)
    v = result.verifier()
    typer.echo(f"stored; use: advisor floors --false-accept {v.false_accept:.3f} --false-reject {v.false_reject:.3f}")


def show(store: Annotated[Path, typer.Option("--store", help="DuckDB store.")] = Path("advisor.duckdb"),
         judge: Annotated[Optional[str], typer.Option("--judge", help="Only this judge.")] = None) -> None:
    """Print the stored judge measurements, newest first."""
    from advisor.store import RunStore, open_store

    with open_store(store, read_only=True, role=RunStore) as db:
        rows = db.judge_agreements(judge)
    if not rows:
        typer.echo("no judge agreement measured yet; run `advisor judge agreement`")
        return
    for row in rows:
        typer.echo(f"{row['measured_at']:%Y-%m-%d %H:%M} " + render(json.loads(row["detail_json"]))[0])
