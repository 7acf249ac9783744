"""Recommended plans: per class and condition, the cheapest way to get usable results at the target rate.

A **plan** is a sequence of rungs (smallest first) with a number of attempts on each and the class's verifier:
"nano-30b x2, then super-120b x1" tries nano-30b until the verifier accepts, at most twice, then super-120b
once, and delivers the last answer. Without a verifier (the suite's class says ``verifier: false``) nothing can
be retried: a plan is one attempt on one rung.

The maths is the router's (`advisor.router.routing.rule.chain_outcome_batch`, design "Scores and money"): expected
cost ``E[C_r]`` with retries and escalation, P(usable) over the attempts, the verifier's false-accept and
false-reject rates. Attempts are independent draws of the rung's usable rate (the router's dependence rho is
not applied here). Per candidate plan:

- **usable**: its P(usable) at each rung's observed usable rate; the **interval** comes from sampling each
  rung's Beta posterior (uniform prior: ``Beta(usable + 1, scored - usable + 1)``, `SAMPLES` draws, fixed seed)
  and taking the two-sided quantiles at the stated confidence; the plan **clears** when the lower quantile
  reaches the target;
- **$ per usable result**: expected cost (each rung's mean cost per attempt, attempts it is expected to take)
  over P(usable), at the observed rates.

The recommendation is the clearing plan with the lowest $ per usable result (candidates: every increasing run
of at most `MAX_CHAIN` rungs with 1..`MAX_ATTEMPTS` attempts each, over the rungs with at least one usable run
that are not below the size floor: a rung never seen usable adds cost and nothing at the observed rate, and
only its posterior's width would lift a plan's lower bound; a rung whose loop does not converge (the floor
finder's "below: does not converge") under a larger rung whose loop does is not retried, whatever a rare
success makes it cost). When none clears, the best plan (highest
lower bound) is shown with one **next step** that names a command or a measurable change: the runs that would
decide a plan whose observed rate already reaches the target (`advisor probe --more CLASS` buys them), the
accept / reject rates a verifier needs where the class has none, the skill where the other condition does better,
or the single-attempt usable rate a larger rung needs.

The verifier's error rates are, per class: the newest pooled measurement of `advisor verifier measure`
(table ``verifier_rates``), else the suite's newest `advisor judge agreement` (run level), else the configured
ones (`FloorSettings.false_accept` / ``false_reject``); `VerifierUse` says which.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from itertools import combinations, product
from typing import Any, Sequence

import numpy as np

from advisor.router.routing.rule import chain_outcome_batch
from advisor.scores import VerifierErrors

MAX_ATTEMPTS = 5  #: attempts per rung a plan may use
MAX_CHAIN = 2  #: rungs per plan
SAMPLES = 2000  #: posterior draws per rung
SEED = 27  #: the draws are seeded: the same runs give the same intervals
MAX_EXTRA_RUNS = 2000  #: beyond this many more runs per rung, "more runs" is not offered as the next step


@dataclass(frozen=True)
class VerifierUse:
    """The verifier a class's plans assume, and where its error rates come from."""

    present: bool  #: False: the class's answers cannot be verified (one attempt on one rung)
    false_accept: float = 0.0
    false_reject: float = 0.0
    source: str = "configured"  #: measured | configured | none
    detail: str = ""

    @property
    def verifier(self) -> VerifierErrors | None:
        """The rates as a `VerifierErrors` (None without a verifier)."""
        return VerifierErrors(self.false_accept, self.false_reject) if self.present else None

    def describe(self) -> str:
        """One phrase for a table cell."""
        if not self.present:
            return "no verifier: one attempt"
        return f"verifier {self.source}: false accept {self.false_accept:.2g}, false reject {self.false_reject:.2g}"


@dataclass(frozen=True)
class PlanStep:
    """One rung of a plan and the attempts allowed on it."""

    rung: str
    attempts: int


@dataclass
class Plan:
    """A rung sequence with attempts per rung, its usable rate (with interval) and its cost."""

    steps: list[PlanStep]
    usable: float  #: P(usable) at the observed rates
    interval: tuple[float, float]  #: two-sided, from the per-rung posteriors
    expected_cost: float  #: USD per request (attempts and escalation included)
    cost_per_usable: float | None  #: expected cost / P(usable); None when nothing is ever usable
    clears: bool

    def describe(self) -> str:
        """ "nano-30b x2, then super-120b x1"."""
        return ", then ".join(f"{s.rung} x{s.attempts}" for s in self.steps)

    @property
    def first_rung(self) -> str:
        """The rung every request starts on."""
        return self.steps[0].rung


@dataclass
class ClassPlan:
    """The plan of one class under one condition, beside its floor, or what would give it one."""

    task_class: str
    condition: str
    verifier: VerifierUse
    plan: Plan | None  #: the cheapest plan that clears the target (None: none does)
    best: Plan | None  #: when none clears: the plan with the highest lower bound
    floor: str | None  #: smallest rung whose single-attempt rate clears the target (the floor finder's)
    first_time: str | None  #: the rung when results must be usable the first time (one attempt, no verifier)
    next_step: str | None = None  #: what would give it a plan (None when it has one)
    next_kind: str | None = None  #: more_runs | verifier | skill | larger_rung
    runs_needed: int | None = None  #: more_runs: scored runs per rung of the plan
    decide_rungs: list[str] = field(default_factory=list)  #: more_runs: the rungs whose runs would decide it
    cheaper: Plan | None = None  #: a plan cheaper per usable result than `plan` whose interval does not clear yet
    target_met: float | None = None  #: the highest target some plan clears (the best plan's lower bound)


@dataclass
class _Rungs:
    names: list[str]
    usable: np.ndarray
    scored: np.ndarray
    cost: np.ndarray


def chain_point(p: Sequence[float], cost: Sequence[float], k: Sequence[int],
                verifier: VerifierErrors | None) -> tuple[float, float]:
    """(expected cost, P(usable)) of one chain at point rates (the router's `chain_outcome_batch`, one row)."""
    e, q = chain_outcome_batch(np.asarray([p], float), np.asarray([cost], float), np.asarray(k, int), verifier)
    return float(e[0]), float(q[0])


def candidates(n_rungs: int, verifier: VerifierErrors | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every plan shape: (rung indices, attempts per rung); one attempt on one rung without a verifier."""
    if verifier is None:
        return [((i,), (1,)) for i in range(n_rungs)]
    out = []
    for length in range(1, min(MAX_CHAIN, n_rungs) + 1):
        for rungs in combinations(range(n_rungs), length):
            for ks in product(range(1, MAX_ATTEMPTS + 1), repeat=length):
                out.append((rungs, ks))
    return out


def _layout(shapes, width: int):
    idx = np.zeros((len(shapes), width), int)
    ks = np.ones((len(shapes), width), int)
    valid = np.zeros((len(shapes), width), bool)
    for j, (rungs, k) in enumerate(shapes):
        idx[j, :len(rungs)], ks[j, :len(rungs)], valid[j, :len(rungs)] = rungs, k, True
    return idx, ks, valid


def _draws(r: _Rungs, samples: int, seed: int, extra: float = 0.0) -> np.ndarray:
    """(samples, rungs) posterior draws; `extra` more scored runs per rung at the observed rate (what-if)."""
    rng = np.random.default_rng(seed)
    rate = np.where(r.scored > 0, r.usable / np.maximum(r.scored, 1), 0.0)
    n = r.scored + extra
    return rng.beta(rate * n + 1.0, (1.0 - rate) * n + 1.0, size=(samples, len(r.names)))


def evaluate(r: _Rungs, shapes, verifier: VerifierErrors | None, target: float, confidence: float,
             samples: int = SAMPLES, seed: int = SEED, extra: float = 0.0) -> list[Plan]:
    """Every candidate plan's usable rate, interval and cost (one vectorised call per evaluation)."""
    width = max(len(s[0]) for s in shapes)
    idx, ks, valid = _layout(shapes, width)
    rate = np.where(r.scored > 0, r.usable / np.maximum(r.scored, 1), 0.0)
    cost, p_use = chain_outcome_batch(rate[idx], r.cost[idx], ks, verifier, valid)
    draws = _draws(r, samples, seed, extra)  # (S, R)
    K = len(shapes)
    P = draws[:, idx].transpose(1, 0, 2).reshape(K * samples, width)  # (K*S, width)
    C = np.broadcast_to(r.cost[idx][:, None, :], (K, samples, width)).reshape(K * samples, width)
    rep = lambda a: np.repeat(a, samples, axis=0)  # noqa: E731
    _, q = chain_outcome_batch(P, C, rep(ks), verifier, rep(valid))
    lo, hi = np.quantile(q.reshape(K, samples), [(1 - confidence) / 2, (1 + confidence) / 2], axis=1)
    out = []
    for j, (rungs, k) in enumerate(shapes):
        cpu = float(cost[j] / p_use[j]) if p_use[j] > 0 else None
        out.append(Plan([PlanStep(r.names[i], a) for i, a in zip(rungs, k)], float(p_use[j]),
                        (float(lo[j]), float(hi[j])), float(cost[j]), cpu, bool(lo[j] >= target)))
    return out


def _cheapest(plans: list[Plan]) -> Plan | None:
    priced = [p for p in plans if p.cost_per_usable is not None]
    return min(priced, key=lambda p: (p.cost_per_usable, sum(s.attempts for s in p.steps))) if priced else None


def _runs_to_decide(r: _Rungs, shape, verifier, target: float, confidence: float) -> int | None:
    """More scored runs per rung of `shape` after which its interval clears, if the observed rates hold."""
    def clears(extra: float) -> bool:
        return evaluate(r, [shape], verifier, target, confidence, samples=SAMPLES, extra=extra)[0].clears
    if not clears(MAX_EXTRA_RUNS):
        return None
    lo, hi = 0, MAX_EXTRA_RUNS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if clears(mid) else (mid, hi)
    return hi


def plan_cells(cf, verifier: VerifierUse, target: float, confidence: float, has_skill: bool = False) -> ClassPlan:
    """The plan of one `advisor.floors.ClassFloor` (its cells' usable counts and costs); `has_skill`: the class
    has runs with a skill already (a next step then does not propose writing one)."""
    converging = [i for i, v in enumerate(cf.rungs) if v.why_below != "does_not_converge"]
    top = max(converging, default=-1)  # below the size floor: a larger rung's loop converges
    cells = [v.stats for i, v in enumerate(cf.rungs) if v.stats.usable and v.stats.cost_per_attempt is not None
             and not (v.why_below == "does_not_converge" and i < top)]
    out = ClassPlan(cf.task_class, cf.condition, verifier, None, None, cf.floor, cf.first_time)
    if not cells:
        scored = sum(v.stats.scored for v in cf.rungs)
        out.next_kind = "more_runs" if not scored else "larger_rung"
        if not scored:
            out.next_step = f"no scored runs yet: `{more_command(cf.task_class)}` probes this class"
            return out
        out.next_step = (f"no usable result in {scored} scored runs on a rung that converges; what would: "
                         + larger_rung_phrase(max(x.stats.scored for x in cf.rungs), verifier.verifier, target,
                                              confidence)
                         + (", or a skill document for the class" if not has_skill else ""))
        return out
    r = _Rungs([c.rung for c in cells], np.array([c.usable for c in cells], float),
               np.array([c.scored for c in cells], float), np.array([c.cost_per_attempt for c in cells], float))
    v = verifier.verifier
    shapes = candidates(len(cells), v)
    plans = evaluate(r, shapes, v, target, confidence)
    out.plan = _cheapest([p for p in plans if p.clears])
    if out.plan is not None:
        out.cheaper = _cheapest([p for p in plans if not p.clears and p.usable >= target
                                 and p.cost_per_usable is not None and p.cost_per_usable < out.plan.cost_per_usable])
        return out
    best = max(plans, key=lambda p: (p.interval[0], -(p.cost_per_usable or float("inf"))))
    out.best, out.target_met = best, best.interval[0]
    reaching = sorted((j for j, p in enumerate(plans) if p.usable >= target and p.cost_per_usable is not None),
                      key=lambda j: plans[j].cost_per_usable)[:3]
    options = [(n, j) for j in reaching if (n := _runs_to_decide(r, shapes[j], v, target, confidence)) is not None]
    if options:
        n, j = min(options, key=lambda o: (o[0], plans[o[1]].cost_per_usable))
        rungs = " and ".join(s.rung for s in plans[j].steps)
        out.next_kind, out.runs_needed = "more_runs", n
        out.decide_rungs = [s.rung for s in plans[j].steps]
        out.next_step = (f"undecided: {plans[j].describe()} reaches {plans[j].usable:.0%} at the observed rates; "
                         f"about {n} more scored runs on {rungs} would decide it: "
                         f"`{more_command(cf.task_class)}` runs them")
        return out
    if v is None:
        need = verifier_needed(r, target, confidence)
        if need is not None:
            plan, error = need
            out.next_kind = "verifier"
            out.next_step = (f"no verifier, so no retries: a verifier that accepts >= {1 - error:.0%} of usable "
                             f"answers and rejects >= {1 - error:.0%} of unusable ones would make {plan.describe()} clear "
                             f"{target:.0%} ({plan.usable:.0%} [{plan.interval[0]:.0%}-{plan.interval[1]:.0%}])")
            return out
    top = max(cf.rungs, key=lambda x: x.stats.rung_position).stats
    at = "" if top.usable_rate is None else f" ({top.rung} is at {top.usable_rate:.0%})"
    out.next_kind = "larger_rung"
    out.next_step = (f"nothing on this ladder reaches {target:.0%}, and more runs cannot change that: the best, "
                     f"{best.describe()}, reaches {best.usable:.0%} [{best.interval[0]:.0%}-{best.interval[1]:.0%}]; "
                     f"to get there, add to the ladder "
                     f"{larger_rung_phrase(max(c.scored for c in cells), v, target, confidence)}{at}"
                     + (", or give the class a skill document" if not has_skill else "")
                     + f", or accept a lower target for it (a target of {math.floor(100 * best.interval[0]):.0f}% "
                       "clears today)")
    return out


def more_command(task_class: str) -> str:
    """The command that buys a class's missing scored runs."""
    return f"advisor probe --more {task_class}"


#: Verifier error rates tried, largest first, when a class without a verifier is asked what one would need.
VERIFIER_ERRORS = (0.3, 0.2, 0.15, 0.1, 0.05, 0.02, 0.0)


def verifier_needed(r: "_Rungs", target: float, confidence: float) -> tuple[Plan, float] | None:
    """(the cheapest clearing plan, the largest false-accept = false-reject rate it allows), or None when even
    a perfect verifier would not make a plan clear."""
    for error in VERIFIER_ERRORS:
        v = VerifierErrors(error, error)
        plan = _cheapest([p for p in evaluate(r, candidates(len(r.names), v), v, target, confidence) if p.clears])
        if plan is not None:
            return plan, error
    return None


def rate_needed(runs: int, verifier: VerifierErrors | None, attempts: int, target: float,
                confidence: float) -> tuple[float, int]:
    """(the single-attempt usable rate a new rung needs, the scored runs it needs them over) for `attempts`
    attempts on it to clear the target: over `runs` runs when enough, else over the fewest of 2x, 4x ... runs at
    which a rung usable 90% of the time would clear."""
    def clears(p: float, n: int) -> bool:
        r = _Rungs(["new"], np.array([p * n]), np.array([float(n)]), np.array([1.0]))
        return evaluate(r, [((0,), (attempts,))], verifier, target, confidence)[0].clears
    n = max(1, runs)
    while not clears(min(1.0, max(target, 0.9)) if n > runs else 1.0, n) and n < MAX_EXTRA_RUNS:
        n *= 2
    lo, hi = 0.0, 1.0
    for _ in range(12):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if clears(mid, n) else (mid, hi)
    return hi, n


def larger_rung_phrase(runs: int, verifier: VerifierErrors | None, target: float, confidence: float) -> str:
    """ "a larger rung usable >= 62% of the time on one attempt over 20 scored runs (5 attempts under the
    verifier)": what a rung added on top of the ladder must show for a plan to clear."""
    attempts = 1 if verifier is None else MAX_ATTEMPTS
    rate, n = rate_needed(runs, verifier, attempts, target, confidence)
    return (f"a larger rung usable >= {rate:.0%} of the time on one attempt over {n} scored runs"
            + (f" ({attempts} attempts under the verifier)" if attempts > 1 else ""))


def recommend(floors, verifiers: dict[str, VerifierUse]) -> list["ClassPlan"]:
    """Plans of every (class, condition) of a `FloorReport`; `verifiers` per class (a configured verifier when
    a class is missing). A condition without a plan whose other condition (the skill) has one says so."""
    s = floors.settings
    default = VerifierUse(True, s.false_accept, s.false_reject, "configured", "floor settings")
    skilled = {cf.task_class for cf in floors.classes if cf.condition == "skill"}
    out = [plan_cells(cf, verifiers.get(cf.task_class, default), s.target, s.confidence, cf.task_class in skilled)
           for cf in floors.classes]
    by = {(p.task_class, p.condition): p for p in out}
    for p in out:
        other = by.get((p.task_class, "skill" if p.condition == "baseline" else "baseline"))
        if p.plan is None and p.condition == "baseline" and other is not None and other.plan is not None:
            lift = _lift(floors, p.task_class, other.plan.first_rung)
            p.next_kind = "skill"
            p.next_step = (f"use the skill: with it, {other.plan.describe()} clears"
                           + (f" (the skill lifts {other.plan.first_rung}'s usable rate by {lift * 100:+.0f} points)"
                              if lift is not None else ""))
    return out


def _lift(floors, task_class: str, rung: str) -> float | None:
    rates = {}
    for cf in floors.classes:
        v = cf.verdict(rung) if cf.task_class == task_class else None
        if v is not None and v.stats.usable_rate is not None:
            rates[cf.condition] = v.stats.usable_rate
    return rates["skill"] - rates["baseline"] if {"skill", "baseline"} <= set(rates) else None


def verifiers_from_store(store, suite: str, settings, classes: Sequence[str]) -> dict[str, VerifierUse]:
    """Per class: the verifier its plans assume (module docstring: measured, else the judge's, else configured)."""
    flags = store.suite_class_verifiers(suite)
    measured: dict[str, dict[str, Any]] = {}
    for row in store.verifier_rate_rows():
        if row["rung"] == "*":
            measured.setdefault(row["task_class"], row)
    judge = next((a for a in store.judge_agreements() if a.get("suite_name") == suite), None)
    out = {}
    for cls in classes:
        if not flags.get(cls, True):
            out[cls] = VerifierUse(False, source="none", detail="the suite's class says verifier: false")
            continue
        row = measured.get(cls)
        if row is not None and (row["false_accept"] is not None or row["false_reject"] is not None):
            fa = settings.false_accept if row["false_accept"] is None else row["false_accept"]
            fr = settings.false_reject if row["false_reject"] is None else row["false_reject"]
            sim = ", SIMULATED runs" if row["simulated"] else ""
            out[cls] = VerifierUse(True, fa, fr, "measured",
                                   f"advisor verifier measure {row['measurement_id']} ({row['runs']} runs{sim})")
        elif judge is not None and (judge["false_accept"] is not None or judge["false_reject"] is not None):
            fa = settings.false_accept if judge["false_accept"] is None else judge["false_accept"]
            fr = settings.false_reject if judge["false_reject"] is None else judge["false_reject"]
            out[cls] = VerifierUse(True, fa, fr, "measured",
                                   f"advisor judge agreement of {judge['judge']} ({judge['runs']} runs)")
        else:
            out[cls] = VerifierUse(True, settings.false_accept, settings.false_reject, "configured",
                                   "not measured yet: the error rates assumed (`advisor verifier measure` measures them)")
    return out

