"""If, Loop and Scan kernels on Python bodies: the ops' semantics (what each iteration receives,
what the node gives) and their errors, apart from any compiled subgraph."""
import numpy as np
import pytest

from ge.core.model.errors import GeError
from ge.core.model.ir import CAPTURES
from ge.core.kernels import lookup


def kernel(op, n_inputs, n_outputs, opset=17, captures=0, **attrs):
    cls = lookup(op, "", opset)
    return cls({CAPTURES: captures, **attrs}, [None] * n_inputs, opset=opset, name="n", num_outputs=n_outputs)


def test_if_runs_one_branch_with_the_captured_values():
    k = kernel("If", 3, 1, captures=2)
    calls = []
    then = lambda xs: calls.append(("then", xs)) or [xs[0] + xs[1]]
    other = lambda xs: calls.append(("else", xs)) or [xs[0] - xs[1]]
    a, b = np.float32(5), np.float32(2)
    assert k.execute([np.array([True]), a, b], [then, other]) == [7]
    assert k.execute([np.array(False), a, b], [then, other]) == [3]
    assert [c[0] for c in calls] == ["then", "else"]


def test_loop_passes_iteration_number_and_condition_and_stacks_scan_outputs():
    k = kernel("Loop", 4, 2, captures=1)  # M, cond, one carried value, one captured
    seen = []

    def body(xs):
        i, cond, s, w = xs
        seen.append((int(i), bool(cond)))
        s2 = s + w
        return [np.array(s2.sum() < 10), s2, s2 * 2]

    last, scans = k.execute([np.array(5, np.int64), np.array(True), np.zeros(2, np.float32), np.ones(2, np.float32)],
                            [body])
    assert seen == [(i, True) for i in range(5)]
    np.testing.assert_array_equal(last, [5, 5])
    np.testing.assert_array_equal(scans, [[2, 2], [4, 4], [6, 6], [8, 8], [10, 10]])

    # the condition stops it first (sum reaches 10 at s = [5, 5]): no trip count
    k2 = kernel("Loop", 4, 2, captures=1)
    last, scans = k2.execute([None, np.array(True), np.zeros(2, np.float32), np.full(2, 2.5, np.float32)], [body])
    np.testing.assert_array_equal(last, [5, 5])
    np.testing.assert_array_equal(scans, [[5, 5], [10, 10]])


def test_loop_without_iterations_gives_the_initial_values_and_empty_scans():
    k = kernel("Loop", 3, 2)
    s0 = np.arange(3, dtype=np.float32)
    last, scans = k.execute([np.array(0, np.int64), None, s0], [lambda xs: 1 / 0],
                            templates=[(np.bool_, ()), (np.float32, (3,)), (np.int32, (4, 2))])
    np.testing.assert_array_equal(last, s0)
    assert scans.shape == (0, 4, 2) and scans.dtype == np.int32


def test_scan_axes_and_directions_follow_numpy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    k = kernel("Scan", 2, 2, num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1],
               scan_output_axes=[-1], scan_output_directions=[0])
    state, ys = k.execute([np.zeros(3, np.float32), x], [lambda xs: [xs[0] + xs[1], xs[0] + xs[1]]])
    expected = np.cumsum(x[:, ::-1], axis=1)  # columns from the last, the sums stacked along the last axis
    np.testing.assert_array_equal(ys, expected)
    np.testing.assert_array_equal(state, expected[:, -1])


def test_scan_8_has_a_batch_axis_and_sequence_lens():
    k = kernel("Scan", 3, 2, opset=8, num_scan_inputs=1, directions=[0])
    xs = np.ones((2, 3, 1), np.float32)
    state, ys = k.execute([np.array([3, 1], np.int64), np.zeros((2, 1), np.float32), xs],
                          [lambda v: [v[0] + v[1], v[0] + v[1]]])
    np.testing.assert_array_equal(state, [[3], [1]])
    np.testing.assert_array_equal(ys[:, :, 0], [[1, 2, 3], [1, 0, 0]])  # zeros past the short item's length


@pytest.mark.parametrize("op,n_in,n_out,attrs,xs,message", [
    ("If", 2, 1, {}, None, r"node 'n' \(If\): takes one input \(cond\), got 2"),
    ("Loop", 1, 1, {}, None, r"node 'n' \(Loop\): takes at least 2 inputs \(M, cond\), got 1"),
    ("Scan", 2, 2, {"num_scan_inputs": 0}, None, r"num_scan_inputs must be >= 1, got 0"),
    ("Scan", 3, 2, {"num_scan_inputs": 2}, [np.zeros(2, np.float32), np.zeros((3, 2)), np.zeros((4, 2))],
     r"scan inputs have different lengths \[3, 4\]"),
    ("Scan", 2, 2, {"num_scan_inputs": 1, "scan_input_directions": [2]}, [np.zeros(2), np.zeros((3, 2))],
     r"scan_input_directions \[2\] must list 1 values, each 0 \(forward\) or 1 \(reverse\)"),
    ("Scan", 2, 2, {"num_scan_inputs": 1, "scan_input_axes": [2]}, [np.zeros(2), np.zeros((3, 2))],
     r"scan_input_axes\[0\] = 2 is out of range for rank 2"),
])
def test_errors_name_the_node_and_what_is_wrong(op, n_in, n_out, attrs, xs, message):
    with pytest.raises(GeError, match=message):
        k = kernel(op, n_in, n_out, **attrs)
        k.execute(xs, [lambda v: [v[0], v[0]]])


def test_scan_output_changing_shape_and_a_cond_of_many_values_are_errors():
    k = kernel("Scan", 2, 2, num_scan_inputs=1)
    grow = iter(range(1, 10))
    with pytest.raises(GeError, match=r"scan output 0 has shape \[2\] at iteration 1 but \[1\] at iteration 0"):
        k.execute([np.zeros(1), np.zeros((3, 1))], [lambda v: [v[0], np.zeros(next(grow))]])
    loop = kernel("Loop", 2, 0)
    with pytest.raises(GeError, match=r"node 'n' \(Loop\): input M \(trip count\) must hold one value, got shape \[2\]"):
        loop.execute([np.array([1, 2]), None], [lambda v: [v[1]]])


def test_infer_and_compute_say_control_flow_runs_its_subgraphs():
    k = kernel("Loop", 2, 0)
    with pytest.raises(GeError, match="control flow: its output shapes come from running its subgraphs"):
        k.infer()


class BoundPython:
    """A body as the runtime binds a static one: fixed input views (None where `read` says the body
    does not read that input), output views, run() on what the views hold; called, it is the plain
    call. `runs` and `calls` count the two ways it ran."""

    def __init__(self, fn, ins, outs, read=None):
        self.fn, self.ins, self.outs, self.runs, self.calls = fn, ins, outs, 0, 0
        self.read = read or [True] * len(ins)

    def __call__(self, xs):
        self.calls += 1
        return [np.array(y) for y in self.fn(xs)]

    def bound(self):
        views = [np.zeros(s, d) if r else None for (d, s), r in zip(self.ins, self.read)]
        outs = [np.zeros(s, d) for d, s in self.outs]
        body = self

        class Bound:
            inputs, outputs = views, outs

            @staticmethod
            def run():
                body.runs += 1
                xs = [np.full(s, np.nan if np.dtype(d).kind == "f" else 0, d) if v is None else v.copy()
                      for v, (d, s) in zip(views, body.ins)]  # (an unread input is garbage)
                for o, y in zip(outs, body.fn(xs)):
                    o[...] = y
        return Bound


def test_scan_on_a_bound_body_equals_calls_with_axes_directions_and_unread_state():
    """Two scan inputs (axis 1 reversed, axis 0), a state the body reads and one it does not,
    scan outputs along the last axis reversed and axis 0, a captured value: the bound loop gives what
    a call per step gives."""
    x1 = np.arange(12, dtype=np.float32).reshape(3, 4)  # 4 steps of columns of 3
    x2 = np.arange(8, dtype=np.float32).reshape(4, 2) * 0.5  # 4 steps of rows of 2
    w = np.float32(3)

    def fn(xs):
        acc, _, a, b, k = xs
        acc2 = acc + a * k
        return [acc2, b * 2, acc2 - 1, b + acc2[:2]]
    spec = ([(np.float32, (3,)), (np.float32, (2,)), (np.float32, (3,)), (np.float32, (2,)), (np.float32, ())],
            [(np.float32, (3,)), (np.float32, (2,)), (np.float32, (3,)), (np.float32, (2,))])
    attrs = dict(num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                 scan_output_axes=[-1, 0], scan_output_directions=[1, 0])
    xs = [np.ones(3, np.float32), np.full(2, 7, np.float32), x1, x2, np.array(w)]
    bound = BoundPython(fn, *spec, read=[True, False, True, True, True])
    fast = kernel("Scan", 5, 4, captures=1, **attrs).execute(xs, [bound])
    plain = kernel("Scan", 5, 4, captures=1, **attrs).execute(xs, [lambda v: fn(v)])
    assert bound.runs == 4 and bound.calls == 0
    for f, p in zip(fast, plain):
        assert f.shape == p.shape and f.dtype == p.dtype
        np.testing.assert_array_equal(f, p)
    assert fast[2].shape == (3, 4) and fast[3].shape == (4, 2)


def test_loop_on_a_bound_body_equals_calls_early_exit_growth_and_unread_carried():
    """Iteration number, a condition ending it before the trip count, a carried value the body does
    not read, 40 scan parts (past the first room of 16): the bound loop gives what calls give; a
    state whose shape would change runs call by call."""
    def fn(xs):
        i, _, h, _, w = xs
        h2 = np.tanh(h * w + np.float32(i))
        return [np.array(i < 39), h2, h2.sum(keepdims=True), h2[0] + np.float32(i)]
    spec = ([(np.int64, ()), (np.bool_, ()), (np.float32, (3,)), (np.float32, (1,)), (np.float32, (3,))],
            [(np.bool_, ()), (np.float32, (3,)), (np.float32, (1,)), (np.float32, ())])
    xs = [np.array(100, np.int64), np.array(True), np.full(3, 0.5, np.float32), np.zeros(1, np.float32),
          np.array([0.5, -0.25, 0.125], np.float32)]
    bound = BoundPython(fn, *spec, read=[True, False, True, False, True])
    fast = kernel("Loop", 5, 3, captures=1).execute(xs, [bound])
    plain = kernel("Loop", 5, 3, captures=1).execute(xs, [lambda v: [np.array(y) for y in fn(v)]])
    assert bound.runs == 40 and bound.calls == 0
    for f, p in zip(fast, plain):
        assert f.shape == p.shape and f.dtype == p.dtype
        np.testing.assert_array_equal(f, p)
    assert fast[2].shape == (40,)

    none = BoundPython(fn, *spec, read=[True, False, True, False, True])
    for trip in (0, -3):  # no iteration: the initial values, empty scans of the per-step shape
        h, extra, ys = kernel("Loop", 5, 3, captures=1).execute([np.array(trip, np.int64), *xs[1:]], [none],
                                                                 templates=[(np.bool_, ()), *spec[1][1:]])
        assert none.runs == none.calls == 0 and ys.shape == (0,) and ys.dtype == np.float32
        np.testing.assert_array_equal(h, xs[2])

    grows = BoundPython(lambda v: [np.array(True), np.concatenate([v[2], v[2]])], [(np.int64, ()), (np.bool_, ()),
                        (np.float32, (1,))], [(np.bool_, ()), (np.float32, (2,))])
    (seq,) = kernel("Loop", 3, 1).execute([np.array(3, np.int64), None, np.ones(1, np.float32)], [grows])
    assert grows.runs == 0 and grows.calls == 3 and seq.shape == (8,)
