"""A node of an operator domain ge has no kernels for is refused at compile, naming node and
domain, from the API and the CLI (one line, non-zero exit, no OM written); one no output needs is
not compiled and does not count."""
from __future__ import annotations

import os

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from ge.cli.main import cli
from ge.core import api
from ge.core.model.errors import UnsupportedOpError


def model_with_custom_node(path, used: bool, dynamic: bool = False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n" if dynamic else 2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n" if dynamic else 2, 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n" if dynamic else 2, 4])
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Foo", ["x"], ["z"], name="foo", domain="com.example")]
    g = helper.make_graph(nodes, "g", [x], [y, z] if used else [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_custom_domain_is_refused_naming_node_and_domain(tmp_path):
    path = model_with_custom_node(tmp_path / "m.onnx", True)
    with pytest.raises(UnsupportedOpError, match=r"'foo' \(com\.example::Foo\); domain\(s\) com\.example not "
                                                 r"implemented by ge \(it implements ai\.onnx, ai\.onnx\.ml, "
                                                 r"ai\.onnx\.preview, ai\.onnx\.preview\.training, com\.microsoft"):
        api.atc(path, str(tmp_path / "out" / "m"))
    assert not os.path.exists(tmp_path / "out" / "m.om")


def test_a_custom_node_no_output_needs_is_not_compiled(tmp_path):
    result = api.atc(model_with_custom_node(tmp_path / "m.onnx", False), str(tmp_path / "m"))
    assert [t.op_type for t in result.model.tasks] == ["Relu"]


def test_custom_domain_is_refused_on_the_dynamic_paths(tmp_path):
    path = model_with_custom_node(tmp_path / "m.onnx", True, dynamic=True)
    with pytest.raises(UnsupportedOpError, match=r"domain\(s\) com.example not implemented"):
        api.atc(path, str(tmp_path / "g"), input_shape="x:-1,4", dynamic={"dynamic_batch_size": "1,2"})
    with pytest.raises(UnsupportedOpError, match=r"domain\(s\) com.example not implemented"):
        api.atc(path, str(tmp_path / "r"), input_shape="x:1~4,4")


def test_cli_reports_it_in_one_line(tmp_path):
    path = model_with_custom_node(tmp_path / "m.onnx", True)
    r = CliRunner().invoke(cli, ["atc", f"--model={path}", "--framework=5", f"--output={tmp_path / 'm'}"])
    assert r.exit_code != 0
    lines = [line for line in r.output.splitlines() if "com.example" in line]
    assert len(lines) == 1 and "'foo' (com.example::Foo)" in lines[0] and "Traceback" not in r.output
    assert not os.path.exists(tmp_path / "m.om")
