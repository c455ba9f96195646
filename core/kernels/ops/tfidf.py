"""TfIdfVectorizer over integer tokens.

Per (skip distance, n) pair (a handful), every row's n-grams at that stride are taken at once as
an [rows, positions, n] gather, coded as one integer each (tokens coded by their rank among the
pool's tokens, a token outside the pool spoiling the gram) and looked up in the pool's sorted codes
by searchsorted; np.add.at counts the hits per output column. Unigrams count once, whatever the
skip. String tokens (pool_strings, string tensors: the dynamic path) are coded as integers first
(TfIdfVectorizerStrings: each distinct pool string one id, a token outside the pool -1).
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import HostKernel, Kernel
from ..registry import register
from ..values import text

MODES = ("TF", "IDF", "TFIDF")


@register("TfIdfVectorizer", since=9)
class TfIdfVectorizer(Kernel):
    def prepare(self):
        xm = self.inputs[0] if self.inputs else None
        if xm is None:
            raise self.fail("input X is required")
        if self.attr("pool_strings") is not None:
            raise self.fail("pool_strings: string tokens need string tensors, which ge runs on the dynamic path only")
        if xm.dtype not in (np.int32, np.int64):
            raise self.fail(f"X has type {xm.dtype}; int32 or int64 tokens expected (pool_int64s)")
        if len(xm.shape) not in (1, 2):
            raise self.fail(f"X has shape {tuple(xm.shape)}; [C] or [N, C] expected")
        self.mode = text(self.attr("mode", ""))
        if self.mode not in MODES:
            raise self.fail(f"mode '{self.mode}' must be one of {', '.join(MODES)}")
        self.min_n, self.max_n = int(self.attr("min_gram_length", 0)), int(self.attr("max_gram_length", 0))
        self.max_skip = int(self.attr("max_skip_count", 0))
        if not 1 <= self.min_n <= self.max_n or self.max_skip < 0:
            raise self.fail(f"min_gram_length={self.min_n}, max_gram_length={self.max_n}, "
                            f"max_skip_count={self.max_skip}: 1 <= min <= max and skips >= 0 expected")
        pool = np.asarray(self.attr("pool_int64s") or [], np.int64)
        counts = [int(c) for c in self.attr("ngram_counts") or []]
        index = np.asarray(self.attr("ngram_indexes") or [], np.int64)
        if not len(index) or index.min() < 0:
            raise self.fail("attribute 'ngram_indexes' must list the output column of every pool n-gram")
        self.size = int(index.max()) + 1
        weights = self.attr("weights")
        self.weights = None  # per output column: the weight of the pool n-gram counted there
        if weights:
            if len(weights) != len(index):
                raise self.fail(f"{len(weights)} weights for {len(index)} pool n-grams")
            self.weights = np.ones(self.size, np.float32)
            self.weights[index] = np.asarray(weights, np.float32)
        self.tokens = np.unique(pool)
        self.base = len(self.tokens) + 1
        # the pool's n-grams per size n: their codes (sorted) and output columns
        self.grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        first = 0
        bounds = counts + [len(pool)]
        for n, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]), start=1):
            if hi < lo or (hi - lo) % n:
                raise self.fail(f"ngram_counts {counts}: the {n}-grams span {hi - lo} pool entries, not a multiple of {n}")
            k = (hi - lo) // n
            if self.min_n <= n <= self.max_n and k:
                if self.base ** n >= 2 ** 62:
                    raise self.fail(f"{n}-grams over {len(self.tokens)} distinct tokens do not fit a 64-bit code")
                codes = self.code(pool[lo:hi].reshape(k, n))
                cols = index[first:first + k]
                if len(cols) != k:
                    raise self.fail(f"ngram_indexes has {len(index)} entries; the pool has more n-grams")
                order = np.argsort(codes, kind="stable")
                self.grams[n] = (codes[order], cols[order])
            first += k
        self.rows = 1 if len(xm.shape) == 1 else xm.shape[0]
        self.out = Meta(np.dtype(np.float32), (self.size,) if len(xm.shape) == 1 else (self.rows, self.size))

    def code(self, grams: np.ndarray) -> np.ndarray:
        """One int64 per n-gram (last axis): its tokens' ranks in the pool (+1; 0 = not in the pool)
        as digits of base len(tokens) + 1; a gram with a token outside the pool gets -1."""
        pos = np.clip(np.searchsorted(self.tokens, grams), 0, max(len(self.tokens) - 1, 0))
        rank = np.where(self.tokens[pos] == grams, pos + 1, 0) if len(self.tokens) else np.zeros_like(grams)
        weights = self.base ** np.arange(grams.shape[-1] - 1, -1, -1, dtype=np.int64)
        return np.where((rank == 0).any(axis=-1), -1, (rank * weights).sum(axis=-1))

    def infer(self):
        return [self.out]

    def compute(self, x):
        x2 = x.reshape(self.rows, -1).astype(np.int64)
        c = x2.shape[1]
        freq = np.zeros((self.rows, self.size), np.int64)
        for skip in range(1, self.max_skip + 2):
            for n, (codes, cols) in self.grams.items():
                if n == 1 and skip > 1:  # unigrams are the same at every skip
                    continue
                span = (n - 1) * skip
                if span >= c:
                    continue
                starts = np.arange(c - span)
                got = self.code(x2[:, starts[:, None] + skip * np.arange(n)])  # [rows, positions]
                at = np.clip(np.searchsorted(codes, got), 0, len(codes) - 1)
                hit = (codes[at] == got) & (got >= 0)
                r, p = np.nonzero(hit)
                np.add.at(freq, (r, cols[at[r, p]]), 1)
        if self.mode == "TF":
            y = freq.astype(np.float32)
        elif self.mode == "IDF":
            seen = (freq > 0).astype(np.float32)
            y = seen if self.weights is None else seen * self.weights
        else:
            y = freq.astype(np.float32) if self.weights is None else freq * self.weights
        return [y.astype(np.float32).reshape(self.out.shape)]


@register("TfIdfVectorizer", since=9, strings=True)
class TfIdfVectorizerStrings(HostKernel):
    takes_strings = True
    no_layout = "string tensors have no static layout"

    def prepare(self):
        if self.attr("pool_strings") is None:
            raise self.fail("string tokens need attribute 'pool_strings'")
        pool = [text(s) for s in self.attr("pool_strings")]
        self.ids: dict[str, int] = {}
        for s in pool:
            self.ids.setdefault(s, len(self.ids))
        self.coded = {k: v for k, v in self.attrs.items() if k != "pool_strings"} | {
            "pool_int64s": [self.ids[s] for s in pool]}

    def compute(self, x):
        x = np.asarray(x)
        if x.dtype != object:
            raise self.fail(f"X has type {x.dtype}; pool_strings counts string tokens")
        codes = np.array([self.ids.get(s, -1) for s in x.flat], np.int64).reshape(x.shape)
        counter = TfIdfVectorizer(self.coded, [Meta(codes.dtype, codes.shape)], opset=self.opset, name=self.name,
                                  backend=self.backend)
        return counter.compute(codes)
