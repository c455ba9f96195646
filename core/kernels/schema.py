"""An op's attributes as its ONNX schema declares them (onnx.defs at the node's opset): the
defaults the compiler writes into every task, so that the OM states each op's full attribute set
and a kernel reads what the spec says, not a default of its own. Ops outside onnx's schemas (ge's
fused ops, unknown domains) have none."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
from onnx import AttributeProto, helper, numpy_helper


@lru_cache(maxsize=None)
def attribute_defaults(domain: str, op_type: str, opset: int) -> dict:
    """{attribute: default value} of the schema of op_type at opset (ONNX's own value types:
    str for STRING, lists for INTS/FLOATS/STRINGS, ndarray for TENSOR)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return {}
    out = {}
    for name, a in schema.attributes.items():
        d = a.default_value
        if a.required or d is None or not d.type:
            continue
        out[name] = _value(d)
    return out


def _value(a: AttributeProto):
    if a.type == AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, list):
        return [x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v
