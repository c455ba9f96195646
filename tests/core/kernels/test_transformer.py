"""RMSNormalization, RotaryEmbedding, Swish, SwiGLU, TensorScatter, LinearAttention and
CausalConvWithState: onnx's node cases through ge's API, checked against their expected outputs and
onnxruntime's where it runs them."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_against_onnxruntime, check_case, node_cases

OPS = ["RMSNormalization", "RotaryEmbedding", "Swish", "SwiGLU", "TensorScatter", "LinearAttention",
       "CausalConvWithState"]
CASES = [c for op in OPS for c in node_cases(op)]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    check_against_onnxruntime(case, got, rtol=1e-3, atol=1e-4)


rng = np.random.default_rng(5)


def test_float16(check_op):
    x = rng.standard_normal((2, 3, 4, 8)).astype(np.float16)
    check_op("RMSNormalization", {"x": x, "s": rng.random(8).astype(np.float16)}, {"axis": -1}, opset=23,
             rtol=2e-3, atol=2e-3)
    check_op("RMSNormalization", {"x": x, "s": rng.random((4, 8)).astype(np.float16)}, {"axis": 2}, opset=23,
             rtol=2e-3, atol=2e-3)
    cos, sin = rng.random((10, 4)).astype(np.float16), rng.random((10, 4)).astype(np.float16)
    pos = rng.integers(0, 10, (2, 4)).astype(np.int64)
    for interleaved in (0, 1):
        check_op("RotaryEmbedding", {"x": x, "c": cos, "s": sin, "p": pos}, {"interleaved": interleaved},
                 opset=23, rtol=2e-3, atol=2e-3)
    check_op("Swish", {"x": x}, {"alpha": 0.7}, opset=24, rtol=2e-3, atol=2e-3)


def test_errors():
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    with pytest.raises(GraphError, match=r"node 'r' \(RotaryEmbedding\): 3-D X \(1, 4, 12\) needs num_heads"):
        lookup("RotaryEmbedding", opset=23)({}, [Meta(f32, (1, 4, 12)), Meta(f32, (4, 6)), Meta(f32, (4, 6))],
                                            name="r")
    with pytest.raises(GraphError, match="rotary_embedding_dim=5 must be even"):
        lookup("RotaryEmbedding", opset=23)({"rotary_embedding_dim": 5}, [Meta(f32, (1, 2, 4, 8))] + [
            Meta(f32, (1, 4, 2))] * 2, name="r")
    with pytest.raises(GraphError, match=r"update \(2, 2, 5, 4\) does not fit past_cache \(2, 2, 3, 4\)"):
        lookup("TensorScatter", opset=24)({}, [Meta(f32, (2, 2, 3, 4)), Meta(f32, (2, 2, 5, 4))], name="t")
    k = lookup("TensorScatter", opset=24)({}, [Meta(f32, (2, 3, 4)), Meta(f32, (2, 2, 4)), Meta(i64, (2,))],
                                          name="t")
    with pytest.raises(GraphError, match=r"write_indices \[0, 2\] \+ 2 updates exceed max_sequence_length 3"):
        k.compute(np.zeros((2, 3, 4), np.float32), np.ones((2, 2, 4), np.float32), np.array([0, 2]))
    with pytest.raises(GraphError, match="update_rule 'gated' needs decay input"):
        lookup("LinearAttention", opset=27)({"update_rule": "gated", "q_num_heads": 2, "kv_num_heads": 2},
                                            [Meta(f32, (1, 3, 8))] * 3, name="l")
