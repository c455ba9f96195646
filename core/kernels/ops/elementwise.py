"""Elementwise ops with ONNX (numpy) broadcasting; every one writes straight into its planned output.

Conventions of the family:
- `prepare` checks the input dtypes against the op's ONNX type constraints and the broadcast of the
  input shapes; `infer` is exact and cheap (no evaluation); `compute` allocates the outputs and a
  workspace and goes through `run`, so the reference and the planned path are the same code.
- `run` uses ufuncs with `out=`: multi-step float formulas are evaluated step by step in place in
  the output, block by block, with any temporary carved from the declared workspace (FloatUnary).
  float16 is evaluated in float32 scratch and rounded once at the end, as onnxruntime does for
  half ops. Masked ufuncs (`where=`) are kept for true selections (Where): with a random mask
  they are ~20x slower than a plain pass, so formulas blend branches arithmetically instead.
- `run` assumes the outputs do not overlap the inputs (the planner gives them their own memory).
- IEEE specials (division by zero, overflow, invalid) are the values numpy produces, silently.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...model.ir import DTYPES, Meta
from ..base import Kernel
from ..dtypes import ALL, BOOL, FLOATS, INTS, NUMERIC, SIGNED, SMALL, cast_to, type_names, working_dtype
from ..float16 import narrow, widen
from ..fused import GE_DOMAIN
from ..native import CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, EW_ADD, EW_DIV, EW_MAX, EW_MUL, EW_SIGMOID, EW_SUB, CallCache
from ..planned import Scratch
from ..registry import register
from ..values import text


# ----------------------------------------------------------------------------------------------
# bases
# ----------------------------------------------------------------------------------------------
class Elementwise(Kernel):
    """Shared by the family: dtype checks, broadcast shape, compute() through run()."""
    #: dtypes the data inputs may have (ONNX type constraint T)
    types: frozenset = NUMERIC
    #: and the small types (ml_dtypes') they may have, by name (dtypes.SMALL)
    small_types: frozenset = frozenset()
    #: indices of the inputs that share T (None: all present inputs)
    data_inputs: tuple | None = None
    #: fixed output dtype (comparisons: bool); None: the data inputs' dtype
    out_type = None
    min_inputs, max_inputs = 1, 1

    def prepare(self) -> None:
        present = [i for i, m in enumerate(self.inputs) if m is not None]
        if len(self.inputs) < self.min_inputs or (self.max_inputs is not None and len(self.inputs) > self.max_inputs):
            if self.min_inputs == self.max_inputs:
                expected = str(self.min_inputs)
            elif self.max_inputs is None:
                expected = f"at least {self.min_inputs}"
            else:
                expected = f"{self.min_inputs} to {self.max_inputs}"
            raise self.fail(f"takes {expected} inputs, got {len(self.inputs)}")
        for i in range(self.min_inputs):
            if self.inputs[i] is None:
                raise self.fail(f"input {i} is required")
        data = [i for i in (self.data_inputs if self.data_inputs is not None else present)
                if i < len(self.inputs) and self.inputs[i] is not None]
        self.dtype = np.dtype(self.inputs[data[0]].dtype)
        for i in data:
            dt = np.dtype(self.inputs[i].dtype)
            if dt not in self.types and dt.name not in self.small_types:
                raise self.fail(f"input {i} has dtype {dt.name}; {self.op_type} takes "
                                f"{type_names(self.types, self.small_types)}")
            if dt != self.dtype:
                raise self.fail(f"inputs have different dtypes ({self.dtype.name} and {dt.name})")
        self.shape = self.broadcast([self.input_shape(i) for i in present])
        self.out_dtype = np.dtype(self.out_type) if self.out_type is not None else self.dtype
        self.setup()

    def setup(self) -> None:
        """Op-specific attribute parsing; self.dtype, self.shape and self.out_dtype are set."""

    def input_shape(self, i: int) -> tuple:
        return tuple(self.inputs[i].shape)

    def broadcast(self, shapes) -> tuple:
        try:
            return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
        except ValueError:
            raise self.fail("input shapes " + ", ".join(str(tuple(s)) for s in shapes) + " do not broadcast") from None

    def infer(self) -> list[Meta]:
        return [Meta(self.out_dtype, self.shape)]

    def workspace_nbytes(self) -> int:
        return 0

    def compute(self, *xs):
        ys = [np.empty(m.shape, m.dtype) for m in self.infer()]
        n = self.workspace_nbytes()
        with np.errstate(all="ignore"):
            self.run(list(xs), ys, np.empty(n, np.uint8) if n else None)
        return ys

    def run(self, xs, ys, ws):
        self.evaluate(xs, ys, ws)

    def bound(self, xs, ys, ws):
        """evaluate() itself where run() is only that: one Python call less a task (on a model that
        streams weights between small tasks, each call's frame is cache misses)."""
        if type(self).run is Elementwise.run:
            return partial(self.evaluate, xs, ys, ws)
        return super().bound(xs, ys, ws)

    def evaluate(self, xs, ys, ws) -> None:
        raise NotImplementedError


class Unary(Elementwise):
    """y = ufunc(x), evaluated into the planned output."""
    ufunc = None

    def evaluate(self, xs, ys, ws):
        self.ufunc(xs[0], out=ys[0])


class Binary(Elementwise):
    """y = ufunc(a, b) with multidirectional broadcasting."""
    ufunc = None
    min_inputs = max_inputs = 2

    def evaluate(self, xs, ys, ws):
        self.ufunc(xs[0], xs[1], out=ys[0])

    def bound(self, xs, ys, ws):
        if type(self).run is Elementwise.run and type(self).evaluate is Binary.evaluate:  # the ufunc itself
            return partial(self.ufunc, xs[0], xs[1], out=ys[0])
        return super().bound(xs, ys, ws)


class Compare(Binary):
    """In a Loop body (Backend.iterated) a native call (csrc/eltwise.c ge_compare) where its operands
    have one shape or one is a scalar: a Loop's condition (i + 1 < stop) in its native loop."""
    out_type = np.bool_
    opcode: int | None = None  # csrc/abi.h's CMP_*

    def bound(self, xs, ys, ws):
        lib = self.backend.lib
        if self.backend.iterated and lib is not None and self.opcode is not None and type(self).run is Elementwise.run:
            call = lib.compare_call(self.opcode, xs[0], xs[1], ys[0])
            if call is not None:
                return call.run
        return super().bound(xs, ys, ws)


class Logical(Binary):
    types = BOOL
    out_type = np.bool_


class Variadic(Elementwise):
    """y = a (op) b (op) c ... over 1..N inputs, all broadcast together."""
    ufunc = None
    max_inputs = None

    def prepare(self):
        if any(m is None for m in self.inputs):
            raise self.fail("inputs cannot be empty-named")
        super().prepare()

    def evaluate(self, xs, ys, ws):
        y = ys[0]
        if len(xs) == 1:
            np.copyto(y, xs[0])
            return
        self.ufunc(xs[0], xs[1], out=y)
        for x in xs[2:]:
            self.ufunc(y, x, out=y)


class FloatUnary(Unary):
    """A multi-step float formula `formula(x, y, *scratch)` evaluated in place into y.

    The formula runs over blocks of CHUNK elements, so that its passes stay in cache (1.5-2x
    faster than whole-tensor passes) and its scratch is block-sized: `temps` arrays of the
    working dtype and `masks` bool arrays of CHUNK elements, carved from the workspace. For
    float16 (and integer inputs, where ONNX allows them) each block of x is first converted into
    working-dtype scratch and the result rounded into the output at the end. A formula with no
    temps or masks needs no workspace in float32/float64: such classes are shape-agnostic (their
    float16 instances, which need scratch, are built per shape by the hybrid executor)."""
    types = FLOATS
    temps = 0
    masks = 0
    CHUNK = 1 << 15

    def setup(self):
        self.work = working_dtype(self.dtype)
        self.convert = self.work != self.dtype
        n_work = self.temps + (2 if self.convert else 0)
        # without scratch the block size is free: CHUNK whatever the shape (one block for a smaller
        # tensor, as before), so that run() reads nothing of the shape the kernel was built for
        self.chunk = self.CHUNK if n_work + self.masks == 0 else \
            max(1, min(int(np.prod(self.shape, dtype=np.int64)), self.CHUNK))
        self.scratch = Scratch.of([(self.work, (self.chunk,))] * n_work + [(np.bool_, (self.chunk,))] * self.masks)
        self.c = self.work.type  # typed constants keep every ufunc in the working dtype

    def workspace_nbytes(self):
        return self.scratch.nbytes

    def evaluate(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if not y.flags.c_contiguous:  # not a planned output: evaluate aside
            tmp = np.empty(y.shape, y.dtype)
            self.evaluate(xs, [tmp], ws)
            np.copyto(y, tmp)
            return
        xf, yf = np.reshape(x, -1), y.reshape(-1)  # views (x is copied only if not contiguous)
        bufs = self.scratch.carve_list(ws)
        step = self.chunk
        for start in range(0, yf.size, step):
            stop = min(start + step, yf.size)
            b = bufs if stop - start == step else [t[:stop - start] for t in bufs]
            if self.convert:
                xw, yw, *b = b
                widen(self.backend.lib, xf[start:stop], xw)  # native for float16, numpy's cast otherwise
                self.formula(xw, yw, *b)
                narrow(self.backend.lib, yw, yf[start:stop])
            else:
                self.formula(xf[start:stop], yf[start:stop], *b)

    def formula(self, x, y, *scratch) -> None:
        raise NotImplementedError

    def native_unary(self, opcode: int, x: np.ndarray, y: np.ndarray) -> None:
        """y = op(x) by csrc/eltwise.c's one-op chain (float32 or float16; self.calls: a CallCache),
        through a contiguous copy when x or y is strided."""
        lib = self.backend.lib
        if x.flags.c_contiguous and y.flags.c_contiguous:
            self.calls.get((x, y), lambda: lib.unary_call(opcode, x, y)).run()
        else:
            out = np.empty(y.shape, y.dtype)
            lib.unary_call(opcode, np.ascontiguousarray(x), out).run()
            np.copyto(y, out)


def gate_buffer(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where a formula y = x * gate(x) computes its gate: y itself, unless y is x (run in place, as a
    fused epilogue), then a block-sized temporary of its own (so the kernel needs no workspace and
    stays shape-agnostic)."""
    return np.empty_like(x) if np.may_share_memory(x, y) else y


def float_attr(kernel: Kernel, key: str, default: float) -> float:
    value = kernel.attr(key, default)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise kernel.fail(f"attribute {key} must be a float, got {value!r}") from None
    return value


def str_attr(kernel: Kernel, key: str, default: str) -> str:
    value = kernel.attr(key, default)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise kernel.fail(f"attribute {key} must be a string, got {value!r}")
    return value


# ----------------------------------------------------------------------------------------------
# activations
# ----------------------------------------------------------------------------------------------
@register("Relu")
class Relu(Unary):
    in_place = True
    shape_agnostic = True
    types = FLOATS | SIGNED

    def evaluate(self, xs, ys, ws):
        np.maximum(xs[0], self.dtype.type(0), out=ys[0])

    def bound(self, xs, ys, ws):
        if type(self).run is Elementwise.run and type(self).evaluate is Relu.evaluate:  # the ufunc itself
            x, y, lib = xs[0], ys[0], self.backend.lib
            if self.backend.iterated and lib is not None and self.dtype == np.float32 and x.flags.c_contiguous \
                    and y.flags.c_contiguous:  # a Loop body's: max(0, x), numpy's bits (+0 for -0, NaN kept)
                return lib.binary_call(EW_MAX, np.zeros((1,) * x.ndim, np.float32), x, y).run
            # a 0-d array, not a numpy scalar: the ufunc converts a scalar on every call (~0.2 us)
            return partial(np.maximum, x, np.zeros((), self.dtype), out=y)
        return super().bound(xs, ys, ws)


@register("LeakyRelu")
class LeakyRelu(FloatUnary):
    shape_agnostic = True
    in_place = True

    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", 0.01)

    def formula(self, x, y):
        # x >= 0 ? x : alpha*x  ==  max(x, alpha*x) for alpha <= 1, min(x, alpha*x) above
        t = gate_buffer(x, y)
        np.multiply(x, self.c(self.alpha), out=t)
        (np.maximum if self.alpha <= 1 else np.minimum)(t, x, out=y)


@register("PRelu")
class PRelu(Elementwise):
    """y = x >= 0 ? x : slope*x. The slope broadcasts to x; a 1-D slope of x.shape[1] values that
    does not broadcast is taken per channel (Caffe style), as (C, 1, ..., 1)."""
    types = FLOATS | frozenset(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
    min_inputs = max_inputs = 2

    def prepare(self):
        x, s = self.inputs[0], self.inputs[1] if len(self.inputs) > 1 else None
        self.slope_shape = None
        if x is not None and s is not None and len(s.shape) == 1 and len(x.shape) >= 2 and s.shape[0] == x.shape[1] > 1:
            try:
                np.broadcast_shapes(tuple(x.shape), tuple(s.shape))
            except ValueError:
                self.slope_shape = (s.shape[0],) + (1,) * (len(x.shape) - 2)
        super().prepare()

    def input_shape(self, i):
        return self.slope_shape if i == 1 and self.slope_shape is not None else super().input_shape(i)

    def setup(self):
        slope = self.consts[1]
        if slope is not None and slope.size:
            self.mode = "max" if np.all(slope <= 1) else "min" if np.all(slope > 1) else "mixed"
        else:
            self.mode = "mixed"
        self.scratch = Scratch.of([(self.dtype, self.shape)] if self.mode == "mixed" else [])

    def workspace_nbytes(self):
        return self.scratch.nbytes

    def evaluate(self, xs, ys, ws):
        x, s, y = xs[0], xs[1], ys[0]
        if self.slope_shape is not None:
            s = s.reshape(self.slope_shape)
        if self.mode == "mixed":  # max(x, 0) + slope * min(x, 0)
            (t,) = self.scratch.carve_list(ws)
            zero = self.dtype.type(0)
            np.minimum(x, zero, out=t)
            np.multiply(t, s, out=t)
            np.maximum(x, zero, out=y)
            np.add(y, t, out=y)
            return
        # x >= 0 ? x : s*x  ==  max(x, s*x) when every s <= 1, min(x, s*x) when every s > 1
        np.multiply(x, s, out=y)
        (np.maximum if self.mode == "max" else np.minimum)(y, x, out=y)


@register("Sigmoid")
class Sigmoid(FloatUnary):
    """float32 on the native kernels: csrc/eltwise.c's sigmoid (simd.h's, the one the conv epilogues apply:
    relative error below 1e-6), a block at a time, no workspace (numpy's five passes were 10x onnxruntime's
    time on a detector's map). Otherwise sigmoid_into (float16 too: its rounded result stays numpy's, bit
    for bit, on every backend)."""
    shape_agnostic = True
    in_place = True

    def setup(self):
        self.native = self.backend.lib is not None and self.dtype == np.float32
        self.calls = CallCache()
        super().setup()

    def evaluate(self, xs, ys, ws):
        if not self.native:
            return super().evaluate(xs, ys, ws)
        self.native_unary(EW_SIGMOID, xs[0], ys[0])

    def formula(self, x, y):
        sigmoid_into(x, y, self.c, -1.0)


def sigmoid_into(x, y, c, scale: float) -> None:
    """y = 1 / (1 + exp(scale * x)) (scale -1: the sigmoid of x) with the exponent capped below exp's
    overflow: exact to the last ulp or two for every x (sigmoid(-x) for x past the cap is below the
    smallest normal anyway). c: the working dtype's scalar type."""
    cap = 88.0 if y.dtype == np.float32 else 709.0
    np.multiply(x, c(scale), out=y)
    np.minimum(y, c(cap), out=y)
    np.exp(y, out=y)
    np.add(y, c(1), out=y)
    np.reciprocal(y, out=y)


@register("Swish", domain=GE_DOMAIN)
class Swish(FloatUnary):
    """x * sigmoid(alpha x) (SiLU at alpha 1): the pattern Mul(x, Sigmoid(x)) that
    passes.fuse_activation turns into an epilogue step."""
    shape_agnostic = True
    in_place = True
    DEFAULT_ALPHA = 1.0

    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", self.DEFAULT_ALPHA)

    def formula(self, x, y):
        t = gate_buffer(x, y)
        sigmoid_into(x, t, self.c, -self.alpha)
        np.multiply(t, x, out=y)


@register("QuickGelu", domain="com.microsoft")
class QuickGelu(Swish):
    """onnxruntime's x * sigmoid(alpha x), alpha 1.702 by default: its optimizer fuses a SiLU (or
    Gelu's sigmoid approximation) into it in the models it saves, quantize_dynamic's among them."""
    shape_agnostic = True
    in_place = True
    DEFAULT_ALPHA = 1.702


@register("Tanh")
class Tanh(Unary):
    in_place = True
    shape_agnostic = True
    types = FLOATS
    ufunc = np.tanh


@register("HardSigmoid")
class HardSigmoid(FloatUnary):
    shape_agnostic = True
    in_place = True
    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", 0.2)
        self.beta = float_attr(self, "beta", 0.5)

    def formula(self, x, y):
        np.multiply(x, self.c(self.alpha), out=y)
        np.add(y, self.c(self.beta), out=y)
        np.minimum(y, self.c(1), out=y)
        np.maximum(y, self.c(0), out=y)


@register("HardSwish", since=14)
class HardSwish(FloatUnary):
    shape_agnostic = True
    in_place = True

    def formula(self, x, y):
        # x * max(0, min(1, x/6 + 1/2))
        t = gate_buffer(x, y)
        np.multiply(x, self.c(1 / 6), out=t)
        np.add(t, self.c(0.5), out=t)
        np.minimum(t, self.c(1), out=t)
        np.maximum(t, self.c(0), out=t)
        np.multiply(t, x, out=y)


@register("HardSwish", domain=GE_DOMAIN)
class GeHardSwish(HardSwish):
    """HardSwish before opset 14, where exporters write it x * HardSigmoid(x; 1/6, 1/2): the epilogue
    step passes.fuse_activation makes of that pattern in such models."""
    shape_agnostic = True


def softplus_into(x, y, t):
    """y = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow, accurate for x << 0."""
    c = y.dtype.type
    np.absolute(x, out=y)
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    np.maximum(x, c(0), out=t)
    np.add(y, t, out=y)


@register("Softplus")
class Softplus(FloatUnary):
    temps = 1

    def formula(self, x, y, t):
        softplus_into(x, y, t)


@register("Softsign")
class Softsign(FloatUnary):
    shape_agnostic = True

    def formula(self, x, y):
        np.absolute(x, out=y)
        np.add(y, self.c(1), out=y)
        np.divide(x, y, out=y)


@register("Mish", since=18)
class Mish(FloatUnary):
    temps = 1

    def formula(self, x, y, t):
        softplus_into(x, y, t)
        np.tanh(y, out=y)
        np.multiply(y, x, out=y)


class _ExpLinear(FloatUnary):
    """y = gamma * (x > 0 ? x : alpha * (exp(x / scale) - 1)), as the sum of the two parts (each
    0 outside its side): masked ufuncs (where=) are several times slower."""
    temps = 1
    alpha = gamma = scale = 1.0

    def formula(self, x, y, t):
        c = self.c
        if self.scale != 1:
            np.multiply(x, c(1 / self.scale), out=y)
            np.minimum(y, c(0), out=y)
        else:
            np.minimum(x, c(0), out=y)
        np.expm1(y, out=y)
        np.multiply(y, c(self.alpha * self.gamma), out=y)
        np.maximum(x, c(0), out=t)
        if self.gamma != 1:
            np.multiply(t, c(self.gamma), out=t)
        np.add(y, t, out=y)


@register("Elu")
class Elu(_ExpLinear):
    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", 1.0)


@register("Selu")
class Selu(_ExpLinear):
    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", 1.67326319217681884765625)
        self.gamma = float_attr(self, "gamma", 1.05070102214813232421875)


@register("Celu", since=12)
class Celu(_ExpLinear):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))"""
    def setup(self):
        super().setup()
        self.alpha = self.scale = float_attr(self, "alpha", 1.0)
        if self.alpha == 0:
            raise self.fail("attribute alpha must not be 0")


@register("ThresholdedRelu", since=10)
class ThresholdedRelu(FloatUnary):
    masks = 1

    def setup(self):
        super().setup()
        self.alpha = float_attr(self, "alpha", 1.0)

    def formula(self, x, y, above):
        np.greater(x, self.c(self.alpha), out=above)
        np.copyto(y, self.c(0))
        np.copyto(y, x, where=above)


# ----------------------------------------------------------------------------------------------
# arithmetic
# ----------------------------------------------------------------------------------------------
class Arithmetic(Binary):
    """Add, Sub, Mul and Div. With the native kernels, float32 operands where one broadcasts (a
    squeeze-excite gate [N,C,1,1] over [N,C,H,W], a per-channel bias, a scalar) and float16 ones of
    any shape run as a one-step chain of csrc/eltwise.c: one pass, an operand constant along runs
    of the output in one vector loop per run, float16 converted as read and rounded once as stored
    (numpy's float16 result, bit for bit), where numpy's broadcasting loops cost 2-4x and a float16
    op three passes through float32 copies. Float operands of one shape take numpy's ufunc, but in a
    Loop body (Backend.iterated), where int32/int64 Add, Sub and Mul (wrapping as numpy's) are native
    too: every task a prepared call, the iterations run in one native call.
    The output may take a float operand's bytes (output_over): every element is read just before
    it is written, so a gated map needs no second buffer."""
    shape_agnostic = True
    opcode: int  # csrc/abi.h's EW_ADD..EW_DIV

    def setup(self):
        floats = self.dtype in (np.float32, np.float16)
        ints = self.backend.iterated and self.dtype in (np.int32, np.int64) and self.opcode != EW_DIV
        self.native = self.backend.lib is not None and (floats or ints)
        self.calls = CallCache() if self.native else None
        if self.dtype.kind == "f":
            self.output_over = next((i for i in (0, 1) if tuple(self.inputs[i].shape) == self.shape), None)

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        return frozenset([0, 1]) if y_half and self.float16_outputs() else frozenset()

    def float16_outputs(self) -> bool:  # not beside a weight: the float16 adapter hands it over as float32
        return self.native and all(c is None for c in self.consts[:2])

    def run(self, xs, ys, ws):
        if self.native:
            call = self.calls.get((xs[0], xs[1], ys[0]), lambda: self._native_call(xs, ys[0]))
            if call is not None:
                call.run()
                return
        self.evaluate(xs, ys, ws)

    def bound(self, xs, ys, ws):
        call = self._native_call(xs, ys[0]) if self.native else None
        if call is not None:
            return call.run
        if type(self).evaluate is Binary.evaluate:
            return partial(self.ufunc, xs[0], xs[1], out=ys[0])
        return partial(self.evaluate, xs, ys, ws)

    def _native_call(self, xs, y):
        """The prepared native call for these arrays, or None (numpy's plan)."""
        a, b = xs
        if not (a.dtype == b.dtype == y.dtype and a.flags.c_contiguous and b.flags.c_contiguous and y.flags.c_contiguous):
            return None
        if y.dtype == np.float32 and a.shape == b.shape and not self.backend.iterated:
            return None  # (numpy's ufunc is as fast; a Loop body's wants native calls only: Backend.iterated)
        return self.backend.lib.binary_call(self.opcode, a, b, y)


@register("Add")
class Add(Arithmetic):
    shape_agnostic = True
    ufunc = np.add
    opcode = EW_ADD


@register("Sub")
class Sub(Arithmetic):
    shape_agnostic = True
    ufunc = np.subtract
    opcode = EW_SUB


@register("Mul")
class Mul(Arithmetic):
    shape_agnostic = True
    ufunc = np.multiply
    opcode = EW_MUL


@register("Div")
class Div(Arithmetic):
    """Integer division truncates toward zero (C, onnxruntime), not numpy's floor. A zero integer
    divisor gives 0 (onnxruntime fails the run)."""
    shape_agnostic = True
    opcode = EW_DIV

    def evaluate(self, xs, ys, ws):
        a, b, y = xs[0], xs[1], ys[0]
        if self.dtype.kind in "fu":
            np.divide(a, b, out=y) if self.dtype.kind == "f" else np.floor_divide(a, b, out=y)
            return
        # trunc(a / b) == (a - fmod(a, b)) / b, an exact division (fmod has the dividend's sign)
        np.fmod(a, b, out=y)
        np.subtract(a, y, out=y)
        np.floor_divide(y, b, out=y)


@register("Mod", since=10)
class Mod(Binary):
    """fmod=0: A - floor(A / B) * B, the divisor's sign (floats only from Mod-28, which defines it);
    fmod=1: A - trunc(A / B) * B, the dividend's (C fmod)."""
    shape_agnostic = True

    def setup(self):
        self.fmod = int(self.attr("fmod", 0))
        if self.fmod not in (0, 1):
            raise self.fail(f"attribute fmod must be 0 or 1, got {self.fmod}")
        if self.fmod == 0 and self.dtype.kind == "f" and self.opset < 28:
            raise self.fail(f"fmod=0 is not defined for floating point inputs before opset 28 (this model: "
                            f"{self.opset}); set fmod=1")

    def evaluate(self, xs, ys, ws):
        (np.fmod if self.fmod else np.remainder)(xs[0], xs[1], out=ys[0])


@register("Pow")
class Pow(Binary):
    """Base and exponent may have different dtypes; the result has the base's. Like onnxruntime
    (std::pow), mixed and integer cases are evaluated in double, integers truncated back (a NaN or infinite
    power of an integer base has no integer value: C's cast is undefined, the result is the CPU's, and on
    aarch64 not onnxruntime's)."""
    shape_agnostic = True
    types = FLOATS | frozenset(np.dtype(t) for t in (np.int32, np.int64))
    data_inputs = (0,)

    def setup(self):
        e = np.dtype(self.inputs[1].dtype)
        if e not in NUMERIC:
            raise self.fail(f"exponent has dtype {e.name}; Pow takes {type_names(NUMERIC)}")
        if self.dtype == e and self.dtype.kind == "f":
            self.loop = working_dtype(self.dtype)
        else:
            self.loop = np.dtype(np.float64)
        # a constant integral exponent n on float32/float64 bases (x ** 3 in an exported GELU, x ** 4 in a
        # polynomial): numpy's pow takes a scalar slow path for negative bases (100x a multiply, 1.5 ms
        # for 24K floats), so |x| ** n is raised on its vector path and the sign put back for odd n,
        # as pow(-x, n) = +-pow(x, n); the two paths of numpy differ by an ulp at most
        n = self.consts[1]
        self.integral = None
        if n is not None and np.size(n) == 1 and self.dtype in (np.float32, np.float64) and self.loop == self.dtype:
            v = float(np.asarray(n).reshape(()))
            if v.is_integer():
                self.integral = (np.asarray(v, self.dtype), v % 2 == 1)

    def evaluate(self, xs, ys, ws):
        if self.integral is None:
            np.power(xs[0], xs[1], out=ys[0], dtype=self.loop, casting="unsafe")
            return
        n, odd = self.integral
        np.abs(xs[0], out=ys[0])
        np.power(ys[0], n, out=ys[0])
        if odd:
            np.copysign(ys[0], xs[0], out=ys[0])


def _unary(name, ufunc, types=FLOATS, since=1):
    cls = type(name, (Unary,), {"ufunc": staticmethod(ufunc), "types": types, "shape_agnostic": True,
                                "__doc__": f"y = {ufunc.__name__}(x)"})
    return register(name, since=since)(cls)


Sqrt = _unary("Sqrt", np.sqrt)
Exp = _unary("Exp", np.exp)
Log = _unary("Log", np.log)
Reciprocal = _unary("Reciprocal", np.reciprocal)
Neg = _unary("Neg", np.negative, FLOATS | SIGNED)
Abs = _unary("Abs", np.absolute, NUMERIC)
Sign = _unary("Sign", np.sign, NUMERIC, since=9)
Floor = _unary("Floor", np.floor)
Ceil = _unary("Ceil", np.ceil)
Round = _unary("Round", np.rint, since=11)  # half to even
Sin = _unary("Sin", np.sin, since=7)
Cos = _unary("Cos", np.cos, since=7)
Tan = _unary("Tan", np.tan, since=7)
Asin = _unary("Asin", np.arcsin, since=7)
Acos = _unary("Acos", np.arccos, since=7)
Atan = _unary("Atan", np.arctan, since=7)
Sinh = _unary("Sinh", np.sinh, since=9)
Cosh = _unary("Cosh", np.cosh, since=9)
Asinh = _unary("Asinh", np.arcsinh, since=9)
Acosh = _unary("Acosh", np.arccosh, since=9)
Atanh = _unary("Atanh", np.arctanh, since=9)


@register("Clip")
class Clip(Elementwise):
    shape_agnostic = True
    in_place = True
    """min/max: attributes before opset 11, optional scalar inputs (absent or empty-named) since.
    min > max gives max everywhere, as in the spec and onnxruntime."""
    max_inputs = 3

    @classmethod
    def agnostic_output_shape(cls, shapes):
        return tuple(shapes[0])  # min and max are scalars: x's shape, even when x is a scalar

    def setup(self):
        self.lo = self.hi = None
        if self.opset < 11:
            with np.errstate(over="ignore"):  # float16: FLT_MAX bounds become +-inf
                if "min" in self.attrs:
                    self.lo = np.array(float_attr(self, "min", 0.0)).astype(self.dtype)
                if "max" in self.attrs:
                    self.hi = np.array(float_attr(self, "max", 0.0)).astype(self.dtype)
        for i in (1, 2):
            m = self.inputs[i] if i < len(self.inputs) else None
            if m is not None and int(np.prod(m.shape, dtype=np.int64)) != 1:
                raise self.fail(f"input {i} ({('min', 'max')[i - 1]}) must be a scalar, has shape {tuple(m.shape)}")
        if self.shape != tuple(self.inputs[0].shape):
            self.shape = tuple(self.inputs[0].shape)

    def evaluate(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        lo = xs[1] if len(xs) > 1 and xs[1] is not None else self.lo
        hi = xs[2] if len(xs) > 2 and xs[2] is not None else self.hi
        src = x
        if lo is not None:
            np.maximum(src, np.reshape(lo, ()), out=y)
            src = y
        if hi is not None:
            np.minimum(src, np.reshape(hi, ()), out=y)
            src = y
        if src is x:
            np.copyto(y, x)


@register("Max")
class Max(Variadic):
    shape_agnostic = True
    ufunc = np.maximum  # NaN propagates, as in onnxruntime


@register("Min")
class Min(Variadic):
    shape_agnostic = True
    ufunc = np.minimum


@register("Sum")
class Sum(Variadic):
    shape_agnostic = True
    types = FLOATS
    ufunc = np.add


@register("Mean")
class Mean(Variadic):
    shape_agnostic = True
    types = FLOATS
    ufunc = np.add

    def evaluate(self, xs, ys, ws):
        super().evaluate(xs, ys, ws)
        if len(xs) > 1:
            np.divide(ys[0], self.dtype.type(len(xs)), out=ys[0])


@register("Where", since=9)
class Where(Elementwise):
    shape_agnostic = True
    types = ALL
    data_inputs = (1, 2)
    min_inputs = max_inputs = 3

    def evaluate(self, xs, ys, ws):
        np.copyto(ys[0], xs[2])
        np.copyto(ys[0], xs[1], where=xs[0])


# ----------------------------------------------------------------------------------------------
# comparison and logic
# ----------------------------------------------------------------------------------------------
@register("Equal")
class Equal(Compare):
    shape_agnostic = True
    opcode = CMP_EQ
    types = ALL
    ufunc = np.equal


@register("Less")
class Less(Compare):
    shape_agnostic = True
    opcode = CMP_LT
    ufunc = np.less


@register("Greater")
class Greater(Compare):
    shape_agnostic = True
    opcode = CMP_GT
    ufunc = np.greater


@register("LessOrEqual", since=12)
class LessOrEqual(Compare):
    shape_agnostic = True
    opcode = CMP_LE
    ufunc = np.less_equal


@register("GreaterOrEqual", since=12)
class GreaterOrEqual(Compare):
    shape_agnostic = True
    opcode = CMP_GE
    ufunc = np.greater_equal


@register("And")
class And(Logical):
    shape_agnostic = True
    ufunc = np.logical_and


@register("Or")
class Or(Logical):
    shape_agnostic = True
    ufunc = np.logical_or


@register("Xor")
class Xor(Logical):
    shape_agnostic = True
    ufunc = np.logical_xor


@register("Not")
class Not(Unary):
    shape_agnostic = True
    types = BOOL
    ufunc = np.logical_not


@register("BitwiseAnd", since=18)
class BitwiseAnd(Binary):
    shape_agnostic = True
    types = INTS
    ufunc = np.bitwise_and


@register("BitwiseOr", since=18)
class BitwiseOr(Binary):
    shape_agnostic = True
    types = INTS
    ufunc = np.bitwise_or


@register("BitwiseXor", since=18)
class BitwiseXor(Binary):
    shape_agnostic = True
    types = INTS
    ufunc = np.bitwise_xor


@register("BitwiseNot", since=18)
class BitwiseNot(Unary):
    shape_agnostic = True
    types = INTS
    ufunc = np.invert


@register("IsNaN", since=9)
class IsNaN(Unary):
    shape_agnostic = True
    types = FLOATS
    out_type = np.bool_
    ufunc = np.isnan


@register("IsInf", since=10)
class IsInf(Unary):
    shape_agnostic = True
    types = FLOATS
    out_type = np.bool_

    def setup(self):
        self.negative = int(self.attr("detect_negative", 1))
        self.positive = int(self.attr("detect_positive", 1))
        for key, v in (("detect_negative", self.negative), ("detect_positive", self.positive)):
            if v not in (0, 1):
                raise self.fail(f"attribute {key} must be 0 or 1, got {v}")

    def evaluate(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.negative and self.positive:
            np.isinf(x, out=y)
        elif self.positive:
            np.equal(x, self.dtype.type(np.inf), out=y)
        elif self.negative:
            np.equal(x, self.dtype.type(-np.inf), out=y)
        else:
            np.copyto(y, False)


# ----------------------------------------------------------------------------------------------
# casts
# ----------------------------------------------------------------------------------------------
@register("Cast")
class Cast(Unary):
    """Any supported dtype to any other: C conversions (float -> int truncates toward zero, the
    result of out-of-range values is the platform's, as in onnxruntime); the small types
    (bfloat16, float8/float4, 2/4-bit ints) as the spec defines them (dtypes.cast_to: `saturate`
    and Cast-24's `round_mode`)."""
    shape_agnostic = True
    types = ALL
    small_types = SMALL

    def setup(self):
        to = self.attr("to")
        if to is None:
            raise self.fail("attribute 'to' is required")
        if not isinstance(to, (int, np.integer)) or int(to) not in DTYPES:
            raise self.fail(f"cannot cast to ONNX element type {to!r} (supported: "
                            + ", ".join(f"{k} ({v.name})" for k, v in sorted(DTYPES.items())) + ")")
        self.out_dtype = DTYPES[int(to)]
        if self.out_dtype == object:
            raise self.fail("casting to STRING gives a string tensor, which has no static layout: the dynamic "
                            "path casts it (kernels/strings.py)")
        self.setup_small()

    def setup_small(self):
        self.small = self.dtype.name in SMALL or self.out_dtype.name in SMALL
        self.saturate = bool(int(self.attr("saturate", 1)))
        self.round_mode = text(self.attr("round_mode", "up"))
        if self.round_mode not in ("up", "down", "nearest"):
            raise self.fail(f"round_mode '{self.round_mode}' must be up, down or nearest")

    def evaluate(self, xs, ys, ws):
        if self.small:
            ys[0][...] = cast_to(xs[0], self.out_dtype, self.saturate, self.round_mode)
        else:  # float32 <-> float16 natively (a float16 export's boundary Casts), with numpy's rounding
            (narrow if self.out_dtype == np.float16 else widen)(self.backend.lib, xs[0], ys[0])


@register("CastLike", since=15)
class CastLike(Cast):
    shape_agnostic = True
    data_inputs = (0,)
    min_inputs = max_inputs = 2

    @classmethod
    def agnostic_output_shape(cls, shapes):
        return tuple(shapes[0])  # input 1 gives only the dtype

    def input_shape(self, i):
        return () if i == 1 else super().input_shape(i)  # target_type's shape need not broadcast to x's

    def setup(self):
        target = np.dtype(self.inputs[1].dtype)
        if target not in ALL and target.name not in SMALL:
            raise self.fail(f"cannot cast to {target.name}")
        self.out_dtype = target
        self.setup_small()
