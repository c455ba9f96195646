"""Loading external weights (PreProcessFileConstants): files, chunks, checks, safety, user memory,
sharing between models, and the weight folder override."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from ge.core.compile.build import build
from ge.core.compile.external_weights import externalize
from ge.core.model.errors import FormatError, GeError
from ge.core.model.ge_model import FILE_CONSTANT, WEIGHT_ID
from ge.core.model.ir import Graph, Node, Value
from ge.core.runtime import weight_loader
from ge.core.runtime.device import get_device
from ge.core.runtime.external_weight_manager import ExternalWeightConfig
from ge.core.runtime.model_manager import ModelManager
from ge.formats.weights import write_weight_files

F32 = np.dtype(np.float32)
RNG = np.random.default_rng(0)
W = RNG.standard_normal((64, 64)).astype(np.float32)  # 16 KiB: external in modes 1 and 2
W3 = RNG.standard_normal((64, 64)).astype(np.float32)
B = RNG.standard_normal(64).astype(np.float32)  # 256 B: stays inline
X = RNG.standard_normal((2, 64)).astype(np.float32)


def mlp(name="mlp", w3=W3):
    """y = relu(x @ w1 + b) @ w2 + x @ w3, with w2 == w1 (one file / slot for both)."""
    g = Graph(name=name, nodes=[Node("MatMul", ["x", "w1"], ["h"], name="mm1"), Node("Add", ["h", "b"], ["a"], name="add"),
                                Node("Relu", ["a"], ["r"], name="relu"), Node("MatMul", ["r", "w2"], ["m"], name="mm2"),
                                Node("MatMul", ["x", "w3"], ["n"], name="mm3"), Node("Add", ["m", "n"], ["y"], name="add2")],
              inputs=["x"], outputs=["y"], values={n: Value(n, F32, (2, 64)) for n in ("x", "h", "a", "r", "m", "n", "y")},
              initializers={"w1": W, "w2": W.copy(), "w3": w3, "b": B})
    return build(g)


def expected(x=X):
    return np.maximum(x @ W + B, 0) @ W + x @ W3


def assert_expected(y, x=X):
    """y is the MLP's output within float32 rounding, scaled to its largest value (sums of outputs up
    to ~60, whose rounding FMA use changes between levels)."""
    want = expected(x)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def compile_to(folder, mode, model=None):
    """The model with external weights (mode 1 or 2) written to folder/weight."""
    m, files = externalize(model or mlp(), mode)
    write_weight_files(files, os.path.join(folder, "weight"))
    return m


def load(m, device, folder=None, manager=None, **config):
    manager = manager or ModelManager()
    weight_dir = os.path.join(folder, "weight") if folder is not None else None
    model_id = manager.load(m, device, ExternalWeightConfig(config.pop("weight_dir", weight_dir), **config))
    return manager, model_id


@pytest.fixture(params=["cpu", "sim"])
def device(request):
    return request.param


@pytest.mark.parametrize("mode", [1, 2])
def test_results_equal_inline(tmp_path, device, mode):
    m = compile_to(tmp_path, mode)
    manager, model_id = load(m, device, tmp_path)
    try:
        (y,) = manager.execute(model_id, [X])
    finally:
        manager.unload(model_id)
    mi, mi_id = load(mlp(), device)
    (y0,) = mi.execute(mi_id, [X])
    mi.unload(mi_id)
    np.testing.assert_array_equal(y, y0)
    assert_expected(y)


def test_combined_file_is_one_allocation_and_chunked_copy(tmp_path, device, monkeypatch):
    m = compile_to(tmp_path, 2)
    (f,) = m.weight_files
    assert f.file == "mlp_weight_combined" and f.size == 64 * 64 * 4 + 64 * 64 * 4  # w1 (== w2) and w3
    monkeypatch.setattr(weight_loader, "CHUNK", 4096)
    dev = get_device(device)
    before = dict(dev.counters)
    manager, model_id = load(m, device, tmp_path)
    dm = manager.model(model_id)
    assert dev.counters["weight_file_chunks"] - before.get("weight_file_chunks", 0) == f.size // 4096
    assert [e["source"] for e in dm.external_weights] == ["file"]
    base = dm.weight_bases[f.id]
    offsets = {w.name: w.offset for w in m.weights if w.file}
    assert offsets == {"w1": 0, "w2": 0, "w3": 16384}  # 512-byte aligned slots, identical weights share one
    np.testing.assert_array_equal(dev.view(base + offsets["w3"], "float32", (64, 64)), W3)
    manager.unload(model_id)


def test_real_chunk_size_is_10_mb(tmp_path):
    big = np.arange(3_000_000, dtype=np.float32).reshape(1000, 3000)  # 12 MB
    g = Graph(name="big", nodes=[Node("MatMul", ["x", "w"], ["y"], name="mm")], inputs=["x"], outputs=["y"],
              values={"x": Value("x", F32, (1, 1000)), "y": Value("y", F32, (1, 3000))}, initializers={"w": big})
    m = compile_to(tmp_path, 2, build(g))
    dev = get_device("sim")
    chunks, h2d = dev.counters["weight_file_chunks"], dev.counters["h2d_count"]
    manager, model_id = load(m, "sim", tmp_path)
    assert dev.counters["weight_file_chunks"] - chunks == 2  # 10 MB + 2 MB
    x = np.ones((1, 1000), np.float32)
    np.testing.assert_allclose(manager.execute(model_id, [x])[0], x @ big, rtol=1e-5)  # summation order differs
    manager.unload(model_id)
    assert weight_loader.CHUNK == 10 << 20 and dev.counters["h2d_count"] - h2d >= 3


def test_individual_files_one_allocation_each(tmp_path, device):
    m = compile_to(tmp_path, 1)
    files = m.weight_files
    assert len(files) == 2 and all(f.file.startswith("weight_") and len(f.file) == 7 + 64 for f in files)
    assert sorted(os.listdir(tmp_path / "weight")) == sorted([f.file for f in files] + ["meta.json", "meta.json.lock"])
    dev = get_device(device)
    mallocs = dev.counters["mallocs"]
    manager, model_id = load(m, device, tmp_path)
    dm = manager.model(model_id)
    assert {e["file"] for e in dm.external_weights} == {f.file for f in files}
    assert len({dm.weight_bases[f.id] for f in files}) == 2
    # the inline WEIGHT, one per file, and the context's FM, workspace, IO and args table
    assert dev.counters["mallocs"] - mallocs == 1 + 2 + len(dm.default_context._owned)
    manager.unload(model_id)


def test_args_table_points_into_the_file_allocations(tmp_path, device):
    m = compile_to(tmp_path, 1)
    manager, model_id = load(m, device, tmp_path)
    dm = manager.model(model_id)
    ctx = dm.default_context
    for f in m.weight_files:
        assert ctx.args.base[f.id] == dm.weight_bases[f.id]  # fixed bases, set once
        slots = ctx.args.layout.by_allocation[f.id]
        assert len(slots) and all(ctx.args.table[s] == dm.weight_bases[f.id] for s in slots)
    manager.execute(model_id, [X])
    assert ctx.stats["args_bytes"] < ctx.args.layout.size * 8  # weight slots are never rewritten
    manager.unload(model_id)


# -- errors: every one names the file ------------------------------------------------------------

def one_file(tmp_path, mode=2):
    m = compile_to(tmp_path, mode)
    return m, os.path.join(tmp_path, "weight", m.weight_files[0].file)


def test_missing_file(tmp_path, device):
    m, path = one_file(tmp_path)
    os.remove(path)
    with pytest.raises(FormatError, match=f"^{path}: external weight file is missing"):
        load(m, device, tmp_path)


def test_truncated_file(tmp_path, device):
    m, path = one_file(tmp_path)
    size = os.path.getsize(path)
    os.truncate(path, size - 1)
    with pytest.raises(FormatError, match=f"^{path}: external weight file is truncated: {size - 1} bytes, "
                                          f"the model needs {size}"):
        load(m, device, tmp_path)


def test_longer_file(tmp_path, device):
    m, path = one_file(tmp_path)
    with open(path, "ab") as f:
        f.write(b"x")
    with pytest.raises(FormatError, match=f"^{path}: external weight file is .* bytes, the model expects"):
        load(m, device, tmp_path)


@pytest.mark.parametrize("mode", [1, 2])
def test_tampered_byte_with_sha256_on_and_off(tmp_path, device, mode):
    m, path = one_file(tmp_path, mode)
    data = bytearray(open(path, "rb").read())
    data[100] ^= 0x40
    open(path, "wb").write(bytes(data))
    with pytest.raises(FormatError, match=f"^{path}: sha256 of weight '.*' \\(bytes 0..16384\\) does not match "
                                          "the model's .*: the file was modified or corrupted"):
        load(m, device, tmp_path)
    manager, model_id = load(m, device, tmp_path, verify=False)  # opted out: loads (and computes garbage)
    manager.unload(model_id)


def test_failed_load_frees_everything(tmp_path, device):
    m, path = one_file(tmp_path)
    os.truncate(path, 10)
    dev = get_device(device)
    before = dev.in_use
    with pytest.raises(FormatError):
        load(m, device, tmp_path)
    assert dev.in_use == before


@pytest.mark.parametrize("name, message", [
    ("../escape", "leaves the weight folder"),
    ("/etc/passwd", "is an absolute path"),
    ("sub/w", "names a folder"),
])
def test_names_outside_the_folder_are_refused(tmp_path, name, message):
    m = compile_to(tmp_path, 2)
    f = m.weight_files[0]
    bad = m.replace(allocations=[a._replace(file=name) if a.id == f.id else a for a in m.allocations],
                    weights=[w._replace(file=name) if w.allocation == f.id else w for w in m.weights])
    with pytest.raises(FormatError, match=f"external weight file '{name}' {message}"):
        load(bad, "cpu", tmp_path)


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    m, path = one_file(tmp_path)
    outside = tmp_path / "outside.bin"
    shutil.move(path, outside)
    os.symlink(outside, path)
    with pytest.raises(FormatError, match=f"^{path}: a symlink leading outside the weight folder"):
        load(m, "cpu", tmp_path)


def test_symlink_inside_the_folder_is_followed(tmp_path):
    m, path = one_file(tmp_path)
    os.makedirs(tmp_path / "weight" / "store")
    inside = tmp_path / "weight" / "store" / "w.bin"
    shutil.move(path, inside)
    os.symlink(inside, path)
    manager, model_id = load(m, "cpu", tmp_path)
    assert_expected(manager.execute(model_id, [X])[0])
    manager.unload(model_id)


def test_no_weight_folder(tmp_path):
    m = compile_to(tmp_path, 1)
    with pytest.raises(GeError, match="model 'mlp' keeps its weights in external files .*weight_dir"):
        load(m, "cpu", weight_dir=None)


def test_weight_folder_override(tmp_path, device):
    m = compile_to(tmp_path, 1)
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "weight", moved)
    with pytest.raises(FormatError, match="external weight file is missing"):
        load(m, device, tmp_path)
    manager, model_id = load(m, device, weight_dir=str(moved))
    assert_expected(manager.execute(model_id, [X])[0])
    manager.unload(model_id)


# -- user-provided weight memory (aclmdlSetExternalWeightAddress) --------------------------------

def user_buffers(m, folder, device, extra=0):
    dev = get_device(device)
    buffers = {}
    for f in m.weight_files:
        data = np.fromfile(os.path.join(folder, "weight", f.file), np.uint8)
        buf = dev.buffer(f.size + extra)
        dev.memcpy_h2d(buf.addr, data)
        buffers[f.file] = buf
    return buffers


@pytest.mark.parametrize("mode", [1, 2])
def test_user_memory_is_used_in_place_and_not_freed(tmp_path, device, mode):
    m = compile_to(tmp_path, mode)
    buffers = user_buffers(m, tmp_path, device, extra=512)  # larger than needed is fine
    heads = {f.file: open(tmp_path / "weight" / f.file, "rb").read(64) for f in m.weight_files}
    shutil.rmtree(tmp_path / "weight")  # user memory wins over the folder: files are not read
    dev = get_device(device)
    before = dev.in_use
    manager, model_id = load(m, device, tmp_path,
                             user_memory={k: (b.addr, b.nbytes) if mode == 1 else b for k, b in buffers.items()})
    dm = manager.model(model_id)
    assert {dm.weight_bases[f.id] for f in m.weight_files} == {b.addr for b in buffers.values()}
    assert {e["source"] for e in dm.external_weights} == {"user"}
    assert dev.in_use - before < sum(f.size for f in m.weight_files)  # no copy of the weights
    assert_expected(manager.execute(model_id, [X])[0])
    manager.unload(model_id)
    assert dev.in_use == before
    for name, b in buffers.items():  # still the user's, untouched
        assert dev.bytes_at(b.addr, 64).tobytes() == heads[name]
        dev.free(b.addr)


def test_user_memory_size_is_checked(tmp_path, device):
    m = compile_to(tmp_path, 2)
    (f,) = m.weight_files
    buffers = user_buffers(m, tmp_path, device)
    buf = buffers[f.file]
    with pytest.raises(GeError, match=f"model 'mlp': the memory given for weight file '{f.file}' is {f.size - 1} bytes, "
                                      f"the file needs {f.size}"):
        load(m, device, tmp_path, user_memory={f.file: (buf.addr, f.size - 1)})
    get_device(device).free(buf.addr)


def test_user_memory_must_be_device_memory_of_a_used_file(tmp_path):
    m = compile_to(tmp_path, 2)
    (f,) = m.weight_files
    with pytest.raises(GeError, match=f"the memory given for weight file '{f.file}' \\(0x10, {f.size} bytes\\) is not sim "
                                      "device memory"):
        load(m, "sim", tmp_path, user_memory={f.file: (16, f.size)})
    with pytest.raises(GeError, match="external weight memory was given for 'nope', which the model does not use "
                                      f"\\(its weight files: {f.file}\\)"):
        load(m, "sim", tmp_path, user_memory={"nope": (16, 16)})
    with pytest.raises(GeError, match="must be \\(address, size\\) or a DeviceBuffer"):
        ExternalWeightConfig(user_memory={f.file: "here"})


# -- shared loading (session-level ExternalWeightManager) ----------------------------------------

def test_two_models_share_their_weight_files(tmp_path, device):
    a = compile_to(tmp_path, 1, mlp("a"))
    b = compile_to(tmp_path, 1, mlp("b"))
    file_bytes = sum(f.size for f in a.weight_files)
    assert {f.file for f in a.weight_files} == {f.file for f in b.weight_files}
    dev = get_device(device)
    manager = ModelManager()
    start = dev.in_use
    _, ida = load(a, device, tmp_path, manager)
    one = dev.in_use - start
    _, idb = load(b, device, tmp_path, manager)
    two = dev.in_use - start
    assert two == 2 * one - file_bytes  # the second model adds everything but the weight files
    assert {e["source"] for e in manager.model(idb).external_weights} == {"shared"}
    assert [e["refs"] for e in manager.weight_manager.loaded()] == [2, 2]
    np.testing.assert_array_equal(manager.execute(ida, [X])[0], manager.execute(idb, [X])[0])
    manager.unload(ida)
    assert dev.in_use - start == one  # b still holds the files
    assert_expected(manager.execute(idb, [X])[0])
    manager.unload(idb)
    assert dev.in_use == start and manager.weight_manager.loaded() == []


def test_sessions_and_devices_do_not_share(tmp_path):
    m = compile_to(tmp_path, 1)
    m1, id1 = load(m, "cpu", tmp_path)
    m2, id2 = load(m, "cpu", tmp_path)  # another ModelManager: another session
    m3, id3 = load(m, "sim", tmp_path, m1)  # same session, other device
    assert {e["source"] for e in m2.model(id2).external_weights} == {"file"}
    assert {e["source"] for e in m1.model(id3).external_weights} == {"file"}
    for manager, model_id in ((m1, id1), (m2, id2), (m1, id3)):
        manager.unload(model_id)


def test_shared_file_is_checked_for_weights_the_first_user_did_not_check(tmp_path):
    m = compile_to(tmp_path, 1)
    manager, first = load(m, "cpu", tmp_path, verify=False)
    f = m.weight_files[0]
    path = os.path.join(tmp_path, "weight", f.file)
    st = os.stat(path)
    data = bytearray(open(path, "rb").read())
    data[7] ^= 1
    with open(path, "r+b") as fh:  # same inode, size and mtime: the manager sees the same file
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(FormatError, match=f"{f.file}: sha256 of weight"):
        load(m, "cpu", tmp_path, manager)
    manager.unload(first)
    assert manager.weight_manager.loaded() == []


def test_inline_weights_stay_in_the_weight_allocation(tmp_path):
    m = compile_to(tmp_path, 1)
    inline = {w.name for w in m.weights if w.allocation == WEIGHT_ID}
    assert inline == {"b"} and m.weight_size == 256
    assert [a.kind for a in m.allocations].count(FILE_CONSTANT) == 2
