"""Fixtures for the `ge` command line: small ONNX models built with onnx.helper, a CliRunner
wrapper, and the installed console script."""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from ge.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _save(model: onnx.ModelProto, path) -> str:
    model.ir_version = 8  # onnxruntime may lag behind the onnx package's newest IR version
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return str(path)


def conv_relu_add(batch="1") -> onnx.ModelProto:
    """x [N, 3, 8, 8] -> Conv(4, 3x3, pad 1) -> c; y = Relu(c) + c."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B")
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "c"], ["y"], name="add")]
    n = int(batch) if batch.isdigit() else batch
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 4, 8, 8])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def two_inputs() -> onnx.ModelProto:
    """a, b [2, 3] float32 -> s = a + b, p = (a - b) * a: two inputs whose order matters, two outputs."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Sub", ["a", "b"], ["d"], name="sub"),
             helper.make_node("Mul", ["d", "a"], ["p"], name="mul")]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("s", "p")]
    graph = helper.make_graph(nodes, "two", vi, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def embedding() -> onnx.ModelProto:
    """ids [2, 5] int64 -> Gather(table [10, 4]) -> [2, 5, 4]: random int inputs must be valid ids."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    node = helper.make_node("Gather", ["table", "ids"], ["e"], axis=0, name="gather")
    graph = helper.make_graph([node], "emb", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 5, 4])], [table])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("onnx")
    return {"small": _save(conv_relu_add(), d / "small.onnx"),
            "dynamic": _save(conv_relu_add("batch"), d / "dynamic.onnx"),
            "two": _save(two_inputs(), d / "two.onnx"),
            "emb": _save(embedding(), d / "emb.onnx")}


class Ge:
    """`ge ...` through click's CliRunner (stdout and stderr kept apart)."""

    def __init__(self):
        self.runner = CliRunner()

    def __call__(self, *args, ok: bool | None = None):
        result = self.runner.invoke(cli, [str(a) for a in args], prog_name="ge")
        if ok is True:
            assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        return result


@pytest.fixture
def ge() -> Ge:
    return Ge()


@pytest.fixture(scope="session")
def compiled(models, tmp_path_factory) -> dict[str, str]:
    """The small models compiled once: name -> .om path."""
    d = tmp_path_factory.mktemp("om")
    g = Ge()
    out = {}
    for name in ("small", "two", "emb"):
        g("atc", f"--model={models[name]}", "--framework=5", f"--output={d / name}", ok=True)
        out[name] = str(d / f"{name}.om")
    return out


def onnxruntime_run(path: str, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="session")
def samples():
    spec = importlib.util.spec_from_file_location("ge_build_samples", os.path.join(ROOT, "samples", "build_samples.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ge_script() -> str:
    """The installed `ge` console script of this interpreter's environment."""
    here = os.path.join(os.path.dirname(sys.executable), "ge")
    path = here if os.path.exists(here) else shutil.which("ge")
    if not path:
        pytest.skip("the `ge` console script is not installed")
    return path


def one_line_error(result, prefix: str = "error: ") -> str:
    """The stderr of a failed command: exactly one line starting with `prefix`, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(prefix), result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    return lines[0]


@pytest.fixture
def error_line():
    """error_line(result, prefix="error: ") -> the single stderr line (asserts it is one line, no traceback)."""
    return one_line_error


@pytest.fixture
def ort_run():
    """ort_run(onnx_path, feeds) -> onnxruntime's outputs."""
    return onnxruntime_run
