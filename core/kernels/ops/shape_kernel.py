"""ShapeKernel: the base of kernels whose output shape depends on constant inputs (Reshape's shape,
axes, pads): it names them (`shape_inputs`) and checks axes against a rank."""
from __future__ import annotations

import numpy as np

from ...model.ir import DTYPES, is_onnx_dtype
from ..base import Kernel


class ShapeKernel(Kernel):
    """A kernel with helpers for axes and for the inputs `infer` needs as constants."""
    #: (input index, what) pairs that must be constants to know the output shape
    shape_inputs: tuple = ()

    def norm_axis(self, axis: int, rank: int, what: str = "axis") -> int:
        axis = int(axis)
        if not -rank <= axis < rank:
            raise self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def norm_axes(self, axes, rank: int, what: str = "axes") -> list[int]:
        out = [self.norm_axis(a, rank, what) for a in axes]
        if len(set(out)) != len(out):
            raise self.fail(f"{what} {list(axes)} repeat an axis")
        return out

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def const_or_none(self, i: int):
        """The value of input i when it is a known constant, else None (absent or computed)."""
        return self.consts[i] if i < len(self.consts) else None

    def infer(self):
        for i, what in self.shape_inputs:
            if self.has_input(i):
                self.const(i, what)
        return super().infer()

    def tensor_attr(self, key: str, value) -> np.ndarray:
        """A TENSOR attribute (onnx TensorProto or an array) as a numpy array of a supported dtype."""
        if hasattr(value, "dims") and hasattr(value, "data_type"):
            from onnx import numpy_helper
            if value.data_type not in DTYPES:
                raise self.fail(f"attribute '{key}' has unsupported element type {value.data_type}")
            value = numpy_helper.to_array(value)
        value = np.asarray(value)
        if not is_onnx_dtype(value.dtype):
            raise self.fail(f"attribute '{key}' has unsupported dtype {value.dtype}")
        return value
