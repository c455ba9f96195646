"""Devices: where memory lives and how copies, launches and streams are carried out and counted.

A device address is an integer. `cpu` hands out real host pointers and can bind user numpy
buffers in place (zero copy); `sim` is a simulated NPU whose memory is a pool separate from host
memory (numpy byte buffers addressed by integers from its own address space), so every transfer
is an explicit, counted H2D/D2H copy. Both run the same kernels on numpy views of their memory.
"""
from __future__ import annotations

import _thread  # (threading.Lock without threading: 1600 lines compiled at each start without bytecode; sim streams import it)
import _bisect as bisect  # (bisect.py re-exports these C functions: ~3 M instructions to compile at each start without bytecode)
import math
from collections import Counter
from functools import partial

import numpy as np

from ..host_pages import mapped_bytes
from ..model.errors import DeviceError

#: allocations from this size up are anonymous mappings (page-aligned), which go back to the system
#: the moment they are freed: glibc's malloc keeps freed blocks below its (adaptive, up to 32 MiB)
#: mmap threshold in its heap, so that a model's feature maps would stay resident after its unload
MAPPED_MIN = 1 << 20

DEVICE_NAMES = ("cpu", "sim")
#: device ids per kind, as a host with this many NPUs (ACL's aclrtGetDeviceCount)
MAX_DEVICES = 64


class Counts(Counter):
    """The runtime's counters: a Counter whose `c[k] += n` costs what a dict's does. Counter's own
    __delitem__ (a Python method) makes CPython route every item assignment of a Counter through a
    lookup of __setitem__ and a wrapper call (~800 more instructions an increment, and a small model's
    call makes a dozen); a deletion of a missing key raises KeyError here, as a dict's does."""
    __delitem__ = dict.__delitem__


#: count_copies's counter names per kind of copy
_COPY_KEYS = {kind: (f"{kind}_count", f"{kind}_bytes") for kind in ("h2d", "d2h")}


class DeviceBuffer:
    """Device memory passed by address, as ACL's aclDataBuffer: the unit of zero-copy I/O. (Not a
    tuple: an input given as one buffer must not read as a list of inputs.)"""
    __slots__ = ("device", "addr", "nbytes")

    def __init__(self, device: "Device", addr: int, nbytes: int):
        self.device, self.addr, self.nbytes = device, addr, nbytes

    def view(self, dtype, shape) -> np.ndarray:
        return self.device.view(self.addr, dtype, shape)

    def _key(self) -> tuple:
        return self.device, self.addr, self.nbytes

    def __eq__(self, other) -> bool:
        return type(other) is DeviceBuffer and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.device.name}, addr={self.addr:#x}, nbytes={self.nbytes})"


class Block:
    """One allocation of a device: `data` its bytes (uint8, exactly nbytes long)."""
    __slots__ = ("addr", "nbytes", "data", "owned", "refs")

    def __init__(self, addr: int, nbytes: int, data: np.ndarray, owned: bool = True, refs: int = 1):
        self.addr, self.nbytes, self.data = addr, nbytes, data
        self.owned = owned  # False for user buffers bound zero-copy
        self.refs = refs  # bindings of a user buffer (several contexts may bind the same array)


class Device:
    name = ""
    align = 64
    host_addresses = False  # (CpuDevice: addresses are host pointers)
    device_id = 0

    def __init__(self):
        self._starts: list[int] = []
        self._blocks: list[Block] = []
        self._lock = _thread.allocate_lock()  # (threading.Lock)
        self.counters: Counter = Counts()
        self._idle_streams: list[Stream] = []
        self.in_use = 0
        self.peak = 0

    # -- memory --------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        try:
            data = self._backing(max(int(nbytes), 1))
        except (MemoryError, OSError):  # e.g. an OM planning more memory than the host has
            raise DeviceError(f"{self.name}: out of host memory allocating {nbytes} bytes") from None
        addr = self._address_of(data)
        with self._lock:
            self._insert(Block(addr, int(nbytes), data[:nbytes]))
            self.counters["mallocs"] += 1
            self.counters["malloc_bytes"] += nbytes
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)
        return addr

    def buffer(self, nbytes: int) -> DeviceBuffer:
        """malloc, wrapped for passing as a model input or output."""
        return DeviceBuffer(self, self.malloc(nbytes), int(nbytes))

    def owns(self, buf: DeviceBuffer) -> bool:
        """Is this one of our allocations, aligned to our rule? (What zero copy needs.)"""
        if buf.device is not self or buf.addr % self.align:
            return False
        try:
            return self.block(buf.addr, buf.nbytes)[0].owned
        except DeviceError:
            return False

    def free(self, addr: int) -> None:
        with self._lock:
            i = bisect.bisect_left(self._starts, addr)
            if i == len(self._starts) or self._starts[i] != addr or not self._blocks[i].owned:
                raise DeviceError(f"{self.name}: free of {addr:#x}, which is not an allocation of this device")
            self.in_use -= self._blocks[i].nbytes
            del self._starts[i], self._blocks[i]
            self.counters["frees"] += 1

    def block(self, addr: int, nbytes: int) -> tuple[Block, int]:
        """The block holding [addr, addr + nbytes) and the offset of addr inside it."""
        with self._lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            b = self._blocks[i] if i >= 0 else None
        if b is not None and addr + nbytes <= b.addr + b.nbytes:
            return b, addr - b.addr
        raise DeviceError(f"{self.name}: address range {addr:#x}+{nbytes} is not device memory")

    def bytes_at(self, addr: int, nbytes: int) -> np.ndarray:
        b, off = self.block(addr, nbytes)
        return b.data[off:off + nbytes]

    def view(self, addr: int, dtype, shape) -> np.ndarray:
        """A numpy view of device memory: what a kernel reads and writes."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize  # (np.prod costs microseconds: this runs per tensor per run)
        return self.bytes_at(addr, nbytes).view(dtype).reshape(shape)

    def views(self, addrs: list, metas) -> list:
        """view() of each address with its Meta (a task's arguments): a block found once for the
        addresses that follow in it (a task's feature maps, its weights), not a lookup each."""
        views, b, end = [], None, 0
        for addr, m in zip(addrs, metas):
            nbytes = m.nbytes
            if b is None or not b.addr <= addr or addr + nbytes > end:
                b = self.block(addr, nbytes)[0]
                end = b.addr + b.nbytes
            views.append(b.data[addr - b.addr:addr - b.addr + nbytes].view(m.dtype).reshape(m.shape))
        return views

    # -- copies (counted) ------------------------------------------------------------------------
    def memcpy_h2d(self, dst: int, src: np.ndarray, kind: str = "h2d") -> None:
        """Copy host bytes to device memory; `kind` names the counter ("args" for args-table updates)."""
        src = np.ascontiguousarray(src)
        self.bytes_at(dst, src.nbytes)[...] = src.reshape(-1).view(np.uint8)
        self.counters[f"{kind}_count"] += 1
        self.counters[f"{kind}_bytes"] += src.nbytes

    def write_args(self, table: np.ndarray, indices: np.ndarray, values: np.ndarray) -> None:
        """A scattered update of args-table entries (GE's UpdateModelParam), counted as args bytes."""
        table[indices] = values
        self.counters["args_count"] += 1
        self.counters["args_bytes"] += values.nbytes

    def memcpy_d2h(self, dst: np.ndarray, src: int) -> None:
        np.copyto(dst, self.view(src, dst.dtype, dst.shape))
        self.counters["d2h_count"] += 1
        self.counters["d2h_bytes"] += dst.nbytes

    def copy_from_host(self, dst: np.ndarray, src: np.ndarray) -> None:
        """memcpy_h2d into a view() of device memory the caller keeps (a tensor's buffer, for as long as
        its shape holds): the same counted copy, without finding the block again on every run."""
        _copy(dst, src)
        counters = self.counters
        counters["h2d_count"] += 1
        counters["h2d_bytes"] += dst.nbytes

    def copy_to_host(self, dst: np.ndarray, src: np.ndarray) -> None:
        """memcpy_d2h from a view() of device memory the caller keeps (a context's planned output
        buffer): the same counted copy, without finding the block again on every run."""
        _copy(dst, src)
        counters = self.counters
        counters["d2h_count"] += 1
        counters["d2h_bytes"] += dst.nbytes

    def copy_out(self, src: np.ndarray) -> np.ndarray:
        """copy_to_host into a new host array: one call where an empty array and a copy are two."""
        y = src.copy()
        counters = self.counters
        counters["d2h_count"] += 1
        counters["d2h_bytes"] += y.nbytes
        return y

    def count_copies(self, kind: str, count: int, nbytes: int) -> None:
        """Copies of `kind` ("h2d", "d2h") a caller made itself on views of device memory it keeps,
        counted as copy_from_host and copy_out count theirs: a hybrid context's inputs and outputs,
        one count a run rather than a call per array (~1 us each)."""
        if count:
            counters = self.counters
            count_key, bytes_key = _COPY_KEYS[kind]  # (not two f-strings a call)
            counters[count_key] += count
            counters[bytes_key] += nbytes

    def memcpy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.bytes_at(dst, nbytes)[...] = self.bytes_at(src, nbytes)
        self.counters["d2d_count"] += 1
        self.counters["d2d_bytes"] += nbytes

    # -- zero copy -----------------------------------------------------------------------------
    def bindable(self, array: np.ndarray) -> bool:
        """Can this user buffer be used by kernels in place?"""
        return False

    def bind_host(self, array: np.ndarray) -> int:
        raise DeviceError(f"{self.name}: host buffers cannot be bound zero-copy on this device")

    def unbind(self, addr: int) -> None:
        """Drop one binding of a user buffer; it stops being device memory with the last one."""
        with self._lock:
            i = bisect.bisect_left(self._starts, addr)
            if i < len(self._starts) and self._starts[i] == addr and not self._blocks[i].owned:
                self._blocks[i].refs -= 1
                if self._blocks[i].refs == 0:
                    del self._starts[i], self._blocks[i]

    # -- streams: a reusable stream allocator (GE's ReusableStreamAllocator) -----------------------
    def acquire_stream(self) -> "Stream":
        with self._lock:
            if self._idle_streams:
                self.counters["streams_reused"] += 1
                return self._idle_streams.pop()
            self.counters["streams_created"] += 1
        return Stream(self, asynchronous=self.name == "sim")

    def release_stream(self, stream: "Stream") -> None:
        """Back to the pool once its work is done: the next load or context takes it."""
        stream.synchronize()
        with self._lock:
            self._idle_streams.append(stream)

    # -- internals -----------------------------------------------------------------------------
    def _insert(self, block: Block) -> None:
        i = bisect.bisect_left(self._starts, block.addr)
        self._starts.insert(i, block.addr)
        self._blocks.insert(i, block)

    def _backing(self, nbytes: int) -> np.ndarray:
        if nbytes >= MAPPED_MIN:  # a mapping of its own: unmapped when the block goes, never kept by malloc
            return mapped_bytes(nbytes)  # on huge pages where it spans them (host_pages.py)
        raw = np.empty(nbytes + self.align, np.uint8)
        skip = (-raw.ctypes.data) % self.align
        return raw[skip:skip + nbytes]

    def _address_of(self, data: np.ndarray) -> int:
        raise NotImplementedError


class CpuDevice(Device):
    """Host memory; addresses are real pointers, user buffers bind in place when they qualify."""
    name = "cpu"
    host_addresses = True  # an address is the memory's own: the same one is the same bytes while they live

    def _address_of(self, data):
        return data.ctypes.data

    def bindable(self, array):
        return isinstance(array, np.ndarray) and array.flags.c_contiguous and array.flags.aligned

    def bind_host(self, array):
        addr, nbytes = array.ctypes.data, array.nbytes
        block = Block(addr, nbytes, array.reshape(-1).view(np.uint8), owned=False)
        with self._lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            if i >= 0 and self._blocks[i].owned and addr + nbytes <= self._blocks[i].addr + self._blocks[i].nbytes:
                return addr  # already device memory (a view of a device allocation)
            if i >= 0 and self._starts[i] == addr and not self._blocks[i].owned:
                old = self._blocks[i]  # the same buffer bound again (another context, or a larger view)
                block.refs = old.refs + 1
                if old.nbytes > nbytes:
                    block.nbytes, block.data = old.nbytes, old.data
                self._blocks[i] = block
            else:
                self._insert(block)
        return addr


class SimDevice(Device):
    """A simulated NPU: its own address space and pool; the host never touches its memory directly."""
    name = "sim"
    align = 512  # GE aligns device allocations to 512 bytes
    BASE = 0x1_0000_0000

    def __init__(self, capacity: int = 16 << 30):
        super().__init__()
        self.capacity = capacity
        self._next = self.BASE

    def malloc(self, nbytes):
        if self.in_use + nbytes > self.capacity:
            raise DeviceError(f"sim: out of device memory allocating {nbytes} bytes "
                              f"({self.in_use} of {self.capacity} in use)")
        return super().malloc(nbytes)

    def _address_of(self, data):
        with self._lock:
            addr = self._next
            self._next += (max(data.nbytes, 1) + self.align - 1) // self.align * self.align
        return addr


class Stream:
    """An in-order queue of device work. On `sim` a worker thread drains it (launches return at
    once, synchronize waits); on `cpu` work runs when it is launched."""

    def __init__(self, device: Device, asynchronous: bool):
        self.device = device
        self.asynchronous = asynchronous
        self._error: BaseException | None = None
        if asynchronous:
            import queue  # (sim only: a load on cpu imports neither)
            import threading
            self._queue: queue.Queue = queue.Queue()
            self._worker = threading.Thread(target=self._drain, name=f"{device.name}-stream", daemon=True)
            self._worker.start()

    def launch(self, work, *args) -> None:
        """work(*args), on the stream."""
        self.device.counters["launches"] += 1
        if self.asynchronous:
            self._queue.put(partial(work, *args) if args else work)
        else:
            work(*args)

    def synchronize(self, timeout: float | None = None) -> None:
        if self.asynchronous:
            import threading
            done = threading.Event()
            self._queue.put(done)
            if not done.wait(timeout):
                raise DeviceError(f"{self.device.name}: stream synchronize timed out after {timeout} s")
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def destroy(self) -> None:
        if self.asynchronous:
            self._queue.put(None)

    def _drain(self) -> None:
        import threading
        while (work := self._queue.get()) is not None:
            if isinstance(work, threading.Event):  # a synchronize marker
                work.set()
            elif self._error is None:  # after a failure the rest of the queue is dropped
                try:
                    work()
                except BaseException as e:  # surfaced by synchronize()
                    self._error = e


class Event:
    """Recorded on a stream, it fires when the work launched before it is done."""

    def __init__(self, device: Device):
        import threading
        self._fired = threading.Event()
        device.counters["events_created"] += 1

    def record(self, stream: Stream) -> None:
        self._fired.clear()
        stream.launch(self._fired.set)

    def wait(self, stream: Stream) -> None:
        """Make `stream` wait for this event before running what is launched after."""
        stream.launch(self._fired.wait)

    def synchronize(self, timeout: float | None = None) -> None:
        if not self._fired.wait(timeout):
            raise DeviceError(f"event synchronize timed out after {timeout} s")

    @property
    def fired(self) -> bool:
        return self._fired.is_set()


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """np.copyto(dst, src): by assignment where the dtypes are the same (then no cast can happen), at
    half np.copyto's cost (its dispatch: ~0.15 us, a few times each call of a small model)."""
    if type(src) is np.ndarray and src.dtype == dst.dtype:
        dst[...] = src
    else:
        np.copyto(dst, src)


_devices: dict[tuple[str, int], Device] = {}
_devices_lock = _thread.allocate_lock()


def get_device(name: str) -> Device:
    """One device object per name for the process, like a device id: "cpu" and "sim" are device 0
    of their kind, "cpu:1", "sim:3" ... devices of their own (own memory, streams and counters),
    as ACL's device ids 0..N are."""
    kind, _, index = str(name).partition(":")
    if kind not in DEVICE_NAMES or (index and not (index.isdigit() and int(index) < MAX_DEVICES)):
        raise DeviceError(f"unknown device '{name}' (choose from {', '.join(DEVICE_NAMES)}, "
                          f"or one of them with a device id: cpu:0 .. cpu:{MAX_DEVICES - 1})")
    key = (kind, int(index or 0))
    with _devices_lock:
        if key not in _devices:
            device = CpuDevice() if kind == "cpu" else SimDevice()
            device.device_id = key[1]
            _devices[key] = device
        return _devices[key]
