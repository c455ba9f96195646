"""acl.util: pointers to host memory, and views of memory pointers point to.

numpy_to_ptr / bytes_to_ptr / numpy_contiguous_to_ptr hand out the address of the object's own
bytes and register that range (memory.py), so that memcpy can check it and execute can bind it;
ptr_to_numpy is a writable zero-copy view of known memory, ptr_to_bytes a copy."""
from __future__ import annotations

import ctypes
import math

import numpy as np

from . import memory
from .codes import ACL_ERROR_INVALID_PARAM, NPY_TYPES, acl_call, as_int, fail


@acl_call("bare", 0)
def numpy_to_ptr(array):
    if not isinstance(array, np.ndarray):
        fail(ACL_ERROR_INVALID_PARAM, f"numpy_to_ptr takes a numpy array, not {type(array).__name__}")
    if array.flags.c_contiguous:  # a strided array's bytes are not one range: it stays unknown memory
        memory.register_user(array, array.ctypes.data, array.nbytes)
    return array.ctypes.data


@acl_call("bare", (0, None))
def numpy_contiguous_to_ptr(array):
    """(pointer, the contiguous array it points into): the caller keeps the array alive."""
    if not isinstance(array, np.ndarray):
        fail(ACL_ERROR_INVALID_PARAM, f"numpy_contiguous_to_ptr takes a numpy array, not {type(array).__name__}")
    array = np.ascontiguousarray(array)
    return memory.register_user(array, array.ctypes.data, array.nbytes), array


@acl_call("bare", 0)
def bytes_to_ptr(data):
    if isinstance(data, bytes):
        addr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    elif isinstance(data, bytearray):
        addr = ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data)) if data else 0
    else:
        fail(ACL_ERROR_INVALID_PARAM, f"bytes_to_ptr takes bytes or a bytearray, not {type(data).__name__}")
    return memory.register_user(data, addr, len(data))


@acl_call("bare", b"")
def ptr_to_bytes(ptr, size):
    return memory.view(ptr, size).tobytes()


@acl_call("bare", None)
def ptr_to_numpy(ptr, shape, npy_type):
    dtype = NPY_TYPES.get(as_int(npy_type, "npy_type"))
    if dtype is None:
        fail(ACL_ERROR_INVALID_PARAM, f"npy_type {npy_type} is not a NumPy type number ge knows")
    shape = tuple(as_int(d, "dim") for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if any(d < 0 for d in shape):
        fail(ACL_ERROR_INVALID_PARAM, f"shape {shape} has a negative dim")
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    return memory.view(ptr, nbytes).view(dtype).reshape(shape)
