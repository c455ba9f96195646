"""ATC's conversion: an ONNX model compiled into an OM file (`ge atc --mode=0`), static, with gears,
ranges or the hybrid path for unknown and data-dependent shapes.

    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")
    api.atc("model.onnx", "out/model", external_weight=1)      # out/weight/weight_<sha256> ...
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..compile.aipp import insert_aipp
from ..compile.build import build
from ..compile.build_dynamic import DEFAULT_STATIC_OPS_LOWER_LIMIT
from ..compile.external_weights import externalize
from ..compile.summary import summarize
from ..errors import GeError
from ..ge_model import GeModel
from ..passes import optimize
from ..soc import DEFAULT_SOC
from ...formats.aipp_config import read_aipp_config
from ...formats.om import write_om
from ...formats.onnx.importer import load_onnx
from ...formats.weights import write_weight_files
from .acl import default_weight_dir
from .dynamic_conversion import compile_dynamic, is_data_dependent, summarize_dynamic
from .pre_check import require_kernels
from .shape_options import is_dynamic, parse_shape_spec

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
        insert_op_conf: str | None = None) -> AtcResult:
    """Compile an ONNX model into an OM file (ATC --framework=5). `external_weight` 1 or 2 moves
    the weights into files in `external_weight_dir` (default `<om dir>/weight/`). `insert_op_conf`:
    an ATC AIPP configuration file (static AIPP: the input becomes the raw image)."""
    t0 = time.perf_counter()
    nodes = out_nodes.split(";") if isinstance(out_nodes, str) else out_nodes
    nodes = [n for n in (nodes or []) if n] or None
    name = os.path.splitext(os.path.basename(om_path_for(output)))[0]
    gears = dict(dynamic or {})
    spec = input_shape if isinstance(input_shape, dict) else parse_shape_spec(input_shape)
    if gears.get("input_shape_range"):  # ATC's deprecated spelling of ranges
        spec.update(parse_shape_spec(gears.pop("input_shape_range"), "--input_shape_range"))
    min_static_ops = gears.pop("static_model_ops_lower_limit", None) or DEFAULT_STATIC_OPS_LOWER_LIMIT
    aipp_configs = read_aipp_config(insert_op_conf) if insert_op_conf else None
    if is_dynamic(spec, gears):
        if aipp_configs:
            raise GeError("--insert_op_conf: ge runs static AIPP on static shapes only (no gears, ranges or "
                          "unknown dims)")
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, t0)
    shapes = spec
    graph = load_onnx(model, shapes or None, nodes)
    require_kernels(graph, model)  # before anything is compiled or written
    aipp = insert_aipp(graph, aipp_configs) if aipp_configs else None
    try:
        report = optimize(graph)
    except GeError:
        if aipp or not is_data_dependent(model, shapes, nodes):
            raise
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, t0)
    ge_model = build(graph, name=name, soc_version=soc_version, atc_cmdline=cmdline)
    if aipp:
        ge_model.attrs["aipp"] = aipp
    ge_model, files = externalize(ge_model, external_weight)
    om_path = om_path_for(output)
    os.makedirs(os.path.dirname(os.path.abspath(om_path)), exist_ok=True)
    weight_dir = os.path.abspath(external_weight_dir) if external_weight_dir else default_weight_dir(om_path)
    if files:  # before the OM: an OM never names a weight file that is not there yet
        write_weight_files(files, weight_dir)
    write_om(ge_model, om_path)
    return AtcResult(om_path, ge_model, summarize(ge_model, time.perf_counter() - t0, report, weight_dir))


def _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops, external_weight,
                 t0) -> AtcResult:
    """Gears, ranges or the hybrid path: one OM with a root model and its static submodels.
    `gears` holds dynamic_batch_size / dynamic_image_size / dynamic_dims (ATC spellings)."""
    if external_weight:
        raise GeError("--external_weight is not supported with dynamic shapes (gears, ranges, unknown dims)")
    dyn = compile_dynamic(model, name, spec, gears, nodes, soc_version=soc_version, cmdline=cmdline,
                          min_static_ops=int(min_static_ops))
    om_path = om_path_for(output)
    os.makedirs(os.path.dirname(os.path.abspath(om_path)), exist_ok=True)
    write_om(dyn, om_path)
    return AtcResult(om_path, dyn, summarize_dynamic(dyn, time.perf_counter() - t0))


