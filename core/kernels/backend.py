"""Which implementation a kernel takes, chosen once per model at load: ge's native kernels
(core/kernels/native/) where they are built and pass their self-test, else the numpy plans.

A Backend is passed to every kernel explicitly (no global switch): the compiler builds each kernel
with both to plan a workspace that fits either machine, the loader selects one per model and
falls back to NUMPY for a task whose native plan needs more workspace than the OM plans (an OM
compiled where the native kernels are not built). `direct` steers the native convolution's choice
of kernel, for tests and benchmarks.
"""
from __future__ import annotations

from ..model.record import record
from .native import Native, native

DIRECT_CHOICES = ("auto", "always", "never")


@record
class Backend:
    lib: Native | None  # ge's native kernels, or None: the numpy plans
    direct: str = "auto"  # the native convolution: "auto" (by shape), "always" (where it can run) or "never"
    #: a Loop or Scan body's kernels (core/runtime/hybrid.py): a prepared native call also where numpy's is as
    #: fast (float32 Add/Sub/Mul/Div of one shape, Relu), so that every task of the body is one and its
    #: iterations run in one native call (csrc/loop.c); the results are numpy's, bit for bit
    iterated: bool = False

    @property
    def name(self) -> str:
        return "numpy" if self.lib is None else "native"


NUMPY = Backend(None)


def select(native_kernels: bool = True, direct: str = "auto") -> Backend:
    """The best backend this machine has (native kernels unless GE_NO_NATIVE=1 or not built)."""
    if direct not in DIRECT_CHOICES:
        raise ValueError(f"direct={direct!r}: one of {', '.join(DIRECT_CHOICES)}")
    return Backend(native() if native_kernels else None, direct)
