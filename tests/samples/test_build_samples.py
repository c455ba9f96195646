"""Tests for samples/build_samples.py (loaded by path: samples/ is not a package)."""
from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "samples" / "build_samples.py"
MODELS = ROOT / "samples" / "models"


def _load():
    spec = importlib.util.spec_from_file_location("ge_build_samples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bs = _load()

SMALL = {
    "resnet50_style": dict(image=64, width=16, blocks=(1, 1, 1, 1), classes=10),
    "mobilenetv2_style": dict(image=64, width_mult=0.35, classes=10),
    "bert_style": dict(layers=2, hidden=64, heads=2, intermediate=128, vocab=100),
    "tiny_cnn": dict(),
}


@pytest.fixture(scope="module")
def small():
    return {name: bs.BUILDERS[name](**kw) for name, kw in SMALL.items()}


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def op_counts(model: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def inits(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def constant_producers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {n.output[0]: numpy_helper.to_array(attr(n, "value")) for n in model.graph.node if n.op_type == "Constant"}


# --------------------------------------------------------------------------- #
# every model
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("name", list(SMALL))
def test_full_check_and_metadata(small, name):
    model = small[name]
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].domain == "" and model.opset_import[0].version == 17
    assert model.producer_name == "ge.samples"
    assert model.graph.doc_string.startswith(name + "(")
    # initializers are not graph inputs; node names are unique
    assert not {i.name for i in model.graph.input} & {t.name for t in model.graph.initializer}
    names = [n.name for n in model.graph.node]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", list(SMALL))
def test_deterministic_bytes(name):
    build = bs.BUILDERS[name]
    a = build(**SMALL[name], seed=3).SerializeToString()
    b = build(**SMALL[name], seed=3).SerializeToString()
    c = build(**SMALL[name], seed=4).SerializeToString()
    assert a == b
    assert a != c


# --------------------------------------------------------------------------- #
# CNNs
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("name", ["resnet50_style", "mobilenetv2_style"])
def test_cnn_runs_with_sane_logits(small, name):
    model = small[name]
    (image,) = model.graph.input
    assert image.name == "image"
    assert [d.dim_value for d in image.type.tensor_type.shape.dim] == [1, 3, 64, 64]
    (logits,) = run(model, bs.sample_inputs(model))
    assert logits.shape == (1, 10) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    assert len(np.unique(logits)) > 1
    assert 0.1 < logits.std() < 100


def test_cnn_batch_gt_1():
    model = bs.resnet50_style(batch=2, image=32, width=8, blocks=(1, 1, 1, 1), classes=5)
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    (logits,) = run(model, {"image": x})
    assert logits.shape == (2, 5) and np.isfinite(logits).all()
    # the two images are classified independently
    (first,) = run(bs.resnet50_style(batch=1, image=32, width=8, blocks=(1, 1, 1, 1), classes=5),
                   {"image": x[:1]})
    np.testing.assert_allclose(logits[:1], first, rtol=1e-4, atol=1e-4)


def test_resnet_topology(small):
    model = small["resnet50_style"]
    ops = op_counts(model)
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"} <= set(ops)
    # 1 stem conv + 3 per bottleneck + 1 projection per stage (blocks=(1,1,1,1))
    assert ops["Conv"] == 1 + 4 * 3 + 4
    assert ops["BatchNormalization"] == ops["Conv"]  # unfused, one BN per conv
    assert ops["Add"] == 4
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert all(len(n.input) == 2 for n in convs)  # no conv bias: BN follows
    assert attr(convs[0], "kernel_shape") == [7, 7] and attr(convs[0], "strides") == [2, 2]
    (pool,) = [n for n in model.graph.node if n.op_type == "MaxPool"]
    assert attr(pool, "kernel_shape") == [3, 3] and attr(pool, "strides") == [2, 2] and attr(pool, "pads") == [1] * 4
    w = inits(model)
    assert w["layer1.0.conv3.weight"].shape == (64, 16, 1, 1)  # expansion 4
    assert w["layer2.0.downsample.0.weight"].shape == (128, 64, 1, 1)
    assert w["fc.weight"].shape == (10, 512)
    assert all((w[k] > 0).all() for k in w if k.endswith("running_var"))
    gammas = np.concatenate([w[k] for k in w if k.endswith("bn1.weight") or k.endswith("bn2.weight")])
    assert abs(gammas.mean() - 1) < 0.1


def test_resnet_full_topology_without_running():
    # the real ResNet-50 layout: 53 convs, 16 residual adds, 25.6M parameters (not executed: ~100 MB)
    model = bs.resnet50_style()
    ops = op_counts(model)
    assert ops["Conv"] == 53 and ops["BatchNormalization"] == 53 and ops["Add"] == 16
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert 25_500_000 < n_params < 25_700_000
    assert model.graph.output[0].type.tensor_type.shape.dim[1].dim_value == 1000


def test_mobilenetv2_topology(small):
    model = small["mobilenetv2_style"]
    ops = op_counts(model)
    assert {"Conv", "BatchNormalization", "Clip", "Add", "GlobalAveragePool", "Reshape", "Gemm", "Constant"} <= set(ops)
    assert ops["BatchNormalization"] == ops["Conv"] == 52
    assert ops["Add"] == 10  # residual inverted-residual blocks
    depthwise = [n for n in model.graph.node if n.op_type == "Conv" and attr(n, "group", 1) > 1]
    assert len(depthwise) == 17
    w = inits(model)
    for n in depthwise:  # group == channels
        assert attr(n, "group") == w[n.input[1]].shape[0] and w[n.input[1]].shape[1] == 1
    consts = constant_producers(model)
    clips = [n for n in model.graph.node if n.op_type == "Clip"]
    assert len(clips) == 35
    for n in clips:  # opset >= 11 ReLU6: min/max as scalar constant inputs
        assert len(n.input) == 3
        assert consts[n.input[1]].shape == () and consts[n.input[1]] == 0.0 and consts[n.input[2]] == 6.0
    # the final 1x1 conv goes to 1280 channels even for width_mult < 1
    assert max(a.shape[0] for k, a in w.items() if k.endswith(".weight") and a.ndim == 4) == 1280
    assert w["classifier.1.weight"].shape == (10, 1280)


# --------------------------------------------------------------------------- #
# BERT
# --------------------------------------------------------------------------- #
def _bert_reference(model: onnx.ModelProto, ids: np.ndarray, mask: np.ndarray, layers: int, heads: int):
    """BERT forward in numpy (float64) from the model's own initializers."""
    w = {k: v.astype(np.float64) for k, v in inits(model).items()}
    erf = np.vectorize(math.erf)

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def dense(x, name):
        return x @ w[f"{name}.weight"] + w[f"{name}.bias"]

    b, s = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:s]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = ln(x, "embeddings.LayerNorm")
    add_mask = np.where(mask == 0, np.finfo(np.float32).min, 0.0)[:, None, None, :]
    hidden = x.shape[-1]
    d = hidden // heads
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q, k, v = (dense(x, f"{p}.attention.self.{n}").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + add_mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, hidden)
        x = ln(dense(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        h = h * 0.5 * (1 + erf(h / math.sqrt(2)))
        x = ln(dense(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x, np.tanh(dense(x[:, 0], "pooler.dense"))


def _padded_mask(lengths: list[int], seq: int) -> np.ndarray:
    return (np.arange(seq)[None, :] < np.array(lengths)[:, None]).astype(np.int64)


def test_bert_io_is_symbolic(small):
    model = small["bert_style"]
    ins = {i.name: i.type.tensor_type for i in model.graph.input}
    assert list(ins) == ["input_ids", "attention_mask"]
    for t in ins.values():
        assert t.elem_type == onnx.TensorProto.INT64
        assert [d.dim_param for d in t.shape.dim] == ["batch", "seq"]
    outs = {o.name: o.type.tensor_type.shape.dim for o in model.graph.output}
    assert list(outs) == ["last_hidden_state", "pooler_output"]
    assert [d.dim_param or d.dim_value for d in outs["last_hidden_state"]] == ["batch", "seq", 64]
    assert [d.dim_param or d.dim_value for d in outs["pooler_output"]] == ["batch", 64]


def test_bert_ops(small):
    model = small["bert_style"]
    ops = op_counts(model)
    required = {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Range", "ConstantOfShape", "Erf",
                "LayerNormalization", "Softmax", "Where", "Equal", "Constant", "MatMul", "Transpose", "Div",
                "Tanh"}
    assert required <= set(ops), required - set(ops)
    assert ops["LayerNormalization"] == 1 + 2 * 2
    assert ops["Softmax"] == 2 and ops["Erf"] == 2
    assert ops["Reshape"] == 4 * 2  # q, k, v split + merge per layer
    for n in model.graph.node:
        if n.op_type == "Softmax":
            assert attr(n, "axis") == -1
    # small scalars and shape pieces are Constant nodes, the rest initializers
    assert all(np.prod(t.dims) > 2 for t in model.graph.initializer)
    consts = constant_producers(model)
    assert any(v.shape == (1,) and v[0] == 32 for v in consts.values())  # head_dim
    assert any(v.shape == () and np.isclose(v, math.sqrt(32)) for v in consts.values())  # scale


@pytest.mark.parametrize("batch,seq,lengths", [(1, 7, [7]), (3, 12, [12, 5, 9])])
def test_bert_runs_matches_reference(small, batch, seq, lengths):
    model = small["bert_style"]
    rng = np.random.default_rng(batch * 100 + seq)
    ids = rng.integers(0, 100, (batch, seq), dtype=np.int64)
    mask = _padded_mask(lengths, seq)
    hidden, pooled = run(model, {"input_ids": ids, "attention_mask": mask})
    assert hidden.shape == (batch, seq, 64) and pooled.shape == (batch, 64)
    assert np.isfinite(hidden).all() and np.isfinite(pooled).all()
    assert (np.abs(pooled) <= 1).all()
    ref_hidden, ref_pooled = _bert_reference(model, ids, mask, layers=2, heads=2)
    np.testing.assert_allclose(hidden, ref_hidden, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pooled, ref_pooled, rtol=1e-4, atol=1e-4)


def test_bert_mask_hides_padding(small):
    model = small["bert_style"]
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 100, (2, 10), dtype=np.int64)
    mask = _padded_mask([10, 6], 10)
    other = ids.copy()
    other[1, 6:] = (other[1, 6:] + 1) % 100  # change only padded tokens
    h1, p1 = run(model, {"input_ids": ids, "attention_mask": mask})
    h2, p2 = run(model, {"input_ids": other, "attention_mask": mask})
    np.testing.assert_allclose(h1[:, :6], h2[:, :6], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)
    # ... while unmasking them changes the result
    h3, _ = run(model, {"input_ids": ids, "attention_mask": np.ones_like(mask)})
    assert not np.allclose(h1[1, :6], h3[1, :6], atol=1e-5)


@pytest.mark.parametrize("opset,mask_style", [(13, "sub_mul"), (17, "sub_mul"), (13, "where")])
def test_bert_variants(opset, mask_style):
    model = bs.bert_style(layers=1, hidden=32, heads=4, intermediate=64, vocab=50, opset=opset,
                          mask_style=mask_style)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert ("LayerNormalization" in ops) == (opset >= 17)
    if opset < 17:
        assert {"ReduceMean", "Pow", "Sqrt"} <= set(ops)
    if mask_style == "sub_mul":
        assert {"Cast", "Sub", "Mul"} <= set(ops) and "Where" not in ops
    ids = np.arange(10, dtype=np.int64).reshape(2, 5)
    mask = _padded_mask([5, 3], 5)
    hidden, pooled = run(model, {"input_ids": ids, "attention_mask": mask})
    # same seed, same weights: every variant computes the same function
    reference = bs.bert_style(layers=1, hidden=32, heads=4, intermediate=64, vocab=50)
    ref_hidden, ref_pooled = run(reference, {"input_ids": ids, "attention_mask": mask})
    np.testing.assert_allclose(hidden, ref_hidden, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pooled, ref_pooled, rtol=1e-4, atol=1e-4)


def test_bad_arguments():
    with pytest.raises(ValueError):
        bs.bert_style(hidden=30, heads=4)
    with pytest.raises(ValueError):
        bs.bert_style(opset=12)
    with pytest.raises(ValueError):
        bs.bert_style(layers=1, hidden=32, heads=4, intermediate=64, vocab=50, mask_style="nope")
    with pytest.raises(ValueError):
        bs.tiny_cnn(opset=10)


# --------------------------------------------------------------------------- #
# tiny_cnn and the committed files
# --------------------------------------------------------------------------- #
def test_tiny_cnn(small):
    model = small["tiny_cnn"]
    ops = op_counts(model)
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm",
            "Softmax"} <= set(ops)
    assert any(n.op_type == "Conv" and attr(n, "group", 1) == 16 for n in model.graph.node)  # depthwise
    assert len(model.SerializeToString()) < 300_000
    (probs,) = run(model, {"image": np.load(MODELS / "tiny_cnn_input.npy")})
    assert probs.shape == (1, 10)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-5)
    assert (probs > 0).all()


def test_committed_tiny_cnn_matches_script():
    committed = (MODELS / "tiny_cnn.onnx").read_bytes()
    assert committed == bs.tiny_cnn().SerializeToString(), \
        "regenerate: python samples/build_samples.py --out samples/models --only tiny_cnn"
    onnx.checker.check_model(onnx.load_from_string(committed), full_check=True)
    x = np.load(MODELS / "tiny_cnn_input.npy")
    assert x.shape == (1, 3, 32, 32) and x.dtype == np.float32
    np.testing.assert_array_equal(x, bs.sample_inputs(bs.tiny_cnn())["image"])


def test_cli(tmp_path):
    out = tmp_path / "models"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--only", "tiny_cnn"],
                          capture_output=True, text=True, check=True)
    assert "tiny_cnn.onnx" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["tiny_cnn.onnx", "tiny_cnn_input.npy"]
    assert (out / "tiny_cnn.onnx").read_bytes() == (MODELS / "tiny_cnn.onnx").read_bytes()
    assert (out / "tiny_cnn_input.npy").read_bytes() == (MODELS / "tiny_cnn_input.npy").read_bytes()

    bad = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--only", "vgg"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown model" in bad.stderr


def test_sample_inputs_bert(small):
    feeds = bs.sample_inputs(small["bert_style"], seed=1, batch=3, seq=8)
    assert feeds["input_ids"].shape == (3, 8) and feeds["input_ids"].dtype == np.int64
    assert 0 <= feeds["input_ids"].min() and feeds["input_ids"].max() < 100
    assert feeds["attention_mask"][0].all()  # row 0 unpadded, others right-padded
    assert all((np.diff(row) <= 0).all() for row in feeds["attention_mask"])


# --------------------------------------------------------------------------- #
# MobileNetV3 and ViT
# --------------------------------------------------------------------------- #
def test_mobilenetv3_topology_and_runs():
    model = bs.mobilenetv3_style(image=64, width_mult=0.5, classes=10)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert {"Conv", "BatchNormalization", "HardSwish", "HardSigmoid", "Relu", "Mul", "GlobalAveragePool",
            "Gemm"} <= set(ops)
    assert ops["HardSigmoid"] == 8  # one per squeeze-excite block
    w = inits(model)
    depthwise = [n for n in model.graph.node if n.op_type == "Conv" and attr(n, "group", 1) > 1]
    assert len(depthwise) == 15 and {tuple(attr(n, "kernel_shape")) for n in depthwise} == {(3, 3), (5, 5)}
    for n in depthwise:
        assert attr(n, "group") == w[n.input[1]].shape[0] and w[n.input[1]].shape[1] == 1
    # squeeze-excite: GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul
    producer = {n.output[0]: n for n in model.graph.node}
    for gate in (n for n in model.graph.node if n.op_type == "HardSigmoid"):
        chain, x = [], gate
        while x.op_type != "GlobalAveragePool":
            x = producer[x.input[0]]
            chain.append(x.op_type)
        assert chain == ["Conv", "Relu", "Conv", "GlobalAveragePool"]
        assert attr(gate, "alpha") == pytest.approx(1 / 6) and attr(gate, "beta") == 0.5
    (logits,) = run(model, bs.sample_inputs(model))
    assert logits.shape == (1, 10) and np.isfinite(logits).all() and len(np.unique(logits)) > 1
    full = bs.mobilenetv3_style()
    assert 5_400_000 < sum(int(np.prod(t.dims)) for t in full.graph.initializer) < 5_600_000  # torchvision's 5.48 M


@pytest.mark.parametrize("opset", [11, 9, 14])
def test_pplcnet_topology_and_runs(opset):
    """paddle2onnx's PP-LCNet: below opset 14 every HardSwish is Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6),
    the Clip's bounds inputs from opset 11 on, attributes before; HardSwish ops from opset 14."""
    model = bs.pplcnet_style(image=64, scale=0.5, classes=10, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert ops["HardSigmoid"] == 2 and ops["Conv"] == 2 * 13 + 1 + 2 * 2 + 1 and ops["MatMul"] == 1
    assert ops.get("HardSwish", 0) == (28 if opset >= 14 else 0)
    assert ops.get("Div", 0) == (0 if opset >= 14 else 28)
    producer = {n.output[0]: n for n in model.graph.node}
    constant = lambda name: float(numpy_helper.to_array(producer[name].attribute[0].t))  # noqa: E731
    for div in (n for n in model.graph.node if n.op_type == "Div"):
        mul = producer[div.input[0]]
        x, clip = mul.input
        add = producer[producer[clip].input[0]]
        assert producer[clip].op_type == "Clip" and add.op_type == "Add" and add.input[0] == x
        assert constant(add.input[1]) == 3.0 and constant(div.input[1]) == 6.0
        bounds = ([constant(b) for b in producer[clip].input[1:]] if opset >= 11
                  else [attr(producer[clip], "min"), attr(producer[clip], "max")])
        assert bounds == [0.0, 6.0]
    gates = [n for n in model.graph.node if n.op_type == "HardSigmoid"]
    assert all(attr(g, "alpha") == pytest.approx(0.1666667) and attr(g, "beta") == 0.5 for g in gates)
    (logits,) = run(model, bs.sample_inputs(model))
    assert logits.shape == (1, 10) and np.isfinite(logits).all() and len(np.unique(logits)) > 1
    if opset == 11:  # same seed, same weights: the decomposed form computes HardSwish
        (reference,) = run(bs.pplcnet_style(image=64, scale=0.5, classes=10, opset=14), bs.sample_inputs(model))
        np.testing.assert_allclose(logits, reference, rtol=1e-4, atol=1e-5)
        full = bs.pplcnet_style()
        assert 2_950_000 < sum(int(np.prod(t.dims)) for t in full.graph.initializer) < 2_980_000  # PaddleClas: 2.96 M


@pytest.mark.parametrize("opset", [20, 17])
def test_vit_topology_and_runs(opset):
    model = bs.vit_style(image=32, patch=16, layers=2, hidden=64, heads=4, mlp=128, classes=10, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert ops["LayerNormalization"] == 2 * 2 + 1 and ops["Softmax"] == 2
    assert ("Gelu" in ops) == (opset >= 20) and ("Erf" in ops) == (opset < 20)
    (patch,) = [n for n in model.graph.node if n.op_type == "Conv"]
    assert attr(patch, "kernel_shape") == [16, 16] and attr(patch, "strides") == [16, 16]
    (logits,) = run(model, bs.sample_inputs(model))
    assert logits.shape == (1, 10) and np.isfinite(logits).all()
    if opset == 17:  # same seed, same weights: Gelu and its Erf form compute the same function
        (reference,) = run(bs.vit_style(image=32, patch=16, layers=2, hidden=64, heads=4, mlp=128, classes=10),
                           bs.sample_inputs(model))
        np.testing.assert_allclose(logits, reference, rtol=1e-4, atol=1e-5)


def test_whisper_encoder_topology_and_runs():
    model = bs.whisper_encoder_style(mels=16, frames=64, layers=2, hidden=32, heads=2, ffn=64)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert ops["Conv"] == 2 and ops["Erf"] == 2 + 2 and ops["Softmax"] == 2 and ops["LayerNormalization"] == 2 * 2 + 1
    conv1, conv2 = [n for n in model.graph.node if n.op_type == "Conv"]
    assert attr(conv1, "kernel_shape") == [3] and attr(conv2, "strides") == [2]
    (hidden,) = run(model, bs.sample_inputs(model))
    assert hidden.shape == (1, 32, 32) and np.isfinite(hidden).all()
    classifier = bs.whisper_encoder_style(batch=2, mels=16, frames=64, layers=1, hidden=32, heads=2, ffn=64, classes=5)
    (logits,) = run(classifier, bs.sample_inputs(classifier))
    assert logits.shape == (2, 5) and np.isfinite(logits).all()


def test_vit_b16_size_without_running():
    model = bs.vit_style()
    assert sum(int(np.prod(t.dims)) for t in model.graph.initializer) == pytest.approx(86.57e6, rel=1e-3)
    assert op_counts(model)["MatMul"] == 12 * (4 + 2 + 2)  # q, k, v, out; the MLP's two; the attention's two
