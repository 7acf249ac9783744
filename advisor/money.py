"""One money formatter for every output: significant figures, a unit, and per 1k where per-one would be zeros.

A cost per request of $0.000212 printed to four decimals reads "$0.0002" on every row, so figures keep
significant figures (`usd`), and a per-item figure too small to read is shown per 1,000 items instead
(`per_item`). A table column picks one scale for all its rows (`column_scale`) so the rows stay comparable.
A cost per usable result is always shown per 1,000 usable results (`per_1k_usable`), wherever it appears.
"""

from __future__ import annotations

import math
from typing import Iterable

#: Significant figures of every money figure.
SIG = 3
#: A per-item figure below this is shown per 1,000 items.
PER_1K_BELOW = 0.01


def usd(x: float | None, sig: int = SIG) -> str:
    """Dollars to `sig` significant figures: "$0.000212", "$2.14", "$21.4", "$1,234"; "-" when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "$0"
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a >= 10 ** sig:  # whole dollars: "$1,234", not "$1,230"
        return f"{sign}${a:,.0f}"
    digits = sig - 1 - math.floor(math.log10(a))
    rounded = round(a, digits)
    if rounded and math.floor(math.log10(rounded)) != math.floor(math.log10(a)):  # 9.996 -> 10.0: one digit fewer
        digits -= 1
        rounded = round(a, digits)
    if digits <= 0:
        return f"{sign}${rounded:,.0f}"
    return f"{sign}${rounded:,.{digits}f}"


#: The one unit of every cost per usable result (report tables, plots, the terminal's answer): per 1,000 results.
PER_1K_USABLE = "per 1k usable results"


def per_1k_usable(x: float | None, sig: int = SIG) -> str:
    """A cost per usable result in dollars per 1,000 usable results ("$0.532"); "-" when missing."""
    return usd(None if x is None else x * 1000, sig)


def compact(x: float | None, sig: int = SIG) -> str:
    """A large plain figure to `sig` significant figures with k / M: 250641 -> "251k"; "-" when missing."""
    if x is None:
        return "-"
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.{sig}g}{suffix}"
    return f"{x:.{sig}g}"


def usd_delta(x: float | None, sig: int = SIG) -> str:
    """A signed dollar difference: "+$0.0012", "-$3.40"; "-" when missing."""
    if x is None:
        return "-"
    return ("+" if x >= 0 else "-") + usd(abs(x), sig)


def column_scale(values: Iterable[float | None]) -> int:
    """1000 when every figure of a per-item column is below `PER_1K_BELOW` (show it per 1k items), else 1."""
    present = [abs(v) for v in values if v is not None]
    return 1000 if present and max(present) < PER_1K_BELOW else 1


def per_label(unit: str, scale: int) -> str:
    """The unit of a scaled column: "per task" or "per 1k tasks" (`unit` singular; plural by adding "s")."""
    return f"per {unit}" if scale == 1 else f"per 1k {unit}s"


def per_item(x: float | None, unit: str, sig: int = SIG) -> str:
    """A per-item cost with its unit: "$0.0512 per task", or "$0.212 per 1k tasks" when small; "-" when missing."""
    if x is None:
        return "-"
    scale = column_scale([x])
    return f"{usd(x * scale, sig)} {per_label(unit, scale)}"


def monthly(x: float | None, sig: int = SIG) -> str:
    """A monthly total: "$21.4/month"; "-" when missing."""
    return "-" if x is None else f"{usd(x, sig)}/month"
