"""`unload` frees a model at once: no reference cycle is left between a model and its contexts
(or a control-flow subgraph and its root), so the model, its contexts, its kernels and the OM's
mapping go when the last reference does, with the cyclic garbage collector switched off. A
server that reloads models would otherwise grow by the whole model per reload until gc runs."""
import gc
import weakref

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.om import read_om

from ...e2e.dynamic_models import KINDS, feeds


def _loop_model() -> onnx.ModelProto:
    """A Loop whose body is a subgraph model of its own (s <- s + w, M times)."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Add", ["s_in", "w"], ["s_out"]),
                              helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []),
                              vi("s_in", TensorProto.FLOAT, [2, 3])],
                             [vi("c_out", TensorProto.BOOL, []), vi("s_out", TensorProto.FLOAT, [2, 3])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body)], "loop",
                          [vi("M", TensorProto.INT64, []), vi("s0", TensorProto.FLOAT, [2, 3]),
                           vi("w", TensorProto.FLOAT, [2, 3])], [vi("s", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _loop_feeds(_batch):
    return {"M": np.array(3, np.int64), "s0": np.zeros((2, 3), np.float32), "w": np.ones((2, 3), np.float32)}


MODELS = {kind: (KINDS[kind][0], KINDS[kind][1], KINDS[kind][2], feeds)
          for kind in ("static", "gears", "range", "hybrid", "data_dependent")}
MODELS["loop"] = (_loop_model, {}, [0, 0], _loop_feeds)


@pytest.fixture(scope="module")
def om_paths(tmp_path_factory):
    out = tmp_path_factory.mktemp("unload")
    paths = {}
    for kind, (build, options, _, _) in MODELS.items():
        onnx.save(build(), str(out / f"{kind}.onnx"))
        paths[kind] = api.atc(str(out / f"{kind}.onnx"), str(out / kind), **options).om_path
    return paths


@pytest.fixture
def no_gc():
    gc.collect()  # what earlier tests left; from here on only reference counts free anything
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _contexts(model, seen=None) -> list:
    """The model's contexts, and those of its gears, submodels and subgraphs (which share one list)."""
    seen = set() if seen is None else seen
    seen.add(id(model))
    found = list(model.contexts)
    for part in [*(getattr(model, "gears", None) or []), *getattr(model, "submodels", []), *getattr(model, "subgraphs", [])]:
        if part is not None and id(part) not in seen:
            found += _contexts(part, seen)
    return found


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("kind", list(MODELS))
def test_unload_frees_the_model_its_contexts_and_its_mapping_without_gc(om_paths, kind, device, no_gc):
    ge_model = read_om(om_paths[kind])
    mapped = isinstance(ge_model.weight_data, memoryview)  # (a model without weights maps nothing)
    mapping = weakref.ref(ge_model.weight_data.obj if mapped else ge_model)  # the OM file's mmap
    manager = api.model_manager
    model_id = manager.load(ge_model, device, from_file=True)
    del ge_model
    _, _, batches, make_feeds = MODELS[kind]
    for batch in batches:
        outputs = manager.execute(model_id, make_feeds(batch))
        assert all(np.isfinite(y).all() for y in outputs)
    model = manager.model(model_id)
    contexts = _contexts(model)
    assert contexts
    refs = [weakref.ref(model), *map(weakref.ref, contexts)]
    del model, contexts, outputs
    assert all(r() is not None for r in refs)  # loaded: all alive
    if mapped and device == "cpu":  # the weights in place (static) or the model's DynamicModel read from the map
        assert mapping() is not None
    manager.unload(model_id)
    alive = [type(r()).__name__ for r in refs if r() is not None]
    assert alive == [] and mapping() is None, (alive, mapping())


@pytest.mark.parametrize("kind", ["static", "gears", "range"])
def test_a_context_of_an_unloaded_model_refuses_to_run(om_paths, kind):
    model_id = api.load_from_file(om_paths[kind])
    model = api.model(model_id)
    ctx = model.create_context()
    api.unload(model_id)
    with pytest.raises(GeError, match=r"^execution context destroyed \(its model unloaded\)$"):
        ctx.execute(feeds(4))
