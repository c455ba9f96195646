"""ge's version and what runs its kernels: what `ge --version` prints, without importing the
compiler, the runtime or any kernel family."""
from __future__ import annotations


def kernels() -> str:
    """What runs ge's kernels in this process: the native level and its instruction sets, or the numpy
    fallback and why (no C compiler at install, GE_NO_NATIVE=1, a layout or self-test mismatch)."""
    from .kernels.native import status
    return status()


def version() -> str:
    """ge's version (the installed distribution's), as `atc_version` shows it."""
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("ge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "0+unknown"
