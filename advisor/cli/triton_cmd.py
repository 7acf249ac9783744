"""`advisor triton render|serve`: write a vLLM model repository, or serve a simulated ladder's stand-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor.ladder import load_ladder

LadderArg = Annotated[Path, typer.Argument(help="Ladder YAML file.", exists=True, dir_okay=False)]


def register(app: typer.Typer) -> None:
    """Add the `triton` command group."""
    group = typer.Typer(help="Render the Triton model repository; serve stand-in rungs on an embedded Triton.",
                        no_args_is_help=True)
    group.command("render")(render)
    group.command("serve")(serve)
    app.add_typer(group, name="triton")


def render(
    ladder: LadderArg,
    out: Annotated[Path, typer.Option("--out", help="Repository folder to write.")] = Path("triton_models"),
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when OUT is out of date.")] = False,
) -> None:
    """Render LADDER into a Triton model repository for the vLLM backend (config.pbtxt + 1/model.json)."""
    from advisor.triton.render import diff_repository, render_repository

    lad = load_ladder(ladder)
    if check:
        problems = diff_repository(lad, out, ladder)
        if problems:
            typer.echo(f"{out}: out of date with {ladder}: {', '.join(problems)}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{out}: up to date with {ladder}")
        return
    written = render_repository(lad, out, ladder)
    models = len(lad.models())
    typer.echo(f"{out}: wrote {len(written)} files for {models} models of ladder {lad.name!r}")


def serve(
    ladder: Annotated[Path, typer.Option("--ladder", help="SIMULATED ladder whose stand-ins to serve.",
                                         exists=True, dir_okay=False)] = Path("ladders/demo.yaml"),
    suite: Annotated[Optional[list[Path]], typer.Option("--suite", help="Suite file the stand-ins know (repeatable).",
                                                        exists=True)] = None,
    grpc_port: Annotated[Optional[int], typer.Option("--grpc-port", help="gRPC port (default: a free one).")] = None,
    http_port: Annotated[Optional[int], typer.Option("--http-port", help="HTTP port (default: a free one).")] = None,
    metrics_port: Annotated[Optional[int], typer.Option("--metrics-port", help="Metrics port (default: a free one).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    verbose: Annotated[bool, typer.Option("--verbose", help="Echo tritonserver's own log.")] = False,
) -> None:
    """Serve LADDER's SIMULATED stand-ins on a real tritonserver until Ctrl-C or SIGTERM.

    Prints the gRPC, HTTP and metrics addresses, then one machine-readable line
    `ready grpc=HOST:PORT http=http://HOST:PORT metrics=http://HOST:PORT/metrics`.
    """
    from advisor.triton.server import EmbeddedTriton, serve_forever

    server = EmbeddedTriton(load_ladder(ladder), suite_paths=suite or (), grpc_port=grpc_port, http_port=http_port,
                            metrics_port=metrics_port, host=host, verbose=verbose)
    serve_forever(server)
    typer.echo("stopped")
