"""fuse_depthwise_pointwise: a depthwise Conv (with its activation) and the 1x1 Conv reading it become
ge::DepthwisePointwise; compiled and run on the native kernel (csrc/dwpw.c, band by band) and on the
numpy plan (the two Convs), against onnxruntime: odd planes and channel counts, strides 1, 2 and 3,
asymmetric pads, dilation, batches, no depthwise bias, a residual, Relu6 (Clip), HardSwish, Relu."""
import importlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels.conv import DEPTHWISE_EPILOGUE, EXPAND_EPILOGUE
from ge.core.kernels.epilogue import ATTR as EPILOGUE
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import optimize

F = TensorProto.FLOAT
fusion = importlib.import_module("ge.core.passes.fuse_depthwise_pointwise")  # the package names the function so
rng = np.random.default_rng(11)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def block(make_model, shape, oc, k=3, s=1, pads=(1, 1, 1, 1), dil=1, dw_act="Clip", pw_act=None,
          residual=False, dw_bias=True, read_twice=False, expand=None):
    """x -> [1x1 Conv expanding to shape's channels -> expand's activation (cin, act)] -> depthwise Conv ->
    [dw_act] -> 1x1 Conv [-> Add(r)] [-> pw_act]."""
    n, c = shape[:2]
    node = helper.make_node
    inits = {"wd": w(c, 1, k, k), "wp": w(oc, c, 1, 1, scale=c ** -0.5), "bp": w(oc), "lo": np.float32(0),
             "hi": np.float32(6)}
    nodes, x = [], "x"
    if expand is not None:
        cin, act = expand
        inits |= {"we": w(c, cin, 1, 1, scale=cin ** -0.5), "be": w(c)}
        nodes.append(node("Conv", ["x", "we", "be"], ["e"]))
        x = "e"
        if act:
            nodes.append(node(act, ["e", "lo", "hi"] if act == "Clip" else ["e"], ["ea"]))
            x = "ea"
    dw_inputs = [x, "wd"]
    if dw_bias:
        inits["bd"] = w(c)
        dw_inputs.append("bd")
    nodes += [node("Conv", dw_inputs, ["d"], group=c, kernel_shape=[k, k], strides=[s, s], pads=list(pads),
                  dilations=[dil, dil])]
    last = "d"
    if dw_act:
        nodes.append(node(dw_act, ["d", "lo", "hi"] if dw_act == "Clip" else ["d"], ["a"]))
        last = "a"
    nodes.append(node("Conv", [last, "wp", "bp"], ["p"]))
    last = "p"
    inputs = {"x": (F, [n, expand[0]] + list(shape[2:]) if expand else list(shape))}
    oh = (shape[2] + pads[0] + pads[2] - dil * (k - 1) - 1) // s + 1
    ow = (shape[3] + pads[1] + pads[3] - dil * (k - 1) - 1) // s + 1
    if residual:
        inputs["r"] = (F, [n, oc, oh, ow])
        nodes.append(node("Add", [last, "r"], ["s"]))
        last = "s"
    nodes.append(node(pw_act, [last], ["y"]) if pw_act else node("Identity", [last], ["y"]))
    outputs = ["y"] + (["d2"] if read_twice else [])
    if read_twice:
        nodes.append(node("Neg", [last if dw_act is None else "a"], ["d2"]))
    return make_model(nodes, inputs, outputs, inits), (n, oc, oh, ow)


CASES = [  # shape (of the depthwise input), oc, k, s, pads, dil, dw_act, pw_act, residual, dw_bias[, expand]
    ((1, 20, 13, 11), 7, 3, 1, (1, 1, 1, 1), 1, "Clip", None, False, True),
    ((3, 37, 17, 19), 24, 3, 2, (1, 0, 0, 1), 1, "HardSwish", "Relu", False, True),
    ((2, 16, 40, 41), 40, 5, 2, (2, 2, 2, 2), 1, "Relu", None, True, False),
    ((1, 24, 9, 70), 16, 3, 1, (2, 2, 2, 2), 2, "Clip", "HardSwish", True, True),
    ((1, 5, 31, 31), 3, 3, 3, (1, 1, 1, 1), 1, None, None, False, True),
    ((2, 33, 30, 30), 17, 3, 1, (0, 0, 0, 0), 1, "Clip", None, True, True),
    # rows wide enough for blocks of vectors whose taps all read inside the row (no masks)
    ((1, 6, 12, 300), 10, 3, 2, (1, 1, 1, 1), 1, "Clip", None, False, True),
    ((1, 5, 7, 100), 9, 3, 1, (0, 0, 0, 0), 1, "HardSwish", None, True, True),
    ((2, 7, 9, 90), 12, 5, 1, (2, 0, 2, 0), 1, "Relu", "Relu", False, True),
    ((1, 4, 11, 260), 5, 5, 2, (2, 2, 2, 2), 1, None, None, False, True),
    # with the expanding 1x1 conv: ExpandDepthwisePointwise (bands expand the rows they read, some twice)
    ((1, 20, 13, 11), 7, 3, 1, (1, 1, 1, 1), 1, "Clip", None, False, True, (5, "Clip")),
    ((3, 37, 17, 19), 24, 3, 2, (1, 0, 0, 1), 1, "HardSwish", "Relu", True, True, (16, "HardSwish")),
    ((2, 48, 60, 58), 16, 5, 2, (2, 2, 2, 2), 1, "Relu", None, True, False, (13, None)),
    ((1, 40, 64, 70), 24, 3, 1, (1, 1, 1, 1), 1, "Clip", None, True, True, (24, "Clip")),
    ((1, 24, 9, 70), 16, 3, 1, (2, 2, 2, 2), 2, "Clip", "HardSwish", False, True, (3, "Relu")),
]


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("case", CASES)
def test_fused_as_onnxruntime(make_model, tmp_path, monkeypatch, default_backend, backend, case):
    shape, oc, k, s, pads, dil, dw_act, pw_act, residual, dw_bias, *expand = case
    expand = expand[0] if expand else None
    default_backend(backend)
    monkeypatch.setattr(fusion, "MIN_BYTES", 0)
    model, out_shape = block(make_model, shape, oc, k, s, pads, dil, dw_act, pw_act, residual, dw_bias, expand=expand)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    feeds = {"x": rng.standard_normal([shape[0], expand[0]] + list(shape[2:]) if expand else shape).astype(np.float32)}
    if residual:
        feeds["r"] = rng.standard_normal(out_shape).astype(np.float32)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        (task,) = api.model(model_id).default_context.handle
        kernel = task.plan.kernel
        op = "ExpandDepthwisePointwise" if expand else "DepthwisePointwise"
        assert (kernel.op_type, kernel.uses_native) == (op, backend == "native")
        assert kernel.plan == ("native" if backend == "native" else "convs")
        got = [api.execute(model_id, list(feeds.values()))[0] for _ in range(2)]  # the second on prepared calls
    finally:
        api.unload(model_id)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_fused_node(make_model, load, monkeypatch):
    monkeypatch.setattr(fusion, "MIN_BYTES", 0)
    model, _ = block(make_model, (1, 8, 12, 12), 4, dw_act="Clip", pw_act="Relu", residual=True)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_depthwise_pointwise"] == {"fused": 1}
    (node,) = g.nodes
    assert (node.op_type, node.domain) == ("DepthwisePointwise", GE_DOMAIN)
    assert node.inputs == ["x", "wd", "bd", "wp", "bp", "r"]
    assert node.attrs[DEPTHWISE_EPILOGUE] == [["Clip", {"min": 0.0, "max": 6.0}]]
    assert node.attrs[EPILOGUE] == [["Relu", {}]]


@pytest.mark.parametrize("case", [dict(read_twice=True), dict(k=1, pads=(0, 0, 0, 0), oc=4, small=True)])
def test_not_fused(make_model, load, monkeypatch, case):
    """A depthwise output read twice stays; below MIN_BYTES (the default) the two Convs stay."""
    if not case.pop("small", False):
        monkeypatch.setattr(fusion, "MIN_BYTES", 0)
    model, _ = block(make_model, (1, 8, 12, 12), case.pop("oc", 4), **case)
    g = load(model)
    optimize(g)
    assert [n.op_type for n in g.nodes if "Conv" in n.op_type or n.op_type == "DepthwisePointwise"] == ["Conv", "Conv"]


def test_a_pointwise_conv_with_strides_is_not_fused(make_model, load, monkeypatch):
    monkeypatch.setattr(fusion, "MIN_BYTES", 0)
    model, _ = block(make_model, (1, 8, 12, 12), 4)
    for node in model.graph.node:
        if node.input[0] == "a":
            node.attribute.append(helper.make_attribute("strides", [2, 2]))
    g = load(model)
    optimize(g)
    assert "DepthwisePointwise" not in [n.op_type for n in g.nodes]


def test_the_expanded_node(make_model, load, monkeypatch):
    monkeypatch.setattr(fusion, "MIN_BYTES", 0)
    model, _ = block(make_model, (1, 8, 12, 12), 4, dw_act="HardSwish", residual=True, expand=(3, "Clip"))
    g = load(model)
    optimize(g)
    (node,) = g.nodes
    assert (node.op_type, node.domain) == ("ExpandDepthwisePointwise", GE_DOMAIN)
    assert node.inputs == ["x", "we", "be", "wd", "bd", "wp", "bp", "r"]
    assert node.attrs[EXPAND_EPILOGUE] == [["Clip", {"min": 0.0, "max": 6.0}]]
    assert node.attrs[DEPTHWISE_EPILOGUE] == [["HardSwish", {}]]
    assert EPILOGUE not in node.attrs
