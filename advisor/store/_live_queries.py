"""The store's queries over live traffic: routing decisions, live outcomes, drift and live training rows.

`LiveQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL.

A **labelled live attempt** is a verified attempt with a verdict that neither failed over nor errored: the
only attempts the feedback loop learns from, scores a gate on, or compares with the probe.
"""

from __future__ import annotations

from typing import Any, Sequence

_LABELLED = ("o.verified AND o.accepted IS NOT NULL AND NOT coalesce(o.failover, false) AND o.error IS NULL")


class LiveQueries:
    """Read queries over routing_decisions and live_outcomes (drift, live training data)."""

    _con: Any

    def live_counts(self) -> tuple[int, int]:
        """(routing decisions, live attempts) the store holds."""
        row = self._rows("SELECT (SELECT count(*) FROM routing_decisions) AS decisions, "
                         "(SELECT count(*) FROM live_outcomes) AS attempts")[0]
        return int(row["decisions"]), int(row["attempts"])

    def live_attempt_rows(self) -> list[dict[str, Any]]:
        """Labelled live attempts joined with their decision, in decision time order (then attempt)."""
        return self._rows(f"""
            SELECT d.decision_id, d.created_at, d.prompt_text, d.request_hash, d.task_class, d.router_version,
                   d.chain_json, d.p_usable, d.expected_cost, d.total_cost_usd, d.status, d.class_source,
                   o.attempt, o.rung, o.accepted, o.cost_usd, o.input_tokens
            FROM live_outcomes o JOIN routing_decisions d USING (decision_id)
            WHERE {_LABELLED}
            ORDER BY d.created_at, d.decision_id, o.attempt""")

    def live_class_summary(self) -> list[dict[str, Any]]:
        """Per class over routed (not pinned) decisions: requests, predicted-class share, and for verified
        (escalation-mode) requests the mean predicted P(usable), the realised accept share, total cost, accepted
        requests and mean expected cost; `simulated` when a stand-in answered any of them."""
        return self._rows("""
            SELECT coalesce(task_class, '') AS task_class, count(*) AS n,
                   avg(CASE WHEN starts_with(coalesce(class_source, ''), 'predicted') THEN 1 ELSE 0 END)
                       AS predicted_share,
                   count(*) FILTER (WHERE mode = 'escalate' AND p_usable IS NOT NULL) AS n_verified,
                   avg(p_usable) FILTER (WHERE mode = 'escalate') AS p_predicted,
                   avg(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) FILTER (WHERE mode = 'escalate') AS p_realised,
                   sum(total_cost_usd) FILTER (WHERE mode = 'escalate') AS cost,
                   count(*) FILTER (WHERE status = 'ok' AND mode = 'escalate') AS accepted,
                   avg(expected_cost) FILTER (WHERE mode = 'escalate') AS expected_cost,
                   bool_or(coalesce(simulated, false)) AS simulated
            FROM routing_decisions WHERE policy <> 'pinned' GROUP BY 1 ORDER BY 1""")

    def probe_usable_rates(self) -> list[dict[str, Any]]:
        """Per (class, rung): scored probe/imported runs `n`, usable `usable`, usable `rate`, `simulated`."""
        return self._rows("""
            SELECT task_class, rung, count(*) AS n,
                   count(*) FILTER (WHERE overall >= bar) AS usable,
                   avg(CASE WHEN overall >= bar THEN 1 ELSE 0 END) AS rate,
                   bool_or(coalesce(simulated, false)) AS simulated
            FROM runs WHERE kind IN ('probe', 'imported') AND NOT unscored AND overall IS NOT NULL
            GROUP BY 1, 2 ORDER BY 1, 2""")

    def live_accept_counts(self, classes: Sequence[str] | None = None,
                           unclassified: bool = False) -> list[dict[str, Any]]:
        """Per class and rung: labelled live attempts `attempts`, how many the verifier `accepted`, over how many
        requests `decisions`, how many from SIMULATED rungs `simulated`, and the time span `first`-`last`.
        Requests without a class are left out, or with `unclassified` counted under the class ''. Empty in a
        store opened read-only before migration m003 gave attempts their failover flag."""
        if not self._rows("SELECT 1 FROM information_schema.columns WHERE table_name = 'live_outcomes' "
                          "AND column_name = 'failover'"):
            return []
        where, params = ("" if unclassified else " AND d.task_class IS NOT NULL"), []
        if classes:
            where, params = where + " AND d.task_class IN (SELECT unnest(?))", [list(classes)]
        task_class = "coalesce(d.task_class, '')" if unclassified else "d.task_class"
        return self._rows(
            f"SELECT {task_class} AS task_class, o.rung, count(*) AS attempts, "
            "count(*) FILTER (WHERE o.accepted) AS accepted, count(DISTINCT o.decision_id) AS decisions, "
            "count(*) FILTER (WHERE o.simulated) AS simulated, min(o.created_at) AS first, max(o.created_at) AS last "
            "FROM live_outcomes o JOIN routing_decisions d USING (decision_id) "
            f"WHERE {_LABELLED}{where} GROUP BY 1, 2 ORDER BY 1, 2", params)
