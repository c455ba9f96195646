"""Every option of ATC's parameter list that `ge atc` takes beyond the ones with their own
argument in api.atc: what ge does with it, its values, and its checks (ATC's rules).

Three kinds:
  IMPLEMENTED  it has a meaning on a CPU or the simulated NPU, and ge does it;
  PARTIAL      part of it is done and the rest waits for a compute path ge does not have yet (fp16):
               checked, recorded, and a warning says what is not done;
  RECORDED     it tunes the NPU's hardware or its toolchain (caches, tuning banks, core types ...):
               checked as ATC checks it, recorded in the OM (`ge inspect` shows it), and one
               info-level log line says it changes no result here;
  REFUSED      honouring it is impossible here; refused with the reason.
`check_options(dict)` validates a user's options (ATC's spelling, values as strings or numbers) and
returns them normalized; docs/atc-options.md shows the table.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys

from ..model.log import LEVELS as LOG_LEVELS, Logger, later_while, logger
from ..model.errors import GeError
from ..model.record import record

IMPLEMENTED, PARTIAL, RECORDED, REFUSED = "implemented", "partial", "recorded", "refused"
log = Logger("ge.atc")
INPUT_FORMATS = {"NCHW": 4, "NHWC": 4, "NCDHW": 5, "NDHWC": 5, "ND": None}
PRECISION_MODES = ("force_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision", "allow_fp32_to_fp16",
                   "must_keep_origin_dtype", "allow_mix_precision_fp16", "allow_mix_precision_bf16",
                   "allow_fp32_to_bf16")
PRECISION_MODES_V2 = ("fp16", "origin", "cube_fp16in_fp32out", "mixed_float16", "mixed_bfloat16", "cube_hif8",
                      "mixed_hif8")
#: the precision modes ge computes (core/passes/precision_mode.py), as that pass names them; the
#: bf16, hif8 and cube_fp16in_fp32out modes have no compute path in ge yet
COMPUTED_PRECISION = {"force_fp32": "force_fp32", "must_keep_origin_dtype": "must_keep_origin_dtype",
                      "force_fp16": "force_fp16", "allow_fp32_to_fp16": "allow_fp32_to_fp16",
                      "allow_mix_precision": "allow_mix_precision", "allow_mix_precision_fp16": "allow_mix_precision",
                      "origin": "must_keep_origin_dtype", "fp16": "force_fp16", "mixed_float16": "allow_mix_precision"}
MIXED_PRECISION = ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16", "mixed_float16",
                   "mixed_bfloat16", "mixed_hif8")
IMPL_MODES = ("high_precision", "high_performance", "high_precision_for_all", "high_performance_for_all")
BOOL01, TRUE_FALSE = ("0", "1"), ("true", "false")


@record
class AtcOption:
    name: str
    kind: str
    what: str  # what ge does with it (help text and the docs table)
    values: tuple = ()  # the values ATC accepts (empty: free text, checked by `check`)
    flag_value: str | None = None  # the value of the bare option (`--enable_small_channel` alone)
    path: str = ""  # "file": must exist and be readable; "dir": a directory ge does not write
    metavar: str = ""


def _o(name, kind, what, values=(), flag_value=None, path="", metavar=""):
    return AtcOption(name, kind, what, tuple(values), flag_value, path, metavar)


_HW = "tunes the NPU's hardware; "
OPTIONS: dict[str, AtcOption] = {o.name: o for o in [
    # -- implemented -------------------------------------------------------------------------
    _o("input_format", IMPLEMENTED, "layout of the inputs (NCHW, NHWC, ND, NCDHW, NDHWC): inputs of the "
       "format's rank get it, others are ND; locates H,W for --dynamic_image_size, AIPP needs NCHW; recorded, "
       "shown by ge inspect", INPUT_FORMATS),
    _o("log", IMPLEMENTED, "ge's log level on stderr: debug, info (what each pass did and its time), warning "
       "(ge's default), error, null", LOG_LEVELS),
    _o("output_type", IMPLEMENTED, "dtype of the model outputs, by a Cast at the model boundary: FP32, FP16, "
       "UINT8, INT8 ... for all outputs, or \"node:index:dtype;...\" per output", metavar='FP16|"node:0:FP16;..."'),
    _o("input_fp16_nodes", IMPLEMENTED, "these float32 inputs take float16 data (a Cast at the model boundary)",
       metavar='"input1;input2"'),
    _o("is_input_adjust_hw_layout", IMPLEMENTED, "per --input_fp16_nodes entry, true: that float16 input arrives in "
       "the NPU's NC1HWC0 layout ([N, C1, H, W, 16], channels zero-padded), converted to the model's NCHW inside; "
       "only with --input_fp16_nodes, one value per node (ATC's rule)", metavar='"true,false"'),
    _o("is_output_adjust_hw_layout", IMPLEMENTED, "per --out_nodes entry, true: that output is float16 in NC1HWC0 "
       "([N, C1, H, W, 16]); only with --out_nodes, one value per entry (ATC's rule)", metavar='"true,false"'),
    _o("disable_reuse_memory", IMPLEMENTED, "1: the memory planner gives every tensor bytes of its own (a "
       "debugging aid to bisect wrong results); 0 (default): tensors share memory when their lifetimes allow",
       BOOL01),
    _o("fusion_switch_file", IMPLEMENTED, "ATC's JSON switch file: ge's fusions (or the ATC passes they stand for) "
       "turned off by name, GraphFusion/UBFusion \"ALL\": \"off\"; unknown names are warned", path="file"),
    _o("op_select_implmode", IMPLEMENTED, "high_precision keeps exact ops; high_performance takes ge's fast variant "
       "where it has one (Gelu: tanh approximation instead of erf); *_for_all apply to every op", IMPL_MODES),
    _o("optypelist_for_implmode", IMPLEMENTED, "the op types --op_select_implmode applies to (others keep the "
       "model's form)", metavar='"Gelu,Sigmoid"'),
    _o("op_precision_mode", IMPLEMENTED, "ini file: [ByOpType] / [ByNodeName] name=high_precision|"
       "high_performance|...; high_* applied as --op_select_implmode per op or node, the other modes recorded",
       path="file"),
    _o("precision_mode", PARTIAL, "which ops compute in float16: force_fp32 / must_keep_origin_dtype (ge's default; "
       "ATC's is force_fp16), force_fp16, allow_fp32_to_fp16 (Conv/MatMul/Gemm in float16), allow_mix_precision"
       "[_fp16] (white/black/gray lists), weights of float16 ops stored in float16; cube_fp16in_fp32out and the bf16 "
       "modes are checked and recorded, with a warning that the model computes in its own dtypes", PRECISION_MODES),
    _o("precision_mode_v2", PARTIAL, "as --precision_mode: origin, fp16, mixed_float16 are computed; "
       "cube_fp16in_fp32out, mixed_bfloat16, cube_hif8, mixed_hif8 are recorded with a warning", PRECISION_MODES_V2),
    _o("keep_dtype", IMPLEMENTED, "nodes (names, or OpType::type) that keep their original dtype under a float16 "
       "precision mode; names checked against the model (unknown ones warned)", path="file"),
    _o("modify_mixlist", IMPLEMENTED, "edits of allow_mix_precision's white/black/gray lists (ATC's JSON); only with "
       "a mixed precision mode, as ATC", path="file"),
    _o("customize_dtypes", PARTIAL, "per node or op type input/output dtypes (file); parsed, names checked against "
       "the model, recorded, with a warning: ge does not set single nodes' dtypes yet", path="file"),
    _o("display_model_info", IMPLEMENTED, "1: print ATC's model info banner (as --mode=6) after compiling", BOOL01),
    _o("dump_mode", RECORDED, "1: shapes in --mode=1's JSON; ge's JSON always has them", BOOL01),
    _o("deterministic", RECORDED, "ge's kernels give the same result on every run; recorded", BOOL01),
    _o("deterministic_level", RECORDED, "as --deterministic; recorded", ("0", "1", "2")),
    _o("save_original_model", RECORDED, "recorded", TRUE_FALSE),
    _o("input_hint_shape", RECORDED, "a shape hint for dynamic inputs; recorded", metavar='"0:[1,3,224,224]"'),
    _o("weight", RECORDED, "Caffe's weight file; ignored for ONNX models (as ATC, with a warning)", path="file"),
    # -- recorded: the NPU's hardware and toolchain ---------------------------------------------
    _o("enable_small_channel", RECORDED, _HW + "recorded", BOOL01, flag_value="1"),
    _o("auto_tune_mode", RECORDED, _HW + "recorded", ("GA", "RL", "GA,RL", "RL,GA")),
    _o("op_compiler_cache_mode", RECORDED, "the NPU op compiler's cache; recorded", ("disable", "enable", "force")),
    _o("op_compiler_cache_dir", RECORDED, "the NPU op compiler's cache; recorded", metavar="DIR"),
    _o("core_type", RECORDED, _HW + "recorded", ("AiCore", "VectorCore")),
    _o("aicore_num", RECORDED, _HW + "checked against the --soc_version's AI Core count; recorded", metavar="N"),
    _o("virtual_type", RECORDED, _HW + "recorded", BOOL01),
    _o("op_debug_level", RECORDED, "the NPU op compiler's debug output; recorded", ("0", "1", "2", "3", "4")),
    _o("op_debug_config", RECORDED, "the NPU op compiler's memory checks; recorded", path="file"),
    _o("debug_dir", RECORDED, "where the NPU op compiler keeps its files; recorded", metavar="DIR"),
    _o("compression_optimize_conf", RECORDED, _HW + "recorded", path="file"),
    _o("sparsity", RECORDED, _HW + "recorded (structured sparse weights need AMCT's pruned model)", BOOL01),
    _o("enable_compress_weight", RECORDED, _HW + "recorded", TRUE_FALSE),
    _o("compress_weight_conf", RECORDED, _HW + "recorded", path="file"),
    _o("host_env_os", RECORDED, "the host OS of the deployment; recorded", ("linux",)),
    _o("host_env_cpu", RECORDED, "the host CPU of the deployment; recorded", ("x86_64", "aarch64")),
    _o("status_check", RECORDED, "the NPU's overflow status check; recorded", BOOL01),
    _o("op_bank_path", RECORDED, "Auto Tune's op bank; recorded", metavar="DIR"),
    _o("mdl_bank_path", RECORDED, "Auto Tune's model bank; recorded", metavar="DIR"),
    _o("enable_single_stream", RECORDED, "ge runs a model on one stream; recorded", TRUE_FALSE),
    _o("shape_generalized_build_mode", RECORDED, "the NPU op compiler's shape generalization; recorded",
       ("shape_precise", "shape_generalized")),
    _o("distributed_cluster_build", RECORDED, "multi-device builds; recorded", BOOL01),
    _o("cluster_config", RECORDED, "multi-device builds; recorded", path="file"),
    _o("model_relation_config", RECORDED, "multi-device builds; recorded", path="file"),
    _o("enable_graph_parallel", RECORDED, "multi-device builds; recorded", BOOL01),
    _o("graph_parallel_option_path", RECORDED, "multi-device builds; recorded", path="file"),
    _o("buffer_optimize", RECORDED, "the NPU's L1/L2 buffer use; recorded", ("l2_optimize", "l1_optimize",
                                                                               "off_optimize")),
    _o("atomic_clean_policy", RECORDED, "the NPU's atomic clean of memory; recorded", BOOL01),
    _o("allow_hf32", RECORDED, _HW + "HF32 in Conv/MatMul units; recorded (ge computes float32)", TRUE_FALSE),
    _o("ac_parallel_enable", RECORDED, "AI CPU engine parallelism; recorded", BOOL01),
    _o("tiling_schedule_optimize", RECORDED, _HW + "recorded", BOOL01),
    _o("quant_dumpable", RECORDED, "the NPU's dump of quantized nodes; recorded", BOOL01),
    _o("is_weight_clip", RECORDED, "recorded", BOOL01),
    _o("enable_attr_compression", RECORDED, "recorded", TRUE_FALSE),
    _o("oo_level", RECORDED, "the graph optimizer's level; recorded (ge's pipeline is fixed; "
       "--fusion_switch_file turns fusions off)", ("O1", "O3")),
    _o("oo_constant_folding", RECORDED, "recorded (ge always folds constants: its shape chains need it)",
       TRUE_FALSE),
    _o("oo_dead_code_elimination", RECORDED, "recorded (ge always drops dead code)", TRUE_FALSE),
    _o("enable_scope_fusion_passes", RECORDED, "TensorFlow scope fusions; recorded (no effect on ONNX models)",
       metavar='"Pass1,Pass2"'),
    _o("op_name_map", RECORDED, "Caffe custom op name mapping; recorded (no effect on ONNX models)", path="file"),
    _o("cal_conf", RECORDED, "Caffe calibration config; recorded (no effect on ONNX models)", path="file"),
    _o("device_id", RECORDED, "the tuning device; recorded", metavar="N"),
    _o("target", RECORDED, "recorded", metavar="TARGET"),
    # -- refused ---------------------------------------------------------------------------------
    _o("singleop", REFUSED, "single-op description files are not supported: ge compiles ONNX models (wrap the "
       "op in a one-node ONNX model)", path="file"),
]}

def check_options(options: dict, soc=None, out_nodes: str | None = None) -> dict[str, str]:
    """The user's options (ATC's names; values as strings or numbers) checked as ATC checks them;
    returns {name: value string}. `soc`: the core.model.soc.Soc compiled for (bounds --aicore_num);
    `out_nodes`: --out_nodes (--is_output_adjust_hw_layout counts its entries)."""
    out: dict[str, str] = {}
    for name, value in options.items():
        if value is None:
            continue
        if name not in OPTIONS:
            raise GeError(f"unknown ATC option '{name}'")
        opt = OPTIONS[name]
        if isinstance(value, bool):  # Python's True/False in the option's own spelling
            text = ("1" if value else "0") if opt.values == BOOL01 else str(value).lower()
        else:
            text = str(value)
        if opt.kind == REFUSED:
            raise GeError(f"--{name}: {opt.what}")
        if opt.values and text not in opt.values:
            raise GeError(f"--{name}={text}: must be one of {', '.join(opt.values)}")
        if opt.path == "file" and os.path.isdir(text):
            raise GeError(f"--{name}: '{text}' is a folder; give the file")
        if opt.path == "file" and not os.path.isfile(text):
            raise GeError(f"--{name}: file {text} not found")
        out[name] = text
    _check_rules(dict(out, out_nodes=out_nodes) if out_nodes else out, soc)
    return out


def _check_rules(o: dict, soc) -> None:
    """ATC's rules between options."""
    mode, types = o.get("op_select_implmode"), o.get("optypelist_for_implmode")
    if types is not None and mode not in ("high_precision", "high_performance"):
        raise GeError("--optypelist_for_implmode needs --op_select_implmode=high_precision or high_performance")
    if "precision_mode" in o and "precision_mode_v2" in o:
        raise GeError("--precision_mode and --precision_mode_v2 are mutually exclusive")
    if "modify_mixlist" in o and (o.get("precision_mode") or o.get("precision_mode_v2")) not in MIXED_PRECISION:
        raise GeError("--modify_mixlist needs a mixed precision mode (--precision_mode=allow_mix_precision... or "
                      "--precision_mode_v2=mixed_float16...)")
    if o.get("enable_compress_weight") == "true" and "compress_weight_conf" in o:
        raise GeError("--enable_compress_weight and --compress_weight_conf are mutually exclusive")
    hint = o.get("input_hint_shape")
    if hint is not None:
        for entry in filter(None, (e.strip() for e in hint.split(";"))):
            if not re.fullmatch(r"\d+:\[\d+(,\d+)*\]", entry.replace(" ", "")):
                raise GeError(f"--input_hint_shape: '{entry}' is not 'input index:[d1,d2,...]'")
    if "aicore_num" in o:
        try:
            n = int(o["aicore_num"])
        except ValueError:
            n = 0
        if n <= 0:
            raise GeError(f"--aicore_num={o['aicore_num']}: must be a positive integer")
        if soc is not None and soc.aicore_num and n > soc.aicore_num:
            raise GeError(f"--aicore_num={n}: {soc.name} has {soc.aicore_num} AI Cores")
    for side, nodes in (("input", "input_fp16_nodes"), ("output", "out_nodes")):
        key = f"is_{side}_adjust_hw_layout"
        if key in o:
            flags = [f.strip() for f in o[key].split(",")]
            if any(f not in TRUE_FALSE for f in flags):
                raise GeError(f"--{key}={o[key]}: each value must be true or false")
            if nodes not in o:
                raise GeError(f"--{key} is used with --{nodes} (one value per entry)")
            count = len([n for n in o[nodes].split(";") if n.strip()])
            if len(flags) != count:
                raise GeError(f"--{key} has {len(flags)} value(s) for {count} --{nodes} entr"
                              f"{'y' if count == 1 else 'ies'}")


def log_recorded(options: dict[str, str]) -> None:
    """One info line per option that changes no result here (ATC's --log=info shows them)."""
    for name, value in options.items():
        if name in OPTIONS and OPTIONS[name].kind == RECORDED:
            log.info("--%s=%s: %s; it does not change a result on cpu or sim", name, value, OPTIONS[name].what)


@contextlib.contextmanager
def log_level(level: str | None):
    """ge's log at `level` (ATC's --log) while converting; a handler on stderr if the
    application has none (the CLI installs its own)."""
    if level is None:
        yield
        return
    if level not in LOG_LEVELS:
        raise GeError(f"--log={level}: must be one of {', '.join(LOG_LEVELS)}")
    undo = []

    def apply() -> None:
        import logging
        ge_log = logger("ge")
        handler = None
        if not ge_log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
            ge_log.addHandler(handler)
        undo.append((ge_log, ge_log.level, handler))
        ge_log.setLevel(LOG_LEVELS[level])

    if "logging" in sys.modules or LOG_LEVELS[level] < LOG_LEVELS["warning"]:
        apply()
        waiting = contextlib.nullcontext()
    else:  # apply() when a record passes `level`: logging is ~115 M instructions of ge atc to compile where
        #    the standard library has no cached bytecode, and --log=error mostly logs nothing (model/log.py)
        waiting = later_while(LOG_LEVELS[level], apply)
    try:
        with waiting:
            yield
    finally:
        for ge_log, old, handler in undo:
            ge_log.setLevel(old)
            if handler is not None:
                ge_log.removeHandler(handler)
