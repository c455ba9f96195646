"""fuse_rotary: a rotary embedding at one known position (cos and sin constant rows) becomes a product
by a constant matrix, through ge's compiled model and against onnxruntime on the written-out graph;
cos and sin of several positions (a prefill) keep the written-out form."""
import numpy as np
from onnx import TensorProto, helper

from ge.core.passes import optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(5)


def rotary(rows: int, heads: int = 3, d: int = 8, swapped: bool = False):
    """q [1, heads, 1, d] after a head projection: q * cos + cat(-q[..., h:], q[..., :h]) * sin (HF's),
    cos and sin of `rows` positions; `swapped`: every Mul's and the Add's operands the other way."""
    h = d // 2
    angles = np.arange(rows)[:, None] * (1.0 / 10000 ** (np.arange(h) / h))[None, :] + 0.3
    angles = np.concatenate([angles, angles], axis=1)
    inits = {"w": rng.standard_normal((heads * d, heads * d)).astype(np.float32),
             "shape": np.array([1, 1, heads, d], np.int64),
             "cos": np.cos(angles).astype(np.float32).reshape(1, 1, rows, d),
             "sin": np.sin(angles).astype(np.float32).reshape(1, 1, rows, d),
             "zero": np.array([0], np.int64), "half": np.array([h], np.int64), "end": np.array([2 ** 62], np.int64),
             "last": np.array([-1], np.int64)}

    def mul(a, b, out):
        return helper.make_node("Mul", [b, a] if swapped else [a, b], [out])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Reshape", ["p", "shape"], ["p4"]),
             helper.make_node("Transpose", ["p4"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["q", "zero", "half", "last"], ["low"]),
             helper.make_node("Slice", ["q", "half", "end", "last"], ["high"]),
             helper.make_node("Neg", ["high"], ["neg"]),
             helper.make_node("Concat", ["neg", "low"], ["rot"], axis=-1),
             mul("q", "cos", "qc"), mul("rot", "sin", "rs"),
             helper.make_node("Add", ["rs", "qc"] if swapped else ["qc", "rs"], ["y"])]
    return nodes, inits


def test_one_position_is_one_product_or_rotated_weights(make_model, load, run_ort, run_ge):
    """The projection's heads read only by the rotary: W rotated, no product of its own; q also an
    output: q @ R."""
    for swapped, q_out in ((False, False), (True, False), (False, True)):
        nodes, inits = rotary(1, swapped=swapped)
        outputs = {"y": (F, [1, 3, 1, 8])} | ({"q": (F, [1, 3, 1, 8])} if q_out else {})
        model = make_model(nodes, {"x": (F, [1, 1, 24])}, outputs, inits)
        g = load(model)
        stats = optimize(g)["passes"]["fuse_rotary"]
        assert stats == {"fused": 1, "into_weights": 0 if q_out else 1}
        assert not {"Slice", "Neg", "Concat", "Mul", "Add"} & {n.op_type for n in g.nodes}
        assert [n.op_type for n in g.nodes].count("MatMul") + [n.op_type for n in g.nodes].count("FusedMatMul") \
            == (2 if q_out else 1)
        x = rng.standard_normal((1, 1, 24)).astype(np.float32)
        for got, want in zip(run_ge(g, {"x": x}), run_ort(model, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_several_positions_keep_the_written_out_form(make_model, load):
    nodes, inits = rotary(3)
    inits["shape"] = np.array([1, 3, 3, 8], np.int64)
    g = load(make_model(nodes, {"x": (F, [1, 3, 24])}, {"y": (F, [1, 3, 3, 8])}, inits))
    assert optimize(g)["passes"]["fuse_rotary"].get("fused", 0) == 0
