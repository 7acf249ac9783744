"""Strict JSON for every machine-readable output (``--json``, report data, decision logs).

Python's `json` writes ``Infinity`` and ``NaN`` for non-finite floats, which is not JSON: other parsers
refuse it. `dumps` writes ``null`` for them instead (the value is unknown or unbounded, and the text output
says which) and never emits a non-standard token.
"""

from __future__ import annotations

import json
import math
from typing import Any


def strict(value: Any) -> Any:
    """`value` with every non-finite float (inf, -inf, NaN) inside dicts, lists and tuples replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def dumps(value: Any, indent: int | None = None, default: Any = str) -> str:
    """Strict JSON text of `value` (non-finite floats -> null; other objects through `default`, str by default)."""
    def fallback(obj: Any) -> Any:
        return strict(default(obj)) if default is not None else obj

    return json.dumps(strict(value), indent=indent, allow_nan=False, default=fallback)
