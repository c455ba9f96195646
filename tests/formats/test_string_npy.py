"""formats/string_npy.py through load_inputs: np.save's object arrays of str (onnx's own string
arrays) are read; a pickle that names anything else, or holds anything but strings, is refused
naming the file, and none of it runs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from ge.core.model.errors import FormatError
from ge.formats.tensors import load_inputs


@dataclass(frozen=True)
class Desc:
    name: str
    dtype: str
    shape: tuple


S = Desc("s", "object", (2, 2))


def test_object_arrays_of_str_and_utf8_bytes_load(tmp_path):
    words = np.array([["a", "ß"], ["", "x y"]], dtype=object)
    np.save(tmp_path / "c.npy", words)
    np.save(tmp_path / "f.npy", np.asfortranarray(words))
    np.save(tmp_path / "b.npy", np.array([[b"a", "ß".encode()], [b"", b"x y"]], dtype=object))
    np.savez(tmp_path / "z.npz", s=words)
    for name in ("c.npy", "f.npy", "b.npy", "z.npz"):
        got = load_inputs([str(tmp_path / name)], [S])[0]
        assert got.dtype == object and got.tolist() == words.tolist(), name


class _Opens:
    """A pickle that would create a file when loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("content,why", [
    ([[1, 2], [3, 4]], "it holds a int, not only strings"),
    ([["a", None], ["b", "c"]], "it holds a NoneType, not only strings"),
    ("opens", r"its pickle is not an array of strings \(it names (builtins|io)\.open\)"),
])
def test_other_pickles_are_refused_and_never_run(tmp_path, content, why):
    planted = tmp_path / "planted"
    array = np.empty((2, 2), dtype=object)
    array[:] = [[_Opens(str(planted))] * 2] * 2 if content == "opens" else content
    np.save(tmp_path / "x.npy", array, allow_pickle=True)
    with pytest.raises(FormatError, match=rf"input 's' \(file '.*x\.npy'\): an object array ge does not load: {why}"):
        load_inputs([str(tmp_path / "x.npy")], [S])
    assert not planted.exists()


def test_a_pickle_of_another_shape_than_its_header_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.array(["a", "b", "c"], dtype=object))
    data = (tmp_path / "x.npy").read_bytes().replace(b"(3,)", b"(4,)")
    (tmp_path / "y.npy").write_bytes(data)
    with pytest.raises(FormatError, match=r"its pickle is not an array of shape \[4\]"):
        load_inputs([str(tmp_path / "y.npy")], [Desc("s", "object", (4,))])
