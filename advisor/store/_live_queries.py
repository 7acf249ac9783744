"""The store's queries over live traffic: routing decisions, live outcomes, drift and live training rows.

`LiveQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL.
"""

from __future__ import annotations

from typing import Any


class LiveQueries:
    """Read queries over routing_decisions and live_outcomes (drift, live training data)."""

    _con: Any
