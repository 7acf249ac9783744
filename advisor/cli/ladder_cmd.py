"""`advisor ladder show|validate|check`: inspect ladders and check a running Triton against one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from advisor.ladder import load_ladder

LadderArg = Annotated[Path, typer.Argument(help="Ladder YAML file.", exists=True, dir_okay=False)]


def register(app: typer.Typer) -> None:
    """Add the `ladder` command group."""
    group = typer.Typer(help="Show, validate and check ladders.", no_args_is_help=True)
    group.command("show")(show)
    group.command("validate")(validate)
    app.add_typer(group, name="ladder")


def validate(ladder: LadderArg) -> None:
    """Validate a ladder file; print its name and hash, or the error with file, key and line."""
    lad = load_ladder(ladder)
    sim = " (SIMULATED stand-ins)" if lad.simulated else ""
    typer.echo(f"{ladder}: ok: ladder {lad.name!r}{sim}, {len(lad.rungs)} rungs, hash {lad.config_hash()}")


def show(ladder: LadderArg, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Show a ladder's rungs and roles: sizes, Triton models, prices, formats."""
    lad = load_ladder(ladder)
    if as_json:
        typer.echo(json.dumps(lad.model_dump(mode="json"), indent=2))
        return
    title = f"ladder {lad.name} ({lad.config_hash()})" + ("  [SIMULATED stand-ins]" if lad.simulated else "")
    table = Table(title=title)
    for col in ("role", "name", "hf id", "params (B)", "triton model", "$/M in", "$/M out", "price basis", "tool calls"):
        table.add_column(col)
    rows = [("rung", m) for m in lad.rungs]
    rows += [(role, m) for role, m in (("orchestrator", lad.roles.orchestrator), ("judge", lad.roles.judge)) if m]
    for role, m in rows:
        pin, pout = m.price.per_token()
        params = f"{m.params_total_b:g}" + (f" / {m.params_active_b:g} active" if m.params_active_b else "")
        table.add_row(role, m.name, m.hf_id, params, m.triton_model, f"{pin * 1e6:.3f}", f"{pout * 1e6:.3f}",
                      m.price.basis, m.tool_call_format.value)
    Console().print(table)
