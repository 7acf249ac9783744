"""Class prediction for requests without a class (classpred.py), the within-class AUC, and the evaluation of
requests whose class is hidden."""

import json

import numpy as np
import pytest

from advisor.errors import RouterError
from advisor.router.model.artifact import RungModel, load_router
from advisor.router.model.features import CUE_NAMES, Featurizer
from advisor.router.training.fit import TrainingData, fit_router, within_class_auc

TOPICS = {"maths": "solve the equation integral derivative sum of numbers",
          "code": "write a python function that returns the list loop",
          "trivia": "who was the president capital city of country history"}


def corpus(n: int, seed: int):
    rng = np.random.default_rng(seed)
    classes = [str(rng.choice(list(TOPICS))) for _ in range(n)]
    texts = [" ".join(rng.choice(TOPICS[c].split(), 6)) + f" item {rng.integers(1000)}" for c in classes]
    return texts, classes


def test_class_model_predicts_the_class_of_requests_without_one():
    texts, classes = corpus(300, 0)
    f = Featurizer(n_hash=2 ** 12).fit(texts, classes)
    assert f.class_w.shape == (f.n_sparse + len(CUE_NAMES), 3) and f.class_b.shape == (3,)
    test, truth = corpus(60, 1)
    _, dense = f.transform(test, [None] * 60)
    block = dense[:, len(CUE_NAMES): len(CUE_NAMES) + 3]
    assert np.allclose(block.sum(axis=1), 1.0, atol=1e-5)
    assert (np.array(f.classes)[block.argmax(axis=1)] == np.array(truth)).mean() > 0.9
    assert (dense[:, len(CUE_NAMES) + 3] == 1.0).all()  # the "unknown" flag stays set
    _, known = f.transform(test, truth)  # a known class is still a plain one-hot
    assert set(np.unique(known[:, len(CUE_NAMES): len(CUE_NAMES) + 3])) == {0.0, 1.0}


def test_one_request_equals_the_batch_for_a_missing_or_unseen_class():
    texts, classes = corpus(200, 2)
    f = Featurizer(n_hash=2 ** 10).fit(texts, classes)
    test, _ = corpus(10, 3)
    for cls in (None, "never-seen"):
        _, dense = f.transform(test, [cls] * 10)
        for i, t in enumerate(test):
            assert np.allclose(f.transform_one(t, cls)[2], dense[i], atol=1e-5)


def test_without_class_model_the_class_frequencies_are_used():
    texts, classes = corpus(100, 4)
    f = Featurizer(n_hash=2 ** 10, predict_classes=False).fit(texts, classes)
    assert f.class_w is None
    _, dense = f.transform(texts[:3], [None] * 3)
    assert np.allclose(dense[:, len(CUE_NAMES): len(CUE_NAMES) + 3], f.class_freq)
    one = Featurizer(n_hash=2 ** 10).fit(texts, ["maths"] * 100)  # one class: nothing to predict
    assert one.class_w is None


@pytest.fixture(scope="module")
def model():
    texts, classes = corpus(240, 5)
    rng = np.random.default_rng(5)
    rate = {"maths": (0.2, 0.9), "code": (0.8, 0.9), "trivia": (0.5, 0.6)}
    usable = np.array([[rng.random() < rate[c][j] for j in range(2)] for c in classes], float)
    rungs = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]
    data = TrainingData(texts=texts, classes=classes, groups=[f"g{i}" for i in range(240)], rungs=rungs,
                        usable=usable, runs=np.ones(usable.shape), cost=np.full(usable.shape, 1e-4),
                        input_tokens=np.full(240, 10.0))
    return fit_router(data, folds=3, n_hash=2 ** 10, tune=False)


def test_router_without_a_class_scores_like_the_predicted_class(model, tmp_path):
    test, truth = corpus(40, 6)
    p_none, p_true = model.predict(test, [None] * 40), model.predict(test, truth)
    assert np.abs(p_none - p_true).mean() < 0.05  # the class is recovered from the text
    path = model.save(tmp_path / "r.json")
    loaded = load_router(path)
    assert np.allclose(loaded.predict(test, [None] * 40), p_none)
    assert np.allclose(loaded.predict_one(test[0], None), p_none[0], atol=1e-5)
    # an artifact of the older format (no class model) loads and scores a class-less request by class frequency
    state = json.loads(path.read_text())
    for key in ("class_w", "class_b"):
        state["featurizer"].pop(key, None)
    path.write_text(json.dumps(state))
    older = load_router(path)
    assert older.featurizer.class_w is None
    assert not np.allclose(older.predict(test, [None] * 40), p_none)  # the class model was doing the work


def test_damaged_class_model_is_refused(model, tmp_path):
    path = model.save(tmp_path / "r.json")
    state = json.loads(path.read_text())
    state["featurizer"]["class_w"] = state["featurizer"]["idf"]  # wrong shape
    path.write_text(json.dumps(state))
    with pytest.raises(RouterError, match="featurizer.class_w has shape"):
        load_router(path)


def test_within_class_auc_ignores_what_the_class_explains():
    classes = ["a"] * 100 + ["b"] * 100
    y = np.r_[np.zeros(50), np.ones(50), np.zeros(50), np.ones(50)]
    w = np.ones(200)
    by_class = np.r_[np.full(100, 0.2), np.full(100, 0.8)]  # separates nothing inside a class
    assert within_class_auc(by_class, y, w, classes) == pytest.approx(0.5)
    inside = by_class + 0.1 * y  # ranks inside each class perfectly
    assert within_class_auc(inside, y, w, classes) == pytest.approx(1.0)
    assert within_class_auc(by_class, np.zeros(200), w, classes) is None


def test_router_metrics_report_the_within_class_auc(model):
    for m in model.metrics["per_rung"].values():
        assert m["auc_within_class"] is None or 0.0 <= m["auc_within_class"] <= 1.0
    assert any(m["auc_within_class"] is not None for m in model.metrics["per_rung"].values())
