"""Shape inference with ge's own kernels.

Why: the compiler plans memory from every tensor's dtype and static shape, and those must be the
shapes the kernels will actually produce. onnx's inference (run by the importer) is a different
implementation; here each node's kernel infers its outputs from its input metas and constant
inputs, in topological order, and onnx's result is kept only as a cross-check: where both are
static and disagree, the graph is rejected naming the node and both shapes.
An op without a kernel is an error here (it names the op type and the node).
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GeError, GraphError, ShapeError
from ..model.ir import Graph
from ._util import build_kernel


def inferred_metas(kernel, node) -> list:
    """kernel.infer(), a failure other than a GeError (a MemoryError of a huge shape, a numpy
    error of an absurd attribute) a GraphError naming the node and its input shapes."""
    try:
        return kernel.infer()
    except GeError:
        raise
    except Exception as e:
        shapes = [None if m is None else list(m.shape) for m in kernel.inputs]
        raise GraphError(f"{node}: shape inference failed for input shapes {shapes}: "
                         f"{type(e).__name__}: {e}") from e


def infer_shapes(graph: Graph, stats: dict | None = None) -> Graph:
    graph.toposort()
    for name in graph.inputs:
        v = graph.value(name)
        if not v.is_static:
            raise ShapeError(f"input '{name}' has no static shape (dtype {v.dtype}, shape {v.shape}); "
                             f"fix it with --input_shape")
    used = set(graph.outputs)
    for n in graph.nodes:
        used.update(n.inputs)  # ("" among them: no output is named so)

    inferred = 0
    for node in graph.nodes:
        metas = inferred_metas(build_kernel(graph, node), node)
        for i, out in enumerate(node.outputs):
            if not out:
                continue
            if i >= len(metas):
                if out in used:
                    raise GraphError(f"{node}: output {i} '{out}' is used, but the kernel produces "
                                     f"only {len(metas)} output(s)")
                node.outputs[i] = ""  # an optional output nobody reads
                graph.values.pop(out, None)
                continue
            m = metas[i]
            dtype, shape = np.dtype(m.dtype), tuple(map(int, m.shape))
            v = graph.value(out)
            if v.shape is not None and tuple(v.shape) != shape and all(isinstance(d, int) and d >= 0 for d in v.shape):
                raise GraphError(f"{node}: output '{out}' has shape {list(shape)} by ge's kernel but "
                                 f"{list(v.shape)} by ONNX shape inference")
            if v.dtype is not None and np.dtype(v.dtype) != dtype:
                raise GraphError(f"{node}: output '{out}' has dtype {dtype} by ge's kernel but "
                                 f"{np.dtype(v.dtype)} by ONNX shape inference")
            v.dtype, v.shape = dtype, shape
            inferred += 1
        while node.outputs and not node.outputs[-1]:
            node.outputs.pop()
    if stats is not None:
        stats["inferred"] = stats.get("inferred", 0) + inferred
    return graph
