"""Reductions (ReduceSum, ReduceMean, ... ArgMax, ArgMin), evaluated into the planned output.

Axes come from the `axes` attribute up to the opset where they became an optional input (13 for
ReduceSum, 18 for the others); the input must then be a constant (or empty). Empty or absent axes
reduce over every dimension, unless noop_with_empty_axes=1: then the reduction is over no axis,
which, as in onnxruntime, still applies the op's elementwise part (|x| for ReduceL1 and ReduceL2,
x^2 for ReduceSumSquare, log(x) for ReduceLogSum).
float16 is accumulated in float32 scratch, as onnxruntime does; integer sums wrap in their own
type and integer means (and the sqrt of ReduceL2) truncate toward zero, as onnxruntime does.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..planned import Scratch
from ..registry import register


def _flag(kernel: Kernel, key: str, default: int) -> int:
    value = kernel.attr(key, default)
    if value not in (0, 1):
        raise kernel.fail(f"attribute {key} must be 0 or 1, got {value!r}")
    return int(value)


class Reduce(Kernel):
    #: the opset from which axes is an (optional) input instead of an attribute
    axes_input_since = 18

    def prepare(self) -> None:
        if not self.inputs or self.inputs[0] is None:
            raise self.fail("input 0 (data) is required")
        x = self.inputs[0]
        self.dtype = np.dtype(x.dtype)  # one of the schema's (checked before prepare); bfloat16 comes widened
        self.in_shape = tuple(int(d) for d in x.shape)
        rank = len(self.in_shape)
        self.keepdims = _flag(self, "keepdims", 1)
        axes = self._axes()
        if not axes:
            noop = self.opset >= self.axes_input_since and bool(_flag(self, "noop_with_empty_axes", 0))
            axes = [] if noop else list(range(rank))
        normalized = []
        for a in axes:
            if not -rank <= a < rank:
                raise self.fail(f"axis {a} is out of range for an input of rank {rank}")
            normalized.append(a % rank if rank else 0)
        if len(set(normalized)) != len(normalized):
            raise self.fail(f"axes {list(axes)} repeat an axis")
        self.axes = tuple(sorted(normalized))
        self.count = int(np.prod([self.in_shape[a] for a in self.axes], dtype=np.int64))
        self.kept_shape = tuple(1 if i in self.axes else d for i, d in enumerate(self.in_shape))
        if self.keepdims:
            self.shape = self.kept_shape
        else:
            self.shape = tuple(d for i, d in enumerate(self.in_shape) if i not in self.axes)
        self.out_dtype = self.dtype
        self.setup()

    def _axes(self) -> list[int] | None:
        if self.opset >= self.axes_input_since:
            if "axes" in self.attrs:
                raise self.fail(f"axes is an input since opset {self.axes_input_since}, not an attribute")
            if len(self.inputs) < 2 or self.inputs[1] is None:
                return None
            m = self.inputs[1]
            if int(np.prod(m.shape, dtype=np.int64)) == 0:
                return []
            return [int(a) for a in np.asarray(self.const(1, "axes")).reshape(-1)]
        if len(self.inputs) > 1:
            raise self.fail(f"takes 1 input before opset {self.axes_input_since} (axes is an attribute)")
        axes = self.attr("axes")
        if axes is None:
            return None
        try:
            return [int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
        except (TypeError, ValueError):
            raise self.fail(f"attribute axes must be a list of ints, got {axes!r}") from None

    # -- hooks -------------------------------------------------------------------------------
    def setup(self) -> None:
        self.scratch = Scratch()

    def workspace_nbytes(self) -> int:
        return self.scratch.nbytes

    def infer(self) -> list[Meta]:
        return [Meta(self.out_dtype, self.shape)]

    def compute(self, *xs):
        ys = [np.empty(m.shape, m.dtype) for m in self.infer()]
        self.run(list(xs), ys, self.scratch.allocate())
        return ys

    def run(self, xs, ys, ws):
        with np.errstate(all="ignore"):
            self.evaluate(xs[0], ys[0], self.scratch.carve_list(ws))

    def evaluate(self, x, y, bufs) -> None:
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------------
    def reduce(self, ufunc, x, out, dtype=None, initial=None):
        kwargs = {} if initial is None else {"initial": initial}
        ufunc.reduce(x, axis=self.axes, dtype=dtype, out=out, keepdims=bool(self.keepdims), **kwargs)


class Accumulate(Reduce):
    """sum(f(x)) over the axes, accumulated in `acc` (float32 for float16), then `finish`."""
    #: the elementwise step before summing: None, "square", "abs", "exp" (LogSumExp)
    pre = None
    ufunc = np.add
    #: evaluate integer inputs in float64 (then truncate) instead of in their own type
    float_only = False

    def setup(self):
        self.acc = np.dtype(np.float32) if self.dtype == np.float16 else self.dtype
        if self.float_only and self.dtype.kind != "f":
            self.acc = np.dtype(np.float64)
        specs = {}
        if self.acc != self.dtype:
            specs["yw"] = (self.acc, self.shape)
        if self.pre is not None:
            specs["t"] = (self.acc, self.in_shape)
        if self.pre == "exp":
            specs["m"] = (self.acc, self.kept_shape)
            specs["finite"] = (np.bool_, self.kept_shape)
        if self.op_type == "ReduceMean" and self.dtype.kind in "iu":
            specs["rem"] = (self.dtype, self.shape)
        self.names = list(specs)
        self.scratch = Scratch.of(list(specs.values()))

    def evaluate(self, x, y, bufs):
        b = dict(zip(self.names, bufs))
        yw = b.get("yw", y)
        src = x
        if self.pre == "square":
            np.multiply(x, x, out=b["t"], dtype=self.acc)
            src = b["t"]
        elif self.pre == "abs":
            np.absolute(x, out=b["t"], dtype=self.acc) if self.dtype.kind != "u" else np.copyto(b["t"], x)
            src = b["t"]
        elif self.pre == "exp":
            m, finite = b["m"], b["finite"]
            np.maximum.reduce(x, axis=self.axes, out=m, keepdims=True, dtype=self.acc,
                              initial=-np.inf)  # shifted by the max: exp never overflows
            np.isfinite(m, out=finite)
            np.logical_not(finite, out=finite)
            np.copyto(m, 0, where=finite)       # all -inf (or empty) slices: shift by 0
            np.subtract(x, m, out=b["t"], dtype=self.acc)
            np.exp(b["t"], out=b["t"])
            src = b["t"]
        self.reduce(self.ufunc, src, yw, dtype=self.acc)
        self.finish(yw, b)
        if yw is not y:
            np.copyto(y, yw, casting="unsafe")

    def finish(self, y, b) -> None:
        pass


@register("ReduceSum")
class ReduceSum(Accumulate):
    axes_input_since = 13


@register("ReduceSumSquare")
class ReduceSumSquare(Accumulate):
    pre = "square"


@register("ReduceL1")
class ReduceL1(Accumulate):
    pre = "abs"


@register("ReduceL2")
class ReduceL2(Accumulate):
    pre = "square"

    def finish(self, y, b):
        np.sqrt(y, out=y, casting="unsafe")  # integers: truncated, as in onnxruntime


@register("ReduceProd")
class ReduceProd(Accumulate):
    ufunc = np.multiply


@register("ReduceMean")
class ReduceMean(Accumulate):
    def finish(self, y, b):
        if self.count == 0:
            return  # onnxruntime gives 0 for the mean of nothing
        if self.dtype.kind in "iu":  # truncating division: (s - fmod(s, n)) / n is exact
            n = self.dtype.type(self.count)
            np.fmod(y, n, out=b["rem"])
            np.subtract(y, b["rem"], out=y)
            np.floor_divide(y, n, out=y)
        else:
            np.divide(y, self.acc.type(self.count), out=y)


@register("ReduceLogSum")
class ReduceLogSum(Accumulate):
    float_only = True

    def finish(self, y, b):
        np.log(y, out=y)


@register("ReduceLogSumExp")
class ReduceLogSumExp(Accumulate):
    pre = "exp"
    float_only = True

    def finish(self, y, b):
        np.log(y, out=y)
        np.add(y, b["m"].reshape(y.shape), out=y)


class Extremum(Reduce):
    """max/min; over an empty set: the dtype's lowest/highest (-inf/+inf), as in the spec."""
    ufunc = None

    def evaluate(self, x, y, bufs):
        initial = None
        if self.count == 0:
            if self.dtype == np.bool_:
                initial = self.ufunc is np.minimum
            elif self.dtype.kind == "f":
                initial = np.inf if self.ufunc is np.minimum else -np.inf
            else:
                info = np.iinfo(self.dtype)
                initial = info.max if self.ufunc is np.minimum else info.min
        self.reduce(self.ufunc, x, y, initial=initial)


@register("ReduceMax")
class ReduceMax(Extremum):
    ufunc = np.maximum  # NaN propagates


@register("ReduceMin")
class ReduceMin(Extremum):
    ufunc = np.minimum


class ArgExtremum(Kernel):
    """Index (int64) of the first -- or with select_last_index=1 the last -- max/min along axis."""
    func = None

    def prepare(self) -> None:
        if not self.inputs or self.inputs[0] is None:
            raise self.fail("input 0 (data) is required")
        x = self.inputs[0]
        self.dtype = np.dtype(x.dtype)  # one of the schema's (checked before prepare); bfloat16 comes widened
        shape = tuple(int(d) for d in x.shape)
        rank = len(shape)
        axis = self.attr("axis", 0)
        if not isinstance(axis, (int, np.integer)) or not -rank <= axis < max(rank, 1) or rank == 0:
            raise self.fail(f"axis {axis!r} is out of range for an input of rank {rank}")
        self.axis = int(axis) % rank
        self.keepdims = _flag(self, "keepdims", 1)
        self.last = _flag(self, "select_last_index", 0)
        if shape[self.axis] == 0:
            raise self.fail(f"cannot take {self.op_type} over axis {self.axis} of size 0")
        self.n = shape[self.axis]
        self.shape = tuple(1 if i == self.axis else d for i, d in enumerate(shape)) if self.keepdims else \
            tuple(d for i, d in enumerate(shape) if i != self.axis)
        # numpy's argmax copies the input unless the axis is the last one and runs forward: that
        # copy (axis moved last, reversed for select_last_index) goes to the workspace instead
        self.staged = self.last or self.axis != rank - 1
        moved = tuple(d for i, d in enumerate(shape) if i != self.axis) + (self.n,)
        self.scratch = Scratch.of([(self.dtype, moved)] if self.staged else [])

    def workspace_nbytes(self) -> int:
        return self.scratch.nbytes

    def infer(self) -> list[Meta]:
        return [Meta(np.dtype(np.int64), self.shape)]

    def compute(self, *xs):
        y = np.empty(self.shape, np.int64)
        self.run(list(xs), [y], self.scratch.allocate())
        return [y]

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        out = np.squeeze(y, self.axis) if self.keepdims else y  # a view: writes land in y
        if self.staged:
            (t,) = self.scratch.carve_list(ws)
            src = np.moveaxis(x, self.axis, -1)
            np.copyto(t, src[..., ::-1] if self.last else src)
            x = t
        axis = -1 if self.staged else self.axis
        if out.dtype == np.intp:
            type(self).func(x, axis=axis, out=out)
        else:
            np.copyto(out, type(self).func(x, axis=axis))
        if self.last:
            np.subtract(np.int64(self.n - 1), out, out=out)


@register("ArgMax")
class ArgMax(ArgExtremum):
    func = np.argmax


@register("ArgMin")
class ArgMin(ArgExtremum):
    func = np.argmin
