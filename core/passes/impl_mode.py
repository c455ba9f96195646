"""ATC's `--op_select_implmode` / `--optypelist_for_implmode` / `--op_precision_mode`: per op, the
exact (high_precision) or the fast (high_performance) implementation, where ge has both.

ge has two implementations of one op: Gelu, exactly 0.5 x (1 + erf(x / sqrt 2)) or the tanh
approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (max. abs. difference ~5e-4).
high_performance turns an exact Gelu into the tanh form; high_precision keeps the model's own
form (a model that asks for the tanh form keeps it: that form is its definition). Every other op
has one implementation, exact to float32 rounding, under either mode.

`modes` = {"default": mode or None, "by_type": {op type: mode}, "by_name": {node name: mode}}; the
node name wins over its op type, which wins over the default (ATC's precedence). No modes: the
model is left as it is.
"""
from __future__ import annotations

from ..model.log import Logger
from ..model.ir import Graph

log = Logger("ge.passes")

HIGH_PRECISION, HIGH_PERFORMANCE = "high_precision", "high_performance"
GELU_DOMAINS = ("", "ge")


def select_impl_mode(graph: Graph, stats: dict | None = None, modes: dict | None = None) -> Graph:
    if not modes:
        return graph
    by_name, by_type, default = modes.get("by_name", {}), modes.get("by_type", {}), modes.get("default")
    fast = 0
    for node in graph.nodes:
        mode = by_name.get(node.name, by_type.get(node.op_type, default))
        if (mode == HIGH_PERFORMANCE and node.op_type == "Gelu" and node.domain in GELU_DOMAINS
                and node.attrs.get("approximate", "none") == "none"):
            node.attrs = dict(node.attrs, approximate="tanh")
            log.debug("select_impl_mode: %s takes the tanh form of Gelu (high_performance)", node)
            fast += 1
    if stats is not None:
        stats["gelu_tanh"] = stats.get("gelu_tanh", 0) + fast
    return graph
