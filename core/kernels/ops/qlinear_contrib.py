"""onnxruntime's quantized contrib ops (domain com.microsoft), as written by its quantization tool into
QOperator-format models (the model zoo's *-int8 models): QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearSoftmax, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
QLinearWhere and QGemm.

QLinearAdd and QLinearMul use MLAS's float32 formulas. The others but QGemm are "dequantize, float op, quantize": each quantized input is dequantized into float32
workspace (x - zp) * scale, ge's own float kernel for the op runs on it (into workspace), and the
result is quantized into the planned output: saturate(round_half_even(y / y_scale) + y_zp).
onnxruntime computes some of them in fixed point or through lookup tables, so a result may differ by
one quantization step where the float value sits on a rounding boundary.
QGemm is an exact integer GEMM (float64) like QLinearMatMul, with int32 bias and alpha, and
MatMulIntegerToFloat the integer product scaled to float32 (+ bias). On the native backend QGemm,
MatMulIntegerToFloat (constant weights) and QLinearAdd (operands of one shape) run ge's int8 kernels
(int8_native.py), with the same bytes as the numpy plans.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.ir import Meta
from ..planned import Scratch
from .windows import kernel_position_view, padded_extent, window_coverage, window_pads, zero_borders
from ..planned import PlannedKernel
from ..dtypes import QRANGE
from .int8_native import NativeIntProduct, qout, requant_kind
from .integer_matmul import IntegerMatMul, const_input
from ..fused import GE_DOMAIN
from ..native import GELU, QOUT_F32, CallCache
from ..registry import lookup, register

MS = "com.microsoft"
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
Q8 = (np.uint8, np.int8)


class _QWrapped(PlannedKernel):
    """Subclasses set QUANT_INPUTS [(x, scale, zp)], OUT (scale, zp), INNER op type, and inner_attrs()."""
    QUANT_INPUTS: tuple = ((0, 1, 2),)
    OUT = (3, 4)
    INNER = ""
    INNER_OPSET = 17
    channels_last = False

    def inner_attrs(self) -> dict:
        return {}

    def quant_inputs(self):
        return self.QUANT_INPUTS

    def meta(self, i, what, required=True):
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None and required:
            raise self.fail(f"input {i} ({what}) is missing")
        return m

    def scalar_param(self, i, what, dtypes, required=True):
        m = self.meta(i, what, required)
        if m is None:
            return None
        if m.dtype not in dtypes:
            raise self.fail(f"{what} has type {m.dtype}; {', '.join(np.dtype(t).name for t in dtypes)} expected")
        if math.prod(m.shape) != 1:
            raise self.fail(f"{what} has shape {tuple(m.shape)}, a scalar expected (per-tensor quantization)")
        return m

    def prepare(self):
        self.channels_last = bool(int(self.attr("channels_last", 0)))
        metas, self.groups = [], []
        q_dtype = None
        for k, (xi, si, zi) in enumerate(self.quant_inputs()):
            xm = self.meta(xi, f"X{k}")
            if xm.dtype not in Q8:
                raise self.fail(f"input {xi} has type {xm.dtype}; uint8 or int8 expected")
            q_dtype = q_dtype or xm.dtype
            self.scalar_param(si, f"input {si} (scale)", (np.float32,))
            zm = self.scalar_param(zi, f"input {zi} (zero point)", (xm.dtype,), required=False)
            shape = tuple(xm.shape)
            if self.channels_last:
                if len(shape) < 3:
                    raise self.fail(f"channels_last needs rank >= 3, input {xi} has shape {shape}")
                shape = (shape[0], shape[-1]) + shape[1:-1]
            self.groups.append((xi, si, zi if zm is not None else None, shape))
            metas.append(Meta(F32, shape))
        ys, yz = self.OUT
        self.scalar_param(ys, "y_scale", (np.float32,))
        zm = self.scalar_param(yz, "y_zero_point", Q8, required=False)
        self.y_dtype = zm.dtype if zm is not None else q_dtype
        self.yz_index = yz if zm is not None else None
        self.ys_index = ys
        self.inner = lookup(self.INNER, opset=self.INNER_OPSET)(self.inner_attrs(), metas, opset=self.INNER_OPSET,
                                                               name=self.name, backend=self.backend)
        out = tuple(self.inner.infer()[0].shape)
        self.inner_out = out
        if self.channels_last:
            out = (out[0],) + out[2:] + (out[1],)
        self.lo, self.hi = QRANGE[self.y_dtype]
        self.out_metas = [Meta(self.y_dtype, out)]
        self.scratch = Scratch()
        for k, m in enumerate(metas):
            self.scratch.add(f"x{k}", m.shape, F32)
        self.scratch.add("y", self.inner_out, F32)
        self.scratch.add("inner", (max(1, self.inner.workspace_nbytes()),), np.uint8)

    def pack(self):
        self.inner.load()

    def nchw(self, a):
        return a.transpose((0, a.ndim - 1) + tuple(range(1, a.ndim - 1))) if self.channels_last else a

    def run(self, xs, ys, ws):
        v = self.views(ws)
        fs = []
        for k, (xi, si, zi, _) in enumerate(self.groups):
            f = v[f"x{k}"]
            x = self.nchw(xs[xi])
            if zi is not None:
                np.subtract(x, xs[zi].reshape(()), out=f, dtype=F32)
            else:
                np.copyto(f, x, casting="unsafe")
            np.multiply(f, xs[si].reshape(()), out=f)
            fs.append(f)
        y = v["y"]
        n = self.inner.workspace_nbytes()
        self.inner.run(fs, [y], v["inner"][:n] if n else None)
        np.divide(y, xs[self.ys_index].reshape(()), out=y)
        np.rint(y, out=y)
        if self.yz_index is not None:
            np.add(y, xs[self.yz_index].reshape(()), out=y, dtype=F32)
        np.clip(y, self.lo, self.hi, out=y)
        np.copyto(self.nchw(ys[0]), y, casting="unsafe")


class _QLinearBinary(PlannedKernel):
    """A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point, with numpy
    broadcasting, in onnxruntime's (MLAS) float32 formulas."""

    def prepare(self):
        am = self.inputs[0]
        bm = self.inputs[3] if len(self.inputs) > 3 else None
        if am is None or bm is None:
            raise self.fail("inputs 0 (A) and 3 (B) are required")
        if am.dtype not in Q8 or bm.dtype != am.dtype:
            raise self.fail(f"A {am.dtype} and B {bm.dtype} must be one type, uint8 or int8")
        for i in (1, 4, 6):
            m = self.inputs[i] if i < len(self.inputs) else None
            if m is None or m.dtype != np.float32 or math.prod(m.shape) != 1:
                raise self.fail(f"input {i} (scale) must be a float32 scalar")
        for i in (2, 5, 7):
            m = self.inputs[i] if i < len(self.inputs) else None
            if m is not None and (m.dtype != am.dtype or math.prod(m.shape) != 1):
                raise self.fail(f"input {i} (zero point) must be a {am.dtype} scalar")
        try:
            shape = np.broadcast_shapes(tuple(am.shape), tuple(bm.shape))
        except ValueError:
            raise self.fail(f"A {tuple(am.shape)} and B {tuple(bm.shape)} do not broadcast") from None
        self.lo, self.hi = QRANGE[am.dtype]
        self.out_metas = [Meta(am.dtype, shape)]
        self.scratch = Scratch()
        nat = self.backend.lib
        one = lambda m: math.prod(m.shape) == 1  # noqa: E731  (a single value: the kernel reads it for each)
        if nat is not None and self.NATIVE and all(tuple(m.shape) == tuple(shape) or one(m) for m in (am, bm)):
            self.uses_native, self.calls = True, CallCache()
            # constant scales and zero points (a QDQ model's): the factors once, not six scalars read per run
            vals = [self.const_scalar(i) for i in (1, 2, 4, 5, 6, 7)]
            self.const_factors = None if any(v is None for v in vals) else self.factors(*vals)
            return
        self.scratch.add("t", shape, F32)
        self.scratch.add("u", shape, F32)

    @staticmethod
    def scalar(xs, i):
        x = xs[i] if i < len(xs) else None
        return np.float32(0) if x is None else np.float32(np.asarray(x).reshape(-1)[0])

    def const_scalar(self, i):
        """Input i's value when it is a constant (0 when it is absent), else None."""
        if i >= len(self.inputs) or self.inputs[i] is None:
            return np.float32(0)
        c = const_input(self, i)
        return None if c is None else np.float32(np.asarray(c).reshape(-1)[0])

    NATIVE = False  # the class has a native kernel (for operands of one shape)

    def run(self, xs, ys, ws):
        f = lambda i: self.scalar(xs, i)  # noqa: E731
        if self.uses_native:
            call = self.calls.get((xs[0], xs[3], ys[0]), lambda: self.backend.lib.qadd_call(
                xs[0], xs[3], ys[0], self.lo, self.hi))
            args = call.keep[0]
            args.ra, args.rb, args.fixed = self.const_factors if self.const_factors is not None else \
                self.factors(f(1), f(2), f(4), f(5), f(6), f(7))
            return call.run()
        v = self.views(ws)
        t, u = v["t"], v["u"]
        self.combine(xs[0], xs[3], f(1), f(2), f(4), f(5), f(6), f(7), t, u)
        np.rint(t, out=t)
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(ys[0], t, casting="unsafe")


@register("QLinearAdd", domain=MS)
class QLinearAdd(_QLinearBinary):
    """C = (zc - rA * za - rB * zb) + rA * A + rB * B, rA = sa / sc, rB = sb / sc."""
    NATIVE = True

    @staticmethod
    def factors(sa, za, sb, zb, sc, zc):
        """rA, rB and the fixed part, in float32."""
        ra, rb = sa / sc, sb / sc
        return ra, rb, zc - ra * za - rb * zb

    def combine(self, a, b, sa, za, sb, zb, sc, zc, t, u):
        ra, rb, fixed = self.factors(sa, za, sb, zb, sc, zc)
        np.multiply(a, ra, out=t, dtype=F32)
        np.add(t, fixed, out=t)
        np.multiply(b, rb, out=u, dtype=F32)
        np.add(t, u, out=t)


@register("QLinearMul", domain=MS)
class QLinearMul(_QLinearBinary):
    """C = (A - za) * (B - zb) * (sa * sb / sc) + zc."""

    def combine(self, a, b, sa, za, sb, zb, sc, zc, t, u):
        np.subtract(a, za, out=t, dtype=F32)
        np.subtract(b, zb, out=u, dtype=F32)
        np.multiply(t, u, out=t)
        np.multiply(t, sa * sb / sc, out=t)
        np.add(t, zc, out=t)


@register("QLinearSigmoid", domain=MS)
class QLinearSigmoid(_QWrapped):
    INNER = "Sigmoid"


@register("QLinearLeakyRelu", domain=MS)
class QLinearLeakyRelu(_QWrapped):
    INNER = "LeakyRelu"

    def inner_attrs(self):
        return {"alpha": float(self.attr("alpha", 0.01))}


@register("QLinearSoftmax", domain=MS)
class QLinearSoftmax(_QWrapped):
    INNER = "Softmax"

    def prepare(self):
        # `opset` says which Softmax the node means (< 13: 2-D coercion, axis default 1)
        self.INNER_OPSET = int(self.attr("opset", 13))
        super().prepare()

    def inner_attrs(self):
        a = self.attr("axis")
        return {} if a is None else {"axis": int(a)}


class _QPool(_QWrapped):
    """Shared by the pools: quantize a float32 result `t` into the planned output (MLAS's order)."""

    def quantize_into(self, t, xs, y):
        np.rint(t, out=t)
        if self.yz_index is not None:
            np.add(t, xs[self.yz_index].reshape(()), out=t, dtype=F32)
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(self.nchw(y), t, casting="unsafe")


@register("QLinearGlobalAveragePool", domain=MS)
class QLinearGlobalAveragePool(_QPool):
    """As MLAS: the exact integer sum per channel, minus zp * size, times x_scale / (y_scale * size)."""
    INNER = "GlobalAveragePool"

    def prepare(self):
        super().prepare()
        n, c = self.groups[0][3][:2]
        self.size = math.prod(self.groups[0][3][2:])
        self.scratch = Scratch()
        # a plane's sum of bytes below 2 ** 24 is exact in float32 whatever the order of its additions:
        # the bytes as float32 times a vector of ones, a BLAS gemv (MobileNetV2's 1280 planes of 49
        # bytes: 16 us to convert + 13 us, where numpy sums them into int64 in 140 us, as float32 rows
        # in 111 us)
        self.exact_f32 = self.size * 255 < 2 ** 24
        self.scratch.add("acc", (n, c), F32 if self.exact_f32 else np.int64)
        if self.exact_f32:
            self.ones = np.ones(self.size, F32)
            self.scratch.add("xf", (n * c, self.size), F32)
        self.scratch.add("t", self.inner_out, F32)
        self.qn = None
        self.plan_native(n * c)

    def plan_native(self, planes: int) -> None:
        """With constant scales and zero points, the sums as an int8 product by a column of ones (csrc/qgemm.c:
        the planes' bytes are the rows, the zero point comes out of the sums, the requantization is the
        store's, rint(float32(sum - zp size) scale) + zy saturated: the same float32 steps as below) in one
        native call, where the numpy plan's dozen calls cost 25 us alone and 200 us inside a model, every one
        of them reading its arrays and Python's own state back from memory (MobileNetV2's 1280 planes)."""
        nat = self.backend.lib
        xi, si, zi, _ = self.groups[0]
        consts = [const_input(self, i) for i in (si, self.ys_index, zi, self.yz_index) if i is not None]
        if nat is None or self.channels_last or self.size > 1024 or any(c is None for c in consts):
            return  # (a plane of K bytes: 48 K of workspace per thread)
        f = np.float32
        self.native_scale = f(const_input(self, si).reshape(())) / (f(const_input(self, self.ys_index).reshape(()))
                                                                       * f(self.size))
        self.scratch = Scratch()
        self.qn = NativeIntProduct(self, nat, planes, self.size, 1, self.inputs[xi].dtype)
        self.uses_native = True

    def pack(self):
        super().pack()
        if self.qn is not None:
            self.qn.pack(self, np.ones((self.size, 1), np.int8), None)
            self.qout_keep = []
            zy = 0 if self.yz_index is None else int(const_input(self, self.yz_index).reshape(()))
            self.qout = qout(requant_kind(self.y_dtype), self.qout_keep, scale=np.array([self.native_scale]), zy=zy,
                             lo=self.lo, hi=self.hi)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        if self.qn is not None:
            zi = self.groups[0][2]
            return self.qn.run(xs[0], None if zi is None else xs[zi], ys[0], v, self.qout, self.qout_keep)
        acc, t = v["acc"], v["t"]
        x = self.nchw(xs[0])
        zp = 0 if self.groups[0][2] is None else int(xs[self.groups[0][2]].reshape(()))
        if self.exact_f32:
            xf = v["xf"]
            np.copyto(xf, x.reshape(xf.shape), casting="unsafe")
            np.matmul(xf, self.ones, out=acc.reshape(-1))
            if zp:  # integers below 2 ** 24 either side: exact
                np.subtract(acc, np.float32(zp * self.size), out=acc)
        else:
            # over one flat axis: numpy casts and adds a contiguous row 4x faster than over several axes
            np.sum(x.reshape(acc.size, self.size), axis=1, dtype=np.int64, out=acc.reshape(-1))
            if zp:
                np.subtract(acc, np.int64(zp) * self.size, out=acc)
        t2 = t.reshape(acc.shape)
        np.copyto(t2, acc, casting="unsafe")
        f = np.float32
        scale = f(xs[1].reshape(())) / (f(xs[self.ys_index].reshape(())) * f(self.size))
        np.multiply(t2, scale, out=t2)
        self.quantize_into(t, xs, ys[0])


@register("QLinearAveragePool", domain=MS)
class QLinearAveragePool(_QPool):
    """As onnxruntime: dequantized windows summed in window order, divided by the window's count, then
    quantized as round(y / y_scale + y_zero_point)."""
    INNER = "AveragePool"
    INNER_OPSET = 19

    def inner_attrs(self):
        return {k: v for k, v in self.attrs.items() if k != "channels_last"}

    def prepare(self):
        super().prepare()
        shape = self.groups[0][3]
        n, c = shape[:2]
        spatial = list(shape[2:])
        kernel = [int(k) for k in self.attrs["kernel_shape"]]
        d = len(spatial)
        strides = self.ints("strides", d, 1)
        ceil_mode = bool(int(self.attr("ceil_mode", 0)))
        pb, pe, out = window_pads(self, spatial, kernel, strides, [1] * d, ceil_mode, pool=True)
        taps, _ = window_coverage(kernel, strides, [1] * d, pb, spatial, out)
        padded = padded_extent(spatial, pb, out, strides, taps, [1] * d)
        self.pb, self.pe_eff = pb, [p - s - b for p, s, b in zip(padded, spatial, pb)]
        self.spatial, self.strides, self.out = spatial, strides, out
        self.positions = list(itertools.product(*taps))
        # onnxruntime: the whole kernel with count_include_pad, else the window clipped to the input
        if int(self.attr("count_include_pad", 0)):
            count = np.full(tuple(out), math.prod(kernel))
        else:
            counts = []
            for sz, b, o, st, k in zip(spatial, pb, out, strides, kernel):
                pos = (np.arange(o)[:, None] * st - b) + np.arange(k)[None, :]
                counts.append(((pos >= 0) & (pos < sz)).sum(axis=1))
            count = counts[0]
            for cnt in counts[1:]:
                count = np.multiply.outer(count, cnt)
        self.count = np.maximum(np.asarray(count, np.float32), 1).reshape((1, 1) + tuple(out))
        self.scratch = Scratch()
        self.scratch.add("xp", (n, c) + tuple(padded), F32)
        self.scratch.add("t", self.inner_out, F32)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xp, t = v["xp"], v["t"]
        zero_borders(xp, self.pb, self.pe_eff, 0)
        inner = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(self.pb, self.spatial))
        xi = xp[inner]
        x = self.nchw(xs[0])
        zi = self.groups[0][2]
        if zi is not None:
            np.subtract(x, xs[zi].reshape(()), out=xi, dtype=F32)
        else:
            np.copyto(xi, x, casting="unsafe")
        np.multiply(xi, xs[1].reshape(()), out=xi)
        views = [kernel_position_view(xp, pos, self.strides, [1] * len(self.out), self.out) for pos in self.positions]
        t[...] = 0
        for xv in views:  # in window order, as onnxruntime sums (taps in the padding alone add nothing: skipped)
            np.add(t, xv, out=t)
        np.divide(t, self.count, out=t)
        # onnxruntime's quantize_value: round(y / y_scale + y_zero_point), the zero point added before rounding
        np.divide(t, xs[self.ys_index].reshape(()), out=t)
        if self.yz_index is not None:
            np.add(t, xs[self.yz_index].reshape(()), out=t, dtype=F32)
        np.rint(t, out=t)
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(self.nchw(ys[0]), t, casting="unsafe")


@register("QLinearConcat", domain=MS)
class QLinearConcat(_QWrapped):
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    OUT = (0, 1)
    INNER = "Concat"

    def quant_inputs(self):
        n = len(self.inputs) - 2
        if n < 3 or n % 3:
            raise self.fail(f"{len(self.inputs)} inputs: Y_scale, Y_zero_point and (X, X_scale, X_zero_point) "
                            f"triples expected")
        return tuple((2 + 3 * k, 3 + 3 * k, 4 + 3 * k) for k in range(n // 3))

    def inner_attrs(self):
        if self.attr("axis") is None:
            raise self.fail("attribute 'axis' is required")
        return {"axis": int(self.attr("axis"))}


@register("QLinearWhere", domain=MS)
class QLinearWhere(PlannedKernel):
    """condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point (8-bit, one
    type, per tensor): Where(condition, X, Y) with X and Y requantized to Z's scale and zero point, as
    onnxruntime's lookup tables do: saturate(round_half_even(float32((v - zp) * scale) / z_scale) + z_zp),
    broadcasting the three inputs. quantize_static writes it with ForceQuantizeNoInputCheck."""

    def prepare(self):
        cm, xm, ym = (self.input_meta(i, what) for i, what in ((0, "condition"), (1, "X"), (4, "Y")))
        if cm.dtype != np.bool_:
            raise self.fail(f"condition has type {cm.dtype}; bool expected")
        if xm.dtype not in Q8 or ym.dtype != xm.dtype:
            raise self.fail(f"X {xm.dtype} and Y {ym.dtype} must be one type, uint8 or int8")
        for i, what, dtype in ((2, "x_scale", F32), (3, "x_zero_point", xm.dtype), (5, "y_scale", F32),
                               (6, "y_zero_point", xm.dtype), (7, "z_scale", F32), (8, "z_zero_point", xm.dtype)):
            m = self.input_meta(i, what)
            if m.dtype != dtype or math.prod(m.shape) != 1:
                raise self.fail(f"{what} has type {m.dtype} and shape {tuple(m.shape)}; a {np.dtype(dtype).name} scalar expected")
        try:
            shape = np.broadcast_shapes(tuple(cm.shape), tuple(xm.shape), tuple(ym.shape))
        except ValueError:
            raise self.fail(f"condition {tuple(cm.shape)}, X {tuple(xm.shape)} and Y {tuple(ym.shape)} do not broadcast") from None
        self.dtype = xm.dtype
        self.lo, self.hi = QRANGE[self.dtype]
        self.codes = np.arange(256, dtype=np.uint8).view(self.dtype).astype(F32)  # the values, by their byte
        self.out_metas = [Meta(self.dtype, shape)]
        self.scratch = Scratch()

    def requantized(self, xs, s, z):
        """Z's value of each of the 256 codes of an input of scale xs[s] and zero point xs[z]."""
        f = np.float32
        t = (self.codes - f(xs[z].reshape(-1)[0])) * f(xs[s].reshape(-1)[0])
        t = np.rint(t / f(xs[7].reshape(-1)[0])) + f(xs[8].reshape(-1)[0])
        return np.clip(t, self.lo, self.hi).astype(self.dtype)

    def run(self, xs, ys, ws):
        x = self.requantized(xs, 2, 3)[xs[1].view(np.uint8)]
        y = self.requantized(xs, 5, 6)[xs[4].view(np.uint8)]
        np.copyto(ys[0], np.where(xs[0], x, y))


@register("QGemm", domain=MS)
class QGemm(IntegerMatMul):
    """A, a_scale, a_zero_point, B, b_scale, b_zero_point, C (int32, scale alpha * a_scale * b_scale),
    y_scale, y_zero_point: y = alpha * a_scale * b_scale * (A'B' + C), quantized when y_scale is given,
    else float32. transA / transB as Gemm."""
    A, AZ, B, BZ = 0, 2, 3, 5

    def meta(self, i, what):
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None:
            raise self.fail(f"input {i} ({what}) is missing")
        return m

    def b_matrix(self):
        b = const_input(self, self.B)
        return b.T if self.trans_b else b

    def pack(self):
        """A constant B is centered as stored: transposed once first when transB."""
        if self.qn is not None:
            return super().pack()
        consts = self.consts
        if self.trans_b and consts[self.B] is not None:
            self.consts = list(consts)
            self.consts[self.B] = self.shared_pack(("B^T",), lambda b: np.ascontiguousarray(np.asarray(b).T),
                                                   consts[self.B])
        super().pack()
        self.consts = consts

    def prepare(self):
        self.trans_a, self.trans_b = int(self.attr("transA", 0)), int(self.attr("transB", 0))
        am, bm = self.meta(self.A, "A"), self.meta(self.B, "B")
        if len(am.shape) != 2 or len(bm.shape) != 2:
            raise self.fail(f"A {tuple(am.shape)} and B {tuple(bm.shape)} must be 2-D")
        # the integer product runs on A, B as stored; transposes are views at run time
        self.inputs_t = list(self.inputs)
        if self.trans_a:
            self.inputs[self.A] = Meta(am.dtype, tuple(am.shape)[::-1])
        if self.trans_b:
            self.inputs[self.B] = Meta(bm.dtype, tuple(bm.shape)[::-1])
        self.prepare_matmul()
        self.inputs = self.inputs_t
        m, n = self.out
        self.alpha = float(self.attr("alpha", 1.0))
        for i, what in ((1, "a_scale"), (4, "b_scale")):
            sm = self.meta(i, what)
            if sm.dtype != np.float32 or math.prod(sm.shape) not in (1, n if i == 4 else 1):
                raise self.fail(f"{what} has type {sm.dtype} and shape {tuple(sm.shape)}")
        cm = self.inputs[6] if len(self.inputs) > 6 else None
        if cm is not None:
            if cm.dtype != np.int32:
                raise self.fail(f"C has type {cm.dtype}, int32 expected")
            try:
                if np.broadcast_shapes(tuple(cm.shape), (m, n)) != (m, n):
                    raise ValueError
            except ValueError:
                raise self.fail(f"C of shape {tuple(cm.shape)} does not broadcast to {(m, n)}") from None
        self.has_c = cm is not None
        ysm = self.inputs[7] if len(self.inputs) > 7 else None
        self.quantized = ysm is not None
        if self.quantized:
            yzm = self.inputs[8] if len(self.inputs) > 8 else None
            self.y_dtype = yzm.dtype if yzm is not None else np.dtype(np.uint8)
            if self.y_dtype not in Q8:
                raise self.fail(f"y_zero_point has type {self.y_dtype}; uint8 or int8 expected")
            self.lo, self.hi = QRANGE[self.y_dtype]
            self.has_yz = yzm is not None
        else:
            self.y_dtype = F32
        self.out_metas = [Meta(self.y_dtype, (m, n))]
        self.scratch.add("t", (m, n), F32)
        c = const_input(self, 6)
        consts = [const_input(self, i) for i in ((1, 4, 7, 8) if self.quantized else (1, 4))]
        self.plan_native(not self.trans_a and all(x is not None for x in consts) and not (self.quantized and not self.has_yz)
                         and (cm is None or (c is not None and c.size in (1, n) and (c.ndim < 2 or c.shape[0] == 1))))

    def native_out(self, keep):
        f = np.float32
        c = const_input(self, 6)
        bias = None if c is None else np.broadcast_to(np.asarray(c, np.int32).reshape(-1), (self.out[1],))
        scale = f(self.alpha) * np.asarray(const_input(self, 1), F32).reshape(()) * \
            np.asarray(const_input(self, 4), F32).reshape(-1)
        if not self.quantized:
            return qout(QOUT_F32, keep, bias=bias, scale=scale)
        return qout(requant_kind(self.y_dtype), keep, bias=bias, scale=scale / np.asarray(const_input(self, 7), F32).reshape(()),
                    zy=int(np.asarray(const_input(self, 8)).reshape(-1)[0]), lo=self.lo, hi=self.hi)

    def accumulate(self, xs, v):
        xs = list(xs)
        if self.trans_a:
            xs[self.A] = xs[self.A].T
        if self.trans_b and self.b64 is None:
            xs[self.B] = xs[self.B].T
        return super().accumulate(xs, v)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xs = list(xs) + [None] * (9 - len(xs))
        if self.qn is not None:
            return self.run_native(xs, ys, v)
        acc = self.accumulate(xs, v)
        if self.has_c:
            np.add(acc, xs[6], out=acc)
        t = v["t"]
        np.copyto(t, acc, casting="unsafe")
        f = np.float32
        scale = f(self.alpha) * np.asarray(xs[1], F32).reshape(()) * np.asarray(xs[4], F32).reshape(-1)
        if self.quantized:
            np.multiply(t, scale / np.asarray(xs[7], F32).reshape(()), out=t)
            np.rint(t, out=t)
            if self.has_yz:
                np.add(t, xs[8].reshape(()), out=t, dtype=F32)
            np.clip(t, self.lo, self.hi, out=t)
            np.copyto(ys[0], t, casting="unsafe")
        else:
            np.multiply(t, scale, out=ys[0])


@register("MatMulIntegerToFloat", domain=MS)
class MatMulIntegerToFloat(IntegerMatMul):
    """A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias: y = float32(acc) * (a_scale * b_scale) + bias,
    acc = (A - a_zero_point) @ (B - b_zero_point) exact; b_scale, b_zero_point and bias per column (or
    one). What fuse_qdq makes of quantize_dynamic's MatMulInteger -> Cast -> Mul (-> Add); ge's attribute
    activation="Gelu" (passes.fuse_matmul) applies Gelu to y, as FusedMatMul's (the native plan as it
    stores, the numpy plan through ge's Gelu kernel)."""
    A, B, AZ, BZ = 0, 1, 4, 5

    def prepare(self):
        self.prepare_matmul()
        n = self.bsh[-1] if len(self.bsh) > 1 else 1
        for i, what, per in ((2, "a_scale", 1), (3, "b_scale", n), (6, "bias", n)):
            m = self.input_meta(i, what, optional=i == 6)
            if m is not None and (m.dtype != F32 or math.prod(m.shape) not in (1, per)):
                raise self.fail(f"{what} has type {m.dtype} and shape {tuple(m.shape)}; float32, "
                                f"{'a scalar' if per == 1 else f'one or {per} values'} expected")
        self.has_bias = self.input_meta(6, "bias", optional=True) is not None
        self.out_metas = [Meta(F32, self.out)]
        act = self.attr("activation")
        act = act.decode() if isinstance(act, bytes) else act
        if act not in (None, "Gelu"):
            raise self.fail(f"activation={act!r}: only 'Gelu'")
        self.gelu = None if act is None else lookup("Gelu", GE_DOMAIN, 1, self.name)(
            {}, self.out_metas, outputs=self.out_metas, name=f"{self.name}:Gelu", backend=self.backend)
        if self.gelu is not None:  # numpy: the product in the workspace, Gelu into Y
            self.scratch.add("y", self.out, F32)
            self.scratch.add("gelu", (max(1, self.gelu.workspace_nbytes()),), np.uint8)
        self.plan_native(const_input(self, 3) is not None and (not self.has_bias or const_input(self, 6) is not None))

    def native_out(self, keep):
        bias = const_input(self, 6) if self.has_bias else None
        return qout(QOUT_F32, keep, scale=np.asarray(const_input(self, 3), F32).reshape(-1), fbias=bias,
                    act=None if self.gelu is None else GELU)

    def pack(self):
        super().pack()
        if self.gelu is not None:
            self.gelu.load()

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xs = list(xs) + [None] * (7 - len(xs))
        if self.qn is not None:
            return self.run_native(xs, ys, v, scale_a=xs[2])
        y = ys[0] if self.gelu is None else v["y"]
        np.copyto(y, self.accumulate(xs, v), casting="unsafe")
        np.multiply(y, np.asarray(xs[2], F32).reshape(()) * np.asarray(xs[3], F32).reshape(-1), out=y)
        if self.has_bias:
            np.add(y, np.asarray(xs[6], F32).reshape(-1), out=y)
        if self.gelu is not None:
            n = self.gelu.workspace_nbytes()
            self.gelu.run([y], [ys[0]], v["gelu"][:n] if n else None)
