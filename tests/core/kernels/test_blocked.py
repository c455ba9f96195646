"""ge's blocked-layout ops (core/kernels/ops/blocked.py): ReorderInput, ReorderOutput and NchwcConv, their
native and numpy plans against onnxruntime's Conv (+ Add) (+ activation), and their specs' refusals."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.model.errors import GeError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.ops.blocked import blocked_shape, from_blocked, to_blocked

rng = np.random.default_rng(3)
F32 = np.dtype(np.float32)
CONV_DEFAULTS = {"auto_pad": "NOTSET", "group": 1}


def kernel(op, attrs, inputs, consts=(), backend=None):
    return lookup(op, "ge", 17)(attrs, [None if s is None else Meta(F32, s) for s in inputs], list(consts), opset=17,
                                name="k", backend=backend)


def blocked(x):
    y = np.full(blocked_shape(x.shape), np.nan, np.float32)
    to_blocked(x, y)
    return y


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("shape", [(1, 16, 3, 5), (2, 37, 4, 7), (3, 5, 1, 1), (1, 70, 9, 2)])
def test_reorders_round_trip_with_zero_padding(default_backend, plan, shape):
    with default_backend(plan) as backend:
        x = rng.standard_normal(shape).astype(np.float32)
        xb = kernel("ReorderInput", {}, [shape], backend=backend).load()
        assert xb.uses_native == (plan == "native")
        b = xb.compute(x)[0]
        assert b.shape == blocked_shape(shape)
        c = shape[1]
        np.testing.assert_array_equal(np.moveaxis(b, -1, 2).reshape(shape[0], -1, *shape[2:])[:, :c], x)
        assert not b[:, -1, ..., (c - 1) % 16 + 1:].any()  # zeros past the channels
        back = kernel("ReorderOutput", {"channels": c}, [b.shape], backend=backend).load().compute(b)[0]
        np.testing.assert_array_equal(back, x)


def onnxruntime_conv(x, w, b, attrs, z=None, act=None):
    import onnxruntime as ort
    from onnx import numpy_helper
    nodes, out = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)], "c"
    inputs, feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], {"x": x}
    if z is not None:
        nodes.append(helper.make_node("Add", ["c", "z"], ["a"]))
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, z.shape))
        feeds["z"], out = z, "a"
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    for k, (op, op_attrs) in enumerate(act or []):
        bounds = []
        if op == "Clip":  # the bounds are inputs at opset 17
            bounds = [f"act{k}.min", f"act{k}.max"]
            inits += [numpy_helper.from_array(np.float32(op_attrs.pop(key)), name) for key, name in zip(("min", "max"), bounds)]
        nodes.append(helper.make_node(op, [out] + bounds, [f"act{k}"], **op_attrs))
        out = f"act{k}"
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


# (x shape, oc, kernel, strides, pads, dilations, residual, epilogue)
CASES = [
    ((1, 16, 8, 8), 16, 1, 1, [0, 0, 0, 0], 1, False, None),
    ((2, 37, 9, 11), 70, 3, 1, [1, 1, 1, 1], 1, True, [["Relu", {}]]),
    ((1, 40, 13, 11), 20, 1, 2, [0, 0, 0, 0], 1, True, None),  # a 1x1 stride-2 downsample
    ((2, 24, 10, 9), 40, 3, 2, [0, 1, 2, 0], 2, False, [["LeakyRelu", {"alpha": 0.1}]]),  # asymmetric, dilated
    ((1, 48, 7, 7), 48, 3, 1, [1, 1, 1, 1], 1, True, [["LeakyRelu", {"alpha": 0.2}], ["Sigmoid", {}]]),  # the runtime's
]
# depthwise (group == channels): MobileNetV2's 3x3 with ReLU6, V3's 5x5 with HardSwish, odd channel counts
# (no residual: FusedConv fuses one into one-group convs only)
DEPTHWISE = [
    ((1, 24, 9, 9), 24, 3, 1, [1, 1, 1, 1], 1, False, [["Clip", {"min": 0.0, "max": 6.0}]]),
    ((3, 37, 11, 10), 37, 3, 2, [1, 1, 1, 1], 1, False, [["Relu", {}]]),
    ((2, 72, 13, 13), 72, 5, 2, [2, 2, 2, 2], 1, False, [["HardSwish", {}]]),
    ((1, 20, 7, 8), 20, 5, 1, [2, 1, 2, 3], 1, False, None),  # asymmetric pads
    ((1, 40, 9, 9), 40, 3, 1, [2, 2, 2, 2], 2, False, [["HardSigmoid", {"alpha": 0.2, "beta": 0.5}], ["Tanh", {}]]),
]


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("case", [("dense", k) for k in range(len(CASES))] + [("depthwise", k) for k in range(len(DEPTHWISE))])
def test_conv_matches_onnxruntime(default_backend, plan, case):
    kind, at = case
    shape, oc, k, s, pads, d, residual, epilogue = (CASES if kind == "dense" else DEPTHWISE)[at]
    group = shape[1] if kind == "depthwise" else 1
    attrs = dict(CONV_DEFAULTS, kernel_shape=[k, k], strides=[s, s], pads=pads, dilations=[d, d], group=group)
    x = rng.standard_normal(shape).astype(np.float32)
    ic = shape[1] // group
    w = (rng.standard_normal((oc, ic, k, k)) / np.sqrt(ic * k * k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    ref_attrs = {key: v for key, v in attrs.items() if key != "auto_pad"}
    plain = onnxruntime_conv(x, w, b, ref_attrs)
    z = rng.standard_normal(plain.shape).astype(np.float32) if residual else None
    want = onnxruntime_conv(x, w, b, ref_attrs, z, [(op, dict(a)) for op, a in epilogue or []])
    if epilogue:
        attrs["ge.epilogue"] = epilogue
    with default_backend(plan) as backend:
        xb = blocked(x)
        inputs = [xb.shape, w.shape, b.shape] + ([blocked_shape(plain.shape)] if residual else [])
        conv = kernel("NchwcConv", attrs, inputs, [None, w, b], backend).load()
        assert conv.uses_native == (plan == "native") and conv.depthwise == (kind == "depthwise")
        assert conv.absorbs_epilogue == (plan == "native" and epilogue is not None and len(epilogue) == 1)
        zb = blocked(z) if residual else None
        y = np.empty(blocked_shape(plain.shape), np.float32)
        ws = np.empty(conv.workspace_nbytes(), np.uint8)
        for over in (False, True) if residual else (False,):  # Y written over Z (output_over), as the planner may
            yb = zb.copy() if over else y
            conv.bound([xb, w, b] + ([yb if over else zb] if residual else []), [yb], ws)()
            if epilogue and not conv.absorbs_epilogue:
                from ge.core.kernels.epilogue import Epilogue
                Epilogue(epilogue, Meta(F32, yb.shape), 17, "k")(yb)
            assert np.isfinite(yb).all()  # the padding channels too
            got = np.empty(plain.shape, np.float32)
            from_blocked(yb, got)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("op, attrs, inputs, message", [
    ("ReorderInput", {}, [(1, 3, 4)], r"input 0 \(X\) is float32 \(1, 3, 4\), float32 of rank 4 expected"),
    ("ReorderOutput", {"channels": 40}, [(1, 2, 4, 4, 16)], r"attrs\['channels'\] must be an int in \[17, 32\]"),
    ("ReorderOutput", {}, [(1, 2, 4, 4, 16)], r"attrs\['channels'\] must be an int .* got None"),
    ("ReorderOutput", {"channels": 20}, [(1, 2, 4, 4, 8)], "blocks of 16 channels expected last"),
    ("NchwcConv", CONV_DEFAULTS, [(1, 2, 4, 4, 16), (8, 40, 1, 1)], "W has shape .*: 40 input channels, X has 2 blocks"),
    ("NchwcConv", CONV_DEFAULTS, [(1, 2, 4, 4, 16), (8, 20, 1, 1), (8,), (1, 2, 4, 4, 16)],
     r"input 3 \(Z\) has shape \(1, 2, 4, 4, 16\), \(1, 1, 4, 4, 16\) expected"),
    ("NchwcConv", dict(CONV_DEFAULTS, strides=[0, 1]), [(1, 2, 4, 4, 16), (8, 20, 1, 1)], "strides .* must be positive"),
    ("NchwcConv", {"group": 1}, [(1, 2, 4, 4, 16), (8, 20, 1, 1)], r"attrs\['auto_pad'\] is missing"),
    ("NchwcConv", dict(CONV_DEFAULTS, group=2), [(1, 2, 4, 4, 16), (8, 10, 1, 1)],
     r"attrs\['group'\] is 2 with W of shape \(8, 10, 1, 1\): .* one group or one channel per group"),
    ("NchwcConv", dict(CONV_DEFAULTS, group=20), [(1, 1, 4, 4, 16), (20, 1, 3, 3)], "20 input channels, X has 1 blocks"),
    ("NchwcConv", dict(CONV_DEFAULTS, group=20), [(1, 2, 4, 4, 16), (20, 1, 1, 1), (20,), (1, 2, 4, 4, 16)],
     "a residual is fused into one-group convolutions only"),
])
def test_specs_refuse_what_does_not_fit(op, attrs, inputs, message):
    with pytest.raises(GeError, match=r"node 'k' \(" + op + r"\): .*" + message):
        kernel(op, attrs, inputs)


def onnxruntime_op(op, x, **attrs):
    import onnxruntime as ort
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


POOL_DEFAULTS = {"auto_pad": "NOTSET", "ceil_mode": 0, "storage_order": 0}


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("shape, window", [
    ((1, 64, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),  # ResNet's
    ((2, 40, 9, 7), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 20, 10, 11), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1], ceil_mode=1)),
    ((2, 16, 9, 9), dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])),
    ((1, 40, 20, 20), dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])),  # YOLO's SPPF: separable
    ((1, 16, 3, 7), dict(kernel_shape=[1, 3], strides=[1, 1], pads=[0, 1, 0, 1])),  # one row: per pixel
    ((1, 3, 4, 1030), dict(kernel_shape=[2, 2], strides=[2, 2])),  # rows wider than the separable buffer
])
def test_max_pool_matches_onnxruntime(default_backend, plan, shape, window):
    x = rng.standard_normal(shape).astype(np.float32)
    want = onnxruntime_op("MaxPool", x, **window)
    with default_backend(plan) as backend:
        pool = kernel("NchwcMaxPool", dict(POOL_DEFAULTS, **window), [blocked_shape(shape)], backend=backend).load()
        assert pool.uses_native == (plan == "native")
        xb = blocked(x)
        yb = np.empty(blocked_shape(want.shape), np.float32)
        pool.bound([xb], [yb], np.empty(pool.workspace_nbytes(), np.uint8))()
        got = np.empty(want.shape, np.float32)
        from_blocked(yb, got)
        np.testing.assert_array_equal(got, want)
        assert not yb[:, -1, ..., (shape[1] - 1) % 16 + 1:].any()  # the zero padding channels pool to zeros


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("shape", [(1, 2048, 7, 7), (3, 37, 5, 3), (2, 16, 1, 1)])
def test_global_average_pool_matches_onnxruntime(default_backend, plan, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    want = onnxruntime_op("GlobalAveragePool", x)
    with default_backend(plan) as backend:
        pool = kernel("NchwcGlobalAveragePool", {"channels": shape[1]}, [blocked_shape(shape)], backend=backend).load()
        assert pool.uses_native == (plan == "native")
        np.testing.assert_allclose(pool.compute(blocked(x))[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, attrs, outputs, message", [
    ("NchwcMaxPool", dict(POOL_DEFAULTS, kernel_shape=[2, 2]), 2, "2 outputs: the blocked MaxPool gives no Indices"),
    ("NchwcMaxPool", POOL_DEFAULTS, 1, r"attrs\['kernel_shape'\] is missing"),
    ("NchwcMaxPool", dict(POOL_DEFAULTS, kernel_shape=[2, 2], ceil_mode="1"), 1, r"attrs\['ceil_mode'\] must be an int64"),
    ("NchwcGlobalAveragePool", {"channels": 0}, 1, r"attrs\['channels'\] must be an int in \[17, 32\]"),
])
def test_pool_specs_refuse_what_does_not_fit(op, attrs, outputs, message):
    with pytest.raises(GeError, match=r"node 'k' \(" + op + r"\): .*" + message):
        lookup(op, "ge", 17)(attrs, [Meta(F32, (1, 2, 4, 4, 16))], opset=17, name="k", num_outputs=outputs)


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("shape", [(1, 72, 7, 7), (3, 37, 5, 3), (2, 16, 1, 1)])
def test_mul_by_a_gate_matches_onnxruntime(default_backend, plan, shape):
    """A squeeze-excite gate (N, C, 1, 1) times the blocked X, into Y or over X (output_over); the padding
    channels become zeros."""
    import onnxruntime as ort
    x = rng.standard_normal(shape).astype(np.float32)
    s = rng.random(shape[:2] + (1, 1)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Mul", ["x", "s"], ["y"])], "g",
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in (("x", x), ("s", s))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "s": s})[0]
    with default_backend(plan) as backend:
        mul = kernel("NchwcMul", {}, [blocked_shape(shape), s.shape], backend=backend).load()
        assert mul.uses_native == (plan == "native") and mul.output_over == 0
        ws = np.empty(mul.workspace_nbytes(), np.uint8)
        for over in (False, True):
            xb = blocked(x)
            yb = xb if over else np.full(xb.shape, np.nan, np.float32)
            mul.bound([xb, s], [yb], ws)()
            got = np.empty(shape, np.float32)
            from_blocked(yb, got)
            np.testing.assert_allclose(got, want, rtol=1e-6)
            assert not yb[:, -1, ..., (shape[1] - 1) % 16 + 1:].any()


@pytest.mark.parametrize("inputs, message", [
    ([(1, 2, 4, 4, 16), (1, 40, 1, 1)], r"input 1 \(S\) has shape \(1, 40, 1, 1\): \(1, C, 1, 1\) with C in \[17, 32\]"),
    ([(2, 2, 4, 4, 16), (1, 20, 1, 1)], r"input 1 \(S\) has shape \(1, 20, 1, 1\): \(2, C, 1, 1\)"),
    ([(1, 2, 4, 4, 16), (1, 20, 4, 4)], r"input 1 \(S\) has shape \(1, 20, 4, 4\)"),
    ([(1, 2, 4, 4, 16), (1, 20)], r"input 1 \(S\) is float32 \(1, 20\), float32 of rank 4 expected"),
])
def test_mul_refuses_what_does_not_fit(inputs, message):
    with pytest.raises(GeError, match=r"node 'k' \(NchwcMul\): .*" + message):
        kernel("NchwcMul", {}, inputs)
