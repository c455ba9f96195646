"""CumProd and BitCast (opset 26).

CumProd is np.cumprod along the axis given at run time (exclusive: shifted by one with a leading 1,
reverse: on the reversed axis). BitCast reinterprets the bytes of a tensor as another type of the
same width: a numpy view, copied into the output.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta, dtype_from_onnx
from ..base import Kernel
from ..registry import register


@register("CumProd", since=26)
class CumProd(Kernel):
    def prepare(self):
        xm = self.inputs[0] if self.inputs else None
        am = self.inputs[1] if len(self.inputs) > 1 else None
        if xm is None or am is None:
            raise self.fail("inputs x and axis are required")
        if tuple(am.shape) not in ((), (1,)):
            raise self.fail(f"axis has shape {tuple(am.shape)}; a scalar expected")
        if not xm.shape:
            raise self.fail("x is a scalar; rank >= 1 expected")
        self.exclusive = bool(int(self.attr("exclusive", 0)))
        self.reverse = bool(int(self.attr("reverse", 0)))
        self.out = Meta(xm.dtype, tuple(xm.shape))

    def infer(self):
        return [self.out]

    def compute(self, x, axis):
        a = int(np.asarray(axis).reshape(-1)[0])
        if not -x.ndim <= a < x.ndim:
            raise self.fail(f"axis={a} is out of range for rank {x.ndim}")
        a %= x.ndim
        if self.reverse:
            x = np.flip(x, a)
        y = np.cumprod(x, axis=a, dtype=x.dtype)
        if self.exclusive:  # shift by one: a leading 1, the last product dropped
            head = np.ones_like(np.take(y, [0], axis=a))
            y = np.concatenate([head, np.take(y, np.arange(x.shape[a] - 1), axis=a)], axis=a)
        return [np.flip(y, a) if self.reverse else y]


@register("BitCast", since=26)
class BitCast(Kernel):
    def prepare(self):
        xm = self.inputs[0] if self.inputs else None
        if xm is None:
            raise self.fail("input is required")
        to = self.attr("to")
        if to is None:
            raise self.fail("attribute 'to' is required")
        target = dtype_from_onnx(int(to), f"node '{self.name}' (BitCast) attribute 'to'")
        if xm.dtype.kind in "OUS" or target.kind in "OUS":
            raise self.fail("strings have no fixed width: BitCast from or to string is not defined")
        if np.dtype(xm.dtype).itemsize != target.itemsize:
            raise self.fail(f"{xm.dtype} ({np.dtype(xm.dtype).itemsize * 8} bits) and {target} "
                            f"({target.itemsize * 8} bits) differ in width")
        self.target = target
        self.out = Meta(target, tuple(xm.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        return [np.ascontiguousarray(x).view(self.target)]
