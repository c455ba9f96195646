"""ONNX <-> ge IR."""
from .importer import load_onnx, parse_input_shape, parse_out_nodes

__all__ = ["load_onnx", "parse_input_shape", "parse_out_nodes"]
