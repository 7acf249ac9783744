"""`advisor savings`: what routing saves on the team's own captured traffic, against honest baselines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.floors_cmd import LiveStoreOpt, StoreOpt
from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `savings` command."""
    app.command("savings")(savings)


def savings(store: StoreOpt = Path(DEFAULT_STORE),
            suite_name: Annotated[Optional[str], typer.Option("--suite-name", help="A suite made from traffic "
                                                              "(default: every one in the store).")] = None,
            tenant: Annotated[Optional[str], typer.Option("--tenant", help="Only this tenant's steps.")] = None,
            since: Annotated[Optional[str], typer.Option("--since", help="Steps captured since: 7d, 12h, 30m or a "
                                                         "date.")] = None,
            as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
            live_store: LiveStoreOpt = None) -> None:
    """Per class and in total, on captured steps the probe replayed on every rung: the cost and usable rate as
    served, always largest, always smallest, the recommended plans, the current router and a static mix of the
    router's cost, each with a bootstrap interval; and whether the router beats that mix."""
    from advisor.cli.suite_cmd import since_time
    from advisor.report.savings import compute_savings
    from advisor.store import RunStore, open_store, with_live

    with with_live(open_store(store, read_only=True, role=RunStore), live_store) as s:
        result = compute_savings(s, suite=suite_name, tenant=tenant, since=since_time(since))
    if as_json:
        typer.echo(jsonout.dumps(result.to_json(), indent=2))
        return
    for line in result.lines():
        typer.echo(line)
