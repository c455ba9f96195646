"""Self-attention blocks as exporters write them (Q, K, V projections, heads split by Reshape and
Transpose, Q K^T scaled, a mask added, Softmax, P V, heads merged, the output projection), compiled
by ge and run beside onnxruntime: the native products read A in place, gather K^T by register
transposes and the Softmax rows end in a masked tail, at sequence lengths and head sizes that are not
multiples of the vector width, heads not a power of two, batches above 1."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api

from .conftest import onnxruntime_outputs, run_om

CASES = [  # batch, seq, heads, head_dim, mask
    (1, 197, 12, 64, False),  # ViT-B/16's
    (1, 128, 12, 64, True),  # BERT-base's
    (2, 45, 3, 40, True),
    (1, 33, 5, 72, True),
    (3, 50, 7, 16, False),
    (2, 61, 6, 24, True),
]


def attention_model(batch, seq, heads, head_dim, mask, seed=0):
    rng = np.random.default_rng(seed)
    hidden = heads * head_dim
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def linear(x, name):
        w = const(f"{name}.w", (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32))
        b = const(f"{name}.b", (rng.standard_normal(hidden) * 0.1).astype(np.float32))
        nodes.append(helper.make_node("MatMul", [x, w], [f"{name}.mm"]))
        nodes.append(helper.make_node("Add", [f"{name}.mm", b], [name]))
        return name

    split = const("split_shape", np.array([batch, seq, heads, head_dim], np.int64))
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes.append(helper.make_node("Reshape", [linear("x", name), split], [f"{name}.4d"]))
        nodes.append(helper.make_node("Transpose", [f"{name}.4d"], [f"{name}.heads"], perm=perm))
    nodes.append(helper.make_node("MatMul", ["q.heads", "k.heads"], ["qk"]))
    nodes.append(helper.make_node("Mul", ["qk", const("scale", np.float32(1 / np.sqrt(head_dim)))], ["scores"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])]
    if mask:  # 0 where attended, float's lowest where padded, per batch item over the keys
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 1, seq]))
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["masked"]))
    nodes.append(helper.make_node("Softmax", ["masked" if mask else "scores"], ["probs"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["probs", "v.heads"], ["ctx.heads"]))
    nodes.append(helper.make_node("Transpose", ["ctx.heads"], ["ctx.4d"], perm=[0, 2, 1, 3]))
    merge = const("merge_shape", np.array([batch, seq, hidden], np.int64))
    nodes.append(helper.make_node("Reshape", ["ctx.4d", merge], ["ctx"]))
    out = linear("ctx", "out")
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, seq, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {"x": rng.standard_normal((batch, seq, hidden)).astype(np.float32)}
    if mask:
        m = np.zeros((batch, 1, 1, seq), np.float32)
        for i in range(batch):
            m[i, ..., seq - 1 - 3 * i:] = np.finfo(np.float32).min  # a padded tail of its own per item
        feeds["mask"] = m
    return model, feeds


@pytest.mark.parametrize("batch,seq,heads,head_dim,mask", CASES)
def test_attention_equals_onnxruntime(tmp_path, batch, seq, heads, head_dim, mask):
    model, feeds = attention_model(batch, seq, heads, head_dim, mask)
    path = str(tmp_path / "attention.onnx")
    onnx.save(model, path)
    result = api.atc(path, str(tmp_path / "attention"))
    (got,) = run_om(result.om_path, "cpu", feeds)
    (want,) = onnxruntime_outputs(path, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
