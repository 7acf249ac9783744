"""The store's queries for policy runs (orchestrator, router, cascade): expert statistics and comparisons.

`PolicyQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL.
"""

from __future__ import annotations

from typing import Any, Callable

from advisor.records import FLOOR_COLUMNS


class PolicyQueries:
    """Read queries over policy runs and their model calls (policy_calls)."""

    _con: Any
    _rows: Callable[..., list[dict[str, Any]]]  #: from `advisor.store._queries.Queries`

    def rung_facts(self, ladder_name: str) -> list[dict[str, Any]]:
        """Per rung and task class of a ladder's fixed-rung runs: scored and usable runs, summed latency and
        model calls (what the orchestrator is told about each expert)."""
        return self._rows(
            "SELECT rung, task_class, count(*) FILTER (WHERE NOT unscored) AS scored, "
            "count(*) FILTER (WHERE NOT unscored AND overall >= bar) AS usable, "
            "sum(latency_s) AS latency, sum(model_calls) AS calls FROM runs "
            "WHERE ladder_name = ? AND policy = 'fixed' GROUP BY rung, task_class ORDER BY rung, task_class",
            [ladder_name])

    def arm_rows(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]:
        """A suite's probe runs on a ladder, fixed and policy alike, as floor-finder rows plus policy and
        latency (`advisor.records.FLOOR_COLUMNS`)."""
        return self._rows(f"SELECT {', '.join(FLOOR_COLUMNS)}, policy, latency_s FROM runs WHERE suite_name = ? "
                          "AND ladder_name = ? AND kind = 'probe' ORDER BY rung_position, task_class, condition, "
                          "run_key", [suite_name, ladder_name])

    def expert_call_counts(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]:
        """Per class, condition, policy and model: the rung calls of policy runs (orchestrator expert turns,
        router/cascade attempts) and how many respected the user's preferences (``n``, ``ok``)."""
        return self._rows(
            "SELECT r.task_class, r.condition, r.policy, c.model, count(*) AS n, "
            "count(*) FILTER (WHERE c.respects) AS ok, count(*) FILTER (WHERE c.respects IS NOT NULL) AS rated "
            "FROM policy_calls c JOIN runs r USING (run_key) "
            "WHERE r.suite_name = ? AND r.ladder_name = ? AND c.role IN ('expert', 'attempt') GROUP BY ALL "
            "ORDER BY ALL", [suite_name, ladder_name])

    def policy_ladder_hashes(self, suite_name: str) -> list[str]:
        """Hashes of the ladders a suite's policy (non-fixed) probe runs were made on."""
        rows = self._rows("SELECT DISTINCT ladder_hash FROM runs WHERE suite_name = ? AND kind = 'probe' "
                          "AND policy <> 'fixed' ORDER BY ladder_hash", [suite_name])
        return [r["ladder_hash"] for r in rows]

    def policy_call_rows(self, run_key: str) -> list[dict[str, Any]]:
        """The model calls of one policy run, in order."""
        return self._rows("SELECT * FROM policy_calls WHERE run_key = ? ORDER BY seq", [run_key])

    def verifier_counts(self, suite_name: str, ladder_name: str) -> list[dict[str, Any]]:
        """Per class, condition and policy: chain attempts the verifier judged (``judged``), and of those whose
        usability is known, the usable ones, false accepts (accepted, not usable) and false rejects."""
        return self._rows(
            "SELECT r.task_class, r.condition, r.policy, count(*) AS judged, "
            "count(*) FILTER (WHERE c.usable IS NOT NULL) AS known, "
            "count(*) FILTER (WHERE c.usable) AS usable, "
            "count(*) FILTER (WHERE c.accepted AND NOT c.usable) AS false_accepts, "
            "count(*) FILTER (WHERE NOT c.accepted AND c.usable) AS false_rejects "
            "FROM policy_calls c JOIN runs r USING (run_key) WHERE r.suite_name = ? AND r.ladder_name = ? "
            "AND c.accepted IS NOT NULL GROUP BY ALL ORDER BY ALL", [suite_name, ladder_name])
