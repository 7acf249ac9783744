"""The router registry inside a store: promoted pointers, the artifacts they name, and the promotion records.

`RegistryQueries` is mixed into both backends (`advisor.store.Store`, `advisor.store.postgres.PostgresStore`);
its SQL runs on both (PostgreSQL's connection translates the placeholders). An artifact is kept by its sha256
and never changed; a pointer is one row per name (``promoted``) naming an artifact's sha256, replaced in place.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from advisor.records import now


class RegistryQueries:
    """Artifacts by sha256, pointers by name, and the router_promotions table."""

    _con: Any
    _rows: Callable[..., list[dict[str, Any]]]

    def put_artifact(self, sha256: str, suffix: str, router_version: str, body: bytes) -> bool:
        """Keep an artifact's bytes under its sha256 (idempotent); True when it was not stored yet."""
        if self._rows("SELECT 1 AS x FROM router_artifacts WHERE sha256 = ?", [sha256]):
            return False
        self._con.execute("INSERT INTO router_artifacts (sha256, suffix, router_version, body, stored_at) "
                          "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                          [sha256, suffix, router_version, body, now()])
        return True

    def artifact(self, sha256: str) -> tuple[str, bytes] | None:
        """(suffix, bytes) of a kept artifact, or None."""
        rows = self._rows("SELECT suffix, body FROM router_artifacts WHERE sha256 = ?", [sha256])
        return (rows[0]["suffix"], bytes(rows[0]["body"])) if rows else None

    def pointer(self, name: str = "promoted") -> dict[str, Any] | None:
        """The pointer row (name, sha256, router_version, promotion_id, promoted_at), or None."""
        rows = self._rows("SELECT name, sha256, router_version, promotion_id, promoted_at FROM router_pointers "
                          "WHERE name = ?", [name])
        return rows[0] if rows else None

    def set_pointer(self, sha256: str, router_version: str, promotion_id: str | None, name: str = "promoted") -> None:
        """Point `name` at a kept artifact (replacing what it named)."""
        self._con.execute(
            "INSERT INTO router_pointers (name, sha256, router_version, promotion_id, promoted_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, "
            "router_version = excluded.router_version, promotion_id = excluded.promotion_id, "
            "promoted_at = excluded.promoted_at", [name, sha256, router_version, promotion_id, now()])

    def add_promotion(self, row: dict[str, Any]) -> None:
        """Record one promotion, refusal or rollback of a router artifact (`advisor.router.feedback.promotion`)."""
        row = {**row, "evidence_json": json.dumps(row.get("evidence_json") or {}, default=str)}
        marks = ", ".join("?" for _ in row)
        self._con.execute(f"INSERT INTO router_promotions ({', '.join(row)}) VALUES ({marks})", list(row.values()))

    def promotions(self) -> list[dict[str, Any]]:
        """Every recorded promotion, refusal and rollback, newest first."""
        return self._rows("SELECT * FROM router_promotions ORDER BY created_at DESC, promotion_id DESC")
