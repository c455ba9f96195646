"""ais_bench's files: how `--input` pairs files with the model's inputs, and how outputs are named
and written.

    --input a.bin,b.bin            files, split evenly over the inputs in order (k files each:
                                   k samples; a one-input model takes every file as a sample)
    --input dir_x,dir_y            one folder per input, each one's .bin/.npy files in natural
                                   sort order ("2.bin" before "10.bin"), paired by position

Sample n's outputs are `<output folder>/<stem>_<i>.<bin|npy|txt>`, its stem the first input's
file name up to its first dot. TXT is ais_bench's: the array as rows of its last axis, each value
"%f" (floats) or "%d" followed by a space, one row per line.
"""
from __future__ import annotations

import os
import re

import numpy as np

from ...model.errors import FormatError
from ....formats.atomic import make_folder, write_atomically
from ....formats.dataset import Sample

EXTENSIONS = (".npy", ".NPY", ".bin", ".BIN")
FORMATS = {"BIN": "bin", "NPY": "npy", "TXT": "txt"}
PURE_INFER_STEM = "pure_infer_data"  # the outputs' stem of a run without --input


def natural_sort(names: list[str]) -> list[str]:
    def key(text: str):
        return [int(part) if part.isdigit() else part.lower() for part in re.split(r"([0-9]+)", text)]
    return sorted(names, key=key)


def folder_files(folder: str) -> list[str]:
    """A folder's input files (.bin, .npy) in natural sort order."""
    try:
        names = os.listdir(folder)
    except OSError as e:
        raise FormatError(f"{folder}: {e.strerror or e}") from None
    files = [os.path.join(folder, n) for n in names
             if n.endswith(EXTENSIONS) and not os.path.isdir(os.path.join(folder, n))]
    if not files:
        raise FormatError(f"{folder} of input args not find valid file,valid file format:[*.npy *.NPY *.bin *.BIN]")
    return natural_sort(files)


def samples(inputs: list[str], input_names: list[str]) -> list[Sample]:
    """The samples of `--input` (its comma list) for a model with these inputs."""
    if not inputs or not inputs[0]:
        raise FormatError("Invalid args. Input args are empty")
    n = len(input_names)
    if os.path.isfile(inputs[0]):
        missing = next((p for p in inputs if not os.path.isfile(p)), None)
        if missing is not None:
            raise FormatError(f"Invalid input args.--input:{','.join(inputs)} input[{inputs.index(missing)}]:{missing} "
                              "not exist")
        if len(inputs) % n:
            raise FormatError(f"--input gives {len(inputs)} files for a model with {n} inputs "
                              f"({', '.join(input_names)}): give the same number of files for each input, in order")
        k = len(inputs) // n
        per_input = [inputs[j * k:(j + 1) * k] for j in range(n)]
    elif os.path.isdir(inputs[0]):
        if len(inputs) != n:
            raise FormatError(f"Invalid args. args input dir num:{len(inputs)} not equal to model inputs num:{n} "
                              f"({', '.join(input_names)})")
        not_dir = next((p for p in inputs if not os.path.isdir(p)), None)
        if not_dir is not None:
            raise FormatError(f"Invalid args. {not_dir} of input args is not a real dir path")
        per_input = [folder_files(d) for d in inputs]
        counts = {len(files) for files in per_input}
        if len(counts) > 1:
            raise FormatError("the input folders hold different numbers of files ("
                              + ", ".join(f"{d}: {len(f)}" for d, f in zip(inputs, per_input))
                              + "): one file per sample in each")
    else:
        raise FormatError(f"Invalid args. {inputs[0]} of --input is invalid")
    return [Sample(stem(files[0]), tuple(files)) for files in zip(*per_input)]


def stem(path: str) -> str:
    """ais_bench's output stem of an input file: its name up to the first dot."""
    return os.path.basename(path).split(".")[0]


def write_outputs(outputs, folder: str, sample_stem: str, outfmt: str) -> list[str]:
    """One file per output, `<folder>/<stem>_<i>.<ext>`, each written atomically."""
    ext = FORMATS[outfmt]
    make_folder(folder, f"output folder '{folder}'")
    paths = []
    for i, y in enumerate(outputs):
        path = os.path.join(folder, f"{sample_stem}_{i}.{ext}")
        y = np.asarray(y)
        write_atomically(path, lambda f, y=y: _write(f, y, ext), label=f"output file '{path}'")
        paths.append(path)
    return paths


def _write(f, y: np.ndarray, ext: str) -> None:
    if ext == "npy":
        np.save(f, y, allow_pickle=False)
    elif ext == "bin":
        f.write(np.ascontiguousarray(y).tobytes())
    else:  # ais_bench's TXT: rows of the last axis, each value and a space, a newline per row
        rows = y.reshape(-1, y.shape[-1]) if y.ndim else y.reshape(1, 1)
        fmt = "%f" if y.dtype in (np.float16, np.float32, np.float64) else "%d"
        np.savetxt(f, rows, fmt=fmt, delimiter=" ", newline=" \n")
