"""Router artifacts are data: .json / .npz only, validated against their schema, one line per problem; a
pickle or joblib file is refused without executing anything."""

import base64
import json
import pickle

import numpy as np
import pytest
from test_router_train import trained  # noqa: F401  (fixture)

from advisor.errors import RouterError
from advisor.router.model.artifact import load_router


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("suffix", [".joblib", ".pkl", ".pickle"])
def test_pickle_is_refused_without_executing(tmp_path, suffix, capsys):
    from advisor.cli import main

    marker = tmp_path / "pwned"
    evil = tmp_path / f"evil{suffix}"
    evil.write_bytes(pickle.dumps(Evil(marker)))
    with pytest.raises(RouterError, match="refused"):
        load_router(evil)
    code = main(["route", "--router", str(evil), "--prompt", "hello"])
    err = capsys.readouterr().err
    assert code == 5 and "pickle/joblib" in err and err.count("\n") == 1
    assert not marker.exists()


def test_pickle_bytes_under_a_json_or_npz_name_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    for name in ("evil.json", "evil.npz"):
        (tmp_path / name).write_bytes(pickle.dumps(Evil(marker)))
        with pytest.raises(RouterError, match="cannot read router artifact"):
            load_router(tmp_path / name)
    assert not marker.exists()


def test_npz_with_object_arrays_is_refused(tmp_path):
    np.savez(tmp_path / "obj.npz", __skeleton__=np.frombuffer(b"{}", np.uint8), a0=np.array([{"x": 1}], dtype=object))
    with pytest.raises(RouterError, match="dtype object is not one of"):
        load_router(tmp_path / "obj.npz")


def _state(path):
    return json.loads(path.read_text())


def _arr(state, key):
    a = state[key]
    return np.frombuffer(base64.b64decode(a["__ndarray__"]), dtype=a["dtype"]).reshape(a["shape"]).copy()


def _put(state, key, arr):
    arr = np.ascontiguousarray(arr)
    state[key] = {"__ndarray__": base64.b64encode(arr.tobytes()).decode(), "dtype": str(arr.dtype),
                  "shape": list(arr.shape)}


@pytest.mark.parametrize("damage,message", [
    (lambda s: _put(s, "bias", np.zeros(5)), "bias has shape"),
    (lambda s: _put(s, "w_dense", _arr(s, "w_dense")[:-1]), "w_dense has shape"),
    (lambda s: _put(s, "bias", np.array([np.nan, 0.0])), "NaN or infinite"),
    (lambda s: s["calib_y"].__setitem__(0, [float("nan")] * 3), "NaN"),
    (lambda s: s["rungs"][0].__setitem__("fixed_cost_usd", -1.0), "fixed_cost_usd"),
    (lambda s: s["rungs"][1].__setitem__("usd_per_input_token", float("inf")), "usd_per_input_token"),
    (lambda s: s["bias"].pop("dtype"), "dtype"),
    (lambda s: s.pop("w_sparse"), "missing w_sparse"),
    (lambda s: s.__setitem__("dependence", 3), "dependence"),
    (lambda s: s["featurizer"].__setitem__("window", [600]), "featurizer.window"),
    (lambda s: s["featurizer"].__setitem__("window", [-1, 400]), "featurizer.window"),
])
def test_damaged_artifacts_get_one_line(tmp_path, trained, damage, message):  # noqa: F811
    path = trained.save(tmp_path / "r.json")
    state = _state(path)
    damage(state)
    path.write_text(json.dumps(state))
    with pytest.raises(RouterError, match=message) as info:
        load_router(path)
    assert "\n" not in str(info.value)


def test_negative_cost_model_values_are_refused(tmp_path, trained):  # noqa: F811
    path = trained.save(tmp_path / "r.json")
    state = _state(path)
    tpc = _arr(state["cost_model"], "tokens_per_char")
    _put(state["cost_model"], "tokens_per_char", -tpc)
    path.write_text(json.dumps(state))
    with pytest.raises(RouterError, match="cost_model.tokens_per_char has negative"):
        load_router(path)


def test_npz_roundtrip_equals_json(tmp_path, trained):  # noqa: F811
    a, b = load_router(trained.save(tmp_path / "r.json")), load_router(trained.save(tmp_path / "r.npz"))
    texts = ["prove the theorem about x step by step", "tell me the colour of y"]
    assert np.allclose(a.predict(texts), b.predict(texts))
    assert np.allclose(a.attempt_costs(texts), b.attempt_costs(texts)) and a.default == b.default
