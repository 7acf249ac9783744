"""The routing policy's maths on hand-checked cases: single shot, escalation, k retries, verifier errors,
preferences; and the vectorised batch path agreeing with the one-request path."""

import numpy as np
import pytest

from advisor.errors import RouterError
from advisor.router.routing.policies import decide_one as decide
from advisor.router.routing.rule import (PolicyConfig, Preferences, RungFacts, candidate_table, chain_outcome_batch,
                                         chosen_chains, select)
from advisor.scores import Step, VerifierErrors, chain_outcome

RUNGS = [RungFacts("small", self_hosted=True, latency_s=0.5), RungFacts("large", self_hosted=False, latency_s=3.0)]
P, C = [0.5, 0.9], [1.0, 4.0]


def cand(decision, chain):
    return next(c for c in decision.candidates if c["chain"] == chain)


def test_single_shot_picks_lowest_cost_per_usable():
    d = decide(P, C, RUNGS, PolicyConfig(mode="single"))
    # small: 1 / 0.5 = 2.0; large: 4 / 0.9 = 4.44
    assert d.rung == "small" and d.chain == ["small"]
    assert d.expected_cost == pytest.approx(1.0) and d.p_usable == pytest.approx(0.5)
    assert cand(d, ["large"])["cost_per_usable_usd"] == pytest.approx(4 / 0.9)
    assert "single-shot" in d.rule


def test_single_shot_target_and_fallback():
    d = decide(P, C, RUNGS, PolicyConfig(mode="single", target=0.8))
    assert d.rung == "large"
    d = decide(P, C, RUNGS, PolicyConfig(mode="single", target=0.95))
    assert d.rung == "large" and "no candidate" in d.rule


def test_escalation_perfect_verifier():
    d = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k=1))
    full = cand(d, ["small", "large"])
    # E[cost] = 1 + 0.5 * 4 = 3; P(usable) = 0.5 + 0.5 * 0.9 = 0.95 -> 3.16 per usable, beats large alone 4.44
    assert full["expected_cost_usd"] == pytest.approx(3.0)
    assert full["p_usable"] == pytest.approx(0.95)
    assert d.chain == ["small", "large"] and len(d.candidates) == 2
    # allowed to stop early: small alone, 1 / 0.5 = 2 per usable, wins unless the target needs escalation
    early = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k=1, stop_early=True))
    assert early.chain == ["small"] and len(early.candidates) == 3
    d = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k=1, target=0.9, stop_early=True))
    assert d.chain == ["small", "large"] and d.expected_cost == pytest.approx(3.0)


def test_k_retries():
    d = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k=2, stop_early=True))
    full = cand(d, ["small", "large"])
    # small twice: 1 * (1 - 0.25) / 0.5 = 1.5; reach large 0.25: 0.25 * 4 * (1 - 0.01) / 0.9 = 1.1 ; total 2.6
    assert full["expected_cost_usd"] == pytest.approx(1.5 + 0.25 * 4 * 0.99 / 0.9)
    assert full["p_usable"] == pytest.approx(1 - 0.25 * 0.01)
    assert cand(d, ["small"])["p_usable"] == pytest.approx(0.75)
    per_rung = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k={"small": 3}, stop_early=True))
    assert cand(per_rung, ["small"])["p_usable"] == pytest.approx(1 - 0.5 ** 3)


def test_verifier_errors():
    v = VerifierErrors(false_accept=0.1, false_reject=0.2)
    d = decide(P, C, RUNGS, PolicyConfig(mode="escalate", k=1, verifier=v, stop_early=True))
    # accept rate of small: 0.5 * 0.8 + 0.5 * 0.1 = 0.45 -> reach large 0.55
    full = cand(d, ["small", "large"])
    assert full["expected_cost_usd"] == pytest.approx(1 + 0.55 * 4)
    # accepted-and-usable on small 0.4, then on large everything delivered: usable 0.9
    assert full["p_usable"] == pytest.approx(0.4 + 0.55 * 0.9)
    # alone: the rejected answer is still delivered, so quality stays p
    assert cand(d, ["small"])["p_usable"] == pytest.approx(0.5)


def test_preferences_filter_and_weights():
    cfg = PolicyConfig(mode="single")
    assert decide(P, C, RUNGS, cfg, Preferences(allowed=["large"])).rung == "large"
    d = decide(P, C, RUNGS, cfg, Preferences(self_hosted_only=True))
    assert d.rung == "small" and d.excluded == {"large": "not self-hosted"}
    d = decide(P, C, RUNGS, PolicyConfig(mode="single", target=0.8), Preferences(max_latency_s=1.0))
    assert d.rung == "small" and "latency" in d.excluded["large"] and "no candidate" in d.rule
    # weight 4 on large: weighted 4 / 4 / 0.9 = 1.11 < 2 -> large, but the real expected cost is reported
    d = decide(P, C, RUNGS, cfg, Preferences(weights={"large": 4.0}))
    assert d.rung == "large" and d.expected_cost == pytest.approx(4.0) and "preference-weighted" in d.rule
    assert decide(P, C, RUNGS, cfg, Preferences(weights={"small": 0})).rung == "large"


def test_value_of_a_usable_result():
    # V = 10: small 10 x 0.5 - 1 = 4, large 10 x 0.9 - 4 = 5 -> large; V = 5: small 1.5, large 0.5 -> small
    assert decide(P, C, RUNGS, PolicyConfig(mode="single", value_usd=10)).rung == "large"
    d = decide(P, C, RUNGS, PolicyConfig(mode="single", value_usd=5))
    assert d.rung == "small" and "net value" in d.rule
    # escalation: small -> large nets 10 x 0.95 - 3 = 6.5, above large alone (5)
    assert decide(P, C, RUNGS, PolicyConfig(mode="escalate", value_usd=10)).chain == ["small", "large"]


def test_preference_errors():
    with pytest.raises(RouterError, match="Did you mean 'large'"):
        decide(P, C, RUNGS, PolicyConfig(), Preferences(allowed=["larg"]))
    with pytest.raises(RouterError, match="no rung is allowed"):
        decide(P, C, RUNGS, PolicyConfig(), Preferences(allowed=["large"], self_hosted_only=True))


def test_explanation_is_complete():
    e = decide(P, C, RUNGS, PolicyConfig(mode="escalate")).explain()
    assert set(e["probabilities"]) == {"small", "large"} and e["rule"] and e["candidates"]
    assert e["attempt_costs_usd"] == {"small": 1.0, "large": 4.0}


@pytest.mark.parametrize("v", [None, VerifierErrors(), VerifierErrors(0.15, 0.3)])
def test_batch_chain_outcome_matches_scores(v):
    rng = np.random.default_rng(1)
    p, c = rng.random((30, 3)), rng.random((30, 3))
    ks = [2, 1, 3]
    cost, qual = chain_outcome_batch(p, c, ks, v)
    for i in range(30):
        ref = chain_outcome([Step(p[i, s], c[i, s], ks[s]) for s in range(3)], v)
        assert cost[i] == pytest.approx(ref.expected_cost) and qual[i] == pytest.approx(ref.p_usable)


@pytest.mark.parametrize("config", [PolicyConfig(mode="single"), PolicyConfig(mode="escalate", k=2, target=0.7),
                                    PolicyConfig(mode="escalate", stop_early=True, target=0.8),
                                    PolicyConfig(mode="single", value_usd=2.0, target=0.3),
                                    PolicyConfig(mode="escalate", value_usd=1.0, stop_early=True),
                                    PolicyConfig(mode="escalate", verifier=VerifierErrors(0.1, 0.1),
                                                 order="probability", target=0.9)])
def test_batch_selection_matches_decide(config):
    rng = np.random.default_rng(2)
    rungs = [RungFacts(f"r{i}") for i in range(5)]
    Pm, Cm = rng.random((40, 5)), rng.random((40, 5)) + 0.1
    prefs = Preferences(weights={"r3": 2.0})
    table = candidate_table(Pm, Cm, rungs, config, prefs)
    chains = chosen_chains(table, select(table, config.target, config.value_usd))
    for i in range(40):
        d = decide(Pm[i], Cm[i], rungs, config, prefs)
        assert [rungs[j].name for j in chains[i] if j >= 0] == d.chain


def test_fallback_does_not_buy_a_sliver_of_p_with_a_near_useless_first_attempt():
    """No candidate reaches the target: a first rung with P ~ 0 adds ~0 to P(usable) at +50% cost, so the chain
    without it wins (the live loop's class whose cheap rung the verifier always rejects; figures of its router)."""
    p, c = [4.5e-5, 0.1817], [0.000152, 0.000302]
    d = decide(p, c, RUNGS, PolicyConfig(mode="escalate", k=1, target=0.5))
    both, alone = cand(d, ["small", "large"]), cand(d, ["large"])
    assert 0 < both["p_usable"] - alone["p_usable"] < 1e-4
    assert both["cost_per_usable_usd"] > alone["cost_per_usable_usd"]
    assert d.chain == ["large"] and "within 0.01" in d.rule
    # a real gain in P(usable) (beyond the tie tolerance) is still worth the first attempt
    d = decide([0.1, 0.1817], c, RUNGS, PolicyConfig(mode="escalate", k=1, target=0.5))
    assert d.chain == ["small", "large"]


@pytest.mark.parametrize("max_chain", [2, 3])
def test_candidate_chains_by_order(max_chain):
    rungs = [RungFacts(f"r{i}") for i in range(4)]
    Pm = np.array([[0.1, 0.2, 0.9, 0.5], [0.1, 0.8, 0.3, 0.7]])
    prefs = Preferences(allowed=["r0", "r1", "r2", "r3"])
    ladder = candidate_table(Pm, np.ones_like(Pm), rungs, PolicyConfig(max_chain=max_chain), prefs)["chains"]
    assert ladder[0, 0].tolist() == ladder[1, 0].tolist() == [0, 1, 2][:max_chain]
    assert ladder[0, 3].tolist() == [3] + [-1] * (max_chain - 1)
    by_p = candidate_table(Pm, np.ones_like(Pm), rungs, PolicyConfig(max_chain=max_chain, order="probability"),
                           prefs)["chains"]
    assert by_p[0, 0].tolist() == [0, 2, 3][:max_chain] and by_p[1, 0].tolist() == [0, 1, 3][:max_chain]
    early = candidate_table(Pm, np.ones_like(Pm), rungs, PolicyConfig(max_chain=max_chain, stop_early=True),
                            prefs)["chains"]
    assert early.shape[1] == sum(min(max_chain, 4 - s) for s in range(4))


def _chain_outcome_by_step(p, cost, k, verifier, valid=None, dependence=0.0):
    """The step-by-step recursion `chain_outcome_batch` replaced (kept here as its reference)."""
    p = np.clip(p, 0.0, 1.0)
    n, S = p.shape
    valid = np.ones_like(p, dtype=bool) if valid is None else valid
    if verifier is None:
        return cost[:, 0].copy(), p[:, 0].copy()
    k = np.broadcast_to(np.maximum(1, np.asarray(k, dtype=int)), (n, S))
    rho = float(dependence)
    reach, prod, low = np.ones(n), np.ones(n), np.ones(n)
    exp_cost, p_use = np.zeros(n), np.zeros(n)
    last_step = valid.sum(axis=1) - 1
    for s in range(S):
        v = valid[:, s]
        a = verifier.accept_rate(p[:, s])
        kk = k[:, s]
        fail = (1.0 - a) ** kk
        new_prod, new_low = prod * fail, np.minimum(low, fail)
        new_reach = (1.0 - rho) * new_prod + rho * new_low if rho else new_prod
        pos = a > 0
        a_safe = np.where(pos, a, 1.0)
        attempts = np.where(pos, (1.0 - fail) / a_safe, kk)
        share = np.where(pos, p[:, s] * (1 - verifier.false_reject) / a_safe, 0.0)
        rejected = np.where((last_step == s) & (fail > 0),
                            new_reach * p[:, s] * verifier.false_reject / np.maximum(1.0 - a, 1e-300), 0.0)
        exp_cost += np.where(v, reach * cost[:, s] * attempts, 0.0)
        p_use += np.where(v, (reach - new_reach) * share + rejected, 0.0)
        reach = np.where(v, new_reach, reach)
        prod, low = np.where(v, new_prod, prod), np.where(v, new_low, low)
    return exp_cost, np.minimum(p_use, 1.0)


@pytest.mark.parametrize("v", [None, VerifierErrors(), VerifierErrors(0.15, 0.3), VerifierErrors(0.0, 0.2),
                               VerifierErrors(0.3, 0.0)])
@pytest.mark.parametrize("rho", [0.0, 0.3, 1.0])
def test_batch_chain_outcome_equals_the_step_by_step_recursion(v, rho):
    rng = np.random.default_rng(7)
    p = rng.random((400, 4))
    p[:20] = rng.choice([0.0, 1.0], size=(20, 4))  # certain outcomes: accept rates of 0 and 1
    c = rng.random((400, 4))
    k = rng.integers(1, 4, size=(400, 4))
    valid = np.arange(4) < rng.integers(1, 5, size=400)[:, None]  # chains of 1-4 steps, padded at the end
    holes = rng.random((400, 4)) < 0.3  # and masks that are not prefixes, even without a first step
    for mask in (None, valid, holes):
        got = chain_outcome_batch(p, c, k, v, mask, rho)
        want = _chain_outcome_by_step(p, c, k, v, mask, rho)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
