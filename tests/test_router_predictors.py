"""The per-rung probability model is chosen in grouped cross-validation and recorded in the artifact."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.registry import UnknownNameError
from advisor.router.model.artifact import RungModel, load_router
from advisor.router.training.fit import TrainingData, fit_router
from advisor.router.training.predictors import PREDICTORS

WORDS = "apple river stone cloud music paper window garden silver candle ocean forest".split()
RUNGS = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]


def data(n: int, seed: int, text_matters: bool) -> TrainingData:
    """Two classes; the small rung's outcome depends on one word of the prompt when `text_matters`, else on
    the class alone (the text is noise)."""
    rng = np.random.default_rng(seed)
    classes = [str(rng.choice(["a", "b"])) for _ in range(n)]
    hard = rng.random(n) < 0.5
    texts = [("prove " if hard[i] else "tell ") + " ".join(rng.choice(WORDS, 8)) for i in range(n)]
    p_small = np.where(hard, 0.1, 0.9) if text_matters else np.where(np.array(classes) == "a", 0.8, 0.3)
    usable = np.stack([p_small > rng.random(n), 0.9 > rng.random(n)], axis=1).astype(float)
    cost = np.tile([1e-4, 1e-3], (n, 1))
    return TrainingData(texts=texts, classes=classes, groups=[f"g{i}" for i in range(n)], rungs=RUNGS,
                        usable=usable, runs=np.ones(usable.shape), cost=cost, input_tokens=np.full(n, 10.0),
                        provenance={"data_hash": f"predictors-{seed}"})


@pytest.fixture(scope="module")
def text_model():
    return fit_router(data(600, 0, text_matters=True), folds=3, n_hash=2 ** 10, tune=False)


def test_every_candidate_is_judged_and_the_best_mean_aiq_is_chosen(text_model):
    record = text_model.predictor
    assert set(record["candidates"]) == set(PREDICTORS.names()) == {"router", "tfidf", "class_rates"}
    aiqs = {name: c["aiq"] for name, c in record["candidates"].items()}
    assert all(0.0 <= a <= 1.0 for a in aiqs.values()), aiqs
    assert aiqs[record["chosen"]] == max(aiqs.values())
    assert aiqs[record["chosen"]] >= aiqs["tfidf"]  # never behind the tf-idf candidate in CV
    # the text carries the signal here: a model of the text beats the class rates by a clear margin
    assert record["chosen"] != "class_rates" and max(aiqs.values()) > aiqs["class_rates"] + 0.02, aiqs
    assert text_model.metrics["predictor"] == record


def test_the_choice_survives_save_and_load(text_model, tmp_path):
    path = text_model.save(tmp_path / "r.json")
    loaded = load_router(path)
    assert loaded.predictor == json.loads(json.dumps(text_model.predictor))
    texts, classes = ["prove apple river", "tell stone cloud"], ["a", "b"]
    assert np.allclose(loaded.predict(texts, classes), text_model.predict(texts, classes))


def test_a_chosen_candidate_serves_its_own_probabilities(tmp_path):
    """Forced to the class rates, the artifact's P(usable) is each rung's training rate in the class, for a
    batch and for one request, and after a reload."""
    d = data(300, 1, text_matters=False)
    model = fit_router(d, folds=3, n_hash=2 ** 10, tune=False, predictors=["class_rates"])
    assert model.predictor["chosen"] == "class_rates" and list(model.predictor["candidates"]) == ["class_rates"]
    cls = np.array(d.classes)
    for c in ("a", "b"):
        want = np.clip(d.usable[cls == c].mean(axis=0), 1e-3, 1 - 1e-3)
        got = model.predict(["tell apple", "prove ocean forest"], [c, c])
        assert np.allclose(got, want, atol=1e-3), (c, got, want)
        assert np.allclose(model.predict_one("tell apple", c), want, atol=1e-3)
    loaded = load_router(model.save(tmp_path / "rates.npz"))
    assert np.allclose(loaded.predict_one("prove river", "a"), model.predict_one("prove river", "a"))


def test_an_artifact_written_before_the_choice_reads_as_the_router(text_model, tmp_path):
    path = text_model.save(tmp_path / "old.json")
    state = json.loads(path.read_text())
    state["training"].pop("predictor")
    state["metrics"].pop("predictor")
    path.write_text(json.dumps(state))
    assert load_router(path).predictor["chosen"] == "router"


def test_an_unknown_candidate_is_one_line():
    with pytest.raises(UnknownNameError, match="unknown router predictor 'tfdif'.*tfidf"):
        fit_router(data(60, 2, text_matters=True), folds=3, n_hash=2 ** 8, tune=False, predictors=["tfdif"])
