"""The router's decision rule (chain value rule or the plain per-rung rule) is chosen in grouped CV at training,
recorded in the artifact, and applied by the ``default`` policy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.router.model.artifact import RungModel, load_router
from advisor.router.routing.policies import Requests, make_policy
from advisor.router.routing.route import context
from advisor.router.routing.rule import (PolicyConfig, RungFacts, candidate_table, chosen_chains, rung_value_chains,
                                         select)
from advisor.router.training.fit import TrainingData, fit_router
from advisor.router.training.tuning import RULES, choose_rule

WORDS = "apple river stone cloud music paper window garden silver candle ocean forest".split()
RUNGS = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("mid", 1, 3e-6, 3e-4, 100),
         RungModel("large", 2, 1e-5, 1e-3, 100)]


def data(n: int, seed: int) -> TrainingData:
    rng = np.random.default_rng(seed)
    classes = [str(rng.choice(["a", "b"])) for _ in range(n)]
    hard = rng.random(n) < 0.5
    texts = [("prove " if hard[i] else "tell ") + " ".join(rng.choice(WORDS, 8)) for i in range(n)]
    p = np.stack([np.where(hard, 0.2, 0.9), np.where(hard, 0.5, 0.9), np.full(n, 0.9)], axis=1)
    usable = (p > rng.random((n, 3))).astype(float)
    cost = np.tile([1e-4, 3e-4, 1e-3], (n, 1))
    return TrainingData(texts=texts, classes=classes, groups=[f"g{i}" for i in range(n)], rungs=RUNGS,
                        usable=usable, runs=np.ones(usable.shape), cost=cost, input_tokens=np.full(n, 10.0),
                        provenance={"data_hash": f"rule-{seed}"})


@pytest.fixture(scope="module")
def model():
    return fit_router(data(500, 0), folds=3, n_hash=2 ** 10)


def test_single_shot_the_plain_rule_is_the_chain_rule():
    rng = np.random.default_rng(3)
    P, C = rng.random((200, 4)), rng.random((200, 4)) * 1e-3
    facts = [RungFacts(f"r{i}") for i in range(4)]
    table = candidate_table(P, C, facts, PolicyConfig(mode="single"))
    for v in (0.0, 1e-4, 1e-3, 1e-2):
        chain = chosen_chains(table, select(table, 0.0, v))
        assert np.array_equal(chain, rung_value_chains(P, C, [0, 1, 2, 3], v, 1)), v


def test_the_plain_rule_escalates_up_the_allowed_rungs_from_its_start():
    P = np.array([[0.9, 0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.95]])
    C = np.full((2, 4), 1e-4)
    chains = rung_value_chains(P, C, [0, 2, 3], 1.0, 3)
    assert chains.tolist() == [[0, 2, 3], [3, -1, -1]]


def test_the_higher_aiq_wins_and_a_tie_goes_to_the_chain_rule():
    low = [{"cost": 0.0, "quality": 0.5}, {"cost": 1.0, "quality": 0.6}]
    high = [{"cost": 0.0, "quality": 0.5}, {"cost": 1.0, "quality": 0.8}]
    costs = np.array([0.0, 1.0])
    assert choose_rule({"chain_value": low, "rung_value": high}, "single", costs)[0] == "rung_value"
    assert choose_rule({"chain_value": high, "rung_value": low}, "escalate", costs)[0] == "chain_value"
    chosen, figures = choose_rule({"chain_value": low, "rung_value": low}, "single", costs)
    assert chosen == "chain_value" and figures["chain_value"] == figures["rung_value"]


def test_the_choice_and_both_figures_are_recorded_and_survive_a_reload(model, tmp_path):
    record = model.rule
    assert set(record["candidates"]) == set(RULES)
    for mode in ("single", "escalate"):
        figs = {r: record["candidates"][r][f"aiq_{mode}"] for r in RULES}
        assert figs[record["chosen"][mode]] == max(figs.values()), (mode, figs)
        assert model.default["rule"][mode] == record["chosen"][mode]
    assert model.metrics["rule"] == record
    loaded = load_router(model.save(tmp_path / "r.json"))
    assert loaded.rule == json.loads(json.dumps(record))


@pytest.mark.parametrize("rule", RULES)
def test_the_default_policy_applies_the_recorded_rule(model, rule):
    texts, classes = ["prove apple river", "tell stone cloud", "prove ocean"], ["a", "b", "a"]
    batch = Requests.score(model, texts, classes)
    saved = dict(model.default)
    try:
        model.default = {**saved, "rule": {"single": rule, "escalate": rule}}
        ctx = context(model, PolicyConfig(mode="escalate"))
        choice = make_policy("default", ctx).decide(batch)
        value = saved["value_usd"]["escalate"]
        want_policy = {"chain_value": "value", "rung_value": "rung_value"}[rule]
        want = make_policy(want_policy, ctx, value_usd=value).decide(batch)
        assert np.array_equal(choice.chains, want.chains)
        assert choice.reason["rule"] == ("rung_net_value" if rule == "rung_value" else "max_net_value")
    finally:
        model.default = saved


def test_an_artifact_written_before_the_choice_applies_the_chain_rule(model, tmp_path):
    path = model.save(tmp_path / "old.json")
    state = json.loads(path.read_text())
    state["training"].pop("rule")
    state["default"].pop("rule")
    path.write_text(json.dumps(state))
    old = load_router(path)
    assert old.rule["chosen"] == {"single": "chain_value", "escalate": "chain_value"}
    batch = Requests.score(old, ["prove apple"], ["a"])
    assert make_policy("default", context(old, PolicyConfig())).decide(batch).reason["rule"] == "max_net_value"
