"""What ATC's tuning options do to one conversion: the fusions switched off, the impl modes, the
memory planner's reuse, the boundary Casts and --input_format, each checked once and then applied
to every graph the conversion compiles (the static model, each gear, a dynamic model's graph).
`record()` is what the OM keeps of them (`ge inspect` shows it)."""
from __future__ import annotations

from ..compile.io_boundary import cast_inputs_from_fp16, cast_outputs, outputs_to_nc1hwc0
from ..model.log import Logger
from ..model.errors import GeError
from ..model.ir import Graph
from ..passes import FUSIONS, fusion_switches
from .atc_options import COMPUTED_PRECISION, log_recorded
from ..shape_options import input_formats

log = Logger("ge.atc")
IMPL = ("high_precision", "high_performance")


def _read(option: str, opts: dict):
    """The configuration file `option` names, parsed (None if not given): formats/atc_config.py, imported
    only then (most conversions name none)."""
    if option not in opts:
        return None
    from ...formats import atc_config as c
    read = {"fusion_switch_file": c.read_fusion_switch, "modify_mixlist": c.read_modify_mixlist,
            "keep_dtype": c.read_keep_dtype, "customize_dtypes": c.read_customize_dtypes,
            "op_precision_mode": c.read_op_precision_mode}[option]
    return read(opts[option])


class Settings:
    def __init__(self, options: dict):
        self.options = options  # the checked options, ATC's names -> value strings
        self.disabled: set = set()  # ge fusions switched off
        self.switched_off: dict = {}  # ge fusion -> the switch file names that turned it off
        self.impl_modes: dict | None = None
        self.precision: dict | None = None  # for passes.configured: {"mode", "keep_dtype", "mixlist"}
        self.reuse_memory = True
        self.applied: dict = {}  # what prepare() did to the first graph, for the record
        self.named: dict = {}  # --keep_dtype / --customize_dtypes files, parsed

    @classmethod
    def from_options(cls, opts: dict) -> "Settings":
        """Every file is read and checked before anything is logged: a bad file is one error line."""
        s = cls(dict(opts))
        switch = _read("fusion_switch_file", opts)
        mixlist = _read("modify_mixlist", opts)
        for option in ("keep_dtype", "customize_dtypes"):
            if option in opts:
                s.named[option] = _read(option, opts)
        s.impl_modes = _impl_modes(opts)
        log_recorded(opts)
        if "weight" in opts:
            log.warning("--weight is ignored for ONNX models (their weights are in the model)")
        s.reuse_memory = opts.get("disable_reuse_memory", "0") != "1"
        if not s.reuse_memory:
            log.info("--disable_reuse_memory=1: every feature map gets memory of its own")
        if switch is not None:
            s._switches(switch, opts["fusion_switch_file"])
        s.precision = _precision(opts, s.named.get("keep_dtype"), mixlist)
        if "customize_dtypes" in opts:
            log.warning("--customize_dtypes: recorded, but ge does not set single nodes' dtypes yet: they compute as "
                        "the precision mode says")
        return s

    def _switches(self, switch: dict, path: str) -> None:
        self.disabled, self.switched_off, unknown = fusion_switches(switch)
        for name in unknown:
            log.warning("--fusion_switch_file %s: '%s' names no fusion of ge (ge's: %s, or the ATC passes they "
                        "stand for, see docs/atc-options.md); ignored", path, name, ", ".join(FUSIONS))
        for ge, names in self.switched_off.items():
            log.info("--fusion_switch_file: %s is off (%s)", ge, ", ".join(names))

    def prepare(self, graph: Graph) -> None:
        """The options that rewrite or check the imported graph, before the passes. The checks
        speak once per conversion (a model with 100 gears is checked on its first graph)."""
        o = self.options
        first = not self.applied
        ranks = {t: (len(graph.value(t).shape) if graph.value(t).shape is not None else None) for t in graph.inputs}
        formats = input_formats(ranks, o.get("input_format"))
        if first:
            self._check_names(graph, formats, ranks)
        fp16_inputs = (cast_inputs_from_fp16(graph, o["input_fp16_nodes"], _flags(o.get("is_input_adjust_hw_layout")))
                       if "input_fp16_nodes" in o else [])
        output_casts = cast_outputs(graph, o["output_type"]) if "output_type" in o else {}
        nc1hwc0 = outputs_to_nc1hwc0(graph, _flags(o["is_output_adjust_hw_layout"])) \
            if "is_output_adjust_hw_layout" in o else []
        if first:
            self.applied = {"input_formats": formats, "input_fp16_nodes": fp16_inputs, "output_type": output_casts,
                            "nc1hwc0_outputs": nc1hwc0}

    def _check_names(self, graph: Graph, formats: dict, ranks: dict) -> None:
        o = self.options
        for name, fmt in formats.items():
            if fmt != o.get("input_format"):
                log.info("--input_format=%s: input '%s' has rank %s; it is taken as ND", o["input_format"], name,
                         ranks[name])
        names = {n.name for n in graph.nodes}
        types = {n.op_type for n in graph.nodes}
        for option, check in (("keep_dtype", _keep_dtype_names), ("customize_dtypes", _customize_names)):
            if option in self.named:
                for kind, missing in check(self.named[option], names, types):
                    log.warning("--%s: %s '%s' is not in the model", option, kind, missing)

    def check_aipp(self, aipp: list[dict]) -> None:
        """AIPP writes NCHW: an input --input_format says is NHWC cannot take it."""
        formats = self.applied.get("input_formats", {})
        for a in aipp:
            if formats.get(a["input"], "NCHW") not in ("NCHW", "ND"):
                raise GeError(f"--insert_op_conf: AIPP feeds input '{a['input']}' in NCHW, but --input_format says "
                              f"{formats[a['input']]}")

    def record(self) -> dict:
        """What the OM keeps: the options as given, and what ge made of them."""
        out = {"options": dict(self.options)}
        out.update({k: v for k, v in self.applied.items() if v})
        if self.switched_off:
            out["fusions_off"] = {k: list(v) for k, v in self.switched_off.items()}
        if self.impl_modes:
            out["impl_modes"] = self.impl_modes
        if self.precision:
            out["precision_mode"] = self.precision["mode"]
        return out


def _flags(value: str | None) -> list[bool]:
    """ATC's "true,false,..." per entry (checked by atc_options)."""
    return [f.strip() == "true" for f in value.split(",")] if value else []


def _impl_modes(o: dict) -> dict | None:
    modes: dict = {"default": None, "by_type": {}, "by_name": {}}
    mode = o.get("op_select_implmode")
    if mode:
        base = mode.removesuffix("_for_all")
        if "optypelist_for_implmode" in o:
            modes["by_type"] = {t.strip(): base for t in o["optypelist_for_implmode"].split(",") if t.strip()}
        else:
            modes["default"] = base
    if "op_precision_mode" in o:
        table = _read("op_precision_mode", o)
        for section, key in (("ByOpType", "by_type"), ("ByNodeName", "by_name")):
            for name, m in table[section].items():
                if m in IMPL:
                    modes[key][name] = m
                else:
                    log.info("--op_precision_mode: %s=%s is an NPU kernel setting; recorded, it does not change a "
                             "result on cpu or sim", name, m)
    if modes["default"] is None and not modes["by_type"] and not modes["by_name"]:
        return None
    return modes


def _precision(o: dict, keep: dict | None, mixlist: dict | None) -> dict | None:
    """The precision pass's settings, or None when the model keeps its dtypes."""
    option = "--precision_mode_v2" if "precision_mode_v2" in o else "--precision_mode"
    asked = o.get("precision_mode") or o.get("precision_mode_v2")
    if asked and asked not in COMPUTED_PRECISION:
        log.warning("%s=%s: recorded, but ge has no compute path for it yet: the model computes in its own dtypes (as "
                    "must_keep_origin_dtype)", option, asked)
        return None
    mode = COMPUTED_PRECISION.get(asked or "", "must_keep_origin_dtype")
    if mode == "must_keep_origin_dtype" or mode == "force_fp32":
        return None
    kept = [*keep["op_names"], *(f"OpType::{t}" for t in keep["op_types"])] if keep else []
    return {"mode": mode, "keep_dtype": kept, "mixlist": mixlist}


def _keep_dtype_names(keep: dict, names: set, types: set):
    yield from (("node", n) for n in keep["op_names"] if n not in names)
    yield from (("op type", t) for t in keep["op_types"] if t not in types)


def _customize_names(entries: list, names: set, types: set):
    for entry in entries:
        known = types if entry["by"] == "op_type" else names
        if entry["name"] not in known:
            yield ("op type" if entry["by"] == "op_type" else "node"), entry["name"]
