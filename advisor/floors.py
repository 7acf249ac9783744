"""The floor finder: per task class and condition, which rungs pass the quality bar, and which one to use.

For every (class, condition, rung) cell of a suite's probe (and imported) runs it computes the usable rate
with a Wilson interval, near-zero and non-convergence rates, mean scores, turns split by outcome, cost per
attempt and cost per usable result with retries and escalation (the router's chain maths, `advisor.plans.chain_point`).

Decisions, with ``target`` the usable rate a class needs and ``confidence`` the level of a two-sided Wilson
interval (so each one-sided decision holds at (1 + confidence) / 2):

- a rung **clears** when the interval's lower bound >= target, is **below** when its upper bound < target,
  and is **undecided** otherwise;
- the **floor** is the smallest rung that clears; it is *decided* when every smaller rung is below and
  *provisional* when a smaller rung is still undecided;
- the **recommendation** is the rung at or above the floor with the lowest cost per usable result, retries
  (k attempts per rung, a verifier with the stated error rates) and escalation to larger rungs included;
  ``first_time`` is the same choice when results must be usable first time (one attempt, no verifier:
  cost c, quality p, so c / p).
- the **plan** (`advisor.plans`, filled by `find_floors`): the cheapest rung sequence with attempts per rung and
  the class's verifier whose usable rate clears the target with the stated confidence (per-rung posteriors
  sampled); the floor keeps its single-attempt meaning and is shown beside it.

Unscored runs (a backend error, a missing judge) are left out of every rate and of cost per attempt (and so
of cost per usable result: a failed call's $0 would make a rung look cheaper) and counted apart per cell
(`CellStats.unscored`). A run *does not converge* when its loop stopped for a reason other than a final answer
(max_turns, max_tokens, timeout, stuck, invalid_output); backend errors, interruptions and imported runs
(whose stop reason is unknown) are not counted as the model's failure to converge.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from advisor.errors import DataError, did_you_mean
from advisor.plans import chain_point, recommend, verifiers_from_store
from advisor.records import FLOOR_COLUMNS, FLOOR_KINDS, NONCONVERGED, StopReason
from advisor.scores import DEFAULT_BAR, DEFAULT_NEAR_ZERO, VerifierErrors, points_per_dollar
from advisor.skipped import skipped_classes

if TYPE_CHECKING:
    from advisor.store.protocols import LiveRecords

#: Columns the floor finder needs from the runs table.
RUN_FIELDS = FLOOR_COLUMNS


@dataclass(frozen=True)
class FloorSettings:
    """The settings every floor decision depends on (recorded in each report)."""

    bar: float = DEFAULT_BAR  #: a run is usable when overall >= bar
    near_zero: float = DEFAULT_NEAR_ZERO  #: a run is near-zero when overall < near_zero
    target: float = 0.8  #: the usable rate a class needs
    confidence: float = 0.9  #: two-sided level of the Wilson interval
    k: int = 3  #: attempts per rung before escalating (with a verifier)
    false_accept: float = 0.0  #: verifier P(accept | not usable)
    false_reject: float = 0.0  #: verifier P(reject | usable)

    def __post_init__(self) -> None:
        checks = [(0 < self.target < 1, "target must be between 0 and 1 (exclusive)"),
                  (0 < self.confidence < 1, "confidence must be between 0 and 1 (exclusive)"),
                  (self.k >= 1, "k (attempts per rung) must be at least 1"),
                  (0 <= self.false_accept < 1 and 0 <= self.false_reject < 1,
                   "verifier error rates must be in [0, 1)"),
                  (0 <= self.near_zero <= self.bar <= 100, "need 0 <= near_zero <= bar <= 100")]
        for ok, msg in checks:
            if not ok:
                raise DataError(f"floor settings: {msg}")

    @property
    def verifier(self) -> VerifierErrors:
        """The verifier used for retries."""
        return VerifierErrors(self.false_accept, self.false_reject)

    @property
    def z(self) -> float:
        """Normal quantile of the two-sided interval."""
        return z_for(self.confidence)


def z_for(confidence: float) -> float:
    """The normal quantile z of a two-sided interval at `confidence` (1.645 for 0.9, 1.960 for 0.95)."""
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def wilson_interval(successes: int, n: int, confidence: float = 0.9) -> tuple[float, float]:
    """Two-sided Wilson score interval of a binomial proportion; (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..n={n}")
    z = z_for(confidence)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class CellStats:
    """What the runs of one (class, condition, rung) cell show."""

    task_class: str
    condition: str
    rung: str
    rung_position: int
    runs: int = 0
    unscored: int = 0
    scored: int = 0
    usable: int = 0
    near_zero: int = 0
    nonconverged: int = 0
    simulated_runs: int = 0
    unknown_stop: int = 0  #: runs whose stop reason was not recorded (imported results)
    usable_rate: float | None = None  #: usable / scored
    interval: tuple[float, float] = (0.0, 1.0)
    near_zero_rate: float | None = None  #: near-zero / scored
    nonconvergence_rate: float | None = None  #: non-converged / runs
    mean_if: float | None = None
    mean_tc: float | None = None
    mean_overall: float | None = None
    turns_success: float | None = None  #: mean turns of usable runs
    turns_failure: float | None = None  #: mean turns of scored runs below the bar
    cost_per_attempt: float | None = None  #: mean solve cost of the scored runs (unscored runs left out)
    judge_cost_per_attempt: float | None = None


def cell_stats(rows: Iterable[dict[str, Any]], settings: FloorSettings) -> list[CellStats]:
    """Aggregate run rows (dicts with `RUN_FIELDS`) into cells, ordered by class, condition, rung position."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task_class"], r["condition"], r["rung"]), []).append(r)
    cells = []
    for (cls, cond, rung), rs in groups.items():
        scored = [r for r in rs if not r["unscored"] and r["overall"] is not None]
        ok = [r for r in scored if r["overall"] >= settings.bar]
        bad = [r for r in scored if r["overall"] < settings.bar]
        c = CellStats(cls, cond, rung, min(r["rung_position"] for r in rs), runs=len(rs))
        c.unscored = len(rs) - len(scored)
        c.scored, c.usable = len(scored), len(ok)
        c.near_zero = sum(1 for r in scored if r["overall"] < settings.near_zero)
        c.nonconverged = sum(1 for r in rs if r["stop_reason"] in NONCONVERGED)
        c.simulated_runs = sum(1 for r in rs if r["simulated"])
        c.unknown_stop = sum(1 for r in rs if r["stop_reason"] == StopReason.IMPORTED)
        if scored:
            c.usable_rate = c.usable / c.scored
            c.near_zero_rate = c.near_zero / c.scored
        c.interval = wilson_interval(c.usable, c.scored, settings.confidence)
        c.nonconvergence_rate = c.nonconverged / c.runs
        c.mean_if = _mean([r["if_score"] for r in scored if r["if_score"] is not None])
        c.mean_tc = _mean([r["tc_score"] for r in scored if r["tc_score"] is not None])
        c.mean_overall = _mean([r["overall"] for r in scored])
        c.turns_success = _mean([r["turns"] for r in ok])
        c.turns_failure = _mean([r["turns"] for r in bad])
        c.cost_per_attempt = _mean([r["cost_usd"] for r in scored])
        c.judge_cost_per_attempt = _mean([r["judge_cost_usd"] for r in scored])
        cells.append(c)
    cells.sort(key=lambda c: (c.task_class, c.condition, c.rung_position, c.rung))
    return cells


@dataclass
class RungVerdict:
    """One rung of one class and condition: its statistics, status and money."""

    stats: CellStats
    status: str  #: clears | below | undecided
    reason: str  #: why (for below: does not converge, converges to poor results, or usable too rarely)
    why_below: str | None = None  #: does_not_converge | poor_results | too_rarely (below only)
    cost_per_usable: float | None = None  #: chain from this rung up, k retries, escalation
    chain_p_usable: float | None = None  #: P(usable) of that chain
    first_time_cost_per_usable: float | None = None  #: one attempt, no verifier: c / p
    points_per_dollar: float | None = None  #: mean overall / cost per attempt (beside cost per usable only)


@dataclass
class ClassFloor:
    """The floor and recommendation of one task class under one condition."""

    task_class: str
    condition: str
    rungs: list[RungVerdict]
    floor: str | None  #: smallest rung that clears, or None
    floor_status: str  #: decided | provisional | none
    recommended: str | None  #: lowest cost per usable result at/above the floor (retries allowed)
    first_time: str | None  #: the same when results must be usable first time
    first_time_changes: bool
    note: str

    def verdict(self, rung: str) -> RungVerdict | None:
        """The verdict of one rung, or None when it has no runs."""
        return next((v for v in self.rungs if v.stats.rung == rung), None)


def _status(c: CellStats, s: FloorSettings) -> tuple[str, str, str | None]:
    lo, hi = c.interval
    rate = "no scored runs" if c.usable_rate is None else f"usable {c.usable}/{c.scored} = {c.usable_rate:.0%}"
    ci = f"{s.confidence:.0%} interval {lo:.2f}-{hi:.2f}"
    if c.scored and lo >= s.target:
        return "clears", f"{rate}, {ci} >= target {s.target:.2f}", None
    if c.scored and hi < s.target:
        fails = c.runs - c.unscored - c.usable
        if c.nonconverged and c.nonconverged >= 0.5 * max(1, fails):
            return ("below", f"does not converge: {c.nonconverged}/{c.runs} runs stop without a final answer; "
                    f"{rate}, {ci} < target", "does_not_converge")
        mean = "n/a" if c.mean_overall is None else f"{c.mean_overall:.1f}"
        if c.unknown_stop == c.runs:
            return ("below", f"poor results (imported: whether the loop converged was not recorded): mean overall "
                    f"{mean}, {rate}, {ci} < target", "poor_results")
        if c.mean_overall is not None and c.mean_overall >= s.bar:  # a good mean, but too few runs reach the bar
            return ("below", f"usable too rarely in one attempt: mean overall {mean} is above the bar, but "
                    f"{rate}, {ci} < target", "too_rarely")
        return ("below", f"converges to poor results: mean overall {mean}, {rate}, {ci} < target",
                "poor_results")
    more = f" ({c.unscored} unscored)" if c.unscored else ""
    return "undecided", f"{rate}{more}, {ci} straddles target {s.target:.2f}: needs more runs", None


def decide(cells: Sequence[CellStats], settings: FloorSettings) -> list[ClassFloor]:
    """Floors and recommendations per (class, condition) from cell statistics."""
    groups: dict[tuple[str, str], list[CellStats]] = {}
    for c in cells:
        groups.setdefault((c.task_class, c.condition), []).append(c)
    out = []
    for (cls, cond), cs in sorted(groups.items()):
        cs = sorted(cs, key=lambda c: c.rung_position)
        verdicts = [RungVerdict(c, *_status(c, settings)) for c in cs]
        for i, v in enumerate(verdicts):
            c = v.stats
            if c.cost_per_attempt is None:
                continue
            up = verdicts[i:]
            p = [w.stats.usable_rate or 0.0 for w in up]
            cost = [w.stats.cost_per_attempt or 0.0 for w in up]
            spent, p_usable = chain_point(p, cost, [settings.k] * len(up), settings.verifier)
            v.cost_per_usable = spent / p_usable if p_usable > 0 else None
            v.chain_p_usable = p_usable
            v.first_time_cost_per_usable = cost[0] / p[0] if p[0] > 0 else None
            v.points_per_dollar = points_per_dollar(c.mean_overall, c.cost_per_attempt)
        out.append(_floor_of(cls, cond, verdicts))
    return out


def _floor_of(cls: str, cond: str, verdicts: list[RungVerdict]) -> ClassFloor:
    idx = next((i for i, v in enumerate(verdicts) if v.status == "clears"), None)
    if idx is None:
        undecided = [v.stats.rung for v in verdicts if v.status == "undecided"]
        note = (f"no rung clears the target in one attempt yet; undecided: {', '.join(undecided)}" if undecided
                else "no rung on the ladder clears the target in one attempt")
        return ClassFloor(cls, cond, verdicts, None, "none", None, None, False, note)
    floor = verdicts[idx].stats.rung
    pending = [v.stats.rung for v in verdicts[:idx] if v.status != "below"]
    status = "provisional" if pending else "decided"
    eligible = [v for v in verdicts[idx:] if v.status != "below"]

    def pick(attr: str) -> str | None:
        priced = [v for v in eligible if getattr(v, attr) is not None]
        return min(priced, key=lambda v: getattr(v, attr)).stats.rung if priced else None

    rec, first = pick("cost_per_usable"), pick("first_time_cost_per_usable")
    note = f"floor {floor}" + (f" (provisional: {', '.join(pending)} undecided)" if pending else "")
    if rec and first and rec != first:
        note += f"; if results must be usable first time, use {first} instead of {rec}"
    return ClassFloor(cls, cond, verdicts, floor, status, rec, first, bool(rec and first and rec != first), note)


@dataclass
class FloorReport:
    """Every class's floors for one suite, with the settings they were decided under."""

    suite: str
    settings: FloorSettings
    classes: list[ClassFloor]
    runs: int
    unscored: int
    simulated_runs: int
    rung_order: list[str] = field(default_factory=list)
    plans: list[Any] = field(default_factory=list)  #: `advisor.plans.ClassPlan` per class and condition
    skipped: list[Any] = field(default_factory=list)  #: `advisor.skipped.SkippedClass`: suite classes without runs

    def get(self, task_class: str, condition: str) -> ClassFloor | None:
        """The floor of one class and condition, or None."""
        return next((c for c in self.classes if c.task_class == task_class and c.condition == condition), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the `floors.json` body and `advisor floors --json`): the plans are the
        recommendation, each class's floor its single-attempt rung (no retry-chain rung beside the plan)."""
        d = asdict(self)
        for cf in d["classes"]:
            cf.pop("recommended", None)
            cf.pop("first_time_changes", None)
            for v in cf["rungs"]:
                v["stats"]["interval"] = list(v["stats"]["interval"])
        return d


def analyse(rows: Sequence[dict[str, Any]], settings: FloorSettings, suite: str = "") -> FloorReport:
    """Floors from run rows (dicts with `RUN_FIELDS`), without a store: used by the adaptive prober."""
    cells = cell_stats(rows, settings)
    order = [c.rung for c in sorted({(c.rung_position, c.rung): c for c in cells}.values(),
                                    key=lambda c: c.rung_position)]
    return FloorReport(suite=suite, settings=settings, classes=decide(cells, settings), runs=len(rows),
                       unscored=sum(c.unscored for c in cells), simulated_runs=sum(c.simulated_runs for c in cells),
                       rung_order=list(dict.fromkeys(order)))


def suite_names(store) -> list[str]:
    """Names of the suites that have probe or imported runs in the store."""
    return store.suite_names(FLOOR_KINDS)


def resolve_suite(store, suite: str | None) -> str:
    """The suite to analyse: the one asked for, or the only one in the store (DataError otherwise)."""
    names = suite_names(store)
    if not names:
        raise DataError(f"{store.path}: the store has no probe or imported runs yet "
                        "(run `advisor probe` or `advisor import` first)")
    if suite is None:
        if len(names) > 1:
            raise DataError(f"{store.path}: the store holds several suites; choose one with --suite FILE or "
                            f"--suite-name NAME. Available: {', '.join(names)}.")
        suite = names[0]
    if suite not in names:
        raise DataError(f"{store.path}: no runs for suite {suite!r}.{did_you_mean(suite, names)}")
    _check_one_ladder(store, suite)
    return suite


def _check_one_ladder(store, suite: str) -> None:
    """Floors compare rungs of one ladder: a suite probed on two ladders (whose rung names may coincide, as the
    demo and the real Nemotron ladder's do) would mix their runs, so that is an error, not a silent blend."""
    ladders = store.ladder_names(suite, FLOOR_KINDS)
    if len(ladders) > 1:
        raise DataError(f"{store.path}: suite {suite!r} has runs on several ladders ({', '.join(ladders)}); their "
                        "rungs would mix in one floor. Keep one ladder per store file (advisor probe --store ...).")


def load_rows(store, suite: str, classes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The fixed-policy probe/imported runs of a suite (optionally some classes only) as dicts."""
    rows = store.floor_rows(suite, kinds=FLOOR_KINDS)
    if classes:
        known = sorted({r["task_class"] for r in rows})
        for c in classes:
            if c not in known:
                raise DataError(f"suite {suite!r} has no runs of class {c!r}.{did_you_mean(c, known)}")
        rows = [r for r in rows if r["task_class"] in set(classes)]
    return rows


def find_floors(store, suite: str | None = None, settings: FloorSettings | None = None,
                classes: Sequence[str] | None = None) -> FloorReport:
    """Floors of one suite in a store (the only suite when `suite` is None)."""
    settings = settings or FloorSettings()
    name = resolve_suite(store, suite)
    report = analyse(load_rows(store, name, classes), settings, suite=name)
    known = sorted({cf.task_class for cf in report.classes})
    report.plans = recommend(report, verifiers_from_store(store, name, settings, known))
    report.skipped = skipped_classes(store.suite_config(name), known, classes)
    return report


#: What the live column of `advisor floors` is, and why floors do not use it.
LIVE_NOTE = ("live acc = share of the routing service's verified live attempts on that rung its verifier accepted "
             "(live traffic, not a usable rate); the floor stays on probe runs: live attempts go only to the rungs "
             "the policy chose, on requests that are not the suite's tasks, and a verifier's accept is not the "
             "full score")


@dataclass(frozen=True)
class LiveAcceptance:
    """Verified live attempts of one class on one rung (routing service records), beside the probe's rates."""

    task_class: str
    rung: str
    attempts: int  #: verified attempts (no failover, no error)
    accepted: int  #: of which the verifier accepted
    decisions: int  #: requests they belong to
    simulated: int  #: attempts answered by SIMULATED stand-in rungs

    @property
    def accept_rate(self) -> float | None:
        """accepted / attempts."""
        return self.accepted / self.attempts if self.attempts else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the rate."""
        return {**asdict(self), "accept_rate": self.accept_rate}


def live_acceptance(store: LiveRecords, classes: Sequence[str] | None = None) -> list[LiveAcceptance]:
    """Per class and rung, the routing service's verified live attempts and how many were accepted."""
    return [LiveAcceptance(r["task_class"], r["rung"], r["attempts"], r["accepted"], r["decisions"], r["simulated"])
            for r in store.live_accept_counts(classes)]
