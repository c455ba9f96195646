"""The real-architecture samples: atc -> OM -> run on cpu and sim == onnxruntime."""
import os

import numpy as np
import onnx
import pytest

from ge.core import api

from .conftest import make_feeds, onnxruntime_outputs

CASES = {
    "resnet50_small": lambda s: (s.resnet50_style(image=64, width=16, blocks=(1, 1, 1, 1), classes=10), {}),
    "resnet50_full": lambda s: (s.resnet50_style(), {}),
    "mobilenetv2": lambda s: (s.mobilenetv2_style(), {}),
    "pplcnet_opset11": lambda s: (s.pplcnet_style(), {}),  # paddle2onnx's decomposed HardSwish
    "bert_b2_s24": lambda s: (s.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100),
                              {"input_ids": [2, 24], "attention_mask": [2, 24]}),
    "inception": lambda s: (s.inception_style(image=96, classes=10), {}),
    "bert_default_b1_s128": lambda s: (s.bert_style(), {"input_ids": [1, 128], "attention_mask": [1, 128]}),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def compiled(request, samples, tmp_path_factory):
    model, shapes = CASES[request.param](samples)
    tmp = tmp_path_factory.mktemp(request.param)
    path = str(tmp / "model.onnx")
    onnx.save(model, path)
    feeds = make_feeds(model, shapes)
    spec = ";".join(f"{n}:{','.join(map(str, a.shape))}" for n, a in feeds.items())
    result = api.atc(path, str(tmp / "model"), input_shape=spec)
    return result, feeds, onnxruntime_outputs(path, feeds)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_outputs_equal_onnxruntime(compiled, device):
    result, feeds, expected = compiled
    model_id = api.load_from_file(result.om_path, device)
    try:
        got = api.execute(model_id, feeds)
        got_again = api.execute(model_id, feeds)  # a second run reuses every address
    finally:
        api.unload(model_id)
    assert len(got) == len(expected)
    for g, e, g2 in zip(got, expected, got_again):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4)
        np.testing.assert_array_equal(g, g2)


def test_arena_within_one_percent_of_lower_bound(compiled):
    attrs = compiled[0].model.attrs
    assert attrs["lower_bound"] <= attrs["feature_map_size"] <= 1.01 * attrs["lower_bound"]


def test_om_round_trips(compiled):
    from ge.formats.om import om_bytes, read_om
    result = compiled[0]
    again = read_om(result.om_path)
    assert om_bytes(again) == om_bytes(result.model)


def test_executors_are_bit_identical(compiled):
    result, feeds, _ = compiled
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        model = api.model(model_id)
        reference = model.nn_execute(feeds)
        for executor in ("dataflow", "parallel"):
            ctx = model.create_context(executor=executor)
            for _ in range(2):
                for got, want in zip(ctx.execute(feeds), reference):
                    np.testing.assert_array_equal(got, want)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_four_threads_own_contexts_against_onnxruntime(samples, tmp_path, device):
    """One loaded model, 4 threads x 100 runs, each thread on its own context with its own inputs,
    every output checked against onnxruntime's for those inputs."""
    import threading
    model = samples.tiny_cnn()
    path = str(tmp_path / "tiny.onnx")
    onnx.save(model, path)
    om = api.atc(path, str(tmp_path / "tiny")).om_path
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    expected = [onnxruntime_outputs(path, {"image": x})[0] for x in inputs]
    model_id = api.load_from_file(om, device)
    dm = api.model(model_id)
    failures, runs = [], [0] * 4

    def worker(k: int) -> None:
        ctx = dm.create_context(executor=("linear", "dataflow", "parallel", "linear")[k])
        for i in range(100):
            j = (k + i) % len(inputs)
            (y,) = ctx.execute([inputs[j]])
            runs[k] += 1
            if not np.allclose(y, expected[j], rtol=1e-4, atol=1e-6):
                failures.append((k, i))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    api.unload(model_id)
    assert runs == [100] * 4 and not failures
