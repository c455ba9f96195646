"""Models for the ACL client tests (onnx.helper, compiled with ge.core.api.atc in every dynamic mode),
onnxruntime's answers, and user code run as users run it: `python3 -m ais_bench`, and pyACL scripts
(scripts/) with PYTHONPATH=$(ge shim path) or in this process."""
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


def conv_net() -> onnx.ModelProto:
    """x [N,3,H,W] -> Conv 4 -> Relu -> GlobalAveragePool -> Flatten -> Gemm 5 -> (logits, Softmax):
    every dim free, so one ONNX serves every gear, range and shape."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a, n) for a, n in ((rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
                                                         (rng.standard_normal(4).astype(np.float32), "b"),
                                                         (rng.standard_normal((5, 4)).astype(np.float32), "fc"))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    graph = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5]),
                               helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def two_inputs() -> onnx.ModelProto:
    """a, b [2, 3] -> s = a + b, p = (a - b) * a, k = ArgMax(p, axis 1) (int64 [2])."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("Sub", ["a", "b"], ["d"]),
             helper.make_node("Mul", ["d", "a"], ["p"]),
             helper.make_node("ArgMax", ["p"], ["k"], axis=1, keepdims=0)]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "ab"],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("p", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("k", TensorProto.INT64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def positions_pair() -> onnx.ModelProto:
    """a [1,S], b [1,S] (int64 positions) -> a * 2 + Cast(b): one output of the dims' gear."""
    nodes = [helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["a", "two"], ["a2"]),
             helper.make_node("Add", ["a2", "bf"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, "S"]),
                                             helper.make_tensor_value_info("b", TensorProto.INT64, [1, "S"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "S"])],
                              [numpy_helper.from_array(np.array(2, np.float32), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


class Models:
    """The OMs: `om[name]` compiled from the conv net (static 1 and 4, fp16 input, batch gears,
    image-size gears, dims gears, a batch range, unknown dims) and the two-input model."""

    def __init__(self, folder):
        self.folder = folder
        onnx.save(conv_net(), str(folder / "convnet.onnx"))
        onnx.save(two_inputs(), str(folder / "two.onnx"))
        conv = {"static": dict(input_shape="x:1,3,8,8"),
                "batch4": dict(input_shape="x:4,3,8,8"),
                "fp16": dict(input_shape="x:1,3,8,8", input_fp16_nodes="x"),
                "gears": dict(input_shape="x:-1,3,8,8", dynamic_batch_size="1,2,4"),
                "hw": dict(input_shape="x:1,3,-1,-1", dynamic_image_size="8,8;6,10"),
                "dims": dict(input_shape="x:-1,3,-1,8", dynamic_dims="1,8;2,6"),
                "range": dict(input_shape="x:1~4,3,8,8"),
                "unknown": dict(input_shape="x:-1,3,-1,-1")}
        self.om = {name: self._atc("convnet", name, **o) for name, o in conv.items()}
        self.om["two"] = self._atc("two", "two")
        # what the pyACL tests load
        onnx.save(positions_pair(), str(folder / "positions.onnx"))
        self.static, self.gears, self.fp16 = self.om["static"], self.om["gears"], self.om["fp16"]
        self.hw = self._atc("convnet", "hw_acl", input_shape="x:1,3,-1,-1", dynamic_image_size="8,8;16,12",
                            input_format="NCHW")
        self.dims = self._atc("positions", "positions_dims", input_shape="a:1,-1;b:1,-1", dynamic_dims="3,3;5,5")
        self.ranges = self._atc("positions", "positions_range", input_shape="a:1,1~8;b:1,1~8")

    def _atc(self, src: str, name: str, **options) -> str:
        return api.atc(str(self.folder / f"{src}.onnx"), str(self.folder / name), **options).om_path

    @staticmethod
    def conv(x: np.ndarray) -> list[np.ndarray]:
        """onnxruntime's logits and prob for x."""
        return ort_run(conv_net(), {"x": x.astype(np.float32)})

    @staticmethod
    def two(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        return ort_run(two_inputs(), {"a": a, "b": b})

    @staticmethod
    def positions(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        return ort_run(positions_pair(), {"a": a, "b": b})


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Models:
    return Models(tmp_path_factory.mktemp("acl_models"))


def image(shape=(1, 3, 8, 8), seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def ais_bench():
    """`python3 -m ais_bench ARGS` with PYTHONPATH=$(ge shim path), in `cwd`: the CompletedProcess."""
    def run(*args, cwd=None):
        env = dict(os.environ, PYTHONPATH=shim_path())
        return subprocess.run([sys.executable, "-m", "ais_bench", *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
    return run


def run_script(script: str, *args, in_process: bool = False, env: dict | None = None) -> str:
    """Run tests/core/acl/scripts/<script> with `args` as users do: `PYTHONPATH=$(ge shim path) python3
    script.py ...` in a child process (its stdout returned), or in this process with the shim and
    the scripts' folders first on sys.path, their own modules (acllite's `constants` ...) imported
    afresh as in a new process, whatever this process imported by those names before."""
    path = os.path.join(SCRIPTS, script)
    if in_process:
        folders = [SCRIPTS, os.path.join(SCRIPTS, "acllite")]
        own = {f[:-3] for folder in folders for f in os.listdir(folder) if f.endswith(".py")}
        saved = sys.argv, list(sys.path), {name: sys.modules.pop(name) for name in own if name in sys.modules}
        sys.argv = [path, *map(str, args)]
        sys.path[:0] = [shim_path(), *folders]
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            for name in own:
                sys.modules.pop(name, None)
            sys.argv, sys.path[:] = saved[:2]
            sys.modules.update(saved[2])
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
    return ready_datasets(model_id)


def ready_datasets(model_id):
    """A loaded model's desc and datasets on device memory: (model_id, desc, in_ds, out_ds, in_ptr, out_ptr)."""
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
