"""complete_attributes: each node gets its schema's defaults at the node's opset."""
import numpy as np
from onnx import TensorProto, helper

from ge.core.passes import complete_attributes, optimize


def graph(load, node, opset):
    m = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
                          opset_imports=[helper.make_opsetid("", opset)])
    return load(m)


def test_defaults_follow_the_opset(load):
    g = graph(load, helper.make_node("Softmax", ["x"], ["y"]), 11)
    complete_attributes(g)
    assert g.nodes[0].attrs == {"axis": 1}  # Softmax-1..12 normalizes over the flattened tail from axis 1
    g = graph(load, helper.make_node("Softmax", ["x"], ["y"]), 13)
    complete_attributes(g)
    assert g.nodes[0].attrs == {"axis": -1}  # Softmax-13: the last axis


def test_given_attributes_are_kept_and_types_are_onnx_values(load):
    g = graph(load, helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5), 17)
    stats = {}
    complete_attributes(g, stats)
    assert g.nodes[0].attrs == {"alpha": 0.5} and stats == {"filled": 0}
    g = graph(load, helper.make_node("LeakyRelu", ["x"], ["y"]), 17)
    complete_attributes(g)
    assert g.nodes[0].attrs["alpha"] == np.float32(0.01)  # the schema's float, as onnxruntime reads it


def test_the_pipeline_states_every_attribute(load):
    g = graph(load, helper.make_node("Gelu", ["x"], ["y"]), 20)
    report = optimize(g)
    assert g.nodes[0].attrs == {"approximate": "none"} and report["passes"]["complete_attributes"]["filled"] == 1
