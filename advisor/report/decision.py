"""The report's first screen: per class, what to run, why, what it costs a month, and what to do next.

Built from `ReportData` (no store access, no formatting): for each class the recommended plan with and without a
skill (`advisor.plans`: rungs, attempts, verifier; usable rate with its interval), the evidence behind it (usable rate, interval, scored and unscored runs, why the smaller rungs fail),
the cost per usable result and per month at a stated volume, the same for always running the largest rung,
and next steps (more runs for undecided cells, a skill where its lift is large).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from advisor.floors import wilson_interval
from advisor.probe.budget import min_runs_to_clear

#: Usable results per class and month assumed when `--volume` does not give one (stated on the page).
DEFAULT_VOLUME = 10_000
#: A skill whose usable-rate lift reaches this (share points) counts as large.
LARGE_LIFT = 0.2
#: Runs per cell beyond which `runs_to_decide` gives up (the observed rate sits on the target).
MAX_RUNS = 2000


@dataclass
class Option:
    """One condition's answer for a class: the rung to run and the evidence for it."""

    condition: str  #: baseline | skill
    rung: str | None  #: recommended rung (None: nothing clears the target)
    floor: str | None
    floor_status: str  #: decided | provisional | none
    first_time: str | None  #: the rung when results must be usable first time
    usable_rate: float | None  #: single-attempt usable rate of `rung` (or of the best rung when none clears)
    interval: tuple[float, float] | None
    scored: int = 0
    unscored: int = 0
    simulated: bool = False
    cost_per_usable: float | None = None
    best_rung: str | None = None  #: when nothing clears: the rung with the highest usable rate
    below: list[tuple[str, str, str]] = field(default_factory=list)  #: (rung, why_below, reason) under `rung`
    plan: str | None = None  #: the recommended plan ("nano-30b x2, then super-120b x1"), None when none clears
    best_plan: str | None = None  #: when none clears: the plan closest to clearing
    plan_usable: float | None = None  #: the plan's (or best plan's) usable rate at the observed rates
    plan_interval: tuple[float, float] | None = None  #: from the per-rung posteriors
    verifier: str = ""  #: which verifier the plan assumes and where its rates come from
    next_step: str | None = None  #: what would give the class a plan (none or undecided)
    next_kind: str | None = None


@dataclass
class NextStep:
    """Something to do next, with the cell it concerns."""

    kind: str  #: more_runs | write_skill | keep_skill | larger_rung
    task_class: str
    text: str
    condition: str | None = None
    rung: str | None = None
    runs: int | None = None  #: more_runs: additional scored runs the interval needs
    lift: float | None = None  #: keep_skill: the usable-rate lift (share points)


@dataclass
class ClassDecision:
    """The first screen's line for one class."""

    task_class: str
    chosen: Option  #: the cheaper of the conditions that clear (or the closest to clearing)
    options: dict[str, Option]  #: by condition
    volume: int
    volume_assumed: bool  #: True when the volume is the default, not given with --volume
    monthly: float | None
    largest: str
    largest_cost_per_usable: float | None
    monthly_largest: float | None
    lift: float | None  #: skill minus baseline usable rate at the chosen rung (None without skill runs)


@dataclass
class Decision:
    """Every class's decision, the totals and the next steps."""

    classes: list[ClassDecision]
    total_monthly: float | None
    total_monthly_largest: float | None
    next_steps: list[NextStep]
    default_volume: int
    simulated: bool
    incomplete_total: list[str] = field(default_factory=list)  #: classes left out of the total (no price)
    skipped: list[Any] = field(default_factory=list)  #: `advisor.skipped.SkippedClass`: classes without runs


def runs_to_decide(usable: int, scored: int, target: float, confidence: float) -> int | None:
    """Additional scored runs after which the Wilson interval decides the cell, if its rate holds; None: never.

    Above the target this is `advisor plan`'s count (`advisor.probe.budget.min_runs_to_clear`, the same interval);
    below it, the runs after which the upper bound drops under the target.
    """
    if scored == 0:
        return None
    p = usable / scored
    if p > target:
        n = min_runs_to_clear(target, confidence, p, limit=MAX_RUNS)
        return None if n is None else max(1, n - scored)
    for n in range(scored + 1, MAX_RUNS + 1):
        if wilson_interval(round(p * n), n, confidence)[1] < target:
            return n - scored
    return None


def _option(cf, largest: str, plan=None) -> Option:
    """One condition's answer: the plan when there is one (its first rung, usable rate and cost), the evidence
    of the rungs (usable rate of the plan's first rung, or of the best rung), and the next step."""
    first = plan.plan.first_rung if plan is not None and plan.plan is not None else None
    chosen = cf.verdict(first) if first else None
    if chosen is None:
        scored = [v for v in cf.rungs if v.stats.usable_rate is not None]
        best = max(scored, key=lambda v: (v.stats.usable_rate, v.stats.rung_position)) if scored else None
    else:
        best = chosen
    s = best.stats if best else None
    limit = chosen.stats.rung_position if chosen else 10 ** 9
    below = [(v.stats.rung, v.why_below or v.status, v.reason) for v in cf.rungs
             if v.stats.rung_position < limit and v.status != "clears"]
    o = Option(condition=cf.condition, rung=first, floor=cf.floor, floor_status=cf.floor_status,
               first_time=cf.first_time, usable_rate=s.usable_rate if s else None,
               interval=s.interval if s else None, scored=s.scored if s else 0,
               unscored=s.unscored if s else 0, simulated=bool(s and s.simulated_runs),
               best_rung=None if chosen or not best else best.stats.rung, below=below)
    if plan is not None:
        shown = plan.plan or plan.best
        o.verifier = plan.verifier.describe() + (f" ({plan.verifier.detail})" if plan.verifier.detail else "")
        o.next_step, o.next_kind = plan.next_step, plan.next_kind
        if shown is not None:
            o.plan_usable, o.plan_interval = shown.usable, shown.interval
        if plan.plan is not None:
            o.plan, o.cost_per_usable = plan.plan.describe(), plan.plan.cost_per_usable
        elif plan.best is not None:
            o.best_plan = plan.best.describe()
    return o


def decide(data, volumes: dict[str, int] | None = None, default_volume: int = DEFAULT_VOLUME) -> Decision:
    """The first screen's content from a report's data; `volumes` per class override `default_volume`."""
    return decide_floors(data.floors, volumes, default_volume)


def decide_floors(floors, volumes: dict[str, int] | None = None, default_volume: int = DEFAULT_VOLUME) -> Decision:
    """The same from a `FloorReport` alone (what `advisor floors` and `advisor probe` end with)."""
    volumes = volumes or {}
    s = floors.settings
    largest = floors.rung_order[-1] if floors.rung_order else ""
    out, steps, missing = [], [], []
    for cls in sorted({cf.task_class for cf in floors.classes}):
        cfs = {cf.condition: cf for cf in floors.classes if cf.task_class == cls}
        plans = {p.condition: p for p in floors.plans if p.task_class == cls}
        options = {cond: _option(cf, largest, plans.get(cond)) for cond, cf in cfs.items()}
        priced = [o for o in options.values() if o.cost_per_usable is not None]
        chosen = (min(priced, key=lambda o: o.cost_per_usable) if priced else
                  max(options.values(), key=lambda o: ((o.plan_interval or (0.0, 0.0))[0], o.usable_rate or 0.0,
                                                       o.condition == "skill")))
        top = cfs[chosen.condition].verdict(largest)
        top_cpu = top.cost_per_usable if top is not None else None
        vol = volumes.get(cls, default_volume)
        lift = None
        if "skill" in cfs and "baseline" in cfs:
            at = chosen.rung or chosen.best_rung or largest
            b, k = cfs["baseline"].verdict(at), cfs["skill"].verdict(at)
            if b and k and b.stats.usable_rate is not None and k.stats.usable_rate is not None:
                lift = k.stats.usable_rate - b.stats.usable_rate
        out.append(ClassDecision(cls, chosen, options, vol, cls not in volumes,
                                 None if chosen.cost_per_usable is None else vol * chosen.cost_per_usable,
                                 largest, top_cpu, None if top_cpu is None else vol * top_cpu, lift))
        if chosen.cost_per_usable is None:
            missing.append(cls)
        steps += _next_steps(cls, cfs, chosen, lift, s)
    rows = [c for c in out if c.monthly is not None and c.monthly_largest is not None]
    total = sum(c.monthly for c in rows) if rows else None
    total_largest = sum(c.monthly_largest for c in rows) if rows else None
    steps += [NextStep("skipped", k.task_class, k.line()) for k in floors.skipped]
    return Decision(out, total, total_largest, steps, default_volume, floors.simulated_runs > 0, missing,
                    list(floors.skipped))


def _next_steps(cls: str, cfs: dict, chosen: Option, lift: float | None, s) -> list[NextStep]:
    if chosen.next_step is not None:  # the plan maths' own next step (advisor.plans)
        steps = [NextStep(chosen.next_kind or "more_runs", cls, f"{cls}: {chosen.next_step}", chosen.condition)]
        if lift is not None and lift >= LARGE_LIFT:
            steps += _keep_skill(cls, chosen, lift)
        return steps
    if chosen.plan is not None:
        return _keep_skill(cls, chosen, lift) if lift is not None and lift >= LARGE_LIFT else []
    steps = []
    for cond, cf in sorted(cfs.items()):
        at = cf.verdict(chosen.rung) if chosen.rung else None
        limit = at.stats.rung_position if at else None  # undecided rungs above the recommendation do not matter
        for v in cf.rungs:
            c = v.stats
            if v.status != "undecided" or (limit is not None and c.rung_position > limit):
                continue
            n = runs_to_decide(c.usable, c.scored, s.target, s.confidence)
            text = (f"{cls} / {c.rung} ({cond}): undecided after {c.scored} scored runs; about {n} more would decide "
                    f"it ({'clears' if c.usable_rate > s.target else 'below'} the target) if its rate ({c.usable_rate:.0%}) "
                    "holds (`advisor plan` gives replicas per task)" if n else
                    f"{cls} / {c.rung} ({cond}): undecided after {c.scored} scored runs, and its rate sits on the "
                    "target: more runs will not decide it soon")
            steps.append(NextStep("more_runs", cls, text, cond, c.rung, n))
    if "skill" not in cfs and chosen.rung is None:
        steps.append(NextStep("write_skill", cls, f"{cls}: no rung clears the target without help; write a skill "
                              "document for this class and probe it"))
    elif lift is not None and lift >= LARGE_LIFT:
        at = chosen.rung or chosen.best_rung
        steps.append(NextStep("keep_skill", cls, f"{cls}: the skill lifts the usable rate by {lift * 100:.0f} points "
                              f"on {at}: keep it in the prompt and current", "skill", at, lift=lift))
    if chosen.rung is None and not any(v.status == "undecided" for cf in cfs.values() for v in cf.rungs):
        steps.append(NextStep("larger_rung", cls, f"{cls}: no rung on the ladder clears {s.target:.0%}: lower the "
                              "target, add a larger rung, or improve the skill"))
    return steps


def to_dict(d: Decision) -> dict[str, Any]:
    """A JSON-ready dict (the `decision` part of `floors.json`)."""
    return asdict(d)


def _keep_skill(cls: str, chosen: Option, lift: float) -> list[NextStep]:
    at = chosen.rung or chosen.best_rung
    return [NextStep("keep_skill", cls, f"{cls}: the skill lifts the usable rate by {lift * 100:.0f} points on {at}: "
                     "keep it in the prompt and current", "skill", at, lift=lift)]
