"""The per-request cost model on a table with recorded costs: code answers are long, so the largest rung's
attempt cost depends on the class; the model learns it (the mean-remainder estimate does not)."""

import json

import numpy as np
import pytest

from advisor.importers.recorded import ImportOptions, import_recorded
from advisor.ladder import load_ladder
from advisor.router.model.costmodel import fit_cost_model, mdape
from advisor.router.training.fit import fit_router, training_data_from_store
from advisor.store import Store

#: recorded USD per attempt: rung -> (chat, code)
COST = {"nano-12b": (1e-5, 4e-5), "nano-30b": (2e-5, 1e-4), "super-120b": (5e-5, 9e-4)}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cost")
    rng = np.random.default_rng(0)
    rows = []
    for i in range(240):
        code = i % 2 == 0
        text = (f"def f{i}(x):\n    return x + {i}  # write a class with tests" if code
                else f"say hello to friend {i} please")
        for m, (chat, cd) in COST.items():
            rows.append({"prompt_id": f"p{i}", "prompt": text, "task": "code" if code else "chat", "model": m,
                         "score": float(rng.random() < 0.7),
                         "cost": (cd if code else chat) * float(rng.uniform(0.9, 1.1))})
    path = tmp / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Store.open(tmp / "s.duckdb") as store:
        import_recorded(path, load_ladder("ladders/demo.yaml"), store, ImportOptions(suite_name="c"))
        data = training_data_from_store(store, suite_name="c")
    assert data.cost_estimated is not None and np.nanmax(data.cost_estimated) == 0  # recorded, not estimated
    with pytest.warns(UserWarning, match="no signal"):
        return fit_router(data, folds=3, n_hash=2 ** 10)


def test_predicted_cost_follows_the_class(model):
    texts = ["def g(x):\n    return x * 2  # write a class with tests", "say hello to friend 7 please"]
    C = model.attempt_costs(texts, ["code", "chat"])
    j = model.rung_names.index("super-120b")
    assert C[0, j] == pytest.approx(9e-4, rel=0.15) and C[1, j] == pytest.approx(5e-5, rel=0.15)
    simple = model.simple_costs(np.array([len(t) for t in texts], float))
    assert abs(simple[0, j] - 9e-4) / 9e-4 > 0.3  # the old mean-remainder estimate misses the code class


def test_cross_validated_cost_error_is_reported(model):
    for name, m in model.metrics["per_rung"].items():
        assert m["cost_mdape"] is not None and m["cost_mdape"] < 0.1, name
        assert m["cost_estimated_share"] == 0.0


def test_constant_remainder_is_learned_exactly():
    dense = np.random.default_rng(1).random((50, 3))
    chars = np.full(50, 400.0)
    cost = np.tile([1e-6 * 100 + 2e-4], (50, 1))
    cm = fit_cost_model(chars, np.full(50, 100.0), cost, np.array([1e-6]), dense)
    pred = cm.predict(chars, dense)
    assert np.allclose(pred, cost, rtol=1e-6) and mdape(pred, cost)[0] < 1e-6


def test_rungs_without_signal_fall_back_to_the_class_rate(model):
    # the outcomes above are coin flips: no rung's AUC reaches 0.55, so each uses its class-level usable rate
    assert set(model.metrics["fallback_rungs"]) == set(COST)
    rates = model.training["stats"]["class_rates"]
    P = model.predict(["def h(y):\n    return y", "say hello"], ["code", "chat"])
    for j in range(3):
        assert P[0, j] == pytest.approx(rates["code"][j], abs=0.01)
        assert P[1, j] == pytest.approx(rates["chat"][j], abs=0.01)
