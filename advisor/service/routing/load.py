"""Load as a term in the rung choice: per rung a live estimate of the wait before service, and the decision's
chain adjusted when that wait breaks the request's deadline.

**The estimate** (`LoadBoard.waits`, seconds per rung) is refreshed by a background task per worker every
``load.poll_interval_s`` (`LoadBoard.poll`), off the request path: a decision reads a number. Two sources, the
larger wins:

- **advisor's own observations**, for every rung (the only source for an ``openai`` rung): each call through the
  worker's client is timed (`ObservedClient`). The service time S is the 10th percentile of the rung's recent
  latencies (the last `HISTORY` calls); the wait is the larger of the median latency of the calls that ended in
  the last ``window_s`` seconds less S, and the age of the oldest call still in flight less S (a queue that is
  growing shows there before any call of it returns). With nothing in flight and recent calls at S, it is 0.
  Between polls, the calls in flight give a figure that moves with every call (`RungObserver.queue_wait_s`,
  updated by the calls themselves, read as a number): the rung's slots are the most calls it had in flight at
  once that were all served within `UNQUEUED` x S, and a call sent now waits (in flight + 1 - slots) / slots
  service times; the decision takes the larger of the two.
- **Triton's metrics endpoint**, for a Triton rung (``load.metrics_url``; default: port 8002 on the host of the
  rung's gRPC address): per model the mean queue time of the requests served since the last poll
  (``nv_inference_queue_duration_us`` over ``nv_inference_request_success``) while
  ``nv_inference_pending_request_count`` is above 0, and for the vLLM backend the mean time to first token
  since the last poll (``vllm:time_to_first_token_seconds``) while ``vllm:num_requests_waiting`` is above 0.
  An endpoint that does not answer is left out (the observed estimate stays).

Waits under ``load.min_wait_s`` count as 0, so an idle ladder decides exactly as without load-awareness.

**The decision** (`apply`): the request's deadline is its ``max_latency_s`` preference, else the attempt limit
(``limits.attempt_timeout_s``). When the chain's first rung's expected wait plus its service time is past the
deadline, that rung is **passed over**: the chain starts at the first rung that meets the deadline, in the
order: the chain's other rungs, the allowed rungs above the first, then those below; the rungs that do not meet
it keep their order after it (**demoted**; a single-shot chain is the new rung alone). When no rung meets the
deadline the chain stays as decided and the explanation says so. A session step is decided the same way, and
its latch stays where it is: the move is this step's, recorded as ``load <from>-><to>`` (not a failure).

The reason is in the decision's explanation (``load``: every rung's expected wait, the deadline, what was passed
over and why), in the ``x-advisor-load`` response header, and counted in ``advisor_load_moves_total``; the
per-rung estimate is the ``advisor_rung_expected_wait_seconds`` gauge of ``/metrics``. ``load: {enabled:
false}`` turns all of it off (no poller, no timing).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import deque
from typing import Any

from advisor.backends import backend_kind
from advisor.triton._transport import default_metrics_url
from advisor.triton.client import parse_prometheus, scrape

HISTORY = 200  #: recent latencies kept per rung (the service time is their 10th percentile)
UNQUEUED = 1.5  #: a call that took at most this times the service time was served without queueing
SCRAPE_TIMEOUT_S = 2.0


class RungObserver:
    """advisor's own view of one rung in this worker: calls in flight, recent latencies and the concurrency the
    rung has served without queueing (its slots, as far as this worker has seen)."""

    def __init__(self) -> None:
        self.started: dict[int, tuple[float, int]] = {}  #: token -> (start time, calls in flight with it)
        self.done: deque[tuple[float, float]] = deque(maxlen=HISTORY)  #: (ended at, latency s)
        self.service: float | None = None  #: the service time as the last poll computed it (`service_s`)
        self.slots = 0  #: the most calls in flight at once that were all served within `UNQUEUED` x service
        self._next = 0

    def start(self) -> int:
        """A call begins; returns its token for `end`."""
        self._next += 1
        self.started[self._next] = (time.monotonic(), len(self.started) + 1)
        return self._next

    def end(self, token: int) -> None:
        """The call of `token` ended (answered or failed)."""
        begun = self.started.pop(token, None)
        if begun is not None:
            now = time.monotonic()
            latency = now - begun[0]
            self.done.append((now, latency))
            if self.service is not None and latency <= UNQUEUED * self.service:
                self.slots = max(self.slots, begun[1])

    def service_s(self) -> float | None:
        """The rung's service time: the 10th percentile of its recent latencies (None before any call)."""
        if not self.done:
            return None
        lat = sorted(x for _, x in self.done)
        return lat[len(lat) // 10]

    def queue_wait_s(self) -> float:
        """The wait of a call sent now, from the calls in flight: past the slots seen, each slot's worth of calls
        ahead costs one service time (0 before the service time and the slots are known)."""
        if self.service is None or not self.slots:
            return 0.0
        ahead = len(self.started) + 1 - self.slots
        return ahead * self.service / self.slots if ahead > 0 else 0.0

    def wait_s(self, window_s: float) -> float:
        """The expected wait before service seen in latencies (module docstring); refreshes `service`."""
        service = self.service = self.service_s()
        if service is None:
            return 0.0
        now = time.monotonic()
        recent = [x for t, x in self.done if now - t <= window_s]
        wait = statistics.median(recent) - service if recent else 0.0
        if self.started:
            wait = max(wait, now - min(t for t, _ in self.started.values()) - service)
        return max(0.0, wait)


class ObservedClient:
    """A backend client whose calls are timed for one rung's `RungObserver` (everything else passes through)."""

    def __init__(self, client: Any, observer: RungObserver) -> None:
        self._client, self._observer = client, observer

    async def generate(self, *args: Any, **kwargs: Any):
        """The client's `generate`, timed."""
        token = self._observer.start()
        try:
            return await self._client.generate(*args, **kwargs)
        finally:
            self._observer.end(token)

    async def generate_stream(self, *args: Any, **kwargs: Any):
        """The client's `generate_stream`, timed from the call to the stream's end."""
        token = self._observer.start()
        try:
            async for part in self._client.generate_stream(*args, **kwargs):
                yield part
        finally:
            self._observer.end(token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def triton_waits(now: dict[str, float], before: dict[str, float] | None) -> dict[str, float]:
    """Per model, the wait Triton's (and its vLLM backend's) metrics show between two scrapes (module docstring):
    parsed series ``{name{labels}: value}`` now and at the previous poll."""
    before = before or {}
    out: dict[str, float] = {}
    for key, pending in now.items():
        name, model = _series(key)
        if name == "nv_inference_pending_request_count" and model:
            queue = _delta(now, before, "nv_inference_queue_duration_us", model)
            served = _delta(now, before, "nv_inference_request_success", model)
            out[model] = max(out.get(model, 0.0), queue / served / 1e6 if pending > 0 and served > 0 else 0.0)
        elif name == "vllm:num_requests_waiting" and model:
            ttft = _delta(now, before, "vllm:time_to_first_token_seconds_sum", model)
            count = _delta(now, before, "vllm:time_to_first_token_seconds_count", model)
            out[model] = max(out.get(model, 0.0), ttft / count if pending > 0 and count > 0 else 0.0)
    return out


def _series(key: str) -> tuple[str, str]:
    """(metric name, model label) of a parsed series key such as ``nv_x{model="m",version="1"}``."""
    name, _, labels = key.partition("{")
    for part in labels.rstrip("}").split(","):
        label, _, value = part.partition("=")
        if label.strip() in ("model", "model_name"):
            return name, value.strip().strip('"')
    return name, ""


def _delta(now: dict[str, float], before: dict[str, float], name: str, model: str) -> float:
    total = lambda d: sum(v for k, v in d.items() if _series(k) == (name, model))  # noqa: E731
    return max(0.0, total(now) - total(before))


class LoadBoard:
    """One worker's load view: the observers, the last estimate per rung, and the poller that refreshes it."""

    def __init__(self, rt, config) -> None:
        self.rt, self.config = rt, config
        self.observers: dict[str, RungObserver] = {}
        self.clients: dict[tuple[str, int], ObservedClient] = {}
        self.waits: dict[str, float] = {}  #: the estimate the decision reads (seconds, per rung)
        self.triton: dict[str, float] = {}  #: per rung, Triton's own figure at the last poll
        self._scraped: dict[str, dict[str, float]] = {}
        self._task: asyncio.Task | None = None
        self._http = None  #: the poller's one HTTP client, kept: building one loads the TLS trust store

    def observed(self, model, client):
        """`client` with its calls timed for `model`'s rung (the same wrapper for the same client)."""
        key = (model.name, id(client))
        wrapped = self.clients.get(key)
        if wrapped is None:
            obs = self.observers.setdefault(model.name, RungObserver())
            wrapped = self.clients[key] = ObservedClient(client, obs)
        return wrapped

    def wait(self, rung: str) -> float:
        """The rung's expected wait now: the poller's figure, or the calls in flight's if larger (module
        docstring); under ``min_wait_s``, 0."""
        obs = self.observers.get(rung)
        wait = max(self.waits.get(rung, 0.0), obs.queue_wait_s() if obs is not None else 0.0)
        return wait if wait >= self.config.min_wait_s else 0.0

    def service_s(self, rung: str) -> float:
        """The rung's service time: observed, else the router's recorded median latency, else 0."""
        obs = self.observers.get(rung)
        seen = obs.service if obs is not None else None
        if seen is not None:
            return seen
        router = self.rt.router
        if rung in router.rung_names:
            return float(router.rungs[router.rung_names.index(rung)].latency_s or 0.0)
        return 0.0

    def ensure_polling(self) -> None:
        """Start the background poller on the running event loop (once per worker)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll_forever())

    async def _poll_forever(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a failed poll keeps the last estimate; the next one retries
                await self.poll()
            await asyncio.sleep(self.config.poll_interval_s)

    async def poll(self) -> dict[str, float]:
        """Refresh `waits` from the observers and the Triton metrics endpoints (module docstring)."""
        await self._poll_triton()
        cfg, waits = self.config, {}
        for rung in self.rt.ladder.rungs:
            obs = self.observers.get(rung.name)
            wait = max(obs.wait_s(cfg.window_s) if obs else 0.0, self.triton.get(rung.name, 0.0))
            waits[rung.name] = wait if wait >= cfg.min_wait_s else 0.0
        self.waits = waits
        for rung in self.rt.ladder.rungs:
            self.rt.metrics.child(self.rt.metrics.expected_wait, rung.name).set(self.wait(rung.name))
        return waits

    async def _poll_triton(self) -> None:
        urls: dict[str, list] = {}
        for rung in self.rt.ladder.rungs:
            if backend_kind(rung).queue_metrics:
                urls.setdefault(self.metrics_url(rung), []).append(rung)
        found: dict[str, float] = {}
        if urls and self._http is None:
            # heavy dependency, imported on use: httpx
            import httpx

            self._http = httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S)
        for url, rungs in urls.items():
            parsed = await _scrape(url, self._http)
            if parsed is None:
                continue
            by_model = triton_waits(parsed, self._scraped.get(url))
            self._scraped[url] = parsed
            for rung in rungs:
                model_id = rung.model_id
                found[rung.name] = by_model.get(model_id, by_model.get(getattr(rung, "hf_id", None) or "", 0.0))
        self.triton = found

    def metrics_url(self, rung) -> str:
        """The Triton metrics endpoint of a rung: ``load.metrics_url``, else port 8002 on its gRPC host."""
        if self.config.metrics_url:
            return self.config.metrics_url
        return default_metrics_url(self.rt.settings.urls.get(rung.name) or next(iter(self.rt.settings.urls.values()),
                                                                                 "localhost"))

    async def close(self) -> None:
        """Stop the poller and close its HTTP client."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._http is not None:
            await self._http.aclose()
            self._http = None


async def _scrape(url: str, client=None) -> dict[str, float] | None:
    """The parsed Prometheus text of `url` (through `client`, an httpx.AsyncClient, when given), or None when it
    does not answer in `SCRAPE_TIMEOUT_S`."""
    try:
        async with asyncio.timeout(SCRAPE_TIMEOUT_S):
            return parse_prometheus(await scrape(url, SCRAPE_TIMEOUT_S, client))
    except Exception:  # noqa: BLE001 - an endpoint that does not answer is left out (module docstring)
        return None


# ----------------------------------------------------------------------------------------------- deciding
def board(rt) -> LoadBoard | None:
    """The worker's `LoadBoard` (None when ``load.enabled`` is false); its poller is started on first use."""
    b = rt.load_board
    if b is not None:
        with contextlib.suppress(RuntimeError):  # no running loop (a decision outside the service): no poller
            b.ensure_polling()
    return b


def apply(rt, req, plan) -> None:
    """Adjust `plan`'s chain for load (module docstring); a no-op when load-awareness is off or nothing waits."""
    b = board(rt)
    if b is None or not plan.chain or plan.mode in ("pinned", "orchestrator"):
        return
    waits = {r: b.wait(r) for r in plan.allowed}
    if not any(waits.values()):  # an idle ladder: the decision as it was
        plan.explanation = {**(plan.explanation or {}), "load": {"expected_wait_s": waits}}
        return
    prefs = req.advisor
    deadline = prefs.max_latency_s if prefs is not None and prefs.max_latency_s else rt.config.limits.attempt_timeout_s
    meets = {r: waits.get(r, 0.0) + b.service_s(r) <= deadline for r in plan.allowed}
    first = plan.chain[0]
    note: dict[str, Any] = {"expected_wait_s": {r: round(w, 4) for r, w in waits.items()}, "deadline_s": deadline}
    if meets.get(first, True):
        plan.explanation = {**(plan.explanation or {}), "load": note}
        return
    names = [r.name for r in rt.ladder.rungs]
    at = names.index(first)
    order = [*plan.chain[1:], *(n for n in names[at + 1:] if n in plan.allowed and n not in plan.chain),
             *(n for n in reversed(names[:at]) if n in plan.allowed and n not in plan.chain)]
    pick = next((r for r in order if meets.get(r)), None)
    why = (f"{first}: expected wait {waits.get(first, 0.0):.2f}s + service {b.service_s(first):.2f}s > "
           f"deadline {deadline:.2f}s")
    if pick is None:
        note["kept"] = why + "; no allowed rung meets the deadline"
        plan.explanation = {**(plan.explanation or {}), "load": note}
        return
    rest = [r for r in plan.chain if r != pick]
    plan.chain = [pick] if plan.mode == "single" else \
        ([pick, *(r for r in rest if meets.get(r)), *(r for r in rest if not meets.get(r))])[:max(len(plan.chain), 1)]
    note.update(passed_over={first: why}, moved=f"{first}->{pick}")
    plan.explanation = {**(plan.explanation or {}), "load": note}
    plan.policy = f"{plan.policy}+load"
    session = getattr(plan, "session", None)
    if session is not None and not session.escalation:
        session.escalation = f"load {first}->{pick}"
    rt.metrics.child(rt.metrics.load_moves, first, pick).inc()


def load_headers(plan) -> dict[str, str]:
    """The ``x-advisor-load`` header of a decision that load changed or could not change."""
    note = (plan.explanation or {}).get("load") or {}
    if "moved" in note:
        return {"x-advisor-load": f"{note['moved']} ({next(iter(note['passed_over'].values()))})"}
    if "kept" in note:
        return {"x-advisor-load": f"kept ({note['kept']})"}
    return {}
