"""Every pool against onnxruntime over the window geometry: ceil_mode, kernels larger than the input
(EfficientNet's AvgPool2d(320, ceil_mode=True) over a 2x2 or 7x7 map), pads, dilations,
count_include_pad, auto_pad, 1-3 spatial dims; each case through ge's infer(), compute() and the
planned run(), on the native and the numpy plans. Where onnxruntime refuses a window (pads not
smaller than the kernel, no window at all), ge refuses naming the node.

Where ge follows the ONNX spec rather than onnxruntime (not compared here): auto_pad SAME with
dilations (onnxruntime sizes the padding by the undilated kernel) and SAME whose padding would be
negative (a stride larger than the kernel: onnxruntime's MaxPool refuses, its AveragePool reads off
centre; ge pads 0, TensorFlow's SAME)."""
import itertools

import numpy as np
import onnxruntime as ort
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .conftest import run_onnxruntime

pytestmark = pytest.mark.usefixtures("native_and_numpy")
ort.set_default_logger_severity(4)  # the refusals this grid provokes are expected: no log lines for them

#: (op, extra attributes, outputs, opset): LpPool has dilations and ceil_mode from opset 18
POOLS = [
    ("MaxPool", {}, 1, 19),
    ("MaxPool", {}, 2, 19),  # with Indices: the per-position plan
    ("AveragePool", {"count_include_pad": 0}, 1, 19),
    ("AveragePool", {"count_include_pad": 1}, 1, 19),
    ("LpPool", {"p": 2}, 1, 19),
    ("LpPool", {"p": 3}, 1, 19),
]


def _ge(op, x, attrs, n_outputs, opset):
    """ge's outputs of one node: infer() gives their metas, compute() and the planned run() (outputs
    pre-filled with garbage) must agree."""
    kernel_cls = lookup(op, opset=opset)
    kernel = kernel_cls(attrs, [Meta(x.dtype, x.shape)], opset=opset, name="pool", num_outputs=n_outputs)
    metas = kernel.infer()
    computed = [np.asarray(y) for y in kernel.compute(x)]
    planned = kernel_cls(attrs, [Meta(x.dtype, x.shape)], outputs=metas, opset=opset, name="pool",
                         num_outputs=n_outputs).load()
    ys = [np.full(m.shape, 77, m.dtype) for m in metas]
    ws = np.zeros(planned.workspace_nbytes(), np.uint8) if planned.workspace_nbytes() else None
    planned.run([x], ys, ws)
    for c, y in zip(computed, ys):
        np.testing.assert_array_equal(c, y)
    assert [(y.dtype, y.shape) for y in ys] == [(m.dtype, tuple(m.shape)) for m in metas]
    return ys


_ONNXRUNTIME: dict = {}  # a case's outputs or refusal, computed once for the native and the numpy run of a grid


def _onnxruntime(op, x, attrs, n_outputs, opset, seed) -> list | str:
    """onnxruntime's outputs of a case, or the first line of its refusal."""
    key = (op, x.shape, repr(sorted(attrs.items())), n_outputs, opset, seed)
    if key not in _ONNXRUNTIME:
        try:
            _ONNXRUNTIME[key] = run_onnxruntime(op, {"x": x}, attrs, n_outputs, opset, ())
        except Exception as e:
            _ONNXRUNTIME[key] = str(e).splitlines()[0]
    return _ONNXRUNTIME[key]


def _compare(op, extra, n_outputs, opset, shape, attrs, seed):
    """None when ge agrees with onnxruntime on this case, else what differs."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    attrs = {**attrs, **extra}
    expected = _onnxruntime(op, x, attrs, n_outputs, opset, seed)
    if isinstance(expected, str):  # onnxruntime refuses: so must ge, naming the node
        try:
            _ge(op, x, attrs, n_outputs, opset)
        except GraphError as g:
            return None if str(g).startswith("node 'pool' ") else f"error without the node: {g}"
        return f"onnxruntime refuses ({expected[-90:]}), ge does not"
    try:
        got = _ge(op, x, attrs, n_outputs, opset)
    except GraphError as g:
        return f"ge refuses: {g}"
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            return f"shape {g.shape}, onnxruntime {e.shape}"
        if not np.allclose(g, e, rtol=1e-5, atol=1e-5):
            return f"values differ by {np.max(np.abs(g.astype(np.float64) - e)):.3g}"
    return None


def _run_grid(op, extra, n_outputs, opset, cases):
    failures = []
    for k, (shape, attrs) in enumerate(cases):
        why = _compare(op, extra, n_outputs, opset, shape, attrs, k)
        if why:
            failures.append(f"{shape} {attrs}: {why}")
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + "\n".join(failures[:20])


def _cases_1d():
    """Every combination on one axis: inputs shorter than the kernel, windows past the end padding,
    dilated windows over no input, pads up to the kernel (onnxruntime's limit)."""
    cases = []
    for n, k, s, d, (pb, pe), ceil in itertools.product([1, 2, 5], [1, 2, 3, 6], [1, 2, 4], [1, 2],
                                                        [(0, 0), (1, 0), (0, 1), (1, 1), (2, 2)], [0, 1]):
        cases.append(((1, 2, n), {"kernel_shape": [k], "strides": [s], "dilations": [d], "pads": [pb, pe],
                                  "ceil_mode": ceil}))
    for ap, n, k, s, ceil in itertools.product(["VALID", "SAME_UPPER", "SAME_LOWER"], [1, 2, 5, 7], [1, 2, 3, 4],
                                               [1, 2, 3], [0, 1]):
        if ap != "VALID" and k < s:  # SAME with negative padding: see the module's docstring
            continue
        cases.append(((2, 1, n), {"kernel_shape": [k], "strides": [s], "auto_pad": ap, "ceil_mode": ceil}))
    return cases


def _cases_nd(dims, count, seed):
    """`count` random windows over `dims` spatial axes, each axis drawn as _cases_1d's."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        n = rng.choice([1, 2, 3, 7], dims)
        k = rng.choice([1, 2, 3, 5, 9], dims)
        s = rng.choice([1, 2, 3, 9], dims)
        d = rng.choice([1, 1, 2], dims)
        pads = [int(rng.integers(0, kk)) for kk in k] + [int(rng.integers(0, kk)) for kk in k]
        cases.append(((1, 3, *map(int, n)), {"kernel_shape": list(map(int, k)), "strides": list(map(int, s)),
                                             "dilations": list(map(int, d)), "pads": pads,
                                             "ceil_mode": int(rng.integers(0, 2))}))
    return cases


EFFICIENTNET = [  # Hugging Face's EfficientNet pooler: AvgPool2d(hidden_dim, ceil_mode=True), stride = kernel
    ((1, 4, 2, 2), {"kernel_shape": [320, 320], "strides": [320, 320], "ceil_mode": 1}),
    ((2, 4, 7, 7), {"kernel_shape": [320, 320], "strides": [320, 320], "ceil_mode": 1}),
    ((1, 4, 7, 7), {"kernel_shape": [320, 320], "strides": [320, 320], "ceil_mode": 0}),
    ((1, 4, 7, 5), {"kernel_shape": [9, 9], "strides": [9, 9], "ceil_mode": 1}),
    ((1, 4, 7, 5), {"kernel_shape": [9, 9], "strides": [4, 4], "ceil_mode": 1}),
]


@pytest.mark.parametrize("op,extra,n_outputs,opset", POOLS, ids=lambda v: str(v))
def test_pools_1d_match_onnxruntime(op, extra, n_outputs, opset):
    _run_grid(op, extra, n_outputs, opset, _cases_1d())


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("op,extra,n_outputs,opset", POOLS, ids=lambda v: str(v))
def test_pools_2d_3d_match_onnxruntime(op, extra, n_outputs, opset, dims):
    _run_grid(op, extra, n_outputs, opset, _cases_nd(dims, 60 if dims == 2 else 30, seed=dims))


@pytest.mark.parametrize("op,extra,n_outputs,opset", POOLS, ids=lambda v: str(v))
def test_kernels_larger_than_the_map_pool_what_they_cover(op, extra, n_outputs, opset):
    _run_grid(op, extra, n_outputs, opset, EFFICIENTNET)


def test_efficientnet_pool_is_the_mean_of_the_map():
    x = np.random.default_rng(0).standard_normal((2, 4, 7, 7)).astype(np.float32)
    (y,) = _ge("AveragePool", x, {"kernel_shape": [320, 320], "strides": [320, 320], "ceil_mode": 1}, 1, 17)
    np.testing.assert_allclose(y, x.mean(axis=(2, 3), keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(1, 3, 1), (2, 3, 7), (1, 2, 1, 1), (1, 4, 2, 2), (2, 3, 7, 5), (1, 2, 1, 1, 1),
                                   (1, 2, 3, 1, 4)])
def test_global_pools_match_onnxruntime(op, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    (expected,) = run_onnxruntime(op, {"x": x}, {}, 1, 19, ())
    (got,) = _ge(op, x, {}, 1, 19)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8])
def test_a_max_window_without_input_gives_onnxruntime_lowest_value_and_index(dtype):
    """Windows dilated over a one-element input: the middle one reads it, the outer ones only padding."""
    x = np.array([[[5]]], dtype)
    attrs = {"kernel_shape": [2], "dilations": [2], "pads": [1, 1]}
    # float16: onnxruntime's float32 result rounded, as ge computes float16 (its own float16 MaxPool
    # depends on the CPU: -inf where it computes in float32, float16's lowest -65504 on aarch64)
    wide = x.astype(np.float32) if dtype == np.float16 else x
    with np.errstate(over="ignore"):  # (float32's lowest is -inf in float16)
        expected = run_onnxruntime("MaxPool", {"x": wide}, attrs, 1, 19, ())[0].astype(dtype)
    (got,) = _ge("MaxPool", x, attrs, 1, 19)
    np.testing.assert_array_equal(got, expected)
    if dtype == np.float32:
        y, ind = _ge("MaxPool", x, attrs, 2, 19)
        ey, eind = run_onnxruntime("MaxPool", {"x": x}, attrs, 2, 19, ())
        np.testing.assert_array_equal(y, ey)
        np.testing.assert_array_equal(ind, eind)


@pytest.mark.parametrize("attrs,message", [
    ({"kernel_shape": [3, 3], "pads": [3, 0, 0, 0]}, r"node 'pool' \(MaxPool\): pads \[3, 0, 0, 0\] must be smaller than "
                                                     r"kernel_shape \[3, 3\]"),
    ({"kernel_shape": [10, 1]}, r"node 'pool' \(MaxPool\): kernel extent 10 is larger than the padded input 8 on "
                                r"spatial axis 0 by 2, twice the stride 1 or more: no window fits"),
    ({"kernel_shape": [1, 5], "dilations": [1, 4], "strides": [1, 4], "ceil_mode": 1},
     r"kernel extent 17 is larger than the padded input 8 on spatial axis 1 by 9, twice the stride 4 or more"),
])
def test_windows_onnxruntime_refuses_are_refused_naming_the_node(attrs, message):
    with pytest.raises(GraphError, match=message):
        lookup("MaxPool", opset=19)(attrs, [Meta(np.dtype(np.float32), (1, 3, 8, 8))], name="pool", opset=19)
    with pytest.raises(Exception):
        run_onnxruntime("MaxPool", {"x": np.zeros((1, 3, 8, 8), np.float32)}, attrs, 1, 19, ())
