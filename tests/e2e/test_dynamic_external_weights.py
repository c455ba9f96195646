"""--external_weight 1|2 for gear, range, unknown-dim and data-dependent models: one set of weight
files (one meta.json, each distinct weight once) shared by the root and every gear or submodel,
loaded from the weight folder, another folder, or the user's device memory; outputs equal
onnxruntime's on cpu and sim."""
import json
import os

import msgpack
import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from ge.cli.main import cli
from ge.core import api
from ge.core.model.errors import FormatError
from ge.formats.om.schema import MODEL_DEF
from ge.formats.weights import read_meta
from tests.fuzz.om_fuzz import Layout

from .conftest import onnxruntime_outputs
from .dynamic_models import KINDS, TABLE, W1, W2, feeds

DYNAMIC = [k for k in KINDS if k != "static"]


def _compile(tmp_path, kind: str, mode: int, **more):
    build, options, _ = KINDS[kind]
    path = str(tmp_path / f"{kind}.onnx")
    onnx.save(build(), path)
    return path, api.atc(path, str(tmp_path / "out" / kind), external_weight=mode, **options, **more)


def _large_weights(kind: str) -> list[np.ndarray]:
    return [W1, W2] + ([TABLE] if kind == "data_dependent" else [])


def _check_outputs(model_id, onnx_path, kind):
    for batch in KINDS[kind][2]:
        got = api.execute(model_id, feeds(batch))
        expected = onnxruntime_outputs(onnx_path, feeds(batch))
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("kind", DYNAMIC)
def test_one_set_of_weight_files_serves_every_gear_and_submodel(tmp_path, kind, mode, device):
    onnx_path, result = _compile(tmp_path, kind, mode)
    dyn, folder = result.model, tmp_path / "out" / "weight"
    large = _large_weights(kind)
    distinct = sum(w.nbytes for w in large)  # W2_copy holds W2's bytes: stored once
    assert dyn.weight_size < 1024  # only tiny constants stay in the OM
    names = sorted(f for f in os.listdir(folder) if not f.startswith("meta.json"))
    assert names == sorted(dyn.weight_files)
    if mode == 1:
        assert len(names) == len(large) and all(n.startswith("weight_") for n in names)
        assert sum(dyn.weight_files.values()) == distinct
    else:
        assert names == [f"{kind}_weight_combined"] and dyn.weight_files[names[0]] >= distinct
    meta = read_meta(str(folder))  # one meta.json: every hash at an existing file
    assert len(meta["hash_to_weight_file"]) == len(large)
    assert set(meta["hash_to_weight_file"].values()) == set(names)
    # every gear / submodel reads the same files: nothing is stored per gear
    used = {a.file for m in dyn.submodels for a in m.weight_files} | {w.file for w in dyn.weights if w.file}
    assert used == set(names)

    model_id = api.load_from_file(result.om_path, device)
    try:
        _check_outputs(model_id, onnx_path, kind)
        m = api.model(model_id)
        assert sorted(f["file"] for f in m.external_weights) == names
        assert {f["source"] for f in m.external_weights} == {"file"}
        assert m.weight_bytes == dyn.weight_size + sum(dyn.weight_files.values())
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("kind", ["gears", "hybrid", "data_dependent"])
def test_weight_dir_and_user_memory_load_dynamic_models(tmp_path, kind):
    elsewhere = tmp_path / "elsewhere"
    onnx_path, result = _compile(tmp_path, kind, 2, external_weight_dir=str(elsewhere))
    with pytest.raises(FormatError, match=r"weight/[a-z_]+_weight_combined: external weight file is missing"):
        api.load_from_file(result.om_path, "sim")  # the default folder holds nothing
    model_id = api.load_from_file(result.om_path, "sim", weight_dir=str(elsewhere))
    try:
        _check_outputs(model_id, onnx_path, kind)
    finally:
        api.unload(model_id)
    with open(result.om_path, "rb") as f:
        model_id = api.load_from_mem(f.read(), "cpu", weight_dir=str(elsewhere), verify_weights=False)
    try:
        _check_outputs(model_id, onnx_path, kind)
    finally:
        api.unload(model_id)
    name = f"{kind}_weight_combined"  # aclmdlSetExternalWeightAddress: the user's device memory, used in place
    data = (elsewhere / name).read_bytes()
    buf = api.malloc(len(data), "sim")
    api.memcpy_h2d(buf, data)
    model_id = api.load_from_file(result.om_path, "sim", weight_memory={name: buf})
    try:
        assert [(f["source"], f["addr"]) for f in api.model(model_id).external_weights] == [("user", buf.addr)]
        _check_outputs(model_id, onnx_path, kind)
    finally:
        api.unload(model_id)
        api.free(buf)


def test_models_in_one_session_share_a_weight_file_once(tmp_path):
    """A gear model and a static model compiled into one folder (mode 1) load each file once."""
    onnx_path, gears = _compile(tmp_path, "gears", 1)
    _, static = _compile(tmp_path, "static", 1)
    assert set(gears.model.weight_files) == {a.file for a in static.model.weight_files}
    ids = [api.load_from_file(r.om_path, "sim") for r in (gears, static)]
    try:
        sources = [sorted(f["source"] for f in api.model(i).external_weights) for i in ids]
        assert sources == [["file", "file"], ["shared", "shared"]]
        _check_outputs(ids[0], onnx_path, "gears")
    finally:
        for i in ids:
            api.unload(i)


def test_a_damaged_weight_file_of_a_gear_model_is_named(tmp_path):
    _, result = _compile(tmp_path, "gears", 1)
    name = max(result.model.weight_files, key=result.model.weight_files.get)
    path = tmp_path / "out" / "weight" / name
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=rf"weight/{name}: sha256 of weight '[\w.]+' .* does not match"):
        api.load_from_file(result.om_path, "cpu")
    model_id = api.load_from_file(result.om_path, "cpu", verify_weights=False)
    api.unload(model_id)


def _edited(om: bytes, edit) -> bytes:
    layout = Layout.of(om)
    md = dict(layout.decoded[(MODEL_DEF, 0)])
    edit(md)
    return layout.signed({(MODEL_DEF, 0): msgpack.packb(md, use_bin_type=True)})


@pytest.mark.parametrize("edit,match", [
    (lambda md: md["weight_files"][0].update(size=8193), r"submodel 1 allocation \d+ \(FILE_CONSTANT\) is weight file "
                                                           r"'hybrid_weight_combined' of 8192 bytes; the root's weight_files "
                                                           r"hold 8193 bytes"),
    (lambda md: md["weight_files"][0].update(size=12), r"file_weights\[0\] 'TABLE': offset 0 \+ 2048 bytes exceeds "
                                                         r"weight file 'hybrid_weight_combined' \(12 bytes\)"),
    (lambda md: md["weight_files"][0].update(file="../x"), r"weight_files\[0\]: external weight file '\.\./x' is not a "
                                                            r"plain file name"),
    (lambda md: md["file_weights"][0].update(file="other"), r"file_weights\[0\] 'TABLE': weight file 'other' is not in "
                                                             r"the root's weight_files"),
    (lambda md: md["file_weights"][0].update(offset=8000), r"file_weights\[0\] 'TABLE': offset 8000 \+ 2048 bytes "
                                                            r"exceeds weight file 'hybrid_weight_combined' \(8192 bytes\)"),
    (lambda md: md["file_weights"][0].update(sha256="xyz"), r"file_weights\[0\] 'TABLE': sha256 'xyz' is not 64"),
    (lambda md: md["weight_files"].append({"file": "spare", "size": 4}), r"weight_files: 'spare' is read by no weight"),
])
def test_a_mutated_dynamic_om_names_the_weight_field(tmp_path, edit, match):
    build, options, _ = KINDS["data_dependent"]
    path = str(tmp_path / "dd.onnx")
    onnx.save(build(), path)
    result = api.atc(path, str(tmp_path / "hybrid"), external_weight=2, **options)
    om = open(result.om_path, "rb").read()
    with pytest.raises(FormatError, match=match):
        api.load_from_mem(_edited(om, edit), weight_dir=str(tmp_path / "weight"))


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_control_flow_branches_read_the_shared_weight_files(tmp_path, device):
    """An If whose branches (static submodels) read two large weights: both in the files."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    vi = onnx.helper.make_tensor_value_info
    f = onnx.TensorProto.FLOAT
    then = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "W"], ["t"])], "then", [], [vi("t", f, [4, 64])])
    other = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "V"], ["e"])], "else", [],
                                   [vi("e", f, [4, 64])], [onnx.numpy_helper.from_array(w * 2, "V")])
    nodes = [onnx.helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             onnx.helper.make_node("Greater", ["s", "z"], ["c"]),
             onnx.helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    graph = onnx.helper.make_graph(nodes, "cf", [vi("x", f, [4, 64])], [vi("y", f, [4, 64])],
                                   [onnx.numpy_helper.from_array(w, "W"),
                                    onnx.numpy_helper.from_array(np.array(0, np.float32), "z")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "cf.onnx")
    onnx.save(model, path)
    result = api.atc(path, str(tmp_path / "cf"), external_weight=2)
    assert result.model.weight_files == {"cf_weight_combined": 2 * w.nbytes} and result.model.subgraphs
    model_id = api.load_from_file(result.om_path, device)
    try:
        for sign in (1, -1):  # each branch
            x = {"x": np.abs(rng.standard_normal((4, 64))).astype(np.float32) * sign}
            (got,) = api.execute(model_id, x)
            np.testing.assert_allclose(got, onnxruntime_outputs(path, x)[0], rtol=1e-4, atol=1e-4)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("kind", ["gears", "range", "hybrid"])
def test_ge_atc_and_ge_run_weight_dir(tmp_path, kind):
    build, options, batches = KINDS[kind]
    path = str(tmp_path / "m.onnx")
    onnx.save(build(), path)
    flags = [f"--{k}={v}" for k, v in options.items()]
    runner = CliRunner()
    r = runner.invoke(cli, ["atc", f"--model={path}", "--framework=5", f"--output={tmp_path / 'out' / 'm'}",
                            "--external_weight=1", f"--external_weight_dir={tmp_path / 'w'}", *flags, "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["external_weight"]["mode"] == 1 and len(summary["external_weight"]["files"]) == 2
    x = feeds(batches[-1])
    np.save(tmp_path / "x.npy", x["x"])
    run = ["run", "--model", str(tmp_path / "out" / "m.om"), "--input", str(tmp_path / "x.npy"),
           "--output-dir", str(tmp_path / "o"), "--device", "sim"]
    r = runner.invoke(cli, run)
    assert r.exit_code == 1 and "external weight file is missing" in r.stderr  # not in <om dir>/weight/
    r = runner.invoke(cli, [*run, "--weight_dir", str(tmp_path / "w"), "--skip_weight_check", "--verbose"])
    assert r.exit_code == 0, r.stderr
    assert "External weight files" in r.stdout
    (y,) = [np.load(tmp_path / "o" / f) for f in os.listdir(tmp_path / "o")]
    np.testing.assert_allclose(y, onnxruntime_outputs(path, x)[0], rtol=1e-4, atol=1e-4)
