"""The type constraints of an op's ONNX schema (its inputs' and outputs' type parameters and the types
each allows), read from the generated type_table.py, and the check of a node's input dtypes against
them that the framework runs before a kernel's prepare() (base.Kernel).

A kernel still checks what ge does not implement of the spec (a narrower set of types); what the spec
itself says is checked here once, with one message. Ops without an entry (ge's fused ops, the
com.microsoft domain, an op before its first ONNX version) are their kernels' to check.

The table is data (no onnx import): a loaded OM's kernels are prepared again at load, and a deployed
runtime never imports onnx. `python -m ge.core.kernels.schema` regenerates it from onnx.defs."""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np

from .type_table import TABLE, TYPES

#: a formal parameter's marks in the table: optional, variadic of one type, variadic of several types
OPTIONAL, VARIADIC, HETEROGENEOUS = "?", "*", "+"


class Formal(NamedTuple):
    name: str
    #: the type parameter ('T') or, for a formal of one fixed type, that type's name ('int64')
    param: str
    option: str  # "", OPTIONAL, VARIADIC or HETEROGENEOUS


class OpTypes(NamedTuple):
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


def dtype_name(dtype) -> str:
    """A tensor dtype as the table names it (numpy's name; string tensors are numpy objects)."""
    dtype = np.dtype(dtype)
    return "string" if dtype.kind == "O" else dtype.name


def input_type_problem(domain: str, op_type: str, opset: int, dtypes: Sequence) -> str | None:
    """What is wrong with a node's input dtypes (None at an absent input) against its op's schema:
    a type its formal's parameter does not allow, or two types bound to one parameter that differ.
    None when they conform, or the op has no entry. Formals of sequences, optionals of sequences
    and maps are not tensors: a kernel's input there has no dtype to check."""
    types = op_types(domain, op_type, opset)
    if types is None:
        return None
    bound: dict[str, tuple[int, Formal, str]] = {}
    for i, dtype in enumerate(dtypes):
        formal = types.formal(i)
        if dtype is None or formal is None:
            continue
        allowed = types.allowed(formal.param)
        tensors = [t for t in allowed if "(" not in t] + [t[9:-1] for t in allowed if t.startswith("optional(")
                                                          and not t.startswith("optional(seq(")]
        if not tensors:
            continue
        name = dtype_name(dtype)
        if name not in tensors:
            takes = tensors[0] if len(tensors) == 1 else f"{formal.param} in {{{', '.join(_ordered(tensors))}}}"
            return f"input {i} '{formal.name}' is {name}; {op_type}-{types.since} takes {takes}"
        if formal.param in types.params and formal.option != HETEROGENEOUS:
            first = bound.setdefault(formal.param, (i, formal, name))
            if first[2] != name:
                j, other, was = first
                return (f"input {i} '{formal.name}' is {name} and input {j} '{other.name}' is {was}; "
                        f"{op_type}-{types.since} takes one type {formal.param} for both")
    return None


def _ordered(names) -> list[str]:
    """Type names in a reader's order: floats, signed, unsigned, bool, string, the small types."""
    rank = {n: k for k, n in enumerate(("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                                        "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string"))}
    return sorted(dict.fromkeys(names), key=lambda n: (rank.get(n, len(rank)), n))


# ---------------------------------------------------------------- generating type_table.py (needs onnx)

def type_name(type_str: str) -> str:
    """onnx's type string as the table names it: tensor(float) -> float32, seq(tensor(float)) ->
    seq(float32), map(int64, float) -> map(int64,float32); a type ge has no dtype for keeps onnx's
    element name (complex64, float6e2m3): no tensor of ge's has it."""
    from onnx import TensorProto
    from ..model.ir.graph import DTYPES
    if type_str.startswith("tensor("):
        element = type_str[7:-1]
        return type_name(element)
    for outer in ("seq", "optional", "sparse_tensor"):
        if type_str.startswith(outer + "("):
            return f"{outer}({type_name(type_str[len(outer) + 1:-1])})"
    if type_str.startswith("map("):
        key, value = type_str[4:-1].split(",", 1)
        return f"map({type_name(key.strip())},{type_name(value.strip())})"
    code = TensorProto.DataType.Value(type_str.upper()) if type_str.upper() in TensorProto.DataType.keys() else None
    if code == TensorProto.STRING:
        return "string"
    return DTYPES[code].name if code in DTYPES else type_str


def schema_types(schema) -> tuple:
    """(inputs, outputs, {param: allowed types}) of an onnx OpSchema: each formal "name[mark]:param"
    (mark: ? optional, * variadic, + variadic of several types), the formals space-separated, each
    param's types too."""
    from onnx.defs import OpSchema
    Option = OpSchema.FormalParameterOption
    params = {c.type_param_str for c in schema.type_constraints}

    def formals(fs) -> str:
        marks = [{Option.Optional: OPTIONAL, Option.Variadic: VARIADIC if f.is_homogeneous else HETEROGENEOUS}
                 .get(f.option, "") for f in fs]
        return " ".join(f"{f.name}{m}:{f.type_str if f.type_str in params else type_name(f.type_str)}"
                        for f, m in zip(fs, marks))

    return (formals(schema.inputs), formals(schema.outputs),
            {c.type_param_str: " ".join(_ordered(type_name(t) for t in c.allowed_type_strs))
             for c in schema.type_constraints})


def type_table(ops: dict[str, set[str]]) -> dict:
    """{domain: {op: {since_version: schema_types}}} of every version of the given ops per domain."""
    import onnx
    table: dict = {domain: {} for domain in sorted(ops)}
    for s in onnx.defs.get_all_schemas_with_history():
        domain = "" if s.domain == "ai.onnx" else s.domain
        if s.name in ops.get(domain, ()):
            table[domain].setdefault(s.name, {})[s.since_version] = schema_types(s)
    return {d: {op: dict(sorted(v.items())) for op, v in sorted(t.items())} for d, t in table.items()}


def stored_table(table: dict) -> tuple[list[str], dict]:
    """(TYPES, TABLE) as type_table.py stores them: each distinct list of types once in TYPES, the
    params naming it by index (99 lists serve 930 params)."""
    types: dict[str, int] = {}
    stored = {d: {op: {since: (ins, outs, {p: types.setdefault(t, len(types)) for p, t in params.items()})
                       for since, (ins, outs, params) in versions.items()}
                  for op, versions in ops.items()} for d, ops in table.items()}
    return list(types), stored


def resolved_table() -> dict:
    """type_table.py's TABLE with its params' type lists spelled out: what type_table() gives."""
    return {d: {op: {since: (ins, outs, {p: TYPES[k] for p, k in params.items()})
                     for since, (ins, outs, params) in versions.items()}
                for op, versions in ops.items()} for d, ops in TABLE.items()}


def registered_ops() -> dict[str, set[str]]:
    """The ops ge has kernels for in onnx's domains (the default one and ai.onnx.ml)."""
    from .registry import kernel_classes
    ops: dict[str, set[str]] = {"": set(), "ai.onnx.ml": set()}
    for cls in kernel_classes():
        if cls.domain in ops:
            ops[cls.domain].add(cls.op_type)
    return ops


def write_type_table(path: str) -> None:
    """Regenerate type_table.py for the ops ge has kernels for in onnx's domains: one line a version."""
    import onnx
    types, table = stored_table(type_table(registered_ops()))
    lines = [f'"""Generated by `python -m ge.core.kernels.schema` from onnx {onnx.__version__}\'s schemas: per domain, op',
             'and since-version, (inputs, outputs, {type parameter: index of its allowed types in TYPES}); each',
             'formal is "name[mark]:param" (? optional, * variadic, + variadic of several types; a param without a',
             'constraint is the fixed type itself). Read by type_constraints.py. Do not edit; regenerate."""',
             f"ONNX_VERSION = {onnx.__version__!r}", "TYPES = ["]
    lines += [f"    {t!r},  # {k}" for k, t in enumerate(types)]
    lines += ["]", "TABLE = {"]
    for domain, ops in table.items():
        lines.append(f"    {domain!r}: {{")
        for op, versions in ops.items():
            lines.append(f"        {op!r}: {{")
            lines += [f"            {since}: {entry!r}," for since, entry in versions.items()]
            lines.append("        },")
        lines.append("    },")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
