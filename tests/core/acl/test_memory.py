"""pyACL's pointers: zero-copy views, the registry of host ranges (bounded), copies on a stream,
and device memory info on the simulated NPU."""
import numpy as np

from ge.core.acl import memory, pyacl as acl

H2D, D2H, D2D = 1, 2, 3


def test_ptr_to_numpy_is_a_writable_view(device):
    ptr, ret = acl.rt.malloc(4 * 6, 0)
    view = acl.util.ptr_to_numpy(ptr, (2, 3), 5)  # int32
    view[...] = np.arange(6).reshape(2, 3)
    host = bytes(24)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(host), 24, ptr, 24, D2H) == 0
    assert np.frombuffer(host, np.int32).tolist() == list(range(6))  # the copy went into the bytes object
    again = acl.util.ptr_to_numpy(acl.util.bytes_to_ptr(host), (6,), 5)
    again[0] = 99
    assert np.frombuffer(host, np.int32)[0] == 99  # a view of the bytes, not a copy
    assert acl.util.ptr_to_bytes(ptr, 8) == np.arange(2, dtype=np.int32).tobytes()
    assert acl.rt.free(ptr) == 0


def test_numpy_contiguous_to_ptr_and_strided_arrays(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # strided
    ptr, contiguous = acl.util.numpy_contiguous_to_ptr(a)
    assert contiguous.flags.c_contiguous and np.array_equal(contiguous, a)
    dev, _ = acl.rt.malloc(contiguous.nbytes, 0)
    assert acl.rt.memcpy(dev, contiguous.nbytes, ptr, contiguous.nbytes, H2D) == 0
    assert acl.util.ptr_to_numpy(dev, (3, 2), 11).tolist() == a.tolist()
    strided = acl.util.numpy_to_ptr(a)  # the array's own address; its bytes are not one range
    assert acl.rt.memcpy(dev, 24, strided, 24, H2D) == 107000
    acl.rt.free(dev)


def test_the_registry_stays_small():
    before = len(memory.registry._ranges)
    for i in range(1000):  # each bytes object lives only in the registry once handed out
        acl.util.bytes_to_ptr(np.full(100, i % 256, np.uint8).tobytes())
    assert len(memory.registry._ranges) <= before + memory.KEEP_RECENT
    kept = [np.full(10, i, np.uint8) for i in range(40)]  # the caller keeps these: so does the registry
    ptrs = [acl.util.numpy_to_ptr(k) for k in kept]
    for _ in range(100):
        acl.util.bytes_to_ptr(bytes(8))
    assert all(acl.util.ptr_to_bytes(p, 10) == bytes([i] * 10) for i, p in enumerate(ptrs))


def test_copies_queue_on_a_stream_in_order(device):
    stream, ret = acl.rt.create_stream()
    a, _ = acl.rt.malloc(1 << 16, 0)
    b, _ = acl.rt.malloc(1 << 16, 0)
    src = np.arange(1 << 14, dtype=np.float32)
    out = np.zeros_like(src)
    for k in range(3):  # fill, copy device to device, read back: each waits for the one before
        assert acl.rt.memcpy_async(a, src.nbytes, acl.util.numpy_to_ptr(src + k), src.nbytes, H2D, stream) == 0
        assert acl.rt.memcpy_async(b, src.nbytes, a, src.nbytes, D2D, stream) == 0
        assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(out), out.nbytes, b, src.nbytes, D2H, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        assert np.array_equal(out, src + k)
    assert acl.rt.memcpy_async(a, 4, b, 8, H2D, stream) == 100000  # checked when queued
    assert acl.rt.memset_async(a, 1 << 16, 1, 1 << 16, stream) == 0 and acl.rt.synchronize_stream(stream) == 0
    assert set(acl.util.ptr_to_bytes(a, 1 << 16)) == {1}
    for p in (a, b):
        acl.rt.free(p)
    assert acl.rt.destroy_stream(stream) == 0


def test_sim_device_memory_is_counted(monkeypatch):
    monkeypatch.setenv("GE_ACL_DEVICE", "sim")
    acl.init()
    assert acl.rt.set_device(3) == 0
    free0, total, ret = acl.rt.get_mem_info(0)
    ptr, ret = acl.rt.malloc(1 << 20, 0)
    free1, total1, ret1 = acl.rt.get_mem_info(0)
    assert ret == ret1 == 0 and total1 == total and free0 - free1 == 1 << 20
    x = np.ones(1 << 18, np.float32)
    assert acl.rt.memcpy(ptr, 1 << 20, acl.util.numpy_to_ptr(x), x.nbytes, H2D) == 0
    assert ptr >= 1 << 32  # the simulated NPU's own address space
    assert acl.rt.free(ptr) == 0
    acl.rt.reset_device(3)
    acl.finalize()
