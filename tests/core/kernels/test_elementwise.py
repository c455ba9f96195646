import numpy as np
import pytest

rng = np.random.default_rng(0)


def test_relu(check_op):
    check_op("Relu", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)})


@pytest.mark.parametrize("shape_a,shape_b", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5))])
def test_add_broadcasts(check_op, shape_a, shape_b):
    check_op("Add", {"a": rng.standard_normal(shape_a).astype(np.float32),
                     "b": rng.standard_normal(shape_b).astype(np.float32)})


def test_unknown_op_names_node_and_op():
    from ge.core.errors import UnsupportedOpError
    from ge.core.kernels import lookup
    with pytest.raises(UnsupportedOpError, match="node 'n7': op FancyOp is not supported"):
        lookup("FancyOp", node="n7")
