"""ATC's conversion: an ONNX model compiled into an OM file (`ge atc --mode=0`), static, with gears,
ranges or the hybrid path for unknown and data-dependent shapes.

    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")
    api.atc("model.onnx", "out/model", external_weight=1)      # out/weight/weight_<sha256> ...
    api.atc("model.onnx", "out/model", input_format="NCHW", log="info", soc_version="Ascend310P3",
            fusion_switch_file="switch.json", output_type="FP16")   # any ATC option by its name

Every ATC option ge knows is a keyword argument with ATC's name (atc_options.OPTIONS says what ge
does with each); the options are checked first, applied to every graph compiled (conversion_settings),
and recorded in the OM.

The driver is options -> settings -> compile -> write: the options checked and turned into the
compile's settings, the ONNX file read and checked once (read_onnx) and made a graph (to_graph),
core/compile/pipeline.compile deciding static, gears, range or hybrid on it, then one writing tail
(the weight files, then the OM) and one summary for every kind of model.
"""
from __future__ import annotations

import os
import time

from ..compile.onnx_check import check_plain
from ..compile.pipeline import CompileSettings, Compiled, compile
from ..compile.summary import summarize
from ..model.errors import GeError
from ..model.ir import DTYPES
from ..model.ge_model import GeModel, WeightLayout
from ..model.record import record
from ..model.soc import DEFAULT_SOC, check_soc
from ...formats.atomic import make_folder
from ...formats.om import write_om
from ...formats.onnx.importer import read_onnx, to_graph
from ..model.weight_files import default_weight_dir
from .atc_options import check_options, log_level
from .conversion_settings import Settings
from ..shape_options import (DEFAULT_STATIC_OPS_LOWER_LIMIT, GEAR_OPTIONS, check_image_size_dims, is_dynamic,
                             parse_gears, parse_shape_spec)

#: the dynamic-shape options, also taken as keyword arguments of atc() (or in its `dynamic` dict)
DYNAMIC_OPTIONS = (*GEAR_OPTIONS, "input_shape_range", "static_model_ops_lower_limit")

@record
class AtcResult:
    om_path: str
    model: GeModel
    summary: dict


def om_path_for(output: str) -> str:
    """ATC appends .om to --output."""
    return output if output.endswith(".om") else output + ".om"


def atc(model: str, output: str, *, input_shape: str | dict | None = None, out_nodes: str | list | None = None,
        soc_version: str = DEFAULT_SOC, cmdline: str = "", external_weight: int = 0,
        external_weight_dir: str | None = None, dynamic: dict | None = None,
        insert_op_conf: str | None = None, **options) -> AtcResult:
    """Compile an ONNX model into an OM file (ATC --framework=5). `external_weight` 1 or 2 moves
    the weights into files in `external_weight_dir` (default `<om dir>/weight/`). `insert_op_conf`:
    an ATC AIPP configuration file (static AIPP: the input becomes the raw image). `options`: any
    other ATC option by its ATC name (input_format="NCHW", log="info", disable_reuse_memory=1, ...),
    including the gear options (dynamic_batch_size="1,2,4" ...)."""
    t0 = time.perf_counter()
    nodes = out_nodes.split(";") if isinstance(out_nodes, str) else out_nodes
    nodes = [n for n in (nodes or []) if n] or None
    name = os.path.splitext(os.path.basename(om_path_for(output)))[0]
    gears = dict(dynamic or {})
    gears.update({k: options.pop(k) for k in DYNAMIC_OPTIONS if k in options and options[k] is not None})
    for k in DYNAMIC_OPTIONS:
        options.pop(k, None)
    soc = check_soc(soc_version)
    opts = check_options(options, soc, ";".join(nodes) if nodes else None)
    with log_level(opts.get("log")):
        settings = _settings(Settings.from_options(opts), model, name, input_shape, gears, soc_version, cmdline,
                             external_weight, insert_op_conf)
        return _write(_compile(read_onnx(model, check_plain), settings, nodes), output, external_weight_dir, t0)


#: options that read the imported graph's outputs before the compile infers their shapes
_READ_OUTPUTS = ("output_type", "is_output_adjust_hw_layout")


def _compile(onnx_model, settings: CompileSettings, nodes: list[str] | None):
    """The model compiled. A plain one (core/compile/onnx_check.py) with static inputs is imported
    without onnx's shape inference, whose schema registry costs more than the rest of its check:
    the compile's own inference gives every shape. Should that fail (shapes that prove
    data-dependent: the hybrid path takes onnx's types; or an error), it is imported and compiled
    again as any other model is, with onnx's inference, which also words the error as before."""
    shapes = _import_shapes(settings)
    own = (onnx_model.plain and not settings.dynamic and not settings.gears and not settings.aipp
           and not any(k in settings.options.options for k in _READ_OUTPUTS))
    if own:
        try:
            compiled = compile(to_graph(onnx_model, shapes, nodes, shapes=False), settings, onnx_shapes=False)
            if _declared_types_hold(onnx_model.proto.graph, compiled.model):
                return compiled
        except GeError:
            pass
        settings.options.applied = {}  # (the options' record is the seeded graph's)
    return compile(to_graph(onnx_model, shapes, nodes, allow_dynamic=settings.dynamic, warn=not own), settings)


def _declared_types_hold(graph, model) -> bool:
    """The compiled outputs have the element types the model declares (where onnx's inference would
    have typed an output otherwise than ge's kernels, it is compiled again with it, to refuse or
    agree as before)."""
    declared = {o.name: o.type.tensor_type.elem_type for o in graph.output if o.type.HasField("tensor_type")}
    return all(DTYPES[declared[d.name]].name == d.dtype for d in model.outputs
               if declared.get(d.name) in DTYPES)


def _settings(options: Settings, model, name, input_shape, gears: dict, soc_version, cmdline, external_weight,
              insert_op_conf) -> CompileSettings:
    """The compile's settings from the checked options; the shape and gear options' errors come
    before the model is read."""
    spec = input_shape if isinstance(input_shape, dict) else parse_shape_spec(input_shape)
    if gears.get("input_shape_range"):  # ATC's deprecated spelling of ranges
        spec.update(parse_shape_spec(gears.pop("input_shape_range"), "--input_shape_range"))
    if gears.get("dynamic_image_size"):
        check_image_size_dims(spec, options.options.get("input_format"))
    min_static_ops = gears.pop("static_model_ops_lower_limit", None) or DEFAULT_STATIC_OPS_LOWER_LIMIT
    aipp = None
    if insert_op_conf:  # (its reader imported only then, as the weight files' writer in _write)
        from ...formats.aipp_config import read_aipp_config
        aipp = read_aipp_config(insert_op_conf)
    dynamic = is_dynamic(spec, gears)
    if dynamic and aipp and not any(gears.values()):
        raise GeError("--insert_op_conf: AIPP takes static shapes or gears (--dynamic_batch_size, "
                      "--dynamic_image_size, --dynamic_dims), not ranges or unknown dims")
    return CompileSettings(options, model, name, soc_version, cmdline, spec,
                           gears=parse_gears(gears, spec) if any(gears.values()) else None,
                           dynamic=dynamic and not any(gears.values()), min_static_ops=min_static_ops,
                           external_weight=external_weight, aipp=aipp)


def _import_shapes(s: CompileSettings) -> dict | None:
    """--input_shape as the importer takes it: a range's dims unknown (-1), a gear's dims None
    (compile gives each gear its values)."""
    if s.gears:
        return {k: [None if d == -1 else d for d in dims] for k, dims in s.shapes.items()}
    return {k: [-1 if isinstance(d, tuple) else d for d in dims] for k, dims in s.shapes.items()} or None


def _write(compiled: Compiled, output: str, external_weight_dir: str | None, t0: float) -> AtcResult:
    """The weight files (before the OM: an OM never names a weight file that is not there yet), the
    OM, and the summary."""
    model = compiled.model
    om_path, weight_dir = _output_paths(output, external_weight_dir)
    if compiled.files:
        from ...formats.weights import write_weight_files
        write_weight_files(compiled.files, weight_dir)
    written = write_om(model, om_path)
    if isinstance(model.weight_data, WeightLayout):  # the result's weights: the OM's, mapped
        model.weight_data = written.weight_data
    summary = summarize(model, time.perf_counter() - t0, compiled.passes, weight_dir)
    return AtcResult(om_path, model, dict(summary, atc_options=model.attrs["atc_options"]))


def _output_paths(output: str, external_weight_dir: str | None) -> tuple[str, str]:
    """The OM's path, its folder created (a FormatError naming it when it cannot be: a full disk),
    and the external weight folder."""
    om_path = om_path_for(output)
    folder = os.path.dirname(os.path.abspath(om_path))
    make_folder(folder, what="output folder")
    return om_path, os.path.abspath(external_weight_dir) if external_weight_dir else default_weight_dir(om_path)
