"""Kernel lookup by (domain, op_type, opset): the newest registered version <= the model's opset."""
from __future__ import annotations

from ..model.errors import UnsupportedOpError
from .base import Kernel

_KERNELS: dict[tuple[str, str], list[type[Kernel]]] = {}
#: the variants of ops that also take or give string tensors (Equal, Cast, LabelEncoder...): host
#: kernels the hybrid executor runs on a node whose inputs or outputs are strings
_STRING_KERNELS: dict[tuple[str, str], list[type[Kernel]]] = {}
#: lookup's answers by (domain, op_type, opset, strings): a compile looks each node's op up once per
#: kernel it builds (shape inference, the fusions, the model's kernels); register() forgets them
_FOUND: dict[tuple[str, str, int, bool], type[Kernel]] = {}


def register(op_type: str, since: int = 1, domain: str = "", strings: bool = False):
    def wrap(cls: type[Kernel]) -> type[Kernel]:
        cls.op_type, cls.since, cls.domain = op_type, since, domain
        versions = (_STRING_KERNELS if strings else _KERNELS).setdefault((domain, op_type), [])
        versions.append(cls)
        versions.sort(key=lambda k: k.since)
        _FOUND.clear()
        return cls
    return wrap


def lookup(op_type: str, domain: str = "", opset: int = 10**6, node: str = "", strings: bool = False) -> type[Kernel]:
    """The kernel class of an op; `strings`: the one for a node with string inputs or outputs (the
    op's string variant, or its kernel when that is a host kernel of strings itself). Imports only
    the families that register the op (families.py), so a loaded OM imports the families it uses
    (the string variants' only for a node of strings)."""
    domain = "" if domain == "ai.onnx" else domain
    found = _FOUND.get((domain, op_type, opset, strings))
    if found is None:
        found = _FOUND[domain, op_type, opset, strings] = _lookup(op_type, domain, opset, node, strings)
    return found


def _lookup(op_type: str, domain: str, opset: int, node: str, strings: bool) -> type[Kernel]:
    _load_family(domain, op_type, strings)
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
#: the (domain, op_type, strings)s whose families are imported: a compile looks an op up once per node and pass
_families_loaded: set[tuple[str, str, bool]] = set()


def _load_family(domain: str, op_type: str, strings: bool = False) -> None:
    """Import the family modules that register (domain, op_type) (`strings`: its string variants'
    too), or every family for an op the index does not know (a new kernel before
    `write_family_index()`, or no kernel at all)."""
    if _loaded or (domain, op_type, strings) in _families_loaded:
        return
    from .families import FAMILIES, STRING_FAMILIES
    key = (domain, op_type)
    if key not in FAMILIES and key not in STRING_FAMILIES:
        _load_families()
        return
    import importlib
    for name in FAMILIES.get(key, ()) + (STRING_FAMILIES.get(key, ()) if strings else ()):
        importlib.import_module(f"{__package__}.ops.{name}")
    _families_loaded.add((domain, op_type, strings))


def family_index(strings: bool = False) -> dict[tuple[str, str], tuple[str, ...]]:
    """(domain, op type) -> the family modules registering its kernels (`strings`: its string
    variants, which a model without strings never imports), from the registrations themselves: what
    families.py holds."""
    _load_families()
    index: dict[tuple[str, str], set[str]] = {}
    for key, versions in (_STRING_KERNELS if strings else _KERNELS).items():
        index.setdefault(key, set()).update(cls.__module__.rsplit(".", 1)[1] for cls in versions)
    return {key: tuple(sorted(index[key])) for key in sorted(index)}


def write_family_index() -> str:
    """Regenerate families.py from the registrations (after adding or moving a kernel)."""
    import os
    path = os.path.join(os.path.dirname(__file__), "families.py")
    def rows(strings: bool) -> str:
        return "".join(f"    {key!r}: {modules!r},\n" for key, modules in family_index(strings).items())
    with open(path, "w", encoding="utf-8") as f:
        f.write('"""Which kernel family modules register each op (STRING_FAMILIES: its string variants, for a\n'
                "node of strings): lookup imports only those. Generated by registry.write_family_index();\n"
                "tests/core/kernels/test_families.py checks it is current.\"\"\"\n"
                f"FAMILIES = {{\n{rows(False)}}}\nSTRING_FAMILIES = {{\n{rows(True)}}}\n")
    return path


def _load_families() -> None:
    """Import every module of ops/ once, so their @register calls run."""
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil
    from .ops import __path__ as ops
    for info in pkgutil.iter_modules(ops):
        importlib.import_module(f"{__package__}.ops.{info.name}")
    _loaded = True
