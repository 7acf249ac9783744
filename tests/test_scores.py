"""The money and score formulas, on hand-checked numbers."""

import math

import pytest

from advisor.scores import (PERFECT, Step, Thresholds, VerifierErrors, chain_outcome, cost_per_usable, overall_score,
                            points_per_dollar)


def test_overall_weights_if_four_to_three():
    assert overall_score(100, 0) == pytest.approx(400 / 7)
    assert overall_score(0, 100) == pytest.approx(300 / 7)
    assert overall_score(49.2, 69.3) == pytest.approx((4 * 49.2 + 3 * 69.3) / 7)
    assert overall_score(None, 50) is None


def test_thresholds_are_settings_and_unscored_stays_none():
    t = Thresholds(bar=60, near_zero=10)
    assert t.usable(60) is True and t.usable(59.9) is False
    assert t.is_near_zero(9.9) is True and t.is_near_zero(10) is False
    assert t.usable(None) is None and t.is_near_zero(None) is None


def test_single_rung_k_retries_matches_design_formula():
    p, c, k = 0.3, 2.0, 3
    out = chain_outcome([Step(p, c, k)])
    assert out.expected_cost == pytest.approx(c * (1 - (1 - p) ** k) / p)
    assert out.p_usable == pytest.approx(1 - (1 - p) ** k)
    assert out.cost_per_usable == pytest.approx(c / p) == pytest.approx(cost_per_usable(p, c))


def test_escalation_chain_hand_checked():
    # rung 1: p=.5, c=1, k=2 -> E = 1.5, fail both = .25 ; rung 2: p=.9, c=4, k=1
    out = chain_outcome([Step(0.5, 1.0, 2), Step(0.9, 4.0, 1)])
    assert out.expected_cost == pytest.approx(1.5 + 0.25 * 4.0)
    assert out.p_usable == pytest.approx(1 - 0.25 * 0.1)
    assert out.per_step_reach == pytest.approx([1.0, 0.25])
    assert out.expected_attempts == pytest.approx(1.5 + 0.25)


def test_no_verifier_means_one_shot():
    out = chain_outcome([Step(0.4, 3.0, 5), Step(0.9, 10.0)], verifier=None)
    assert (out.expected_cost, out.p_usable, out.expected_attempts) == (3.0, 0.4, 1.0)


def test_imperfect_verifier_false_accepts_lower_quality_and_cost():
    perfect = chain_outcome([Step(0.5, 1.0, 3)], PERFECT)
    leaky = chain_outcome([Step(0.5, 1.0, 3)], VerifierErrors(false_accept=0.2, false_reject=0.0))
    a = 0.5 + 0.5 * 0.2
    assert leaky.expected_cost == pytest.approx((1 - (1 - a) ** 3) / a)
    # accepted answers are usable with probability .5 / .6
    assert leaky.p_usable == pytest.approx((1 - (1 - a) ** 3) * 0.5 / a)
    assert leaky.p_usable < perfect.p_usable and leaky.expected_cost < perfect.expected_cost


def test_false_rejects_deliver_last_answer_anyway():
    out = chain_outcome([Step(1.0, 1.0, 2)], VerifierErrors(false_reject=0.5))
    # accept rate .5: accepted-usable (1-.25), plus both rejected but the last was usable anyway (.25)
    assert out.p_usable == pytest.approx(1.0)
    assert out.expected_cost == pytest.approx(1.5)


def test_zero_probability_costs_every_attempt():
    out = chain_outcome([Step(0.0, 1.0, 3), Step(1.0, 5.0)])
    assert out.expected_cost == pytest.approx(3 + 5)
    assert out.p_usable == pytest.approx(1.0)
    assert math.isinf(chain_outcome([Step(0.0, 1.0, 2)]).cost_per_usable)


def test_points_per_dollar_needs_cost():
    assert points_per_dollar(50, 0.05) == pytest.approx(1000)
    assert points_per_dollar(None, 1) is None and points_per_dollar(50, 0) is None


def test_empty_chain_is_an_error():
    with pytest.raises(ValueError):
        chain_outcome([])
