"""Adaptive probing: spend runs only where they change a floor decision.

The full grid runs every task x rung x condition x replica. The adaptive prober runs the same units, in
*waves*, and stops sampling a (class, condition, rung) cell once the floor finder's interval has decided it:

1. Rungs are probed small to large. In each wave, each (class, condition) samples one batch of its smallest
   rung that is neither decided nor implied nor exhausted.
2. A rung is decided when its Wilson interval clears the target (lower bound >= target) on at least
   `min_runs_for` scored runs (default: one batch and at least one run of every task of the class: a false
   "clears" puts the floor too low, so it must rest on the whole class), or is below it (upper bound <
   target) on at least one batch (a false "below" only costs money: the floor moves up a rung). The
   intervals are the floor finder's (`advisor.floors`).
3. Once a rung is below, every smaller rung is implied below and is not sampled again.
4. Once a rung clears, it is the floor. Larger rungs are implied to clear (a monotone ladder) and are sampled
   only ``cost_runs`` times each (default one batch): enough for their cost per attempt and usable rate to
   enter the cost-per-usable-result recommendation, not to decide them.
5. A cell never runs more than the full grid's budget (its tasks x replicas); a rung still undecided at that
   budget stays undecided, and probing moves on to the next rung.
6. Then the **plan** (`advisor.plans`: rungs, attempts per rung, the class's verifier): in a (class,
   condition) without a clearing plan, a rung that was found below on one batch (and converges: retries can
   help it) first gets one run of every task, smallest rung first, as a clear needs; then a plan that is
   undecided (its observed rate reaches the target, its interval does not yet) samples its rungs, one batch
   per wave, fewest runs first, until the plan clears, stops being undecided, or the rungs' budgets are spent.
   Where a plan clears but a plan cheaper per usable result is undecided, the cheaper one's rungs are sampled
   the same way (the recommendation may move to it). The plan's interval is the stated confidence's (the
   plan is re-evaluated after every batch; this stage is not Bonferroni-corrected).

Batches walk the tasks round-robin (every task at replica 0, then replica 1, ...), so early decisions rest
on the whole class rather than on its first tasks. Looking at a cell after every batch would make early
decisions too easy, so a decision taken before a cell's full budget uses a stricter interval: confidence
1 - (1 - confidence) / looks, with looks = ceil(budget / batch) (Bonferroni); at the full budget the
decision is the full grid's own. `AdaptivePlan` is pure decision logic; `advisor.probe.planners.AdaptivePlanner`
hands its waves to the probe (`advisor.probe.session.run_probe`); `simulate` runs it against a function and
`replay` replays the rule on a stored full grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from advisor.errors import DataError
from advisor.floors import FloorReport, FloorSettings, analyse, wilson_interval
from advisor.plans import VerifierUse, plan_cells

#: Runs per cell per wave (and the fewest scored runs a decision rests on).
DEFAULT_BATCH = 5


@dataclass(frozen=True)
class Unit:
    """One run of the grid: a task of a class, on a rung, under a condition, at a replica index."""

    task_class: str
    task_id: str
    condition: str
    rung: str
    replica: int


@dataclass
class GroupState:
    """Where one (class, condition) stands: per-rung status and why sampling stopped."""

    task_class: str
    condition: str
    statuses: dict[str, str] = field(default_factory=dict)  #: rung -> clears|below|undecided|implied ...|unsampled
    floor: str | None = None
    sampling: str | None = None  #: the rung sampled next, or None when done
    done_reason: str = ""
    for_plan: bool = False  #: `sampling` is a rung of an undecided plan (step 6)


class AdaptivePlan:
    """Pure decision logic of adaptive probing: which units to run in the next wave, given the runs so far.

    `cells` maps (class, condition) to the task ids that run under it (tasks without a skill run under
    baseline only); `rungs` is the ladder's rung names, smallest first.
    """

    def __init__(self, cells: dict[tuple[str, str], Sequence[str]], rungs: Sequence[str], replicas: int,
                 settings: FloorSettings | None = None, batch: int = DEFAULT_BATCH,
                 min_runs: int | None = None, cost_runs: int | None = None,
                 verifiers: dict[str, bool] | None = None):
        if replicas < 1 or batch < 1:
            raise DataError("adaptive probing needs replicas >= 1 and batch >= 1")
        if not cells or not rungs:
            raise DataError("adaptive probing needs at least one task and one rung")
        self.cells = {k: list(v) for k, v in cells.items()}
        self.rungs = list(rungs)
        self.replicas = replicas
        self.settings = settings or FloorSettings()
        self.batch = batch
        self.min_runs = min_runs  #: None: per cell, max(batch, tasks of the cell)
        self.cost_runs = batch if cost_runs is None else cost_runs
        self.verifiers = verifiers  #: class -> has a verifier (plans, step 6); None: no plan stage
        self.issued: set[Unit] = set()
        self.waves = 0

    # ---------------------------------------------------------------- budget
    def units(self, key: tuple[str, str], rung: str) -> list[Unit]:
        """Every unit of one cell in sampling order: all tasks at replica 0, then replica 1, ..."""
        cls, cond = key
        return [Unit(cls, t, cond, rung, rep) for rep in range(self.replicas) for t in self.cells[key]]

    @property
    def full_grid_runs(self) -> int:
        """Runs the full grid would spend."""
        return sum(len(t) for t in self.cells.values()) * len(self.rungs) * self.replicas

    def _remaining(self, key: tuple[str, str], rung: str) -> list[Unit]:
        return [u for u in self.units(key, rung) if u not in self.issued]

    def min_runs_for(self, key: tuple[str, str]) -> int:
        """Scored runs a cell needs before its interval may decide it."""
        return self.min_runs if self.min_runs is not None else max(self.batch, len(self.cells[key]))

    def interim_confidence(self, key: tuple[str, str], rung: str, runs: int) -> float:
        """Confidence of a decision taken after `runs` of a cell's budget: the stated confidence at the full
        budget (the full grid's own decision); before it, Bonferroni over the cell's possible looks
        (1 - (1 - confidence) / looks), so that stopping early is not an easier way to decide."""
        budget = len(self.units(key, rung))
        if runs >= budget:
            return self.settings.confidence
        looks = max(1, -(-budget // self.batch))
        return 1.0 - (1.0 - self.settings.confidence) / looks

    def _interim_status(self, key: tuple[str, str], rung: str, stats) -> str:
        if not stats.scored:
            return "undecided"
        lo, hi = wilson_interval(stats.usable, stats.scored, self.interim_confidence(key, rung, stats.runs))
        target = self.settings.target
        return "clears" if lo >= target else "below" if hi < target else "undecided"

    # ---------------------------------------------------------------- decisions
    def states(self, rows: Sequence[dict[str, Any]]) -> list[GroupState]:
        """Status of every (class, condition) and the rung it samples next."""
        report = analyse(rows, self.settings)
        out = []
        for key in sorted(self.cells):
            cf = report.get(*key)
            stats = {v.stats.rung: v for v in cf.rungs} if cf else {}
            st = GroupState(*key)
            status = {}
            for r in self.rungs:
                v = stats.get(r)
                if v is None:
                    status[r] = "unsampled"
                    continue
                v_status = self._interim_status(key, r, v.stats)
                if v_status == "clears" and v.stats.scored < self.min_runs_for(key):
                    status[r] = "undecided"
                elif v_status == "below" and v.stats.scored < (self.min_runs or self.batch):
                    status[r] = "undecided"
                else:
                    status[r] = v_status
            below = [i for i, r in enumerate(self.rungs) if status[r] == "below"]
            top_below = max(below) if below else -1
            floor_i = next((i for i, r in enumerate(self.rungs) if status[r] == "clears" and i > top_below), None)
            for i, r in enumerate(self.rungs):
                if i < top_below and status[r] != "below":
                    status[r] = "implied below"
                elif floor_i is not None and i > floor_i and status[r] != "clears":
                    status[r] = "implied clears"
            st.statuses = status
            st.floor = self.rungs[floor_i] if floor_i is not None else None
            st.sampling, st.done_reason = self._next_rung(key, status, floor_i, top_below)
            if st.sampling is None and cf is not None and self.verifiers is not None:
                self._plan_stage(st, key, cf)
            out.append(st)
        return out

    def _plan_stage(self, st: GroupState, key: tuple[str, str], cf) -> None:
        """Step 6: sample a rung of the group's undecided plan (the one with the fewest runs left to spend)."""
        s = self.settings
        use = VerifierUse(self.verifiers.get(key[0], True), s.false_accept, s.false_reject)
        cp = plan_cells(cf, use, s.target, s.confidence)
        if cp.plan is not None:  # a cheaper plan that may clear with more runs: sample its rungs
            rungs = [p.rung for p in cp.cheaper.steps] if cp.cheaper is not None else []
            self._sample_one_of(st, key, rungs)
            return
        thin = [v.stats.rung for v in cf.rungs if v.status == "below" and v.why_below != "does_not_converge"
                and v.stats.scored < self.min_runs_for(key) and self._remaining(key, v.stats.rung)]
        if use.present and thin:  # below on one batch: one run of every task before plans rule it out
            st.sampling, st.for_plan, st.done_reason = thin[0], True, ""
            return
        if cp.next_kind == "more_runs":
            self._sample_one_of(st, key, cp.decide_rungs)

    def _sample_one_of(self, st: GroupState, key: tuple[str, str], rungs: list[str]) -> None:
        """Sample the rung of `rungs` with the fewest runs that still has budget (none: leave `st` done)."""
        open_rungs = [r for r in rungs if r in self.rungs and self._remaining(key, r)]
        if open_rungs:
            st.sampling = min(open_rungs, key=lambda r: len(self.units(key, r)) - len(self._remaining(key, r)))
            st.for_plan, st.done_reason = True, ""

    def _next_rung(self, key, status, floor_i, top_below) -> tuple[str | None, str]:
        if floor_i is None:
            for i, r in enumerate(self.rungs):
                if i <= top_below:
                    continue
                if status[r] in ("undecided", "unsampled") and self._remaining(key, r):
                    return r, ""
            return None, "no rung cleared the target within the budget"
        for r in self.rungs[floor_i + 1:]:
            if len(self.units(key, r)) - len(self._remaining(key, r)) < self.cost_runs and self._remaining(key, r):
                return r, ""
        return None, f"floor {self.rungs[floor_i]} decided; larger rungs sampled for cost"

    def next_wave(self, rows: Sequence[dict[str, Any]]) -> list[Unit]:
        """The units to run next (empty when probing is done); marks them issued."""
        wave: list[Unit] = []
        for st in self.states(rows):
            if st.sampling is None:
                continue
            key = (st.task_class, st.condition)
            remaining = self._remaining(key, st.sampling)
            n = self.batch
            if st.floor is not None and not st.for_plan:  # above the floor: sample for cost only
                done = len(self.units(key, st.sampling)) - len(remaining)
                n = min(n, self.cost_runs - done)
            wave.extend(remaining[:max(1, n)])
        self.issued.update(wave)
        if wave:
            self.waves += 1
        return wave


@dataclass
class AdaptiveResult:
    """What adaptive probing spent and decided."""

    runs_spent: int
    full_grid_runs: int
    waves: int
    floors: FloorReport
    groups: list[GroupState]
    stored: int = 0  #: runs of the plan's cells already stored before this probe (a rerun resumes from them)

    @property
    def saved_share(self) -> float:
        """Share of the full grid's runs not spent."""
        return 1.0 - self.runs_spent / self.full_grid_runs if self.full_grid_runs else 0.0

    def summary(self) -> str:
        """One line for the CLI (a rerun that ran nothing says that the stored runs already decide it)."""
        if not self.runs_spent:
            return (f"adaptive probing: nothing new to run: the {self.stored} stored runs already take every cell "
                    f"as far as {self.full_grid_runs} runs of the full grid allow (more runs for a class: "
                    "`advisor probe --more CLASS`)")
        return (f"adaptive probing: {self.runs_spent} runs in {self.waves} waves vs {self.full_grid_runs} for the "
                f"full grid ({self.runs_spent / max(1, self.full_grid_runs):.0%}; saved {self.saved_share:.0%})")


def plan_for_suite(suite, ladder, replicas: int, settings: FloorSettings | None = None,
                   batch: int = DEFAULT_BATCH,
                   classes: Iterable[str] | None = None, rungs: Iterable[str] | None = None,
                   **kwargs: Any) -> AdaptivePlan:
    """An `AdaptivePlan` over a suite's tasks (both conditions for tasks with a skill) and a ladder's rungs."""
    wanted = set(classes) if classes else None
    cells: dict[tuple[str, str], list[str]] = {}
    for task in suite.tasks:
        if wanted is not None and task.task_class not in wanted:
            continue
        for cond in task.conditions():
            cells.setdefault((task.task_class, cond), []).append(task.id)
    names = [r.name for r in ladder.rungs]
    if rungs:
        names = [n for n in names if n in set(rungs)]
    kwargs.setdefault("verifiers", {c.name: c.verifier for c in suite.classes})
    return AdaptivePlan(cells, names, replicas, settings, batch, **kwargs)


def simulate(plan: AdaptivePlan, outcome: Callable[[Unit], dict[str, Any]], max_waves: int = 1000) -> AdaptiveResult:
    """Run a plan synchronously against a function giving each unit's run row (tests and what-if studies)."""
    rows: list[dict[str, Any]] = []
    for _ in range(max_waves):
        wave = plan.next_wave(rows)
        if not wave:
            break
        rows.extend(outcome(u) for u in wave)
    return AdaptiveResult(len(rows), plan.full_grid_runs, plan.waves, analyse(rows, plan.settings),
                          plan.states(rows))


def replay(rows: Sequence[dict[str, Any]], replicas: int, settings: FloorSettings | None = None,
           batch: int = DEFAULT_BATCH,
           **kwargs: Any) -> AdaptiveResult:
    """What adaptive probing would have spent and decided on a full grid already stored (`rows`).

    Each unit's outcome is the stored run of the same (class, task, condition, rung, replica), so the
    adaptive floors can be compared with the full grid's on the same data.
    """
    by_unit = {Unit(r["task_class"], r["task_id"], r["condition"], r["rung"], r["replica"]): r for r in rows}
    cells: dict[tuple[str, str], list[str]] = {}
    for u in by_unit:
        tasks = cells.setdefault((u.task_class, u.condition), [])
        if u.task_id not in tasks:
            tasks.append(u.task_id)
    for tasks in cells.values():
        tasks.sort()
    rungs = [r for _, r in sorted({(row["rung_position"], row["rung"]) for row in rows})]
    plan = AdaptivePlan(cells, rungs, replicas, settings, batch, **kwargs)
    missing = [u for key in cells for r in rungs for u in plan.units(key, r) if u not in by_unit]
    if missing:
        raise DataError(f"replay needs the full grid: {len(missing)} runs are missing (e.g. {missing[0]})")
    return simulate(plan, lambda u: by_unit[u])


def rows_in_plan(plan: AdaptivePlan, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the plan's cells and rungs only; units already stored count as issued (resume)."""
    keep = []
    rungs = set(plan.rungs)
    for r in rows:
        key = (r["task_class"], r["condition"])
        if key in plan.cells and r["rung"] in rungs and r["replica"] < plan.replicas:
            keep.append(r)
            plan.issued.add(Unit(r["task_class"], r["task_id"], r["condition"], r["rung"], r["replica"]))
    return keep
