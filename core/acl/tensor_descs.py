"""Tensor descriptions (acl.create_tensor_desc ...) and the dataset calls that carry them
(acl.mdl.set_dataset_tensor_desc / get_dataset_tensor_desc): how pyACL runs a model whose shapes
are known only at run time (--input_shape_range, -1 dims): each input's shape is set on the input
dataset, and after execute each output's shape is on the output dataset."""
from __future__ import annotations

import math

import numpy as np

from . import handles
from .codes import (ACL_DT_UNDEFINED, ACL_ERROR_INVALID_PARAM, ACL_FORMAT_UNDEFINED, DATA_TYPES, acl_call, as_int,
                    fail)
from .datasets import Dataset

DTYPE_OF = {code: name for name, code in DATA_TYPES.items() if name not in ("object", "bfloat16")}


class TensorDesc:
    def __init__(self, data_type: int, dims: tuple, fmt: int):
        self.data_type, self.dims, self.format = data_type, dims, fmt

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(DTYPE_OF[self.data_type])


@acl_call("bare", 0)
def create_tensor_desc(data_type, dims, format):
    data_type, fmt = as_int(data_type, "data_type"), as_int(format, "format")
    if data_type not in DTYPE_OF:
        fail(ACL_ERROR_INVALID_PARAM, f"data_type {data_type} is not an aclDataType ge computes")
    dims = tuple(as_int(d, "dim") for d in dims)
    return handles.new(TensorDesc(data_type, dims, fmt))


@acl_call("bare", None)
def destroy_tensor_desc(desc):
    handles.drop(desc, TensorDesc)


@acl_call("bare", ACL_DT_UNDEFINED)
def get_tensor_desc_type(desc):
    return handles.get(desc, TensorDesc).data_type


@acl_call("bare", ACL_FORMAT_UNDEFINED)
def get_tensor_desc_format(desc):
    return handles.get(desc, TensorDesc).format


@acl_call("bare", 0)
def get_tensor_desc_num_dims(desc):
    return len(handles.get(desc, TensorDesc).dims)


@acl_call("pair", -1)
def get_tensor_desc_dim_v2(desc, index):
    dims, index = handles.get(desc, TensorDesc).dims, as_int(index, "index")
    if not 0 <= index < len(dims):
        fail(ACL_ERROR_INVALID_PARAM, f"the tensor has {len(dims)} dims, no dim {index}")
    return dims[index]


def get_tensor_desc_dim(desc, index) -> int:
    dim, ret = get_tensor_desc_dim_v2(desc, index)
    return dim if ret == 0 else -1


@acl_call("bare", 0)
def get_tensor_desc_element_count(desc):
    return math.prod(handles.get(desc, TensorDesc).dims)


@acl_call("bare", 0)
def get_tensor_desc_size(desc):
    d = handles.get(desc, TensorDesc)
    return math.prod(d.dims) * d.dtype.itemsize


@acl_call("ret")
def set_dataset_tensor_desc(dataset, tensor_desc, index):
    handles.get(tensor_desc, TensorDesc)
    handles.get(dataset, Dataset).tensor_descs[as_int(index, "index")] = int(tensor_desc)


@acl_call("bare", 0)
def get_dataset_tensor_desc(dataset, index):
    return handles.get(dataset, Dataset).tensor_descs.get(as_int(index, "index"), 0)


def input_shape(dataset: Dataset, index: int, name: str) -> tuple:
    """The shape set for input `index` of a run-time-shape model, or ACL_ERROR_INVALID_PARAM."""
    handle = dataset.tensor_descs.get(index)
    if handle is None:
        fail(ACL_ERROR_INVALID_PARAM, f"input {index} ('{name}') has its shape only at run time: set it with "
                                      "acl.mdl.set_dataset_tensor_desc")
    return handles.get(handle, TensorDesc).dims


def record_output(dataset: Dataset, index: int, dtype: str, dims: tuple) -> None:
    """The shape an output came out with, on the output dataset (one desc per index, updated)."""
    d = handles.lookup(dataset.tensor_descs.get(index))
    if isinstance(d, TensorDesc):
        d.data_type, d.dims = DATA_TYPES[dtype], dims
    else:
        dataset.tensor_descs[index] = handles.new(TensorDesc(DATA_TYPES[dtype], dims, 2))
