"""`compile(graph, settings) -> Compiled`: ATC's compile, from the graph the importer made of the
ONNX file (read and checked once) to the model the writer writes and the weight files it needs.

The driver (core/atc/conversion.py) is options -> settings -> read_onnx -> to_graph -> compile -> write:
it reads the file once, makes one graph of it (a gear's dims unknown: None), and writes what comes
back with one tail (weight files, then the OM) and one summary (summary.summarize).

The path follows the settings, then the graph:
  gears   settings.gears: each gear a copy of the one graph (Graph.copy: the weights shared, not
          copied) with its unknown input dims set to the gear's values, prepared, given its static
          AIPP (--insert_op_conf: the raw image of the gear's batch and size), optimized and built
          as a static model; build_gears joins them over one copy of the weights;
  dynamic settings.dynamic (--input_shape asked for -1 dims or ranges): infer_dynamic and
          build_hybrid, a range plan on top when there are ranges;
  static  otherwise: prepare, AIPP, optimize, build. When optimize fails and the graph's shapes
          prove data-dependent (NonZero ...), the hybrid path takes over with the graph as it was
          before optimize (a copy kept for that), not a second import.
Then externalize moves the large weights of either kind of model into the files to write
(--external_weight). The kernel check (kernel_check.require_kernels) comes first, before anything
is compiled; the options' graph rewrites and checks (`settings.options.prepare`) apply to every
graph compiled, each gear's included, as ATC applies them.
"""
from __future__ import annotations

from typing import Protocol

from ..model.dynamic_model import HYBRID, RANGE, DynamicModel, DynTensor
from ..model.errors import GeError
from ..model.ge_model import GeModel
from ..model.ir import STRING, Graph, subgraphs
from ..passes import configured, optimize
from ..passes._util import memoized_kernels
from ..model.record import record
from ..model.weight_files import WeightFilePlan
from .build import build
from .kernel_check import require_kernels
from ..shape_options import DEFAULT_STATIC_OPS_LOWER_LIMIT


class Options(Protocol):
    """What the ATC options do to a compile (core/atc/conversion_settings.Settings)."""
    disabled: set
    impl_modes: dict | None
    precision: dict | None
    reuse_memory: bool

    def prepare(self, graph: Graph) -> None: ...  # the boundary Casts and layout rewrites, per graph compiled

    def check_aipp(self, aipp: list[dict]) -> None: ...

    def record(self) -> dict: ...  # what the OM keeps of the options (after prepare)


@record
class CompileSettings:
    options: Options
    source: str  # the model file, for messages
    name: str
    soc_version: str
    cmdline: str
    #: --input_shape as given: {input: [dim]}, a dim an int, -1 (unknown) or (lo, hi) (a range)
    shapes: dict
    #: the gear option and its gears (shape_options.parse_gears): each gear the values of the -1
    #: dims of `shapes`, in their order
    gears: tuple[str, list[tuple]] | None = None
    dynamic: bool = False  # -1 dims or ranges without gears: the hybrid path, or a range plan
    min_static_ops: int = DEFAULT_STATIC_OPS_LOWER_LIMIT
    external_weight: int = 0
    aipp: list[dict] | None = None  # the parsed --insert_op_conf


@record
class Compiled:
    model: GeModel | DynamicModel
    files: list[WeightFilePlan]  # the external weight files to write before the OM
    passes: dict | None = None  # the static path's pass report (the summary shows it)


def compile(graph: Graph, settings: CompileSettings, onnx_shapes: bool = True) -> Compiled:  # noqa: A001 (ATC's word)
    """`graph` is the importer's (to_graph), used up: the paths rewrite it in place. onnx_shapes=False:
    the graph has no shapes of onnx's inference (its inputs are static), and one whose shapes prove
    data-dependent is refused (the caller imports it again with them) rather than taken to the
    hybrid path, which needs onnx's types."""
    opts = settings.options
    with configured(opts.disabled, opts.impl_modes, opts.precision), memoized_kernels():
        require_kernels(graph, settings.source)  # before anything is compiled or written
        passes = None
        if settings.gears:
            model = _gears(graph, settings)
        elif settings.dynamic:
            model = _dynamic(graph, settings)
        else:
            model, passes = _static(graph, settings, onnx_shapes)
    model.attrs["atc_options"] = opts.record()
    if not settings.external_weight:  # inline: what most compiles write, without the weight files' modules
        return Compiled(model, [], passes)
    from .external_weights import externalize, externalize_dynamic
    if isinstance(model, DynamicModel):
        model, files = externalize_dynamic(model, settings.external_weight)
    else:
        model, files = externalize(model, settings.external_weight)
    return Compiled(model, files, passes)


def _static(graph: Graph, s: CompileSettings, onnx_shapes: bool = True) -> tuple[GeModel | DynamicModel, dict | None]:
    opts = s.options
    opts.prepare(graph)
    aipp = None
    if s.aipp:  # (AIPP's and the dynamic paths' modules imported where a model takes them)
        from .aipp import insert_aipp
        aipp = insert_aipp(graph, s.aipp)
    if aipp:
        opts.check_aipp(aipp)
    # for the hybrid path, should the shapes prove data-dependent
    before = None if aipp or not onnx_shapes else graph.copy()
    try:
        report = optimize(graph)
    except GeError:
        if before is None:
            raise
        from .dynamic_shapes import infer_dynamic
        unknown = infer_dynamic(before)
        if not unknown:
            raise
        return _hybrid(before, unknown, s, HYBRID, {}), None
    # inline weights stay where the graph holds them until the writer copies each into the file
    model = build(graph, name=s.name, soc_version=s.soc_version, atc_cmdline=s.cmdline,
                  reuse_memory=opts.reuse_memory, join_weights=bool(s.external_weight))
    if aipp:
        model.attrs["aipp"] = aipp
    return model, report


def _dynamic(graph: Graph, s: CompileSettings) -> DynamicModel:
    """Unknown dims or ranges: the hybrid executor's model, with a range plan when ranges are given."""
    ranges = {k: [d if isinstance(d, tuple) else (d, d) if d >= 0 else (0, -1) for d in dims]
              for k, dims in s.shapes.items() if any(isinstance(d, tuple) for d in dims)}
    s.options.prepare(graph)
    from .dynamic_shapes import infer_dynamic
    return _hybrid(graph, infer_dynamic(graph), s, RANGE if ranges else HYBRID, ranges)


def _hybrid(graph: Graph, unknown: dict, s: CompileSettings, mode: str, ranges: dict) -> DynamicModel:
    from .build_dynamic import build_hybrid
    from .range_plan import plan_range
    dyn = build_hybrid(graph, unknown, name=s.name, soc_version=s.soc_version, atc_cmdline=s.cmdline,
                       min_static_ops=s.min_static_ops, mode=mode, ranges=ranges,
                       reuse_memory=s.options.reuse_memory)
    if mode == RANGE:
        for t in dyn.inputs:
            if not t.ranges and any(d < 0 for d in t.shape):
                raise GeError(f"input '{t.name}' has unknown dims {list(t.shape)} but no range; give it one "
                              f"(e.g. \"{t.name}:1~8,...\")")
            unbounded = [k for k, (lo, hi) in enumerate(t.ranges) if hi < 0]
            if unbounded:
                raise GeError(f"input '{t.name}': dim {unbounded[0]} has no upper bound; a range plan needs one")
        dyn.attrs.update(plan_range(dyn, {t.name: tuple(hi for _, hi in t.ranges) if t.ranges else t.shape
                                          for t in dyn.inputs}))
    return dyn


def _gears(graph: Graph, s: CompileSettings) -> DynamicModel:
    """One static model per gear, each compiled from a copy of `graph` specialised to the gear."""
    from .aipp import aipp_inputs
    from .build_dynamic import build_gears
    kind, values = s.gears
    models, gear_shapes = [], []
    concretes = []
    for v in values:
        it = iter(v)
        concretes.append({k: [next(it) if d == -1 else d for d in dims] for k, dims in s.shapes.items()})
    # dynamic AIPP's parameters: one input for every gear, sized for the largest gear's batch
    names = aipp_inputs(graph, s.aipp) if s.aipp else []
    batches = [(c.get(name) or list(graph.value(name).shape or ()) or [None])[0] for c in concretes for name in names]
    params_batch = max((b for b in batches if isinstance(b, int)), default=None)  # (else _insert says why)
    for v, concrete in zip(values, concretes):
        gear = graph.copy()
        for name, dims in concrete.items():
            gear.value(name).shape = tuple(dims)
        s.options.prepare(gear)
        aipp = _gear_aipp(gear, s, v, params_batch) if s.aipp else None
        try:
            optimize(gear)
        except GeError as e:
            raise _not_for_gears(gear) or type(e)(f"gear {list(v)}: {e}{_fixed_batch_hint(gear, kind)}") from None
        models.append(build(gear, name=f"{s.name}_gear{len(models)}", soc_version=s.soc_version,
                            reuse_memory=s.options.reuse_memory))
        if aipp:
            models[-1].attrs["aipp"] = aipp
        gear_shapes.append({d.name: tuple(d.shape) for d in models[-1].inputs})
    # an input's dims: -1 where its gears differ (an AIPP input's raw image differs from --input_shape)
    inputs = [DynTensor(d.name, d.dtype, tuple(x if len({g[d.name][k] for g in gear_shapes}) == 1 else -1
                                               for k, x in enumerate(d.shape)))
              for d in models[0].inputs]
    dyn = build_gears(models, inputs, gear_shapes, name=s.name, soc_version=s.soc_version, atc_cmdline=s.cmdline,
                      kind=kind)
    dyn.attrs["gear_values"] = [list(v) for v in values]
    if s.aipp:
        dyn.attrs["aipp"] = [dict(a) for a in models[0].attrs["aipp"]]  # each gear's raw size: its submodel's
        for k, a in enumerate(dyn.attrs["aipp"]):
            if a.get("mode") == "dynamic":  # parameters set before the gear is known fit one of these
                a["gear_model_shapes"] = [m.attrs["aipp"][k]["model_shape"] for m in models]
    return dyn


def _gear_aipp(gear: Graph, s: CompileSettings, values: tuple, params_batch: int | None) -> list[dict]:
    """AIPP on one gear, as ATC applies it per gear: static, the raw image of the gear's batch and
    size (a source image size fixed in the config fits one image size only); dynamic, the raw images
    of the gear's batch and one parameter input for every gear (params_batch images)."""
    from .aipp import insert_aipp
    try:
        aipp = insert_aipp(gear, s.aipp, params_batch)
    except GeError as e:
        raise GeError(f"{e} (gear {list(values)})") from None
    s.options.check_aipp(aipp)
    return aipp


def _fixed_batch_hint(gear: Graph, kind: str) -> str:
    """Where a batch gear fails, the Reshapes to a constant shape with a fixed first dim: an export
    that wrote the batch it was traced with (x.view(1, -1)) into the graph, the usual reason."""
    if kind != "dynamic_batch_size":
        return ""
    fixed = [n for n in gear.nodes if n.op_type == "Reshape" and len(n.inputs) > 1
             and (shape := gear.initializers.get(n.inputs[1])) is not None and shape.ndim == 1 and shape.size
             and int(shape[0]) > 0]
    if not fixed:
        return ""
    named = ", ".join(f"'{n.name}' to {[int(d) for d in gear.initializers[n.inputs[1]]]}" for n in fixed[:3])
    return (f" (the model fixes the batch: Reshape {named}{' ...' if len(fixed) > 3 else ''}; re-export it with "
            f"the batch dim as -1 or 0, or compile without gears)")


def _not_for_gears(graph: Graph) -> GeError | None:
    """Why a gear does not compile when it holds control flow, sequences, optionals or strings (they
    run in the hybrid executor); None when it holds none (the optimizer's own error says why)."""
    flow = next((n for n in graph.nodes if subgraphs(n)), None)
    odd = next((v for v in graph.values.values() if v.kind != "tensor" or v.dtype == STRING), None)
    if flow is not None:
        return GeError(f"{flow}: control flow runs in the hybrid executor, not in gears; compile with "
                       f"unknown dims (-1) and no gear list")
    if odd is not None:
        what = odd.kind if odd.kind != "tensor" else "string tensor"
        return GeError(f"'{odd.name}' is a {what}: sequences, optionals and strings run in the hybrid "
                       f"executor, not in gears; compile with unknown dims (-1) and no gear list")
    return None
