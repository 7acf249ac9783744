"""Live outcomes as training data: the soft-label model (Beta prior), merging into training data, and the
promotion gate refusing a candidate trained on shuffled live labels. Real DuckDB files, no Triton: the live rows
are written with `Store.add_live`, the same call the service's ingest uses (the service path is
tests/test_feedback.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from advisor.router.feedback.live import class_priors, label_prior, live_attempts, merge_live, posterior, split_by_time
from advisor.router.feedback.promotion import gate
from advisor.router.model.artifact import RungModel
from advisor.router.training.fit import TrainingData, fit_router
from advisor.scores import VerifierErrors
from advisor.store import Store

WORDS = {"a": "invoice ledger refund tax audit receipt".split(), "b": "poem verse rhyme story novel song".split()}
RUNGS = [RungModel("small", 0, 1e-6, 1e-4, 100), RungModel("large", 1, 1e-5, 1e-3, 100)]
#: probe usable rates per class: small looks good on both classes in the probe
PROBE = {"a": {"small": 0.7, "large": 0.9}, "b": {"small": 0.7, "large": 0.9}}
#: live accept rates (perfect verifier unless stated): class a rejects every small answer
LIVE = {"a": {"small": 0.0, "large": 0.9}, "b": {"small": 0.8, "large": 0.9}}


def _text(cls: str, rng) -> str:
    return f"{cls}-task: " + " ".join(rng.choice(WORDS[cls], 5)) + f" #{int(rng.integers(1e9))}"


def probe_data(n_per_class: int = 40, seed: int = 0, probe: dict = PROBE) -> TrainingData:
    rng = np.random.default_rng(seed)
    texts, classes = [], []
    for c in probe:
        for _ in range(n_per_class):
            texts.append(_text(c, rng))
            classes.append(c)
    usable = np.array([[float(rng.random() < probe[c][r.name]) for r in RUNGS] for c in classes])
    return TrainingData(texts=texts, classes=classes, groups=[f"g{i}" for i in range(len(texts))], rungs=RUNGS,
                        usable=usable, runs=np.ones(usable.shape), cost=np.tile([1e-4, 1e-3], (len(texts), 1)),
                        input_tokens=np.full(len(texts), 10.0), provenance={"data_hash": "probe"})


def write_live(store: Store, n: int, seed: int = 1, live: dict = LIVE, fa: float = 0.0) -> None:
    """n live decisions alternating classes a/b, one second apart: small first, large after a rejection."""
    rng = np.random.default_rng(seed)
    t0 = dt.datetime(2026, 1, 1)
    decisions, outcomes = [], []
    for i in range(n):
        c = "ab"[i % 2]
        did = f"dec{i:05d}"
        decisions.append({"decision_id": did, "created_at": t0 + dt.timedelta(seconds=i), "request_hash": did,
                          "prompt_text": _text(c, rng), "task_class": c, "policy": "router", "mode": "escalate",
                          "chosen_rung": "small", "status": "ok", "class_source": "given", "simulated": False})
        for attempt, rung in enumerate(("small", "large")):
            ok = bool(rng.random() < live[c][rung]) or bool(rng.random() < fa)
            outcomes.append({"decision_id": did, "attempt": attempt, "rung": rung, "cost_usd": 1e-4 * 10 ** attempt,
                             "input_tokens": 10, "verified": True, "accepted": ok,
                             "created_at": t0 + dt.timedelta(seconds=i), "failover": False})
            if ok:
                break
    store.add_live(decisions, outcomes)


def test_label_prior_is_a_beta_posterior_mean():
    assert label_prior(0, 0, 0, 0, VerifierErrors()) == pytest.approx(0.5)  # Beta(1, 1)
    assert label_prior(3, 10, 0, 0, VerifierErrors()) == pytest.approx(4 / 12)
    # 20 live accepts of 20 through a verifier with fa 0.1, fr 0.1: de-noised rate clipped to 1
    assert label_prior(0, 10, 20, 20, VerifierErrors(0.1, 0.1)) == pytest.approx(21 / 32)
    # an uninformative verifier (fa + fr >= 1) adds nothing
    assert label_prior(0, 10, 20, 20, VerifierErrors(0.5, 0.5)) == pytest.approx(1 / 12)


def test_a_rung_the_probe_never_saw_pass_learns_from_live_accepts(tmp_path):
    """The old defect: prior = probe rate 0 made every accept a label of ~0 under a verifier with false accepts."""
    probe = {"a": {"small": 0.0, "large": 0.9}, "b": {"small": 0.0, "large": 0.9}}
    data = probe_data(probe=probe)
    assert np.nanmean(data.usable[:, 0]) == 0.0
    verifier = VerifierErrors(false_accept=0.05, false_reject=0.02)
    old_label = posterior(True, 0.0, verifier)  # what a probe-rate prior gave
    assert old_label < 1e-3
    with Store.open(tmp_path / "s.duckdb") as store:
        write_live(store, 200, live={"a": {"small": 0.95, "large": 0.9}, "b": {"small": 0.0, "large": 0.9}})
        rows, skipped = live_attempts(store)
    assert skipped == 0
    rates = {"a": verifier, "b": verifier}
    priors = class_priors(data, rows, rates)
    assert priors[("a", "small")] > 0.6 and priors[("b", "small")] < 0.05
    merged = merge_live(data, rows, rates)
    assert "Beta(1, 1)" in merged.provenance["live"]["label"]
    new = [i for i in range(len(data.texts), len(merged.texts)) if merged.classes[i] == "a"]
    labels = merged.usable[new, 0]
    assert np.nanmean(labels[np.isfinite(labels)]) > 0.8
    model = fit_router(merged, folds=3, n_hash=2 ** 10, tune=False, stack=False)
    P = model.predict([_text("a", np.random.default_rng(9)) for _ in range(20)], ["a"] * 20)
    assert P[:, 0].mean() > 0.5, P[:, 0].mean()


@pytest.fixture(scope="module")
def gate_store(tmp_path_factory):
    """A store with 400 live decisions; the serving router trained on the 300 oldest with their real verdicts."""
    path = tmp_path_factory.mktemp("gate") / "live.duckdb"
    with Store.open(path) as store:
        write_live(store, 400)
    with Store.open(path, read_only=True) as store:
        rows, _ = live_attempts(store)
    train, held = split_by_time(rows, 100)
    serving = fit_router(merge_live(probe_data(), train, {}, held_out=100), folds=3, n_hash=2 ** 10, tune=False,
                        predictors=["router"])  # the router candidate: its second stage is what is checked
    return path, train, serving


def _candidate(train, labels: np.ndarray):
    rows = [{**r, "accepted": bool(y)} for r, y in zip(train, labels)]
    return fit_router(merge_live(probe_data(), rows, {}, held_out=100), folds=3, n_hash=2 ** 10, tune=False)


@pytest.mark.parametrize("corruption", ["shuffled", "inverted"])
def test_gate_refuses_a_candidate_trained_on_corrupted_labels(gate_store, corruption):
    path, train, serving = gate_store
    y = np.array([bool(r["accepted"]) for r in train])
    labels = np.random.default_rng(0).permutation(y) if corruption == "shuffled" else ~y
    candidate = _candidate(train, labels)
    with Store.open(path, read_only=True) as store:
        res = gate(candidate, serving, store, window=100)
    print(f"{corruption}: {res.reason} (Brier serving {res.brier_serving:.4f}, candidate {res.brier_candidate:.4f})")
    assert res.decisions == 100 and not res.passed
    assert res.brier_candidate > res.brier_serving and res.interval[0] > res.margin, res.as_dict()
    assert "upper end above the margin" in res.reason
    assert res.per_class["a"]["brier_candidate"] > res.per_class["a"]["brier_serving"]


def test_gate_passes_a_candidate_trained_on_the_real_labels(gate_store):
    """The control: the same training rows with their real verdicts (another seed) is not worse."""
    path, train, serving = gate_store
    y = np.array([bool(r["accepted"]) for r in train])
    rows = [{**r, "accepted": bool(v)} for r, v in zip(train, y)]
    candidate = fit_router(merge_live(probe_data(), rows, {}, held_out=100), folds=3, n_hash=2 ** 10, tune=False,
                           seed=1)
    with Store.open(path, read_only=True) as store:
        res = gate(candidate, serving, store, window=100)
    print(f"real labels: {res.reason} (Brier serving {res.brier_serving:.4f}, candidate {res.brier_candidate:.4f})")
    assert res.passed, res.as_dict()


def test_stacked_router_keeps_live_prompts_with_untried_rungs(gate_store):
    """Live prompts only hold the rungs their chain tried (large is never tried after small is accepted): the
    second stage keeps them (missing rungs imputed by class), so class b's small rung is not learned from its
    rejected attempts alone (dropping them gave P(small | b) 0.42 against a live accept rate of 0.8)."""
    _, _, serving = gate_store
    assert serving.stack_w is not None
    rng = np.random.default_rng(5)
    for cls, lo, hi in (("a", 0.0, 0.25), ("b", 0.65, 0.95)):
        P = serving.predict([_text(cls, rng) for _ in range(30)], [cls] * 30)
        assert lo <= P[:, 0].mean() <= hi, (cls, P[:, 0].mean())
