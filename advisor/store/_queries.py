"""The store's read queries: every SELECT the floor finder, the report, the adaptive prober and the CLI need.

`Queries` is mixed into `advisor.store.Store`; it reads through ``self._con``. Callers pass plain filters
(suite name, classes, hashes, kinds), never SQL.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Iterable, Sequence

from advisor.errors import StoreError
from advisor.records import FLOOR_COLUMNS, FLOOR_KINDS, Condition, RunRecord, StopReason, plain

_RUN_COLUMNS = [f.name for f in fields(RunRecord)]


class Queries:
    """Read-only queries over the runs and the configuration tables."""

    _con: Any
    path: str

    # ----------------------------------------------------------------- generic
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._con.execute(sql, [plain(p) for p in params])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Read-only SQL for tests and ad-hoc inspection (SELECT only); rows as dicts."""
        if not sql.lstrip().lower().startswith(("select", "with")):
            raise StoreError("Store.query runs SELECT statements only")
        return self._rows(sql, params)

    def run_keys(self, kind: str | None = None, suite_hash: str | None = None,
                 ladder_hash: str | None = None) -> set[str]:
        """Keys of the runs already stored (to resume without duplicates)."""
        where, params = _where(kind=kind, suite_hash=suite_hash, ladder_hash=ladder_hash)
        return {r[0] for r in self._con.execute(f"SELECT run_key FROM runs{where}", params).fetchall()}

    def runs(self, **filters: Any) -> list[dict[str, Any]]:
        """Runs as dicts, filtered by equality on run columns (a list value means IN)."""
        where, params = _where(**filters)
        return self._rows(f"SELECT * FROM runs{where} ORDER BY run_key", params)

    def count_runs(self, **filters: Any) -> int:
        """Number of runs matching equality filters."""
        where, params = _where(**filters)
        return self._con.execute(f"SELECT count(*) FROM runs{where}", params).fetchall()[0][0]

    def turn_rows(self, run_key: str) -> list[dict[str, Any]]:
        """The stored turns of one run, in order."""
        return self._rows("SELECT * FROM turns WHERE run_key = ? ORDER BY turn", [run_key])

    def criterion_rows(self, run_key: str) -> list[dict[str, Any]]:
        """The stored criterion results of one run."""
        return self._rows("SELECT * FROM criterion_results WHERE run_key = ? ORDER BY checklist, criterion",
                          [run_key])

    def prompt_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        """Prompt text by hash, for the hashes that have one stored."""
        keys = list(set(hashes))
        if not keys:
            return {}
        rows = self._con.execute("SELECT prompt_hash, prompt_text FROM prompts WHERE prompt_hash IN "
                                 "(SELECT unnest(?))", [keys]).fetchall()
        return dict(rows)

    def ladder_config(self, ladder_hash: str) -> dict | None:
        """The resolved ladder recorded under a hash."""
        rows = self._con.execute("SELECT config_json FROM ladders WHERE ladder_hash = ?", [ladder_hash]).fetchall()
        return json.loads(rows[0][0]) if rows else None

    def scored_run_rows(self, suite_name: str) -> list[dict[str, Any]]:
        """Per scored run of a suite: task, rung, its position, whether it was usable, its cost, simulated."""
        return self._rows("SELECT task_id, rung, rung_position, overall >= bar AS usable, cost_usd, simulated "
                          "FROM runs WHERE suite_name = ? AND NOT unscored AND overall IS NOT NULL", [suite_name])

    def suite_config(self, suite_name: str) -> dict[str, Any] | None:
        """The newest recorded config of a suite (its classes and tasks, as probed), or None."""
        rows = self._con.execute("SELECT config_json FROM suites WHERE name = ? AND config_json IS NOT NULL "
                                 "ORDER BY recorded_at DESC LIMIT 1", [suite_name]).fetchall()
        config = json.loads(rows[0][0]) if rows else None
        return config if isinstance(config, dict) else None

    def suite_class_verifiers(self, suite_name: str) -> dict[str, bool]:
        """Per class of the newest recorded config of a suite: whether its answers can be verified (the class's
        ``verifier:``; absent for suites recorded without classes, e.g. some imports)."""
        config = self.suite_config(suite_name)
        classes = config.get("classes") if isinstance(config, dict) else None
        return {c["name"]: bool(c.get("verifier", True)) for c in classes or [] if isinstance(c, dict) and "name" in c}

    def run_counts(self) -> list[dict[str, Any]]:
        """Runs (and unscored runs) per kind, suite, rung and simulated flag (``advisor store info``)."""
        return self._rows("SELECT kind, suite_name, rung, simulated, count(*) AS runs, "
                          "count(*) FILTER (WHERE unscored) AS unscored FROM runs "
                          "GROUP BY ALL ORDER BY kind, suite_name, rung")

    # ----------------------------------------------------------------- the floor finder's rows
    def suite_names(self, kinds: Sequence[str] = FLOOR_KINDS) -> list[str]:
        """Names of the suites that have runs of these kinds (default: probe and imported)."""
        rows = self._rows("SELECT DISTINCT suite_name FROM runs WHERE kind IN (SELECT unnest(?)) ORDER BY 1",
                          [[plain(k) for k in kinds]])
        return [r["suite_name"] for r in rows]

    def ladder_names(self, suite_name: str, kinds: Sequence[str] = FLOOR_KINDS) -> list[str]:
        """Names of the ladders a suite's fixed-policy runs of these kinds were made on."""
        rows = self._rows("SELECT DISTINCT ladder_name FROM runs WHERE suite_name = ? AND policy = 'fixed' "
                          "AND kind IN (SELECT unnest(?)) ORDER BY 1", [suite_name, [plain(k) for k in kinds]])
        return [r["ladder_name"] for r in rows]

    def floor_rows(self, suite_name: str | None = None, *, suite_hash: str | None = None,
                   ladder_hash: str | None = None, kinds: Sequence[str] = FLOOR_KINDS,
                   classes: Sequence[str] | None = None, backend_errors: bool = True) -> list[dict[str, Any]]:
        """Fixed-policy runs as floor-finder rows (`advisor.records.FLOOR_COLUMNS`), smallest rung first.

        Filtered by suite name and/or hashes, run kinds and task classes; ``backend_errors=False`` leaves out
        runs stored as backend_error (they are not samples: a rerun retries them).
        """
        clauses = ["policy = 'fixed'", "kind IN (SELECT unnest(?))"]
        params: list[Any] = [[plain(k) for k in kinds]]
        for col, val in (("suite_name", suite_name), ("suite_hash", suite_hash), ("ladder_hash", ladder_hash)):
            if val is not None:
                clauses.append(f"{col} = ?")
                params.append(val)
        if classes:
            clauses.append("task_class IN (SELECT unnest(?))")
            params.append(list(classes))
        if not backend_errors:
            clauses.append("stop_reason <> ?")
            params.append(StopReason.BACKEND_ERROR)
        return self._rows(f"SELECT {', '.join(FLOOR_COLUMNS)} FROM runs WHERE {' AND '.join(clauses)} "
                          "ORDER BY rung_position, task_class, condition, run_key", params)

    # ----------------------------------------------------------------- the sizing report's tables
    def _report_where(self, suite_name: str, classes: Sequence[str] | None) -> tuple[str, list[Any]]:
        where = "suite_name = ? AND policy = 'fixed' AND kind IN (SELECT unnest(?))"
        params: list[Any] = [suite_name, [k.value for k in FLOOR_KINDS]]
        if classes:
            where += " AND task_class IN (SELECT unnest(?))"
            params.append(list(classes))
        return where, params

    def rung_order(self, suite_name: str, classes: Sequence[str] | None = None) -> list[str]:
        """The rungs a suite's floor runs used, smallest first."""
        where, params = self._report_where(suite_name, classes)
        return [r["rung"] for r in self._rows(
            f"SELECT rung, min(rung_position) AS pos FROM runs WHERE {where} GROUP BY rung ORDER BY pos", params)]

    def paired_task_count(self, suite_name: str, classes: Sequence[str] | None = None) -> int:
        """Tasks of the suite with runs under the skill condition (the ones baseline -> skill compares)."""
        where, params = self._report_where(suite_name, classes)
        return self._rows(f"SELECT count(DISTINCT task_id) AS n FROM runs WHERE {where} AND condition = ?",
                          [*params, Condition.SKILL])[0]["n"]

    def rung_table(self, suite_name: str, bar: float, near_zero: float, classes: Sequence[str] | None = None,
                   paired_only: bool = False) -> list[dict[str, Any]]:
        """Per rung and condition: tasks, runs, unscored, mean TC/IF/overall (scored runs), $/task, near-zero
        and usable shares, turns; with `paired_only`, over the tasks that have skill runs only."""
        where, params = self._report_where(suite_name, classes)
        pair_filter, pair_params = "", []
        if paired_only:
            pair_filter = f" AND task_id IN (SELECT task_id FROM runs WHERE {where} AND condition = ?)"
            pair_params = [*params, Condition.SKILL]
        return self._rows(
            f"""SELECT rung, condition, count(DISTINCT task_id) AS tasks, count(*) AS runs,
                       count(*) FILTER (WHERE unscored OR overall IS NULL) AS unscored,
                       avg(tc_score) FILTER (WHERE NOT unscored) AS goal_completion,
                       avg(if_score) FILTER (WHERE NOT unscored) AS instruction_following,
                       avg(overall) FILTER (WHERE NOT unscored) AS overall,
                       avg(cost_usd) AS usd_per_task,
                       avg(CASE WHEN overall < ? THEN 1.0 ELSE 0.0 END)
                           FILTER (WHERE NOT unscored AND overall IS NOT NULL) AS near_zero_share,
                       avg(CASE WHEN overall >= ? THEN 1.0 ELSE 0.0 END)
                           FILTER (WHERE NOT unscored AND overall IS NOT NULL) AS usable_share,
                       avg(turns) AS turns
                FROM runs WHERE {where}{pair_filter} GROUP BY rung, condition
                ORDER BY min(rung_position), condition""",
            [near_zero, bar, *params, *pair_params])

    def overall_scores(self, suite_name: str, classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """(rung, condition, overall) of every scored run, smallest rung first."""
        where, params = self._report_where(suite_name, classes)
        return self._rows(f"SELECT rung, condition, overall FROM runs WHERE {where} AND NOT unscored "
                          "AND overall IS NOT NULL ORDER BY rung_position, condition, overall", params)

    def unscored_groups(self, suite_name: str, classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Unscored runs grouped by rung, condition, reason and stop reason, with their task ids."""
        where, params = self._report_where(suite_name, classes)
        return self._rows(
            f"""SELECT rung, condition, coalesce(unscored_reason, 'no score recorded') AS reason, stop_reason,
                       count(*) AS runs, list(DISTINCT task_id ORDER BY task_id) AS tasks
                FROM runs WHERE {where} AND (unscored OR overall IS NULL)
                GROUP BY ALL ORDER BY min(rung_position), condition, reason, stop_reason""", params)

    def step_down_pairs(self, suite_name: str, bar: float, near_zero: float,
                        classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Per task and condition, every (smaller, larger) rung pair where the smaller rung's mean overall is near
        zero and the larger one's passes the bar; the smaller rung largest first."""
        where, params = self._report_where(suite_name, classes)
        return self._rows(
            f"""WITH t AS (SELECT task_class, task_id, condition, rung, min(rung_position) AS pos,
                                  avg(overall) AS mean
                           FROM runs WHERE {where} AND NOT unscored AND overall IS NOT NULL GROUP BY ALL)
                SELECT s.task_class, s.task_id, s.condition, s.rung AS smaller, s.mean AS smaller_overall,
                       l.rung AS larger, l.mean AS larger_overall
                FROM t s JOIN t l ON s.task_id = l.task_id AND s.condition = l.condition AND s.pos < l.pos
                WHERE s.mean < ? AND l.mean >= ?
                ORDER BY s.pos DESC, s.task_class, s.task_id, s.condition""",
            [*params, near_zero, bar])

    def run_provenance(self, suite_name: str, classes: Sequence[str] | None = None) -> dict[str, Any]:
        """Ladders (name, hash), suite hashes, advisor versions, run kinds and first/last run times."""
        where, params = self._report_where(suite_name, classes)
        dates = self._rows(f"SELECT min(started_at) AS first, max(coalesce(finished_at, started_at)) AS last, "
                           f"list(DISTINCT kind ORDER BY kind) AS kinds FROM runs WHERE {where}", params)[0]
        return {
            "ladders": self._rows(f"SELECT DISTINCT ladder_name, ladder_hash FROM runs WHERE {where} ORDER BY 1, 2",
                                  params),
            "suite_hashes": [r["suite_hash"] for r in self._rows(
                f"SELECT DISTINCT suite_hash FROM runs WHERE {where} ORDER BY 1", params)],
            "advisor_versions": [r["advisor_version"] for r in self._rows(
                f"SELECT DISTINCT advisor_version FROM runs WHERE {where} ORDER BY 1", params)],
            "kinds": dates["kinds"], "first": dates["first"], "last": dates["last"],
        }


def _where(**filters: Any) -> tuple[str, list[Any]]:
    clauses, params = [], []
    for col, val in filters.items():
        if val is None:
            continue
        if col not in _RUN_COLUMNS:
            raise StoreError(f"unknown run column {col!r}")
        if isinstance(val, (list, tuple, set)):
            clauses.append(f"{col} IN (SELECT unnest(?))")
            params.append([plain(v) for v in val])
        else:
            clauses.append(f"{col} = ?")
            params.append(plain(val))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
