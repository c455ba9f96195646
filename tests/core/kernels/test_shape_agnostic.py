"""Every kernel class flagged shape_agnostic (found in the registry, so a wrong flag on a future class
fails here): one instance built for one shape runs on inputs of other shapes and broadcasts of the
same dtypes and ranks, with the output shape its agnostic_output_shape gives, and writes
exactly what compute() of a kernel built for those shapes gives (to rounding, for products and
softmax, whose built kernels take native plans). A class with shape inputs (Slice's bounds) is built
without their values and given them; shapes an instance cannot serve are refused (ValueError)."""
import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels.ops.elementwise import Binary, Unary, Variadic
from ge.core.kernels.registry import kernel_classes

AGNOSTIC = sorted((cls for cls in kernel_classes() if cls.__dict__.get("shape_agnostic")),
                  key=lambda c: (c.domain, c.op_type, c.since))

#: per number of inputs: the build shapes, then other shapes of the same ranks (new sizes, broadcasts)
SHAPES = {1: [[(2, 3, 4)], [(5, 7, 6)], [(1, 1, 1)], [(3, 0, 2)]],
          2: [[(2, 3, 4), (2, 3, 4)], [(5, 1, 6), (1, 7, 6)], [(1, 1, 1), (3, 2, 2)], [(4, 3, 1), (1, 3, 5)]],
          3: [[(2, 3, 4)] * 3, [(5, 1, 6), (1, 7, 6), (5, 7, 1)], [(1, 1, 1), (3, 2, 2), (1, 2, 1)]]}
F32, I32, BOOL, F64, I64 = (np.dtype(t) for t in (np.float32, np.int32, np.bool_, np.float64, np.int64))
#: classes with shape inputs: per shape list, their values ({input index: array})
VALUES = {
    "Slice": [{1: [1], 2: [3], 3: [1], 4: [1]}, {1: [-4], 2: [100], 3: [1], 4: [1]}, {1: [5], 2: [0], 3: [1], 4: [-2]},
              {1: [0], 2: [-1], 3: [-1], 4: [1]}],
    "Range": [{0: 0, 1: 5, 2: 1}, {0: 3, 1: 10, 2: 2}, {0: 10, 1: 3, 2: -3}, {0: 5, 1: 5, 2: 1}],
}
#: products of one row each: (A, B) shape lists; B is given as [..., N, K] to FusedMatMul (perm_b), with a mask
PRODUCTS = [[(1, 4, 1, 8), (1, 4, 8, 5)], [(1, 4, 1, 8), (1, 4, 8, 9)], [(2, 3, 1, 16), (2, 3, 16, 7)],
            [(1, 4, 1, 8), (1, 1, 8, 3)]]


def spec(cls) -> tuple[list, list, dict]:
    """(dtypes of the inputs, shape lists [build, others...], attributes) for a flagged class."""
    op = cls.op_type
    if op == "Slice":
        return [F32, I64, I64, I64, I64], [[s, (1,), (1,), (1,), (1,)] for s in [(4, 6, 5), (5, 9, 6), (3, 7, 2), (2, 3, 4)]], {}
    if op == "Range":
        return [I64] * 3, [[(), (), ()]] * 4, {}
    if op == "MatMul":
        return [F32, F32], PRODUCTS, {}
    if op == "FusedMatMul":
        return [F32] * 3, [[a, b[:-2] + (b[-1], b[-2]), (1, 1, 1, b[-1])] for a, b in PRODUCTS], \
            {"alpha": 0.125, "perm_b": [0, 1, 3, 2]}
    if op == "Softmax":
        return [F32], [[(2, 3, 7)], [(5, 1, 9)], [(1, 1, 1)], [(3, 2, 300)]], {}
    if op == "Where":
        return [BOOL, F32, F32], SHAPES[3], {}
    if op == "Clip":  # min and max are scalars
        return [F32, F32, F32], [[s, (), ()] for (s,) in SHAPES[1]], {}
    if op == "CastLike":  # input 1 only gives the dtype
        return [F32, F64], [[s, (n + 1,)] for n, (s,) in enumerate(SHAPES[1])], {}
    if op == "Cast":
        return [F32], SHAPES[1], {"to": 6}  # to int32
    if op == "Mod":
        return [I32, I32], SHAPES[2], {}
    if op == "Pow":
        return [F32, F32], SHAPES[2], {}
    if op == "Shape":  # (its output's length is the rank's, its values the shape's)
        return [F32], SHAPES[1], {"start": 1}
    if op == "Transpose":
        return [F32], SHAPES[1], {"perm": [2, 0, 1]}
    if op == "Concat":  # two inputs, alike but along the axis
        return [F32, F32], [[(2, 3, 4), (2, 5, 4)], [(5, 1, 6), (5, 7, 6)], [(1, 1, 1), (1, 2, 1)],
                            [(3, 0, 2), (3, 4, 2)], [(1, 600, 512), (1, 2, 512)]], {"axis": 1}
    for base, n in ((Variadic, 3), (Binary, 2), (Unary, 1)):
        if issubclass(cls, base):
            dtype = next(t for t in (F32, I32, BOOL) if t in cls.types)
            return [dtype] * n, SHAPES[n], {}
    pytest.fail(f"{cls.__name__} is flagged shape_agnostic but this test has no inputs for it: add them to spec()")


def arrays(dtypes, shapes, seed, values=None):
    rng = np.random.default_rng(seed)
    out = []
    for i, (dt, shape) in enumerate(zip(dtypes, shapes)):
        if values and i in values:
            out.append(np.array(values[i], dt).reshape(shape))
            continue
        if dt.kind == "b":
            out.append(rng.random(shape) < 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(1, 9, shape).astype(dt))
        else:
            out.append((rng.standard_normal(shape) * 2).astype(dt))
    return out


def build(cls, attrs, dtypes, shapes):
    metas = [Meta(dt, tuple(s)) for dt, s in zip(dtypes, shapes)]
    return cls(attrs, metas, [None] * len(metas), opset=max(cls.since, 17), name="n")


@pytest.mark.parametrize("cls", AGNOSTIC, ids=lambda c: f"{c.domain + '.' if c.domain else ''}{c.op_type}-{c.since}")
def test_one_instance_serves_every_shape(cls):
    dtypes, shape_lists, attrs = spec(cls)
    values = VALUES.get(cls.op_type)
    kernel = build(cls, attrs, dtypes, shape_lists[0])
    assert kernel.workspace_nbytes() == 0 or cls.agnostic_without_workspace
    for seed, shapes in enumerate(shape_lists):
        xs = arrays(dtypes, shapes, seed, values and values[seed])
        expected = build(cls, attrs, dtypes, shapes).compute(*xs)[0]
        shape = kernel.agnostic_output_shape(shapes, {i: xs[i] for i in values[seed]}) if values else \
            kernel.agnostic_output_shape(shapes)
        y = np.empty(shape, expected.dtype)
        with np.errstate(all="ignore"):
            kernel.run(xs, [y], None)
        assert y.shape == expected.shape and y.dtype == expected.dtype
        if cls.op_type in ("MatMul", "FusedMatMul", "Softmax"):
            np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("op, attrs, shapes", [
    ("MatMul", {}, [(1, 4, 3, 8), (1, 4, 8, 5)]),  # several rows a product: planned per shape
    ("FusedMatMul", {"perm_b": [0, 1, 3, 2]}, [(1, 4, 2, 8), (1, 4, 5, 8)]),
    ("FusedMatMul", {"activation": "Gelu"}, [(1, 4, 1, 8), (1, 4, 8, 9)]),  # the Gelu is planned per shape
    ("Softmax", {}, [(2, 0, 7)]),
])
def test_shapes_an_instance_cannot_serve_are_refused(op, attrs, shapes):
    cls = next(c for c in AGNOSTIC if c.op_type == op)
    first = [(1, 4, 1, 8), (1, 4, 8, 5)] if op != "Softmax" else [(2, 3, 7)]
    if attrs.get("perm_b"):
        first = [(1, 4, 1, 8), (1, 4, 5, 8)]
    kernel = build(cls, attrs, [F32] * len(first), first)
    with pytest.raises(ValueError):
        kernel.agnostic_output_shape(shapes)


def test_a_slice_built_with_its_bounds_slices_other_shapes_by_them():
    """A Slice whose bounds are constants (folded into its plan) still slices another input shape by
    them, not by the plan's clamped indices."""
    metas = [Meta(F32, (4, 6)), Meta(I64, (1,)), Meta(I64, (1,))]
    consts = [None, np.array([1]), np.array([-1])]
    kernel = next(c for c in AGNOSTIC if c.op_type == "Slice")({}, metas, consts, opset=13, name="s")
    x = np.arange(4 * 9, dtype=np.float32).reshape(4, 9)
    y = np.empty(kernel.agnostic_output_shape([(4, 9), (1,), (1,)]), np.float32)
    kernel.run([x, consts[1], consts[2]], [y], None)
    np.testing.assert_array_equal(y, x[1:-1])


def test_the_flag_is_widened_beyond_the_arithmetic_ops():
    names = {c.op_type for c in AGNOSTIC}
    assert {"Sigmoid", "Exp", "Sqrt", "Where", "Pow", "Max", "Cast", "Clip", "Equal", "LeakyRelu", "Shape", "Transpose",
            "Concat", "Slice", "Range", "MatMul", "FusedMatMul", "Softmax"} <= names
    assert not {"PRelu", "LogSoftmax", "LayerNormalization", "Erf"} & names  # they read their built shapes
