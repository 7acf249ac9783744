"""Probe planning before any GPU: runs, expected tokens and cost per rung, and a power analysis per class.

**Runs** are the full grid (`advisor.probe.plan.full_grid`): every task x rung x condition x replica; an
adaptive probe runs at most that many.

**Expected tokens** of one episode, a stated model (no measurement yet): ``T`` turns, the reference's steps
+ 1 when the task has one, else half its turn limit (at least 3); each call's prompt is the system prompt
(tool specs, the skill in the skill condition) plus the instructions plus the history so far, and each turn
adds ``REPLY_TOKENS`` of reply and ``OBSERVATION_TOKENS`` of observation. Text is counted at
``CHARS_PER_TOKEN`` characters per token. The episode is capped at its ``max_tokens`` limit. Cost is
tokens x the rung's price (`Model.attempt_cost`). The **judge** is apart: one call per judge-graded
criterion per run, whose prompt is about the episode's final context.

**Power analysis**, with the floor finder's Wilson interval (`advisor.floors.wilson_interval`) at the same
target and two-sided confidence: a (class, condition, rung) cell *clears* when the lower bound >= target.
Even when every run is usable, n runs give a lower bound of n / (n + z^2), so a cell needs at least
``n_min = ceil(z^2 t / (1 - t))`` scored runs to ever clear target t (11 for 0.8 at 90%: one task at 3
replicas cannot). `replicas_needed` turns that into replicas per task for the class's task count, both for
the best case (every run usable) and for a stated true usable rate (``target + margin``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from advisor.checks.base import needs_judge
from advisor.floors import wilson_interval, z_for
from advisor.probe.plan import full_grid

CHARS_PER_TOKEN = 4
REPLY_TOKENS = 150
OBSERVATION_TOKENS = 300
JUDGE_REPLY_TOKENS = 100
SYSTEM_TOKENS = 400  #: system prompt without the skill: instructions to the agent and the tool specs


def min_runs_to_clear(target: float, confidence: float, rate: float = 1.0, limit: int = 20_000) -> int | None:
    """The fewest scored runs n whose Wilson lower bound at an observed usable rate `rate` reaches `target`.

    With ``rate = 1`` (every run usable) this is ``ceil(z^2 t / (1 - t))``; None when `rate` <= target
    (such a cell never clears) or beyond `limit`.
    """
    if rate <= target:
        return None
    for n in range(1, limit + 1):
        if wilson_interval(round(rate * n), n, confidence)[0] >= target:
            return n
    return None


def replicas_needed(tasks: int, target: float, confidence: float, rate: float = 1.0) -> int | None:
    """Replicas per task for a class of `tasks` tasks to clear `target` at an observed rate `rate`."""
    n = min_runs_to_clear(target, confidence, rate)
    return None if n is None or tasks <= 0 else math.ceil(n / tasks)


@dataclass
class ClassPower:
    """Whether a class's cells can be decided at the planned replicas."""

    task_class: str
    condition: str
    tasks: int
    runs_per_cell: int  #: tasks x replicas: scored runs a (class, condition, rung) cell gets
    min_runs_to_clear: int | None  #: best case, every run usable
    replicas_best_case: int | None
    assumed_rate: float
    replicas_at_assumed_rate: int | None
    can_clear: bool  #: the planned replicas can clear the target at all (best case)


@dataclass
class RungPlan:
    """Runs, expected tokens and cost of one rung."""

    rung: str
    simulated: bool
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class ProbeBudget:
    """What a probe of a suite on a ladder would run and cost, and what it could decide."""

    suite: str
    ladder: str
    replicas: int
    target: float
    confidence: float
    z: float
    runs: int = 0
    rungs: list[RungPlan] = field(default_factory=list)
    judge: str | None = None
    judge_calls: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cost_usd: float | None = None  #: None when criteria need a judge the ladder does not have
    power: list[ClassPower] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  #: why runs would be unscored (see `cpu_path_problems`)
    assumptions: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


def _tokens(text: str | None) -> int:
    return math.ceil(len(text or "") / CHARS_PER_TOKEN)


def episode_tokens(task, limits, condition: str) -> tuple[int, int, int]:
    """(input tokens, output tokens, final context tokens) expected for one episode (module docstring)."""
    turns = len(task.reference.steps) + 1 if task.reference else max(3, int(limits.max_turns) // 2)
    turns = min(turns, int(limits.max_turns))
    base = SYSTEM_TOKENS + _tokens(task.instructions) + (_tokens(task.skill_text) if condition == "skill" else 0)
    step = REPLY_TOKENS + OBSERVATION_TOKENS
    tin = turns * base + step * turns * (turns - 1) // 2
    tout = turns * REPLY_TOKENS
    if tin + tout > limits.max_tokens:
        scale = limits.max_tokens / (tin + tout)
        tin, tout = int(tin * scale), int(tout * scale)
    return tin, tout, base + step * turns


def _chosen(suite, tasks) -> list:
    """The suite's tasks among the ids `tasks` (every task when None), in suite order."""
    wanted = None if tasks is None else set(tasks)
    return [t for t in suite.tasks if wanted is None or t.id in wanted]


def cpu_path_problems(suite, ladder, tasks=None) -> list[str]:
    """Reasons the planned runs would be unscored whatever the models do: a judge-graded criterion and no
    judge role (or a stand-in one); on a simulated ladder, tasks without a reference trajectory (the stand-ins can only replay
    references, so they give up on anything else)."""
    chosen = _chosen(suite, tasks)
    out = []
    judged = [t.id for t in chosen if any(needs_judge(c.check) for c in t.criteria())]
    if judged and ladder.roles.judge is None:
        out.append(f"{len(judged)} of {len(chosen)} task(s) have judge-graded criteria and ladder {ladder.name!r} has "
                   f"no judge role, so their runs are unscored (e.g. {', '.join(judged[:3])})")
    elif judged and ladder.roles.judge.simulated:
        out.append(f"{len(judged)} of {len(chosen)} task(s) have judge-graded criteria and the judge role of ladder "
                   f"{ladder.name!r} is a SIMULATED stand-in, which writes no verdict, so their runs are unscored "
                   f"(e.g. {', '.join(judged[:3])})")
    if ladder.simulated:
        blind = [t.id for t in chosen if t.reference is None and t.replay is None]  # a replay is live traffic
        if blind:
            out.append(f"{len(blind)} of {len(chosen)} task(s) have no reference trajectory, and the SIMULATED "
                       f"stand-ins of ladder {ladder.name!r} can only act on tasks with one: they would give up "
                       f"(e.g. {', '.join(blind[:3])})")
    return out


def make_plan(suite, ladder, replicas: int = 3, target: float = 0.8, confidence: float = 0.9,
              margin: float = 0.1, tasks=None, rungs=None) -> ProbeBudget:
    """The plan of probing `suite` on `ladder` (module docstring)."""
    specs = full_grid(suite, ladder, replicas, rungs=rungs, tasks=tasks)
    plan = ProbeBudget(suite.name, ladder.name, replicas, target, confidence, z_for(confidence), runs=len(specs),
                problems=cpu_path_problems(suite, ladder, tasks))
    by_rung = {r.name: RungPlan(r.name, r.simulated) for r in ladder.rungs if rungs is None or r.name in rungs}
    judge = ladder.roles.judge
    plan.judge = judge.name if judge else None
    for spec in specs:
        task, model = suite.task(spec.task_id), ladder.rung(spec.rung)
        tin, tout, context = episode_tokens(task, suite.limits_for(task), spec.condition)
        row = by_rung[model.name]
        row.runs += 1
        row.input_tokens += tin
        row.output_tokens += tout
        row.cost_usd += model.attempt_cost(tin, tout)
        n_judged = sum(needs_judge(c.check) for c in task.criteria())
        plan.judge_calls += n_judged
        plan.judge_input_tokens += n_judged * (context + _tokens(task.instructions) + 200)
        plan.judge_output_tokens += n_judged * JUDGE_REPLY_TOKENS
    plan.rungs = list(by_rung.values())
    if judge is not None:
        plan.judge_cost_usd = judge.attempt_cost(plan.judge_input_tokens, plan.judge_output_tokens)
    elif plan.judge_calls == 0:
        plan.judge_cost_usd = 0.0
    rate = min(0.99, target + margin)
    chosen = _chosen(suite, tasks)
    for cls in suite.classes:
        members = [t for t in chosen if t.task_class == cls.name]
        for condition in ("baseline", "skill"):
            n_tasks = sum(condition in t.conditions() for t in members)
            if not n_tasks:
                continue
            best = min_runs_to_clear(target, confidence)
            plan.power.append(ClassPower(
                cls.name, condition, n_tasks, n_tasks * replicas, best,
                replicas_needed(n_tasks, target, confidence), rate,
                replicas_needed(n_tasks, target, confidence, rate),
                best is not None and n_tasks * replicas >= best))
    plan.assumptions = (f"turns = reference steps + 1, else half the turn limit (>= 3); {REPLY_TOKENS} reply + "
                        f"{OBSERVATION_TOKENS} observation tokens a turn; {CHARS_PER_TOKEN} characters a token; "
                        f"power: Wilson interval at {confidence:.0%} two-sided, target {target:g}, assumed true "
                        f"usable rate {rate:g} for the second replica figure")
    return plan


def suite_warnings(suite, replicas: int = 3, target: float = 0.8, confidence: float = 0.9) -> list[str]:
    """What `suite validate` warns about: judge-only suites, classes with too few tasks to be decided at
    `replicas`, and tasks the SIMULATED stand-ins cannot act on (no reference trajectory)."""
    out = []
    judged = [needs_judge(c.check) for t in suite.tasks for c in t.criteria()]
    if judged and all(judged):
        out.append("every criterion is judge-graded: a probe needs a ladder with a judge role, and "
                   "`advisor judge agreement` has no deterministic check to measure the judge against")
    need = min_runs_to_clear(target, confidence)
    for cls in suite.classes:
        n = sum(t.task_class == cls.name for t in suite.tasks)
        if need is not None and n * replicas < need:
            out.append(f"class {cls.name!r} has {n} task(s): at {replicas} replicas a cell gets {n * replicas} "
                       f"scored runs, fewer than the {need} needed to clear {target:g} at {confidence:.0%}; "
                       f"it needs {replicas_needed(n, target, confidence)} replicas or more tasks (`advisor plan`)")
    blind = [t.id for t in suite.tasks if t.reference is None and t.replay is None]
    if blind:
        out.append(f"{len(blind)} task(s) have no reference trajectory, so the SIMULATED stand-ins cannot act on "
                   f"them (the probe refuses them on a simulated ladder): {', '.join(blind[:5])}"
                   + (" ..." if len(blind) > 5 else ""))
    return out
