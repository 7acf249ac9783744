"""Router training: calibration on synthetic data with a known answer, grouped CV, the versioned artifact."""

import json

import numpy as np
import pytest

from advisor.errors import RouterError
from advisor.router.model.artifact import FORMAT_VERSION, RungModel, load_router
from advisor.router.training.fit import TrainingData, fit_router, grouped_folds, training_data_from_store

#: True P(usable): rung -> (easy, hard)
TRUTH = {"small": (0.85, 0.15), "large": (0.95, 0.6)}
WORDS = "apple river stone cloud music paper window garden silver candle ocean forest".split()


def synth(n: int, seed: int):
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.5
    texts = []
    for i in range(n):
        filler = " ".join(rng.choice(WORDS, 6))
        texts.append(f"prove the theorem about {filler} step by step" if hard[i] else f"tell me the colour of {filler}")
    return texts, hard, rng


@pytest.fixture(scope="module")
def trained():
    texts, hard, rng = synth(1200, 0)
    usable = np.stack([np.where(hard, TRUTH[r][1], TRUTH[r][0]) > rng.random(len(texts)) for r in TRUTH], axis=1)
    rungs = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]
    data = TrainingData(texts=texts, classes=[rng.choice(["a", "b"]) for _ in texts],
                        groups=[f"g{i}" for i in range(len(texts))], rungs=rungs, usable=usable.astype(float),
                        runs=np.ones(usable.shape), cost=np.full(usable.shape, 1e-4),
                        input_tokens=np.full(len(texts), 10.0), provenance={"data_hash": "test"})
    return fit_router(data, folds=3, n_hash=2 ** 12, stack=False)  # the first stage's calibration is checked


def test_calibrated_probabilities_match_the_known_answer(trained):
    texts, hard, _ = synth(400, 1)
    P = trained.predict(texts)
    for j, rung in enumerate(TRUTH):
        easy_p, hard_p = TRUTH[rung]
        assert P[~hard, j].mean() == pytest.approx(easy_p, abs=0.06)
        assert P[hard, j].mean() == pytest.approx(hard_p, abs=0.06)
    for rung, m in trained.metrics["per_rung"].items():
        assert m["ece"] < 0.06 and m["auc"] > 0.7 and m["calibration"] == "isotonic", rung


def test_fast_path_matches_batch(trained):
    texts, _, _ = synth(20, 2)
    P = trained.predict(texts, ["a"] * 20)
    for i, t in enumerate(texts):
        assert np.allclose(trained.predict_one(t, "a"), P[i], atol=1e-5)


def test_grouped_folds_never_split_a_prompt():
    groups = [f"p{i % 37}" for i in range(300)]
    folds = grouped_folds(groups, 5, seed=3)
    seen = np.concatenate([test for _, test in folds])
    assert sorted(seen) == list(range(300))
    for train, test in folds:
        assert not {groups[i] for i in train} & {groups[i] for i in test}
    with pytest.raises(RouterError, match="at least 5 distinct prompts"):
        grouped_folds(["a", "b", "a"], 5)


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_artifact_roundtrip(tmp_path, trained, suffix):
    path = trained.save(tmp_path / f"r{suffix}")
    loaded = load_router(path)
    texts, _, _ = synth(5, 4)
    assert np.allclose(loaded.predict(texts), trained.predict(texts))
    assert loaded.provenance["data_hash"] == "test" and loaded.metrics["per_rung"].keys() == {"small", "large"}


def test_artifact_from_another_version_is_refused(tmp_path, trained):
    path = trained.save(tmp_path / "r.json")
    state = json.loads(path.read_text())
    state["format_version"] = FORMAT_VERSION + 98
    path.write_text(json.dumps(state))
    with pytest.raises(RouterError, match=f"format version {FORMAT_VERSION + 98}.*Retrain"):
        load_router(path)
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(RouterError, match="not an advisor router artifact"):
        load_router(tmp_path / "x.json")
    with pytest.raises(RouterError, match="no router artifact here"):
        load_router(tmp_path / "missing.json")


def test_training_data_from_store_aggregates_and_skips_unscored(tmp_path):
    from advisor.importers.recorded import ImportOptions, import_recorded
    from advisor.ladder import load_ladder
    from advisor.store import Store

    ladder = load_ladder("ladders/demo.yaml")
    rows = [{"prompt_id": "p1", "prompt": "hello", "task": "t", "model": "nano-12b", "score": s} for s in (1.0, 0.0)]
    rows += [{"prompt_id": "p1", "prompt": "hello", "task": "t", "model": "super-120b", "score": 0.9}]
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Store.open(tmp_path / "s.duckdb") as store:
        # p1 x nano-12b twice: intended replicas
        import_recorded(path, ladder, store, ImportOptions(suite_name="s", replicas=True))
        run = store.runs(rung="super-120b")[0]
        from advisor.store import RunRecord

        fields = {k: v for k, v in run.items() if k in RunRecord.__dataclass_fields__}
        fields.update(run_key="unscored1", if_score=None, tc_score=None, overall=None, unscored=True)
        store.add_run(RunRecord(**fields))
        data = training_data_from_store(store, suite_name="s")
    assert [r.name for r in data.rungs] == ["nano-12b", "super-120b"]  # nano-30b has no runs
    assert data.usable.tolist() == [[0.5, 1.0]] and data.runs.tolist() == [[2.0, 1.0]]
    assert data.provenance["simulated_runs"] == 3 and data.texts == ["hello"]


@pytest.mark.parametrize("mode,value", [("single", None), ("escalate", None), ("single", 0.01)])
def test_vectorised_batch_routing_matches_explained_decisions(trained, mode, value):
    from advisor.router.routing.route import route_batch, route_one
    from advisor.router.routing.rule import PolicyConfig, Preferences

    texts, _, _ = synth(30, 5)
    cfg = PolicyConfig(mode=mode, target=0.8 if value is None else 0.0, value_usd=value)
    prefs = Preferences(weights={"large": 1.5})
    fast = route_batch(trained, texts, ["a"] * 30, cfg, prefs)
    full = route_batch(trained, texts, ["a"] * 30, cfg, prefs, explain=True)
    for f, d, t in zip(fast, full, texts):
        assert f.chain == d.chain and f.expected_cost == pytest.approx(d.expected_cost)
        assert f.p_usable == pytest.approx(d.p_usable) and f.rule.split(" among")[0] == d.rule.split(" among")[0]
        assert route_one(trained, t, "a", cfg, prefs).chain == d.chain


def test_stacked_second_stage_round_trips_and_matches_the_fast_path(tmp_path):
    texts, hard, rng = synth(300, 9)
    usable = np.stack([np.where(hard, TRUTH[r][1], TRUTH[r][0]) > rng.random(len(texts)) for r in TRUTH], axis=1)
    rungs = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]
    data = TrainingData(texts=texts, classes=[rng.choice(["a", "b"]) for _ in texts],
                        groups=[f"g{i}" for i in range(len(texts))], rungs=rungs, usable=usable.astype(float),
                        runs=np.ones(usable.shape), cost=np.full(usable.shape, 1e-4),
                        input_tokens=np.full(len(texts), 10.0))
    model = fit_router(data, folds=3, n_hash=2 ** 10, stack=True)
    assert model.stack_w.shape == (2 + 2 + 1, 2) and all(m["stacked"] for m in model.metrics["per_rung"].values())
    loaded = load_router(model.save(tmp_path / "s.json"))
    P = loaded.predict(texts[:10], data.classes[:10])
    assert np.allclose(P, model.predict(texts[:10], data.classes[:10]))
    for i in range(10):
        assert np.allclose(loaded.predict_one(texts[i], data.classes[i]), P[i], atol=1e-5)


def test_one_request_features_equal_batch_features_for_any_hash_width():
    from advisor.router.model.features import Featurizer

    texts = ["prove the theorem about cloud music step by step", "tell me the colour of the ocean"]
    for n_hash in (2 ** 10, 2 ** 12, 2 ** 10):  # the n-gram bucket cache is per width
        f = Featurizer(n_hash=n_hash).fit(texts, ["a", "b"])
        xs, xd = f.transform(texts, ["a", "b"])
        for i, t in enumerate(texts):
            idx, val, dense = f.transform_one(t, ["a", "b"][i])
            row = np.zeros(f.n_sparse, np.float32)
            np.add.at(row, idx, val)
            assert np.allclose(row, xs[i].toarray().ravel(), atol=1e-6) and np.allclose(dense, xd[i])


def test_a_rung_measured_in_one_fold_only_still_trains():
    """A small store where one rung answered (was scored) on a single prompt: every other fold has no row of it
    to fit on, so that fold predicts the uninformed rate instead of failing (a service starting on such a store
    trains its router from it)."""
    texts, hard, rng = synth(40, 3)
    usable = np.stack([np.where(hard, TRUTH[r][1], TRUTH[r][0]) > rng.random(len(texts)) for r in TRUTH],
                      axis=1).astype(float)
    usable[1:, 1] = np.nan  # the large rung has one scored prompt
    rungs = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]
    data = TrainingData(texts=texts, classes=["a"] * len(texts), groups=[f"g{i}" for i in range(len(texts))],
                        rungs=rungs, usable=usable, runs=np.ones(usable.shape), cost=np.full(usable.shape, 1e-4),
                        input_tokens=np.full(len(texts), 10.0))
    model = fit_router(data, folds=3, n_hash=2 ** 10)
    P = model.predict(texts[:5], data.classes[:5])
    assert P.shape == (5, 2) and np.isfinite(P).all()
