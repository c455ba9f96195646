"""OM format v1: constants, limits and field names. docs/om-format.md is the prose version.

The layout mirrors GE's offline model: a fixed prefix, a header carrying ModelFileHeader's fields,
a partition table (ModelPartitionTable) and the typed partition bodies, one set per (sub)model.

    offset 0   b"IMOD"                      magic
    offset 4   uint32 little-endian H       length of the msgpack header
    offset 8   msgpack map (H bytes)        header fields + partition table; its last 34 bytes
                                            are the bin8 value of `header_checksum`
    8 + H ...  partition bodies, each at a 64-byte aligned file offset, zero padding between

Every limit below is checked by the reader before it allocates anything.
"""
from __future__ import annotations

import importlib

MAGIC = b"IMOD"
FORMAT_VERSION = (1, 9)  # (major, minor): readers refuse a newer major, accept a newer minor
# 1.9 checks the model data with header "body_checksum" (xxh3_128) instead of "checksum" (sha256,
#     is_checksum 0 from 1.9 on): a 1.8 reader reads such a file without checking its body
# 1.8 adds string tensors to dynamic OMs: dtype "object" on root/subgraph inputs, outputs and node
#     dtypes, MODEL_DEF "string_constants", and string ndarrays in attribute values
# 1.7 adds external weights to dynamic OMs: root "weight_files", each graph's "file_weights"
# 1.6 adds value kinds to dynamic OMs: root input/output "kind" and node "kinds" (sequence, optional)
# 1.5 adds control-flow subgraphs to dynamic OMs: root MODEL_DEF "subgraphs", node "subgraphs"
# 1.4 adds TASK_INFO "dataflow": the compiler's memory plan for the dataflow and parallel executors
# 1.3 allows nil task outputs (an omitted optional output before a used one: LSTM's ["Y", "", "Y_c"])
# 1.2 added dynamic OMs: has_unknown_shape, a root model (submodel 0) and static submodels 1..n
# 1.1 added FILE_CONSTANT allocations (external weights): allocation "file", weight "allocation"
PREFIX_SIZE = 8  # magic + uint32 header length
ALIGNMENT = 64  # every partition starts at a multiple of this file offset
CHECKSUM_SIZE = 32  # sha256 digest: header_checksum, and checksum before 1.9
BODY_CHECKSUM_SIZE = 16  # xxh3_128 digest: body_checksum (1.9)
BODY_CHECKSUM_SINCE = (1, 9)  # files of this version and later must have a body_checksum
CHECKSUM_TAIL = b"\xc4\x20"  # msgpack bin8 marker + length 32: precedes the header checksum bytes

# ModelPartitionType (GE's numbering)
MODEL_DEF, WEIGHTS_DATA, TASK_INFO = 0, 1, 2
PARTITION_NAMES = {MODEL_DEF: "MODEL_DEF", WEIGHTS_DATA: "WEIGHTS_DATA", TASK_INFO: "TASK_INFO"}
REQUIRED_PARTITIONS = (MODEL_DEF, WEIGHTS_DATA, TASK_INFO)  # per submodel

# ModelFileHeader enumerations as ge writes them
MODEL_TYPE_NORMAL = 0
GEN_MODE_OFFLINE, GEN_MODE_ONLINE = 0, 1
PLATFORM_TYPE_SIM = 0  # ge has one platform: the CPU / simulated NPU
OM_IR_VERSION = 1  # version of the MODEL_DEF / TASK_INFO schema (bumped with FORMAT_VERSION)

# limits
MAX_HEADER_SIZE = 1 << 20  # 1 MiB of msgpack header
MAX_PARTITIONS = 512  # entries in the partition table (up to 4 per (sub)model, MAX_MODELS of them)
MAX_MODELS = 101  # model_num: root model + static submodels (ATC allows 100 gears: root + 100)
MAX_TOTAL_SIZE = 1 << 40  # 1 TiB: largest OM file accepted
MAX_STR_LEN = 1 << 20  # any msgpack string (names, attribute strings, atc_cmdline)
MAX_ARRAY_LEN = 1 << 24  # any msgpack array (tasks, tensors, attribute lists)
MAX_MAP_LEN = 1 << 20  # any msgpack map
MAX_ALLOCATION_SIZE = 1 << 40  # bytes of one logical allocation (WEIGHT, FEATURE_MAP, ...)
MAX_RANK = 32  # dimensions of a shape
MAX_DIM = 1 << 62  # largest single dimension
MAX_INT = (1 << 63) - 1  # counts, offsets, steps
MAX_OPSET = 10_000  # an operator set version (ONNX's are two-digit)
MAX_ATTR_DEPTH = 16  # nesting of lists / maps inside one attribute value
MIN_FILE_SIZE = PREFIX_SIZE + 1  # prefix plus at least a one-byte header

# tensor element types an OM may name (numpy dtype names)
#: ml_dtypes' names for the small types (one element a byte, bfloat16 two)
SMALL_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
                "float8_e8m0fnu", "int4", "uint4", "int2", "uint2")
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool") + SMALL_DTYPES


def known_dtype(name) -> bool:
    """`name` is a dtype an OM may name. A small type's name loads ml_dtypes first: numpy learns those
    names from it (np.dtype("bfloat16")), and a model of numpy's types never pays its import (15-20 ms)."""
    if type(name) is not str:
        return False
    if name in SMALL_DTYPES:
        importlib.import_module("ml_dtypes")  # (registers the names with numpy)
        return True
    return name in DTYPES


#: string tensors (arrays of Python str): dynamic OMs' inputs, outputs, node dtypes, string constants
#: and attribute values only; never a weight or a static tensor (no layout)
STRING_DTYPE = "object"
ITEMSIZE = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
            "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1} | {n: 1 for n in SMALL_DTYPES} | {"bfloat16": 2}

# tagged maps inside attribute values
NDARRAY_TAG = "__ndarray__"  # {"__ndarray__": True, "dtype": str, "shape": [int], "data": bin}
#                               (dtype "object": "data" is a list of str, one per element)
DTYPE_TAG = "__dtype__"  # {"__dtype__": "float32"}: an np.dtype attribute value
RESERVED_TAGS = (NDARRAY_TAG, DTYPE_TAG)

# header fields (ModelFileHeader), in the order the writer emits them; header_checksum is last
HEADER_FIELDS = (
    "header_version",  # [major, minor]
    "checksum",  # bin 32: sha256 of every byte after the header (file[8 + H:]) when is_checksum is 1
    "body_checksum",  # bin 16 (1.9): xxh3_128 of every byte after the header, what ge checks
    "length",  # bytes after the header: file size == 8 + H + length
    "is_encrypt",  # 0: ge never encrypts
    "is_checksum",  # 1: `checksum` is valid (ge before 1.9); 0 from 1.9 on, body_checksum replaces it
    "model_type",  # MODEL_TYPE_NORMAL
    "gen_mode",  # GEN_MODE_OFFLINE (atc) or GEN_MODE_ONLINE
    "name",  # model name
    "ops",  # number of tasks (op launches) over all submodels
    "om_ir_version",  # OM_IR_VERSION
    "model_num",  # number of (sub)models; partitions carry their submodel index
    "platform_version",  # soc version, e.g. "Ascend-sim"
    "platform_type",  # PLATFORM_TYPE_SIM
    "has_unknown_shape",  # bool: the OM holds a dynamic root graph plus static submodels
    "atc_cmdline",  # the command line that built it
    "partitions",  # [{"type", "submodel", "offset", "size"}], offsets are absolute file offsets
    "header_checksum",  # bin 32: sha256 of file[0 : 8 + H - 32] (prefix and header up to this value)
)
PARTITION_FIELDS = ("type", "submodel", "offset", "size")


def partition_name(kind: int) -> str:
    return PARTITION_NAMES.get(kind, f"type {kind}")


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment
