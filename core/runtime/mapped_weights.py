"""An OM's inline weights used in place: the weight partition, memory-mapped by the reader, is the
WEIGHT allocation itself on a device that can bind host memory (cpu), with no copy.

A mapped page costs resident memory only while it is in the process's page tables, and a page of a
read-only file mapping can be dropped at any time (MADV_DONTNEED): the next read faults it back in
from the page cache, unchanged. So the loader drops the pages the reader's checksum touched, and
those of each weight a kernel has packed into its own layout: the packed copy replaces the
original in the resident set instead of doubling it (`release`). Nothing can be lost: nothing
writes the mapping (it is read-only), and an OM is replaced on disk by a rename (formats/atomic.py),
which leaves the mapped file as it was.
"""
from __future__ import annotations

import mmap

import numpy as np

PAGE = mmap.PAGESIZE


class MappedWeights:
    """The weight bytes bound as device memory at `addr`; `release` only for a file mapping."""

    def __init__(self, device, data):
        self.device = device
        self.host = np.frombuffer(data, np.uint8)
        self.addr = device.bind_host(self.host)
        self._map = data.obj if isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap) else None
        # the mapping's own start: madvise takes offsets into the map, page-aligned
        self._start = np.frombuffer(self._map, np.uint8).ctypes.data if self._map is not None else 0

    @staticmethod
    def usable(device, data) -> bool:
        """Can `data` (the OM's weight bytes) be device memory in place: host memory the device can
        bind, aligned as the device aligns its own allocations?"""
        if data is None or not len(data) or not isinstance(data, memoryview) or not data.readonly:
            return False  # a writeable buffer is the caller's, who may change it: copy
        host = np.frombuffer(data, np.uint8)
        return device.bindable(host) and host.ctypes.data % device.align == 0

    def release(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Drop the whole pages of weight bytes [offset, offset + nbytes) from the resident set
        (a file mapping only; the next read brings them back)."""
        if self._map is None:
            return
        nbytes = self.host.nbytes - offset if nbytes is None else nbytes
        lo = self.addr + offset - self._start
        hi = (lo + nbytes) // PAGE * PAGE
        lo = -(-lo // PAGE) * PAGE
        if hi > lo:
            try:
                self._map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (AttributeError, OSError, ValueError):  # no madvise here: the pages just stay
                pass

    def unbind(self) -> None:
        self.device.unbind(self.addr)
