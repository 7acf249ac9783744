"""Verifiers: does a reply pass its class's checks (the suite's deterministic check types, or the judge)?

A reply is seen by the checks as a one-turn episode: the ``final`` target is its answer text (after
``FINAL ANSWER:`` when present) and ``calls`` the tool calls it holds, so ``regex``, ``json_schema``,
``json_equals`` and ``tool_call`` checks apply unchanged. A judge verifier asks the ladder's judge role with
the class's rubric (`advisor.checks.judge.TritonJudge`) and accepts at its threshold; its tokens are costed.
A verifier that cannot decide (the judge is down, its verdict does not parse) rejects, and says why.
Each kind is registered in `advisor.verifier.base.VERIFIERS` (``checks``, ``judge``, ``task_completion``: the
probe's verifier of an attempt, the task's own task-completion checks at the bar). The error rates the policy
uses for a verifier are measured on probe runs by `advisor.verifier.calibration`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from advisor.checks import score_episode
from advisor.checks.base import get_check
from advisor.checks.judge import JudgeError, TritonJudge
from advisor.errors import ConfigError
from advisor.records import Episode, ToolCall
from advisor.verifier.base import (VERIFIERS, ReplyVerifier, VerifiedText, Verdict, VerifierContext, VerifierKind,
                                   kind_of)

__all__ = ["ChecksVerifier", "JudgeReplyVerifier", "TaskCompletionVerifier", "VerifiedText", "Verdict",
           "build_verifier"]


#: Check types that judge a reply's tool calls; every other check type reads its final answer.
TOOL_STEP_CHECKS = frozenset({"tool_call"})


class ChecksVerifier:
    """Every configured check must pass. It judges tool-call steps only when one of its checks reads tool calls
    (`judges_tool_steps`); otherwise a reply that calls a tool is left to the step check."""

    def __init__(self, checks):
        self.checks = [(c, get_check(c.type)) for c in checks]
        self.judges_tool_steps = any(c.type in TOOL_STEP_CHECKS for c, _ in self.checks)

    async def verify(self, reply, request_text: str) -> Verdict:
        """Run each check on the reply as a one-turn episode."""
        episode = Episode(final=reply.final, stop_reason="final" if reply.final is not None else "max_turns",
                          calls=[ToolCall(name, args) for name, args in reply.calls])
        task = SimpleNamespace(instructions=request_text, id="live")
        for check, fn in self.checks:
            outcome = await fn(check, task, episode)
            if outcome.score is None or outcome.score < 1.0:
                return Verdict(False, f"{check.type}: {outcome.detail}")
        return Verdict(True, f"{len(self.checks)} check(s) passed")


class JudgeReplyVerifier:
    """The ladder's judge role grades the reply against a rubric (final answers only: a tool-call step is left
    to the step check)."""

    judges_tool_steps = False

    def __init__(self, config, judge):
        self.config = config
        self.judge = judge

    async def verify(self, reply, request_text: str) -> Verdict:
        """Ask the judge; reject (with the reason) when it fails or scores below the threshold."""
        episode = Episode(final=reply.final, stop_reason="final",
                          calls=[ToolCall(name, args) for name, args in reply.calls])
        criterion = SimpleNamespace(name="reply", description="The reply answers the request acceptably.",
                                    weight=100, check=SimpleNamespace(rubric=self.config.rubric))
        task = SimpleNamespace(instructions=request_text, id="live", instruction_following=[],
                               task_completion=[criterion])  # the judge prompt names the checklist and weight
        try:
            grade = await self.judge.grade(criterion, task, episode)
        except JudgeError as exc:
            return Verdict(False, f"judge could not grade: {exc}", getattr(exc, "cost_usd", 0.0), undecided=True)
        ok = grade.score >= self.config.threshold
        return Verdict(ok, f"judge score {grade.score:.2f} ({grade.reason})", grade.cost_usd)


def build_verifier(verifier_config, ladder, client_for) -> ReplyVerifier | None:
    """The verifier of one class config (None for `verifier: none`), built by its registered kind."""
    if verifier_config is None:
        return None
    return VERIFIERS.get(kind_of(verifier_config)).build(verifier_config, VerifierContext(ladder, client_for))


def _judge(config, ctx: VerifierContext) -> ReplyVerifier:
    judge_model = ctx.ladder.roles.judge if ctx.ladder is not None else None
    if judge_model is None:
        raise ConfigError("a class uses a judge verifier but "
                          + (f"ladder {ctx.ladder.name!r} has no roles.judge" if ctx.ladder is not None
                             else "no ladder was given (its roles.judge grades)"))
    judge = JudgeReplyVerifier(config.judge, TritonJudge(ctx.client_for(judge_model), judge_model))
    return _Both(ChecksVerifier(config.checks), judge) if config.checks else judge


class TaskCompletionVerifier:
    """The probe's verifier of an attempt: the task's task-completion checks reach the bar (they see the goal,
    not how the work was done); the verdict also says whether the full score made the attempt usable."""

    def __init__(self, task: Any, bar: float):
        self.task, self.bar = task, bar

    async def verify(self, reply: VerifiedText, request_text: str = "") -> Verdict:
        """Score the attempt's episode (`reply.episode`) with the task's checks."""
        try:
            card = await score_episode(self.task, reply.episode, None)
        except Exception as exc:  # noqa: BLE001 - a check that crashes cannot accept
            return Verdict(False, f"rejected: the checks failed to run ({type(exc).__name__}: {exc})", undecided=True)
        usable = None if card.overall is None else card.overall >= self.bar
        if card.tc_score is None:
            return Verdict(False, f"rejected: task-completion checks could not decide ({card.unscored_reason})",
                           undecided=True, usable=usable)
        ok = card.tc_score >= self.bar
        return Verdict(ok, f"{'accepted' if ok else 'rejected'}: task completion {card.tc_score:.0f} vs bar "
                       f"{self.bar:g}", usable=usable)


class _Both:
    """Checks first (cheap), then the judge."""

    def __init__(self, checks: ChecksVerifier, judge: JudgeReplyVerifier):
        self.checks, self.judge = checks, judge
        self.judges_tool_steps = checks.judges_tool_steps

    async def verify(self, reply, request_text: str) -> Verdict:
        first = await self.checks.verify(reply, request_text)
        if not first.accepted or (reply.final is None and reply.calls):
            return first  # a tool-call step: the judge grades answers only
        return await self.judge.verify(reply, request_text)


VERIFIERS.add("checks", VerifierKind(lambda config, ctx: ChecksVerifier(config.checks),
                                     "every configured check passes on the reply"))
VERIFIERS.add("judge", VerifierKind(_judge, "the ladder's judge role grades the reply (after the checks, if any)"))
VERIFIERS.add("task_completion", VerifierKind(
    lambda config, ctx: TaskCompletionVerifier(ctx.options["task"], float(ctx.options["bar"])),
    "the probe's: the task's own task-completion checks reach the bar"))
