"""numpy kernels, one class per ONNX op, grouped in one module per family."""
from .base import Kernel
from .registry import lookup, register, supported_ops

__all__ = ["Kernel", "lookup", "register", "supported_ops"]
