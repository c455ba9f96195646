"""ONNX ModelProto -> ge IR (core.model.ir.Graph), the front end of `ge atc`.

Two calls: `read_onnx` (steps 1 and 2: the file read and checked, once per compile) and `to_graph`
(steps 3 to 5: a Graph of it for one --input_shape, as often as the compiler needs; it leaves the
model as it was). `load_onnx` is both. What happens, in order, and why:

1. The file is mapped read-only and parsed without the raw data of its big initializers (found by
   wire.py; each becomes a view of the map, aligned or not) and without its external data, which
   is then read by hand, not by onnx's helper: every location must stay
   inside the model's folder and every (offset, length) must fit the file and the tensor's size, so
   a missing or truncated weight file is a FormatError naming the file, not a crash deep in numpy.
2. What onnx's checker refuses but onnxruntime runs is decided one complaint at a time
   (`_tolerate`, `_check_model`): nodes out of order are sorted; an initializer repeated with the
   same values is kept once (with other values it is refused: onnxruntime silently takes the last);
   initializers missing from the inputs of an IR < 4 model are constants; nodes spelling the default
   domain "ai.onnx" are the default domain's; inputs and outputs without a shape are checked with a
   placeholder (--input_shape gives inputs theirs), a main graph without a name as a named one, an
   IR 1-2 model with opset imports as IR 3; a graph input whose initializer has another
   element type is refused (onnxruntime refuses it; the checker does not look), and a Constant
   without exactly one value attribute (onnxruntime refuses it too). Then onnx's checker
   runs on the proto with the big plain raw initializers as typed inputs (a model of kilobytes; the
   checker's tensor checks pass them whatever their bytes), or on the file when the proto would
   exceed 2 GB, and refuses the rest: attributes of the wrong type, unknown attributes, an IR
   version newer than onnx knows (onnxruntime refuses those too). A plain model (read_onnx's
   own_check: the compiler's core/compile/onnx_check.py) is checked by ge instead.
3. `input_shape` (ATC's --input_shape) replaces the dims of the named inputs; afterwards no input
   may keep a symbolic dim: ATC compiles static graphs, so the error says which --input_shape fixes it.
4. onnx's shape inference (with data propagation) runs on a copy whose big initializers are
   turned into typed inputs (their values are never needed for shapes); its results seed the
   Values. ge's own kernels re-infer everything later (core/passes/infer_shapes.py) and use
   onnx's shapes only as a cross-check. A plain model with static inputs skips it (to_graph's
   shapes=False): ge's own inference alone gives its shapes.
5. Nodes, attributes (as plain Python values), initializers (numpy arrays, made once by read_onnx,
   read-only and shared by every Graph of the model) and value infos become the IR. `out_nodes`
   (ATC's --out_nodes) replaces the graph outputs.
"""
from __future__ import annotations

import contextlib
import math
import mmap
import os
import stat
import sys

import numpy as np

from ...core.model.log import Logger
from ...core.model.errors import FormatError, GraphError, ShapeError
from ...core.model.ir import DTYPES, Graph, Node, Value, stable_topological_order
from ...core.model.onnx_proto import (AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
                                      TensorProto, TypeProto, ValueInfoProto, check_model, dims_of, infer_shapes,
                                      is_utf8_text, make_tensor_value_info, onnx_opset_version, to_array)
from ...core.model.record import record
from .wire import strip_raw_data

log = Logger("ge.atc")
#: 7..10: model-zoo exports (Upsample, Resize-10 and the old op versions have kernels); up to the newest
#: opset the installed onnx defines (onnx_opset_version()): each node's kernel is looked up at the model's
#: opset (kernels are keyed by their since-version, docs/opsets.md says what changed after 21 and how ge
#: follows it) and a node without one fails the compile (core/atc/conversion.py). Opsets 1..6 are lifted
#: to 7 on load.
MIN_OPSET = 7
#: initializers with more elements than this are hidden from onnx's shape inference (as typed inputs)
_INFER_CONST_LIMIT = 4096
_PROTO_LIMIT = 2**31 - 2**20

__all__ = ["load_onnx", "read_onnx", "to_graph", "OnnxModel", "parse_input_shape", "parse_out_nodes", "MIN_OPSET"]


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def load_onnx(path, input_shape: dict[str, list[int]] | None = None, out_nodes: list[str] | None = None,
              allow_dynamic: bool = False) -> Graph:
    """Load an ONNX model as a ge Graph: read_onnx(path), then to_graph (see there).

    input_shape: {input name: dims} replacing the declared dims (ATC's --input_shape).
    out_nodes: entries "node_name:index", "node_name" (its output 0) or tensor names, selected as
      the graph outputs instead of the model's own (ATC's --out_nodes).
    allow_dynamic: keep symbolic input dims instead of failing (for the dynamic-shape paths).
    """
    return to_graph(read_onnx(path), input_shape, out_nodes, allow_dynamic)


@record
class OnnxModel:
    """An ONNX file read and checked once (the module's steps 1 and 2): the proto, which keeps the
    bytes of the small initializers only (onnx's shape inference reads their values), and every
    initializer of the main graph as a read-only array, made once. Every graph to_graph makes of
    it (a compile's graph, one per gear) shares those arrays: a weight is in memory once."""
    path: str
    proto: ModelProto
    opset: dict
    weights: dict
    #: checked by the compiler's own check (read_onnx): onnx's shape inference is not needed where its inputs are static
    plain: bool = False


def read_onnx(path, own_check=None) -> OnnxModel:
    """The file read, its external data loaded, and checked: a FormatError or GraphError naming the
    file when it is not a model ge can compile. The one read of the file in a compile.
    own_check(model, path, node names): the compiler's own check of a plain model (core/compile/
    onnx_check.py), True where it checked it; onnx's checker checks any other."""
    path = os.fspath(path)
    model, nbytes, raw = _read_model(path)
    _, external_nbytes = _load_external_data(model, path)
    _sort_topologically(model.graph, path)
    raw = _tolerate(model, path, raw)
    _check_input_defaults(model.graph, path)
    detached = _detach_weights(model, raw)
    plain = own_check is not None and own_check(model, path, _node_names(model.graph))
    if not plain:
        _check_model(model, path, detached, nbytes + external_nbytes)
    opset = _opsets(model, path, bounded=plain)
    if opset.get("", MIN_OPSET) < MIN_OPSET:
        model, opset = _upgrade(model, path, opset[""])
    return OnnxModel(path, model, opset, _initializer_arrays(model, path, detached), plain)


def to_graph(model: OnnxModel, input_shape: dict[str, list[int]] | None = None, out_nodes: list[str] | None = None,
             allow_dynamic: bool = False, shapes: bool = True, warn: bool = True) -> Graph:
    """The model as a ge Graph (the module's steps 3 to 5), leaving `model` as it was, so that it
    can be called again (another --input_shape: a gear). Arguments as load_onnx's; a dim of
    `input_shape` that is None is unknown (a gear's: the compiler gives it each gear's value).
    shapes=False: onnx's inference is skipped, the graph has only its inputs' and initializers'
    shapes: for a plain model (read_onnx's own_check) whose inputs are static (allow_dynamic False:
    checked above), whose every shape the compiler's own inference gives (core/atc/conversion.py).
    warn=False: what --input_shape changes is not logged again (a second import of the same model)."""
    g = model.proto.graph
    init_names = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    inputs = []
    for vi in g.input:
        if vi.name not in init_names:  # a copy: --input_shape rewrites its dims
            inputs.append(ValueInfoProto())
            inputs[-1].CopyFrom(vi)
    _apply_input_shape(inputs, input_shape or {}, warn)
    if not allow_dynamic:
        gear_dims = {k: {i for i, d in enumerate(dims) if d is None} for k, dims in (input_shape or {}).items()}
        _require_static_inputs(inputs, gear_dims)

    inferred = _onnx_shapes(model.proto, inputs) if shapes else {}
    return _to_graph(model.proto, model.path, inputs, inferred, model.opset, out_nodes, model.weights)


def parse_input_shape(text: str) -> dict[str, list[int]]:
    """ATC's --input_shape syntax: "name:1,3,224,224;name2:1,128" (a scalar: "name:")."""
    shapes: dict[str, list[int]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise ShapeError(f"--input_shape entry '{part}' is not 'name:d0,d1,...'")
        try:
            shapes[name] = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise ShapeError(f"--input_shape entry '{part}': dims must be integers") from None
    return shapes


def parse_out_nodes(text: str) -> list[str]:
    """ATC's --out_nodes syntax: "node:0;node2:1" (or tensor names), split into entries."""
    return [p.strip() for p in text.split(";") if p.strip()]


# --------------------------------------------------------------------------------------------
# reading and checking
# --------------------------------------------------------------------------------------------
def _read_model(path: str) -> tuple[ModelProto, int, dict]:
    """The model (external data not loaded), the file's size and {initializer index: view of its
    raw data in the file} for the big raw initializers of the main graph, which protobuf never
    sees (wire.strip_raw_data): the file is mapped read-only and only the rest is parsed. Its text
    is checked (_check_text) unless the bytes parsed were found UTF-8 throughout (is_utf8_text)."""
    if not os.path.isfile(path):
        raise FormatError(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a file")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None
    view = memoryview(mapped if mapped is not None else b"")
    model, raw, text_checked = ModelProto(), {}, False
    stripped = strip_raw_data(view, _INFER_CONST_LIMIT + 1)
    if stripped is not None:
        try:
            model.ParseFromString(stripped[0])
            raw = {i: view[offset:offset + n] for i, (offset, n) in stripped[1].items()}
            text_checked = is_utf8_text(stripped[0])
        except Exception:  # parsed whole below, for protobuf's own message
            model = ModelProto()
    if not raw:
        try:
            model.ParseFromString(view)
            text_checked = is_utf8_text(view)
        except Exception as e:  # protobuf DecodeError, RuntimeError, UnicodeDecodeError ...
            raise FormatError(f"{path}: not a valid ONNX model ({_short(e) or type(e).__name__})") from None
        finally:
            view.release()
            if mapped is not None:
                mapped.close()
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise FormatError(f"{path}: not a valid ONNX model (no ir_version or graph)")
    if not text_checked:
        _check_text(model, path)
    return model, size, raw


def _check_text(model: ModelProto, path: str) -> None:
    """Every string field (names, op types, domains, dim names, external-data locations, docs) is
    valid UTF-8. Protobuf parses an invalid one without complaint and hands it over as bytes,
    which would fail far from here (a TypeError in the OM writer, a UnicodeDecodeError in onnx's
    checker): refused now, naming the field."""
    found = _invalid_text(model)
    if found is not None:
        steps, value = found
        raise FormatError(f"{path}: {'.'.join(['model'] + steps[::-1])} is not valid UTF-8 ({bytes(value)[:64]!r})")


#: a field descriptor's (type, repeated), looked up once per field of the model's message types
_FIELD_KINDS: dict = {}


def _field_kind(fd) -> tuple[int, bool]:
    kind = _FIELD_KINDS.get(fd)
    if kind is None:
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        kind = _FIELD_KINDS[fd] = (fd.type, repeated)
    return kind


def _invalid_text(msg):
    """(the field's path steps, innermost first, and its bytes) of the first string field of `msg`
    that is not text, else None. The path is spelled only for that field: a model's walk makes no
    string per message."""
    for fd, value in msg.ListFields():
        kind, repeated = _field_kind(fd)
        if kind == fd.TYPE_STRING:
            for i, v in enumerate(value[:] if repeated else (value,)):  # (a slice: onnx_proto.dims_of says why)
                if type(v) is bytes:
                    return [fd.name + (f"[{i}]" if repeated else "")], v
        elif kind == fd.TYPE_MESSAGE:
            for i, m in enumerate(value[:] if repeated else (value,)):
                found = _invalid_text(m)
                if found is not None:
                    step = fd.name + (f"[{i}]" if repeated else "")
                    if isinstance(m, NodeProto) and isinstance(m.op_type, str):
                        step += f" ({m.op_type})"
                    found[0].append(step)
                    return found
    return None


def _tolerate(model: ModelProto, path: str, raw: dict) -> dict:
    """The checker's complaints onnxruntime tolerates and ge accepts, resolved in `model` (see the
    module's step 2); returns `raw` (_read_model's raw data left in the file, by initializer index)
    renumbered for the initializers kept."""
    changed = False
    graph, seen, kept, kept_raw = model.graph, {}, [], {}
    for i, t in enumerate(graph.initializer):
        if t.name in seen:
            j, first = seen[t.name]
            if first.SerializeToString() != t.SerializeToString() or raw.get(j) != raw.get(i):
                raise FormatError(f"{path}: initializer '{t.name}' is given twice with different values "
                                  f"(onnxruntime silently takes the last); keep one")
            log.info("%s: initializer '%s' is given twice with the same values; kept once", path, t.name)
            changed = True
            continue
        seen[t.name] = (i, t)
        if i in raw:
            kept_raw[len(kept)] = raw[i]
        kept.append(t)
    if changed:
        del graph.initializer[:]
        graph.initializer.extend(kept)
        raw = kept_raw
    if model.ir_version < 4 and graph.initializer:  # IR 3 listed every initializer as an input too
        model.ir_version = 4
    for node in _all_nodes(graph):
        if node.domain == "ai.onnx":
            node.domain = ""
    return raw


def _check_input_defaults(graph: GraphProto, path: str) -> None:
    """A graph input that has an initializer (its default value, IR 4 on) is declared of the
    initializer's element type: ge takes the initializer, onnxruntime refuses the two apart."""
    declared = {vi.name: vi.type.tensor_type.elem_type for vi in graph.input if vi.type.HasField("tensor_type")}
    for t in graph.initializer if declared else ():
        elem = declared.get(t.name)
        if elem and elem != t.data_type:
            raise GraphError(f"{path}: graph input '{t.name}' is declared {_type_name(elem)}, its initializer (the "
                             f"input's default value) {_type_name(t.data_type)}")


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else str(elem_type)


def _all_nodes(graph: GraphProto):
    for node in graph.node:
        yield node
        for sub in _subgraphs(node):
            yield from _all_nodes(sub)


#: initializer types whose raw data is one element per itemsize (no packed 2-, 4- or 6-bit types)
_PLAIN_RAW_TYPES = frozenset({TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                              TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                              TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64,
                              TensorProto.BFLOAT16})


def _detach_weights(model: ModelProto, raw: dict) -> dict[int, np.ndarray]:
    """The big initializers of the main graph as arrays, their raw data gone from the proto:
    {initializer index: array}; `raw` holds the raw data _read_model left in the file (a weight
    read from there is a view of the file's map, aligned or not: the compiler reads a big weight
    only to fold a constant from it, and the OM writer copies each once, into the file). The checker, the shape inference copy and the
    rest of the import then handle a model of kilobytes. Only
    tensors the checker passes whatever their bytes (plain raw data that fits the dims exactly,
    nothing else) and that onnx's shape inference sees as typed inputs anyway (more than
    _INFER_CONST_LIMIT elements); none of a model the version converter lifts (it reads
    initializers). A tensor not detached gets its raw data back into the proto."""
    eligible = sys.byteorder == "little" and not any(
        o.domain in ("", "ai.onnx") and o.version < MIN_OPSET for o in model.opset_import)
    # before IR 4 the checker wants every initializer among the graph inputs: only those already there leave
    inputs = {vi.name for vi in model.graph.input} if model.ir_version < 4 else None
    detached = {}
    for i, t in enumerate(model.graph.initializer):
        numel = math.prod(dims_of(t))  # (first: most initializers are small, and _plain_raw asks many fields)
        if eligible and numel > _INFER_CONST_LIMIT and (inputs is None or t.name in inputs) and _plain_raw(t):
            data = raw[i] if i in raw else t.raw_data
            dtype = DTYPES[t.data_type]
            if len(data) == numel * dtype.itemsize:
                a = np.frombuffer(data, dtype)
                detached[i] = a.reshape(dims_of(t))
                t.ClearField("raw_data")
                continue
        if i in raw:
            t.raw_data = bytes(raw[i])
    return detached


def _initializer_arrays(model: ModelProto, path: str, detached: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """{name: array} of the main graph's initializers (the detached ones as they are), read-only:
    the graphs made of the model share them. A big initializer's bytes leave the proto once it is
    an array (onnx's shape inference sees it as a typed input): peak memory stays near one model."""
    arrays = {}
    for i, t in enumerate(model.graph.initializer):
        a = detached.get(i)
        if a is None:
            a = _tensor_to_array(t, f"{path}: initializer")
            if a.size > _INFER_CONST_LIMIT:  # (its shape is the tensor's dims)
                t.ClearField("raw_data")
        arrays[t.name] = a
    for s in model.graph.sparse_initializer:
        arrays[s.values.name] = _sparse_to_array(s, f"{path}: sparse initializer")
    for a in arrays.values():
        a.flags.writeable = False
    return arrays


def _plain_raw(t: TensorProto) -> bool:
    """Raw data (if any) and no other data field, in the file, of a type one element per itemsize."""
    return (t.data_type in _PLAIN_RAW_TYPES and t.data_location == TensorProto.DEFAULT and not t.HasField("segment")
            and not (t.float_data or t.int32_data or t.string_data or t.int64_data or t.double_data or t.uint64_data)
            and all(d >= 0 for d in dims_of(t)))


def _check_model(model: ModelProto, path: str, detached: dict, nbytes: int) -> None:
    """onnx's checker, on a copy of the model without the detached weights (they become typed graph
    inputs: the checker's tensor checks would pass them anyway); `nbytes` the model's total size."""
    ios = (*model.graph.input, *model.graph.output)
    untyped = [k for k, o in enumerate(ios) if o.type.WhichOneof("value") is None
               or (o.type.WhichOneof("value") == "tensor_type" and not o.type.tensor_type.HasField("shape"))]
    # onnxruntime takes a main graph without a name and IR version 1-2 with opset imports (the own check
    # does too, onnx_check.py): the checker's copy gets a name and IR 3
    unnamed, old_ir = not model.graph.name, model.ir_version < 3 and bool(model.opset_import)
    checked = model
    if detached or untyped or unnamed or old_ir:  # a copy to edit (small: the detached weights' bytes are not in it)
        checked = ModelProto()
        checked.CopyFrom(model)
    if unnamed:
        checked.graph.name = "graph"
    if old_ir:
        checked.ir_version = 3
    # Graph inputs and outputs without a type or shape are legal for onnxruntime (and common in
    # hand-built models) but the checker rejects them; ge infers outputs anyway and --input_shape
    # gives inputs their shape, so they get a placeholder for the check only.
    checked_ios = (*checked.graph.input, *checked.graph.output)
    for k in untyped:
        o = checked_ios[k]
        if not o.type.tensor_type.elem_type:
            o.type.tensor_type.elem_type = TensorProto.FLOAT
        o.type.tensor_type.shape.SetInParent()
    if detached:
        g = checked.graph
        inputs = {vi.name for vi in g.input}
        for i in detached:
            t = g.initializer[i]
            if t.name not in inputs:
                g.input.append(make_tensor_value_info(t.name, t.data_type, dims_of(t)))
                inputs.add(t.name)
        for i in reversed(detached):  # (indices in ascending order: deleted in place, the others not copied again)
            del g.initializer[i]
    try:
        if nbytes - sum(a.nbytes for a in detached.values()) < _PROTO_LIMIT:
            check_model(checked)
        else:  # too big for one protobuf message: the checker reads the file (and its external data)
            check_model(str(path))
    except Exception as e:
        raise FormatError(f"{path}: ONNX checker: {_short(e)}") from None


def _opsets(model: ModelProto, path: str, bounded: bool = False) -> dict[str, int]:
    """{domain: version}; a model of other domains only (ai.onnx.ml ...) needs no default opset.
    bounded: the own check has taken the default opset as one of ge's tables (onnx is not asked)."""
    opset: dict[str, int] = {}
    for o in model.opset_import:
        opset["" if o.domain in ("", "ai.onnx") else o.domain] = int(o.version)
    v = opset.get("")
    if v is None:
        if any(n.domain in ("", "ai.onnx") for n in model.graph.node):
            raise GraphError(f"{path}: the model imports no default-domain (ai.onnx) opset")
        return opset  # only ops of other domains (an ai.onnx.ml pipeline)
    if not bounded and not 1 <= v <= onnx_opset_version():
        raise GraphError(f"{path}: opset {v} of the default domain (ai.onnx) is not supported; "
                         f"ge supports opsets {MIN_OPSET}..{onnx_opset_version()} (and older ones onnx's version "
                         f"converter lifts to {MIN_OPSET})")
    return opset


def _sort_topologically(graph: GraphProto, path: str, outer: frozenset = frozenset()) -> bool:
    """Put the nodes (and those of every subgraph) in an order where each runs after its
    producers, as onnxruntime and onnx's reference evaluator accept them (exporters and graph
    surgery tools leave unsorted graphs; onnx's checker refuses them). Stable: an already sorted
    graph keeps its order. Returns whether anything moved; a cycle is an error naming its nodes."""
    defined = set(outer) | {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    if _in_order(graph, defined):
        return False
    moved, scope = False, None
    for node in graph.node:  # subgraphs first: they see every name of this scope
        for sub in _subgraphs(node):
            scope = scope or frozenset(defined | {o for n in graph.node for o in n.output})
            moved |= _sort_topologically(sub, path, scope)
    needs = [set(_node_reads(n)) - defined for n in graph.node]
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    order = stable_topological_order([{producer[t] for t in need if t in producer} for need in needs])
    if len(order) < len(graph.node):
        stuck = [graph.node[i].name or graph.node[i].op_type for i in sorted(set(range(len(graph.node))) - set(order))]
        raise GraphError(f"{path}: the graph has a cycle through nodes {stuck[:8]}")
    if order == sorted(order):
        return moved
    nodes = []
    for i in order:
        nodes.append(NodeProto())
        nodes[-1].CopyFrom(graph.node[i])
    del graph.node[:]
    graph.node.extend(nodes)
    return True


def _in_order(graph: GraphProto, defined: set) -> bool:
    """Whether no node has a subgraph and each reads only names defined before it: an exporter's
    order, found in one pass (the sort builds every node's reads and producers first)."""
    defined = set(defined)
    for node in graph.node:
        if not defined.issuperset(node.input[:]):  # (a slice of a repeated field: onnx_proto.dims_of says why)
            return False
        for a in node.attribute[:]:
            if a.type in _PLAIN_ATTRIBUTES:
                continue
            if _holds(a, AttributeProto.GRAPH) or _holds(a, AttributeProto.GRAPHS):
                return False
        defined.update(node.output[:])
    return True


def _node_reads(node: NodeProto):
    """The names a node reads: its inputs and those its subgraphs take from outer scopes."""
    yield from node.input
    for sub in _subgraphs(node):
        inner = {v.name for v in sub.input} | {t.name for t in sub.initializer}
        inner |= {o for n in sub.node for o in n.output}
        yield from (t for n in sub.node for t in _node_reads(n) if t not in inner)


def _subgraphs(node: NodeProto):
    for a in node.attribute[:]:
        if a.type in _PLAIN_ATTRIBUTES:
            continue
        if _holds(a, AttributeProto.GRAPH):
            yield a.g
        if _holds(a, AttributeProto.GRAPHS):
            yield from a.graphs


#: the field of each attribute type whose value is a message or a list of them
_MESSAGE_FIELDS = {AttributeProto.GRAPH: "g", AttributeProto.GRAPHS: "graphs", AttributeProto.TENSOR: "t",
                   AttributeProto.TENSORS: "tensors", AttributeProto.SPARSE_TENSOR: "sparse_tensor"}


#: the attribute types of no message (ints, floats, strings): most attributes, passed over by the walks
#: looking for tensors and graphs without asking _holds
_PLAIN_ATTRIBUTES = frozenset({AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.STRING, AttributeProto.FLOATS,
                               AttributeProto.INTS, AttributeProto.STRINGS})


def _holds(a: AttributeProto, kind: int) -> bool:
    """Whether attribute `a` holds a value of type `kind` (GRAPH, TENSORS ...), told by its type: asking
    the field makes a wrapper of it (an empty list costs as much as 36 type tests). An attribute without
    a type is asked; one whose value is of another type than its own the checker refuses, after the
    steps that look into attributes (external data, the sort, the domains) have passed it by."""
    if a.type:
        return a.type == kind
    field = _MESSAGE_FIELDS[kind]
    return bool(getattr(a, field)) if kind in (AttributeProto.GRAPHS, AttributeProto.TENSORS) else a.HasField(field)


def _upgrade(model: ModelProto, path: str, version: int) -> tuple[ModelProto, dict[str, int]]:
    """A model older than opset 7 (legacy broadcast attributes, is_test, consumed_inputs) converted
    to opset 7 by onnx's version converter, so that ge's kernels see one meaning of each op."""
    from onnx import version_converter
    try:
        model = version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:
        raise GraphError(f"{path}: opset {version} model: onnx's version converter cannot lift it to opset "
                         f"{MIN_OPSET} ({_short(e) or type(e).__name__}); re-export it at opset {MIN_OPSET} or newer") from None
    return model, _opsets(model, path)


def _short(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


# --------------------------------------------------------------------------------------------
# external data
# --------------------------------------------------------------------------------------------
def _all_tensors(model: ModelProto):
    def of_graph(g: GraphProto):
        yield from g.initializer
        for s in g.sparse_initializer:
            yield s.values
            yield s.indices
        for n in g.node[:]:
            subgraphs = []
            for a in n.attribute[:]:
                if a.type in _PLAIN_ATTRIBUTES:
                    continue
                if _holds(a, AttributeProto.TENSOR):
                    yield a.t
                if _holds(a, AttributeProto.TENSORS):
                    yield from a.tensors
                if _holds(a, AttributeProto.SPARSE_TENSOR):
                    yield a.sparse_tensor.values
                    yield a.sparse_tensor.indices
                if _holds(a, AttributeProto.GRAPH):
                    subgraphs.append(a.g)
                if _holds(a, AttributeProto.GRAPHS):
                    subgraphs.extend(a.graphs)
            for sub in subgraphs:  # (after the node's own tensors, as _subgraphs gives them)
                yield from of_graph(sub)
    yield from of_graph(model.graph)


def _expected_nbytes(t: TensorProto) -> int | None:
    if t.data_type not in DTYPES:
        return None
    return math.prod(t.dims) * DTYPES[t.data_type].itemsize


def _load_external_data(model: ModelProto, path: str) -> tuple[int, int]:
    """Read every tensor's external data into the proto; returns (tensors, bytes) read."""
    count = total = 0
    base = os.path.dirname(os.path.realpath(path))
    sizes: dict[str, int] = {}
    for t in _all_tensors(model):
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {kv.key: kv.value for kv in t.external_data}
        where = f"{path}: tensor '{t.name}'"
        location = info.get("location", "")
        if not location:
            raise FormatError(f"{where}: external data without a location")
        if "\0" in location:  # no file system takes one (os calls raise ValueError)
            raise FormatError(f"{where}: external data location {location!r} holds a NUL byte")
        if os.path.isabs(location) or ".." in location.split("/"):
            raise FormatError(f"{where}: external data location '{location}' must be a path inside the model's folder")
        try:
            file = os.path.realpath(os.path.join(base, location))  # links followed: where the bytes are
            if file == base or os.path.commonpath([base, file]) != base:
                raise FormatError(f"{where}: external data location '{location}' leaves the model's folder")
            if file not in sizes:
                try:
                    st = os.stat(file)  # (a name too long, a loop of links ...: the OSError below names it)
                except (FileNotFoundError, NotADirectoryError):
                    st = None
                if st is None or not stat.S_ISREG(st.st_mode):
                    raise FormatError(f"{where}: external data file '{file}' is missing")
                sizes[file] = st.st_size
        except OSError as e:  # a name too long, a loop of links, no permission ...
            raise FormatError(f"{where}: external data location '{location}': {e.strerror or e}") from None
        try:
            offset = int(info.get("offset", 0) or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            raise FormatError(f"{where}: bad external data offset/length {info}") from None
        expected = _expected_nbytes(t)
        if length is None:
            length = expected if expected is not None else sizes[file] - offset
        if offset < 0 or length < 0 or offset + length > sizes[file]:
            raise FormatError(f"{where}: external data file '{file}' is truncated: needs bytes "
                              f"[{offset}, {offset + length}), the file has {sizes[file]}")
        if expected is not None and length != expected:
            raise FormatError(f"{where}: external data in '{file}' has {length} bytes, "
                              f"the tensor (dims {list(t.dims)}) needs {expected}")
        try:
            with open(file, "rb") as f:
                f.seek(offset)
                data = f.read(length)
        except OSError as e:
            raise FormatError(f"{where}: cannot read external data file '{file}' ({e.strerror or e})") from None
        if len(data) != length:
            raise FormatError(f"{where}: external data file '{file}' is truncated")
        t.raw_data = data
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
        count, total = count + 1, total + length
    return count, total


# --------------------------------------------------------------------------------------------
# input shapes
# --------------------------------------------------------------------------------------------
def _dims(vi: ValueInfoProto):
    """Dims of a ValueInfo: int, str (symbolic) or None; None for an unknown rank or a non-tensor."""
    tp = vi.type
    return _tensor_dims(tp.tensor_type) if tp.HasField("tensor_type") else None


def _tensor_dims(tt: TypeProto.Tensor):
    """_dims of a tensor type (each access of a message field makes its wrapper: asked once here)."""
    if not tt.HasField("shape"):
        return None
    out = []
    for d in tt.shape.dim[:]:
        which = d.WhichOneof("value")  # (dim_value and dim_param are a oneof: one call, not two HasField)
        if which == "dim_value":
            out.append(d.dim_value)
        elif which == "dim_param" and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return tuple(out)


def _type_of(tp: TypeProto, where: str) -> tuple[str, int, tuple | None]:
    """(kind, element type, dims) of a value's type: kind "tensor", "sequence" (of tensors),
    "optional" (of a tensor) or "optional_sequence"; sequences and optionals have no dims."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        return "tensor", tt.elem_type, _tensor_dims(tt)
    if which in ("sequence_type", "optional_type"):
        inner = tp.sequence_type.elem_type if which == "sequence_type" else tp.optional_type.elem_type
        kind, elem, _ = _type_of(inner, where)
        if which == "sequence_type" and kind == "tensor":
            return "sequence", elem, None
        if which == "optional_type" and kind in ("tensor", "sequence"):
            return ("optional" if kind == "tensor" else "optional_sequence"), elem, None
        raise GraphError(f"{where} is a {which[:-5]} of {kind} values, which ge does not support")
    if which is None:
        return "tensor", 0, None
    raise GraphError(f"{where} has type {which}, which ge does not support (tensors, sequences and optionals only)")


def _fmt_shape(dims) -> str:
    if dims is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _apply_input_shape(inputs: list[ValueInfoProto], input_shape: dict[str, list[int]], warn: bool = True) -> None:
    by_name = {vi.name: vi for vi in inputs}
    for name, dims in input_shape.items():
        if name not in by_name:
            raise GraphError(f"--input_shape names input '{name}', which the model does not have; "
                             f"its inputs are {[vi.name for vi in inputs]}")
        vi = by_name[name]
        if not vi.type.HasField("tensor_type"):
            raise GraphError(f"input '{name}' is not a tensor; --input_shape cannot apply to it")
        declared = _dims(vi)
        unknown = [d is None for d in dims]  # a gear's dim (to_graph)
        dims = [-1 if d is None else int(d) for d in dims]
        if declared is not None and len(declared) != len(dims):
            raise ShapeError(f"--input_shape gives input '{name}' shape {list(dims)} (rank {len(dims)}), "
                             f"but the model declares {_fmt_shape(declared)} (rank {len(declared)})")
        if any(d < -1 for d in dims):
            raise ShapeError(f"--input_shape gives input '{name}' shape {list(dims)}: dims must be >= 0 "
                             f"(or -1 to keep the model's dim)")
        changed = [(i, d, n) for i, (d, n) in enumerate(zip(declared or (), dims))
                   if isinstance(d, int) and (n >= 0 and n != d or unknown[i])]
        if changed and warn:
            log.warning("--input_shape changes static dim(s) of input '%s' the model declares %s: %s", name,
                        _fmt_shape(declared), ", ".join(f"dim {i} {d} -> {n}" for i, d, n in changed))
        shape = vi.type.tensor_type.shape
        old = list(shape.dim)
        del shape.dim[:]
        for i, d in enumerate(dims):
            nd = shape.dim.add()
            if d >= 0:
                nd.dim_value = d
            elif declared is not None and not unknown[i]:
                nd.CopyFrom(old[i])


def _static(d) -> bool:
    return isinstance(d, int) and d >= 0


def _require_static_inputs(inputs: list[ValueInfoProto], gear_dims: dict[str, set]) -> None:
    """Every input static but for the dims a gear gives (`gear_dims`: {input: dim indices})."""
    bad = []
    for vi in inputs:
        dims = _dims(vi)
        kind, elem, _ = _type_of(vi.type, f"input '{vi.name}'")
        if kind != "tensor" or elem == TensorProto.STRING:
            continue  # a sequence, an optional or strings: no layout to fix, they run on the dynamic path
        geared = gear_dims.get(vi.name, ())
        if dims is None or any(not _static(d) and i not in geared for i, d in enumerate(dims)):
            bad.append((vi.name, dims))
    if not bad:
        return
    parts, hints, dynamic = [], [], []
    for name, dims in bad:
        if dims is None:
            parts.append(f"input '{name}' has an unknown rank")
            hints.append(f"{name}:<d0>,<d1>,...")
            dynamic.append(f"{name}:-1,-1,...")
        else:
            sym = ["?" if d is None else d for d in dims if not _static(d)]
            parts.append(f"input '{name}' has symbolic dims {sym} (shape {_fmt_shape(dims)})")
            hints.append(f"{name}:" + ",".join(str(d) if _static(d) else "1" for d in dims))
            dynamic.append(f"{name}:" + ",".join(str(d) if _static(d) else "-1" for d in dims))
    raise ShapeError("; ".join(parts) + f"; fix them with --input_shape \"{';'.join(hints)}\", or keep them "
                     f"dynamic with --input_shape \"{';'.join(dynamic)}\" (and gears or ranges if you like)")


# --------------------------------------------------------------------------------------------
# onnx shape inference (cross-check and seed)
# --------------------------------------------------------------------------------------------
_KIND = "\0kind:"  # inferred's key of a sequence or optional value's kind (no tensor name starts so)


def _onnx_shapes(model: ModelProto, inputs: list[ValueInfoProto]) -> dict[str, tuple]:
    """Run onnx's shape inference on a light copy; {tensor name: (elem_type, dims)}. Never fails."""
    light = ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g, src = light.graph, model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(inputs)
    for t in src.initializer:
        dims = dims_of(t)
        if math.prod(dims) > _INFER_CONST_LIMIT:
            g.input.append(make_tensor_value_info(t.name, t.data_type, dims))
        else:
            g.initializer.append(t)
    g.sparse_initializer.extend(src.sparse_initializer)
    for o in src.output:  # types only: declared output dims may contradict a changed --input_shape
        vo = g.output.add()
        vo.name = o.name
        if o.type.HasField("tensor_type"):
            vo.type.tensor_type.elem_type = o.type.tensor_type.elem_type
    if light.ir_version < 4:
        light.ir_version = 4  # initializers need not be inputs from ir 4 on
    try:
        out = infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
    except Exception:
        try:
            out = infer_shapes(light, check_type=False, strict_mode=False, data_prop=False)
        except Exception:
            return {}
    found = {}
    for vi in out.graph.value_info[:] + out.graph.output[:]:  # (slices: onnx_proto.dims_of says why)
        tp = vi.type
        which = tp.WhichOneof("value")
        if which == "tensor_type":
            tt = tp.tensor_type
            found[vi.name] = (tt.elem_type, _tensor_dims(tt))
        elif which in ("sequence_type", "optional_type"):
            with contextlib.suppress(GraphError):
                kind, elem, _ = _type_of(vi.type, vi.name)
                found[vi.name] = (elem, None)
                found[_KIND + vi.name] = kind
    for g in _subgraph_protos(out.graph):  # element types inside subgraphs (shapes: ge infers them)
        for vi in list(g.value_info) + list(g.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type and vi.name not in found:
                found[vi.name] = (vi.type.tensor_type.elem_type, None)
    return found


def _subgraph_protos(g: GraphProto):
    for n in g.node[:]:
        for a in n.attribute[:]:
            if a.type == AttributeProto.GRAPH:
                yield a.g
                yield from _subgraph_protos(a.g)


# --------------------------------------------------------------------------------------------
# conversion
# --------------------------------------------------------------------------------------------
def _tensor_to_array(t: TensorProto, where: str) -> np.ndarray:
    data_type = t.data_type
    if data_type not in DTYPES:
        raise GraphError(f"{where}: tensor '{t.name}' has element type {_type_name(data_type)}, which ge does not support")
    try:
        a = to_array(t)
    except Exception as e:
        raise FormatError(f"{where}: tensor '{t.name}' cannot be read ({_short(e)})") from None
    return np.array(a, dtype=DTYPES[data_type], order="C", copy=None)


def _sparse_to_array(s: SparseTensorProto, where: str) -> np.ndarray:
    values = _tensor_to_array(s.values, where)
    indices = to_array(s.indices).astype(np.int64)
    dims = tuple(int(d) for d in s.dims)
    dense = np.zeros(dims, values.dtype)
    numel = dense.size
    if indices.ndim == 1:
        flat = indices
    elif indices.ndim == 2 and indices.shape[1] == len(dims):
        flat = np.ravel_multi_index(tuple(indices.T), dims) if len(indices) else indices[:, 0]
    else:
        raise FormatError(f"{where}: sparse tensor '{s.values.name}' has indices of shape {indices.shape}")
    if len(flat) != values.size or (len(flat) and (flat.min() < 0 or flat.max() >= numel)):
        raise FormatError(f"{where}: sparse tensor '{s.values.name}' has out-of-range indices")
    dense.reshape(-1)[flat] = values.reshape(-1)
    return dense


def _attr_value(a: AttributeProto, node_desc: str):
    t = a.type
    if t == AttributeProto.FLOAT:
        return float(a.f)
    if t == AttributeProto.INT:
        return int(a.i)
    if t == AttributeProto.STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == AttributeProto.INTS:
        return a.ints[:]  # (a list of ints: a slice, onnx_proto.dims_of says why)
    if t == AttributeProto.FLOATS:
        return a.floats[:]
    where = f"{node_desc} attribute '{a.name}'"
    if t == AttributeProto.TENSOR:
        return _tensor_to_array(a.t, where)
    if t == AttributeProto.SPARSE_TENSOR:
        return _sparse_to_array(a.sparse_tensor, where)
    if t == AttributeProto.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in a.strings]
    if t == AttributeProto.TENSORS:
        return [_tensor_to_array(x, where) for x in a.tensors]
    if t == AttributeProto.TYPE_PROTO:  # Optional's type: "<kind>:<element dtype>"
        kind, elem, _ = _type_of(a.tp, where)
        return f"{kind}:{_value(a.name, elem or None, None, where).dtype}"
    if t == AttributeProto.GRAPHS:
        raise GraphError(f"{node_desc}: attribute '{a.name}' is a list of graphs, which no op ge runs takes")
    raise GraphError(f"{where}: attribute type {AttributeProto.AttributeType.Name(t)} is not supported")


def _value(name: str, elem_type: int | None, dims, where: str, kind: str = "tensor") -> Value:
    dtype = None
    if elem_type:
        if elem_type not in DTYPES:
            tname = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
            raise GraphError(f"{where} '{name}' has element type {tname}, which ge does not support")
        dtype = DTYPES[elem_type]
    return Value(name, dtype, None if dims is None else tuple(dims), kind)


def _to_graph(model, path, inputs, inferred, opset, out_nodes, weights: dict) -> Graph:
    src = model.graph
    graph = Graph(name=src.name or os.path.splitext(os.path.basename(path))[0], opset=dict(opset))

    graph.initializers.update(weights)  # shared, read-only: every graph of the model reads the same arrays
    for name, a in graph.initializers.items():
        graph.values[name] = Value(name, a.dtype, a.shape)  # (numpy's shape: a tuple of ints)

    for vi in inputs:
        graph.inputs.append(vi.name)
        kind, elem, dims = _type_of(vi.type, f"input '{vi.name}'")
        graph.values[vi.name] = _value(vi.name, elem, dims, "input", kind)

    scope = _Scope(path, graph.opset, None, graph.initializers, set(graph.values) | _produced(src), inferred)
    for n, name in zip(src.node, _node_names(src)):
        graph.nodes.append(_node(n, name, scope))
        for o in graph.nodes[-1].outputs:
            if o and o not in graph.values:
                elem, dims = inferred.get(o, (None, None))
                graph.values[o] = _value(o, elem, dims, "tensor", inferred.get(_KIND + o, "tensor"))

    # the model's declared value infos fill what inference left unknown (dtype only when shapes moved)
    for vi in src.value_info[:] + src.output[:]:
        v = graph.values.get(vi.name)
        if v is not None and vi.type.WhichOneof("value") in ("sequence_type", "optional_type"):
            v.kind, elem, _ = _type_of(vi.type, f"{path}: value '{vi.name}'")
            v.dtype = v.dtype or _value(vi.name, elem or None, None, "value").dtype
            continue
        if v is not None and v.dtype is None and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            v.dtype = _value(vi.name, vi.type.tensor_type.elem_type, None, "tensor").dtype

    if out_nodes:
        graph.outputs = _select_outputs(graph, out_nodes)
    else:
        graph.outputs = [o.name for o in src.output]
    for o in graph.outputs:
        if o not in graph.values:
            raise GraphError(f"{path}: graph output '{o}' is produced by no node, input or initializer")
    return graph


# --------------------------------------------------------------------------------------------
# subgraphs (If branches, Loop and Scan bodies)
# --------------------------------------------------------------------------------------------
#: a Constant's value attributes: it has exactly one
CONSTANT_VALUES = ("value", "sparse_value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                   "value_strings")


class _Scope:
    """What a graph's nodes may read from the graphs around it: `consts` the initializers of every
    enclosing graph (nearest first wins), `names` every tensor name visible there."""

    def __init__(self, path, opset, outer, consts: dict, names: set, inferred: dict | None = None):
        self.path, self.opset, self.outer = path, opset, outer
        self.inferred = outer.inferred if outer else (inferred or {})
        self.consts = {**(outer.consts if outer else {}), **consts}
        self.names = (outer.names if outer else set()) | names


def _produced(g: GraphProto) -> set:
    return {o for n in g.node[:] for o in n.output[:] if o}


def _node_names(g: GraphProto) -> list[str]:
    """The graph's node names: the model's, with missing or duplicate ones made unique."""
    taken = {n.name for n in g.node if n.name}
    seen: set[str] = set()
    names = []
    for i, n in enumerate(g.node):
        name = n.name
        if not name or name in seen:
            base = f"{n.op_type}_{i}" if not name else f"{name}_{i}"
            name, k = base, 1
            while name in taken or name in seen:
                name, k = f"{base}_{k}", k + 1
        seen.add(name)
        names.append(name)
    return names


def _node(n: NodeProto, name: str, scope: _Scope) -> Node:
    """One node; a control-flow node's subgraphs become Graphs whose outer-scope reads are
    captured: appended to the node's inputs (and to each subgraph's inputs, in the same order)."""
    domain = "" if n.domain in ("", "ai.onnx") else n.domain
    desc = f"node '{name}' ({n.op_type})"
    if n.op_type == "Constant" and domain == "":
        values = [a.name for a in n.attribute if a.name in CONSTANT_VALUES]
        if len(values) != 1:  # (onnxruntime refuses it too, even where no node reads it)
            raise GraphError(f"{scope.path}: {desc}: a Constant holds exactly one of {', '.join(CONSTANT_VALUES)}; "
                             f"it has {' and '.join(values) or 'none'}")
    attrs, bodies = {}, {}
    for a in n.attribute[:]:
        if a.type == AttributeProto.GRAPH:
            bodies[a.name] = _subgraph(a.g, f"{desc} attribute '{a.name}'", scope)
        else:
            attrs[a.name] = _attr_value(a, desc)
    inputs = n.input[:]
    captured: list[str] = []
    for _, reads in bodies.values():
        captured.extend(r for r in reads if r not in captured)
    for key, (body, _) in bodies.items():
        # every subgraph of the node takes the union, so the node's inputs line up with each one
        for r in captured:
            body.inputs.append(r)
            body.value(r)
        body.captures = len(captured)
        attrs[key] = body
    return Node(n.op_type, inputs + captured, n.output[:], attrs, name, domain)


def _subgraph(g: GraphProto, where: str, outer: _Scope) -> tuple[Graph, list[str]]:
    """(graph, names it reads from enclosing graphs). Enclosing initializers it reads are copied
    into it (constants need no capture); other outer names are captured."""
    graph = Graph(name=g.name or "subgraph", opset=dict(outer.opset))
    for t in g.initializer:
        graph.initializers[t.name] = _tensor_to_array(t, f"{outer.path}: {where}: initializer")
    for sp in g.sparse_initializer:
        graph.initializers[sp.values.name] = _sparse_to_array(sp, f"{outer.path}: {where}: sparse initializer")
    declared = {vi.name: vi for vi in list(g.input) + list(g.value_info) + list(g.output)}
    graph.inputs = [vi.name for vi in g.input if vi.name not in graph.initializers]
    defined = set(graph.inputs) | set(graph.initializers) | _produced(g)
    scope = _Scope(outer.path, outer.opset, outer, graph.initializers, defined)
    for n, name in zip(g.node, _node_names(g)):
        graph.nodes.append(_node(n, name, scope))
    graph.outputs = [o.name for o in g.output]
    reads: list[str] = []
    for name in [i for n in graph.nodes for i in n.inputs] + graph.outputs:
        if not name or name in defined or name in reads or name in graph.initializers:
            continue
        if name in outer.consts:
            graph.initializers[name] = outer.consts[name]
        elif name in outer.names:
            reads.append(name)
        else:
            raise GraphError(f"{outer.path}: {where} reads '{name}', which neither the subgraph nor an "
                             f"enclosing graph provides")
    for name, a in graph.initializers.items():
        graph.values[name] = Value(name, a.dtype, a.shape)
    for name, vi in declared.items():
        if name not in graph.values and vi.type.WhichOneof("value") in ("sequence_type", "optional_type"):
            kind, elem, _ = _type_of(vi.type, f"{outer.path}: {where}: value '{name}'")
            graph.values[name] = _value(name, elem or None, None, "value", kind)
        elif name not in graph.values and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            graph.values[name] = _value(name, vi.type.tensor_type.elem_type, _dims(vi), "tensor")
    for name in defined:
        v = graph.value(name)
        elem = outer.inferred.get(name, (None, None))[0]
        if v.dtype is None and elem in DTYPES:
            v.dtype = DTYPES[elem]
    return graph, reads


def _select_outputs(graph: Graph, out_nodes: list[str]) -> list[str]:
    by_node = {n.name: n for n in graph.nodes}
    tensors = set(graph.producers()) | set(graph.inputs)
    outputs: list[str] = []
    for entry in out_nodes:
        entry = entry.strip()
        if not entry:
            continue
        if entry in tensors:
            picked = entry
        else:
            node_name, sep, index = entry.rpartition(":")
            if sep and node_name in by_node and index.strip().lstrip("-").isdigit():
                node, k = by_node[node_name], int(index)
                real = [o for o in node.outputs]
                if not 0 <= k < len(real) or not real[k]:
                    raise GraphError(f"--out_nodes '{entry}': {node} has {len(real)} output(s); "
                                     f"index {k} is out of range")
                picked = real[k]
            elif entry in by_node:
                picked = next((o for o in by_node[entry].outputs if o), None)
                if picked is None:
                    raise GraphError(f"--out_nodes '{entry}': {by_node[entry]} has no outputs")
            else:
                sample = [n.name for n in graph.nodes[:8]]
                raise GraphError(f"--out_nodes '{entry}' names neither a node ('name:index') nor a tensor "
                                 f"of the model (nodes include {sample}{' ...' if len(graph.nodes) > 8 else ''})")
        if picked not in outputs:
            outputs.append(picked)
    if not outputs:
        raise GraphError("--out_nodes selects no outputs")
    return outputs
