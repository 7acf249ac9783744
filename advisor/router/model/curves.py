"""Cost-quality curves: a policy's (cost, quality) points, their upper envelope, and the area under it (AIQ).

Training picks its probability model by cross-validated AIQ (`advisor.router.training`) and evaluation reports it
(`advisor.router.evaluation.metrics`); both read these from here.
"""

from __future__ import annotations

import numpy as np


def envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-decreasing upper envelope of (cost, quality) points, sorted by cost."""
    out, best = [], -np.inf
    for c, q in sorted(points):
        if q > best:
            out.append((c, q))
            best = q
    return out


def aiq(points: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Area under the envelope on [lo, hi] / (hi - lo); 0 below the cheapest point, flat after the last."""
    env = envelope(points)
    if not env:
        return 0.0
    if hi <= lo:
        return float(env[-1][1])
    grid = np.linspace(lo, hi, 1001)
    xs, ys = np.array([c for c, _ in env]), np.array([q for _, q in env])
    vals = np.where(grid < xs[0] - 1e-15, 0.0, np.interp(grid, xs, ys))
    return float(np.trapz(vals, grid) / (hi - lo))


def quality_at(points: list[tuple[float, float]], cost: float, below: float | None = 0.0) -> float | None:
    """The envelope's quality at `cost` (linear between points; `below` under the cheapest point: 0, or None
    where the policy cannot operate that cheaply)."""
    env = envelope(points)
    if not env:
        return below
    if cost < env[0][0] - 1e-15:
        return below
    xs, ys = np.array([c for c, _ in env]), np.array([q for _, q in env])
    return float(np.interp(cost, xs, ys))


def min_cost_at(points: list[tuple[float, float]], quality: float) -> float | None:
    """Cheapest cost at which a curve reaches `quality` (None when it never does)."""
    ok = [c for c, q in points if q >= quality - 1e-12]
    return min(ok) if ok else None
