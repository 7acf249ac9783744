"""Summary figures of an evaluation: cost-quality curves, AIQ, cost at parity, dominance, paired bootstrap.

- **AIQ**: the area under a policy's non-decreasing cost-quality envelope (linear between points), divided by
  the width of the cost range. Single-shot mode: the common range of the single rungs' costs (quality 0 below
  a policy's cheapest point, flat after its last). Escalation mode: each policy's **own** cost range (its
  cheapest to its dearest point), since chains cannot be as cheap as the cheapest rung alone; a policy with one
  point has the AIQ of its quality.
- **Parity**: the cheapest cost at which a policy reaches the quality of the **best** single rung (the best by
  quality on the evaluation data, whatever its size).
- **Default point** and **best point**: the router's default (chosen in CV at training) is the headline; the
  best point of the sweep is shown beside it. `dominated_by` lists every baseline point of higher quality at a
  lower cost than the default.
- **Paired bootstrap** (requests resampled, the same resample for both policies, 1,000 replicates, 95%
  percentile intervals) of router minus baseline: AIQ, quality at the default point's cost, cost at parity;
  and, in escalation mode, router minus cascade: quality at the cascade's cost and cost at its quality.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from advisor.router.model.curves import aiq, envelope, min_cost_at, quality_at  # noqa: F401  (re-exported)
from advisor.router.routing.policies import baseline_policies

BOOTSTRAP = 1000


def _curves(res: dict[tuple, dict]) -> dict[str, list[dict]]:
    curves: dict[str, list] = {}
    for (policy, param), arr in res.items():
        name = policy if policy != "rung" else f"rung:{param}"
        point = {"param": param, "cost": float(np.mean(arr["cost"])), "quality": float(np.mean(arr["quality"])),
                 "predicted": float(np.nanmean(arr["predicted"])) if np.isfinite(arr["predicted"]).any() else None}
        if "predicted_independent" in arr:
            point["predicted_independent"] = float(np.mean(arr["predicted_independent"]))
        curves.setdefault(name, []).append(point)
    return curves


def _range(mode: str, name: str, curves: dict, singles: dict) -> tuple[float, float]:
    if mode == "single":
        return min(v["cost"] for v in singles.values()), max(v["cost"] for v in singles.values())
    return min(p["cost"] for p in curves[name]), max(p["cost"] for p in curves[name])


def summarise(cv: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Per mode: curves, AIQ, parity with the best single rung, the default point and its dominance check, and
    paired bootstrap intervals (module docstring)."""
    out: dict[str, Any] = {"prompts": cv["prompts"], "dropped_incomplete": cv["dropped_incomplete"],
                           "simulated": bool(cv.get("simulated")), "how": cv.get("how", "")}
    for mode, res in cv["outcomes"].items():
        curves = _curves(res)
        singles = {k[5:]: v[0] for k, v in curves.items() if k.startswith("rung:")}
        best_name = max(singles, key=lambda k: (singles[k]["quality"], -singles[k]["cost"]))
        best = {"rung": best_name, **{k: singles[best_name][k] for k in ("quality", "cost")}}
        xy = {name: [(p["cost"], p["quality"]) for p in pts] for name, pts in curves.items()}
        s: dict[str, Any] = {"curves": curves, "best_single": best, "aiq": {}, "parity": {}, "best_point": {}}
        for name in curves:
            lo, hi = _range(mode, name, curves, singles)
            s["aiq"][name] = aiq(xy[name], lo, hi)
            c = min_cost_at(xy[name], best["quality"])
            s["parity"][name] = {"cost": c, "saving": None if c is None else 1 - c / best["cost"]}
            s["best_point"][name] = max(curves[name], key=lambda p: (p["quality"], -p["cost"]))
        if "default" in curves:
            d = dict(curves["default"][0])
            d["dominated_by"] = [
                {"policy": name, **p} for name, pts in curves.items()
                if name in baseline_policies() or name.startswith("rung:") for p in pts
                if p["quality"] > d["quality"] + 1e-9 and p["cost"] < d["cost"] - 1e-15]
            s["default"] = d
        s["oracle"] = curves["oracle"][0]
        s["bootstrap"] = bootstrap(res, mode, best_name, seed)
        out[mode] = s
    return out


def _means(res: dict[tuple, dict], policy: str, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys = [k for k in res if k[0] == policy]
    Q = np.stack([res[k]["quality"] for k in keys], axis=1)
    C = np.stack([res[k]["cost"] for k in keys], axis=1)
    return W @ C, W @ Q


def bootstrap(res: dict[tuple, dict], mode: str, best_rung: str, seed: int = 0, B: int = BOOTSTRAP) -> dict:
    """Paired bootstrap intervals of router-minus-baseline (and -cascade) differences (module docstring)."""
    if ("router_value", 0.0) not in res:
        return {}
    n = len(res[("router_value", 0.0)]["cost"])
    rng = np.random.default_rng(seed)
    W = np.vstack([np.full(n, 1.0 / n), rng.multinomial(n, np.full(n, 1.0 / n), size=B) / n])
    rc, rq = _means(res, "router_value", W)
    sc, sq = _means(res, "rung", W)
    bq_i = [k for k in res if k[0] == "rung"].index(("rung", best_rung))
    has_default = ("default", 0.0) in res
    dc, dq = _means(res, "default", W) if has_default else (rc[:, :1], rq[:, :1])
    stats: dict[str, list] = {}

    def add(key: str, value: float | None) -> None:
        stats.setdefault(key, []).append(np.nan if value is None else value)

    for b in range(B + 1):
        r_pts = list(zip(rc[b], rq[b]))
        lo, hi = float(sc[b].min()), float(sc[b].max())
        target_q = float(sq[b, bq_i])
        if ("baseline", 0.0) in res:
            if b == 0:
                bc_all, bq_all = _means(res, "baseline", W)
            b_pts = list(zip(bc_all[b], bq_all[b]))
            if mode == "single":
                add("aiq", aiq(r_pts, lo, hi) - aiq(b_pts, lo, hi))
            else:
                add("aiq", aiq(r_pts, min(rc[b]), max(rc[b])) - aiq(b_pts, min(bc_all[b]), max(bc_all[b])))
            qb = quality_at(b_pts, float(dc[b, 0]), 0.0 if mode == "single" else None)
            add("quality_at_default_cost", None if qb is None else float(dq[b, 0]) - qb)
            rpar, bpar = min_cost_at(r_pts, target_q), min_cost_at(b_pts, target_q)
            add("cost_at_parity", None if rpar is None or bpar is None else rpar - bpar)
        if ("cascade", 0.0) in res:
            if b == 0:
                cc_all, cq_all = _means(res, "cascade", W)
            cc, cq = float(cc_all[b, 0]), float(cq_all[b, 0])
            qr = quality_at(r_pts, cc, None)
            add("quality_at_cascade_cost_vs_cascade", None if qr is None else qr - cq)
            par = min_cost_at(r_pts, cq)
            add("cost_at_cascade_quality_vs_cascade", None if par is None else par - cc)
    out = {}
    for key, vals in stats.items():
        v = np.array(vals, float)
        rest = v[1:][np.isfinite(v[1:])]
        out[key] = {"estimate": None if not np.isfinite(v[0]) else float(v[0]),
                    "lo": float(np.percentile(rest, 2.5)) if len(rest) else None,
                    "hi": float(np.percentile(rest, 97.5)) if len(rest) else None, "replicates": int(len(rest))}
    vs = "baseline" if mode == "single" or ("baseline", 0.0) in res else "cascade"
    out["_what"] = f"router (value rule / default) minus {vs}; paired bootstrap over requests, {B} replicates, 95%"
    return out


def plot(summary: dict[str, Any], folder: str | Path) -> list[Path]:
    """One cost-quality PNG per mode (marked SIMULATED when the runs are)."""
    # heavy dependency, imported on use: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # heavy dependency, imported on use: matplotlib
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for mode in ("single", "escalate"):
        curves = summary[mode]["curves"]
        fig, ax = plt.subplots(figsize=(7, 5))
        for name in ("router_value", "router", "router_prob_order", "baseline", "threshold", "class_floor"):
            if name in curves:
                env = envelope([(p["cost"], p["quality"]) for p in curves[name]])
                ax.plot([c * 1e3 for c, _ in env], [q for _, q in env], marker=".", label=name)
        for name, pts in curves.items():
            if name.startswith("rung:") or name in ("random", "oracle", "cascade", "default"):
                p = pts[0]
                ax.scatter(p["cost"] * 1e3, p["quality"], marker={"oracle": "*", "default": "D"}.get(name, "o"))
                ax.annotate(name.replace("rung:", ""), (p["cost"] * 1e3, p["quality"]), fontsize=6)
        ax.set_xlabel("cost (USD per 1,000 requests)")
        ax.set_ylabel("usable rate")
        ax.set_title(("SIMULATED runs: " if summary.get("simulated") else "") + f"cost-quality, {mode} mode")
        ax.legend(fontsize=8)
        path = folder / f"cost_quality_{mode}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        files.append(path)
    return files


def write_summary(summary: dict[str, Any], path: str | Path) -> Path:
    """The JSON summary file (strict JSON: null for non-finite numbers)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(strict(summary), indent=1, default=str, allow_nan=False))
    return path


def strict(obj: Any) -> Any:
    """A copy with NaN/inf replaced by None and tuple keys joined, for strict JSON."""
    if isinstance(obj, dict):
        return {(":".join(map(str, k)) if isinstance(k, tuple) else k): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
