"""``advisor serve`` as a library call: reach the rungs, get a router, start uvicorn workers, ingest records.

`serve(options)` resolves the ladder (default: the demo ladder), starts the embedded Triton with its stand-ins
when no ``--url`` is given (as ``advisor probe`` does, through `advisor.probe.session.serving`), loads the
router (``--router``, else one trained from the store's runs, else a `RouterError` saying to run
``advisor probe`` first), and runs the app on uvicorn with N workers. It prints ``ready http=HOST:PORT`` once
the service answers, ingests the workers' record segments into the store every few seconds and once more after
the workers stopped (SIGINT/SIGTERM drain in-flight requests first).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from advisor.errors import DamagedStoreError, RouterError, StoreError
from advisor.ladder import load_ladder
from advisor.probe.session import DEFAULT_LADDER, DEFAULT_SUITE, default_file
from advisor.router.feedback.pointers import DatabasePointer, default_pointer
from advisor.router.training.fit import fit_router, training_data_from_store
from advisor.service.process.auth import ApiKey, KeyRing, key_hash, load_keys, new_key
from advisor.service.process.config import load_config
from advisor.service.records.recording import ingest, spool_for
from advisor.service.routing.reload import load_serving
from advisor.service.process.runtime import SETTINGS_ENV, ServeSettings
from advisor.service.sessions.costs import ANY_CLASS, cells_from_store
from advisor.service.process.supervision import PARENT_ENV, clean_stale_workdirs, watched_triton, workdir
from advisor.store import LiveRecords, RunStore, is_database_url, open_store
from advisor.store.protocols import duckdb_path, redact
from advisor.triton.server import free_port, served_what
from advisor.verifier.calibration import service_rates


@dataclass
class ServeOptions:
    """The CLI's options."""

    ladder_path: Path | None = None
    suite_path: Path | None = None  #: suite the embedded stand-ins know (default: the example suite)
    url: str | None = None
    router_path: Path | None = None
    config_path: Path | None = None
    keys_path: Path | None = None
    store_path: Path = Path("advisor.duckdb")
    store_url: str | None = None  #: a PostgreSQL store: records, promoted pointer and artifacts live there
    spool: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8000  #: 0 = a free port
    workers: int = 1
    no_auth: bool = False
    ingest_every_s: float = 5.0
    protocol: str = "grpc"
    echo: Callable[[str], None] = field(default=print)


def resolve_router(options: ServeOptions, ladder, workdir: Path, echo) -> Path | str:
    """The router artifact to serve: --router, else trained now from the store (RouterError when impossible)."""
    if options.router_path is None and options.store_url:
        shared = DatabasePointer(options.store_url)
        try:
            if shared.exists():
                options.router_path = options.store_url  # the database's promoted router, polled by every worker
        finally:
            shared.close()
    pointer = default_pointer(options.store_path)
    if options.router_path is None and pointer.is_file():
        options.router_path = pointer  # the store's promoted router, watched for promotions
    if options.router_path is not None:
        serving = load_serving(options.router_path, ladder)  # fail here, not in every worker
        if serving.pointer:
            echo(f"serving the promoted router {serving.version} ({serving.path}); watching {serving.pointer}")
            if hasattr(serving.pointer, "close"):
                serving.pointer.close()
        return options.router_path
    if options.store_url and not Path(options.store_path).exists():
        raise RouterError(f"no router to serve: {redact(options.store_url)} has no promoted router yet; promote one "
                          "with `advisor router promote FILE --store URL`, or pass --router FILE")
    model = train_from_store(options.store_path, ladder)
    path = model.save(workdir / "router.json")
    echo(f"router trained from {options.store_path}: {model.provenance['runs']} runs, "
         f"{model.provenance['prompts']} prompts"
         + (f" ({model.provenance['simulated_runs']} SIMULATED)" if model.provenance["simulated_runs"] else ""))
    return path


def train_from_store(store_path: Path, ladder):
    """A router trained on the store's runs of `ladder`, as `advisor serve` trains one when given none
    (RouterError saying to run `advisor probe` first when the store cannot give one)."""
    try:
        with open_store(store_path, read_only=True, role=RunStore) as store:
            data = training_data_from_store(store, ladder_name=ladder.name)
    except RouterError as exc:
        raise RouterError(f"no router to serve: pass --router FILE, or run `advisor probe` first so that one can "
                          f"be trained from {store_path} ({exc})") from None
    except StoreError as exc:  # no store there, or another process holds it: its own message says which
        raise RouterError(f"no router to serve: pass --router FILE, or let `advisor serve` train one from the "
                          f"store when it can be read: {exc}") from None
    return fit_router(data, folds=min(5, max(2, len(set(data.groups)) // 2)))


def serve(options: ServeOptions) -> None:
    """Run the service until SIGINT/SIGTERM (see the module docstring)."""
    echo = options.echo
    ladder_path = Path(options.ladder_path) if options.ladder_path else default_file(DEFAULT_LADDER)
    suite_path = Path(options.suite_path) if options.suite_path else default_file(DEFAULT_SUITE)
    ladder = load_ladder(ladder_path)

    config = load_config(options.config_path, ladder)  # config and key errors now, before any work
    keys = load_keys(options.keys_path, [r.name for r in ladder.rungs])
    rates, lines = service_rates(config, options.store_path)
    cells, start_line = session_start_cells(config, ladder, options.store_path)
    for line in [*lines, *([start_line] if start_line else [])]:
        echo(line)
    if not len(keys) and not options.no_auth:
        secret = new_key()
        keys = KeyRing([ApiKey("generated", key_hash(secret))])
        echo(f"no API key configured (--keys FILE or ADVISOR_API_KEYS): generated one for this run: {secret}")
    spool = Path(options.spool) if options.spool else default_spool(options.store_url or options.store_path)
    if options.store_url:
        database_line(options.store_url, spool, echo)
    port = options.port or free_port(options.host)
    clean_stale_workdirs()  # what a SIGKILL of an earlier service left behind
    with workdir() as tmp:
        router_path = resolve_router(options, ladder, Path(tmp), echo)
        status_path = Path(tmp) / "triton-status.json"
        with watched_triton(options.url, ladder, suite_path, status_path, options.protocol, echo) as (urls, served_by):
            if served_by == "embedded":
                echo(f"embedded Triton serving {served_what(ladder)} of ladder {ladder.name!r} at "
                     f"grpc={urls[ladder.rungs[0].name]}")
            settings = ServeSettings(
                ladder_path=str(ladder_path), router_path=str(router_path), spool=str(spool), urls=urls,
                served_by=served_by, config_path=str(options.config_path) if options.config_path else None,
                keys=keys.to_state(), protocol=options.protocol, no_auth=options.no_auth,
                verifier_rates={name: r.as_pair() for name, r in rates.items()}, store_url=options.store_url,
                triton_status=str(status_path), session_cells=cells)
            os.environ[SETTINGS_ENV] = settings.to_json()
            os.environ[PARENT_ENV] = str(os.getpid())  # the workers die with this process
            if options.workers > 1:
                os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(Path(tmp) / "prometheus")
                os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"])
            before = (0, 0) if options.store_url else live_counts(options.store_path)
            stop = threading.Event()
            threads = [threading.Thread(target=_announce, args=(options.host, port, stop, echo), daemon=True),
                       threading.Thread(target=_ingest_loop, args=(spool, options, stop, echo), daemon=True)]
            for t in threads:
                t.start()
            try:
                _run_uvicorn(options, port, config.limits.deadline_s, config.limits.max_header_bytes)
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=10)
                os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
                os.environ.pop(PARENT_ENV, None)
    counts = final_ingest(spool, options)
    if options.store_url:
        echo(f"stopped; {counts['decisions']} spooled decisions and {counts['attempts']} attempts drained into "
             f"{redact(options.store_url)} (the rest were shipped as they came)"
             + (f" ({counts['torn_lines']} torn lines skipped)" if counts["torn_lines"] else ""))
        return
    echo(stop_line(options.store_path, before, counts["torn_lines"]))


def session_start_cells(config, ladder, store_path) -> tuple[dict, str | None]:
    """The session figures `advisor serve` hands its workers (`advisor.service.sessions.costs.cells_from_store`),
    read once from the DuckDB store at `store_path`, and the startup line that says what sessions start by."""
    sessions = config.sessions
    if not sessions.enabled or sessions.start != "cost_per_usable":
        return {}, None
    cells: dict = {}
    if Path(store_path).is_file():
        try:
            with open_store(store_path, read_only=True, role=RunStore) as store:
                cells = cells_from_store(store, ladder, sessions)
        except DamagedStoreError:
            raise  # one line naming the file and what to do, before anything starts
        except StoreError as exc:
            return {}, f"session start: the store could not be read ({exc}); sessions start by the router's policy"
    if not cells:
        return {}, "session start: no probe runs of this ladder in the store; sessions start by the router's policy"
    runs = sum(int(c[0]) for c in cells.get(ANY_CLASS, {}).values())
    return cells, (f"session start: least expected USD per usable trajectory, from {runs} probe runs "
                   f"({', '.join(sorted(c for c in cells if c != ANY_CLASS))})")


def live_counts(store_path: Path) -> tuple[int, int]:
    """(decisions, attempts) the store holds; (0, 0) where there is no store yet."""
    if not Path(store_path).exists():
        return 0, 0
    with open_store(store_path, read_only=True, role=LiveRecords) as store:
        return store.live_counts()


def database_line(url: str, spool: Path, echo) -> None:
    """One line at start when the PostgreSQL store cannot be reached (a wrong password, a host that is down):
    the service serves anyway, its records wait in the spool, and every worker's /readyz says degraded."""
    try:
        open_store(url).close()
    except StoreError as exc:
        echo(f"records: {exc}; serving anyway: records wait in {spool} until the database takes them, and "
             "/readyz says degraded meanwhile")


def stop_line(store_path: Path, before: tuple[int, int], torn_lines: int = 0) -> str:
    """What the store holds once the service has stopped: the records added while it served (by the periodic
    ingests and the last one together) and the store's totals."""
    after = live_counts(store_path)
    added = (after[0] - before[0], after[1] - before[1])
    return (f"stopped; {store_path} holds {added[0]} decision{'' if added[0] == 1 else 's'} and {added[1]} "
            f"attempt{'' if added[1] == 1 else 's'} recorded while serving ({after[0]} and {after[1]} in all)"
            + (f"; {torn_lines} torn lines skipped" if torn_lines else ""))


def final_ingest(spool: Path, options: ServeOptions) -> dict[str, int]:
    """The ingest once the workers have stopped; when the store cannot take the records (another process holds
    it), a StoreError that says where they wait and how to move them in: nothing is lost."""
    url = getattr(options, "store_url", None)
    try:
        return ingest_now(spool, url or options.store_path)
    except StoreError as exc:
        where = redact(url) if url else options.store_path
        command = f"advisor store ingest --store {where}" + (f" --spool {spool}" if options.spool else "")
        raise StoreError(f"stopped, but the records could not be moved into the store: {exc}. Nothing is lost: "
                         f"they wait in {spool}, and `{command}` moves them in (so does the next `advisor serve` "
                         f"on this store)") from None


def _run_uvicorn(options: ServeOptions, port: int, deadline_s: float, max_header_bytes: int) -> None:
    """Run uvicorn until SIGINT/SIGTERM; it drains in-flight requests and then returns here.

    uvicorn re-raises the signal it caught once it has shut down; a no-op handler installed first lets this
    process go on to stop Triton and ingest the last records instead of dying of that signal.
    """
    # heavy dependency, imported on use: uvicorn
    import uvicorn

    http = "h11"
    if _has("httptools"):
        # lazy: the protocol imports httptools, an optional dependency of uvicorn
        from advisor.service.process.http_protocol import HTTP_PROTOCOL as http
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    uvicorn.run("advisor.service.http.app:create_app", factory=True, host=options.host, port=port,
                workers=options.workers, loop="asyncio",  # uvloop measured no faster: docs/service-overhead.md
                # httptools with the header-size (431) and read-time (408) limits; h11 bounds the head's size (400)
                http=http, h11_max_incomplete_event_size=max_header_bytes,
                log_level="warning", access_log=False, timeout_graceful_shutdown=int(deadline_s) + 5,
                backlog=4096, limit_concurrency=None,
                timeout_keep_alive=75)  # idle keep-alive outlives a client's or load balancer's pool timeout


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _announce(host: str, port: int, stop: threading.Event, echo) -> None:
    """Print the ready line once /healthz answers."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=1) as resp:
                if resp.status == 200:
                    echo(f"ready http={host}:{port}")
                    return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        stop.wait(0.1)


def default_spool(store: str | Path) -> Path:
    """The spool folder of a store: ``<store>.live`` beside a DuckDB file, ``advisor-spool`` for PostgreSQL."""
    return Path("advisor-spool") if is_database_url(store) else spool_for(duckdb_path(store))


#: With PostgreSQL, the drain leaves closed segments younger than this to the worker shipping them
DRAIN_AFTER_S = 5.0


def ingest_now(spool: Path, store: str | Path, min_age_s: float = 0.0) -> dict[str, int]:
    """Ingest the spool into the store (a DuckDB file or a postgresql:// URL) once (StoreError when the store
    is locked by another process or the database cannot be reached)."""
    if not Path(spool).is_dir() or not any(Path(spool).glob("*.*")):
        return {"segments": 0, "decisions": 0, "attempts": 0, "torn_lines": 0, "quarantined_lines": 0}
    with open_store(store) as target:
        return ingest(spool, target, min_age_s)


def _ingest_loop(spool: Path, options: ServeOptions, stop: threading.Event, echo) -> None:
    if options.ingest_every_s <= 0:
        return
    failing = None  #: the kind of failure of the last rounds (one line when it starts, one when it ends)
    while not stop.wait(options.ingest_every_s):
        try:
            if options.store_url:  # what the workers could not ship, and the segments of killed processes
                ingest_now(spool, options.store_url, DRAIN_AFTER_S)
            else:
                ingest_now(spool, options.store_path)
        except StoreError:  # the store is busy (another process has it) or down: next round
            continue
        except Exception as exc:  # noqa: BLE001 - this thread must outlive a failed round; the segment waits
            if type(exc).__name__ != failing:
                failing = type(exc).__name__
                echo(f"ingest: round failed ({failing}: {str(exc).splitlines()[0] if str(exc) else ''}); the "
                     f"segments wait in {spool}; retried every {options.ingest_every_s:g} s (one line when it works)")
            continue
        if failing is not None:
            failing = None
            echo(f"ingest: rounds work again; the waiting segments of {spool} are in the store")
