"""The type constraints of an op's ONNX schema (its inputs' and outputs' type parameters and the types
each allows), read from the generated type_table.py, and the check of a node's input dtypes against
them that the framework runs before a kernel's prepare() (base.Kernel).

A kernel still checks what ge does not implement of the spec (a narrower set of types); what the spec
itself says is checked here once, with one message. Ops without an entry (ge's fused ops, the
com.microsoft domain, an op before its first ONNX version) are their kernels' to check.

The table is data (no onnx import): a loaded OM's kernels are prepared again at load, and a deployed
runtime never imports onnx. `python -m ge.core.kernels.schema` regenerates it from onnx.defs
(schema.write_type_table)."""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from ..model.record import record
from .type_table import TABLE, TYPES

#: a formal parameter's marks in the table: optional, variadic of one type, variadic of several types
OPTIONAL, VARIADIC, HETEROGENEOUS = "?", "*", "+"


@record
class Formal:
    name: str
    #: the type parameter ('T') or, for a formal of one fixed type, that type's name ('int64')
    param: str
    option: str  # "", OPTIONAL, VARIADIC or HETEROGENEOUS


@record
class OpTypes:
    since: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    #: type parameter -> the names of the types it allows (ge's dtype names; "seq(float32)" etc.)
    params: dict[str, tuple[str, ...]]

    def formal(self, i: int, outputs: bool = False) -> Formal | None:
        """The formal parameter of input (or output) index i: a variadic last formal takes every
        index from its own on; None past the declared ones."""
        formals = self.outputs if outputs else self.inputs
        if not formals:
            return None
        if i < len(formals):
            return formals[i]
        last = formals[-1]
        return last if last.option in (VARIADIC, HETEROGENEOUS) else None

    def allowed(self, param: str) -> tuple[str, ...]:
        """The types a formal's param allows: the constraint's, or the fixed type itself."""
        return self.params.get(param, (param,))


def _formal(text: str) -> Formal:
    name, param = text.rsplit(":", 1)
    option = name[-1] if name[-1:] in (OPTIONAL, VARIADIC, HETEROGENEOUS) else ""
    return Formal(name[:-1] if option else name, param, option)


@lru_cache(maxsize=None)
def op_types(domain: str, op_type: str, opset: int) -> OpTypes | None:
    """The type constraints of op_type's schema at opset (its newest version <= opset), or None for
    an op the table does not hold (ge's fused ops, other domains, before its first version)."""
    versions = TABLE.get("" if domain == "ai.onnx" else domain, {}).get(op_type)
    if not versions:
        return None
    since = max((v for v in versions if v <= opset), default=None)
    if since is None:
        return None
    inputs, outputs, params = versions[since]
    return OpTypes(since, tuple(_formal(f) for f in inputs.split()), tuple(_formal(f) for f in outputs.split()),
                   {p: tuple(TYPES[k].split()) for p, k in params.items()})


@lru_cache(maxsize=None)
def dtype_name(dtype) -> str:
    """A tensor dtype as the table names it (numpy's name; string tensors are numpy objects).
    Cached: numpy computes a dtype's name in Python, microseconds a call."""
    dtype = np.dtype(dtype)
    return "string" if dtype.kind == "O" else dtype.name


@lru_cache(maxsize=None)
def _tensor_types(allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The tensor types among a formal's allowed ones (an optional tensor's too): a kernel's input
    there has a dtype; sequences and maps have none."""
    return tuple([t for t in allowed if "(" not in t] + [t[9:-1] for t in allowed if t.startswith("optional(")
                                                         and not t.startswith("optional(seq(")])


def input_type_problem(domain: str, op_type: str, opset: int, dtypes: Sequence) -> str | None:
    """What is wrong with a node's input dtypes (None at an absent input) against its op's schema:
    a type its formal's parameter does not allow, or two types bound to one parameter that differ.
    None when they conform, or the op has no entry. Formals of sequences, optionals of sequences
    and maps are not tensors: a kernel's input there has no dtype to check."""
    return _input_type_problem(domain, op_type, opset, tuple(dtypes))


@lru_cache(maxsize=None)
def _input_type_problem(domain: str, op_type: str, opset: int, dtypes: tuple) -> str | None:
    """input_type_problem of one signature, cached: every kernel built asks it (the compiler builds a
    node's kernel several times), and a model has few signatures (op, opset and dtypes; no shapes)."""
    types = op_types(domain, op_type, opset)
    if types is None:
        return None
    bound: dict[str, tuple[int, Formal, str]] = {}
    for i, dtype in enumerate(dtypes):
        formal = types.formal(i)
        if dtype is None or formal is None:
            continue
        tensors = _tensor_types(types.allowed(formal.param))
        if not tensors:
            continue
        name = dtype_name(dtype)
        if name not in tensors:
            takes = tensors[0] if len(tensors) == 1 else f"{formal.param} in {{{', '.join(ordered(tensors))}}}"
            return f"input {i} '{formal.name}' is {name}; {op_type}-{types.since} takes {takes}"
        if formal.param in types.params and formal.option != HETEROGENEOUS:
            first = bound.setdefault(formal.param, (i, formal, name))
            if first[2] != name:
                j, other, was = first
                return (f"input {i} '{formal.name}' is {name} and input {j} '{other.name}' is {was}; "
                        f"{op_type}-{types.since} takes one type {formal.param} for both")
    return None


def ordered(names) -> list[str]:
    """Type names in a reader's order: floats, signed, unsigned, bool, string, the small types."""
    rank = {n: k for k, n in enumerate(("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                                        "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string"))}
    return sorted(dict.fromkeys(names), key=lambda n: (rank.get(n, len(rank)), n))
