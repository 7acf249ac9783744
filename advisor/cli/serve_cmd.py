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
    store: Annotated[str, typer.Option("--store", envvar="ADVISOR_STORE_URL",
                                       help="DuckDB store file (router training data; live records ingested) "
                                       "or postgresql://USER@HOST/DB (several replicas: records batched there, "
                                       "promoted router read from there).")] = DEFAULT_STORE,
    spool: Annotated[Optional[Path], typer.Option("--spool", help="Folder of per-worker record segments "
                                                  "(default: <store>.live; with PostgreSQL: advisor-spool, "
                                                  "records wait there while the database is down).")] = None,
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
    from advisor.store import is_database_url
    from advisor.store.protocols import duckdb_path

    if protocol not in ("grpc", "http"):
        raise ConfigError(f"--protocol {protocol!r}: use grpc or http")
    _bindable(host, port)
    database = is_database_url(store)
    run(ServeOptions(ladder_path=ladder, suite_path=suite, url=url, router_path=router, config_path=config,
                     keys_path=keys, store_path=Path(DEFAULT_STORE if database else duckdb_path(store)),
                     store_url=store if database else None, spool=spool, host=host, port=port, workers=workers,
                     no_auth=no_auth, ingest_every_s=ingest_every, protocol=protocol,
                     echo=lambda line: typer.echo(line)))


def _bindable(host: str, port: int) -> None:
    """A --host the service can bind (checked before Triton starts); ConfigError otherwise."""
    import socket

    from advisor.errors import ConfigError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host!r}: not an address this machine can bind ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address[0], 0))
        except OSError as exc:
            raise ConfigError(f"--host {host!r}: cannot bind it ({exc.strerror or exc})") from None


def ingest(store: Annotated[str, typer.Option("--store", envvar="ADVISOR_STORE_URL",
                                              help="DuckDB store file or postgresql:// URL.")] = DEFAULT_STORE,
           spool: Annotated[Optional[Path], typer.Option("--spool", help="Segment folder (default: "
                                                         "<store>.live; with PostgreSQL: advisor-spool).")] = None
           ) -> None:
    """Merge the routing service's record segments into the store (idempotent)."""
    from advisor.service.launch import default_spool, ingest_now
    from advisor.store import open_store
    from advisor.store.protocols import redact

    with open_store(store):  # the store answers (a wrong password is an error) even when nothing waits
        pass
    counts = ingest_now(spool or default_spool(store), store)
    typer.echo(f"{counts['segments']} segments: {counts['decisions']} decisions, {counts['attempts']} attempts "
               f"ingested into {redact(store)}" + (f" ({counts['torn_lines']} torn lines skipped)" if counts["torn_lines"] else "")
               + (f" ({counts['quarantined_lines']} bad lines quarantined)" if counts.get("quarantined_lines") else ""))
