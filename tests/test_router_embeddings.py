"""The optional embeddings configuration: trained, saved and scored like the default (skipped without the extra)."""

import numpy as np
import pytest

from advisor.router.model.artifact import RungModel, load_router
from advisor.router.model.features import EMBEDDING_DIM, embeddings_available
from advisor.router.training.fit import TrainingData, fit_router

pytestmark = pytest.mark.skipif(not embeddings_available(), reason="embeddings extra not installed")


def test_router_with_embeddings_round_trips_and_matches_the_fast_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rng = np.random.default_rng(0)
    topics = {"maths": "solve the equation for x", "code": "write a python function", "trivia": "who was the king"}
    classes = [str(rng.choice(list(topics))) for _ in range(90)]
    texts = [f"{topics[c]} number {rng.integers(100)}" for c in classes]
    rate = {"maths": [0.1, 0.9], "code": [0.8, 0.9], "trivia": [0.5, 0.5]}  # a signal: no class-rate fallback
    usable = (rng.random((90, 2)) < np.array([rate[c] for c in classes])).astype(float)
    data = TrainingData(texts=texts, classes=classes, groups=[f"g{i}" for i in range(90)],
                        rungs=[RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)],
                        usable=usable, runs=np.ones(usable.shape), cost=np.full(usable.shape, 1e-4),
                        input_tokens=np.full(90, 10.0))
    model = fit_router(data, folds=3, n_hash=2 ** 10, use_embeddings=True, tune=False)
    assert not model.metrics["fallback_rungs"]
    assert model.featurizer.use_embeddings and model.w_dense.shape[0] == model.featurizer.n_dense
    assert model.featurizer.dense_names()[-1] == f"emb{EMBEDDING_DIM - 1}"
    loaded = load_router(model.save(tmp_path / "e.json"))
    P = loaded.predict(texts[:4], [classes[0], None, classes[2], "unseen"])
    assert np.allclose(P, model.predict(texts[:4], [classes[0], None, classes[2], "unseen"]))
    assert np.allclose(loaded.predict_one(texts[1], None), P[1], atol=1e-5)
