"""Prepared native calls: a kernel's arguments in one struct, bound once and run as often as its buffers
stay put, and the per-thread thread count every call is built with (blas.set_local_threads sets it
with OpenBLAS's; concurrent contexts use one each)."""
from __future__ import annotations

import ctypes
import operator
import os
import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)
from typing import Callable


class _ThreadCount(_thread._local):
    threads = 0  # this thread's count, 0 (every CPU) until set_threads: a class default, so that reading
    # it where it was never set finds it, without getattr's default (the AttributeError made and dropped
    # behind it cost ~0.3 us, and every native task's call asks)


_local = _ThreadCount()
_CPUS = min(os.cpu_count() or 1, 64)  # read once: os.cpu_count() reads sysfs, and every kernel call asks


def set_threads(n: int) -> None:
    """Threads the native kernels may use for calls made from this thread (at most the CPU count)."""
    _local.threads = max(1, min(int(n), default_threads()))


def default_threads() -> int:
    return _CPUS


def threads() -> int:
    return _local.threads or _CPUS


class PreparedCall:
    """A native call with its arguments in a struct (one pointer for ctypes to convert, instead of
    twenty); holds the arrays the struct's addresses point into."""
    __slots__ = ("fn", "ref", "keep")

    def __init__(self, fn, args: ctypes.Structure, keep: tuple):
        self.fn, self.ref, self.keep = fn, ctypes.byref(args), (args, keep)

    def run(self) -> None:
        self.fn(self.ref)

    def run_checked(self) -> int:
        """run(), returning the native function's int result (a status: 0 is success)."""
        return self.fn(self.ref)


class CallSequence:
    """Prepared calls run in order as one (a convolution's phase fill, then its product per item)."""
    __slots__ = ("calls",)

    def __init__(self, calls):
        self.calls = tuple(calls)

    def run(self) -> None:
        for call in self.calls:
            call.run()


def run_for_threads(build: Callable[[], PreparedCall | CallSequence]) -> Callable[[], None]:
    """A task's bound call for a prepared native call that holds a thread count: build()'s call,
    rebuilt when the calling thread's count (set_threads) is no longer the one it was built for.
    What a kernel's bound() returns in place of run()'s per-call checks and CallCache lookup: in a
    model whose big layers stream megabytes between two small tasks, each Python step of those
    checks is a cache miss (a squeeze-excite block's GlobalAveragePool and 1x1 convs: ~4 us each)."""
    built = [threads(), build()]

    def run() -> None:
        n = threads()
        if n != built[0]:
            built[:] = [n, build()]
        built[1].run()

    def current() -> PreparedCall | CallSequence:
        """The call run() makes now (prepared_calls: a loop that makes it many times natively)."""
        n = threads()
        if n != built[0]:
            built[:] = [n, build()]
        return built[1]
    run.current = current
    return run


def prepared_calls(call: Callable[[], None]) -> list[PreparedCall] | None:
    """The prepared native calls a task's bound call makes, in order (their results unread, as run()
    leaves them); None when it makes any other (numpy's, an epilogue's)."""
    owner, func = getattr(call, "__self__", None), getattr(call, "__func__", None)
    if type(owner) is PreparedCall and func is PreparedCall.run:
        return [owner]
    if type(owner) is CallSequence and func is CallSequence.run:
        calls = []
        for c in owner.calls:
            inner = prepared_calls(c.run)
            if inner is None:
                return None
            calls += inner
        return calls
    current = getattr(call, "current", None)  # run_for_threads's
    return None if current is None else prepared_calls(current().run)


class CallCache:
    """A kernel's prepared calls, kept while it runs on the same buffers: the key holds the arrays
    themselves (compared by identity; holding them, no address can be recycled under it) and the
    thread count. Kernels are shared by contexts running in several threads: each thread keeps
    its own entry (its context's buffers), and an entry is replaced whole, never edited."""
    __slots__ = ("local",)

    def __init__(self):
        self.local = _thread._local()

    def get(self, arrays: tuple, build):
        entry, n = getattr(self.local, "entry", None), threads()
        if entry is not None and _same(entry[0], arrays, n):
            return entry[1]
        calls = build()
        self.local.entry = ((arrays, n), calls)
        return calls

    def get_repeated(self, arrays: tuple, build):
        """get(), but None (the kernel runs its numpy form) unless these arrays are the last call's:
        a call is built when the same buffers come twice in a row, not for buffers that move every
        run (a tensor growing each Loop iteration), where building a Concat's call costs ~30 us and
        numpy's concatenate ~3."""
        local, n = self.local, threads()
        entry = getattr(local, "entry", None)
        if entry is not None and _same(entry[0], arrays, n):
            return entry[1]
        pending = getattr(local, "pending", None)
        local.pending = (arrays, n)  # (held: no address of these is recycled while they are the key)
        if pending is None or not _same(pending, arrays, n):
            return None
        return self.get(arrays, build)


def _same(key: tuple, arrays: tuple, n: int) -> bool:
    """Whether a CallCache key (arrays, thread count) is these very arrays at this thread count."""
    key_arrays, key_threads = key
    return key_threads == n and len(key_arrays) == len(arrays) and all(map(operator.is_, key_arrays, arrays))
