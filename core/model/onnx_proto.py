"""What ge's compiler needs of onnx, without running `import onnx`: the protobuf messages, the C++
checker, shape inference and op schemas (their attributes' defaults), tensors as arrays.

onnx's package __init__ imports importlib.metadata (for its version), protobuf's JSON and text
formats, and its helper, compose and gen_proto modules (argparse, subprocess, tarfile): about a
third of `ge atc`'s import time for a small model, more where bytecode is not cached (containers).
ge needs two modules of it, loaded here from onnx's folder without its __init__:
  onnx_ml_pb2         the messages, under a private name: protobuf's upb keeps one class per
                      message type, so they are onnx.ModelProto & co. if onnx is imported too
                      (with another protobuf implementation, onnx is imported: one class each)
  onnx_cpp2py_export  the C++ checker, shape inference and defs, under its own name, so that a
                      later `import onnx` takes it from sys.modules (`onnx.onnx_cpp2py_export`,
                      a private module, is then no attribute of the package; every public name is)
Where onnx is imported already, its own modules are used. Whatever else (tensors of the packed
and 8-bit float types, the version converter) imports onnx, which reuses both.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
import sys
import types

import numpy as np


def _onnx_module(name: str, private: str | None = None):
    """onnx.<name>: onnx's own if onnx is imported, else loaded from its folder (as `private`, or
    under its own name)."""
    full = f"onnx.{name}"
    if "onnx" in sys.modules or full in sys.modules or (private and not _upb()):
        return importlib.import_module(full)
    spec = importlib.util.find_spec("onnx")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'onnx'", name="onnx")
    found = importlib.machinery.PathFinder.find_spec(full, list(spec.submodule_search_locations))
    if found is None:
        return importlib.import_module(full)  # an onnx laid out otherwise: the ordinary import
    if private:
        found = importlib.util.spec_from_file_location(private, found.origin)
    module = importlib.util.module_from_spec(found)
    sys.modules[found.name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[found.name]
        raise
    return module


def _upb() -> bool:
    from google.protobuf.internal import api_implementation
    return api_implementation.Type() == "upb"


_PRIVATE_PB2 = "ge.core.model._onnx_ml_pb2"


def _upb_messages():
    """onnx_ml_pb2's messages made by upb from the file descriptor the module holds, without running
    the module: its imports (descriptor_pool, symbol_database, builder) load protobuf's pure-Python
    implementation (python_message, text_format, decoder, encoder ...), which upb never uses: ~30 M
    instructions of `ge atc` with bytecode cached. The classes are what the module's builder makes
    (upb's message class of each type, the one onnx.ModelProto & co. are if onnx is imported later);
    the module they are registered as holds them only. None where protobuf is not upb, onnx is
    imported already or its module is not laid out as protoc writes it (then the module runs)."""
    if "onnx" in sys.modules or not _upb():
        return None
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = importlib.machinery.PathFinder.find_spec("onnx.onnx_ml_pb2", list(spec.submodule_search_locations))
    if found is None or not isinstance(found.loader, importlib.machinery.SourceFileLoader):
        return None
    code = found.loader.get_code(found.name)  # its cached bytecode (or the source, compiled): not run
    serialized = max((c for c in code.co_consts if type(c) is bytes), key=len, default=b"")
    from google._upb import _message
    from google.protobuf.message import Message
    try:
        file = _message.default_pool.AddSerializedFile(serialized)
    except Exception:  # not a file descriptor: a module laid out otherwise
        return None
    if file.name != "onnx/onnx-ml.proto":
        return None
    module = types.ModuleType(_PRIVATE_PB2)
    with _calendar_at_first_use():
        for name, message in file.message_types_by_name.items():
            setattr(module, name, _message.MessageMeta(name, (Message,), {"DESCRIPTOR": message,
                                                                          "__module__": _PRIVATE_PB2}))
    sys.modules[_PRIVATE_PB2] = module  # (where pickle looks the classes up)
    return module


class _AtFirstUse(types.ModuleType):
    """A stand-in for a standard module: imports it at the first use of one of its attributes."""

    def __getattr__(self, attr: str):
        if sys.modules.get(self.__name__) is self:  # (used while it stands in: the real module takes its place)
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


@contextlib.contextmanager
def _calendar_at_first_use():
    """upb's first message class imports protobuf's well_known_types, which imports calendar for Timestamp's
    methods alone: ~32 M instructions of `ge atc` to compile where the standard library has no cached
    bytecode (Python's container images). Imported meanwhile, well_known_types binds a stand-in that
    imports calendar when a Timestamp method first uses it; nothing else sees the stand-in."""
    if "calendar" in sys.modules:
        yield
        return
    stand_in = sys.modules["calendar"] = _AtFirstUse("calendar")
    try:
        yield
    finally:
        if sys.modules.get("calendar") is stand_in:
            del sys.modules["calendar"]


_pb = _upb_messages() or _onnx_module("onnx_ml_pb2", _PRIVATE_PB2)


@functools.cache
def _cpp():
    """onnx_cpp2py_export, loaded at its first use: a plain model's `ge atc` (core/compile/onnx_check.py)
    asks it nothing, and its load is 9 M instructions."""
    return _onnx_module("onnx_cpp2py_export")


ModelProto, GraphProto, NodeProto, TensorProto = _pb.ModelProto, _pb.GraphProto, _pb.NodeProto, _pb.TensorProto
ValueInfoProto, AttributeProto, SparseTensorProto, TypeProto = (_pb.ValueInfoProto, _pb.AttributeProto,
                                                                _pb.SparseTensorProto, _pb.TypeProto)

_MAX_PROTOBUF = 2**31  # onnx.checker.MAXIMUM_PROTOBUF: protobuf's limit for one message


#: a serialized model bigger than this is not parsed a second time by is_utf8_text (memory: the caller walks it)
_TEXT_CHECK_LIMIT = 1 << 26
_text_twin = None  # ModelProto of the proto3 twin (is_utf8_text), made at first use; False: none here


def is_utf8_text(data) -> bool:
    """Whether every string field of the serialized ModelProto `data` is valid UTF-8, told by parsing
    it once more as a proto3 twin of onnx's messages: upb verifies proto3 strings as it decodes (onnx's
    are proto2, which it passes through and hands over as bytes when invalid), in C, where a walk of
    every field in Python costs 14-18 M instructions of a small model's `ge atc`. False where it
    cannot tell (not upb, data too big, the twin refusing the data for any reason): the caller walks."""
    global _text_twin
    if _text_twin is None:
        _text_twin = False
        if _upb():
            from google._upb import _message
            from google.protobuf.message import Message
            # onnx's file descriptor with its syntax (FileDescriptorProto field 12) set to proto3, in a pool
            # of its own; protobuf refuses it if onnx's proto ever holds what proto3 does not (defaults ...)
            with contextlib.suppress(Exception):
                file = _message.DescriptorPool().AddSerializedFile(
                    ModelProto.DESCRIPTOR.file.serialized_pb + b"\x62\x06proto3")
                _text_twin = _message.MessageMeta("ModelProto", (Message,), {
                    "DESCRIPTOR": file.message_types_by_name["ModelProto"], "__module__": __name__})
    if not _text_twin or len(data) > _TEXT_CHECK_LIMIT:
        return False
    try:
        _text_twin.FromString(data)
    except Exception:  # (DecodeError: "String field had bad UTF-8")
        return False
    return True


@functools.cache
def onnx_opset_version() -> int:
    """onnx.defs.onnx_opset_version(): the newest default-domain opset this onnx knows."""
    try:
        return _cpp().defs.schema_version_map()[""][1]
    except (AttributeError, KeyError, TypeError):  # another onnx's C++ module: its Python wrapper knows it
        return _full_onnx().defs.onnx_opset_version()


def check_model(model: ModelProto | str) -> None:
    """onnx.checker.check_model(model) (a path: the checker reads the file and its external data)."""
    try:
        if isinstance(model, str):
            _cpp().checker.check_model_path(model, False, False, False)
            return
        data = model.SerializeToString()
        if len(data) > _MAX_PROTOBUF:
            raise ValueError("This protobuf of onnx model is too large (>2GiB). Call check_model with model path "
                             "instead.")
        _cpp().checker.check_model(data, False, False, False)
    except (AttributeError, TypeError):  # another onnx's C++ module: its Python wrapper knows it
        _full_onnx().checker.check_model(model)


def infer_shapes(model: ModelProto, *, check_type: bool, strict_mode: bool, data_prop: bool) -> ModelProto:
    """onnx.shape_inference.infer_shapes(model, check_type, strict_mode, data_prop)."""
    try:
        inferred = _cpp().shape_inference.infer_shapes(model.SerializeToString(), check_type, strict_mode, data_prop)
    except (AttributeError, TypeError):  # another onnx's C++ module
        return _full_onnx().shape_inference.infer_shapes(model, check_type=check_type, strict_mode=strict_mode,
                                                        data_prop=data_prop)
    out = ModelProto()
    out.ParseFromString(inferred)
    return out


def schema_defaults(op_type: str, opset: int, domain: str) -> dict[str, AttributeProto] | None:
    """{attribute: its default, an AttributeProto} of the optional attributes of op_type's schema
    at opset (onnx.defs.get_schema(...).attributes, an attribute without default left out); None
    when onnx has no such schema. The first lookup builds onnx's whole registry (~60 M
    instructions): the compiler asks only for domains onnx has schemas of (schema.attribute_defaults)."""
    try:
        schema = _cpp().defs.get_schema(op_type, opset, domain)
    except _cpp().defs.SchemaError:
        return None
    out = {}
    for name, a in schema.attributes.items():
        if a.required:
            continue
        try:
            default = AttributeProto.FromString(a._default_value)  # onnx.defs' `default_value` property
        except AttributeError:  # another onnx's C++ module: its Python wrapper knows it
            default = _full_onnx().defs.get_schema(op_type, opset, domain).attributes[name].default_value
        if default is not None and default.type:
            out[name] = default
    return out


#: AttributeProto type -> onnx.helper.get_attribute_value of it, for the plain types
_ATTRIBUTE_VALUES = {AttributeProto.FLOAT: lambda a: a.f, AttributeProto.INT: lambda a: a.i,
                     AttributeProto.STRING: lambda a: a.s, AttributeProto.FLOATS: lambda a: list(a.floats),
                     AttributeProto.INTS: lambda a: list(a.ints), AttributeProto.STRINGS: lambda a: list(a.strings)}


def attribute_value(a: AttributeProto):
    """onnx.helper.get_attribute_value(a): the plain types here, the rest by onnx's own."""
    read = _ATTRIBUTE_VALUES.get(a.type)
    if read is None or a.ref_attr_name:
        return _full_onnx().helper.get_attribute_value(a)
    return read(a)


def make_tensor_value_info(name: str, elem_type: int, shape: list[int]) -> ValueInfoProto:
    """onnx.helper.make_tensor_value_info for a shape of known dims."""
    vi = ValueInfoProto()
    vi.name = name
    tensor = vi.type.tensor_type
    tensor.elem_type = elem_type
    tensor.shape.dim.extend([])  # an empty shape is a scalar's, not no shape: the field is set
    for d in shape:
        tensor.shape.dim.add().dim_value = d
    return vi


#: data_type -> numpy dtype of the types whose raw_data is a plain little-endian array
_RAW = {TensorProto.FLOAT: np.float32, TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8,
        TensorProto.UINT16: np.uint16, TensorProto.INT16: np.int16, TensorProto.INT32: np.int32,
        TensorProto.INT64: np.int64, TensorProto.BOOL: np.bool_, TensorProto.FLOAT16: np.float16,
        TensorProto.DOUBLE: np.float64, TensorProto.UINT32: np.uint32, TensorProto.UINT64: np.uint64}
#: data_type -> (typed field, its numpy storage type) of the types numpy_helper reads as
#: np.asarray(field, storage).astype(dtype) (the 16-bit and bool fields are bit patterns: onnx's)
_TYPED = {TensorProto.FLOAT: ("float_data", np.float32), TensorProto.DOUBLE: ("double_data", np.float64),
          TensorProto.INT32: ("int32_data", np.int32), TensorProto.INT64: ("int64_data", np.int64),
          TensorProto.INT8: ("int32_data", np.int32), TensorProto.UINT8: ("int32_data", np.int32),
          TensorProto.UINT32: ("uint64_data", np.uint64), TensorProto.UINT64: ("uint64_data", np.uint64)}


def dims_of(t: TensorProto) -> list[int]:
    """t.dims as a list. Iterating a repeated field of upb's ends in an IndexError raised and formatted
    in C (~2 us: math.prod(t.dims), reshape(t.dims), each of a model's hundreds of initializers, several
    times); its slice is one call."""
    return t.dims[:]


def to_array(t: TensorProto) -> np.ndarray:
    """onnx.numpy_helper.to_array(t): the plain types here, the rest (strings, bit patterns, packed
    and 8-bit floats, external data, segments, a big-endian host) by onnx's own."""
    dtype = _RAW.get(t.data_type)
    if (dtype is None or sys.byteorder != "little" or t.HasField("segment")
            or t.data_location == TensorProto.EXTERNAL):
        return _full_onnx().numpy_helper.to_array(t)
    if t.HasField("raw_data"):
        return np.frombuffer(t.raw_data, dtype=dtype).reshape(dims_of(t))
    if t.data_type not in _TYPED:
        return _full_onnx().numpy_helper.to_array(t)
    field, storage = _TYPED[t.data_type]
    return np.asarray(getattr(t, field), dtype=storage).astype(dtype).reshape(dims_of(t))


def _full_onnx():
    """The onnx package, with the modules used above (`import onnx` takes the C++ module loaded here)."""
    import onnx
    import onnx.checker
    import onnx.defs
    import onnx.helper
    import onnx.numpy_helper
    import onnx.shape_inference
    return onnx
