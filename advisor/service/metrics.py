"""Prometheus metrics of the routing service (prometheus_client), all prefixed ``advisor_``.

Each app gets its own registry (no global state at import). With several workers ``advisor serve`` sets
``PROMETHEUS_MULTIPROC_DIR`` before they start, and ``/metrics`` then sums every worker's values
(prometheus_client's multiprocess mode). Stand-in rungs carry ``simulated="true"`` on every per-rung series.
"""

from __future__ import annotations

import os

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The service's counters, histograms and gauge."""

    def __init__(self):
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
        self.predicted = Counter("advisor_predicted_p_usable", "Sum of the policy's P(usable) of routed requests "
                                 "(divide by advisor_requests_total for the mean; drift vs the accept rate).",
                                 ["task_class"], registry=reg)
        info = {"multiprocess_mode": "max"} if self.multiprocess else {}
        self.router_info = Gauge("advisor_router_info", "1 for the router version this worker serves.",
                                 ["version"], registry=reg, **info)
        kwargs = {"multiprocess_mode": "livesum"} if self.multiprocess else {}
        self.in_flight = Gauge("advisor_in_flight_requests", "Chat requests in flight.", registry=reg, **kwargs)

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the exposition text (summed over workers in multiprocess mode)."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def sim(flag: bool) -> str:
    """The `simulated` label value."""
    return "true" if flag else "false"
