"""The store's queries for policy runs (orchestrator, router, cascade): expert statistics and comparisons.

`PolicyQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL.
"""

from __future__ import annotations

from typing import Any


class PolicyQueries:
    """Read queries over policy runs and their model calls (policy_calls)."""

    _con: Any
