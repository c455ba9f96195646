"""FlexAttention (ai.onnx.preview) through ge atc + run on cpu and sim: without modifiers a static
kernel, with score_mod/prob_mod subgraphs compiled as submodels (one reading a value of the outer
graph), against attention written out in numpy; the OM reader checks the modifiers' names."""
import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ge.core import api
from ge.core.model.ge_model import GeModel
from ge.formats.om import read_om
from ge.formats.om.decode import Bad
from ge.formats.om.root import decode_root, encode_root

from .conftest import run_om

F = T.FLOAT
B, HQ, HKV, L, S, E, EV = 2, 4, 2, 3, 5, 8, 6


def expected(q, k, v, bias=None, prob_scale=None, scale=None):
    k, v = np.repeat(k, HQ // HKV, axis=1), np.repeat(v, HQ // HKV, axis=1)
    scores = (q @ np.swapaxes(k, -1, -2)).astype(np.float64) * (scale or 1 / np.sqrt(E))
    if bias is not None:
        scores = scores + bias
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if prob_scale is not None:
        p = p * prob_scale
    return (p @ v).astype(np.float32)


def flex_model(tmp_path, mods: dict, extra_inputs=(), scale=None):
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", name="flex",
                            **mods, **({"scale": scale} if scale else {}))
    nodes = [helper.make_node("Relu", ["b0"], ["b"])] if extra_inputs else []
    g = helper.make_graph(nodes + [node, helper.make_node("Neg", ["y"], ["z"])], "flex",
                          [helper.make_tensor_value_info("q", F, [B, HQ, L, E]),
                           helper.make_tensor_value_info("k", F, [B, HKV, S, E]),
                           helper.make_tensor_value_info("v", F, [B, HKV, S, EV]), *extra_inputs],
                          [helper.make_tensor_value_info("z", F, None)])
    path = str(tmp_path / "flex.onnx")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("ai.onnx.preview", 1)])
    onnx.save(m, path)
    return api.atc(path, str(tmp_path / "flex")).om_path


def mod(name, op, operand, init=None):
    inits = [] if init is None else [onnx.numpy_helper.from_array(init, operand)]
    return helper.make_graph([helper.make_node(op, [f"{name}_in", operand], [f"{name}_out"])], name,
                             [helper.make_tensor_value_info(f"{name}_in", F, None)],
                             [helper.make_tensor_value_info(f"{name}_out", F, None)], inits)


def feeds(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((B, HQ, L, E), (B, HKV, S, E), (B, HKV, S, EV))]


def test_without_modifiers_it_is_a_static_kernel(tmp_path):
    om = flex_model(tmp_path, {}, scale=0.3)
    assert isinstance(read_om(om), GeModel)  # no subgraph: planned like any static op
    q, k, v = feeds()
    for device in ("cpu", "sim"):
        (z,) = run_om(om, device, [q, k, v])
        np.testing.assert_allclose(-z, expected(q, k, v, scale=0.3), rtol=1e-5, atol=1e-6)


def test_modifiers_run_as_compiled_subgraphs_and_read_outer_values(tmp_path):
    """score_mod adds `b` (computed by the outer graph: a captured value), prob_mod scales by a constant."""
    mods = {"score_mod": mod("score", "Add", "b"), "prob_mod": mod("prob", "Mul", "half", np.float32(0.5))}
    om = flex_model(tmp_path, mods, [helper.make_tensor_value_info("b0", F, [1, 1, L, S])])
    dyn = read_om(om)
    assert sorted(key for n in dyn.nodes for key, _ in n.subgraphs) == ["prob_mod", "score_mod"]
    for seed in (0, 1):
        q, k, v = feeds(seed)
        b0 = np.random.default_rng(seed + 7).standard_normal((1, 1, L, S)).astype(np.float32)
        for device in ("cpu", "sim"):
            (z,) = run_om(om, device, [q, k, v, b0])
            np.testing.assert_allclose(-z, expected(q, k, v, np.maximum(b0, 0), 0.5), rtol=1e-5, atol=1e-6)


def test_the_om_reader_checks_the_modifier_attributes(tmp_path):
    om = flex_model(tmp_path, {"score_mod": mod("score", "Add", "two", np.float32(2))})
    dyn = read_om(om)
    md, ti = encode_root(dyn)
    flex = next(n for n in ti["nodes"] if n["op_type"] == "FlexAttention")
    assert [key for key, _ in flex["subgraphs"]] == ["score_mod"]
    flex["subgraphs"][0][0] = "mask_mod"
    with pytest.raises(Bad, match=r"node 'flex' \(FlexAttention\): subgraph attributes \['mask_mod'\], expected "
                                  r"\['prob_mod', 'score_mod'\]"):
        decode_root(msgpack.unpackb(msgpack.packb(md)), ti, len(dyn.weight_data))
