"""Epilogue: activations fused into their producer, applied in place to its output.

The compiler records them as node attribute "ge.epilogue" = [[op_type, attrs], ...] (Clip's
bounds as attrs "min"/"max"); this class is the one place that turns such a list into kernels,
for the runtime and for the fusion pass alike. Only kernels flagged `in_place` that need no
workspace qualify.
"""
from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..ir import Meta
from .registry import lookup

ATTR = "ge.epilogue"


class Epilogue:
    def __init__(self, spec, meta: Meta, opset: int = 17, name: str = ""):
        self.steps = []  # (kernel, constant extra inputs)
        for op_type, attrs in spec:
            attrs, extra = dict(attrs), []
            if op_type == "Clip":  # the bounds travel as attrs; the opset-11 kernel takes them as inputs
                extra = [_bound(attrs.pop(key, default), meta.dtype) for key, default in (("min", -np.inf), ("max", np.inf))]
            cls = lookup(op_type, "", opset, name)
            kernel = cls(attrs, [meta] + [Meta(e.dtype, ()) for e in extra], [None] + extra, outputs=[meta],
                         opset=opset, name=f"{name}:{op_type}")
            if not cls.in_place or kernel.workspace_nbytes():
                raise GraphError(f"node '{name}': {op_type} cannot be applied in place as an epilogue")
            self.steps.append((kernel, extra))

    def __call__(self, y: np.ndarray) -> None:
        for kernel, extra in self.steps:
            kernel.run([y, *extra], [y], None)

    @classmethod
    def unless_absorbed(cls, kernel, spec, meta: Meta, opset: int = 17, name: str = "") -> "Epilogue | None":
        """The epilogue the runtime applies after `kernel`: None without one, or when the kernel
        applies it itself."""
        return cls(spec, meta, opset, name) if spec and not kernel.absorbs_epilogue else None

    @classmethod
    def supports(cls, op_type: str, attrs: dict, dtype, opset: int = 17) -> bool:
        try:
            cls([[op_type, attrs]], Meta(np.dtype(dtype), (1,)), opset)
            return True
        except GraphError:
            return False


def clamp_of(spec) -> tuple[float, float] | None:
    """(lo, hi) when the epilogue is one Relu or Clip (a kernel can apply it as it stores), else None."""
    if not spec or len(spec) != 1:
        return None
    op_type, attrs = spec[0]
    if op_type == "Relu":
        return 0.0, float("inf")
    if op_type == "Clip":
        attrs = dict(attrs)
        return float(attrs.get("min", -np.inf)), float(attrs.get("max", np.inf))
    return None


def _bound(value, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        value = min(max(value, info.min), info.max)
    return np.array(value).astype(dtype)
