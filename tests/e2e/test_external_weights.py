"""Every sample model gives bit-identical `ge run` outputs with --external_weight 0, 1 and 2 on cpu
and sim; an ONNX model whose initializers live in ONNX external data compiles in every mode."""
import os
import shutil

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from ge.core import api
from ge.cli.main import cli

from .conftest import ROOT, make_feeds, onnxruntime_outputs

SAMPLES = {
    "tiny_cnn": lambda s: (s.tiny_cnn(), ""),
    "resnet50_small": lambda s: (s.resnet50_style(image=64, width=16, blocks=(1, 1, 1, 1), classes=10), ""),
    "mobilenetv2_small": lambda s: (s.mobilenetv2_style(image=64, width_mult=0.35, classes=10), ""),
    "inception_small": lambda s: (s.inception_style(image=64, blocks=2, classes=10), ""),
    "bert_small": lambda s: (s.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100),
                             "input_ids:2,24;attention_mask:2,24"),
}


def ge(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], prog_name="ge")
    assert r.exit_code == 0, (r.stdout, r.stderr, r.exception)
    return r


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_ge_run_is_bit_identical_in_every_mode(samples, tmp_path, name):
    model, shape = SAMPLES[name](samples)
    onnx.save(model, str(tmp_path / "model.onnx"))
    outputs = {}
    for mode in (0, 1, 2):
        om = tmp_path / f"m{mode}" / "net"
        ge("atc", f"--model={tmp_path / 'model.onnx'}", f"--output={om}", f"--external_weight={mode}",
           *([f"--input_shape={shape}"] if shape else []))
        if mode:
            assert os.listdir(tmp_path / f"m{mode}" / "weight")
        for device in ("cpu", "sim"):
            out = tmp_path / f"out{mode}{device}"
            ge("run", "--model", f"{om}.om", "--device", device, "--output-dir", out, "--seed", "1")
            outputs[mode, device] = [np.load(out / f) for f in sorted(os.listdir(out))]
    reference = outputs[0, "cpu"]
    for key, got in outputs.items():
        assert len(got) == len(reference)
        for g, r in zip(got, reference):
            assert g.dtype == r.dtype and g.shape == r.shape
            assert g.tobytes() == r.tobytes(), key


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_onnx_external_data_compiles_in_every_mode(samples, tmp_path, mode):
    model = samples.resnet50_style(image=32, width=8, blocks=(1, 1, 1, 1), classes=10)
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(model, str(src / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.data", size_threshold=0)
    assert os.path.getsize(src / "model.data") > os.path.getsize(src / "model.onnx")
    feeds = make_feeds(model, {})
    result = api.atc(str(src / "model.onnx"), str(tmp_path / "om" / "net"), external_weight=mode)
    assert {w.file != "" for w in result.model.weights} == ({False} if mode == 0 else {False, True})
    shutil.move(str(src), str(tmp_path / "gone"))  # the OM and its weight folder need nothing from the ONNX side
    model_id = api.load_from_file(result.om_path, "sim")
    try:
        (got,) = api.execute(model_id, feeds)
    finally:
        api.unload(model_id)
    (expected,) = onnxruntime_outputs(str(tmp_path / "gone" / "model.onnx"), feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


def test_load_from_mem_needs_a_weight_folder(samples, tmp_path):
    onnx.save(samples.tiny_cnn(), str(tmp_path / "m.onnx"))
    result = api.atc(str(tmp_path / "m.onnx"), str(tmp_path / "net"), external_weight=2)
    data = open(result.om_path, "rb").read()
    with pytest.raises(api.GeError, match="keeps its weights in external files .*weight_dir"):
        api.load_from_mem(data, "cpu")
    model_id = api.load_from_mem(data, "cpu", weight_dir=str(tmp_path / "weight"))
    api.unload(model_id)


def test_user_weight_memory_through_the_api(samples, tmp_path):
    onnx.save(samples.tiny_cnn(), str(tmp_path / "m.onnx"))
    result = api.atc(str(tmp_path / "m.onnx"), str(tmp_path / "net"), external_weight=2)
    path = tmp_path / "weight" / "net_weight_combined"
    buf = api.malloc(os.path.getsize(path), "sim")
    api.memcpy_h2d(buf, path.read_bytes())
    x = np.load(os.path.join(ROOT, "samples", "models", "tiny_cnn_input.npy"))
    model_id = api.load_from_file(result.om_path, "sim", weight_memory={"net_weight_combined": buf})
    with_user = api.execute(model_id, [x])[0]
    api.unload(model_id)
    model_id = api.load_from_file(result.om_path, "sim")
    np.testing.assert_array_equal(api.execute(model_id, [x])[0], with_user)
    api.unload(model_id)
    api.free(buf)
