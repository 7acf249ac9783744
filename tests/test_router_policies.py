"""The policy registry: names with did-you-mean, every built-in policy's vectorised decision, a batch of one
equal to the same request inside a batch, explanations built from structured data."""

import numpy as np
import pytest
from test_router_train import trained  # noqa: F401  (fixture)
from test_router_train import synth

from advisor.registry import UnknownNameError
from advisor.router.routing.policies import POLICIES, Requests, make_policy, to_decisions
from advisor.router.routing.route import context, route_batch, route_one
from advisor.router.routing.rule import PolicyConfig
from advisor.router.training.baseline import TfidfLogistic

BUILTIN = {"router", "value", "default", "class_floor", "threshold", "always", "chain", "cascade", "baseline"}
PARAMS = {"value": {"value_usd": 1e-3}, "always": {"rung": "small"}, "class_floor": {"target": 0.7},
          "chain": {"rungs": ("large", "small")},
          "threshold": {"threshold": 0.6}, "baseline": {"value_usd": 1e-2}, "router": {"target": 0.7}}


def test_registry_names_and_did_you_mean():
    assert BUILTIN <= set(POLICIES.names())
    with pytest.raises(UnknownNameError, match="Did you mean 'cascade'"):
        POLICIES.get("cascde")


def test_unknown_policy_on_the_command_line(tmp_path, trained, capsys):  # noqa: F811
    from advisor.cli import main

    art = trained.save(tmp_path / "r.json")
    code = main(["route", "--router", str(art), "--prompt", "x", "--policy", "casade"])
    err = capsys.readouterr().err
    assert code == 2 and "Did you mean 'cascade'" in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def baseline(trained):  # noqa: F811
    texts, hard, rng = synth(300, 7)
    from advisor.router.training.fit import TrainingData

    usable = np.stack([~hard, np.ones(len(texts), bool)], axis=1).astype(float)
    data = TrainingData(texts, ["a"] * len(texts), [str(i) for i in range(len(texts))], trained.rungs, usable,
                        np.ones(usable.shape), np.tile([1e-4, 1e-3], (len(texts), 1)), np.full(len(texts), 10.0))
    return TfidfLogistic().fit(data)


@pytest.mark.parametrize("name", sorted(BUILTIN))
@pytest.mark.parametrize("mode", ["single", "escalate"])
def test_one_row_batch_equals_the_row_in_a_batch(trained, baseline, name, mode):  # noqa: F811
    texts, _, _ = synth(12, 3)
    classes = ["a", "b"] * 6
    ctx = context(trained, PolicyConfig(mode=mode), baseline=baseline)
    policy = make_policy(name, ctx, **PARAMS.get(name, {}))
    batch = Requests.score(trained, texts, classes)
    many = to_decisions(policy.decide(batch), batch, ctx, policy.excluded)
    for i, t in enumerate(texts):
        one = Requests.score(trained, [t], [classes[i]])
        d = to_decisions(policy.decide(one), one, ctx, policy.excluded)[0]
        assert d.chain == many[i].chain and d.expected_cost == pytest.approx(many[i].expected_cost)
        assert d.p_usable == pytest.approx(many[i].p_usable) and d.policy == name
        assert d.rule and d.reason["mode"] == mode  # explanation from structured data


def test_route_one_is_the_batch_of_one(trained):  # noqa: F811
    texts, _, _ = synth(20, 4)
    cfg = PolicyConfig(mode="escalate")
    batch = route_batch(trained, texts, ["a"] * 20, cfg)
    for t, d in zip(texts, batch):
        one = route_one(trained, t, "a", cfg)
        assert one.chain == d.chain and one.p_usable == pytest.approx(d.p_usable)
        assert one.policy == "default" and "default chosen in CV" in one.rule and one.candidates


def test_cascade_is_cheapest_first_over_all_rungs(trained):  # noqa: F811
    ctx = context(trained, PolicyConfig(mode="escalate"))
    texts, _, _ = synth(3, 5)
    choice = make_policy("cascade", ctx).decide(Requests.score(trained, texts))
    order = np.argsort(trained.training["stats"]["rung_mean_cost"])
    assert (choice.chains == order).all()


def test_dependence_lowers_chain_p_usable():
    from advisor.router.routing.rule import chain_outcome_batch
    from advisor.scores import PERFECT

    p, c = np.array([[0.5, 0.9]]), np.array([[1.0, 4.0]])
    _, indep = chain_outcome_batch(p, c, [1, 1], PERFECT)
    _, full = chain_outcome_batch(p, c, [1, 1], PERFECT, dependence=1.0)
    _, half = chain_outcome_batch(p, c, [1, 1], PERFECT, dependence=0.5)
    assert indep[0] == pytest.approx(0.95) and full[0] == pytest.approx(0.9) and half[0] == pytest.approx(0.925)


def test_chain_takes_the_named_rungs_in_order_and_only_the_allowed_ones(trained):  # noqa: F811
    """A service class's configured ``chain`` is this policy: the order as written, the first in single-shot mode,
    the rungs the preferences forbid left out, an unknown or wholly forbidden chain one clear error."""
    from advisor.errors import RouterError
    from advisor.router.routing.rule import Preferences

    texts, _, _ = synth(4, 6)
    names = trained.rung_names
    batch = Requests.score(trained, texts)
    chain = (names[-1], names[0])
    escalate = make_policy("chain", context(trained, PolicyConfig(mode="escalate")), rungs=chain).decide(batch)
    assert (escalate.chains == [names.index(n) for n in chain]).all()
    single = make_policy("chain", context(trained, PolicyConfig(mode="single")), rungs=chain).decide(batch)
    assert (single.chains[:, 0] == names.index(chain[0])).all() and single.chains.shape[1] == 1
    only_first = context(trained, PolicyConfig(mode="escalate"), Preferences(allowed=[names[0]]))
    assert (make_policy("chain", only_first, rungs=chain).decide(batch).chains == names.index(names[0])).all()
    with pytest.raises(RouterError, match="unknown rung 'nope'"):
        make_policy("chain", context(trained, PolicyConfig()), rungs=("nope",)).decide(batch)
    with pytest.raises(RouterError, match="no rung of the chain"):
        make_policy("chain", only_first, rungs=(names[-1],)).decide(batch)
