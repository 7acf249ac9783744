"""Benchmark: routing overhead in-process. One decision (features -> calibrated probabilities -> policy) p50 and
p99 (the artifact's default policy, a batch of one through the vectorised decision; the candidate list of
the explanation is not built), without sentence embeddings and with them (when the embeddings extra is installed), and batch decisions/s.

A router is trained on the recorded table first (3-fold calibration; quality is not measured here), unless
--router / --router-emb give artifacts. Requests are the table's prompts with their task classes, cycled.
The machine's load average is printed beside the figures: other processes inflate the wall-clock tail, so
the CPU time of the deciding thread (time.thread_time) is reported beside it.

Run:  python benchmarks/router_overhead.py [PATH] [--n 3000] [--no-embeddings] [--cold-caches]

Current figures, with the command, machine and date: docs/router-results.md ("Overhead").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paths import ROOT, require, shared_dir  # noqa: E402

DEFAULT_DATA = shared_dir() / "data" / "llmrouter-nim9" / "dev.csv"
DEFAULT_LADDER = ROOT / "ladders" / "llmrouter-nim9.yaml"


def train(path: Path, ladder: Path, embeddings: bool, rows: int | None = None):
    """A router trained on the table (in memory; its first `rows` prompts when given: decision time does not
    depend on the training size)."""
    from advisor.importers.recorded import ImportOptions, import_recorded
    from advisor.ladder import load_ladder
    from advisor.router.training.fit import fit_router, training_data_from_store
    from advisor.store import Store

    with Store.open(":memory:") as store:
        import_recorded(path, load_ladder(ladder), store, ImportOptions(suite_name="bench"))
        data = training_data_from_store(store, suite_name="bench")
    fit_on = data.subset(np.arange(min(rows, len(data.texts)))) if rows else data
    return fit_router(fit_on, folds=3, use_embeddings=embeddings), data


def _cold() -> None:
    """Forget cached sentence embeddings, so that every timed request is embedded afresh."""
    from advisor.router.model import features

    features._EMB_CACHE.clear()


class CacheEvictor:
    """Between two timed decisions, push the decision's code and data out of the CPU caches, as a live service
    meets them: between two of its requests Triton, the HTTP layer and the load generator run on the same
    cores (`--cold-caches`). It writes over a buffer larger than the caches and serialises a large object."""

    def __init__(self, mib: int = 48):
        import json

        self.buf = np.zeros(mib * 2 ** 20 // 8)
        self.junk = {f"k{i}": [i, str(i) * 3, {"a": i}] for i in range(3000)}
        self.dumps = json.dumps

    def __call__(self) -> None:
        self.buf += 1.0
        self.dumps(self.junk)


def one_decision_latency(model, texts, classes, config, n: int, warm_other: int = 0,
                         evict=None) -> dict[str, float]:
    """p50 / p99 / max milliseconds of `route_one` over n requests (after 50 warm-up calls, and after
    `warm_other` calls on the table's last prompts, which are not timed: a service that has seen traffic);
    `evict()`, when given, runs before each timed decision (not timed)."""
    from advisor.router.routing.route import route_one

    warm = list(range(50)) + list(range(len(texts) - min(warm_other, max(0, len(texts) - n)), len(texts)))
    for i in warm:
        route_one(model, texts[i % len(texts)], classes[i % len(texts)], config, explain=False)
    _cold()
    times, cpu = np.empty(n), np.empty(n)
    for i in range(n):
        j = i % len(texts)
        if evict is not None:
            evict()
        c0, t0 = time.thread_time(), time.perf_counter()
        route_one(model, texts[j], classes[j], config, explain=False)
        times[i], cpu[i] = time.perf_counter() - t0, time.thread_time() - c0
    return {"p50_ms": float(np.percentile(times, 50) * 1e3), "p99_ms": float(np.percentile(times, 99) * 1e3),
            "max_ms": float(times.max() * 1e3), "cpu_p50_ms": float(np.percentile(cpu, 50) * 1e3),
            "cpu_p99_ms": float(np.percentile(cpu, 99) * 1e3), "n": n}


def stage_times(model, texts, classes, config, n: int) -> dict[str, tuple[float, float]]:
    """(p50, p99) CPU milliseconds per stage over n requests seen once: the character and word n-gram hashing
    of a prompt whose words are new to the caches, the cues, then the whole decision with those words cached."""
    from advisor.router.model import features, hashing
    from advisor.router.routing.route import route_one

    f = model.featurizer
    h = hashing.hasher(f.n_hash)
    clock = time.thread_time
    rows = []
    for j in range(n):
        t = texts[j % len(texts)]
        t0 = clock()
        seen = f.view(t)  # the featuriser's text window (the whole text for artifacts without one)
        h.char_ids(seen[: f.char_cap])
        t1 = clock()
        h.word_ids(seen[: f.word_cap])
        t2 = clock()
        features.cues(t, seen if f.window else None)
        t3 = clock()
        route_one(model, t, classes[j % len(texts)], config, explain=False)
        rows.append((t1 - t0, t2 - t1, t3 - t2, clock() - t3))
    ms = np.array(rows) * 1e3
    names = ("char n-grams, first time", "word n-grams, first time", "cues", "decision, words cached")
    return {name: (float(np.percentile(ms[:, k], 50)), float(np.percentile(ms[:, k], 99)))
            for k, name in enumerate(names)}


def batch_rate(model, texts, classes, config) -> float:
    """Decisions per second of `route_batch` over all texts."""
    from advisor.router.routing.route import route_batch

    _cold()
    t0 = time.perf_counter()
    route_batch(model, texts, classes, config)
    return len(texts) / (time.perf_counter() - t0)


def run(argv: list[str] | None = None) -> dict:
    """Measure and print; return the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT_DATA))
    ap.add_argument("--ladder", default=str(DEFAULT_LADDER))
    ap.add_argument("--n", type=int, default=3000, help="single decisions to time")
    ap.add_argument("--router", default=None, help="artifact without embeddings (else trained here)")
    ap.add_argument("--router-emb", default=None, help="artifact with embeddings (else trained here)")
    ap.add_argument("--no-embeddings", action="store_true")
    ap.add_argument("--train-rows", type=int, default=None, help="train on the first N prompts only (faster)")
    ap.add_argument("--stages", action="store_true", help="also print per-stage CPU p50/p99 (n-gram hashing of "
                    "new words, cues, the decision once words are cached), single-shot, without embeddings")
    ap.add_argument("--warm-other", type=int, default=0, help="before timing, route N of the table's last prompts "
                    "(never timed when --n leaves room) so the n-gram caches hold what a running service has seen")
    ap.add_argument("--cold-caches", action="store_true", help="evict the CPU caches before every timed decision "
                    "(`CacheEvictor`: how a service's decision meets them between requests; numpy calls, not "
                    "arithmetic, then dominate); at most 1,000 decisions per variant")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from advisor.router.model.artifact import load_router
    from advisor.router.model.features import embeddings_available
    from advisor.router.routing.rule import PolicyConfig

    path = require(Path(args.path))
    model, data = (load_router(args.router), None) if args.router else train(path, Path(args.ladder), False,
                                                                                    args.train_rows)
    if data is None:
        from advisor.importers.recorded import read_table

        rows = read_table(path)
        texts, classes = [str(r["prompt"]) for r in rows], [r.get("task") for r in rows]
    else:
        texts, classes = data.texts, data.classes
    configs = {"single-shot": PolicyConfig(mode="single"), "escalation": PolicyConfig(mode="escalate")}
    results = {}
    lengths = np.array([len(t) for t in texts])
    print(f"requests: {len(texts)} prompts of {path} (characters: median {np.median(lengths):,.0f}, "
          f"p90 {np.percentile(lengths, 90):,.0f}, p99 {np.percentile(lengths, 99):,.0f}, max {lengths.max():,}); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    variants = [("no embeddings", model)]
    if not args.no_embeddings:
        if embeddings_available():
            t0 = time.perf_counter()
            emb = load_router(args.router_emb) if args.router_emb else train(path, Path(args.ladder), True)[0]
            print(f"(embeddings router ready in {time.perf_counter() - t0:.0f}s)")
            variants.append(("with MiniLM embeddings", emb))
        else:
            print("embeddings extra not installed: skipping the embeddings variant")
    for label, m in variants:
        for mode, cfg in configs.items():
            lat = one_decision_latency(m, texts, classes, cfg,
                                       args.n if "no" in label and not args.cold_caches else min(args.n, 1000),
                                       args.warm_other, CacheEvictor() if args.cold_caches else None)
            rate = batch_rate(m, texts, classes, cfg)
            results[(label, mode)] = {**lat, "batch_per_s": rate}
            print(f"{label:<24} {mode:<12} one decision wall p50 {lat['p50_ms']:.3f} ms, p99 {lat['p99_ms']:.3f} ms "
                  f"(max {lat['max_ms']:.2f}; CPU time p50 {lat['cpu_p50_ms']:.3f}, p99 {lat['cpu_p99_ms']:.3f}; "
                  f"n={lat['n']}); batch {rate:,.0f} decisions/s")
    if args.stages:
        from advisor.router.model import hashing

        hashing.hasher.cache_clear()  # the stages start from empty n-gram caches
        for name, (p50, p99) in stage_times(model, texts, classes, configs["single-shot"], args.n).items():
            print(f"stage {name:<26} CPU p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return results


if __name__ == "__main__":
    run(sys.argv[1:])
