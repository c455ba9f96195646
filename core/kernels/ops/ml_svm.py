"""Support vector machines of the ai.onnx.ml domain: SVMRegressor and SVMClassifier.

The kernel matrix [N, support vectors] is one product (LINEAR, POLY, SIGMOID) or one distance
computation (RBF) for all samples. The classifier's one-vs-one decisions are [N, pairs] products
of that matrix with the pair's coefficients, its votes a bincount per sample; probabilities (prob_a
and prob_b) are libsvm's Platt sigmoids coupled by its iterative method, run for all samples at
once (the loop is over iterations and classes, as libsvm's, never over samples). Scores, labels and
the binary special cases follow onnxruntime.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from .ml_common import F32, ML, floats, ml_input, post_transform, post_transform_name
from ..registry import register
from ..values import text

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


class _Svm(Kernel):
    def common(self):
        xm = ml_input(self)
        if len(xm.shape) not in (1, 2):
            raise self.fail(f"X has shape {tuple(xm.shape)}; [N, F] expected")
        self.n = 1 if len(xm.shape) == 1 else xm.shape[0]
        self.f = xm.shape[-1]
        self.kernel = text(self.attr("kernel_type", "LINEAR"))
        if self.kernel not in KERNELS:
            raise self.fail(f"kernel_type '{self.kernel}' must be one of {', '.join(KERNELS)}")
        params = floats(self, "kernel_params", required=False)
        params = [0.0, 0.0, 0.0] if params is None else list(params) + [0.0] * (3 - len(params))
        self.gamma, self.coef0, self.degree = params[0], params[1], params[2]
        self.post = post_transform_name(self)
        self.rho = floats(self, "rho", required=False)
        self.coefs = floats(self, "coefficients", required=False)
        if self.coefs is None:
            self.coefs = np.zeros(0)

    def support(self, count: int) -> np.ndarray:
        sv = floats(self, "support_vectors", required=False)
        if sv is None or len(sv) != count * self.f:
            raise self.fail(f"support_vectors has {0 if sv is None else len(sv)} values; {count} vectors of "
                            f"{self.f} features expected")
        return sv.reshape(count, self.f)

    def gram(self, x: np.ndarray, sv: np.ndarray, kernel: str) -> np.ndarray:
        """K(x_n, sv_j) for every sample and vector: [N, vectors] (float64)."""
        if kernel == "RBF":
            d = (x * x).sum(1)[:, None] + (sv * sv).sum(1)[None] - 2 * x @ sv.T
            return np.exp(-self.gamma * np.maximum(d, 0))
        dot = x @ sv.T
        if kernel == "POLY":
            return (dot * self.gamma + self.coef0) ** self.degree
        if kernel == "SIGMOID":
            return np.tanh(dot * self.gamma + self.coef0)
        return dot

    def rows(self, x):
        return x.reshape(self.n, self.f).astype(np.float64)


@register("SVMRegressor", since=1, domain=ML)
class SVMRegressor(_Svm):
    """[N, 1]: sum_j coefficients[j] K(x, sv_j) + rho (n_supports = 0: the linear model
    x . coefficients + rho); one_class gives the sign as +-1."""

    def prepare(self):
        self.common()
        self.supports = int(self.attr("n_supports", 0))
        if self.supports > 0:
            self.sv = self.support(self.supports)
            if len(self.coefs) != self.supports:
                raise self.fail(f"{len(self.coefs)} coefficients for {self.supports} support vectors")
        elif len(self.coefs) != self.f:
            raise self.fail(f"{len(self.coefs)} coefficients for a linear model of {self.f} features")
        if self.rho is None or not len(self.rho):
            raise self.fail("attribute 'rho' is required")
        self.one_class = bool(int(self.attr("one_class", 0)))
        self.out = Meta(F32, (self.n, 1))

    def infer(self):
        return [self.out]

    def compute(self, x):
        xr = self.rows(x)
        if self.supports > 0:
            s = self.gram(xr, self.sv, self.kernel) @ self.coefs
        else:
            s = xr @ self.coefs
        s = s + self.rho[0]
        if self.one_class:
            s = np.where(s > 0, 1.0, -1.0)
        return [post_transform(s[:, None], self.post).astype(np.float32)]


def _couple(r: np.ndarray) -> np.ndarray:
    """libsvm's multiclass probability from pairwise ones r [N, k, k] (r[i, j] = P(i | i or j))."""
    n, k = r.shape[:2]
    q = -r.transpose(0, 2, 1) * r  # Q[t, j] = -r[j, t] r[t, j] off the diagonal
    rt2 = (r.transpose(0, 2, 1) ** 2)
    eye = np.eye(k, dtype=bool)
    q[:, eye] = (np.where(eye, 0, rt2)).sum(axis=2)  # Q[t, t] = sum over j != t of r[j, t]^2
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    active = np.ones(n, bool)
    for _ in range(max(100, k)):  # iterations of libsvm's method, all samples at once
        qp = np.einsum("ntj,nj->nt", q, p)
        pqp = (p * qp).sum(1)
        active &= np.abs(qp - pqp[:, None]).max(1) >= eps
        if not active.any():
            break
        for t in range(k):
            diff = np.where(active, (-qp[:, t] + pqp) / q[:, t, t], 0.0)
            p[:, t] += diff
            pqp = (pqp + diff * (diff * q[:, t, t] + 2 * qp[:, t])) / (1 + diff) ** 2
            p /= (1 + diff)[:, None]
            qp = (qp + diff[:, None] * q[:, t, :]) / (1 + diff)[:, None]
    return p


@register("SVMClassifier", since=1, domain=ML)
class SVMClassifier(_Svm):
    """One-vs-one SVC (vectors_per_class given) or a linear model per class. Scores: the pairwise
    decision values (or, with prob_a/prob_b, coupled class probabilities; or, linear, one score per
    class), post-transformed; label: the most voted (or best scored) class."""

    def prepare(self):
        if self.attr("classlabels_strings") is not None:
            raise self.fail("string class labels (classlabels_strings) need string tensors, which ge runs on "
                            "the dynamic path only")
        self.common()
        labels = self.attr("classlabels_ints")
        self.labels = np.asarray(labels if labels else [], np.int64)
        k = max(len(self.labels), 1)
        self.k = k
        per_class = [int(v) for v in self.attr("vectors_per_class") or []]
        total = sum(per_class)
        self.svc = total > 0
        if self.rho is None or not len(self.rho):
            raise self.fail("attribute 'rho' is required")
        if self.svc:
            if len(per_class) != k:
                raise self.fail(f"vectors_per_class has {len(per_class)} entries for {k} classes")
            self.sv = self.support(total)
            if len(self.coefs) != (k - 1) * total:
                raise self.fail(f"{len(self.coefs)} coefficients; (classes - 1) * vectors = {(k - 1) * total} expected")
            self.starts = np.concatenate([[0], np.cumsum(per_class)])
            self.pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
            if len(self.rho) < len(self.pairs):
                raise self.fail(f"rho has {len(self.rho)} values for {len(self.pairs)} class pairs")
            # the pair (i, j)'s coefficients over all vectors: coefs[j-1] on class i's, coefs[i] on class j's
            c = self.coefs.reshape(k - 1, total)
            pc = np.zeros((total, len(self.pairs)))
            for p, (i, j) in enumerate(self.pairs):  # planning: one column per pair
                si, sj = slice(self.starts[i], self.starts[i + 1]), slice(self.starts[j], self.starts[j + 1])
                pc[si, p] = c[j - 1, si]
                pc[sj, p] = c[i, sj]
            self.pair_coefs = pc
            self.prob_a = floats(self, "prob_a", required=False)
            self.prob_b = floats(self, "prob_b", required=False)
            self.proba = self.prob_a is not None and len(self.prob_a) > 0
            if self.proba and (len(self.prob_a) < len(self.pairs) or self.prob_b is None
                               or len(self.prob_b) < len(self.pairs)):
                raise self.fail(f"prob_a/prob_b need one value per class pair ({len(self.pairs)})")
            width = k if self.proba else len(self.pairs)
        else:
            self.proba = False
            if len(self.coefs) != k * self.f:
                raise self.fail(f"{len(self.coefs)} coefficients for {k} classes of {self.f} features")
            self.lin = self.coefs.reshape(k, self.f).T
            width = k
        self.positive = bool((self.coefs >= 0).all())
        self.binary_extra = len(self.rho) == 1 and len(self.labels) == 2 and width == 1
        self.metas = [Meta(np.dtype(np.int64), (self.n,)), Meta(F32, (self.n, 2 if self.binary_extra else width))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, x):
        xr = self.rows(x)
        votes = None
        if self.svc:
            s = self.gram(xr, self.sv, self.kernel) @ self.pair_coefs + self.rho[:len(self.pairs)]
            winner = np.where(s > 0, [i for i, _ in self.pairs], [j for _, j in self.pairs])
            votes = np.zeros((self.n, self.k))
            np.add.at(votes, (np.repeat(np.arange(self.n), len(self.pairs)), winner.reshape(-1)), 1)
            if self.proba:
                v = 1 - 1 / (1 + np.exp(-(s * self.prob_a[:len(self.pairs)] + self.prob_b[:len(self.pairs)])))
                v = np.clip(v, 1e-7, 1 - 1e-7)
                r = np.zeros((self.n, self.k, self.k))
                for p, (i, j) in enumerate(self.pairs):
                    r[:, i, j], r[:, j, i] = v[:, p], 1 - v[:, p]
                s = _couple(r)
        else:
            s = xr @ self.lin + self.rho[0]
        best = np.argmax(votes if votes is not None else s, axis=1)
        weight = (votes if votes is not None else s)[np.arange(self.n), best]
        labels = self.labels if len(self.labels) else np.arange(self.k)
        label = labels[best]
        if self.svc and len(self.rho) == 1:  # onnxruntime's rules for a single decision value
            if len(self.labels) == 2:
                if not self.proba and self.positive:
                    label = np.where(weight >= 0.5, labels[1], label)
            else:
                label = np.where(weight > 0, 1, 0)
        if self.binary_extra:  # one decision value for two labels: [-s, s] (or its transform)
            s0 = s[:, 0]
            if self.post == "LOGISTIC":
                z = np.stack([1 / (1 + np.exp(s0)), 1 / (1 + np.exp(-s0))], 1)
            elif self.post in ("SOFTMAX", "SOFTMAX_ZERO"):
                z = post_transform(np.stack([-s0, s0], 1), self.post)
            else:
                z = np.stack([-s0, s0], 1)
        else:
            z = post_transform(s, self.post) if s.shape[1] >= 2 else s
        return [np.asarray(label, np.int64), z.astype(np.float32)][:self.num_outputs]
