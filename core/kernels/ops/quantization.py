"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv — with onnxruntime's arithmetic.

- Quantize: y = saturate(round_half_even(x / scale) + zero_point), the division in float32.
- Dequantize: y = float32(x - zero_point) * scale (cast to float16 last when the scale is float16).
- Integer products (MatMulInteger, ConvInteger and the accumulators of the QLinear ops) run as float64
  BLAS GEMMs / ge's Conv kernel on (x - zero_point): every product and partial sum of 8-bit operands is
  an integer below 2^53, so the float64 result is the exact int32 accumulator.
- Requantize (QLinear*): y = saturate(round_half_even(float32(acc) * (x_scale * w_scale / y_scale)) + y_zp),
  the multiplier in float32 as onnxruntime's MlasRequantizeOutput.

Scales and zero points are per tensor, per axis (1-D along `axis`), or blocked (opset 21 `block_size`:
same rank as x, axis dim ceil(D / block_size)). Constant ones are folded in prepare().
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ...model.ir import Meta
from ...model.ir import DTYPES
from ..dtypes import QRANGE, SMALL, SMALL_FLOATS, cast_to
from ..planned import PlannedKernel, Scratch
from .int8_native import NativeIntConv, qout, requant_kind
from .integer_matmul import IntegerMatMul, const_input, input_meta, quantized_operand
from ..fused import GE_DOMAIN
from ..native import QOUT_I32, QR_DEQUANTIZE, QR_QUANTIZE, QR_ROUND_TRIP, ROWS_SOFTMAX, CallCache
from ..registry import lookup, register

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
#: the quantized types by the opset that added them (float8 in 19, 4-bit ints and 16-bit in 21,
#: float4e2m1 in 23, 2-bit ints in 25)
_QTYPES = ((10, ("uint8", "int8")), (19, ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")),
           (21, ("uint16", "int16", "uint4", "int4")), (23, ("float4_e2m1fn",)), (25, ("uint2", "int2")))
#: the float types of x, scales and outputs from opset 19 (bfloat16 by name: ml_dtypes' is imported
#: where a model has it)
_FLOATS_19 = ("float16", "bfloat16")


@functools.cache
def output_dtypes() -> dict[int, np.dtype]:
    """ONNX element types QuantizeLinear-21's output_dtype may name, and ge supports."""
    return {k: v for k, v in DTYPES.items() if v.name in {n for _, names in _QTYPES for n in names}}


def quantized_types(opset: int) -> tuple[str, ...]:
    """The names of the quantized types at `opset`."""
    return tuple(n for since, names in _QTYPES if opset >= since for n in names)


class Param:
    """How a scale or zero point of shape `pshape` applies to x of shape `xshape`: per tensor, per axis,
    or blocked. `expand(p, out)` gives an array broadcasting against x."""

    def __init__(self, k: PlannedKernel, what: str, pshape, xshape, axis: int, block: int):
        pshape, xshape = tuple(pshape), tuple(xshape)
        r = len(xshape)
        self.kind, self.shape = "tensor", ()
        if block > 0:
            if not -r <= axis < r:
                raise k.fail(f"axis={axis} is out of range for x of shape {xshape}")
            axis %= r
            want = xshape[:axis] + (-(-xshape[axis] // block),) + xshape[axis + 1:]
            if pshape != want:
                raise k.fail(f"{what} has shape {pshape}; with block_size={block} on axis {axis} of x {xshape}, "
                             f"{want} expected")
            self.kind, self.axis, self.full = "block", axis, xshape
            self.take = np.arange(xshape[axis], dtype=np.intp) // block
        elif len(pshape) == 0 or pshape == (1,):
            pass
        elif len(pshape) == 1:
            if not -r <= axis < r:
                raise k.fail(f"axis={axis} is out of range for x of shape {xshape}")
            axis %= r
            if pshape[0] != xshape[axis]:
                raise k.fail(f"{what} has {pshape[0]} values but x {xshape} has {xshape[axis]} along axis {axis}")
            self.kind, self.shape = "axis", (1,) * axis + (pshape[0],) + (1,) * (r - axis - 1)
        else:
            raise k.fail(f"{what} has shape {pshape}: a scalar or a 1-D tensor expected "
                         f"(or a blocked tensor with block_size)")

    def expand(self, p: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self.kind == "tensor":
            return p.reshape(())
        if self.kind == "axis":
            return p.reshape(self.shape)
        if out is None:
            return np.take(p, self.take, axis=self.axis)
        np.take(p, self.take, axis=self.axis, out=out)
        return out


def _irange(dt) -> tuple[int, int]:
    import ml_dtypes  # (its iinfo knows the 2/4-bit ints)
    info = ml_dtypes.iinfo(dt)
    return int(info.min), int(info.max)


def saturate_cast(t: np.ndarray, y: np.ndarray, lo: float, hi: float) -> None:
    """y = cast(clip(t)), t already rounded (in place on t)."""
    np.clip(t, lo, hi, out=t)
    np.copyto(y, t, casting="unsafe")


def dynamic_quantize(x: np.ndarray, q: np.ndarray, t: np.ndarray) -> tuple[np.float32, np.float32]:
    """onnxruntime's dynamic uint8 quantization of float32 x into q (t: float32 scratch of x's
    shape): the range of x widened to hold 0, scale = (max - min) / 255 (1 when max == min),
    zero point = round(saturate(-min / scale)), q = saturate(round(x / scale) + zero point), every
    step in float32 and rounding half to even. Returns (scale, zero point)."""
    f = np.float32
    lo = min(f(x.min()), f(0)) if x.size else f(0)
    hi = max(f(x.max()), f(0)) if x.size else f(0)
    scale = f(1) if hi == lo else f((hi - lo) / f(255))
    zp = np.rint(np.clip(f(0) - lo / scale, f(0), f(255)))
    np.divide(x, scale, out=t)
    np.rint(t, out=t)
    np.add(t, zp, out=t)
    saturate_cast(t, q, 0, 255)
    return scale, zp


# -- QuantizeLinear, DequantizeLinear ------------------------------------------------------------------

@register("QuantizeLinear", since=10)
class QuantizeLinear(PlannedKernel):
    def prepare(self):
        xm, sm = input_meta(self, 0, "x"), input_meta(self, 1, "y_scale")
        zm = input_meta(self, 2, "")
        allowed_x = ("float32", "int32") + (_FLOATS_19 if self.opset >= 19 else ())
        if np.dtype(xm.dtype).name not in allowed_x:
            raise self.fail(f"x has type {xm.dtype}; {', '.join(allowed_x)} expected at opset {self.opset}")
        if np.dtype(sm.dtype).name not in (("float32", "int32") + _FLOATS_19 if self.opset >= 19 else ("float32",)):
            raise self.fail(f"y_scale has type {sm.dtype}")
        out_attr = int(self.attr("output_dtype", 0)) if self.opset >= 21 else 0
        if zm is not None:
            dt = zm.dtype
            if out_attr and output_dtypes().get(out_attr) != dt:
                raise self.fail(f"output_dtype={out_attr} differs from y_zero_point's type {dt}")
        elif out_attr:
            if out_attr not in output_dtypes():
                raise self.fail(f"output_dtype={out_attr} is not supported "
                                f"({', '.join(d.name for d in output_dtypes().values())})")
            dt = output_dtypes()[out_attr]
        else:
            dt = np.dtype(np.uint8)
        allowed_y = quantized_types(self.opset)
        if np.dtype(dt).name not in allowed_y:
            raise self.fail(f"output type {dt} is not supported at opset {self.opset} ({', '.join(allowed_y)})")
        xs = tuple(xm.shape)
        axis = int(self.attr("axis", 1)) if self.opset >= 13 else 1
        block = int(self.attr("block_size", 0)) if self.opset >= 21 else 0
        if block < 0:
            raise self.fail(f"block_size={block} must be >= 0")
        self.ps = Param(self, "y_scale", sm.shape, xs, axis, block)
        self.pz = None if zm is None else Param(self, "y_zero_point", zm.shape, xs, axis, block)
        # a float8/float4 output is the saturating (or not) cast of x / scale + zero point; an integer
        # one is rounded half to even and clipped to its range
        self.to_float = np.dtype(dt).name in SMALL_FLOATS
        self.saturate = bool(int(self.attr("saturate", 1))) if self.opset >= 19 else True
        self.lo, self.hi = (None, None) if self.to_float else QRANGE.get(dt) or _irange(dt)
        self.out_metas = [Meta(dt, xs)]
        self.scratch = Scratch()
        self.scratch.add("t", xs, F32)
        if self.ps.kind == "block":
            self.scratch.add("s", xs, sm.dtype)
            if self.pz is not None:
                self.scratch.add("z", xs, zm.dtype)
        s, z = const_input(self, 1), const_input(self, 2)
        self.s = None if s is None else self.ps.expand(np.asarray(s, F32))
        self.z = None if z is None or zm is None else self.pz.expand(np.asarray(z, F32))
        # per tensor, constant, float32 to 8 bits (a QDQ model's input): the same float32 steps in one pass
        self.native = self.backend.lib is not None and xm.dtype == np.float32 and dt in (np.int8, np.uint8) \
            and self.s is not None and self.s.size == 1 and (zm is None or self.z is not None and self.z.size == 1)
        if self.native:
            self.scalars = (float(self.s.reshape(-1)[0]), 0.0 if self.z is None else float(self.z.reshape(-1)[0]),
                            int(self.lo), int(self.hi), dt == np.int8)
            self.calls = CallCache()

    def run(self, xs, ys, ws):
        if self.native and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            return self.calls.get((xs[0], ys[0]), lambda: self.backend.lib.quantize_call(
                QR_QUANTIZE, xs[0], ys[0], *self.scalars)).run()
        v = self.views(ws)
        t = v["t"]
        s = self.s if self.s is not None else self.ps.expand(xs[1], v.get("s"))
        np.divide(xs[0], s, out=t, dtype=F32)
        if not self.to_float:
            np.rint(t, out=t)
        if self.pz is not None:
            z = self.z if self.z is not None else self.pz.expand(xs[2], v.get("z"))
            np.add(t, z, out=t, dtype=F32, casting="unsafe")
        if self.to_float:
            ys[0][...] = cast_to(t, ys[0].dtype, self.saturate)
        else:
            saturate_cast(t, ys[0], self.lo, self.hi)


@register("DequantizeLinear", since=10)
class DequantizeLinear(PlannedKernel):
    def prepare(self):
        xm, sm = input_meta(self, 0, "x"), input_meta(self, 1, "x_scale")
        zm = input_meta(self, 2, "")
        allowed_x = quantized_types(self.opset) + ("int32",)
        if np.dtype(xm.dtype).name not in allowed_x:
            raise self.fail(f"x has type {xm.dtype}; {', '.join(allowed_x)} expected at opset {self.opset}")
        if np.dtype(sm.dtype).name not in (("float32",) + _FLOATS_19 if self.opset >= 19 else ("float32",)):
            raise self.fail(f"x_scale has type {sm.dtype}")
        out_attr = int(self.attr("output_dtype", 0)) if self.opset >= 23 else 0
        if out_attr and out_attr not in (1, 10, 16):
            raise self.fail(f"output_dtype={out_attr} is not supported (float, float16, bfloat16)")
        dt = DTYPES[out_attr] if out_attr else sm.dtype
        xs = tuple(xm.shape)
        axis = int(self.attr("axis", 1)) if self.opset >= 13 else 1
        block = int(self.attr("block_size", 0)) if self.opset >= 21 else 0
        self.ps = Param(self, "x_scale", sm.shape, xs, axis, block)
        self.pz = None if zm is None else Param(self, "x_zero_point", zm.shape, xs, axis, block)
        z = const_input(self, 2)
        if xm.dtype == np.int32 and z is not None and np.any(z != 0):
            raise self.fail("x_zero_point must be 0 for int32 x")
        self.out_metas = [Meta(dt, xs)]
        self.scratch = Scratch()
        if dt != F32:
            self.scratch.add("t", xs, F32)
        if self.ps.kind == "block":
            self.scratch.add("s", xs, sm.dtype)
            if self.pz is not None:
                self.scratch.add("z", xs, zm.dtype)
        s = const_input(self, 1)
        self.s = None if s is None else self.ps.expand(np.asarray(s, F32))
        small = np.dtype(xm.dtype).name in SMALL
        zt = F32 if small or xm.dtype.kind == "f" else np.int32
        self.z = None if z is None or zm is None else self.pz.expand(np.asarray(z).astype(zt))
        # per tensor, constant, 8 bits to float32: the same float32 steps in one pass
        self.native = self.backend.lib is not None and xm.dtype in (np.int8, np.uint8) and dt == F32 \
            and self.s is not None and self.s.size == 1 and (zm is None or self.z is not None and self.z.size == 1)
        if self.native:
            lo, hi = QRANGE[xm.dtype]
            self.scalars = (float(self.s.reshape(-1)[0]), 0.0 if self.z is None else float(self.z.reshape(-1)[0]),
                            int(lo), int(hi), xm.dtype == np.int8)
            self.calls = CallCache()

    def run(self, xs, ys, ws):
        if self.native and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            return self.calls.get((xs[0], ys[0]), lambda: self.backend.lib.quantize_call(
                QR_DEQUANTIZE, xs[0], ys[0], *self.scalars)).run()
        v = self.views(ws)
        t = v.get("t", ys[0])
        x = xs[0] if xs[0].dtype.kind in "iub" or xs[0].dtype == F32 else xs[0].astype(F32)  # (small types)
        if self.pz is not None:
            z = self.z if self.z is not None else self.pz.expand(xs[2], v.get("z"))
            np.subtract(x, z if z.dtype.kind in "iuf" else z.astype(F32), out=t, dtype=F32)
        else:
            np.copyto(t, x, casting="unsafe")
        s = self.s if self.s is not None else self.ps.expand(xs[1], v.get("s"))
        np.multiply(t, s, out=t, dtype=F32)
        if t is not ys[0]:
            np.copyto(ys[0], t, casting="unsafe")


@register("QuantizeDequantize", since=1, domain=GE_DOMAIN)
class QuantizeDequantize(PlannedKernel):
    """ge::QuantizeDequantize(x, scale, zero_point): DequantizeLinear(QuantizeLinear(x, scale, zero_point),
    scale, zero_point), what passes/fuse_qdq.py makes of a QuantizeLinear read only by a DequantizeLinear of
    its scale and zero point (a QDQ model's activations between float ops: an attention's scores and
    probabilities). The same values; natively (float32 x, per tensor, 8 bits) one pass over the tensor,
    the 8-bit value kept in a register, where the two ops took two passes and a byte tensor."""

    def prepare(self):
        xs = self.inputs[:3]
        self.q = QuantizeLinear({}, xs, self.consts[:3], opset=self.opset, name=self.name, backend=self.backend)
        qm = self.q.out_metas[0]
        self.dq = DequantizeLinear({}, [qm, *xs[1:]], [None, *self.consts[1:3]], opset=self.opset, name=self.name,
                                   backend=self.backend)
        self.out_metas = list(self.dq.out_metas)
        self.native = self.q.native and self.dq.native
        self.scratch = Scratch()  # the two ops' numpy plans and the byte tensor between them (the compiler plans
        self.scratch.add("q", qm.shape, qm.dtype)  # it beside a native plan anyway: build._workspace)
        self.scratch.add("q_ws", (self.q.workspace_nbytes(),), np.uint8)
        self.scratch.add("dq_ws", (self.dq.workspace_nbytes(),), np.uint8)
        self.calls = CallCache()

    def run(self, xs, ys, ws):
        if self.native and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            return self.calls.get((xs[0], ys[0]), lambda: self.backend.lib.quantize_call(
                QR_ROUND_TRIP, xs[0], ys[0], *self.q.scalars)).run()
        v = self.views(ws)
        self.q.run(xs[:3], [v["q"]], v["q_ws"])
        self.dq.run([v["q"], *xs[1:3]], ys, v["dq_ws"])


@register("SoftmaxQdq", since=1, domain=GE_DOMAIN)
class SoftmaxQdq(PlannedKernel):
    """ge::SoftmaxQdq(x, x_scale, x_zero_point, y_scale, y_zero_point; axis): QuantizeDequantize(Softmax(
    QuantizeDequantize(x, x_scale, x_zero_point)), y_scale, y_zero_point), passes/fuse_qdq.py's form of a QDQ
    model's attention probabilities (its scores and probabilities quantized on either side of the
    Softmax). The same values; natively (float32 rows along the last axis, per tensor, 8 bits) the
    softmax reads x and stores y through the round trips in registers, where each was a pass over a
    tensor of heads x positions^2 (Whisper's encoder: 13.5M floats a layer)."""

    def prepare(self):
        x, xs, xz, ys, yz = (list(self.inputs) + [None] * 5)[:5]
        c = list(self.consts) + [None] * 5
        self.x_trip = QuantizeDequantize({}, [x, xs, xz], [None, c[1], c[2]], opset=self.opset, name=self.name,
                                         backend=self.backend)
        t = self.x_trip.out_metas[0]
        self.softmax = lookup("Softmax", "", self.opset, self.name)(
            {k: v for k, v in self.attrs.items() if k == "axis"}, [t], [None], opset=self.opset, name=self.name,
            backend=self.backend)
        p = self.softmax.infer()[0]
        self.y_trip = QuantizeDequantize({}, [p, ys, yz], [None, c[3], c[4]], opset=self.opset, name=self.name,
                                         backend=self.backend)
        self.out_metas = list(self.y_trip.out_metas)
        nat = getattr(self.softmax, "nat", None)
        self.native = nat is not None and t.dtype == np.float32 and self.x_trip.native and self.y_trip.native
        self.scratch = Scratch()  # the three ops' plans, a tensor between each (planned beside a native plan anyway)
        for key, m in (("t", t), ("p", p)):
            self.scratch.add(key, m.shape, m.dtype)
        for key, k in (("x_ws", self.x_trip), ("s_ws", self.softmax), ("y_ws", self.y_trip)):
            self.scratch.add(key, (k.workspace_nbytes(),), np.uint8)
        self.calls = CallCache()

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.native and x.flags.c_contiguous and y.flags.c_contiguous:
            rows, n = self.softmax.rows_shape
            return self.calls.get((x, y), lambda: self.backend.lib.rows_call(
                x, y, rows, n, kind=ROWS_SOFTMAX, x_trip=self.x_trip.q.scalars, y_trip=self.y_trip.q.scalars)).run()
        v = self.views(ws)
        self.x_trip.run(xs[:3], [v["t"]], v["x_ws"])
        self.softmax.run([v["t"]], [v["p"]], v["s_ws"])
        self.y_trip.run([v["p"], *xs[3:5]], ys, v["y_ws"])


@register("DynamicQuantizeLinear", since=11)
class DynamicQuantizeLinear(PlannedKernel):
    """uint8 quantization with scale and zero point from the data range (including 0), as onnxruntime:
    scale = (max - min) / 255 (1 when max == min), zero_point = round(saturate(-min / scale))."""

    def prepare(self):
        xm = input_meta(self, 0, "x")  # float32, the schema's only type
        xs = tuple(xm.shape)
        self.out_metas = [Meta(np.dtype(np.uint8), xs), Meta(F32, ()), Meta(np.dtype(np.uint8), ())]
        self.scratch = Scratch()
        self.uses_native = self.backend.lib is not None and math.prod(xs) > 0
        if self.uses_native:
            self.calls = CallCache()
        else:
            self.scratch.add("t", xs, F32)

    def run(self, xs, ys, ws):
        x = xs[0]
        if self.uses_native:  # the same float32 steps in one pass each (native.dynamic_quantize), prepared
            ys = list(ys) + [None] * (3 - len(ys))
            return self.calls.get((x,) + tuple(ys), lambda: self._native_call(x, ys))()
        scale, zp = dynamic_quantize(x, ys[0], self.views(ws)["t"])
        if len(ys) > 1 and ys[1] is not None:
            ys[1][...] = scale
        if len(ys) > 2 and ys[2] is not None:
            ys[2][...] = zp

    def bound(self, xs, ys, ws):
        if self.uses_native and xs[0].flags.c_contiguous:  # the native call itself, no run() around it
            return self._native_call(xs[0], list(ys) + [None] * (3 - len(ys)))
        return super().bound(xs, ys, ws)

    def _native_call(self, x, ys):
        """The prepared call on these buffers (a strided x: through a contiguous copy at each run)."""
        out = [y if y is not None and y.flags.c_contiguous else None for y in ys]
        if not x.flags.c_contiguous:
            return lambda: self.backend.lib.dynamic_quantize(np.ascontiguousarray(x), *out)
        return self.backend.lib.dynamic_quantize_call(x, *out)


# -- integer products ---------------------------------------------------------------------------------

@register("MatMulInteger", since=10)
class MatMulInteger(IntegerMatMul):
    def prepare(self):
        self.prepare_matmul()
        self.out_metas = [Meta(np.dtype(np.int32), self.out)]
        self.plan_native()

    def native_out(self, keep):
        return qout(QOUT_I32, keep)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xs = list(xs) + [None] * (4 - len(xs))
        if self.qn is not None:
            return self.run_native(xs, ys, v)
        np.copyto(ys[0], self.accumulate(xs, v), casting="unsafe")


class _Requantize:
    """float32(acc) * multiplier, rounded half to even, + y_zero_point, saturated."""

    def prepare_requant(self, k, scales: list[tuple[int, str]], yz: int, per_index: int, per_len: int, per_shape,
                        scale_types=(F32,)):
        for i, what in scales:
            m = input_meta(k, i, what)
            if m.dtype not in scale_types:
                raise k.fail(f"{what} has type {m.dtype}, {' or '.join(np.dtype(t).name for t in scale_types)} "
                             f"expected at opset {k.opset}")
        zm = input_meta(k, yz, "y_zero_point")
        if zm.dtype not in (np.uint8, np.int8):
            raise k.fail(f"y_zero_point has type {zm.dtype}; uint8 or int8 expected")
        if math.prod(zm.shape) != 1:
            raise k.fail(f"y_zero_point has shape {tuple(zm.shape)}, a scalar expected")
        for i, what in scales:
            n = math.prod(input_meta(k, i, what).shape)
            if n != 1 and not (i == per_index and n == per_len):
                raise k.fail(f"{what} has shape {tuple(input_meta(k, i, what).shape)}: a scalar"
                             + (f" or {per_len} values" if i == per_index else "") + " expected")
        self.yz_dtype, self.yz_index = zm.dtype, yz
        self.lo, self.hi = QRANGE[zm.dtype]
        self.scale_idx = [i for i, _ in scales]
        self.per_shape = per_shape
        c = [const_input(k, i) for i in self.scale_idx]
        self.mult = None if any(v is None for v in c) else self.multiplier(*c)
        self.yz = const_input(k, yz)

    def multiplier(self, s0, s1, sy) -> np.ndarray:
        s0, s1, sy = (np.asarray(s, F32) for s in (s0, s1, sy))
        m = (s0.reshape(-1) * s1.reshape(-1)) / sy.reshape(-1)
        return m.reshape(self.per_shape) if m.size > 1 else m.reshape(())

    def constant_requant(self) -> bool:
        """Scales and the output zero point are constants (the native store step needs them)."""
        return self.mult is not None and self.yz is not None

    def requant_out(self, keep, bias=None):
        return qout(requant_kind(self.yz_dtype), keep, bias=bias, scale=self.mult,
                    zy=int(np.asarray(self.yz).reshape(-1)[0]), lo=self.lo, hi=self.hi)

    def requantize(self, xs, acc, t, y) -> None:
        mult = self.mult if self.mult is not None else self.multiplier(*(xs[i] for i in self.scale_idx))
        np.copyto(t, acc, casting="unsafe")
        np.multiply(t, mult, out=t)
        np.rint(t, out=t)
        np.add(t, np.asarray(xs[self.yz_index] if self.yz is None else self.yz, F32).reshape(()), out=t)
        saturate_cast(t, y, self.lo, self.hi)


@register("QLinearMatMul", since=10)
class QLinearMatMul(IntegerMatMul, _Requantize):
    """a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point."""
    A, AZ, B, BZ = 0, 2, 3, 5

    def prepare(self):
        self.prepare_matmul()
        n = self.bsh[-1] if len(self.bsh) > 1 else 1
        scale_types = (F32, np.dtype(np.float16)) if self.opset >= 21 else (F32,)  # QLinearMatMul-21: float16 too
        self.prepare_requant(self, [(1, "a_scale"), (4, "b_scale"), (6, "y_scale")], 7, 4, n, (-1,), scale_types)
        self.out_metas = [Meta(self.yz_dtype, self.out)]
        self.scratch.add("t", self.out, F32)
        self.plan_native(self.constant_requant())

    def native_out(self, keep):
        return self.requant_out(keep)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        if self.qn is not None:
            return self.run_native(xs, ys, v)
        self.requantize(xs, self.accumulate(xs, v), v["t"], ys[0])


# -- ConvInteger, QLinearConv ---------------------------------------------------------------------------

class _IntegerConv(PlannedKernel):
    """conv(x - x_zp, w - w_zp) by ge's Conv kernel in float64 (exact), bias added exactly."""
    X, XZ, W, WZ, BIAS = 0, 2, 1, 3, None
    qc: NativeIntConv | None = None  # the native plan

    def prepare_conv(self):
        xm, xzm = quantized_operand(self, self.X, "x", self.XZ, lambda s: False, "")
        wm, wzm = quantized_operand(self, self.W, "w", self.WZ, lambda s: len(s) == 1 and s[0] == self._oc(), "one per output channel")
        if len(xm.shape) < 3 or len(wm.shape) != len(xm.shape):
            raise self.fail(f"x {tuple(xm.shape)} and w {tuple(wm.shape)} must have one rank >= 3")
        oc = wm.shape[0]
        self.has_xz, self.has_wz = xzm is not None, wzm is not None
        self.wz_shape = (-1,) + (1,) * (len(wm.shape) - 1) if wzm is not None and math.prod(wzm.shape) != 1 else ()
        w, wz = const_input(self, self.W), const_input(self, self.WZ)
        self.w64 = self.b64 = None  # W centered and B widened once by pack() when constant
        self.w_is_const = w is not None and (wzm is None or wz is not None)
        bias = None
        if self.BIAS is not None:
            bm = input_meta(self, self.BIAS, "")
            if bm is not None:
                if bm.dtype != np.int32 or tuple(bm.shape) != (oc,):
                    raise self.fail(f"B has type {bm.dtype} and shape {tuple(bm.shape)}; int32 ({oc},) expected")
                bias = Meta(F64, (oc,))
        self.has_bias = bias is not None
        b = const_input(self, self.BIAS) if self.has_bias else None
        self.b_is_const = b is not None
        self.conv_metas = [Meta(F64, tuple(xm.shape)), Meta(F64, tuple(wm.shape))] + ([bias] if bias else [])
        # without native kernels the numpy plan runs: planned here at once, not its geometry first (plan_conv)
        self.conv = self._inner_conv(None, None, geometry_only=self.backend.lib is not None)
        out = self.conv.infer()[0]
        self.out = tuple(out.shape)
        self.xw_dtypes = (xm.dtype, wm.dtype)

    def plan_conv(self, native_ok: bool = True) -> bool:
        """The native plan where plan_native takes it, else the numpy plan: the float64 Conv planned and
        the workspace laid out (x, acc, w and b where computed, the Conv's). True for the numpy plan."""
        self.plan_native(native_ok)
        if self.qc is not None:
            return False
        if self.conv.geometry_only:
            self.conv = self._inner_conv(None, None)
        self.scratch = Scratch()
        self.scratch.add("x", self.conv_metas[0].shape, F64)
        self.scratch.add("acc", self.out, F64)
        if not self.w_is_const:
            self.scratch.add("w", self.conv_metas[1].shape, F64)
        if self.has_bias and not self.b_is_const:
            self.scratch.add("b", self.conv_metas[2].shape, F64)
        self.scratch.add("conv", (max(self.conv.workspace_nbytes(), 1),), np.uint8)
        return True

    def plan_native(self, ok: bool = True) -> None:
        """Take the native plan (int8_native.NativeIntConv) when the backend has it, W (and B) are
        constants, x has one zero point and the conv is 2-D, group 1 or depthwise; it needs no workspace."""
        nat, c = self.backend.lib, self.conv
        if nat is not None and len(c.spatial) == 1:  # a 1-D conv (Whisper's stem) as the 2-D one of height 1
            c = self._inner_conv(None, None, geometry_only=True, planar=True)
        depthwise = c.g == c.c == c.oc and c.g > 1 and math.prod(c.kernel) <= 64  # (qgemm.c: up to 64 taps)
        if nat is None or not ok or not self.w_is_const or (self.has_bias and not self.b_is_const) \
                or len(c.spatial) != 2 or not (c.g == 1 or depthwise):
            return
        self.scratch = Scratch()
        self.qc = NativeIntConv(self, nat, c, *self.xw_dtypes)
        self.uses_native = True

    def native_out(self, keep: list):
        raise NotImplementedError

    def run_native(self, xs, ys, v) -> None:
        self.qc.run(xs[self.X], xs[self.XZ] if self.has_xz else None, ys[0], v, self.qout, self.qout_keep)

    def _inner_conv(self, w64, b64, geometry_only: bool = False, planar: bool = False):
        """The float64 Conv on the centered operands (constant W and B when packed); geometry_only:
        Conv.geometry (its checks, output and geometry, which the native plan reads); planar: a 1-D
        conv's geometry as the 2-D conv of height 1."""
        attrs = {k: v for k, v in self.attrs.items()
                 if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")}
        metas = self.conv_metas
        if planar:
            attrs.update({k: [1, *attrs[k]] for k in ("dilations", "kernel_shape", "strides") if k in attrs})
            if "pads" in attrs:
                attrs["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
            metas = [Meta(m.dtype, (*m.shape[:2], 1, m.shape[2])) for m in metas[:2]] + metas[2:]
        consts = [None, w64] + ([b64] if self.has_bias else [])
        conv = lookup("Conv", opset=11)
        return (conv.geometry if geometry_only else conv)(attrs, metas, consts, opset=11, name=self.name,
                                                           packs=self.packs, backend=self.backend)

    def pack(self):
        if self.qc is not None:
            self.qc.pack(self, const_input(self, self.W), const_input(self, self.WZ))
            self.qout_keep = []
            self.qout = self.native_out(self.qout_keep)
            return
        wm = self.inputs[self.W]
        if self.w_is_const:
            self.w64 = self.shared_pack(("center", self.wz_shape), lambda w, wz: IntegerMatMul.center(
                w, wz, self.wz_shape, np.empty(wm.shape, F64)), const_input(self, self.W), const_input(self, self.WZ))
        if self.b_is_const:
            self.b64 = self.shared_pack(("float64",), lambda b: np.asarray(b).astype(F64), const_input(self, self.BIAS))
        conv = self._inner_conv(self.w64, self.b64)
        if conv.workspace_nbytes() > self.conv.workspace_nbytes():  # float64 plans do not depend on W being known
            raise self.fail("the inner convolution's plan changed with constant weights")
        self.conv = conv.load()

    def _oc(self):
        m = self.inputs[self.W]
        return m.shape[0] if m is not None and m.shape else -1

    def accumulate(self, xs, v) -> np.ndarray:
        x = IntegerMatMul.center(xs[self.X], xs[self.XZ] if self.has_xz else None, (), v["x"])
        w = self.w64 if self.w64 is not None else \
            IntegerMatMul.center(xs[self.W], xs[self.WZ] if self.has_wz else None, self.wz_shape, v["w"])
        args = [x, w]
        if self.has_bias:
            b = self.b64
            if b is None:
                b = v["b"]
                np.copyto(b, xs[self.BIAS])
            args.append(b)
        acc = v["acc"]
        self.conv.run(args, [acc], v["conv"][:self.conv.workspace_nbytes()] if self.conv.workspace_nbytes() else None)
        return acc


@register("ConvInteger", since=10)
class ConvInteger(_IntegerConv):
    """x, w, x_zero_point, w_zero_point -> int32."""

    def prepare(self):
        self.prepare_conv()
        self.out_metas = [Meta(np.dtype(np.int32), self.out)]
        self.plan_conv()

    def native_out(self, keep):
        return qout(QOUT_I32, keep)

    def run(self, xs, ys, ws):
        xs = list(xs) + [None] * (4 - len(xs))
        if self.qc is not None:
            return self.run_native(xs, ys, self.views(ws))
        np.copyto(ys[0], self.accumulate(xs, self.views(ws)), casting="unsafe")


@register("QLinearConv", since=10)
class QLinearConv(_IntegerConv, _Requantize):
    """x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32)."""
    X, XZ, W, WZ, BIAS = 0, 2, 3, 5, 8

    def prepare(self):
        self.prepare_conv()
        oc = self.out[1]
        self.prepare_requant(self, [(1, "x_scale"), (4, "w_scale"), (6, "y_scale")], 7, 4, oc,
                             (-1,) + (1,) * (len(self.out) - 2))
        self.out_metas = [Meta(self.yz_dtype, self.out)]
        if self.plan_conv(self.constant_requant()):
            self.scratch.add("t", self.out, F32)

    def native_out(self, keep):
        return self.requant_out(keep, bias=const_input(self, self.BIAS) if self.has_bias else None)

    def run(self, xs, ys, ws):
        xs = list(xs) + [None] * (9 - len(xs))
        v = self.views(ws)
        if self.qc is not None:
            return self.run_native(xs, ys, v)
        self.requantize(xs, self.accumulate(xs, v), v["t"], ys[0])


# -- com.microsoft's QuantizeLinear / DequantizeLinear ---------------------------------------------------
# onnxruntime's quantize_static writes them for QDQ models with UseQDQContribOps (and for the 16-bit
# and 4-bit types ONNX had not yet): x, scale, zero point and axis (default 1), as ONNX's at opset 21
# without block_size or output_dtype.
MS_OPSET = 21


@register("QuantizeLinear", domain="com.microsoft")
class MsQuantizeLinear(QuantizeLinear):
    def prepare(self):
        self.opset = MS_OPSET
        super().prepare()


@register("DequantizeLinear", domain="com.microsoft")
class MsDequantizeLinear(DequantizeLinear):
    def prepare(self):
        self.opset = MS_OPSET
        super().prepare()
