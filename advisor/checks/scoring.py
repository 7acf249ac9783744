"""Scoring one episode: every criterion of both checklists, IF and TC as weighted sums, overall.

IF and TC are the weighted sums (0-100) of the instruction-following and task-completion checklists;
overall = `advisor.scores.overall_score`. A run that could not be scored is UNSCORED (scores None plus a
reason), never 0: the backend failed (``stop_reason == "backend_error"``), a judge criterion has no judge,
a judge failed, or a check could not be evaluated. Runs that ended by max_turns, stuck, invalid_output and
so on are scored: they simply fail the checks they fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.checks.base import CheckContext, CheckError, CheckOutcome, get_check
from advisor.checks.judge import Judge
from advisor.records import UNSCORABLE_STOPS, CriterionResult
from advisor.scores import overall_score


@dataclass
class Scorecard:
    """The scores of one episode, per criterion and in total, plus what grading cost (the judge's tokens)."""

    if_score: float | None
    tc_score: float | None
    overall: float | None
    unscored_reason: str | None
    scenario_score: float | None = None  #: the source's own weighted score, 0-100 (imported scenarios)
    criteria: list[CriterionResult] = field(default_factory=list)
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cost_usd: float = 0.0

    @property
    def scored(self) -> bool:
        """True when the run has scores."""
        return self.unscored_reason is None


async def _grade(criterion, task, episode, judge: Judge | None) -> CheckOutcome:
    check = criterion.check
    try:
        return await get_check(check.type)(check, task, episode, CheckContext(criterion, judge))
    except CheckError as exc:
        return CheckOutcome(None, str(exc))


async def score_episode(task, episode, judge: Judge | None = None) -> Scorecard:
    """Grade every criterion of `task` on `episode` and combine them into IF, TC and overall."""
    card = Scorecard(None, None, None, None)
    if episode.stop_reason in UNSCORABLE_STOPS:
        card.unscored_reason = f"{episode.stop_reason}: {episode.error or 'the model backend failed'}"
        return card
    totals: dict[str, float] = {}
    problems: list[str] = []
    for checklist, criteria in (("if", task.instruction_following), ("tc", task.task_completion)):
        total = 0.0
        for criterion in criteria:
            outcome = await _grade(criterion, task, episode, judge)
            card.judge_input_tokens += outcome.input_tokens
            card.judge_output_tokens += outcome.output_tokens
            card.judge_cost_usd += outcome.cost_usd
            card.criteria.append(CriterionResult(checklist, criterion.name, criterion.weight, outcome.score,
                                                 outcome.detail))
            if outcome.score is None:
                problems.append(f"{checklist}/{criterion.name}: {outcome.detail}")
            else:
                total += criterion.weight * outcome.score
        totals[checklist] = total
    if problems:
        card.unscored_reason = "could not grade " + "; ".join(problems)
        return card
    card.if_score, card.tc_score = totals["if"], totals["tc"]
    card.overall = overall_score(card.if_score, card.tc_score)
    card.scenario_score = scenario_score(task, card.criteria)
    return card


def scenario_score(task, results) -> float | None:
    """100 x sum(original weight x earned fraction) / sum(original weights) over the criteria that carry a
    source weight; None when the task has none (criteria the importer added carry none and are left out)."""
    weights = {(side, c.name): c.original_weight for side, crits in (("if", task.instruction_following),
                                                                     ("tc", task.task_completion))
               for c in crits if c.original_weight is not None}
    if not weights:
        return None
    earned = sum(weights[(r.checklist, r.criterion)] * r.score for r in results
                 if (r.checklist, r.criterion) in weights and r.score is not None)
    return 100.0 * earned / sum(weights.values())
