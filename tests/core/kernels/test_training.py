"""The ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum): onnx's node cases through
ge's API against their expected outputs (onnxruntime's inference build has no such kernels)."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_case, node_cases, node_model, run_model

TRAINING = "ai.onnx.preview.training"
CASES = [c for op in ("Adagrad", "Adam", "Momentum") for c in node_cases(op, TRAINING)]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    check_case(case, tmp_path, monkeypatch)


def test_float64_and_first_step(tmp_path, monkeypatch):
    """Momentum at T = 0 takes the whole gradient (beta' = 1); float64 tensors stay float64."""
    x, g, v = np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([0.25, 0.0])
    inputs = {"r": np.array(0.1), "t": np.array(0, np.int64), "x": x, "g": g, "v": v}
    model = node_model("Momentum", inputs, {"alpha": 0.9, "beta": 0.5, "norm_coefficient": 0.0,
                                            "mode": "nesterov"}, 2, domain=TRAINING)
    xn, vn = run_model(model, list(inputs.values()), tmp_path, monkeypatch)
    want_v = 0.9 * v + g
    np.testing.assert_allclose(vn, want_v)
    np.testing.assert_allclose(xn, x - 0.1 * (g + 0.9 * want_v))
    assert xn.dtype == np.float64


def test_errors():
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    adam = lookup("Adam", TRAINING, 1)
    with pytest.raises(GraphError, match=r"node 'a' \(Adam\): 3 tensors after R and T; a multiple of 4"):
        adam({}, [Meta(f32, ()), Meta(i64, ())] + [Meta(f32, (2,))] * 3, name="a")
    with pytest.raises(GraphError, match=r"V0 is float32 \(3,\); X0's float32 \(2,\) expected"):
        adam({}, [Meta(f32, ()), Meta(i64, ())] + [Meta(f32, (2,))] * 2 + [Meta(f32, (3,)), Meta(f32, (2,))], name="a")
    with pytest.raises(GraphError, match="attribute 'mode' is required"):
        lookup("Momentum", TRAINING, 1)({"alpha": 1.0, "beta": 1.0, "norm_coefficient": 0.0},
                                        [Meta(f32, ()), Meta(i64, ())] + [Meta(f32, (2,))] * 3, name="m")
