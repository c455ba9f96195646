"""The activations of mobile convnets (MobileNetV2/V3, PP-LCNet, EfficientNet) fused into their
producer by fuse_activation and applied as the native kernels store (or by the numpy epilogue):
each pattern compiled, run on every plan and compared with onnxruntime."""
import functools
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels.epilogue import ATTR as EPILOGUE
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(11)
n = helper.make_node


def activation(kind: str, x: str, y: str) -> tuple[list, dict]:
    """Nodes computing y = kind(x), and their initializers."""
    if kind == "Relu6":
        return [n("Clip", [x, "lo", "hi"], [y])], {"lo": np.float32(0), "hi": np.float32(6)}
    if kind == "ClipNarrow":  # bounds the data crosses on both sides
        return [n("Clip", [x, "lo", "hi"], [y])], {"lo": np.float32(-0.5), "hi": np.float32(0.7)}
    if kind == "LeakyRelu":
        return [n("LeakyRelu", [x], [y], alpha=0.1)], {}
    if kind == "HardSigmoid":
        return [n("HardSigmoid", [x], [y], alpha=0.25, beta=0.4)], {}
    if kind == "Swish":  # SiLU as exported: x * Sigmoid(x)
        return [n("Sigmoid", [x], ["gate"]), n("Mul", [x, "gate"], [y])], {}
    if kind == "SwishSwapped":
        return [n("Sigmoid", [x], ["gate"]), n("Mul", ["gate", x], [y])], {}
    if kind == "HardSwishGated":  # x * HardSigmoid(x) with torch's hardsigmoid constants
        return [n("HardSigmoid", [x], ["gate"], alpha=1 / 6, beta=0.5), n("Mul", [x, "gate"], [y])], {}
    return [n(kind, [x], [y])], {}


ACTIVATIONS = ["Relu", "Relu6", "ClipNarrow", "HardSwish", "HardSigmoid", "Sigmoid", "Swish", "SwishSwapped",
               "HardSwishGated", "LeakyRelu"]
EXPECTED_STEP = {"Relu": ["Relu", {}], "Relu6": ["Clip", {"min": 0.0, "max": 6.0}],
                 "ClipNarrow": ["Clip", {"min": -0.5, "max": pytest.approx(0.7)}],
                 "HardSwish": ["HardSwish", {}], "HardSigmoid": ["HardSigmoid", {"alpha": 0.25, "beta": pytest.approx(0.4)}],
                 "Sigmoid": ["Sigmoid", {}], "Swish": ["Swish", {"alpha": 1.0}, GE_DOMAIN],
                 "SwishSwapped": ["Swish", {"alpha": 1.0}, GE_DOMAIN], "HardSwishGated": ["HardSwish", {}],
                 "LeakyRelu": ["LeakyRelu", {"alpha": pytest.approx(0.1)}]}

# producer -> (x shape, conv attrs, weight shape) or "matmul"
PRODUCERS = {
    "conv3x3": ([1, 8, 9, 9], dict(kernel_shape=[3, 3], pads=[1] * 4), (16, 8, 3, 3)),
    "pointwise": ([1, 24, 7, 7], dict(kernel_shape=[1, 1]), (40, 24, 1, 1)),  # the pixels kernel (native)
    "first_conv": ([1, 3, 30, 101], dict(kernel_shape=[3, 3], pads=[1] * 4, strides=[2, 2]), (19, 3, 3, 3)),  # too
    "depthwise3x3": ([1, 16, 10, 10], dict(kernel_shape=[3, 3], pads=[1] * 4, group=16), (16, 1, 3, 3)),
    "depthwise5x5s2": ([1, 16, 11, 11], dict(kernel_shape=[5, 5], pads=[2] * 4, strides=[2, 2], group=16),
                       (16, 1, 5, 5)),
    "matmul": ([1, 12, 32], None, (32, 24)),
}


def model_of(producer: str, act: str, residual: bool = False):
    shape, attrs, wshape = PRODUCERS[producer]
    inits = {"w": (rng.standard_normal(wshape) * 0.4).astype(np.float32)}
    if attrs is None:
        nodes = [n("MatMul", ["x", "w"], ["p"]), n("Add", ["p", "b"], ["c"])]
        inits["b"] = rng.standard_normal(wshape[1]).astype(np.float32)
    else:
        inits["b"] = rng.standard_normal(wshape[0]).astype(np.float32)
        nodes = [n("Conv", ["x", "w", "b"], ["c" if not residual else "p"], **attrs)]
        if residual:
            nodes.append(n("Add", ["p", "x"], ["c"]))
    act_nodes, act_inits = activation(act, "c", "y")
    return helper.make_model(
        helper.make_graph(nodes + act_nodes, "m", [helper.make_tensor_value_info("x", F, shape)],
                          [helper.make_tensor_value_info("y", F, None)],
                          [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in {**inits, **act_inits}.items()]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8), shape


def compile_and_run(model, x, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        tasks = api.model(model_id).default_context.handle
        return api.execute(model_id, [x])[0], [t.plan for t in tasks]
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("plan", ["native", "native-gemm", "numpy"])
@pytest.mark.parametrize("producer", list(PRODUCERS))
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_activation_fused_and_applied_as_onnxruntime(tmp_path, default_backend, plan, producer, act):
    """One task: the producer with the activation as its epilogue, absorbed by the native kernel
    (direct conv, the GEMM, the depthwise kernel) or applied in place by the numpy epilogue."""
    default_backend("numpy" if plan == "numpy" else "native", direct="never" if plan == "native-gemm" else "auto")
    model, shape = model_of(producer, act)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.flat[:4] = [-10.0, 10.0, -200.0, 200.0]  # past every clamp, far into Sigmoid's tails
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.uses_native == (plan != "numpy")
    assert task.kernel.absorbs_epilogue == (plan != "numpy")
    assert (task.epilogue is None) == (plan != "numpy")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_the_pass_records_one_step(load, act):
    model, _ = model_of("conv3x3", act)
    g = load(model)
    optimize(g)
    (node,) = g.nodes
    assert node.op_type == "Conv" and node.attrs[EPILOGUE] == [EXPECTED_STEP[act]]


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("act", ["HardSwish", "Swish", "Relu6"])
def test_residual_add_then_activation(tmp_path, default_backend, plan, act):
    """Conv + Add(x) + activation: one FusedConv, the residual added and the activation applied as it stores."""
    default_backend(plan)
    model, shape = model_of("pointwise", act, residual=True)
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(
        (rng.standard_normal((24, 24, 1, 1)) * 0.4).astype(np.float32), "w"))
    model.graph.initializer[1].CopyFrom(onnx.numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b"))
    x = rng.standard_normal(shape).astype(np.float32)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.op_type == "FusedConv" and task.kernel.absorbs_epilogue == (plan == "native")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_gates_that_are_not_swish_stay(load):
    """A gate read elsewhere, a Mul by another tensor, a HardSigmoid with other constants: no fusion
    of the Mul (the producer's output is read twice). fuse_elementwise, which would put the gate and
    its Mul into one task of their own, is off: this is about the Conv's epilogue."""
    shape, attrs, wshape = PRODUCERS["conv3x3"]
    inits = [onnx.numpy_helper.from_array(np.zeros(wshape, np.float32), "w")]
    cases = [
        ([n("Sigmoid", ["c"], ["gate"]), n("Mul", ["c", "gate"], ["y"]), n("Neg", ["gate"], ["z"])], ["y", "z"]),
        ([n("Sigmoid", ["c"], ["gate"]), n("Mul", ["gate", "gate"], ["y"]), n("Neg", ["c"], ["z"])], ["y", "z"]),
        ([n("HardSigmoid", ["c"], ["gate"], alpha=0.2, beta=0.5), n("Mul", ["c", "gate"], ["y"])], ["y"]),
    ]
    for act_nodes, outs in cases:
        model = helper.make_model(helper.make_graph(
            [n("Conv", ["x", "w"], ["c"], **attrs)] + act_nodes, "m", [helper.make_tensor_value_info("x", F, shape)],
            [helper.make_tensor_value_info(o, F, None) for o in outs], inits),
            opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        g = load(model)
        optimize(g, disabled={"fuse_elementwise"})
        assert "Mul" in [node.op_type for node in g.nodes]
        assert not any(node.attrs.get(EPILOGUE) for node in g.nodes if node.op_type == "Conv")


def float16_model(producer: str, act: str):
    """model_of's graph as a float16 export (model.half()) writes it: float16 input, weights, output."""
    model, shape = model_of(producer, act)
    for init in model.graph.initializer:
        init.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(init).astype(np.float16), init.name))
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model, shape


def onnxruntime_float16(model, x):
    """onnxruntime's outputs for a float16 model, from its float32 run (the model's float16 values as
    float32) rounded once: what ge computes (a float16 Conv and its fused activation in float32, rounded
    once), and within a few float16 ulps (0.002 in these tests) what onnxruntime's float16 kernels give on
    x86, rounding after each op; its aarch64 ones, a float16 Conv accumulated in half precision, up to
    0.07 off (found under qemu-aarch64)."""
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    tensors = [*wide.graph.initializer, *(a.t for node in wide.graph.node for a in node.attribute
                                          if a.type == onnx.AttributeProto.TENSOR)]
    for t in tensors:
        if t.data_type == TensorProto.FLOAT16:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float32), t.name))
    for value in (*wide.graph.input, *wide.graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    return [y.astype(np.float16) for y in _ort(wide, x.astype(np.float32))]


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("producer", ["conv3x3", "depthwise3x3", "pointwise"])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_float16_activation_fused_and_applied_before_rounding(tmp_path, default_backend, plan, producer, act):
    """A float16 Conv computes in float32 (kernels/float16.py): its activation, which float16 kernels
    of Sigmoid, HardSwish, SiLU... could only apply with workspace of their own, fuses as in float32
    and is applied to the float32 result before the rounding. One task, results as onnxruntime's."""
    default_backend(plan)
    model, shape = float16_model(producer, act)
    x = (rng.standard_normal(shape) * 3).astype(np.float16)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.absorbs_epilogue and task.epilogue is None
    want = onnxruntime_float16(model, x)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("act", ["HardSwishGated", "Swish", "Sigmoid", "LeakyRelu"])
def test_float16_gemm_head_fuses_its_activation(tmp_path, act):
    """A classifier head as the TorchScript exporter writes a float16 Linear + activation: Gemm."""
    w = (rng.standard_normal((24, 32)) * 0.3).astype(np.float16)
    b = rng.standard_normal(24).astype(np.float16)
    act_nodes, _ = activation(act, "c", "y")
    model = helper.make_model(helper.make_graph(
        [n("Gemm", ["x", "w", "b"], ["c"], transB=1)] + act_nodes, "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")]),
        opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    x = rng.standard_normal((2, 32)).astype(np.float16)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("producer", ["conv3x3", "depthwise5x5s2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_hardswish_before_opset_14_fuses_as_ge_hardswish(tmp_path, load, default_backend, plan, producer, dtype):
    """The TorchScript exporter writes nn.Hardswish at opsets 11-13 as x * HardSigmoid(x; 1/6, 1/2)
    (MobileNetV3, PP-LCNet): the pattern is the producer's epilogue there too, as ge's HardSwish
    (the ONNX op exists from opset 14 on)."""
    default_backend(plan)
    model, shape = float16_model(producer, "HardSwishGated") if dtype == np.float16 else \
        model_of(producer, "HardSwishGated")
    model.opset_import[0].version = 13
    g = load(model)
    optimize(g)
    assert [(node.op_type, node.attrs[EPILOGUE]) for node in g.nodes] == [("Conv", [["HardSwish", {}, GE_DOMAIN]])]
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.absorbs_epilogue == (plan == "native" or dtype == np.float16)
    want = (onnxruntime_float16 if dtype == np.float16 else _ort)(model, x)[0]
    tol = dict(rtol=4e-3, atol=4e-3) if dtype == np.float16 else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **tol)


# -- the decomposed forms exporters write (passes/_activation_forms.py) -----------------------------
class Consts:
    """Scalar constants as an exporter spells them: initializers of shape [] or [1] (paddle2onnx's old
    mapper, onnx-simplified models) or Constant nodes (torch.onnx, paddle2onnx); `style` picks."""

    def __init__(self, style: str, dtype):
        self.style, self.dtype, self.nodes, self.inits = style, dtype, [], {}

    def __call__(self, value: float) -> str:
        name = f"k{len(self.nodes) + len(self.inits)}"
        a = np.array(value if self.style != "one" else [value], self.dtype)
        if self.style == "node":
            self.nodes.append(n("Constant", [], [name], value=onnx.numpy_helper.from_array(a)))
        else:
            self.inits[name] = a
        return name


def _hardswish_paddle(x, y, c, offset=3.0, top=6.0, divisor=6.0):
    """paddle2onnx's hard_swish before opset 14; x * F.relu6(x + 3) / 6 in torch."""
    return [n("Add", [x, c(offset)], ["s"]), n("Clip", ["s", c(0.0), c(top)], ["r"]), n("Mul", [x, "r"], ["p"]),
            n("Div", ["p", c(divisor)], [y])]


# form -> (nodes computing y from x: f(x, y, consts), the epilogue step recorded, model opset)
DECOMPOSED = {
    "hardswish_paddle": (_hardswish_paddle, ["HardSwish", {}, GE_DOMAIN], 11),
    "hardswish_paddle_opset10": (lambda x, y, c: [  # Clip's bounds as attributes before opset 11
        n("Add", [x, c(3.0)], ["s"]), n("Clip", ["s"], ["r"], min=0.0, max=6.0), n("Mul", ["r", x], ["p"]),
        n("Div", ["p", c(6.0)], [y])], ["HardSwish", {}, GE_DOMAIN], 10),
    "hardswish_keras": (lambda x, y, c: [  # Multiply([x, ReLU(6)(x + 3) * (1 / 6)]) through tf2onnx
        n("Add", [x, c(3.0)], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]), n("Mul", ["r", c(1 / 6)], ["h"]),
        n("Mul", [x, "h"], [y])], ["HardSwish", {}, GE_DOMAIN], 13),
    "hardswish_keras_swapped": (lambda x, y, c: [  # Multiply([hard_sigmoid(x), x]), constants first
        n("Add", [c(3.0), x], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]), n("Mul", [c(1 / 6), "r"], ["h"]),
        n("Mul", ["h", x], [y])], ["HardSwish", {}], 17),
    "hardswish_div_gate": (lambda x, y, c: [  # torch: x * (F.relu6(x + 3) / 6)
        n("Add", [x, c(3.0)], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]), n("Div", ["r", c(6.0)], ["h"]),
        n("Mul", [x, "h"], [y])], ["HardSwish", {}, GE_DOMAIN], 12),
    "hardswish_mul_after": (lambda x, y, c: [  # x * relu6(x + 3) * (1 / 6)
        n("Add", [x, c(3.0)], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]), n("Mul", [x, "r"], ["p"]),
        n("Mul", ["p", c(0.16666667)], [y])], ["HardSwish", {}, GE_DOMAIN], 13),
    "hardswish_min_max": (lambda x, y, c: [  # relu6 as Maximum(Minimum(x, 6), 0)
        n("Add", [x, c(3.0)], ["s"]), n("Min", ["s", c(6.0)], ["u"]), n("Max", ["u", c(0.0)], ["r"]),
        n("Mul", [x, "r"], ["p"]), n("Div", ["p", c(6.0)], [y])], ["HardSwish", {}, GE_DOMAIN], 11),
    "hardswish_relu_min": (lambda x, y, c: [  # torch's older relu6: Relu, then Clip with a max only
        n("Add", [x, c(3.0)], ["s"]), n("Relu", ["s"], ["u"]), n("Clip", ["u", "", c(6.0)], ["r"]),
        n("Mul", [x, "r"], ["p"]), n("Div", ["p", c(6.0)], [y])], ["HardSwish", {}, GE_DOMAIN], 12),
    "hardswish_hard_sigmoid_form": (lambda x, y, c: [  # keras 3: x * clip(x / 6 + 0.5, 0, 1)
        n("Div", [x, c(6.0)], ["s"]), n("Add", ["s", c(0.5)], ["t"]), n("Min", ["t", c(1.0)], ["u"]),
        n("Max", ["u", c(0.0)], ["r"]), n("Mul", [x, "r"], [y])], ["HardSwish", {}, GE_DOMAIN], 13),
    "hardswish_paddle_slope": (lambda x, y, c: [  # x * paddle's nn.Hardsigmoid (slope 0.1666667)
        n("HardSigmoid", [x], ["h"], alpha=0.1666667, beta=0.5), n("Mul", [x, "h"], [y])],
        ["HardSwish", {}, GE_DOMAIN], 11),
    "relu6_relu_min": (lambda x, y, c: [n("Relu", [x], ["r"]), n("Min", ["r", c(6.0)], [y])],
                       ["Clip", {"min": 0.0, "max": 6.0}], 13),
    "relu6_relu_clip": (lambda x, y, c: [n("Relu", [x], ["r"]), n("Clip", ["r", c(0.0), c(6.0)], [y])],
                        ["Clip", {"min": 0.0, "max": 6.0}], 11),
    "relu6_min_max": (lambda x, y, c: [n("Min", [x, c(6.0)], ["r"]), n("Max", ["r", c(0.0)], [y])],
                      ["Clip", {"min": 0.0, "max": 6.0}], 13),
    "hardsigmoid_relu6": (lambda x, y, c: [  # torch/timm hard_sigmoid: F.relu6(x + 3) / 6
        n("Add", [x, c(3.0)], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]), n("Div", ["r", c(6.0)], [y])],
        ["HardSigmoid", {"alpha": pytest.approx(1 / 6), "beta": pytest.approx(0.5)}], 11),
    "hardsigmoid_affine": (lambda x, y, c: [  # keras 2's hard_sigmoid: clip(0.2 x + 0.5, 0, 1)
        n("Mul", [x, c(0.2)], ["s"]), n("Add", ["s", c(0.5)], ["t"]), n("Clip", ["t", c(0.0), c(1.0)], [y])],
        ["HardSigmoid", {"alpha": pytest.approx(0.2), "beta": pytest.approx(0.5)}], 13),
    "swish_paddle_beta": (lambda x, y, c: [  # paddle2onnx's swish: Mul(x, Sigmoid(Mul(x, beta)))
        n("Mul", [x, c(1.5)], ["s"]), n("Sigmoid", ["s"], ["g"]), n("Mul", [x, "g"], [y])],
        ["Swish", {"alpha": 1.5}, GE_DOMAIN], 11),
}


def decomposed_model(form, producer: str = "conv3x3", dtype=np.float32, style: str = "scalar",
                     extra: list | None = None, outputs=("y",)):
    """producer -> the form (a DECOMPOSED key, or a builder at opset 13); float32 or float16
    (model.half()); `extra` nodes and outputs for the negative cases."""
    build, _, opset = DECOMPOSED[form] if isinstance(form, str) else (form, None, 13)
    shape, attrs, wshape = PRODUCERS[producer] if producer != "gemm" else ([2, 32], None, (24, 32))
    consts = Consts(style, dtype)
    inits = {"w": (rng.standard_normal(wshape) * 0.4).astype(dtype)}
    if producer == "gemm":  # a Linear head as torch.onnx writes it
        inits["b"] = rng.standard_normal(wshape[0]).astype(dtype)
        nodes = [n("Gemm", ["x", "w", "b"], ["c"], transB=1)]
    elif attrs is None:
        inits["b"] = rng.standard_normal(wshape[1]).astype(dtype)
        nodes = [n("MatMul", ["x", "w"], ["p0"]), n("Add", ["p0", "b"], ["c"])]
    else:
        inits["b"] = rng.standard_normal(wshape[0]).astype(dtype)
        nodes = [n("Conv", ["x", "w", "b"], ["c"], **attrs)]
    nodes += build("c", "y", consts) + (extra or [])
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return helper.make_model(helper.make_graph(
        consts.nodes + nodes, "m", [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [onnx.numpy_helper.from_array(v, k) for k, v in {**inits, **consts.inits}.items()]),
        opset_imports=[helper.make_opsetid("", opset)], ir_version=8), shape


def _ort(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _inputs(shape, dtype):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    x.flat[:6] = [-10.0, 10.0, -3.0, 3.0, -200.0, 200.0]  # past every clamp, at HardSwish's corners
    return x


@pytest.mark.parametrize("style", ["scalar", "one", "node"])
@pytest.mark.parametrize("form", list(DECOMPOSED))
def test_the_pass_records_the_decomposed_form_as_one_step(load, form, style):
    model, _ = decomposed_model(form, style=style)
    g = load(model)
    optimize(g)
    (node,) = g.nodes
    assert node.op_type == "Conv" and node.attrs[EPILOGUE] == [DECOMPOSED[form][1]]


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("producer, dtype", [("conv3x3", np.float32), ("depthwise3x3", np.float32),
                                             ("matmul", np.float32), ("conv3x3", np.float16),
                                             ("depthwise3x3", np.float16), ("gemm", np.float16)])
@pytest.mark.parametrize("form", list(DECOMPOSED))
def test_decomposed_form_fused_and_applied_as_onnxruntime(tmp_path, default_backend, plan, producer, dtype, form):
    """One task (the producer, the form its epilogue) whose results are onnxruntime's running the
    decomposed ops: float32 within 1e-5 relative, float16 (the activation applied once to the float32
    result here; onnxruntime's float32 run of the model, rounded once) within a few float16 ulps. (A float16
    MatMul's bias Add computes in float16, where these activations are no in-place epilogue: not here.)"""
    default_backend(plan)
    model, shape = decomposed_model(form, producer, dtype, style="node")
    x = _inputs(shape, dtype)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.absorbs_epilogue == (plan == "native" or dtype == np.float16)
    want = (onnxruntime_float16 if dtype == np.float16 else _ort)(model, x)[0]
    assert got.dtype == dtype
    tol = dict(rtol=4e-3, atol=4e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("form", ["hardswish_paddle", "hardswish_keras", "hardswish_min_max", "relu6_relu_min",
                                  "hardsigmoid_relu6", "hardswish_hard_sigmoid_form"])
def test_decomposed_form_after_no_producer_is_one_native_pass(tmp_path, default_backend, form, dtype):
    """After an op that takes no epilogue (here a model input): one elementwise task that the native
    interpreter runs, not one task per op."""
    default_backend("native")
    build, _, opset = DECOMPOSED[form]
    consts = Consts("node", dtype)
    nodes = build("x", "y", consts)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = helper.make_model(helper.make_graph(
        consts.nodes + nodes, "m", [helper.make_tensor_value_info("x", elem, [2, 8, 9, 9])],
        [helper.make_tensor_value_info("y", elem, None)]), opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    x = _inputs([2, 8, 9, 9], dtype)
    got, plans = compile_and_run(model, x, tmp_path)
    (task,) = plans
    assert task.kernel.native
    tol = dict(rtol=4e-3, atol=4e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.astype(np.float32), _ort(model, x)[0].astype(np.float32), **tol)


# name -> (builder, extra nodes, graph outputs)
NOT_FUSED = {
    "offset_2.9": (functools.partial(_hardswish_paddle, offset=2.9), [], ("y",)),
    "divisor_5.99": (functools.partial(_hardswish_paddle, divisor=5.99), [], ("y",)),
    "clip_max_5": (lambda x, y, c: [n("Relu", [x], ["r"]), n("Min", ["r", c(5.0)], [y])], [], ("y",)),  # Clip 0..5
    "slope_0.2": (lambda x, y, c: [n("HardSigmoid", [x], ["h"], alpha=0.2, beta=0.5), n("Mul", [x, "h"], [y])], [],
                  ("y",)),
    "sigmoid_offset": (lambda x, y, c: [n("Add", [x, c(1.0)], ["s"]), n("Sigmoid", ["s"], ["g"]),
                                        n("Mul", [x, "g"], [y])], [], ("y",)),
    "negative_scale": (functools.partial(_hardswish_paddle, divisor=-6.0), [], ("y",)),
    "constant_first_sub": (lambda x, y, c: [n("Sub", [c(3.0), x], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]),
                                            n("Mul", [x, "r"], ["p"]), n("Div", ["p", c(6.0)], [y])], [], ("y",)),
    "per_channel_offset": (lambda x, y, c: [n("Add", [x, "per_channel"], ["s"]), n("Clip", ["s", c(0.0), c(6.0)], ["r"]),
                                            n("Mul", [x, "r"], ["p"]), n("Div", ["p", c(6.0)], [y])], [], ("y",)),
    "gate_read_twice": (_hardswish_paddle, [n("Neg", ["r"], ["z"])], ("y", "z")),
    "gate_is_output": (_hardswish_paddle, [], ("y", "r")),
    "product_is_output": (_hardswish_paddle, [], ("y", "p")),
}


@pytest.mark.parametrize("case", list(NOT_FUSED))
def test_forms_that_are_not_hardswish_stay(tmp_path, load, default_backend, case):
    """A wrong constant, a negative or per-channel one, an intermediate read elsewhere or a graph
    output: the Conv gets no HardSwish (nor the pattern's other nodes); results stay onnxruntime's."""
    default_backend("native")
    build, extra, outputs = NOT_FUSED[case]
    model, shape = decomposed_model(build, extra=extra, outputs=outputs)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.full((16, 1, 1), 3.0, np.float32), "per_channel"))
    g = load(model)
    optimize(g, disabled={"fuse_elementwise"})
    (conv,) = [node for node in g.nodes if node.op_type == "Conv"]
    steps = conv.attrs.get(EPILOGUE, [])
    assert not any(step[0] in ("HardSwish", "Swish") for step in steps)
    if case == "clip_max_5":
        assert steps == [["Clip", {"min": 0.0, "max": 5.0}]]
    else:
        assert not steps and "Mul" in [node.op_type for node in g.nodes]
    x = _inputs(shape, np.float32)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        got = api.execute(model_id, [x])
    finally:
        api.unload(model_id)
    for a, b in zip(got, _ort(model, x)):  # (the conv's sums round by the level's FMA use: v2 has none)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_pplcnet_as_paddle2onnx_writes_it_has_no_activation_task(load):
    """samples' PP-LCNet at opset 11: each of its 28 decomposed HardSwish is its Conv's step (ge's
    HardSwish), the SE gates' HardSigmoid and Relu theirs; no Add, Clip or Div is left."""
    from tests.e2e.conftest import load_sample_script
    g = load(load_sample_script("build_samples").pplcnet_style(image=32, scale=0.25, classes=10))
    optimize(g, disabled={"nchwc_layout"})  # the fusions alone (the layout would rename the convs where it pays)
    steps = Counter((node.op_type, tuple(step[0] for step in node.attrs.get(EPILOGUE, []))) for node in g.nodes)
    assert steps == {("Conv", ("HardSwish",)): 28, ("Conv", ("Relu",)): 2, ("Conv", ("HardSigmoid",)): 2,
                     ("GlobalAveragePool", ()): 3, ("Mul", ()): 2, ("Flatten", ()): 1, ("FusedMatMul", ()): 1}
    assert all(node.attrs[EPILOGUE] == [["HardSwish", {}, GE_DOMAIN]] for node in g.nodes
               if node.attrs.get(EPILOGUE, [[""]])[0][0] == "HardSwish")
