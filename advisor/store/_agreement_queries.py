"""The store's queries for verifier and judge agreement (what a verifier said vs the full score).

`AgreementQueries` is mixed into `advisor.store.Store`; it reads through ``self._con`` (see `advisor.store._queries`
for the generic ``_rows`` helper). Callers pass plain filters, never SQL.
"""

from __future__ import annotations

from typing import Any


class AgreementQueries:
    """Read queries that pair checks' or a judge's verdicts with the full scores of stored runs."""

    _con: Any
