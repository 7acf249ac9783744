"""Verifiers: does a reply pass its class's checks (the suite's deterministic check types, or the judge)?

A reply is seen by the checks as a one-turn episode: the ``final`` target is its answer text (after
``FINAL ANSWER:`` when present) and ``calls`` the tool calls it holds, so ``regex``, ``json_schema``,
``json_equals`` and ``tool_call`` checks apply unchanged. A judge verifier asks the ladder's judge role with
the class's rubric (`advisor.checks.judge.TritonJudge`) and accepts at its threshold; its tokens are costed.
A verifier that cannot decide (the judge is down, its verdict does not parse) rejects, and says why.
The error rates the policy uses for a verifier are measured on probe runs by `advisor.verifier.calibration`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from advisor.checks.base import get_check
from advisor.checks.judge import JudgeError, TritonJudge
from advisor.errors import ConfigError
from advisor.records import Episode, ToolCall


@dataclass
class VerifiedText:
    """What a verifier reads of a reply: its final answer (None for a tool call) and its tool calls (name,
    arguments). The service's `advisor.service.chat.Reply` carries both; a stored probe run is read into one."""

    final: str | None
    calls: list[tuple[str, dict]]


@dataclass
class Verdict:
    """What a verifier said about one reply."""

    accepted: bool
    detail: str
    cost_usd: float = 0.0  #: the judge's cost, when a judge verified
    undecided: bool = False  #: the verifier could not grade (it rejects; a measurement leaves it out)


class ChecksVerifier:
    """Every configured check must pass."""

    def __init__(self, checks):
        self.checks = [(c, get_check(c.type)) for c in checks]

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
    """The ladder's judge role grades the reply against a rubric."""

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


def build_verifier(verifier_config, ladder, client_for) -> Any | None:
    """The verifier object of one class config (None for `verifier: none`)."""
    if verifier_config is None:
        return None
    if verifier_config.judge is not None:
        judge_model = ladder.roles.judge
        if judge_model is None:
            raise ConfigError(f"a class uses a judge verifier but ladder {ladder.name!r} has no roles.judge")

        judge = JudgeReplyVerifier(verifier_config.judge, TritonJudge(client_for(judge_model), judge_model))
        if not verifier_config.checks:
            return judge
        return _Both(ChecksVerifier(verifier_config.checks), judge)
    return ChecksVerifier(verifier_config.checks)


class _Both:
    """Checks first (cheap), then the judge."""

    def __init__(self, checks: ChecksVerifier, judge: JudgeReplyVerifier):
        self.checks, self.judge = checks, judge

    async def verify(self, reply, request_text: str) -> Verdict:
        first = await self.checks.verify(reply, request_text)
        return first if not first.accepted else await self.judge.verify(reply, request_text)
