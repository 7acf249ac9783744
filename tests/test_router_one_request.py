"""The one-request hot path (`RouterModel.score_one`, `route_one`) against the batch path it must equal: its
plain-Python probabilities and costs, its rebuild when a model's array is replaced, the reused built policies and
the candidate layout laid out once per settings."""

import numpy as np
import pytest

from advisor.router.model.artifact import RungModel, _interp_one
from advisor.router.routing.rule import PolicyConfig, Preferences, RungFacts, candidate_table
from advisor.router.training.fit import TrainingData, fit_router

WORDS = "apple river stone cloud music paper window garden silver candle ocean forest".split()


def _data(n: int, seed: int) -> TrainingData:
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.5
    texts = [(f"prove the theorem about {' '.join(rng.choice(WORDS, 6))} step by step" if h else
              f"tell me the colour of {' '.join(rng.choice(WORDS, int(rng.integers(2, 40))))}") for h in hard]
    p = np.stack([np.where(hard, 0.2, 0.85), np.where(hard, 0.6, 0.95), np.where(hard, 0.9, 0.97)], axis=1)
    usable = (p > rng.random(p.shape)).astype(float)
    chars = np.array([len(t) for t in texts], float)
    cost = np.stack([chars * f * 1e-7 + rng.random(n) * f * 1e-5 for f in (1, 4, 20)], axis=1)
    rungs = [RungModel("small", 0, 1e-7, 1e-5, 100), RungModel("mid", 1, 4e-7, 4e-5, 100),
             RungModel("large", 2, 2e-6, 2e-4, 100)]
    return TrainingData(texts=texts, classes=[rng.choice(["a", "b", "c"]) for _ in texts],
                        groups=[f"g{i}" for i in range(n)], rungs=rungs, usable=usable, runs=np.ones(p.shape),
                        cost=cost, input_tokens=chars / 4, provenance={"data_hash": "one-request"})


@pytest.fixture(scope="module", params=[True, False], ids=["stacked", "first-stage"])
def router(request):
    return fit_router(_data(400, 0), folds=3, n_hash=2 ** 10, stack=request.param)


TEXTS = ["prove the theorem about cloud music step by step", "tell me the colour of the ocean",
         "tell me " + "the colour of paper and silver " * 60 + "please?"]  # longer than the text window


@pytest.mark.parametrize("cls", ["a", None, "never-seen"])
def test_score_one_equals_the_batch_probabilities_and_costs(router, cls):
    assert router.cost_model is not None
    P, C = router.predict_with_costs(TEXTS, [cls] * len(TEXTS))
    for i, t in enumerate(TEXTS):
        p, c = router.score_one(t, cls)
        assert np.allclose(p, P[i], atol=1e-5) and np.allclose(c, C[i], rtol=1e-5, atol=1e-12)
    assert len({tuple(np.round(C[:, 0], 12))}) == 1 and C[0, 0] != C[2, 0]  # the costs depend on the text


def test_score_one_follows_a_replaced_class_model_and_cost_model(router):
    from dataclasses import replace

    from advisor.router.model.cache import cache_of

    router.score_one(TEXTS[0], None)
    assert cache_of(router)  # the original has derived objects...
    model = replace(router, featurizer=replace_featurizer(router.featurizer))
    assert cache_of(model) == {}  # ...and a copy builds its own
    n_class = len(model.featurizer.classes)
    model.score_one(TEXTS[1], None)  # builds the derived objects of the class model and the cost model
    before = model.featurizer.features_one(TEXTS[1], None)[1][11: 11 + n_class]  # predicted class probabilities
    model.featurizer.class_w = None  # as the ablation benchmark does: unknown classes get the class frequencies
    model.cost_model = None  # the simple per-rung estimate
    P, C = model.predict_with_costs(TEXTS, [None] * len(TEXTS))
    for i, t in enumerate(TEXTS):
        p, c = model.score_one(t, None)
        assert np.allclose(p, P[i], atol=1e-5) and np.allclose(c, C[i])
    after = model.featurizer.features_one(TEXTS[1], None)[1][11: 11 + n_class]
    assert np.allclose(after, model.featurizer.class_freq) and not np.allclose(before, after)


def replace_featurizer(f):
    from advisor.router.model.features import Featurizer

    return Featurizer.from_state(f.state())


def test_interp_one_equals_np_interp():
    rng = np.random.default_rng(3)
    for _ in range(200):
        xs = np.sort(np.round(rng.normal(size=int(rng.integers(1, 12))), 1))  # rounded: repeated knots
        ys = np.sort(rng.random(len(xs)))
        for x in [*rng.normal(scale=2, size=20), *xs, xs[0] - 1, xs[-1] + 1]:
            assert _interp_one(float(x), xs.tolist(), ys.tolist()) == pytest.approx(float(np.interp(x, xs, ys)),
                                                                                    abs=1e-12)


def test_route_one_reuses_a_policy_per_settings_and_decides_as_a_fresh_one(router):
    from advisor.router.routing.policies import Requests, make_policy, to_decisions
    from advisor.router.routing.route import built_policy, context, policy_name, route_one

    single, escalate = PolicyConfig(mode="single", target=0.7), PolicyConfig(mode="escalate", k=2, target=0.9)
    prefs = Preferences(allowed=["small", "large"])
    assert built_policy(router, single, prefs) is built_policy(router, single, Preferences(allowed=["small", "large"]))
    assert built_policy(router, single, prefs) is not built_policy(router, single, Preferences(allowed=["mid"]))
    assert built_policy(router, single, prefs) is not built_policy(router, escalate, prefs)
    for cfg in (single, escalate):
        for pr in (prefs, Preferences(allowed=["mid"]), None):
            for t in TEXTS:
                p, c = router.score_one(t, "a")
                batch = Requests([t], ["a"], p[None, :], c[None, :])
                ctx = context(router, cfg, pr)
                pol = make_policy(policy_name(router, cfg), ctx)
                fresh = to_decisions(pol.decide(batch), batch, ctx, pol.excluded, explain=True)[0]
                d = route_one(router, t, "a", cfg, pr)
                assert (d.chain, d.expected_cost, d.p_usable, d.rule) == (fresh.chain, fresh.expected_cost,
                                                                          fresh.p_usable, fresh.rule)


@pytest.mark.parametrize("config", [PolicyConfig(mode="single"), PolicyConfig(mode="escalate", k={"small": 2}),
                                    PolicyConfig(mode="escalate", max_chain=2, stop_early=True)])
def test_candidate_table_of_a_batch_equals_its_rows_one_by_one(config):
    rng = np.random.default_rng(5)
    P, C = rng.random((6, 3)), rng.random((6, 3)) * 1e-3
    rungs = [RungFacts("small", True, None), RungFacts("mid", True, None), RungFacts("large", False, None)]
    prefs = Preferences(weights={"large": 2.0})
    whole = candidate_table(P, C, rungs, config, prefs)
    for i in range(len(P)):
        row = candidate_table(P[i:i + 1], C[i:i + 1], rungs, config, prefs)
        for key, value in row.items():
            assert np.allclose(value[0], whole[key][i]), key
