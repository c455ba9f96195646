"""`@record`: an immutable record class (a named tuple) from a class body's annotated fields, their
defaults, methods and docstring, as typing.NamedTuple makes one, at a fraction of the cost at import.

Why not NamedTuple or a frozen dataclass: every module here has `from __future__ import annotations`,
so NamedTuple type-checks each field's annotation string by compiling it, and a dataclass compiles
its methods from source: about 3x and 7x collections.namedtuple's cost a class, paid at every import
(a frozen dataclass ~0.7 ms: a tenth of a small model's load was spent defining ge's records). And
not collections.namedtuple either: it compiles each class's __new__ from source and makes two
classes (ours on its own), ~0.55 M instructions a record; here __new__'s code is compiled once per
number of fields and renamed, ~0.2 M (a small model's `ge atc` defines 26 records, its load 21).
What a record has is what namedtuple gives: a tuple subclass with the fields as named read-only
attributes, positional or keyword construction with defaults for the last fields, _fields,
_field_defaults, _make, _replace, _asdict, its repr, equality and hashing as tuples, pickling.
"""
from __future__ import annotations

import types
from operator import itemgetter

try:
    from _collections import _tuplegetter  # (namedtuple's field descriptor, in C)
except ImportError:  # (another Python: a property does the same)
    def _tuplegetter(index, doc):
        return property(itemgetter(index), doc=doc)

_tuple_new = tuple.__new__
_NEW_GLOBALS = {"_tuple_new": _tuple_new, "__builtins__": {}}
_NEW_CODE: dict[int, types.CodeType] = {}  # number of fields -> __new__'s code, arguments a0, a1, ...


def record(cls: type) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = tuple(cls.__dict__[n] for n in names if n in cls.__dict__)
    if any(n not in cls.__dict__ for n in names[len(names) - len(defaults):]):  # defaults are the last fields'
        raise TypeError(f"record {cls.__name__}: a field without a default follows one with a default")
    if len(set(names)) < len(names) or any(n.startswith("_") for n in names):
        raise TypeError(f"record {cls.__name__}: field names must be unique and not start with '_': {names}")
    qualname = f"{cls.__qualname__}.__new__"
    code = _new_code(len(names)).replace(co_varnames=("_cls", *names), co_name="__new__", co_qualname=qualname)
    new = types.FunctionType(code, _NEW_GLOBALS, "__new__", defaults or None)
    new.__qualname__ = qualname
    body = {k: v for k, v in cls.__dict__.items() if k not in names and k not in ("__dict__", "__weakref__")}
    body.update({name: _tuplegetter(k, f"Alias for field number {k}") for k, name in enumerate(names)})
    body.update(__slots__=(), __new__=new, _fields=names, __match_args__=names,
                _field_defaults=dict(zip(names[len(names) - len(defaults):], defaults)))
    for name, method in _METHODS.items():
        body.setdefault(name, method)
    return type(cls.__name__, (tuple,), body)


def _new_code(fields: int) -> types.CodeType:
    code = _NEW_CODE.get(fields)
    if code is None:
        args = "".join(f", a{k}" for k in range(fields))
        code = _NEW_CODE[fields] = eval(f"lambda _cls{args}: _tuple_new(_cls, ({args[2:]}{',' if fields else ''}))",
                                        _NEW_GLOBALS).__code__
    return code


@classmethod
def _make(cls, iterable):
    made = _tuple_new(cls, iterable)
    if len(made) != len(cls._fields):
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
    return made


def _replace(self, **changes):
    made = self._make([changes.pop(name, value) for name, value in zip(self._fields, self)])
    if changes:
        raise ValueError(f"Got unexpected field names: {list(changes)!r}")
    return made


def _repr(self) -> str:
    return f"{type(self).__name__}({', '.join(f'{name}={value!r}' for name, value in zip(self._fields, self))})"


_METHODS = {"_make": _make, "_replace": _replace, "_asdict": lambda self: dict(zip(self._fields, self)),
            "__repr__": _repr, "__getnewargs__": lambda self: tuple(self)}
