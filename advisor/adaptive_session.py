"""An adaptive probe as the CLI runs it (``advisor probe --adaptive``): the same inputs, server and runner as
`advisor.probe.session.run_probe`, but the runs are planned wave by wave by `advisor.adaptive.AdaptivePlan`.

It returns the same `ProbeRun` as `run_probe` (so the CLI renders both alike), with the adaptive result in
``ProbeRun.notes`` and `AdaptiveProbeRun.adaptive`. Runs already in the store for this suite and ladder count
as sampled (a rerun resumes); the `max_runs` and `max_cost` guards apply to the whole adaptive probe.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from advisor.adaptive import DEFAULT_BATCH, AdaptivePlan, AdaptiveResult, Unit, plan_for_suite, run_adaptive
from advisor.floors import RUN_FIELDS, FloorSettings


@dataclass
class AdaptiveProbeRun:
    """What `run_adaptive_probe` returns: the probe's run (as `run_probe` gives it) and the adaptive result."""

    probe: Any  #: advisor.probe.session.ProbeRun
    adaptive: AdaptiveResult


def run_adaptive_probe(config, settings: FloorSettings | None = None, batch: int = DEFAULT_BATCH,
                       on_start: Callable[[int, str], None] | None = None,
                       on_result: Callable[[Any], None] | None = None,
                       on_wave: Callable[[int, list[Unit]], None] | None = None) -> AdaptiveProbeRun:
    """Run an adaptive probe for a `ProbeConfig`; the store is written run by run as in `run_probe`."""
    from advisor.probe.session import ProbeRun, judge_note, load_inputs, serving
    from advisor.probe.summary import summarize
    from advisor.store import Store

    from advisor.tools.sandbox import require_sandbox

    ladder, suite, _, suite_path = load_inputs(config)
    require_sandbox(suite, config.allow_unsandboxed)  # refused before any server starts
    if config.tasks:
        wanted = set(config.tasks)
        suite = suite.model_copy(update={"tasks": [t for t in suite.tasks if t.id in wanted]})
    plan = plan_for_suite(suite, ladder, config.replicas, settings, batch, rungs=config.rungs)
    plan.cells = {k: v for k, v in plan.cells.items() if k[1] in config.conditions}
    with Store.open(config.store_path) as store, serving(config, ladder, suite_path) as (urls, served_by):
        if on_start:
            on_start(plan.full_grid_runs, served_by)
        outcome, result = asyncio.run(_drive(plan, ladder, suite, store, urls, config, on_result, on_wave))
        summary = summarize(store, suite_hash=suite.config_hash(), ladder_hash=ladder.config_hash(), ladder=ladder)
    notes = [result.summary()] + [n for n in (judge_note(ladder, suite),) if n]
    run = ProbeRun(outcome, summary, ladder, suite, result.runs_spent, served_by, notes=notes)
    return AdaptiveProbeRun(run, result)


async def _drive(plan: AdaptivePlan, ladder, suite, store, urls, config, on_result, on_wave):
    from advisor.probe.plan import RunSpec
    from advisor.probe.runner import ProbeOutcome, execute
    from advisor.probe.session import clients_for, judge_for
    ladder_hash, suite_hash = ladder.config_hash(), suite.config_hash()
    total = ProbeOutcome()

    def load_rows():
        # runs stored as backend_error are not samples: the planner schedules them again and execute() retries them
        return store.query(f"SELECT {', '.join(RUN_FIELDS)} FROM runs WHERE kind = 'probe' AND policy = 'fixed' "
                           "AND suite_hash = ? AND ladder_hash = ? AND stop_reason <> 'backend_error'",
                           [suite_hash, ladder_hash])

    async def execute_wave(units: list[Unit]) -> None:
        max_runs = None if config.max_runs is None else config.max_runs - total.count("done")
        max_cost = None if config.max_cost is None else config.max_cost - total.cost_usd
        if (max_runs is not None and max_runs <= 0) or (max_cost is not None and max_cost <= 0):
            total.stopped = total.stopped or ("max_runs" if max_runs is not None and max_runs <= 0 else "max_cost")
            raise _Stop
        specs = [RunSpec(u.task_id, u.rung, u.condition, u.replica) for u in units]
        out = await execute(specs, ladder=ladder, suite=suite, store=store,
                            client_for_rung=client_for_rung, judge=judge_for(ladder, suite, client_for_rung),
                            concurrency=config.concurrency, max_cost=max_cost, max_runs=max_runs,
                            workdir=config.workdir, allow_unsandboxed=config.allow_unsandboxed,
                            on_result=on_result)
        total.results.extend(out.results)
        total.cost_usd += out.cost_usd
        total.judge_cost_usd += out.judge_cost_usd
        total.elapsed_s += out.elapsed_s
        total.stopped = total.stopped or out.stopped

    async with clients_for(urls, config) as client_for_rung:
        try:
            result = await run_adaptive(plan, execute_wave, load_rows, suite.name, on_wave=on_wave)
        except _Stop:
            from advisor.adaptive import rows_in_plan
            from advisor.floors import analyse

            rows = rows_in_plan(plan, load_rows())
            result = AdaptiveResult(total.count("done"), plan.full_grid_runs, plan.waves,
                                    analyse(rows, plan.settings, suite.name), plan.states(rows))
    return total, result


class _Stop(Exception):
    """A probe guard (max_runs / max_cost) ended the adaptive probe early."""
