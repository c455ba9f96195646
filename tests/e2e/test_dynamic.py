"""Dynamic shapes end to end: the hybrid executor (known + unknown partitions), shape ranges and
gears, each equal to onnxruntime, with the counters that prove what is (not) allocated."""
import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.model.errors import GeError, ShapeError
from ge.core.kernels import native
from ge.formats.om import header_info, om_bytes, read_om

from .conftest import onnxruntime_outputs

BERT_SHAPES = [(1, 16), (3, 24), (8, 32), (3, 24), (1, 16)]  # grows, then repeats and shrinks


def bert_feeds(batch, seq, seed=0):
    ids = np.random.default_rng(seed + batch * 100 + seq).integers(0, 100, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq * 3 // 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="module")
def bert_path(samples, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bert_dyn") / "bert.onnx")
    onnx.save(samples.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100), path)
    return path


@pytest.fixture(scope="module")
def detection(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("detection")
    path = str(tmp / "det.onnx")
    onnx.save(samples.detection_style(), path)
    return path, api.atc(path, str(tmp / "det"))


def _compile(bert_path, tmp_path, kind):
    spec = {"hybrid": "input_ids:-1,-1;attention_mask:-1,-1",
            "range": "input_ids:1~8,1~32;attention_mask:1~8,1~32",
            "gears": "input_ids:-1,-1;attention_mask:-1,-1"}[kind]
    dynamic = {"dynamic_dims": ";".join(f"{b},{s},{b},{s}" for b, s in sorted(set(BERT_SHAPES)))} if kind == "gears" else {}
    return api.atc(bert_path, str(tmp_path / f"bert_{kind}"), input_shape=spec, dynamic=dynamic)


@pytest.mark.parametrize("kind", ["hybrid", "range", "gears"])
@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_bert_dynamic_equals_onnxruntime(bert_path, tmp_path, kind, device):
    result = _compile(bert_path, tmp_path, kind)
    assert header_info(result.om_path)["has_unknown_shape"]
    model_id = api.load_from_file(result.om_path, device)
    try:
        ctx = api.model(model_id).default_context
        stats = []
        for b, s in BERT_SHAPES:
            feeds = bert_feeds(b, s)
            got = api.execute(model_id, feeds)
            for g, e in zip(got, onnxruntime_outputs(bert_path, feeds)):
                assert g.shape == e.shape
                np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4)
            stats.append(dict(getattr(ctx, "stats", {})))
    finally:
        api.unload(model_id)
    if kind == "range":  # planned for the largest shape: nothing allocated inside the range
        assert all(st["allocations"] == 0 and st["reallocs"] == 0 for st in stats)
    if kind in ("hybrid", "range"):
        assert stats[0]["cache_builds"] > 0
        # a new shape: the shape-agnostic kernels (the embeddings' Adds) serve it without a build
        assert stats[1]["agnostic_hits"] > 0 and stats[1]["cache_builds"] < stats[0]["cache_builds"]
        for st in stats[3:]:  # repeated shapes: cache hits only, and a shrink reallocates nothing
            assert st["cache_builds"] == 0 and st["cache_hits"] > 0
            assert st["allocations"] == 0 and st["reallocs"] == 0


def test_range_outside_is_an_error_naming_input_dim_and_range(bert_path, tmp_path):
    result = _compile(bert_path, tmp_path, "range")
    assert result.model.attrs["capacities"]
    model_id = api.load_from_file(result.om_path)
    try:
        with pytest.raises(ShapeError, match=r"input 'input_ids': dim 1 is 40, outside the range 1~32"):
            api.execute(model_id, bert_feeds(2, 40))
    finally:
        api.unload(model_id)


def test_input_shape_range_is_the_deprecated_spelling(bert_path, tmp_path):
    result = api.atc(bert_path, str(tmp_path / "b"), dynamic={
        "input_shape_range": "input_ids:[1~4,8~16];attention_mask:[1~4,8~16]"})
    assert result.model.mode == "range"
    assert result.model.inputs[0].ranges == ((1, 4), (8, 16))


def test_gears_pick_by_shape_or_by_acl_call_and_share_weights(bert_path, tmp_path):
    result = api.atc(bert_path, str(tmp_path / "g"), input_shape="input_ids:-1,16;attention_mask:-1,16",
                     dynamic={"dynamic_batch_size": "1,2,4"})
    dyn = result.model
    assert len(dyn.submodels) == 3 and all(len(m.weight_data) == 0 for m in dyn.submodels)
    model_id = api.load_from_file(result.om_path, "sim")
    try:
        assert [g is not None for g in api.model(model_id).gears] == [True, False, False]  # the rest on first use
        assert [g["values"] for g in api.gear_sizes(model_id)] == [[1, 1], [2, 2], [4, 4]]
        feeds = bert_feeds(2, 16)
        np.testing.assert_allclose(api.execute(model_id, feeds)[0], onnxruntime_outputs(bert_path, feeds)[0],
                                   rtol=1e-3, atol=1e-4)
        assert api.model(model_id).last_gear == 1
        api.execute(model_id, bert_feeds(4, 16))
        packs = api.model(model_id).packs  # the gears' kernels pack each weight once, for all three
        assert packs.hits == 2 * packs.packs and (packs.packs > 0 or native.native() is None)
        with pytest.raises(ShapeError, match=r"no gear matches .* gears \(dynamic_batch_size\): 1,1; 2,2; 4,4"):
            api.execute(model_id, bert_feeds(3, 16))
        with pytest.raises(ShapeError, match="no gear for batch size 8"):
            api.set_dynamic_batch_size(model_id, 8)
        assert api.set_dynamic_batch_size(model_id, 4) == 2
    finally:
        api.unload(model_id)


def test_gear_options_are_checked(bert_path, tmp_path):
    spec = "input_ids:-1,16;attention_mask:-1,16"
    with pytest.raises(GeError, match="mutually exclusive"):
        api.atc(bert_path, str(tmp_path / "x"), input_shape=spec,
                dynamic={"dynamic_batch_size": "1,2", "dynamic_dims": "1,1"})
    with pytest.raises(GeError, match="between 1 and 100"):
        api.atc(bert_path, str(tmp_path / "x"), input_shape=spec,
                dynamic={"dynamic_batch_size": ",".join(map(str, range(1, 102)))})


def test_detection_partitions_known_and_unknown(detection):
    _, result = detection
    kinds = [c.kind for c in result.model.clusters]
    assert kinds[0] == "KNOWN" and "UNKNOWN" in kinds and len(result.model.submodels) == 1
    nms = next(c for c in result.model.clusters if c.kind == "UNKNOWN")
    assert "data-dependent" in nms.reason
    assert om_bytes(read_om(result.om_path)) == om_bytes(result.model)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_detection_equals_onnxruntime_with_varying_detections(detection, device):
    path, result = detection
    model_id = api.load_from_file(result.om_path, device)
    counts, stats = [], []
    try:
        ctx = api.model(model_id).default_context
        for seed, scale in [(0, 1.0), (1, 2.0), (2, 0.5), (0, 1.0), (4, 0.0)]:
            x = (np.random.default_rng(seed).standard_normal((1, 3, 32, 32)) * scale).astype(np.float32)
            got = api.execute(model_id, [x])
            for g, e in zip(got, onnxruntime_outputs(path, {"image": x})):
                assert g.shape == e.shape
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
            counts.append(got[0].shape[0])
            stats.append(dict(ctx.stats))
    finally:
        api.unload(model_id)
    assert len(set(counts)) >= 4 and counts[-1] == 0
    assert all(st["submodel_launches"] == 1 for st in stats)
    assert stats[3]["cache_builds"] == 0 and stats[3]["allocations"] == 0  # a repeated count: cached, no alloc
    assert stats[4]["skipped_empty"] > 0  # no detection: the Gathers have empty outputs and are skipped


def test_inspect_shows_partitions_gears_and_ranges(detection, bert_path, tmp_path):
    data = api.inspect(detection[1].om_path)
    clusters = data["dynamic"]["clusters"]
    assert clusters[0]["kind"] == "KNOWN" and any("data-dependent" in c["reason"] for c in clusters)
    assert len(data["submodels"]) == 1 and data["submodels"][0]["tasks"]
    gears = api.inspect(api.atc(bert_path, str(tmp_path / "g"), input_shape="input_ids:-1,16;attention_mask:-1,16",
                                dynamic={"dynamic_batch_size": "1,2"}).om_path)["dynamic"]["gears"]
    assert [g["values"] for g in gears] == [[1, 1], [2, 2]] and gears[1]["memory_size"] > gears[0]["memory_size"]
    ranged = api.inspect(_compile(bert_path, tmp_path, "range").om_path)["dynamic"]
    assert ranged["planned_capacity"]["total"] > 0 and ranged["inputs"][0]["ranges"] == ["1~8", "1~32"]


def test_cli_compiles_and_runs_a_dynamic_model(bert_path, tmp_path):
    from click.testing import CliRunner

    from ge.cli.main import cli as main
    runner = CliRunner()
    om = str(tmp_path / "b")
    r = runner.invoke(main, ["atc", "--model", bert_path, "--output", om, "--input_shape",
                             "input_ids:-1,16;attention_mask:-1,16", "--dynamic_batch_size", "1,2"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["run", "-m", om + ".om", "--dymBatch", "2", "--output-dir", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert np.load(tmp_path / "out" / "b_output_0.npy").shape == (2, 16, 64)
    r = runner.invoke(main, ["run", "-m", om + ".om", "--dymBatch", "3", "--output-dir", str(tmp_path / "out")])
    assert r.exit_code == 1 and "gears (dynamic_batch_size): 1,1; 2,2" in r.output
    r = runner.invoke(main, ["inspect", om + ".om"])
    assert r.exit_code == 0 and "Gears" in r.output


def test_reader_validates_the_root_model(detection):
    from ge.core.model.dynamic_model import Step
    from ge.core.model.errors import FormatError
    dyn = read_om(detection[1].om_path)
    bad = dyn.replace(steps=dyn.steps + [Step("node", 99)])
    with pytest.raises(FormatError, match=r"root TASK_INFO step \d+: node 99 does not exist"):
        om_bytes(bad)
    bad = dyn.replace(inputs=[dyn.inputs[0]._replace(ranges=((4, 2),) * 4)])
    with pytest.raises(FormatError, match="range"):
        om_bytes(bad)


def test_dynamic_paths_run_the_static_fusions(bert_path, tmp_path):
    """Range and fully dynamic graphs are fused like static ones: the hybrid executor runs
    FusedMatMul (bias, scale, transposes, Gelu), not the exported MatMul/Add/Erf chains."""
    for kind in ("hybrid", "range"):
        dyn = _compile(bert_path, tmp_path, kind).model
        ops = {n.op_type for n in dyn.nodes}
        assert "FusedMatMul" in ops and not {"Erf", "Gelu", "MatMul", "Transpose"} & ops
        assert any(n.attrs.get("activation") == "Gelu" for n in dyn.nodes)


def test_range_plan_is_one_arena_about_the_static_plan_at_the_largest_shape(bert_path, tmp_path):
    """Range buffers share one arena by lifetime: a context allocates it once, and it costs about
    what the static plan of the largest shape costs (not one buffer per tensor)."""
    dyn = _compile(bert_path, tmp_path, "range").model
    static = api.atc(bert_path, str(tmp_path / "static"), input_shape="input_ids:8,32;attention_mask:8,32").model
    arena = dyn.attrs["arena"]
    assert arena["lower_bound"] <= arena["size"] == dyn.memory_size < sum(dyn.attrs["capacities"].values()) / 4
    assert dyn.memory_size <= 1.5 * (static.memory_size + sum(d.nbytes for d in static.outputs + static.inputs))
    model_id = api.load_from_file(_compile(bert_path, tmp_path, "range").om_path, "cpu")
    try:
        ctx = api.model(model_id).default_context
        assert ctx.counters["allocations"] == 1 and ctx.planned_bytes == arena["size"]
    finally:
        api.unload(model_id)


def test_dynamic_shape_arithmetic_is_resolved_symbolically(bert_path, tmp_path):
    """The attention's Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains become Reshapes with
    constant 0/-1 shapes (resolve_shapes): only the embeddings' Range/ConstantOfShape read a Shape."""
    dyn = _compile(bert_path, tmp_path, "hybrid").model
    ops = [n.op_type for n in dyn.nodes]
    assert "Concat" not in ops and ops.count("Shape") <= 2 and ops.count("Unsqueeze") <= 2
    assert ops.count("Reshape") == 8  # 2 layers x (q, k, v, context)



def _run_in_threads(contexts, feeds_per_thread, reference, rtol):
    """Each thread runs its own context over its own feeds; every result equals onnxruntime's."""
    import threading
    errors, got = [], [[] for _ in contexts]

    def work(k):
        try:
            for feeds in feeds_per_thread[k]:
                got[k].append(contexts[k].execute(feeds))
        except BaseException as e:  # reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(contexts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, feeds_list in enumerate(feeds_per_thread):
        assert len(got[k]) == len(feeds_list)
        for feeds, outs in zip(feeds_list, got[k]):
            for g, e in zip(outs, reference(feeds)):
                assert g.shape == e.shape
                np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol / 10)


@pytest.mark.parametrize("kind", ["hybrid", "range"])
@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_hybrid_contexts_run_in_threads_with_different_shapes(bert_path, tmp_path, kind, device):
    """Each hybrid context has its own tensors; the impl cache is the model's: two threads, each its
    own context and shapes, equal onnxruntime; a third context builds nothing already built."""
    model_id = api.load_from_file(_compile(bert_path, tmp_path, kind).om_path, device)
    model = api.model(model_id)
    feeds = [[bert_feeds(*s) for s in [(1, 16), (3, 24), (1, 16)] * 2],
             [bert_feeds(*s) for s in [(8, 32), (2, 8), (8, 32)] * 2]]
    try:
        _run_in_threads([model.default_context, model.create_context()], feeds,
                        lambda f: onnxruntime_outputs(bert_path, f), 1e-3)
        third = model.create_context()
        third.execute(bert_feeds(3, 24))
        assert third.stats["cache_builds"] == 0 and third.stats["cache_hits"] > 0
        model.destroy_context(third)
        assert len(model.contexts) == 2
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_hybrid_contexts_give_each_static_submodel_its_own_memory(detection, device):
    """The detection sample's backbone is a static submodel: each hybrid context runs it in a
    submodel context of its own (own FM/workspace and args), so two threads with different
    numbers of detections each get onnxruntime's results."""
    path, result = detection
    model_id = api.load_from_file(result.om_path, device)
    model = api.model(model_id)
    images = [[(np.random.default_rng(seed).standard_normal((1, 3, 32, 32)) * scale).astype(np.float32)]
              for seed, scale in [(0, 1.0), (1, 2.0), (2, 0.5), (3, 1.5), (4, 0.0), (5, 1.0)]]
    try:
        second = model.create_context()
        assert all(len(sm.contexts) == 3 for sm in model.submodels)  # its default + one per hybrid context
        assert second.sub_contexts[0] is not model.default_context.sub_contexts[0]
        _run_in_threads([model.default_context, second], [images[:3] * 3, images[3:] * 3],
                        lambda f: onnxruntime_outputs(path, {"image": f[0]}), 1e-4)
        model.destroy_context(second)
        assert all(len(sm.contexts) == 2 for sm in model.submodels)
    finally:
        api.unload(model_id)
