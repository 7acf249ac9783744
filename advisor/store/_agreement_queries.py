"""The store's queries for verifier and judge agreement (what a verifier said vs the full score).

`AgreementQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL. Two kinds of measurement use it:

- a judge against the deterministic checks of stored runs (`advisor.checks.agreement`, table ``judge_agreement``);
- a routing-service verifier against the full scores of stored probe runs (`advisor.verifier.calibration`, table
  ``verifier_rates``), and the live accept rates `advisor floors` shows beside the probe's usable rates.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

#: Columns of one ``verifier_rates`` row, in table order.
VERIFIER_RATE_COLUMNS = ["measurement_id", "measured_at", "task_class", "rung", "verifier_hash", "config_path",
                         "suite_name", "ladder_name", "bar", "runs", "unverifiable", "positives", "negatives",
                         "false_accepts", "false_rejects", "false_accept", "false_reject", "judge_cost_usd",
                         "simulated"]


class AgreementQueries:
    """Read queries that pair checks' or a judge's verdicts with the full scores of stored runs."""

    _con: Any
    _rows: Any  #: `Queries._rows`
    _transaction: Any  #: `Store._transaction`

    # ----------------------------------------------------------------- judge agreement
    def scored_suite_runs(self, suite_name: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The scored runs of a suite (every kind), in run-key order; at most `limit`."""
        sql = "SELECT * FROM runs WHERE suite_name = ? AND NOT unscored ORDER BY run_key"
        params: list[Any] = [suite_name]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._rows(sql, params)

    # ----------------------------------------------------------------- service verifiers on probe runs
    def verifier_probe_runs(self, task_class: str, *, ladder_name: str | None = None,
                            suite_name: str | None = None) -> list[dict[str, Any]]:
        """Scored fixed-rung probe runs of one class (with their prompt text when stored), smallest rung first."""
        clauses = ["r.kind = 'probe'", "r.policy = 'fixed'", "NOT r.unscored", "r.overall IS NOT NULL",
                   "r.task_class = ?"]
        params: list[Any] = [task_class]
        for column, value in (("ladder_name", ladder_name), ("suite_name", suite_name)):
            if value is not None:
                clauses.append(f"r.{column} = ?")
                params.append(value)
        return self._rows(
            "SELECT r.run_key, r.suite_name, r.ladder_name, r.task_id, r.rung, r.rung_position, r.condition, "
            "r.stop_reason, r.overall, r.simulated, p.prompt_text FROM runs r "
            f"LEFT JOIN prompts p ON p.prompt_hash = r.prompt_hash WHERE {' AND '.join(clauses)} "
            "ORDER BY r.rung_position, r.run_key", params)

    def turns_of_runs(self, run_keys: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """The stored turns of many runs at once, in order, keyed by run key."""
        keys = list(run_keys)
        out: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
        if not keys:
            return out
        for row in self._rows("SELECT run_key, turn, action, arguments_json, observation FROM turns "
                              "WHERE run_key IN (SELECT unnest(?)) ORDER BY run_key, turn", [keys]):
            out[row["run_key"]].append(row)
        return out

    def add_verifier_rates(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append one measurement of service verifiers (rows keyed by `VERIFIER_RATE_COLUMNS`), atomically."""
        marks = ", ".join("?" for _ in VERIFIER_RATE_COLUMNS)
        with self._transaction() as con:
            for row in rows:
                con.execute(f"INSERT INTO verifier_rates ({', '.join(VERIFIER_RATE_COLUMNS)}) VALUES ({marks})",
                            [row.get(c) for c in VERIFIER_RATE_COLUMNS])

    def _has_verifier_rates(self) -> bool:
        """False for a store opened read-only before migration m006 added the table."""
        return bool(self._rows("SELECT 1 FROM information_schema.tables WHERE table_name = 'verifier_rates'"))

    def verifier_rate_rows(self, task_class: str | None = None) -> list[dict[str, Any]]:
        """Stored service-verifier measurements, newest first (pooled row '*' first within one), optionally of one class."""
        if not self._has_verifier_rates():
            return []
        where, params = (" WHERE task_class = ?", [task_class]) if task_class else ("", [])
        return self._rows(f"SELECT * FROM verifier_rates{where} ORDER BY measured_at DESC, measurement_id, "
                          "task_class, rung = '*' DESC, rung", params)

    def latest_verifier_rates(self, verifier_hashes: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Per class, the rows of its newest measurement made with the verifier of that hash (classes never
        measured with it are absent)."""
        out: dict[str, list[dict[str, Any]]] = {}
        if not verifier_hashes or not self._has_verifier_rates():
            return out
        rows = self._rows(
            "SELECT * FROM verifier_rates WHERE task_class IN (SELECT unnest(?)) "
            "ORDER BY measured_at DESC, measurement_id, rung = '*' DESC, rung", [list(verifier_hashes)])
        newest: dict[str, str] = {}
        for row in rows:
            cls = row["task_class"]
            if row["verifier_hash"] != verifier_hashes[cls]:
                continue
            if newest.setdefault(cls, row["measurement_id"]) == row["measurement_id"]:
                out.setdefault(cls, []).append(row)
        return out

    # ----------------------------------------------------------------- live traffic beside probe rates
