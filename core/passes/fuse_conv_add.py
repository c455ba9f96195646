"""Fold a residual Add into the Conv that feeds it: ge::FusedConv(X, W, B, Z) (kernels/conv.py).

Why: a ResNet block ends with Conv -> Add(identity) -> Relu. As tasks the Add (with the Relu fused
onto it by fuse_activation) is one more pass over the block's output, reading two feature maps;
folded, the native GEMM adds Z and applies the Relu as it stores the product.

Recognized: an Add whose one input is the only output of a one-group Conv read only by this Add
(no epilogue of its own), and whose other input has exactly the Conv output's shape and dtype (a
residual, no broadcasting): provably, or in a dynamic graph where onnx gave the two fresh symbols, at
both nominal input sizes (passes/_nominal.py; a Z that broadcasts at another size fails the FusedConv's
check naming the node, never a wrong sum). The FusedConv writes the Add's output and takes its epilogue. Runs
after fuse_activation, so that the Relu already sits on the Add.
"""
from __future__ import annotations

from ..model.ir import Graph, Node
from ..kernels.epilogue import ATTR as EPILOGUE
from ..kernels.dtypes import is_float
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher, same_dim
from ._nominal import Sizes


def fuse_conv_add(graph: Graph, stats: dict | None = None) -> Graph:
    m, sizes = Matcher(graph), Sizes(graph)
    for add in list(graph.nodes):
        if add.op_type != "Add" or add.domain != "" or m.removed(add) or len(add.inputs) != 2:
            continue
        for y in add.inputs:
            conv = m.sole_producer(y, add)
            z = m.other_input(add, y)
            if conv is None or z is None or not _fusable(m, sizes, conv, y, z):
                continue
            inputs = list(conv.inputs) + [""] * (3 - len(conv.inputs)) + [z]
            attrs = {k: v for k, v in conv.attrs.items()}
            if add.attrs.get(EPILOGUE):
                attrs[EPILOGUE] = add.attrs[EPILOGUE]
            m.replace([conv, add], Node("FusedConv", inputs, list(add.outputs), name=conv.name, attrs=attrs,
                                        domain=GE_DOMAIN))
            break
    fused = m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _fusable(m: Matcher, sizes: Sizes, conv: Node, y: str, z: str) -> bool:
    if conv.op_type != "Conv" or conv.attrs.get(EPILOGUE) or int(conv.attrs.get("group", 1)) != 1:
        return False
    (yt, ys), (zt, zs) = m.meta(y), m.meta(z)
    if yt is None or zt is None or yt != zt or not is_float(yt) or len(ys) != len(zs):
        return False
    if all(same_dim(a, b) for a, b in zip(ys, zs)):
        return True
    return all(same_dim(a, b) for a, b in zip(ys, zs) if isinstance(a, int) or isinstance(b, int)) \
        and sizes.alike(y, z, proof=True)
