"""Prometheus metrics of the routing service (prometheus_client), all prefixed ``advisor_``.

Each app gets its own registry (no global state at import). With several workers ``advisor serve`` sets
``PROMETHEUS_MULTIPROC_DIR`` before they start, and ``/metrics`` then sums every worker's values
(prometheus_client's multiprocess mode). Stand-in rungs carry ``simulated="true"`` on every per-rung series.

**Drift gauges** (per task class and rung, with ``simulated``), computed when ``/metrics`` is read from the
summed ``advisor_live_verdicts_total`` counter (verified attempts) and the serving router's training usable
rate of the rung in the class (probe and imported runs; live labels too when it was trained with ``--live``):
``advisor_drift_live_accept_rate``, ``advisor_drift_reference_usable_rate``,
``advisor_drift_accept_minus_reference`` and ``advisor_drift_flag`` (1 when the difference is above the
threshold, 0.15, on at least 20 verified attempts; the same rule as `advisor router drift` and the report's
Live section, `advisor.router.feedback.drift`). Classes and rungs without verified attempts have no drift series.
"""

from __future__ import annotations

import os
from typing import Any

from advisor.router.feedback.drift import DEFAULT_THRESHOLD, MIN_N, drifts

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The service's counters, histograms and gauge."""

    def __init__(self):
        # heavy dependency, imported on use: prometheus_client
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = CollectorRegistry()
        reg = self.registry
        self.requests = Counter("advisor_requests", "Chat requests answered, by delivering rung, class and outcome.",
                                ["rung", "task_class", "outcome", "simulated"], registry=reg)
        self.rejected = Counter("advisor_refused_requests", "Requests refused before routing, by HTTP status.",
                                ["status"], registry=reg)
        self.attempts = Counter("advisor_attempts", "Attempts on rungs, by result.", ["rung", "result", "simulated"],
                                registry=reg)
        self.escalations = Counter("advisor_escalations", "Escalations to a larger rung after a rejected answer.",
                                   ["from_rung", "to_rung"], registry=reg)
        self.failovers = Counter("advisor_failovers", "Rungs skipped because they were down or timed out.",
                                 ["rung", "reason"], registry=reg)
        self.verdicts = Counter("advisor_verifier_verdicts", "Verifier verdicts on answers.",
                                ["task_class", "verdict"], registry=reg)
        self.cost = Counter("advisor_cost_usd", "USD spent on attempts (server token counts x rung price).",
                            ["rung", "simulated"], registry=reg)
        self.decision_seconds = Histogram("advisor_routing_decision_seconds", "Time to take one routing decision.",
                                          registry=reg, buckets=LATENCY_BUCKETS)
        self.request_seconds = Histogram("advisor_request_seconds", "End-to-end latency of chat requests.",
                                         registry=reg, buckets=LATENCY_BUCKETS)
        self.reloads = Counter("advisor_router_reloads", "Hot reloads of the promoted router, by result.",
                               ["result"], registry=reg)
        self.rung_verdicts = Counter("advisor_live_verdicts", "Verifier verdicts on attempts, by class and rung "
                                     "(the drift gauges' live counts).", ["task_class", "rung", "verdict", "simulated"],
                                     registry=reg)
        self.reference: dict[tuple[str, str], float] = {}
        self.predicted = Counter("advisor_predicted_p_usable", "Sum of the policy's P(usable) of routed requests "
                                 "(divide by advisor_requests_total for the mean; drift vs the accept rate).",
                                 ["task_class"], registry=reg)
        info = {"multiprocess_mode": "max"} if self.multiprocess else {}
        self.router_info = Gauge("advisor_router_info", "1 for the router version this worker serves.",
                                 ["version"], registry=reg, **info)
        kwargs = {"multiprocess_mode": "livesum"} if self.multiprocess else {}
        self.in_flight = Gauge("advisor_in_flight_requests", "Chat requests in flight.", registry=reg, **kwargs)

        self.load_moves = Counter("advisor_load_moves", "Decisions whose first rung was passed over because its "
                                  "expected wait broke the request's deadline (advisor.service.routing.load).",
                                  ["from_rung", "to_rung"], registry=reg)
        self.upstream = Gauge("advisor_upstream_connections", "Connections to a rung's own endpoint (openai backend), "
                              "open or busy with a call, per worker summed; refreshed every second.",
                              ["rung", "state"], registry=reg, **kwargs)
        self.expected_wait = Gauge("advisor_rung_expected_wait_seconds", "Expected wait before service per rung, "
                                   "as the decision reads it (advisor.service.routing.load; the largest over workers).",
                                   ["rung"], registry=reg, **info)

        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        #: the classes that get a label of their own (`class_label`): the config's and the serving router's
        self.known_classes: frozenset[str] = frozenset()

    def class_label(self, task_class: str | None) -> str:
        """The ``task_class`` label of a request's class: a known class as it is, none as "", any other as
        "other". Clients name the class, and a series per name they invent would grow without bound in every
        worker (and in the multiprocess files); the store keeps the class as sent."""
        if not task_class:
            return ""
        return task_class if task_class in self.known_classes else "other"

    def child(self, metric, *values: str):
        """``metric.labels(*values)``, cached: `labels` checks the values and takes a lock on every call, and a
        request counts several series (the children live as long as their metric; none is ever removed)."""
        key = (id(metric), values)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*values)
        return c

    def count_call(self, attempt, simulated: bool) -> None:
        """One model call (a rung's or a role's) as it returned: an error (and the failover, when it was one:
        down or timeout), else the USD of its tokens."""
        if attempt.error:
            self.child(self.attempts, attempt.rung, "error", sim(simulated)).inc()
            if attempt.failover:  # only Attempt.fail sets failover, and it sets error_kind with it
                self.child(self.failovers, attempt.rung, attempt.error_kind.value).inc()
        else:
            self.child(self.cost, attempt.rung, sim(simulated)).inc(attempt.cost_usd)

    def count_result(self, rung: str, task_class: str | None, result: str, simulated: bool) -> None:
        """The result of an answered attempt: ``unverified``, or the verifier's ``accepted``/``rejected``
        (then also per class, and per class and rung: the drift gauges' live counts)."""
        s = sim(simulated)
        self.child(self.attempts, rung, result, s).inc()
        if result in ("accepted", "rejected"):
            label = self.class_label(task_class)
            self.child(self.verdicts, label, result).inc()
            self.child(self.rung_verdicts, label, rung, result, s).inc()

    def set_reference(self, model, config_classes=()) -> None:
        """Take the drift gauges' reference rates and the known classes from the serving router and the service
        config (at start and on every reload)."""
        self.reference = reference_rates(model)
        router_classes = getattr(getattr(model, "featurizer", None), "classes", ())
        self.known_classes = frozenset(config_classes) | frozenset(router_classes) | \
            frozenset(cls for cls, _ in self.reference)

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the exposition text (summed over workers in multiprocess mode), with the
        drift gauges computed from the summed counts."""
        # heavy dependency, imported on use: prometheus_client
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        registry = self.registry
        if self.multiprocess:
            # heavy dependency, imported on use: prometheus_client
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        families = list(registry.collect())
        families += drift_families(families, self.reference)
        return generate_latest(_Families(families)), CONTENT_TYPE_LATEST


class _Families:
    """Collected metric families in the shape `generate_latest` reads (an object with ``collect()``)."""

    def __init__(self, families: list):
        self.families = families

    def collect(self):
        """The families."""
        return iter(self.families)


def reference_rates(model) -> dict[tuple[str, str], float]:
    """Per (class, rung) the router's training usable rate (`advisor.router.training.fit.training_stats`)."""
    stats = (getattr(model, "training", None) or {}).get("stats") or {}
    out = {}
    for cls, rates in (stats.get("class_rates") or {}).items():
        for rung, rate in zip(model.rung_names, rates):
            if rate is not None:
                out[(cls, rung)] = float(rate)
    return out


def drift_families(families: list, reference: dict[tuple[str, str], float]) -> list:
    """The drift gauges (module docstring) from collected families holding ``advisor_live_verdicts``."""
    # heavy dependency, imported on use: prometheus_client
    from prometheus_client.core import GaugeMetricFamily

    counts: dict[tuple[str, str, str], list[float]] = {}
    for fam in families:
        if fam.name != "advisor_live_verdicts":
            continue
        for smp in fam.samples:
            if not smp.name.endswith("_total"):
                continue
            lab = smp.labels
            c = counts.setdefault((lab["task_class"], lab["rung"], lab["simulated"]), [0.0, 0.0])
            c[0] += smp.value if lab["verdict"] == "accepted" else 0.0
            c[1] += smp.value
    labels = ["task_class", "rung", "simulated"]
    gauges: dict[str, Any] = {
        "live": GaugeMetricFamily("advisor_drift_live_accept_rate", "Live verifier accept rate of verified "
                                  "attempts.", labels=labels),
        "ref": GaugeMetricFamily("advisor_drift_reference_usable_rate", "The serving router's training usable rate "
                                 "of the rung in the class.", labels=labels),
        "diff": GaugeMetricFamily("advisor_drift_accept_minus_reference", "Live accept rate minus the reference "
                                  "usable rate.", labels=labels),
        "flag": GaugeMetricFamily("advisor_drift_flag", f"1 when |accept - reference| > {DEFAULT_THRESHOLD:g} on "
                                  f"{MIN_N}+ verified attempts.", labels=labels)}
    for (cls, rung, sim_label), (acc, n) in sorted(counts.items()):
        if n <= 0:
            continue
        key = [cls, rung, sim_label]
        rate = acc / n
        gauges["live"].add_metric(key, rate)
        ref = reference.get((cls, rung))
        if ref is None:
            continue
        gauges["ref"].add_metric(key, ref)
        gauges["diff"].add_metric(key, rate - ref)
        gauges["flag"].add_metric(key, float(drifts(rate - ref, n)))
    return list(gauges.values())


def sim(flag: bool) -> str:
    """The `simulated` label value."""
    return "true" if flag else "false"
