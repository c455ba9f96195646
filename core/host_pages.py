"""Large host buffers on transparent huge pages.

A ResNet-50 reads its 94 MB of packed weights once per inference and its feature maps are megabytes:
on 4 KB pages every 4 KB of that stream is a TLB miss and a page walk, and where the pages fall in
the physically indexed caches changes from one process to the next (a 3x3 conv over 7x7 ran 10-12%
faster or slower by the luck of its pages). On 2 MB pages (Linux's THP, which `madvise` mode grants
to ranges that ask) its spread was 1% and its time below the 4 KB pages' best (1.31-1.37 ms against
1.44-1.59 at v4vnni, one thread, the machine's load falling between the two series).

Only whole 2 MB extents are asked for, so a buffer's tail stays on small pages and its resident size
is what it touches. Where the system has no huge pages, anonymous private mappings or madvise, the
buffer is an ordinary mapping: the same bytes, without the speed."""
from __future__ import annotations

import mmap

import numpy as np

#: the huge page of x86-64 and of arm64 with 4 KB granules (the PMD size)
HUGE = 2 << 20


def mapped_bytes(nbytes: int) -> np.ndarray:
    """nbytes of zeroed memory in an anonymous mapping of their own (unmapped when the array goes,
    never kept by malloc), page-aligned; from HUGE bytes up they start on a 2 MB boundary and the 2 MB
    extents they cover whole are advised as huge pages (private: a shared anonymous mapping is shmem,
    which THP's madvise mode leaves on small pages)."""
    private = hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS")
    pad = HUGE if private and nbytes >= HUGE else 0
    if private:
        m = mmap.mmap(-1, nbytes + pad, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    else:
        m = mmap.mmap(-1, nbytes)
    raw = np.frombuffer(m, np.uint8)
    skip = -raw.ctypes.data % HUGE if pad else 0
    whole = nbytes // HUGE * HUGE
    if pad and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE, skip, whole)
        except OSError:  # a kernel without THP: small pages
            pass
    return raw[skip:skip + nbytes]
