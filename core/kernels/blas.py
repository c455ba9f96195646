"""The BLAS numpy itself uses, reached through ctypes: cblas_sgemm with beta (numpy's matmul has
none) and OpenBLAS's per-thread thread count.

The library is reached through numpy's extension module (dlsym searches its dependencies), so it
is exactly the BLAS np.matmul calls. Everything here is optional: when a symbol is missing or a
self-test fails, callers fall back to plain numpy.
"""
from __future__ import annotations

import ctypes
import os
import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)

import numpy as np

from . import native


def _numpy_blas():
    try:
        try:
            from numpy._core import _multiarray_umath as mu
        except ImportError:  # numpy 1.x
            from numpy.core import _multiarray_umath as mu
        return ctypes.CDLL(mu.__file__)
    except (ImportError, OSError):
        return None


class Cblas:
    """cblas_sgemm of the BLAS numpy itself uses, called through ctypes.

    numpy's matmul has no beta (C += A @ B) and wants whole arrays; the "taps" conv plan needs both: one
    accumulating GEMM per kernel tap, whose B operand is a run of rows inside the padded input. The
    library is reached through numpy's extension module (dlsym searches its dependencies), so it is
    exactly the BLAS np.matmul calls. A self-test at load guards the integer width; on any problem
    `sgemm` stays None and the kernels use np.matmul plans instead. GE_NO_CBLAS=1 disables it.
    """

    ROW_MAJOR, NO_TRANS = 101, 111
    sgemm = None

    def __init__(self):
        if os.environ.get("GE_NO_CBLAS"):
            return
        lib = _numpy_blas()
        if lib is None:
            return
        for name, int_t in (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
                            ("scipy_cblas_sgemm", ctypes.c_int), ("cblas_sgemm", ctypes.c_int)):
            try:
                fn = getattr(lib, name)
            except AttributeError:
                continue
            i, f, p = int_t, ctypes.c_float, ctypes.c_void_p
            fn.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
            fn.restype = None
            if self._works(fn):
                self.sgemm = fn
            return

    def _works(self, fn) -> bool:
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        b = np.arange(20, dtype=np.float32).reshape(4, 5) - 7
        c = np.ones((3, 5), np.float32)
        fn(self.ROW_MAJOR, self.NO_TRANS, self.NO_TRANS, 3, 5, 4, 1.0, a.ctypes.data, 4, b.ctypes.data, 5,
           1.0, c.ctypes.data, 5)
        return bool(np.array_equal(c, a @ b + 1))


_CBLAS: Cblas | None = None


def cblas() -> Cblas:
    global _CBLAS
    if _CBLAS is None:
        _CBLAS = Cblas()
    return _CBLAS


def set_local_threads(n: int) -> int | None:
    """Threads OpenBLAS may use for calls made from THIS thread (openblas_set_num_threads_local);
    returns the previous count, or None where the BLAS has no such call. Concurrent contexts set 1
    each: two 2-thread GEMMs at once on 2 cores oversubscribe and spin. ge's native GEMM follows
    the same per-thread count."""
    native.set_threads(n)  # one knob per thread for both
    return openblas_threads_local(n)


def openblas_threads_local(n: int) -> int | None:
    """OpenBLAS's own per-thread count alone (see set_local_threads); returns the previous one."""
    global _SET_LOCAL
    if _SET_LOCAL is None:
        lib = _numpy_blas()
        fn = getattr(lib, "openblas_set_num_threads_local", None) if lib is not None else None
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        _SET_LOCAL = fn or False
    return _SET_LOCAL(int(n)) if _SET_LOCAL else None


_SET_LOCAL = None


class kernel_state:
    """Around the kernels of one execution, in the thread that runs them: numpy's floating-point
    errors ignored, and when the kernels include native ones (and those are built) that may use more
    than one thread, numpy's OpenBLAS single-threaded. Its workers spin for a long while after each
    call, as the native pool's do; the two pools on the same cores starve each other (measured on
    BERT: the native products 1.6x slower, numpy's own 1.2x). The heavy products are native; what is
    left for OpenBLAS (attention's small batched products) does not need a second thread. Native
    kernels held to one thread in this thread (blas.set_local_threads(1)) start no pool: OpenBLAS's
    count is left as it is, and the two thread calls (~3 us of a small model's call) are not made.

    Setting both costs about 8 us (OpenBLAS's thread call most of it), so a use nested in one that
    already holds as much in this thread (a control-flow body, launched once per iteration inside
    its caller's run) sets nothing."""
    __slots__ = ("level", "outer", "token", "threads")

    def __init__(self, native_kernels: bool = True):
        self.level = 2 if native_kernels and native.native() is not None else 1  # 1: errstate only

    # (entered once per execution: both halves are kept to the few calls they need)
    def __enter__(self) -> "kernel_state":
        outer = self.outer = _held.level
        level = self.level
        if outer >= level:
            return self
        self.token = _ignore_errors()
        self.threads = openblas_threads_local(1) if level == 2 and native.threads() > 1 else None
        _held.level = level
        return self

    def __exit__(self, kind, value, traceback) -> None:
        outer = self.outer
        if outer >= self.level:
            return
        _held.level = outer
        if self.threads is not None:
            openblas_threads_local(self.threads)
        _restore_errors(self.token)


class _Held(_thread._local):
    level = 0  # the kernel_state level this thread holds (0: none)


_held = _Held()


_DERIVED: tuple = (None, None)  # (a caller's error state, the ignoring state derived from it): swapped whole


def _ignore_errors_fast():
    """np.errstate(all="ignore") entered, for numpy 2, at a tenth of its cost (5 us of a tiny model's
    ~14 us execute()): numpy keeps the error state in a context variable; the ignoring state derived
    from the caller's is built once per distinct caller's state, then each use is a set (returning the
    token _restore_errors resets)."""
    global _DERIVED
    current = _EXTOBJ.get()
    source, ignoring = _DERIVED
    if current is not source:  # another caller's state (its bufsize, errcall): derive again
        ignoring = _make_extobj(all="ignore")
        _DERIVED = (current, ignoring)
    return _EXTOBJ.set(ignoring)


def _ignore_errors_slow():
    state = np.errstate(all="ignore")
    state.__enter__()
    return state


try:  # numpy 2's private error state; numpy 1.x (and any change to it) keeps np.errstate
    from numpy._core._ufunc_config import _extobj_contextvar as _EXTOBJ, _make_extobj
    _ignore_errors, _restore_errors = _ignore_errors_fast, _EXTOBJ.reset
except ImportError:
    _ignore_errors, _restore_errors = _ignore_errors_slow, lambda state: state.__exit__(None, None, None)
