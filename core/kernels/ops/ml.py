"""The numeric ops of the ai.onnx.ml domain: Binarizer, ArrayFeatureExtractor, Normalizer, Scaler,
Imputer, FeatureVectorizer, OneHotEncoder, LabelEncoder, LinearRegressor and LinearClassifier.

Their parameters are attributes, turned into arrays once at planning. Lookups (OneHotEncoder's
categories, LabelEncoder's keys) are a searchsorted into the sorted keys, never a dict per element.
String tensors have no static layout: LabelEncoder's string keys or values run on the dynamic path
(LabelEncoderStrings, a host kernel); the other string variants (string categories, class labels)
are refused here with a message saying so. The tree ensembles are in ml_trees.py, the SVMs in
ml_svm.py; what they share is in ml_common.py.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import HostKernel, Kernel
from .ml_common import F32, ML, NUMBERS, floats, ml_input, post_transform, post_transform_name, rows
from ..registry import register
from ..values import text


# -- simple transforms ------------------------------------------------------------------------------
@register("Binarizer", since=1, domain=ML)
class Binarizer(Kernel):
    """1 where x > threshold, else 0, in x's type."""

    def prepare(self):
        m = ml_input(self)
        self.threshold = float(self.attr("threshold", 0.0))
        self.out = Meta(m.dtype, tuple(m.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        return [(x > self.threshold).astype(x.dtype)]


@register("ArrayFeatureExtractor", since=1, domain=ML)
class ArrayFeatureExtractor(Kernel):
    """The last axis' entries at the (flattened) indices Y; a 1-D X gives one row."""

    def prepare(self):
        xm = ml_input(self, 0, "X")
        ym = ml_input(self, 1, "Y", frozenset([np.dtype(np.int64)]))
        n = int(np.prod(ym.shape))
        shape = (1, n) if len(xm.shape) == 1 else tuple(xm.shape[:-1]) + (n,)
        self.out = Meta(xm.dtype, shape)

    def infer(self):
        return [self.out]

    def compute(self, x, idx):
        flat = idx.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= x.shape[-1]):
            raise self.fail(f"indices outside [0, {x.shape[-1]}) of X's last axis")
        return [np.take(x, flat, axis=-1).reshape(self.out.shape)]


@register("Normalizer", since=1, domain=ML)
class Normalizer(Kernel):
    """Each row divided by its max (the spec's X / max(X), signed, as onnxruntime), or its L1 or L2
    norm; a row whose divisor is 0 stays as it is (onnxruntime's behaviour). float32 output."""

    def prepare(self):
        m = ml_input(self)
        if len(m.shape) not in (1, 2):
            raise self.fail(f"X has shape {tuple(m.shape)}; [N, C] or [C] expected")
        self.norm = text(self.attr("norm", "MAX"))
        if self.norm not in ("MAX", "L1", "L2"):
            raise self.fail(f"norm '{self.norm}' must be MAX, L1 or L2")
        self.out = Meta(F32, tuple(m.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        r = rows(x).astype(np.float32)
        if self.norm == "MAX":
            d = r.max(axis=1, keepdims=True)
        elif self.norm == "L1":
            d = np.abs(r).sum(axis=1, keepdims=True)
        else:
            d = np.sqrt(np.square(r).sum(axis=1, keepdims=True))
        return [(r / np.where(d == 0, np.float32(1), d)).reshape(x.shape)]


@register("Scaler", since=1, domain=ML)
class Scaler(Kernel):
    """(x - offset) * scale, per feature (or one value for all); float32 output."""

    def prepare(self):
        m = ml_input(self)
        c = m.shape[-1] if m.shape else 1
        self.offset = floats(self, "offset", required=False)
        self.scale = floats(self, "scale", required=False)
        for key in ("offset", "scale"):
            v = getattr(self, key)
            if v is not None and len(v) not in (1, c):
                raise self.fail(f"attribute '{key}' has {len(v)} values; 1 or {c} (one per feature) expected")
        self.out = Meta(F32, tuple(m.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        y = x.astype(np.float32)
        if self.offset is not None:
            y = y - self.offset.astype(np.float32)
        if self.scale is not None:
            y = y * self.scale.astype(np.float32)
        return [y.astype(np.float32)]


@register("Imputer", since=1, domain=ML)
class Imputer(Kernel):
    """Entries equal to the replaced value (NaN matches NaN) become the per-feature imputed value."""

    def prepare(self):
        m = ml_input(self)
        if m.dtype.kind == "f":
            values, self.replaced = self.attr("imputed_value_floats"), float(self.attr("replaced_value_float", 0.0))
        else:
            values, self.replaced = self.attr("imputed_value_int64s"), int(self.attr("replaced_value_int64", 0))
        if not values:
            kind = "floats" if m.dtype.kind == "f" else "int64s"
            raise self.fail(f"attribute 'imputed_value_{kind}' is required for {m.dtype} input")
        self.values = np.asarray(values).reshape(-1)
        c = m.shape[-1] if m.shape else 1
        if len(self.values) not in (1, c):
            raise self.fail(f"{len(self.values)} imputed values; 1 or {c} (one per feature) expected")
        self.out = Meta(m.dtype, tuple(m.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        hit = np.isnan(x) if isinstance(self.replaced, float) and np.isnan(self.replaced) else x == self.replaced
        return [np.where(hit, self.values.astype(x.dtype), x)]


@register("FeatureVectorizer", since=1, domain=ML)
class FeatureVectorizer(Kernel):
    """The inputs' columns side by side ([N, C_i] each, cut or zero-padded to inputdimensions[i])."""

    def prepare(self):
        dims = self.attr("inputdimensions")
        metas = [ml_input(self, i, f"X{i}") for i in range(len(self.inputs))]
        if dims is None or len(dims) != len(metas):
            raise self.fail(f"attribute 'inputdimensions' must give one size per input ({len(metas)})")
        self.dims = [int(d) for d in dims]
        n = {m.shape[0] if len(m.shape) == 2 else (m.shape[0] if len(m.shape) == 1 else -1) for m in metas}
        if len(n) != 1 or any(len(m.shape) not in (1, 2) for m in metas):
            raise self.fail(f"inputs {[tuple(m.shape) for m in metas]} must be [N, C] (or [N]) with one N")
        self.n = n.pop()
        self.out = Meta(F32, (self.n, sum(self.dims)))

    def infer(self):
        return [self.out]

    def compute(self, *xs):
        y = np.zeros(self.out.shape, np.float32)
        at = 0
        for x, d in zip(xs, self.dims):  # one block copy per input
            x2 = x.reshape(self.n, -1)
            w = min(d, x2.shape[1])
            y[:, at:at + w] = x2[:, :w]
            at += d
        return [y]


@register("OneHotEncoder", since=1, domain=ML)
class OneHotEncoder(Kernel):
    """[..., categories]: 1 at each value's category; a value of no category is all zeros
    (zeros=1) or an error (zeros=0)."""

    def prepare(self):
        m = ml_input(self, types=NUMBERS)
        cats = self.attr("cats_int64s")
        if not cats:
            if self.attr("cats_strings"):
                raise self.fail("string categories (cats_strings) need string tensors, which ge runs on the "
                                "dynamic path only")
            raise self.fail("attribute 'cats_int64s' is required")
        self.cats = np.asarray(cats, np.int64)
        self.order = np.argsort(self.cats, kind="stable")
        self.sorted = self.cats[self.order]
        self.zeros = int(self.attr("zeros", 1))
        self.out = Meta(F32, tuple(m.shape) + (len(self.cats),))

    def infer(self):
        return [self.out]

    def compute(self, x):
        v = x.astype(np.float64)
        pos = np.clip(np.searchsorted(self.sorted, v), 0, len(self.sorted) - 1)
        hit = self.sorted[pos] == v
        if not self.zeros and not hit.all():
            raise self.fail(f"value {x[~hit].reshape(-1)[0]} is in no category (zeros=0)")
        y = np.zeros(self.out.shape, np.float32)
        np.put_along_axis(y, np.where(hit, self.order[pos], 0)[..., None], hit[..., None].astype(np.float32),
                          axis=-1)
        return [y]


@register("LabelEncoder", since=1, domain=ML)
class LabelEncoder(Kernel):
    """Each value of X mapped through keys -> values (NaN keys match NaN), else the default.
    Numeric keys and values (keys_int64s/keys_floats/keys_tensor and their values); string ones
    need the dynamic path."""

    def prepare(self):
        m = ml_input(self, types=NUMBERS | {np.dtype(np.int16)})
        keys, values, default, out = self.mapping()
        if len(keys) != len(values):
            raise self.fail(f"{len(keys)} keys but {len(values)} values")
        if keys.dtype.kind != m.dtype.kind and not (keys.dtype.kind in "iu" and m.dtype.kind in "iu"):
            raise self.fail(f"keys of type {keys.dtype} do not match X's type {m.dtype}")
        # sorted unique keys; of a repeated key the last one counts (np.unique keeps the first of the reversed)
        self.keys, first = np.unique(keys[::-1], return_index=True)
        self.values, self.default = values[::-1][first].astype(out), default
        self.out = Meta(np.dtype(out), tuple(m.shape))

    def mapping(self):
        """(keys, values, default, output dtype) from whichever attributes the node has."""
        for key in ("keys_strings", "values_strings"):
            if self.attr(key) is not None:
                raise self.fail(f"'{key}' maps string tensors, which ge runs on the dynamic path only")
        keys = next((np.asarray(self.attr(k)) for k in ("keys_tensor", "keys_int64s", "keys_floats")
                     if self.attr(k) is not None), None)
        if keys is None:
            raise self.fail("no keys (keys_int64s, keys_floats or keys_tensor)")
        if self.attr("keys_int64s") is not None:
            keys = keys.astype(np.int64)
        elif self.attr("keys_floats") is not None:
            keys = keys.astype(np.float32)
        if self.attr("values_tensor") is not None:
            values = np.asarray(self.attr("values_tensor")).reshape(-1)
            d = self.attr("default_tensor")
            default = np.asarray(d).reshape(-1)[0] if d is not None else (
                np.nan if values.dtype.kind == "f" else -1)
            if values.dtype.kind in "OUS":
                raise self.fail("'values_tensor' of strings maps to string tensors (dynamic path only)")
            return keys.reshape(-1), values, default, values.dtype
        if self.attr("values_int64s") is not None:
            return keys.reshape(-1), np.asarray(self.attr("values_int64s"), np.int64), \
                int(self.attr("default_int64", -1)), np.int64
        if self.attr("values_floats") is not None:
            return keys.reshape(-1), np.asarray(self.attr("values_floats"), np.float32), \
                float(self.attr("default_float", -0.0)), np.float32
        raise self.fail("no values (values_int64s, values_floats or values_tensor)")

    def infer(self):
        return [self.out]

    def compute(self, x):
        y = np.full(x.shape, self.default, self.out.dtype)
        if not len(self.keys):
            return [y]
        xv = x.astype(self.keys.dtype)
        pos = np.clip(np.searchsorted(self.keys, xv), 0, len(self.keys) - 1)
        hit = self.keys[pos] == xv
        if self.keys.dtype.kind == "f":  # NaN sorts last: a NaN key matches NaN values
            nan_keys = np.isnan(self.keys)
            if nan_keys.any():
                hit |= np.isnan(xv)
                pos = np.where(np.isnan(xv), int(np.argmax(nan_keys)), pos)
        y[hit] = self.values[pos[hit]]
        return [y]


@register("LabelEncoder", since=1, domain=ML, strings=True)
class LabelEncoderStrings(HostKernel):
    """LabelEncoder with string keys or values (on the host, string tensors having no layout): a
    dict from each key to its value (of a repeated key the last counts), else the default."""
    takes_strings = True
    no_layout = "string tensors have no static layout"

    def prepare(self):
        keys = self.first("keys", ("strings", "int64s", "floats"))
        values = self.first("values", ("strings", "int64s", "floats"))
        if len(keys) != len(values):
            raise self.fail(f"{len(keys)} keys but {len(values)} values")
        self.out = values.dtype
        self.table = dict(zip(keys.tolist(), values.tolist()))
        self.nan_value = next((v for k, v in zip(keys.tolist(), values.tolist()) if k != k), None)
        d = self.attr("default_tensor")
        if d is not None:
            self.default = np.asarray(d).reshape(-1)[0]
        elif values.dtype == object:
            self.default = text(self.attr("default_string", "_Unused"))
        elif values.dtype.kind == "i":
            self.default = int(self.attr("default_int64", -1))
        else:
            self.default = float(self.attr("default_float", -0.0))
        self.key_kind = "U" if keys.dtype == object else keys.dtype.kind

    def first(self, what: str, kinds: tuple) -> np.ndarray:
        """The keys' or values' array, from whichever of its attributes the node has."""
        t = self.attr(f"{what}_tensor")
        if t is not None:
            return np.asarray(t).reshape(-1)
        for kind in kinds:
            v = self.attr(f"{what}_{kind}")
            if v is not None:
                return np.array([text(x) for x in v], object) if kind == "strings" else \
                    np.asarray(v, np.int64 if kind == "int64s" else np.float32)
        raise self.fail(f"no {what} ({', '.join(f'{what}_{k}' for k in kinds)} or {what}_tensor)")

    def compute(self, x):
        x = np.asarray(x)
        kind = "U" if x.dtype == object or x.dtype.kind == "U" else x.dtype.kind
        if (kind == "U") != (self.key_kind == "U"):
            raise self.fail(f"input X of type {x.dtype} does not match keys of type "
                            f"{'string' if self.key_kind == 'U' else self.key_kind}")
        get, default, nan = self.table.get, self.default, self.nan_value
        flat = [get(v, default) if v == v or nan is None else nan for v in x.reshape(-1).tolist()]
        y = np.empty(len(flat), self.out)
        y[:] = flat
        return [y.reshape(x.shape)]


# -- linear models ----------------------------------------------------------------------------------
class _Linear(Kernel):
    def linear(self, n_out: int):
        m = ml_input(self)
        if len(m.shape) not in (1, 2):
            raise self.fail(f"X has shape {tuple(m.shape)}; [N, C] or [C] expected")
        c = m.shape[-1]
        coef = floats(self, "coefficients")
        if len(coef) != n_out * c:
            raise self.fail(f"{len(coef)} coefficients for {n_out} outputs of {c} features: {n_out * c} expected")
        self.coef = coef.reshape(n_out, c).T.astype(np.float32)
        inter = floats(self, "intercepts", required=False)
        if inter is not None and len(inter) not in (n_out, 1):
            raise self.fail(f"{len(inter)} intercepts for {n_out} outputs")
        self.intercepts = None if inter is None else inter.astype(np.float32)
        self.n = 1 if len(m.shape) == 1 else m.shape[0]
        self.post = post_transform_name(self)

    def scores(self, x):
        s = rows(x).astype(np.float32) @ self.coef
        return s if self.intercepts is None else s + self.intercepts


@register("LinearRegressor", since=1, domain=ML)
class LinearRegressor(_Linear):
    """Y = X coefficients^T + intercepts, [N, targets], then post_transform."""

    def prepare(self):
        self.linear(int(self.attr("targets", 1)))
        self.out = Meta(F32, (self.n, self.coef.shape[1]))

    def infer(self):
        return [self.out]

    def compute(self, x):
        return [post_transform(self.scores(x), self.post).astype(np.float32)]


@register("LinearClassifier", since=1, domain=ML)
class LinearClassifier(_Linear):
    """Scores [N, classes] = X coefficients^T + intercepts after post_transform, and the label of
    the best class. One score column s with two labels is a binary model, as onnxruntime runs it:
    scores [1 - p, p] with p = s (NONE, SOFTMAX, SOFTMAX_ZERO), sigmoid(s) (LOGISTIC) or probit(s)
    (PROBIT, the first column probit(1 - s)), label 1 where s > 0. One label: its score's sign."""

    def prepare(self):
        if self.attr("classlabels_strings") is not None:
            raise self.fail("string class labels (classlabels_strings) need string tensors, which ge runs on "
                            "the dynamic path only")
        labels = self.attr("classlabels_ints")
        if not labels:
            raise self.fail("attribute 'classlabels_ints' is required")
        self.labels = np.asarray(labels, np.int64)
        c = (len(self.inputs[0].shape) and self.inputs[0].shape[-1]) if self.inputs and self.inputs[0] else 1
        n_out = len(floats(self, "coefficients")) // max(c, 1)
        self.linear(n_out)
        self.binary = n_out == 1 and len(self.labels) == 2
        width = 2 if self.binary else n_out
        self.metas = [Meta(np.dtype(np.int64), (self.n,)), Meta(F32, (self.n, width))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, x):
        s = self.scores(x)
        if self.binary:
            label = self.labels[(s[:, 0] > 0).astype(np.int64)]
            if self.post == "PROBIT":
                s = post_transform(np.concatenate([1 - s, s], axis=1), "PROBIT")
            else:
                p = post_transform(s, "LOGISTIC") if self.post == "LOGISTIC" else s
                s = np.concatenate([1 - p, p], axis=1)
            return [label, s.astype(np.float32)][:self.num_outputs]
        s = post_transform(s, self.post).astype(np.float32)
        if s.shape[1] > 1:
            label = self.labels[np.argmax(s, axis=1)]
        else:  # one class: its label where the score passes the threshold, else 0
            thr = 0 if self.post == "NONE" else 0.5
            label = np.where(s[:, 0] >= thr, self.labels[0], 0).astype(np.int64)
        return [label, s][:self.num_outputs]
