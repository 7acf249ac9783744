"""Captured live steps (migration m013): how the service's capture records are added, and read back.

A capture record is one line of a worker's spool (`advisor.service.capture`), ingested with the decisions and
attempts of the same request in one transaction. It is either a **step** (what the model saw and answered,
redacted before it was written) or a **drop** (``dropped``: why a step was not kept). A step carries its
tenant's bounds (``keep_steps``, ``keep_days``): when it is added, that tenant's steps older than ``keep_days``
are deleted, and a step past ``keep_steps`` kept is not added but counted as a drop (``full``). So a full table
costs the request nothing: the service never reads it, and ingest turns the overflow into counts.

`CaptureQueries` is mixed into both stores (DuckDB and PostgreSQL); the SQL is the shared dialect.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Sequence

from advisor.records import now

#: The columns of a captured step, in table order.
STEP_COLUMNS = ("decision_id", "tenant", "created_at", "task_class", "session_id", "session_step", "rung", "status",
                "verdict", "reference_ok", "simulated", "cost_usd", "request_json", "reply_json", "size_bytes")


def add_captures(con, rows: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """Add capture records through `con` (inside the caller's transaction); (steps added, drops counted). A step
    already stored (the same decision id) adds nothing."""
    added = dropped = 0
    drops: dict[tuple[str, str], int] = {}
    kept: dict[str, int] = {}
    for row in rows:
        tenant = str(row.get("tenant") or "")
        if row.get("dropped"):
            drops[(tenant, str(row["dropped"]))] = drops.get((tenant, str(row["dropped"])), 0) + 1
            continue
        if tenant not in kept:  # once per tenant and batch: retention, then how many are kept
            days = row.get("keep_days")
            if days:
                con.execute("DELETE FROM captured_steps WHERE tenant = ? AND created_at < ?",
                            [tenant, now() - timedelta(days=float(days))])
            kept[tenant] = int(con.execute("SELECT count(*) FROM captured_steps WHERE tenant = ?",
                                           [tenant]).fetchone()[0])
        if con.execute("SELECT 1 FROM captured_steps WHERE decision_id = ?", [row["decision_id"]]).fetchone():
            continue
        bound = row.get("keep_steps")
        if bound is not None and kept[tenant] >= int(bound):
            drops[(tenant, "full")] = drops.get((tenant, "full"), 0) + 1
            continue
        con.execute(f"INSERT INTO captured_steps ({', '.join(STEP_COLUMNS)}) "
                    f"VALUES ({', '.join('?' for _ in STEP_COLUMNS)})", [row.get(c) for c in STEP_COLUMNS])
        kept[tenant] += 1
        added += 1
    for (tenant, reason), n in drops.items():
        con.execute("INSERT INTO capture_drops VALUES (?, ?, ?, ?) ON CONFLICT (tenant, reason) DO UPDATE SET "
                    "n = capture_drops.n + excluded.n, last_at = excluded.last_at", [tenant, reason, n, now()])
        dropped += n
    return added, dropped


class CaptureQueries:
    """Read queries over captured_steps and capture_drops."""

    _con: Any

    def _has_captures(self) -> bool:
        return bool(self._rows("SELECT 1 FROM information_schema.tables WHERE table_name = 'captured_steps'"))

    def captured_steps(self, tenant: str | None = None, since=None, until=None) -> list[dict[str, Any]]:
        """Captured steps (of `tenant`, else every tenant's; created at or after `since`, before `until`), in
        time order. Empty in a store opened read-only before migration m013."""
        if not self._has_captures():
            return []
        where, params = [], []
        for clause, value in (("tenant = ?", tenant), ("created_at >= ?", since), ("created_at < ?", until)):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = "SELECT * FROM captured_steps" + (" WHERE " + " AND ".join(where) if where else "")
        return self._rows(sql + " ORDER BY created_at, decision_id", params)

    def capture_counts(self) -> list[dict[str, Any]]:
        """Per tenant: steps kept, first and last, and steps dropped by reason (``drops``: reason -> n)."""
        if not self._has_captures():
            return []
        out = {r["tenant"]: {**r, "drops": {}} for r in self._rows(
            "SELECT tenant, count(*) AS steps, min(created_at) AS first, max(created_at) AS last "
            "FROM captured_steps GROUP BY tenant ORDER BY tenant")}
        for r in self._rows("SELECT tenant, reason, n FROM capture_drops ORDER BY tenant, reason"):
            out.setdefault(r["tenant"], {"tenant": r["tenant"], "steps": 0, "first": None, "last": None,
                                         "drops": {}})["drops"][r["reason"]] = int(r["n"])
        return [out[t] for t in sorted(out)]

    def served_cost(self, decision_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The service's own record of these requests: class, status, final rung, cost, chain chosen."""
        if not decision_ids:
            return []
        return self._rows("SELECT decision_id, task_class, status, final_rung, total_cost_usd, chain_json, "
                          "simulated FROM routing_decisions WHERE decision_id IN (SELECT unnest(?))",
                          [list(decision_ids)])
