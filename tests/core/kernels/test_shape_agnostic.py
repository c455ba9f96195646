"""Every kernel class flagged shape_agnostic (found in the registry, so a wrong flag on a future class
fails here): one instance built for one shape runs on inputs of other shapes and broadcasts of the
same dtypes and ranks, with the output shape its agnostic_output_shape gives, and writes
exactly what compute() of a kernel built for those shapes gives."""
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
F32, I32, BOOL, F64 = (np.dtype(t) for t in (np.float32, np.int32, np.bool_, np.float64))


def spec(cls) -> tuple[list, list, dict]:
    """(dtypes of the inputs, shape lists [build, others...], attributes) for a flagged class."""
    op = cls.op_type
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


def arrays(dtypes, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for dt, shape in zip(dtypes, shapes):
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
    kernel = build(cls, attrs, dtypes, shape_lists[0])
    assert kernel.workspace_nbytes() == 0 and len(kernel.infer()) == 1
    out_dtype = kernel.infer()[0].dtype
    for seed, shapes in enumerate(shape_lists):
        xs = arrays(dtypes, shapes, seed)
        expected = build(cls, attrs, dtypes, shapes).compute(*xs)[0]
        y = np.empty(kernel.agnostic_output_shape(shapes), out_dtype)
        with np.errstate(all="ignore"):
            kernel.run(xs, [y], None)
        assert y.shape == expected.shape and y.dtype == expected.dtype
        np.testing.assert_array_equal(y, expected)


def test_the_flag_is_widened_beyond_the_arithmetic_ops():
    names = {c.op_type for c in AGNOSTIC}
    assert {"Sigmoid", "Exp", "Sqrt", "Where", "Pow", "Max", "Cast", "Clip", "Equal", "LeakyRelu", "Shape", "Transpose",
            "Concat"} <= names
    assert not {"PRelu", "Softmax", "LayerNormalization", "Erf"} & names  # they read their built shapes
