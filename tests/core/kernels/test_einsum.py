import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(2)


def rand(shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 7, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 4, 8), (2, 3, 5, 8)]),  # attention scores
    ("bhij,bhjd->bhid", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),  # diagonal
    ("ii", [(4, 4)]),  # trace
    ("ij->", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 5)]),  # broadcast batch dims
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("ij...,jk...->ik...", [(2, 3, 4), (3, 5, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("ab, bc -> ac", [(2, 3), (3, 4)]),  # spaces
    ("nchw,oc->nohw", [(2, 3, 4, 5), (6, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("...", [(2, 3)]),
    ("i...->...", [(3, 2, 2)]),
    ("Bij,BjK->BiK", [(2, 3, 4), (2, 4, 2)]),  # upper-case labels
]


@pytest.mark.parametrize("equation,shapes", CASES)
def test_einsum(check_op, equation, shapes):
    inputs = {f"x{i}": rand(s, np.float32) for i, s in enumerate(shapes)}
    check_op("Einsum", inputs, {"equation": equation}, opset=12, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("equation,shapes", [CASES[0], CASES[3], CASES[7], CASES[11], CASES[14]])
def test_einsum_dtypes(check_op, dtype, equation, shapes):
    inputs = {f"x{i}": rand(s, dtype) for i, s in enumerate(shapes)}
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else dict(rtol=1e-6, atol=1e-6)
    check_op("Einsum", inputs, {"equation": equation}, opset=13, **tol)


def test_einsum_consts(check_op):
    check_op("Einsum", {"x": rand((2, 3, 4), np.float32), "w": rand((4, 6), np.float32)},
             {"equation": "bsd,df->bsf"}, consts=("w",), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation,shapes,match", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "label 'j' has sizes 4 and 5"),
    ("ij,jk->ik", [(3, 4)], "2 operand"),
    ("ijk->ik", [(3, 4)], "rank 2"),
    ("ij->iz", [(3, 4)], "output label 'z'"),
    ("ij->ii", [(3, 3)], "repeats a label"),
    ("i1->i", [(3, 3)], "not a letter"),
    ("....i->i", [(3, 3)], "malformed ellipsis"),
])
def test_einsum_errors(equation, shapes, match):
    metas = [Meta(np.dtype(np.float32), s) for s in shapes]
    with pytest.raises(GraphError, match=match):
        lookup("Einsum", opset=12)({"equation": equation}, metas, name="e")


def test_einsum_rejects_mixed_types():
    metas = [Meta(np.dtype(np.float32), (2, 2)), Meta(np.dtype(np.float64), (2, 2))]
    with pytest.raises(GraphError, match="input 1 'Inputs' is float64 and input 0 'Inputs' is float32; Einsum-12 takes one type T"):
        lookup("Einsum", opset=12)({"equation": "ij,jk"}, metas, name="e")
