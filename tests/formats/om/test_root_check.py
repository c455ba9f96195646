"""A dynamic OM's root tied to its submodels (formats/om/root_check.py), and fused-activation
epilogues checked at load: each broken cross-reference is a FormatError naming the field."""
from __future__ import annotations

import copy

import msgpack
import numpy as np
import pytest

from ge.core import api
from ge.core.model.errors import FormatError
from ge.formats.om.schema import MODEL_DEF, TASK_INFO

from tests.fuzz.om_fuzz import Layout, compile_seed


@pytest.fixture(scope="module")
def seeds():
    out = {}
    for name in ("gears", "range"):
        s = compile_seed(name)
        s.layout = Layout.of(s.om)
        out[name] = s
    return out


def edited(seed, kind, submodel, edit) -> bytes:
    obj = copy.deepcopy(seed.layout.decoded[(kind, submodel)])
    edit(obj)
    return seed.layout.signed({(kind, submodel): msgpack.packb(obj, use_bin_type=True)})


def test_the_seeds_load_and_run(seeds):
    for s in seeds.values():
        model_id = api.load_from_mem(s.om)
        (y,) = api.execute(model_id, s.inputs)
        api.unload(model_id)
        assert y.shape == (s.inputs[0].shape[0], 6) and np.allclose(y.sum(axis=1), 1, atol=1e-5)


@pytest.mark.parametrize("edit,match", [
    (lambda md: md["attrs"]["gears"].pop(), r"attrs\.gears must be a list of 2 maps \(one per submodel\)"),
    (lambda md: md["attrs"]["gears"][1].update(x=[2, 8]),
     r"attrs\.gears\[1\]\['x'\] is \[2, 8\] \(list\); submodel 2 was compiled for \[3, 8\]"),
    (lambda md: md["attrs"]["gears"][0].update(z=[1, 8]), r"attrs\.gears\[0\]: 'z' is not an input"),
    (lambda md: md["attrs"].update(gear_values=[[1], [0]]), r"attrs\.gear_values must be 2 equally long lists"),
    (lambda md: md["attrs"].update(gear_kind="dynamic_everything"), r"attrs\.gear_kind must be one of"),
    (lambda md: md["inputs"].append(dict(md["inputs"][0])), r"root MODEL_DEF\.inputs: 'x' appears twice"),
])
def test_gears_attributes_must_match_their_submodels(seeds, edit, match):
    with pytest.raises(FormatError, match=match):
        api.load_from_mem(edited(seeds["gears"], MODEL_DEF, 0, edit))


@pytest.mark.parametrize("kind,edit,match", [
    (MODEL_DEF, lambda md: md["attrs"]["capacities"].update(nowhere=64),
     r"attrs\.capacities\['nowhere'\] is not a tensor or node workspace"),
    (MODEL_DEF, lambda md: md["attrs"]["capacities"].update(y="64"), r"attrs\.capacities must map tensor names"),
    (MODEL_DEF, lambda md: md["attrs"].update(growable="y"), r"attrs\.growable must be a list of tensor names"),
    (MODEL_DEF, lambda md: md["attrs"].update(growable=["nowhere"]),
     r"attrs\.growable: 'nowhere' is not a root tensor or node workspace without a capacity"),
    (MODEL_DEF, lambda md: md["attrs"].update(growable=["y"]),
     r"attrs\.growable: 'y' is not a root tensor or node workspace without a capacity"),
    (MODEL_DEF, lambda md: md["attrs"]["arena"]["offsets"].update(y=10**6),
     r"attrs\.arena\.offsets\['y'\] must place \d+ bytes inside the \d+-byte arena, got 1000000"),
    (MODEL_DEF, lambda md: md["attrs"]["arena"]["offsets"].pop("r"), r"attrs\.arena\.offsets\['r'\] must place"),
    (MODEL_DEF, lambda md: md["attrs"]["arena"].update(size=-1), r"attrs\.arena\.size must be a byte count"),
    (MODEL_DEF, lambda md: md.update(outputs=[]), r"root MODEL_DEF\.outputs is empty"),
    (TASK_INFO, lambda ti: ti["steps"].pop(0), r"steps\[0\] \(node 'softmax'\) reads 'r', which no earlier step"),
    (TASK_INFO, lambda ti: ti["steps"].pop(1), r"root MODEL_DEF\.outputs: 'y' is produced by no step"),
    (TASK_INFO, lambda ti: ti["nodes"][0]["attrs"].update({"ge.epilogue": None}),
     r"root TASK_INFO\.nodes\[0\] 'matmul' \(FusedMatMul\): attrs\['ge\.epilogue'\] must be a non-empty list"),
    (TASK_INFO, lambda ti: ti["nodes"][0]["attrs"].update({"ge.epilogue": [["LeakyRelu", {"alpha": "x"}]]}),
     r"attrs\['ge\.epilogue'\]\[0\] \(LeakyRelu\): attrs\['alpha'\] must be a float"),
    (TASK_INFO, lambda ti: ti["nodes"][0]["attrs"].update({"ge.epilogue": [["Clip", {"min": [0]}]]}),
     r"attrs\['ge\.epilogue'\]\[0\] \(Clip\): attrs\['min'\] must be a number"),
    (TASK_INFO, lambda ti: ti["nodes"][1].update(opset=10**9), r"nodes\[1\] 'softmax' \(Softmax\): opset 1000000000"),
])
def test_range_plan_and_steps_must_hold_together(seeds, kind, edit, match):
    with pytest.raises(FormatError, match=match):
        api.load_from_mem(edited(seeds["range"], kind, 0, edit))
