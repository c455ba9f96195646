"""Small real models (samples' GPT-2-style decoder and CIFAR ResNet-8, benchmarks/small_models.py's
rows at test size): atc -> OM -> run == onnxruntime within 1e-4, static and dynamic."""
import numpy as np
import onnx
import pytest

from ge.core import api

from .conftest import make_feeds, onnxruntime_outputs

GPT2 = dict(layers=2, hidden=64, heads=2, vocab=128, max_pos=40)


def _compile(tmp_path, model, spec=None):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path, api.atc(path, str(tmp_path / "model"), input_shape=spec)


def _run_twice(om_path, feeds):
    model_id = api.load_from_file(om_path, "cpu")
    try:
        first = api.execute(model_id, feeds)
        return first, api.execute(model_id, feeds), api.model(model_id)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("seq", [8, 32])
def test_gpt2_style_equals_onnxruntime_with_its_gelu_in_the_product(samples, tmp_path, seq):
    path, result = _compile(tmp_path, samples.gpt2_style(seq=seq, **GPT2))
    feeds = make_feeds(onnx.load(path), {})
    got, again, loaded = _run_twice(result.om_path, feeds)
    expected = onnxruntime_outputs(path, feeds)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[0], again[0])
    ops = [t.plan.kernel.op_type for t in loaded.default_context.handle]
    # gelu_new: one tanh Gelu per layer, the MLP's Gemm's epilogue (fuse_activation)
    gelus = [t for t in loaded.default_context.handle
             if ["Gelu", {"approximate": "tanh"}, "ge"] in (t.plan.kernel.attrs.get("ge.epilogue") or [])]
    assert len(gelus) == GPT2["layers"] and "Gelu" not in ops and "Pow" not in ops and "Tanh" not in ops


def test_gpt2_style_with_dynamic_seq(samples, tmp_path):
    path, result = _compile(tmp_path, samples.gpt2_style(seq="seq", **GPT2), spec="input_ids:1,-1")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for seq in (5, 17, 5):
            feeds = make_feeds(onnx.load(path), {"input_ids": [1, seq]}, seed=seq)
            got = api.execute(model_id, feeds)
            np.testing.assert_allclose(got[0], onnxruntime_outputs(path, feeds)[0], rtol=1e-4, atol=1e-5)
    finally:
        api.unload(model_id)


def test_resnet8_equals_onnxruntime(samples, tmp_path):
    path, result = _compile(tmp_path, samples.resnet8())
    feeds = make_feeds(onnx.load(path), {})
    got, again, _ = _run_twice(result.om_path, feeds)
    np.testing.assert_allclose(got[0], onnxruntime_outputs(path, feeds)[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[0], again[0])


def test_silero_vad_style_streams_its_state_like_onnxruntime(samples, tmp_path):
    """A VAD frame a call, the LSTM state fed back call after call (20 calls, both sample rates'
    branches, 512 and 256 samples): every probability and state as onnxruntime's."""
    m = samples.silero_vad_style(hidden=32)
    path = str(tmp_path / "vad.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "vad"), input_shape="input:1,-1;state:2,1,32;sr:")
    rng = np.random.default_rng(3)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        state = expected = np.zeros((2, 1, 32), np.float32)
        for step in range(20):
            sr = 8000 if step in (7, 8, 15) else 16000
            frame = rng.standard_normal((1, 512 if sr == 16000 else 256)).astype(np.float32)
            prob, state = api.execute(model_id, {"input": frame, "state": state, "sr": np.array(sr)})
            eprob, expected = onnxruntime_outputs(path, {"input": frame, "state": expected, "sr": np.array(sr)})
            assert prob.shape == (1, 1) and state.shape == (2, 1, 32)
            np.testing.assert_allclose(prob, eprob, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(state, expected, rtol=1e-4, atol=1e-5)
    finally:
        api.unload(model_id)


def test_gpt2_style_decoding_step_with_past_key_values(samples, tmp_path):
    """seq 1 after `past` tokens (static, the benchmark's form; and symbolic, growing call after
    call): logits and every present key/value as onnxruntime's."""
    path, result = _compile(tmp_path, samples.gpt2_style(seq=1, past=12, **GPT2))
    feeds = make_feeds(onnx.load(path), {})
    got, again, loaded = _run_twice(result.om_path, feeds)
    expected = onnxruntime_outputs(path, feeds)
    assert len(got) == 1 + 2 * GPT2["layers"]
    # each residual Add (after Conv1D's Reshape/Gemm/Reshape) is added by the product as it stores:
    # the token and position embeddings' sum is the only Add left
    ops = [t.plan.kernel.op_type for t in loaded.default_context.handle]
    assert ops.count("Add") == 1 and ops.count("FusedMatMul") == 4 * GPT2["layers"]
    for g, a, e in zip(got, again, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(g, a)
    dyn = str(tmp_path / "dyn")
    onnx.save(samples.gpt2_style(seq=1, past="past", **GPT2), dyn + ".onnx")
    spec = ";".join(["input_ids:1,1"] + [f"past_key_values.{i}.{kv}:1,2,-1,32" for i in range(2) for kv in ("key", "value")])
    model_id = api.load_from_file(api.atc(dyn + ".onnx", dyn, input_shape=spec).om_path, "cpu")
    try:
        feeds = make_feeds(onnx.load(dyn + ".onnx"), {f"past_key_values.{i}.{kv}": [1, 2, 3, 32]
                                                       for i in range(2) for kv in ("key", "value")})
        names = [k for k in feeds if k != "input_ids"]
        for step in range(4):  # each step's presents are the next step's past: the shapes grow
            got = api.execute(model_id, feeds)
            expected = onnxruntime_outputs(dyn + ".onnx", feeds)
            for g, e in zip(got, expected):
                assert g.shape == e.shape
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
            feeds = {"input_ids": np.array([[step + 5]], np.int64), **dict(zip(names, got[1:]))}
    finally:
        api.unload(model_id)


def test_llama_style_decoding_step_with_grouped_query_attention(samples, tmp_path):
    """seq 1 after 12 past tokens, 4 heads over 2 key/value heads, rotary at positions 12..: logits and
    every present key/value as onnxruntime's, twice the same."""
    path, result = _compile(tmp_path, samples.llama_style(seq=1, past=12, layers=2, hidden=64, heads=4, kv_heads=2,
                                                          intermediate=96, vocab=128, max_pos=40))
    feeds = make_feeds(onnx.load(path), {})
    got, again, _ = _run_twice(result.om_path, feeds)
    expected = onnxruntime_outputs(path, feeds)
    assert [g.shape for g in got] == [(1, 1, 128)] + [(1, 2, 13, 16)] * 4
    for g, a, e in zip(got, again, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(g, a)
