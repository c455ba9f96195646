"""Handles as pyACL hands them out: plain ints standing for descs, datasets, data buffers, contexts
and streams. A destroyed, foreign or wrongly typed handle is an error code, never a crash."""
from __future__ import annotations

import itertools
import threading

from .codes import ACL_ERROR_INVALID_PARAM, as_int, fail

_objects: dict[int, object] = {}
_next = itertools.count(0x5A0000010, 16)  # non-zero, pointer-like, never reused
_lock = threading.Lock()


def new(obj) -> int:
    with _lock:
        handle = next(_next)
        _objects[handle] = obj
    return handle


def get(handle, kind: type, code: int = ACL_ERROR_INVALID_PARAM):
    """The live object of `kind` behind `handle`, or the error `code`."""
    obj = _objects.get(as_int(handle, kind.__name__))
    if not isinstance(obj, kind):
        fail(code, f"{handle!r} is not a live {kind.__name__} handle")
    return obj


def drop(handle, kind: type, code: int = ACL_ERROR_INVALID_PARAM):
    """Forget a handle (destroy_*): the object it stood for, or the error `code`."""
    obj = get(handle, kind, code)
    with _lock:
        _objects.pop(int(handle), None)
    return obj


def lookup(handle):
    """The object behind a handle, or None."""
    return _objects.get(handle) if isinstance(handle, int) else None


def live(kind: type) -> list:
    with _lock:
        return [o for o in _objects.values() if isinstance(o, kind)]
