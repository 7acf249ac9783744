"""One formatter for shares (0-1 fractions) and their intervals in every output: "88%", "88-100%", "-" when missing.

The companion of `advisor.money` (dollars): report tables, CLI tables and advice lines print shares the same way.
"""

from __future__ import annotations


def share(x: float | None) -> str:
    """A 0-1 share as a whole percentage: "88%"; "-" when missing."""
    return "-" if x is None else f"{100 * x:.0f}%"


def interval(iv: tuple[float, float] | None) -> str:
    """An interval of shares: "88-100%"; "-" when missing."""
    return "-" if iv is None else f"{100 * iv[0]:.0f}-{100 * iv[1]:.0f}%"
