"""ge's graph IR: ONNX's model, minus protobuf. Formats convert to and from it; passes rewrite it.

The tensor types (types.py) load with the package; the graph classes (graph.py) on first use, as
`from ..ir import Graph` reaches them: a deployed runtime reads Metas and never builds a graph."""
from .types import CAPTURES, DTYPES, STRING, Meta, dtype_from_onnx, dtype_to_onnx, is_onnx_dtype

_GRAPH = ("Graph", "Node", "Value", "stable_topological_order", "subgraphs")

__all__ = ["Meta", "dtype_from_onnx", "dtype_to_onnx", "is_onnx_dtype", "DTYPES", "STRING", "CAPTURES", *_GRAPH]


def __getattr__(name: str):
    if name in _GRAPH:
        from . import graph
        return getattr(graph, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
