"""Random ops: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli, Multinomial.

Each kernel owns a numpy Generator, seeded from the `seed` attribute when there is one (so a compiled
model draws the same sequence run after run, as onnxruntime does with a seed, though not the same
numbers as onnxruntime's generator), else from fresh entropy. Draws go straight into the planned
output (Generator methods with `out=`). The constant-folding pass never folds these ops.
"""
from __future__ import annotations


import numpy as np

from ...model.ir import DTYPES, Meta
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register

FLOATS = (np.float16, np.float32, np.float64)


class _Random(PlannedKernel):
    def generator(self) -> np.random.Generator:
        seed = self.attr("seed")
        if seed is None:
            return np.random.default_rng()
        bits = np.float32(float(seed)).view(np.uint32)  # the float seed's bits, as a stable integer
        return np.random.default_rng(int(bits))

    def out_dtype(self, default) -> np.dtype:
        dt = self.attr("dtype")
        if dt is None:
            return np.dtype(default)
        d = DTYPES.get(int(dt))
        if d is None:
            raise self.fail(f"dtype={dt} is not supported")
        return d

    def float_out(self, default=np.float32) -> np.dtype:
        d = self.out_dtype(default)
        if d not in FLOATS:
            raise self.fail(f"output type {d} is not supported (float16, float32, float64)")
        return d

    def prepare(self):
        self.rng = self.generator()
        self.prepare_random()
        self.scratch = Scratch()
        work = self.out_metas[0]
        if work.dtype == np.float16:  # the Generator draws float32/float64 only
            self.scratch.add("f", work.shape, np.float32)

    def target(self, ys, ws):
        """The array to draw into (float32 scratch for a float16 output) and the final output."""
        v = self.views(ws)
        return v.get("f", ys[0]), ys[0]


class _Shaped(_Random):
    def shape_from_attr(self) -> tuple:
        shape = self.attr("shape")
        if shape is None:
            raise self.fail("attribute 'shape' is required")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise self.fail(f"shape {list(shape)} has a negative dim")
        return shape

    def shape_from_input(self) -> tuple:
        m = self.inputs[0] if self.inputs else None
        if m is None:
            raise self.fail("input 0 is missing")
        return tuple(m.shape)


@register("RandomNormal", since=1)
class RandomNormal(_Shaped):
    like = False

    def prepare_random(self):
        shape = self.shape_from_input() if self.like else self.shape_from_attr()
        dt = self.float_out(self.inputs[0].dtype if self.like and self.inputs[0].dtype in FLOATS else np.float32)
        self.mean, self.scale = float(self.attr("mean", 0.0)), float(self.attr("scale", 1.0))
        self.out_metas = [Meta(dt, shape)]

    def run(self, xs, ys, ws):
        t, y = self.target(ys, ws)
        self.rng.standard_normal(out=t, dtype=t.dtype)
        np.multiply(t, self.scale, out=t)
        np.add(t, self.mean, out=t)
        if t is not y:
            np.copyto(y, t, casting="unsafe")


@register("RandomNormalLike", since=1)
class RandomNormalLike(RandomNormal):
    like = True


@register("RandomUniform", since=1)
class RandomUniform(_Shaped):
    like = False

    def prepare_random(self):
        shape = self.shape_from_input() if self.like else self.shape_from_attr()
        dt = self.float_out(self.inputs[0].dtype if self.like and self.inputs[0].dtype in FLOATS else np.float32)
        self.low, self.high = float(self.attr("low", 0.0)), float(self.attr("high", 1.0))
        self.out_metas = [Meta(dt, shape)]

    def run(self, xs, ys, ws):
        t, y = self.target(ys, ws)
        self.rng.random(out=t, dtype=t.dtype)
        np.multiply(t, self.high - self.low, out=t)
        np.add(t, self.low, out=t)
        if t is not y:
            np.copyto(y, t, casting="unsafe")


@register("RandomUniformLike", since=1)
class RandomUniformLike(RandomUniform):
    like = True


@register("Bernoulli", since=15)
class Bernoulli(_Random):
    """y = 1 where a uniform draw is below the probability p, else 0 (output type `dtype`, default p's)."""

    def prepare_random(self):
        pm = self.inputs[0] if self.inputs else None
        if pm is None:
            raise self.fail("input 0 (probabilities) is missing")
        dt = self.out_dtype(pm.dtype)
        self.out_metas = [Meta(dt, tuple(pm.shape))]
        self.u_shape = tuple(pm.shape)

    def prepare(self):
        super().prepare()
        self.scratch.add("u", self.u_shape, np.float64)
        self.scratch.add("m", self.u_shape, np.bool_)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        u, m = v["u"], v["m"]
        self.rng.random(out=u)
        p = xs[0] if xs[0].dtype.name != "bfloat16" else xs[0].astype(np.float32)  # (numpy cannot compare bfloat16)
        np.less(u, p, out=m)
        np.copyto(ys[0], m, casting="unsafe")


@register("Multinomial", since=7)
class Multinomial(_Random):
    """[batch, sample_size] class indices drawn from softmax(input) (unnormalized log-probabilities)."""

    def prepare_random(self):
        xm = self.inputs[0] if self.inputs else None
        if xm is None or xm.dtype not in FLOATS or len(xm.shape) != 2:
            raise self.fail("input 0 must be a float tensor [batch, classes]")
        dt = self.out_dtype(np.int32)
        if dt not in (np.int32, np.int64):
            raise self.fail(f"dtype {dt} is not supported (int32, int64)")
        self.samples = int(self.attr("sample_size", 1))
        if self.samples < 1:
            raise self.fail(f"sample_size={self.samples} must be positive")
        self.batch, self.classes = xm.shape
        self.out_metas = [Meta(dt, (self.batch, self.samples))]

    def prepare(self):
        super().prepare()
        self.scratch.add("cdf", (self.batch, self.classes), np.float64)
        self.scratch.add("u", (self.batch, self.samples), np.float64)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        cdf, u = v["cdf"], v["u"]
        np.subtract(xs[0], np.max(xs[0], axis=1, keepdims=True), out=cdf)
        np.exp(cdf, out=cdf)
        np.cumsum(cdf, axis=1, out=cdf)
        self.rng.random(out=u)
        np.multiply(u, cdf[:, -1:], out=u)
        y = ys[0]
        for b in range(self.batch):  # one vectorized search per batch row
            np.copyto(y[b], np.minimum(np.searchsorted(cdf[b], u[b], side="right"), self.classes - 1),
                      casting="unsafe")
