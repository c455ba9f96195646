"""Fold what surrounds a MatMul into one ge::FusedMatMul task (kernels/matmul.py).

Why: in a transformer every MatMul comes with small passes over its operands or product: the
bias Add of each projection, the attention scores' Div by sqrt(d) and mask Add, the Transposes
that move heads in and out of the batch dims. As separate tasks each one is a full pass over a
feature map and a tensor to plan. Folded, the transposes are strided views BLAS reads and writes
directly, and scale and add run in place on the product while it is still in cache.

Recognized around a MatMul whose operands have rank >= 2:
- Transpose feeding A or B (read only by this MatMul) whose matrix view keeps the unit-stride
  axis among the last two (BLAS takes it as a transposed or strided matrix, numpy copies nothing),
  but one that moves only axes of size 1 (a view already: compile/build.py);
- then, along the product's only reader: Mul or Div by a scalar constant (alpha), up to two Adds
  of tensors broadcasting to the product without enlarging it (a bias, then a residual or mask;
  fused activations of the last one move along), a Gelu (activation="Gelu": the native GEMM
  applies it as it stores), or a Transpose of the result under the same strided-view condition
  (perm_y).
A MatMul that already has an epilogue only takes its input transposes.
Through a Reshape: the product (after its bias Add, if any), or a 2-D Gemm (transA 0, beta 1: its C
is the bias), reshaped by a Reshape that keeps its last dim (only leading dims merge or split, so
the product's row-major bytes are the reshaped tensor's) and then added to a computed residual of
exactly the Add's shape (GPT-2's Conv1D as HF exports it: Reshape/Gemm/Reshape, then the residual
Add) takes the residual as an addend, seen in the product's shape through a Reshape of its own (a
view); the Add's output is the product's, reshaped as before. A decoding step's residual then is
added by the GEMV as it stores, not by a task of its own.
The int8 product MatMulIntegerToFloat (fuse_qdq's) takes the Gelu that alone reads it the same way.
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Graph, Node, Value
from ..kernels.epilogue import ATTR as EPILOGUE
from ..kernels.dtypes import is_float
from ..kernels.fused import GE_DOMAIN
from ..kernels.values import moves_only_ones
from ._fusion import Matcher, known_dims, same_dim
from ._nominal import Sizes
from ._util import set_initializer, unique_name

MAX_ADDENDS = 2  # a bias and a residual (or a mask)


def fuse_matmul(graph: Graph, stats: dict | None = None) -> Graph:
    m, sizes = Matcher(graph), Sizes(graph)
    counts = {"fused": 0, "transposes": 0, "scales": 0, "adds": 0, "gelus": 0}
    for mm in list(graph.nodes):
        if mm.op_type == "Gemm" and mm.domain == "" and not m.removed(mm):
            if _fuse_gemm_residual(m, sizes, mm):
                counts["fused"] += 1
                counts["adds"] += 1
            continue
        if mm.op_type != "MatMul" or mm.domain != "" or m.removed(mm) or len(mm.inputs) != 2:
            continue
        metas = [m.meta(i) for i in mm.inputs]
        if any(s is None or len(s) < 2 or dt is None or not is_float(dt) for dt, s in metas):
            continue
        dtype = metas[0][0]
        inputs, attrs, group = list(mm.inputs), {}, [mm]
        for i, key in ((0, "perm_a"), (1, "perm_b")):
            t = m.sole_producer(inputs[i], mm)
            perm = _perm(m, t)
            if perm is not None and len(perm) - 1 in perm[-2:] and not _moves_only_ones(m, t, perm):
                inputs[i], attrs[key] = t.inputs[0], list(perm)
                group.append(t)
                counts["transposes"] += 1
        y, epilogue = mm.outputs[0], mm.attrs.get(EPILOGUE)
        nxt = None if epilogue else m.sole_consumer(mm)
        if nxt is not None and nxt.op_type in ("Mul", "Div"):
            other = m.other_input(nxt, y)
            v = m.scalar_value(other)
            if v and (nxt.op_type == "Mul" or nxt.inputs[0] == y) and m.meta(other)[0] == dtype:
                attrs["alpha"] = v if nxt.op_type == "Mul" else 1.0 / v
                group.append(nxt)
                y, nxt = nxt.outputs[0], m.sole_consumer(nxt)
                counts["scales"] += 1
        while nxt is not None and nxt.op_type == "Add" and len(inputs) < 2 + MAX_ADDENDS:
            other = m.other_input(nxt, y)
            if not other or not _broadcasts_into(m, sizes, other, y, dtype):
                break
            inputs.append(other)
            group.append(nxt)
            epilogue = nxt.attrs.get(EPILOGUE)
            y, nxt = nxt.outputs[0], None if epilogue else m.sole_consumer(nxt)
            counts["adds"] += 1
        if len(inputs) < 2 + MAX_ADDENDS and _fuse_through_reshape(m, group, nxt, mm, inputs, y, attrs, dtype):
            counts["adds"] += 1
            counts["fused"] += 1
            continue
        if nxt is not None and _is_gelu(nxt, y):  # BERT's intermediate: Gelu(x W + b)
            attrs["activation"] = "Gelu"
            group.append(nxt)
            y, nxt = nxt.outputs[0], None
            counts["gelus"] += 1
        if nxt is not None and nxt.op_type == "Transpose":
            perm = _perm(m, nxt)
            if perm is not None and len(perm) - 1 in [int(i) for i in np.argsort(perm)][-2:]:
                attrs["perm_y"] = list(perm)
                group.append(nxt)
                y = nxt.outputs[0]
                counts["transposes"] += 1
        if len(group) == 1:
            continue
        m.replace(group, _fused(mm, inputs, y, attrs, epilogue))
        counts["fused"] += 1
    for mm in list(graph.nodes):  # the int8 products of quantize_dynamic's models
        if mm.op_type == "MatMulIntegerToFloat" and mm.domain == "com.microsoft" and not m.removed(mm) \
                and "activation" not in mm.attrs:
            nxt = m.sole_consumer(mm)
            if nxt is not None and _is_gelu(nxt, mm.outputs[0]):
                m.replace([mm, nxt], Node(mm.op_type, list(mm.inputs), list(nxt.outputs), dict(mm.attrs, activation="Gelu"),
                                          name=mm.name, domain=mm.domain))
                counts["gelus"] += 1
    m.commit()
    if stats is not None:
        for k, v in counts.items():
            stats[k] = stats.get(k, 0) + v
    return graph


def _fused(mm: Node, inputs: list, y: str, attrs: dict, epilogue) -> Node:
    if epilogue:
        attrs[EPILOGUE] = epilogue
    return Node("FusedMatMul", inputs, [y], attrs, name=mm.name, domain=GE_DOMAIN)


def _fuse_gemm_residual(m: Matcher, sizes: Sizes, gemm: Node) -> bool:
    """Gemm -> Reshape -> residual Add as one FusedMatMul (the module doc), when FusedMatMul computes
    the Gemm: A not transposed, C (if any, and beta 1) broadcasting to the product as its first
    addend, B's transpose as perm_b, alpha as alpha; no epilogue yet (the residual comes before it)."""
    if gemm.attrs.get(EPILOGUE) or int(gemm.attrs.get("transA", 0)) or len(gemm.inputs) not in (2, 3) \
            or len(gemm.outputs) != 1:
        return False
    (dtype, a_shape), (b_dtype, b_shape) = m.meta(gemm.inputs[0]), m.meta(gemm.inputs[1])
    if dtype is None or not is_float(dtype) or b_dtype != dtype or len(a_shape) != 2 or len(b_shape) != 2:
        return False
    y = gemm.outputs[0]
    inputs, attrs = list(gemm.inputs[:2]), {}
    c = gemm.inputs[2] if len(gemm.inputs) == 3 else ""
    beta = float(gemm.attrs.get("beta", 1.0))
    if c and beta != 0.0:
        if beta != 1.0 or not _broadcasts_into(m, sizes, c, y, dtype):
            return False
        inputs.append(c)
    if int(gemm.attrs.get("transB", 0)):
        attrs["perm_b"] = [1, 0]
    if float(gemm.attrs.get("alpha", 1.0)) != 1.0:
        attrs["alpha"] = float(gemm.attrs["alpha"])
    return _fuse_through_reshape(m, [gemm], m.sole_consumer(gemm), gemm, inputs, y, attrs, dtype)


def _fuse_through_reshape(m: Matcher, group: list[Node], reshape: Node | None, product: Node, inputs: list,
                          y: str, attrs: dict, dtype) -> bool:
    """`group` (the product's nodes, y its output), `reshape` and the residual Add after it as one
    FusedMatMul between the two Reshapes of _through_reshape, when _residual_after_reshape finds them."""
    found = _residual_after_reshape(m, reshape, y, dtype)
    if found is None:
        return False
    add, residual = found
    before, after = _through_reshape(m, reshape, add, residual, y, inputs)
    m.replace(group + [reshape, add], [before, _fused(product, inputs, y, attrs, add.attrs.get(EPILOGUE)), after])
    return True


def _residual_after_reshape(m: Matcher, reshape: Node | None, y: str, dtype) -> tuple[Node, str] | None:
    """(the Add, its residual) when `reshape`, y's only reader, keeps y's last dim (only leading dims
    merge or split: y's row-major bytes are the reshaped tensor's) and its output's only reader is an
    Add of a computed tensor of y's dtype and exactly the Add's shape (no broadcasting), else None.
    y's dims but the first must be known: the residual is seen in y's shape through [-1, y's others]."""
    if reshape is None or reshape.op_type != "Reshape" or reshape.domain != "" or reshape.inputs[:1] != [y] \
            or len(reshape.outputs) != 1:
        return None
    r = reshape.outputs[0]
    add = m.sole_consumer(reshape)
    if add is None or add.op_type != "Add" or add.domain != "" or len(add.outputs) != 1:
        return None
    residual = m.other_input(add, r)
    if not residual or residual in m.graph.initializers:  # (the native plans take a constant as a bias only)
        return None
    (_, y_shape), (_, r_shape), (res_dtype, res_shape) = m.meta(y), m.meta(r), m.meta(residual)
    out_dtype, out_shape = m.meta(add.outputs[0])
    if None in (y_shape, r_shape, res_shape, out_shape) or res_dtype != dtype or out_dtype not in (None, dtype):
        return None
    if len(y_shape) < 2 or not known_dims(y_shape[1:]) or not same_dim(r_shape[-1], y_shape[-1]):
        return None
    if not len(res_shape) == len(r_shape) == len(out_shape) or \
            not all(same_dim(a, b) and same_dim(b, c) for a, b, c in zip(res_shape, r_shape, out_shape)):
        return None
    return add, residual


def _through_reshape(m: Matcher, reshape: Node, add: Node, residual: str, y: str, inputs: list) -> tuple[Node, Node]:
    """The Reshape showing the residual in y's shape (appended to inputs as the last addend) and the
    Reshape of the fused product's y into the Add's output, as the original Reshape did."""
    g = m.graph
    dtype, y_shape = m.meta(y)
    shape = unique_name(g, f"{residual}:rows_shape")
    set_initializer(g, shape, np.array([-1, *y_shape[1:]], np.int64))
    rows = unique_name(g, f"{residual}:rows")
    g.values[rows] = Value(rows, dtype, tuple(y_shape))
    inputs.append(rows)
    name = add.name or reshape.name
    return (Node("Reshape", [residual, shape], [rows], {"allowzero": 0}, name=f"{name}:residual_rows"),
            Node("Reshape", [y, reshape.inputs[1]], list(add.outputs), dict(reshape.attrs), name=reshape.name))


def _is_gelu(node: Node, y: str) -> bool:
    """Gelu (erf form) of y alone: ge's from fuse_gelu, or ONNX's (opset 20) with approximate none."""
    if node.op_type != "Gelu" or node.inputs[:1] != [y] or len(node.inputs) != 1 or node.attrs.get(EPILOGUE):
        return False
    approximate = node.attrs.get("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    return node.domain in (GE_DOMAIN, "") and approximate == "none"  # the native GEMM applies the erf form only


def _perm(m: Matcher, t: Node | None) -> tuple | None:
    """A Transpose's permutation (the default reverses the axes), or None when t is no Transpose."""
    if t is None or t.op_type != "Transpose" or t.domain != "" or not t.inputs:
        return None
    _, shape = m.meta(t.inputs[0])
    if shape is None:
        return None
    perm = t.attrs.get("perm")
    perm = tuple(int(p) for p in perm) if perm is not None else tuple(range(len(shape)))[::-1]
    return perm if sorted(perm) == list(range(len(shape))) else None


def _moves_only_ones(m: Matcher, t: Node, perm: tuple) -> bool:
    """The Transpose moves only axes of size 1: the compiler makes it a view (no task), and the
    product reading that view as it is keeps its plain form (a decoding step's head split, [1, 1,
    heads, d] -> [1, heads, 1, d], times a constant: the GEMV on heads rows, not a batch of 1-row
    products)."""
    _, shape = m.meta(t.inputs[0])
    return known_dims(shape) and moves_only_ones(shape, perm)


def _broadcasts_into(m: Matcher, sizes: Sizes, c: str, y: str, dtype) -> bool:
    """The addend broadcasts to the product without enlarging it: each of its dims is 1 or the
    product's own (same int or same symbol), or, in a dynamic graph whose dims onnx left as fresh
    symbols, so at both nominal input sizes (passes/_nominal.py; the FusedMatMul checks its addends'
    shapes at run time and names the node); an undecidable dim keeps the Add a task of its own."""
    (c_dtype, c_shape), (_, y_shape) = m.meta(c), m.meta(y)
    if c_shape is None or y_shape is None or c_dtype != dtype or len(c_shape) > len(y_shape):
        return False
    if all(d == 1 or same_dim(d, e) for d, e in zip(c_shape[::-1], y_shape[::-1])):
        return True
    return all(d == 1 or d == e for d, e in zip(c_shape[::-1], y_shape[::-1]) if isinstance(d, int) and isinstance(e, int)) \
        and sizes.broadcasts_into(c, y)
