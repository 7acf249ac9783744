"""How a probe chooses its runs: a planner hands out waves of `RunSpec`s until it has nothing left to run.

`advisor.probe.session.run_probe(config, planner)` drives any planner through `run_waves`:

- `FullGridPlanner`: one wave, the whole grid (`advisor.probe.plan.full_grid`); the runner skips stored runs
  and retries stored backend errors.
- `AdaptivePlanner`: waves from `advisor.probe.adaptive.AdaptivePlan`, rungs small to large, each cell sampled
  until its interval decides it. Runs already stored count as sampled (a rerun resumes); every run stored as
  backend_error is retried in the first wave of a rerun, so one rerun against a healthy server leaves none.

A planner sees the stored probe runs of its suite and ladder as floor-finder rows
(`advisor.records.FLOOR_COLUMNS`, backend errors included) before every wave.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, Sequence

from advisor.floors import analyse
from advisor.probe.adaptive import DEFAULT_BATCH, AdaptivePlan, AdaptiveResult, Unit, plan_for_suite, rows_in_plan
from advisor.probe.plan import RunSpec, full_grid
from advisor.records import StopReason

Rows = Sequence[dict[str, Any]]


class Planner(Protocol):
    """What `run_probe` needs from a planner."""

    def start(self, suite: Any, ladder: Any, config: Any) -> int:
        """Prepare for one probe of `suite` on `ladder` (a `ProbeConfig`); return the runs of its full grid."""

    def already_stored(self, rows: Rows) -> int:
        """How many of the planned runs are stored already (backend errors not counted)."""

    def next_wave(self, rows: Rows) -> list[RunSpec]:
        """The runs to start next, given the runs stored so far; empty when the probe is done."""

    def finish(self, rows: Rows, spent: int) -> Any:
        """The planner's result once the waves are over (`spent`: runs this probe made)."""

    def notes(self, result: Any) -> list[str]:
        """Lines for the CLI about the result."""


def _unit_of(row: dict[str, Any]) -> tuple:
    return row["task_id"], row["rung"], row["condition"], row["replica"]


def _ok(rows: Rows) -> list[dict[str, Any]]:
    return [r for r in rows if r["stop_reason"] != StopReason.BACKEND_ERROR]


class FullGridPlanner:
    """Every task x rung x condition x replica in one wave."""

    def __init__(self) -> None:
        self.specs: list[RunSpec] = []
        self._given = False

    def start(self, suite: Any, ladder: Any, config: Any) -> int:
        """Plan the full grid of the config's replicas, conditions, rungs and tasks."""
        self.specs = full_grid(suite, ladder, config.replicas, config.conditions, config.rungs, config.tasks,
                               policies=getattr(config, "policies", ("rung",)))
        self._given = False
        return len(self.specs)

    def already_stored(self, rows: Rows) -> int:
        """Planned runs already stored (not as backend errors)."""
        stored = {_unit_of(r) for r in _ok(rows)}
        return sum((s.task_id, s.rung, s.condition, s.replica) in stored for s in self.specs)

    def next_wave(self, rows: Rows) -> list[RunSpec]:
        """The grid's runs not stored yet (a stored backend error is run again) the first time, then nothing."""
        if self._given:
            return []
        self._given = True
        stored = {_unit_of(r) for r in _ok(rows)}
        return [s for s in self.specs if s.policy != "fixed"  # a policy run: `execute` skips it when stored
                or (s.task_id, s.rung, s.condition, s.replica) not in stored]

    def finish(self, rows: Rows, spent: int) -> None:
        """A full grid has no result of its own (the summary is the store's)."""
        return None

    def notes(self, result: Any) -> list[str]:
        """No notes."""
        return []


class AdaptivePlanner:
    """Adaptive waves (`AdaptivePlan`), built for the probed suite and ladder at `start` or given as `plan`."""

    def __init__(self, settings: Any = None, batch: int = DEFAULT_BATCH, plan: AdaptivePlan | None = None):
        self.settings = settings
        self.batch = batch
        self.plan = plan
        self._retried = False

    def start(self, suite: Any, ladder: Any, config: Any) -> int:
        """Build the plan over the config's tasks, rungs, conditions and replicas; return the full grid's runs."""
        if config.tasks:
            wanted = set(config.tasks)
            suite = suite.model_copy(update={"tasks": [t for t in suite.tasks if t.id in wanted]})
        plan = plan_for_suite(suite, ladder, config.replicas, self.settings, self.batch, rungs=config.rungs)
        plan.cells = {k: v for k, v in plan.cells.items() if k[1] in config.conditions}
        self.plan = plan
        self._retried = False
        return plan.full_grid_runs

    def _in_plan(self, rows: Rows) -> list[dict[str, Any]]:
        rungs = set(self.plan.rungs)
        return [r for r in rows if (r["task_class"], r["condition"]) in self.plan.cells and r["rung"] in rungs
                and r["replica"] < self.plan.replicas]

    def already_stored(self, rows: Rows) -> int:
        """Runs of the plan's cells already stored (not as backend errors)."""
        return len(self._in_plan(_ok(rows)))

    def next_wave(self, rows: Rows) -> list[RunSpec]:
        """The plan's next wave; the first wave also retries every stored backend error of the plan."""
        retry: list[Unit] = []
        if not self._retried:
            self._retried = True
            retry = [Unit(r["task_class"], r["task_id"], r["condition"], r["rung"], r["replica"])
                     for r in self._in_plan(rows) if r["stop_reason"] == StopReason.BACKEND_ERROR]
        wave = self.plan.next_wave(rows_in_plan(self.plan, _ok(rows)))
        if retry:
            self.plan.issued.update(retry)
            wave = retry + [u for u in wave if u not in set(retry)]
            if len(wave) == len(retry):
                self.plan.waves += 1
        return [RunSpec(u.task_id, u.rung, u.condition, u.replica) for u in wave]

    def finish(self, rows: Rows, spent: int) -> AdaptiveResult:
        """What adaptive probing spent and decided, on the runs stored now."""
        kept = rows_in_plan(self.plan, _ok(rows))
        return AdaptiveResult(spent, self.plan.full_grid_runs, self.plan.waves,
                              analyse(kept, self.plan.settings, kept[0]["suite_name"] if kept else ""),
                              self.plan.states(kept), stored=len(kept) - spent)

    def notes(self, result: AdaptiveResult) -> list[str]:
        """The adaptive summary line."""
        return [result.summary()]


async def run_waves(planner: Any, execute_wave: Callable[[list[RunSpec]], Awaitable[Any]],
                    load_rows: Callable[[], Rows],
                    on_wave: Callable[[int, list[RunSpec]], None] | None = None, max_waves: int = 10_000,
                    first: list[RunSpec] | None = None) -> Any:
    """Drive a (started) planner: per wave, ask it for runs, run them, reload the stored rows; `planner.finish`.
    `first`: the first wave, when the caller asked the planner for it already.

    `execute_wave(specs)` runs and stores the specs; it returns None, or a `ProbeOutcome` whose ``stopped``
    (a guard or a dead server) ends the waves and whose done runs are what the wave spent.
    """
    rows = list(load_rows())
    spent = 0
    for n in range(1, max_waves + 1):
        wave = first if n == 1 and first is not None else planner.next_wave(rows)
        if not wave:
            break
        if on_wave:
            on_wave(n, wave)
        out = await execute_wave(wave)
        spent += len(wave) if out is None else out.count("done")
        rows = list(load_rows())
        if out is not None and out.stopped:
            break
    return planner.finish(rows, spent)
