"""Elementwise ops with ONNX (numpy) broadcasting; every one writes straight into `out`."""
from __future__ import annotations

import numpy as np

from .base import Kernel
from .registry import register


class Unary(Kernel):
    """y = ufunc(x), evaluated into the planned output."""
    ufunc = None

    def compute(self, x):
        return [self.ufunc(x)]

    def run(self, xs, ys, ws):
        self.ufunc(xs[0], out=ys[0])


class Binary(Kernel):
    ufunc = None

    def compute(self, a, b):
        return [self.ufunc(a, b)]

    def run(self, xs, ys, ws):
        self.ufunc(xs[0], xs[1], out=ys[0])


@register("Relu")
class Relu(Unary):
    def compute(self, x):
        return [np.maximum(x, x.dtype.type(0))]

    def run(self, xs, ys, ws):
        np.maximum(xs[0], xs[0].dtype.type(0), out=ys[0])


@register("Add")
class Add(Binary):
    ufunc = np.add
