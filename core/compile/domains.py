"""The operator domains a model may use: those ge has kernels for. A node of any other domain
(a custom op library, `com.example`) is refused when the model is read, naming node and domain,
even a node the optimizer would drop: onnxruntime refuses such a model too, and an OM compiled
from it would not say what it lost."""
from __future__ import annotations

from ..errors import UnsupportedOpError
from ..ir import Graph
from ..kernels.registry import kernel_classes


def implemented_domains() -> set[str]:
    return {cls.domain for cls in kernel_classes()}


def check_domains(graph: Graph) -> Graph:
    known = implemented_domains()
    for node in graph.nodes:
        if ("" if node.domain == "ai.onnx" else node.domain) not in known:
            shown = ", ".join(sorted(d or "ai.onnx" for d in known))
            raise UnsupportedOpError(f"node '{node.name}' ({node.domain}::{node.op_type}): domain '{node.domain}' is "
                                     f"not implemented by ge (it implements {shown})")
    return graph
