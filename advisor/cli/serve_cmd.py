"""`advisor serve`: the OpenAI-compatible routing service; `advisor store ingest`: merge its records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `serve` command."""
    app.command("serve")(serve)


def serve(
    ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                   help="Ladder (default: ladders/demo.yaml).")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="A running Triton's gRPC address (host:port); "
                                               "default: embedded Triton with the ladder's stand-ins.")] = None,
    router: Annotated[Optional[Path], typer.Option("--router", exists=True, dir_okay=False,
                                                   help="Router artifact or promoted pointer (watched: hot reload); default: the store's promoted pointer, else train one from --store.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False,
                                                   help="Service config YAML (verifiers per class, limits).")] = None,
    keys: Annotated[Optional[Path], typer.Option("--keys", exists=True, dir_okay=False,
                                                 help="API key file (NAME KEY-or-sha256:HEX [RUNGS]); also "
                                                 "ADVISOR_API_KEYS.")] = None,
    store: Annotated[Path, typer.Option("--store", help="DuckDB store: router training data and where live "
                                        "records are ingested.")] = Path(DEFAULT_STORE),
    spool: Annotated[Optional[Path], typer.Option("--spool", help="Folder of per-worker record segments "
                                                  "(default: <store>.live).")] = None,
    suite: Annotated[Optional[Path], typer.Option("--suite", exists=True, dir_okay=False,
                                                  help="Suite the embedded stand-ins know.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0 = a free one).")] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="Worker processes.")] = 1,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="Accept requests without an API key (local "
                                          "development only).")] = False,
    ingest_every: Annotated[float, typer.Option("--ingest-every", min=0, help="Seconds between ingests of the "
                                                "records into the store (0 = only at shutdown).")] = 5.0,
    protocol: Annotated[str, typer.Option("--protocol", help="Triton protocol: grpc or http.")] = "grpc",
) -> None:
    """Serve live requests: OpenAI-compatible /v1/chat/completions routed, verified and recorded."""
    from advisor.errors import ConfigError
    from advisor.service.launch import ServeOptions, serve as run

    if protocol not in ("grpc", "http"):
        raise ConfigError(f"--protocol {protocol!r}: use grpc or http")
    run(ServeOptions(ladder_path=ladder, suite_path=suite, url=url, router_path=router, config_path=config,
                     keys_path=keys, store_path=store, spool=spool, host=host, port=port, workers=workers,
                     no_auth=no_auth, ingest_every_s=ingest_every, protocol=protocol,
                     echo=lambda line: typer.echo(line)))


def ingest(store: Annotated[Path, typer.Option("--store", help="DuckDB store file.")] = Path(DEFAULT_STORE),
           spool: Annotated[Optional[Path], typer.Option("--spool", help="Segment folder (default: "
                                                         "<store>.live).")] = None) -> None:
    """Merge the routing service's record segments into the store (idempotent)."""
    from advisor.service.launch import ingest_now
    from advisor.service.recording import spool_for

    counts = ingest_now(spool or spool_for(store), store)
    typer.echo(f"{counts['segments']} segments: {counts['decisions']} decisions, {counts['attempts']} attempts "
               f"ingested into {store}" + (f" ({counts['torn_lines']} torn lines skipped)" if counts["torn_lines"] else ""))
