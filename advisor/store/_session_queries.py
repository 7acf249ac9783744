"""The store's queries over agent sessions and shadow decisions (migrations m009 and m010).

`SessionQueries` is mixed into `advisor.store.Store`; a store opened read-only before those migrations has
none of their columns, and then every query here answers with no rows.
"""

from __future__ import annotations

from typing import Any

_FIRST = "o.attempt = 1 AND NOT coalesce(o.failover, false) AND o.error IS NULL"


class SessionQueries:
    """Read queries over the session and shadow columns of routing_decisions."""

    _con: Any

    def _has_column(self, column: str) -> bool:
        return bool(self._rows("SELECT 1 FROM information_schema.columns WHERE table_name = 'routing_decisions' "
                               "AND column_name = ?", [column]))

    def session_outcomes(self) -> list[dict[str, Any]]:
        """Per live session: class (of its first step), start rung, final rung (its last step's), steps,
        escalations and their reasons, cost, and whether a stand-in answered any step (`simulated`)."""
        if not self._has_column("session_id"):
            return []
        return self._rows("""
            SELECT session_id, arg_min(task_class, session_step) AS task_class,
                   arg_min(session_start_rung, session_step) AS start_rung,
                   arg_max(coalesce(final_rung, chosen_rung), session_step) AS final_rung,
                   max(session_step) AS steps, count(escalation) AS escalations,
                   string_agg(split_part(escalation, ' ', 1), ',' ORDER BY session_step) AS reasons,
                   sum(total_cost_usd) AS cost_usd, bool_or(coalesce(simulated, false)) AS simulated,
                   min(created_at) AS first, max(created_at) AS last
            FROM routing_decisions WHERE session_id IS NOT NULL GROUP BY session_id ORDER BY first""")

    def shadow_decisions(self, version: str | None = None) -> list[dict[str, Any]]:
        """Routed decisions with a shadow decision (of candidate `version`, else any), with the served first
        attempt's outcome (NULL when it failed over or errored)."""
        if not self._has_column("shadow_rung"):
            return []
        where, params = "", []
        if version is not None:
            where, params = " AND d.shadow_version = ?", [version]
        return self._rows(f"""
            SELECT d.decision_id, d.created_at, coalesce(d.task_class, '') AS task_class, d.chosen_rung,
                   d.shadow_rung, d.shadow_version, d.router_version, d.simulated,
                   o.cost_usd, o.verified, o.accepted
            FROM routing_decisions d
            LEFT JOIN live_outcomes o ON o.decision_id = d.decision_id AND {_FIRST}
            WHERE d.shadow_rung IS NOT NULL AND d.policy <> 'pinned'{where}
            ORDER BY d.created_at, d.decision_id""", params)

    def first_attempts(self) -> list[dict[str, Any]]:
        """Every routed decision's first attempt that answered: class, rung, cost, verified, accepted."""
        return self._rows(f"""
            SELECT coalesce(d.task_class, '') AS task_class, o.rung, o.cost_usd, o.verified, o.accepted
            FROM live_outcomes o JOIN routing_decisions d USING (decision_id)
            WHERE {_FIRST} AND d.policy <> 'pinned'""")

    def probe_run_turns(self, ladder_name: str) -> list[dict[str, Any]]:
        """Every scored fixed-rung baseline probe run of ladder `ladder_name`: class, rung, usable (overall at or
        above the run's bar) and its turns in order (action, arguments_json, observation, input and output
        tokens): what `advisor.service.sessions.costs` replays the service's escalation rule over."""
        rows = self._rows("""
            SELECT r.run_key, r.task_class, r.rung, r.overall >= r.bar AS usable, t.action, t.arguments_json,
                   t.observation, t.input_tokens, t.output_tokens
            FROM runs r JOIN turns t USING (run_key)
            WHERE r.kind = 'probe' AND r.policy = 'fixed' AND r.condition = 'baseline' AND NOT r.unscored
              AND r.ladder_name = ?
            ORDER BY r.run_key, t.turn""", [ladder_name])
        runs: dict[str, dict[str, Any]] = {}
        for row in rows:
            run = runs.setdefault(row["run_key"], {"task_class": row["task_class"], "rung": row["rung"],
                                                   "usable": bool(row["usable"]), "turns": []})
            run["turns"].append({k: row[k] for k in ("action", "arguments_json", "observation", "input_tokens",
                                                     "output_tokens")})
        return list(runs.values())
