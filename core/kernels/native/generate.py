"""Generate the native binding from its one source, csrc/abi.h (as tinygrad generates its ctypes
bindings from C headers): abi.py (the enums and #defines as constants, every argument struct as a
ctypes class, every exported function's signature) and csrc/abi_layout.h (the layout table the
library exports and the loader checks abi.py's classes against). So adding a native op touches the
C file, abi.h and its plan; `python -m ge.core.kernels.native.generate` rewrites the rest, and
tests/core/kernels/test_native_binding.py fails while the generated files are stale.

abi.h is written in a small, regular subset of C, which this reads: `enum { A, B = 1 };`,
`#define NAME 0x100`, `typedef struct { type a, *b; Struct c; T d[2]; } Name;`, function-pointer
typedefs, and one prototype per exported function (`ret ge_name(args);`, possibly over lines)."""
from __future__ import annotations

import os
import re
import sys

CSRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
HEADER = os.path.join(CSRC, "abi.h")
PY_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "abi.py")
LAYOUT_OUT = os.path.join(CSRC, "abi_layout.h")

#: C scalar types -> ctypes names
SCALARS = {"int": "c_int", "int32_t": "c_int32", "int64_t": "c_int64", "uint64_t": "c_uint64", "float": "c_float",
           "double": "c_double", "int16_t": "c_int16", "uint16_t": "c_uint16", "int8_t": "c_int8",
           "uint8_t": "c_uint8", "size_t": "c_size_t"}


class Header:
    """What abi.h declares, in its order: constants, structs (name, [(field, type, pointer, count)]),
    pointer typedefs, functions (name, return (type, pointer), [(type, pointer)])."""

    def __init__(self, text: str):
        code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        code = re.sub(r"//[^\n]*", " ", code)
        self.constants: list[tuple[str, int]] = []
        self.structs: list[tuple[str, list]] = []
        self.pointer_types: set[str] = set()
        self.functions: list[tuple[str, tuple, list]] = []
        for name, value in re.findall(r"^\s*#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\s*$", code, re.M):
            self.constants.append((name, int(value, 0)))
        for body in re.findall(r"\benum\s*\{(.*?)\}\s*;", code, re.S):
            value = -1
            for item in filter(None, (s.strip() for s in body.split(","))):
                name, _, given = (p.strip() for p in item.partition("="))
                value = int(given, 0) if given else value + 1
                self.constants.append((name, value))
        for name in re.findall(r"typedef\s+[\w\s\*]+\(\s*\*\s*(\w+)\s*\)\s*\([^)]*\)\s*;", code):
            self.pointer_types.add(name)
        for body, name in re.findall(r"typedef\s+struct\s*\{(.*?)\}\s*(\w+)\s*;", code, re.S):
            self.structs.append((name, [f for decl in body.split(";") if decl.strip() for f in _fields(decl)]))
        for ret, name, args in re.findall(r"^\s*((?:const\s+)?\w+\s*\**)\s*(ge_\w+)\s*\(([^)]*)\)\s*;", code, re.M):
            params = [] if args.strip() in ("", "void") else [_param(a) for a in args.split(",")]
            self.functions.append((name, _param(ret + " _"), params))


def _fields(decl: str) -> list[tuple[str, str, int, int]]:
    """`const float *a, *b` -> [(a, float, 1, 0), (b, float, 1, 0)]; `T d[2]` -> [(d, T, 0, 2)]."""
    decl = re.sub(r"\bconst\b", " ", decl).strip()
    base, _, rest = re.match(r"(\w+)(\s*)(.*)", decl, re.S).groups()
    out = []
    for item in rest.split(","):
        m = re.fullmatch(r"([\s*]*)(\w+)\s*(?:\[(\d+)\])?\s*", item)
        if m is None:
            raise ValueError(f"abi.h: cannot read the field declaration {decl!r}")
        stars, name, count = m.groups()
        out.append((name, base, stars.count("*"), int(count or 0)))
    return out


def _param(text: str) -> tuple[str, int]:
    """`const float *src` -> (float, 1); `int threads` -> (int, 0)."""
    text = re.sub(r"\bconst\b", " ", text)
    m = re.fullmatch(r"\s*(\w+)([\s*]*)\w*\s*", text)
    if m is None:
        raise ValueError(f"abi.h: cannot read the parameter {text!r}")
    return m.group(1), m.group(2).count("*")


def _ctype(header: Header, base: str, pointer: int, *, field: bool, returned: bool = False) -> str:
    structs = {name for name, _ in header.structs}
    if pointer == 1 and base == "char":
        return "ctypes.c_char_p"
    if pointer == 1 and base in structs and not field and returned:  # parameters stay c_void_p: byref() or an address
        return f"ctypes.POINTER({base})"
    if pointer or base in header.pointer_types:
        return "ctypes.c_void_p"
    if base in structs:
        return base
    if base == "void":
        return "None"
    return f"ctypes.{SCALARS[base]}"


def _checked(header: Header) -> list:
    """The structs the layout table lists: all but its own row type (read before any check can run)."""
    return [(name, fields) for name, fields in header.structs if name != "AbiEntry"]


def python_source(header: Header) -> str:
    lines = ['"""Generated from csrc/abi.h by `python -m ge.core.kernels.native.generate`: do not edit. The',
             "constants (enums and #defines), the argument structs as ctypes classes and every exported function's",
             '(argtypes, restype). abi.h documents each."""', "import ctypes", ""]
    lines += [f"{name} = {value:#x}" if value >= 0x100 else f"{name} = {value}" for name, value in header.constants]
    for name, fields in header.structs:
        rows = []
        for field, base, pointer, count in fields:
            t = _ctype(header, base, pointer, field=True)
            rows.append(f"        ({field!r}, {t} * {count})," if count else f"        ({field!r}, {t}),")
        lines += ["", "", f"class {name}(ctypes.Structure):", "    _fields_ = [", *rows, "    ]"]
    lines += ["", "", "#: every argument struct, in abi.h's order (the loader checks each against the library's layout)",
              "STRUCTS = (" + ", ".join(name for name, _ in _checked(header)) + ",)", "",
              "#: every constant, by name (the loader checks each against the library's value: a library built",
              "#: before an enum grew would read a new opcode as another)",
              "CONSTANTS = (" + ", ".join(repr(name) for name, _ in header.constants) + ",)", "",
              "#: name -> (argtypes, restype) of every function the library exports", "SIGNATURES = {"]
    for name, (rbase, rptr), params in header.functions:
        args = ", ".join(_ctype(header, b, p, field=False) for b, p in params)
        lines.append(f"    {name!r}: ([{args}], {_ctype(header, rbase, rptr, field=False, returned=True)}),")
    return "\n".join(lines + ["}", ""])


def layout_source(header: Header) -> str:
    lines = ["/* Generated from abi.h by `python -m ge.core.kernels.native.generate`: do not edit. The rows of",
             "   module.c's layout table: every argument struct's size, then each field's offset and size, then",
             "   every constant's value. */"]
    for name, fields in _checked(header):
        lines.append(f"SIZE({name}),")
        lines += [f"FIELD({name}, {field})," for field, *_ in fields]
    lines += [f"CONSTANT({name})," for name, _ in header.constants]
    return "\n".join(lines) + "\n"


def generated() -> dict[str, str]:
    """{path: the text it should hold} of every generated file."""
    with open(HEADER) as f:
        header = Header(f.read())
    return {PY_OUT: python_source(header), LAYOUT_OUT: layout_source(header)}


def main() -> int:
    for path, text in generated().items():
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
