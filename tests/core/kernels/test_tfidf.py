"""TfIdfVectorizer: onnx's node cases through ge's API and onnxruntime, and random pools."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import (case_ids, check_against_onnxruntime, check_case, compare_with_onnxruntime, node_cases,
                         node_model)

CASES = node_cases("TfIdfVectorizer")


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    assert check_against_onnxruntime(case, got)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("skips,lengths", [(0, (1, 3)), (2, (2, 3)), (1, (1, 1)), (3, (1, 2))])
def test_random_pools(mode, skips, lengths, tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    x = rng.integers(0, 6, (3, 12)).astype(np.int32)
    unigrams = [0, 2, 4, 5]
    bigrams = rng.permutation(36)[:8]  # distinct n-grams (onnxruntime refuses repeated ones)
    bigrams = np.stack([bigrams // 6, bigrams % 6], 1).reshape(-1).tolist()
    trigrams = rng.permutation(216)[:5]
    trigrams = np.stack([trigrams // 36, trigrams // 6 % 6, trigrams % 6], 1).reshape(-1).tolist()
    pool = unigrams + bigrams + trigrams
    n_grams = len(unigrams) + 8 + 5
    index = rng.permutation(n_grams).tolist()
    attrs = {"mode": mode, "min_gram_length": lengths[0], "max_gram_length": lengths[1], "max_skip_count": skips,
             "ngram_counts": [0, 4, 20], "ngram_indexes": index, "pool_int64s": pool,
             "weights": rng.random(n_grams).astype(np.float32).tolist()}
    model = node_model("TfIdfVectorizer", {"x": x}, attrs)
    compare_with_onnxruntime(model, {"x": x}, tmp_path, monkeypatch)
    model = node_model("TfIdfVectorizer", {"x": x[0].astype(np.int64)}, attrs)
    compare_with_onnxruntime(model, {"x": x[0].astype(np.int64)}, tmp_path, monkeypatch)


def test_errors():
    k = lookup("TfIdfVectorizer")
    with pytest.raises(GraphError, match=r"node 't' \(TfIdfVectorizer\): pool_strings: string tokens"):
        k({"pool_strings": ["a"]}, [Meta(np.dtype(np.int64), (3,))], name="t")
    with pytest.raises(GraphError, match="the 2-grams span 3 pool entries, not a multiple of 2"):
        k({"mode": "TF", "min_gram_length": 1, "max_gram_length": 2, "ngram_counts": [0, 1],
           "ngram_indexes": [0, 1], "pool_int64s": [1, 2, 3, 4]}, [Meta(np.dtype(np.int64), (3,))], name="t")
