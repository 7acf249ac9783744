"""Limits a user raises through an environment variable, all read one way.

Unset (or blank), a limit is its default; set, it is a positive, finite number (MiB, fractions allowed) or a
positive whole number (ASCII digits), and anything else is one error that names the variable and what it expects.
"""

from __future__ import annotations

import math
import os

from advisor.errors import ConfigError


def mib_limit(name: str, default_mib: float, error: type[Exception] = ConfigError) -> int:
    """A size limit in bytes: the variable `name` read as MiB, else `default_mib`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return int(default_mib * 2**20)
    try:
        mib = float(raw)
    except ValueError:
        mib = math.nan
    if not (mib > 0 and math.isfinite(mib)):
        raise error(f"{name}={raw!r}: expected a positive number of MiB")
    return int(mib * 2**20)


def count_limit(name: str, default: int, unit: str, error: type[Exception] = ConfigError) -> int:
    """A count limit (levels, rows): the variable `name` as a positive whole number of `unit`, else `default`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise error(f"{name}={raw!r}: expected a positive whole number of {unit}")
    return int(raw)
