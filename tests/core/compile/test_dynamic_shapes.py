"""Shape inference of dynamic graphs keeps partial shapes: known rank, the dims that are known,
symbolic or unknown ones; outputs whose shape the op decides (Shape, Size, a reduction to a
scalar) are static after a data-dependent node, and their readers are known again."""
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from ge.core.compile.dynamic_shapes import infer_dynamic
from ge.formats.onnx.importer import load_onnx


def test_partial_shapes_after_nonzero(tmp_path):
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["tr"], perm=[1, 0], name="transpose"),
             h.make_node("Shape", ["nz"], ["shape"], name="shape"),
             h.make_node("Size", ["nz"], ["size"], name="size"),
             h.make_node("ReduceSum", ["nz"], ["total"], keepdims=0, name="sum"),
             h.make_node("Mul", ["size", "total"], ["y"], name="mul")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                         [h.make_tensor_value_info(n, T.INT64, None) for n in ("tr", "shape", "y")])
    path = str(tmp_path / "m.onnx")
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    g = load_onnx(path, {"x": [-1, 4]}, None, allow_dynamic=True)
    unknown = infer_dynamic(g)
    nz, tr = g.value("nz").shape, g.value("tr").shape
    assert len(nz) == 2 and nz[0] == 2 and not isinstance(nz[1], int)  # rank and the known dim kept
    assert len(tr) == 2 and tr[1] == 2 and not isinstance(tr[0], int)
    assert g.value("shape").shape == (2,) and g.value("size").shape == () and g.value("total").shape == ()
    assert set(unknown) == {"nonzero", "transpose", "shape", "size", "sum"}  # each reads an unknown shape
    assert "mul" not in unknown and g.value("y").shape == ()  # reads only static outputs: known
    assert unknown["sum"] == "input 'nz' has unknown dims [2, ?]"
