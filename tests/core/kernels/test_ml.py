"""The ai.onnx.ml ops' kernels: onnx's node cases through ge's API, and every op against
onnxruntime (which implements the domain) on models built here."""
import math

import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_case, compare_with_onnxruntime, node_cases, node_model, run_model

ML = "ai.onnx.ml"
rng = np.random.default_rng(7)
NUMERIC = [c for op in ("Binarizer", "ArrayFeatureExtractor", "TreeEnsemble") for c in node_cases(op, ML)]


@pytest.mark.parametrize("case", NUMERIC, ids=case_ids(NUMERIC))
def test_node_case(case, tmp_path, monkeypatch):
    check_case(case, tmp_path, monkeypatch)


def check(op, inputs, attrs, tmp_path, monkeypatch, n_outputs=1, opset=1, **tol):
    model = node_model(op, inputs, attrs, n_outputs, domain=ML, opset=opset)
    return compare_with_onnxruntime(model, inputs, tmp_path, monkeypatch, **tol)


X = rng.standard_normal((5, 4)).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_binarizer_scaler_normalizer_imputer(dtype, tmp_path, monkeypatch):
    x = (X * 3).astype(dtype)
    if dtype == np.float32:
        check("Binarizer", {"x": x}, {"threshold": 0.5}, tmp_path, monkeypatch)
    else:  # onnxruntime's Binarizer is float32 only
        y = run_model(node_model("Binarizer", {"x": x}, {"threshold": 0.5}, domain=ML), [x], tmp_path, monkeypatch)[0]
        np.testing.assert_array_equal(y, (x > 0.5).astype(dtype))
    check("Scaler", {"x": x}, {"offset": [0.5, -1.0, 2.0, 0.0], "scale": [2.0, 0.5, 1.0, -1.0]}, tmp_path, monkeypatch)
    check("Scaler", {"x": x}, {"offset": [1.5], "scale": [3.0]}, tmp_path, monkeypatch)
    for norm in ("MAX", "L1", "L2"):
        check("Normalizer", {"x": x}, {"norm": norm}, tmp_path, monkeypatch)
    if x.dtype.kind == "f":
        x[1, 2] = x[3, 0] = np.nan
        attrs = {"imputed_value_floats": [9.0, 8.0, 7.0, 6.0], "replaced_value_float": np.nan}
        want = np.where(np.isnan(x), np.array([9.0, 8.0, 7.0, 6.0], dtype), x)
    else:
        attrs = {"imputed_value_int64s": [42], "replaced_value_int64": 1}
        want = np.where(x == 1, dtype(42), x)
    if dtype in (np.float32, np.int64):
        check("Imputer", {"x": x}, attrs, tmp_path, monkeypatch)
    y = run_model(node_model("Imputer", {"x": x}, attrs, domain=ML), [x], tmp_path, monkeypatch)[0]
    np.testing.assert_array_equal(y, want)  # onnxruntime's Imputer has float32 and int64 only


def test_array_feature_extractor_and_feature_vectorizer(tmp_path, monkeypatch):
    check("ArrayFeatureExtractor", {"x": X, "i": np.array([[3, 0, 3]], np.int64)}, {}, tmp_path, monkeypatch)
    check("ArrayFeatureExtractor", {"x": X[0], "i": np.array([1, 2], np.int64)}, {}, tmp_path, monkeypatch)
    a, b = X[:, :3].astype(np.float64), np.arange(10, dtype=np.float64).reshape(5, 2)
    check("FeatureVectorizer", {"a": a, "b": b}, {"inputdimensions": [2, 4]}, tmp_path, monkeypatch)


def test_one_hot_and_label_encoder(tmp_path, monkeypatch):
    x = np.array([[3, 1, 7], [1, 9, 3]], np.int64)
    check("OneHotEncoder", {"x": x}, {"cats_int64s": [7, 1, 3, 5]}, tmp_path, monkeypatch)
    check("LabelEncoder", {"x": x}, {"keys_int64s": [7, 1, 3], "values_int64s": [70, 10, 30], "default_int64": -5},
          tmp_path, monkeypatch, opset=2)
    f = np.array([0.5, np.nan, 2.0, -1.0], np.float32)
    attrs = {"keys_floats": [2.0, 0.5, np.nan], "values_int64s": [2, 1, 99]}
    check("LabelEncoder", {"x": f}, attrs, tmp_path, monkeypatch, opset=4)
    # the spec (opset 2 and 4): NaN keys match NaN, and of a repeated key the last counts (onnxruntime
    # takes the first, and matches no NaN at opset 2)
    attrs = {"keys_floats": [2.0, 0.5, np.nan, 0.5], "values_int64s": [2, 1, 99, 7]}
    for opset in (2, 4):
        y = run_model(node_model("LabelEncoder", {"x": f}, attrs, domain=ML, opset=opset), [f], tmp_path,
                      monkeypatch)[0]
        np.testing.assert_array_equal(y, [7, 99, 2, -1])
    from onnx import numpy_helper
    check("LabelEncoder", {"x": x}, {"keys_tensor": numpy_helper.from_array(np.array([1, 3], np.int64)),
                                     "values_tensor": numpy_helper.from_array(np.array([0.25, 0.5], np.float64)),
                                     "default_tensor": numpy_helper.from_array(np.array([-1.0], np.float64))},
          tmp_path, monkeypatch, opset=4)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"])
def test_linear_models(post, tmp_path, monkeypatch):
    coef = rng.standard_normal(12).astype(np.float32).tolist()
    if post != "PROBIT":  # onnxruntime's LinearRegressor has NONE only... and PROBIT for one target
        check("LinearClassifier", {"x": X}, {"coefficients": coef, "intercepts": [0.1, -0.2, 0.3],
                                             "classlabels_ints": [4, 5, 6], "post_transform": post},
              tmp_path, monkeypatch, n_outputs=2, rtol=1e-5, atol=1e-6)
    binary = {"coefficients": coef[:4], "intercepts": [0.1], "classlabels_ints": [3, 8], "post_transform": post}
    if post != "PROBIT":
        check("LinearClassifier", {"x": X}, binary, tmp_path, monkeypatch, n_outputs=2, atol=1e-5)
    else:  # onnxruntime's probit gives NaN below 0.5: checked as erf(z / sqrt(2)) = 2 p - 1
        x = X * 0.05
        binary["intercepts"] = [0.5]
        s = x @ np.array(coef[:4], np.float32) + np.float32(0.5)
        y, z = run_model(node_model("LinearClassifier", {"x": x}, binary, 2, domain=ML), [x], tmp_path, monkeypatch)
        np.testing.assert_array_equal(y, np.where(s > 0, 8, 3))
        erf = np.vectorize(math.erf)
        np.testing.assert_allclose(erf(z / np.sqrt(2)), 2 * np.stack([1 - s, s], 1) - 1, atol=2e-3)
    p = X[:, :1] * 0.1 + 0.5  # probabilities for PROBIT
    if post in ("NONE",):
        check("LinearRegressor", {"x": X}, {"coefficients": coef[:8], "intercepts": [1.0, 2.0], "targets": 2},
              tmp_path, monkeypatch)
    if post == "PROBIT":
        check("LinearRegressor", {"x": p}, {"coefficients": [1.0], "post_transform": post}, tmp_path, monkeypatch,
              atol=1e-5)


def test_errors():
    f32 = np.dtype(np.float32)
    with pytest.raises(GraphError, match=r"node 'o' \(OneHotEncoder\): string categories"):
        lookup("OneHotEncoder", ML, 1)({"cats_strings": ["a"]}, [Meta(np.dtype(np.int64), (2,))], name="o")
    with pytest.raises(GraphError, match="X is a string tensor; ge runs string tensors on the dynamic path only"):
        lookup("LabelEncoder", ML, 2)({"keys_strings": ["a"], "values_int64s": [1]}, [Meta(np.dtype(object), (2,))],
                                      name="l")
    with pytest.raises(GraphError, match="7 coefficients for 1 outputs of 4 features"):
        lookup("LinearRegressor", ML, 1)({"coefficients": [1.0] * 7}, [Meta(f32, (2, 4))], name="r")


def random_forest(n_trees, n_features, prefix, n_targets, depth=3, modes=("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE",
                                                                       "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"),
                  per_leaf=2):
    """Old-style tree attributes: full binary trees of `depth`, node ids in breadth-first order
    (shuffled per tree so ids and positions differ), every leaf contributing to 1-2 targets."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    c = {f"{prefix}_{k}": [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t in range(n_trees):
        n_nodes = 2 ** (depth + 1) - 1
        ids = rng.permutation(n_nodes) + 3
        for i in range(n_nodes):
            leaf = i >= 2 ** depth - 1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(int(ids[i]))
            a["nodes_featureids"].append(int(rng.integers(n_features)))
            a["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            a["nodes_values"].append(float(np.float32(rng.choice([0.0, 0.5, -0.25]) if not leaf else 0)))
            a["nodes_truenodeids"].append(0 if leaf else int(ids[2 * i + 1]))
            a["nodes_falsenodeids"].append(0 if leaf else int(ids[2 * i + 2]))
            a["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
            if leaf:
                for target in rng.choice(n_targets, size=min(n_targets, int(rng.integers(1, per_leaf + 1))), replace=False):
                    c[f"{prefix}_treeids"].append(t)
                    c[f"{prefix}_nodeids"].append(int(ids[i]))
                    c[f"{prefix}_ids"].append(int(target))
                    c[f"{prefix}_weights"].append(float(np.float32(rng.standard_normal())))
    return {**a, **c}


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_ensemble_regressor(aggregate, post, tmp_path, monkeypatch):
    x = rng.choice([0.0, 0.5, -0.25, 1.0], size=(20, 3)).astype(np.float32)
    attrs = random_forest(4, 3, "target", 3)
    attrs.update(n_targets=3, aggregate_function=aggregate, post_transform=post, base_values=[0.5, -1.0, 0.25])
    check("TreeEnsembleRegressor", {"x": x}, attrs, tmp_path, monkeypatch, opset=3, atol=1e-5)
    check("TreeEnsembleRegressor", {"x": x.astype(np.float64)}, attrs, tmp_path, monkeypatch, opset=3, atol=1e-5)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_ensemble_classifier(post, tmp_path, monkeypatch):
    x = rng.choice([0.0, 0.5, -0.25, 1.0], size=(20, 3)).astype(np.float32)
    attrs = random_forest(3, 3, "class", 4)
    attrs.update(classlabels_int64s=[10, 20, 30, 40], post_transform=post, base_values=[0.1, 0.2, 0.3, 0.4])
    check("TreeEnsembleClassifier", {"x": x}, attrs, tmp_path, monkeypatch, n_outputs=2, opset=3, atol=1e-5)



def test_tree_ensemble_v5_aggregates_and_members(tmp_path, monkeypatch):
    """TreeEnsemble (opset 5) against the same forest as TreeEnsembleRegressor in onnxruntime, and
    set membership against exact expectations."""
    from onnx import numpy_helper
    x = rng.choice([0.0, 0.5, -0.25, 1.0], size=(20, 3)).astype(np.float32)
    old = random_forest(2, 3, "target", 2, depth=2, modes=("BRANCH_LEQ", "BRANCH_GT"), per_leaf=1)
    # the same trees in TreeEnsemble's encoding: interior nodes only, leaves numbered apart
    n = len(old["nodes_treeids"])
    pos = {(t, i): k for k, (t, i) in enumerate(zip(old["nodes_treeids"], old["nodes_nodeids"]))}
    inner = [k for k in range(n) if old["nodes_modes"][k] != "LEAF"]
    inner_at = {k: j for j, k in enumerate(inner)}
    leaf_of = {}
    leaf_t, leaf_w = [], []
    for t, i, tid, w in zip(old["target_treeids"], old["target_nodeids"], old["target_ids"], old["target_weights"]):
        leaf_of.setdefault(pos[(t, i)], len(leaf_t))
        leaf_t.append(tid)
        leaf_w.append(w)
    assert len(leaf_of) == len(leaf_t)  # one contribution per leaf, as TreeEnsemble encodes them
    def branch(k, key):
        child = pos[(old["nodes_treeids"][k], old[key][k])]
        is_leaf = old["nodes_modes"][child] == "LEAF"
        return (leaf_of[child] if is_leaf else inner_at[child]), int(is_leaf)
    tb = [branch(k, "nodes_truenodeids") for k in inner]
    fb = [branch(k, "nodes_falsenodeids") for k in inner]
    mode = {"BRANCH_LEQ": 0, "BRANCH_GT": 3}
    new = dict(
        nodes_featureids=[old["nodes_featureids"][k] for k in inner],
        nodes_modes=numpy_helper.from_array(np.array([mode[old["nodes_modes"][k]] for k in inner], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([old["nodes_values"][k] for k in inner], np.float32)),
        nodes_truenodeids=[b[0] for b in tb], nodes_trueleafs=[b[1] for b in tb],
        nodes_falsenodeids=[b[0] for b in fb], nodes_falseleafs=[b[1] for b in fb],
        leaf_targetids=leaf_t, leaf_weights=numpy_helper.from_array(np.array(leaf_w, np.float32)),
        tree_roots=[inner_at[k] for k in inner if k == min(j for j in inner if old["nodes_treeids"][j]
                                                             == old["nodes_treeids"][k])],
        n_targets=2)
    old.pop("nodes_missing_value_tracks_true")
    for agg, code in (("SUM", 1), ("AVERAGE", 0), ("MIN", 2), ("MAX", 3)):
        want = check("TreeEnsembleRegressor", {"x": x}, {**old, "n_targets": 2, "aggregate_function": agg},
                     tmp_path, monkeypatch, opset=3, atol=1e-5)[0]
        got = run_model(node_model("TreeEnsemble", {"x": x}, {**new, "aggregate_function": code}, domain=ML,
                                   opset=5), [x], tmp_path, monkeypatch)[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # one MEMBER node: feature 0 in {0.5, 1.0} -> leaf 0 (weight 1), else leaf 1 (weight 2); NaN tracks true
    xm = np.array([[0.5], [1.0], [0.0], [np.nan]], np.float64)
    member = dict(nodes_featureids=[0], nodes_modes=numpy_helper.from_array(np.array([6], np.uint8)),
                  nodes_splits=numpy_helper.from_array(np.array([0.0])), nodes_truenodeids=[0],
                  nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
                  nodes_missing_value_tracks_true=[1], leaf_targetids=[0, 0],
                  leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0])), tree_roots=[0], n_targets=1,
                  membership_values=numpy_helper.from_array(np.array([0.5, 1.0, np.nan])))
    got = run_model(node_model("TreeEnsemble", {"x": xm}, member, domain=ML, opset=5), [xm], tmp_path, monkeypatch)[0]
    np.testing.assert_array_equal(got, [[1.0], [1.0], [2.0], [1.0]])


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_svm_regressor(kernel, tmp_path, monkeypatch):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    sv = rng.standard_normal((5, 4)).astype(np.float32)
    attrs = {"kernel_type": kernel, "kernel_params": [0.3, 0.5, 2.0], "n_supports": 5,
             "support_vectors": sv.reshape(-1).tolist(), "coefficients": rng.standard_normal(5).tolist(), "rho": [0.2]}
    check("SVMRegressor", {"x": x}, attrs, tmp_path, monkeypatch, rtol=1e-4, atol=1e-5)
    check("SVMRegressor", {"x": x}, {**attrs, "one_class": 1}, tmp_path, monkeypatch)
    check("SVMRegressor", {"x": x}, {"coefficients": [1.0, -2.0, 0.5, 0.0], "rho": [0.1], "kernel_params": [0.0, 0.0, 0.0]},
          tmp_path, monkeypatch,
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel", ["LINEAR", "RBF", "POLY"])
@pytest.mark.parametrize("proba", [False, True])
@pytest.mark.parametrize("n_classes", [3, 2])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_svm_classifier(kernel, proba, n_classes, post, tmp_path, monkeypatch):
    x = rng.standard_normal((8, 3)).astype(np.float32)
    per_class = [2, 3, 2][:n_classes]
    total = sum(per_class)
    pairs = n_classes * (n_classes - 1) // 2
    attrs = {"kernel_type": kernel, "kernel_params": [0.4, 0.1, 2.0], "vectors_per_class": per_class,
             "support_vectors": rng.standard_normal(total * 3).tolist(),
             "coefficients": rng.standard_normal((n_classes - 1) * total).tolist(),
             "rho": rng.standard_normal(pairs).tolist(), "classlabels_ints": [5, 7, 9][:n_classes],
             "post_transform": post}
    if proba:
        attrs.update(prob_a=(-rng.random(pairs) - 0.5).tolist(), prob_b=(rng.standard_normal(pairs) * 0.1).tolist())
    check("SVMClassifier", {"x": x}, attrs, tmp_path, monkeypatch, n_outputs=2, rtol=1e-4, atol=1e-4)


def test_svm_classifier_linear(tmp_path, monkeypatch):
    x = rng.standard_normal((8, 3)).astype(np.float32)
    attrs = {"coefficients": rng.standard_normal(9).tolist(), "rho": [0.3], "classlabels_ints": [1, 2, 3],
             "kernel_params": [0.0, 0.0, 0.0]}
    check("SVMClassifier", {"x": x}, attrs, tmp_path, monkeypatch, n_outputs=2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kt,vt", [(np.float64, np.int16), (np.int32, np.float64), (np.int16, np.int32),
                                   (np.int64, np.float32)])
def test_label_encoder_tensor_types(kt, vt, tmp_path, monkeypatch):
    """Opset 4's keys_tensor/values_tensor/default_tensor in every numeric type."""
    from onnx import numpy_helper
    keys = np.array([3, -1, 8, 2], kt)
    values = np.array([30, -10, 80, 20], vt)
    x = np.array([[8, 5], [3, -1], [2, 2]], kt)
    attrs = {"keys_tensor": numpy_helper.from_array(keys), "values_tensor": numpy_helper.from_array(values),
             "default_tensor": numpy_helper.from_array(np.array([7], vt))}
    model = node_model("LabelEncoder", {"x": x}, attrs, domain=ML, opset=4)
    got = run_model(model, [x], tmp_path, monkeypatch)[0]
    assert got.dtype == vt
    np.testing.assert_array_equal(got, np.array([[80, 7], [30, -10], [20, 20]], vt))


def test_tree_ensemble_float16(tmp_path, monkeypatch):
    from onnx import numpy_helper
    x = np.array([[0.25], [0.75], [np.nan]], np.float16)
    attrs = dict(nodes_featureids=[0], nodes_modes=numpy_helper.from_array(np.array([1], np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.array([0.5], np.float16)), nodes_truenodeids=[0],
                 nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1], leaf_targetids=[0, 1],
                 leaf_weights=numpy_helper.from_array(np.array([1.5, -2.0], np.float16)), tree_roots=[0],
                 n_targets=2, post_transform=2)
    got = run_model(node_model("TreeEnsemble", {"x": x}, attrs, domain=ML, opset=5), [x], tmp_path, monkeypatch)[0]
    assert got.dtype == np.float16
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731 (LOGISTIC); NaN takes the false branch (no missing flag)
    np.testing.assert_allclose(got, [[sig(1.5), 0.5], [0.5, sig(-2.0)], [0.5, sig(-2.0)]], rtol=1e-3)
