"""Kernel lookup by (domain, op_type, opset): the newest registered version <= the model's opset."""
from __future__ import annotations

from ..errors import UnsupportedOpError
from .base import Kernel

_KERNELS: dict[tuple[str, str], list[type[Kernel]]] = {}
#: the variants of ops that also take or give string tensors (Equal, Cast, LabelEncoder...): host
#: kernels the hybrid executor runs on a node whose inputs or outputs are strings
_STRING_KERNELS: dict[tuple[str, str], list[type[Kernel]]] = {}


def register(op_type: str, since: int = 1, domain: str = "", strings: bool = False):
    def wrap(cls: type[Kernel]) -> type[Kernel]:
        cls.op_type, cls.since, cls.domain = op_type, since, domain
        versions = (_STRING_KERNELS if strings else _KERNELS).setdefault((domain, op_type), [])
        versions.append(cls)
        versions.sort(key=lambda k: k.since)
        return cls
    return wrap


def lookup(op_type: str, domain: str = "", opset: int = 10**6, node: str = "", strings: bool = False) -> type[Kernel]:
    """The kernel class of an op; `strings`: the one for a node with string inputs or outputs (the
    op's string variant, or its kernel when that is a host kernel of strings itself)."""
    _load_families()
    domain = "" if domain == "ai.onnx" else domain
    if strings:
        variants = [k for k in _STRING_KERNELS.get((domain, op_type), []) if k.since <= opset]
        if variants:
            return variants[-1]
        cls = lookup(op_type, domain, opset, node)
        if not getattr(cls, "takes_strings", False):
            where = f"node '{node}': " if node else ""
            raise UnsupportedOpError(f"{where}op {domain + '::' if domain else ''}{op_type} does not take string "
                                     f"tensors in ge (string ops: {', '.join(string_ops())})")
        return cls
    versions = [k for k in _KERNELS.get((domain, op_type), []) if k.since <= opset]
    if not versions:
        where = f"node '{node}': " if node else ""
        have = "" if (domain, op_type) not in _KERNELS else f" at opset {opset}"
        raise UnsupportedOpError(f"{where}op {domain + '::' if domain else ''}{op_type} is not supported{have}")
    return versions[-1]


def supported_ops() -> list[str]:
    _load_families()
    return sorted(op for _, op in _KERNELS)


def string_ops() -> list[str]:
    """The ops ge runs on string tensors."""
    _load_families()
    return sorted({op for _, op in _STRING_KERNELS}
                  | {cls.op_type for versions in _KERNELS.values() for cls in versions
                     if getattr(cls, "takes_strings", False)})


def kernel_classes() -> list[type[Kernel]]:
    """Every registered kernel class, every version."""
    _load_families()
    return [cls for table in (_KERNELS, _STRING_KERNELS) for versions in table.values() for cls in versions]


_loaded = False


def _load_families() -> None:
    """Import every kernel family module once, so their @register calls run."""
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil
    from . import __path__ as here
    for info in pkgutil.iter_modules(here):
        if info.name not in ("base", "registry"):
            importlib.import_module(f"{__package__}.{info.name}")
    _loaded = True
