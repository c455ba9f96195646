"""host_pages.mapped_bytes: large buffers on 2 MB boundaries, advised as huge pages, zeroed, writable; and
the packed weights (aligned_empty) and the device's large blocks taking them."""
import re
import sys
from pathlib import Path

import numpy as np

from ge.core.host_pages import HUGE, mapped_bytes
from ge.core.kernels.native.binding import aligned_empty
from ge.core.runtime.device import MAPPED_MIN, get_device

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_kb_of(array: np.ndarray) -> int:
    """AnonHugePages of the mapping that holds `array` (/proc/self/smaps)."""
    addr, lines, inside = array.ctypes.data, Path("/proc/self/smaps").read_text().splitlines(), False
    for line in lines:
        span = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
        if span:
            inside = int(span[1], 16) <= addr < int(span[2], 16)
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    raise AssertionError("no mapping holds the array")


def test_large_buffer_starts_on_a_huge_page_zeroed_and_writable():
    buf = mapped_bytes(HUGE * 2 + 4096 * 3)
    assert buf.nbytes == HUGE * 2 + 4096 * 3 and buf.ctypes.data % HUGE == 0
    assert not buf.any()
    buf[:] = 7
    assert (buf == 7).all()
    # where THP grants advised ranges, the two whole extents are huge pages (the tail stays small)
    if sys.platform == "linux" and THP.exists() and re.search(r"\[(always|madvise)\]", THP.read_text()):
        assert huge_kb_of(buf) == 2 * HUGE // 1024


def test_small_buffer_is_page_aligned():
    buf = mapped_bytes(5000)
    assert buf.nbytes == 5000 and buf.ctypes.data % 4096 == 0 and not buf.any()


def test_packed_weights_and_device_blocks_take_them():
    weights = aligned_empty(HUGE // 4 + 10)  # float32: just over 2 MB
    assert weights.dtype == np.float32 and weights.shape == (HUGE // 4 + 10,) and weights.ctypes.data % HUGE == 0
    small = aligned_empty(1000)
    assert small.ctypes.data % 64 == 0
    device = get_device("cpu")
    addr = device.malloc(HUGE + MAPPED_MIN)  # a model's feature maps
    try:
        assert addr % HUGE == 0
    finally:
        device.free(addr)
