"""Graph passes, one per module, each `pass_(graph, stats=None) -> Graph` (in place).

`optimize(graph)` runs the pipeline ATC-style, in place, leaving every value static, and returns
a report of what each pass did. The fusions can be switched off by name (ATC's
`--fusion_switch_file`: ge's own pass names or the ATC pass names in FUSIONS), and
`select_impl_mode` applies `--op_select_implmode` / `--op_precision_mode`.
"""
from __future__ import annotations

import contextlib
import contextvars
import time

from ..model.log import Logger
from ..model.errors import ShapeError
from ..model.ir import Graph
from .attribute_defaults import complete_attributes
from .constant_folding import constant_folding
from .dead_code import dead_code
from .fuse_activation import build_epilogue, fuse_activation
from .fuse_conv_add import fuse_conv_add
from .fuse_conv_bn import fuse_conv_bn
from .fuse_elementwise import fuse_elementwise
from .fuse_gelu import fuse_gelu
from .fuse_layer_norm import fuse_layer_norm
from .fuse_matmul import fuse_matmul
from .fuse_qdq import fuse_qdq
from .fuse_rms_norm import fuse_rms_norm
from .fuse_rotary import fuse_rotary
from .gradient import LOWERED_OPS, expand_gradients
from .impl_mode import select_impl_mode
from .infer_shapes import infer_shapes
from .nchwc_layout import nchwc_layout
from .precision_mode import apply_precision_mode
from .resolve_shapes import resolve_shapes

__all__ = ["optimize", "complete_attributes", "expand_gradients", "LOWERED_OPS", "optimize_dynamic", "optimize_unknown", "constant_folding", "infer_shapes", "fuse_conv_bn", "fuse_activation", "fuse_conv_add", "fuse_gelu",
           "fuse_layer_norm", "fuse_rms_norm", "fuse_rotary", "fuse_elementwise", "nchwc_layout", "fuse_matmul", "fuse_qdq", "dead_code", "resolve_shapes", "build_epilogue", "PIPELINE",
           "lower_precision",
           "FUSIONS", "fusion_switches", "select_impl_mode", "configured"]

log = Logger("ge.passes")

#: (report key, pass) in the order optimize() runs them
PIPELINE = [
    ("expand_gradients", expand_gradients),  # Gradient nodes become their backward graphs, before anything reads them
    ("complete_attributes", complete_attributes),  # the schema's defaults: every op as its spec defines it
    ("dead_code", dead_code),               # --out_nodes may cut the graph: drop what no output needs
    ("fuse_qdq", fuse_qdq),                  # before constant folding turns DequantizeLinear(weights) into float32
    ("dead_code", dead_code),                # the DequantizeLinear nodes fuse_qdq left without readers
    ("constant_folding", constant_folding),  # shape chains, Constant nodes, weight preprocessing
    ("infer_shapes", infer_shapes),          # ge's kernels give every tensor its static meta
    ("fuse_layer_norm", fuse_layer_norm),    # before fuse_activation, as fuse_gelu: their Adds are producers there
    ("fuse_rms_norm", fuse_rms_norm),        # before fuse_elementwise takes its Add/Sqrt/Reciprocal/Mul
    ("fuse_rotary", fuse_rotary),            # before fuse_elementwise takes its Muls and Add
    ("fuse_gelu", fuse_gelu),
    ("select_impl_mode", select_impl_mode),  # after fuse_gelu (its Gelus too), before fuse_activation moves them
    ("fuse_conv_bn", fuse_conv_bn),
    ("fuse_activation", fuse_activation),
    ("fuse_conv_add", fuse_conv_add),        # after fuse_activation: the residual Add's Relu moves along
    ("fuse_matmul", fuse_matmul),            # after fuse_activation: a bias Add's activations move along
    ("fuse_elementwise", fuse_elementwise),  # what the fusions above left as elementwise tasks
    ("nchwc_layout", nchwc_layout),          # last: regions of (fused) convs in the blocked layout
    ("dead_code", dead_code),                # bypassed copies, orphaned weights and values
    ("constant_folding", constant_folding),  # anything the fusions made constant
    ("infer_shapes", infer_shapes),          # re-check the rewritten graph
]


#: the fusions a user may switch off: ge's pass -> (ATC's switch file section, the ATC pass names it
#: stands for). GraphFusion rewrites the graph; UBFusion folds an op into its producer's kernel (an
#: epilogue), as the NPU's UB fusion keeps it in the unified buffer.
FUSIONS = {
    "fuse_qdq": ("GraphFusion", ()),  # no ATC name: ge's own (quantized models as quantized kernels)
    "fuse_layer_norm": ("GraphFusion", ("LayerNormONNXFusionPass",)),
    "fuse_rms_norm": ("GraphFusion", ()),  # no ATC name: ge's own (by ge's name or GraphFusion.ALL)
    "fuse_rotary": ("GraphFusion", ()),  # ge's own: a rotary embedding at a known position as one product
    "fuse_gelu": ("GraphFusion", ("GeluFusionPass",)),
    "fuse_conv_bn": ("GraphFusion", ("ConvBatchnormFusionPass", "ConvScaleFusionPass")),
    "fuse_matmul": ("GraphFusion", ("MatMulBiasAddFusionPass", "BatchMatMulFusionPass")),
    "fuse_activation": ("UBFusion", ("TbeConv2DReluv2Pass", "TbeEltwiseFusionPass", "TbeBatchMatmulElementWiseFusionPass",
                                     "ATbeMatMulElemwiseFusionPass", "AutomaticUbFusion")),
    "fuse_conv_add": ("UBFusion", ("TbeConvDoubleInFusionPass",)),
    "fuse_elementwise": ("UBFusion", ()),  # ATC has no pass of this name: switched by ge's name or UBFusion.ALL
    "nchwc_layout": ("GraphFusion", ()),  # ge's own (the blocked layout NCHW16c): by ge's name or GraphFusion.ALL
}

#: the passes optimize() runs after precision_mode when one is set (each op lowered on its own first)
_AFTER_PRECISION = ("fuse_elementwise", "nchwc_layout")


def fusion_switches(switch: dict[str, dict[str, bool]]) -> tuple[set[str], dict[str, list[str]], list[str]]:
    """ATC's switch file ({"GraphFusion": {name: on?}, "UBFusion": {...}}) as ge's passes to skip.
    Returns (disabled ge passes, {ge pass: the names that turned it off}, unknown names). A section's
    "ALL" applies first, then its named passes: "ALL": "off" with one pass "on" leaves just that one."""
    by_name = {ge: ge for ge in FUSIONS}
    by_name.update({atc: ge for ge, (_, names) in FUSIONS.items() for atc in names})
    state = {ge: True for ge in FUSIONS}
    why: dict[str, list[str]] = {}
    unknown = []
    for section, passes in switch.items():
        if "ALL" in passes:
            for ge, (sec, _) in FUSIONS.items():
                if sec == section:
                    state[ge] = passes["ALL"]
                    why.setdefault(ge, []).append(f"{section}.ALL")
        for name, on in passes.items():
            if name == "ALL":
                continue
            if name not in by_name:
                unknown.append(name)
                continue
            state[by_name[name]] = on
            why.setdefault(by_name[name], []).append(name)
    disabled = {ge for ge, on in state.items() if not on}
    return disabled, {ge: why[ge] for ge in disabled}, unknown


#: (disabled fusions, impl modes, precision) of the conversion under way: every optimize() of it (a
#: gear, a static submodel of a dynamic model) follows the user's options without each caller passing them
_CONFIG: contextvars.ContextVar = contextvars.ContextVar("ge_pass_config", default=(frozenset(), None, None))


@contextlib.contextmanager
def configured(disabled: set[str] | frozenset = frozenset(), impl_modes: dict | None = None,
               precision: dict | None = None):
    """Within the block, optimize() and optimize_dynamic() skip `disabled` and apply `impl_modes`
    unless a call gives its own, and optimize() ends with `precision`: {"mode", "keep_dtype",
    "mixlist"} for precision_mode.apply_precision_mode (ATC's --precision_mode)."""
    token = _CONFIG.set((frozenset(disabled), impl_modes, precision))
    try:
        yield
    finally:
        _CONFIG.reset(token)


def optimize(graph: Graph, report: dict | None = None, *, disabled: set[str] | frozenset | None = None,
             impl_modes: dict | None = None, precision: bool = True) -> dict:
    """Run the pass pipeline on `graph` in place; return the report (JSON-able ints):
    {"nodes_before", "nodes_after", "folded_nodes", "fused_conv_bn", "fused_activations",
     "removed_nodes", "passes": {pass name: {counter: n}}} (filled into `report` if one is given).
    `disabled`: fusions (keys of FUSIONS) not to run; `impl_modes`: see select_impl_mode;
    `precision`: False when the caller lowered the whole graph this one is part of (lower_precision).
    """
    report = {} if report is None else report
    report["nodes_before"] = len(graph.nodes)
    per_pass: dict[str, dict] = report.setdefault("passes", {})
    lowering = precision and bool(_CONFIG.get()[2])
    # an elementwise chain is fused, and convs blocked, after precision_mode: each op takes its own precision
    _run(graph, per_pass, disabled, impl_modes, static=True, skip=_AFTER_PRECISION if lowering else ())
    if lowering and lower_precision(graph, per_pass):  # on the optimized graph: the fused ops lower as one
        infer_shapes(graph, stats=per_pass["infer_shapes"])
        off = _CONFIG.get()[0] if disabled is None else disabled
        for key, fn in ((k, fn) for k, fn in PIPELINE if k in _AFTER_PRECISION and k not in off):
            fn(graph, stats=per_pass.setdefault(key, {}))
    report["nodes_after"] = len(graph.nodes)
    report["folded_nodes"] = per_pass["constant_folding"].get("folded", 0)
    report["fused_conv_bn"] = per_pass["fuse_conv_bn"].get("fused", 0)
    report["fused_activations"] = per_pass["fuse_activation"].get("fused", 0)
    report["removed_nodes"] = per_pass["dead_code"].get("removed_nodes", 0)
    require_static(graph)
    return report


def lower_precision(graph: Graph, per_pass: dict | None = None) -> bool:
    """The conversion's --precision_mode (configured()) applied to `graph`, a whole graph, static or
    not, in place; False when the conversion keeps the model's dtypes."""
    precision = _CONFIG.get()[2]
    if not precision:
        return False
    per_pass = {} if per_pass is None else per_pass
    stats = per_pass.setdefault("precision_mode", {})
    apply_precision_mode(graph, precision["mode"], precision.get("keep_dtype", ()), precision.get("mixlist"),
                         stats=stats)
    dead_code(graph, stats=per_pass.setdefault("dead_code", {}))
    log.info("pass precision_mode (%s): %s", precision["mode"], ", ".join(f"{k}={v}" for k, v in stats.items()))
    return True


def optimize_dynamic(graph: Graph, report: dict | None = None, *, disabled: set[str] | frozenset | None = None,
                     impl_modes: dict | None = None) -> dict:
    """The pipeline for a graph with unknown dims: every pass but infer_shapes (the dynamic path
    infers what it can afterwards, core/compile/dynamic_shapes.py), fuse_elementwise and nchwc_layout
    (optimize_unknown runs them then). The fusions decide from dtypes, ranks, constants and provably
    equal dims, and skip a match they cannot decide. After each
    constant folding, resolve_shapes turns the shape arithmetic it can follow symbolically into
    constants (Reshape targets with 0/-1), and dead_code drops the chains that became unused."""
    report = {} if report is None else report
    report["nodes_before"] = len(graph.nodes)
    per_pass: dict[str, dict] = report.setdefault("passes", {})
    _run(graph, per_pass, disabled, impl_modes, static=False)
    report["nodes_after"] = len(graph.nodes)
    return report


def _run(graph: Graph, per_pass: dict, disabled, impl_modes, static: bool, skip=()) -> None:
    """The pipeline, each pass timed and logged at info (ATC's --log=info shows what each pass did);
    the passes in `skip` are left to the caller."""
    if disabled is None:
        disabled = _CONFIG.get()[0]
    if impl_modes is None:
        impl_modes = _CONFIG.get()[1]
    unknown = set(disabled) - set(FUSIONS)
    if unknown:
        raise ValueError(f"not a switchable fusion: {sorted(unknown)}")
    settled = False  # the graph is as a dead_code that found nothing to remove left it: another finds nothing
    for key, fn in PIPELINE:
        if key in skip:
            continue
        if key in disabled:
            per_pass[key] = {"switched_off": 1}
            continue
        if not static and (fn is infer_shapes or key in _AFTER_PRECISION):  # infer_dynamic's part, and
            continue  # optimize_unknown's after it
        if fn is dead_code and settled:  # (the one after fuse_qdq, where it fused nothing: most models)
            continue
        t0 = time.perf_counter()
        stats = per_pass.setdefault(key, {})
        before = dict(stats)
        if fn is select_impl_mode:
            fn(graph, stats=stats, modes=impl_modes)
        else:
            fn(graph, stats=stats)
        changed = any(v != before.get(k, 0) for k, v in stats.items())  # (the counts of this run are not 0)
        settled = (fn is dead_code or (fn is fuse_qdq and settled)) and not changed
        if fn is constant_folding and not static:
            resolve_shapes(graph, stats=per_pass.setdefault("resolve_shapes", {}))
            dead_code(graph, stats=per_pass.setdefault("dead_code", {}))
        log.info("pass %s: %s (%.1f ms, %d nodes)", key, ", ".join(f"{k}={v}" for k, v in stats.items()) or "-",
                 (time.perf_counter() - t0) * 1e3, len(graph.nodes))


def optimize_unknown(graph: Graph, report: dict | None = None, *, disabled: set[str] | frozenset | None = None) -> dict:
    """fuse_elementwise and nchwc_layout among the nodes infer_dynamic left with unknown dims: chains and
    blocked regions of them, which the hybrid executor builds for each run's shapes (the static parts are
    static submodels, whose own pipeline runs them). Not when a --precision_mode lowers the graph:
    build_dynamic lowers it after this, and the layout follows the lowering (as optimize() orders them)."""
    report = {} if report is None else report
    per_pass: dict[str, dict] = report.setdefault("passes", {})
    off = _CONFIG.get()[0] if disabled is None else disabled
    if _CONFIG.get()[2]:
        return report
    for key, fn in ((k, fn) for k, fn in PIPELINE if k in _AFTER_PRECISION):
        stats = per_pass.setdefault(key, {})
        if key in off:
            stats["switched_off"] = 1
            continue
        t0 = time.perf_counter()
        fn(graph, stats=stats, dynamic=True)
        log.info("pass %s (unknown dims): %s (%.1f ms, %d nodes)", key, ", ".join(f"{k}={v}" for k, v in stats.items())
                 or "-", (time.perf_counter() - t0) * 1e3, len(graph.nodes))
    return report


def require_static(graph: Graph) -> None:
    """Every tensor the graph references must have a dtype and a static shape."""
    names = list(graph.inputs) + list(graph.outputs)
    for n in graph.nodes:
        names.extend(i for i in n.inputs if i)
        names.extend(o for o in n.outputs if o)
    for name in names:
        if name in graph.initializers:
            continue
        v = graph.values.get(name)
        if v is None or not v.is_static:
            raise ShapeError(f"tensor '{name}' has no static dtype/shape after optimization "
                             f"(dtype {None if v is None else v.dtype}, shape {None if v is None else v.shape})")
