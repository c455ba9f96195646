"""Contexts of every kind of model (static, gears, range, unknown dims, data-dependent): throughput
mode runs them at once and a failing worker ends the run with an error instead of a hang; a gear
model's context holds one feature-map block (its largest gear's); GetRunAddress answers for the
context that runs; the impl cache is an LRU whose evictions are counted. Outputs equal onnxruntime."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from ge.cli.main import cli
from ge.core import api
from ge.core.model.errors import GeError
from ge.core.model.ge_model import FM_ID, WORKSPACE_ID
from ge.core.runtime import known_subgraph as v2
from ge.core.runtime.throughput import run_contexts

from .conftest import ROOT, onnxruntime_outputs
from .dynamic_models import KINDS, feeds


@pytest.fixture
def ge_cli():
    """`ge ...` through click's CliRunner: exit code, stdout and stderr apart."""
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, [str(a) for a in args], prog_name="ge")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """kind -> (onnx path, OM path)."""
    tmp = tmp_path_factory.mktemp("dyn_contexts")
    out = {}
    for kind, (build, options, _) in KINDS.items():
        path = str(tmp / f"{kind}.onnx")
        onnx.save(build(), path)
        out[kind] = path, api.atc(path, str(tmp / kind), **options).om_path
    return out


def _assert_close(got, onnx_path, inputs):
    expected = onnxruntime_outputs(onnx_path, inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def _in_thread(fn, timeout=120):
    """fn() on a thread of its own: a hang fails the test instead of stopping the suite."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:
            result["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"still running after {timeout} s: a hang"
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_throughput_contexts_run_every_kind_of_model(compiled, kind, device):
    onnx_path, om = compiled[kind]
    batch = KINDS[kind][2][-1]
    inputs = [feeds(batch)["x"]]
    model_id = api.load_from_file(om, device)
    try:
        dm = api.model(model_id)
        _assert_close(api.execute(model_id, inputs), onnx_path, feeds(batch))  # a gear is initialised on first use
        in_use = dm.device.in_use
        s = _in_thread(lambda: run_contexts(dm, inputs, contexts=2, loop=3))
        assert s["contexts"] == 2 and s["loop"] == 3 and s["batch"] == batch
        assert s["memory"]["per_context"] > 0
        assert dm.device.in_use == in_use  # the contexts are gone, their memory freed
        # contexts of their own, from threads at once, each equal to onnxruntime
        ctxs = [dm.create_context() for _ in range(2)]
        shapes = KINDS[kind][2]
        got = [[None] * len(shapes) for _ in ctxs]

        def work(i):
            for k, b in enumerate(shapes[i:] + shapes[:i]):
                got[i][k] = (b, ctxs[i].execute([feeds(b)["x"]]))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for rows in got:
            for b, ys in rows:
                _assert_close(ys, onnx_path, feeds(b))
        for ctx in ctxs:
            dm.destroy_context(ctx)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("kind", ["static", "gears", "range", "hybrid"])
def test_ge_run_contexts_writes_outputs_equal_to_onnxruntime(ge_cli, compiled, tmp_path, kind):
    onnx_path, om = compiled[kind]
    batch = KINDS[kind][2][-1]
    x = feeds(batch)["x"]
    np.save(tmp_path / "x.npy", x)
    r = ge_cli("run", "--model", om, "--input", tmp_path / "x.npy", "--contexts", "2", "--loop", "3",
               "--output-dir", tmp_path / "o", "--device", "sim", "--json")
    assert r.exit_code == 0, r.stderr
    (y,) = [np.load(tmp_path / "o" / f) for f in sorted(os.listdir(tmp_path / "o"))]
    _assert_close([y], onnx_path, {"x": x})


# a worker of throughput mode fails (a kernel raising on the context threads only): the run must
# end with one line on stderr and exit 1, not hang; the test's timeout makes a regression fail
FAILING_WORKER = """
import sys, threading
from ge.core.runtime import context, hybrid_context
from ge.cli.main import main

def failing(original):
    def run(self, *args, **kwargs):
        if threading.current_thread().name.startswith("ge-context-"):
            raise RuntimeError("injected failure")
        return original(self, *args, **kwargs)
    return run

context.SunkTask.run = failing(context.SunkTask.run)
hybrid_context.HybridContext._run_node = failing(hybrid_context.HybridContext._run_node)
main(sys.argv[1:])
"""


@pytest.mark.parametrize("kind", ["static", "gears", "range", "hybrid"])
def test_a_failing_worker_ends_the_run_with_an_error(compiled, tmp_path, kind):
    _, om = compiled[kind]
    x = feeds(KINDS[kind][2][-1])["x"]
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([sys.executable, "-c", FAILING_WORKER, "run", "--model", om, "--input", str(tmp_path / "x.npy"),
                        "--contexts", "3", "--loop", "1000", "--output-dir", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: context ")
    assert "failed at run time: RuntimeError: injected failure" in lines[0]
    assert not os.path.exists(tmp_path / "o")  # no outputs from a failed run


def test_run_contexts_raises_a_worker_failure_once_every_thread_ended(compiled, monkeypatch):
    _, om = compiled["gears"]
    model_id = api.load_from_file(om, "cpu")
    try:
        dm = api.model(model_id)
        calls = []
        original = type(dm.default_context).execute

        def execute(self, inputs, outputs=None, timeout=None):
            calls.append(threading.current_thread().name)
            if len(calls) == 5:
                raise ValueError("the fifth execution fails")
            return original(self, inputs, outputs, timeout)

        monkeypatch.setattr(type(dm.default_context), "execute", execute)
        before = threading.active_count()
        with pytest.raises(GeError, match=r"^context \d failed: ValueError: the fifth execution fails$"):
            _in_thread(lambda: run_contexts(dm, [feeds(4)["x"]], contexts=3, loop=1000))
        assert threading.active_count() == before  # every worker ended
        assert len(calls) < 3 * 1000  # the others stopped early
        assert dm.contexts == [dm.default_context]  # the throughput contexts were destroyed
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_a_gear_context_holds_one_block_sized_by_the_largest_gear(compiled, device):
    onnx_path, om = compiled["gears"]
    work, _ = api.query_size(om)
    model_id = api.load_from_file(om, device)
    try:
        dm = api.model(model_id)
        sizes = [g["memory_size"] for g in api.gear_sizes(model_id)]
        assert work == max(sizes) and len(set(sizes)) == 3
        assert [api.query_size(om, gear=k)[0] for k in range(3)] == sizes
        with pytest.raises(GeError, match=r"gear 3 does not exist \(the model has 3 gears\)"):
            api.query_size(om, gear=3)
        for b in (1, 2, 4):  # every gear runs in the default context's one block
            _assert_close(api.execute(model_id, feeds(b)), onnx_path, feeds(b))
        block = dm.default_context.block
        for k, g in enumerate(dm.gears):
            ctx = g.default_context
            assert ctx.args.base[FM_ID] == block and ctx.args.base[WORKSPACE_ID] == block + g.fm_size
            assert g.fm_size + g.workspace_size == sizes[k]
        in_use = dm.device.in_use
        ctx = dm.create_context()  # a second context: one more block, not one per gear
        for b in (1, 2, 4):
            _assert_close(ctx.execute(feeds(b)), onnx_path, feeds(b))
        assert {c.args.base[FM_ID] for c in ctx._contexts.values()} == {ctx.block} != {block}
        per_gear_io = sum(c.device_bytes for c in ctx._contexts.values())  # I/O buffers and args tables only
        assert dm.device.in_use - in_use == ctx.device_bytes == max(sizes) + per_gear_io
        dm.destroy_context(ctx)
        assert dm.device.in_use == in_use
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_get_run_address_answers_for_the_context_that_runs(compiled, device):
    onnx_path, om = compiled["data_dependent"]
    model_id = api.load_from_file(om, device)
    try:
        dm = api.model(model_id)
        (sm,) = dm.submodels
        first, second = dm.default_context, dm.create_context()
        addresses = []
        for ctx, seed in ((first, 0), (second, 1)):
            _assert_close(ctx.execute(feeds(4, seed)), onnx_path, feeds(4, seed))
            fm = ctx.sub_contexts[0].args.base[FM_ID]
            assert fm != 0
            assert v2.davinci_model_get_run_address(sm, "FEATURE_MAP", 0) == fm  # the one that ran last
            addresses.append(fm)
        assert addresses[0] != addresses[1]
        assert v2.davinci_model_get_run_address(sm, "FEATURE_MAP", 64, ctx=first.sub_contexts[0]) == addresses[0] + 64
        dm.destroy_context(second)
        assert v2.davinci_model_get_run_address(sm, "WEIGHT", 0) == dm.weight_addr
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_the_impl_cache_is_bounded_and_counts_evictions(compiled, device):
    onnx_path, om = compiled["hybrid"]
    batches = [1, 2, 3, 1, 2, 3]
    model_id = api.load_from_file(om, device, impl_cache_size=2)
    try:
        dm = api.model(model_id)
        stats = []
        for b in batches:
            _assert_close(api.execute(model_id, feeds(b)), onnx_path, feeds(b))
            stats.append(dict(dm.default_context.stats))
            assert len(dm.cache) <= 2
        assert sum(s["cache_evictions"] for s in stats) > 0
        assert stats[3]["cache_builds"] > 0  # batch 1 again: its impls were evicted, so built again
    finally:
        api.unload(model_id)
    model_id = api.load_from_file(om, device)  # the default capacity keeps them all
    try:
        dm = api.model(model_id)
        for b in batches:
            api.execute(model_id, feeds(b))
            assert dm.default_context.stats["cache_evictions"] == 0
        assert dm.default_context.stats["cache_builds"] == 0
    finally:
        api.unload(model_id)
    with pytest.raises(GeError, match=r"impl cache size must be an integer >= 0, got -1"):
        api.load_from_file(om, device, impl_cache_size=-1)


def test_ge_run_impl_cache_size_shows_evictions_in_stats(ge_cli, compiled, tmp_path):
    _, om = compiled["hybrid"]
    r = ge_cli("run", "--model", om, "--dymShape", "x:3,16", "--loop", "2", "--impl_cache_size", "1", "--stats",
               "--json", "--output-dir", tmp_path / "o")
    assert r.exit_code == 0, r.stderr
    stats = json.loads(r.stdout)["stats"]
    assert all("cache_evictions" in s for s in stats) and stats[0]["cache_evictions"] > 0
    r = ge_cli("run", "--model", om, "--dymShape", "x:3,16", "--impl_cache_size", "-1", "--output-dir", tmp_path / "o")
    assert r.exit_code == 2 and "--impl_cache_size" in r.stderr
