"""What one service worker holds: settings, ladder, router, config, keys, Triton clients, recorder, metrics.

`ServeSettings` is plain data (JSON), so ``advisor serve --workers N`` hands the same settings to every worker
process through one environment variable; each worker builds its own `Runtime` from them when it starts.
The service keeps no other state: the router artifact is read-only, records go to the spool (then the store, or
with a PostgreSQL store straight on to the database).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from advisor.backends import BackendOptions, BackendPool, time_limit
from advisor.ladder import load_ladder
from advisor.scores import VerifierErrors
from advisor.service.process.auth import KeyRing
from advisor.service.records.capture import Capture
from advisor.service.process.config import load_config
from advisor.service.routing.load import LoadBoard
from advisor.service.routing.load import board as load_board
from advisor.service.records.metrics import Metrics
from advisor.service.records.recording import SegmentWriter
from advisor.service.routing.reload import current, load_serving
from advisor.service.records.shipping import DatabaseRecorder
from advisor.service.sessions.costs import parse_cells
from advisor.service.sessions.steps import SessionMetrics
from advisor.service.sessions.latch import open_latches
from advisor.service.routing.shadow import Shadow
from advisor.service.checks.step_check import StepMetrics
from advisor.service.process.supervision import triton_status
from advisor.store.responses import PgResponses, SqliteResponses
from advisor.verifier.build import build_verifier

SETTINGS_ENV = "ADVISOR_SERVE_SETTINGS"


@dataclass
class ServeSettings:
    """Everything a worker needs to serve (the CLI's options, resolved)."""

    ladder_path: str
    router_path: str
    spool: str
    urls: dict[str, str]  #: Triton gRPC address by model name (rungs and roles)
    served_by: str = "embedded"
    config_path: str | None = None
    keys: list[dict] = field(default_factory=list)  #: `KeyRing.to_state()`: hashes only
    protocol: str = "grpc"
    client_retries: int = 1
    no_auth: bool = False  #: accept requests without a key (loopback development only)
    readiness_ttl_s: float = 1.0
    #: per class [false_accept, false_reject] the policy uses: measured on probe runs (`advisor verifier measure`)
    #: or the config's, resolved once by the serving process (`advisor.verifier.calibration.policy_rates`)
    verifier_rates: dict[str, list[float]] = field(default_factory=dict)
    #: a PostgreSQL store's URL: records are shipped there from the spool (`advisor.service.records.shipping`)
    store_url: str | None = None
    #: the file where `advisor.service.process.supervision` says why Triton is not serving (read by /readyz)
    triton_status: str | None = None
    #: per class and rung, a session's figures from the store's probe runs (`advisor.service.sessions.costs.
    #: SessionCell` as a list), resolved once by the serving process; empty: sessions start by the router's policy
    session_cells: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def to_json(self) -> str:
        """The settings as JSON."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ServeSettings":
        """Inverse of `to_json`."""
        return cls(**json.loads(text))


def stored_responses(settings: ServeSettings, cfg):
    """Where ``/v1/responses`` keeps responses: the PostgreSQL store's database when the service has one, else a
    SQLite file beside the spool (`advisor.store.responses`); None when the config keeps none."""
    if not cfg.store:
        return None
    if settings.store_url:
        return PgResponses(settings.store_url, cfg.ttl_s, cfg.max_bytes, cfg.max_responses)
    return SqliteResponses(f"{settings.spool}.responses.sqlite", cfg.ttl_s, cfg.max_bytes, cfg.max_responses)


class Runtime:
    """One worker's live objects, built from `ServeSettings` (clients are created lazily on its event loop)."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.ladder = load_ladder(settings.ladder_path)
        self.config = load_config(settings.config_path, self.ladder)
        self.serving = load_serving(settings.router_path, self.ladder)  # an artifact or a promoted pointer
        self.rungs = {r.name: r for r in self.ladder.rungs}
        self.keys = KeyRing.from_state(settings.keys)
        self.metrics = Metrics()
        self.worker = f"w{os.getpid()}"
        if settings.store_url:
            self.writer = DatabaseRecorder(settings.spool, self.worker, settings.store_url)
        else:
            self.writer = SegmentWriter(settings.spool, self.worker)
        self.policy_name = self.config.routing.policy
        self._pool: Any = None  #: `BackendPool`, built on first use
        self._verifiers: dict[str, Any] = {}
        self._ready: tuple[float, bool, str] = (0.0, False, "not checked yet")
        for cname, cls in self.config.classes.items():
            self._verifiers[cname] = build_verifier(cls.verifier_config, self.ladder, self.client_for)
        self._models = {m.name: m for m in self.ladder.models()}  # rungs and roles, by name
        self._policy_verifiers = {c: self._resolve_policy_verifier(c) for c in self.config.classes}
        self.session_cells = parse_cells(settings.session_cells)  #: `advisor.service.sessions.costs` figures
        self.responses = stored_responses(settings, self.config.responses)  #: `/v1/responses` kept (or None)
        #: live steps captured for `advisor suite from-traffic` (`advisor.service.records.capture`), or None when off
        self.capture = Capture(self.config.capture, self.ladder) if self.config.capture.enabled else None
        #: the parts a request reaches, each built here and nowhere else:
        self.latches = open_latches(settings.spool, settings.store_url, self.config.sessions)  #: session latches
        self.session_metrics = SessionMetrics(self.metrics)  #: `advisor.service.sessions.steps`'s counters
        self.step_metrics = StepMetrics(self.metrics)  #: broken steps caught (`advisor.service.checks.step_check`)
        #: the shadow candidate (`advisor.service.routing.shadow`), loaded now: a bad artifact stops the start
        self.shadow = Shadow(self.config.shadow.artifact, self.ladder) if self.config.shadow is not None else None
        #: expected waits per rung (`advisor.service.routing.load`; its poller starts with the first request), or None
        self.load_board = LoadBoard(self, self.config.load) if self.config.load.enabled else None
        self.reload_error: str | None = None  #: why the last router reload failed (`advisor.service.routing.reload`)
        self.semaphore_limit = self.config.limits.concurrency
        self.in_flight = 0
        self.metrics.router_info.labels(self.serving.version).set(1)
        self.metrics.set_reference(self.serving.model, self.config.classes)

    # ----------------------------------------------------------------- state a request changes, here only
    def take_slot(self) -> bool:
        """Take one of the worker's concurrency slots (False when all are taken: the request gets 429)."""
        if self.in_flight >= self.semaphore_limit:
            return False
        self.in_flight += 1
        self.metrics.in_flight.inc()
        return True

    def release_slot(self) -> None:
        """Give back a slot `take_slot` took (once the response, or its stream, has ended)."""
        self.in_flight -= 1
        self.metrics.in_flight.dec()

    def serve_router(self, new) -> None:
        """Serve the reloaded router `new` from the next request on (`advisor.service.routing.reload`); requests already
        running keep the router they pinned."""
        self.reload_error = None
        self.serving = new

    def reload_failed(self, why: str) -> bool:
        """Note why a reload failed; True the first time this reason is seen (the caller says it once)."""
        first = self.reload_error != why
        self.reload_error = why
        return first

    def count_connections(self) -> None:
        """Set ``advisor_upstream_connections`` from the backend pool (called every second by the app)."""
        if self._pool is None:
            return
        m = self.metrics
        for rung, (n_open, busy) in self._pool.connections().items():
            m.child(m.upstream, rung, "open").set(n_open)
            m.child(m.upstream, rung, "busy").set(busy)

    @property
    def router(self):
        """The router of the request being handled (pinned when it started; see `advisor.service.routing.reload`)."""
        return current(self).model

    def client_for(self, model):
        """The client serving a ladder model, through its backend (`advisor.backends.BackendPool`)."""
        if self._pool is None:
            self._pool = BackendPool(self.ladder, urls=self.settings.urls, options=BackendOptions(
                timeout_s=self.config.limits.attempt_timeout_s, retries=self.settings.client_retries,
                protocol=self.settings.protocol))
        client = self._pool(model)
        load = load_board(self)  # calls timed for the rung's expected wait (advisor.service.routing.load)
        return client if load is None else load.observed(model, client)

    def verifier_for(self, task_class: str | None):
        """The verifier of a class (None when it has none)."""
        return self._verifiers.get(task_class or "")

    def policy_verifier(self, task_class: str | None):
        """The verifier error rates the policy uses for a class: as resolved at startup, else the config's
        (the configured classes are resolved once, in `_policy_verifiers`)."""
        known = self._policy_verifiers.get(task_class or "")
        return known if known is not None else self._resolve_policy_verifier(task_class)

    def _resolve_policy_verifier(self, task_class: str | None):
        pair = self.settings.verifier_rates.get(task_class or "")
        if pair is not None:
            return VerifierErrors(*pair)
        vcfg = self.config.class_config(task_class).verifier_config
        return VerifierErrors(vcfg.false_accept, vcfg.false_reject) if vcfg else VerifierErrors()

    def simulated(self, rung: str) -> bool:
        """True when `rung` (a rung, or a role such as the orchestrator) is a stand-in."""
        return self.ladder.simulated or self._models[rung].simulated

    async def readiness(self) -> tuple[bool, str]:
        """(ready, why): Triton answers and at least one rung is loaded (cached for `readiness_ttl_s`)."""
        checked, ok, why = self._ready
        if time.monotonic() - checked < self.settings.readiness_ttl_s:
            return ok, why
        ready = []
        for rung in self.ladder.rungs:
            try:
                async with time_limit(2.0):
                    if await self.client_for(rung).model_ready(rung.model_id):
                        ready.append(rung.name)
            except Exception:  # noqa: BLE001 - any failure means "not ready"
                continue
        ok = bool(ready)
        why = (f"router loaded; rungs ready: {', '.join(ready)}" if ok else
               f"no rung is ready on Triton ({self.settings.served_by})")
        if not ok:
            why += f": {triton_status(self.settings.triton_status) or 'it does not answer'}"
        self._ready = (time.monotonic(), ok, why)
        return ok, why

    async def close(self) -> None:
        """Close clients and the current segment."""
        self.writer.close()
        if self.responses is not None:
            self.responses.close()
        if self.load_board is not None:
            await self.load_board.close()
        if self._pool is not None:
            await self._pool.close()

