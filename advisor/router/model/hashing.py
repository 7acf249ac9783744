"""One request's hashed n-gram counts, exactly as the featuriser's HashingVectorizers compute them, for the hot path.

A routing decision featurises one prompt; sklearn's ``transform`` of a one-row batch costs more than the whole
decision budget, and walking every n-gram in Python is what made long prompts (thousands of n-grams) the tail
of the decision latency. Here the work per request is one dictionary look-up per *word* (character n-grams)
or per token pair (word n-grams), at C speed (``map`` over ``dict.get``); n-grams are hashed once, with
HashingVectorizer's own murmurhash3 rule, the first time they are seen, and remembered (bounded caches per hash
width); a request's many new ASCII words have their character n-grams cut and hashed in numpy in one pass. The multiset of n-grams is the vectorizers' own:

- ``char_wb`` (3-4 grams): the vectorizer splits its lower-cased text on white space and takes the n-grams of
  each padded word independently, so a text's n-grams are the concatenation of its words' n-grams (computed
  with the vectorizer's own analyzer, per distinct word);
- ``word`` (1-2 grams): the vectorizer's own preprocessor and tokenizer, unigrams = tokens, bigrams =
  ``"a b"`` for adjacent tokens (sklearn's rule), hashed through the tuple (a, b).

`tests/test_router_hashing.py` checks equality with ``HashingVectorizer.transform`` on the benchmark prompts and
on adversarial text (Unicode case, white space of every kind, short words).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from itertools import accumulate, chain

import numpy as np

CACHE_MAX = 200_000  #: entries per cache (words, n-grams, token pairs) before it is emptied


@lru_cache(maxsize=4)
def vectorizers(n_hash: int):
    """The featuriser's (char_wb 3-4, word 1-2) HashingVectorizers for hash width `n_hash`."""
    # heavy dependency, imported on use: scikit-learn
    from sklearn.feature_extraction.text import HashingVectorizer

    kw = dict(n_features=n_hash, alternate_sign=False, norm=None, lowercase=True, dtype=np.float32)
    return (HashingVectorizer(analyzer="char_wb", ngram_range=(3, 4), **kw),
            HashingVectorizer(analyzer="word", ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b", **kw))


class _Hasher:
    """Per hash width: the analyzers, and caches of word -> char n-gram buckets, token -> bucket, pair -> bucket."""

    def __init__(self, n_hash: int) -> None:
        # heavy dependency, imported on use: scikit-learn
        from sklearn.utils import murmurhash3_32

        chars, words = vectorizers(n_hash)
        self.n_hash = n_hash
        self.murmur = murmurhash3_32
        self.char_pre = chars.build_preprocessor()
        self.word_pre = words.build_preprocessor()
        self.word_tok = words.build_tokenizer()
        self.words: dict[str, tuple[int, ...]] = {}
        self.tokens: dict[str, int] = {}
        self.pairs: dict[tuple[str, str], int] = {}

    def buckets(self, grams) -> list[int]:
        """HashingVectorizer's bucket of each n-gram (alternate_sign=False: |murmurhash3_32(utf-8)| mod n_hash)."""
        h = np.fromiter(map(self.murmur, grams), dtype=np.int64)
        return (np.abs(h) % self.n_hash).tolist()

    def char_ids(self, text: str) -> np.ndarray:
        """Bucket of every char_wb 3-4-gram of `text` (with repeats)."""
        return np.fromiter(chain.from_iterable(self.char_runs(text)), dtype=np.int64)

    def char_runs(self, text: str) -> list[tuple[int, ...]]:
        """Per word of `text`, the buckets of its char_wb 3-4-grams (a cached tuple per distinct word)."""
        words = self.char_pre(text).split()
        cache = self.words
        found = self._found(cache, words)
        if None in found:
            new = list(dict.fromkeys(w for w, hit in zip(words, found) if hit is None))
            if len(new) >= VECTOR_MIN_WORDS and "".join(new).isascii():
                flat, ends = _wb_buckets_ascii(new, self.n_hash)
            else:
                grams = list(map(_wb_grams, new))
                flat = self.buckets(chain.from_iterable(grams))
                ends = list(accumulate(map(len, grams)))
            cache.update(zip(new, (tuple(flat[i:j]) for i, j in zip([0, *ends], ends))))
            found = list(map(cache.get, words))
        return found

    def word_ids(self, text: str) -> np.ndarray:
        """Bucket of every word 1-2-gram of `text` (with repeats)."""
        uni, bi = self.word_runs(text)
        return np.fromiter(chain(uni, bi), dtype=np.int64, count=len(uni) + len(bi))

    def word_runs(self, text: str) -> tuple[list[int], list[int]]:
        """The buckets of the word unigrams and of the word bigrams of `text` (with repeats)."""
        toks = self.word_tok(self.word_pre(text))
        pairs = list(zip(toks, toks[1:]))
        return self._lookup(self.tokens, toks, None), self._lookup(self.pairs, pairs, " ".join)

    def _lookup(self, cache: dict, keys: list, gram) -> list[int]:
        """Cached buckets of `keys` (n-gram = gram(key), or the key itself); misses hashed in one pass."""
        found = self._found(cache, keys)
        if None in found:
            new = list(dict.fromkeys(k for k, hit in zip(keys, found) if hit is None))
            cache.update(zip(new, self.buckets(new if gram is None else map(gram, new))))
            found = list(map(cache.get, keys))
        return found

    @staticmethod
    def _found(cache: dict, keys: list) -> list:
        """Cached values of `keys` (None when missing); a cache past CACHE_MAX is emptied first."""
        if len(cache) > CACHE_MAX:
            cache.clear()
        return list(map(cache.get, keys))


def _wb_slices(n: int) -> tuple[slice, ...]:
    """The 3-gram then 4-gram slices of a padded word of `n` characters (one 3-gram when n <= 3)."""
    if n <= 3:
        return (slice(0, 3),)
    return tuple(slice(i, i + 3) for i in range(n - 2)) + tuple(slice(i, i + 4) for i in range(n - 3))


_SLICES: dict[int, tuple[slice, ...]] = {}


def _wb_grams(word: str) -> list[str]:
    """The char_wb 3-4-grams of one lower-cased word without white space, as sklearn's ``_char_wb_ngrams`` makes
    them (the word padded with a space each side; a padded word of 3 characters gives its one 3-gram only), cut
    by slices kept per length: the vectorizer's analyzer called per new word cost about twice as much (a one-off
    timing on llmrouter-nim9's words, 5.6 -> 2.7 us a word; tests check equality)."""
    w = f" {word} "
    cuts = _SLICES.get(len(w))
    if cuts is None:
        cuts = _wb_slices(len(w))
        if len(w) <= 64:  # kept for ordinary word lengths only (the cache stays a few hundred KB)
            _SLICES[len(w)] = cuts
    return list(map(w.__getitem__, cuts))


VECTOR_MIN_WORDS = 24  #: new ASCII words from which their grams are cut and hashed in numpy (below: in Python)
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _wb_buckets_ascii(words: list[str], n_hash: int) -> tuple[list[int], list[int]]:
    """The buckets of the char_wb 3-4-grams of many new ASCII words in a few numpy calls (a long prompt's new
    words cost about 4 us each one by one): the grams `_wb_grams` gives (per word its 3-grams then its 4-grams),
    hashed with MurmurHash3 x86_32, seed 0, as sklearn's ``murmurhash3_32`` hashes their bytes (a 3-byte key is
    a tail only, a 4-byte key one block), then |h| mod n_hash. Returns (buckets, end of each word's run)."""
    lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 2  # padded: " word "
    buf = np.frombuffer(("".join(f" {w} " for w in words) + "\0").encode("ascii"), dtype=np.uint8).astype(np.uint32)
    n3, n4 = lens - 2, np.maximum(lens - 3, 0)  # a padded word of 3 characters: its one 3-gram only
    counts = n3 + n4
    ends = np.cumsum(counts)
    local = np.arange(int(ends[-1])) - np.repeat(ends - counts, counts)
    first4 = np.repeat(n3, counts)
    is4 = local >= first4
    pos = np.repeat(np.cumsum(lens) - lens, counts) + np.where(is4, local - first4, local)
    k = buf[pos] | (buf[pos + 1] << np.uint32(8)) | (buf[pos + 2] << np.uint32(16))
    k |= np.where(is4, buf[pos + 3], np.uint32(0)) << np.uint32(24)
    k = _rotl(k * _C1, 15) * _C2
    h = np.where(is4, (_rotl(k, 13) * np.uint32(5) + np.uint32(0xE6546B64)) ^ np.uint32(4), k ^ np.uint32(3))
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return (np.abs(h.view(np.int32).astype(np.int64)) % n_hash).tolist(), ends.tolist()


@lru_cache(maxsize=4)
def hasher(n_hash: int) -> _Hasher:
    """The (cached) hasher of width `n_hash`."""
    return _Hasher(n_hash)


def ngram_counts(text: str, n_hash: int, char_cap: int, word_cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices, counts) of one text's n-grams in the featuriser's 2 x n_hash layout: char_wb 3-4-grams
    of the first `char_cap` characters in [0, n_hash), word 1-2-grams of the first `word_cap` characters in
    [n_hash, 2 n_hash); indices sorted and distinct, as a CSR row of ``hstack`` of the two vectorizers."""
    return sorted_counts(bucket_counts(text, n_hash, char_cap, word_cap))


def sorted_counts(counts: Counter) -> tuple[np.ndarray, np.ndarray]:
    """`bucket_counts` as (indices sorted, counts as float64) arrays."""
    idx = sorted(counts)
    return np.array(idx, dtype=np.int64), np.array(list(map(counts.__getitem__, idx)), dtype=np.float64)


def bucket_counts(text: str, n_hash: int, char_cap: int, word_cap: int) -> Counter:
    """`ngram_counts` as a Counter bucket -> count, unordered, in plain Python (the hot path: no numpy call once
    the words are cached, since each costs microseconds when the CPU caches are cold, as they are between live
    requests; a request's many new words are hashed in numpy, `_wb_buckets_ascii`)."""
    h = hasher(n_hash)
    counts = Counter(chain.from_iterable(h.char_runs(text[:char_cap])))
    uni, bi = h.word_runs(text[:word_cap])
    counts.update(map(n_hash.__add__, chain(uni, bi)))
    return counts
