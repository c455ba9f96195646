"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: onnx's node cases through ge's API,
checked against their expected outputs and onnxruntime's."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_against_onnxruntime, check_case, node_cases

CASES = node_cases("NegativeLogLikelihoodLoss") + node_cases("SoftmaxCrossEntropyLoss")


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    assert check_against_onnxruntime(case, got, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_float16_and_weights(check_op, op, reduction):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 4)).astype(np.float16)
    t = rng.integers(0, 5, (3, 4)).astype(np.int64)
    t[0, 1] = -1
    w = rng.random(5).astype(np.float16)
    check_op(op, {"x": x, "t": t, "w": w}, {"reduction": reduction, "ignore_index": -1}, opset=13,
             rtol=2e-3, atol=2e-3)


def test_errors():
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    nll = lookup("NegativeLogLikelihoodLoss", opset=13)
    with pytest.raises(GraphError, match=r"node 'l' \(NegativeLogLikelihoodLoss\): input \(2, 3\) and target \(3,\)"):
        nll({}, [Meta(f32, (2, 3)), Meta(i64, (3,))], name="l")
    with pytest.raises(GraphError, match="reduction 'avg'"):
        nll({"reduction": b"avg"}, [Meta(f32, (2, 3)), Meta(i64, (2,))], name="l")
    k = nll({}, [Meta(f32, (2, 3)), Meta(i64, (2,))], name="l")
    with pytest.raises(GraphError, match="target value 3 is out of range for 3 classes"):
        k.compute(np.zeros((2, 3), np.float32), np.array([0, 3]))
