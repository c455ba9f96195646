"""An op's plan is not its loaded kernel (issue 13): the compiler plans every kernel (shapes,
workspace for each backend) and packs no weight; the loader selects a backend once per model and
packs the weights of the plan it runs."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.ir import Meta
from ge.core.kernels import backend as backends, base, lookup


@pytest.fixture
def loads(monkeypatch):
    """Every Kernel.load() call, by op type."""
    seen = []
    real = base.Kernel.load

    def load(self):
        seen.append(self.op_type)
        return real(self)
    monkeypatch.setattr(base.Kernel, "load", load)
    return seen


def lstm_model():
    rng = np.random.default_rng(0)
    w, r = rng.standard_normal((1, 32, 5)).astype(np.float32), rng.standard_normal((1, 32, 8)).astype(np.float32)
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=8)
    g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1, 2, 8])],
                          [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(r, "r")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("which", ["resnet", "bert", "lstm"])
def test_the_compiler_packs_no_weight_and_the_loader_does(samples, tmp_path, loads, which):
    model = {"resnet": lambda: samples.resnet50_style(blocks=(1, 1, 1, 1), width=16, image=32),
             "bert": lambda: samples.bert_style(layers=1, hidden=32, heads=2, intermediate=64, vocab=50),
             "lstm": lstm_model}[which]()
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    shape = "input_ids:1,16;attention_mask:1,16" if which == "bert" else None
    om = api.atc(path, str(tmp_path / "m"), input_shape=shape).om_path
    assert loads == []  # planned only: no kernel loaded, no weight packed
    model_id = api.load_from_file(om)
    try:
        packing = {"Conv", "FusedConv", "FusedMatMul", "MatMul", "Gemm", "LSTM"}
        assert packing & set(loads)
    finally:
        api.unload(model_id)


def test_packing_outside_load_is_refused():
    w = np.ones((4, 3, 3, 3), np.float32)
    k = lookup("Conv")({}, [Meta(np.dtype(np.float32), (1, 3, 8, 8)), Meta(w.dtype, w.shape)], [None, w],
                       backend=backends.NUMPY)
    with pytest.raises(RuntimeError, match="packed in pack"):
        k.shared_pack(("x",), lambda a: a, w)
    assert k.load() is k and k.loaded and k.load() is k  # idempotent


def test_the_backend_is_explicit_and_workspace_is_planned_for_both(default_backend):
    """A kernel takes the backend it is given; the numpy plan is there on any machine."""
    default_backend("native")
    w = np.ones((16, 32, 3, 3), np.float32)
    metas = [Meta(np.dtype(np.float32), (1, 32, 12, 12)), Meta(w.dtype, w.shape)]
    numpy_plan = lookup("Conv")({}, metas, [None, w], backend=backends.NUMPY)
    native_plan = lookup("Conv")({}, metas, [None, w])  # the selected default: native here
    assert numpy_plan.plan != "native" and not numpy_plan.uses_native
    assert native_plan.plan == "native" and native_plan.uses_native
    never = lookup("Conv")({}, metas, [None, w], backend=backends.Backend(native_plan.backend.lib, "never"))
    assert never.native.kind.startswith("gemm") and native_plan.native.kind.startswith("direct")
