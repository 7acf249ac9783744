"""What a shadow candidate router would have cost and delivered on the live traffic it shadowed.

The serving router decides deterministically, so each request was answered by one rung only: the candidate's
choice was observed only where both chose the same rung. Inverse propensity weighting needs every action to
have had a chance (a propensity above 0) and has none here. The estimator is therefore the **direct method**
with **replay** where the two agree:

- an **outcome model per (class, rung)**: the mean cost and verifier accept rate of the recorded first attempts
  of that rung in that class (every routed request's first attempt that answered, not only shadowed ones);
- a request where the candidate picked the served rung keeps its own observed outcome (replay);
- the candidate's estimate is the mean over the shadowed requests; the serving figures are the observed ones.

**Assumptions**: (1) within a class, a rung's outcome does not depend on which requests the serving policy
sent to it (no confounding beyond the class): it fails when the serving router sends the easier requests of a
class to the small rungs, which makes the small rungs look better than they would on the candidate's requests;
(2) the traffic is stationary over the window; (3) "usable" is the class verifier's accept (a noisy label, see
`advisor.router.feedback.live`), so the usable rate covers the requests of classes with a verifier only; (4) the figures
are those of the **first rung** each router picks (one attempt), not of its whole chain.

**Support**: a request whose (class, candidate rung) cell has fewer than `MIN_CELL` recorded first attempts
(verified ones for the usable rate) has no support. When more than `MAX_UNSUPPORTED` of the requests lack
support, the report says the traffic cannot support an estimate, and names the cells that lack it.

**Intervals**: 95% percentile bootstrap (`BOOTSTRAP` replicates) that resamples the shadowed requests and,
independently, the attempts within each cell; the difference candidate - serving is paired per replicate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

MIN_CELL = 5
MAX_UNSUPPORTED = 0.2
BOOTSTRAP = 1000
ESTIMATOR = "direct method (per-class-and-rung cell means of recorded first attempts), replay where the rungs agree"


@dataclass
class Figure:
    """One estimated quantity: the candidate's estimate, the serving router's observed value, their difference
    (95% intervals), or why it cannot be estimated."""

    requests: int = 0
    supported: int = 0
    candidate: float | None = None
    candidate_ci: tuple[float, float] | None = None
    serving: float | None = None
    serving_ci: tuple[float, float] | None = None
    diff_ci: tuple[float, float] | None = None
    unsupported_cells: list[str] = field(default_factory=list)
    reason: str | None = None  #: set when there is no estimate


@dataclass
class ShadowReport:
    """The shadow candidate's estimate on the recorded traffic."""

    version: str | None
    requests: int
    agreement: float | None
    cost: Figure
    usable: Figure
    simulated: bool
    estimator: str = ESTIMATOR

    def as_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


def _cells(attempts: list[dict], verified_only: bool) -> dict[tuple[str, str], np.ndarray]:
    out: dict[tuple[str, str], list[float]] = {}
    for a in attempts:
        if verified_only:
            if not a["verified"] or a["accepted"] is None:
                continue
            value = float(bool(a["accepted"]))
        else:
            if a["cost_usd"] is None:
                continue
            value = float(a["cost_usd"])
        out.setdefault((a["task_class"], a["rung"]), []).append(value)
    return {k: np.array(v) for k, v in out.items()}


def _figure(rows: list[dict], cells: dict, observed: list[float | None], rng, boots: int) -> Figure:
    """Estimate over `rows` (each has task_class, chosen_rung, shadow_rung) with per-row observed values."""
    keep = [i for i, v in enumerate(observed) if v is not None]
    fig = Figure(requests=len(keep))
    if not keep:
        fig.reason = "no recorded outcome on this traffic"
        return fig
    need = {(rows[i]["task_class"], rows[i]["shadow_rung"]) for i in keep
            if rows[i]["shadow_rung"] != rows[i]["chosen_rung"]}
    thin = sorted(k for k in need if len(cells.get(k, ())) < MIN_CELL)
    ok = [i for i in keep if rows[i]["shadow_rung"] == rows[i]["chosen_rung"]
          or (rows[i]["task_class"], rows[i]["shadow_rung"]) not in thin]
    fig.supported = len(ok)
    fig.unsupported_cells = [f"{c or '(no class)'}/{r} ({len(cells.get((c, r), ()))} attempts)" for c, r in thin]
    if len(keep) - len(ok) > MAX_UNSUPPORTED * len(keep):
        fig.reason = (f"the traffic cannot support an estimate: {len(keep) - len(ok)} of {len(keep)} requests pick a "
                      f"(class, rung) with fewer than {MIN_CELL} recorded first attempts: "
                      f"{', '.join(fig.unsupported_cells)}")
        return fig
    obs = np.array([observed[i] for i in ok], float)
    agree = np.array([rows[i]["shadow_rung"] == rows[i]["chosen_rung"] for i in ok])
    keys = [(rows[i]["task_class"], rows[i]["shadow_rung"]) for i in ok]
    used = sorted(set(k for k, a in zip(keys, agree) if not a))
    index = {k: j for j, k in enumerate(used)}
    col = np.array([index.get(k, -1) for k in keys])

    def estimate(req_idx, means):
        vals = np.where(agree[req_idx], obs[req_idx], means[np.maximum(col[req_idx], 0)] if len(means) else 0.0)
        return float(vals.mean()), float(obs[req_idx].mean())

    base = np.array([cells[k].mean() for k in used])
    fig.candidate, fig.serving = estimate(np.arange(len(ok)), base)
    reps = np.empty((boots, 2))
    n = len(ok)
    for b in range(boots):
        idx = rng.integers(0, n, n)
        means = np.array([cells[k][rng.integers(0, len(cells[k]), len(cells[k]))].mean() for k in used])
        reps[b] = estimate(idx, means)
    lo, hi = np.percentile(reps, [2.5, 97.5], axis=0)
    d = np.percentile(reps[:, 0] - reps[:, 1], [2.5, 97.5])
    fig.candidate_ci, fig.serving_ci = (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))
    fig.diff_ci = (float(d[0]), float(d[1]))
    return fig


def shadow_report(store, version: str | None = None, boots: int = BOOTSTRAP, seed: int = 0) -> ShadowReport:
    """The candidate's (shadow `version`, else the latest shadowed) estimate on the store's live traffic."""
    rows = store.shadow_decisions(version)
    if version is None and rows:
        version = rows[-1]["shadow_version"]
        rows = [r for r in rows if r["shadow_version"] == version]
    attempts = store.first_attempts()
    rng = np.random.default_rng(seed)
    cost = _figure(rows, _cells(attempts, False), [r["cost_usd"] for r in rows], rng, boots)
    usable = _figure(rows, _cells(attempts, True),
                     [float(bool(r["accepted"])) if r["verified"] and r["accepted"] is not None else None
                      for r in rows], rng, boots)
    if not any(r["verified"] for r in rows):
        usable.reason = "no shadowed request was verified: the usable rate needs classes with a verifier"
    agreement = float(np.mean([r["shadow_rung"] == r["chosen_rung"] for r in rows])) if rows else None
    return ShadowReport(version, len(rows), agreement, cost, usable, any(bool(r["simulated"]) for r in rows))


def render(rep: ShadowReport) -> list[str]:
    """The report as text lines."""
    if not rep.requests:
        return ["no shadow decisions in the store: configure `shadow: {artifact: ...}` in the service config"]
    lines = [f"{'SIMULATED traffic (stand-in rungs). ' if rep.simulated else ''}shadow candidate {rep.version}: "
             f"{rep.requests} routed requests, same first rung as the serving router on {rep.agreement:.0%}",
             f"estimator: {rep.estimator}; assumptions: no confounding within a class, stationary traffic, verifier "
             f"accept = usable, first rung only (advisor.router.feedback.shadow_report)"]
    for name, fig, fmt in (("cost per request (USD, first attempt)", rep.cost, "{:.6f}"),
                           ("usable rate (verifier accept, first attempt)", rep.usable, "{:.3f}")):
        if fig.reason:
            lines.append(f"{name}: no estimate: {fig.reason}")
            continue
        f = fmt.format
        lines.append(f"{name}: candidate {f(fig.candidate)} (95% CI {f(fig.candidate_ci[0])} .. "
                     f"{f(fig.candidate_ci[1])}), serving {f(fig.serving)} (95% CI {f(fig.serving_ci[0])} .. "
                     f"{f(fig.serving_ci[1])}), difference 95% CI {f(fig.diff_ci[0])} .. {f(fig.diff_ci[1])}; "
                     f"{fig.supported} of {fig.requests} requests supported")
    return lines


def shadow_gate(store, version: str, margin: float = 0.02) -> tuple[bool, str, dict[str, Any]]:
    """(passed, reason, evidence): the candidate's estimated usable rate is not worse than the serving one's by
    more than `margin` (the lower end of the difference's 95% interval), on supported traffic."""
    rep = shadow_report(store, version)
    fig = rep.usable
    if not rep.requests:
        return False, f"no shadow decisions of {version} in the store: run it in shadow first", rep.as_dict()
    if fig.reason:
        return False, f"shadow: {fig.reason}", rep.as_dict()
    ok = fig.diff_ci[0] >= -margin
    verdict = "not worse" if ok else "worse or not shown not worse"
    return ok, (f"shadow ({rep.requests} requests): usable-rate difference 95% CI {fig.diff_ci[0]:+.3f} .. "
                f"{fig.diff_ci[1]:+.3f}: {verdict} within {margin:g}"), rep.as_dict()
