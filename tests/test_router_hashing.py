"""The one-request featurisation fast paths equal the batch (sklearn) path: n-gram buckets and cues."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from advisor.router.model.features import CUE_CAP, Featurizer, cues
from advisor.router.model.hashing import hasher, ngram_counts, vectorizers

ADVERSARIAL = [
    "",
    "   ",
    "a",
    "I am",
    "ΑΣ ΟΔΟΣ Σ ς",  # final sigma: lower-casing depends on context
    "İstanbul ǅemal ﬁne Straße",  # one upper case letter lower-cases to two characters, ligatures
    "tab\tseparated\nlines\r\nand\x0bvertical\x0cfeed\x1cfile\x1dsep\u00a0nbsp\u2003em\u3000ideographic",
    "word,word;word.word!!! ?? (a) b) c. d: e",
    "def f(x):\n    return x == 1  # code {};\n```python\nprint(2)```",
    "x" * 7000,
    "repeat " * 1500,
    "数学の問題: 3 + 4 = ? and ½ ² ³ ٣ digits",
    "emoji 🙂🙂 mixed CASE Words and_underscores 42nd",
]


def _random_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcXYZ 019 \t\n.,;:?!()[]{}=+-*/$^_ΣσςİıßéÉ数😀\u00a0\u2003"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400))) for _ in range(n)]


def _reference_row(text: str, n_hash: int, char_cap: int, word_cap: int) -> np.ndarray:
    chars, words = vectorizers(n_hash)
    row = np.zeros(2 * n_hash)
    row[:n_hash] = chars.transform([text[:char_cap]]).toarray().ravel()
    row[n_hash:] = words.transform([text[:word_cap]]).toarray().ravel()
    return row


@pytest.mark.parametrize("n_hash", [2 ** 10, 2 ** 16])
def test_ngram_counts_equal_hashing_vectorizer(n_hash):
    for text in ADVERSARIAL + _random_texts(200):
        for _ in range(2):  # first call fills the caches, second reads them
            idx, counts = ngram_counts(text, n_hash, 1000, 6000)
            assert np.all(np.diff(idx) > 0), "indices sorted and distinct"
            row = np.zeros(2 * n_hash)
            row[idx] = counts
            assert np.array_equal(row, _reference_row(text, n_hash, 1000, 6000)), text[:60]


def test_hasher_caches_are_bounded(monkeypatch):
    import advisor.router.model.hashing as hashing

    monkeypatch.setattr(hashing, "CACHE_MAX", 50)
    h = hasher(2 ** 10)
    for text in _random_texts(30, seed=3):
        h.char_ids(text)
        h.word_ids(text)
    assert len(h.words) <= 50 + 200 and len(h.tokens) <= 50 + 200 and len(h.pairs) <= 50 + 200


def _cues_reference(text: str) -> list[float]:
    head = text[:CUE_CAP]
    n = max(1, len(head))
    alnum_or_space = sum(map(str.isalnum, head)) + sum(map(str.isspace, head))
    return [sum(map(str.isdigit, head)) / n, sum(map(str.isupper, head)) / n, (len(head) - alnum_or_space) / n,
            sum(ord(ch) > 127 for ch in head) / n]


def test_cues_fast_ascii_path_equals_per_character_predicates():
    texts = ADVERSARIAL + _random_texts(100) + ["".join(map(chr, range(128))) * 3, "ABC def 123 \x1c\x1f\x7f"]
    for text in texts:
        got = cues(text)
        assert got[2:6] == _cues_reference(text), text[:40]
        assert got[0] == math.log1p(len(text))


def test_transform_one_equals_transform_on_long_and_unicode_texts():
    texts = ADVERSARIAL + _random_texts(40, seed=11)
    classes = ["a" if i % 2 else None for i in range(len(texts))]
    f = Featurizer(n_hash=2 ** 12).fit(texts, classes)
    xs, xd = f.transform(texts, classes)
    for i, t in enumerate(texts):
        idx, val, dense = f.transform_one(t, classes[i])
        row = np.zeros(f.n_sparse, np.float32)
        row[idx] = val
        assert np.allclose(row, xs[i].toarray().ravel(), atol=1e-6) and np.allclose(dense, xd[i])


def test_cue_patterns_match_like_the_plain_alternations():
    import re

    from advisor.router.model.features import _CODE, _MATH

    plain = {_CODE: re.compile(r"```|\bdef |\breturn\b|\bimport |[{};]|\bclass |\bfunction\b|==|\bprint\("),
             _MATH: re.compile(r"\$|\\frac|\\sqrt|\^|\bsolve\b|\bequation\b|[+\-*/=]\s*\d|\d\s*[+\-*/=]")}
    rng = random.Random(5)
    pieces = ["```", "def ", "undef ", "return", "returns", "import ", "{", "}", ";", "class ", "function", "==",
              "===", "print(", "$", "\\frac", "\\sqrt", "^", "solve", "resolve", "equation", "+ 3", "4 *", "٣=",
              "=\u0663", "x", " ", "\n", "a", "7"]
    texts = ADVERSARIAL + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 80))) for _ in range(500)]
    for fast, reference in plain.items():
        for text in texts:
            assert fast.findall(text) == reference.findall(text), (reference.pattern, text)


def test_text_window_reads_head_and_tail_of_long_texts_only():
    from advisor.router.model.features import text_window

    assert text_window("short text", (6, 4)) == "short text"  # fits in head + tail: unchanged
    assert text_window("0123456789abcdef", (6, 4)) == "012345\ncdef"
    assert text_window("0123456789abcdef", (6, 0)) == "012345"
    assert text_window("x" * 5000, None) == "x" * 5000


def test_featurizer_window_is_recorded_and_older_states_read_the_whole_text():
    texts = ["alpha " * 400 + "tail words here?", "short one", "beta gamma " * 300 + "end $x^2$"]
    classes = ["a", "b", None]
    f = Featurizer(n_hash=2 ** 10, window=(60, 40)).fit(texts, classes)
    assert Featurizer.from_state(f.state()).window == (60, 40)
    idx, _, dense = f.transform_one(texts[0], "a")
    want, _ = ngram_counts("alpha " * 10 + "\n" + ("alpha " * 400 + "tail words here?")[-40:], 2 ** 10,
                           f.char_cap, f.word_cap)
    assert np.array_equal(idx, want)
    state = f.state()
    del state["window"]  # an artifact written before the window
    old = Featurizer.from_state(state)
    assert old.window is None
    idx_old, _, dense_old = old.transform_one(texts[0], "a")
    assert np.array_equal(idx_old, ngram_counts(texts[0], 2 ** 10, 1000, 6000)[0])
    raw = (np.asarray(cues(texts[0]), dtype=np.float32) - old.cue_mean) / old.cue_std
    assert np.allclose(dense_old[: len(raw)], raw)
    assert not np.allclose(dense[: len(raw)], dense_old[: len(raw)])  # the window changed the cue fractions


def test_wb_grams_equal_the_char_wb_analyzer_per_word():
    from advisor.router.model.hashing import _wb_grams

    analyzer = vectorizers(2 ** 10)[0].build_analyzer()
    words = {w for text in ADVERSARIAL + _random_texts(100, seed=9) for w in text.lower().split()}
    for w in sorted(words) + ["a", "ab", "abc", "abcd"]:
        assert _wb_grams(w) == analyzer(w), w


def test_numpy_gram_hashing_equals_murmurhash_per_gram(monkeypatch):
    from itertools import accumulate, chain

    import advisor.router.model.hashing as hashing

    rng = random.Random(4)
    ascii_texts = ["".join(rng.choice("abcXYZ 019 \t\n.,;:?!()[]{}=+-*/$^_\x7f\x01") for _ in range(rng.randint(0, 400)))
                   for _ in range(100)]
    words = sorted({w for t in ascii_texts + [a for a in ADVERSARIAL if a.isascii()] for w in t.lower().split()})
    words += ["a", "ab", "abc", "abcd"]
    murmur = hasher(2 ** 10).murmur
    for n_hash in (2 ** 10, 2 ** 16):
        flat, ends = hashing._wb_buckets_ascii(words, n_hash)
        grams = list(map(hashing._wb_grams, words))
        assert flat == [abs(murmur(g)) % n_hash for g in chain.from_iterable(grams)]
        assert ends == list(accumulate(map(len, grams)))
    monkeypatch.setattr(hashing, "VECTOR_MIN_WORDS", 1)  # every text's new words through the numpy path
    for n_hash in (2 ** 10, 2 ** 12):
        hashing.hasher.cache_clear()
        for text in ascii_texts + ADVERSARIAL:
            idx, counts = ngram_counts(text, n_hash, 1000, 6000)
            row = np.zeros(2 * n_hash)
            row[idx] = counts
            assert np.array_equal(row, _reference_row(text, n_hash, 1000, 6000)), text[:60]
    hashing.hasher.cache_clear()
