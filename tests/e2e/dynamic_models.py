"""Small dynamic models for the runtime tests (gears, ranges, unknown dims, data-dependent shapes),
each with weights large enough to leave the OM with --external_weight, and the ATC options of each
kind."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((16, 64)).astype(np.float32)  # 4 KiB
W2 = RNG.standard_normal((64, 8)).astype(np.float32)  # 2 KiB
TABLE = RNG.standard_normal((8, 64)).astype(np.float32)  # 2 KiB, read by an unknown-shape node


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "dyn", inputs, outputs, [numpy_helper.from_array(a, k) for k, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def mlp() -> onnx.ModelProto:
    """x [n, 16] -> MatMul W1, Relu, MatMul W2 and MatMul W2' (the same bytes under another name), Add."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], "mm1"), helper.make_node("Relu", ["h"], ["r"], "relu"),
             helper.make_node("MatMul", ["r", "W2"], ["y"], "mm2"), helper.make_node("MatMul", ["r", "W2_copy"], ["z"], "mm3"),
             helper.make_node("Add", ["y", "z"], ["out"], "add")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 8])],
                  {"W1": W1, "W2": W2, "W2_copy": W2.copy()})


def data_dependent() -> onnx.ModelProto:
    """x [4, 16] -> a static MLP (a submodel reading W1, W2) -> NonZero -> Gather(TABLE) (an
    unknown-shape node reading a large weight) -> [2, k, 64]."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], "mm1"), helper.make_node("Relu", ["h"], ["r"], "relu"),
             helper.make_node("MatMul", ["r", "W2"], ["m"], "mm2"), helper.make_node("Relu", ["m"], ["s"], "relu2"),
             helper.make_node("NonZero", ["s"], ["nz"], "nonzero"),
             helper.make_node("Gather", ["TABLE", "nz"], ["out"], "gather", axis=0)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, "k", 64])], {"W1": W1, "W2": W2, "TABLE": TABLE})


#: kind -> (model, atc options, input batch sizes a test runs)
KINDS = {
    "static": (mlp, {"input_shape": "x:4,16"}, [4, 4]),
    "gears": (mlp, {"input_shape": "x:-1,16", "dynamic_batch_size": "1,2,4"}, [1, 4, 2, 4]),
    "range": (mlp, {"input_shape": "x:1~8,16"}, [1, 8, 3, 8]),
    "hybrid": (mlp, {"input_shape": "x:-1,16"}, [1, 11, 5, 11]),
    "data_dependent": (data_dependent, {"static_model_ops_lower_limit": 1}, [4, 4]),
}


def feeds(batch: int, seed: int = 0) -> dict:
    return {"x": np.random.default_rng(seed + batch).standard_normal((batch, 16)).astype(np.float32)}
