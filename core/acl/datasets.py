"""Data buffers (acl.create_data_buffer ...) and datasets (acl.mdl.create_dataset ...): handles
wrapping (address, size) pairs, as aclDataBuffer and aclmdlDataset. Nothing is checked against
memory here; execute checks every buffer it is given."""
from __future__ import annotations

from . import handles
from .codes import ACL_ERROR_INVALID_PARAM, acl_call, as_int, fail


class DataBuffer:
    def __init__(self, addr: int, size: int):
        self.addr, self.size = addr, size


class Dataset:
    def __init__(self):
        self.buffers: list[int] = []  # data buffer handles, in order
        self.tensor_descs: dict[int, int] = {}  # index -> tensor desc handle (shapes known only at run time)


@acl_call("bare", 0)
def create_data_buffer(data, size):
    addr, size = as_int(data, "data"), as_int(size, "size")
    if addr < 0 or size < 0:
        fail(ACL_ERROR_INVALID_PARAM, f"data {addr:#x}, size {size}: must not be negative")
    return handles.new(DataBuffer(addr, size))


@acl_call("ret")
def destroy_data_buffer(data_buffer):
    handles.drop(data_buffer, DataBuffer)


@acl_call("ret")
def update_data_buffer(data_buffer, data, size):
    buf = handles.get(data_buffer, DataBuffer)
    buf.addr, buf.size = as_int(data, "data"), as_int(size, "size")


@acl_call("bare", 0)
def get_data_buffer_addr(data_buffer):
    return handles.get(data_buffer, DataBuffer).addr


@acl_call("bare", 0)
def get_data_buffer_size(data_buffer):
    return handles.get(data_buffer, DataBuffer).size


@acl_call("bare", 0)
def create_dataset():
    return handles.new(Dataset())


@acl_call("ret")
def destroy_dataset(dataset):
    handles.drop(dataset, Dataset)


@acl_call("pair", 0)
def add_dataset_buffer(dataset, data_buffer):
    ds = handles.get(dataset, Dataset)
    handles.get(data_buffer, DataBuffer)
    ds.buffers.append(int(data_buffer))
    return int(dataset)


@acl_call("bare", 0)
def get_dataset_num_buffers(dataset):
    return len(handles.get(dataset, Dataset).buffers)


@acl_call("bare", 0)
def get_dataset_buffer(dataset, index):
    ds, index = handles.get(dataset, Dataset), as_int(index, "index")
    if not 0 <= index < len(ds.buffers):
        fail(ACL_ERROR_INVALID_PARAM, f"dataset has {len(ds.buffers)} buffers, no index {index}")
    return ds.buffers[index]


def buffer_of(dataset: Dataset, index: int, role: str) -> DataBuffer:
    """The live data buffer at `index` of a dataset execute was given, or ACL_ERROR_INVALID_PARAM."""
    if index >= len(dataset.buffers):
        fail(ACL_ERROR_INVALID_PARAM, f"the {role} dataset has {len(dataset.buffers)} buffers, the model needs "
                                      f"one for {role} {index}")
    return handles.get(dataset.buffers[index], DataBuffer)
