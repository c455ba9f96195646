"""Sequence and optional values through the dynamic path: models built with onnx.helper, compiled
with ge atc, run on cpu and sim, compared with onnxruntime (sequences come back as lists of arrays,
an empty optional as None)."""
import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.om import om_bytes, read_om
from ge.formats.om.decode import Bad
from ge.formats.om.root import decode_root, encode_root

from .conftest import onnxruntime_outputs, run_om

F, I64 = T.FLOAT, T.INT64
DEVICES = ["cpu", "sim"]


def seq_vi(name, elem):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def opt_vi(name, elem, shape):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, shape)))


def model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "seq", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def compile_model(m, tmp_path, **atc):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return path, api.atc(path, str(tmp_path / "m"), **atc)


def assert_same(got, expected):
    if expected is None:
        assert got is None
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
    else:
        got = np.asarray(got)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def check(m, feeds_list, tmp_path, **atc):
    path, result = compile_model(m, tmp_path, **atc)
    for device in DEVICES:
        for feeds in feeds_list:
            got = run_om(result.om_path, device, feeds)
            assert_same(got, onnxruntime_outputs(path, feeds))
    return result


def test_split_to_sequence_then_at_concat_length(tmp_path):
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1),
             helper.make_node("SequenceAt", ["s", "k"], ["at"]),
             helper.make_node("ConcatFromSequence", ["s"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("Relu", ["at"], ["relu"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, [2, 6]), helper.make_tensor_value_info("split", I64, ["parts"]),
                      helper.make_tensor_value_info("k", I64, [])],
              [helper.make_tensor_value_info(n, e, None) for n, e in (("relu", F), ("stacked", F), ("n", I64))]
              + [seq_vi("s", F)])
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    result = check(m, [{"x": x, "split": np.array([2, 2, 2], np.int64), "k": np.array(-1, np.int64)},
                       {"x": x, "split": np.array([3, 3], np.int64), "k": np.array(1, np.int64)}], tmp_path,
                   input_shape={"split": [-1]})
    assert result.model.mode == "hybrid"
    om = read_om(result.om_path)
    assert [d.kind for d in om.outputs] == ["tensor", "tensor", "tensor", "sequence"]
    # pieces of different sizes: ConcatFromSequence along a new axis must refuse, naming the node
    with pytest.raises(GeError, match=r"node 'ConcatFromSequence_2' \(ConcatFromSequence\).*do not line up"):
        run_om(result.om_path, "cpu", {"x": x, "split": np.array([1, 2, 3], np.int64), "k": np.array(0, np.int64)})
    with pytest.raises(GeError, match=r"SequenceAt.*position 3 is out of range \[-3, 2\]"):
        run_om(result.om_path, "cpu", {"x": x, "split": np.array([2, 2, 2], np.int64), "k": np.array(3, np.int64)})


def test_a_loop_accumulates_a_sequence(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["scaled"]),
         helper.make_node("SequenceInsert", ["seq_in", "scaled"], ["seq_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", T.BOOL, []), seq_vi("seq_in", F)],
        [helper.make_tensor_value_info("c_out", T.BOOL, []), seq_vi("seq_out", F)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["all"], axis=0),
             helper.make_node("SequenceErase", ["seq"], ["shorter"]),
             helper.make_node("SequenceLength", ["shorter"], ["n"])]
    m = model(nodes, [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("x", F, [2, 3])],
              [seq_vi("seq", F), helper.make_tensor_value_info("all", F, None), helper.make_tensor_value_info("n", I64, None)])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(m, [{"M": np.array(4, np.int64), "x": x}, {"M": np.array(1, np.int64), "x": x}], tmp_path)


def test_sequence_inputs_and_insert_construct(tmp_path):
    nodes = [helper.make_node("SequenceInsert", ["s", "x", "pos"], ["s2"]),
             helper.make_node("SequenceConstruct", ["x", "x"], ["pair"]),
             helper.make_node("ConcatFromSequence", ["pair"], ["cat"], axis=-1)]
    m = model(nodes, [seq_vi("s", F), helper.make_tensor_value_info("x", F, [2, 2]),
                      helper.make_tensor_value_info("pos", I64, [])],
              [seq_vi("s2", F), helper.make_tensor_value_info("cat", F, None)])
    x = np.ones((2, 2), np.float32)
    items = [np.full((2, 2), 2, np.float32), np.full((1, 2), 3, np.float32)]
    path, result = compile_model(m, tmp_path)
    for device in DEVICES:
        for pos in (0, 1, -1, 2):
            feeds = {"s": items, "x": x, "pos": np.array(pos, np.int64)}
            assert_same(run_om(result.om_path, device, feeds), onnxruntime_outputs(path, feeds))
    with pytest.raises(GeError, match=r"input 's' is a sequence: give a list of float32 arrays, got ndarray"):
        run_om(result.om_path, "cpu", {"s": x, "x": x, "pos": np.array(0, np.int64)})
    with pytest.raises(GeError, match=r"input 's': a sequence of float32 tensors, got one of int64"):
        run_om(result.om_path, "cpu", {"s": [np.zeros(2, np.int64)], "x": x, "pos": np.array(0, np.int64)})


def test_optional_round_trips(tmp_path):
    nodes = [helper.make_node("Optional", ["x"], ["opt"]),
             helper.make_node("OptionalHasElement", ["opt"], ["has"]),
             helper.make_node("OptionalGetElement", ["opt"], ["back"]),
             helper.make_node("Add", ["back", "x"], ["twice"]),
             helper.make_node("OptionalHasElement", ["maybe"], ["given"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, [3]), opt_vi("maybe", F, [3])],
              [helper.make_tensor_value_info("has", T.BOOL, None), helper.make_tensor_value_info("twice", F, None),
               helper.make_tensor_value_info("given", T.BOOL, None)])
    x = np.array([1, 2, 3], np.float32)
    path, result = compile_model(m, tmp_path)
    for device in DEVICES:
        feeds = {"x": x, "maybe": x}
        assert_same(run_om(result.om_path, device, feeds), onnxruntime_outputs(path, feeds))
        has, twice, given = run_om(result.om_path, device, {"x": x, "maybe": None})  # an empty optional
        assert bool(has) and not bool(given)
        np.testing.assert_array_equal(twice, 2 * x)


def test_an_empty_optional_output_and_get_element_of_nothing(tmp_path):
    nodes = [helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(F, [2])),
             helper.make_node("OptionalGetElement", ["maybe"], ["got"])]
    m = model(nodes, [opt_vi("maybe", F, [2])],
              [opt_vi("none", F, [2]), helper.make_tensor_value_info("got", F, None)])
    path, result = compile_model(m, tmp_path)
    for device in DEVICES:
        none, got = run_om(result.om_path, device, {"maybe": np.array([4, 5], np.float32)})
        assert none is None
        np.testing.assert_array_equal(got, [4, 5])
    with pytest.raises(GeError, match=r"node 'OptionalGetElement_1' \(OptionalGetElement\): the optional input is empty"):
        run_om(result.om_path, "cpu", {"maybe": None})
    assert [d.kind for d in read_om(result.om_path).inputs] == ["optional"]


def test_the_om_reader_checks_value_kinds(tmp_path):
    m = model([helper.make_node("SequenceLength", ["s"], ["n"])], [seq_vi("s", F)],
              [helper.make_tensor_value_info("n", I64, None)])
    _, result = compile_model(m, tmp_path)
    dyn = read_om(result.om_path)
    md, ti = encode_root(dyn)
    assert md["inputs"][0]["kind"] == "sequence" and "kind" not in md["outputs"][0]
    md["inputs"][0]["kind"] = "list"
    with pytest.raises(Bad, match=r"root input 's': kind 'list' is not one of tensor, sequence"):
        decode_root(msgpack.unpackb(msgpack.packb(md)), ti, len(dyn.weight_data))
    md["inputs"][0]["kind"] = "sequence"
    md["inputs"][0]["shape"] = [2]
    with pytest.raises(Bad, match=r"root input 's': a sequence has no shape"):
        decode_root(md, ti, len(dyn.weight_data))
    assert read_om(om_bytes(dyn)).inputs == dyn.inputs


def test_ge_inspect_shows_kinds_and_ge_run_writes_sequences_as_pb_only(tmp_path):
    from click.testing import CliRunner

    from ge.cli.main import cli
    m = model([helper.make_node("SplitToSequence", ["x"], ["s"]), helper.make_node("SequenceLength", ["s"], ["n"])],
              [helper.make_tensor_value_info("x", F, [4, 2])],
              [helper.make_tensor_value_info("n", I64, None), seq_vi("s", F)])
    _, result = compile_model(m, tmp_path)
    runner = CliRunner()
    shown = runner.invoke(cli, ["inspect", result.om_path])
    assert shown.exit_code == 0, shown.output
    assert "sequence(float32)" in shown.output and "sequence and optional values have no static layout" in shown.output
    out = tmp_path / "out"
    ran = runner.invoke(cli, ["run", "--model", result.om_path, "--output", str(out)])
    assert ran.exit_code != 0 and not out.exists()
    assert "output 1 is a sequence, which has a file form only as ONNX's SequenceProto: use --outfmt PB" in ran.output


def test_a_loop_carries_an_optional_sequence_that_starts_empty(tmp_path):
    """loop16_seq_none's shape: the carried value is an empty optional, then a sequence; each
    iteration sees the value the last one left (an empty optional never keeps a stale sequence)."""
    opt_seq = helper.make_optional_type_proto(helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None)))
    body = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["carried"], ["has"]),
         helper.make_node("If", ["has"], ["seq"],
                          then_branch=helper.make_graph([helper.make_node("OptionalGetElement", ["carried"], ["got"])],
                                                        "then", [], [seq_vi("got", F)]),
                          else_branch=helper.make_graph([helper.make_node("SequenceEmpty", [], ["fresh"], dtype=F)],
                                                        "else", [], [seq_vi("fresh", F)])),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Unsqueeze", ["fi", "axes"], ["item"]),
         helper.make_node("SequenceInsert", ["seq", "item"], ["grown"]),
         helper.make_node("Optional", ["grown"], ["out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", T.BOOL, []),
         helper.make_value_info("carried", opt_seq)],
        [helper.make_tensor_value_info("c_out", T.BOOL, []), helper.make_value_info("out", opt_seq)],
        [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")])
    nodes = [helper.make_node("Loop", ["M", "", "start"], ["end"], body=body),
             helper.make_node("OptionalGetElement", ["end"], ["seq"]),
             helper.make_node("ConcatFromSequence", ["seq"], ["all"], axis=0)]
    m = model(nodes, [helper.make_tensor_value_info("M", I64, []), helper.make_value_info("start", opt_seq)],
              [helper.make_tensor_value_info("all", F, None)])
    _, result = compile_model(m, tmp_path)
    for device in DEVICES:
        for start in (None, [np.array([7.0], np.float32)], None):
            (got,) = run_om(result.om_path, device, {"M": np.array(3, np.int64), "start": start})
            expected = ([7.0] if start else []) + [0.0, 1.0, 2.0]
            np.testing.assert_array_equal(got, np.array(expected, np.float32))


def test_sequence_ops_stay_out_of_static_clusters(tmp_path):
    """Static work before the sequence is one KNOWN submodel; every sequence op and every reader of
    a sequence is an UNKNOWN node of the root graph."""
    chain = [helper.make_node("Relu" if k % 2 else "Sigmoid", [f"t{k}"], [f"t{k + 1}"]) for k in range(5)]
    nodes = [helper.make_node("Identity", ["x"], ["t0"]), *chain,
             helper.make_node("SplitToSequence", ["t5"], ["s"], axis=1, keepdims=0),
             helper.make_node("SequenceAt", ["s", "k"], ["col"]),
             helper.make_node("Mul", ["col", "col"], ["y"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, [3, 4]), helper.make_tensor_value_info("k", I64, [])],
              [helper.make_tensor_value_info("y", F, None)])
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    result = check(m, [{"x": x, "k": np.array(2, np.int64)}, {"x": x, "k": np.array(-4, np.int64)}], tmp_path)
    om = read_om(result.om_path)
    known = [c for c in om.clusters if c.kind == "KNOWN"]
    assert len(known) == 1 and "SplitToSequence_6" not in known[0].nodes and len(om.submodels) == 1
    unknown = [c for c in om.clusters if c.kind == "UNKNOWN"]  # connected: one cluster, its cause the first's
    assert [list(c.nodes) for c in unknown] == [["SplitToSequence_6", "SequenceAt_7", "Mul_8"]]
    assert "sequence and optional values have no static layout" in unknown[0].reason
    assert [n.kinds for n in om.nodes if n.op_type == "SplitToSequence"] == [("sequence",)]


def test_range_mode_plans_tensors_and_keeps_sequences_on_the_host(tmp_path):
    x = helper.make_tensor_value_info("x", F, ["n", 2])
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("SplitToSequence", ["r"], ["s"], axis=0),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1)], [x],
              [helper.make_tensor_value_info("y", F, None)])
    path, result = compile_model(m, tmp_path, input_shape="x:1~6,2")
    assert result.model.mode == "range" and "s" not in result.model.attrs["capacities"]
    for device in DEVICES:
        for n in (6, 1, 3):
            feeds = {"x": np.random.default_rng(n).standard_normal((n, 2)).astype(np.float32)}
            assert_same(run_om(result.om_path, device, feeds), onnxruntime_outputs(path, feeds))


def test_gears_refuse_sequences_with_a_message(tmp_path):
    m = model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1)],
              [helper.make_tensor_value_info("x", F, ["b", 2])], [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(GeError, match=r"'s' is a sequence: sequences, optionals and strings run in the hybrid "
                                      r"executor, not in gears"):
        compile_model(m, tmp_path, input_shape="x:-1,2", dynamic_batch_size="1,2")
    assert not list(tmp_path.glob("*.om"))
