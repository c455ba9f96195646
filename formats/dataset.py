"""Dataset folders as msame and ais_bench read them (`ge run --input DIR`):

    DIR/                one file per sample (.npy, .bin, .npz) for a one-input model
    DIR/<input name>/   one sub-folder per input, the same file names in each (several inputs)
    DIR1,DIR2           one folder per input, in the model's input order (ais_bench's spelling)
    DIR/*.npz           one .npz per sample holding every input by name
    DIR/test_data_set_N/input_K.pb   onnx's layout (onnx_test_runner, Polygraphy): a sample per folder,
                        its inputs as ONNX TensorProto/SequenceProto/OptionalProto files in input order

A single test_data_set folder (input_0.pb, input_1.pb ...) is not a dataset but one set of inputs:
`test_data_set_files` lists them for `ge run --input` as if each file had been given.

A sample is named by its file's stem; its outputs become `OUT/<stem>_output_<i>.<fmt>`. Files are
only listed and checked here (names, pairing); their contents are read and checked against the
model per sample by formats/tensors.py.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..core.model.errors import FormatError

EXTENSIONS = (".npy", ".bin", ".npz", ".pb")
_TEST_DATA_SET, _INPUT_PB = re.compile(r"test_data_set_\d+"), re.compile(r"input_(\d+)\.pb")


@dataclass(frozen=True)
class Sample:
    stem: str
    files: tuple  # one per input, or a single .npz holding every input


def test_data_set_files(paths: list[str]) -> list[str]:
    """`paths`, or the input_K.pb files of a single test_data_set folder (any folder holding only
    input_<K>.pb files and, as onnx's, output_<K>.pb), in K order: none for a test_data_set_N
    folder without any (a model without inputs)."""
    if len(paths) != 1 or not os.path.isdir(paths[0]):
        return paths
    inputs = _input_pbs(paths[0])
    return inputs if inputs is not None else paths


def _input_pbs(folder: str) -> list[str] | None:
    """The input_K.pb files of a test_data_set folder in K order, or None when it is not one."""
    try:
        names = [n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
    except OSError as e:
        raise FormatError(f"{folder}: {e.strerror or e}") from None
    found = {int(m.group(1)): n for n in names if (m := _INPUT_PB.fullmatch(n))}
    others = [n for n in names if os.path.splitext(n)[1].lower() in EXTENSIONS and not _INPUT_PB.fullmatch(n)
              and not n.startswith("output_")]
    if others or not (found or _TEST_DATA_SET.fullmatch(os.path.basename(os.path.normpath(folder)))):
        return None  # (a test_data_set_N folder of no input_K.pb: the data of a model without inputs)
    missing = [k for k in range(max(found, default=-1) + 1) if k not in found]
    if missing:
        raise FormatError(f"{folder}: input_{missing[0]}.pb is missing (the files are input_0.pb, input_1.pb ... in "
                          "the model's input order)")
    return [os.path.join(folder, found[k]) for k in sorted(found)]


def is_dataset(paths: list[str]) -> bool:
    """`--input` names folders (a dataset) rather than files."""
    return bool(paths) and all(os.path.isdir(p) for p in paths)


def discover(paths: list[str], input_names: list[str]) -> list[Sample]:
    """The samples of a dataset, sorted by name; a file that does not pair up is an error naming it."""
    if len(paths) > 1:
        if len(paths) != len(input_names):
            raise FormatError(f"--input gives {len(paths)} folders for a model with {len(input_names)} inputs "
                              f"({', '.join(input_names)})")
        return _paired(dict(zip(input_names, paths)))
    root = paths[0]
    sets = _test_data_sets(root)
    if sets:
        return sets
    subdirs = {n: os.path.join(root, n) for n in input_names if os.path.isdir(os.path.join(root, n))}
    if len(input_names) > 1 and subdirs:
        missing = [n for n in input_names if n not in subdirs]
        if missing:
            raise FormatError(f"{root}: no sub-folder for input(s) {', '.join(missing)} (one per input, named after it)")
        return _paired(subdirs)
    files = _files(root)
    if not files:
        raise FormatError(f"{root}: no sample files ({', '.join(EXTENSIONS)})")
    if len(input_names) > 1:
        not_npz = [f for f in files if not f.endswith(".npz")]
        if not_npz:
            raise FormatError(f"{os.path.join(root, not_npz[0])}: a model with {len(input_names)} inputs reads one "
                              f".npz per sample, or one sub-folder per input named after it")
    return [Sample(_stem(f), (os.path.join(root, f),)) for f in files]


def _test_data_sets(root: str) -> list[Sample]:
    """onnx's layout: a sample per test_data_set_N folder, named after it."""
    try:
        names = [n for n in os.listdir(root) if _TEST_DATA_SET.fullmatch(n) and os.path.isdir(os.path.join(root, n))]
    except OSError as e:
        raise FormatError(f"{root}: {e.strerror or e}") from None
    samples = []
    for n in sorted(names, key=lambda n: int(n.rsplit("_", 1)[1])):
        files = _input_pbs(os.path.join(root, n))
        if files is None:
            raise FormatError(f"{os.path.join(root, n)}: no input_<K>.pb files (onnx's test data layout)")
        samples.append(Sample(n, tuple(files)))
    return samples


def _paired(folders: dict[str, str]) -> list[Sample]:
    listing = {name: {_stem(f): f for f in _files(d)} for name, d in folders.items()}
    first, stems = next(iter(listing)), set(next(iter(listing.values())))
    for name, files in listing.items():
        if not files:
            raise FormatError(f"{folders[name]}: no sample files ({', '.join(EXTENSIONS)})")
        odd = sorted(set(files) ^ stems)
        if odd:
            where = folders[name] if odd[0] in files else folders[first]
            raise FormatError(f"{os.path.join(where, (files if odd[0] in files else listing[first])[odd[0]])}: "
                              f"no file of that name for every input")
    return [Sample(stem, tuple(os.path.join(folders[n], listing[n][stem]) for n in folders)) for stem in sorted(stems)]


def _files(folder: str) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise FormatError(f"{folder}: {e.strerror or e}") from None
    files = [n for n in names if os.path.splitext(n)[1].lower() in EXTENSIONS and os.path.isfile(os.path.join(folder, n))]
    seen: dict[str, str] = {}
    for f in files:  # a.npy and a.bin would write the same outputs
        if _stem(f) in seen:
            raise FormatError(f"{os.path.join(folder, f)}: another sample has the same name ({seen[_stem(f)]})")
        seen[_stem(f)] = f
    return files


def _stem(name: str) -> str:
    return os.path.splitext(name)[0]
