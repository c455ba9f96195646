"""float16 and bfloat16 ops computed by their float32 kernels.

numpy has no float16 arithmetic: every float16 ufunc converts each element to float32 and back,
and float16 matmul has no BLAS, so a float16 Conv, MatMul or Gemm takes 100-400x its float32 time
and a pooling or reduction 5-40x. The ops listed in VIA_FLOAT32, built on float16 inputs, are
built as Float16ViaFloat32 instead (Kernel.__new__ asks its `applies`): the op's float32 kernel,
planned on float32 metas, with its float16 inputs converted into float32 workspace blocks, its
float16 constants converted once at load, and its float32 results rounded once into the float16
outputs. That is what a float16 kernel accumulating in float32 computes (the NPU's cube units
accumulate so), at float32 speed plus the two conversions; with the native kernels, those run as
F16C/AVX-512 conversions (csrc/convert.c, bit for bit numpy's) instead of numpy's casts.
The plan is the float32 model's: float16 weights are planned as float32 stand-ins (so a constant
MatMul/Gemm weight takes the native GEMM, as in float32) and converted once at load, where the
float32 kernel is built again on them. Add, Sub, Mul and Div (ARITHMETIC_VIA_FLOAT32) go the same
way: there the result is numpy's float16 result bit for bit, at a quarter of its time.

The whole-tensor conversions are only for what the float32 kernel's plan cannot read or write in
float16 itself: a native plan that can (Kernel.float16_inputs / float16_outputs: the GEMM and the
GEMV of Conv, MatMul, Gemm, FusedConv and FusedMatMul, the direct convolution's output, the pixels
convolution's input and output, the phase fill of a convolution's input) is handed the float16 arrays, converts a vector or a row at a time as it packs
or lays them out, accumulates in float32 and rounds each result once as it stores it, after its
epilogue: the same values, bit for bit, without a pass over the tensor and its float32 copy.
Left whole, because blocks measured no faster (one thread, 2026-11-26): AveragePool and the Reduce*
ops (their numpy plans run per block of ~1 MB at +0-25% of one conversion; smaller blocks 2-5x), and
a pointwise direct convolution's input (see csrc/direct_conv.c: 20-33% slower per block).

bfloat16 goes the same way for every op of VIA_FLOAT32 and BFLOAT16_VIA_FLOAT32: numpy has no
bfloat16 at all (ml_dtypes' ufuncs convert per element and many ops refuse the dtype), and a
bfloat16 op evaluated in float32 and rounded once is what onnxruntime and the onnx reference
compute. Those ops have one float type T for their float inputs and outputs, so a node whose float
inputs are all bfloat16 has bfloat16 wherever its float32 kernel has float32.
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

import numpy as np

from ..model.ir import Meta
from .base import Kernel
from .epilogue import ATTR as EPILOGUE, Epilogue
from .planned import PlannedKernel, Scratch

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
#: the narrow float types by name (bfloat16 is ml_dtypes', imported where a model has it)
NARROW = ("float16", "bfloat16")

#: (domain, op_type) of the kernels whose float16 instances run through their float32 plan
VIA_FLOAT32 = frozenset({
    ("", "Conv"), ("", "ConvTranspose"), ("", "MatMul"), ("", "Gemm"), ("", "Einsum"),
    ("ge", "FusedConv"), ("ge", "FusedMatMul"),
    ("", "MaxPool"), ("", "AveragePool"), ("", "GlobalAveragePool"), ("", "GlobalMaxPool"), ("", "LpPool"),
    ("", "ReduceMean"), ("", "ReduceSum"), ("", "ReduceMax"), ("", "ReduceMin"), ("", "ReduceL2"),
    ("", "ReduceSumSquare"), ("", "InstanceNormalization"), ("", "GroupNormalization"),
})

#: (domain, op_type) of the arithmetic whose float16 instances run through their float32 kernels too:
#: numpy's float16 loops convert each element to float32, compute and round, at ~2 ns an element; the
#: float32 kernel between native conversions computes the same float32 value and rounds it the same
#: way (a float32 sum, difference, product or quotient of float16 values rounded to float16 is the
#: correctly rounded float16 result), bit for bit numpy's, at a quarter of the time
ARITHMETIC_VIA_FLOAT32 = frozenset(("", op) for op in ("Add", "Sub", "Mul", "Div"))

#: (domain, op_type) of the ops whose kernels compute float32/float64 only: their float16 and
#: bfloat16 instances run through the float32 kernel (the recurrences, the transforms, the losses)
FLOAT32_ONLY = frozenset(("", op) for op in (
    "RNN", "GRU", "LSTM", "RoiAlign", "Det", "DFT", "STFT", "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss", "GridSample"))

#: (domain, op_type) of the further ops whose bfloat16 instances run through their float32 kernels:
#: the elementwise ops, activations, reductions, normalizations, softmaxes and scans (their float16
#: is evaluated in float32 by the kernels themselves)
BFLOAT16_VIA_FLOAT32 = frozenset(("", op) for op in (
    "Abs", "Acos", "Acosh", "Add", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization",
    "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater",
    "GreaterOrEqual", "GroupNormalization", "HardSigmoid", "HardSwish", "Hardmax", "IsInf", "IsNaN", "LRN",
    "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "LpNormalization", "Max", "Mean",
    "MeanVarianceNormalization", "Min", "Mish", "Mod", "Mul", "Neg", "PRelu", "Pow", "Reciprocal", "ReduceL1",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceProd", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin",
    "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu",
    "Where", "LayerNormalization", "Resize", "CumSum", "CumProd", "RMSNormalization", "RotaryEmbedding", "SwiGLU",
    "Swish", "Col2Im", "DeformConv")) | frozenset(("ge", op) for op in ("Swish", "HardSwish", "Gelu", "LayerNormalization"))

#: ops whose other float inputs have their own type constraint (Pow's exponent, BatchNormalization's
#: statistics, Resize's roi and scales): a float32 one stays float32
MIXED = frozenset(("", op) for op in ("Pow", "BatchNormalization", "Resize", "GridSample"))
#: ops whose outputs after the first have their own type (the statistics: LayerNormalization's stash
#: type, BatchNormalization's running mean and variance): they keep the float32 kernel's dtype
FIRST_OUTPUT_ONLY = frozenset({("", "BatchNormalization"), ("", "LayerNormalization"), ("ge", "LayerNormalization")})


def _wide(m: Meta | None) -> Meta | None:
    return m if m is None or np.dtype(m.dtype).name not in NARROW else Meta(F32, tuple(m.shape))


def _narrow_dtype(cls: type[Kernel], inputs: Sequence[Meta | None]) -> np.dtype | None:
    """float16 or bfloat16 when this node's instance runs through the float32 kernel, else None."""
    for m in inputs:  # no narrow input, as in most kernels built (Kernel.__new__ asks of each): no set of dtypes
        if m is not None and (m.dtype == F16 or np.dtype(m.dtype).kind == "V"):
            break
    else:
        return None
    dtypes = {np.dtype(m.dtype) for m in inputs if m is not None}
    key = (cls.domain, cls.op_type)
    if F16 in dtypes and (key in VIA_FLOAT32 or key in FLOAT32_ONLY or key in ARITHMETIC_VIA_FLOAT32):
        return F16
    # bfloat16 is ml_dtypes' (numpy's kind 'V'): only such a dtype is asked its name, which numpy
    # computes in Python (every kernel built asks this, a float32 one too)
    bf16 = next((d for d in dtypes if d.kind == "V" and d.name == "bfloat16"), None)
    if bf16 is not None and F16 not in dtypes and (F32 not in dtypes or key in MIXED) \
            and (key in VIA_FLOAT32 or key in FLOAT32_ONLY or key in BFLOAT16_VIA_FLOAT32):
        return bf16
    return None


def _output_dtype(cls: type[Kernel], inputs: Sequence[Meta | None], narrow: np.dtype) -> np.dtype | None:
    """The narrow type the float32 kernel's outputs are rounded to: `narrow`, but for a MIXED op input
    0's (its output has X's type; a narrow exponent, scale or grid leaves a float32 X float32)."""
    if (cls.domain, cls.op_type) not in MIXED:
        return narrow
    x = inputs[0] if inputs else None
    return x.dtype if x is not None and np.dtype(x.dtype).name in NARROW else None


def _cast(convert, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src cast as numpy casts: by the native `convert` (None: there is none for these dtypes)
    where both are whole and contiguous, else by numpy."""
    if convert is not None and src.flags.c_contiguous and dst.flags.c_contiguous and src.size == dst.size:
        convert(src, dst)
    else:
        np.copyto(dst, src, casting="unsafe")


def widen(lib, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src cast as numpy casts (float32 from float16 or bfloat16 here), natively from float16."""
    _cast(lib.half_to_float if lib is not None and src.dtype == F16 and dst.dtype == F32 else None, src, dst)


def narrow(lib, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src cast as numpy casts (float32 rounded to float16 or bfloat16 here), natively to float16."""
    _cast(lib.float_to_half if lib is not None and dst.dtype == F16 and src.dtype == F32 else None, src, dst)


def _stand_in(c) -> np.ndarray:
    """A float32 array of c's shape that holds no data (every element the one zero): what a plan sees
    of a float16 weight."""
    return np.broadcast_to(np.zeros((), F32), np.shape(c))


def _as_float32(lib, c) -> np.ndarray:
    c = np.asarray(c)
    out = np.empty(c.shape, F32)
    widen(lib, np.ascontiguousarray(c), out)
    return out


class Float16ViaFloat32(PlannedKernel):
    """The float32 kernel `inner` behind float16 inputs and outputs (see the module's docstring)."""

    def __init__(self, cls: type[Kernel], attrs: dict, inputs: Sequence[Meta | None], consts=(), outputs=None,
                 opset: int = 17, name: str = "", num_outputs: int | None = None, packs=None, backend=None):
        self.op_type, self.domain, self.since = cls.op_type, cls.domain, cls.since
        self.narrow = _output_dtype(cls, inputs, _narrow_dtype(cls, inputs))
        # bfloat16 constants the plan reads (Clip's bounds, PRelu's slope) in float32: numpy cannot
        # mix the two; the loaded kernel gets its own float32 copies in pack(). A float16 weight is
        # planned as a float32 stand-in of its shape (no weight is read while planning): the plan is
        # then the float32 model's (the native GEMM takes float32 weights only), and pack() builds it
        # again on the weights converted once
        plan_consts = [_stand_in(c) if c is not None and np.asarray(c).dtype == F16 and (cls.domain, cls.op_type)
                       in VIA_FLOAT32 else np.asarray(c, F32) if c is not None and np.asarray(c).dtype.name == "bfloat16" else c
                       for c in consts]
        self.inner_args = (cls, attrs, [_wide(m) for m in inputs],
                           dict(outputs=None if outputs is None else [_wide(m) for m in outputs], opset=opset,
                                name=name, num_outputs=num_outputs, packs=packs, backend=backend))
        self.inner = cls(*self.inner_args[1:3], plan_consts, **self.inner_args[3])
        self.stand_ins = any(p is not c for p, c in zip(plan_consts, consts) if c is not None and p is not None
                             and np.asarray(c).dtype == F16)
        super().__init__(attrs, inputs, consts, outputs, opset, name, num_outputs, packs, backend)

    @staticmethod
    def applies(cls: type[Kernel], inputs: Sequence[Meta | None]) -> bool:
        return _narrow_dtype(cls, inputs) is not None

    @property
    def planned_class(self) -> type[Kernel]:
        return type(self.inner)

    def prepare(self):
        inner = self.inner
        wide_outs = inner.infer()
        narrowed = [j for j, m in enumerate(wide_outs) if m.dtype == F32 and self.narrow is not None
                    and (j == 0 or (self.domain, self.op_type) not in FIRST_OUTPUT_ONLY)]
        self.out_metas = [Meta(self.narrow, m.shape) if j in narrowed else m for j, m in enumerate(wide_outs)]
        self.uses_native = inner.uses_native
        # the conversions read an input before the output is written: the inner kernel's overwrite holds
        self.output_over = inner.output_over
        # the node's fused activation goes on the float32 result, before the rounding: by the inner
        # kernel as it stores, or here (a float16 Sigmoid or HardSwish would need workspace of its own)
        spec = self.attrs.get(EPILOGUE)
        self.wide_epilogue = Epilogue(spec, wide_outs[0], self.opset, self.name) \
            if spec and not inner.absorbs_epilogue else None
        self.absorbs_epilogue = bool(spec)
        # what the inner plan reads and writes as float16 itself (its results rounded after its epilogue)
        self.half_outputs = self.narrow == F16 and narrowed == list(range(len(wide_outs))) and self.wide_epilogue is None \
            and inner.float16_outputs()
        self.half_inputs = inner.float16_inputs(self.half_outputs) if self.narrow == F16 else frozenset()
        self.widened = [i for i, (m, c) in enumerate(zip(self.inputs, self.consts))
                        if m is not None and np.dtype(m.dtype).name in NARROW and c is None
                        and not (m.dtype == F16 and i in self.half_inputs)]
        self.narrowed = [] if self.half_outputs else narrowed
        self.scratch = Scratch()
        self.scratch.add("inner", (inner.workspace_nbytes(),), np.uint8)
        for i in self.widened:
            self.scratch.add(f"x{i}", self.inputs[i].shape, F32)
        for j in self.narrowed:
            self.scratch.add(f"y{j}", wide_outs[j].shape, F32)
        self.wide_consts: dict[int, np.ndarray] = {}

    def pack(self):
        # float16 weights become float32 once (through the pack cache: the kernels built for other
        # shapes share the copy, and so the inner kernels' packs of it); the inner kernel packs them
        # (or reads them) as its own
        lib = self.backend.lib
        self.wide_consts = {i: self.shared_pack(("float32",), lambda c: _as_float32(lib, c), c)
                            for i, c in enumerate(self.consts) if c is not None and np.asarray(c).dtype.name in NARROW}
        consts = [self.wide_consts.get(i, c) for i, c in enumerate(self.consts)]
        if self.stand_ins:  # planned on stand-ins: the same plan again, on the weights
            cls, attrs, metas, how = self.inner_args
            inner = cls(attrs, metas, consts, **how)
            if inner.workspace_nbytes() != self.inner.workspace_nbytes() or type(inner) is not type(self.inner) \
                    or inner.float16_outputs() != self.inner.float16_outputs() \
                    or inner.float16_inputs(self.half_outputs) != self.half_inputs:
                raise RuntimeError(f"node '{self.name}' ({self.op_type}): its float32 plan changed with the weights")
            self.inner = inner
        else:
            self.inner.consts = consts
        self.inner.load()

    def run(self, xs, ys, ws):
        self._around(xs, ys, ws, lambda *args: partial(self.inner.run, *args))()

    def bound(self, xs, ys, ws):
        """The conversions around the inner kernel's own prepared call, for these arrays."""
        return self._around(xs, ys, ws, self.inner.bound)

    def _around(self, xs, ys, ws, inner_call):
        """The conversions around inner_call(float32 xs, ys, ws): the inner kernel's bound call (made
        once per binding) or its run (per call: a bound call is prepared for arrays that stay)."""
        v, lib = self.views(ws), self.backend.lib
        wxs, wys = list(xs), list(ys)
        for i in self.widened:
            wxs[i] = v[f"x{i}"]
        for i, c in self.wide_consts.items():
            wxs[i] = c
        for j in self.narrowed:
            if ys[j] is not None:
                wys[j] = v[f"y{j}"]
        if self.half_outputs:  # written in place; a strided output (the plans want rows) through a copy
            for j, y in enumerate(ys):
                if y is not None and y.dtype == F16 and not y.flags.c_contiguous:
                    wys[j] = np.empty(y.shape, F16)
        before = [(xs[i], wxs[i]) for i in self.widened]
        after = [(wys[j], ys[j]) for j in self.narrowed if ys[j] is not None] + \
            [(wys[j], ys[j]) for j in range(len(ys)) if self.half_outputs and wys[j] is not ys[j]]
        inner = inner_call(wxs, wys, v["inner"])
        epilogue, y0 = self.wide_epilogue, wys[0]  # a fused activation, on the float32 result

        def call():
            for src, dst in before:
                widen(lib, src, dst)
            inner()
            if epilogue is not None:
                epilogue(y0)
            for src, dst in after:
                narrow(lib, src, dst)
        return call

Kernel.float16_adapter = Float16ViaFloat32
