"""`advisor ladder show|validate|check`: inspect ladders and check a running Triton against one."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from advisor import jsonout
from advisor.ladder import load_ladder
from advisor.money import usd


class WireProtocol(str, Enum):
    """Triton wire protocol."""

    grpc = "grpc"
    http = "http"


LadderArg = Annotated[Path, typer.Argument(help="Ladder YAML file.", exists=True, dir_okay=False)]


def register(app: typer.Typer) -> None:
    """Add the `ladder` command group."""
    group = typer.Typer(help="Show, validate and check ladders.", no_args_is_help=True)
    group.command("show")(show)
    group.command("validate")(validate)
    group.command("check")(check)
    app.add_typer(group, name="ladder")


def validate(ladder: LadderArg) -> None:
    """Validate a ladder file; print its name and hash (and warnings), or the error with file, key and line."""
    lad = load_ladder(ladder)
    sim = " (SIMULATED stand-ins)" if lad.simulated else ""
    typer.echo(f"{ladder}: ok: ladder {lad.name!r}{sim}, {len(lad.rungs)} rungs, hash {lad.config_hash()}")
    for line in ladder_warnings(lad):
        typer.echo(f"{ladder}: warning: {line}", err=True)


def ladder_warnings(lad) -> list[str]:
    """What a valid ladder still gets wrong: real models without a tokenizer (so without their chat template)."""
    models = [*lad.rungs, *(m for m in (lad.roles.orchestrator, lad.roles.judge) if m)]
    return [f"{m.name}: no tokenizer_path, so prompts use a generic chat template instead of the model's own; set "
            "tokenizer_path to a folder holding its tokenizer_config.json (downloaded with the weights)"
            for m in models if not m.simulated and not m.tokenizer_path and m.llama_cpp is None
            and m.backend == "triton"]  # a GGUF carries its template; a chat API applies its own


def show(ladder: LadderArg, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Show a ladder's rungs and roles: sizes, prices, tool-call formats, then Hugging Face ids and Triton models.

    Two narrow tables rather than one wide one, so nothing is cut at 80 columns (long values wrap).
    """
    lad = load_ladder(ladder)
    if as_json:
        typer.echo(jsonout.dumps(lad.model_dump(mode="json"), indent=2))
        return
    title = f"ladder {lad.name} ({lad.config_hash()})" + ("  [SIMULATED stand-ins]" if lad.simulated else "")
    rows = [("rung", m) for m in lad.rungs]
    rows += [(role, m) for role, m in (("orchestrator", lad.roles.orchestrator), ("judge", lad.roles.judge)) if m]
    models = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("role", "name", "params (B)", "$ per M tokens in / out", "tool calls"):
        models.add_column(col, overflow="fold", no_wrap=col in ("role", "name", "tool calls"))
    where = Table(title="where each model comes from", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("name", "hf id", "model id", "price basis: source"):
        where.add_column(col, overflow="fold", no_wrap=col == "name")
    for role, m in rows:
        pin, pout = m.price.per_token()
        params = f"{m.params_total_b:g}" + (f" ({m.params_active_b:g} active)" if m.params_active_b else "")
        models.add_row(role, m.name, params, f"{usd(pin * 1e6, 2)} / {usd(pout * 1e6, 2)}",
                       getattr(m.tool_call_format, "value", m.tool_call_format))
        where.add_row(m.name, m.hf_id, m.model_id, f"{m.price.basis}: {m.price.source} ({m.price.as_of})")
    console = Console()
    console.print(models)
    console.print(where)


def check(
    ladder: LadderArg,
    url: Annotated[Optional[str], typer.Option("--url", help="Triton gRPC address host:port (HTTP base URL with "
                                               "--protocol http); default: each model's own address.")] = None,
    protocol: Annotated[WireProtocol, typer.Option("--protocol", help="Wire protocol.")] = "grpc",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per generation.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check a running Triton against LADDER: per model reachable, ready, on contract, one short generation;
    the orchestrator role must also hand a tiny task to an expert in its tool-call format (hermes).

    Exits 1 when any model fails; an unreachable server is a one-line error.
    """
    import asyncio

    from advisor.probe.ladder_check import check_ladder

    lad = load_ladder(ladder)
    rows = asyncio.run(check_ladder(lad, url, protocol=getattr(protocol, "value", protocol), timeout_s=timeout))
    if as_json:
        typer.echo(jsonout.dumps([r.to_dict() for r in rows], indent=2))
    else:
        _check_table(lad, rows)
    if not all(r.ok for r in rows):
        raise typer.Exit(1)


def _mark(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def _expert_call(row) -> str:
    """The orchestrator's tool-call format check: the alias it called, NO, or - (not an orchestrator)."""
    if row.role != "orchestrator" or row.tool_format is None:
        return "-"
    return row.tool_call if row.tool_format else "NO"


def _check_table(lad, rows) -> None:
    title = f"ladder {lad.name} on Triton" + ("  [SIMULATED stand-ins]" if lad.simulated else "")
    table = Table(title=title)
    for col in ("role", "name", "model id", "url", "reachable", "ready", "contract", "generation",
                "expert call", "tokens in/out", "latency ms", "status"):
        table.add_column(col)
    for r in rows:
        tokens = "-" if r.output_tokens is None else f"{r.input_tokens}/{r.output_tokens}" + (
            "" if r.tokens_from_server else " (est.)")
        table.add_row(r.role, r.name, r.model_id, r.url, _mark(r.reachable), _mark(r.ready), _mark(r.contract),
                      _mark(r.generated), _expert_call(r), tokens, "-" if r.latency_ms is None else f"{r.latency_ms:.1f}",
                      "ok" if r.ok else "FAIL")
    console = Console()
    console.print(table)
    for r in rows:
        if r.error:
            console.print(f"{r.name}: {r.error}", markup=False, highlight=False)
