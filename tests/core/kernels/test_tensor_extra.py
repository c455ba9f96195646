"""CumProd and BitCast: onnx's node cases through ge's API (and onnxruntime where it has them)."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_against_onnxruntime, check_case, node_cases, node_model, run_model

CASES = node_cases("CumProd") + node_cases("BitCast")


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    check_against_onnxruntime(case, got)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumprod_float16_3d(exclusive, reverse, tmp_path, monkeypatch):
    x = np.random.default_rng(2).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float16)
    axis = np.array(1, np.int64)
    model = node_model("CumProd", {"x": x, "axis": axis}, {"exclusive": exclusive, "reverse": reverse},
                       default_opset=26)
    got = run_model(model, [x, axis], tmp_path, monkeypatch)[0]
    f = np.flip(x, 1) if reverse else x
    want = np.cumprod(f.astype(np.float64), axis=1)
    if exclusive:
        want = np.concatenate([np.ones((2, 1, 4)), want[:, :-1]], axis=1)
    want = np.flip(want, 1) if reverse else want
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=3e-3)


def test_errors():
    with pytest.raises(GraphError, match=r"node 'b' \(BitCast\): float32 \(32 bits\) and float64 \(64 bits\) differ"):
        lookup("BitCast", opset=26)({"to": 11}, [Meta(np.dtype(np.float32), (2,))], name="b")
    k = lookup("CumProd", opset=26)({}, [Meta(np.dtype(np.float32), (2, 3)), Meta(np.dtype(np.int64), ())], name="c")
    with pytest.raises(GraphError, match="axis=2 is out of range for rank 2"):
        k.compute(np.ones((2, 3), np.float32), np.array(2))
