"""BatchNormalization (inference), LayerNormalization, ge's fused RMSNormalization, Softmax, LogSoftmax:
ufuncs with `out=` over the whole tensor, per-row statistics in small workspace arrays. float16 is
computed in float32 scratch and rounded once into Y (float16 sums and exponentials lose too much;
onnxruntime widens too): the native row kernels (LayerNormalization, RMSNormalization, Softmax along
the last axis) convert a row at a time as they read and store it, the others convert X and Y whole."""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..dtypes import working_dtype
from ..float16 import narrow, widen
from ..planned import Scratch
from .windows import SpatialKernel
from ..fused import GE_DOMAIN
from ..native import ROWS_RMS_NORM, ROWS_SOFTMAX, CallCache, run_for_threads
from ..registry import register


def _float_type(k: SpatialKernel, dt: np.dtype) -> None:
    if dt not in (np.float16, np.float32, np.float64):
        raise k.fail(f"input type {dt} is not supported (float16, float32, float64)")


def _norm_axis(k: SpatialKernel, shape: tuple) -> int:
    """The `axis` attribute (default -1) as a non-negative axis of X's shape."""
    r = len(shape)
    axis = int(k.attr("axis", -1))
    if not -r <= axis < r:
        raise k.fail(f"axis={axis} is out of range for X of shape {shape}")
    return axis % r


def _check_broadcast(k: SpatialKernel, what: str, m: Meta, norm: tuple) -> None:
    try:
        if np.broadcast_shapes(tuple(m.shape), norm) != norm:
            raise ValueError
    except ValueError:
        raise k.fail(f"{what} of shape {tuple(m.shape)} does not broadcast to {norm}") from None


class _Widened(SpatialKernel):
    """A kernel whose run_wide() works in `self.work`: float32 for float16 X, else X's dtype."""

    def widen(self, xm: Meta) -> np.dtype:
        """Called by prepare() once `self.scratch` exists; returns the working dtype."""
        self.work = working_dtype(xm.dtype) if xm.dtype == np.float16 else xm.dtype
        if self.work != xm.dtype:
            self.scratch.add("x_wide", tuple(xm.shape), self.work)
            self.scratch.add("y_wide", tuple(xm.shape), self.work)
        return self.work

    def run(self, xs, ys, ws):
        if self.work == xs[0].dtype:
            return self.run_wide(xs, ys, ws)
        if self.run_half(xs, ys):
            return
        v = self.views(ws)
        x, y = v["x_wide"], v["y_wide"]
        widen(self.backend.lib, xs[0], x)  # native for float16, with numpy's rounding
        self.run_wide([x, *xs[1:]], [y, *ys[1:]], ws)
        narrow(self.backend.lib, y, ys[0])

    def run_wide(self, xs, ys, ws):
        raise NotImplementedError

    def bound(self, xs, ys, ws):
        """The native row call itself where run() would take it on these arrays every time: a task's
        views stay while it is bound, so the checks run() repeats per call are made once here."""
        build = self.rows_call_builder(xs, ys) if xs[0].dtype == self.work else None
        return super().bound(xs, ys, ws) if build is None else run_for_threads(build)

    def rows_call_builder(self, xs, ys):
        """For float32 arrays run_wide() would hand to the native row kernel as they are: a function
        preparing that call; else None."""
        return None

    def run_half(self, xs, ys) -> bool:
        """float16 X and Y through the native row kernel, which converts a row at a time; False when
        the plan has none for these arrays (then X and Y are converted whole around run_wide)."""
        return False

    def half_rows(self, xs, ys, cols: int) -> bool:
        """Whether the native row kernel can take these float16 arrays itself."""
        return self.nat is not None and xs[0].dtype == np.float16 and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous


@register("BatchNormalization", since=1)
class BatchNormalization(_Widened):
    """y = x * a + b per channel, a = scale / sqrt(var + eps), b = B - mean * a (folded once if constant).
    training_mode=1 (opset 14): normalized with the batch's mean and (biased) variance, and the
    running statistics out as input * momentum + batch * (1 - momentum)."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        if len(xm.shape) < 2:
            raise self.fail(f"X has shape {tuple(xm.shape)}, rank >= 2 expected")
        _float_type(self, xm.dtype)
        self.training = self.opset >= 14 and bool(int(self.attr("training_mode", 0)))
        if self.num_outputs > 1 and not self.training:
            raise self.fail(f"{self.num_outputs} outputs requested: the inference form has 1 (training_mode=1: 3)")
        if self.num_outputs > 3:
            raise self.fail(f"{self.num_outputs} outputs requested, at most 3 (Y, running_mean, running_var)")
        c = xm.shape[1]
        for i, what in enumerate(("scale", "B", "input_mean", "input_var"), start=1):
            m = self.input_meta(i, what)
            if tuple(m.shape) != (c,):
                raise self.fail(f"{what} has shape {tuple(m.shape)}, ({c},) expected")
        self.eps = float(self.attr("epsilon", 1e-5))
        self.bshape = (c,) + (1,) * (len(xm.shape) - 2)
        self.out_metas = [Meta(xm.dtype, tuple(xm.shape))]
        self.scratch = Scratch()
        self.dtype = self.widen(xm)
        self.ab = None  # (a, b) folded once by pack() when the parameters are constants
        if self.training:
            self.momentum = float(self.attr("momentum", 0.9))
            self.axes = (0,) + tuple(range(2, len(xm.shape)))
            self.out_metas += [Meta(xm.dtype, (c,))] * (self.num_outputs - 1)
        if self.training or not self.constant_params():
            self.scratch.add("a", self.bshape, self.dtype)
            self.scratch.add("b", self.bshape, self.dtype)

    def constant_params(self) -> bool:
        params = self.consts[1:5]
        return len(params) == 4 and all(p is not None for p in params)

    def pack(self):
        if self.constant_params() and not self.training:
            self.ab = self.shared_pack(("fold", self.eps, self.dtype.str, self.bshape), self._fold, *self.consts[1:5])

    def _fold(self, scale, bias, mean, var):
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + self.eps)
        b = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        return a.astype(self.dtype).reshape(self.bshape), b.astype(self.dtype).reshape(self.bshape)

    def run_wide(self, xs, ys, ws):
        mean, var = xs[3], xs[4]
        if self.training:  # the batch's statistics (in float64), and the running ones as outputs 1 and 2
            x64 = xs[0].astype(np.float64)
            mean, var = x64.mean(axis=self.axes), x64.var(axis=self.axes)
            m = self.momentum
            for y, running, batch in zip(ys[1:], (xs[3], xs[4]), (mean, var)):
                np.copyto(y, running * m + batch * (1 - m), casting="unsafe")
        if self.ab is not None:
            a, b = self.ab
        else:
            v = self.views(ws)
            a, b = v["a"], v["b"]
            a1, b1 = a.reshape(-1), b.reshape(-1)
            np.add(var, self.dtype.type(self.eps), out=a1, casting="unsafe")
            np.sqrt(a1, out=a1)
            np.divide(xs[1], a1, out=a1)
            np.multiply(mean, a1, out=b1, casting="unsafe")
            np.subtract(xs[2], b1, out=b1)
        y = ys[0]
        np.multiply(xs[0], a, out=y)
        np.add(y, b, out=y)


@register("LayerNormalization", since=17)
class LayerNormalization(_Widened):
    """Rows of x (the normalized axes flattened) centred and scaled. The row sums are matrix-vector
    products with a constant vector and the sums of squares np.vecdot (BLAS-speed reductions, where
    np.mean/einsum along a short last axis loop per row): four passes over x in all."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        _float_type(self, xm.dtype)
        shape = tuple(xm.shape)
        r = len(shape)
        axis = _norm_axis(self, shape)
        stash = int(self.attr("stash_type", 1))
        if stash != 1:
            raise self.fail(f"stash_type={stash} is not supported (1: float32 statistics)")
        norm = shape[axis:]
        for i, what in ((1, "Scale"), (2, "B")):
            m = self.inputs[i] if i < len(self.inputs) else None
            if m is None:
                if i == 1:
                    raise self.fail("input 1 (Scale) is missing")
                continue
            _check_broadcast(self, what, m, norm)
        self.scratch = Scratch()
        work = self.widen(xm)
        self.eps = work.type(float(self.attr("epsilon", 1e-5)))
        self.rows, self.cols = math.prod(shape[:axis]), math.prod(norm)
        self.inv_n = work.type(1.0 / max(self.cols, 1))
        self.mean_weights = np.full(self.cols, self.inv_n, work)  # x @ w: the row means
        self.vshape = (self.rows,) + norm
        # Mean, InvStdDev have the stash type, float32 (a float64 X's rows are normalized in float64)
        stat = Meta(np.dtype(np.float32), shape[:axis] + (1,) * (r - axis))
        self.out_metas = [Meta(xm.dtype, shape)] + [stat] * max(0, min(self.num_outputs, 3) - 1)
        self.scratch.add("mean", (self.rows, 1), work)
        self.scratch.add("inv", (self.rows, 1), work)
        # the native row kernel: float32, Scale and B (if any) of the normalized shape, Y alone
        full = [self.inputs[i] is None or tuple(self.inputs[i].shape) == norm
                for i in (1, 2) if i < len(self.inputs)]
        self.nat = self.backend.lib if work == np.float32 and all(full) and self.num_outputs == 1 else None
        self.uses_native = self.nat is not None
        self.calls = CallCache()

    def pack(self):
        # constant float16 Scale and B once in float32: the native rows read float32 parameters
        self.params32 = {i: self.shared_pack(("float32",), lambda c: np.ascontiguousarray(c, np.float32), c)
                         for i, c in enumerate(self.consts[1:3], 1) if c is not None and c.dtype == np.float16}

    def run_half(self, xs, ys) -> bool:
        if not self.half_rows(xs, ys, self.cols):
            return False
        params = [self.params32.get(i, xs[i] if i < len(xs) else None) for i in (1, 2)]
        if not all(a is None or (a.dtype == np.float32 and a.flags.c_contiguous) for a in params):
            return False
        scale, bias = params
        self.calls.get((xs[0], ys[0], scale, bias), lambda: self.nat.rows_call(
            xs[0], ys[0], self.rows, self.cols, scale=scale, bias=bias, eps=float(self.eps))).run()
        return True

    def rows_call_builder(self, xs, ys):
        scale, bias = xs[1], xs[2] if len(xs) > 2 else None
        if self.nat is None or not (xs[0].flags.c_contiguous and ys[0].flags.c_contiguous) or \
                not all(a is None or (a.dtype == np.float32 and a.flags.c_contiguous) for a in (scale, bias)):
            return None
        return lambda: self.nat.rows_call(xs[0], ys[0], self.rows, self.cols, scale=scale, bias=bias,
                                          eps=float(self.eps))

    def run_wide(self, xs, ys, ws):
        if self.nat is not None and ys[0].flags.c_contiguous:
            x = np.ascontiguousarray(xs[0])
            scale, bias = xs[1], xs[2] if len(xs) > 2 else None
            ok = all(a is None or (a.dtype == np.float32 and a.flags.c_contiguous) for a in (scale, bias))
            if ok:
                key = (x, ys[0], scale, bias) if x is xs[0] else None  # a copy is new each run
                build = lambda: self.nat.rows_call(x, ys[0], self.rows, self.cols, scale=scale, bias=bias,
                                                   eps=float(self.eps))
                (self.calls.get(key, build) if key else build()).run()
                return
        v = self.views(ws)
        mean, inv = v["mean"], v["inv"]
        mean1, inv1 = mean.reshape(-1), inv.reshape(-1)
        x2 = xs[0].reshape(self.rows, self.cols)
        y = ys[0]
        y2 = y.reshape(self.rows, self.cols)
        if self.cols:
            np.matmul(x2, self.mean_weights, out=mean1)
        else:
            mean1.fill(np.nan)
        np.subtract(x2, mean, out=y2)
        np.vecdot(y2, y2, out=inv1)
        np.multiply(inv1, self.inv_n, out=inv1)
        np.add(inv1, self.eps, out=inv1)
        np.sqrt(inv1, out=inv1)
        np.divide(1, inv1, out=inv1)
        np.multiply(y2, inv, out=y2)
        yv = y.reshape(self.vshape)
        np.multiply(yv, xs[1], out=yv)
        if len(xs) > 2 and xs[2] is not None:
            np.add(yv, xs[2], out=yv)
        if len(ys) > 1 and ys[1] is not None:
            np.copyto(ys[1].reshape(self.rows, 1), mean, casting="same_kind")
        if len(ys) > 2 and ys[2] is not None:
            np.copyto(ys[2].reshape(self.rows, 1), inv, casting="same_kind")


@register("LayerNormalization", since=1, domain=GE_DOMAIN)
class FusedLayerNormalization(LayerNormalization):
    """The written-out form recognized by passes.fuse_layer_norm, at any opset (ONNX has the op
    from opset 17 only)."""


@register("RMSNormalization", since=1, domain=GE_DOMAIN)
class FusedRMSNormalization(_Widened):
    """Y = X / sqrt(mean(X * X over the axes [axis, rank)) + epsilon) * scale: the written-out form
    passes.fuse_rms_norm recognizes (ONNX has RMSNormalization from opset 23 only). Native: one pass
    over a row for its sum of squares, one for the scaled row (Scale of the normalized shape, float32).
    Scale is optional and may be float32 beside float16 X (the exports' weight Mul before the Cast back)."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        _float_type(self, xm.dtype)
        shape = tuple(xm.shape)
        axis = _norm_axis(self, shape)
        norm = shape[axis:]
        sm = self.inputs[1] if len(self.inputs) > 1 else None
        if sm is not None:
            if sm.dtype not in (xm.dtype, np.float32):
                raise self.fail(f"scale has type {sm.dtype}; X's type {xm.dtype} or float32 expected")
            _check_broadcast(self, "scale", sm, norm)
        self.scratch = Scratch()
        work = self.widen(xm)
        self.eps = work.type(float(self.attr("epsilon", 1e-5)))
        self.rows, self.cols = math.prod(shape[:axis]), math.prod(norm)
        self.inv_n = work.type(1.0 / max(self.cols, 1))
        self.vshape = (self.rows,) + norm
        self.out_metas = [Meta(xm.dtype, shape)]
        self.scratch.add("inv", (self.rows, 1), work)
        full = sm is None or tuple(sm.shape) == norm
        self.nat = self.backend.lib if work == np.float32 and full else None
        self.uses_native = self.nat is not None
        self.calls = CallCache()
        self.scale32 = None

    def pack(self):
        # a constant float16 scale once in float32: the native rows read float32 parameters
        c = self.consts[1] if len(self.consts) > 1 else None
        self.scale32 = self.shared_pack(("float32",), lambda a: np.ascontiguousarray(a, np.float32), c) \
            if c is not None and c.dtype == np.float16 else None

    def _scale(self, xs):
        """Scale as the native rows read it (float32, contiguous, or None), or False when it is not."""
        scale = self.scale32 if self.scale32 is not None else xs[1] if len(xs) > 1 else None
        return scale if scale is None or (scale.dtype == np.float32 and scale.flags.c_contiguous) else False

    def _call(self, x, y, scale):
        return self.nat.rows_call(x, y, self.rows, self.cols, kind=ROWS_RMS_NORM, scale=scale, eps=float(self.eps))

    def run_half(self, xs, ys) -> bool:
        scale = self._scale(xs)
        if not self.half_rows(xs, ys, self.cols) or scale is False:
            return False
        self.calls.get((xs[0], ys[0], scale), lambda: self._call(xs[0], ys[0], scale)).run()
        return True

    def rows_call_builder(self, xs, ys):
        scale = self._scale(xs)
        if self.nat is None or scale is False or not (xs[0].flags.c_contiguous and ys[0].flags.c_contiguous):
            return None
        return lambda: self._call(xs[0], ys[0], scale)

    def run_wide(self, xs, ys, ws):
        scale = self._scale(xs)
        if self.nat is not None and scale is not False and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            self.calls.get((xs[0], ys[0], scale), lambda: self._call(xs[0], ys[0], scale)).run()
            return
        inv = self.views(ws)["inv"]
        inv1 = inv.reshape(-1)
        x2 = xs[0].reshape(self.rows, self.cols)
        y2 = ys[0].reshape(self.rows, self.cols)
        np.vecdot(x2, x2, out=inv1)  # the sums of squares, at BLAS speed
        np.multiply(inv1, self.inv_n, out=inv1)
        np.add(inv1, self.eps, out=inv1)
        np.sqrt(inv1, out=inv1)
        np.divide(1, inv1, out=inv1)
        np.multiply(x2, inv, out=y2)
        if len(xs) > 1 and xs[1] is not None:
            yv = ys[0].reshape(self.vshape)
            np.multiply(yv, xs[1], out=yv, casting="same_kind")


class _SoftmaxBase(_Widened):
    """Along the last axis (the usual case) the shift that keeps exp in range is the tensor's
    maximum, one fast reduction, where per-row maxima along a short axis cost more than the rest
    of the kernel; softmax is shift-invariant, so the result is the same unless a whole row lies
    so far below that maximum that its exponentials underflow: then (row sum below MIN_SUM, or a
    NaN/inf maximum) the kernel redoes the row-wise form. Row sums are matrix-vector products."""
    log = False
    MIN_SUM = 1e-28  # a row sum >= e^-64: every term within e^-23 of the row's largest is a normal float

    def prepare(self):
        xm = self.input_meta(0, "input")
        _float_type(self, xm.dtype)
        shape = tuple(xm.shape)
        r = len(shape)
        legacy = self.opset < 13
        axis = int(self.attr("axis", 1 if legacy else -1))
        if r == 0:
            raise self.fail("the input is a scalar; rank >= 1 expected")
        if not -r <= axis < r:
            raise self.fail(f"axis={axis} is out of range for an input of shape {shape}")
        self.out_metas = [Meta(xm.dtype, shape)]
        self.scratch = Scratch()
        work = self.widen(xm)
        if legacy:
            axis %= r
            # opset < 13: the input is coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])]
            self.view_shape, self.axis = (math.prod(shape[:axis]), math.prod(shape[axis:])), 1
        else:
            self.view_shape, self.axis = shape, axis % r
        red = list(self.view_shape)
        red[self.axis] = 1
        self.scratch.add("m", red, work)
        if self.log:
            self.scratch.add("e", self.view_shape, work)
        self.rows_shape = None
        if self.axis == len(self.view_shape) - 1 and math.prod(self.view_shape):
            n = self.view_shape[-1]
            self.rows_shape = (math.prod(self.view_shape) // n, n)
            self.ones = np.ones(n, work)
            self.scratch.add("g", (), work)
        self.nat = self.backend.lib if work == np.float32 and not self.log and self.rows_shape is not None else None
        self.uses_native = self.nat is not None
        self.calls = CallCache()
        # the probabilities over the scores where Softmax reads them last: the native rows read each element
        # before they write it there (numpy's fast path is not redone over a row it has written), so
        # attention's [heads, n, n] rows go where they were read, not into cold memory that each store first
        # reads in (Whisper's 54 MB a layer over 3000 frames)
        self.output_over = 0 if self.nat is not None else None

    def agnostic_output_shape(self, shapes):
        """Other shapes (a decoding step's scores over a growing past): the native row kernel takes rows
        of any length (_rows_of), numpy the rest with arrays of their own; not float16 (widened in the
        workspace), opset < 13 (coerced to 2-D by the built shape) or empty inputs: built per shape."""
        if self.work != self.inputs[0].dtype or self.opset < 13 or 0 in shapes[0]:
            raise ValueError("planned per shape")
        return tuple(shapes[0])

    def _rows_of(self, x) -> tuple:
        """(rows, row length) as the native row kernel takes x: the plan's for the shape planned, its
        last axis for another (a shape-agnostic instance's)."""
        return self.rows_shape if x.shape == self.out_metas[0].shape else (x.size // x.shape[-1], x.shape[-1])

    def run_half(self, xs, ys) -> bool:
        if self.nat is None or not self.half_rows(xs, ys, self.rows_shape[1]):
            return False
        rows, n = self.rows_shape
        self.calls.get((xs[0], ys[0]), lambda: self.nat.rows_call(xs[0], ys[0], rows, n, kind=ROWS_SOFTMAX)).run()
        return True

    def rows_call_builder(self, xs, ys):
        if self.nat is None or not (xs[0].flags.c_contiguous and ys[0].flags.c_contiguous):
            return None
        rows, n = self._rows_of(xs[0])
        return lambda: self.nat.rows_call(xs[0], ys[0], rows, n, kind=ROWS_SOFTMAX)

    def run_wide(self, xs, ys, ws):
        if self.nat is not None and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            rows, n = self._rows_of(xs[0])
            self.calls.get((xs[0], ys[0]), lambda: self.nat.rows_call(xs[0], ys[0], rows, n, kind=ROWS_SOFTMAX)).run()
            return
        if xs[0].shape != self.out_metas[0].shape or ws is None and self.scratch.nbytes:  # (a shape-agnostic
            # instance's run: another shape, or its own without the workspace: nothing planned for it)
            self._finish(xs[0], ys[0], np.max(xs[0], axis=self.axis, keepdims=True), None, self.axis)
            return
        v = self.views(ws)
        x = xs[0].reshape(self.view_shape)
        y = ys[0].reshape(self.view_shape)
        if self.rows_shape is not None and self._rows(x.reshape(self.rows_shape), y.reshape(self.rows_shape), v):
            return
        m, ax = v["m"], self.axis
        np.max(x, axis=ax, keepdims=True, out=m)
        self._finish(x, y, m, v, ax)

    def _rows(self, x, y, v) -> bool:
        """The fast path on [rows, n]; False when a row needs its own shift."""
        g, m = v["g"], v["m"].reshape(-1, 1)
        np.max(x, out=g)
        if not np.isfinite(g):
            return False
        np.subtract(x, g, out=y)
        e = v["e"].reshape(x.shape) if self.log else y
        np.exp(y, out=e)
        np.matmul(e, self.ones, out=m.reshape(-1))
        if not np.min(m) >= self.MIN_SUM:  # (also False for NaN)
            return False
        if self.log:
            np.log(m, out=m)
            np.subtract(y, m, out=y)
        else:
            np.reciprocal(m, out=m)
            np.multiply(y, m, out=y)
        return True

    def _finish(self, x, y, m, v, ax):
        np.subtract(x, m, out=y)
        if self.log:
            e = v["e"]
            np.exp(y, out=e)
            np.sum(e, axis=ax, keepdims=True, out=m)
            np.log(m, out=m)
            np.subtract(y, m, out=y)
        else:
            np.exp(y, out=y)
            np.sum(y, axis=ax, keepdims=True, out=m)
            np.divide(y, m, out=y)


@register("Softmax", since=1)
class Softmax(_SoftmaxBase):
    log = False
    shape_agnostic = agnostic_without_workspace = True  # (float32 and float64, opset 13 on: agnostic_output_shape)


@register("LogSoftmax", since=1)
class LogSoftmax(_SoftmaxBase):
    log = True
