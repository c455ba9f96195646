"""ATC's conversion: an ONNX model compiled into an OM file (`ge atc --mode=0`), static, with gears,
ranges or the hybrid path for unknown and data-dependent shapes.

    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")
    api.atc("model.onnx", "out/model", external_weight=1)      # out/weight/weight_<sha256> ...
    api.atc("model.onnx", "out/model", input_format="NCHW", log="info", soc_version="Ascend310P3",
            fusion_switch_file="switch.json", output_type="FP16")   # any ATC option by its name

Every ATC option ge knows is a keyword argument with ATC's name (atc_options.OPTIONS says what ge
does with each); the options are checked first, applied to every graph compiled (conversion_settings),
and recorded in the OM.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..compile.aipp import insert_aipp
from ..compile.build import build
from ..compile.build_dynamic import DEFAULT_STATIC_OPS_LOWER_LIMIT
from ..compile.external_weights import externalize, externalize_dynamic
from ..compile.summary import summarize
from ..errors import FormatError, GeError
from ..ge_model import GeModel, WeightLayout
from ..passes import configured, optimize
from ..soc import DEFAULT_SOC, check_soc
from ...formats.aipp_config import read_aipp_config
from ...formats.om import write_om
from ...formats.onnx.importer import load_onnx
from ...formats.weights import write_weight_files
from .acl import default_weight_dir
from .atc_options import check_options, log_level
from .conversion_settings import Settings
from .dynamic_conversion import compile_dynamic, is_data_dependent, summarize_dynamic
from .pre_check import require_kernels
from .shape_options import GEAR_OPTIONS, check_image_size_dims, is_dynamic, parse_shape_spec

#: the dynamic-shape options, also taken as keyword arguments of atc() (or in its `dynamic` dict)
DYNAMIC_OPTIONS = (*GEAR_OPTIONS, "input_shape_range", "static_model_ops_lower_limit")

@dataclass
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
        settings = Settings.from_options(opts)
        spec = input_shape if isinstance(input_shape, dict) else parse_shape_spec(input_shape)
        if gears.get("input_shape_range"):  # ATC's deprecated spelling of ranges
            spec.update(parse_shape_spec(gears.pop("input_shape_range"), "--input_shape_range"))
        if gears.get("dynamic_image_size"):
            check_image_size_dims(spec, opts.get("input_format"))
        with configured(settings.disabled, settings.impl_modes, settings.precision):
            result = _convert(model, output, name, spec, gears, nodes, soc_version, cmdline, external_weight,
                              external_weight_dir, insert_op_conf, settings, t0)
    return result


def _output_paths(output: str, external_weight_dir: str | None) -> tuple[str, str]:
    """The OM's path, its folder created (a FormatError naming it when it cannot be: a full disk),
    and the external weight folder."""
    om_path = om_path_for(output)
    folder = os.path.dirname(os.path.abspath(om_path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise FormatError(f"{folder}: cannot create the output folder ({e.strerror or e})") from None
    return om_path, os.path.abspath(external_weight_dir) if external_weight_dir else default_weight_dir(om_path)


def _convert(model, output, name, spec, gears, nodes, soc_version, cmdline, external_weight, external_weight_dir,
             insert_op_conf, settings: Settings, t0) -> AtcResult:
    min_static_ops = gears.pop("static_model_ops_lower_limit", None) or DEFAULT_STATIC_OPS_LOWER_LIMIT
    aipp_configs = read_aipp_config(insert_op_conf) if insert_op_conf else None
    if is_dynamic(spec, gears):
        if aipp_configs:
            raise GeError("--insert_op_conf: ge runs static AIPP on static shapes only (no gears, ranges or "
                          "unknown dims)")
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, external_weight_dir, settings, t0)
    shapes = spec
    graph = load_onnx(model, shapes or None, nodes)
    require_kernels(graph, model)  # before anything is compiled or written
    settings.prepare(graph)
    aipp = insert_aipp(graph, aipp_configs) if aipp_configs else None
    if aipp:
        settings.check_aipp(aipp)
    try:
        report = optimize(graph)
    except GeError:
        if aipp or not is_data_dependent(model, shapes, nodes):
            raise
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, external_weight_dir, settings, t0)
    # inline weights stay where the graph holds them until the writer copies each into the file
    ge_model = build(graph, name=name, soc_version=soc_version, atc_cmdline=cmdline,
                     reuse_memory=settings.reuse_memory, join_weights=bool(external_weight))
    if aipp:
        ge_model.attrs["aipp"] = aipp
    ge_model.attrs["atc_options"] = settings.record()
    ge_model, files = externalize(ge_model, external_weight)
    om_path, weight_dir = _output_paths(output, external_weight_dir)
    if files:  # before the OM: an OM never names a weight file that is not there yet
        write_weight_files(files, weight_dir)
    written = write_om(ge_model, om_path)
    if isinstance(ge_model.weight_data, WeightLayout):  # the result's weights: the OM's, mapped
        ge_model.weight_data = written.weight_data
    summary = summarize(ge_model, time.perf_counter() - t0, report, weight_dir)
    return AtcResult(om_path, ge_model, dict(summary, atc_options=ge_model.attrs["atc_options"]))


def _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops, external_weight,
                 external_weight_dir, settings: Settings, t0) -> AtcResult:
    """Gears, ranges or the hybrid path: one OM with a root model and its static submodels.
    `gears` holds dynamic_batch_size / dynamic_image_size / dynamic_dims (ATC spellings). With
    `external_weight` 1|2 the root and every gear or submodel share one set of weight files."""
    dyn = compile_dynamic(model, name, spec, gears, nodes, soc_version=soc_version, cmdline=cmdline,
                          min_static_ops=int(min_static_ops), prepare=settings.prepare,
                          reuse_memory=settings.reuse_memory)
    dyn.attrs["atc_options"] = settings.record()
    dyn, files = externalize_dynamic(dyn, external_weight)
    om_path, weight_dir = _output_paths(output, external_weight_dir)
    if files:  # before the OM: an OM never names a weight file that is not there yet
        write_weight_files(files, weight_dir)
    write_om(dyn, om_path)
    return AtcResult(om_path, dyn, dict(summarize_dynamic(dyn, time.perf_counter() - t0, weight_dir),
                                        atc_options=dyn.attrs["atc_options"]))
