"""formats/tensors.py: input files (.npy/.npz/.bin) checked against input descs, random inputs,
atomic output files."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest

from ge.core.model.errors import FormatError, ShapeError
from ge.formats.tensors import load_inputs, output_path, random_inputs, save_outputs


@dataclass(frozen=True)
class Desc:
    name: str
    dtype: str
    shape: tuple


X = Desc("x", "float32", (1, 3, 4))
IDS = Desc("ids", "int64", (2, 5))


def test_npy_and_bin_in_order(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    ids = np.arange(10, dtype=np.int64).reshape(2, 5)
    np.save(tmp_path / "x.npy", x)
    ids.tofile(tmp_path / "ids.bin")
    got = load_inputs([str(tmp_path / "x.npy"), str(tmp_path / "ids.bin")], [X, IDS])
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], ids)
    assert got[1].dtype == np.int64 and got[1].shape == (2, 5)


def test_npz_by_name_in_order_and_single_archive(tmp_path):
    x = np.ones((1, 3, 4), np.float32)
    ids = np.zeros((2, 5), np.int64)
    np.savez(tmp_path / "named.npz", ids=ids, x=x)
    got = load_inputs([str(tmp_path / "named.npz")], [X, IDS])  # one archive, by name
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], ids)
    np.savez(tmp_path / "ordered.npz", x, ids)  # arr_0, arr_1: in order
    got = load_inputs([str(tmp_path / "ordered.npz")], [X, IDS])
    np.testing.assert_array_equal(got[1], ids)
    np.savez(tmp_path / "one.npz", x)  # per-input archive holding one unnamed array
    got = load_inputs([str(tmp_path / "one.npz")], [X])
    np.testing.assert_array_equal(got[0], x)
    np.savez(tmp_path / "other.npz", anything=x)  # named after something else: not fed by position
    with pytest.raises(FormatError, match=r"holds \['anything'\], none named 'x'"):
        load_inputs([str(tmp_path / "other.npz")], [X])


def test_bin_of_wrong_size_names_file_input_and_sizes(tmp_path):
    np.zeros(11, np.float32).tofile(tmp_path / "x.bin")
    with pytest.raises(ShapeError) as e:
        load_inputs([str(tmp_path / "x.bin")], [X])
    msg = str(e.value)
    assert "'x'" in msg and "x.bin" in msg and "44" in msg and "48" in msg


def test_wrong_shape_and_dtype_name_the_input(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((1, 4, 3), np.float32))
    with pytest.raises(ShapeError, match=r"input 'x'.*a\.npy.*\[1, 4, 3\].*\[1, 3, 4\]"):
        load_inputs([str(tmp_path / "a.npy")], [X])
    np.save(tmp_path / "b.npy", np.zeros((1, 3, 4), np.float64))
    with pytest.raises(ShapeError, match=r"input 'x'.*float64.*float32"):
        load_inputs([str(tmp_path / "b.npy")], [X])


def test_count_missing_and_broken_files(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 4), np.float32))
    with pytest.raises(ShapeError, match="2 input"):
        load_inputs([str(tmp_path / "x.npy")], [X, IDS])
    with pytest.raises(FormatError, match="nope.npy"):
        load_inputs([str(tmp_path / "nope.npy")], [X])
    (tmp_path / "bad.npy").write_bytes(b"not numpy at all")
    with pytest.raises(FormatError, match=r"input 'x'.*bad\.npy"):
        load_inputs([str(tmp_path / "bad.npy")], [X])
    (tmp_path / "bad.npz").write_bytes(b"PK not a zip")
    with pytest.raises(FormatError, match=r"bad\.npz"):
        load_inputs([str(tmp_path / "bad.npz")], [X])
    np.savez(tmp_path / "two.npz", a=np.zeros(1), b=np.zeros(1))
    with pytest.raises(FormatError, match="none named 'x'"):
        load_inputs([str(tmp_path / "two.npz")], [X])


def test_random_inputs_are_seeded_and_typed():
    b = Desc("mask", "bool", (3,))
    a1 = random_inputs([X, IDS, b], seed=3)
    a2 = random_inputs([X, IDS, b], seed=3)
    for p, q in zip(a1, a2):
        np.testing.assert_array_equal(p, q)
    assert [a.dtype for a in a1] == [np.float32, np.int64, np.bool_]
    assert a1[0].shape == (1, 3, 4) and a1[1].shape == (2, 5)
    assert a1[1].min() >= 0 and a1[1].max() < 10
    assert not np.array_equal(random_inputs([X], seed=4)[0], a1[0])


@pytest.mark.parametrize("fmt", ["npy", "BIN", "Txt"])
def test_save_outputs_round_trip(tmp_path, fmt):
    y0 = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    y1 = np.arange(4, dtype=np.int64)
    paths = save_outputs([y0, y1], tmp_path / "out", "net", fmt)
    ext = "." + fmt.lower()
    assert paths == [str(tmp_path / "out" / f"net_output_{i}{ext}") for i in range(2)]
    assert paths[0] == output_path(str(tmp_path / "out"), "net", 0, fmt)
    if fmt.upper() == "NPY":
        back = [np.load(p) for p in paths]
    elif fmt.upper() == "BIN":
        back = [np.fromfile(paths[0], np.float32).reshape(2, 3), np.fromfile(paths[1], np.int64)]
    else:
        back = [np.loadtxt(paths[0], dtype=np.float32).reshape(2, 3), np.loadtxt(paths[1], dtype=np.int64)]
    np.testing.assert_array_equal(back[0], y0)
    np.testing.assert_array_equal(back[1], y1)
    assert not [f for f in os.listdir(tmp_path / "out") if f.endswith(".tmp")]


def test_save_outputs_bad_format(tmp_path):
    with pytest.raises(FormatError, match="PNG"):
        save_outputs([np.zeros(1)], tmp_path, "m", "PNG")


S = Desc("s", "float32", ())


def test_scalars_stay_scalars_from_npy_npz_and_bin(tmp_path):
    s = np.array(2.5, np.float32)
    np.save(tmp_path / "s.npy", s)
    np.savez(tmp_path / "s.npz", s=s)
    s.tofile(tmp_path / "s.bin")
    for name in ("s.npy", "s.npz", "s.bin"):
        got, = load_inputs([str(tmp_path / name)], [S])
        assert got.shape == () and got.dtype == np.float32 and got == 2.5, name
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    np.savez(tmp_path / "all.npz", x=x, s=s)
    got = load_inputs([str(tmp_path / "all.npz")], [X, S])
    assert got[1].shape == () and got[1] == 2.5
    assert random_inputs([S])[0].shape == ()


@pytest.mark.parametrize("obj", [np.array([{"a": 1}], dtype=object), np.array(["a", "b"], dtype=object)],
                         ids=["dict", "str"])
def test_pickled_arrays_are_never_loaded_and_the_error_says_how_to_save_strings(tmp_path, obj):
    np.save(tmp_path / "p.npy", obj, allow_pickle=True)
    np.savez(tmp_path / "p.npz", s=obj)
    how = r"holds pickled Python objects, which ge never loads; save strings as numpy's str dtype"
    with pytest.raises(FormatError, match=r"input 's' \(file '.*p\.npy'\): " + how):
        load_inputs([str(tmp_path / "p.npy")], [S])
    with pytest.raises(FormatError, match=r"input 's' \(file '.*p\.npz'\): array 's': " + how):
        load_inputs([str(tmp_path / "p.npz")], [S])


SMALL = ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
         "float4_e2m1fn", "int4", "uint4", "int2", "uint2"]


def _np_save(path, array):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's note that the dtype has no descr
        np.save(path, array)


@pytest.mark.parametrize("name", SMALL)
def test_ml_dtypes_npy_round_trips_as_np_save_writes_and_np_load_reads(tmp_path, name):
    """np.save writes an ml_dtypes array as a void of its width ('|V1', '|V2'; float8_e5m2 as '<f1',
    which np.load refuses): read as the model's dtype. Outputs are written with the void descr, so
    np.load(f).view(dtype) gives the very bytes back."""
    import ml_dtypes
    dtype = np.dtype(getattr(ml_dtypes, name))
    array = np.array([[1, 2, 0.5], [-1, 3, 4]]).astype(dtype) if dtype.kind == "V" or "float" in name \
        else np.array([[1, 0, 1], [0, 1, 1]]).astype(dtype)
    _np_save(tmp_path / "x.npy", array)
    (x,) = load_inputs([str(tmp_path / "x.npy")], [Desc("x", name, (2, 3))])
    assert x.dtype == dtype and x.tobytes() == array.tobytes()
    (out,) = save_outputs([x], str(tmp_path / "out"), "m", "NPY")
    back = np.load(out)
    assert back.dtype == np.dtype(f"V{dtype.itemsize}") and back.view(dtype).tobytes() == array.tobytes()


def test_ml_dtypes_npy_of_another_width_is_refused_naming_the_input(tmp_path):
    import ml_dtypes
    _np_save(tmp_path / "f8.npy", np.zeros((2, 3), ml_dtypes.float8_e4m3fn))
    with pytest.raises(ShapeError, match=r"input 'x' \(file '.*f8.npy'\): dtype \|V1 does not match the model's bfloat16"):
        load_inputs([str(tmp_path / "f8.npy")], [Desc("x", "bfloat16", (2, 3))])
    _np_save(tmp_path / "e5m2.npy", np.zeros((2, 3), ml_dtypes.float8_e5m2))
    with pytest.raises(ShapeError, match=r"dtype descr '<f1' does not match the model's bfloat16 \(2 byte\(s\)\)"):
        load_inputs([str(tmp_path / "e5m2.npy")], [Desc("x", "bfloat16", (2, 3))])
    with pytest.raises(FormatError, match=r"input 'x' \(file '.*e5m2.npy'\): not a readable .npy file"):
        load_inputs([str(tmp_path / "e5m2.npy")], [Desc("x", "float32", (2, 3))])
    data = (tmp_path / "e5m2.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-1])  # a truncated file: refused before reading
    with pytest.raises(FormatError, match=r"5 data bytes for 6 elements"):
        load_inputs([str(tmp_path / "short.npy")], [Desc("x", "float8_e5m2", (2, 3))])


@dataclass(frozen=True)
class ValueDesc:
    name: str
    dtype: str
    shape: tuple
    kind: str


def test_pb_inputs_by_the_model_type_and_pb_outputs_onnx_reads(tmp_path):
    import onnx
    from onnx import numpy_helper
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    seq = [np.ones(2, np.float32), np.zeros((1, 3), np.float32)]
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (tmp_path / "s.pb").write_bytes(numpy_helper.from_list(seq, "s").SerializeToString())
    (tmp_path / "o.pb").write_bytes(numpy_helper.from_optional(None, "o").SerializeToString())
    descs = [X, ValueDesc("s", "float32", (-2,), "sequence"), ValueDesc("o", "int64", (-2,), "optional")]
    got = load_inputs([str(tmp_path / n) for n in ("x.pb", "s.pb", "o.pb")], descs)
    assert got[0].tobytes() == x.tobytes() and [a.tolist() for a in got[1]] == [a.tolist() for a in seq]
    assert got[2] is None
    paths = save_outputs(got, str(tmp_path / "out"), "m", "pb", descs)
    assert [os.path.basename(p) for p in paths] == ["m_output_0.pb", "m_output_1.pb", "m_output_2.pb"]
    t = onnx.load_tensor(paths[0])
    assert t.name == "x" and numpy_helper.to_array(t).tobytes() == x.tobytes()
    back = numpy_helper.to_list(onnx.SequenceProto.FromString(open(paths[1], "rb").read()))
    assert [a.tolist() for a in back] == [a.tolist() for a in seq]
    assert numpy_helper.to_optional(onnx.OptionalProto.FromString(open(paths[2], "rb").read())) is None
    with pytest.raises(FormatError, match=r"output 1 is a sequence, which has a file form only as ONNX's SequenceProto: "
                                          r"use --outfmt PB"):
        save_outputs(got, str(tmp_path / "npy"), "m", "NPY", descs)
    assert not (tmp_path / "npy").exists()


def test_bad_pb_inputs_are_named(tmp_path):
    from onnx import numpy_helper
    data = numpy_helper.from_array(np.zeros((1, 3, 4), np.float32)).SerializeToString()
    (tmp_path / "short.pb").write_bytes(data[:-5])
    with pytest.raises(FormatError, match=r"input 'x' \(file '.*short\.pb'\): not a readable ONNX TensorProto file "
                                          r"\(field 9 at byte \d+ runs past the end\)"):
        load_inputs([str(tmp_path / "short.pb")], [X])
    (tmp_path / "i.pb").write_bytes(numpy_helper.from_array(np.zeros((1, 3, 4), np.int32)).SerializeToString())
    with pytest.raises(ShapeError, match=r"input 'x' \(file '.*i\.pb'\): dtype int32 does not match the model's float32"):
        load_inputs([str(tmp_path / "i.pb")], [X])
    (tmp_path / "s.pb").write_bytes(numpy_helper.from_list([np.zeros(2, np.int64)]).SerializeToString())
    with pytest.raises(ShapeError, match=r"input 's' \(file '.*s\.pb'\): a sequence of int64 tensors, the model's holds "
                                         r"float32"):
        load_inputs([str(tmp_path / "s.pb")], [ValueDesc("s", "float32", (-2,), "sequence")])
    np.save(tmp_path / "s.npy", np.zeros(2, np.float32))
    with pytest.raises(FormatError, match=r"input 's' \(file '.*s\.npy'\): the input is a sequence of float32, which has "
                                          r"a file form only as ONNX's SequenceProto \(a .pb file\)"):
        load_inputs([str(tmp_path / "s.npy")], [ValueDesc("s", "float32", (-2,), "sequence")])


def test_test_data_set_folders(tmp_path):
    from ge.formats.dataset import discover, test_data_set_files
    for k in (0, 1):
        folder = tmp_path / "case" / f"test_data_set_{k}"
        folder.mkdir(parents=True)
        for name in ("input_1.pb", "input_0.pb", "output_0.pb"):
            (folder / name).write_bytes(b"")
    one = tmp_path / "case" / "test_data_set_0"
    assert test_data_set_files([str(one)]) == [str(one / "input_0.pb"), str(one / "input_1.pb")]
    assert test_data_set_files([str(tmp_path / "case")]) == [str(tmp_path / "case")]  # a dataset: left as it is
    samples = discover([str(tmp_path / "case")], ["a", "b"])
    assert [(s.stem, [os.path.basename(f) for f in s.files]) for s in samples] == \
        [("test_data_set_0", ["input_0.pb", "input_1.pb"]), ("test_data_set_1", ["input_0.pb", "input_1.pb"])]
    (one / "input_0.pb").unlink()
    with pytest.raises(FormatError, match=r"test_data_set_0: input_0.pb is missing"):
        test_data_set_files([str(one)])


def test_declared_shapes_of_a_dynamic_model_s_files(tmp_path):
    """The shapes a dynamic model runs at, from the files' headers: np.save's descr of float8_e5m2
    ('<f1', which np.load refuses) and a TensorProto's dims included."""
    import ml_dtypes
    from onnx import numpy_helper

    from ge.formats.tensors import declared_shape
    _np_save(tmp_path / "e5m2.npy", np.zeros((4, 3), ml_dtypes.float8_e5m2))
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(np.zeros((2, 0, 5), np.float32)).SerializeToString())
    desc = Desc("x", "float8_e5m2", (-1, 3))
    assert declared_shape(str(tmp_path / "e5m2.npy"), desc) == (4, 3)
    assert declared_shape(str(tmp_path / "x.pb"), desc) == (2, 0, 5)
    (tmp_path / "x.bin").write_bytes(b"")
    with pytest.raises(FormatError, match=r"input 'x' \(file '.*x\.bin'\): a \.bin file declares no shape"):
        declared_shape(str(tmp_path / "x.bin"), desc)
