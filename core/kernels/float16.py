"""float16 ops computed by their float32 kernels.

numpy has no float16 arithmetic: every float16 ufunc converts each element to float32 and back,
and float16 matmul has no BLAS, so a float16 Conv, MatMul or Gemm takes 100-400x its float32 time
and a pooling or reduction 5-40x. The ops listed in VIA_FLOAT32, built on float16 inputs, are
built as Float16ViaFloat32 instead (Kernel.__new__ asks `via_float32`): the op's float32 kernel,
planned on float32 metas, with its float16 inputs converted into float32 workspace blocks, its
float16 constants converted once at load, and its float32 results rounded once into the float16
outputs. That is what a float16 kernel accumulating in float32 computes (the NPU's cube units
accumulate so), at float32 speed plus the two conversions.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir import Meta
from .base import Kernel
from .planned import PlannedKernel, Scratch

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)

#: (domain, op_type) of the kernels whose float16 instances run through their float32 plan
VIA_FLOAT32 = frozenset({
    ("", "Conv"), ("", "ConvTranspose"), ("", "MatMul"), ("", "Gemm"), ("", "Einsum"),
    ("ge", "FusedConv"), ("ge", "FusedMatMul"),
    ("", "MaxPool"), ("", "AveragePool"), ("", "GlobalAveragePool"), ("", "GlobalMaxPool"), ("", "LpPool"),
    ("", "ReduceMean"), ("", "ReduceSum"), ("", "ReduceMax"), ("", "ReduceMin"), ("", "ReduceL2"),
    ("", "ReduceSumSquare"), ("", "InstanceNormalization"), ("", "GroupNormalization"),
})


def via_float32(cls: type[Kernel], inputs: Sequence[Meta | None]) -> bool:
    return (cls.domain, cls.op_type) in VIA_FLOAT32 and any(m is not None and m.dtype == F16 for m in inputs)


def _wide(m: Meta | None) -> Meta | None:
    return m if m is None or m.dtype != F16 else Meta(F32, tuple(m.shape))


class Float16ViaFloat32(PlannedKernel):
    """The float32 kernel `inner` behind float16 inputs and outputs (see the module's docstring)."""

    def __init__(self, cls: type[Kernel], attrs: dict, inputs: Sequence[Meta | None], consts=(), outputs=None,
                 opset: int = 17, name: str = "", num_outputs: int | None = None, packs=None, backend=None):
        self.op_type, self.domain, self.since = cls.op_type, cls.domain, cls.since
        self.inner = cls(attrs, [_wide(m) for m in inputs], consts,
                         outputs=None if outputs is None else [_wide(m) for m in outputs],
                         opset=opset, name=name, num_outputs=num_outputs, packs=packs, backend=backend)
        super().__init__(attrs, inputs, consts, outputs, opset, name, num_outputs, packs, backend)

    @property
    def planned_class(self) -> type[Kernel]:
        return type(self.inner)

    def prepare(self):
        inner = self.inner
        wide_outs = inner.infer()
        self.out_metas = [Meta(F16, m.shape) if m.dtype == F32 else m for m in wide_outs]
        self.uses_native, self.absorbs_epilogue = inner.uses_native, inner.absorbs_epilogue
        self.widened = [i for i, (m, c) in enumerate(zip(self.inputs, self.consts))
                        if m is not None and m.dtype == F16 and c is None]
        self.narrowed = [j for j, m in enumerate(wide_outs) if m.dtype == F32]
        self.scratch = Scratch()
        self.scratch.add("inner", (inner.workspace_nbytes(),), np.uint8)
        for i in self.widened:
            self.scratch.add(f"x{i}", self.inputs[i].shape, F32)
        for j in self.narrowed:
            self.scratch.add(f"y{j}", wide_outs[j].shape, F32)
        self.wide_consts: dict[int, np.ndarray] = {}

    def pack(self):
        # float16 weights become float32 once; the inner kernel packs them (or reads them) as its own
        self.wide_consts = {i: np.asarray(c, F32) for i, c in enumerate(self.consts)
                            if c is not None and np.asarray(c).dtype == F16}
        self.inner.consts = [self.wide_consts.get(i, c) for i, c in enumerate(self.consts)]
        self.inner.load()

    def run(self, xs, ys, ws):
        v = self.views(ws)
        wxs = list(xs)
        for i in self.widened:
            np.copyto(v[f"x{i}"], xs[i])
            wxs[i] = v[f"x{i}"]
        for i, c in self.wide_consts.items():
            wxs[i] = c
        wys = list(ys)
        for j in self.narrowed:
            if ys[j] is not None:
                wys[j] = v[f"y{j}"]
        self.inner.run(wxs, wys, v["inner"])
        for j in self.narrowed:
            if ys[j] is not None:
                np.copyto(ys[j], wys[j], casting="unsafe")
