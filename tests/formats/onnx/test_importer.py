import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import FormatError, GraphError, ShapeError
from ge.formats.onnx import load_onnx, parse_input_shape, parse_out_nodes

F = TensorProto.FLOAT


def _conv_relu(make_model, x_shape=("batch", 3, 8, 8), opset=17):
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, {"x": (F, list(x_shape))}, {"y": (F, ["batch", 4, 8, 8])}, {"W": w}, opset=opset), w


def test_load_converts_nodes_attrs_values_initializers(make_model, load):
    model, w = _conv_relu(make_model)
    g = load(model, {"x": [2, 3, 8, 8]})
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]
    assert [n.name for n in g.nodes] == ["Conv_0", "Relu_1"]  # unnamed nodes get unique names
    assert g.nodes[0].attrs == {"pads": [1, 1, 1, 1], "strides": [1, 1]}
    assert g.inputs == ["x"] and g.outputs == ["y"]
    assert g.opset == {"": 17}
    np.testing.assert_array_equal(g.initializers["W"], w)
    assert g.values["x"].shape == (2, 3, 8, 8) and g.values["x"].dtype == np.float32
    assert g.values["c"].shape == (2, 4, 8, 8)  # onnx's inference seeds the values
    assert g.values["y"].shape == (2, 4, 8, 8)  # the declared symbolic output dim is replaced


def test_attribute_kinds(make_model, load):
    t = np.arange(4, dtype=np.int64)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(t, "t")),
             helper.make_node("Cast", ["x"], ["xc"], to=TensorProto.INT64),
             helper.make_node("Add", ["xc", "c"], ["s"]),
             helper.make_node("LeakyRelu", ["x"], ["l"], alpha=0.25),
             helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="nearest",
                              coordinate_transformation_mode="asymmetric")]
    g = load(make_model(nodes, {"x": (F, [1, 1, 1, 4])}, ["s", "l", "r"],
                        {"scales": np.array([1, 1, 2, 2], np.float32)}))
    by = {n.op_type: n for n in g.nodes}
    np.testing.assert_array_equal(by["Constant"].attrs["value"], t)
    assert by["Cast"].attrs["to"] == 7 and isinstance(by["Cast"].attrs["to"], int)
    assert by["LeakyRelu"].attrs["alpha"] == pytest.approx(0.25)
    assert by["Resize"].attrs["mode"] == "nearest"
    assert by["Resize"].inputs == ["x", "", "scales"]


def test_input_that_is_an_initializer_is_an_initializer(make_model, load, tmp_path):
    model, w = _conv_relu(make_model, (1, 3, 8, 8))
    model.graph.input.append(helper.make_tensor_value_info("W", F, [4, 3, 3, 3]))  # old exporters
    g = load(model)
    assert g.inputs == ["x"] and "W" in g.initializers
    with pytest.raises(GraphError, match=r"'W'.*\['x'\]"):
        load(model, {"W": [4, 3, 3, 3]})


def test_symbolic_dims_need_input_shape(make_model, load):
    nodes = [helper.make_node("Add", ["input_ids", "input_ids"], ["y"])]
    model = make_model(nodes, {"input_ids": (TensorProto.INT64, ["batch", "seq"])}, ["y"])
    with pytest.raises(ShapeError) as e:
        load(model)
    msg = str(e.value)
    assert "input 'input_ids'" in msg and "['batch', 'seq']" in msg and "[batch, seq]" in msg
    assert '--input_shape "input_ids:1,1", or keep them dynamic with --input_shape "input_ids:-1,-1"' in msg
    g = load(model, {"input_ids": [1, 128]})
    assert g.values["y"].shape == (1, 128)


def test_input_shape_errors(make_model, load):
    model, _ = _conv_relu(make_model)
    with pytest.raises(GraphError) as e:
        load(model, {"images": [1, 3, 8, 8]})
    assert "'images'" in str(e.value) and "['x']" in str(e.value)
    with pytest.raises(ShapeError) as e:
        load(model, {"x": [1, 3, 8]})
    assert "'x'" in str(e.value) and "[1, 3, 8]" in str(e.value) and "[batch, 3, 8, 8]" in str(e.value)


def test_input_shape_overrides_static_dims_and_keeps_with_minus_one(make_model, load):
    model, _ = _conv_relu(make_model, (1, 3, 8, 8))
    g = load(model, {"x": [4, -1, 8, 8]})
    assert g.values["x"].shape == (4, 3, 8, 8) and g.values["y"].shape == (4, 4, 8, 8)


def test_broken_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(np.random.default_rng(3).bytes(4096))
    with pytest.raises(FormatError, match=r"bad\.onnx: not a valid ONNX model \(.+\)"):
        load_onnx(bad)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(FormatError, match="empty.onnx: not a valid ONNX model"):
        load_onnx(empty)
    with pytest.raises(FormatError, match="missing.onnx"):
        load_onnx(tmp_path / "missing.onnx")


def test_checker_error_names_file(make_model, tmp_path):
    nodes = [helper.make_node("Relu", ["x", "x"], ["y"])]  # Relu takes one input
    model = make_model(nodes, {"x": (F, [2])}, ["y"])
    path = tmp_path / "twice.onnx"
    onnx.save(model, str(path))
    with pytest.raises(FormatError, match=r"twice\.onnx: ONNX checker: .*Relu"):
        load_onnx(path)
    # ge atc checks a plain model itself (core/compile/onnx_check.py): the same file and node, its words
    with pytest.raises(GraphError, match=r"twice\.onnx: node 'Relu_0' \(Relu\): 2 inputs where the op takes at "
                                         r"most 1 \(its schema at opset 14\)$"):
        api.atc(str(path), str(tmp_path / "twice"))
    assert not list(tmp_path.glob("twice.om*"))


@pytest.mark.parametrize("values", [{}, {"value_float": 1.0, "value_int": 1}])
@pytest.mark.parametrize("read", [False, True])
def test_constant_holds_exactly_one_value(make_model, load, tmp_path, values, read):
    """A Constant with no value attribute, or two, is refused naming it, also where no node reads it
    (onnxruntime refuses both), on either of ge atc's paths."""
    nodes = [helper.make_node("Constant", [], ["c"], name="k", **values),
             helper.make_node("Add", ["x", "c" if read else "x"], ["y"], name="add")]
    model = make_model(nodes, {"x": (F, [2])}, ["y"])
    has = " and ".join(values) or "none"
    with pytest.raises(GraphError, match=rf"m\.onnx: node 'k' \(Constant\): a Constant holds exactly one of value, "
                                         rf".*; it has {has}$"):
        load(model)
    onnx.save(model, str(tmp_path / "k.onnx"))
    with pytest.raises(GraphError, match=rf"k\.onnx: node 'k' \(Constant\): .*; it has {has}$"):
        api.atc(str(tmp_path / "k.onnx"), str(tmp_path / "k"))
    assert not list(tmp_path.glob("k.om*"))


def test_old_opset_is_lifted_to_7_and_a_future_one_rejected(make_model, load):
    model, _ = _conv_relu(make_model, (1, 3, 8, 8), opset=6)
    assert load(model).opset[""] == 7
    newest = onnx.defs.onnx_opset_version()
    model, _ = _conv_relu(make_model, (1, 3, 8, 8), opset=newest + 1)
    with pytest.raises(GraphError, match=rf"opset {newest + 1} .*7\.\.{newest}"):
        load(model)


def test_opset_9_model_zoo_style_loads(make_model, load):
    model, _ = _conv_relu(make_model, (1, 3, 8, 8), opset=9)
    assert load(model).opset[""] == 9


def test_subgraph_reads_of_outer_values_are_captured_as_inputs(make_model, load):
    then = helper.make_graph([helper.make_node("Add", ["x", "k"], ["o"])], "then", [],
                             [helper.make_tensor_value_info("o", F, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["z"], ["p"])], "else", [],
                              [helper.make_tensor_value_info("p", F, [2])])
    nodes = [helper.make_node("Relu", ["x"], ["z"]),
             helper.make_node("If", ["cond"], ["y"], name="my_if", then_branch=then, else_branch=other)]
    model = make_model(nodes, {"cond": (TensorProto.BOOL, []), "x": (F, [2])}, {"y": (F, [2])},
                       inits={"k": np.ones(2, np.float32)})
    g = load(model)
    node = g.nodes[1]
    # x and z are captured (inputs of the node and of both branches); the constant k is copied in
    assert node.inputs[0] == "cond" and sorted(node.inputs[1:]) == ["x", "z"]
    for key in ("then_branch", "else_branch"):
        branch = node.attrs[key]
        assert branch.inputs == node.inputs[1:] and branch.captures == 2
    np.testing.assert_array_equal(node.attrs["then_branch"].initializers["k"], np.ones(2, np.float32))


def _save_external(model, tmp_path):
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="w.bin", size_threshold=0)
    return path


def test_external_data_loads(make_model, tmp_path):
    model, w = _conv_relu(make_model, (1, 3, 8, 8))
    path = _save_external(model, tmp_path)
    assert (tmp_path / "w.bin").stat().st_size >= w.nbytes
    g = load_onnx(path)
    np.testing.assert_array_equal(g.initializers["W"], w)
    assert g.initializers["W"].dtype == np.float32


def test_external_data_loads_from_another_cwd(make_model, tmp_path, monkeypatch):
    model, w = _conv_relu(make_model, (1, 3, 8, 8))
    sub = tmp_path / "model_dir"
    sub.mkdir()
    path = _save_external(model, sub)
    monkeypatch.chdir(tmp_path)
    np.testing.assert_array_equal(load_onnx("model_dir/ext.onnx").initializers["W"], w)


def test_missing_external_data(make_model, tmp_path):
    model, _ = _conv_relu(make_model, (1, 3, 8, 8))
    path = _save_external(model, tmp_path)
    (tmp_path / "w.bin").unlink()
    with pytest.raises(FormatError, match=r"w\.bin.*missing"):
        load_onnx(path)


def test_truncated_external_data(make_model, tmp_path):
    model, w = _conv_relu(make_model, (1, 3, 8, 8))
    path = _save_external(model, tmp_path)
    data = (tmp_path / "w.bin").read_bytes()
    (tmp_path / "w.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match=r"w\.bin.*truncated"):
        load_onnx(path)


def test_external_data_outside_model_folder(make_model, tmp_path):
    model, _ = _conv_relu(make_model, (1, 3, 8, 8))
    path = _save_external(model, tmp_path)
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "../w.bin"
    onnx.save(m, str(path))
    with pytest.raises(FormatError, match="inside the model's folder"):
        load_onnx(path)


@pytest.mark.parametrize("location,message", [
    ("loop1", r"tensor 'W': external data location 'loop1': Too many levels of symbolic links"),
    ("folder", r"external data file '.*folder' is missing"),
    ("w.bin/x", r"external data file '.*w\.bin/x' is missing"),
    ("link_out", r"external data location 'link_out' leaves the model's folder")])
def test_external_data_locations_that_are_no_file_of_the_folder(make_model, tmp_path, location, message):
    """Each a FormatError naming the tensor and the location: a loop of links (its OSError, not
    pathlib's RuntimeError), a folder, a path through a file, a link out of the model's folder."""
    model, _ = _conv_relu(make_model, (1, 3, 8, 8))
    folder = tmp_path / "model"
    folder.mkdir()
    path = _save_external(model, folder)
    (folder / "loop1").symlink_to("loop2")
    (folder / "loop2").symlink_to("loop1")
    (folder / "folder").mkdir()
    (folder / "link_out").symlink_to(tmp_path)
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = location
    onnx.save(m, str(path))
    with pytest.raises(FormatError, match=message):
        load_onnx(path)


def test_out_nodes_by_node_index_and_tensor_name(make_model, load):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Split", ["a"], ["s0", "s1"], name="split", axis=0, num_outputs=2),
             helper.make_node("Add", ["s0", "s1"], ["y"], name="add")]
    model = make_model(nodes, {"x": (F, [4, 2])}, ["y"], opset=18)
    assert load(model, out_nodes=["split:1", "r1:0"]).outputs == ["s1", "a"]
    assert load(model, out_nodes=["s0"]).outputs == ["s0"]
    assert load(model, out_nodes=["r1"]).outputs == ["a"]
    with pytest.raises(GraphError, match="'nope:0'"):
        load(model, out_nodes=["nope:0"])
    with pytest.raises(GraphError, match=r"split.*index 2"):
        load(model, out_nodes=["split:2"])


def test_parse_helpers():
    assert parse_input_shape("x:1,3,224,224;mask:1,128") == {"x": [1, 3, 224, 224], "mask": [1, 128]}
    assert parse_input_shape("scalar:") == {"scalar": []}
    with pytest.raises(ShapeError):
        parse_input_shape("x:1,a")
    assert parse_out_nodes("a:0; b:1;") == ["a:0", "b:1"]


def test_allow_dynamic_keeps_symbolic_dims(make_model, tmp_path):
    model, _ = _conv_relu(make_model)
    path = tmp_path / "dyn.onnx"
    onnx.save(model, str(path))
    g = load_onnx(path, allow_dynamic=True)
    assert g.values["x"].shape == ("batch", 3, 8, 8)
    assert g.values["y"].shape[1:] == (4, 8, 8)


def test_untyped_graph_output_is_accepted(make_model, load):
    g = load(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (F, [2, 3])}, ["y"]))
    assert g.values["y"].shape == (2, 3) and g.values["y"].dtype == np.float32


def test_sparse_initializer_is_densified(make_model, tmp_path):
    model = make_model([helper.make_node("Add", ["x", "s"], ["y"])], {"x": (F, [2, 3])}, ["y"])
    values = numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "s")
    indices = numpy_helper.from_array(np.array([1, 5], np.int64), "s_idx")
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [2, 3]))
    path = tmp_path / "sparse.onnx"
    onnx.save(model, str(path))
    g = load_onnx(path)
    np.testing.assert_array_equal(g.initializers["s"], [[0, 5, 0], [0, 0, 7]])


def test_unsorted_graph_is_sorted_and_runs_as_onnxruntime_runs_it(make_model, tmp_path):
    """Graph-surgery tools leave nodes out of order; onnxruntime runs them, so ge does."""
    from ge.core import api
    from tests.conftest import ort_run
    w = np.arange(4, dtype=np.float32).reshape(1, 4)
    nodes = [helper.make_node("Mul", ["s", "W"], ["y"], name="last"),
             helper.make_node("Add", ["r", "r"], ["s"], name="middle"),
             helper.make_node("Relu", ["x"], ["r"], name="first")]
    model = make_model(nodes, {"x": (F, [2, 4])}, {"y": (F, [2, 4])}, {"W": w})
    path = tmp_path / "unsorted.onnx"
    onnx.save(model, str(path))
    graph = load_onnx(path)
    assert [n.name for n in graph.nodes] == ["first", "middle", "last"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    model_id = api.load_from_file(api.atc(str(path), str(tmp_path / "m")).om_path)
    try:
        np.testing.assert_allclose(api.execute(model_id, [x])[0], ort_run(model, {"x": x})[0], rtol=1e-6)
    finally:
        api.unload(model_id)


def test_cycle_is_refused_naming_its_nodes(make_model, tmp_path):
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="p"), helper.make_node("Add", ["a", "x"], ["b"], name="q")]
    path = tmp_path / "cycle.onnx"
    onnx.save(make_model(nodes, {"x": (F, [2])}, {"b": (F, [2])}), str(path))
    with pytest.raises(GraphError, match=r"cycle.onnx: the graph has a cycle through nodes \['p', 'q'\]"):
        load_onnx(path)


def _big_weight_model(make_model, w, opset=17):
    nodes = [helper.make_node("Add", ["x", "W"], ["y"])]
    return make_model(nodes, {"x": (w.dtype, list(w.shape))}, {"y": (w.dtype, list(w.shape))}, {"W": w}, opset=opset)


def test_big_weights_are_read_in_place_from_the_file(make_model, load):
    rng = np.random.default_rng(5)
    for w in (rng.standard_normal((80, 70)).astype(np.float32), rng.integers(-9, 9, 5000).astype(np.int64),
              rng.standard_normal(4100).astype(np.float16), rng.integers(0, 2, 4097).astype(bool)):
        g = load(_big_weight_model(make_model, w))
        a = g.initializers["W"]
        assert a.dtype == w.dtype and not a.flags.writeable
        np.testing.assert_array_equal(a, w)


def test_big_weight_with_bad_raw_size_fails_as_before(make_model, tmp_path):
    model = _big_weight_model(make_model, np.ones((80, 70), np.float32))
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]  # one element short
    onnx.save(model, str(tmp_path / "short.onnx"))
    with pytest.raises(FormatError, match=r"short\.onnx: ONNX checker: .*name: W.*too small"):
        load_onnx(tmp_path / "short.onnx")
    model.graph.initializer[0].raw_data += bytes(8)  # one element too many: the checker lets it pass
    onnx.save(model, str(tmp_path / "long.onnx"))
    with pytest.raises(FormatError, match=r"long\.onnx: initializer: tensor 'W' cannot be read"):
        load_onnx(tmp_path / "long.onnx")


def test_checker_sees_a_model_with_big_weights_whole(make_model, tmp_path):
    w = np.ones((80, 70), np.float32)
    nodes = [helper.make_node("Relu", ["W", "W"], ["y"])]  # Relu takes one input
    onnx.save(make_model(nodes, {}, ["y"], {"W": w}), str(tmp_path / "bad.onnx"))
    with pytest.raises(FormatError, match=r"bad\.onnx: ONNX checker: .*Relu"):
        load_onnx(tmp_path / "bad.onnx")
    model = _big_weight_model(make_model, w)
    model.graph.input.append(helper.make_tensor_value_info("W", F, [80, 70]))  # an initializer also an input
    g = load_onnx_saved(model, tmp_path / "both.onnx")
    assert g.inputs == ["x"] and g.initializers["W"].shape == (80, 70)


def test_big_packed_and_typed_field_weights_load_as_before(make_model, load):
    w4 = np.arange(5000, dtype=np.int64) % 7 - 3
    t = helper.make_tensor("W", TensorProto.INT4, [5000], w4.tolist())  # packed: 2 per byte
    nodes = [helper.make_node("Cast", ["W"], ["y"], to=TensorProto.FLOAT)]
    m = make_model(nodes, {}, {"y": (F, [5000])})
    m.graph.initializer.append(t)
    np.testing.assert_array_equal(load(m).initializers["W"].astype(np.int64), w4)
    typed = helper.make_tensor("W", F, [80, 70], np.ones(5600, np.float32).tolist())  # float_data, not raw
    model = _big_weight_model(make_model, np.zeros((80, 70), np.float32))
    model.graph.initializer[0].CopyFrom(typed)
    np.testing.assert_array_equal(load(model).initializers["W"], np.ones((80, 70), np.float32))


def load_onnx_saved(model, path):
    onnx.save(model, str(path))
    return load_onnx(path)


def test_big_weights_go_from_the_onnx_file_into_the_om(make_model, tmp_path):
    """Weights read in place (aligned or not in the ONNX file), streamed into the OM: the result's
    weights are the OM's mapped bytes, and both the OM and the in-memory result run as onnxruntime."""
    from ge.core import api
    from ge.core.runtime.model_manager import ModelManager
    from ge.formats.om import read_om
    from tests.conftest import ort_run
    rng = np.random.default_rng(7)
    inits = {"W": rng.standard_normal((64, 96)).astype(np.float32), "B": rng.standard_normal(96).astype(np.float32),
             "V": rng.standard_normal((96, 80)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["a"]),
             helper.make_node("MatMul", ["a", "V"], ["y"])]
    model = make_model(nodes, {"x": (F, [2, 64])}, {"y": (F, [2, 80])}, inits)
    model.producer_name = "x"  # places V at a multiple of 4 in the file, W not: both read in place
    onnx.save(model, str(tmp_path / "m.onnx"))
    weights = load_onnx(tmp_path / "m.onnx").initializers
    assert weights["V"].flags.aligned and not weights["W"].flags.aligned
    assert not weights["V"].flags.owndata and not weights["W"].flags.owndata  # views of the mapped file
    np.testing.assert_array_equal(weights["W"], inits["W"])
    result = api.atc(str(tmp_path / "m.onnx"), str(tmp_path / "m"))
    assert result.model.weight_data.readonly
    assert bytes(result.model.weight_data) == bytes(read_om(result.om_path).weight_data)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    expected = ort_run(model, {"x": x})[0]
    model_id = api.load_from_file(result.om_path)
    try:
        np.testing.assert_allclose(api.execute(model_id, [x])[0], expected, rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)
    manager = ModelManager()
    in_memory = manager.load(result.model)
    np.testing.assert_allclose(manager.execute(in_memory, [x])[0], expected, rtol=1e-5, atol=1e-5)


def test_a_gather_from_an_unaligned_embedding_table(make_model, tmp_path):
    """An embedding table left unaligned in the ONNX file (a view of the map): Gather's shape is
    inferred from shapes, and the OM runs as onnxruntime."""
    from ge.core import api
    from tests.conftest import ort_run
    rng = np.random.default_rng(3)
    table = rng.standard_normal((500, 48)).astype(np.float32)
    model = make_model([helper.make_node("Gather", ["E", "ids"], ["y"], axis=0)], {"ids": (TensorProto.INT64, [2, 5])},
                       {"y": (F, [2, 5, 48])}, {"E": table})
    for producer in ("", "x", "xy", "xyz"):  # one of them leaves E's bytes unaligned in the file
        model.producer_name = producer
        onnx.save(model, str(tmp_path / "m.onnx"))
        if not load_onnx(tmp_path / "m.onnx").initializers["E"].flags.aligned:
            break
    assert not load_onnx(tmp_path / "m.onnx").initializers["E"].flags.aligned
    ids = rng.integers(-500, 500, (2, 5)).astype(np.int64)
    model_id = api.load_from_file(api.atc(str(tmp_path / "m.onnx"), str(tmp_path / "m")).om_path)
    try:
        np.testing.assert_array_equal(api.execute(model_id, [ids])[0], ort_run(model, {"ids": ids})[0])
    finally:
        api.unload(model_id)


def test_ir3_model_with_big_weights_loads_with_or_without_listed_inputs(make_model, tmp_path):
    w = np.arange(80 * 70, dtype=np.float32).reshape(80, 70)
    model = _big_weight_model(make_model, w)
    model.ir_version = 3  # IR 3 wants every initializer among the graph inputs; onnxruntime (and ge) do not
    g = load_onnx_saved(model, tmp_path / "not_input.onnx")
    np.testing.assert_array_equal(g.initializers["W"], w)
    model.graph.input.append(helper.make_tensor_value_info("W", F, [80, 70]))
    g = load_onnx_saved(model, tmp_path / "input.onnx")
    assert g.inputs == ["x"]
    np.testing.assert_array_equal(g.initializers["W"], w)


def test_an_input_whose_initializer_has_another_type_is_refused(tmp_path):
    """An initializer is its graph input's default value: of another element type than the input
    declares, onnxruntime refuses the model, and so does ge (it would run on the initializer's)."""
    w = numpy_helper.from_array(np.ones((2, 4), np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", F, [2, 4]), helper.make_tensor_value_info("w", TensorProto.INT64, [2, 4])],
                          [helper.make_tensor_value_info("y", F, [2, 4])], [w])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(GraphError, match=r"m\.onnx: graph input 'w' is declared INT64, its initializer \(the input's "
                                         r"default value\) FLOAT$"):
        api.atc(path, str(tmp_path / "out"))
    assert not (tmp_path / "out.om").exists()
