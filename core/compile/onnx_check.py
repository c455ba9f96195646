"""ge's own check of a plain ONNX model, in place of onnx's checker and shape inference.

onnx's checker and shape inference both read op schemas from onnx's registry, which its C++ module
builds whole at the first lookup: ~60 M instructions, the biggest single cost of a small model's
`ge atc`. A plain model needs neither: ge's generated tables (attribute_table.py, type_table.py)
hold what the checker checks of its nodes, and ge's own shape inference, which the compiler runs
anyway, gives every shape of a graph with static inputs. Plain is:
  - a default-domain opset ge's tables cover (7 to the table's), no model-local functions, no
    sparse initializers, every attribute typed and none a graph (no control flow) or a reference;
  - default-domain ops the tables hold, and ops of domains onnx has no schemas of (com.microsoft,
    custom: the checker only asks that their domain is imported, and ge's kernels check them);
  - tensors only, no strings, in the graph's inputs, outputs and value infos.
Anything else goes to onnx's checker and shape inference as before (importer._check_model,
_onnx_shapes); so does a plain model whose inputs are not all static (to_graph decides). The
importer is given this check (read_onnx's own_check) by ATC's driver: the file formats know no
kernel tables.

What is checked, as the checker words it where it can: the IR version, each node's op at the
model's opset and whether that schema is deprecated, its inputs' and outputs' count, its
attributes' names, types and required ones, imported domains, single assignment (each graph input
declared once, each tensor produced once, every input defined), and the initializers' names, dims
and data fields."""
from __future__ import annotations

import math

from ...formats.onnx.importer import MIN_OPSET
from ..kernels.attribute_table import DEPRECATED, OPSET as TABLE_OPSET, SCHEMA_DOMAINS, TABLE as ATTRIBUTES
from ..kernels.schema import attribute_entry
from ..kernels.type_constraints import OPTIONAL, op_types
from ..model.errors import FormatError, GraphError
from ..model.onnx_proto import AttributeProto, ModelProto, NodeProto, TensorProto

#: the IR version of the onnx ge reads with (onnx.IR_VERSION): a newer model's fields may be unknown to it
IR_VERSION = ModelProto.DESCRIPTOR.file.enum_types_by_name["Version"].values_by_name["IR_VERSION"].number
_NOT_PLAIN_ATTRIBUTES = frozenset((AttributeProto.UNDEFINED, AttributeProto.GRAPH, AttributeProto.GRAPHS))
#: ops whose output type onnx's schema and onnx's shape inference give differently (RMSNormalization's Y:
#: the schema's V, scale's type; the inference's and reference's T, X's): their models keep onnx's
#: inference, whose typing ge's compile refuses where the two differ (tests/core/kernels/test_dtype_coverage)
_TYPED_BY_ONNX = frozenset(("RMSNormalization",))
_KIND = AttributeProto.AttributeType.Name


def is_plain(model: ModelProto) -> bool:
    """Whether ge checks the model itself (see the module's docstring)."""
    g = model.graph
    if not MIN_OPSET <= _opset_imports(model).get("", 0) <= TABLE_OPSET or model.functions or g.sparse_initializer:
        return False
    for vi in (*g.input, *g.output, *g.value_info):
        which = vi.type.WhichOneof("value")
        if which not in (None, "tensor_type") or (which and vi.type.tensor_type.elem_type == TensorProto.STRING):
            return False
    if any(t.data_type == TensorProto.STRING for t in g.initializer):
        return False
    for n in g.node:
        if n.domain in ("", "ai.onnx"):
            if n.op_type not in ATTRIBUTES or n.op_type in _TYPED_BY_ONNX:
                return False
        elif n.domain in SCHEMA_DOMAINS:  # ai.onnx.ml's, the preview ones: onnx's checker checks them
            return False
        if any(a.type in _NOT_PLAIN_ATTRIBUTES or a.ref_attr_name for a in n.attribute):
            return False
    return True


def check_plain(model: ModelProto, path: str, node_names: list[str]) -> bool:
    """False for a model that is not plain (onnx's checker checks it); for a plain one, a FormatError
    or GraphError naming the file and node for what onnx's checker would refuse, else True.
    `node_names`: the nodes' names as ge gives them (unique)."""
    if not is_plain(model):
        return False
    if model.ir_version > IR_VERSION:
        raise FormatError(f"{path}: ir_version {model.ir_version} is higher than the newest this onnx knows "
                          f"({IR_VERSION}): a newer onnx wrote it")
    g = model.graph
    imported = _opset_imports(model)
    opset = imported[""]
    inputs = [vi.name for vi in g.input]
    if len(set(inputs)) < len(inputs):
        twice = next(name for k, name in enumerate(inputs) if name in inputs[:k])
        raise GraphError(f"{path}: graph input '{twice}' is declared twice")
    for t in g.initializer:
        _check_initializer(t, path)
    defined = set(inputs) | {t.name for t in g.initializer}
    produced: set[str] = set()
    for n in g.node:
        for o in n.output:
            if not o:
                continue
            if o in produced or o in defined:
                raise GraphError(f"{path}: tensor '{o}' is assigned twice (node outputs must be new names: "
                                 f"graph input, initializer or another node's output already)")
            produced.add(o)
    defined |= produced
    for n, name in zip(g.node, node_names):
        domain = "" if n.domain == "ai.onnx" else n.domain
        desc = f"{path}: node '{name}' ({n.op_type})"
        if domain not in imported:
            raise GraphError(f"{desc}: its domain '{domain}' is not among the model's opset imports")
        missing = next((i for i in n.input if i and i not in defined), None)
        if missing is not None:
            raise GraphError(f"{desc}: input '{missing}' is no graph input, initializer or node output")
        if domain == "":
            _check_node(n, desc, opset)
    return True


def _opset_imports(model: ModelProto) -> dict[str, int]:
    """{domain: version} of the model's opset imports, "ai.onnx" spelled "" (as importer._opsets reads
    them once the check has passed)."""
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


#: TensorProto's data fields besides raw_data: the checker allows one of them, or raw_data, or none (external data)
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _check_initializer(t: TensorProto, path: str) -> None:
    """What the checker checks of a tensor that reading it would not: a name, no negative dim, one
    data field. (Its data's size is checked as it is read; a big one's raw data has already left
    the proto then: importer._detach_weights.)"""
    if not t.name:
        raise GraphError(f"{path}: an initializer has no name")
    if any(d < 0 for d in t.dims):
        raise GraphError(f"{path}: initializer '{t.name}' has a negative dim ({list(t.dims)})")
    fields = [f for f in _TYPED_FIELDS if getattr(t, f)] + (["raw_data"] if t.HasField("raw_data") else [])
    if len(fields) > 1 or (fields and t.data_location == TensorProto.EXTERNAL):
        stored = " and ".join(fields + (["external data"] if t.data_location == TensorProto.EXTERNAL else []))
        raise GraphError(f"{path}: initializer '{t.name}' holds {stored}: a tensor holds its values in one field")


def _check_node(n: NodeProto, desc: str, opset: int) -> None:
    types = op_types("", n.op_type, opset)
    if types is None:
        first = min(ATTRIBUTES[n.op_type])
        raise GraphError(f"{desc}: no {n.op_type} at opset {opset} (onnx has it from opset {first})")
    if DEPRECATED.get(n.op_type) == types.since:
        raise GraphError(f"{desc}: its schema at opset {opset} is deprecated (since opset {types.since}): "
                         f"onnx's checker and onnxruntime refuse it")
    problem = _count_problem("input", n.input, types.inputs) or _count_problem("output", n.output, types.outputs)
    if problem:
        raise GraphError(f"{desc}: {problem} (its schema at opset {types.since})")
    schema = attribute_entry("", n.op_type, opset)
    given = set()
    for a in n.attribute:
        if a.name not in schema:
            known = ", ".join(sorted(schema)) or "none"
            raise GraphError(f"{desc}: unrecognized attribute '{a.name}' (the op's attributes at opset {opset}: {known})")
        kind = schema[a.name][0]
        if a.type != kind:
            raise GraphError(f"{desc}: attribute '{a.name}' is {_KIND(a.type)}, the op's schema declares {_KIND(kind)}")
        if a.name in given:
            raise GraphError(f"{desc}: attribute '{a.name}' is given twice")
        given.add(a.name)
    required = [name for name, (_, needed, default) in schema.items() if needed and default is None]
    lacking = next((name for name in required if name not in given), None)
    if lacking:
        raise GraphError(f"{desc}: required attribute '{lacking}' is missing")


def _count_problem(what: str, names, formals) -> str | None:
    """What is wrong with a node's count of inputs (or outputs) against the schema's formals: at
    most one per formal (any number for a variadic last one), each required one given (not empty)."""
    variadic = bool(formals) and formals[-1].option not in ("", OPTIONAL)
    most = math.inf if variadic else len(formals)
    if len(names) > most:
        return f"{len(names)} {what}s where the op takes at most {most}"
    for k, f in enumerate(formals):
        if f.option != OPTIONAL and (k >= len(names) or not names[k]):
            return f"{what} {k} ('{f.name}') is required but not given"
    return None
