"""Dataset runs: every sample of a folder (one file per sample, a sub-folder per input, folders per
input, .npz per sample), outputs named after the samples, a mismatching file named."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.dataset import discover

rng = np.random.default_rng(0)


def two_input_model(tmp_path, batch=2):
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "a"], ["p"])]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, 3]) for n in "ab"]
    g = helper.make_graph(nodes, "two", vi, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, 3])
                                             for n in "sp"])
    path = str(tmp_path / "two.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return api.atc(path, str(tmp_path / "two")).om_path


def samples(n=3):
    return [(f"img{k:03d}", rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32))
            for k in range(n)]


@pytest.mark.parametrize("layout", ["subfolders", "folders", "npz"])
def test_every_sample_runs_and_is_named(tmp_path, layout):
    om = two_input_model(tmp_path)
    data = samples()
    root = tmp_path / "data"
    if layout == "npz":
        root.mkdir()
        for stem, a, b in data:
            np.savez(root / f"{stem}.npz", a=a, b=b)
        paths = [str(root)]
    else:
        for name, k in (("a", 1), ("b", 2)):
            (root / name).mkdir(parents=True)
            for row in data:
                np.save(root / name / f"{row[0]}.npy", row[k])
        paths = [str(root)] if layout == "subfolders" else [str(root / "a"), str(root / "b")]
    model_id = api.load_from_file(om)
    seen = []
    try:
        summary = api.run_dataset(model_id, paths, str(tmp_path / "out"), progress=lambda d, t, s: seen.append((d, t, s)))
    finally:
        api.unload(model_id)
    assert summary["samples"] == 3 and summary["throughput"] > 0
    assert seen == [(k + 1, 3, row[0]) for k, row in enumerate(data)]
    for stem, a, b in data:
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{stem}_output_0.npy"), a + b, rtol=1e-6)
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{stem}_output_1.npy"), (a + b) * a, rtol=1e-6)


def test_one_input_folder_of_files(tmp_path):
    (tmp_path / "d").mkdir()
    for k in range(2):
        np.save(tmp_path / "d" / f"{k}.npy", np.zeros((2, 3), np.float32))
    (tmp_path / "d" / "notes.txt").write_text("not a sample")
    assert [s.stem for s in discover([str(tmp_path / "d")], ["x"])] == ["0", "1"]


@pytest.mark.parametrize("case,match", [
    ("unpaired", "b/img002.npy: no file of that name for every input"),
    ("same_stem", "another sample has the same name"),
    ("empty", "no sample files"),
    ("folders", "2 folders for a model with 3 inputs"),
    ("flat_npy", "reads one .npz per sample"),
])
def test_layouts_that_do_not_pair_are_named(tmp_path, case, match):
    root = tmp_path / "data"
    for name in "ab":
        (root / name).mkdir(parents=True)
        for k in range(2 if (case == "unpaired" and name == "a") else 3):
            np.save(root / name / f"img{k:03d}.npy", np.zeros(1))
    names, paths = ["a", "b"], [str(root)]
    if case == "same_stem":
        np.save(root / "a" / "img000.bin", np.zeros(1))
        (root / "a" / "img000.bin").write_bytes(b"x")
    if case == "empty":
        paths = [str(tmp_path / "none")]
        (tmp_path / "none").mkdir()
        names = ["x"]
    if case == "folders":
        paths, names = [str(root / "a"), str(root / "b")], ["a", "b", "c"]
    if case == "flat_npy":
        paths = [str(root / "a")]
    with pytest.raises(GeError, match=match):
        discover(paths, names)


def test_a_sample_that_does_not_fit_stops_the_run_naming_its_file(tmp_path):
    om = two_input_model(tmp_path)
    root = tmp_path / "data"
    root.mkdir()
    np.savez(root / "a0.npz", a=np.zeros((2, 3), np.float32), b=np.zeros((2, 3), np.float32))
    np.savez(root / "a1.npz", a=np.zeros((2, 4), np.float32), b=np.zeros((2, 3), np.float32))
    model_id = api.load_from_file(om)
    try:
        with pytest.raises(GeError, match="a1.npz"):
            api.run_dataset(model_id, [str(root)], str(tmp_path / "out"))
    finally:
        api.unload(model_id)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a0_output_0.npy", "a0_output_1.npy"]
