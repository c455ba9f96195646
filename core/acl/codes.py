"""pyACL's numbers: error codes (acl_base.h, rt_error_codes.h, ge_error_codes.h), enums, and the
return convention. A pyACL call never raises: it returns `ret`, `(value, ret)` or a bare value,
and the reason of the last failure is kept for `acl.get_recent_err_msg()`."""
from __future__ import annotations

import functools
import logging
import threading

import numpy as np

from ..model.errors import DeviceError, GeError, ShapeError

log = logging.getLogger("ge.acl")

ACL_SUCCESS = 0
# acl_base.h
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_REPEAT_SUBSCRIBE = 100033
ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034
ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_INVALID_DEVICE = 200002
ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_FAILURE = 500001
# rt_error_codes.h
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_STREAM_CONTEXT = 107003
ACL_ERROR_RT_STREAM_NO_CB_REG = 107015
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_MEMORY_FREE = 207002
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
ACL_ERROR_RT_MODEL_EXECUTE = 507011
# ge_error_codes.h
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID = 145011
ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID = 145012
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013
ACL_ERROR_GE_AIPP_NOT_EXIST = 145015
ACL_ERROR_GE_AIPP_MODE_INVALID = 145016
ACL_ERROR_GE_SHAPE_INVALID = 145021
ACL_ERROR_GE_LOAD_MODEL = 545001

# aclrtMemcpyKind, aclrtRunMode, aclrtCallbackBlockType
ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE, \
    ACL_MEMCPY_DEFAULT = range(5)
ACL_DEVICE, ACL_HOST = 0, 1
ACL_CALLBACK_NO_BLOCK, ACL_CALLBACK_BLOCK = 0, 1

#: aclDataType by numpy dtype name
DATA_TYPES = {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7,
              "uint32": 8, "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "object": 13, "complex64": 16,
              "complex128": 17, "bfloat16": 27}
ACL_DT_UNDEFINED = -1
#: aclFormat by name
FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "NDHWC": 27, "NCDHW": 30}
ACL_FORMAT_UNDEFINED = -1
#: NumPy type numbers that ptr_to_numpy takes (NPY_BOOL 0 ... NPY_HALF 23)
NPY_TYPES = {0: np.bool_, 1: np.int8, 2: np.uint8, 3: np.int16, 4: np.uint16, 5: np.int32, 6: np.uint32,
             7: np.int64, 8: np.uint64, 9: np.longlong, 10: np.ulonglong, 11: np.float32, 12: np.float64,
             23: np.float16}


class AclError(Exception):
    """A failed pyACL call: its code and why (turned into a return value by `acl_call`)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class NotSupportedByGe(GeError, AttributeError):
    """A part of pyACL that ge does not provide (acl.media, acl.op, acl.prof)."""


_recent = threading.local()


def recent_error() -> str:
    """aclGetRecentErrMsg: why the last failed call of this thread failed ("" if none)."""
    return getattr(_recent, "message", "")


def _code_of(e: BaseException) -> int:
    if isinstance(e, AclError):
        return e.code
    if isinstance(e, MemoryError):
        return ACL_ERROR_BAD_ALLOC
    if isinstance(e, ShapeError):
        return ACL_ERROR_GE_PARAM_INVALID
    if isinstance(e, DeviceError):
        return ACL_ERROR_RT_PARAM_INVALID
    if isinstance(e, GeError):
        return ACL_ERROR_GE_LOAD_MODEL
    if isinstance(e, (TypeError, ValueError, OverflowError, KeyError, IndexError)):  # arguments of the wrong kind
        return ACL_ERROR_INVALID_PARAM
    return ACL_ERROR_INTERNAL_ERROR


def acl_call(shape: str = "ret", default=None):
    """Give a function pyACL's return convention: `shape` "ret" returns the code, "pair" returns
    `(value, code)` (`default` as the value on failure), "bare" returns the value (`default` on
    failure). The function itself returns its value (None for "ret") or raises."""
    def wrap(fn):
        name = fn.__name__

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                value = fn(*args, **kwargs)
            except Exception as e:  # every failure is a code, never an exception in the caller
                code = _code_of(e)
                _recent.message = f"{name}: {e}" if str(e) else f"{name}: {type(e).__name__}"
                log.info("acl %s failed (%d): %s", name, code, e)
                return code if shape == "ret" else (default, code) if shape == "pair" else default
            return ACL_SUCCESS if shape == "ret" else (value, ACL_SUCCESS) if shape == "pair" else value
        return call
    return wrap


def fail(code: int, message: str):
    raise AclError(code, message)


def as_int(value, what: str) -> int:
    """An int argument (a pointer, handle, size or index), or ACL_ERROR_INVALID_PARAM."""
    if isinstance(value, (bool, float)) or not isinstance(value, (int, np.integer)):
        fail(ACL_ERROR_INVALID_PARAM, f"{what} must be an int, got {type(value).__name__}")
    return int(value)
