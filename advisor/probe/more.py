"""`advisor probe --more CLASS`: buy the scored runs a class's undecided answer asks for.

The answer's next line for an undecided class says "about N more scored runs on R1 and R2 would decide it"
(`advisor.plans`). An adaptive probe stops at its replicas (each task's runs per rung and condition), so a rerun
has nothing left to run. `--more CLASS` plans a full grid over that class's tasks, its condition and the rungs the
plan needs, with enough replicas for N more scored runs per rung; the runner skips what is stored. A class whose
answer does not wait on runs gets one line saying why (its plan is decided, or what would change it instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

from advisor.errors import ConfigError, did_you_mean


@dataclass
class MoreRuns:
    """What `--more` will run: the probe config for the extra runs, and one line per class."""

    config: Any | None  #: a `ProbeConfig` over the extra runs (None: nothing to buy)
    lines: list[str]


def more_runs(config, suite, floors, classes: Sequence[str], chosen: dict[str, str]) -> MoreRuns:
    """The runs that would decide each class in `classes` (a `ProbeConfig` for one full-grid probe over them);
    `chosen` maps each class with runs to the condition its answer shows (`advisor.report.decision`)."""
    wanted = None if not config.tasks else set(config.tasks)
    pool = [t for t in suite.tasks if wanted is None or t.id in wanted]  # --task narrows what --more may run
    known = sorted({t.task_class for t in suite.tasks})
    for cls in classes:
        if cls not in known:
            raise ConfigError(f"--more {cls}: suite {suite.name!r} has no class {cls!r}.{did_you_mean(cls, known)}")
    plans = {(p.task_class, p.condition): p for p in floors.plans} if floors is not None else {}
    tasks: list[str] = []
    rungs: list[str] = []
    conditions: set[str] = set()
    replicas = config.replicas
    lines = []
    for cls in dict.fromkeys(classes):
        if not any(t.task_class == cls for t in pool):
            lines.append(f"--more {cls}: nothing to run: --task selects none of its tasks")
            continue
        condition = chosen.get(cls)
        plan = plans.get((cls, condition)) if condition is not None else None
        if condition is None:  # no runs at all yet: the whole class, as a first probe would run it
            mine = [t.id for t in pool if t.task_class == cls]
            tasks += mine
            conditions |= {"baseline", "skill"}
            lines.append(f"--more {cls}: no runs yet: probing its {len(mine)} tasks on every rung")
            continue
        if plan is None or plan.next_kind != "more_runs" or not plan.runs_needed:
            why = (f"its plan {plan.plan.describe()} is decided" if plan is not None and plan.plan is not None
                   else (plan.next_step if plan is not None and plan.next_step else "its answer does not wait on runs"))
            lines.append(f"--more {cls}: nothing to buy: {why}")
            continue
        mine = [t.id for t in pool if t.task_class == cls and condition in t.conditions()]
        cf = floors.get(cls, condition)
        have = max((cf.verdict(r).stats.runs for r in plan.decide_rungs if cf.verdict(r) is not None), default=0)
        replicas = max(replicas, math.ceil((have + plan.runs_needed) / max(1, len(mine))))
        tasks += mine
        rungs += plan.decide_rungs
        conditions.add(condition)
        lines.append(f"--more {cls}: about {plan.runs_needed} more scored runs on {' and '.join(plan.decide_rungs)} "
                     f"({condition}): {len(mine)} tasks x {replicas} replicas, stored runs skipped")
    if not tasks:
        return MoreRuns(None, lines)
    every_rung = any(line.endswith("on every rung") for line in lines)
    return MoreRuns(replace(config, tasks=list(dict.fromkeys(tasks)), replicas=replicas,
                            rungs=None if every_rung else list(dict.fromkeys(rungs)),
                            conditions=tuple(c for c in ("baseline", "skill") if c in conditions)), lines)
