"""externalize (ATC --external_weight): which weights leave the OM, file names, offsets, dedup,
remapped task arguments, and the tiny-constants rule."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ge.core.compile.build import build
from ge.core.compile.external_weights import externalize
from ge.core.model.errors import FormatError, GeError
from ge.core.model.ge_model import FILE_CONSTANT, WEIGHT, WEIGHT_ID
from ge.core.model.ir import Graph, Node, Value
from ge.core.model.weight_files import INLINE_LIMIT
from ge.formats.om import om_bytes, read_om

F32 = np.dtype(np.float32)
RNG = np.random.default_rng(1)
BIG = RNG.standard_normal((16, 16)).astype(np.float32)  # 1024 B: exactly the limit, goes out
OTHER = RNG.standard_normal((16, 16)).astype(np.float32)
SMALL = RNG.standard_normal(255).astype(np.float32)[:16]  # 64 B: stays inline
SHAPE = np.array([16, 16], np.int64)  # a shape vector: inline


def model(name="net"):
    """y = ((x @ a) @ a2 + small) @ other, reshaped by a constant shape; a2 is a copy of a."""
    nodes = [Node("MatMul", ["x", "a"], ["h"], name="mm1"), Node("MatMul", ["h", "a2"], ["h2"], name="mm2"),
             Node("Add", ["h2", "small"], ["h3"], name="add"), Node("MatMul", ["h3", "other"], ["h4"], name="mm3"),
             Node("Reshape", ["h4", "shape"], ["y"], name="reshape")]
    values = {n: Value(n, F32, (16, 16)) for n in ("x", "h", "h2", "h3", "h4", "y")}
    g = Graph(name=name, nodes=nodes, inputs=["x"], outputs=["y"], values=values,
              initializers={"a": BIG, "a2": BIG.copy(), "small": SMALL, "other": OTHER, "shape": SHAPE})
    return build(g)


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


def test_mode_0_is_the_model_itself():
    m = model()
    assert externalize(m, 0) == (m, [])


def test_unknown_mode():
    with pytest.raises(GeError, match=r"--external_weight=3 is not supported; choose 0 \(inline \(in the OM\)\), "
                                      r"1 \(one file per weight\), 2 \(one combined file\)"):
        externalize(model(), 3)


def test_mode_1_one_file_per_distinct_weight():
    m, plans = externalize(model(), 1)
    by_name = {w.name: w for w in m.weights}
    assert {p.name for p in plans} == {f"weight_{sha(BIG)}", f"weight_{sha(OTHER)}"}
    assert by_name["a"].file == by_name["a2"].file == f"weight_{sha(BIG)}"  # identical weights share one file
    assert by_name["a"].allocation == by_name["a2"].allocation != WEIGHT_ID
    for w in (by_name["a"], by_name["other"]):
        assert (w.offset, w.file_offset) == (0, 0) and w.sha256 == w.file[len("weight_"):]
    for name in ("small", "shape"):
        assert by_name[name].allocation == WEIGHT_ID and by_name[name].file == "" and by_name[name].nbytes < INLINE_LIMIT
    files = m.weight_files
    assert [(f.kind, f.size) for f in files] == [(FILE_CONSTANT, 1024)] * 2
    assert {p.name: p.nbytes for p in plans} == {f.file: f.size for f in files}
    assert m.attrs["external_weight"] == 1 and m.attrs["external_weight_bytes"] == 2048
    # the inline blob now holds only the small constants, and the task arguments follow the weights
    assert m.allocations[WEIGHT_ID].size == len(m.weight_data) == m.attrs["weight_size"] == 128
    blob = bytes(m.weight_data)
    assert blob[by_name["small"].offset:by_name["small"].offset + 64] == SMALL.tobytes()
    mm1 = next(t for t in m.tasks if t.node == "mm1")
    assert (mm1.inputs[1].allocation, mm1.inputs[1].offset) == (by_name["a"].allocation, 0)


def test_mode_2_one_combined_file_with_aligned_slots():
    m, (plan,) = externalize(model("resnet"), 2)
    assert plan.name == "resnet_weight_combined" and plan.nbytes == 512 * 2 + 1024
    assert [(off, s) for off, s, _ in plan.pieces] == [(0, sha(BIG)), (1024, sha(OTHER))]
    (f,) = m.weight_files
    assert (f.file, f.size) == (plan.name, plan.nbytes)
    offsets = {w.name: w.offset for w in m.weights if w.file}
    assert offsets == {"a": 0, "a2": 0, "other": 1024} and all(o % 512 == 0 for o in offsets.values())
    assert all(bytes(data) == arr.tobytes() for (_, _, data), arr in zip(plan.pieces, (BIG, OTHER)))


def test_a_model_of_tiny_constants_only_has_no_files():
    g = Graph(name="t", nodes=[Node("Add", ["x", "c"], ["y"], name="add")], inputs=["x"], outputs=["y"],
              values={n: Value(n, F32, (4,)) for n in "xy"}, initializers={"c": np.ones(4, np.float32)})
    m, plans = externalize(build(g), 2)
    assert plans == [] and m.weight_files == [] and m.attrs["external_weight"] == 2


def test_model_name_must_make_a_plain_file_name():
    with pytest.raises(FormatError, match="model name 'a/b' cannot name a combined weight file"):
        externalize(model("a/b"), 2)


@pytest.mark.parametrize("mode", [1, 2])
def test_externalized_model_round_trips_through_the_om(mode):
    m, _ = externalize(model(), mode)
    r = read_om(om_bytes(m))
    assert r.allocations == m.allocations and r.weights == m.weights and r.tasks == m.tasks
    assert [a.kind for a in r.allocations].count(WEIGHT) == 1
