"""Scores and money: the formulas every part of the advisor shares (design: "Scores and money").

- overall = (4 x IF + 3 x TC) / 7 on a 0-100 scale;
- usable when overall >= bar (default 75), near-zero when overall < 25;
- expected cost and success of a retry/escalation chain over rungs, with an optional imperfect verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

DEFAULT_BAR = 75.0
DEFAULT_NEAR_ZERO = 25.0


@dataclass(frozen=True)
class Thresholds:
    """The quality settings recorded with every result."""

    bar: float = DEFAULT_BAR  #: a run is usable when overall >= bar
    near_zero: float = DEFAULT_NEAR_ZERO  #: a run is near-zero when overall < near_zero

    def usable(self, overall: float | None) -> bool | None:
        """True/False, or None for an unscored run."""
        return None if overall is None else overall >= self.bar

    def is_near_zero(self, overall: float | None) -> bool | None:
        """True/False, or None for an unscored run."""
        return None if overall is None else overall < self.near_zero


def overall_score(if_score: float | None, tc_score: float | None) -> float | None:
    """(4 x IF + 3 x TC) / 7, or None when either part is unscored."""
    if if_score is None or tc_score is None:
        return None
    return (4.0 * if_score + 3.0 * tc_score) / 7.0


@dataclass(frozen=True)
class VerifierErrors:
    """A verifier's measured error rates. The perfect verifier accepts exactly the usable answers."""

    false_accept: float = 0.0  #: P(accept | not usable)
    false_reject: float = 0.0  #: P(reject | usable)

    def accept_rate(self, p: float) -> float:
        """P(accept) of one attempt whose usable probability is p."""
        return p * (1.0 - self.false_reject) + (1.0 - p) * self.false_accept


PERFECT = VerifierErrors()


@dataclass(frozen=True)
class Step:
    """One rung in an escalation chain: usable probability p, cost per attempt c, at most k attempts."""

    p: float
    cost: float
    k: int = 1
    name: str = ""


@dataclass(frozen=True)
class ChainOutcome:
    """Expected cost and quality of sending one request down a chain of rungs."""

    expected_cost: float  #: E[USD spent per request], retries and escalations included
    p_usable: float  #: P(the delivered answer is usable)
    expected_attempts: float  #: E[number of model calls]
    per_step_reach: list[float] = field(default_factory=list)  #: P(the chain reaches each step)

    @property
    def cost_per_usable(self) -> float:
        """E[cost] / P(usable): dollars per usable result (inf when nothing is ever usable)."""
        return self.expected_cost / self.p_usable if self.p_usable > 0 else float("inf")


def chain_outcome(steps: Sequence[Step], verifier: VerifierErrors | None = PERFECT) -> ChainOutcome:
    """Expected cost and usable probability of a retry/escalation chain.

    With a verifier, each rung is tried up to k times until the verifier accepts; after k rejections the
    request escalates to the next rung; after the last rung the last answer is delivered as it is. Per rung,
    with accept rate a: E[C_r] = c (1 - (1-a)^k) / a + (1-a)^k E[C_{r+1}], which for a perfect verifier is the
    design's formula with a = p. Without a verifier (``verifier=None``) there is no retry and no escalation:
    the first step is tried once, cost c, quality p.
    """
    if not steps:
        raise ValueError("an escalation chain needs at least one step")
    if verifier is None:
        first = steps[0]
        return ChainOutcome(first.cost, _clip(first.p), 1.0, [1.0])
    reach = 1.0
    cost = attempts = p_usable = 0.0
    reaches = []
    for i, step in enumerate(steps):
        p = _clip(step.p)
        k = max(1, int(step.k))
        a = verifier.accept_rate(p)
        reaches.append(reach)
        fail_all = (1.0 - a) ** k
        n_attempts = k if a <= 0 else (1.0 - fail_all) / a  # expected attempts until accept, at most k
        attempts += reach * n_attempts
        cost += reach * step.cost * n_attempts
        p_accept_usable = p * (1.0 - verifier.false_reject)
        if a > 0:
            p_usable += reach * (1.0 - fail_all) * (p_accept_usable / a)
        if i == len(steps) - 1 and fail_all > 0:
            # every attempt rejected: the last answer is delivered anyway; usable if it was a false reject
            p_rejected_usable = p * verifier.false_reject
            p_usable += reach * fail_all * (p_rejected_usable / (1.0 - a))
        reach *= fail_all
    return ChainOutcome(cost, min(1.0, p_usable), attempts, reaches)


def cost_per_usable(p: float, cost: float) -> float:
    """Dollars per usable result on one rung with a perfect verifier: c / p.

    It is the same for any number of tries k on one rung (fewer tries lower spend and successes alike);
    across rungs use `chain_outcome(...).cost_per_usable`.
    """
    if p <= 0:
        return float("inf")
    return cost / p


def points_per_dollar(mean_overall: float | None, cost: float) -> float | None:
    """Mean overall score per dollar of attempt cost. Show only beside cost per usable result."""
    if mean_overall is None or cost <= 0:
        return None
    return mean_overall / cost


def _clip(p: float) -> float:
    return min(1.0, max(0.0, float(p)))
