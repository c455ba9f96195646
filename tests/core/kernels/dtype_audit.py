"""Which float dtypes each op refuses: for every registered kernel whose op has an ONNX schema, the
first float32 (else float64) single-node backend case of that op (onnx's own attributes and inputs: sensible ones)
is rebuilt with the inputs of its first input's type constraint in each float dtype that
constraint allows (float16, bfloat16, float32, float64), compiled and run on `cpu`. Refusals, at
compile or run, are recorded as `(op, dtype) -> first error line`.

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
from ge.core.errors import GeError
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
def _first_case_of(op: str, domain: str, elem: int):
    for case in all_cases():
        g = case.model.graph
        if case.kind != "node" or "_expanded" in case.name or len(g.node) != 1 or not case.data_sets:
            continue
        n = g.node[0]
        if n.op_type != op or (n.domain or "") not in (domain, "ai.onnx" if domain == "" else domain):
            continue
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
    return model, inputs


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


def audit_op(op: str, domain: str = "") -> dict[str, str]:
    """{dtype name: first error line} for the float dtypes op's schema allows that ge refuses."""
    refused = {}
    for dtype in float_types(op, domain):
        try:
            run_ge(*case_as(op, domain, dtype))
        except GeError as e:
            refused[dtype] = str(e).splitlines()[0][:200]
    return refused


def audited_ops() -> list[tuple[str, str]]:
    ops = sorted({(cls.domain, cls.op_type) for cls in kernel_classes()})
    return [(d, op) for d, op in ops if _schema(op, d) is not None and _first_case(op, d) is not None]


def audit() -> dict[tuple[str, str], str]:
    return {(op, dt): msg for d, op in audited_ops() for dt, msg in audit_op(op, d).items()}


if __name__ == "__main__":
    for (op, dt), msg in sorted(audit().items()):
        print(f"{op:28s} {dt:9s} {msg}")
