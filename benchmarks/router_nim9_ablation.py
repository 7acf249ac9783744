"""Ablation: why the router ties the tf-idf baseline on llmrouter-nim9 dev, and what was tried (issue 10, item 9).

Every variant gives per-rung P(usable) out of fold (the same grouped 5-fold split as `router_nim9.py`), routed
single-shot by the value rule argmax_r V x P_r - cost_r with V swept over the evaluation's grid; AIQ over the
single rungs' cost range (as in `advisor.router.evaluation.metrics`), minus a reference's (the baseline unless a row
says otherwise), with a paired bootstrap interval (requests resampled). Also the AUC **within** each class (0.5: the text adds nothing to the class).

Variants: the tf-idf logistic baseline (mean cost per rung, as in the evaluation); the router as trained by
`fit_router` (second stage, per-request costs); per-class usable rates alone (out of fold, and in-sample as an
optimistic bound of any router that knows only the class); a pooled logistic model over all rungs (shared
text weights + per-rung ones at half scale + rung x class intercepts: strength shared across rungs); the mean
of router, baseline and class rates; with ``--embeddings``, MiniLM + class logistic regression per rung and a
within-class nearest-neighbour rate; with classes hidden at test, the baseline without class, the router
without and with class prediction (`classpred.py`).

Run:  python benchmarks/router_nim9_ablation.py [PATH] [--embeddings] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paths import ROOT, require, shared_dir  # noqa: E402

DEFAULT_DATA = shared_dir() / "data" / "llmrouter-nim9" / "dev.csv"


def load(path: Path):
    """Prompt-level training data of the wide table (complete rows only), as `router_nim9.py` reads it."""
    from advisor.importers.recorded import ImportOptions, import_recorded
    from advisor.ladder import load_ladder
    from advisor.router.evaluation.evaluate import _complete
    from advisor.router.training.fit import training_data_from_store
    from advisor.store import Store

    with Store.open(":memory:") as store:
        import_recorded(path, load_ladder(ROOT / "ladders" / "llmrouter-nim9.yaml"), store,
                        ImportOptions(suite_name="bench"))
        return _complete(training_data_from_store(store, suite_name="bench"))[0]


class Judge:
    """Value-rule sweep, AIQ and paired bootstrap against a reference, on fixed outcomes Y and costs C."""

    def __init__(self, Y: np.ndarray, C: np.ndarray, B: int, seed: int = 0) -> None:
        from advisor.router.training.tuning import value_grid

        self.Y, self.C = Y, C
        self.values = value_grid(C.mean(axis=0))
        self.lo, self.hi = float(C.mean(axis=0).min()), float(C.mean(axis=0).max())
        n = len(Y)
        rng = np.random.default_rng(seed)
        self.W = np.vstack([np.full(n, 1.0 / n), rng.multinomial(n, np.full(n, 1.0 / n), size=B) / n])
        self.ref: np.ndarray | None = None

    def aiqs(self, P: np.ndarray, costs: np.ndarray) -> np.ndarray:
        """AIQ of the value-rule sweep for the full sample (index 0) and every bootstrap replicate."""
        from advisor.router.evaluation.metrics import aiq

        rows = np.arange(len(P))[:, None]
        pick = np.stack([np.argmax(v * P - costs, axis=1) for v in self.values], axis=1)
        cc, qq = self.W @ self.C[rows, pick], self.W @ self.Y[rows, pick]
        return np.array([aiq(list(zip(cc[b], qq[b])), self.lo, self.hi) for b in range(len(self.W))])

    def line(self, name: str, P: np.ndarray, costs: np.ndarray, classes, reference: bool = False) -> str:
        """One table row: AIQ, difference to the reference with its 95% interval, mean within-class AUC."""
        from advisor.router.training.fit import within_class_auc

        a = self.aiqs(P, costs)
        if reference:
            self.ref = a
        d = a - self.ref
        w = np.ones(len(P))
        wc = [within_class_auc(P[:, j], self.Y[:, j], w, classes) for j in range(P.shape[1])]
        wc_mean = np.mean([x for x in wc if x is not None])
        return (f"  {name:<52} AIQ {a[0]:.4f}  minus reference {d[0]:+.4f} "
                f"[{np.percentile(d[1:], 2.5):+.4f}, {np.percentile(d[1:], 97.5):+.4f}]  AUC in class {wc_mean:.3f}")


def class_rates(Y: np.ndarray, classes, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Per-class usable rate of each rung on `train`, for the rows `test` (the rung's rate for an unseen class)."""
    cls = np.array([c or "" for c in classes])
    out = np.tile(Y[train].mean(axis=0), (len(test), 1))
    for c in np.unique(cls[test]):
        m = cls[train] == c
        if m.any():
            out[cls[test] == c] = Y[train][m].mean(axis=0)
    return out


def pooled(data, train: np.ndarray, test: np.ndarray, specific: float = 0.5) -> np.ndarray:
    """One logistic regression over all (prompt, rung) pairs: rung x class intercepts, shared tf-idf weights and
    per-rung tf-idf weights scaled by `specific` (so shrunk towards the shared ones)."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    R = data.usable.shape[1]
    names = sorted({c or "" for c in data.classes})
    oh = np.array([[(c or "") == k for k in names] for c in data.classes], float)
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit([data.texts[i] for i in train])

    def design(idx):
        X = vec.transform([data.texts[i] for i in idx])
        return sp.hstack([sp.block_diag([sp.csr_matrix(oh[idx])] * R), sp.vstack([X] * R),
                          sp.block_diag([X] * R) * specific], format="csr")

    clf = LogisticRegression(C=1.0, solver="liblinear", max_iter=500)
    clf.fit(design(train), data.usable[train].T.ravel())
    return clf.predict_proba(design(test))[:, 1].reshape(R, len(test)).T


def run(argv: list[str] | None = None) -> None:
    """Parse arguments, compute every variant out of fold and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT_DATA))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--embeddings", action="store_true", help="also MiniLM variants (needs the embeddings extra)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")

    from advisor.router.training.baseline import TfidfLogistic
    from advisor.router.training.fit import fit_router, grouped_folds

    t0 = time.perf_counter()
    data = load(require(Path(args.path)))
    Y, C, n, R = data.usable, data.cost, *data.usable.shape
    folds = grouped_folds(data.groups, args.folds, args.seed)
    judge = Judge(Y, C, args.bootstrap, args.seed)
    mean_cost = np.tile(C.mean(axis=0), (n, 1))
    P = {k: np.zeros((n, R)) for k in ("base", "router", "class", "pooled", "base_hidden", "router_hidden",
                                       "router_hidden_nocm", "emb", "knn")}
    router_cost = np.zeros((n, R))
    for f, (tr, te) in enumerate(folds):
        train, texts, cls = data.subset(tr), [data.texts[i] for i in te], [data.classes[i] for i in te]
        base = TfidfLogistic().fit(train)
        P["base"][te], P["base_hidden"][te] = base.predict(texts, cls), base.predict(texts, [None] * len(te))
        model = fit_router(train, folds=3, tune=False, seed=args.seed)
        P["router"][te], router_cost[te] = model.predict_with_costs(texts, cls)
        P["router_hidden"][te] = model.predict(texts, [None] * len(te))
        model.featurizer.class_w = None  # the same router, unknown class scored as the average class
        P["router_hidden_nocm"][te] = model.predict(texts, [None] * len(te))
        P["class"][te] = class_rates(Y, data.classes, tr, te)
        P["pooled"][te] = pooled(data, tr, te)
        print(f"fold {f + 1}/{args.folds} done ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    cls_all = data.classes
    print(f"data: {args.path} ({n} prompts, {R} rungs); {args.folds}-fold CV grouped by prompt (seed {args.seed}); "
          f"value rule swept; AIQ over the single rungs' cost range; paired bootstrap {args.bootstrap} replicates")
    print(judge.line("tf-idf logistic baseline (reference)", P["base"], mean_cost, cls_all, reference=True))
    print(judge.line("router (fit_router: first stage + second stage)", P["router"], router_cost, cls_all))
    print(judge.line("per-class usable rates only (out of fold)", P["class"], C, cls_all))
    insample = class_rates(Y, data.classes, np.arange(n), np.arange(n))
    print(judge.line("per-class rates IN-SAMPLE (optimistic bound, class only)", insample, C, cls_all))
    print(judge.line("pooled over rungs (shared + 0.5 x per-rung tf-idf)", P["pooled"], C, cls_all))
    print(judge.line("mean of router, baseline, class rates", (P["router"] + P["base"] + P["class"]) / 3, C,
                     cls_all))
    ens = (P["router"] + P["base"] + P["class"]) / 3
    judge.line("router (reference)", P["router"], router_cost, cls_all, reference=True)
    print(judge.line("mean of router, baseline, class rates (reference: the router)", ens, C, cls_all))
    resid = Y - P["class"]
    corr = np.corrcoef(resid.T)[np.triu_indices(R, 1)]
    print(f"  outcomes within class (minus out-of-fold class rates): mean correlation between rungs {corr.mean():.3f}")
    judge.line("baseline (reference again)", P["base"], mean_cost, cls_all, reference=True)
    if args.embeddings:
        add_embedding_variants(data, folds, P)
        print(judge.line("MiniLM + class, logistic per rung (C=0.3)", P["emb"], C, cls_all))
        print(judge.line("MiniLM nearest neighbours within class (k=100)", P["knn"], C, cls_all))
    print("classes hidden at test (requests without a class):")
    print(judge.line("tf-idf logistic baseline, no class (reference)", P["base_hidden"], mean_cost, cls_all,
                     reference=True))
    print(judge.line("router, unknown class = average class", P["router_hidden_nocm"], router_cost, cls_all))
    print(judge.line("router, class predicted (classpred.py)", P["router_hidden"], router_cost, cls_all))
    print(f"{time.perf_counter() - t0:.0f}s")


def add_embedding_variants(data, folds, P: dict) -> None:
    """MiniLM sentence embeddings: a logistic regression per rung on embeddings + class one-hot, and the
    usable rate of the 100 nearest training neighbours of the same class (shrunk to the class rate)."""
    from sklearn.linear_model import LogisticRegression

    from advisor.router.model.features import embed

    E = embed(data.texts)
    names = sorted({c or "" for c in data.classes})
    cls = np.array([c or "" for c in data.classes])
    X = np.hstack([E, 3.0 * np.array([[c == k for k in names] for c in cls], float)])
    Y = data.usable
    for tr, te in folds:
        for j in range(Y.shape[1]):
            P["emb"][te, j] = LogisticRegression(C=0.3, max_iter=2000).fit(X[tr], Y[tr, j]).predict_proba(X[te])[:, 1]
        for c in np.unique(cls[te]):
            a, b = tr[cls[tr] == c], te[cls[te] == c]
            if not len(a):
                continue
            k = min(100, len(a))
            near = np.argpartition(-(E[b] @ E[a].T), k - 1, axis=1)[:, :k]
            P["knn"][b] = (Y[a][near].sum(axis=1) + 10 * Y[a].mean(axis=0)) / (k + 10)


if __name__ == "__main__":
    run(sys.argv[1:])
