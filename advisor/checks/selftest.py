"""Self-test of a suite's checks: replay each task's reference trajectory through a real `Environment`
and score it. The reference `final` must score 100/100; `final_sloppy` must keep TC and lose IF;
`final_wrong` must lose TC. Used by `advisor suite validate --selftest` and the example-suite tests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from advisor.checks.scoring import Scorecard, score_episode
from advisor.records import Episode
from advisor.tools import Environment


async def replay(task, root: Path, variant: str = "final", how_steps: bool = True) -> Scorecard:
    """Replay the reference steps (all, or only those not marked ``how`` when `how_steps` is false) and
    score the episode with the reference answer of `variant` (final | final_sloppy | final_wrong)."""
    ref = task.reference
    if ref is None:
        raise ValueError(f"task {task.id} has no reference trajectory")
    env = Environment.create(task, root)
    try:
        calls = []
        for step in ref.steps:
            if step.how and not how_steps:
                continue
            calls.append(await env.call(step.tool, dict(step.arguments)))
        episode = Episode(final=getattr(ref, variant), stop_reason="final", calls=calls, workspace=env.workspace,
                          api_log=env.api_log)
        return await score_episode(task, episode)
    finally:
        env.close()


@dataclass
class SelfTestResult:
    """The outcome of the self-test of one task."""

    task_id: str
    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when the reference behaves as it must."""
        return not self.problems


def _fmt(card: Scorecard) -> str:
    if card.unscored_reason:
        return f"unscored ({card.unscored_reason})"
    failed = [f"{c.checklist}/{c.criterion}: {c.detail}" for c in card.criteria if c.score != 1.0]
    return f"IF {card.if_score:.0f} TC {card.tc_score:.0f}" + (f" [{'; '.join(failed)}]" if failed else "")


async def selftest_task(task, root: Path | None = None) -> SelfTestResult:
    """Check that the task's reference scores 100/100 and its sloppy/wrong variants lose IF/TC as designed."""
    if task.reference is None:
        return SelfTestResult(task.id, ["no reference trajectory"])
    problems = []
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        tmp = Path(tmp)
        card = await replay(task, tmp)
        if card.if_score != 100 or card.tc_score != 100:
            problems.append(f"reference final scores {_fmt(card)}, not IF 100 TC 100")
        if task.reference.final_sloppy is not None:
            card = await replay(task, tmp, "final_sloppy", how_steps=False)
            if not (card.tc_score == 100 and card.if_score is not None and card.if_score < 100):
                problems.append(f"final_sloppy (without how steps) scores {_fmt(card)}; want IF < 100, TC 100")
        if task.reference.final_wrong is not None:
            card = await replay(task, tmp, "final_wrong")
            if not (card.tc_score is not None and card.tc_score < 100):
                problems.append(f"final_wrong scores {_fmt(card)}; want TC < 100")
    return SelfTestResult(task.id, problems)
