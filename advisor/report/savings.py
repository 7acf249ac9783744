"""What routing saves on a team's own traffic, against honest baselines (``advisor savings``, the report's section).

The window is the captured steps (`advisor.service.records.capture`) that a probe replayed on every rung (a suite from
``advisor suite from-traffic``, probed into the same store). Per step the probe's runs give, per rung, the share
of runs usable and the mean cost of one attempt; each **arm** is then priced and scored on the same steps:

- **as served**: the service's own record of the step: what it cost live (retries and escalations included) and
  whether it delivered a well-formed reply its verifier did not reject (the service's verdict, not re-checked);
- **always largest** / **always smallest**: one attempt on the ladder's largest / smallest rung;
- **recommended plan**: the class's plan from the probe (`advisor.plans`: rungs, attempts, escalation), walked with
  the step's own rates, a retry taken when the attempt was not usable (a verifier that catches every unusable
  answer: the plans' verifier error rates are left out here);
- **current router**: the chain the service's router chose for that step (recorded with the decision), its first
  rung once when the class had no verifier, else each rung of the chain once until one is usable;
- **cost-matched static mix**: a fixed share of requests on each of two rungs, the shares chosen per class so that
  its mean cost equals the router's: what the router is worth over a static mix of the same spend (independent
  efforts found such a mix hard to beat). The section says plainly when the router does not beat it. A step checked
  against the reply the service delivered (equivalence, or the judge against it) is matched by the rung that served
  it by construction, so the router is compared with the mix only on the steps the class's verifier checks.

Each arm has its mean cost per step and usable rate with a bootstrap interval (steps resampled with replacement,
`BOOTSTRAP` draws, fixed seed, 95% percentile interval), per class and in total. Steps answered by stand-in rungs
are labelled SIMULATED.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from advisor.errors import DataError
from advisor.floors import find_floors
from advisor.plans import chain_point
from advisor.report.tables import Table, table_md
from advisor.scores import PERFECT

BOOTSTRAP = 1000
SEED = 11
CONFIDENCE = 0.95
ARMS = ("as served", "always largest", "always smallest", "recommended plan", "current router", "static mix")


@dataclass
class Step:
    """One captured step with its probe runs: per rung (usable share, mean cost of an attempt)."""

    decision_id: str
    task_class: str
    served_cost: float
    served_usable: bool
    chain: list[str]
    verified: bool  #: the class had a verifier live (the router's chain could escalate)
    rates: dict[str, tuple[float, float]]  #: rung -> (usable share, mean cost)
    simulated: bool
    check: str = "reference"  #: what checks the replayed step: verifier | reference | judge (against the reference)


@dataclass
class ArmResult:
    """One arm over a set of steps: mean cost per step and usable rate, each with its interval."""

    arm: str
    cost: float
    cost_interval: tuple[float, float]
    usable: float
    usable_interval: tuple[float, float]
    detail: str = ""


@dataclass
class ClassSavings:
    """Every arm of one class (or of all classes: ``task_class == "all"``)."""

    task_class: str
    steps: int
    arms: list[ArmResult]
    router_vs_mix: tuple[float, float, float] | None = None  #: router minus mix usable: point, interval
    verdict: str = ""


@dataclass
class Savings:
    """The savings of one captured window (see the module docstring)."""

    suites: list[str]
    steps: int
    left_out: dict[str, int]
    classes: list[ClassSavings]
    total: ClassSavings | None
    simulated: bool
    window: tuple[str | None, str | None] = (None, None)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The savings as JSON data."""
        return json.loads(json.dumps(asdict(self), default=str))

    def lines(self) -> list[str]:
        """A terminal table per class and in total."""
        sim = " (SIMULATED stand-in rungs)" if self.simulated else ""
        out = [f"savings on {self.steps} captured steps replayed by suite(s) {', '.join(self.suites)}{sim}, "
               f"{self.window[0]} to {self.window[1]}"]
        for reason, n in sorted(self.left_out.items()):
            out.append(f"  left out: {n} {reason}")
        for cs in [*self.classes, *([self.total] if self.total is not None else [])]:
            out.append(f"{cs.task_class} ({cs.steps} steps)")
            out.append(f"  {'arm':<18} {'$/1k steps':>10} {'95% interval':>18}  {'usable':>7} {'95% interval':>13}")
            for a in cs.arms:
                out.append(f"  {a.arm:<18} {a.cost * 1000:>10.4f} [{a.cost_interval[0] * 1000:.4f}, "
                           f"{a.cost_interval[1] * 1000:.4f}]  "
                           f"{a.usable * 100:>6.0f}% [{a.usable_interval[0] * 100:.0f}-{a.usable_interval[1] * 100:.0f}]"
                           + (f"  {a.detail}" if a.detail else ""))
            if cs.verdict:
                out.append(f"  {cs.verdict}")
        out.extend(f"note: {n}" for n in self.notes)
        return out


# ------------------------------------------------------------------------------------------------ arms per step
def _walk(rates: dict[str, tuple[float, float]], chain: Sequence[tuple[str, int]]) -> tuple[float, float]:
    """(expected cost, P(usable)) of trying each rung of `chain` up to its attempts until one is usable: the plans'
    chain arithmetic (`advisor.plans.chain_point`) with a verifier that catches every unusable answer."""
    return chain_point([rates[r][0] for r, _ in chain], [rates[r][1] for r, _ in chain], [k for _, k in chain],
                       PERFECT)


def _arms_of(step: Step, ladder: list[str], plan: list[tuple[str, int]] | None) -> dict[str, tuple[float, float]]:
    out = {"as served": (step.served_cost, float(step.served_usable)),
           "always largest": _walk(step.rates, [(ladder[-1], 1)]),
           "always smallest": _walk(step.rates, [(ladder[0], 1)])}
    if plan:
        out["recommended plan"] = _walk(step.rates, plan)
    out["current router"] = _router(step, ladder)
    return out


def _router(step: Step, ladder: list[str]) -> tuple[float, float]:
    """The current router's arm on a step: its recorded chain, once per rung while a verifier rejects, else once."""
    chain = [r for r in step.chain if r in step.rates] or [ladder[0]]
    return _walk(step.rates, [(r, 1) for r in (chain if step.verified else chain[:1])])


def _mix(steps: list[Step], ladder: list[str], target_cost: float) -> tuple[dict[str, float], str]:
    """Shares of two rungs whose mean cost over `steps` is `target_cost` (one rung when it is out of range)."""
    mean = {r: float(np.mean([s.rates[r][1] for s in steps])) for r in ladder}
    order = sorted(ladder, key=lambda r: mean[r])
    if target_cost <= mean[order[0]]:
        return {order[0]: 1.0}, f"all {order[0]}"
    if target_cost >= mean[order[-1]]:
        return {order[-1]: 1.0}, f"all {order[-1]}"
    for lo, hi in zip(order, order[1:]):
        if mean[lo] <= target_cost <= mean[hi]:
            w = (mean[hi] - target_cost) / (mean[hi] - mean[lo]) if mean[hi] > mean[lo] else 1.0
            return {lo: w, hi: 1 - w}, f"{w * 100:.0f}% {lo}, {(1 - w) * 100:.0f}% {hi}"
    return {order[-1]: 1.0}, f"all {order[-1]}"


def router_verdict(on: str, mean: float, lo: float, hi: float) -> str:
    """What the router's usable rate minus the cost-matched static mix's (`mean`, 95% interval `lo`-`hi`, as
    shares) says: the router beats the mix only when the whole interval is above zero."""
    figures = f"{mean * 100:+.0f} points usable [{lo * 100:+.0f}, {hi * 100:+.0f}] at the same cost"
    if lo > 0:
        return f"the router beats the cost-matched static mix {on}: {figures}"
    if hi < 0:
        return f"the router does not beat the cost-matched static mix {on}: the mix does better, {figures}"
    return (f"the router does not beat the cost-matched static mix {on} beyond chance: {figures} (the interval "
            "reaches zero)")


def _interval(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    return float(lo), float(hi)


def summarise(name: str, steps: list[Step], ladder: list[str], plans: dict[str, list[tuple[str, int]]],
              mixes: dict[str, dict[str, float]], mix_notes: dict[str, str], seed: int = SEED) -> ClassSavings:
    """Every arm over `steps` with bootstrap intervals, and whether the router beats the static mix."""
    table: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in steps:
        arms = _arms_of(s, ladder, plans.get(s.task_class))
        share = mixes[s.task_class]
        arms["static mix"] = (sum(w * s.rates[r][1] for r, w in share.items()),
                              sum(w * s.rates[r][0] for r, w in share.items()))
        for arm, value in arms.items():
            table[arm].append(value)
    rng = np.random.default_rng(seed)
    n = len(steps)
    draws = rng.integers(0, n, size=(BOOTSTRAP, n))
    out = []
    for arm in ARMS:
        if len(table[arm]) != n:
            continue
        values = np.array(table[arm])
        cost, usable = values[:, 0], values[:, 1]
        detail = mix_notes.get(name, "") if arm == "static mix" else ""
        out.append(ArmResult(arm, float(cost.mean()), _interval(cost[draws].mean(axis=1)), float(usable.mean()),
                             _interval(usable[draws].mean(axis=1)), detail))
    result = ClassSavings(name, n, out)
    fair = np.array([s.check == "verifier" for s in steps])  # the served reply is not their yardstick
    if len(table["current router"]) == n and fair.any():
        diff = (np.array(table["current router"])[:, 1] - np.array(table["static mix"])[:, 1])[fair]
        picks = rng.integers(0, len(diff), size=(BOOTSTRAP, len(diff)))
        lo, hi = _interval(diff[picks].mean(axis=1))
        result.router_vs_mix = (float(diff.mean()), lo, hi)
        result.verdict = router_verdict(f"on the {len(diff)} steps the class's verifier checks", float(diff.mean()),
                                        lo, hi)
    elif len(table["current router"]) == n:
        result.verdict = (f"the router cannot be compared with the static mix here: all {n} steps are checked against "
                          "the reply the router's own rung gave, which that rung matches by construction; give the "
                          "class a verifier in the service config (then advisor suite from-traffic --config) to compare "
                          "them fairly")
    return result


# ------------------------------------------------------------------------------------------------ from the store
def traffic_suites(store) -> dict[str, dict[str, tuple[str, str]]]:
    """Per suite with replayed steps in the store: task id -> (the step's decision id, what checks it)."""
    out = {}
    for name in store.suite_names():
        config = store.suite_config(name) or {}
        tasks = {t["id"]: (t["replay"]["decision_id"], t["replay"].get("check") or "reference")
                 for t in config.get("tasks", []) if isinstance(t, dict) and isinstance(t.get("replay"), dict)}
        if tasks:
            out[name] = tasks
    return out


def class_plans(floors) -> dict[str, list[tuple[str, int]]]:
    """Per class, the recommended plan (or the best one when none clears) of a `FloorReport`, baseline condition."""
    out = {}
    for cp in floors.plans:
        chosen = cp.plan or cp.best
        if cp.condition == "baseline" and chosen is not None:
            out[cp.task_class] = [(s.rung, s.attempts) for s in chosen.steps]
    return out


def compute_savings(store, suite: str | None = None, tenant: str | None = None, since=None,
                    floors=None) -> Savings:
    """The savings of the captured steps replayed in `store` (of suite `suite`, else every traffic suite);
    `floors`, the `FloorReport` of `suite` when the caller has it (the report), is not computed again."""
    suites = traffic_suites(store)
    if suite is not None:
        if suite not in suites:
            raise DataError(f"{getattr(store, 'path', store)}: no replayed traffic in suite {suite!r} (suites with "
                            f"replayed steps: {', '.join(suites) or 'none'}; make one with advisor suite from-traffic)")
        suites = {suite: suites[suite]}
    if not suites:
        raise DataError(f"{getattr(store, 'path', store)}: no probe runs of a suite made from traffic: capture steps "
                        "(capture: {enabled: true}), then advisor suite from-traffic and advisor probe into this store")
    captured = {r["decision_id"]: r for r in store.captured_steps(tenant=tenant, since=since)}
    served = {r["decision_id"]: r for r in store.served_cost(list(captured))}
    left: dict[str, int] = defaultdict(int)
    steps: list[Step] = []
    plans: dict[str, list[tuple[str, int]]] = {}
    positions: dict[str, int] = {}
    for name, tasks in suites.items():
        plans.update(class_plans(floors if floors is not None and floors.suite == name else find_floors(store, name)))
        runs = store.scored_run_rows(name)
        by_task: dict[str, dict[str, list[tuple[bool, float]]]] = defaultdict(lambda: defaultdict(list))
        sim_task: dict[str, bool] = defaultdict(bool)
        for r in runs:
            positions[r["rung"]] = int(r["rung_position"])
            by_task[r["task_id"]][r["rung"]].append((bool(r["usable"]), float(r["cost_usd"])))
            sim_task[r["task_id"]] |= bool(r["simulated"])
        checks = {task_id: check for task_id, (_, check) in tasks.items()}
        for task_id, (decision, _) in tasks.items():
            cap = captured.get(decision)
            if cap is None:
                left["steps outside the window or tenant"] += 1
                continue
            if decision not in served:
                left["steps whose decision is not in the store"] += 1
                continue
            rates = {rung: (float(np.mean([u for u, _ in xs])), float(np.mean([c for _, c in xs])))
                     for rung, xs in by_task.get(task_id, {}).items()}
            d = served[decision]
            steps.append(Step(decision, cap.get("task_class") or "unclassified", float(d["total_cost_usd"] or 0.0),
                              bool(cap["reference_ok"]) and d["status"] == "ok",
                              list(json.loads(d["chain_json"] or "[]")), cap.get("verdict") != "unverified",
                              rates, bool(sim_task[task_id] or cap.get("simulated")), checks.get(task_id, "reference")))
    ladder = sorted(positions, key=lambda r: positions[r])
    complete = [s for s in steps if set(ladder) <= set(s.rates)]
    if len(complete) < len(steps):
        left["steps not probed on every rung (probe them on every rung: advisor probe --full-grid)"] += len(steps) - len(complete)
    if not complete:
        raise DataError(f"{getattr(store, 'path', store)}: no captured step was probed on every rung yet")
    by_class: dict[str, list[Step]] = defaultdict(list)
    for s in complete:
        by_class[s.task_class].append(s)
    mixes, notes = {}, {}
    for cls, group in by_class.items():
        router_cost = float(np.mean([_router(s, ladder)[0] for s in group]))
        mixes[cls], notes[cls] = _mix(group, ladder, router_cost)
    classes = [summarise(cls, group, ladder, plans, mixes, notes) for cls, group in sorted(by_class.items())]
    total = summarise("all", complete, ladder, plans, mixes, {"all": "each class's own mix"})
    stamps = sorted(str(captured[s.decision_id]["created_at"])[:19] for s in complete)
    notes_out = []
    biased = sum(s.check != "verifier" for s in complete)
    if biased:
        notes_out.append(f"{biased} of {len(complete)} steps are checked against the reply the service delivered: the "
                         "rung that served a step matches it by construction, so 'as served' and 'current router' "
                         "read high on them; the router is compared with the static mix only on the other steps")
    missing = sorted({s.task_class for s in complete} - set(plans))
    if missing:
        notes_out.append(f"no recommended plan for {', '.join(missing)}: that arm is left out of the total")
    return Savings(sorted(suites), len(complete), dict(left), classes, total, any(s.simulated for s in complete),
                   (stamps[0], stamps[-1]), notes_out)


# ------------------------------------------------------------------------------------------------ in the report
def report_savings(store, suite: str, floors=None) -> Savings | None:
    """The savings section of a report on `suite` (its `floors` reused), when it is a suite made from traffic whose
    steps were probed on every rung (else None)."""
    try:
        return compute_savings(store, suite=suite, floors=floors)
    except DataError:
        return None


def savings_tables(result: Savings) -> list[Table]:
    """One table per class and one for all classes: every arm's cost per step and usable rate."""
    out = []
    for cs in [*result.classes, *([result.total] if result.total is not None else [])]:
        rows = [[a.arm, f"${a.cost * 1000:.4f}", f"${a.cost_interval[0] * 1000:.4f} - ${a.cost_interval[1] * 1000:.4f}",
                 f"{a.usable * 100:.0f}%", f"{a.usable_interval[0] * 100:.0f}-{a.usable_interval[1] * 100:.0f}%",
                 a.detail] for a in cs.arms]
        title = "All classes" if cs.task_class == "all" else f"Class {cs.task_class}"
        out.append(Table(f"savings_{cs.task_class}", f"What routing saves: {title} ({cs.steps} captured steps)",
                         ["arm", "$ per 1k steps", "95% interval", "usable", "95% interval", "mix"], rows,
                         cs.verdict + ". " + SAVINGS_CAPTION if cs.verdict else SAVINGS_CAPTION,
                         simulated=result.simulated))
    return out


SAVINGS_CAPTION = ("The same captured steps priced and scored per arm: as served (the service's record), one attempt "
                   "on the largest or the smallest rung, the recommended plan, the chain the current router chose, "
                   "and a static mix of two rungs at the router's cost. Intervals: bootstrap over steps.")


def savings_markdown(result: Savings | None) -> list[str]:
    """The savings section as Markdown lines (empty when the suite is not made from traffic)."""
    if result is None:
        return []
    sim = " (SIMULATED)" if result.simulated else ""
    out = [f"## What routing saves on your traffic{sim}", "", savings_intro(result), ""]
    return out + [table_md(t) for t in savings_tables(result)]


def savings_intro(result: Savings) -> str:
    """The sentence above the savings tables: the window and what was left out."""
    left = "; ".join(f"{n} {why}" for why, n in sorted(result.left_out.items()))
    return (f"{result.steps} steps captured by advisor serve ({result.window[0]} to {result.window[1]}), each replayed "
            f"on every rung by the probe" + (f"; left out: {left}" if left else "") + ".")
