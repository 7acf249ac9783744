"""The report's figures, drawn with matplotlib (imported lazily, Agg backend) and returned as PNG bytes.

- score distributions per rung (the bimodality), baseline and with skill (one legend above the panels);
- $ per usable result vs usable rate per class: each rung's single attempt (hollow, Wilson interval) beside the
  plan's end-to-end usable rate with retries (a star, posterior interval), labels kept off points and error bars;
  a class without a usable run says so instead of drawing an empty axis;
- turns by outcome per rung (usable vs below the bar).

Every figure of a report with stand-in runs says SIMULATED in its title and as a watermark.
"""

from __future__ import annotations

import io
from typing import Any

from advisor.money import PER_1K_USABLE, usd
from advisor.report.answer import condition_name
from advisor.report.policies import FIGURE_TITLE, call_distribution, policies_simulated

COLORS = {"baseline": "#4C72B0", "skill": "#DD8452"}


def _title(data, text: str, simulated: bool | None = None) -> str:
    """A figure title, prefixed SIMULATED when the report's runs are (or when `simulated` says so)."""
    return f"SIMULATED. {text}" if (data.simulated if simulated is None else simulated) else text


def _mark_simulated(fig, data, simulated: bool | None = None) -> None:
    """A faint diagonal SIMULATED watermark across a figure whose runs come from stand-in rungs."""
    if data.simulated if simulated is None else simulated:
        fig.text(0.5, 0.5, "SIMULATED", fontsize=56, color="#b00020", alpha=0.12, ha="center", va="center",
                 rotation=20, weight="bold", zorder=0)


def _plt():
    # heavy dependency, imported on use: matplotlib
    import matplotlib

    matplotlib.use("Agg", force=True)
    # heavy dependency, imported on use: matplotlib
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def score_distributions(data) -> bytes:
    """Histogram of overall scores per rung, both conditions, with the bar and near-zero lines.

    The run counts go in each panel's title and the conditions in one legend above the panels, so no legend
    covers a bar."""
    plt = _plt()
    rungs = [r for r in data.rung_order if r in data.scores] or ["(no scored runs)"]
    fig, axes = plt.subplots(1, len(rungs), figsize=(3.6 * len(rungs), 3.2), sharey=True, squeeze=False)
    bins = list(range(0, 101, 10))
    for ax, rung in zip(axes[0], rungs):
        counts = []
        for cond, values in sorted(data.scores.get(rung, {}).items()):
            weights = [100.0 / len(values)] * len(values)
            ax.hist(values, bins=bins, weights=weights, histtype="stepfilled", alpha=0.45,
                    color=COLORS.get(cond, "grey"), edgecolor=COLORS.get(cond, "grey"), label=cond)
            counts.append(f"{cond} n={len(values)}")
        ax.axvline(data.settings.bar, color="green", linestyle="--", linewidth=1)
        ax.axvline(data.settings.near_zero, color="red", linestyle=":", linewidth=1)
        ax.set_title(f"{rung}\n{', '.join(counts)}" if counts else rung, fontsize=10)
        ax.set_xlabel("overall score")
        ax.set_xlim(0, 100)
    axes[0][0].set_ylabel("% of scored runs")
    fig.tight_layout()
    height = fig.get_figheight()
    fig.subplots_adjust(top=1 - 0.95 / height)  # room above the panels for the title and the legend
    handles = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels())}
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="upper center", ncol=len(handles), fontsize=9,
                   bbox_to_anchor=(0.5, 1 - 0.3 / height), frameon=False)
    s = data.settings
    fig.suptitle(_title(data, f"Score distributions (bar {s.bar:g} dashed, near-zero {s.near_zero:g} dotted)"),
                 fontsize=11, y=1 - 0.05 / height, va="top")
    _mark_simulated(fig, data)
    return _png(fig)


#: Label offsets (points) tried in turn until a label overlaps no other label or point: next to the point first,
#: then further away (those get a thin leader line back to their point).
_OFFSETS = [(6, 6), (6, -14), (-8, 8), (-8, -16), (8, -4), (-10, -4), (6, 20), (6, -28), (-8, 22), (-8, -30),
            (10, 34), (10, -42), (-10, 36), (-10, -44), (24, 14), (24, -24), (-26, 14), (-26, -24), (28, 30),
            (-30, 30), (28, -38), (-30, -38), (12, 48), (-12, 48), (40, 0), (-42, 0)]
#: An offset at least this far (points) from its point draws a leader line.
_LEADER_FROM = 18


def place_labels(ax, items: list[tuple[float, float, str, str]], taken: list | None = None) -> list:
    """Annotate (x, y, text, colour) items so no two labels overlap and none covers a point or an error bar
    (`taken`: display-space boxes already occupied; greedy over `_OFFSETS`); return the texts."""
    # heavy dependency, imported on use: matplotlib
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    # the markers count as taken space, so a label never covers a point
    placed = [Bbox.from_bounds(px - 4, py - 4, 8, 8)
              for px, py in (ax.transData.transform((x, y)) for x, y, _, _ in items)] + list(taken or [])
    texts = []
    for x, y, text, color in items:
        best = None  # (outside the panel, overlaps, offset index): the first offset with no clash wins
        for i, (dx, dy) in enumerate(_OFFSETS):
            t = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8,
                            ha="left" if dx >= 0 else "right", color=color)
            box = t.get_window_extent(renderer).expanded(1.05, 1.1)
            t.remove()
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            score = (not inside, sum(box.overlaps(b) for b in placed), i)
            if best is None or score < best[0]:
                best = (score, box)
            if score[:2] == (False, 0):
                break
        dx, dy = _OFFSETS[best[0][2]]
        leader = {"arrowstyle": "-", "color": color, "alpha": 0.5, "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3}
        texts.append(ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8,
                                 ha="left" if dx >= 0 else "right", color=color,
                                 arrowprops=leader if max(abs(dx), abs(dy)) >= _LEADER_FROM else None))
        placed.append(best[1])
    return texts


def _error_boxes(ax, bars: list[tuple[float, float, float]]) -> list:
    """Display-space boxes of vertical error bars (x, low, high), so that labels keep off them."""
    # heavy dependency, imported on use: matplotlib
    from matplotlib.transforms import Bbox

    out = []
    for x, lo, hi in bars:
        (px, plo), (_, phi) = ax.transData.transform((x, lo)), ax.transData.transform((x, hi))
        out.append(Bbox.from_bounds(px - 4, plo, 8, max(1.0, phi - plo)))
    return out


def _frontier_panel(ax, data, cls: str) -> tuple[list, list]:
    """One class: each rung's single attempt (hollow, usable rate with its interval, $ per usable result at one
    attempt) and each condition's plan (filled star: end-to-end usable rate with retries and its interval, the
    plan's $ per usable result). Returns (labels, error bars) to place after the layout is final."""
    labels, bars = [], []
    plans = {p.condition: p for p in data.floors.plans if p.task_class == cls}
    for cf in [c for c in data.floors.classes if c.task_class == cls]:
        color = COLORS.get(cf.condition, "grey")
        name = "with skill" if cf.condition == "skill" else "without skill"
        vs = sorted([v for v in cf.rungs if v.first_time_cost_per_usable is not None
                     and v.stats.usable_rate is not None], key=lambda v: v.first_time_cost_per_usable)
        if vs:
            pts = [(v.first_time_cost_per_usable * 1000, v.stats.usable_rate) for v in vs]
            err = [[max(0.0, v.stats.usable_rate - v.stats.interval[0]) for v in vs],
                   [max(0.0, v.stats.interval[1] - v.stats.usable_rate) for v in vs]]
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=err, fmt="o", mfc="white", color=color,
                        ecolor=color, alpha=0.7, capsize=3, label=f"{name}: one attempt per rung")
            labels += [(x, y, v.stats.rung, color) for (x, y), v in zip(pts, vs)]
            bars += [(x, v.stats.interval[0], v.stats.interval[1]) for (x, _), v in zip(pts, vs)]
        plan = plans.get(cf.condition)
        shown = None if plan is None else (plan.plan or plan.best)
        if shown is not None and shown.cost_per_usable is not None:
            x, y = shown.cost_per_usable * 1000, shown.usable
            lo, hi = shown.interval
            ax.errorbar([x], [y], yerr=[[max(0.0, y - lo)], [max(0.0, hi - y)]], fmt="*", markersize=13,
                        color=color, ecolor=color, capsize=3, mfc=color if plan.plan is not None else "white",
                        label=f"{name}: the plan, retries included")
            labels.append((x, y, shown.describe().replace(", then ", " > "), color))
            bars.append((x, lo, hi))
    return labels, bars


def frontier(data) -> bytes:
    """Per class: $ per usable result vs usable rate, one attempt per rung beside the plan (with retries)."""
    plt = _plt()
    # heavy dependency, imported on use: matplotlib
    from matplotlib.ticker import FuncFormatter, LogLocator

    classes = data.classes or ["(none)"]
    ncols = min(3, len(classes))
    nrows = -(-len(classes) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), sharey=True, squeeze=False)
    flat = [ax for row in axes for ax in row]
    spare = flat[len(classes):]  # a slot the grid leaves over holds the legend, not a blank panel
    for ax in spare:
        ax.set_axis_off()
    pending: dict[Any, tuple[list, list]] = {}
    for ax, cls in zip(flat, classes):
        labels, bars = _frontier_panel(ax, data, cls)
        ax.axhline(data.settings.target, color="green", linestyle="--", linewidth=1)
        ax.set_title(cls, fontsize=11)
        ax.set_ylim(0, 1.05)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{100 * y:.0f}%"))
        ax.tick_params(labelsize=9)
        if not labels:  # no rung was ever usable: say so instead of an empty axis around $0
            ax.set_xticks([])
            ax.text(0.5, 0.5, "no usable run yet:\nno cost per usable result", transform=ax.transAxes,
                    ha="center", va="center", fontsize=9, color="#555555")
            continue
        ax.set_xlabel(f"$ {PER_1K_USABLE} (one scale for every class)", fontsize=9)
        pending[ax] = (labels, bars)
    xs = [x for ax in pending for x, _, _, _ in pending[ax][0]] + [b[0] for ax in pending for b in pending[ax][1]]
    if xs:  # one x range (log) for every class, so classes compare by eye
        low, high = min(x for x in xs if x > 0) / 1.6, max(xs) * 1.6
        for ax in pending:
            ax.set_xscale("log")
            ax.set_xlim(low, high)
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: usd(x, 2)))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    for row in axes:
        row[0].set_ylabel("usable (interval)", fontsize=10)
    fig.tight_layout()
    height = fig.get_figheight()
    fig.subplots_adjust(top=1 - 0.95 / height)  # room above the panels for the title and the legend
    fig.canvas.draw()  # labels are placed on the final layout: a later resize would move them onto each other
    for ax, (labels, bars) in pending.items():
        place_labels(ax, sorted(labels), _error_boxes(ax, bars))
    handles = {label: h for ax in flat for h, label in zip(*ax.get_legend_handles_labels())}
    if handles and spare:
        spare[0].legend(list(handles.values()), list(handles.keys()), loc="center", fontsize=8, frameon=False)
    elif handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="upper center", ncol=2, fontsize=8,
                   bbox_to_anchor=(0.5, 1 - 0.3 / height), frameon=False)
    fig.suptitle(_title(data, f"$ {PER_1K_USABLE} vs usable rate: one attempt (hollow) and the plan (star); "
                              f"target {data.settings.target:.0%} dashed"), fontsize=11, y=1 - 0.05 / height, va="top")
    _mark_simulated(fig, data)
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
            rows.append({"label": f"{rung}\n{condition_name(cond)}", "ok": ok / n_ok if n_ok else 0.0,
                         "bad": bad / n_bad if n_bad else 0.0, "n_ok": n_ok, "n_bad": n_bad})
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(rows)), 3.0))
    xs = list(range(len(rows)))
    ax.bar([x - 0.2 for x in xs], [r["ok"] for r in rows], width=0.4, color="#55A868", label="usable")
    ax.bar([x + 0.2 for x in xs], [r["bad"] for r in rows], width=0.4, color="#C44E52", label="below the bar")
    for x, r in zip(xs, rows):  # a bar that is missing says why
        for dx, key, what in ((-0.2, "ok", "no usable\nrun"), (0.2, "bad", "no failed\nrun")):
            if not r[f"n_{key}"]:
                ax.text(x + dx, 0.05, what, ha="center", va="bottom", fontsize=7, color="#555555", rotation=90)
    ax.set_xticks(xs)
    ax.set_xticklabels([r["label"] for r in rows], fontsize=9)
    ax.set_ylabel("mean turns")
    ax.set_title(_title(data, "Turns by outcome"), fontsize=11, pad=24)
    ax.legend(fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)  # above the bars
    _mark_simulated(fig, data)
    return _png(fig)


def call_distribution_plot(data: Any) -> bytes:
    """Stacked bars: per policy (one panel each) and class, the share of rung calls per rung."""
    plt = _plt()
    dist = call_distribution(data)
    policies = list(dist) or ["(no policy runs)"]
    rungs = list(dict.fromkeys([*data.rung_order, *(r for p in dist.values() for c in p.values() for r in c)]))
    classes = sorted({c for p in dist.values() for c in p})
    colors = plt.get_cmap("viridis")([i / max(1, len(rungs) - 1) for i in range(len(rungs))])
    fig, axes = plt.subplots(1, len(policies), figsize=(max(4.0, 3.2 * len(policies)), 3.4), sharey=True,
                             squeeze=False)
    for ax, policy in zip(axes[0], policies):
        cells = dist.get(policy, {})
        bottom = [0.0] * len(classes)
        for j, rung in enumerate(rungs):
            shares = [cells.get(c, {}).get(rung, 0) / max(1, sum(cells.get(c, {}).values())) for c in classes]
            ax.bar(range(len(classes)), shares, bottom=bottom, color=colors[j], label=rung)
            bottom = [b + s for b, s in zip(bottom, shares)]
        ax.set_xticks(range(len(classes)))
        ax.set_xticklabels(classes, rotation=35, ha="right", fontsize=8)
        ax.set_title(policy, fontsize=10)
    axes[0][0].set_ylabel("share of rung calls")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    sim = policies_simulated(data)
    fig.suptitle(_title(data, FIGURE_TITLE, sim), fontsize=11)
    _mark_simulated(fig, data, sim)
    return _png(fig)


def all_plots(data) -> dict[str, bytes]:
    """Every figure of the report, by file stem."""
    policies = {"policies": call_distribution_plot(data)} if data.policies else {}
    return {"scores": score_distributions(data), "frontier": frontier(data), "turns": turns_by_outcome(data),
            **policies}
