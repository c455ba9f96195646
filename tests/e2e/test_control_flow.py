"""Control flow end to end (ge atc + ge run's API on cpu and sim), each result equal to onnxruntime:
If (both branches, folded when its condition is constant, outer-scope capture, branches of
different shapes), Loop (trip count, condition, both, carried state, scan outputs, outer capture,
growing state), Scan (opset 8 and 9+, axes, directions), nesting, the exporters' patterns, and
onnx's own backend node cases for these ops."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.om import header_info, read_om

from .conftest import onnxruntime_outputs

F, I64, B = T.FLOAT, T.INT64, T.BOOL
DEVICES = ["cpu", "sim"]


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "cf", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def check(m, feeds_list, tmp_path, devices=DEVICES, **atc):
    """Compile `m`, run every feed on every device, compare with onnxruntime; the atc result."""
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "m"), **atc)
    for device in devices:
        model_id = api.load_from_file(result.om_path, device)
        try:
            for feeds in feeds_list:
                got = api.execute(model_id, feeds)
                expected = onnxruntime_outputs(path, feeds)
                assert len(got) == len(expected)
                for g, e in zip(got, expected):
                    assert g.dtype == e.dtype and g.shape == e.shape, (device, g.dtype, g.shape, e.dtype, e.shape)
                    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        finally:
            api.unload(model_id)
    return result


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------ If
def _if_model(then_nodes, then_out, else_nodes, else_out, out_shape, extra_inputs=()):
    then = helper.make_graph(then_nodes, "then", [], [vi(then_out, F, None)])
    other = helper.make_graph(else_nodes, "else", [], [vi(else_out, F, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    return model(nodes, [vi("cond", B, []), vi("x", F, [2, 3]), *extra_inputs], [vi("y", F, out_shape)])


def test_if_runs_the_branch_its_condition_picks_reading_outer_values(tmp_path):
    m = _if_model([helper.make_node("Add", ["r", "x"], ["t"])], "t",  # captures r (a node's output) and x
                  [helper.make_node("Mul", ["x", "x"], ["e"])], "e", [2, 3])
    x = rand(2, 3)
    result = check(m, [{"cond": np.array(True), "x": x}, {"cond": np.array(False), "x": x}], tmp_path)
    assert header_info(result.om_path)["has_unknown_shape"]
    om = read_om(result.om_path)
    assert [n.op_type for n in om.nodes if n.subgraphs] == ["If"]
    assert len(om.subgraphs) == 2 and all(sg.attrs["captures"] == 2 for sg in om.subgraphs)


def test_if_branches_of_different_shapes(tmp_path):
    m = _if_model([helper.make_node("Concat", ["x", "r"], ["t"], axis=0)], "t",
                  [helper.make_node("ReduceSum", ["x", "axes"], ["e"], keepdims=0)], "e", None,
                  [vi("axes", I64, [1])])
    x, axes = rand(2, 3), np.array([1], np.int64)
    result = check(m, [{"cond": np.array(True), "x": x, "axes": axes},
                       {"cond": np.array(False), "x": x, "axes": axes},
                       {"cond": np.array(True), "x": x, "axes": axes}], tmp_path)
    assert [(t.name, t.shape) for t in result.model.outputs] == [("y", (-2,))]  # rank differs: unknown


def test_if_branch_outputs_without_declared_types_on_unknown_dims(tmp_path):
    """Exporters leave subgraph outputs untyped (Silero VAD's nested Ifs do): their element types
    come from onnx's inference of the subgraphs, their shapes from running."""
    then = helper.make_graph([helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
                              helper.make_node("Squeeze", ["u", "ax"], ["t"])], "then", [],
                             [onnx.ValueInfoProto(name="t")], [const("ax", np.array([0], np.int64))])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [onnx.ValueInfoProto(name="e")])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    m = model(nodes, [vi("cond", B, []), vi("x", F, ["n"])], [vi("y", F, ["n"])])
    feeds = [{"cond": np.array(c), "x": rand(n)} for c, n in ((True, 3), (False, 5), (True, 7))]
    check(m, feeds, tmp_path, input_shape="cond:;x:-1")


def test_if_on_a_shape_comparison_folds_to_its_branch_at_compile_time(tmp_path):
    """PyTorch exports `if x.shape[0] == 2` as Shape -> Gather -> Equal -> If: with static shapes
    the condition is a constant and the If becomes the branch taken: a static OM."""
    then = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t"])], "then", [], [vi("t", F, None)],
                             [const("one", np.float32(1))])
    other = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
             helper.make_node("Equal", ["d0", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Relu", ["y"], ["z"])]
    inits = [const("zero", np.int64(0)), const("two", np.int64(2))]
    for rows in (2, 3):  # then, else
        m = model(nodes, [vi("x", F, [rows, 3])], [vi("z", F, [rows, 3])], inits)
        sub = tmp_path / str(rows)
        sub.mkdir()
        result = check(m, [{"x": rand(rows, 3)}], sub)
        assert not header_info(result.om_path)["has_unknown_shape"]
        assert result.summary["passes"]["passes"]["constant_folding"]["inlined_branches"] == 1
        assert [t.op_type for t in result.model.tasks] == (["Add", "Relu"] if rows == 2 else ["Mul", "Relu"])


def _static_if_model():
    """If over two static branches of different shapes (then: r + x [2, 3], else: concat(x, r) [4, 3])
    and a node after it whose shapes follow the branch taken."""
    then = helper.make_graph([helper.make_node("Add", ["r", "x"], ["t"])], "then", [], [vi("t", F, None)])
    other = helper.make_graph([helper.make_node("Concat", ["x", "r"], ["e"], axis=0)], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Neg", ["y"], ["z"])]
    return model(nodes, [vi("cond", B, []), vi("x", F, [2, 3])], [vi("z", F, None), vi("r", F, [2, 3])])


def _static_if_expected(cond: bool, x: np.ndarray) -> list:
    r = np.maximum(x, 0)
    return [-(r + x) if cond else -np.concatenate([x, r]), r]


@pytest.mark.parametrize("device", DEVICES)
def test_a_steady_run_is_replayed_and_follows_the_branch_taken_and_new_values(tmp_path, device):
    """A hybrid model whose last run was steady (each node's prepared call, an If of two static
    branches) replays that run's steps: an If taking the other branch, whose output has another
    shape, ends the replay after it (the Neg after it runs for the new shape); values written into
    the caller's arrays between calls are read by the next call, and a call's outputs are the
    caller's own (the next call does not change them)."""
    path = str(tmp_path / "m.onnx")
    onnx.save(_static_if_model(), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, device)
    try:
        ctx = api.model(model_id).default_context
        x, cond = rand(2, 3), np.array(True)
        kept, replayed = [], []
        for step, c in enumerate([True] * 4 + [False] * 4 + [True, False] + [True] * 4):
            cond[...] = c  # the caller's arrays, changed in place between calls
            x[...] = rand(2, 3, seed=step)
            replayed.append(ctx._replay is not None)
            got = api.execute(model_id, {"cond": cond, "x": x})
            for g, e in zip(got, _static_if_expected(c, x)):
                assert g.shape == e.shape
                np.testing.assert_array_equal(g, e)
            stats = ctx.stats
            assert stats["nodes_run"] == 3 and stats["subgraph_runs"] == 1
            kept.append((got, _static_if_expected(c, x.copy())))
        # replayed from the fourth call with the same shapes on (the third prepares the calls), and into
        # the call whose branch gives another shape
        assert replayed == [False] * 3 + [True] * 2 + [False] * 2 + [True] * 2 + [False] * 4 + [True]
        for got, expected in kept:  # each call's outputs stay as they were given
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(g, e)
    finally:
        api.unload(model_id)


def test_a_replayed_if_runs_its_dynamic_branch_as_a_subgraph_call(tmp_path):
    """An If with one static branch (then: concat [4, 3]) and one dynamic branch (else: a ReduceSum on
    axes given at run time): a replay launches the static branch on the node's tensors and runs the
    dynamic one as a subgraph call, the node after it following either's shape."""
    then = helper.make_graph([helper.make_node("Concat", ["x", "r"], ["t"], axis=0)], "then", [], [vi("t", F, None)])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["e"], keepdims=0)], "else", [],
                              [vi("e", F, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Neg", ["y"], ["z"])]
    m = model(nodes, [vi("cond", B, []), vi("x", F, [2, 3]), vi("axes", I64, [1])], [vi("z", F, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        ctx = api.model(model_id).default_context
        replayed = []
        for step, c in enumerate([True] * 4 + [False] * 4 + [True, False, True]):
            x, axes = rand(2, 3, seed=step), np.array([step % 2], np.int64)
            replayed.append(ctx._replay is not None)
            (z,) = api.execute(model_id, {"cond": np.array(c), "x": x, "axes": axes})
            expected = -np.concatenate([x, np.maximum(x, 0)]) if c else -x.sum(axis=step % 2)
            assert z.shape == expected.shape
            np.testing.assert_allclose(z, expected, rtol=1e-6)
        assert replayed[3] and replayed[4] and not replayed[5]
    finally:
        api.unload(model_id)


def test_a_replayed_run_follows_input_shapes_that_change_between_calls(tmp_path):
    """The replay of a steady run holds while the inputs keep their shapes: another shape runs the
    nodes step by step (new buffers), the same shape again is replayed again."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "x"], ["y"]),
             helper.make_node("ReduceSum", ["y", "ax"], ["s"], keepdims=1)]
    m = model(nodes, [vi("x", F, ["n", 3])], [vi("s", F, ["n", 1]), vi("y", F, ["n", 3])],
              [const("ax", np.array([1], np.int64))])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="x:-1,3").om_path, "cpu")
    try:
        ctx = api.model(model_id).default_context
        replayed = []
        for step, n in enumerate([2, 2, 2, 2, 5, 5, 5, 2, 2, 7, 2]):
            x = rand(n, 3, seed=step)
            s, y = api.execute(model_id, {"x": x})
            expected = np.maximum(x, 0) * x
            np.testing.assert_array_equal(y, expected)
            np.testing.assert_allclose(s, expected.sum(1, keepdims=True), rtol=1e-6)
            replayed.append(ctx._replay is not None)
        assert replayed[3] and replayed[6] and not replayed[4] and not replayed[9]
    finally:
        api.unload(model_id)


# ---------------------------------------------------------------------------------------- Loop
def _loop_model(trip: bool, cond: bool, scan: bool = True):
    """s <- s + w (w captured); cond <- sum(s) < lim (lim captured); scan output s*s."""
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "w"], ["s_out"]),
        helper.make_node("Mul", ["s_out", "s_out"], ["sq"]),
        helper.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
        helper.make_node("Less", ["tot", "lim"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c", B, []), vi("s_in", F, [2, 3])],
        [vi("c_out", B, []), vi("s_out", F, [2, 3])] + ([vi("sq", F, [2, 3])] if scan else []))
    outs = ["s_final"] + (["sqs"] if scan else [])
    nodes = [helper.make_node("Loop", ["M" if trip else "", "cond" if cond else "", "s0"], outs, body=body)]
    inputs = ([vi("M", I64, [])] if trip else []) + ([vi("cond", B, [])] if cond else []) + \
        [vi("s0", F, [2, 3]), vi("w", F, [2, 3]), vi("lim", F, [])]
    outputs = [vi("s_final", F, [2, 3])] + ([vi("sqs", F, [None, 2, 3])] if scan else [])
    return model(nodes, inputs, outputs)


@pytest.mark.parametrize("trip,cond", [(True, False), (False, True), (True, True)])
def test_loop_trip_count_condition_carried_state_scan_outputs(tmp_path, trip, cond):
    base = {"s0": np.abs(rand(2, 3)), "w": np.ones((2, 3), np.float32)}
    feeds = []
    for m_, c, lim in [(5, True, 20.0), (3, True, 1e9), (7, True, 0.0), (0, True, 20.0), (4, False, 20.0)]:
        f = dict(base, lim=np.array(lim, np.float32))
        if trip:
            f["M"] = np.array(m_, np.int64)
        if cond:
            f["cond"] = np.array(c)
        if not trip and lim > 1e8:
            continue  # no trip count and a condition that stays true: an endless loop
        feeds.append(f)
    result = check(_loop_model(trip, cond), feeds, tmp_path)
    body = read_om(result.om_path).subgraphs[0]
    assert [s.kind for s in body.steps] == ["submodel"]  # a static body is one static submodel


def test_a_static_body_runs_as_its_static_submodel_once_per_iteration(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_loop_model(True, False), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        feeds = {"M": np.array(6, np.int64), "s0": np.zeros((2, 3), np.float32), "w": np.ones((2, 3), np.float32),
                 "lim": np.array(1e9, np.float32)}
        for _ in range(2):  # the second run binds nothing new
            api.execute(model_id, feeds)
            stats = api.model(model_id).default_context.stats
            assert stats["subgraph_runs"] == 6 and stats["submodel_launches"] == 6
            assert stats["nodes_run"] == 1  # the Loop itself; its body is no node of the hybrid executor
        assert stats["allocations"] == 0
    finally:
        api.unload(model_id)


def test_a_long_static_loop_carries_state_and_stacks_every_step(tmp_path):
    """An RNN cell as a generation loop runs it, h <- tanh(h W + b) for M steps, each h a scan
    output, cond i < stop (stop captured): the body's outputs come back as views of its own
    buffers, so each carried h must be copied in anew (not taken for the last call's array) and each
    scan output copied into the stacked result as it comes (past its first room of 16 steps); a
    second run allocates nothing and launches the body once per step."""
    rng = np.random.default_rng(0)
    body = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Add", ["a", "b"], ["z"]),
                              helper.make_node("Tanh", ["z"], ["h2"]), helper.make_node("Less", ["i", "stop"], ["c2"]),
                              helper.make_node("Identity", ["h2"], ["y"])],
                             "cell", [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, 8])],
                             [vi("c2", B, []), vi("h2", F, [1, 8]), vi("y", F, [1, 8])],
                             [const("W", rng.standard_normal((8, 8)).astype(np.float32) / 6),  # contracting: no drift
                              const("b", rng.standard_normal((1, 8)).astype(np.float32) / 2)])
    m = model([helper.make_node("Loop", ["M", "", "h0"], ["hN", "hs"], body=body)],
              [vi("M", I64, []), vi("h0", F, [1, 8]), vi("stop", I64, [])], [vi("hN", F, [1, 8]), vi("hs", F, [None, 1, 8])])
    feeds = [{"M": np.array(n, np.int64), "h0": rand(1, 8, seed=n), "stop": np.array(s, np.int64)}
             for n, s in ((40, 99), (0, 99), (17, 99), (40, 20), (1, 99))]  # stop 20: cond ends it after 21 steps
    result = check(m, feeds, tmp_path)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for _ in range(2):
            api.execute(model_id, feeds[0])
            stats = api.model(model_id).default_context.stats
            assert stats["subgraph_runs"] == 40 and stats["submodel_launches"] == 40
        assert stats["allocations"] == 0
    finally:
        api.unload(model_id)


def test_a_bound_body_reads_outputs_that_copy_at_their_sources(tmp_path):
    """Exported bodies pass the condition and a carried value through (Identity) and give a state
    again as a scan output: from the second run on the copies are left out and those outputs read
    where their values are; a copy another node reads (y, read by the Relu) stays. Scan likewise
    (its state passed through, a scan output that is the step's slice). Equal to onnxruntime each run."""
    rng = np.random.default_rng(4)
    body = helper.make_graph([
        helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Tanh", ["a"], ["h2"]),
        helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["p"], ["p2"]),
        helper.make_node("Identity", ["h2"], ["y"]), helper.make_node("Relu", ["y"], ["r"]),
        helper.make_node("Identity", ["h2"], ["y2"])], "cell",
        [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, 4]), vi("p", F, [2])],
        [vi("c2", B, []), vi("h2", F, [1, 4]), vi("p2", F, [2]), vi("y", F, [1, 4]), vi("r", F, [1, 4]), vi("y2", F, [1, 4])],
        [const("W", rng.standard_normal((4, 4)).astype(np.float32) / 2)])
    loop = helper.make_node("Loop", ["M", "", "h0", "p0"], ["hN", "pN", "ys", "rs", "y2s"], body=body)
    scan_body = helper.make_graph([
        helper.make_node("Identity", ["s"], ["s2"]), helper.make_node("Identity", ["x"], ["x2"]),
        helper.make_node("Mul", ["x", "s"], ["z"])], "step",
        [vi("s", F, [3]), vi("x", F, [3])], [vi("s2", F, [3]), vi("x2", F, [3]), vi("z", F, [3])])
    scan = helper.make_node("Scan", ["s0", "xs"], ["sN", "x2s", "zs"], body=scan_body, num_scan_inputs=1,
                            scan_output_directions=[1, 0])
    m = model([loop, scan], [vi("M", I64, []), vi("h0", F, [1, 4]), vi("p0", F, [2]), vi("s0", F, [3]), vi("xs", F, [5, 3])],
              [vi("hN", F, [1, 4]), vi("pN", F, [2]), vi("ys", F, [None, 1, 4]), vi("rs", F, [None, 1, 4]),
               vi("y2s", F, [None, 1, 4]), vi("sN", F, [3]), vi("x2s", F, [5, 3]), vi("zs", F, [5, 3])])
    feeds = [{"M": np.array(n, np.int64), "h0": rand(1, 4, seed=n), "p0": rand(2, seed=n + 1), "s0": rand(3, seed=n + 2),
              "xs": rand(5, 3, seed=n + 3)} for n in (6, 6, 20, 1, 0, 3)]
    check(m, feeds, tmp_path)


def test_loop_carried_state_that_grows_and_iteration_number(tmp_path):
    """PyTorch's exported generation loop: each step appends to the carried sequence (its shape
    changes every iteration) and reads the iteration number; the scan output is per step."""
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Unsqueeze", ["fi", "ax"], ["fi1"]),
        helper.make_node("Unsqueeze", ["fi1", "ax"], ["fi2"]),
        helper.make_node("Add", ["fi2", "bias"], ["tok"]),  # bias captured: [1, 4]
        helper.make_node("Concat", ["seq_in", "tok"], ["seq_out"], axis=0),
        helper.make_node("ReduceMax", ["seq_out"], ["mx"], keepdims=0),
        helper.make_node("Identity", ["c"], ["c_out"])], "gen",
        [vi("i", I64, []), vi("c", B, []), vi("seq_in", F, [None, 4])],
        [vi("c_out", B, []), vi("seq_out", F, [None, 4]), vi("mx", F, [])],
        [const("ax", np.array([0], np.int64))])
    nodes = [helper.make_node("Loop", ["steps", "", "start"], ["seq", "maxes"], body=body)]
    m = model(nodes, [vi("steps", I64, []), vi("start", F, [1, 4]), vi("bias", F, [1, 4])],
              [vi("seq", F, [None, 4]), vi("maxes", F, [None])])
    feeds = [{"steps": np.array(n, np.int64), "start": rand(1, 4), "bias": rand(1, 4, seed=1)} for n in (3, 6, 0, 3)]
    result = check(m, feeds, tmp_path)
    body = read_om(result.om_path).subgraphs[0]
    assert body.inputs[2].shape == (-2,)  # the carried sequence changes shape: the body runs dynamic


def test_a_dynamic_body_carries_state_of_fixed_and_growing_shapes(tmp_path):
    """A body that runs node by node (its sequence grows) carrying, beside the sequence, a state of
    fixed shape (its buffer and the output's trade places every iteration, so views alternate) and
    a value passed through unchanged; each state also a scan output. Every iteration reads the
    value the last one made: equal to onnxruntime over 0, 1, 2 and 9 iterations, run after run."""
    body = helper.make_graph([
        helper.make_node("Slice", ["seq", "m1", "big", "zero"], ["last_row"]),
        helper.make_node("ReduceSum", ["last_row"], ["seq_last"], keepdims=0),
        helper.make_node("Mul", ["s", "half"], ["sh"]), helper.make_node("Add", ["sh", "seq_last"], ["s2"]),
        helper.make_node("Add", ["last_row", "p"], ["row"]),
        helper.make_node("Concat", ["seq", "row"], ["seq2"], axis=0),
        helper.make_node("Identity", ["p"], ["p2"]), helper.make_node("Identity", ["c"], ["c2"]),
        helper.make_node("Identity", ["s2"], ["y"])], "grow",
        [vi("i", I64, []), vi("c", B, []), vi("s", F, [2, 3]), vi("seq", F, [None, 3]), vi("p", F, [1, 3])],
        [vi("c2", B, []), vi("s2", F, [2, 3]), vi("seq2", F, [None, 3]), vi("p2", F, [1, 3]), vi("y", F, [2, 3])],
        [const("half", np.float32(0.5)), const("m1", np.array([-1], np.int64)),
         const("big", np.array([1 << 30], np.int64)), const("zero", np.array([0], np.int64))])
    m = model([helper.make_node("Loop", ["M", "", "s0", "q0", "p0"], ["s", "q", "p", "ys"], body=body)],
              [vi("M", I64, []), vi("s0", F, [2, 3]), vi("q0", F, [1, 3]), vi("p0", F, [1, 3])],
              [vi("s", F, [2, 3]), vi("q", F, [None, 3]), vi("p", F, [1, 3]), vi("ys", F, [None, 2, 3])])
    feeds = [{"M": np.array(n, np.int64), "s0": rand(2, 3, seed=n), "q0": rand(1, 3, seed=n + 1) / 4,
              "p0": rand(1, 3, seed=n + 2) / 4} for n in (9, 0, 1, 2, 9)]
    result = check(m, feeds, tmp_path)
    assert read_om(result.om_path).subgraphs[0].steps[0].kind == "node"  # it runs node by node


def test_a_dynamic_body_runs_its_static_parts_on_buffers_that_move(tmp_path):
    """A body run node by node (its sequence grows) whose static parts are submodels: the carried
    state they read and write trades buffers with the body's output every iteration, so each
    iteration gives the submodels other addresses (the hybrid executor's UpdateArgs only when an
    address moved, then their bound calls). Equal to onnxruntime over 0, 1, 5 and 7 iterations."""
    body = helper.make_graph([
        helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Tanh", ["a"], ["h2"]),
        helper.make_node("Concat", ["seq", "h2"], ["seq2"], axis=0), helper.make_node("Identity", ["c"], ["c2"])],
        "grow", [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, 8]), vi("seq", F, [None, 8])],
        [vi("c2", B, []), vi("h2", F, [1, 8]), vi("seq2", F, [None, 8])], [const("W", rand(8, 8, seed=5) / 3)])
    m = model([helper.make_node("Loop", ["M", "", "h0", "q0"], ["h", "q"], body=body)],
              [vi("M", I64, []), vi("h0", F, [1, 8]), vi("q0", F, [1, 8])], [vi("h", F, [1, 8]), vi("q", F, [None, 8])])
    feeds = [{"M": np.array(n, np.int64), "h0": rand(1, 8, seed=n), "q0": rand(1, 8, seed=n + 1)} for n in (5, 0, 1, 7)]
    result = check(m, feeds, tmp_path, dynamic={"static_model_ops_lower_limit": 1})
    assert "submodel" in [s.kind for s in read_om(result.om_path).subgraphs[0].steps]


def test_loop_with_a_constant_trip_count_has_static_outputs(tmp_path):
    """PyTorch's `for i in range(3)`: a constant trip count and a condition the body passes through:
    the scan outputs' length is known, so what follows the Loop is a static submodel."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"]),
                              helper.make_node("Relu", ["s2"], ["y"])], "b",
                             [vi("i", I64, []), vi("c", B, []), vi("s", F, [4])],
                             [vi("c2", B, []), vi("s2", F, [4]), vi("y", F, [4])])
    nodes = [helper.make_node("Loop", ["n", "t", "x"], ["last", "ys"], body=body),
             helper.make_node("Sigmoid", ["ys"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Exp", ["b"], ["e"]), helper.make_node("Abs", ["e"], ["z"])]
    m = model(nodes, [vi("x", F, [4])], [vi("z", F, [3, 4]), vi("last", F, [4])],
              [const("n", np.int64(3)), const("t", np.array(True))])
    result = check(m, [{"x": rand(4)}], tmp_path)
    om = read_om(result.om_path)
    assert [s.kind for s in om.steps] == ["node", "submodel"] and [t.shape for t in om.outputs] == [(3, 4), (4,)]


def _table_loop(rows):
    """A positions table built by a Loop over a constant range (sin(i * freq) per row), added to x."""
    body = helper.make_graph([helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["fi", "freq"], ["a"]),
                              helper.make_node("Sin", ["a"], ["row"]), helper.make_node("Identity", ["c"], ["c2"])], "b",
                             [vi("i", I64, []), vi("c", B, [])], [vi("c2", B, []), vi("row", F, [4])])
    nodes = [helper.make_node("Loop", ["n", ""], ["table"], body=body), helper.make_node("Add", ["x", "table"], ["y"])]
    return model(nodes, [vi("x", F, [rows, 4])], [vi("y", F, [rows, 4])],
                 [const("n", np.int64(rows)), const("freq", np.array([1, .5, .25, .125], np.float32))])


def test_a_loop_of_constants_is_evaluated_at_compile_time(tmp_path):
    result = check(_table_loop(6), [{"x": rand(6, 4)}], tmp_path)
    assert not header_info(result.om_path)["has_unknown_shape"]  # a static OM: the table is a weight
    assert result.summary["passes"]["passes"]["constant_folding"]["evaluated_control_flow"] == 1
    assert [t.op_type for t in result.model.tasks] == ["Add"]


def test_a_constant_loop_too_long_to_evaluate_runs_at_run_time(tmp_path, monkeypatch):
    from ge.core.passes import subgraphs as folding
    monkeypatch.setattr(folding, "MAX_FOLD_ITERATIONS", 50)
    result = check(_table_loop(80), [{"x": rand(80, 4)}], tmp_path)
    assert header_info(result.om_path)["has_unknown_shape"]
    assert "Loop" in [n.op_type for n in read_om(result.om_path).nodes]


def test_loop_with_dynamic_input_dims(tmp_path):
    m = _loop_model(True, True)
    path = str(tmp_path / "m.onnx")
    for vin in m.graph.input:
        if vin.name in ("s0", "w"):
            vin.type.tensor_type.shape.dim[1].dim_param = "n"
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "m"), input_shape="s0:2,-1;w:2,-1;M:;cond:;lim:")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for n in (3, 5):
            feeds = {"M": np.array(4, np.int64), "cond": np.array(True), "s0": rand(2, n), "w": rand(2, n, seed=n),
                     "lim": np.array(1e9, np.float32)}
            for g, e in zip(api.execute(model_id, feeds), onnxruntime_outputs(path, feeds)):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", DEVICES)
def test_contexts_run_loops_in_threads(tmp_path, device):
    """Each hybrid context runs the body in a child context of its own: two threads, different trip
    counts and state, each equal to onnxruntime; destroying a context destroys its children."""
    import threading
    path = str(tmp_path / "m.onnx")
    onnx.save(_loop_model(True, True), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, device)
    model = api.model(model_id)
    second = model.create_context()
    feeds = [[{"M": np.array(n, np.int64), "cond": np.array(True), "s0": rand(2, 3, seed=n), "w": rand(2, 3, seed=n + 1),
               "lim": np.array(1e9, np.float32)} for n in ns] for ns in ((3, 9, 1, 6) * 3, (7, 2, 8, 0) * 3)]
    got, errors = [[], []], []

    def work(k, ctx):
        try:
            got[k].extend(ctx.execute(f) for f in feeds[k])
        except BaseException as e:
            errors.append(e)
    try:
        threads = [threading.Thread(target=work, args=(k, c)) for k, c in enumerate((model.default_context, second))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for k in range(2):
            for f, outs in zip(feeds[k], got[k]):
                for g, e in zip(outs, onnxruntime_outputs(path, f)):
                    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        body = model.subgraphs[0]
        assert len(body.contexts) == 2
        model.destroy_context(second)
        assert len(body.contexts) == 1
    finally:
        api.unload(model_id)


# ---------------------------------------------------------------------------------------- Scan
def _cumsum_body(extra_scan_axis_shape):
    return helper.make_graph([
        helper.make_node("Add", ["acc_in", "x_t"], ["acc_out"]),
        helper.make_node("Mul", ["acc_out", "k"], ["y_t"])], "cumsum",  # k captured
        [vi("acc_in", F, extra_scan_axis_shape), vi("x_t", F, extra_scan_axis_shape)],
        [vi("acc_out", F, extra_scan_axis_shape), vi("y_t", F, extra_scan_axis_shape)])


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [(0, 0, 0, 0), (1, 1, 1, 0), (1, 0, -1, 1), (-2, 1, 0, 1)])
def test_scan_axes_and_directions(tmp_path, in_axis, in_dir, out_axis, out_dir):
    x = rand(5, 4)  # a scan along axis 0 sees rows of 4, along axis 1 columns of 5
    per_step = [4] if in_axis % 2 == 0 else [5]
    body = _cumsum_body(per_step)
    node = helper.make_node("Scan", ["acc0", "x"], ["acc", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                            scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    steps = x.shape[in_axis]
    ys_shape = [steps, per_step[0]] if out_axis == 0 else [per_step[0], steps]
    m = model([node], [vi("acc0", F, per_step), vi("x", F, [5, 4]), vi("k", F, [])],
              [vi("acc", F, per_step), vi("ys", F, ys_shape)])
    result = check(m, [{"acc0": rand(*per_step, seed=2), "x": x, "k": np.array(0.5, np.float32)}], tmp_path)
    assert [tuple(t.shape) for t in result.model.outputs] == [tuple(per_step), tuple(ys_shape)]


def test_scan_of_two_inputs_and_outputs_on_their_own_axes_and_directions(tmp_path):
    """A static body iterated bound (its views written and read in place, no call per step): two
    scan inputs (axis 2 reversed, axis 0), two states, one the body does not read (its output comes
    from a slice), scan outputs along axis 1 reversed and axis -1; a second run launches it once per
    step and allocates nothing."""
    body = helper.make_graph([
        helper.make_node("MatMul", ["a_t", "W"], ["aw"]), helper.make_node("Add", ["h", "aw"], ["s"]),
        helper.make_node("Tanh", ["s"], ["h2"]), helper.make_node("Mul", ["b_t", "k"], ["u2"]),
        helper.make_node("Add", ["h2", "b_t"], ["y1"]), helper.make_node("Sigmoid", ["u2"], ["y2"])], "b",
        [vi("h", F, [2, 3]), vi("u", F, [2, 3]), vi("a_t", F, [2, 4]), vi("b_t", F, [2, 3])],
        [vi("h2", F, [2, 3]), vi("u2", F, [2, 3]), vi("y1", F, [2, 3]), vi("y2", F, [2, 3])],
        [const("W", rand(4, 3, seed=5) / 2)])
    node = helper.make_node("Scan", ["h0", "u0", "a", "b"], ["hN", "uN", "ys1", "ys2"], body=body, num_scan_inputs=2,
                            scan_input_axes=[2, 0], scan_input_directions=[1, 0],
                            scan_output_axes=[1, -1], scan_output_directions=[1, 0])
    m = model([node], [vi("h0", F, [2, 3]), vi("u0", F, [2, 3]), vi("a", F, [2, 4, 7]), vi("b", F, [7, 2, 3]), vi("k", F, [])],
              [vi("hN", F, [2, 3]), vi("uN", F, [2, 3]), vi("ys1", F, [2, 7, 3]), vi("ys2", F, [2, 3, 7])])
    feeds = {"h0": rand(2, 3, seed=1), "u0": rand(2, 3, seed=2), "a": rand(2, 4, 7, seed=3), "b": rand(7, 2, 3, seed=4),
             "k": np.array(-1.5, np.float32)}
    result = check(m, [feeds], tmp_path)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for _ in range(2):
            api.execute(model_id, feeds)
            stats = api.model(model_id).default_context.stats
            assert stats["subgraph_runs"] == 7 and stats["submodel_launches"] == 7
        assert stats["allocations"] == 0
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_opset_8_batch_sequence_lens_and_direction(tmp_path, direction):
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Identity", ["acc2"], ["y"])],
                             "b", [vi("acc", F, [2]), vi("x", F, [2])], [vi("acc2", F, [2]), vi("y", F, [2])])
    node = helper.make_node("Scan", ["lens", "a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1, directions=[direction])
    m = model([node], [vi("lens", I64, [3]), vi("a0", F, [3, 2]), vi("xs", F, [3, 4, 2])],
              [vi("a", F, [3, 2]), vi("ys", F, [3, 4, 2])], opset=8)
    m.ir_version = 8
    feeds = {"lens": np.array([4, 2, 3], np.int64), "a0": np.ones((3, 2), np.float32),
             "xs": np.arange(24, dtype=np.float32).reshape(3, 4, 2)}
    check(m, [feeds], tmp_path)  # a short item's scan outputs are zeros past its length


def test_scan_of_unknown_dims_over_zero_steps(tmp_path):
    """No iteration, and no compiled per-step shape (unknown dims): the per-step shape comes from one
    run of the body on the step it would have had, so ys is [w, 0] (onnxruntime 1.2x stops with a
    floating-point exception on this case)."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Mul", ["acc2", "x"], ["y"])],
                             "b", [vi("acc", F, ["w"]), vi("x", F, ["w"])], [vi("acc2", F, ["w"]), vi("y", F, ["w"])])
    node = helper.make_node("Scan", ["a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_output_axes=[1])
    m = model([node], [vi("a0", F, ["w"]), vi("xs", F, ["w", "t"])], [vi("a", F, ["w"]), vi("ys", F, ["w", "t"])])
    check(m, [{"a0": rand(3), "xs": rand(3, 5)}, {"a0": rand(4), "xs": rand(4, 2)}], tmp_path, devices=["sim"],
          input_shape="a0:-1;xs:-1,-1")
    model_id = api.load_from_file(str(tmp_path / "m.om"), "cpu")
    try:
        a0 = rand(2)
        a, ys = api.execute(model_id, {"a0": a0, "xs": np.zeros((2, 0), np.float32)})
        np.testing.assert_array_equal(a, a0)
        assert ys.shape == (2, 0) and ys.dtype == np.float32
    finally:
        api.unload(model_id)


def test_scan_feeds_a_static_cluster(tmp_path):
    """A Scan's outputs are static when its body is: what follows it runs as a static submodel."""
    body = _cumsum_body([4])
    nodes = [helper.make_node("Scan", ["acc0", "x"], ["acc", "ys"], body=body, num_scan_inputs=1),
             helper.make_node("Relu", ["ys"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"]),
             helper.make_node("Neg", ["s"], ["n"]), helper.make_node("Abs", ["n"], ["out"])]
    m = model(nodes, [vi("acc0", F, [4]), vi("x", F, [5, 4]), vi("k", F, [])], [vi("out", F, [5, 4])])
    result = check(m, [{"acc0": rand(4), "x": rand(5, 4, seed=3), "k": np.array(2.0, np.float32)}], tmp_path)
    om = read_om(result.om_path)
    assert [s.kind for s in om.steps] == ["node", "submodel"]


# -------------------------------------------------------------------------------------- nesting
def test_loop_inside_if_and_if_inside_loop(tmp_path):
    # Loop body: an If on the iteration number's parity (not constant: runs per iteration)
    even = helper.make_graph([helper.make_node("Add", ["s_in", "x"], ["a"])], "even", [], [vi("a", F, None)])
    odd = helper.make_graph([helper.make_node("Sub", ["s_in", "x"], ["b"])], "odd", [], [vi("b", F, None)])
    body = helper.make_graph([
        helper.make_node("Mod", ["i", "two"], ["r"]),
        helper.make_node("Equal", ["r", "zero"], ["is_even"]),
        helper.make_node("If", ["is_even"], ["s_out"], then_branch=even, else_branch=odd),
        helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c", B, []), vi("s_in", F, [3])], [vi("c_out", B, []), vi("s_out", F, [3])],
        [const("two", np.int64(2)), const("zero", np.int64(0))])
    loop = helper.make_node("Loop", ["M", "", "x"], ["looped"], body=body)
    then = helper.make_graph([loop], "then", [], [vi("looped", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["neg"])], "else", [], [vi("neg", F, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    m = model(nodes, [vi("cond", B, []), vi("M", I64, []), vi("x", F, [3])], [vi("y", F, [3])])
    x = rand(3)
    feeds = [{"cond": np.array(c), "M": np.array(n, np.int64), "x": x} for c, n in ((True, 5), (False, 2), (True, 0))]
    result = check(m, feeds, tmp_path)
    om = read_om(result.om_path)
    # root If -> then (Loop) -> body (If) -> even, odd; plus the root's else
    assert len(om.subgraphs) == 5


def test_captured_values_are_read_again_on_every_run_of_the_node(tmp_path):
    """A body copies a captured value in once per run of its node, not once per call: the outer
    input `w` changes between runs, and the inner Loop's captured `t` (the outer body's tensor, the
    same buffer every outer iteration) changes between the outer iterations."""
    inner = helper.make_graph([helper.make_node("Add", ["u_in", "t"], ["u_out"]), helper.make_node("Identity", ["ci"], ["ci_out"])],
                              "inner", [vi("j", I64, []), vi("ci", B, []), vi("u_in", F, [3])],
                              [vi("ci_out", B, []), vi("u_out", F, [3])])
    outer = helper.make_graph([
        helper.make_node("Mul", ["s_in", "w"], ["t"]),
        helper.make_node("Loop", ["two", "", "s_in"], ["s_out"], body=inner),
        helper.make_node("Identity", ["c"], ["c_out"])], "outer",
        [vi("i", I64, []), vi("c", B, []), vi("s_in", F, [3])], [vi("c_out", B, []), vi("s_out", F, [3])],
        [const("two", np.int64(2))])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=outer)],
              [vi("M", I64, []), vi("s0", F, [3]), vi("w", F, [3])], [vi("s", F, [3])])
    feeds = [{"M": np.array(3, np.int64), "s0": rand(3, seed=1), "w": np.full(3, k, np.float32)} for k in (0.5, -1.0, 0.25)]
    check(m, feeds, tmp_path)


# --------------------------------------------------------------------------- exporters' patterns
def test_voice_activity_style_if_with_lstm_state(tmp_path):
    """A VAD model (Silero-style): an If on the sample rate picks the front end, an LSTM carries
    its state (h, c) from call to call as inputs and outputs."""
    rng = np.random.default_rng(7)
    hid, feat = 8, 6
    w16, w8 = (rng.standard_normal((16, feat)).astype(np.float32) * 0.3 for _ in range(2))
    W = rng.standard_normal((1, 4 * hid, feat)).astype(np.float32) * 0.3
    R = rng.standard_normal((1, 4 * hid, hid)).astype(np.float32) * 0.3
    head = rng.standard_normal((hid, 1)).astype(np.float32)
    b16 = helper.make_graph([helper.make_node("MatMul", ["x", "w16"], ["f16"]),
                             helper.make_node("Relu", ["f16"], ["feat16"])], "sr16", [], [vi("feat16", F, None)],
                            [const("w16", w16)])
    b8 = helper.make_graph([helper.make_node("Slice", ["x", "s0", "s1", "s2"], ["half"]),
                            helper.make_node("MatMul", ["half", "w8h"], ["f8"]),
                            helper.make_node("Tanh", ["f8"], ["feat8"])], "sr8", [], [vi("feat8", F, None)],
                           [const("w8h", w8[:8]), const("s0", np.array([0], np.int64)),
                            const("s1", np.array([8], np.int64)), const("s2", np.array([1], np.int64))])
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["feat"], then_branch=b16, else_branch=b8),
             helper.make_node("Unsqueeze", ["feat", "ax0"], ["seq"]),
             helper.make_node("LSTM", ["seq", "W", "R", "", "", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=hid),
             helper.make_node("Squeeze", ["Y", "ax01"], ["y2"]),
             helper.make_node("MatMul", ["y2", "head"], ["logit"]),
             helper.make_node("Sigmoid", ["logit"], ["prob"])]
    inits = [const("k16", np.int64(16000)), const("ax0", np.array([0], np.int64)),
             const("ax01", np.array([0, 1], np.int64)), const("W", W), const("R", R), const("head", head)]
    m = model(nodes, [vi("x", F, [1, 16]), vi("sr", I64, []), vi("h0", F, [1, 1, hid]), vi("c0", F, [1, 1, hid])],
              [vi("prob", F, [1, 1]), vi("hn", F, [1, 1, hid]), vi("cn", F, [1, 1, hid])], inits)
    path = str(tmp_path / "vad.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "vad"))
    for device in DEVICES:
        model_id = api.load_from_file(result.om_path, device)
        h, c = np.zeros((1, 1, hid), np.float32), np.zeros((1, 1, hid), np.float32)
        eh, ec = h, c
        try:
            for step, sr in enumerate([16000, 16000, 8000, 16000, 8000]):
                x = rand(1, 16, seed=step)
                prob, h, c = api.execute(model_id, {"x": x, "sr": np.array(sr, np.int64), "h0": h, "c0": c})
                ep, eh, ec = onnxruntime_outputs(path, {"x": x, "sr": np.array(sr, np.int64), "h0": eh, "c0": ec})
                for g, e in ((prob, ep), (h, eh), (c, ec)):
                    np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        finally:
            api.unload(model_id)


def _silero_branch(tag: str, samples_pad: int, k: int, hop: int, hid: int, rng) -> onnx.GraphProto:
    """One sample rate's half of a Silero-VAD-v5-style model, as torch.onnx writes it: a reflect
    pad, an STFT as a strided Conv, the magnitude, four Conv+Relu (strides 1, 2, 2, 1), then the
    decoder's LSTMCell: `x.squeeze(-1)` as an If on the last dim, the cell's "unbatched input?"
    If on the rank, the state's h and c gathered from `state` [2, B, hid], an LSTM, and the new
    state stacked back. Sized for its own sample count: the other rate's input gives it a time
    axis of 2, which the squeeze keeps, and the LSTM meets X of rank 5 (as onnxruntime does)."""
    p = f"{tag}/"
    bins = k // 2 + 1
    inits, nodes = [], []

    def c(name, a):
        inits.append(const(p + name, np.asarray(a)))
        return p + name

    def n(op, ins, outs=None, **attrs):
        outs = outs or [f"{p}{op}_{len(nodes)}"]
        nodes.append(helper.make_node(op, ins, outs, name=f"{p}{op}_{len(nodes)}", **attrs))
        return outs[0] if len(outs) == 1 else outs

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    x = n("Pad", ["input", c("pads", [0, 0, 0, samples_pad])], mode="reflect")
    x = n("Conv", [n("Unsqueeze", [x, c("ax1", [1])]), c("basis", w(2 * bins, 1, k))], strides=[hop])
    real = n("Slice", [x, c("lo", [0]), c("mid", [bins]), c("ax1b", [1])])
    imag = n("Slice", [x, c("mid2", [bins]), c("hi", [2 * bins]), c("ax1c", [1])])
    x = n("Sqrt", [n("Add", [n("Pow", [real, c("two", np.float32(2))]), n("Pow", [imag, c("two2", np.float32(2))])])])
    cin = bins
    for i, stride in enumerate((1, 2, 2, 1)):
        x = n("Relu", [n("Conv", [x, c(f"enc{i}", w(hid, cin, 3)), c(f"encb{i}", w(hid))], pads=[1, 1], strides=[stride])])
        cin = hid
    last = n("Equal", [n("Gather", [n("Shape", [x]), c("m1", [-1])], axis=0), c("one", [1])])
    squeeze = helper.make_graph([helper.make_node("Squeeze", [x, c("m1b", [-1])], [p + "sq"])], p + "sq", [],
                                [vi(p + "sq", F, None)])
    keep = helper.make_graph([helper.make_node("Identity", [x], [p + "id"])], p + "id", [], [vi(p + "id", F, None)])
    x = n("If", [last], [p + "x"], then_branch=squeeze, else_branch=keep)
    unbatched = n("Not", [n("Equal", [n("Size", [n("Shape", [x])]), c("rank2", np.int64(2))])])
    batch = helper.make_graph([helper.make_node("Unsqueeze", [x, c("ax0", [0])], [p + "xb"])], p + "batch", [],
                              [vi(p + "xb", F, None)])
    same = helper.make_graph([helper.make_node("Identity", [x], [p + "xi"])], p + "same", [], [vi(p + "xi", F, None)])
    x = n("If", [unbatched], [p + "xc"], then_branch=batch, else_branch=same)
    h0 = n("Unsqueeze", [n("Gather", ["state", c("i0", np.int64(0))], axis=0), c("ax0b", [0])])
    c0 = n("Unsqueeze", [n("Gather", ["state", c("i1", np.int64(1))], axis=0), c("ax0c", [0])])
    _, hn, cn = n("LSTM", [n("Unsqueeze", [x, c("ax0d", [0])]), c("W", w(1, 4 * hid, hid)), c("R", w(1, 4 * hid, hid)),
                           c("B", w(1, 8 * hid)), "", h0, c0], [p + "Y", p + "Yh", p + "Yc"], hidden_size=hid)
    n("Concat", [hn, cn], [p + "stateN"], axis=0)
    h = n("Unsqueeze", [n("Squeeze", [hn, c("ax0e", [0])]), c("m1c", [-1])])
    y = n("Sigmoid", [n("Conv", [n("Relu", [h]), c("head", w(1, hid, 1)), c("headb", w(1))])])
    n("Squeeze", [y, c("m1d", [-1])], [p + "out"])
    return helper.make_graph(nodes, tag, [], [vi(p + "out", F, None), vi(p + "stateN", F, None)], inits)


def _silero_vad(hid=16):
    rng = np.random.default_rng(11)
    b16 = _silero_branch("16k", 64, 256, 128, hid, rng)
    b8 = _silero_branch("8k", 32, 128, 64, hid, rng)
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["output", "stateN"], then_branch=b16, else_branch=b8, name="If_0")]
    return model(nodes, [vi("input", F, ["batch", "samples"]), vi("state", F, [2, "batch", hid]), vi("sr", I64, [])],
                 [vi("output", F, ["batch", 1]), vi("stateN", F, [2, "batch", hid])],
                 [const("k16", np.int64(16000))], opset=16)


@pytest.mark.parametrize("samples,sr", [(512, 16000), (256, 8000)])
def test_silero_style_vad_with_an_lstm_in_both_branches(tmp_path, samples, sr):
    """Each branch is inferred with the compiled input: the branch not meant for it refuses its
    shapes (an LSTM X of rank 5 for 512 samples at 8 kHz). That is no compile error, as it is none
    for onnxruntime: the If runs the branch it takes, and fails naming the node if the other is
    taken with input it cannot take."""
    hid = 16
    m = _silero_vad(hid)
    path = str(tmp_path / "vad.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "vad"), input_shape={"input": [1, samples], "state": [2, 1, hid], "sr": []})
    for device in DEVICES:
        model_id = api.load_from_file(result.om_path, device)
        state = expected_state = np.zeros((2, 1, hid), np.float32)
        try:
            for step in range(3):
                x = rand(1, samples, seed=step)
                prob, state = api.execute(model_id, {"input": x, "state": state, "sr": np.array(sr)})
                eprob, expected_state = onnxruntime_outputs(path, {"input": x, "state": expected_state, "sr": np.array(sr)})
                assert prob.shape == (1, 1) and state.shape == (2, 1, hid)
                np.testing.assert_allclose(prob, eprob, rtol=1e-4, atol=1e-6)
                np.testing.assert_allclose(state, expected_state, rtol=1e-4, atol=1e-5)
            if samples == 512:  # the 8 kHz branch on 512 samples: refused at run time, as onnxruntime does
                feeds = {"input": rand(1, samples), "state": state, "sr": np.array(8000)}
                with pytest.raises(GeError, match=r"node '8k/LSTM_\d+' \(LSTM\): X has shape \(1, 1, 1, 16, 2\), rank 3"):
                    api.execute(model_id, feeds)
                with pytest.raises(Exception, match="Input X must have 3 dimensions only"):
                    onnxruntime_outputs(path, {**feeds, "state": expected_state})
        finally:
            api.unload(model_id)


def test_an_if_whose_both_branches_refuse_their_input_shapes_fails_atc_naming_the_node(tmp_path):
    m = _if_model([helper.make_node("MatMul", ["x", "x"], ["t"], name="mm_then")], "t",
                  [helper.make_node("Concat", ["x", "w"], ["e"], axis=0, name="cat_else")], "e", None,
                  [vi("w", F, [3, 2])])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(GeError, match=r"node 'mm_then' \(MatMul\)"):
        api.atc(path, str(tmp_path / "m"))
    assert not (tmp_path / "m.om").exists()


def test_greedy_decoding_loop_stops_at_end_of_sequence(tmp_path):
    """torch.jit.script's greedy decoder as exported: Loop(max_len, true) carrying the last token
    and a GRU state; the body embeds the token (Gather), steps the GRU, picks ArgMax, and its
    condition is token != eos; the tokens are the scan output."""
    rng = np.random.default_rng(3)
    vocab, hid = 12, 8
    emb = rng.standard_normal((vocab, hid)).astype(np.float32)
    W, R = (rng.standard_normal((1, 3 * hid, hid)).astype(np.float32) * 0.5 for _ in range(2))
    out_w = rng.standard_normal((hid, vocab)).astype(np.float32)
    body = helper.make_graph([
        helper.make_node("Gather", ["emb", "tok_in"], ["e"], axis=0),           # [1, hid]
        helper.make_node("Unsqueeze", ["e", "ax0"], ["seq"]),                   # [1, 1, hid]
        helper.make_node("GRU", ["seq", "W", "R", "", "", "h_in"], ["", "h_out"], hidden_size=hid),
        helper.make_node("Squeeze", ["h_out", "ax0"], ["h2"]),                  # [1, hid]
        helper.make_node("MatMul", ["h2", "out_w"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["tok_out"], axis=1, keepdims=0),  # [1]
        helper.make_node("Equal", ["tok_out", "eos"], ["is_eos"]),
        helper.make_node("Not", ["is_eos"], ["go1"]),
        helper.make_node("Squeeze", ["go1", "ax0"], ["go"]),
        helper.make_node("Identity", ["tok_out"], ["emitted"])], "step",
        [vi("i", I64, []), vi("c", B, []), vi("tok_in", I64, [1]), vi("h_in", F, [1, 1, hid])],
        [vi("go", B, []), vi("tok_out", I64, [1]), vi("h_out", F, [1, 1, hid]), vi("emitted", I64, [1])],
        [const("W", W), const("R", R), const("out_w", out_w), const("ax0", np.array([0], np.int64))])
    nodes = [helper.make_node("Loop", ["max_len", "true", "bos", "h0"], ["last", "h", "tokens"], body=body)]
    m = model(nodes, [vi("max_len", I64, []), vi("bos", I64, [1]), vi("h0", F, [1, 1, hid]), vi("eos", I64, [])],
              [vi("last", I64, [1]), vi("h", F, [1, 1, hid]), vi("tokens", I64, [None, 1])],
              [const("true", np.array(True)), const("emb", emb)])
    feeds = [{"max_len": np.array(n, np.int64), "bos": np.array([b], np.int64),
              "h0": rng.standard_normal((1, 1, hid)).astype(np.float32), "eos": np.array(e, np.int64)}
             for n, b, e in ((20, 1, 3), (20, 2, 5), (4, 0, 7), (20, 4, 0))]
    check(m, feeds, tmp_path)


# ------------------------------------------------------------------ onnx's backend node test cases
def _node_cases():
    from tests.conformance.cases import onnx_node_cases
    return {c.name: c for c in onnx_node_cases()}


CASES = ["test_if", "test_loop11", "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar",
         # functions expanded into If, Loop and Scan
         "test_affine_grid_2d_expanded", "test_affine_grid_3d_align_corners_expanded",
         "test_range_float_type_positive_delta_expanded", "test_range_int32_type_negative_delta_expanded",
         "test_linear_attention_linear_expanded", "test_linear_attention_gated_delta_expanded"]


@pytest.fixture(scope="module")
def node_cases():
    return _node_cases()


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_onnx_backend_node_case(node_cases, tmp_path, name, device):
    newest = onnx.defs.onnx_opset_version()
    case = node_cases[name]
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    for o in m.opset_import:  # the expanded functions use only ops whose meaning is the same at ge's newest opset
        if o.domain in ("", "ai.onnx"):
            o.version = min(o.version, newest)
    path = str(tmp_path / "case.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "case"))
    model_id = api.load_from_file(result.om_path, device)
    try:
        for inputs, expected in case.data_sets:
            feeds = {vin.name: x for vin, x in zip(m.graph.input, inputs)}
            got = api.execute(model_id, feeds)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.shape == np.shape(e)
                np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
    finally:
        api.unload(model_id)


# ---------------------------------------------------------------------------------------- errors
def test_scan_output_changing_shape_is_an_error_naming_the_node(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["s_in"], ["s_out"]),
                              helper.make_node("NonZero", ["x_t"], ["nz"])], "b",
                             [vi("s_in", F, [1]), vi("x_t", F, [3])], [vi("s_out", F, [1]), vi("nz", I64, [1, None])])
    m = model([helper.make_node("Scan", ["s0", "x"], ["s", "nzs"], body=body, num_scan_inputs=1, name="scan")],
              [vi("s0", F, [1]), vi("x", F, [2, 3])], [vi("s", F, [1]), vi("nzs", I64, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path)
    try:
        x = np.array([[1, 0, 1], [1, 1, 1]], np.float32)
        with pytest.raises(GeError, match=r"node 'scan' \(Scan\): scan output 0 has shape \[1, 3\] at iteration 1 "
                                          r"but \[1, 2\] at iteration 0"):
            api.execute(model_id, {"s0": np.zeros(1, np.float32), "x": x})
    finally:
        api.unload(model_id)


def test_a_failing_node_inside_a_body_names_the_loop_and_the_node(tmp_path):
    body = helper.make_graph([helper.make_node("Reshape", ["s_in", "shape"], ["s_out"], name="inner")], "b",
                             [vi("i", I64, []), vi("c", B, []), vi("s_in", F, [6])], [vi("c", B, []), vi("s_out", F, [6])])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body, name="outer")],
              [vi("M", I64, []), vi("s0", F, [6]), vi("shape", I64, [1])], [vi("s", F, [6])])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path)
    try:
        with pytest.raises(GeError, match=r"node 'outer' \(Loop\) subgraph 'body': .*'inner' \(Reshape\)"):
            api.execute(model_id, {"M": np.array(2, np.int64), "s0": np.zeros(6, np.float32),
                                   "shape": np.array([4], np.int64)})
    finally:
        api.unload(model_id)


def test_a_body_replayed_by_its_input_shapes_reads_new_values_and_names_a_failing_node(tmp_path):
    """A body run node by node (its sequence grows) is replayed by its input shapes from the third run
    with them on (runtime/body_trace.py; the second records): new captured values are read, and a
    node failing in a replay is named as in a first run."""
    body = helper.make_graph([
        helper.make_node("Gather", ["table", "idx"], ["row"], axis=0, name="g"),
        helper.make_node("Concat", ["seq", "row"], ["seq2"], axis=0), helper.make_node("Identity", ["c"], ["c2"])],
        "b", [vi("i", I64, []), vi("c", B, []), vi("seq", F, [None, 2])], [vi("c2", B, []), vi("seq2", F, [None, 2])])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body, name="outer")],
              [vi("M", I64, []), vi("s0", F, [1, 2]), vi("table", F, [5, 2]), vi("idx", I64, [1])], [vi("s", F, [None, 2])])
    feeds = [{"M": np.array(3, np.int64), "s0": rand(1, 2, seed=k), "table": rand(5, 2, seed=k + 1),
              "idx": np.array([k], np.int64)} for k in (1, 4, 1)]
    result = check(m, feeds, tmp_path, devices=["cpu"])
    model_id = api.load_from_file(result.om_path)
    try:
        api.execute(model_id, feeds[0])
        api.execute(model_id, feeds[1])
        with pytest.raises(GeError, match=r"node 'outer' \(Loop\) subgraph 'body': .*'g' \(Gather\)"):
            api.execute(model_id, dict(feeds[0], idx=np.array([7], np.int64)))
    finally:
        api.unload(model_id)


def test_a_replayed_body_step_reruns_its_bound_call_only_on_the_buffers_it_was_bound_to(tmp_path):
    """A growing state's body steps keep memos of the buffers they ran on (the carried value's two
    buffers trade places every iteration, so which one an iteration meets depends on the runs before):
    run after run, with trip counts of both parities and new values, each result is the reference's."""
    steps = [helper.make_node("Slice", ["rows", "from_last", "to_end"], ["tail"]),  # (axis 0, the last row)
             helper.make_node("Cos", ["tail"], ["row"]),
             helper.make_node("Concat", ["rows", "row"], ["rows_out"], axis=0),
             helper.make_node("Identity", ["go"], ["go_out"])]
    body = helper.make_graph(steps, "rows", [vi("n", I64, []), vi("go", B, []), vi("rows", F, [None, 4])],
                             [vi("go_out", B, []), vi("rows_out", F, [None, 4])],
                             [const("from_last", np.array([-1], np.int64)), const("to_end", np.array([99], np.int64))])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["all"], body=body)],
              [vi("M", I64, []), vi("s0", F, [1, 4])], [vi("all", F, [None, 4])])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    try:
        for run, trips in enumerate([6, 6, 6, 5, 6, 7, 6, 6, 5, 5]):
            s0 = rand(1, 4, seed=run)
            (got,) = api.execute(model_id, {"M": np.array(trips, np.int64), "s0": s0})
            expected = [s0]
            for _ in range(trips):
                expected.append(np.cos(expected[-1][-1:]))
            np.testing.assert_array_equal(got, np.concatenate(expected))
    finally:
        api.unload(model_id)


def _taped(monkeypatch) -> list:
    """The iterations each Loop run replayed from a tape (runtime/body_trace.py's run_loop) appended to
    (None: the run failed in the tape)."""
    from ge.core.runtime.body_trace import BodyTraces
    replayed, run_loop = [], BodyTraces.run_loop

    def spy(self, *args):
        replayed.append(None)
        ran = run_loop(self, *args)
        replayed[-1] = 0 if ran is None else ran[0]
        return ran
    monkeypatch.setattr(BodyTraces, "run_loop", spy)
    return replayed


def _counting_body(name="b", trip_count=True):
    """A growing state (a row a step: the last one's sine plus the iteration number), the condition
    i + 1 < stop (a captured value: where it ends depends on values), each new row a scan output;
    without a trip count, the condition alone ends it (input go: whether to start)."""
    steps = [helper.make_node("Slice", ["rows", "from_last", "to_end"], ["tail"]),
             helper.make_node("Sin", ["tail"], ["s"]), helper.make_node("Cast", ["n"], ["fn"], to=F),
             helper.make_node("Add", ["s", "fn"], ["row"]), helper.make_node("Concat", ["rows", "row"], ["rows_out"], axis=0),
             helper.make_node("Add", ["n", "one"], ["n1"]), helper.make_node("Less", ["n1", "stop"], ["go_out"])]
    body = helper.make_graph(steps, name, [vi("n", I64, []), vi("go", B, []), vi("rows", F, [None, 4])],
                             [vi("go_out", B, []), vi("rows_out", F, [None, 4]), vi("row", F, [1, 4])],
                             [const("from_last", np.array([-1], np.int64)), const("to_end", np.array([99], np.int64)),
                              const("one", np.int64(1))])
    loop = helper.make_node("Loop", ["M" if trip_count else "", "" if trip_count else "go", "s0"], ["all", "rows"],
                            body=body, name="outer")
    return model([loop], [vi("M", I64, []) if trip_count else vi("go", B, []), vi("s0", F, [None, 4]), vi("stop", I64, [])],
                 [vi("all", F, [None, 4]), vi("rows", F, [None, 1, 4])])


def _counting_reference(s0, trips: int, stop: int):
    rows, parts = [s0], []
    for n in range(trips):
        parts.append(np.sin(rows[-1][-1:]) + np.float32(n))
        rows.append(parts[-1])
        if not n + 1 < stop:
            break
    return np.concatenate(rows), np.stack(parts) if parts else np.zeros((0, 1, 4), np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_run_again_from_the_same_start_is_replayed_from_its_tape(tmp_path, monkeypatch, device):
    """A growing state's Loop run again from the start of an earlier run (the same input shapes, the
    same buffers) replays that run's calls (runtime/body_trace.py's LoopTape): it writes the iteration
    number, puts the scan outputs, stops where the condition (read from values) says, goes on past the
    tape's end; run after run, with trip counts of both parities, new values, other starting shapes and
    a timeout, each result is the reference's, bit for bit."""
    replayed = _taped(monkeypatch)
    path = str(tmp_path / "m.onnx")
    onnx.save(_counting_body(), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="s0:-1,4").om_path, device)
    plan = [(6, 99, 1), (6, 99, 1), (6, 99, 1), (6, 99, 1), (6, 99, 1), (6, 3, 1), (5, 99, 1), (6, 99, 1),
            (8, 99, 1), (8, 99, 1), (6, 99, 3), (6, 99, 3), (6, 99, 3), (6, 99, 3), (7, 99, 1), (7, 99, 1),
            (7, 99, 1), (7, 2, 1), (1, 99, 1), (0, 99, 1), (6, 99, 1), (6, 99, 1)]
    try:
        for run, (trips, stop, first) in enumerate(plan):
            s0 = rand(first, 4, seed=run)
            feeds = {"M": np.array(trips, np.int64), "s0": s0, "stop": np.array(stop, np.int64)}
            got = api.execute(model_id, feeds, timeout=600 if run % 3 == 2 else None)
            for g, e in zip(got, _counting_reference(s0, trips, stop)):
                assert g.shape == e.shape
                np.testing.assert_array_equal(g, e)
    finally:
        api.unload(model_id)
    assert sum(filter(None, replayed)) > len(plan) * 3  # (most iterations from the fifth run on came from a tape)


def test_a_taped_loop_without_a_trip_count_ends_where_its_condition_says(tmp_path, monkeypatch):
    """A Loop that only its condition ends: its tape ends earlier (the condition false sooner) or is
    run to its end and extended call by call (later); each result the reference's, bit for bit."""
    replayed = _taped(monkeypatch)
    path = str(tmp_path / "m.onnx")
    onnx.save(_counting_body(trip_count=False), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="s0:-1,4").om_path, "cpu")
    try:
        for run, (go, stop) in enumerate([(1, 5)] * 5 + [(1, 7), (1, 7), (1, 7), (1, 7), (1, 3), (0, 9), (1, 1),
                                                         (1, 7), (1, 9), (1, 9), (1, 9), (1, 9)]):
            s0 = rand(1, 4, seed=run)
            got = api.execute(model_id, {"go": np.array(bool(go)), "s0": s0, "stop": np.array(stop, np.int64)})
            for g, e in zip(got, _counting_reference(s0, (1 << 30) * go, stop)):
                assert g.shape == e.shape
                np.testing.assert_array_equal(g, e)
    finally:
        api.unload(model_id)
    assert 3 in replayed and 7 in replayed and 9 in replayed


def test_a_loop_whose_state_grows_past_its_tapes_capacity_runs_on_call_by_call(tmp_path, monkeypatch):
    """A tape holds at most as many iterations as the impl cache holds impls: a longer run goes on
    iterating the body call by call, and each result stays the reference's."""
    replayed = _taped(monkeypatch)
    path = str(tmp_path / "m.onnx")
    onnx.save(_counting_body(), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="s0:-1,4").om_path, "cpu",
                                  impl_cache_size=16)
    try:
        for run, trips in enumerate([4, 4, 4, 4, 4, 40, 40, 40, 40, 40, 40, 4]):
            s0 = rand(1, 4, seed=run)
            got = api.execute(model_id, {"M": np.array(trips, np.int64), "s0": s0, "stop": np.array(99, np.int64)})
            for g, e in zip(got, _counting_reference(s0, trips, 99)):
                np.testing.assert_array_equal(g, e)
    finally:
        api.unload(model_id)
    assert 0 < max(filter(None, replayed)) <= 16, replayed


def test_a_taped_loop_names_a_failing_node_and_a_scan_output_that_changes_shape(tmp_path, monkeypatch):
    """A Loop replayed from its tape fails as a call-by-call run does: a node failing on new values
    (an index out of range) names the Loop, its body and the node; a scan output whose shape changes
    at an iteration is the Loop's error, the same message run after run."""
    replayed = _taped(monkeypatch)
    body = helper.make_graph([
        helper.make_node("Gather", ["table", "idx"], ["row"], axis=0, name="g"),
        helper.make_node("Concat", ["seq", "row"], ["seq2"], axis=0), helper.make_node("Identity", ["c"], ["c2"]),
        helper.make_node("Identity", ["seq2"], ["grown"])],
        "b", [vi("i", I64, []), vi("c", B, []), vi("seq", F, [None, 2])],
        [vi("c2", B, []), vi("seq2", F, [None, 2]), vi("grown", F, [None, 2])])
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["s", "all"], body=body, name="outer")],
              [vi("M", I64, []), vi("s0", F, [1, 2]), vi("table", F, [5, 2]), vi("idx", I64, [1])],
              [vi("s", F, [None, 2]), vi("all", F, [None, None, 2])])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, "cpu")
    feeds = {"M": np.array(1, np.int64), "s0": rand(1, 2), "table": rand(5, 2, seed=1), "idx": np.array([2], np.int64)}
    try:
        for _ in range(6):  # one iteration: its scan output has one shape
            (s, grown) = api.execute(model_id, feeds)
            np.testing.assert_array_equal(grown[0], s)
        assert replayed[-1] == 1
        with pytest.raises(GeError, match=r"node 'outer' \(Loop\) subgraph 'body': .*'g' \(Gather\)"):
            api.execute(model_id, dict(feeds, idx=np.array([7], np.int64)))
        for _ in range(6):  # two: the second's scan output is one row longer
            with pytest.raises(GeError, match=r"node 'outer' \(Loop\): scan output 0 has shape \[3, 2\] at iteration 1"):
                api.execute(model_id, dict(feeds, M=np.array(2, np.int64)))
        assert replayed[-1] is None  # (the last runs failed in their tapes)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", DEVICES)
def test_an_input_only_scans_read_is_read_where_the_caller_holds_it(tmp_path, device):
    """On cpu, an input only Loop and Scan nodes read is passed to them as the caller's array when it is
    the array of the last call or larger than 1 MiB (HybridContext._lent: no copy in): it is read as it
    is at each call (changed in place between calls), never written, and no output shares its memory;
    a strided view and a new small array are copied in as before. Each result numpy's, bit for bit."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Relu", ["acc2"], ["y"])],
                             "cumsum", [vi("acc", F, [64]), vi("x", F, [64])], [vi("acc2", F, [64]), vi("y", F, [64])])
    m = model([helper.make_node("Scan", ["a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1)],
              [vi("a0", F, [64]), vi("xs", F, ["steps", 64])], [vi("a", F, [64]), vi("ys", F, ["steps", 64])])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="a0:64;xs:-1,64").om_path, device)

    def expect(a0, xs):
        acc, ys = a0, []
        for x in xs:
            acc = acc + x
            ys.append(np.maximum(acc, np.float32(0)))
        return acc, np.stack(ys) if ys else np.zeros((0, 64), np.float32)
    a0, xs, big = rand(64), rand(50, 64, seed=1), rand(5000, 64, seed=2)  # (big: 1.28 MB)
    calls = [(a0, xs), (a0, xs), "xs changed in place", (a0, xs), (a0, big), (a0, big.copy()), (a0, big[::2]),
             (a0, xs[:7].copy()), (a0, xs[:0].copy()), (a0, xs[:0].copy())]
    try:
        for call in calls:
            if isinstance(call, str):
                xs *= -0.5
                continue
            given = [x.copy() for x in call]
            a, ys = api.execute(model_id, {"a0": call[0], "xs": call[1]})
            for got, want in zip((a, ys), expect(*given)):
                np.testing.assert_array_equal(got, want)
                assert not any(np.shares_memory(got, x) for x in call)
            for x, before in zip(call, given):
                np.testing.assert_array_equal(x, before)  # (never written)
    finally:
        api.unload(model_id)


def test_shape_ranges_with_control_flow_are_refused_naming_the_node(tmp_path):
    path = str(tmp_path / "m.onnx")
    m = _loop_model(True, True)
    for vin in m.graph.input:
        if vin.name in ("s0", "w"):
            vin.type.tensor_type.shape.dim[1].dim_param = "n"
    onnx.save(m, path)
    with pytest.raises(GeError, match=r"node 'Loop_0' \(Loop\): control flow has no shape range to plan"):
        api.atc(path, str(tmp_path / "m"), input_shape="s0:2,1~8;w:2,1~8;M:;cond:;lim:")
    assert not (tmp_path / "m.om").exists()
    with pytest.raises(GeError, match=r"node 'Loop_0' \(Loop\): control flow runs in the hybrid executor, not in gears"):
        api.atc(path, str(tmp_path / "m"), input_shape="s0:2,-1;w:2,-1;M:;cond:;lim:",
                dynamic={"dynamic_dims": "3,3;5,5"})
    assert not (tmp_path / "m.om").exists()


def test_an_op_without_kernel_in_a_body_fails_atc_naming_it(tmp_path):
    body = helper.make_graph([helper.make_node("Foo", ["s"], ["s2"], domain="com.example", name="foo"),
                              helper.make_node("Identity", ["c"], ["c2"])], "b",
                             [vi("i", I64, []), vi("c", B, []), vi("s", F, [2])], [vi("c2", B, []), vi("s2", F, [2])])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="loop")],
              [vi("M", I64, []), vi("x", F, [2])], [vi("y", F, [2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(GeError, match=r"1 node\(s\) use an op ge has no kernel for .*: 'loop.body/foo' \(com.example::Foo\)"):
        api.atc(path, str(tmp_path / "m"))
    assert not (tmp_path / "m.om").exists()


def test_precheck_checks_the_ops_of_subgraphs(tmp_path):
    body = helper.make_graph([helper.make_node("Foo", ["s"], ["s2"], domain="com.example", name="foo"),
                              helper.make_node("Identity", ["c"], ["c2"])], "b",
                             [vi("i", I64, []), vi("c", B, []), vi("s", F, [2])], [vi("c2", B, []), vi("s2", F, [2])])
    ok_body = helper.make_graph([helper.make_node("Neg", ["s"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"])], "b",
                                [vi("i", I64, []), vi("c", B, []), vi("s", F, [2])], [vi("c2", B, []), vi("s2", F, [2])])
    for name, b in (("bad", body), ("good", ok_body)):
        m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=b, name="loop")],
                  [vi("M", I64, []), vi("x", F, [2])], [vi("y", F, [2])])
        m.opset_import.append(helper.make_opsetid("com.example", 1))
        path = str(tmp_path / f"{name}.onnx")
        onnx.save(m, path)
        (entry,) = api.precheck(path)["op_list"]
        if name == "bad":
            assert entry["result"] == "failed"
            assert entry["reason"] == "'loop.body/foo' (com.example::Foo) has no kernel"
        else:
            assert entry["result"] == "success" and "control flow" in entry["reason"]


# ------------------------------------------------------------------------------------ ge inspect
def test_ge_inspect_shows_the_subgraphs(tmp_path):
    import json

    from click.testing import CliRunner

    from ge.cli.main import cli
    path = str(tmp_path / "loop.onnx")
    onnx.save(_loop_model(True, True), path)
    om = api.atc(path, str(tmp_path / "loop")).om_path
    runner = CliRunner()
    compiled = runner.invoke(cli, ["atc", "--model", path, "--output", str(tmp_path / "again"), "--framework", "5",
                                   "--verbose"])
    assert compiled.exit_code == 0, compiled.output
    assert "1 control-flow subgraph(s)" in compiled.output
    shown = runner.invoke(cli, ["inspect", om])
    assert shown.exit_code == 0, shown.output
    assert "Control-flow subgraphs" in shown.output
    assert "root: Loop_0 (Loop).body" in shown.output and "w*[2, 3]" in shown.output
    d = json.loads(runner.invoke(cli, ["inspect", om, "--json"]).output)
    (body,) = d["subgraphs"]
    assert (body["node"], body["op_type"], body["attribute"], body["captures"]) == ("Loop_0", "Loop", "body", 2)
    assert [t["name"] for t in body["inputs"]] == ["i", "c", "s_in", "w", "lim"]
    assert [t["name"] for t in body["outputs"]] == ["c_out", "s_out", "sq"]
    assert body["steps"] == ["submodel 0"] and body["clusters"][0]["kind"] == "KNOWN"


def _outputs_native_and_otherwise(om: str, feeds_list, monkeypatch, otherwise) -> list:
    """Each feed's outputs (twice): with the bound bodies iterated natively (asserted, where the native
    kernels are built: csrc/loop.c ran), then with `otherwise(monkeypatch)` done, where none is."""
    from ge.core.kernels.native import native as native_kernels
    from ge.core.runtime.hybrid_context import BoundBody
    native, built = BoundBody.native_loop, []
    monkeypatch.setattr(BoundBody, "native_loop", lambda self, *a: built.append(native(self, *a)) or built[-1])
    results = []
    for k in range(2):
        if k:
            otherwise(monkeypatch)
        model_id = api.load_from_file(om, "cpu")
        try:
            results.append([api.execute(model_id, feeds) for feeds in feeds_list for _ in range(2)])
        finally:
            api.unload(model_id)
        assert any(built) == (native_kernels() is not None and k == 0)
        built.clear()
    return results


def _python_iterations(monkeypatch) -> None:
    from ge.core.runtime.hybrid_context import BoundBody
    monkeypatch.setattr(BoundBody, "native_loop", lambda self, *a: None)


def _numpy_bodies(monkeypatch) -> None:
    """Loop and Scan bodies' kernels built as any other's (numpy's ufuncs for their elementwise ops)."""
    from ge.core.runtime import hybrid
    monkeypatch.setattr(hybrid, "_loop_bodies", lambda dyn: set())


def _assert_same_bytes(a: list, b: list) -> None:
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tobytes() == v.tobytes()


def test_a_native_loop_equals_python_iterations_bit_for_bit(tmp_path, monkeypatch):
    """A body of native calls runs its iterations in one native call (csrc/loop.c): a carried value
    passed through (its output read at its input: copied onto itself), a scan output that is a state,
    one of 64 KB (its stacked result doubles past 16 iterations: the loop runs in chunks), trip counts
    0, 1, 16, 17, 40: onnxruntime's results, and exactly those of the Python iterations."""
    rng = np.random.default_rng(5)
    body = helper.make_graph([
        helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Add", ["a", "b"], ["z"]),
        helper.make_node("Tanh", ["z"], ["h2"]), helper.make_node("Identity", ["c"], ["c2"]),
        helper.make_node("Identity", ["p"], ["p2"]), helper.make_node("Identity", ["h2"], ["y"]),
        helper.make_node("Identity", ["p"], ["q"])], "cell",
        [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, 8]), vi("p", F, [16384])],
        [vi("c2", B, []), vi("h2", F, [1, 8]), vi("p2", F, [16384]), vi("y", F, [1, 8]), vi("q", F, [16384])],
        [const("W", rng.standard_normal((8, 8)).astype(np.float32) / 3), const("b", rng.standard_normal(8).astype(np.float32))])
    m = model([helper.make_node("Loop", ["M", "", "h0", "p0"], ["hN", "pN", "ys", "qs"], body=body)],
              [vi("M", I64, []), vi("h0", F, [1, 8]), vi("p0", F, [16384])],
              [vi("hN", F, [1, 8]), vi("pN", F, [16384]), vi("ys", F, [None, 1, 8]), vi("qs", F, [None, 16384])])
    feeds = [{"M": np.array(n, np.int64), "h0": rand(1, 8, seed=n), "p0": rand(16384, seed=n + 1)} for n in (40, 0, 1, 16, 17)]
    om = check(m, feeds, tmp_path, devices=["cpu"]).om_path
    _assert_same_bytes(*_outputs_native_and_otherwise(om, feeds, monkeypatch, _python_iterations))


@pytest.mark.parametrize("in_dirs,out_dirs,out_axes", [([0, 0], [0, 0], [0, 0]), ([1, 0], [0, 1], [0, 0]),
                                                       ([0, 1], [1, 1], [1, -1])])
def test_a_native_scan_equals_python_iterations_bit_for_bit(tmp_path, monkeypatch, in_dirs, out_dirs, out_axes):
    """An RNN step over a scan input, a second one passed through, each forward or reversed, its outputs stacked forward, reversed
    or on an inner axis (a strided slice: that copy is no block, the Python iterations run): 13 and 1
    steps onnxruntime's results, and 0, 1 and 13 exactly those of the Python iterations (onnxruntime
    refuses 0 steps)."""
    rng = np.random.default_rng(6)
    body = helper.make_graph([
        helper.make_node("MatMul", ["x", "U"], ["xu"]), helper.make_node("MatMul", ["h", "W"], ["hw"]),
        helper.make_node("Add", ["xu", "hw"], ["s"]), helper.make_node("Add", ["s", "b"], ["t"]),
        helper.make_node("Tanh", ["t"], ["h2"]), helper.make_node("Identity", ["h2"], ["y"]),
        helper.make_node("Identity", ["v"], ["v2"])], "step",
        [vi("h", F, [1, 8]), vi("x", F, [1, 4]), vi("v", F, [1, 8])], [vi("h2", F, [1, 8]), vi("y", F, [1, 8]), vi("v2", F, [1, 8])],
        [const("U", rng.standard_normal((4, 8)).astype(np.float32) / 2),
         const("W", rng.standard_normal((8, 8)).astype(np.float32) / 3), const("b", rng.standard_normal(8).astype(np.float32))])
    m = model([helper.make_node("Scan", ["h0", "xs", "vs"], ["hN", "ys", "v2s"], body=body, num_scan_inputs=2,
                                scan_input_directions=in_dirs, scan_output_directions=out_dirs, scan_output_axes=out_axes)],
              [vi("h0", F, [1, 8]), vi("xs", F, ["n", 1, 4]), vi("vs", F, ["n", 1, 8])],
              [vi("hN", F, [1, 8]), vi("ys", F, None), vi("v2s", F, None)])
    feeds = [{"h0": rand(1, 8, seed=n), "xs": rand(n, 1, 4, seed=n + 1), "vs": rand(n, 1, 8, seed=n + 2)} for n in (13, 1, 0)]
    om = check(m, feeds[:2], tmp_path, devices=["cpu"], input_shape="xs:-1,1,4;vs:-1,1,8").om_path
    _assert_same_bytes(*_outputs_native_and_otherwise(om, feeds, monkeypatch, _python_iterations))


def test_a_loop_bodys_elementwise_ops_take_native_calls_with_numpys_bits(tmp_path, monkeypatch):
    """A Scan body's float32 Add and Sub of one shape and Relu are prepared native calls (Backend.iterated:
    the iteration runs in one native call) giving numpy's bits, -0.0, NaN and infinities included; the
    same model with the body's kernels built as any other's (numpy's ufuncs) gives the same bytes."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Relu", ["acc2"], ["y"]),
                              helper.make_node("Sub", ["x", "acc"], ["d"]), helper.make_node("Relu", ["d"], ["e"])],
                             "cumsum", [vi("acc", F, [6]), vi("x", F, [6])], [vi("acc2", F, [6]), vi("y", F, [6]), vi("e", F, [6])])
    m = model([helper.make_node("Scan", ["a0", "xs"], ["a", "ys", "es"], body=body, num_scan_inputs=1)],
              [vi("a0", F, [6]), vi("xs", F, [9, 6])], [vi("a", F, [6]), vi("ys", F, [9, 6]), vi("es", F, [9, 6])])
    xs = rand(9, 6)
    xs[0] = [-0.0, 0.0, np.nan, np.inf, -np.inf, -1e-45]
    xs[3, :3] = [-0.0, -np.inf, np.inf]
    feeds = {"a0": np.array([-0.0, -0.0, 1, 2, -3, 0.0], np.float32), "xs": xs}
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    _assert_same_bytes(*_outputs_native_and_otherwise(api.atc(path, str(tmp_path / "m")).om_path, [feeds], monkeypatch,
                                                      _numpy_bodies))


def test_a_loop_counting_to_its_condition_runs_natively_with_numpys_bits(tmp_path, monkeypatch):
    """An exported Loop's condition, i + 1 < stop (int64 Add, Less), and float comparisons (Equal,
    Greater, LessOrEqual, GreaterOrEqual against a scalar: NaN false, -0.0 == 0.0) in a body of native
    calls: onnxruntime's results, and the bytes of the same body on numpy's ufuncs, the trip count or
    the condition ending it."""
    body = helper.make_graph([
        helper.make_node("Add", ["i", "one"], ["i1"]), helper.make_node("Less", ["i1", "stop"], ["c2"]),
        helper.make_node("Mul", ["h", "k"], ["h2"]), helper.make_node("Equal", ["h2", "z"], ["eq"]),
        helper.make_node("Greater", ["h2", "z"], ["gt"]), helper.make_node("LessOrEqual", ["z", "h2"], ["le"]),
        helper.make_node("GreaterOrEqual", ["h2", "h"], ["ge"]), helper.make_node("Sub", ["i", "big"], ["j"])],
        "count", [vi("i", I64, []), vi("c", B, []), vi("h", F, [5])],
        [vi("c2", B, []), vi("h2", F, [5]), vi("eq", B, [5]), vi("gt", B, [5]), vi("le", B, [5]), vi("ge", B, [5]), vi("j", I64, [])],
        [const("one", np.int64(1)), const("k", np.float32(-1.5)), const("z", np.float32(0)),
         const("big", np.int64(-(1 << 63) + 2))])  # i - big wraps past int64's top, as numpy's
    m = model([helper.make_node("Loop", ["M", "go", "h0"], ["hN", "eqs", "gts", "les", "ges", "js"], body=body)],
              [vi("M", I64, []), vi("go", B, []), vi("stop", I64, []), vi("h0", F, [5])],
              [vi("hN", F, [5]), vi("eqs", B, [None, 5]), vi("gts", B, [None, 5]), vi("les", B, [None, 5]),
               vi("ges", B, [None, 5]), vi("js", I64, [None])])
    h0 = np.array([-0.0, 0.0, np.nan, 1e-30, -2], np.float32)
    feeds = [{"M": np.array(m_, np.int64), "go": np.array(True), "stop": np.array(s, np.int64), "h0": h0}
             for m_, s in ((50, 7), (3, 99), (30, 1), (0, 9))]
    om = check(m, feeds, tmp_path, devices=["cpu"]).om_path
    _assert_same_bytes(*_outputs_native_and_otherwise(om, feeds, monkeypatch, _numpy_bodies))
