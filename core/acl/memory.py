"""Memory as pyACL sees it: plain int pointers, every one checked against memory ge knows before a
byte moves. Known memory is device allocations made by `acl.rt.malloc` (ge Device blocks: real
host addresses on `cpu`, the simulated NPU's pool on `sim`), `acl.rt.malloc_host` blocks, and the
host ranges handed out by `acl.util.numpy_to_ptr` / `bytes_to_ptr` / `numpy_contiguous_to_ptr`
(the registry keeps their object alive; it forgets one once nothing but the registry holds it and
newer ranges have been handed out, so it stays small). A freed, foreign or out-of-range pointer
is ACL_ERROR_RT_PARAM_INVALID, a size beyond `dest_max` ACL_ERROR_INVALID_PARAM: never a crash."""
from __future__ import annotations

import bisect
import ctypes
import os
import sys
import threading

import numpy as np

from ..runtime.device import Device, SimDevice
from .codes import (ACL_ERROR_BAD_ALLOC, ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_MEMORY_FREE, ACL_ERROR_RT_PARAM_INVALID,
                    acl_call, as_int, fail)
from .runtime import current_context, launch

#: how many of the newest user ranges are kept even when only the registry holds their object
#: (`bytes_to_ptr(x.tobytes())` then a memcpy: the bytes live on in the registry until used)
KEEP_RECENT = 16
DEVICE, HOST, USER = "device", "host", "user"


class Range:
    __slots__ = ("addr", "nbytes", "kind", "owner", "device", "serial")

    def __init__(self, addr: int, nbytes: int, kind: str, owner: object = None, device: Device | None = None,
                 serial: int = 0):
        self.addr, self.nbytes = addr, nbytes
        #: DEVICE (acl.rt.malloc), HOST (acl.rt.malloc_host), USER (a numpy array or bytes of the caller's)
        self.kind = kind
        self.owner = owner  # HOST: its numpy array; USER: the caller's object
        self.device, self.serial = device, serial

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        """uint8 view of [addr + offset, + nbytes) that keeps the memory alive."""
        if self.kind == DEVICE:
            return self.device.bytes_at(self.addr + offset, nbytes)
        if isinstance(self.owner, np.ndarray):
            return self.owner.reshape(-1).view(np.uint8)[offset:offset + nbytes]
        raw = (ctypes.c_ubyte * nbytes).from_address(self.addr + offset)  # bytes: immutable to Python, not to ACL
        raw.owner = self.owner
        return np.frombuffer(raw, np.uint8)


class Registry:
    def __init__(self):
        self._starts: list[int] = []
        self._ranges: list[Range] = []
        self._lock = threading.Lock()
        self._serial = 0

    def find(self, addr: int, nbytes: int) -> Range:
        """The range holding [addr, addr + nbytes), or ACL_ERROR_RT_PARAM_INVALID."""
        with self._lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            r = self._ranges[i] if i >= 0 else None
        if r is None or addr + nbytes > r.addr + r.nbytes or nbytes < 0:
            fail(ACL_ERROR_RT_PARAM_INVALID, f"address {addr:#x} + {nbytes} bytes is not memory allocated through "
                                             "acl (acl.rt.malloc, malloc_host) or handed out by acl.util")
        return r

    def add(self, r: Range) -> None:
        with self._lock:
            self._serial += 1
            r.serial = self._serial
            i = bisect.bisect_right(self._starts, r.addr) - 1
            if i >= 0 and r.addr + r.nbytes <= self._ranges[i].addr + self._ranges[i].nbytes:
                if r.kind == USER:  # inside a range already known (a view of it): nothing new to keep
                    return
            end = r.addr + r.nbytes
            j = bisect.bisect_left(self._starts, r.addr)
            while j < len(self._starts) and self._starts[j] < end and self._ranges[j].kind == USER:
                del self._starts[j], self._ranges[j]  # user ranges inside the new one (or overlapping it)
            self._starts.insert(j, r.addr)
            self._ranges.insert(j, r)
            if r.kind == USER:
                self._forget_orphans()

    def remove(self, addr: int, kind: str) -> Range:
        with self._lock:
            i = bisect.bisect_left(self._starts, addr)
            if i == len(self._starts) or self._starts[i] != addr or self._ranges[i].kind != kind:
                what = "acl.rt.malloc" if kind == DEVICE else "acl.rt.malloc_host"
                fail(ACL_ERROR_RT_MEMORY_FREE if kind == DEVICE else ACL_ERROR_INVALID_PARAM,
                     f"{addr:#x} is not a live allocation of {what} (freed already, or never allocated)")
            r = self._ranges[i]
            del self._starts[i], self._ranges[i]
        return r

    def device_ranges(self, device: Device) -> list[Range]:
        with self._lock:
            return [r for r in self._ranges if r.device is device]

    def _forget_orphans(self) -> None:
        oldest_kept = self._serial - KEEP_RECENT
        keep = [k for k, r in enumerate(self._ranges)
                if r.kind != USER or r.serial > oldest_kept or sys.getrefcount(r.owner) > 2]
        if len(keep) < len(self._ranges):
            self._starts = [self._starts[k] for k in keep]
            self._ranges = [self._ranges[k] for k in keep]


registry = Registry()


def view(addr, nbytes) -> np.ndarray:
    """A writable-where-allowed uint8 view of known memory, bounds-checked."""
    addr, nbytes = as_int(addr, "pointer"), as_int(nbytes, "size")
    r = registry.find(addr, nbytes)
    return r.view(addr - r.addr, nbytes)


def device_range(addr: int, nbytes: int) -> Range | None:
    r = registry.find(addr, nbytes)
    return r if r.kind == DEVICE else None


def register_user(obj, addr: int, nbytes: int) -> int:
    registry.add(Range(addr, nbytes, USER, owner=obj))
    return addr


# -- acl.rt: allocation --------------------------------------------------------------------------
@acl_call("pair", 0)
def malloc(size, policy=0):
    size = as_int(size, "size")
    as_int(policy, "policy")
    if size <= 0:
        fail(ACL_ERROR_INVALID_PARAM, f"size {size}: must be positive")
    device = current_context().device
    try:
        addr = device.malloc(size)
    except Exception as e:
        fail(ACL_ERROR_BAD_ALLOC, f"{device.name}:{device.device_id}: {e}")
    registry.add(Range(addr, size, DEVICE, device=device))
    return addr


@acl_call("ret")
def free(dev_ptr):
    r = registry.remove(as_int(dev_ptr, "dev_ptr"), DEVICE)
    r.device.free(r.addr)


@acl_call("pair", 0)
def malloc_host(size):
    size = as_int(size, "size")
    if size <= 0:
        fail(ACL_ERROR_INVALID_PARAM, f"size {size}: must be positive")
    raw = np.empty(size + 64, np.uint8)
    skip = (-raw.ctypes.data) % 64
    block = raw[skip:skip + size]
    registry.add(Range(block.ctypes.data, size, HOST, owner=block))
    return block.ctypes.data


@acl_call("ret")
def free_host(host_ptr):
    registry.remove(as_int(host_ptr, "host_ptr"), HOST)


@acl_call("pair", 0)
def _mem_info(attr):
    as_int(attr, "attr")
    device = current_context().device
    if isinstance(device, SimDevice):
        total = device.capacity
    else:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(total - device.in_use, 0), total


def get_mem_info(attr):
    """acl.rt.get_mem_info(attr) -> (free, total, ret)."""
    value, ret = _mem_info(attr)
    return (*value, ret) if ret == 0 else (0, 0, ret)


# -- acl.rt: copies ------------------------------------------------------------------------------
def _copy_plan(dst, dest_max, src, count, kind):
    """Check every argument now (the copy may run later on a stream) and return the copy."""
    dst, dest_max, src, count, kind = (as_int(v, n) for v, n in ((dst, "dst"), (dest_max, "dest_max"), (src, "src"),
                                                                    (count, "count"), (kind, "kind")))
    if not 0 <= kind <= 4:
        fail(ACL_ERROR_INVALID_PARAM, f"kind {kind} is not an aclrtMemcpyKind (0..4)")
    if count < 0 or count > dest_max:
        fail(ACL_ERROR_INVALID_PARAM, f"count {count} is larger than dest_max {dest_max}")
    d, s = registry.find(dst, count), registry.find(src, count)  # what is written and read; dest_max may overstate

    def copy():
        target = d.view(dst - d.addr, count)
        if not target.flags.writeable:
            fail(ACL_ERROR_RT_PARAM_INVALID, f"dst {dst:#x} is read-only memory")
        target[...] = s.view(src - s.addr, count)
        device = d.device or s.device
        if device is not None:
            way = ("d2d" if d.device and s.device else "h2d" if d.device else "d2h")
            device.counters[f"{way}_count"] += 1
            device.counters[f"{way}_bytes"] += count
    return copy


@acl_call("ret")
def memcpy(dst, dest_max, src, count, kind):
    _copy_plan(dst, dest_max, src, count, kind)()


@acl_call("ret")
def memcpy_async(dst, dest_max, src, count, kind, stream):
    launch(stream, _copy_plan(dst, dest_max, src, count, kind))


def _set_plan(dev_ptr, max_count, value, count):
    dev_ptr, max_count, value, count = (as_int(v, n) for v, n in ((dev_ptr, "dev_ptr"), (max_count, "max_count"),
                                                                  (value, "value"), (count, "count")))
    if count < 0 or count > max_count:
        fail(ACL_ERROR_INVALID_PARAM, f"count {count} is larger than max_count {max_count}")
    r = registry.find(dev_ptr, count)

    def fill():
        target = r.view(dev_ptr - r.addr, count)
        if not target.flags.writeable:
            fail(ACL_ERROR_RT_PARAM_INVALID, f"{dev_ptr:#x} is read-only memory")
        target[...] = value & 0xFF
    return fill


@acl_call("ret")
def memset(dev_ptr, max_count, value, count):
    _set_plan(dev_ptr, max_count, value, count)()


@acl_call("ret")
def memset_async(dev_ptr, max_count, value, count, stream):
    launch(stream, _set_plan(dev_ptr, max_count, value, count))
