"""The hybrid executor's impls on fully dynamic models (no gears, no ranges): the impl cache, the
shape-agnostic impls and the weight packs, seen through the per-execution counters; every result
equals onnxruntime."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import ShapeError
from ge.core.kernels import native

from .conftest import onnxruntime_outputs

TOL = dict(rtol=1e-3, atol=1e-4)


def run_shapes(om_path, model_path, feeds_list):
    """Execute each feeds dict in turn; check it against onnxruntime; return each run's counters."""
    model_id = api.load_from_file(om_path, "cpu")
    try:
        ctx = api.model(model_id).default_context
        stats = []
        for feeds in feeds_list:
            got = api.execute(model_id, feeds)
            for g, e in zip(got, onnxruntime_outputs(model_path, feeds)):
                assert g.shape == e.shape
                np.testing.assert_allclose(g, e, **TOL)
            stats.append(dict(ctx.stats))
            assert ctx.device_bytes > 0  # what `ge run --stats` prints per context
        return stats, api.model(model_id)
    finally:
        api.unload(model_id)


def test_bert_sequence_lengths(samples, tmp_path):
    """BERT-style, symbolic batch and sequence: the first shape builds every impl; a new sequence
    length builds the shape-specialized ones only (the shape-agnostic ones serve it); a repeated
    length builds nothing (cache hits, and the shape-agnostic kernels serve it again). With ge's native GEMM the first shape packs the weights of every
    FusedMatMul and the impls of later shapes reuse them; the numpy plans use the weights as
    stored (B is [K, N]), so they pack nothing."""
    path = str(tmp_path / "bert.onnx")
    onnx.save(samples.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100), path)
    result = api.atc(path, str(tmp_path / "bert"), input_shape="input_ids:-1,-1;attention_mask:-1,-1")
    assert not result.model.submodels  # fully dynamic: every node runs in the hybrid executor
    seqs = [8, 16, 24, 16, 8]
    feeds = []
    for k, seq in enumerate(seqs):
        mask = np.ones((2, seq), np.int64)
        mask[1, seq // 2:] = 0
        feeds.append({"input_ids": np.random.default_rng(k).integers(0, 100, (2, seq)).astype(np.int64),
                      "attention_mask": mask})
    stats, _ = run_shapes(result.om_path, path, feeds)
    first, new, repeated = stats[0], stats[1:3], stats[3:]
    assert first["cache_builds"] == first["nodes_run"] and first["agnostic_hits"] == 0
    for st in new:
        assert 0 < st["cache_builds"] < first["cache_builds"]
        assert st["agnostic_hits"] >= 2  # the mask's Equal and Where (the residual Adds are the products' addends)
        assert st["cache_builds"] + st["agnostic_hits"] == st["shape_updates"]
    for st in repeated:
        assert st["cache_builds"] == 0 and st["cache_hits"] > 0
        assert st["cache_hits"] + st["agnostic_hits"] == st["shape_updates"]
    packs = [(st["weight_packs"], st["weight_pack_hits"]) for st in stats]
    if native.native() is None:
        assert packs == [(0, 0)] * 5
    else:
        # 2 layers x 4+ products; later lengths reuse the packs of every product whose shape changes
        # (the pooler's 2 rows, the native GEMV, keep their shape: its impl is not rebuilt)
        made, reused = packs[0][0], packs[1][1]
        assert made >= 8 and made - 1 <= reused <= made
        assert packs == [(made, 0), (0, reused), (0, reused), (0, 0), (0, 0)]


def _save(tmp_path, name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, k) for k, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("plans", ["native", "numpy"])
def test_conv_packs_once_per_layout(tmp_path, monkeypatch, plans):
    """A 3x3 Conv over 32 channels into 64 with a symbolic image size. Native: every size takes the direct
    convolution, whose W is packed once per tile (the wide one for rows of 32 and more pixels, the
    tall one for rows of 4) and reused. numpy: large images take the 'taps' plan, whose
    W[taps, OC, C] is packed for the first of them and reused by the impls built for the others;
    small images take im2col, which reads W as stored: nothing to pack, nothing reused."""
    from ge.core.kernels.ops.conv import cblas
    if plans == "native" and native.native() is None:
        pytest.skip("ge's native GEMM is not built")
    if plans == "numpy":
        monkeypatch.setattr(native.loader, "_NATIVE", None)
        if cblas().sgemm is None:
            pytest.skip("no cblas_sgemm reachable through numpy: no taps plan")
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((64, 32, 3, 3)).astype(np.float32) * 0.1, rng.standard_normal(64).astype(np.float32)
    path = _save(tmp_path, "conv", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                                    helper.make_node("Abs", ["c"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, "h", "w"])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], {"w": w, "b": b})
    result = api.atc(path, str(tmp_path / "conv"), input_shape="x:1,32,-1,-1")
    sizes = [32, 40, 4, 48, 32, 4]
    stats, _ = run_shapes(result.om_path, path,
                          [{"x": rng.standard_normal((1, 32, s, s)).astype(np.float32)} for s in sizes])
    packs = [(st["weight_packs"], st["weight_pack_hits"]) for st in stats]
    assert packs == ([(1, 0), (0, 1), (1, 0), (0, 1), (0, 0), (0, 0)] if plans == "native" else
                     [(1, 0), (0, 1), (0, 0), (0, 1), (0, 0), (0, 0)])
    # the Abs (a Sigmoid would be fused into the Conv), at every size after the first: its shape-agnostic
    # kernel serves a repeated size again straight from the node's last impl
    assert [st["agnostic_hits"] for st in stats] == [0, 1, 1, 1, 1, 1]
    assert [st["cache_builds"] for st in stats] == [2, 1, 1, 1, 0, 0]


def test_lstm_packs_once_for_every_sequence_length_and_batch(tmp_path):
    rng = np.random.default_rng(1)
    hidden, inp = 8, 5
    w, r = (rng.standard_normal((1, 4 * hidden, n)).astype(np.float32) * 0.3 for n in (inp, hidden))
    bias = rng.standard_normal((1, 8 * hidden)).astype(np.float32) * 0.1
    path = _save(tmp_path, "lstm", [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "h"], hidden_size=hidden)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["t", "n", inp])],
                 [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "h")],
                 {"w": w, "r": r, "b": bias})
    result = api.atc(path, str(tmp_path / "lstm"), input_shape=f"x:-1,-1,{inp}")
    shapes = [(3, 2), (7, 1), (5, 4), (7, 1)]
    stats, _ = run_shapes(result.om_path, path,
                          [{"x": rng.standard_normal((t, n, inp)).astype(np.float32)} for t, n in shapes])
    assert [(st["cache_builds"], st["weight_packs"], st["weight_pack_hits"]) for st in stats] == \
        [(1, 1, 0), (1, 0, 1), (1, 0, 1), (0, 0, 0)]


def test_calls_after_calls_reuse_checks_and_views_never_values(tmp_path):
    """A context keeps each input's last checked dtype and shape and each tensor's view while its shape
    holds: the same array object changed in place, a shape change and back, all equal onnxruntime
    with their own output shapes; a dtype or shape the model refuses is still refused after a good call."""
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
                           helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1], np.int64), "axes")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    om = api.atc(path, str(tmp_path / "m"), input_shape="x:-1,4").om_path
    model_id = api.load_from_file(om, "cpu")
    try:
        assert api.model(model_id).shape_mode == "hybrid"
        x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
        other = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
        for feed in (x, "in place", other, x, x):
            if isinstance(feed, str):
                x *= -2.0  # the same array, new values
                feed = x
            got = api.execute(model_id, {"x": feed})[0]
            expected = onnxruntime_outputs(path, {"x": feed})[0]
            assert got.shape == expected.shape == (len(feed), 1)
            np.testing.assert_allclose(got, expected, **TOL)
        with pytest.raises(ShapeError, match=r"input 'x': dtype float64 does not match the model's float32"):
            api.execute(model_id, {"x": x.astype(np.float64)})
        with pytest.raises(ShapeError, match=r"input 'x': shape \[3, 5\] does not match the model's \[-1, 4\]"):
            api.execute(model_id, {"x": np.zeros((3, 5), np.float32)})
        np.testing.assert_allclose(api.execute(model_id, {"x": x})[0], onnxruntime_outputs(path, {"x": x})[0], **TOL)
    finally:
        api.unload(model_id)


def test_a_generation_loop_builds_nothing_per_token(samples, tmp_path):
    """GPT-2-style decoding with its past length symbolic, each call's presents fed back as the next
    call's past (a new length every call, as a generation loop runs): from the third call on, every node
    whose shapes move is served by its shape-agnostic kernel (the attention products, the softmax, the
    causal mask's Slices, the positions' Range), straight from its last impl: nothing is built per token.
    A length given twice in a row gets kernels planned for it. Every result is onnxruntime's."""
    path = str(tmp_path / "gpt2.onnx")
    onnx.save(samples.gpt2_style(seq=1, layers=2, hidden=64, heads=2, vocab=100, max_pos=64, past="past"), path)
    spec = ";".join(["input_ids:1,1"] + [f"past_key_values.{i}.{kv}:1,2,-1,32" for i in range(2) for kv in ("key", "value")])
    result = api.atc(path, str(tmp_path / "gpt2"), input_shape=spec)
    rng = np.random.default_rng(0)
    feeds = {"input_ids": np.array([[7]], np.int64)}
    feeds.update({f"past_key_values.{i}.{kv}": rng.standard_normal((1, 2, 5, 32)).astype(np.float32)
                  for i in range(2) for kv in ("key", "value")})
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        ctx, stats = api.model(model_id).default_context, []
        for call in range(7):
            repeat = call == 5  # call 6 gets call 5's inputs again
            got = api.execute(model_id, feeds)
            want = onnxruntime_outputs(path, feeds)
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, **TOL)
            stats.append(dict(ctx.stats))
            if not repeat:
                names = [o.name for o in api.model(model_id).outputs]
                for k, name in enumerate(names):
                    if name.startswith("present."):
                        feeds[name.replace("present.", "past_key_values.")] = got[k]
                feeds["input_ids"] = np.array([[int(np.argmax(got[0][0, -1]))]], np.int64)
    finally:
        api.unload(model_id)
    growing = stats[2:5]
    for st in growing:
        assert st["cache_builds"] == 0 and st["agnostic_hits"] >= 2 * 4 + 1  # per layer 2 products, softmax, 2 slices
        assert st["agnostic_hits"] == st["shape_updates"]
    assert stats[5]["shape_updates"] > 0 and stats[5]["cache_builds"] == 0  # a new length: served
    assert stats[6]["cache_builds"] >= 2 * 4  # the same length twice in a row: planned for it
