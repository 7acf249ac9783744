"""The report's figures, drawn with matplotlib (imported lazily, Agg backend) and returned as PNG bytes.

- score distributions per rung (the bimodality), baseline and with skill;
- cost per attempt vs usable rate per class (the frontier), with the Wilson interval as error bars;
- turns by outcome per rung (usable vs below the bar).
"""

from __future__ import annotations

import io
from typing import Any

COLORS = {"baseline": "#4C72B0", "skill": "#DD8452"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def score_distributions(data) -> bytes:
    """Histogram of overall scores per rung, both conditions, with the bar and near-zero lines."""
    plt = _plt()
    rungs = [r for r in data.rung_order if r in data.scores] or ["(no scored runs)"]
    fig, axes = plt.subplots(1, len(rungs), figsize=(3.6 * len(rungs), 3.0), sharey=True, squeeze=False)
    bins = list(range(0, 101, 10))
    for ax, rung in zip(axes[0], rungs):
        for cond, values in sorted(data.scores.get(rung, {}).items()):
            weights = [100.0 / len(values)] * len(values)
            ax.hist(values, bins=bins, weights=weights, histtype="stepfilled", alpha=0.45,
                    color=COLORS.get(cond, "grey"), edgecolor=COLORS.get(cond, "grey"),
                    label=f"{cond} (n={len(values)})")
        ax.axvline(data.settings.bar, color="green", linestyle="--", linewidth=1)
        ax.axvline(data.settings.near_zero, color="red", linestyle=":", linewidth=1)
        ax.set_title(rung)
        ax.set_xlabel("overall score")
        ax.set_xlim(0, 100)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper center")
    axes[0][0].set_ylabel("% of scored runs")
    s = data.settings
    fig.suptitle(f"Score distributions (bar {s.bar:g} dashed, near-zero {s.near_zero:g} dotted)",
                 fontsize=10, y=1.04)
    return _png(fig)


def frontier(data) -> bytes:
    """Cost per attempt vs usable rate per class: one panel per class, a line per condition, rungs labelled."""
    plt = _plt()
    from matplotlib.ticker import MaxNLocator
    classes = data.classes or ["(none)"]
    ncols = min(3, len(classes))
    nrows = -(-len(classes) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), sharey=True, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(classes):]:
        ax.set_visible(False)
    for ax, cls in zip(flat, classes):
        for cf in [c for c in data.floors.classes if c.task_class == cls]:
            pts = [(v.stats.cost_per_attempt, v.stats.usable_rate, v.stats.interval, v.stats.rung)
                   for v in cf.rungs if v.stats.cost_per_attempt is not None and v.stats.usable_rate is not None]
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            err = [[max(0.0, p[1] - p[2][0]) for p in pts], [max(0.0, p[2][1] - p[1]) for p in pts]]
            color = COLORS.get(cf.condition, "grey")
            ax.errorbar(xs, ys, yerr=err, marker="o", color=color, capsize=3, label=cf.condition)
            for x, y, _, name in pts:
                ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.axhline(data.settings.target, color="green", linestyle="--", linewidth=1)
        ax.set_title(cls)
        ax.set_xlabel("$ per attempt")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # small dollar amounts have long tick labels
        ax.set_ylim(-0.02, 1.05)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right")
    for row in axes:
        row[0].set_ylabel("usable rate (interval)")
    fig.tight_layout()
    fig.suptitle(f"Cost vs usable rate per class (target {data.settings.target:.0%} dashed)", fontsize=10, y=1.02)
    return _png(fig)


def turns_by_outcome(data) -> bytes:
    """Mean turns per rung and condition, split into usable runs and runs below the bar."""
    plt = _plt()
    rows: list[dict[str, Any]] = []
    for rung in data.rung_order:
        for cond in ("baseline", "skill"):
            cells = [v.stats for cf in data.floors.classes if cf.condition == cond for v in cf.rungs
                     if v.stats.rung == rung]
            if not cells:
                continue
            ok = sum((c.turns_success or 0) * c.usable for c in cells)
            n_ok = sum(c.usable for c in cells)
            bad = sum((c.turns_failure or 0) * (c.scored - c.usable) for c in cells)
            n_bad = sum(c.scored - c.usable for c in cells)
            rows.append({"label": f"{rung}\n{cond}", "ok": ok / n_ok if n_ok else 0.0,
                         "bad": bad / n_bad if n_bad else 0.0})
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(rows)), 3.0))
    xs = list(range(len(rows)))
    ax.bar([x - 0.2 for x in xs], [r["ok"] for r in rows], width=0.4, color="#55A868", label="usable")
    ax.bar([x + 0.2 for x in xs], [r["bad"] for r in rows], width=0.4, color="#C44E52", label="below the bar")
    ax.set_xticks(xs)
    ax.set_xticklabels([r["label"] for r in rows], fontsize=7)
    ax.set_ylabel("mean turns")
    ax.set_title("Turns by outcome", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


def all_plots(data) -> dict[str, bytes]:
    """Every figure of the report, by file stem."""
    return {"scores": score_distributions(data), "frontier": frontier(data), "turns": turns_by_outcome(data)}
