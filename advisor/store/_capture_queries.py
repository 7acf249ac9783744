"""Captured live steps (migration m013): how the service's capture records are added, and read back.

A capture record is one line of a worker's spool (`advisor.service.records.capture`), ingested with the decisions and
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


#: rows per INSERT statement when steps are added (one statement per chunk, not per row)
INSERT_CHUNK = 200


def add_captures(con, rows: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """Add capture records through `con` (inside the caller's transaction); (steps added, drops counted). A step
    already stored (the same decision id) adds nothing. A few statements per batch: the stored ids in one query,
    retention and the count once per tenant, the new steps in chunks of `INSERT_CHUNK` rows."""
    drops: dict[tuple[str, str], int] = {}
    steps = []
    for row in rows:
        if row.get("dropped"):
            key = (str(row.get("tenant") or ""), str(row["dropped"]))
            drops[key] = drops.get(key, 0) + 1
        else:
            steps.append(row)
    seen = {r[0] for r in con.execute("SELECT decision_id FROM captured_steps WHERE decision_id IN "
                                      "(SELECT unnest(CAST(? AS VARCHAR[])))",
                                      [[r["decision_id"] for r in steps]]).fetchall()} if steps else set()
    kept: dict[str, int] = {}
    new = []
    for row in steps:
        tenant = str(row.get("tenant") or "")
        if tenant not in kept:  # once per tenant and batch: retention, then how many are kept
            if row.get("keep_days"):
                con.execute("DELETE FROM captured_steps WHERE tenant = ? AND created_at < ?",
                            [tenant, now() - timedelta(days=float(row["keep_days"]))])
            kept[tenant] = int(con.execute("SELECT count(*) FROM captured_steps WHERE tenant = ?",
                                           [tenant]).fetchone()[0])
        if row["decision_id"] in seen:
            continue
        seen.add(row["decision_id"])
        if row.get("keep_steps") is not None and kept[tenant] >= int(row["keep_steps"]):
            drops[(tenant, "full")] = drops.get((tenant, "full"), 0) + 1
            continue
        kept[tenant] += 1
        new.append([row.get(c) for c in STEP_COLUMNS])
    one = f"({', '.join('?' for _ in STEP_COLUMNS)})"
    for i in range(0, len(new), INSERT_CHUNK):
        chunk = new[i:i + INSERT_CHUNK]
        con.execute(f"INSERT INTO captured_steps ({', '.join(STEP_COLUMNS)}) VALUES {', '.join([one] * len(chunk))}",
                    [v for values in chunk for v in values])
    for (tenant, reason), n in drops.items():
        con.execute("INSERT INTO capture_drops VALUES (?, ?, ?, ?) ON CONFLICT (tenant, reason) DO UPDATE SET "
                    "n = capture_drops.n + excluded.n, last_at = excluded.last_at", [tenant, reason, n, now()])
    return len(new), sum(drops.values())


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
                          "simulated FROM routing_decisions WHERE decision_id IN "
                          "(SELECT unnest(CAST(? AS VARCHAR[])))", [list(decision_ids)])  # typed: PostgreSQL too
