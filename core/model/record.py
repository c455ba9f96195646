"""`@record`: an immutable record class (a named tuple) from a class body's annotated fields, their
defaults, methods and docstring, as typing.NamedTuple makes one, at a fraction of the cost at import.

Why not NamedTuple or a frozen dataclass: every module here has `from __future__ import annotations`,
so NamedTuple type-checks each field's annotation string by compiling it, and a dataclass compiles
its methods from source: about 3x and 7x collections.namedtuple's cost a class, paid at every import
(a frozen dataclass ~0.7 ms: a tenth of a small model's load was spent defining ge's records).
"""
from __future__ import annotations

from collections import namedtuple


def record(cls: type) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = [cls.__dict__[n] for n in names if n in cls.__dict__]
    if any(n not in cls.__dict__ for n in names[len(names) - len(defaults):]):  # namedtuple defaults the last fields
        raise TypeError(f"record {cls.__name__}: a field without a default follows one with a default")
    body = {k: v for k, v in cls.__dict__.items() if k not in names and k not in ("__dict__", "__weakref__")}
    base = namedtuple(cls.__name__, names, defaults=defaults, module=cls.__module__)
    return type(cls.__name__, (base,), dict(body, __slots__=()))
