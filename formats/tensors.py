"""Model inputs and outputs as files: what `ge run` (msame) reads and writes.

Inputs come as `.npy`, `.npz`, raw `.bin` or ONNX `.pb` files, one per model input in order (a single
`.npz` may also hold every input, by name or in order). Everything is checked against the
model's input descs before the runtime sees it: the error names the file, the input, and the
expected and actual size, shape or dtype. Outputs are written atomically, file by file:
`<dir>/<om name>_output_<i>.<npy|bin|txt|pb>`.

A `.pb` file is ONNX's own: a TensorProto, SequenceProto or OptionalProto, read as the model's
input type says (formats/value_protos.py). It is the file form of every value the API takes: a
sequence input (a list of arrays) and an optional one (None when empty) come only as .pb, and such
outputs are written only as .pb (--outfmt PB), as TensorProto/SequenceProto/OptionalProto named
after the model's output.

A desc is anything with `name`, `dtype` and `shape` (ge.core.model.ge_model.TensorDesc).

The ml_dtypes types (bfloat16, the float8 and float4 formats, int4/uint4, int2/uint2) have no numpy
descr: np.save writes them as a void of their width ('|V2', '|V1') or, for float8_e5m2, as '<f1',
which np.load cannot parse. An input .npy with a void descr of the model's dtype's width is read as
that dtype, and so is a one-byte descr numpy cannot parse; an output of such a type is written with
the void descr, so that np.load(f).view(ml_dtypes.<type>) gives it back.

String tensors (dtype "object": arrays of str) come as .npy/.npz of numpy's str dtype ('U') or as a
.pb; an object array (np.save's pickle, as onnx holds strings) is never unpickled: it is refused,
saying how to save it. They are written as 'U' by NPY, one element per line by TXT, as string_data
by PB; they have no binary layout, so BIN refuses them.
"""
from __future__ import annotations

import ast
import logging
import os
import re
import threading
import zipfile
from typing import Sequence

import numpy as np

from ..core.model.errors import FormatError, ShapeError
from . import value_protos
from .atomic import make_folder, write_atomically
from .om.schema import SMALL_DTYPES
from .protobuf_wire import WireError

log = logging.getLogger("ge.inputs")
OUTPUT_FORMATS = ("NPY", "BIN", "TXT", "PB")
_EXT = {"NPY": ".npy", "BIN": ".bin", "TXT": ".txt", "PB": ".pb"}
_MESSAGES = {"tensor": "TensorProto", "sequence": "SequenceProto", "optional": "OptionalProto",
             "optional_sequence": "OptionalProto"}
#: most arrays an input .npz may hold
_MAX_ARCHIVE_MEMBERS = 4096
#: numpy reads an .npy header with ast.literal_eval, and CPython 3.11's parser is not thread-safe
#: ("SystemError: AST constructor recursion depth mismatch" when threads read datasets at once)
HEADER_PARSE = threading.RLock()  # held around every np.load and .npz member read here


#: how an .npy file and an .npz archive (a zip) begin; np.load takes anything else for a pickle
NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK"


def load_npy(path: str, what: str | None = None, **kwargs):
    """np.load of an .npy/.npz file (never unpickling: input files are untrusted), one header parse at a
    time. A file that is neither is a FormatError naming `what` (default: the file)."""
    with open(path, "rb") as f:
        head = f.read(len(NPY_MAGIC))
    if not head.startswith((NPY_MAGIC, ZIP_MAGIC)):
        kind = "an .npz archive" if path.lower().endswith(".npz") else "a .npy file"
        raise FormatError(f"{what or f'file {path!r}'}: not {kind} (it does not start as numpy writes one; "
                          f"raw bytes go in a .bin file)")
    with HEADER_PARSE:
        return np.load(path, allow_pickle=False, **kwargs)


def _expected(desc) -> tuple[np.dtype, tuple, int]:
    dtype = np.dtype(desc.dtype)
    shape = tuple(int(d) for d in desc.shape)
    return dtype, shape, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def _where(path: str, desc) -> str:
    return f"input '{desc.name}' (file '{path}')"


def _kind(desc) -> str:
    """"tensor", or what else a model input/output is (a DynTensor's kind: "sequence", "optional"...)."""
    return getattr(desc, "kind", "tensor")


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
def load_inputs(paths: Sequence[str], descs: Sequence) -> list[np.ndarray]:
    """Read one array per model input from `paths` (in model input order) and check each against
    its desc. A single `.npz` may supply every input (by input name, else in order)."""
    paths = [os.fspath(p) for p in paths]
    descs = list(descs)
    if len(paths) == 1 and len(descs) != 1 and paths[0].lower().endswith(".npz"):
        return _load_npz_all(paths[0], descs)
    if len(paths) != len(descs):
        names = ", ".join(f"'{d.name}'" for d in descs) or "none"
        raise ShapeError(f"the model has {len(descs)} input(s) ({names}) but {len(paths)} input file(s) were given"
                         f" ({', '.join(paths) or 'none'})")
    return [_load_one(path, desc) for path, desc in zip(paths, descs)]


def _load_one(path: str, desc) -> np.ndarray:
    if not os.path.isfile(path):
        raise FormatError(f"{_where(path, desc)}: no such file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".pb":
        return _read_pb(path, desc)
    if _kind(desc) in ("sequence", "optional_sequence"):
        raise FormatError(f"{_where(path, desc)}: the input is a {_kind(desc).replace('_', ' ')} of {desc.dtype}, "
                          f"which has a file form only as ONNX's {_MESSAGES[_kind(desc)]} (a .pb file)")
    if ext == ".npy":
        return _check(_read_npy(path, desc), path, desc)
    if ext == ".npz":
        with _open_npz(path) as npz:
            names = list(npz.files)
            if desc.name in names:
                key = desc.name
                _warn_extra(path, names, [desc])
            elif names == ["arr_0"]:  # np.savez(f, array)
                key = names[0]
            else:
                raise FormatError(f"{_where(path, desc)}: the archive holds {names}, none named '{desc.name}' "
                                  f"(name the array after the input, or save it unnamed)")
            return _check(_npz_member(npz, key, path, desc), path, desc)
    return _read_bin(path, desc)


def _load_npz_all(path: str, descs: list) -> list[np.ndarray]:
    if not os.path.isfile(path):
        raise FormatError(f"input file '{path}': no such file")
    with _open_npz(path) as npz:
        names = list(npz.files)
        positional = [f"arr_{i}" for i in range(len(descs))]  # np.savez(f, *arrays): in the inputs' order
        if all(d.name in names for d in descs):
            keys = [d.name for d in descs]
            _warn_extra(path, names, descs)
        elif sorted(names) == positional:
            keys = positional
        else:
            raise ShapeError(f"input file '{path}' holds {len(names)} array(s) {names}; the model's inputs are "
                             f"{', '.join(repr(d.name) for d in descs)}: name each array after its input (or save "
                             f"them unnamed, in order, as np.savez(f, *arrays))")
        return [_check(_npz_member(npz, k, path, d), f"{path}[{k}]", d) for k, d in zip(keys, descs)]


def _warn_extra(path: str, names: list, descs: list) -> None:
    """Arrays beside the inputs (labels saved with them, say) are left out, with a word: a wrong file
    would have missed an input, which is an error."""
    extra = [n for n in names if n not in {d.name for d in descs}]
    if extra:
        log.warning("input file '%s': array(s) %s are not inputs of the model (its inputs: %s); left out", path,
                    extra, ", ".join(repr(d.name) for d in descs))


def _open_npz(path: str):
    try:
        npz = load_npy(path, f"input file '{path}'")
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise FormatError(f"input file '{path}': not a readable .npz archive ({e})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise FormatError(f"input file '{path}': not an .npz archive")
    if len(npz.files) > _MAX_ARCHIVE_MEMBERS:
        npz.close()
        raise FormatError(f"input file '{path}': {len(npz.files)} arrays, more than {_MAX_ARCHIVE_MEMBERS}")
    return npz


def _npz_member(npz, key: str, path: str, desc) -> np.ndarray:
    try:
        with HEADER_PARSE:  # the member's own .npy header
            return npz[key]
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise _pickled(f"{_where(path, desc)}: array '{key}'") from None
        raise FormatError(f"{_where(path, desc)}: array '{key}' {_unreadable(e)}") from None
    except (OSError, zipfile.BadZipFile, EOFError, KeyError) as e:
        raise FormatError(f"{_where(path, desc)}: array '{key}' {_unreadable(e)}") from None


def _read_pb(path: str, desc):
    """An ONNX TensorProto/SequenceProto/OptionalProto file, read as the input's kind says."""
    kind = _kind(desc)
    try:
        with open(path, "rb") as f:
            value = value_protos.read(f.read(), kind)
    except (OSError, WireError) as e:
        raise FormatError(f"{_where(path, desc)}: not a readable ONNX {_MESSAGES[kind]} file "
                          f"({e.strerror if isinstance(e, OSError) else e})") from None
    if kind == "tensor" or (kind == "optional" and value is not None):
        return _check(value, path, desc)
    bad = next((t.dtype for t in value or () if t.dtype != np.dtype(desc.dtype)), None)
    if bad is not None:
        raise ShapeError(f"{_where(path, desc)}: a sequence of {bad} tensors, the model's holds {desc.dtype}")
    return value


def _pickled(what: str) -> FormatError:
    """An object array (np.save's pickle): ge never unpickles a file, so it says how to save one."""
    return FormatError(f"{what}: holds pickled Python objects, which ge never loads; save strings as numpy's str "
                       f"dtype (np.save(f, a.astype(str))) or as an ONNX TensorProto .pb "
                       f"(onnx.numpy_helper.from_array(a).SerializeToString())")


def _read_npy(path: str, desc) -> np.ndarray:
    try:
        return load_npy(path, _where(path, desc))
    except ValueError as e:
        if "not a valid dtype descriptor" in str(e) and _small(desc.dtype):
            return _read_small_npy(path, desc)
        if "allow_pickle" in str(e):
            raise _pickled(_where(path, desc)) from None
        raise FormatError(f"{_where(path, desc)}: {_unreadable(e, 'not a readable .npy file')}") from None
    except (OSError, EOFError) as e:
        raise FormatError(f"{_where(path, desc)}: {_unreadable(e, 'not a readable .npy file')}") from None


def _small(dtype) -> bool:
    """An ml_dtypes type (numpy has no descr for it)."""
    return np.dtype(dtype).name in SMALL_DTYPES


def _read_small_npy(path: str, desc) -> np.ndarray:
    """An .npy whose descr numpy cannot parse (np.save of float8_e5m2 writes '<f1'), read as the
    model's ml_dtypes type when the descr's width is that type's: the header checked before any
    data is read."""
    dtype = np.dtype(desc.dtype)
    try:
        with open(path, "rb") as f:
            descr, fortran, shape = _npy_header(f)
            width = re.fullmatch(r"[<>|=]?[a-zA-Z](\d+)", descr)
            if width is None or int(width.group(1)) != dtype.itemsize:
                raise ShapeError(f"{_where(path, desc)}: dtype descr {descr!r} does not match the model's {dtype} "
                                 f"({dtype.itemsize} byte(s))")
            count = int(np.prod(shape, dtype=np.int64))
            if os.path.getsize(path) - f.tell() != count * dtype.itemsize:
                raise ValueError(f"{os.path.getsize(path) - f.tell()} data bytes for {count} elements")
            data = np.fromfile(f, dtype=dtype, count=count)
    except (OSError, ValueError, SyntaxError, KeyError, TypeError, MemoryError) as e:
        raise FormatError(f"{_where(path, desc)}: not a readable .npy file ({e})") from None
    return data.reshape(shape, order="F" if fortran else "C")


def _npy_header(f) -> tuple[str, bool, tuple]:
    """(descr, fortran_order, shape) of the .npy header at `f`, parsed as a literal whatever its
    descr (numpy refuses descrs it cannot parse, as float8_e5m2's '<f1')."""
    major, _ = np.lib.format.read_magic(f)
    length = int.from_bytes(f.read(2 if major == 1 else 4), "little")
    if length > 1 << 16:
        raise ValueError(f"a header of {length} bytes")
    with HEADER_PARSE:
        header = ast.literal_eval(f.read(length).decode("latin1"))
    if not isinstance(header, dict) or not {"descr", "fortran_order", "shape"} <= set(header):
        raise ValueError(f"a malformed header {header!r}")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not (isinstance(fortran, bool) and isinstance(shape, tuple)
            and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise ValueError(f"a malformed header {header!r}")
    return descr, fortran, shape


def declared_shape(path: str, desc) -> tuple:
    """The shape an input file declares, its data not read (a dynamic model's input shape): an
    .npy's header, a TensorProto's dims; a sequence's or an optional's desc shape as it is (they
    have none). A file that declares none (a raw .bin) or is unreadable: FormatError."""
    ext = os.path.splitext(path)[1].lower()
    try:
        if _kind(desc) != "tensor":
            return tuple(desc.shape)
        with open(path, "rb") as f:
            if ext == ".pb":
                return value_protos.tensor_header(f.read())[1]
            if ext == ".npy":
                return _npy_header(f)[2]
    except (OSError, ValueError, SyntaxError) as e:
        kind = "ONNX TensorProto" if ext == ".pb" else ".npy"
        raise FormatError(f"{_where(path, desc)}: not a readable {kind} file ({e})") from None
    raise FormatError(f"{_where(path, desc)}: a {ext or 'raw'} file declares no shape")


def _unreadable(e: Exception, what: str = "is unreadable") -> str:
    """Why numpy refused an array."""
    return f"{what} ({e})"


def _read_bin(path: str, desc) -> np.ndarray:
    if _is_string(desc.dtype):
        raise FormatError(f"{_where(path, desc)}: a string tensor has no binary layout; give a .npy or .npz "
                          f"of numpy str dtype (np.save(f, np.array([...], dtype=str)))")
    dtype, shape, nbytes = _expected(desc)
    size = os.path.getsize(path)
    if size != nbytes:
        raise ShapeError(f"{_where(path, desc)}: the file has {size} bytes, the input needs {nbytes} "
                         f"({desc.dtype} {list(shape)})")
    try:
        data = np.fromfile(path, dtype=dtype)
    except (OSError, ValueError) as e:
        raise FormatError(f"{_where(path, desc)}: cannot read ({e})") from None
    if data.nbytes != nbytes:  # the file changed under us
        raise ShapeError(f"{_where(path, desc)}: read {data.nbytes} bytes, the input needs {nbytes}")
    return data.reshape(shape)


def _is_string(dtype) -> bool:
    return np.dtype(dtype) == object


def _check(x: np.ndarray, path: str, desc) -> np.ndarray:
    dtype, shape, _ = _expected(desc)
    if _kind(desc) != "tensor":  # a present optional: its shape is the run's
        shape = tuple(x.shape)
    if _is_string(dtype) and x.dtype.kind == "U":
        x = x.astype(object)  # a string tensor: numpy's str dtype as Python str objects
    if x.dtype.kind == "V" and x.dtype.names is None and _small(dtype) and x.dtype.itemsize == dtype.itemsize:
        x = x.view(dtype)  # np.save's void descr of an ml_dtypes array
    if x.dtype != dtype:
        raise ShapeError(f"{_where(path, desc)}: dtype {x.dtype} does not match the model's {dtype}")
    if tuple(x.shape) != shape:
        raise ShapeError(f"{_where(path, desc)}: shape {list(x.shape)} does not match the model's {list(shape)}")
    return np.array(x, order="C", copy=None)  # (ascontiguousarray would make a scalar 1-D)


def random_inputs(descs: Sequence, seed: int = 0) -> list[np.ndarray]:
    """Seeded random inputs of the right dtype and shape: floats N(0, 1), integers in [0, 10)
    (safe as token ids or indices for small vocabularies), booleans uniform, the small types
    (bfloat16, float8, 4-bit ints ...) small positive values."""
    rng = np.random.default_rng(seed)
    arrays = []
    for desc in descs:
        dtype, shape, _ = _expected(desc)
        if _is_string(dtype):
            raise ShapeError(f"input '{desc.name}' is a string tensor: give it as a .npy of numpy str dtype "
                             f"(ge makes no random text)")
        if dtype.kind == "f":
            x = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            x = rng.integers(0, 10, size=shape).astype(dtype)
        elif dtype.kind == "b":
            x = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.name in SMALL_DTYPES:  # ml_dtypes: values every small format holds (incl. e8m0, uint2)
            x = (rng.integers(1, 3, size=shape) if "int" in dtype.name else rng.uniform(0.5, 2, size=shape))
            x = x.astype(np.float32).astype(dtype)
        else:
            raise ShapeError(f"input '{desc.name}': cannot make random data of dtype {dtype}")
        arrays.append(np.array(x, order="C", copy=None))
    return arrays


# --------------------------------------------------------------------------------------------
# outputs
# --------------------------------------------------------------------------------------------
def output_path(directory: str, om_name: str, index: int, fmt: str) -> str:
    return os.path.join(directory, f"{om_name}_output_{index}{_EXT[_fmt(fmt)]}")


def _fmt(fmt: str) -> str:
    f = str(fmt).upper()
    if f not in OUTPUT_FORMATS:
        raise FormatError(f"output format '{fmt}' is not one of {', '.join(OUTPUT_FORMATS)}")
    return f


def save_outputs(arrays: Sequence, directory: str, om_name: str, fmt: str = "NPY", descs: Sequence = ()) -> list[str]:
    """Write `arrays` as `<directory>/<om_name>_output_<i>.<ext>`; each file appears atomically
    (temporary file + rename). Returns the paths in output order. `descs`, the model's outputs,
    give a .pb its message (an optional's OptionalProto) and name; without them a list is written as
    a sequence, None as an empty optional, anything else as a tensor."""
    fmt = _fmt(fmt)
    directory = os.fspath(directory)
    descs = list(descs)
    kinds = [_kind(descs[i]) if i < len(descs) else value_protos.kind_of(a) for i, a in enumerate(arrays)]
    values = next((i for i, (a, k) in enumerate(zip(arrays, kinds)) if k != "tensor"), None)
    if fmt != "PB" and values is not None:  # refused before any file is written
        raise FormatError(f"output {values} is a{'n' if kinds[values][0] == 'o' else ''} "
                          f"{kinds[values].replace('_', ' of a ')}, which has a file form only as ONNX's "
                          f"{_MESSAGES[kinds[values]]}: use --outfmt PB")
    strings = next((i for i, a in enumerate(arrays) if kinds[i] == "tensor" and np.asarray(a).dtype == object), None)
    if fmt == "BIN" and strings is not None:
        raise FormatError(f"output {strings} is a string tensor, which has no binary layout; use --outfmt NPY, TXT "
                          f"or PB")
    make_folder(directory, f"output directory '{directory}'")
    paths = []
    for i, value in enumerate(arrays):
        path = output_path(directory, om_name, i, fmt)
        if fmt == "PB":
            data = value_protos.write(value, kinds[i], descs[i].name if i < len(descs) else "")
            write_atomically(path, lambda f: f.write(data), label=f"output file '{path}'")
        else:
            _write_atomic(path, np.asarray(value), fmt)
        paths.append(path)
    return paths


def _write_atomic(path: str, array: np.ndarray, fmt: str) -> None:
    if array.dtype == object:  # a string tensor: numpy's str dtype, loadable without pickle
        array = array.astype(str)
    if fmt == "NPY" and _small(array.dtype):  # a void of its width: np.load reads it back (view it as the type)
        array = array.view(f"V{array.dtype.itemsize}")

    def write(f) -> None:
        if fmt == "NPY":
            np.save(f, array, allow_pickle=False)
        elif fmt == "BIN":
            f.write(np.ascontiguousarray(array).tobytes())
        else:
            _savetxt(f, array)

    write_atomically(path, write, label=f"output file '{path}'")


def write_text(path: str, text: str) -> None:
    """Write a text file (a JSON summary, a model dump) atomically: temporary file, then rename."""
    path = os.fspath(path)
    make_folder(os.path.dirname(os.path.abspath(path)), path)
    write_atomically(path, lambda f: f.write(text.encode("utf-8")))


def _savetxt(f, array: np.ndarray) -> None:
    """One row per last-axis vector (the flattened array for rank <= 1), values at full precision;
    strings one element per line."""
    if array.dtype.kind == "U":
        f.write("".join(f"{s}\n" for s in array.reshape(-1).tolist()).encode("utf-8"))
        return
    if array.ndim == 0 or array.size == 0:
        rows = array.reshape(1, -1)
    else:
        rows = array.reshape(-1, array.shape[-1])
    kind = array.dtype.kind
    if kind == "f":
        digits = {2: 5, 4: 9}.get(array.dtype.itemsize, 17)
        fmt = f"%.{digits}g"
    elif kind == "b":
        rows, fmt = rows.astype(np.uint8), "%d"
    else:
        fmt = "%d"
    np.savetxt(f, rows, fmt=fmt, delimiter=" ")
