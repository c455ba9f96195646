"""Attention: onnx's node cases through ge's API, checked against their expected outputs and
onnxruntime's where it runs them."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import case_ids, check_against_onnxruntime, check_case, node_cases

CASES = node_cases("Attention")
#: onnxruntime's qk_matmul_output in mode 2 (QK + bias) leaves the causal mask out of the bias (its
#: Y agrees); ge gives the spec's and onnx's expected output
ORT_QK_WITHOUT_CAUSAL = {"test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal",
                         "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal"}


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    compared = (0, 1, 2) if case.name in ORT_QK_WITHOUT_CAUSAL else None
    # float16: where the CPU has half-precision arithmetic (aarch64) onnxruntime rounds its products and
    # softmax in float16, up to 2 ulps (2e-3) from ge's float32 arithmetic rounded once
    half = any(g.dtype == np.float16 for g in got)
    check_against_onnxruntime(case, got, rtol=4e-3 if half else 1e-3, atol=1e-4, outputs=compared)


def test_errors():
    f32 = np.dtype(np.float32)
    att = lookup("Attention", opset=25)
    with pytest.raises(GraphError, match=r"node 'a' \(Attention\): 3-D inputs need attributes q_num_heads"):
        att({}, [Meta(f32, (1, 4, 8))] * 3, opset=25, name="a")
    with pytest.raises(GraphError, match="must not be given with 4-D inputs"):
        att({"q_num_heads": 2, "kv_num_heads": 2}, [Meta(f32, (1, 2, 4, 8))] * 3, opset=25, name="a")
    with pytest.raises(GraphError, match="3 query heads are not a multiple of 2"):
        att({}, [Meta(f32, (1, 3, 4, 8)), Meta(f32, (1, 2, 4, 8)), Meta(f32, (1, 2, 4, 8))], opset=25, name="a")
    with pytest.raises(GraphError, match="past_key and past_value must be given together"):
        att({}, [Meta(f32, (1, 2, 4, 8))] * 3 + [None, Meta(f32, (1, 2, 3, 8))], opset=25, name="a")
    with pytest.raises(GraphError, match=r"attn_mask \(3, 4\) does not broadcast"):
        att({}, [Meta(f32, (1, 2, 4, 8))] * 3 + [Meta(f32, (3, 4))], opset=25, name="a")


SIM = [c for c in CASES if c.name in ("test_attention_3d_gqa_with_past_and_present",
                                      "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal",
                                      "test_attention_4d_gqa_causal_nonpad_decode")]


@pytest.mark.parametrize("case", SIM, ids=case_ids(SIM))
def test_node_case_on_sim(case, tmp_path, monkeypatch):
    """The same cases on the sim device (its own memory and streams)."""
    assert len(SIM) == 3
    check_case(case, tmp_path, monkeypatch, device="sim")
