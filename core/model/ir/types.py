"""Tensor types as ONNX spells them: element types and their numpy dtypes, and Meta, a static
tensor's dtype and shape. What a deployed runtime needs of the IR (kernels and the OM reader see
Metas), without the graph classes (graph.py), which only the compiler builds."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..errors import GraphError
from ..record import record

#: ONNX TensorProto data type id -> numpy's own dtype
_NUMPY_TYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
    # STRING: arrays of Python str objects; no static layout, they live on the host (the dynamic path)
    8: np.dtype(object),
}
#: ONNX TensorProto data type id -> the ml_dtypes type's name: one element a byte (or two) in memory,
#: as onnx's numpy_helper unpacks them; Cast converts them
SMALL_TYPES: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
}
STRING = np.dtype(object)
_ONNX_OF = {v: k for k, v in _NUMPY_TYPES.items()}
_ONNX_OF_SMALL = {v: k for k, v in SMALL_TYPES.items()}


def small_dtype(name: str) -> np.dtype:
    """numpy's dtype of an ml_dtypes type (onnx's own dependency), imported on first use: its import
    is 15-20 ms of a process, which a model of numpy's types never pays."""
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name))


class _OnnxTypes(Mapping):
    """ONNX TensorProto data type id -> numpy dtype (the types ge's kernels handle)."""

    def __getitem__(self, elem_type) -> np.dtype:
        found = _NUMPY_TYPES.get(elem_type)
        return found if found is not None else small_dtype(SMALL_TYPES[elem_type])

    def __contains__(self, elem_type) -> bool:
        return elem_type in _NUMPY_TYPES or elem_type in SMALL_TYPES

    def __iter__(self):
        return iter([*_NUMPY_TYPES, *SMALL_TYPES])

    def __len__(self) -> int:
        return len(_NUMPY_TYPES) + len(SMALL_TYPES)


DTYPES = _OnnxTypes()


def dtype_from_onnx(elem_type: int, where: str = "") -> np.dtype:
    try:
        return DTYPES[elem_type]
    except KeyError:
        raise GraphError(f"{where}: unsupported ONNX element type {elem_type}") from None


def is_onnx_dtype(dtype) -> bool:
    """`dtype` is one of DTYPES' values (without importing ml_dtypes: an array of its types has)."""
    dtype = np.dtype(dtype)
    return dtype in _ONNX_OF or dtype.name in _ONNX_OF_SMALL


def dtype_to_onnx(dtype) -> int:
    dtype = np.dtype(dtype)
    found = _ONNX_OF.get(dtype)
    return found if found is not None else _ONNX_OF_SMALL[dtype.name]


@record
class Meta:
    """A static tensor description: what kernels and the planner see."""
    dtype: np.dtype
    shape: tuple

    @property
    def numel(self) -> int:
        return math.prod(self.shape)  # Python ints: np.prod costs microseconds per call, on every run

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


#: a compiled control-flow node's attribute: how many of its inputs (the last ones) are captured (the OM
#: reader checks it, so it lives here rather than beside the graph classes)
CAPTURES = "ge.captures"
