"""The depthwise convolution in the blocked layout (core/kernels/ops/nchwc.py NchwcDepthwise,
csrc/nchwc_depthwise.c) on every built native level this CPU runs, against onnxruntime's Conv (group ==
channels) (+ Add) (+ activation): MobileNetV2's and V3's depthwise geometries, and the edges of the
kernel's paths (odd channel counts, batches, residuals, every activation, asymmetric pads, dilation,
kernels other than 3x3 and 5x5, planes smaller than the kernel). `nat`: conftest.py's fixture, every native
level this CPU runs."""
import functools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core.kernels import native
from ge.core.kernels.ops.nchwc import NchwcDepthwise, blocked_empty, reorder

# name -> (ge's activation, onnx nodes applying it to "c" giving "y", act(0))
ACTS = {
    None: (None, [helper.make_node("Identity", ["c"], ["y"])], 0.0),
    "Relu": (native.Act(native.ACT_CLAMP, 0.0, float("inf")), [helper.make_node("Relu", ["c"], ["y"])], 0.0),
    "Relu6": (native.Act(native.ACT_CLAMP, 0.0, 6.0), [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])], 0.0),
    "HardSwish": (native.Act(native.ACT_HARDSWISH), [helper.make_node("HardSwish", ["c"], ["y"])], 0.0),
    "HardSigmoid": (native.Act(native.ACT_HARDSIGMOID, 0.2, 0.5),
                    [helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.2, beta=0.5)], 0.5),
    "Sigmoid": (native.Act(native.ACT_SIGMOID), [helper.make_node("Sigmoid", ["c"], ["y"])], 0.5),
    "Swish": (native.Act(native.ACT_SWISH, 1.0), [helper.make_node("Sigmoid", ["c"], ["s"]),
                                                    helper.make_node("Mul", ["c", "s"], ["y"])], 0.0),
    "LeakyRelu": (native.Act(native.ACT_LEAKY_RELU, 0.1), [helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.1)],
                  0.0),
    "Gelu": (native.GELU, [helper.make_node("Gelu", ["c"], ["y"])], 0.0),
}


@functools.lru_cache(maxsize=None)
def reference(n, c, h, w, kernel, strides, pads, dil, residual, act, seed=1):
    """Inputs, weights and onnxruntime's result of one case (shared by the levels and thread counts)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((c, 1, *kernel)) / np.sqrt(np.prod(kernel))).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads), "dilations": list(dil),
             "group": c}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], **attrs)]
    inputs, feeds, z = [helper.make_tensor_value_info("x", 1, x.shape)], {"x": x}, None
    if residual:
        oh = (h + pads[0] + pads[2] - dil[0] * (kernel[0] - 1) - 1) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - dil[1] * (kernel[1] - 1) - 1) // strides[1] + 1
        z = rng.standard_normal((n, c, oh, ow)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["conv", "z"], ["c"]))
        inputs.append(helper.make_tensor_value_info("z", 1, z.shape))
        feeds["z"] = z
    else:
        nodes.append(helper.make_node("Identity", ["conv"], ["c"]))
    inits = [numpy_helper.from_array(a, name) for name, a in
             (("w", wt), ("b", b), ("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32)))]
    graph = helper.make_graph(nodes + ACTS[act][1], "g", inputs, [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return x, wt, b, z, want


def run_blocked(nat, x, wt, b, z, kernel, strides, pads, dil, act, threads=1, z_apart=False):
    """NchwcDepthwise on the reordered x (and z: written over by Y, or apart); Y in NCHW and blocked."""
    native.set_threads(threads)
    try:
        dw = NchwcDepthwise(nat, x.shape, kernel, strides=strides, pads=pads, dilations=dil, act=ACTS[act][0])
        dw.pack(wt, b)
        blk = nat.nchwc_block
        xb, yb = blocked_empty(x.shape, blk), blocked_empty(dw.y_shape, blk)
        yb[...] = np.nan  # every element must be written, the padding channels too
        reorder(nat, x, xb, True).run()
        zb = None
        if z is not None:
            zb = blocked_empty(z.shape, blk) if z_apart else yb
            reorder(nat, z, zb, True).run()
        dw.call(xb, yb, zb).run()
        y = np.empty(dw.y_shape, np.float32)
        reorder(nat, yb, y, False).run()
    finally:
        native.set_threads(native.default_threads())
    return y, yb, zb


def check(nat, case, threads=1):
    n, c, h, w, kernel, strides, pads, dil, residual, act = case
    x, wt, b, z, want = reference(*case)
    y, yb, _ = run_blocked(nat, x, wt, b, z, kernel, strides, pads, dil, act, threads)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    blk = nat.nchwc_block
    if c % blk:  # padding channels: act(0) (zero weights and bias, Z's zeros from the reorder)
        assert np.all(yb[:, -1, ..., c % blk:] == ACTS[act][2])
    return yb


def geometry(n, c, h, k, s, act, residual=False):
    return n, c, h, h, (k, k), (s, s), (k // 2,) * 4, (1, 1), residual, act


# MobileNetV2's 3x3 layers (Relu6) and MobileNetV3's 5x5 ones (HardSwish): (channels, input size, kernel, stride)
MOBILENET = [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 3, 2), (192, 28, 3, 1), (192, 28, 3, 2),
             (384, 14, 3, 1), (576, 14, 3, 1), (576, 14, 3, 2), (960, 7, 3, 1),
             (72, 56, 5, 2), (120, 28, 5, 1), (672, 14, 5, 1), (672, 14, 5, 2), (960, 7, 5, 1)]


@pytest.mark.parametrize("c, h, k, s", MOBILENET, ids=[f"{k}x{k}-{c}@{h}s{s}" for c, h, k, s in MOBILENET])
def test_mobilenet_layers(nat, c, h, k, s):
    check(nat, geometry(1, c, h, k, s, "Relu6" if k == 3 else "HardSwish"))


# (n, c, h, w, kernel, strides, pads (top, left, bottom, right), dilations, residual, activation)
CASES = [
    (3, 37, 15, 15, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, "Relu6"),       # odd channels, batch 3
    (3, 21, 14, 14, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, "Relu"),         # batch 3, stride 2, residual
    (1, 50, 9, 11, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), True, "HardSwish"),
    (2, 19, 13, 12, (5, 5), (2, 2), (1, 2, 2, 1), (1, 1), False, "Swish"),      # asymmetric pads
    (1, 24, 10, 17, (3, 3), (2, 2), (0, 0, 1, 1), (1, 1), False, "HardSigmoid"),  # TF's "same": pads at the ends
    (1, 33, 12, 13, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), False, "LeakyRelu"),  # dilation 2
    (2, 16, 16, 16, (3, 3), (2, 2), (2, 2, 2, 2), (2, 2), True, "Sigmoid"),     # dilation 2, stride 2
    (1, 18, 11, 9, (5, 5), (1, 1), (4, 4, 4, 4), (2, 1), False, "Gelu"),       # dilation only down
    (1, 7, 12, 12, (7, 7), (1, 1), (3, 3, 3, 3), (1, 1), True, None),           # 7x7 (ConvNeXt's)
    (1, 20, 12, 9, (3, 2), (3, 1), (0, 2, 1, 0), (1, 2), False, None),          # stride 3, uneven kernel and pads
    (1, 17, 6, 8, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "Relu"),         # 1x1
    (2, 40, 3, 2, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), False, "Relu6"),        # planes narrower than the kernel
    (1, 5, 4, 4, (3, 3), (1, 1), (4, 4, 4, 4), (1, 1), True, "HardSigmoid"),    # rows and columns of padding only
    (1, 3, 1, 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, "HardSwish"),     # a 1x1 plane
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_matches_onnxruntime(nat, case):
    check(nat, case)


@pytest.mark.parametrize("case", [geometry(1, 960, 7, 3, 1, "Relu6"), geometry(2, 72, 56, 5, 2, "HardSwish", True),
                                  CASES[5], CASES[11]], ids=["7x7", "56-batch2", "dilated", "narrow"])
def test_two_threads_give_one_threads_bits(nat, case):
    """Items are runs of whole rows, each computed alone: the split does not change a bit."""
    one = check(nat, case, threads=1)
    np.testing.assert_array_equal(check(nat, case, threads=2), one)


def test_residual_in_its_own_buffer(nat):
    """Z apart from Y gives what Z under Y gives, and Z is left as it was."""
    case = (2, 29, 11, 10, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "Relu6")
    x, wt, b, z, _ = reference(*case)
    args = (nat, x, wt, b, z, *case[4:8], case[9])
    _, over, _ = run_blocked(*args)
    _, apart, zb = run_blocked(*args, z_apart=True)
    z_blocked = blocked_empty(z.shape, nat.nchwc_block)
    reorder(nat, z, z_blocked, True).run()
    np.testing.assert_array_equal(zb, z_blocked)
    np.testing.assert_array_equal(apart, over)


@pytest.mark.parametrize("shape", [(0, 20, 7, 7), (1, 20, 7, 0)], ids=["no-batch", "no-columns"])
def test_empty_tensors_are_nothing_to_do(nat, shape):
    dw = NchwcDepthwise(nat, shape, (3, 3), pads=(1, 1, 1, 1))
    dw.pack(np.ones((20, 1, 3, 3), np.float32), None)
    assert dw.y_shape == shape
    x, y = blocked_empty(shape, nat.nchwc_block), blocked_empty(shape, nat.nchwc_block)
    dw.call(x, y).run()
