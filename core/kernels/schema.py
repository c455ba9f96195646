"""An op's attributes as its ONNX schema declares them (onnx.defs at the node's opset): the
defaults the compiler writes into every task, so that the OM states each op's full attribute set
and a kernel reads what the spec says, not a default of its own. Ops outside onnx's schemas (ge's
fused ops, unknown domains) have none.

The default domain's ops ge has kernels for are read from the generated attribute_table.py (their
types, required ones and defaults): the compiler's defaults and a loaded OM's checks never wake
onnx.defs' registry, and a deployed runtime never imports onnx. onnx's schemas are read for an op
missing from the table or an opset past it. The type constraints the framework checks before a kernel's
prepare() (type_constraints.py) are generated here too, into type_table.py."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..model.ir import DTYPES
from .attribute_table import OPSET as ATTRIBUTE_OPSET, SCHEMA_DOMAINS, TABLE as ATTRIBUTE_TABLE
from .type_constraints import HETEROGENEOUS, OPTIONAL, VARIADIC, ordered
from .type_table import TABLE as TYPE_TABLE, TYPES

#: onnx's AttributeProto.AttributeType values (onnx.proto3: fixed by the format)
FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS = 1, 2, 3, 4, 6, 7, 8


@lru_cache(maxsize=None)
def attribute_defaults(domain: str, op_type: str, opset: int) -> dict:
    """{attribute: default value} of the schema of op_type at opset (ONNX's own value types:
    str for STRING, lists for INTS/FLOATS/STRINGS, ndarray for TENSOR). The default domain's ops
    ge has kernels for read attribute_table.py: onnx.defs' registry, built whole at its first
    lookup, is the biggest single cost of a small model's `ge atc`."""
    entry = attribute_entry(domain, op_type, opset)
    if entry is not None:
        return {name: default for name, (_, _, default) in entry.items() if default is not None}
    domain = "" if domain == "ai.onnx" else domain
    if domain not in SCHEMA_DOMAINS:  # (asking would load onnx's C++ module, ~9 M instructions, for nothing)
        return {}
    from ..model.onnx_proto import schema_defaults
    defaults = schema_defaults(op_type, opset, domain)
    return {name: _value(d) for name, d in (defaults or {}).items()}


def _value(a):
    """An onnx AttributeProto's value as ge holds attributes."""
    from ..model.onnx_proto import attribute_value, to_array
    if a.type == TENSOR:
        return to_array(a.t)
    v = attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, list):
        return [x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


# ---------------------------------------------------------------- attribute types (a loaded OM's check)

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _is_int(v) -> bool:
    return type(v) is int and _INT64[0] <= v <= _INT64[1]


def _is_float(v) -> bool:
    return type(v) is float


_TYPE_CHECKS = {  # AttributeProto type -> (what it must be, check)
    INT: ("an int64", _is_int),
    FLOAT: ("a float", _is_float),
    STRING: ("a string", lambda v: type(v) is str),
    INTS: ("a list of int64", lambda v: type(v) is list and all(_is_int(x) for x in v)),
    FLOATS: ("a list of floats", lambda v: type(v) is list and all(_is_float(x) for x in v)),
    STRINGS: ("a list of strings", lambda v: type(v) is list and all(type(x) is str for x in v)),
    TENSOR: ("a tensor", lambda v: isinstance(v, np.ndarray)),
}


@lru_cache(maxsize=None)
def attribute_types(domain: str, op_type: str, opset: int) -> tuple[dict, frozenset]:
    """({attribute: AttributeProto type} of the ones ge can check, the names the OM must carry:
    required ones and those with a default, which the compiler always writes). The default
    domain's ops ge has kernels for come from attribute_table.py (onnx.defs' registry costs tens
    of milliseconds to wake, a visible share of a model's load); another default-domain op from
    onnx.defs; ops of other domains have no onnx schema."""
    if domain not in ("", "ai.onnx"):  # ge's fused ops, com.microsoft's: no onnx schema, their kernels check
        return {}, frozenset()
    entry = attribute_entry(domain, op_type, opset)
    if entry is None:  # an op added since the table was generated
        entry = schema_attributes(domain, op_type, opset)
    return ({name: kind for name, (kind, _, _) in entry.items() if kind in _TYPE_CHECKS},
            frozenset(name for name, (kind, needed, _) in entry.items() if needed and kind in _TYPE_CHECKS))


def attribute_entry(domain: str, op_type: str, opset: int) -> dict | None:
    """attribute_table.py's {attribute: (type, required or defaulted, default)} of op_type at opset
    ({} before its first version); None for an op the table does not have, or an opset newer than
    the onnx it was generated from knew (a newer onnx's schemas are read then)."""
    versions = ATTRIBUTE_TABLE.get(op_type) if domain in ("", "ai.onnx") else None
    if versions is None or opset > ATTRIBUTE_OPSET:
        return None
    since = max((v for v in versions if v <= opset), default=None)
    return versions[since] if since is not None else {}


def schema_attributes(domain: str, op_type: str, opset: int) -> dict:
    """{attribute: (AttributeProto type, required or defaulted, its default or None)} of every
    attribute of op_type's onnx schema at opset ({} without a schema)."""
    import onnx
    try:
        schema = onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return {}
    out = {}
    for name, a in sorted(schema.attributes.items()):
        default = a.default_value if not a.required and a.default_value is not None and a.default_value.type else None
        out[name] = (int(a.type), bool(a.required or default is not None), None if default is None else _value(default))
    return out


def attribute_table(op_types) -> dict:
    """{op: {since_version: schema_attributes}} of default-domain ops, every version of each."""
    import onnx
    table: dict = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx") and s.name in op_types:
            table.setdefault(s.name, {})[s.since_version] = schema_attributes("", s.name, s.since_version)
    return {op: dict(sorted(v.items())) for op, v in sorted(table.items())}


def deprecated_schemas() -> dict:
    """{op: since_version} of the default domain's deprecated schemas (Upsample's 10th: Resize
    replaced it; the checker refuses such a node)."""
    import onnx
    return {s.name: s.since_version for s in sorted(onnx.defs.get_all_schemas_with_history(), key=lambda s: s.name)
            if s.deprecated and s.domain in ("", "ai.onnx")}


def write_attribute_table(path: str) -> None:
    """Regenerate attribute_table.py for the default-domain ops ge has kernels for."""
    import onnx
    from .registry import kernel_classes
    table = attribute_table({cls.op_type for cls in kernel_classes() if cls.domain == ""})
    lines = [f'"""Generated by `python -m ge.core.kernels.schema` from onnx {onnx.__version__}\'s schemas: per op and',
             "since-version, {attribute: (AttributeProto type, required or defaulted, default or None)}: the",
             "attributes a loaded OM's tasks are checked against (schema.attribute_types) and the defaults the",
             "compiler writes into them (schema.attribute_defaults).", *_AS_JSON,
             "from .json_table import JsonTable", "", f"ONNX_VERSION = {onnx.__version__!r}",
             f"OPSET = {onnx.defs.onnx_opset_version()}  # the newest default-domain opset it knew",
             "#: {op: the since-version of its deprecated schema}: onnx's checker refuses a node whose schema that is",
             f"DEPRECATED = {deprecated_schemas()!r}",
             "#: the domains onnx has op schemas of: an op of another (com.microsoft, ge's own) has none to ask",
             f"SCHEMA_DOMAINS = frozenset({sorted(onnx.defs.C.schema_version_map())!r})", "", "",
             "def _versions(versions: dict) -> dict:",
             "    return {int(since): {name: tuple(kind) for name, kind in attrs.items()} for since, attrs in versions.items()}",
             "", "", "TABLE = JsonTable({", *_json_entries(table, "    "), "}, _versions)"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


#: the generated tables' docstrings end with why they hold JSON text
_AS_JSON = ["Each op's entry is JSON text, decoded when the op is first looked up (json_table.py says why).",
            'Do not edit; regenerate."""']


def _json_entries(ops: dict, indent: str) -> list[str]:
    """Python lines `'op': 'its versions as JSON',` of a JsonTable, one an op, so that a regenerated
    table's diff shows the ops that changed."""
    import json
    return [f"{indent}{op!r}: {json.dumps({str(k): v for k, v in versions.items()})!r}," for op, versions in ops.items()]


def attribute_problem(domain: str, op_type: str, opset: int, attrs: dict, complete: bool = False) -> str | None:
    """What is wrong with a node's attributes against its op's schema (a message naming the
    attribute), or None. `complete`: every attribute the schema declares with a default must be
    there (an OM ge wrote has them all). Ops without an onnx schema (ge's fused ops) are their
    kernel's to check."""
    types, present = attribute_types(domain, op_type, opset)
    for name in sorted(present - attrs.keys()) if complete else ():
        return f"attrs['{name}'] is missing (the op's schema declares it; ge writes every one)"
    for name, kind in types.items():
        if name in attrs:
            what, ok = _TYPE_CHECKS[kind]
            if not ok(attrs[name]):
                return f"attrs['{name}'] must be {what}, got {_show(attrs[name])}"
    return None


def _show(v) -> str:
    text = repr(v)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({type(v).__name__})"


# ---------------------------------------------------------------- type_table.py (type_constraints reads it)

def type_name(type_str: str) -> str:
    """onnx's type string as the table names it: tensor(float) -> float32, seq(tensor(float)) ->
    seq(float32), map(int64, float) -> map(int64,float32); a type ge has no dtype for keeps onnx's
    element name (complex64, float6e2m3): no tensor of ge's has it."""
    from onnx import TensorProto
    if type_str.startswith("tensor("):
        return type_name(type_str[7:-1])
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
            {c.type_param_str: " ".join(ordered(type_name(t) for t in c.allowed_type_strs))
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
                for op, versions in ops.items()} for d, ops in TYPE_TABLE.items()}


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
             "constraint is the fixed type itself). Read by type_constraints.py.", *_AS_JSON,
             "from .json_table import JsonTable", "", f"ONNX_VERSION = {onnx.__version__!r}", "TYPES = ["]
    lines += [f"    {t!r},  # {k}" for k, t in enumerate(types)]
    lines += ["]", "", "", "def _versions(versions: dict) -> dict:",
              "    return {int(since): tuple(entry) for since, entry in versions.items()}", "", "", "TABLE = {"]
    for domain, ops in table.items():
        lines += [f"    {domain!r}: JsonTable({{", *_json_entries(ops, "        "), "    }, _versions),"]
    lines += ["}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":  # python -m ge.core.kernels.schema: regenerate attribute_table.py and type_table.py
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    write_attribute_table(os.path.join(here, "attribute_table.py"))
    write_type_table(os.path.join(here, "type_table.py"))
