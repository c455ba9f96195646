"""Tree ensembles of the ai.onnx.ml domain: TreeEnsemble (opset 5) and the older
TreeEnsembleRegressor and TreeEnsembleClassifier.

Both encodings become one flat form at planning (`Forest`): per interior node its feature, mode,
threshold, missing-value branch and both children (each a node or a leaf), per leaf its
(target, weight) contributions. Evaluation walks every (sample, tree) pair at once, one level per
step: each step gathers the current nodes' features and thresholds and picks the next node or leaf
with vectorized comparisons, so the Python loop runs once per tree level, never per sample or node.
The leaves' contributions are then summed (or min/max-ed) into [N, targets] with ufunc.at.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from .ml_common import F32, ML, ml_input, post_transform, post_transform_name
from ..registry import register
from ..values import text

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "BRANCH_MEMBER": MEMBER}
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


class Forest:
    """Interior nodes (arrays indexed by node), leaves (contributions in CSR form), tree roots."""

    def __init__(self, feature, mode, split, missing_true, child, child_leaf, members,
                 leaf_start, leaf_target, leaf_weight, roots, root_leaf):
        self.feature, self.mode, self.split = feature, mode, split
        self.missing_true = missing_true
        self.child, self.child_leaf = child, child_leaf  # [nodes, 2]: the false (0) and true (1) branch
        self.members = members  # [nodes, m] set members of MEMBER nodes (NaN padded)
        self.leaf_start, self.leaf_target, self.leaf_weight = leaf_start, leaf_target, leaf_weight
        self.roots, self.root_leaf = roots, root_leaf  # a tree may be a single leaf

    def check(self, k: Kernel, n_features: int, n_targets: int) -> None:
        n_nodes, n_leaves = len(self.feature), len(self.leaf_start) - 1
        if len(self.feature) and (self.feature.min() < 0 or self.feature.max() >= n_features):
            raise k.fail(f"a node reads a feature outside [0, {n_features})")
        inner = ~self.child_leaf
        if (self.child[inner] >= n_nodes).any() or (self.child[self.child_leaf] >= n_leaves).any() \
                or (self.child < 0).any():
            raise k.fail("a node's branch points outside the nodes or leaves")
        if len(self.leaf_target) and (self.leaf_target.min() < 0 or self.leaf_target.max() >= n_targets):
            raise k.fail(f"a leaf's target is outside [0, {n_targets})")

    def leaves(self, k: Kernel, x: np.ndarray) -> np.ndarray:
        """The leaf each (sample, tree) ends in: [N, trees]."""
        n, t = x.shape[0], len(self.roots)
        cur = np.broadcast_to(self.roots, (n, t)).copy()
        done = np.broadcast_to(self.root_leaf, (n, t)).copy()
        xf = x.astype(np.float64)
        for _ in range(len(self.feature) + 1):  # at most one step per level
            s, j = np.nonzero(~done)
            if not len(s):
                return cur
            node = cur[s, j]
            v = xf[s, self.feature[node]]
            th = self.split[node]
            mode = self.mode[node]
            go = np.select([mode == LEQ, mode == LT, mode == GTE, mode == GT, mode == EQ, mode == NEQ],
                           [v <= th, v < th, v >= th, v > th, v == th, v != th],
                           default=False)
            is_member = mode == MEMBER
            if is_member.any():
                go[is_member] = (self.members[node[is_member]] == v[is_member, None]).any(axis=1)
            go |= self.missing_true[node] & np.isnan(v)
            side = go.astype(np.int64)
            cur[s, j] = self.child[node, side]
            done[s, j] = self.child_leaf[node, side]
        raise k.fail("the trees have a cycle (a walk did not reach a leaf)")

    def aggregate(self, leaves: np.ndarray, n_targets: int, how: str, base=None) -> np.ndarray:
        """Sum (AVERAGE: mean over trees), MIN or MAX of the leaves' contributions: [N, targets], plus
        `base` where some leaf reached the target (a target no leaf reached is 0, as onnxruntime)."""
        n, t = leaves.shape
        start, stop = self.leaf_start[leaves.reshape(-1)], self.leaf_start[leaves.reshape(-1) + 1]
        counts = stop - start
        rows = np.repeat(np.repeat(np.arange(n), t), counts)
        # entry indices: start of each leaf plus 0..count-1
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        entry = np.repeat(start, counts) + offsets
        target, weight = self.leaf_target[entry], self.leaf_weight[entry]
        touched = np.zeros((n, n_targets), bool)
        touched[rows, target] = True
        if how in ("SUM", "AVERAGE"):
            out = np.zeros((n, n_targets))
            np.add.at(out, (rows, target), weight)
            if how == "AVERAGE" and t:
                out /= t
        else:
            out = np.full((n, n_targets), np.inf if how == "MIN" else -np.inf)
            (np.minimum if how == "MIN" else np.maximum).at(out, (rows, target), weight)
        return np.where(touched, out if base is None else out + base, 0.0)


def _members(values, modes) -> np.ndarray:
    """membership_values (NaN-delimited sets, in MEMBER-node order) as [nodes, m], NaN padded."""
    mem_nodes = np.nonzero(modes == MEMBER)[0]
    table = np.full((len(modes), 1), np.nan)
    if not len(mem_nodes):
        return table
    flat = np.asarray(values, np.float64).reshape(-1)
    cuts = np.nonzero(np.isnan(flat))[0]
    sets = np.split(flat, cuts)
    sets = [a[~np.isnan(a)] for a in sets][:len(mem_nodes)]
    width = max(1, max(len(a) for a in sets))
    table = np.full((len(modes), width), np.nan)
    for node, a in zip(mem_nodes, sets):  # one row per MEMBER node (planning)
        table[node, :len(a)] = a
    return table


def _array(k: Kernel, key: str, dtype=None, required: bool = True):
    v = k.attr(key)
    if v is None:
        if required:
            raise k.fail(f"attribute '{key}' is required")
        return None
    return np.asarray(v, dtype=dtype).reshape(-1)


@register("TreeEnsemble", since=5, domain=ML)
class TreeEnsemble(Kernel):
    """Y [N, n_targets] in X's type: the aggregated leaf weights of every tree, post-transformed."""

    def prepare(self):
        xm = ml_input(self, types=frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64)))
        if len(xm.shape) != 2:
            raise self.fail(f"X has shape {tuple(xm.shape)}; [N, F] expected")
        a = lambda key, dt=None, req=True: _array(self, key, dt, req)  # noqa: E731
        feature, mode = a("nodes_featureids", np.int64), a("nodes_modes", np.int64)
        split = a("nodes_splits", np.float64)
        tchild, fchild = a("nodes_truenodeids", np.int64), a("nodes_falsenodeids", np.int64)
        tleaf, fleaf = a("nodes_trueleafs", np.int64), a("nodes_falseleafs", np.int64)
        n = len(feature)
        if any(len(v) != n for v in (mode, split, tchild, fchild, tleaf, fleaf)):
            raise self.fail("the nodes_* attributes must all have one entry per node")
        missing = a("nodes_missing_value_tracks_true", np.int64, False)
        missing = np.zeros(n, bool) if missing is None else missing.astype(bool)
        if ((mode < 0) | (mode > MEMBER)).any():
            raise self.fail("nodes_modes has a value outside 0..6")
        members = self.attr("membership_values")
        if (mode == MEMBER).any() and members is None:
            raise self.fail("MEMBER nodes need attribute 'membership_values'")
        targets, weights = a("leaf_targetids", np.int64), a("leaf_weights", np.float64)
        if len(targets) != len(weights):
            raise self.fail("leaf_targetids and leaf_weights must have one entry per leaf")
        roots = a("tree_roots", np.int64)
        self.n_targets = int(self.attr("n_targets", 0) or 0)
        if self.n_targets <= 0:
            raise self.fail("attribute 'n_targets' must be positive")
        agg = int(self.attr("aggregate_function", 1))
        if not 0 <= agg < 4:
            raise self.fail(f"aggregate_function={agg} must be 0..3")
        self.aggregate = AGGREGATES[agg]
        self.post = post_transform_name(self, 0)
        self.forest = Forest(feature, mode, split, missing, np.stack([fchild, tchild], 1),
                             np.stack([fleaf, tleaf], 1).astype(bool), _members(members, mode),
                             np.arange(len(targets) + 1), targets, weights, roots, np.zeros(len(roots), bool))
        if len(roots) and (roots.min() < 0 or roots.max() >= n):
            raise self.fail("tree_roots points outside the nodes")
        self.forest.check(self, xm.shape[1], self.n_targets)
        self.out = Meta(xm.dtype, (xm.shape[0], self.n_targets))

    def infer(self):
        return [self.out]

    def compute(self, x):
        y = self.forest.aggregate(self.forest.leaves(self, x), self.n_targets, self.aggregate)
        return [post_transform(y, self.post).astype(x.dtype)]


class _OldTrees(Kernel):
    """The encoding of TreeEnsembleRegressor/Classifier: nodes named by (tree id, node id), leaves are
    nodes of mode LEAF, contributions (`prefix`_treeids/_nodeids/_ids/_weights) name their leaf."""
    prefix = "target"

    def forest(self, n_features: int, n_targets: int) -> Forest:
        a = lambda key, dt=None, req=True: _array(self, key, dt, req)  # noqa: E731
        trees, ids = a("nodes_treeids", np.int64), a("nodes_nodeids", np.int64)
        feature = a("nodes_featureids", np.int64)
        modes = [text(m) for m in self.attr("nodes_modes") or []]
        split = a("nodes_values_as_tensor", np.float64, False)
        if split is None:
            split = a("nodes_values", np.float64, False)
        if split is None:
            split = np.zeros(len(trees))
        tchild, fchild = a("nodes_truenodeids", np.int64), a("nodes_falsenodeids", np.int64)
        n = len(trees)
        if any(len(v) != n for v in (ids, feature, split, tchild, fchild)) or len(modes) != n:
            raise self.fail("the nodes_* attributes must all have one entry per node")
        bad = [m for m in modes if m != "LEAF" and m not in MODE_NAMES]
        if bad:
            raise self.fail(f"nodes_modes has unknown mode '{bad[0]}'")
        is_leaf = np.array([m == "LEAF" for m in modes], bool)
        mode = np.array([MODE_NAMES.get(m, LEQ) for m in modes], np.int64)
        missing = a("nodes_missing_value_tracks_true", np.int64, False)
        missing = np.zeros(n, bool) if missing is None else missing.astype(bool)
        # (tree, node id) -> position, as one sorted key array
        key = trees * (int(ids.max(initial=0)) + 1) + ids
        order = np.argsort(key, kind="stable")
        width = int(ids.max(initial=0)) + 1

        def position(t, i, what):
            kk = t * width + i
            p = np.clip(np.searchsorted(key[order], kk), 0, max(n - 1, 0))
            if n == 0 or (key[order][p] != kk).any() or (i >= width).any() or (i < 0).any():
                raise self.fail(f"{what} names a node that does not exist")
            return order[p]

        inner = ~is_leaf
        child = np.zeros((n, 2), np.int64)
        child[inner, 1] = position(trees[inner], tchild[inner], "nodes_truenodeids")
        child[inner, 0] = position(trees[inner], fchild[inner], "nodes_falsenodeids")
        # leaves are numbered by their node position; their contributions sorted by leaf (CSR)
        ct, cn = a(f"{self.prefix}_treeids", np.int64), a(f"{self.prefix}_nodeids", np.int64)
        cid = a(f"{self.prefix}_ids", np.int64)
        cw = a(f"{self.prefix}_weights_as_tensor", np.float64, False)
        if cw is None:
            cw = a(f"{self.prefix}_weights", np.float64)
        if not len(ct) == len(cn) == len(cid) == len(cw):
            raise self.fail(f"the {self.prefix}_* attributes must all have one entry per contribution")
        leaf = position(ct, cn, f"{self.prefix}_nodeids") if len(ct) else np.zeros(0, np.int64)
        if len(leaf) and not is_leaf[leaf].all():
            raise self.fail(f"{self.prefix}_nodeids names a node that is not a LEAF")
        by_leaf = np.argsort(leaf, kind="stable")
        start = np.searchsorted(leaf[by_leaf], np.arange(n + 1))
        child_leaf = np.zeros((n, 2), bool)
        child_leaf[inner] = is_leaf[child[inner]]
        # roots: per tree, the node no other node points to
        pointed = np.zeros(n, bool)
        pointed[child[inner].reshape(-1)] = True
        roots = np.nonzero(~pointed)[0]
        if len(np.unique(trees[roots])) != len(roots) or len(roots) != len(np.unique(trees)):
            raise self.fail("every tree must have exactly one root")
        f = Forest(feature, mode, split, missing, child, child_leaf, _members(None, mode), start,
                   cid[by_leaf], cw[by_leaf], roots, is_leaf[roots])
        f.feature = np.where(is_leaf, 0, feature)  # leaves read no feature
        f.check(self, n_features, n_targets)
        return f

    def scores(self, x, n_targets: int, base=None, base_everywhere=None) -> np.ndarray:
        """Aggregated contributions, plus `base` where a leaf reached the target (regressor) or plus
        `base_everywhere` on every column (classifier), as onnxruntime."""
        x2 = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(1, -1)
        y = self.trees.aggregate(self.trees.leaves(self, x2), n_targets, self.aggregate, base)
        return y if base_everywhere is None else y + base_everywhere

    def common(self):
        xm = ml_input(self)
        if len(xm.shape) not in (1, 2):
            raise self.fail(f"X has shape {tuple(xm.shape)}; [N, F] expected")
        self.n = 1 if len(xm.shape) == 1 else xm.shape[0]
        self.n_features = xm.shape[-1]
        self.aggregate = text(self.attr("aggregate_function", "SUM"))
        if self.aggregate not in AGGREGATES:
            raise self.fail(f"aggregate_function '{self.aggregate}' must be one of {', '.join(AGGREGATES)}")
        self.post = post_transform_name(self)
        base = self.attr("base_values_as_tensor")
        base = self.attr("base_values") if base is None else base
        self.base = None if base is None or not len(base) else np.asarray(base, np.float64).reshape(-1)


@register("TreeEnsembleRegressor", since=1, domain=ML)
class TreeEnsembleRegressor(_OldTrees):
    """Y [N, n_targets] float32: aggregated leaf weights plus base_values, post-transformed."""

    def prepare(self):
        self.common()
        self.n_targets = int(self.attr("n_targets", 1))
        if self.base is not None and len(self.base) != self.n_targets:
            raise self.fail(f"{len(self.base)} base_values for {self.n_targets} targets")
        self.trees = self.forest(self.n_features, self.n_targets)
        self.out = Meta(F32, (self.n, self.n_targets))

    def infer(self):
        return [self.out]

    def compute(self, x):
        return [post_transform(self.scores(x, self.n_targets, self.base), self.post).astype(np.float32)]


@register("TreeEnsembleClassifier", since=1, domain=ML)
class TreeEnsembleClassifier(_OldTrees):
    """Scores Z [N, classes] (aggregated class weights plus base_values, post-transformed) and the
    label of the best class. (onnxruntime scores a two-label model whose weights all go to one class
    its own way, with thresholds that depend on the weights' signs; ge keeps the general rule.)"""
    prefix = "class"

    def prepare(self):
        if self.attr("classlabels_strings") is not None:
            raise self.fail("string class labels (classlabels_strings) need string tensors, which ge runs on "
                            "the dynamic path only")
        labels = self.attr("classlabels_int64s")
        if not labels:
            raise self.fail("attribute 'classlabels_int64s' is required")
        self.labels = np.asarray(labels, np.int64)
        self.common()
        self.trees = self.forest(self.n_features, len(self.labels))
        self.metas = [Meta(np.dtype(np.int64), (self.n,)), Meta(F32, (self.n, len(self.labels)))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, x):
        s = post_transform(self.scores(x, len(self.labels), base_everywhere=self.base), self.post)
        return [self.labels[np.argmax(s, axis=1)], s.astype(np.float32)][:self.num_outputs]
