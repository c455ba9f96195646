"""RNN, GRU and LSTM against onnxruntime, every case on the native loop (csrc/recurrent.c: float32,
default activations) and on the numpy loop; a few on every native level this CPU runs."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import backend as backends, lookup, native as native_mod

from .levels import RUNNABLE, level_params

pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every case through both plans
rng = np.random.default_rng(6)
TOL = dict(rtol=1e-4, atol=1e-5)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_inputs(op, T, B, I, H, direction="forward", layout=0, bias=True, lens=None, init=False, peep=False,
               dtype=np.float32, scale=0.5):
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    r = lambda *s: (rng.standard_normal(s) * scale).astype(dtype)  # noqa: E731
    x = r(T, B, I) if layout == 0 else r(B, T, I)
    inputs = {"x": x, "w": r(D, G * H, I), "r": r(D, G * H, H), "b": r(D, 2 * G * H) if bias else None,
              "lens": None if lens is None else np.asarray(lens, np.int32),
              "h0": (r(D, B, H) if layout == 0 else r(B, D, H)) if init else None}
    if op == "LSTM":
        inputs["c0"] = (r(D, B, H) if layout == 0 else r(B, D, H)) if init else None
        inputs["p"] = r(D, 3 * H) if peep else None
    while list(inputs.values())[-1] is None:  # no trailing empty inputs
        inputs.popitem()
    return inputs


def n_out(op):
    return 3 if op == "LSTM" else 2


def check_rnn(check_op, op, inputs, attrs, n_outputs, opset=14, consts=(), layout=0, **tol):
    """check_op; layout 1 (which onnxruntime lacks) against onnxruntime on the layout-0 transposes."""
    if not layout:
        return check_op(op, inputs, attrs, n_outputs=n_outputs, opset=opset, consts=consts, **tol)
    t = {k: (v.transpose(1, 0, 2).copy() if k in ("x", "h0", "c0") and v is not None else v) for k, v in inputs.items()}
    want = check_op(op, t, {k: v for k, v in attrs.items() if k != "layout"}, n_outputs=n_outputs, opset=opset,
                    consts=consts, **tol)
    want = [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.transpose(1, 0, 2) for w in want]
    arrays = list(inputs.values())
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    cv = [inputs[k] if k in consts else None for k in inputs]
    k = lookup(op, opset=opset)(attrs, metas, cv, opset=opset, name="n", num_outputs=n_outputs)
    assert [tuple(m.shape) for m in k.infer()] == [w.shape for w in want]
    for got, w in zip(k.compute(*arrays), want):
        np.testing.assert_allclose(got, w, **tol)
    ys = [np.full(w.shape, 77, w.dtype) for w in want]
    k.run(arrays, ys, np.zeros(k.workspace_nbytes(), np.uint8))
    for got, w in zip(ys, want):
        np.testing.assert_allclose(got, w, **tol)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("consts", [(), ("w", "r", "b")])
def test_recurrent_basic(check_op, op, direction, layout, consts):
    inputs = rnn_inputs(op, 5, 3, 4, 6, direction, layout, init=True)
    attrs = {"hidden_size": 6, "direction": direction} | ({"layout": 1} if layout else {})
    check_rnn(check_op, op, inputs, attrs, n_out(op), consts=consts, layout=layout, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("lens", [[5, 2, 4], [1, 5, 3], [5, 5, 5]])
@pytest.mark.parametrize("consts", [(), ("lens",)])
def test_recurrent_sequence_lens(check_op, op, direction, layout, lens, consts):
    inputs = rnn_inputs(op, 5, 3, 4, 3, direction, layout, lens=lens, init=True)
    attrs = {"hidden_size": 3, "direction": direction} | ({"layout": 1} if layout else {})
    check_rnn(check_op, op, inputs, attrs, n_out(op), consts=consts, layout=layout, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("opset", [7, 14, 22])
def test_recurrent_defaults(check_op, op, opset):
    """No bias, no initial state, hidden_size only; only Y requested; only Y_h requested."""
    inputs = rnn_inputs(op, 4, 2, 3, 5, bias=False)
    check_op(op, inputs, {"hidden_size": 5}, n_outputs=1, opset=opset, **TOL)
    check_op(op, inputs, {"hidden_size": 5}, n_outputs=n_out(op), opset=opset, **TOL)


@pytest.mark.parametrize("op,acts", [
    ("RNN", ["Relu"]), ("RNN", ["Sigmoid"]), ("RNN", ["LeakyRelu"]), ("RNN", ["HardSigmoid"]),
    ("RNN", ["Softsign"]), ("RNN", ["Softplus"]), ("RNN", ["Elu"]), ("RNN", ["ThresholdedRelu"]),
    ("RNN", ["ScaledTanh"]), ("RNN", ["Affine"]),
    ("GRU", ["Sigmoid", "Relu"]), ("GRU", ["HardSigmoid", "Tanh"]), ("GRU", ["HardSigmoid", "Softsign"]),
    ("LSTM", ["HardSigmoid", "Tanh", "Tanh"]), ("LSTM", ["Sigmoid", "Relu", "Softsign"]),
    ("LSTM", ["Sigmoid", "Tanh", "ScaledTanh"]),
])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_recurrent_activations(check_op, op, acts, direction):
    D = 2 if direction == "bidirectional" else 1
    inputs = rnn_inputs(op, 4, 2, 3, 4, direction, init=True)
    attrs = {"hidden_size": 4, "direction": direction, "activations": acts * D}
    if any(a in ("LeakyRelu", "HardSigmoid", "Elu", "ThresholdedRelu", "ScaledTanh", "Affine") for a in acts):
        attrs["activation_alpha"] = [0.3, 0.7, 0.2, 0.9, 0.4, 0.6][:3 * D]
        attrs["activation_beta"] = [0.4, 0.6, 0.5, 0.3][:2 * D]
    check_op(op, inputs, attrs, n_outputs=n_out(op), opset=14, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("clip", [0.5, 3.0])
def test_recurrent_clip(check_op, op, clip):
    inputs = rnn_inputs(op, 5, 2, 3, 4, "bidirectional", init=True, scale=1.5)
    check_op(op, inputs, {"hidden_size": 4, "direction": "bidirectional", "clip": clip}, n_outputs=n_out(op),
             opset=14, **TOL)


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_linear_before_reset(check_op, lbr, direction, bias):
    inputs = rnn_inputs("GRU", 6, 3, 5, 4, direction, bias=bias, init=True)
    check_op("GRU", inputs, {"hidden_size": 4, "direction": direction, "linear_before_reset": lbr},
             n_outputs=2, opset=14, consts=("w", "r"), **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("lens", [None, [3, 6]])
def test_recurrent_float64(check_op, op, lens):
    """onnxruntime has float32 recurrences only: float64 against them on the same (float32) values."""
    inputs = rnn_inputs(op, 6, 2, 3, 4, "bidirectional", lens=lens, init=True)
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    want = check_op(op, inputs, attrs, n_outputs=n_out(op), opset=14, **TOL)
    arrays = [a if a is None or a.dtype != np.float32 else a.astype(np.float64) for a in inputs.values()]
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    k = lookup(op, opset=14)(attrs, metas, opset=14, num_outputs=n_out(op))
    for got, w in zip(k.compute(*arrays), want):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [4, 2]])
def test_lstm_peepholes_input_forget(check_op, peep, input_forget, direction, lens):
    inputs = rnn_inputs("LSTM", 4, 2, 3, 5, direction, lens=lens, init=True, peep=peep)
    attrs = {"hidden_size": 5, "direction": direction, "input_forget": input_forget}
    check_op("LSTM", inputs, attrs, n_outputs=3, opset=14, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_larger(check_op, op):
    """A speech-model-sized layer: 50 steps, batch 4, 40 features, 64 hidden."""
    inputs = rnn_inputs(op, 50, 4, 40, 64, "bidirectional", init=True, scale=0.2)
    check_op(op, inputs, {"hidden_size": 64, "direction": "bidirectional"}, n_outputs=n_out(op), opset=14,
             consts=("w", "r", "b"), rtol=1e-4, atol=1e-4)


def test_recurrent_omitted_middle_output_keeps_positions():
    """["Y", "", "Y_c"]: ys holds None for Y_h, and Y_c lands at position 2."""
    inputs = rnn_inputs("LSTM", 4, 2, 3, 5)
    xs = list(inputs.values())
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in xs]
    f = np.dtype(np.float32)
    k = lookup("LSTM", opset=14)({"hidden_size": 5}, metas, outputs=[Meta(f, (4, 1, 2, 5)), None, Meta(f, (1, 2, 5))],
                                 opset=14, name="l", num_outputs=3)
    y, yh, yc = k.compute(*xs)
    ys = [np.full((4, 1, 2, 5), np.nan, f), None, np.full((1, 2, 5), np.nan, f)]
    ws = np.zeros(k.workspace_nbytes(), np.uint8)
    k.run(xs, ys, ws)
    np.testing.assert_allclose(ys[0], y, rtol=1e-6)
    np.testing.assert_allclose(ys[2], yc, rtol=1e-6)
    assert not np.allclose(yh, yc)


def test_recurrent_errors():
    f = np.dtype(np.float32)
    k = lookup("LSTM", opset=14)
    with pytest.raises(GraphError, match=r"node 'l' \(LSTM\): W has shape \(1, 20, 3\), \(1, 16, 3\) expected"):
        k({"hidden_size": 4}, [Meta(f, (5, 2, 3)), Meta(f, (1, 20, 3)), Meta(f, (1, 16, 4))], name="l", opset=14)
    with pytest.raises(GraphError, match="direction 'up'"):
        k({"hidden_size": 4, "direction": "up"}, [Meta(f, (5, 2, 3)), Meta(f, (1, 16, 3)), Meta(f, (1, 16, 4))],
          name="l", opset=14)
    with pytest.raises(GraphError, match="activation 'Gelu' is not supported"):
        k({"hidden_size": 4, "activations": ["Gelu", "Tanh", "Tanh"]},
          [Meta(f, (5, 2, 3)), Meta(f, (1, 16, 3)), Meta(f, (1, 16, 4))], name="l", opset=14)
    with pytest.raises(GraphError, match="2 activations given, 3 expected"):
        k({"hidden_size": 4, "activations": ["Tanh", "Tanh"]},
          [Meta(f, (5, 2, 3)), Meta(f, (1, 16, 3)), Meta(f, (1, 16, 4))], name="l", opset=14)
    with pytest.raises(GraphError, match=r"sequence_lens values in \[1, 9\]"):
        lookup("GRU", opset=14)({"hidden_size": 4}, [Meta(f, (5, 2, 3)), Meta(f, (1, 12, 3)), Meta(f, (1, 12, 4)),
                                                     None, Meta(np.dtype(np.int32), (2,))],
                                [None, None, None, None, np.array([1, 9], np.int32)], name="g", opset=14)


# -- the native loop: every combination it takes -------------------------------------------------------

@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("batch,lens", [(1, None), (1, [0]), (1, [4]), (5, None), (5, [7, 0, 3, 7, 1]),
                                        (5, [7, 6, 3, 1, 0]), (5, [7, 7, 7, 7, 7])])
def test_recurrent_batches_and_lengths(check_op, op, direction, layout, batch, lens):
    """Batch 1 (the GEMV's product) and 5 (the GEMM's), lengths with zeros, sorted longest first (the
    product shrinks to the items still running) and full ones, 37 hidden (two vectors and a tail),
    clip, initial states."""
    inputs = rnn_inputs(op, 7, batch, 9, 37, direction, layout, lens=lens, init=True, scale=0.4)
    attrs = {"hidden_size": 37, "direction": direction, "clip": 2.5} | ({"layout": 1} if layout else {})
    check_rnn(check_op, op, inputs, attrs, n_out(op), consts=("w", "r", "b"), layout=layout, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("steps,batch", [(1, 1), (2, 2), (4, 1)])
def test_recurrent_few_rows(check_op, op, direction, steps, batch):
    """A VAD's one step per call: up to 4 rows of X, the projection on the GEMV."""
    inputs = rnn_inputs(op, steps, batch, 10, 33, direction, init=True)
    check_op(op, inputs, {"hidden_size": 33, "direction": direction}, n_outputs=n_out(op), opset=14,
             consts=("w", "r", "b"), **TOL)


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, "some"])
def test_gru_reset_on_both_products(check_op, lbr, batch, direction, lens):
    """linear_before_reset 0 runs its h~ product as a second step (GEMV at batch 1, its own packed
    panels on the GEMM), 1 adds Rbh inside the reset."""
    lens = None if lens is None else [6, 2, 0, 5][:batch]
    inputs = rnn_inputs("GRU", 6, batch, 5, 20, direction, lens=lens, init=True)
    attrs = {"hidden_size": 20, "direction": direction, "linear_before_reset": lbr}
    check_op("GRU", inputs, attrs, n_outputs=2, opset=14, consts=("w", "r", "b"), **TOL)


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("clip", [None, 0.8])
@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_peepholes_clip_batches(check_op, batch, input_forget, clip, layout):
    lens = [5, 0, 3, 5][:batch]
    inputs = rnn_inputs("LSTM", 5, batch, 6, 21, "bidirectional", layout, lens=lens, init=True, peep=True, scale=1.0)
    attrs = {"hidden_size": 21, "direction": "bidirectional", "input_forget": input_forget}
    attrs |= ({"clip": clip} if clip else {}) | ({"layout": 1} if layout else {})
    check_rnn(check_op, "LSTM", inputs, attrs, 3, consts=("w", "r", "b", "p"), layout=layout, **TOL)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_gates_are_accurate(check_op, monkeypatch, native_and_numpy, op):
    """One step from a zero state of one input feature: each gate's pre-activation is one product
    x w, across tanh's and sigmoid's whole range (tiny, around 1, saturated, both signs), so the
    outputs show the native exp/tanh/sigmoid's own error: within 1e-5 relative of onnxruntime's (atol:
    an ulp of 1, where GRU's h~ + z (h - h~) and onnxruntime's (1 - z) h~ cancel near z = 1)."""
    H = 40
    x = (np.logspace(-4, 1.2, 48) * np.resize([1, -1], 48)).astype(np.float32).reshape(1, 48, 1)
    w = np.linspace(-1.5, 1.5, 2 * GATES[op] * H).astype(np.float32)[::2].reshape(1, GATES[op] * H, 1)
    inputs = {"x": x, "w": w, "r": np.zeros((1, GATES[op] * H, H), np.float32)}
    for level in RUNNABLE if native_and_numpy == "native" else [None]:  # each level's reciprocal and exp
        if level:
            monkeypatch.setattr(backends, "select", lambda *a, level=level, **k: backends.Backend(native_mod.load_level(level)))
        check_op(op, inputs, {"hidden_size": H}, n_outputs=n_out(op), opset=14, rtol=1e-5, atol=2.5e-7)


def test_native_plan_for_float32_default_activations(native_and_numpy):
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)

    def uses_native(dtype, attrs):
        metas = [Meta(dtype, (5, 2, 3)), Meta(dtype, (1, 16, 3)), Meta(dtype, (1, 16, 4))]
        return lookup("LSTM", opset=14)({"hidden_size": 4} | attrs, metas, opset=14).uses_native

    assert uses_native(f32, {}) == uses_native(f32, {"activations": ["sigmoid", "TANH", "Tanh"]}) == \
        (native_and_numpy == "native")
    assert not uses_native(f32, {"activations": ["Sigmoid", "Relu", "Tanh"]})  # stays on the numpy loop
    assert not uses_native(f64, {})


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op,attrs,batch", [("LSTM", {"direction": "bidirectional"}, 3),
                                            ("GRU", {"direction": "reverse"}, 2),
                                            ("GRU", {"linear_before_reset": 1}, 1), ("RNN", {}, 1)])
def test_recurrent_at_every_level(check_op, monkeypatch, level, op, attrs, batch):
    """The vector widths of every level (SSE, AVX2, AVX-512: GE_NATIVE_LEVEL's libraries)."""
    monkeypatch.setattr(backends, "select", lambda *a, **k: backends.Backend(native_mod.load_level(level)))
    inputs = rnn_inputs(op, 5, batch, 7, 19, attrs.get("direction", "forward"), lens=[5, 3, 0][:batch], init=True)
    check_op(op, inputs, {"hidden_size": 19} | attrs, n_outputs=n_out(op), opset=14, consts=("w", "r", "b"), **TOL)


def test_recurrent_models_run_through_the_runtime(tmp_path, native_and_numpy):
    """Compiled and loaded: a VAD-style step (states in and out) and a bidirectional LSTM with constant
    sequence_lens, called several times with new inputs (the bound native calls on the runtime's
    buffers), against onnxruntime."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from ge.core import api
    from tests.conftest import ort_run

    D, B, I, H = 2, 3, 6, 24
    a = lambda *s: (rng.standard_normal(s) * 0.4).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(v, n) for n, v in [
        ("w", a(1, 4 * H, I)), ("r", a(1, 4 * H, H)), ("b", a(1, 8 * H)), ("w2", a(D, 4 * H, H)),
        ("r2", a(D, 4 * H, H)), ("lens", np.array([5, 0, 3], np.int32))]]
    nodes = [helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "hn", "cn"], hidden_size=H),
             helper.make_node("Squeeze", ["y", "one"], ["ys"]),
             helper.make_node("LSTM", ["ys", "w2", "r2", "", "lens"], ["y2"], hidden_size=H,
                              direction="bidirectional")]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "one"))
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", f, [5, B, I]),
                                             helper.make_tensor_value_info("h0", f, [1, B, H]),
                                             helper.make_tensor_value_info("c0", f, [1, B, H])],
                              [helper.make_tensor_value_info(n, f, s) for n, s in
                               [("y2", [5, D, B, H]), ("hn", [1, B, H]), ("cn", [1, B, H])]], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "vad.onnx"
    onnx.save(model, str(path))
    model_id = api.load_from_file(api.atc(str(path), str(tmp_path / "vad")).om_path)
    try:
        for _ in range(3):
            feeds = {"x": a(5, B, I), "h0": a(1, B, H), "c0": a(1, B, H)}
            for got, want in zip(api.execute(model_id, feeds), ort_run(model, feeds)):
                np.testing.assert_allclose(got, want, **TOL)
    finally:
        api.unload(model_id)
