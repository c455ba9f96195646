"""numpy kernels, one class per ONNX op, grouped in one module per family.

The package imports nothing itself (a family is imported when one of its ops is looked up, see
registry.py): importing `ge.core.kernels.native` for `ge --version` costs only that module."""

__all__ = ["Kernel", "lookup", "register", "supported_ops"]


def __getattr__(name: str):
    if name == "Kernel":
        from .base import Kernel
        return Kernel
    if name in ("lookup", "register", "supported_ops"):
        from . import registry
        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
