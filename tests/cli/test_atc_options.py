"""Every option of ATC's parameter list through `ge atc`: its effect where it has one on a CPU or the
simulated NPU (compared with onnxruntime or exact expectations), its record in the OM and its log
line where it only tunes NPU hardware, and ATC's checks with their messages."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.atc.atc_options import OPTIONS, RECORDED, REFUSED
from ge.core.model.errors import GeError

from .conftest import _save


# -- models ----------------------------------------------------------------------------------------
def conv_bn_relu() -> onnx.ModelProto:
    """x [1, 3, 8, 8] -> Conv -> BatchNormalization -> Relu -> y."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "bias"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "var")]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "cbr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def gelu_mlp() -> onnx.ModelProto:
    """x [4, 16] -> MatMul -> exported erf GELU (Div, Erf, Add, Mul, Mul) -> y [4, 16]."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["h", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="gelu")]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_chain(n: int = 5) -> onnx.ModelProto:
    """x [1, 4, 16, 16] -> n Convs in a row: every intermediate a feature map another could reuse."""
    rng = np.random.default_rng(3)
    inits, nodes, prev = [], [], "x"
    for k in range(n):
        inits.append(numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, f"W{k}"))
        out = "y" if k == n - 1 else f"c{k}"
        nodes.append(helper.make_node("Conv", [prev, f"W{k}"], [out], pads=[1, 1, 1, 1], name=f"conv{k}"))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def custom_op() -> onnx.ModelProto:
    """x -> Relu -> com.example::Mystery -> y: one node ge cannot run."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Mystery", ["r"], ["y"], name="mystery", domain="com.example")]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


@pytest.fixture(scope="module")
def more(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("atc_options")
    out = {"cbr": _save(conv_bn_relu(), d / "cbr.onnx"), "gelu": _save(gelu_mlp(), d / "gelu.onnx"),
           "chain": _save(conv_chain(), d / "chain.onnx")}
    model = custom_op()
    model.ir_version = 8
    onnx.save(model, str(d / "custom.onnx"))  # not checkable by onnx: its op has no schema
    out["custom"] = str(d / "custom.onnx")
    return out


def run(om: str, feeds, device: str = "cpu") -> list[np.ndarray]:
    model_id = api.load_from_file(om, device)
    try:
        return [np.array(o) for o in api.execute(model_id, feeds)]
    finally:
        api.unload(model_id)


def recorded(om: str) -> dict:
    info = api.inspect(om)
    return info["dynamic"]["atc_options"] if "dynamic" in info else info["atc_options"]


def task_ops(om: str) -> list[str]:
    return [t["op_type"] for t in api.om_to_json(om)["tasks"]]


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def compile_small(ge, models, tmp_path, *args, ok=True, model="small"):
    return ge("atc", f"--model={models[model]}", "--framework=5", f"--output={tmp_path / 'net'}", *args, ok=ok)


# -- every option: accepted with ATC's syntax and recorded ----------------------------------------
def _sample_files(tmp_path) -> dict[str, str]:
    return {
        "fusion_switch_file": write(tmp_path / "switch.json", '{"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": '
                                                              '"off"}, "UBFusion": {}}}'),
        "op_precision_mode": write(tmp_path / "op_precision.ini", "[ByOpType]\nRelu=high_precision\n"),
        "keep_dtype": write(tmp_path / "keep.cfg", "conv\nOpType::Relu\n"),
        "modify_mixlist": write(tmp_path / "mixlist.json", '{"black-list": {"to-add": ["Conv"]}}'),
        "customize_dtypes": write(tmp_path / "custom.cfg", "conv::InputDtype:float16,float16,OutputDtype:float16\n"),
    }


#: options whose ATC rules need a companion, and their sample values
_COMPANIONS = {
    "optypelist_for_implmode": ("Relu", ["--op_select_implmode=high_precision"]),
    "is_input_adjust_hw_layout": ("false", ["--input_fp16_nodes=x"]),
    "is_output_adjust_hw_layout": ("true", ["--out_nodes=add:0"]),
    "modify_mixlist": (None, ["--precision_mode=allow_mix_precision"]),
    "aicore_num": ("2", ["--soc_version=Ascend310P3"]),
    "output_type": ("FP16", []),
    "input_fp16_nodes": ("x", []),
    "input_hint_shape": ("0:[1,3,8,8]", []),
    "enable_scope_fusion_passes": ("ScopePass1", []),
}
ACCEPTED = [o for o in OPTIONS.values() if o.kind != REFUSED]


@pytest.mark.parametrize("opt", ACCEPTED, ids=[o.name for o in ACCEPTED])
def test_every_option_is_accepted_and_recorded(ge, models, tmp_path, opt):
    files = _sample_files(tmp_path)
    value, extra = _COMPANIONS.get(opt.name, (None, []))
    if value is None:
        if opt.name in files:
            value = files[opt.name]
        elif opt.path == "file":
            value = write(tmp_path / f"{opt.name}.cfg", "# ATC's file, recorded by ge\n")
        elif opt.flag_value:
            value = opt.flag_value
        elif opt.values:
            value = opt.values[-1] if opt.name != "log" else "info"
        else:
            value = str(tmp_path / "dir") if opt.metavar == "DIR" else "1"
    log = [] if opt.name == "log" else ["--log=info"]
    r = compile_small(ge, models, tmp_path, f"--{opt.name}={value}", *extra, *log)
    om = str(tmp_path / "net.om")
    assert recorded(om)["options"][opt.name] == value
    if opt.kind == RECORDED:
        assert f"[INFO] ge.atc: --{opt.name}={value}: " in r.stderr and "does not change a result" in r.stderr
    assert "ATC run success" in r.stdout


def test_bare_flag_and_space_separated_values(ge, models, tmp_path):
    r = compile_small(ge, models, tmp_path, "--enable_small_channel", "--input_format", "NCHW", "--log", "error",
                      "--verbose")
    line = next(x for x in r.stdout.splitlines() if x.startswith("ATC options: "))
    assert {"--enable_small_channel=1 (recorded)", "--input_format=NCHW (implemented)", "--log=error (implemented)"} \
        == set(line.removeprefix("ATC options: ").split(", "))
    assert recorded(str(tmp_path / "net.om"))["options"] == {"enable_small_channel": "1", "input_format": "NCHW",
                                                            "log": "error"}


def test_single_dash_and_dashed_spellings(ge, models, tmp_path):
    ge("atc", f"-model={models['small']}", "-framework=5", f"-output={tmp_path / 'net'}", "-soc_version=Ascend310",
       "--input-format=NCHW", "-op_select_implmode", "high_precision", ok=True)
    assert recorded(str(tmp_path / "net.om"))["options"] == {"input_format": "NCHW",
                                                            "op_select_implmode": "high_precision"}
    assert api.inspect(str(tmp_path / "net.om"))["header"]["platform_version"] == "Ascend310"
    assert "--input_format" in ge("atc", "--h", ok=True).stdout
    ge("atc", f"-model={models['small']}", f"-output={tmp_path / 'net'}", "--static_model_ops_lower_limit", "-1",
       ok=True)  # a value that starts with a dash stays a value


@pytest.mark.parametrize("option, message", [
    ("--enable_small_channel=2", "--enable_small_channel=2: must be one of 0, 1"),
    ("--op_select_implmode=fast", "--op_select_implmode=fast: must be one of high_precision, high_performance"),
    ("--buffer_optimize=l3_optimize", "--buffer_optimize=l3_optimize: must be one of l2_optimize, l1_optimize"),
    ("--core_type=TensorCore", "--core_type=TensorCore: must be one of AiCore, VectorCore"),
    ("--disable_reuse_memory=yes", "--disable_reuse_memory=yes: must be one of 0, 1"),
    ("--fusion_switch_file=nope.json", "--fusion_switch_file: file nope.json not found"),
    ("--aicore_num=0", "--aicore_num=0: must be a positive integer"),
    ("--input_hint_shape=x:1,3", "--input_hint_shape: 'x:1,3' is not 'input index:[d1,d2,...]'"),
])
def test_bad_values_are_refused_naming_the_option(ge, models, tmp_path, error_line, option, message):
    r = compile_small(ge, models, tmp_path, option, ok=None)
    assert r.exit_code == 1 and message in error_line(r)
    assert not (tmp_path / "net.om").exists()


def test_bad_log_level_is_a_usage_error(ge, models, tmp_path):
    r = compile_small(ge, models, tmp_path, "--log=verbose", ok=None)
    assert r.exit_code == 2 and "'verbose' is not one of 'debug', 'info', 'warning', 'error', 'null'" in r.stderr
    with pytest.raises(GeError, match="--log=verbose: must be one of debug, info, warning, error, null"):
        api.atc(models["small"], str(tmp_path / "net"), log="verbose")


def test_singleop_is_refused_with_its_reason(ge, models, tmp_path, error_line):
    r = compile_small(ge, models, tmp_path, f"--singleop={models['small']}", ok=None)
    assert r.exit_code == 1 and "--singleop: single-op description files are not supported" in error_line(r)


@pytest.mark.parametrize("framework, name", [(0, "Caffe"), (1, "MindSpore"), (3, "TensorFlow")])
def test_frameworks_other_than_onnx_are_refused(ge, models, tmp_path, error_line, framework, name):
    r = ge("atc", f"--model={models['small']}", f"--framework={framework}", f"--output={tmp_path / 'net'}")
    line = error_line(r)
    assert r.exit_code == 1 and f"--framework={framework}: {name} models are not supported" in line
    assert "ge converts ONNX models (--framework=5)" in line


def test_unknown_option_is_a_usage_error(ge, models, tmp_path):
    r = compile_small(ge, models, tmp_path, "--no_such_option=1", ok=None)
    assert r.exit_code == 2 and "No such option '--no_such_option'" in r.stderr


# -- the model-zoo line of the README ---------------------------------------------------------------
def test_model_zoo_line_runs_as_written(ge, tmp_path, ort_run, monkeypatch):
    """atc --model=resnet50.onnx --framework=5 --output=resnet50_bs1 --input_format=NCHW
    --input_shape="actual_input_1:1,3,224,224" --log=error --soc_version=Ascend310P3 --enable_small_channel=1
    --insert_op_conf=aipp.cfg, on a stand-in model with the same input name (16x16 images)."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["actual_input_1", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "r", [helper.make_tensor_value_info("actual_input_1", TensorProto.FLOAT,
                                                                         ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 16, 16])], [w])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "resnet50.onnx")
    write(tmp_path / "aipp.cfg", "aipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n  mean_chn_0: 104\n"
                                 "  mean_chn_1: 117\n  mean_chn_2: 123\n  var_reci_chn_0: 0.5\n}\n")
    r = ge("atc", "--model=resnet50.onnx", "--framework=5", "--output=resnet50_bs1", "--input_format=NCHW",
           '--input_shape=actual_input_1:1,3,16,16', "--log=error", "--soc_version=Ascend310P3",
           "--enable_small_channel=1", "--insert_op_conf=aipp.cfg", ok=True)
    assert r.stderr == "" and "ATC run success" in r.stdout
    raw = rng.integers(0, 256, (1, 16, 16, 3), dtype=np.uint8)
    x = raw.transpose(0, 3, 1, 2).astype(np.float32) - np.array([104, 117, 123], np.float32).reshape(1, 3, 1, 1)
    x[:, 0] *= 0.5
    got = run("resnet50_bs1.om", {"actual_input_1": raw})[0]
    np.testing.assert_allclose(got, ort_run(path, {"actual_input_1": x})[0], rtol=1e-4, atol=1e-4)
    rec = recorded("resnet50_bs1.om")
    assert rec["options"]["enable_small_channel"] == "1" and rec["input_formats"] == {"actual_input_1": "NCHW"}


# -- implemented options: their effect -----------------------------------------------------------
def test_input_format_is_checked_recorded_and_rank_matched(ge, models, tmp_path, error_line):
    compile_small(ge, models, tmp_path, "--input_format=NHWC", "--log=info")
    assert recorded(str(tmp_path / "net.om"))["input_formats"] == {"x": "NHWC"}
    r = compile_small(ge, models, tmp_path, "--input_format=NCHW", "--log=info", model="two")
    assert recorded(str(tmp_path / "net.om"))["input_formats"] == {"a": "ND", "b": "ND"}
    assert "--input_format=NCHW: input 'a' has rank 2; it is taken as ND" in r.stderr
    r = compile_small(ge, models, tmp_path, "--input_format=NC1HWC0", ok=None)
    assert "--input_format=NC1HWC0: must be one of NCHW, NHWC, NCDHW, NDHWC, ND" in error_line(r)


def test_input_format_places_dynamic_image_size(ge, models, tmp_path, error_line):
    r = ge("atc", f"--model={models['dynamic']}", f"--output={tmp_path / 'net'}", "--input_shape=x:1,-1,-1,8",
           "--input_format=NCHW", "--dynamic_image_size=3,8;3,4")
    assert r.exit_code == 1
    assert ("--dynamic_image_size: input 'x' [1, -1, -1, 8]: under NCHW the -1 dims must be H and W (dims 2 and 3 "
            "of 4)") in error_line(r)
    r = ge("atc", f"--model={models['dynamic']}", f"--output={tmp_path / 'net'}", "--input_shape=x:1,3,-1,-1",
           "--input_format=ND", "--dynamic_image_size=8,8")
    assert "--dynamic_image_size needs --input_format NCHW or NHWC, not ND" in error_line(r)


def test_input_format_nhwc_cannot_take_aipp(ge, models, tmp_path, error_line):
    conf = write(tmp_path / "aipp.cfg", "aipp_op { aipp_mode: static input_format: RGB888_U8 }")
    r = compile_small(ge, models, tmp_path, "--input_format=NHWC", f"--insert_op_conf={conf}", ok=None)
    assert "--insert_op_conf: AIPP feeds input 'x' in NCHW, but --input_format says NHWC" in error_line(r)


def test_log_levels(ge, models, tmp_path):
    quiet = compile_small(ge, models, tmp_path)
    assert quiet.stderr == ""
    info = compile_small(ge, models, tmp_path, "--log=info")
    lines = [x for x in info.stderr.splitlines() if x.startswith("[INFO] ge.passes: pass ")]
    assert any(x.startswith("[INFO] ge.passes: pass fuse_conv_bn: fused=0 (") for x in lines)
    assert len(lines) >= 10 and all(" ms, " in x for x in lines)
    switch = write(tmp_path / "s.json", '{"Switch": {"GraphFusion": {"NoSuchPass": "off"}}}')
    warned = compile_small(ge, models, tmp_path, f"--fusion_switch_file={switch}")
    assert "[WARNING] ge.atc: --fusion_switch_file" in warned.stderr and "'NoSuchPass' names no fusion" in warned.stderr
    assert compile_small(ge, models, tmp_path, f"--fusion_switch_file={switch}", "--log=error").stderr == ""
    assert compile_small(ge, models, tmp_path, f"--fusion_switch_file={switch}", "--log=null").stderr == ""
    debug = compile_small(ge, models, tmp_path, "--log=debug", "--output_type=FP16")
    assert "[INFO] ge.passes: pass infer_shapes" in debug.stderr
    assert "[DEBUG] ge.atc: --output_type: output 'y' is cast to float16" in debug.stderr
    assert "[DEBUG]" not in compile_small(ge, models, tmp_path, "--log=info", "--output_type=FP16").stderr


def test_log_level_imports_logging_for_a_record_that_passes_it():
    """In a fresh interpreter: --log=warning or above imports logging at the first record that passes it
    (none passes: no logging), its own handler on stderr meanwhile, ge's logger as it was after."""
    code = """
import sys
from ge.core.atc.atc_options import log_level
from ge.core.model import log as ge_log
log = ge_log.Logger("ge.test")
with log_level("error"):
    log.warning("dropped")
assert "logging" not in sys.modules and ge_log._pending is None
with log_level("warning"):
    log.info("dropped")
    assert "logging" not in sys.modules
    log.warning("told %d", 1)
import logging
assert logging.getLogger("ge").level == logging.NOTSET and not logging.getLogger("ge").handlers
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert out.stderr == "[WARNING] ge.test: told 1\n"


def test_output_type_casts_every_output(ge, models, tmp_path, ort_run):
    compile_small(ge, models, tmp_path, "--output_type=FP16", model="two")
    om = str(tmp_path / "net.om")
    info = api.inspect(om)
    assert [(o["name"], o["dtype"]) for o in info["outputs"]] == [("s", "float16"), ("p", "float16")]
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((2, 3)).astype(np.float32), "b": rng.standard_normal((2, 3)).astype(np.float32)}
    for got, want in zip(run(om, feeds), ort_run(models["two"], feeds)):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want.astype(np.float16))


def test_output_type_per_node(ge, models, tmp_path, ort_run, error_line):
    compile_small(ge, models, tmp_path, "--output_type=mul:0:FP16", model="two")
    om = str(tmp_path / "net.om")
    assert [o["dtype"] for o in api.inspect(om)["outputs"]] == ["float32", "float16"]
    assert recorded(om)["output_type"] == {"p": "float16"}
    feeds = {"a": np.full((2, 3), 3.7, np.float32), "b": np.full((2, 3), 1.2, np.float32)}
    s, p = run(om, feeds)
    want = ort_run(models["two"], feeds)
    np.testing.assert_array_equal(s, want[0])
    np.testing.assert_array_equal(p, want[1].astype(np.float16))
    compile_small(ge, models, tmp_path, "--output_type=add:0:UINT8;mul:0:INT8", model="two")
    s, p = run(str(tmp_path / "net.om"), feeds)
    assert s.dtype == np.uint8 and p.dtype == np.int8 and s[0, 0] == 4 and p[0, 0] == 9  # 4.9 -> 4, 9.62 -> 9
    for spec, message in [("sub:0:FP16", "--output_type: output 0 of 'sub' ('d') is not a model output (s, p)"),
                          ("add:1:FP16", "--output_type: node 'add' has no output 1"),
                          ("add:0:FP8", "--output_type: dtype 'FP8' is not one of FP32, FP16, UINT8, INT8"),
                          ("add:FP16", "--output_type: 'add:FP16' is not 'node:index:dtype'")]:
        r = compile_small(ge, models, tmp_path, f"--output_type={spec}", model="two", ok=None)
        assert r.exit_code == 1 and message in error_line(r), spec


def test_input_fp16_nodes(ge, models, tmp_path, ort_run, error_line):
    compile_small(ge, models, tmp_path, '--input_fp16_nodes=a', model="two")
    om = str(tmp_path / "net.om")
    assert [(i["name"], i["dtype"]) for i in api.inspect(om)["inputs"]] == [("a", "float16"), ("b", "float32")]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3)).astype(np.float16)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    for got, want in zip(run(om, {"a": a, "b": b}, "sim"), ort_run(models["two"], {"a": a.astype(np.float32), "b": b})):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    r = compile_small(ge, models, tmp_path, "--input_fp16_nodes=c", model="two", ok=None)
    assert "--input_fp16_nodes: 'c' is not a model input (a, b)" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--input_fp16_nodes=ids", model="emb", ok=None)
    assert "--input_fp16_nodes: input 'ids' is int64; only float inputs can take float16 data" in error_line(r)


def test_adjust_hw_layout_follows_atc_rules(ge, models, tmp_path, error_line):
    r = compile_small(ge, models, tmp_path, "--is_input_adjust_hw_layout=true", ok=None)
    assert "--is_input_adjust_hw_layout is used with --input_fp16_nodes (one value per entry)" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--input_fp16_nodes=a;b", "--is_input_adjust_hw_layout=true",
                      model="two", ok=None)
    assert "--is_input_adjust_hw_layout has 1 value(s) for 2 --input_fp16_nodes entries" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--input_fp16_nodes=a", "--is_input_adjust_hw_layout=yes",
                      model="two", ok=None)
    assert "--is_input_adjust_hw_layout=yes: each value must be true or false" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--is_output_adjust_hw_layout=true", ok=None)
    assert "--is_output_adjust_hw_layout is used with --out_nodes" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--input_fp16_nodes=a;b", "--is_input_adjust_hw_layout=true,false",
                      model="two", ok=None)
    assert ("--is_input_adjust_hw_layout: input 'a' has shape (2, 3); NC1HWC0 needs a static 4-D NCHW tensor"
            in error_line(r))
    compile_small(ge, models, tmp_path, "--input_fp16_nodes=a;b", "--is_input_adjust_hw_layout=false,false",
                  "--out_nodes=add:0;mul:0", "--is_output_adjust_hw_layout=false,false", model="two")
    opts = recorded(str(tmp_path / "net.om"))["options"]
    assert opts["is_input_adjust_hw_layout"] == "false,false" and opts["is_output_adjust_hw_layout"] == "false,false"


def to_nc1hwc0(x: np.ndarray) -> np.ndarray:
    """NCHW -> the NPU's [N, C1, H, W, 16] float16, channels zero-padded to a multiple of 16."""
    n, c, h, w = x.shape
    c1 = -(-c // 16)
    padded = np.zeros((n, c1 * 16, h, w), np.float16)
    padded[:, :c] = x
    return padded.reshape(n, c1, 16, h, w).transpose(0, 1, 3, 4, 2)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_adjust_hw_layout_takes_and_gives_nc1hwc0(ge, models, tmp_path, ort_run, device):
    compile_small(ge, models, tmp_path, "--input_fp16_nodes=x", "--is_input_adjust_hw_layout=true",
                  "--out_nodes=add:0", "--is_output_adjust_hw_layout=true")
    om = str(tmp_path / "net.om")
    info = api.inspect(om)
    assert (info["inputs"][0]["dtype"], info["inputs"][0]["shape"]) == ("float16", [1, 1, 8, 8, 16])
    assert (info["outputs"][0]["dtype"], info["outputs"][0]["shape"]) == ("float16", [1, 1, 8, 8, 16])
    x = np.random.default_rng(11).standard_normal((1, 3, 8, 8)).astype(np.float16)
    got = run(om, {"x": to_nc1hwc0(x)}, device)[0]
    want = ort_run(models["small"], {"x": x.astype(np.float32)})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), to_nc1hwc0(want).astype(np.float32), rtol=1e-3, atol=1e-3)
    assert not got[..., 4:].any()  # the padding channels (4..15) are zeros


def _feature_maps(om: str) -> list[tuple[int, int]]:
    return [(t["offset"], t["size"]) for t in api.inspect(om)["allocations"]
            if t["kind"] == "FEATURE_MAP" and not t["alias_of"]]


def test_disable_reuse_memory_gives_every_tensor_its_own_memory(ge, more, tmp_path, ort_run):
    x = np.random.default_rng(4).standard_normal((1, 4, 16, 16)).astype(np.float32)
    want = ort_run(more["chain"], {"x": x})[0]
    sizes = {}
    for flag in ("0", "1"):
        om = str(tmp_path / f"chain{flag}")
        ge("atc", f"--model={more['chain']}", f"--output={om}", f"--disable_reuse_memory={flag}", ok=True)
        fms = _feature_maps(om + ".om")
        assert len(fms) == 4
        overlapping = [(a, b) for i, a in enumerate(fms) for b in fms[i + 1:]
                       if a[0] < b[0] + b[1] and b[0] < a[0] + a[1]]
        assert bool(overlapping) == (flag == "0")  # reused when allowed; never shared when disabled
        sizes[flag] = api.inspect(om + ".om")["memory"]["FEATURE_MAP"]["size"]
        for device in ("cpu", "sim"):
            np.testing.assert_allclose(run(om + ".om", {"x": x}, device)[0], want, rtol=1e-4, atol=1e-4)
    assert sizes["1"] == sum(s for _, s in fms) > sizes["0"]


def test_fusion_switch_file_turns_fusions_off(ge, more, tmp_path, ort_run, error_line):
    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort_run(more["cbr"], {"x": x})[0]

    def compile_with(switch: str | None):
        args = [f"--fusion_switch_file={write(tmp_path / 'switch.json', switch)}"] if switch else []
        ge("atc", f"--model={more['cbr']}", f"--output={tmp_path / 'cbr'}", *args, ok=True)
        om = str(tmp_path / "cbr.om")
        np.testing.assert_allclose(run(om, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
        return om

    assert task_ops(compile_with(None)) == ["Conv"]  # BN folded, Relu an epilogue
    om = compile_with('{"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off"}, "UBFusion": {}}}')
    assert task_ops(om) == ["Conv", "BatchNormalization", "Relu"]  # Relu fuses into Conv only: BN stays between
    assert recorded(om)["fusions_off"] == {"fuse_conv_bn": ["ConvBatchnormFusionPass"]}
    assert task_ops(compile_with('{"Switch": {"UBFusion": {"ALL": "off"}}}')) == ["Conv", "Relu"]
    om = compile_with('{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"fuse_activation": "off"}}}')
    assert task_ops(om) == ["Conv", "BatchNormalization", "Relu"]
    assert set(recorded(om)["fusions_off"]) == {"fuse_qdq", "fuse_layer_norm", "fuse_rms_norm", "fuse_rotary", "fuse_gelu",
                                                "fuse_conv_bn", "fuse_matmul", "fuse_activation", "nchwc_layout"}
    om = compile_with('{"Switch": {"GraphFusion": {"ALL": "off", "ConvBatchnormFusionPass": "on"}}}')
    assert task_ops(om) == ["Conv"]
    assert task_ops(compile_with("# ATC's older form\nConvBatchnormFusionPass:off\n")) == ["Conv", "BatchNormalization",
                                                                                        "Relu"]
    for text, message in [('{"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "of"}}}',
                           "GraphFusion.ConvBatchnormFusionPass: value 'of' must be \"on\" or \"off\""),
                          ('{"Switch": {"Fusion": {}}}', "section 'Fusion' is not one of GraphFusion, UBFusion"),
                          ('{"Switch": ', "line 1: not valid JSON")]:
        r = ge("atc", f"--model={more['cbr']}", f"--output={tmp_path / 'bad'}",
               f"--fusion_switch_file={write(tmp_path / 'bad.json', text)}")
        assert r.exit_code == 1 and message in error_line(r) and "bad.json" in error_line(r)


def _gelu_attr(om: str) -> list:
    """The Gelu form of each task computing one: the erf form fused into the GEMM ("none"), the tanh form
    as a product's epilogue (fuse_activation), or a Gelu task."""
    forms = []
    for t in api.om_to_json(om)["tasks"]:
        steps = [s for s in t["attrs"].get("ge.epilogue") or [] if s[0] == "Gelu"]
        if steps:
            forms += [s[1].get("approximate", "none") for s in steps]
        elif "Gelu" in (t["op_type"], t["attrs"].get("activation")):
            forms.append("none" if t["op_type"] == "FusedMatMul" else t["attrs"].get("approximate", "none"))
    return forms


def _gelu_tanh(h):
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))


@pytest.mark.parametrize("args, form", [
    ([], "none"),
    (["--op_select_implmode=high_precision"], "none"),
    (["--op_select_implmode=high_performance"], "tanh"),
    (["--op_select_implmode=high_performance_for_all"], "tanh"),
    (["--op_select_implmode=high_performance", "--optypelist_for_implmode=Gelu"], "tanh"),
    (["--op_select_implmode=high_performance", "--optypelist_for_implmode=Sigmoid"], "none"),
])
def test_op_select_implmode_picks_gelu_form(ge, more, tmp_path, ort_run, args, form):
    ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", *args, ok=True)
    om = str(tmp_path / "g.om")
    assert _gelu_attr(om) == [form]
    x = np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32)
    got = run(om, {"x": x})[0]
    exact = ort_run(more["gelu"], {"x": x})[0]
    h = x.astype(np.float64) @ numpy_helper.to_array(onnx.load(more["gelu"]).graph.initializer[0]).astype(np.float64)
    if form == "none":
        np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(got, _gelu_tanh(h), rtol=1e-4, atol=1e-4)
        assert np.abs(got - exact).max() > 1e-4  # the approximation is really taken


def test_implmode_rules(ge, more, tmp_path, error_line):
    r = ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", "--optypelist_for_implmode=Gelu")
    assert "--optypelist_for_implmode needs --op_select_implmode=high_precision or high_performance" in error_line(r)
    r = ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", "--optypelist_for_implmode=Gelu",
           "--op_select_implmode=high_precision_for_all")
    assert "--optypelist_for_implmode needs --op_select_implmode=high_precision or high_performance" in error_line(r)


def test_op_precision_mode_by_node_and_type(ge, more, tmp_path, error_line):
    ini = write(tmp_path / "p.ini", "[ByOpType]\nGelu=high_precision\n[ByNodeName]\ngelu=high_performance\n")
    ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", f"--op_precision_mode={ini}", ok=True)
    assert _gelu_attr(str(tmp_path / "g.om")) == ["tanh"]  # the node name wins over its type
    ini = write(tmp_path / "p.ini", "Gelu=high_performance\n")  # no section: by op type
    ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", f"--op_precision_mode={ini}", ok=True)
    assert _gelu_attr(str(tmp_path / "g.om")) == ["tanh"]
    ini = write(tmp_path / "p.ini", "[ByOpType]\nGelu=enable_hi_float_32_execution\n")
    r = ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}", f"--op_precision_mode={ini}", "--log=info",
           ok=True)
    assert _gelu_attr(str(tmp_path / "g.om")) == ["none"] and "Gelu=enable_hi_float_32_execution is an NPU" in r.stderr
    for text, message in [("[ByOpType]\nGelu=fastest\n", "p.ini line 2: mode 'fastest' of 'Gelu' is not one of"),
                          ("[ByOp]\n", "p.ini line 1: section [ByOp] is not [ByOpType] or [ByNodeName]"),
                          ("Gelu\n", "p.ini line 1: 'Gelu' is not 'name=mode'")]:
        r = ge("atc", f"--model={more['gelu']}", f"--output={tmp_path / 'g'}",
               f"--op_precision_mode={write(tmp_path / 'p.ini', text)}")
        assert r.exit_code == 1 and message in error_line(r)


def _task_dtypes(om: str) -> dict[str, str]:
    """node -> dtype of its first output, per task."""
    return {t["node"]: t["outputs"][0]["dtype"] for t in api.om_to_json(om)["tasks"]}


def test_precision_mode_computes_in_float16(ge, models, tmp_path, ort_run, error_line):
    x = np.random.default_rng(9).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort_run(models["small"], {"x": x})[0]
    compile_small(ge, models, tmp_path, "--precision_mode=force_fp32")
    fp32 = str(tmp_path / "fp32.om")
    os.replace(tmp_path / "net.om", fp32)
    assert set(_task_dtypes(fp32).values()) == {"float32"}
    for flag in ("--precision_mode=force_fp16", "--precision_mode_v2=fp16"):
        r = compile_small(ge, models, tmp_path, flag, "--log=info")
        om = str(tmp_path / "net.om")
        assert "pass precision_mode (force_fp16): lowered=" in r.stderr
        assert _task_dtypes(om)["conv"] == "float16" and recorded(om)["precision_mode"] == "force_fp16"
        assert api.inspect(om)["memory"]["WEIGHT"]["size"] < api.inspect(fp32)["memory"]["WEIGHT"]["size"]
        got = run(om, {"x": x}, "sim")[0]
        assert got.dtype == np.float32  # the model's outputs keep their dtype
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
        assert np.abs(got - want).max() > 0  # float16 error, really
    for flag in ("--precision_mode=cube_fp16in_fp32out", "--precision_mode_v2=mixed_bfloat16"):
        r = compile_small(ge, models, tmp_path, flag)
        assert "recorded, but ge has no compute path for it yet" in r.stderr
        assert set(_task_dtypes(str(tmp_path / "net.om")).values()) == {"float32"}
    assert compile_small(ge, models, tmp_path, "--precision_mode=must_keep_origin_dtype").stderr == ""
    r = compile_small(ge, models, tmp_path, "--precision_mode=force_fp32", "--precision_mode_v2=origin", ok=None)
    assert "--precision_mode and --precision_mode_v2 are mutually exclusive" in error_line(r)
    r = compile_small(ge, models, tmp_path, "--precision_mode=fp8", ok=None)
    assert "--precision_mode=fp8: must be one of force_fp16, force_fp32" in error_line(r)


def test_precision_mode_applies_to_every_gear(models, tmp_path, ort_run):
    result = api.atc(models["dynamic"], str(tmp_path / "dyn"), input_shape="x:-1,3,8,8", dynamic_batch_size="1,2",
                     precision_mode="force_fp16")
    assert all(t.op_type != "Conv" or t.outputs[0].dtype == "float16" for m in result.model.submodels
               for t in m.tasks)
    x = np.random.default_rng(10).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(result.om_path, {"x": x})[0], ort_run(models["dynamic"], {"x": x})[0],
                               rtol=2e-2, atol=2e-2)


def test_keep_dtype_file(ge, models, tmp_path, error_line):
    cfg = write(tmp_path / "keep.cfg", "# kept\nconv\nnot_a_node\nOpType::Softmax\n")
    r = compile_small(ge, models, tmp_path, f"--keep_dtype={cfg}", "--precision_mode=force_fp16")
    assert "--keep_dtype: node 'not_a_node' is not in the model" in r.stderr
    assert "--keep_dtype: op type 'Softmax' is not in the model" in r.stderr and "'conv'" not in r.stderr
    dtypes = _task_dtypes(str(tmp_path / "net.om"))
    assert dtypes["conv"] == "float32" and "float16" in dtypes.values()  # the Conv kept, the rest lowered
    compile_small(ge, models, tmp_path, f"--keep_dtype={write(tmp_path / 'k2.cfg', 'OpType::Conv')}",
                  "--precision_mode=force_fp16")
    assert _task_dtypes(str(tmp_path / "net.om"))["conv"] == "float32"
    r = compile_small(ge, models, tmp_path, f"--keep_dtype={write(tmp_path / 'k.cfg', 'Op::Relu')}", ok=None)
    assert "--keep_dtype: " in error_line(r) and "k.cfg line 1: 'Op::Relu' is not a node name or 'OpType::type'" \
        in error_line(r)


def test_modify_mixlist_file(ge, models, tmp_path, error_line):
    compile_small(ge, models, tmp_path, "--precision_mode=allow_mix_precision")
    assert _task_dtypes(str(tmp_path / "net.om"))["conv"] == "float16"  # Conv is on the white list
    mix = write(tmp_path / "mix.json", '{"allow_mix_precision": {"black-list": {"to-add": ["Conv"]}}}')
    r = compile_small(ge, models, tmp_path, f"--modify_mixlist={mix}", ok=None)
    assert "--modify_mixlist needs a mixed precision mode" in error_line(r)
    compile_small(ge, models, tmp_path, f"--modify_mixlist={mix}", "--precision_mode=allow_mix_precision")
    assert set(_task_dtypes(str(tmp_path / "net.om")).values()) == {"float32"}  # Conv moved to the black list
    assert recorded(str(tmp_path / "net.om"))["options"]["modify_mixlist"] == mix
    bad = write(tmp_path / "bad.json", '{"grey-list": {"to-add": ["Conv"]}}')
    r = compile_small(ge, models, tmp_path, f"--modify_mixlist={bad}", "--precision_mode_v2=mixed_float16", ok=None)
    assert "'grey-list' is not one of black-list, white-list, gray-list" in error_line(r)


def test_customize_dtypes_file(ge, models, tmp_path, error_line):
    cfg = write(tmp_path / "c.cfg", "conv::InputDtype:float16,float16,OutputDtype:float16\n"
                                    "OpType::Relu::InputDtype:float32,OutputDtype:float32\nghost::OutputDtype:int8\n")
    r = compile_small(ge, models, tmp_path, f"--customize_dtypes={cfg}")
    assert "--customize_dtypes: node 'ghost' is not in the model" in r.stderr and "'conv'" not in r.stderr
    assert "--customize_dtypes: recorded, but ge does not set single nodes' dtypes yet" in r.stderr
    bad = write(tmp_path / "bad.cfg", "conv::InputDtype:float8\n")
    r = compile_small(ge, models, tmp_path, f"--customize_dtypes={bad}", ok=None)
    assert "bad.cfg line 1: dtype 'float8' is not one of" in error_line(r)


def test_display_model_info_prints_the_banner(ge, models, tmp_path):
    r = compile_small(ge, models, tmp_path, "--display_model_info=1", "--soc_version=Ascend910B3")
    assert "============ Display Model Info start ============" in r.stdout
    assert "soc_version[Ascend910B3]" in r.stdout
    assert "Display Model Info" not in compile_small(ge, models, tmp_path).stdout


def test_weight_is_ignored_for_onnx_with_a_warning(ge, models, tmp_path):
    r = compile_small(ge, models, tmp_path, f"--weight={models['small']}")
    assert "[WARNING] ge.atc: --weight is ignored for ONNX models" in r.stderr


def test_aicore_num_is_bounded_by_the_soc(ge, models, tmp_path, error_line):
    r = compile_small(ge, models, tmp_path, "--soc_version=Ascend310", "--aicore_num=4", ok=None)
    assert "--aicore_num=4: Ascend310 has 2 AI Cores" in error_line(r)
    compile_small(ge, models, tmp_path, "--soc_version=Ascend910B1", "--aicore_num=24")


def test_compress_weight_options_are_exclusive(ge, models, tmp_path, error_line):
    conf = write(tmp_path / "compress.cfg", "conv\n")
    r = compile_small(ge, models, tmp_path, "--enable_compress_weight=true", f"--compress_weight_conf={conf}", ok=None)
    assert "--enable_compress_weight and --compress_weight_conf are mutually exclusive" in error_line(r)


# -- soc_version ----------------------------------------------------------------------------------
@pytest.mark.parametrize("soc", ["Ascend310", "Ascend310P3", "Ascend310B1", "Ascend910A", "Ascend910ProB",
                                 "Ascend910PremiumA", "Ascend910B4", "Ascend610", "Ascend710", "Ascend-sim"])
def test_known_soc_versions_are_accepted_and_reported(ge, models, tmp_path, soc):
    compile_small(ge, models, tmp_path, f"--soc_version={soc}")
    info = api.inspect(str(tmp_path / "net.om"))
    assert info["header"]["platform_version"] == soc and info["soc"]["soc_version"] == soc


@pytest.mark.parametrize("typo, close", [("Ascend310p3", "Ascend310P3"), ("Ascend910b", "Ascend910B"),
                                         ("Acsend310", "Ascend310")])
def test_soc_version_typo_names_close_matches(ge, models, tmp_path, error_line, typo, close):
    r = compile_small(ge, models, tmp_path, f"--soc_version={typo}", ok=None)
    line = error_line(r)
    assert r.exit_code == 1 and f"--soc_version='{typo}' is not an Ascend SoC ATC knows; did you mean" in line
    assert close in line
    r = compile_small(ge, models, tmp_path, "--soc_version=Kirin990", ok=None)
    assert "known: " in error_line(r) and "Ascend310P3" in error_line(r)


def test_simulated_npu_reports_the_soc(ge, models, tmp_path):
    compile_small(ge, models, tmp_path, "--soc_version=Ascend910B1")
    model_id = api.load_from_file(str(tmp_path / "net.om"), "sim")
    try:
        assert api.soc_info(model_id) == {"soc_version": "Ascend910B1", "family": "Atlas A2 training/inference "
                                          "(910B, 24 cores)", "aicore_num": 24, "vector_core_num": 48}
    finally:
        api.unload(model_id)


def test_inspect_shows_soc_and_recorded_options(ge, models, tmp_path):
    compile_small(ge, models, tmp_path, "--soc_version=Ascend310P3", "--enable_small_channel=1",
                  "--op_compiler_cache_mode=enable")
    r = ge("inspect", tmp_path / "net.om", "--section", "header", ok=True)
    assert "SoC Ascend310P3: Atlas inference series (310P; Ascend710 its older name), 8 AI Cores" in r.stdout
    assert "--enable_small_channel" in r.stdout and "--op_compiler_cache_mode" in r.stdout


# -- input_shape limits ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape, message", [
    ("x:1,0,8,8", "--input_shape: input 'x' has dim 0; dims are > 0, -1 (unknown) or lo~hi"),
    ("x:1,-3,8,8", "--input_shape: input 'x' has dim -3; dims are > 0, -1 (unknown) or lo~hi"),
    ("x:65536,65536,3,3", "--input_shape: input 'x' has 38654705664 elements"),
])
def test_input_shape_dims_are_checked(ge, models, tmp_path, error_line, shape, message):
    r = compile_small(ge, models, tmp_path, f"--input_shape={shape}", ok=None)
    assert r.exit_code == 1 and message in error_line(r)


# -- --mode=3 pre-check ---------------------------------------------------------------------------
def test_mode_3_writes_atc_check_report(ge, more, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = ge("atc", "--mode=3", f"--model={more['custom']}", "--framework=5", "--soc_version=Ascend310P3", ok=True)
    report = json.loads((tmp_path / "check_result.json").read_text())
    assert {k: report[k] for k in ("result", "total", "pass", "fail")} == {"result": "failed", "total": 2, "pass": 1,
                                                                           "fail": 1}
    relu, mystery = report["op"]
    assert relu == {"name": "relu", "type": "Relu", "result": "success"}
    assert mystery["name"] == "mystery" and mystery["type"] == "com.example::Mystery" and mystery["result"] == "failed"
    assert mystery["cause"][0]["code"] == "TYPE_UNSUPPORTED" and "Mystery" in mystery["cause"][0]["message"]
    assert "mystery (com.example::Mystery)" in r.stdout
    ge("atc", "--mode=3", f"--model={more['cbr']}", "--check_report=mine.json", ok=True)
    ok = json.loads((tmp_path / "mine.json").read_text())
    assert ok["result"] == "success" and ok["fail"] == 0 and [o["type"] for o in ok["op"]] == \
        ["Conv", "BatchNormalization", "Relu"]


# -- Python: every option by its ATC name -----------------------------------------------------------
def test_python_api_takes_atc_options(models, tmp_path):
    result = api.atc(models["two"], str(tmp_path / "py"), input_format="ND", disable_reuse_memory=True,
                     output_type="FP16", enable_small_channel=1, soc_version="Ascend310P3", log="error")
    assert [o.dtype for o in result.model.outputs] == ["float16", "float16"]
    assert recorded(result.om_path)["options"] == {"input_format": "ND", "disable_reuse_memory": "1",
                                                   "output_type": "FP16", "enable_small_channel": "1", "log": "error"}
    with pytest.raises(GeError, match="unknown ATC option 'input_fromat'"):
        api.atc(models["two"], str(tmp_path / "bad"), input_fromat="NCHW")
    with pytest.raises(GeError, match="--soc_version='Ascend311' is not an Ascend SoC ATC knows"):
        api.atc(models["two"], str(tmp_path / "bad"), soc_version="Ascend311")
    assert not os.path.exists(tmp_path / "bad.om")


def test_options_apply_to_the_hybrid_path(models, tmp_path, ort_run):
    result = api.atc(models["dynamic"], str(tmp_path / "hy"), input_shape="x:-1,3,8,8", output_type="FP16",
                     disable_reuse_memory=1, soc_version="Ascend310P3")
    assert result.model.mode == "hybrid" and result.model.outputs[0].dtype == "float16"
    x = np.random.default_rng(8).standard_normal((3, 3, 8, 8)).astype(np.float32)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        got = api.execute(model_id, [x])[0]
        assert api.soc_info(model_id)["soc_version"] == "Ascend310P3"
    finally:
        api.unload(model_id)
    np.testing.assert_allclose(got, ort_run(models["dynamic"], {"x": x})[0], rtol=2e-3, atol=2e-3)


def test_options_apply_to_every_gear(models, tmp_path, ort_run):
    result = api.atc(models["dynamic"], str(tmp_path / "dyn"), input_shape="x:-1,3,8,8", dynamic_batch_size="1,2",
                     output_type="FP16", enable_small_channel=1)
    assert all(m.outputs[0].dtype == "float16" for m in result.model.submodels)
    assert recorded(result.om_path)["options"]["enable_small_channel"] == "1"
    x = np.random.default_rng(7).standard_normal((2, 3, 8, 8)).astype(np.float32)
    got = run(result.om_path, {"x": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, ort_run(models["dynamic"], {"x": x})[0], rtol=2e-3, atol=2e-3)


def test_docs_table_lists_every_option():
    from ge.cli.atc import atc
    from .conftest import ROOT
    text = open(os.path.join(ROOT, "docs", "atc-options.md"), encoding="utf-8").read()
    names = {p.name for p in atc.params if p.name != "json_out"} | set(OPTIONS)
    missing = [n for n in names if f"`--{n}`" not in text]
    assert not missing
    wrong = [o.name for o in OPTIONS.values() if f"| `--{o.name}` | {o.kind} |" not in text]
    assert not wrong  # the table says what the code does
