"""Which dtypes each op refuses: for every registered kernel whose op has an ONNX schema, a
single-node backend case of that op (onnx's own attributes and inputs: sensible ones; the first
float32, else float64, case when there is one, else the first numeric one) is rebuilt, for each type
parameter of the schema that binds one of its inputs (T, T1, T2, Tind, ...), with every input and
output of that parameter in each type the parameter allows (float16, bfloat16, float32, float64, the
8- to 64-bit integers, bool), input values converted by numpy, other outputs' types left to
inference; compiled and run on `cpu`. Refusals at compile or run, crashes, and results in another
dtype than the model declares are recorded as `(op, parameter, dtype) -> first error line`.

Outside the audit: string, complex, float8/float4 and int4/uint4 types; parameters only an
attribute sets (Cast's T2, the random ops' T); ops whose cases hold strings, sequences, optionals
or subgraphs (their bodies declare their own types).

Run `python -m tests.core.kernels.dtype_audit` to print today's table."""
from __future__ import annotations

import functools
import os
import tempfile

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto

from ge.core import api
from ge.core.model.errors import GeError
from ge.core.kernels.registry import kernel_classes
from tests.conformance.cases import all_cases

FLOAT_TYPES = {"float16": (TensorProto.FLOAT16, np.float16), "bfloat16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
               "float": (TensorProto.FLOAT, np.float32), "double": (TensorProto.DOUBLE, np.float64)}
NAMES = {"float16": "float16", "bfloat16": "bfloat16", "float": "float32", "double": "float64"}


def _schema(op: str, domain: str):
    try:
        return onnx.defs.get_schema(op, domain)
    except onnx.defs.SchemaError:
        return None


def _first_case(op: str, domain: str):
    """The first single-node, non-expanded node case of op whose first input is float32 (else float64)."""
    return _first_case_of(op, domain, TensorProto.FLOAT) or _first_case_of(op, domain, TensorProto.DOUBLE)


@functools.cache
def _single_node_cases() -> dict:
    """{op type: the single-node, non-expanded node cases with data of that op, in all_cases() order}:
    the audit looks cases up by op, for some 200 ops (a scan of all 2,000 cases each took seconds)."""
    found: dict = {}
    for case in all_cases():
        g = case.model.graph
        if case.kind == "node" and "_expanded" not in case.name and len(g.node) == 1 and case.data_sets:
            found.setdefault(g.node[0].op_type, []).append(case)
    return found


def _cases_of(op: str, domain: str) -> list:
    """_single_node_cases() of op in domain ("" also matches "ai.onnx")."""
    return [c for c in _single_node_cases().get(op, ())
            if (c.model.graph.node[0].domain or "") in (domain, "ai.onnx" if domain == "" else domain)]


@functools.cache
def _first_case_of(op: str, domain: str, elem: int):
    for case in _cases_of(op, domain):
        g = case.model.graph
        if g.input and g.input[0].type.tensor_type.elem_type == elem:
            return case
    return None


def _retyped(case, schema, elem: int, np_type):
    """The case's model and first data set with every input/output of input 0's type constraint in elem."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    node = g.node[0]
    tstr = schema.inputs[0].type_str
    same_in = {node.input[i] for i, f in enumerate(schema.inputs[:len(node.input)])
               if f.type_str == tstr and f.option != onnx.defs.OpSchema.FormalParameterOption.Variadic or i == 0}
    if schema.inputs and schema.inputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic \
            and schema.inputs[-1].type_str == tstr:
        same_in |= set(node.input[len(schema.inputs) - 1:])
    same_out = {node.output[i] for i, f in enumerate(schema.outputs[:len(node.output)]) if f.type_str == tstr}
    inputs = list(case.data_sets[0][0])
    source = g.input[0].type.tensor_type.elem_type  # float32 or float64
    for k, vi in enumerate(g.input):
        if vi.name in same_in and vi.type.tensor_type.elem_type == source:
            vi.type.tensor_type.elem_type = elem
            inputs[k] = np.asarray(inputs[k], np.float32).astype(np_type)
    for vi in g.output:
        if vi.name in same_out and vi.type.tensor_type.elem_type == source:
            vi.type.tensor_type.elem_type = elem
    onnx_name = next(name for name, (e, _) in FLOAT_TYPES.items() if e == elem)
    _opset_allowing(model, node.op_type, node.domain or "", tstr, f"tensor({onnx_name})")
    return model, inputs


def _opset_allowing(model: onnx.ModelProto, op: str, domain: str, param: str, type_str: str) -> None:
    """Raise the model's opset of op's domain to the newest schema's when the case's own opset
    predates type_str in `param` (bool ReduceMax is opset 20's; onnx's case is opset 18): ge checks a
    node's types against its schema at its opset, as onnxruntime does."""
    opset = next(o for o in model.opset_import if o.domain in ((domain, "ai.onnx") if domain == "" else (domain,)))
    older = {c.type_param_str: c.allowed_type_strs for c in onnx.defs.get_schema(op, opset.version, domain).type_constraints}
    if param in older and type_str not in older[param]:
        opset.version = _schema(op, domain).since_version


def float_types(op: str, domain: str = "") -> list[str]:
    """The float dtypes (numpy names) op's schema allows for its first input."""
    schema = _schema(op, domain)
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    strs = allowed.get(schema.inputs[0].type_str, [schema.inputs[0].type_str])
    return [NAMES[t] for t in FLOAT_TYPES if f"tensor({t})" in strs]


def case_as(op: str, domain: str, dtype: str):
    """(model, inputs): op's first float32 (else float64) node case with input 0's type constraint in dtype."""
    onnx_name = {v: k for k, v in NAMES.items()}[dtype]
    elem, np_type = FLOAT_TYPES[onnx_name]
    return _retyped(_first_case(op, domain), _schema(op, domain), elem, np_type)


def run_ge(model: onnx.ModelProto, inputs: list) -> list[np.ndarray]:
    """model compiled by ge and run on cpu (GeError when ge refuses it)."""
    with tempfile.TemporaryDirectory(prefix="ge-dtype-audit-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        out = api.atc(path, os.path.join(tmp, "model"),
                      input_shape={vi.name: list(np.shape(x)) for vi, x in zip(model.graph.input, inputs)
                                   if isinstance(x, np.ndarray)} or None)
        model_id = api.load_from_file(out.om_path, "cpu")
        try:
            names = [d.name for d in api.model(model_id).inputs]
            by_name = dict(zip([vi.name for vi in model.graph.input], inputs))
            with np.errstate(all="ignore"):
                return api.execute(model_id, [by_name[n] for n in names])
        finally:
            api.unload(model_id)


#: the tensor types the constraint audit retypes to (ONNX type string -> elem type, numpy type); the
#: others a schema may allow (string, complex, the float8/float4 and int4/uint4 types) are outside it
AUDITED_TYPES = {f"tensor({k})": v for k, v in FLOAT_TYPES.items()}
AUDITED_TYPES.update({f"tensor({name})": (getattr(TensorProto, name.upper()), np.dtype(name).type)
                      for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")})
AUDITED_TYPES["tensor(bool)"] = (TensorProto.BOOL, np.bool_)


@functools.cache
def _numeric_cases(op: str, domain: str) -> tuple:
    """op's single-node, non-expanded node cases with data and numeric tensors only: the float one the
    float audit uses first, then the others in name order."""
    first = _first_case(op, domain)
    found = [first] if first is not None and _numeric(first) else []
    found += [case for case in _cases_of(op, domain) if case is not first and _numeric(case)]
    return tuple(found)


def _bound(case, schema) -> set[str]:
    """The type parameters that bind an input of the case."""
    return set(_formals(schema.inputs, case.model.graph.node[0].input).values())


def _case_for(op: str, domain: str, param: str):
    """The first of op's numeric cases with an input of type parameter `param`."""
    schema = _schema(op, domain)
    return next(c for c in _numeric_cases(op, domain) if param in _bound(c, schema))


def _numeric(case) -> bool:
    """Every input and output a numeric tensor (no strings, sequences or optionals to retype around),
    and no subgraph (a body declares its own types: retyping the node alone makes an invalid model)."""
    g = case.model.graph
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in g.node[0].attribute):
        return False
    return all(vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type != TensorProto.STRING
               for vi in (*g.input, *g.output))


def _formals(params, names) -> dict[str, str]:
    """{tensor name: its formal parameter's type string} for a node's inputs or outputs."""
    out = {}
    for i, name in enumerate(names):
        if not name or not params:
            continue
        p = params[min(i, len(params) - 1)]
        if i < len(params) or p.option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            out[name] = p.type_str
    return out


def constraints(op: str, domain: str = "") -> dict[str, list[str]]:
    """{type parameter: the audited types it allows} for the parameters that bind an input of one of
    op's cases (a parameter only an attribute sets, as Cast's T2, is not retyped)."""
    schema = _schema(op, domain)
    bound = set().union(*(_bound(c, schema) for c in _numeric_cases(op, domain)))
    return {c.type_param_str: [t for t in c.allowed_type_strs if t in AUDITED_TYPES]
            for c in schema.type_constraints if c.type_param_str in bound}


def retyped(op: str, domain: str, param: str, type_str: str):
    """(model, inputs): op's first case with an input of `param`, every input and output bound to
    `param` in type_str (input values converted with numpy's astype)."""
    schema, case = _schema(op, domain), _case_for(op, domain, param)
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    elem, np_type = AUDITED_TYPES[type_str]
    ins = {n for n, t in _formals(schema.inputs, g.node[0].input).items() if t == param}
    outs = {n for n, t in _formals(schema.outputs, g.node[0].output).items() if t == param}
    inputs = list(case.data_sets[0][0])
    with np.errstate(all="ignore"):
        for k, vi in enumerate(g.input):
            if vi.name in ins and isinstance(inputs[k], (np.ndarray, np.generic)):
                vi.type.tensor_type.elem_type = elem
                inputs[k] = np.asarray(inputs[k]).astype(np_type)
    for vi in g.output:  # another output's type may follow (OptionalGetElement's V its O): ge's to say
        vi.type.tensor_type.elem_type = elem if vi.name in outs else 0
    _opset_allowing(model, op, domain, param, type_str)
    return model, inputs


def audit_constraint(op: str, domain: str, param: str) -> dict[str, str]:
    """{type: why} for the types `param` allows that ge refuses, crashes on, or answers in another
    dtype than the model declares."""
    failed = {}
    for type_str in constraints(op, domain)[param]:
        model, inputs = retyped(op, domain, param, type_str)
        try:
            got = run_ge(model, inputs)
        except GeError as e:
            failed[type_str] = str(e).splitlines()[0][:200]
            continue
        except Exception as e:  # a crash is a bug the audit must show, not hide
            failed[type_str] = f"crash: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            continue
        for vi, y in zip(model.graph.output, got):
            elem = vi.type.tensor_type.elem_type
            want = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else None
            if isinstance(y, np.ndarray) and want is not None and y.dtype != want:
                failed[type_str] = f"output '{vi.name}' is {y.dtype}, the model declares {np.dtype(want).name}"
                break
    return failed


def audited_ops() -> list[tuple[str, str]]:
    """(domain, op) of every registered kernel whose op has a schema and a node case to retype."""
    ops = sorted({(cls.domain, cls.op_type) for cls in kernel_classes()})
    return [(d, op) for d, op in ops if _schema(op, d) is not None and _numeric_cases(op, d)]


def audit() -> dict[tuple[str, str, str], str]:
    """{(op, type parameter, type): why} over every type parameter of every audited op."""
    return {(op, param, np.dtype(AUDITED_TYPES[t][1]).name): msg for d, op in audited_ops() for param in constraints(op, d)
            for t, msg in audit_constraint(op, d, param).items()}


if __name__ == "__main__":
    for (op, param, dt), msg in sorted(audit().items()):
        print(f"{op:24s} {param:6s} {dt:9s} {msg}")
