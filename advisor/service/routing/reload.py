"""Hot reload of the router: the service picks up a promoted artifact without a restart.

The service serves either an artifact file or a **promoted pointer** (`advisor.router.feedback.promotion`): a pointer
file, or the pointer row of a PostgreSQL store (`advisor.router.feedback.pointers.DatabasePointer`, read by every replica).
With a pointer, every worker checks it every second (a file: its size and modification time; a database: the
sha256 it names, one small query in a thread) and on SIGHUP; when it names
another artifact (by sha256), the worker loads and validates it in a thread (the event loop keeps serving),
checks its rungs are on the ladder, warms it up, and swaps one reference. A request takes the router it will
use once, when it starts (`pin`), through a context variable, so the decision, the recorded
``router_version`` and every estimate of one request come from one router, even when the swap happens while
it is in flight. A pointer that cannot be loaded leaves the serving router in place (counted in
``advisor_router_reloads_total{result="failed"}`` and printed once per change).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import sys
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError, ConfigError
from advisor.router.feedback.pointers import DatabasePointer, FilePointer, is_pointer, pointer_for, sha256_of
from advisor.router.model.artifact import load_router
from advisor.store.protocols import is_database_url

_PINNED: contextvars.ContextVar = contextvars.ContextVar("advisor_router", default=None)
CHECK_EVERY_S = 1.0


class Serving:
    """The router a worker serves now, with where it came from (version, sha256, pointer)."""

    def __init__(self, model, path: str, sha256: str | None, pointer):
        self.model, self.path, self.sha256, self.pointer = model, path, sha256, pointer

    @property
    def version(self) -> str:
        """The router version recorded with decisions."""
        return self.model.version_tag

    def describe(self) -> dict[str, Any]:
        """What /readyz reports."""
        return {"router_version": self.version, "router_sha256": self.sha256, "router_artifact": self.path,
                "router_pointer": None if self.pointer is None else str(self.pointer)}


def load_serving(path, ladder) -> Serving:
    """Load an artifact, or the artifact a promoted pointer (a file, a PostgreSQL store URL or a pointer object)
    names, checked against the ladder's rungs."""
    pointer = None
    sha = None
    if isinstance(path, (DatabasePointer, FilePointer)) or is_database_url(path) or is_pointer(path):
        pointer = path if isinstance(path, (DatabasePointer, FilePointer)) else pointer_for(path)
        info = pointer.read()
        artifact, sha = Path(info["artifact"]), info.get("sha256")
    else:
        path = Path(path)
        artifact = path
    model = load_router(artifact)
    sha = sha or sha256_of(artifact)
    names = [r.name for r in ladder.rungs]
    unknown = [n for n in model.rung_names if n not in names]
    if unknown:
        raise ConfigError(f"{artifact}: router rungs {', '.join(unknown)} are not on ladder {ladder.name!r} "
                          f"({', '.join(names)}): train it on this ladder's runs")
    model.predict_one("warm up", None)  # loads the featuriser's libraries now, not on the first request
    return Serving(model, str(artifact), sha, pointer)


def pin(rt) -> None:
    """Fix the router of the request being handled (call once when a request starts)."""
    _PINNED.set(rt.serving)


def current(rt) -> Serving:
    """The request's pinned router, else the worker's current one."""
    return _PINNED.get() or rt.serving


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


async def check(rt) -> bool:
    """Reload when the pointer names another artifact; True when the router was swapped."""
    pointer = rt.serving.pointer
    if pointer is None:
        return False
    try:
        if isinstance(pointer, (str, Path)):
            pointer = pointer_for(pointer)
        if isinstance(pointer, DatabasePointer):  # the database's sha, read off the loop
            sha = await asyncio.to_thread(pointer.current_sha)
        else:
            sha = pointer.read().get("sha256")
        if sha == rt.serving.sha256:
            return False
        new = await asyncio.to_thread(load_serving, pointer, rt.ladder)
    except Exception as exc:  # noqa: BLE001 - whatever the pointer holds, the watcher must live on
        why = str(exc) if isinstance(exc, AdvisorError) else f"{type(exc).__name__}: {exc}"
        if rt.reload_failed(why):
            print(f"router reload failed (still serving {rt.serving.version}): {why}", file=sys.stderr)
            rt.metrics.reloads.labels("failed").inc()
        return False
    rt.serve_router(new)  # one reference: requests already running keep the router they pinned
    rt.metrics.reloads.labels("ok").inc()
    rt.metrics.router_info.labels(new.version).set(1)
    rt.metrics.set_reference(new.model, rt.config.classes)
    return True


async def watch(rt, hup: asyncio.Event) -> None:
    """Check the pointer every CHECK_EVERY_S seconds (when it changed on disk) and whenever SIGHUP arrives."""
    pointer = rt.serving.pointer
    if pointer is None:
        return
    polled = isinstance(pointer, DatabasePointer)  # no modification time to watch: ask every round
    seen = None if polled else _stamp(str(pointer))
    while True:
        try:
            await asyncio.wait_for(hup.wait(), CHECK_EVERY_S)
        except asyncio.TimeoutError:
            pass
        forced = hup.is_set()
        hup.clear()
        stamp = None if polled else _stamp(str(pointer))
        if forced or polled or stamp != seen:
            seen = stamp
            await check(rt)


def on_sighup(event: asyncio.Event) -> bool:
    """Set `event` on SIGHUP in this worker (False where signals cannot be handled here)."""
    if not hasattr(signal, "SIGHUP"):
        return False
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, event.set)
    except (RuntimeError, ValueError, NotImplementedError):
        return False
    return True
