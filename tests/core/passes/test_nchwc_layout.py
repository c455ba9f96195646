"""nchwc_layout: connected convolutions run in the blocked layout NCHW16c (ge::NchwcConv between
ReorderInput and ReorderOutput), where that pays; whole models against onnxruntime on the native and
the numpy backend, and the pass's choices exactly."""
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import fusion_switches, optimize
from ge.formats.om import read_om, write_om

F = TensorProto.FLOAT
rng = np.random.default_rng(11)


class Builder:
    """A model built node by node: conv() adds its weights, the names say what each node is."""

    def __init__(self):
        self.nodes, self.inits = [], {}

    def conv(self, name, x, c, oc, k=1, stride=1, pads=None, dilation=1, relu=True, z=None):
        pads = [(k // 2) * dilation] * 4 if pads is None else pads
        self.inits[f"{name}.w"] = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        self.inits[f"{name}.b"] = (rng.standard_normal(oc) * 0.1).astype(np.float32)
        self.nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name, kernel_shape=[k, k],
                                           strides=[stride] * 2, pads=pads, dilations=[dilation] * 2))
        out = name
        if z is not None:
            self.nodes.append(helper.make_node("Add", [out, z], [f"{name}.sum"], name=f"{name}.add"))
            out = f"{name}.sum"
        if relu:
            self.nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}.relu"))
            out = f"{name}.relu"
        return out

    def node(self, op, inputs, out, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def model(self, inputs: dict, outputs: list):
        graph = helper.make_graph(self.nodes, "m", [helper.make_tensor_value_info(k, F, s) for k, s in inputs.items()],
                                  [helper.make_tensor_value_info(o, F, None) for o in outputs],
                                  [numpy_helper.from_array(v, k) for k, v in self.inits.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def bottleneck(b, x, c, width, out, stride, name, dilation=1):
    """ResNet's bottleneck: 1x1, 3x3 (the stride; a dilation), 1x1 + the identity or a 1x1 downsample."""
    y = b.conv(f"{name}.conv1", x, c, width)
    y = b.conv(f"{name}.conv2", y, width, width, 3, stride, dilation=dilation)
    z = x if stride == 1 and c == out else b.conv(f"{name}.down", x, c, out, 1, stride, relu=False)
    return b.conv(f"{name}.conv3", y, width, out, z=z)


def resnet_style(batch=1, image=48):
    """Stem (3 channels, 7x7 stride 2), MaxPool, three bottlenecks (channels off the block: 40, 24, 100,
    72; one with a dilated 3x3, one downsampling), GlobalAveragePool, Flatten, Gemm."""
    b = Builder()
    y = b.conv("stem", "x", 3, 40, 7, 2)
    y = b.node("MaxPool", [y], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = bottleneck(b, y, 40, 24, 100, 1, "block1")
    y = bottleneck(b, y, 100, 24, 100, 1, "block2", dilation=2)
    y = bottleneck(b, y, 100, 40, 200, 2, "block3")
    y = b.node("GlobalAveragePool", [y], "gap")
    y = b.node("Flatten", [y], "flat")
    b.inits["fc.w"] = (rng.standard_normal((200, 10)) * 0.1).astype(np.float32)
    b.inits["fc.b"] = (rng.standard_normal(10) * 0.1).astype(np.float32)
    y = b.node("Gemm", [y, "fc.w", "fc.b"], "logits")
    return b.model({"x": [batch, 3, image, image]}, [y])


def switch_off(tmp_path) -> str:
    path = tmp_path / "switch.json"
    path.write_text(json.dumps({"Switch": {"GraphFusion": {"nchwc_layout": "off"}}}))
    return str(path)


def compile_and_run(tmp_path, use_backend, backend, model, feeds, name="m", **atc):
    """Compiled where the native kernels run (the pass blocks only there), loaded on `backend`."""
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    use_backend("native")
    result = api.atc(path, str(tmp_path / name), **atc)
    use_backend(backend)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        tasks = [(t.plan.kernel.op_type, t.plan.name, t.plan.kernel.uses_native) for t in
                 api.model(model_id).default_context.handle]
        return api.execute(model_id, feeds), tasks, result.om_path
    finally:
        api.unload(model_id)


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


RESNET_TASKS = ["NchwcConv", "NchwcMaxPool"] + ["NchwcConv"] * 11 + ["NchwcGlobalAveragePool", "Gemm"]


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("batch", [1, 3])
def test_resnet_style_model_runs_its_convs_blocked(tmp_path, default_backend, backend, batch):
    """The stem (3 channels, 7x7) reads the NCHW input in place and writes blocked, its MaxPool pools blocked,
    the region has no reorder and ends in the GlobalAveragePool, which reads it blocked; every bottleneck
    conv runs blocked, residuals included; onnxruntime's results on either backend, and the pass switched
    off gives them too."""
    model = resnet_style(batch)
    feeds = {"x": rng.standard_normal((batch, 3, 48, 48)).astype(np.float32)}
    want = ort_run(model, feeds)
    got, tasks, om = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [op for op, _, _ in tasks] == RESNET_TASKS
    assert [name for op, name, _ in tasks if op.startswith("Reorder")] == []
    assert all(native == (backend == "native") for op, _, native in tasks if op.startswith(("Nchwc", "Reorder")))
    assert_close(got, want)
    plain, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds, "plain",
                                      fusion_switch_file=switch_off(tmp_path))
    assert "NchwcConv" not in [op for op, _, _ in tasks]
    assert_close(plain, want)
    # the blocked values are planned as tensors of whole blocks: 100 channels take 112
    shapes = {t.name: t.shape for t in read_om(om).tensors}
    assert shapes["block1.conv3.relu"] == (batch, 7, 12, 12, 16) and shapes["pool"] == (batch, 3, 12, 12, 16)


def test_a_compiler_without_native_kernels_keeps_nchw(load, default_backend):
    """The numpy plans of the blocked ops unblock and block around the NCHW ones: slower than the NCHW
    plans, so the pass blocks nothing where the native kernels do not run (an OM compiled where they
    run still loads there: the numpy plans of the test above)."""
    default_backend("numpy")
    g, stats = optimized(load, resnet_style())
    assert stats == {"no_native_kernels": 1} and "NchwcConv" not in [op for op, _ in ops(g)]


def chain(b, x, c, convs, k=3):
    for i in range(convs):
        x = b.conv(f"c{i}", x, c, c, k)
    return x


NONE = {"regions": 0, "blocked_convs": 0, "blocked_pools": 0, "blocked_muls": 0, "blocked_channel_ops": 0,
        "reorders": 0}


@pytest.fixture
def native(default_backend):
    """The pass blocks where the native kernels run."""
    default_backend("native")


def optimized(load, model, **kw):
    g = load(model)
    report = optimize(g, **kw)
    return g, report["passes"]["nchwc_layout"]


def ops(g):
    return [(n.op_type, n.name) for n in g.nodes]


def test_a_lone_conv_or_two_stay_nchw(load, native):
    """A conv between two reorders does not pay, nor do two (two reorders); three in a row do."""
    for convs, blocked in ((1, False), (2, False), (3, True)):
        b = Builder()
        y = b.node("Sigmoid", ["x"], "s")
        y = chain(b, y, 64, convs)
        g, stats = optimized(load, b.model({"x": [1, 64, 16, 16]}, [b.node("Neg", [y], "y")]))
        assert ("NchwcConv" in [op for op, _ in ops(g)]) == blocked
        if blocked:
            assert ops(g) == [("Sigmoid", "s"), ("ReorderInput", "s:to_nchwc"), ("NchwcConv", "c0"), ("NchwcConv", "c1"),
                              ("NchwcConv", "c2"), ("ReorderOutput", "c2.relu:from_nchwc"), ("Neg", "y")]
            assert stats == {"regions": 1, "blocked_convs": 3, "blocked_pools": 0, "blocked_muls": 0,
                             "blocked_channel_ops": 0, "reorders": 2}
        else:
            assert stats == NONE


def test_a_value_read_outside_the_region_leaves_it_and_an_output_too(load, run_ort, run_ge, native):
    """A blocked value that a non-conv node reads gets a ReorderOutput for that reader while the next conv
    reads it blocked; a blocked value that is a model output keeps its name, written by a ReorderOutput."""
    b = Builder()
    y = chain(b, "x", 40, 2)
    side = b.node("Sigmoid", [y], "side")
    y = b.conv("c2", y, 40, 40, 3)
    mid = b.conv("c3", y, 40, 40, 3, stride=2, pads=[0, 1, 1, 0])  # asymmetric pads
    y = b.conv("c4", mid, 40, 40, 3)
    model = b.model({"x": [2, 40, 15, 13]}, [y, side, mid])
    g, stats = optimized(load, model)
    assert ops(g) == [("ReorderInput", "x:to_nchwc"), ("NchwcConv", "c0"), ("NchwcConv", "c1"),
                      ("ReorderOutput", "c1.relu:from_nchwc"), ("Sigmoid", "side"), ("NchwcConv", "c2"),
                      ("NchwcConv", "c3"), ("ReorderOutput", "c3.relu:from_nchwc"), ("NchwcConv", "c4"),
                      ("ReorderOutput", "c4.relu:from_nchwc")]
    assert stats == {"regions": 1, "blocked_convs": 5, "blocked_pools": 0, "blocked_muls": 0,
                     "blocked_channel_ops": 0, "reorders": 4}
    reorders = {n.name: (n.inputs, n.outputs, n.attrs) for n in g.nodes if n.op_type.startswith("Reorder")}
    assert reorders["c1.relu:from_nchwc"] == (["c1.relu:nchwc"], ["c1.relu"], {"channels": 40})
    assert reorders["c3.relu:from_nchwc"] == (["c3.relu:nchwc"], ["c3.relu"], {"channels": 40})
    assert g.outputs == ["c4.relu", "side", "c3.relu"]
    assert g.meta("c0.relu").shape == (2, 3, 15, 13, 16) and g.meta("c3.relu").shape == (2, 40, 7, 6)
    assert all(n.domain == GE_DOMAIN for n in g.nodes if n.op_type != "Sigmoid")
    feeds = {"x": rng.standard_normal((2, 40, 15, 13)).astype(np.float32)}
    assert_close(run_ge(g, feeds), run_ort(model, feeds))


def test_a_value_two_region_convs_read_is_reordered_once(load, native):
    """Two convs reading the model input: one region, one ReorderInput before the first of them."""
    b = Builder()
    left = b.conv("left", "x", 48, 48, 3)
    right = b.conv("right", "x", 48, 48, 3, relu=False)
    y = b.conv("join", left, 48, 48, 3, z=right)
    g, stats = optimized(load, b.model({"x": [1, 48, 20, 20]}, [y]))
    assert ops(g) == [("ReorderInput", "x:to_nchwc"), ("NchwcConv", "left"), ("NchwcConv", "right"),
                      ("NchwcConv", "join"), ("ReorderOutput", "join.relu:from_nchwc")]
    join = g.nodes[3]
    assert join.inputs == ["left.relu", "join.w", "join.b", "right"] and join.attrs["ge.epilogue"] == [["Relu", {}]]


def activate(b, y, act):
    """ReLU6 (Clip 0..6, its bounds as inputs), Relu or HardSwish after y."""
    if act == "relu6":
        b.inits.setdefault("zero", np.float32(0))
        b.inits.setdefault("six", np.float32(6))
        return b.node("Clip", [y, "zero", "six"], f"{y}.relu6")
    return b.node(act, [y], f"{y}.{act.lower()}")


def pointwise(b, name, x, c, oc, act=None, z=None):
    y = b.conv(name, x, c, oc, relu=False)
    y = b.node("Add", [y, z], f"{name}.sum") if z is not None else y
    return activate(b, y, act) if act else y


def depthwise(b, name, x, c, k, stride, act):
    b.inits[f"{name}.w"] = (rng.standard_normal((c, 1, k, k)) / k).astype(np.float32)
    b.inits[f"{name}.b"] = (rng.standard_normal(c) * 0.1).astype(np.float32)
    y = b.node("Conv", [x, f"{name}.w", f"{name}.b"], name, kernel_shape=[k, k], strides=[stride] * 2,
               pads=[k // 2] * 4, group=c)
    return activate(b, y, act)


def squeeze_excite(b, name, x, c, gate_first=False):
    """GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv -> HardSigmoid -> Mul with x (MobileNetV3's)."""
    s = b.node("GlobalAveragePool", [x], f"{name}.pool")
    s = b.conv(f"{name}.fc1", s, c, max(c // 4, 8))
    s = b.conv(f"{name}.fc2", s, max(c // 4, 8), c, relu=False)
    s = b.node("HardSigmoid", [s], f"{name}.gate", alpha=1.0 / 6, beta=0.5)
    return b.node("Mul", [s, x] if gate_first else [x, s], f"{name}.mul")


def head(b, x, c, image, batch, act):
    """1x1 conv to 64, GlobalAveragePool, Flatten, Gemm: the classifier."""
    y = pointwise(b, "last", x, c, 64, act)
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y], "gap")], "flat")
    b.inits["fc.w"] = (rng.standard_normal((64, 10)) * 0.1).astype(np.float32)
    return b.model({"x": [batch, 3, image, image]}, [b.node("Gemm", [y, "fc.w"], "logits")])


# (expansion, output channels, stride): channels off the block (24, 37: 48 is 1.3x of it, 222)
V2_BLOCKS = [(6, 24, 2), (6, 24, 1), (6, 37, 2), (6, 37, 1)]


def mobilenetv2_style(batch=1, image=32, blocks=V2_BLOCKS, stem_output=False):
    """A 3-channel stem (3x3 stride 2, ReLU6), inverted residuals (1x1 expand + ReLU6, depthwise 3x3 stride 1
    or 2 + ReLU6, 1x1 project, the residual Add where the shape stays), the head; stem_output: the stem's
    output a model output too."""
    b = Builder()
    x = stem = activate(b, b.conv("stem", "x", 3, 16, 3, 2, relu=False), "relu6")
    c = 16
    for i, (t, oc, stride) in enumerate(blocks):
        e = pointwise(b, f"b{i}.expand", x, c, int(c * t), "relu6")
        d = depthwise(b, f"b{i}.dw", e, int(c * t), 3, stride, "relu6")
        x = pointwise(b, f"b{i}.project", d, int(c * t), oc, z=x if stride == 1 and c == oc else None)
        c = oc
    model = head(b, x, c, image, batch, "relu6")
    if stem_output:
        model.graph.output.append(helper.make_tensor_value_info(stem, TensorProto.FLOAT, None))
    return model


V2_TASKS = ["NchwcConv"] * (3 * len(V2_BLOCKS) + 2) + ["NchwcGlobalAveragePool", "Gemm"]


# (kernel, expanded channels, output channels, squeeze-excite, activation, stride), MobileNetV3-Large's
# kinds with channel counts off the block (72, 40, 120, 100, 44)
V3_BLOCKS = [(3, 16, 16, False, "Relu", 1), (5, 72, 40, True, "Relu", 2), (5, 120, 40, True, "HardSwish", 1),
             (3, 100, 44, False, "HardSwish", 2)]


def mobilenetv3_style(batch=1, image=32):
    """A 3-channel stem (HardSwish), inverted residuals with 3x3 and 5x5 depthwise convs, Relu or HardSwish,
    squeeze-excite (its Mul written gate first once), the residual Add where the shape stays; the head."""
    b = Builder()
    x = activate(b, b.conv("stem", "x", 3, 16, 3, 2, relu=False), "HardSwish")
    c = 16
    for i, (k, exp, oc, se, act, stride) in enumerate(V3_BLOCKS):
        e = pointwise(b, f"b{i}.expand", x, c, exp, act) if exp != c else x
        d = depthwise(b, f"b{i}.dw", e, exp, k, stride, act)
        d = squeeze_excite(b, f"b{i}.se", d, exp, gate_first=i == 2) if se else d
        x = pointwise(b, f"b{i}.project", d, exp, oc, z=x if stride == 1 and c == oc else None)
        c = oc
    return head(b, x, c, image, batch, "HardSwish")


SE_TASKS = ["NchwcGlobalAveragePool", "Conv", "Conv", "NchwcMul"]
V3_TASKS = (["NchwcConv", "NchwcConv", "NchwcConv"]  # the stem, block 0 (no expansion)
            + ["NchwcConv", "NchwcConv"] + SE_TASKS + ["NchwcConv"] + ["NchwcConv", "NchwcConv"] + SE_TASKS
            + ["NchwcConv"] + ["NchwcConv"] * 3 + ["NchwcConv", "NchwcGlobalAveragePool", "Gemm"])


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("batch", [1, 3])
def test_mobilenetv3_style_model_runs_blocked_squeeze_excite_included(tmp_path, default_backend, backend, batch):
    """One region from the stem's output to the GlobalAveragePool: the 5x5 and 3x3 depthwise convs
    (Relu, HardSwish applied by the kernel), the squeeze-excite's pool reads the blocked value and its Mul
    (either operand order) scales it blocked by the NCHW gate its two 1x1 convs compute (those stay NCHW:
    two convs between two reorders would not pay); onnxruntime's results on either backend."""
    model = mobilenetv3_style(batch)
    feeds = {"x": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
    got, tasks, om = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [op for op, _, _ in tasks] == V3_TASKS
    assert not [name for op, name, _ in tasks if op.startswith("Reorder")]
    assert [name for op, name, _ in tasks if op == "NchwcMul"] == ["b1.se.mul", "b2.se.mul"]
    assert all(native == (backend == "native") for op, _, native in tasks if op.startswith(("Nchwc", "Reorder")))
    assert_close(got, ort_run(model, feeds))
    mul = next(t for t in read_om(om).tasks if t.op_type == "NchwcMul" and t.node == "b2.se.mul")
    assert [a.shape for a in mul.inputs] == [(batch, 8, 8, 8, 16), (batch, 120, 1, 1)]  # blocked first, then the gate


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("batch", [1, 3])
def test_mobilenetv2_style_model_runs_blocked_after_its_stem(tmp_path, default_backend, backend, batch):
    """The stem (3 channels) reads the NCHW input in place and writes blocked, no reorder anywhere; every
    expansion, depthwise conv (ReLU6 applied by the kernel), projection (its residual added as it stores) and
    the head's conv run blocked up to the GlobalAveragePool; onnxruntime's results on either backend."""
    model = mobilenetv2_style(batch)
    feeds = {"x": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
    got, tasks, om = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [op for op, _, _ in tasks] == V2_TASKS
    assert not [name for op, name, _ in tasks if op.startswith("Reorder")]
    assert all(native == (backend == "native") for op, _, native in tasks if op.startswith(("Nchwc", "Reorder")))
    assert_close(got, ort_run(model, feeds))
    model_om = read_om(om)
    dw = {t.node: t for t in model_om.tasks if t.op_type == "NchwcConv" and t.attrs["group"] != 1}
    assert sorted(dw) == [f"b{i}.dw" for i in range(len(V2_BLOCKS))]
    assert dw["b2.dw"].attrs["group"] == 144 and dw["b2.dw"].attrs["ge.epilogue"] == [["Clip", {"min": 0.0, "max": 6.0}]]
    shapes = {t.name: t.shape for t in model_om.tensors}
    assert shapes["b3.dw.relu6"] == (batch, 14, 4, 4, 16)  # 222 channels in 14 blocks


def test_a_mobilenet_too_thin_to_pay_stays_nchw(load, native):
    """With the stem's output a model output too (one ReorderOutput), expansion 1 instead of 6: 107
    multiply-adds per element the reorder moves, under PAYBACK; expansion 3 (249) pays. Without that output
    no reorder at all (the stem reads the NCHW input in place): the thin one pays."""
    thin, wide = ([(t, oc, stride) for _, oc, stride in V2_BLOCKS] for t in (1, 3))
    g, stats = optimized(load, mobilenetv2_style(blocks=thin, stem_output=True))
    assert stats == NONE and "NchwcConv" not in [op for op, _ in ops(g)]
    g, stats = optimized(load, mobilenetv2_style(blocks=wide, stem_output=True))
    assert stats["regions"] == 1 and stats["blocked_convs"] == 14 and stats["reorders"] == 1
    g, stats = optimized(load, mobilenetv2_style(blocks=thin))
    assert stats["regions"] == 1 and stats["blocked_convs"] == 14 and stats["reorders"] == 0


def test_few_channels_stay_nchw(load, native):
    """A conv of 3 input channels reads them as NCHW in place, its output blocked (no reorder before the
    convs after it); one of 17 wastes most of a block of 16: not blocked, and the convs after it are a
    region of their own when they pay."""
    b = Builder()
    y = b.conv("few", "x", 3, 64, 3)
    y = chain(b, y, 64, 3)
    g, _ = optimized(load, b.model({"x": [1, 3, 16, 16]}, [y]))
    assert ops(g)[:2] == [("NchwcConv", "few"), ("NchwcConv", "c0")] and g.nodes[0].inputs[0] == "x"
    b = Builder()
    y = b.conv("odd", "x", 17, 64, 3)
    y = b.conv("next", y, 64, 17, 3)
    y = b.conv("last", y, 17, 64, 3)
    g, _ = optimized(load, b.model({"x": [1, 17, 16, 16]}, [y]))
    assert [op for op, _ in ops(g)] == ["Conv"] * 3


def test_the_switch_turns_it_off(load, native):
    b = Builder()
    y = chain(b, "x", 64, 3)
    model = b.model({"x": [1, 64, 16, 16]}, [y])
    g, stats = optimized(load, model, disabled={"nchwc_layout"})
    assert [op for op, _ in ops(g)] == ["Conv"] * 3 and stats == {"switched_off": 1}
    assert fusion_switches({"GraphFusion": {"nchwc_layout": False}})[0] == {"nchwc_layout"}
    assert "nchwc_layout" in fusion_switches({"GraphFusion": {"ALL": False}})[0]


@pytest.mark.parametrize("field, value, message", [
    ("strides", "2", r"attrs\['strides'\] must be a list of int64"),
    ("group", 2, r"attrs\['group'\] is 2 with W of shape \(32, 32, 3, 3\): the blocked convolution has one group or one "
                 r"channel per group \(depthwise\)"),
    ("group", 32, r"attrs\['group'\] is 32 with W of shape \(32, 32, 3, 3\)"),
    ("pads", [1, 1, 1], r"attribute pads has 3 values, 4 expected"),
    ("auto_pad", None, r"attrs\['auto_pad'\] is missing"),
])
def test_a_mutated_om_fails_naming_the_field(tmp_path, default_backend, field, value, message):
    """An OM whose NchwcConv or ReorderOutput attributes were edited fails to load, naming the task and
    the field (the kernel's spec checks them: ge's ops have no onnx schema)."""
    default_backend("native")
    b = Builder()
    model = b.model({"x": [1, 32, 8, 8]}, [chain(b, "x", 32, 3)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    om = api.atc(path, str(tmp_path / "m")).om_path
    ge_model = read_om(om)
    task = next(t for t in ge_model.tasks if t.op_type == "NchwcConv")
    if value is None:
        del task.attrs[field]
    else:
        task.attrs[field] = value
    write_om(ge_model, tmp_path / "bad.om")
    with pytest.raises(GeError, match=r"TASK_INFO.tasks\[1\] 'c0' \(NchwcConv\): .*" + message):
        api.load_from_file(str(tmp_path / "bad.om"), "cpu")
    ge_model = read_om(om)
    reorder = next(t for t in ge_model.tasks if t.op_type == "ReorderOutput")
    for channels, problem in ((20, "declared float32"), ("32", "must be an int")):
        reorder.attrs["channels"] = channels
        write_om(ge_model, tmp_path / "bad.om")
        with pytest.raises(GeError, match=r"\(ReorderOutput\): .*" + problem):
            api.load_from_file(str(tmp_path / "bad.om"), "cpu")


@pytest.mark.parametrize("group, message", [
    (1, r"W has shape \(144, 1, 3, 3\) and attrs\['group'\] is 1: 1 input channels, X has 9 blocks"),
    (72, r"attrs\['group'\] is 72 with W of shape \(144, 1, 3, 3\): .* one channel per group \(depthwise\)"),
    ("144", r"attrs\['group'\] must be an int64"),
])
def test_a_mutated_depthwise_task_fails_naming_the_field(tmp_path, default_backend, group, message):
    """A blocked depthwise conv whose group was edited fails to load, naming the task and the field."""
    default_backend("native")
    path = str(tmp_path / "m.onnx")
    onnx.save(mobilenetv2_style(), path)
    ge_model = read_om(api.atc(path, str(tmp_path / "m")).om_path)
    at, task = next((k, t) for k, t in enumerate(ge_model.tasks) if t.node == "b2.dw")
    task.attrs["group"] = group
    write_om(ge_model, tmp_path / "bad.om")
    with pytest.raises(GeError, match=rf"TASK_INFO.tasks\[{at}\] 'b2.dw' \(NchwcConv\): .*" + message):
        api.load_from_file(str(tmp_path / "bad.om"), "cpu")


@pytest.mark.parametrize("kind, spec, dynamic", [("range", "x:1~4,3,48,48", {}),
                                                 ("gears", "x:-1,3,48,48", {"dynamic_batch_size": "1,3"})])
def test_gears_and_ranges_run_blocked(tmp_path, default_backend, kind, spec, dynamic):
    """A gear is a static graph of its own, blocked like any; a range model runs at its shapes too."""
    default_backend("native")
    model = resnet_style("N")
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    result = api.atc(path, str(tmp_path / kind), input_shape=spec, dynamic=dynamic)
    if kind == "gears":
        assert all([t.op_type for t in sub.tasks] == RESNET_TASKS for sub in result.model.submodels)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for batch in (1, 3):
            feeds = {"x": rng.standard_normal((batch, 3, 48, 48)).astype(np.float32)}
            assert_close(api.execute(model_id, feeds), ort_run(model, feeds))
    finally:
        api.unload(model_id)


def vgg_style(batch=1):
    """Conv stacks between MaxPools (one 2x2, one 3x3 with ceil_mode and padding), channels off the block,
    a GlobalAveragePool and a classifier; the second pool's output is a model output too."""
    b = Builder()
    y = chain(b, "x", 32, 2)
    y = b.node("MaxPool", [y], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv("c2", y, 32, 40, 3)
    y = b.conv("c3", y, 40, 40, 3, dilation=2)
    pooled = b.node("MaxPool", [y], "pool2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0], ceil_mode=1)
    y = b.conv("c4", pooled, 40, 48, 3)
    y = b.node("GlobalAveragePool", [y], "gap")
    y = b.node("Flatten", [y], "flat")
    b.inits["fc.w"] = (rng.standard_normal((48, 10)) * 0.1).astype(np.float32)
    y = b.node("Gemm", [y, "fc.w"], "logits")
    return b.model({"x": [batch, 32, 27, 27]}, [y, pooled])


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("batch", [1, 2])
def test_pools_inside_a_region_run_blocked(tmp_path, default_backend, backend, batch):
    """MaxPools between blocked convs and the GlobalAveragePool after them read and write the blocked
    layout: one ReorderInput for the whole model, a ReorderOutput only for the pool that is a model output."""
    model = vgg_style(batch)
    feeds = {"x": rng.standard_normal((batch, 32, 27, 27)).astype(np.float32)}
    got, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [(op, name) for op, name, _ in tasks] == [
        ("ReorderInput", "x:to_nchwc"), ("NchwcConv", "c0"), ("NchwcConv", "c1"), ("NchwcMaxPool", "pool1"),
        ("NchwcConv", "c2"), ("NchwcConv", "c3"), ("NchwcMaxPool", "pool2"), ("ReorderOutput", "pool2:from_nchwc"),
        ("NchwcConv", "c4"), ("NchwcGlobalAveragePool", "gap"), ("Gemm", "logits")]
    assert all(native == (backend == "native") for op, _, native in tasks if op != "Gemm")
    assert_close(got, ort_run(model, feeds))


def c2f_style(opset=17, batch=1, last=24):
    """YOLOv8's C2f: a conv split in two along the channels (32 + 32), a bottleneck of two convs added to its
    input, the three concatenated with a conv of `last` channels (off the block: its padding channels stay
    last), then a conv; a Split whose parts are not whole blocks (8 + 56) stays NCHW beside it."""
    b = Builder()
    y = b.conv("cv1", "x", 16, 64, 3)
    if opset >= 13:
        b.inits["halves"] = np.array([32, 32], np.int64)
        b.nodes.append(helper.make_node("Split", [y, "halves"], ["a", "b"], name="split", axis=1))
    else:
        b.nodes.append(helper.make_node("Split", [y], ["a", "b"], name="split", axis=1, split=[32, 32]))
    h = b.conv("m.cv1", "b", 32, 32, 3)
    h = b.conv("m.cv2", h, 32, 32, 3)
    h = b.node("Add", ["b", h], "m.add")
    tail = b.conv("side", h, 32, last, 3)
    y = b.node("Concat", ["a", "b", h, tail], "cat", axis=1)
    y = b.conv("cv2", y, 96 + last, 48, 1)
    if opset >= 13:
        b.inits["uneven"] = np.array([8, 40], np.int64)
        b.nodes.append(helper.make_node("Split", [y, "uneven"], ["u", "v"], name="uneven", axis=1))
    else:
        b.nodes.append(helper.make_node("Split", [y], ["u", "v"], name="uneven", axis=1, split=[8, 40]))
    model = b.model({"x": [batch, 16, 20, 20]}, ["u", "v"])
    model.opset_import[0].version = opset
    return model


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("opset", [11, 17])
def test_split_add_concat_of_whole_blocks_run_blocked(tmp_path, default_backend, backend, opset):
    """The C2f block is one region: Split, Add and Concat along the blocked tensors' channel blocks (Split's
    parts counted in blocks, as its input from opset 13 or its attribute before), no reorder between them;
    the Split into 8 + 56 channels reads the region's last conv through a ReorderOutput. At batch 1 the
    blocked Split's parts are runs of its input's blocks: views (compile/build.py), no task."""
    model = c2f_style(opset)
    feeds = {"x": rng.standard_normal((1, 16, 20, 20)).astype(np.float32)}
    got, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [(op, name) for op, name, _ in tasks] == [
        ("ReorderInput", "x:to_nchwc"), ("NchwcConv", "cv1"), ("NchwcConv", "m.cv1"),
        ("NchwcConv", "m.cv2"), ("Add", "m.add"), ("NchwcConv", "side"), ("Concat", "cat"), ("NchwcConv", "cv2"),
        ("ReorderOutput", "cv2.relu:from_nchwc"), ("Split", "uneven")]
    assert_close(got, ort_run(model, feeds))


def test_channel_ops_stats_and_what_stays_out(load, native):
    """Counted as channel ops; a Concat with an off-block part before the last, or of a value no member
    writes, stays NCHW."""
    g, stats = optimized(load, c2f_style(last=24))
    assert stats["blocked_channel_ops"] == 3 and stats["reorders"] == 2
    b = Builder()
    y = chain(b, "x", 64, 3)
    odd = b.conv("odd", y, 64, 24, 3)
    b.node("Concat", [odd, y], "cat1", axis=1)  # 24 channels first: not whole blocks
    b.node("Concat", [y, "x"], "cat2", axis=1)  # x: no member writes it
    g, stats = optimized(load, b.model({"x": [1, 64, 8, 8]}, ["cat1", "cat2"]))
    assert [op for op, _ in ops(g) if op == "Concat"] == ["Concat"] * 2 and stats["blocked_channel_ops"] == 0
    assert [n.inputs for n in g.nodes if n.op_type == "Concat"] == [["odd.relu", "c2.relu"], ["c2.relu", "x"]]


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_every_executor_on_both_devices(tmp_path, default_backend, device):
    """The linear plan writes a block's output over its blocked residual; the dataflow and parallel
    executors' plan keeps them apart: the same results on either device."""
    default_backend("native")
    model = resnet_style(2)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    feeds = {"x": rng.standard_normal((2, 3, 48, 48)).astype(np.float32)}
    want = ort_run(model, feeds)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, device)
    try:
        for executor in ("linear", "dataflow", "parallel"):
            ctx = api.model(model_id).create_context(executor=executor)
            for _ in range(2):
                assert_close(ctx.execute([feeds["x"]]), want)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("mode, blocked", [("allow_fp32_to_fp16", False), ("must_keep_origin_dtype", True)])
def test_the_layout_follows_precision_mode(tmp_path, default_backend, mode, blocked):
    """The pass runs after --precision_mode: convs lowered to float16 stay NCHW (the kernel is float32)."""
    default_backend("native")
    model = resnet_style()
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    result = api.atc(path, str(tmp_path / "m"), precision_mode=mode)
    ops = [t.op_type for t in result.model.tasks]
    assert ("NchwcConv" in ops) == blocked and ("Cast" in ops) != blocked


def upsample_style(form="scales", coord="asymmetric"):
    """YOLOv8's neck: a deep conv's output upsampled x2 by Resize(nearest) and concatenated with a shallower
    conv's, then a conv; `form`: the Resize's scales or sizes input."""
    b = Builder()
    shallow = b.conv("c0", "x", 16, 32, 3)
    deep = b.conv("c1", b.conv("down", shallow, 32, 32, 3, 2), 32, 48, 3)
    b.inits["roi"] = np.zeros(0, np.float32)
    if form == "scales":
        b.inits["scales"] = np.array([1, 1, 2, 2], np.float32)
        params = ["roi", "scales"]
    else:
        b.inits["scales"] = np.zeros(0, np.float32)
        b.inits["sizes"] = np.array([1, 48, 12, 12], np.int64)
        params = ["roi", "scales", "sizes"]
    up = b.node("Resize", [deep] + params, "up", mode="nearest", coordinate_transformation_mode=coord,
                nearest_mode="floor")
    y = b.node("Concat", [shallow, up], "cat", axis=1)
    y = b.conv("c2", y, 80, 32, 3)
    return b.model({"x": [1, 16, 12, 12]}, [y])


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("form,coord", [("scales", "asymmetric"), ("sizes", "half_pixel"), ("scales", "align_corners")])
def test_an_upsample_between_convs_runs_blocked(tmp_path, default_backend, backend, form, coord):
    """The upsample joins the region: the same Resize of the blocked tensor (scales given a fifth 1, sizes
    the blocked shape), no reorder around it or after the Concat it feeds."""
    model = upsample_style(form, coord)
    feeds = {"x": rng.standard_normal((1, 16, 12, 12)).astype(np.float32)}
    got, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [(op, name) for op, name, _ in tasks] == [
        ("ReorderInput", "x:to_nchwc"), ("NchwcConv", "c0"), ("NchwcConv", "down"), ("NchwcConv", "c1"),
        ("Resize", "up"), ("Concat", "cat"), ("NchwcConv", "c2"), ("ReorderOutput", "c2.relu:from_nchwc")]
    assert dict((name, native) for _, name, native in tasks)["up"] == (backend == "native")
    assert_close(got, ort_run(model, feeds))


def neck_style():
    """DBNet's neck in small: a conv's output plus its squeeze-excite (x + x * HardSigmoid gate: one
    FusedElementwise), a lower level upsampled and added, a 3x3 conv of 24 channels, then an upsample
    into an NCHW op (a Transpose)."""
    b = Builder()
    y = b.conv("c0", "x", 16, 32, 1, relu=False)
    gap = b.node("GlobalAveragePool", [y], "gap")
    s = b.conv("se1", gap, 32, 8, 1)
    s = b.node("HardSigmoid", [b.conv("se2", s, 8, 32, 1, relu=False)], "gate", alpha=0.2)
    r = b.node("Add", [y, b.node("Mul", [y, s], "scaled")], "rse")
    low = b.conv("down", r, 32, 32, 3, 2, relu=False)
    b.inits["scales"] = np.array([1, 1, 2, 2], np.float32)
    up = b.node("Resize", [low, "", "scales"], "up", mode="nearest")
    y = b.conv("c1", b.node("Add", [r, up], "td"), 32, 24, 3, relu=False)
    out = b.node("Resize", [y, "", "scales"], "out_up", mode="nearest")
    return b.model({"x": [1, 16, 12, 12]}, [b.node("Transpose", [out], "t", perm=[0, 2, 3, 1])])


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_squeeze_excite_chains_and_adds_run_blocked(tmp_path, default_backend, backend):
    """The chain fuse_elementwise makes of x + x * gate joins the region (the gate blocked by the planar 1x1
    conv that writes it), the top-down Add too; the last upsample, read outside, runs NCHW after the
    reorder (the smaller tensor)."""
    model = neck_style()
    feeds = {"x": rng.standard_normal((1, 16, 12, 12)).astype(np.float32)}
    got, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds)
    assert [(op, name) for op, name, _ in tasks] == [
        ("ReorderInput", "x:to_nchwc"), ("NchwcConv", "c0"), ("NchwcGlobalAveragePool", "gap"), ("Conv", "se1"),
        ("NchwcConv", "se2"), ("FusedElementwise", "rse"), ("NchwcConv", "down"), ("Resize", "up"), ("Add", "td"),
        ("NchwcConv", "c1"), ("ReorderOutput", "c1:from_nchwc"), ("Resize", "out_up"), ("Transpose", "t")]
    assert_close(got, ort_run(model, feeds))


def symbolic(model, names=("N", None, "H", "W")):
    """The model as an exporter with dynamic axes writes it: its input's dims symbolic but the channels."""
    for axis, (dim, name) in enumerate(zip(model.graph.input[0].type.tensor_type.shape.dim, names)):
        if name:
            dim.dim_param = name
    return model


def compile_dynamic(tmp_path, use_backend, backend, model, channels, name="dyn"):
    """Compiled with unknown N, H, W (the hybrid executor), loaded on `backend`: (model id, its nodes' ops
    and names in step order)."""
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    use_backend("native")
    result = api.atc(path, str(tmp_path / name), input_shape=f"x:-1,{channels},-1,-1")
    use_backend(backend)
    model_id = api.load_from_file(result.om_path, "cpu")
    dyn = api.model(model_id).dyn
    assert not dyn.submodels  # every node's shape is unknown
    return model_id, [(dyn.nodes[s.index].op_type, dyn.nodes[s.index].name) for s in dyn.steps]


def assert_runs_as_onnxruntime(model_id, model, shapes, **extra):
    try:
        for shape in shapes:
            feeds = {"x": rng.standard_normal(shape).astype(np.float32), **extra}
            assert_close(api.execute(model_id, feeds), ort_run(model, feeds))
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_dynamic_graphs_run_blocked_as_static_ones(tmp_path, default_backend, backend):
    """With its batch and image size unknown, ResNet's convs, pools and head are blocked as in a static
    graph (what may be blocked is decided by channels, ranks and constants; whether it pays at a nominal
    size), each blocked op built for the shapes a run brings: odd sizes, batch 3, then smaller again."""
    model = symbolic(resnet_style())  # (its residual Adds: FusedConvs, Z alike at the nominal size)
    model_id, ops = compile_dynamic(tmp_path, default_backend, backend, model, 3)
    assert [op for op, _ in ops if op != "Flatten"] == RESNET_TASKS  # (a static build makes it a view)
    assert_runs_as_onnxruntime(model_id, model, [(1, 3, 48, 48), (3, 3, 40, 56), (2, 3, 33, 47), (1, 3, 20, 20)])


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_dynamic_squeeze_excite_and_neck_run_blocked(tmp_path, default_backend, backend):
    """MobileNetV3's squeeze-excite Mul (the gate's batch the same symbol as the value's) and DBNet's neck
    (x + x * gate chains, upsampled levels added: onnx gives the Resize's output fresh symbols, related
    at the nominal size) are blocked as in their static graphs."""
    model = symbolic(mobilenetv3_style())
    model_id, ops = compile_dynamic(tmp_path, default_backend, backend, model, 3, "v3")
    assert [op for op, _ in ops if op != "Flatten"] == V3_TASKS
    assert_runs_as_onnxruntime(model_id, model, [(1, 3, 32, 32), (2, 3, 48, 40)])
    model = symbolic(neck_style())
    model_id, ops = compile_dynamic(tmp_path, default_backend, backend, model, 16, "neck")
    assert ops == [
        ("ReorderInput", "x:to_nchwc"), ("NchwcConv", "c0"), ("NchwcGlobalAveragePool", "gap"), ("Conv", "se1"),
        ("NchwcConv", "se2"), ("FusedElementwise", "rse"), ("NchwcConv", "down"), ("Resize", "up"), ("Add", "td"),
        ("NchwcConv", "c1"), ("ReorderOutput", "c1:from_nchwc"), ("Resize", "out_up"), ("Transpose", "t")]
    assert_runs_as_onnxruntime(model_id, model, [(1, 16, 12, 12), (2, 16, 20, 16)])


def gated_by_one_gate(batch="N"):
    """x + x * sigmoid(g): a gate g (1, 32, 1, 1) given for the whole batch, broadcast over it."""
    b = Builder()
    y = b.conv("c0", "x", 16, 32, 3)
    y = b.conv("c1", y, 32, 32, 3)
    gate = b.node("Sigmoid", ["g"], "gate")
    r = b.node("Add", [y, b.node("Mul", [y, gate], "scaled")], "rse")
    y = b.conv("c2", r, 32, 32, 3)
    graph = b.model({"x": [batch, 16, 10, 10]}, [b.conv("c3", y, 32, 16, 3)]).graph
    graph.input.append(helper.make_tensor_value_info("g", F, [1, 32, 1, 1]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_a_chains_gate_for_the_whole_batch_is_broadcast_blocked(tmp_path, default_backend, backend):
    """A chain's gate of batch 1 over a batch of 3 joins the region (reordered in, broadcast as NCHW
    broadcasts it), static and with unknown dims alike."""
    g = rng.standard_normal((1, 32, 1, 1)).astype(np.float32)
    model = gated_by_one_gate(3)
    feeds = {"x": rng.standard_normal((3, 16, 10, 10)).astype(np.float32), "g": g}
    got, tasks, _ = compile_and_run(tmp_path, default_backend, backend, model, feeds, input_shape="x:3,16,10,10;g:1,32,1,1")
    assert ("FusedElementwise", "rse") in [(op, name) for op, name, _ in tasks]
    assert [op for op, _, _ in tasks].count("ReorderOutput") == 1  # the last conv's: the chain reads blocked
    assert_close(got, ort_run(model, feeds))
    model = symbolic(gated_by_one_gate())
    path = str(tmp_path / "gated.onnx")
    onnx.save(model, path)
    default_backend("native")
    result = api.atc(path, str(tmp_path / "gated"), input_shape="x:-1,16,-1,-1;g:1,32,1,1")
    default_backend(backend)
    model_id = api.load_from_file(result.om_path, "cpu")
    ops = [n.op_type for n in api.model(model_id).dyn.nodes]
    assert ops.count("ReorderOutput") == 1 and "FusedElementwise" in ops
    assert_runs_as_onnxruntime(model_id, model, [(3, 16, 10, 10), (1, 16, 7, 9)], g=g)
