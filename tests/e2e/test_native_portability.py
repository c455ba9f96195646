"""An OM runs where ge's native GEMM is built and where it is not, whichever machine compiled it: the
compiler plans workspace for both kinds of plans, the loader falls back to numpy plans."""
import os

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.kernels import native

from .conftest import make_feeds, onnxruntime_outputs

pytestmark = pytest.mark.skipif(native.native() is None, reason="ge's native GEMM is not built")


def run(om_path, feeds):
    model_id = api.load_from_file(om_path, "cpu")
    try:
        kernels = [t.plan.kernel for t in api.model(model_id).default_context.handle]
        outputs = api.execute(model_id, list(feeds.values()))
        return outputs, any(k.uses_native for k in kernels)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("compiled_native", [True, False])
def test_om_runs_with_and_without_native(samples, tmp_path, default_backend, compiled_native):
    model = samples.resnet50_style(blocks=(1, 1, 1, 1), width=16, image=64)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    feeds = make_feeds(model, {})
    want = onnxruntime_outputs(path, feeds)
    if compiled_native:
        result = api.atc(path, str(tmp_path / "m"))
    else:
        with default_backend("numpy"):
            result = api.atc(path, str(tmp_path / "m"))
    with default_backend("numpy"):
        got, used = run(result.om_path, feeds)
    assert not used
    np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-4)
    got, used = run(result.om_path, feeds)
    assert used or not compiled_native  # compiled without it, a native plan is taken where it fits
    np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-4)


def test_plans_of_no_workspace_natively_keep_the_numpy_plans_room(samples, tmp_path, default_backend):
    """Kernels whose native plan needs no workspace and whose numpy plan does (an Erf chain, a standalone
    Gelu, a QDQ model's round trips and SoftmaxQdq): an OM compiled with the native kernels loads and runs
    on the numpy plans too."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"input_features": np.random.default_rng(k).standard_normal((1, 16, 64)).astype(
                np.float32)} for k in range(2)])

        def get_next(self):
            return next(self.feeds, None)
    onnx.save(samples.whisper_encoder_style(mels=16, frames=64, layers=1, hidden=32, heads=2, ffn=64, classes=5),
              tmp_path / "f.onnx")
    quantize_static(tmp_path / "f.onnx", tmp_path / "q.onnx", Reader(), quant_format=QuantFormat.QDQ)
    x = [np.random.default_rng(9).standard_normal((1, 16, 64)).astype(np.float32)]
    for name in ("f", "q"):
        om = api.atc(str(tmp_path / f"{name}.onnx"), str(tmp_path / name)).om_path
        with default_backend("numpy"):
            model_id = api.load_from_file(om, "cpu")
            try:
                got = api.execute(model_id, x)
            finally:
                api.unload(model_id)
        model_id = api.load_from_file(om, "cpu")
        try:
            want = api.execute(model_id, x)
        finally:
            api.unload(model_id)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-3)


def test_om_from_a_smaller_machine_keeps_native_plans(samples, tmp_path, monkeypatch):
    """Workspaces are planned for a fixed number of GEMM threads, not the compiling machine's
    cores: loaded where there are more cores, the native plans still fit."""
    model = samples.resnet50_style(blocks=(1, 1, 1, 1), width=16, image=64)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    monkeypatch.setattr(native.calls, "default_threads", lambda: 2)
    result = api.atc(path, str(tmp_path / "m"))
    monkeypatch.setattr(native.calls, "default_threads", lambda: 32)
    feeds = make_feeds(model, {})
    got, used = run(result.om_path, feeds)
    assert used
    np.testing.assert_allclose(got[0], onnxruntime_outputs(path, feeds)[0], rtol=1e-3, atol=1e-4)


def _int8_run(om_path, feeds):
    """(outputs, int8 products on numpy plans, tasks given scratch of their own) of an OM."""
    model_id = api.load_from_file(om_path, "cpu")
    try:
        tasks = [t.plan for t in api.model(model_id).default_context.handle]
        outputs = api.execute(model_id, list(feeds.values()))
        products = [t for t in tasks if type(t.kernel).__name__ in ("QLinearConv", "QGemm", "QLinearMatMul")]
        assert products
        return outputs, [t.name for t in products if not t.kernel.uses_native], sum(t.own_workspace > 0 for t in tasks)
    finally:
        api.unload(model_id)


def test_native_plans_needing_more_scratch_than_the_om_plans_keep_native(make_model, tmp_path, monkeypatch):
    """An OM compiled where a native kernel needs less scratch (AVX-512 VNNI's int8 products, against an
    AVX2 machine's) loads with native plans all the same: the task gets scratch of its own, never the
    float64 numpy plan (5 of MobileNetV2's int8 layers ran so); its results are the OM's own, exactly."""
    from ge.core.compile import build
    from tests.core.passes.test_fuse_qdq import qdq_model
    model = qdq_model(make_model)
    path = str(tmp_path / "q.onnx")
    onnx.save(model, path)
    feeds = make_feeds(model, {})
    planned = api.atc(path, str(tmp_path / "planned"))
    planner = build._workspace  # the native plans' scratch as another level's, smaller
    monkeypatch.setattr(build, "_workspace", lambda node, opset, plan, kernel:
                        0 if kernel.uses_native else planner(node, opset, plan, kernel))
    short = api.atc(path, str(tmp_path / "short"))
    want, fell_back, own = _int8_run(planned.om_path, feeds)
    assert not fell_back and own == 0
    got, fell_back, own = _int8_run(short.om_path, feeds)
    assert not fell_back and own > 0
    np.testing.assert_array_equal(got[0], want[0])
