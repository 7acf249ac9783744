"""The processes of ``advisor serve`` die together, and the service watches the Triton that serves its rungs.

- Workers die with their parent: `die_with_parent` (Linux ``PR_SET_PDEATHSIG``) in each uvicorn worker, so a
  SIGKILL of ``advisor serve --workers N`` leaves no worker holding the port (each gets SIGTERM, drains and
  exits). The embedded tritonserver gets the same from PyTriton; stubs it leaves are stopped
  at the next start (`advisor.triton.server.clean_leaked`).
- `clean_stale_workdirs` removes the ``advisor-serve-<pid>-*`` temporary folders of services that no longer run
  (a SIGKILL leaves its folder, a trained ``router.json`` of several MB among others).
- `watched_triton` yields where the rungs are served, as `advisor.probe.session.serving` does, and watches that
  Triton from a thread: the embedded one it started is restarted with backoff when it dies (its death logged
  once); a Triton given with ``--url`` (or a real ladder's) is asked through its backend (`server_ready`) and
  reported, never restarted. The state is
  written to a small JSON file the workers read for ``/readyz`` (`triton_status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from advisor.backends import BackendError, BackendOptions, BackendPool, backend_kind

#: environment variable naming the ``advisor serve`` process, for its workers
PARENT_ENV = "ADVISOR_SERVE_PARENT"
#: prefix of the service's temporary folder; its pid follows
WORKDIR_PREFIX = "advisor-serve-"
#: seconds between two looks at Triton, and the longest wait between two restarts
WATCH_EVERY_S, MAX_BACKOFF_S = 0.5, 30.0


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send `sig` to this process when its parent ends (Linux; elsewhere nothing); if the parent
    `parent_pid` is gone already, send it now."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent_pid:  # the parent died before the prctl
        os.kill(os.getpid(), sig)


def worker_started() -> None:
    """Called in every process that builds the app: a uvicorn worker of ``advisor serve`` dies with it."""
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and int(parent) != os.getpid():
        die_with_parent(int(parent))


def workdir() -> tempfile.TemporaryDirectory:
    """The service's temporary folder, named after this process (`clean_stale_workdirs` finds the dead ones)."""
    return tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


def clean_stale_workdirs(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders of ``advisor serve`` processes that no longer run; the folders removed."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        pid = path.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists() and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def triton_status(path: str | None) -> str | None:
    """Why Triton is not serving, as the watcher last wrote it (None when it is, or nothing is known)."""
    if not path:
        return None
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return None if state.get("up") else state.get("why")


class _Status:
    """The watcher's state file (written whole, then renamed: a reader never sees half of it)."""

    def __init__(self, path: Path):
        self.path = path
        self.write(True, "")

    def write(self, up: bool, why: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"up": up, "why": why, "at": time.time()}))
        os.replace(tmp, self.path)


class EmbeddedWatch(threading.Thread):
    """Restart the embedded Triton when it dies: the death logged once, restarts after 1, 2, 4, ... s (at most
    `MAX_BACKOFF_S`) on the same ports, a line when it serves again. The thread that restarted the server stops
    it before ending (PyTriton ties tritonserver to the thread that started it)."""

    def __init__(self, server, status: _Status, stop: threading.Event, echo: Callable[[str], None]):
        super().__init__(name="triton-watch", daemon=True)
        self.server, self.status, self.stop_event, self.echo = server, status, stop, echo
        self.restarts = 0

    def run(self) -> None:
        started_here = False
        try:
            while not self.stop_event.wait(WATCH_EVERY_S):
                if self.server._alive():  # noqa: SLF001 - the server's own liveness check
                    continue
                started_here = self._restart() or started_here
        finally:
            if started_here:
                self.server.stop()

    def _restart(self) -> bool:
        why = "the embedded Triton exited"
        self.echo(f"{why}; restarting it (requests get 503 until it is back)")
        backoff = 1.0
        while not self.stop_event.is_set():
            self.status.write(False, f"{why}; restarting it (attempt {self.restarts + 1})")
            if self.stop_event.wait(backoff):
                return False
            self.restarts += 1
            self.server.stop()
            try:
                self.server.start()
            except BackendError as exc:
                self.status.write(False, f"{why}; restart {self.restarts} failed ({exc}); retrying in "
                                         f"{min(backoff * 2, MAX_BACKOFF_S):g} s")
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            self.echo(f"embedded Triton restarted (restart {self.restarts}) at grpc={self.server.grpc_url}")
            self.status.write(True, "")
            return True
        return False


class UrlProbe(threading.Thread):
    """Probe the Tritons the service did not start (``--url``, a real ladder's addresses) and report when one
    stops or starts answering; never restart them. Each is asked through the backend of a model it serves
    (`ModelBackend.server_ready`), as every other caller asks it."""

    def __init__(self, ladder, urls: dict[str, str], protocol: str, status: _Status, stop: threading.Event,
                 echo: Callable[[str], None], every_s: float = 2.0):
        super().__init__(name="triton-probe", daemon=True)
        self.pool = BackendPool(ladder, urls=urls, options=BackendOptions(timeout_s=2.0, retries=0, protocol=protocol))
        models = [m for m in ladder.models() if m.name in urls]
        #: one model per endpoint, by endpoint (the backend of that model asks it)
        self.targets = {self.pool.endpoint(m): m for m in reversed(models)}
        self.status, self.stop_event, self.echo, self.every_s = status, stop, echo, every_s

    def run(self) -> None:
        loop = asyncio.new_event_loop()  # this thread's own: the clients' connections belong to it
        down: dict[str, str] = {}
        try:
            while not self.stop_event.wait(self.every_s):
                for url, model in sorted(self.targets.items()):
                    who = f"Triton at {url}"
                    ready = loop.run_until_complete(self.pool(model).server_ready())
                    if not ready and url not in down:
                        self.echo(f"{who} does not answer (not ready); not restarted: advisor did not start it")
                    elif ready and url in down:
                        self.echo(f"{who} answers again")
                    if ready:
                        down.pop(url, None)
                    else:
                        down[url] = f"{who} does not answer (not ready)"
                self.status.write(not down, "; ".join(down.values()))
        finally:
            loop.run_until_complete(self.pool.close())
            loop.close()


@contextlib.contextmanager
def watched_triton(url: str | None, ladder, suite_path: Path, status_path: Path, protocol: str,
                   echo: Callable[[str], None]) -> Iterator[tuple[dict[str, str], str]]:
    """``(url by model name, served_by)`` as `advisor.probe.session.serving` gives them, with the Triton behind
    them watched until exit (see the module docstring)."""
    # lazy: only the serving process starts or watches Triton (workers import this module for `triton_status`)
    from advisor.probe.session import embeds, serving
    from advisor.triton.server import EmbeddedTriton

    status, stop = _Status(status_path), threading.Event()
    if not embeds(url, ladder):
        with serving(url, ladder, suite_path) as (urls, served_by):
            tritons = {m.name for m in ladder.models() if backend_kind(m).server}  # hosted APIs: not watched
            watch = UrlProbe(ladder, {n: u for n, u in urls.items() if n in tritons}, protocol, status, stop, echo)
            watch.start()
            try:
                yield urls, served_by
            finally:
                stop.set()
                watch.join(timeout=10)
        return
    with EmbeddedTriton(ladder, suite_paths=(str(suite_path),)) as server:
        watch = EmbeddedWatch(server, status, stop, echo)
        watch.start()
        try:
            yield {m.name: server.grpc_url for m in ladder.models()}, "embedded"
        finally:
            stop.set()
            watch.join(timeout=30)
