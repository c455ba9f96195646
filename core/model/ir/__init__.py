"""ge's graph IR: ONNX's model, minus protobuf. Formats convert to and from it; passes rewrite it."""
from .graph import (CAPTURES, DTYPES, STRING, Graph, Meta, Node, Value, dtype_from_onnx, dtype_to_onnx, is_onnx_dtype,
                    stable_topological_order, subgraphs)

__all__ = ["Graph", "Node", "Value", "Meta", "dtype_from_onnx", "dtype_to_onnx", "is_onnx_dtype", "DTYPES", "STRING",
           "stable_topological_order", "subgraphs", "CAPTURES"]
