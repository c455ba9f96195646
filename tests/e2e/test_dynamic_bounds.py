"""Partial shapes, the partitioner's merges and range plans that never under-plan, on valid data
of several shapes, each result equal to onnxruntime's, on cpu and sim."""
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h

from ge.cli.main import cli as main
from ge.core import api

from .conftest import onnxruntime_outputs


def _save(tmp_path, name, nodes, inputs, outputs, inits=()) -> str:
    graph = h.make_graph(nodes, name, inputs, outputs, list(inits))
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def _x(n=None):
    return h.make_tensor_value_info("x", T.FLOAT, [n or "N", 4])


def _run_all(path, om_path, device, feeds_list, rtol=1e-5):
    """Every feed through one loaded model; each result equals onnxruntime's; the stats of each run."""
    model_id = api.load_from_file(om_path, device)
    stats = []
    try:
        ctx = api.model(model_id).default_context
        for feeds in feeds_list:
            got = api.execute(model_id, feeds)
            for g, e in zip(got, onnxruntime_outputs(path, feeds)):
                assert g.shape == e.shape and g.dtype == e.dtype
                np.testing.assert_allclose(g, e, rtol=rtol)
            stats.append(dict(ctx.stats))
    finally:
        api.unload(model_id)
    return stats


def _sparse(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)
    x[x < 0] = 0  # about half the elements: NonZero's output varies with the data, not only with n
    return x


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_nonzero_range_plan_is_an_upper_bound(tmp_path, device):
    """x:1~8,4: NonZero's output is planned at its bound [2, 32] (not at a zeros run's [2, 0]), so
    every valid input runs from the one arena, nothing allocated, all ones included."""
    path = _save(tmp_path, "nz", [h.make_node("NonZero", ["x"], ["y"], name="nz")], [_x()],
                 [h.make_tensor_value_info("y", T.INT64, None)])
    result = api.atc(path, str(tmp_path / "nz"), input_shape="x:1~8,4")
    assert result.model.attrs["capacities"]["y"] == 2 * 32 * 8 and not result.model.attrs["growable"]
    feeds = [{"x": np.ones((2, 4), np.float32)}, {"x": _sparse(8, 1)}, {"x": np.ones((8, 4), np.float32)},
             {"x": np.zeros((1, 4), np.float32)}, {"x": _sparse(5, 2)}]
    stats = _run_all(path, result.om_path, device, feeds)
    assert all(st["allocations"] == 0 and st["reallocs"] == 0 for st in stats)


def _reduce_tail(tmp_path):
    """x -> NonZero -> ReduceSum(keepdims=0): a scalar whatever the count; then a static tail."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("ReduceSum", ["nz"], ["total"], keepdims=0, name="sum"),
             h.make_node("Cast", ["total"], ["f"], to=T.FLOAT, name="cast"),
             h.make_node("Mul", ["f", "w"], ["m"], name="mul"),
             h.make_node("Add", ["m", "b"], ["a"], name="add"),
             h.make_node("Sin", ["a"], ["t"], name="sin"),
             h.make_node("ReduceMean", ["t"], ["y"], keepdims=0, name="mean")]
    inits = [onnx.numpy_helper.from_array(np.linspace(-0.1, 0.1, 6, dtype=np.float32), "w"),
             onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32) / 7, "b")]
    return _save(tmp_path, "tail", nodes, [_x()], [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


@pytest.mark.parametrize("spec", ["x:-1,4", "x:1~8,4"])
@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_static_tail_after_nonzero_and_reduce_sum_is_a_known_submodel(tmp_path, spec, device):
    """ReduceSum(keepdims=0) over all axes gives a scalar even after NonZero: what follows is KNOWN
    (one static submodel), launched once per run."""
    path = _reduce_tail(tmp_path)
    result = api.atc(path, str(tmp_path / "tail"), input_shape=spec)
    clusters = [(c.kind, list(c.nodes)) for c in result.model.clusters]
    assert clusters == [("UNKNOWN", ["nonzero", "sum"]), ("KNOWN", ["cast", "mul", "add", "sin", "mean"])]
    assert len(result.model.submodels) == 1 and result.model.submodels[0].inputs[0].shape == ()
    stats = _run_all(path, result.om_path, device, [{"x": _sparse(n, n)} for n in (3, 8, 1, 5)])
    assert all(st["submodel_launches"] == 1 for st in stats)


def test_inspect_shows_the_known_tail_and_one_unknown_cluster(tmp_path):
    path = _reduce_tail(tmp_path)
    om = str(tmp_path / "tail")
    api.atc(path, om, input_shape="x:-1,4")
    r = CliRunner().invoke(main, ["inspect", om + ".om"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if "UNKNOWN" in line or "KNOWN" in line]
    assert len(rows) == 2 and "nonzero, sum" in rows[0] and "cast, mul, add, sin" in rows[1]
    assert "data-dependent" in rows[0] or "unknown dims" in rows[0]


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_connected_unknown_nodes_form_one_cluster(tmp_path, device):
    """NonZero -> Transpose -> Cast -> ReduceMax(axis 1) -> Mul: every node's shape follows the
    count; they are connected, so they are ONE UNKNOWN cluster (not one per node), run in order."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["tr"], perm=[1, 0], name="transpose"),
             h.make_node("Cast", ["tr"], ["f"], to=T.FLOAT, name="cast"),
             h.make_node("ReduceMax", ["f"], ["mx"], axes=[1], keepdims=0, name="max"),
             h.make_node("Mul", ["mx", "mx"], ["y"], name="square")]
    path = _save(tmp_path, "chain", nodes, [_x()], [h.make_tensor_value_info("y", T.FLOAT, None)])
    result = api.atc(path, str(tmp_path / "chain"), input_shape="x:-1,4")
    assert [(c.kind, list(c.nodes)) for c in result.model.clusters] == [
        ("UNKNOWN", ["nonzero", "transpose", "cast", "max", "square"])]
    data = api.inspect(result.om_path)["dynamic"]["clusters"]
    assert len(data) == 1 and len(data[0]["nodes"]) == 5
    _run_all(path, result.om_path, device, [{"x": _sparse(n, n)} for n in (4, 7, 2, 4)])


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_unbounded_tensor_grows_with_counted_reallocations(tmp_path, device):
    """ConstantOfShape sized by the input's largest value has no finite bound in x:1~8,4: that
    tensor (and only it) is growable; it grows when a run needs more, each reallocation counted,
    never an error; the bounded tensors stay in the arena."""
    nodes = [h.make_node("ReduceMax", ["x"], ["m"], keepdims=1, name="max"),
             h.make_node("Cast", ["m"], ["mi"], to=T.INT64, name="cast"),
             h.make_node("Reshape", ["mi", "one"], ["shape"], name="reshape"),
             h.make_node("ConstantOfShape", ["shape"], ["y"], value=h.make_tensor("v", T.FLOAT, [1], [1.5]),
                         name="fill")]
    path = _save(tmp_path, "grow", nodes, [_x()], [h.make_tensor_value_info("y", T.FLOAT, None)],
                 [onnx.numpy_helper.from_array(np.array([1], np.int64), "one")])
    result = api.atc(path, str(tmp_path / "grow"), input_shape="x:1~8,4")
    attrs = result.model.attrs
    assert "y" in attrs["growable"] and "y" not in attrs["capacities"] and attrs["capacities"]["x"] == 8 * 4 * 4
    sizes = (3, 10, 5, 40, 40)
    feeds = [{"x": np.full((1 + k % 8, 4), v, np.float32)} for k, v in enumerate(sizes)]
    stats = _run_all(path, result.om_path, device, feeds)
    assert [st["reallocs"] for st in stats] == [0, 1, 0, 1, 0]  # grows at 10 and at 40 floats, never shrinks
    assert [st["allocations"] for st in stats] == [1, 1, 0, 1, 0]
    planned = api.inspect(result.om_path)["dynamic"]["planned_capacity"]
    assert "y" in planned["growable"]


def _int(name, values):
    return onnx.numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_shape_arithmetic_and_computed_sizes_are_bounded_by_the_range(tmp_path, device):
    """Shape -> Gather -> Range / ConstantOfShape (value bounds of shape arithmetic), TopK with a
    computed k and Slice with computed ends (never larger than their input): every tensor has a
    finite bound, so every run inside x:1~8,4 allocates nothing."""
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="rows"),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT, name="cast"),
             h.make_node("Unsqueeze", ["rf", "axis1"], ["ru"], name="unsqueeze"),
             h.make_node("ConstantOfShape", ["s"], ["c"], value=h.make_tensor("v", T.FLOAT, [1], [0.5]), name="fill"),
             h.make_node("Add", ["x", "c"], ["xc"], name="add"),
             h.make_node("Mul", ["xc", "ru"], ["y"], name="mul"),
             h.make_node("Reshape", ["n", "axis1"], ["k"], name="k"),
             h.make_node("TopK", ["x", "k"], ["top", "idx"], axis=0, name="topk"),
             h.make_node("Div", ["k", "two"], ["half"], name="half"),
             h.make_node("Slice", ["x", "zero1", "half", "zero1"], ["head"], name="slice")]
    inits = [_int("zero", 0), _int("one", 1), _int("axis1", [1]), _int("two", 2), _int("zero1", [0])]
    outs = [h.make_tensor_value_info(n, t, None) for n, t in (("y", T.FLOAT), ("top", T.FLOAT), ("idx", T.INT64),
                                                               ("head", T.FLOAT))]
    path = _save(tmp_path, "arith", nodes, [_x()], outs, inits)
    result = api.atc(path, str(tmp_path / "arith"), input_shape="x:1~8,4")
    caps = result.model.attrs["capacities"]
    assert result.model.attrs["growable"] == []
    assert caps["r"] == 8 * 8 and caps["c"] == caps["y"] == caps["top"] == caps["head"] == 8 * 4 * 4
    feeds = [{"x": np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)} for n in (3, 8, 1, 6)]
    stats = _run_all(path, result.om_path, device, feeds)
    assert all(st["allocations"] == 0 and st["reallocs"] == 0 for st in stats)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_non_max_suppression_is_bounded_by_max_output_boxes(tmp_path, device):
    """NMS over boxes:1,1~16,4 keeps at most max_output_boxes_per_class=3 per class: [3, 3] planned."""
    nodes = [h.make_node("NonMaxSuppression", ["boxes", "scores", "cap", "iou"], ["y"], name="nms")]
    inputs = [h.make_tensor_value_info("boxes", T.FLOAT, [1, "N", 4]),
              h.make_tensor_value_info("scores", T.FLOAT, [1, 1, "N"])]
    inits = [_int("cap", [3]), onnx.numpy_helper.from_array(np.array([0.3], np.float32), "iou")]
    path = _save(tmp_path, "nms", nodes, inputs, [h.make_tensor_value_info("y", T.INT64, None)], inits)
    result = api.atc(path, str(tmp_path / "nms"), input_shape="boxes:1,1~16,4;scores:1,1,1~16")
    assert result.model.attrs["capacities"]["y"] == 3 * 3 * 8
    feeds = []
    for n in (16, 2, 9, 1):
        rng = np.random.default_rng(n)
        corner = rng.uniform(0, 10, (1, n, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + rng.uniform(1, 4, (1, n, 2)).astype(np.float32)], axis=2)
        feeds.append({"boxes": boxes, "scores": rng.uniform(0, 1, (1, 1, n)).astype(np.float32)})
    stats = _run_all(path, result.om_path, device, feeds)
    assert all(st["allocations"] == 0 for st in stats)
