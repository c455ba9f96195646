"""A squeeze-excite block's small ops (GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid
-> Mul(x, gate)): the broadcast arithmetic on csrc/eltwise.c (one vector loop per run of a per-channel
value, float16 read and written as it is), the gated map written over x (output_over), and the
prepared calls the tasks are bound to; every path beside onnxruntime, numpy's bits where they are
exact, at every native level this machine runs."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels import native as native_mod
from ge.core.kernels.backend import Backend
from ge.core.kernels.native import EW_ADD, EW_DIV, EW_MUL, EW_SUB, CallSequence, PreparedCall

from .levels import level_params

rng = np.random.default_rng(12)
F16, F32 = np.float16, np.float32
ELEM = {F16: TensorProto.FLOAT16, F32: TensorProto.FLOAT}
UFUNCS = {EW_ADD: np.add, EW_SUB: np.subtract, EW_MUL: np.multiply, EW_DIV: np.divide}
OPS = {"Add": EW_ADD, "Sub": EW_SUB, "Mul": EW_MUL, "Div": EW_DIV}
#: (full operand, broadcast one): gates [N,C,1,1] and [1,C,1,1] over 28x28 / 7x7 / odd planes, a scalar,
#: a per-channel value over short runs (the chain's gather), a trailing vector, both broadcasting
SHAPES = [((1, 72, 28, 28), (1, 72, 1, 1)), ((2, 20, 7, 7), (2, 20, 1, 1)), ((3, 16, 5, 9), (1, 16, 1, 1)),
          ((2, 5, 33), (1,)), ((4, 16, 3), (16, 1)), ((2, 3, 40), (40,)), ((1, 20), (4, 1))]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype == F16 else np.uint32)


def operands(shape_a, shape_b, dtype):
    a, b = (rng.standard_normal(s).astype(dtype) for s in (shape_a, shape_b))
    b.flat[0] = -0.0  # a signed zero stays signed in the lanes the value is broadcast to
    if dtype == F32:
        a.flat[1] = np.nan
    return a, b


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("dtype", [F32, F16])
def test_binary_call_gives_numpys_bits_at_every_level(level, dtype):
    """Every broadcast shape, either operand first, out of place and in place over the full operand:
    numpy's result bit for bit (float16: the float32 result rounded once, as numpy's float16 loops)."""
    lib = native_mod.load_level(level)
    for shape_a, shape_b in SHAPES:
        for opcode, ufunc in UFUNCS.items():
            for a, b in (operands(shape_a, shape_b, dtype), operands(shape_a, shape_b, dtype)[::-1]):
                with np.errstate(all="ignore"):
                    want = ufunc(a, b)
                y = np.full(want.shape, 7, dtype)
                lib.binary_call(opcode, a, b, y).run()
                np.testing.assert_array_equal(bits(y), bits(want), err_msg=f"{shape_a} {shape_b} {ufunc.__name__}")
                if a.shape == want.shape:
                    a = a.copy()
                    lib.binary_call(opcode, a, b, a).run()
                    np.testing.assert_array_equal(bits(a), bits(want))


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("dtype", [F32, F16])
def test_row_means_at_every_level(level, dtype):
    """GlobalAveragePool's sums: planes of 7x7, 14x14, 1, 3 and 33 elements, rows past a block of VL
    and past an item of 64, float16 planes and means (converted as read, rounded once as stored)."""
    lib = native_mod.load_level(level)
    for rows, plane in ((960, 49), (130, 196), (70, 1), (19, 3), (3, 33)):
        w = rng.standard_normal((rows, plane)).astype(dtype)
        y = np.full(rows, 7, dtype)
        lib.row_means_call(w, y).run()
        want = w.astype(np.float64).mean(axis=1)
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-5 if dtype == F32 else 1e-3, atol=1e-6)
        if dtype == F16:  # the float32 means of the same planes, rounded once
            wide = np.empty(rows, F32)
            lib.row_means_call(w.astype(F32), wide).run()
            np.testing.assert_array_equal(bits(y), bits(wide.astype(F16)))


def test_binary_call_refuses_a_broadcast_of_two_runs():
    """Dims that vary in two runs ([2,1,3] over [2,4,3]): no pattern, numpy's plan."""
    lib = native_mod.native()
    if lib is None:
        pytest.skip("ge's native kernels are not built")
    a, b = np.ones((2, 4, 3), F32), np.ones((2, 1, 3), F32)
    assert lib.binary_call(EW_MUL, a, b, np.empty_like(a)) is None


def run_onnxruntime(op, a, b):
    graph = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"])], "t",
                              [helper.make_tensor_value_info(k, ELEM[v.dtype.type], v.shape) for k, v in (("a", a), ("b", b))],
                              [helper.make_tensor_value_info("y", ELEM[a.dtype.type], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("gate_first", [False, True])
def test_kernels_beside_onnxruntime(default_backend, backend, op, dtype, gate_first):
    """The kernels (float16 through the adapter) as planned, run and bound: onnxruntime's results; the
    native plan binds the prepared call itself, float16 handed over as it is."""
    default_backend(backend)
    for shape_x, shape_g in SHAPES[:4]:
        x, g = operands(shape_x, shape_g, dtype)
        x.flat[1] = 0.5
        a, b = (g, x) if gate_first else (x, g)
        want = run_onnxruntime(op, a, b)
        k = lookup(op, opset=17)({}, [Meta(a.dtype, a.shape), Meta(b.dtype, b.shape)], [None, None], opset=17,
                                 name="n0").load()
        assert k.infer()[0].shape == want.shape
        assert k.output_over == (1 if gate_first else 0)
        ws = np.zeros(k.workspace_nbytes(), np.uint8) if k.workspace_nbytes() else None
        for how in ("run", "bound"):
            y = np.full(want.shape, 7, dtype)
            with np.errstate(all="ignore"):  # as the runtime runs kernels
                if how == "run":
                    k.run([a, b], [y], ws)
                else:
                    call = k.bound([a, b], [y], ws)
                    call()
                    call()
                    if backend == "native" and dtype == F32:
                        assert isinstance(getattr(call, "__self__", None), PreparedCall)
            np.testing.assert_allclose(y.astype(F32), want.astype(F32), rtol=1e-6 if dtype == F32 else 1e-3, atol=0)
            with np.errstate(all="ignore"):
                exact = UFUNCS[OPS[op]](a, b)  # numpy's own float16 loop for a float16 pair
            np.testing.assert_array_equal(bits(y), bits(exact))
        if dtype == F16 and backend == "native":
            assert k.half_inputs == {0, 1} and k.half_outputs and not k.widened and not k.narrowed


def test_float16_beside_a_weight_is_widened_once(default_backend):
    """A float16 gate that is a weight: the adapter converts it to float32 at load, so the op keeps
    its float32 plan around the conversions (same bits)."""
    default_backend("native")
    x = rng.standard_normal((1, 8, 5, 5)).astype(F16)
    g = rng.standard_normal((1, 8, 1, 1)).astype(F16)
    k = lookup("Mul", opset=17)({}, [Meta(F16, x.shape), Meta(F16, g.shape)], [None, g], opset=17, name="n0").load()
    assert not k.half_outputs and k.half_inputs == frozenset()
    y = np.empty(x.shape, F16)
    k.run([x, g], [y], np.zeros(k.workspace_nbytes(), np.uint8))
    np.testing.assert_array_equal(bits(y), bits(x * g))


# -- squeeze-excite blocks in a model ----------------------------------------------------------------

def se_model(n: int, c: int, hw: int, dtype, gate_first: bool, sigmoid: bool = False) -> onnx.ModelProto:
    """x -> depthwise Conv + Relu -> SE(GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid|Sigmoid)
    -> Mul -> 1x1 Conv: the gated map's last reader is the Mul."""
    squeeze = max(8, c // 4)
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["d"], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["s"]),
             helper.make_node("Conv", ["s", "w1", "b1"], ["f1"]), helper.make_node("Relu", ["f1"], ["f1r"]),
             helper.make_node("Conv", ["f1r", "w2", "b2"], ["f2"]),
             helper.make_node("Sigmoid", ["f2"], ["gate"]) if sigmoid else
             helper.make_node("HardSigmoid", ["f2"], ["gate"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["gate", "r"] if gate_first else ["r", "gate"], ["m"]),
             helper.make_node("Conv", ["m", "wp"], ["y"])]
    inits = {"wd": (c, 1, 3, 3), "bd": (c,), "w1": (squeeze, c, 1, 1), "b1": (squeeze,), "w2": (c, squeeze, 1, 1),
             "b2": (c,), "wp": (16, c, 1, 1)}
    graph = helper.make_graph(
        nodes, "se", [helper.make_tensor_value_info("x", ELEM[dtype], [n, c, hw, hw])],
        [helper.make_tensor_value_info("y", ELEM[dtype], [n, 16, hw, hw])],
        [numpy_helper.from_array((rng.standard_normal(s) * 0.4).astype(dtype), k) for k, s in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("n,c,hw,gate_first,sigmoid", [(1, 72, 28, False, False), (1, 120, 14, True, False),
                                                       (2, 40, 7, True, True), (3, 24, 9, False, False)])
def test_se_blocks_beside_onnxruntime(tmp_path, default_backend, backend, dtype, n, c, hw, gate_first, sigmoid):
    """SE blocks at several sizes, batch > 1, gate first or second, float32 and float16: onnxruntime's
    results (float16: onnxruntime's float32 model, within float16's rounding); the Mul writes over
    the gated map (one buffer) on the linear plan, and the dataflow plan keeps them apart."""
    default_backend(backend)
    model = se_model(n, c, hw, dtype, gate_first, sigmoid)
    path = str(tmp_path / "se.onnx")
    onnx.save(model, path)
    x = rng.standard_normal((n, c, hw, hw)).astype(dtype)
    wide = se_model(n, c, hw, F32, gate_first, sigmoid)
    for init, orig in zip(wide.graph.initializer, model.graph.initializer):
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(orig).astype(F32), orig.name))
    want = ort.InferenceSession(wide.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.astype(F32)})[0]
    result = api.atc(path, str(tmp_path / "se"))
    # float16: the gate's HardSigmoid/Sigmoid is no epilogue of its conv, and joins the Mul in a chain
    gating = "Mul" if dtype == F32 else "FusedElementwise"
    mul = next(t for t in result.model.tasks if t.op_type == gating)
    if gating == "Mul":
        over = mul.inputs[1 if gate_first else 0]
        assert (mul.outputs[0].allocation, mul.outputs[0].offset) == (over.allocation, over.offset)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        loaded = api.model(model_id)
        kernels = {t.plan.kernel.op_type: t.plan.kernel for t in loaded.default_context.handle}
        assert kernels[gating].native == (backend == "native")
        for executor in ("linear", "dataflow"):
            ctx = loaded.create_context(executor=executor)
            for _ in range(2):
                got = ctx.execute([x])[0]
                assert got.dtype == dtype
                if dtype == F32:
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
                else:
                    np.testing.assert_allclose(got.astype(F32), want, rtol=2e-2, atol=2e-2)
    finally:
        api.unload(model_id)


def test_se_tasks_are_bound_to_their_prepared_calls(tmp_path, default_backend):
    """On the native kernels, the GlobalAveragePool, the SE's GEMV convs, the depthwise conv and the
    Mul run their prepared native calls, not run()'s checks and lookups."""
    default_backend("native")
    path = str(tmp_path / "se.onnx")
    onnx.save(se_model(1, 72, 14, F32, False), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "se")).om_path, "cpu")
    try:
        ctx = api.model(model_id).default_context
        ctx.execute([rng.standard_normal((1, 72, 14, 14)).astype(F32)])
        for task in ctx.handle:
            call = task.call
            target = getattr(call, "__self__", None)
            if target is None:  # run_for_threads's closure: its cell holds [threads, the call]
                target = next(c.cell_contents[1] for c in call.__closure__ if isinstance(c.cell_contents, list))
            assert isinstance(target, (PreparedCall, CallSequence)), (task.plan.name, call)
    finally:
        api.unload(model_id)


# -- the float16 adapter forwards output_over ----------------------------------------------------------

@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("xs,ws,direct", [((2, 24, 12, 12), (24, 24, 1, 1), "never"),
                                          ((1, 33, 7, 7), (21, 33, 1, 1), "always"),
                                          ((1, 700, 16, 16), (20, 700, 1, 1), "never"),  # two blocks of K
                                          ((1, 80, 8, 11), (7, 80, 3, 3), "never")])
def test_float16_fused_conv_writes_over_its_residual(level, xs, ws, direct):
    """A float16 FusedConv's output may take Z's bytes (the adapter forwards the inner kernel's
    output_over): written over Z, the bits of the output written aside."""
    from ge.core.kernels.fused import GE_DOMAIN
    lib = native_mod.load_level(level)
    r = np.random.default_rng(sum(xs))
    x, w, b = (r.standard_normal(s).astype(F16) for s in (xs, ws, ws[:1]))
    w = (w * F16(0.3)).astype(F16)
    z = r.standard_normal((xs[0], ws[0], *xs[2:])).astype(F16)
    attrs = {"pads": [1, 1, 1, 1]} if ws[2] == 3 else {}
    k = lookup("FusedConv", GE_DOMAIN, 1)(attrs, [Meta(a.dtype, a.shape) for a in (x, w, b, z)], [None, w, b, None],
                                          name="n", backend=Backend(lib, direct)).load()
    assert k.output_over == 3 and k.half_outputs
    ws_ = np.zeros(k.workspace_nbytes(), np.uint8)
    aside = np.full(z.shape, 7, F16)
    k.run([x, w, b, z], [aside], ws_)
    over = z.copy()
    k.run([x, w, b, over], [over], ws_)
    np.testing.assert_array_equal(bits(over), bits(aside))
