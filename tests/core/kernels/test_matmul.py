import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)
TOL = dict(rtol=1e-4, atol=1e-5)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every case through both plans


@pytest.fixture(autouse=True)
def small_batches_native(monkeypatch):
    """The test products are small: take the native batch plan for every size, as big ones do."""
    from ge.core.kernels.ops import matmul_native
    monkeypatch.setattr(matmul_native, "BATCH_MIN_MACS", 0)


@pytest.mark.parametrize("consts", [(), ("b",)])
@pytest.mark.parametrize("sa,sb", [
    ((3, 4), (4, 5)),
    ((1, 2048), (2048, 10)),
    ((2, 3, 4), (4, 5)),
    ((2, 7, 3, 4), (4, 6)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((3, 4), (2, 4, 5)),
    ((4,), (4, 5)),
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((1, 1), (1, 1)),
    ((5, 0), (0, 3)),
])
def test_matmul_shapes(check_op, sa, sb, consts):
    check_op("MatMul", {"a": f32(*sa), "b": f32(*sb)}, consts=consts, **TOL)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_matmul_dtypes(check_op, dtype):
    a = (rng.standard_normal((2, 3, 4)) * 5).astype(dtype)
    b = (rng.standard_normal((4, 5)) * 5).astype(dtype)
    check_op("MatMul", {"a": a, "b": b})


def test_matmul_errors():
    k = lookup("MatMul")
    f = np.dtype(np.float32)
    with pytest.raises(GraphError, match=r"node 'm' \(MatMul\).*do not match"):
        k({}, [Meta(f, (3, 4)), Meta(f, (5, 6))], name="m")
    with pytest.raises(GraphError, match="do not broadcast"):
        k({}, [Meta(f, (2, 3, 4)), Meta(f, (3, 4, 5))], name="m")
    with pytest.raises(GraphError, match="input 1 'B' is float64 and input 0 'A' is float32; MatMul-13 takes one type T"):
        k({}, [Meta(f, (3, 4)), Meta(np.dtype(np.float64), (4, 5))], name="m")


GEMM = [
    ((3, 4), (4, 5), (5,), {}),
    ((4, 3), (4, 5), (5,), {"transA": 1}),
    ((3, 4), (5, 4), (5,), {"transB": 1}),
    ((4, 3), (5, 4), (3, 5), {"transA": 1, "transB": 1}),
    ((3, 4), (4, 5), (3, 1), {"alpha": 0.5}),
    ((3, 4), (4, 5), (1, 5), {"beta": 2.0}),
    ((3, 4), (4, 5), (), {"alpha": -1.5, "beta": 0.25}),
    ((3, 4), (4, 5), (1,), {"beta": 0.0}),
    ((1, 2048), (1000, 2048), (1000,), {"transB": 1}),
    ((3, 4), (4, 5), None, {}),
    ((3, 4), (4, 5), None, {"alpha": 3.0, "transB": 0}),
    # few rows: the native GEMV (odd K and N: the vector tails and the blocks of 4 weight rows)
    ((1, 37), (13, 37), (13,), {"transB": 1}),
    ((3, 37), (37, 13), (1, 13), {}),
    ((7, 131), (70, 131), (70,), {"transB": 1}),
    ((2, 5), (5, 3), None, {}),
]


@pytest.mark.parametrize("consts", [(), ("b", "c")])
@pytest.mark.parametrize("sa,sb,sc,attrs", GEMM)
def test_gemm(check_op, sa, sb, sc, attrs, consts):
    # weights scaled like a trained layer's, so K=2048 sums stay well inside float32 tolerance
    inputs = {"a": f32(*sa), "b": f32(*sb) / np.float32(np.sqrt(max(sb)))}
    if sc is not None:
        inputs["c"] = f32(*sc)
    check_op("Gemm", inputs, attrs, consts=tuple(n for n in consts if n in inputs), **TOL)


def test_few_rows_take_the_native_gemv():
    from ge.core.kernels.ops.matmul_native import NativeGemv, NativeProduct
    f = np.dtype(np.float32)
    for rows, plan in ((1, NativeGemv), (7, NativeGemv), (8, NativeProduct)):
        k = lookup("Gemm")({"transB": 1}, [Meta(f, (rows, 40)), Meta(f, (9, 40))], [None, f32(9, 40)], name="g")
        assert isinstance(k.native, plan) == (k.backend.lib is not None)


def test_gemm_opset_11_optional_c(check_op):
    check_op("Gemm", {"a": f32(3, 4), "b": f32(4, 5)}, {"alpha": 2.0}, opset=11, **TOL)


def test_gemm_errors():
    k = lookup("Gemm")
    f = np.dtype(np.float32)
    with pytest.raises(GraphError, match=r"node 'g' \(Gemm\).*do not match"):
        k({}, [Meta(f, (3, 4)), Meta(f, (5, 6))], name="g")
    with pytest.raises(GraphError, match="does not broadcast"):
        k({}, [Meta(f, (3, 4)), Meta(f, (4, 6)), Meta(f, (4,))], name="g")
    with pytest.raises(GraphError, match="2-D"):
        k({}, [Meta(f, (2, 3, 4)), Meta(f, (4, 6))], name="g")


# ----------------------------------------------------------------------------------------------
# ge::FusedMatMul (passes.fuse_matmul): transposed views, alpha, C
# ----------------------------------------------------------------------------------------------
def _fused(shapes, attrs, consts=()):
    from ge.core.kernels.fused import GE_DOMAIN
    arrays = [f32(*s) for s in shapes]
    metas = [Meta(a.dtype, a.shape) for a in arrays]
    values = [a if i in consts else None for i, a in enumerate(arrays)]
    return lookup("FusedMatMul", GE_DOMAIN, 1)(attrs, metas, values, name="f").load(), arrays


def _reference(arrays, attrs):
    a, b = arrays[:2]
    a = a.transpose(attrs["perm_a"]) if "perm_a" in attrs else a
    b = b.transpose(attrs["perm_b"]) if "perm_b" in attrs else b
    y = attrs.get("alpha", 1.0) * (a.astype(np.float64) @ b.astype(np.float64))
    for c in arrays[2:]:
        y = y + c
    if attrs.get("activation") == "Gelu":
        from math import erf, sqrt
        y = 0.5 * y * (1 + np.vectorize(erf)(y / sqrt(2)))
    return y.transpose(attrs["perm_y"]) if "perm_y" in attrs else y


FUSED = [  # (shapes, attrs, constant inputs)
    ([(1, 8, 2, 16), (1, 8, 2, 16), (1, 1, 1, 8)], {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.25}, ()),
    ([(1, 2, 8, 8), (1, 8, 2, 16)], {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}, ()),
    ([(2, 8, 32), (32, 24), (24,)], {}, (1, 2)),      # one GEMM over the rows, constant bias
    ([(2, 8, 32), (32, 24), (24,), (2, 8, 24)], {}, (1, 2)),  # and a residual
    ([(2, 8, 32), (24, 32), (24,)], {"perm_b": [1, 0]}, (1, 2)),  # a constant weight stored transposed
    ([(2, 8, 32), (32, 40), (40,)], {"activation": "Gelu"}, (1, 2)),  # BERT's intermediate: Gelu(x W + b)
    ([(1, 9, 32), (32, 24), (24,)], {"perm_a": [1, 0, 2]}, (1, 2)),  # seq-first attention's QKV projection
    ([(2, 9, 32), (32, 24), (24,)], {"perm_a": [1, 0, 2]}, (1, 2)),  # the same, rows not one stride: a copy
    ([(3, 5), (5, 4)], {"activation": "Gelu"}, ()),  # Gelu without a native plan
    ([(3, 5), (5, 4), (3, 4)], {"alpha": -2.0}, ()),
    ([(4, 6, 5), (5, 3)], {"perm_y": [0, 2, 1]}, ()),
    ([(2, 4, 5), (5, 3)], {"perm_y": [2, 0, 1]}, ()),  # Y written as column-major matrices
    # computed operands (the native batch plan): attention with 3 heads, its mask per batch item, a residual
    ([(2, 7, 3, 40), (2, 7, 3, 40), (2, 1, 1, 7)], {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.3}, ()),
    ([(2, 3, 7, 7), (2, 7, 3, 40)], {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}, ()),
    ([(2, 3, 9, 33), (2, 3, 33, 17), (2, 3, 9, 17)], {"activation": "Gelu"}, ()),
    ([(3, 9, 33), (1, 33, 17)], {"alpha": 2.0}, ()),  # B broadcast over the batch
    ([(3, 9, 33), (1, 33, 17), (9, 1)], {}, ()),  # an addend per row: the numpy plan
    # a decoding step (one row): Q K^T over 37 past keys with a constant mask, P V, a residual on the GEMV
    ([(1, 1, 3, 20), (1, 37, 3, 20), (1, 37)], {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.3}, (2,)),
    ([(1, 3, 1, 37), (1, 37, 3, 20), (1, 3, 1, 20)], {"perm_b": [0, 2, 1, 3], "activation": "Gelu"}, ()),
    ([(1, 1, 40), (40, 24), (1, 1, 24)], {}, (1,)),
]


@pytest.mark.parametrize("shapes,attrs,consts", FUSED)
def test_fused_matmul(shapes, attrs, consts):
    k, arrays = _fused(shapes, attrs, consts)
    want = _reference(arrays, attrs)
    (meta,) = k.infer()
    assert meta.shape == want.shape and meta.dtype == np.float32
    y = np.full(want.shape, 77, np.float32)
    k.run(arrays, [y], np.empty(k.workspace_nbytes(), np.uint8))
    np.testing.assert_allclose(y, want, **TOL)
    np.testing.assert_allclose(k.compute(*arrays)[0], want, **TOL)


def test_attention_products_take_the_native_batch_plan():
    from ge.core.kernels.ops.matmul_native import NativeBatch
    for shapes, attrs in [([(1, 128, 4, 64), (1, 128, 4, 64), (1, 1, 1, 128)],
                           {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.125}),
                          ([(1, 4, 128, 128), (1, 128, 4, 64)], {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]})]:
        k, arrays = _fused(shapes, attrs)
        assert isinstance(k.native, NativeBatch) == (k.backend.lib is not None)
        y = np.empty(k.infer()[0].shape, np.float32)
        k.run(arrays, [y], np.empty(k.workspace_nbytes(), np.uint8))
        np.testing.assert_allclose(y, _reference(arrays, attrs), rtol=1e-4, atol=1e-4)


def test_one_row_products_take_the_native_plans():
    """At one row (a decoding step) the batch plan reads B in place whatever the product's size, a
    constant mask included, and a residual rides on the packed GEMV."""
    from ge.core.kernels.ops.matmul_native import NativeBatch, NativeGemv
    for shapes, attrs, consts, plan in [
            ([(1, 1, 4, 64), (1, 129, 4, 64), (1, 129)], {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1]}, (2,),
             NativeBatch),
            ([(1, 4, 1, 129), (1, 129, 4, 64)], {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}, (), NativeBatch),
            ([(1, 1, 256), (256, 256), (1, 1, 256)], {}, (1,), NativeGemv)]:
        k, arrays = _fused(shapes, attrs, consts)
        assert isinstance(k.native, plan) == (k.backend.lib is not None)
        y = np.empty(k.infer()[0].shape, np.float32)
        k.run(arrays, [y], np.empty(k.workspace_nbytes(), np.uint8))
        np.testing.assert_allclose(y, _reference(arrays, attrs), rtol=1e-4, atol=1e-4)


def test_fused_matmul_run_does_not_allocate():
    import tracemalloc
    k, arrays = _fused([(1, 128, 4, 64), (1, 128, 4, 64), (1, 1, 1, 128)],
                       {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.125})
    y = np.empty(k.infer()[0].shape, np.float32)
    ws = np.empty(k.workspace_nbytes(), np.uint8)  # the native plan's packing scratch (the numpy plan's: none)
    k.run(arrays, [y], ws)
    tracemalloc.start()
    k.run(arrays, [y], ws)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < y.nbytes // 4


def test_fused_matmul_errors():
    with pytest.raises(GraphError, match="perm_a=.*last axis"):
        _fused([(4, 5, 6), (5, 3)], {"perm_a": [2, 0, 1]})
    with pytest.raises(GraphError, match="perm_y=.*last axis"):
        _fused([(2, 4, 5), (5, 3)], {"perm_y": [1, 2, 0]})
    with pytest.raises(GraphError, match="does not broadcast"):
        _fused([(3, 5), (5, 4), (3, 5)], {})
    with pytest.raises(GraphError, match="rank >= 2"):
        _fused([(5,), (5, 4)], {})
