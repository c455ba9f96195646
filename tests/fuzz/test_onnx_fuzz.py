"""The ONNX fuzzer (onnx_fuzz.py) in the normal test run: a fixed seed, three thousand mutated models
compiled by `api.atc` and run, each ending in a one-line GeError or in outputs, within the time and
memory bounds; a few of them through `ge atc` in a child process with an address-space limit. The
escapes it found are pinned by name below. A longer campaign: `python -m tests.fuzz.onnx_fuzz
--cases 20000 --cli 50`."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import DeviceError, FormatError, GraphError

from .onnx_fuzz import EXTERNAL, PROTO, SEEDS, Campaign, invalid_utf8_name, main, make_seed, run_cli, write_case

CASES, BLOCKS = 3000, 6  # about 30 s on this machine


@pytest.fixture(scope="module")
def campaign():
    return Campaign(seed=0)


@pytest.mark.parametrize("block", range(BLOCKS))
def test_mutated_models_end_in_a_one_line_ge_error_or_run(campaign, block):
    n = CASES // BLOCKS
    failures = campaign.run(n, start=block * n)
    assert not failures, "\n".join(failures[:5])


def test_the_mutator_covers_every_kind_and_seed_and_some_cases_compile_and_run(campaign):
    kinds, seeds = set(), set()
    for n in range(400):
        case = campaign.case(n)
        kinds.add(case.kind)
        seeds.add(case.seed)
    assert kinds == {"byte", "utf8", *PROTO} and seeds == set(SEEDS)
    outcomes = campaign.outcomes(range(200))
    assert outcomes.get("ran", 0) > 20 and outcomes.get("rejected", 0) > 100 and "FAILED" not in outcomes


def test_cases_through_the_cli_under_a_memory_limit(campaign):
    """The first case of each kind through `ge atc` in a child process: exit 0, or 1 with one error
    line and no OM, never a traceback or a signal."""
    firsts = {}
    for n in range(300):
        firsts.setdefault(campaign.case(n).kind, n)
    problems = [f"case {n}: {p}" for n in firsts.values() if (p := run_cli(campaign.case(n)))]
    assert len(firsts) == len(PROTO) + 2 and not problems, problems


def _save(model: onnx.ModelProto, tmp_path, data: bytes | None = None, files: dict | None = None) -> str:
    from .onnx_fuzz import Case
    return write_case(Case(0, "", "", "", data if data is not None else model.SerializeToString(), files or {}), str(tmp_path))


@pytest.mark.parametrize("name,field", [("x", r"model\.graph\.node\[0\] \(Conv\)\.input\[0\]"),
                                        ("y", r"model\.graph\.node\[5\] \(Softmax\)\.output\[0\]"),
                                        ("leaky", r"model\.graph\.node\[1\] \(LeakyRelu\)\.name")])
def test_a_name_of_invalid_utf8_is_refused_naming_the_field(tmp_path, name, field):
    """An escape the fuzzer found: protobuf hands an invalid UTF-8 string over as bytes, which ended
    in a TypeError or UnicodeDecodeError deep in the compiler; now the importer names the field
    (the first in the file holding the name)."""
    model = make_seed("cnn").model
    marked = "marked_" + name  # every use of the name, renamed to something unique
    for vi in (*model.graph.input, *model.graph.output):
        vi.name = marked if vi.name == name else vi.name
    for n in model.graph.node:
        n.name = marked if n.name == name else n.name
        n.input[:] = [marked if t == name else t for t in n.input]
        n.output[:] = [marked if t == name else t for t in n.output]
    path = _save(model, tmp_path, model.SerializeToString().replace(marked.encode(), b"\xff" + marked[1:].encode()))
    with pytest.raises(FormatError, match=rf"model\.onnx: {field} is not valid UTF-8 \(b'\\xffarked_{name}'\)$"):
        api.atc(path, str(tmp_path / "out" / "m"))
    assert not (tmp_path / "out").exists()


def test_the_utf8_mutation_keeps_the_framing(campaign):
    import random
    model = make_seed("attrs").model
    data, what = invalid_utf8_name(random.Random(3), model)
    assert len(data) == len(model.SerializeToString()) and "invalid UTF-8" in what
    parsed = onnx.ModelProto()
    parsed.ParseFromString(data)  # protobuf takes it: ge must not


def test_a_nul_byte_in_an_external_data_location_is_refused_naming_the_tensor(tmp_path):
    """An escape the fuzzer found: `ValueError: embedded null byte` from the file system calls."""
    seed = make_seed("cnn_external")
    t = next(t for t in seed.model.graph.initializer if t.name == "w")
    next(e for e in t.external_data if e.key == "location").value = "weig\x00hts.bin"
    path = _save(seed.model, tmp_path, files=seed.files)
    with pytest.raises(FormatError, match=r"tensor 'w': external data location 'weig\\x00hts.bin' holds a NUL byte"):
        api.atc(path, str(tmp_path / "out" / "m"))


def test_an_external_data_location_that_is_too_long_is_a_format_error(tmp_path):
    seed = make_seed("cnn_external")
    t = next(t for t in seed.model.graph.initializer if t.name == "w")
    next(e for e in t.external_data if e.key == "location").value = "w" * 5000
    path = _save(seed.model, tmp_path, files={EXTERNAL: seed.files[EXTERNAL]})
    with pytest.raises(FormatError, match=r"tensor 'w': external data location 'w+': File name too long"):
        api.atc(path, str(tmp_path / "out" / "m"))


@pytest.mark.parametrize("kernel,strides,spatial", [(3, [1 << 31, 1], (5, 6)), (3, [1 << 31, 1 << 31], (4, 4)),
                                                     (1, [2, 2], (2, 2)), (1, [1 << 31, 1], (2, 3))])
def test_a_conv_stride_past_a_dim_of_one_output_compiles_and_matches_onnxruntime(tmp_path, kernel, strides, spatial):
    """An escape the fuzzer found: a stride of 2^31 sized the phase layout's loops (a MemoryError
    after minutes); past the window's extent a stride changes nothing, so it is clamped (and a 1x1
    conv whose stride leaves one output position still subsamples)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 3, kernel, kernel)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], "conv", strides=strides, kernel_shape=[kernel, kernel])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, *spatial])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "conv.onnx")
    onnx.save(model, path)
    x = rng.standard_normal((1, 3, *spatial)).astype(np.float32)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for device in ("cpu", "sim"):
        model_id = api.load_from_file(api.atc(path, str(tmp_path / "conv")).om_path, device)
        try:
            got = api.execute(model_id, [x])[0]
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        finally:
            api.unload(model_id)


@pytest.mark.parametrize("what", ["pads", "dim"])
def test_a_tensor_past_the_compile_bound_is_refused_naming_the_node_not_allocated(tmp_path, what):
    """What the fuzzer found with pads or a dim of 2^31: the passes ran kernels on sample data of
    TiB-sized shapes (a MemoryError where the host refuses, an allocation where it does not). Pad
    infers its shape from its plan; the next node refuses an input over 4 GiB, naming itself."""
    model = make_seed("attrs").model
    if what == "pads":
        pads = next(t for t in model.graph.initializer if t.name == "pads")
        pads.CopyFrom(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 1 << 31, 1, 1], np.int64), "pads"))
    else:
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1 << 31
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    node = "node 'avgpool' \\(AveragePool\\): input 'p'" if what == "pads" else "node 'conv' \\(Conv\\): input 'x'"
    with pytest.raises(GraphError, match=rf"^{node} \[.*\] is \d+ bytes; ge compiles tensors of up to 4 GiB"):
        api.atc(path, str(tmp_path / "m"))


def test_a_loop_of_2_58_iterations_ends_at_the_runs_timeout(tmp_path, caplog):
    """What the fuzzer found with a bit flipped in a trip count: a valid model that would run for
    ages. As a constant, its then-branch's scan output is [2^58, 4], past the compile-time tensor
    bound: the branch is compiled to check its shapes at run time (the If's rule for a branch that
    cannot run on the shapes it would get), said in a warning naming the node; as an input, nothing
    is known at compile time. Either way the run honours execute's timeout between control-flow
    iterations, and the other branch runs."""
    model = make_seed("control_flow").model
    n = next(t for t in model.graph.initializer if t.name == "n")
    n.CopyFrom(numpy_helper.from_array(np.array(1 << 58, np.int64), "n"))
    onnx.save(model, str(tmp_path / "const.onnx"))
    const = api.atc(str(tmp_path / "const.onnx"), str(tmp_path / "const")).om_path
    assert "node 'if' (If): its then_branch cannot run on these input shapes (node 'sum' (ReduceSum): input 'all' " \
           "[288230376151711744, 4] is" in caplog.text
    model.graph.initializer.remove(n)
    model.graph.input.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    onnx.save(model, str(tmp_path / "loop.onnx"))
    looped = api.atc(str(tmp_path / "loop.onnx"), str(tmp_path / "loop")).om_path
    for om, feeds in ((const, {}), (looped, {"n": np.array(1 << 58, np.int64)})):
        model_id = api.load_from_file(om)
        try:
            with pytest.raises(DeviceError, match=r"^node 'if' \(If\) subgraph 'then_branch': node 'loop' \(Loop\): "
                                                  r"the run took longer than its timeout of 0.2 s$"):
                api.execute(model_id, {"x": np.ones(4, np.float32), **feeds}, timeout=0.2)
            assert api.execute(model_id, {"x": -np.ones(4, np.float32), **feeds}, timeout=0.2)[0].tolist() == [1, 1, 1, 1]
        finally:
            api.unload(model_id)


def test_the_long_campaign_command(capsys):
    assert main(["--cases", "40", "--seed", "5"]) == 0
    assert "40 cases" in capsys.readouterr().out
