"""The optimizers of ai.onnx.preview.training: Adagrad, Adam and Momentum.

Each takes the learning rate R and the step count T (scalars), then n tensors to optimize, their n
gradients and their n (or 2n for Adam) state tensors, and returns the n new tensors followed by the
new states. Every update is elementwise: computed in float64 (as the spec's formulas with double
attributes) and rounded to each tensor's own type.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..registry import register
from ..values import text

TRAINING = "ai.onnx.preview.training"
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class _Optimizer(Kernel):
    #: the per-tensor groups after X and G (Adagrad: H; Adam: V, H; Momentum: V)
    states: tuple[str, ...] = ()

    def prepare(self):
        if len(self.inputs) < 2 or self.inputs[0] is None or self.inputs[1] is None:
            raise self.fail("inputs R (learning rate) and T (update count) are required")
        r, t = self.inputs[:2]
        if r.dtype not in FLOATS or tuple(r.shape) not in ((), (1,)):
            raise self.fail(f"R is {r.dtype} {tuple(r.shape)}; a float or double scalar expected")
        if t.dtype != np.int64 or tuple(t.shape) not in ((), (1,)):
            raise self.fail(f"T is {t.dtype} {tuple(t.shape)}; an int64 scalar expected")
        groups = 2 + len(self.states)
        rest = self.inputs[2:]
        if not rest or len(rest) % groups:
            raise self.fail(f"{len(rest)} tensors after R and T; a multiple of {groups} "
                            f"(X, G, {', '.join(self.states)} per optimized tensor) expected")
        n = len(rest) // groups
        self.n = n
        for i in range(n):
            group = [rest[i + k * n] for k in range(groups)]
            if any(m is None for m in group):
                raise self.fail(f"tensor {i}: an input of its group is missing")
            x = group[0]
            if x.dtype not in FLOATS:
                raise self.fail(f"X{i} has type {x.dtype}; float or double expected")
            for m, what in zip(group[1:], ("G",) + self.states):
                if tuple(m.shape) != tuple(x.shape) or m.dtype != x.dtype:
                    raise self.fail(f"{what}{i} is {m.dtype} {tuple(m.shape)}; X{i}'s {x.dtype} {tuple(x.shape)} expected")
        self.metas = [Meta(rest[i + k * n].dtype, tuple(rest[i + k * n].shape))
                      for k in [0] + list(range(2, groups)) for i in range(n)]
        self.params()

    def params(self) -> None:
        """Read the attributes."""

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, r, t, *rest):
        n, groups = self.n, 2 + len(self.states)
        r, t = float(np.asarray(r).reshape(-1)[0]), int(np.asarray(t).reshape(-1)[0])
        new = [self.update(r, t, *[rest[i + k * n].astype(np.float64) for k in range(groups)]) for i in range(n)]
        outs = [new[i][k].astype(rest[i].dtype) for k in range(groups - 1) for i in range(n)]
        return outs[:self.num_outputs]


@register("Adagrad", since=1, domain=TRAINING)
class Adagrad(_Optimizer):
    """r' = R / (1 + T decay_factor); g' = norm_coefficient X + G; H' = H + g'^2;
    X' = X - r' g' / (sqrt(H') + epsilon)."""
    states = ("H",)

    def params(self):
        self.decay = float(self.attr("decay_factor", 0.0))
        self.eps = float(self.attr("epsilon", 1e-6))
        self.norm = float(self.attr("norm_coefficient", 0.0))

    def update(self, r, t, x, g, h):
        rate = r / (1 + t * self.decay)
        g = self.norm * x + g
        h = h + g * g
        return x - rate * g / (np.sqrt(h) + self.eps), h


@register("Adam", since=1, domain=TRAINING)
class Adam(_Optimizer):
    """g' = norm_coefficient X + G; V' = alpha V + (1 - alpha) g'; H' = beta H + (1 - beta) g'^2;
    r' = R sqrt(1 - beta^T) / (1 - alpha^T) when T > 0; X' = (1 - norm_coefficient_post)
    (X - r' V' / (sqrt(H') + epsilon))."""
    states = ("V", "H")

    def params(self):
        self.alpha = float(self.attr("alpha", 0.9))
        self.beta = float(self.attr("beta", 0.999))
        self.eps = float(self.attr("epsilon", 1e-6))
        self.norm = float(self.attr("norm_coefficient", 0.0))
        self.norm_post = float(self.attr("norm_coefficient_post", 0.0))

    def update(self, r, t, x, g, v, h):
        g = self.norm * x + g
        v = self.alpha * v + (1 - self.alpha) * g
        h = self.beta * h + (1 - self.beta) * g * g
        rate = r * np.sqrt(1 - self.beta ** t) / (1 - self.alpha ** t) if t > 0 else r
        x = (1 - self.norm_post) * (x - rate * (v / (np.sqrt(h) + self.eps)))
        return x, v, h


@register("Momentum", since=1, domain=TRAINING)
class Momentum(_Optimizer):
    """g' = norm_coefficient X + G; V' = alpha V + beta' g' (beta' = 1 at T = 0);
    standard: X' = X - R V'; nesterov: X' = X - R (g' + alpha V')."""
    states = ("V",)

    def params(self):
        for key in ("alpha", "beta", "norm_coefficient", "mode"):
            if self.attr(key) is None:
                raise self.fail(f"attribute '{key}' is required")
        self.alpha, self.beta = float(self.attr("alpha")), float(self.attr("beta"))
        self.norm = float(self.attr("norm_coefficient"))
        self.mode = text(self.attr("mode"))
        if self.mode not in ("standard", "nesterov"):
            raise self.fail(f"mode '{self.mode}' must be standard or nesterov")

    def update(self, r, t, x, g, v):
        g = self.norm * x + g
        v = self.alpha * v + (self.beta if t > 0 else 1.0) * g
        step = v if self.mode == "standard" else g + self.alpha * v
        return x - r * step, v
