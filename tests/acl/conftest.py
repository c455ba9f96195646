"""Models for the pyACL tests (onnx.helper, compiled with ge.core.api.atc), onnxruntime's answers,
and a runner for user scripts: in a subprocess with PYTHONPATH=$(ge shim path), or in this process."""
from __future__ import annotations

import os
import runpy
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.acl import pyacl as acl, shim_path

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")


def conv_net(batch, height=8, width=8) -> onnx.ModelProto:
    """x [N,3,H,W] -> Conv 4 -> Relu -> GlobalAveragePool -> Flatten -> Gemm 5 -> (logits, Softmax)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    fc = rng.standard_normal((5, 4)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, height, width])
    graph = helper.make_graph(nodes, "convnet", [x],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 5]),
                               helper.make_tensor_value_info("prob", TensorProto.FLOAT, [batch, 5])],
                              [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (fc, "fc"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def two_inputs(seq) -> onnx.ModelProto:
    """a [1,S], b [1,S] (int64 positions) -> a * 2 + Cast(b): one output of the dims' gear."""
    nodes = [helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["a", "two"], ["a2"]),
             helper.make_node("Add", ["a2", "bf"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, seq]),
                                             helper.make_tensor_value_info("b", TensorProto.INT64, [1, seq])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq])],
                              [numpy_helper.from_array(np.array(2, np.float32), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_run(model: onnx.ModelProto, feeds: dict) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


class Models:
    def __init__(self, folder):
        self.folder = folder
        self.onnx = {}
        onnx.save(conv_net("N"), str(folder / "convnet.onnx"))
        onnx.save(conv_net(1, "H", "W"), str(folder / "convnet_hw.onnx"))
        onnx.save(two_inputs("S"), str(folder / "two.onnx"))
        self.static = self._atc("convnet", "static", input_shape="x:1,3,8,8")
        self.gears = self._atc("convnet", "gears", input_shape="x:-1,3,8,8", dynamic_batch_size="1,2,4")
        self.fp16 = self._atc("convnet", "fp16", input_shape="x:1,3,8,8", input_fp16_nodes="x")
        self.hw = self._atc("convnet_hw", "hw", input_shape="x:1,3,-1,-1", dynamic_image_size="8,8;16,12",
                            input_format="NCHW")
        self.dims = self._atc("two", "dims", input_shape="a:1,-1;b:1,-1", dynamic_dims="3,3;5,5")
        self.ranges = self._atc("two", "ranges", input_shape="a:1,1~8;b:1,1~8")

    def _atc(self, src: str, name: str, **options) -> str:
        return api.atc(str(self.folder / f"{src}.onnx"), str(self.folder / name), **options).om_path

    @staticmethod
    def reference(batch: int, x: np.ndarray) -> list:
        return ort_run(conv_net(batch, *x.shape[2:]), {"x": x})


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return Models(tmp_path_factory.mktemp("acl_models"))


def run_script(script: str, *args, in_process: bool = False, env: dict | None = None) -> str:
    """Run tests/acl/scripts/<script> with `args` as users do: `PYTHONPATH=$(ge shim path) python3
    script.py ...` in a child process (its stdout returned), or in this process with the shim and
    the scripts folder first on sys.path."""
    path = os.path.join(SCRIPTS, script)
    if in_process:
        saved = sys.argv, list(sys.path)
        sys.argv = [path, *map(str, args)]
        sys.path[:0] = [shim_path(), os.path.dirname(path)]
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.argv, sys.path[:] = saved
        return ""
    child_env = dict(os.environ, PYTHONPATH=shim_path(), **(env or {}))
    done = subprocess.run([sys.executable, path, *map(str, args)], env=child_env, capture_output=True, text=True,
                          cwd=os.path.dirname(path))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def device():
    acl.init()
    assert acl.rt.set_device(0) == 0
    yield
    acl.rt.reset_device(0)
    acl.finalize()


def ready_model(path):
    """A loaded model with its datasets on device memory: (model_id, desc, in_ds, out_ds, in_ptr, out_ptr)."""
    model_id, ret = acl.mdl.load_from_file(path)
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    sets = []
    for n, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                       (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        ds, ptrs = acl.mdl.create_dataset(), []
        for i in range(n):
            ptr, ret = acl.rt.malloc(size_of(desc, i), 0)
            assert ret == 0
            assert acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size_of(desc, i)))[1] == 0
            ptrs.append(ptr)
        sets.append((ds, ptrs))
    return model_id, desc, sets[0][0], sets[1][0], sets[0][1], sets[1][1]
