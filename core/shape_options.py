"""ATC's shape options parsed: `--input_shape` (static dims, -1 for unknown, lo~hi for a range) and
the gear lists of `--dynamic_batch_size`, `--dynamic_image_size`, `--dynamic_dims` (also msame's
`--dymDims` at run time)."""
from __future__ import annotations

import re

from .model.errors import GeError
from .model.dynamic_model import MAX_GEARS

#: ATC's --static_model_ops_lower_limit: a known cluster smaller than this runs in the hybrid executor
DEFAULT_STATIC_OPS_LOWER_LIMIT = 4

GEAR_OPTIONS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")
#: an input of more elements than this is refused (its bytes would not fit any device: 8 GiB of float32)
MAX_INPUT_ELEMENTS = 2**31 - 1
#: where H and W are in the layouts --input_format names (for --dynamic_image_size)
HW_AXES = {"NCHW": (2, 3), "NHWC": (1, 2)}


def parse_shape_spec(spec: str | None, option: str = "--input_shape") -> dict[str, list]:
    """{input: [dim]} where a dim is an int >= 0, -1 (unknown) or (lo, hi) (a range, hi -1: unbounded)."""
    shapes: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise GeError(f"{option}: '{part}' is not 'name:d1,d2,...'")
        dims = dims.strip().strip("[]")
        out = []
        for d in filter(None, (x.strip() for x in dims.split(","))):
            m = re.fullmatch(r"(\d+)~(-1|\d+)", d)
            try:
                out.append((int(m[1]), int(m[2])) if m else int(d))
            except ValueError:
                raise GeError(f"{option}: dim '{d}' of input '{name}' is not an integer, -1 or lo~hi") from None
            if m and 0 <= int(m[2]) < int(m[1]):
                raise GeError(f"{option}: range '{d}' of input '{name}' has its upper bound below its lower bound")
            if not m and (out[-1] < -1 or out[-1] == 0):
                raise GeError(f"{option}: input '{name}' has dim {out[-1]}; dims are > 0, -1 (unknown) or lo~hi")
        known = [d for d in out if isinstance(d, int) and d > 0]
        if _product(known) > MAX_INPUT_ELEMENTS:
            raise GeError(f"{option}: input '{name}' has {_product(known)} elements (dims {dims}); at most "
                          f"{MAX_INPUT_ELEMENTS} are allowed")
        shapes[name] = out
    return shapes


def _product(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def input_formats(ranks: dict[str, int | None], fmt: str | None) -> dict[str, str]:
    """--input_format per input: an input of the format's rank has it, any other is ND (a BERT's
    token ids under the NCHW of a model-zoo script). An ND format, or none, leaves every input ND."""
    from .atc.atc_options import INPUT_FORMATS
    if fmt is None:
        return {}
    if fmt not in INPUT_FORMATS:
        raise GeError(f"--input_format={fmt}: must be one of {', '.join(INPUT_FORMATS)}")
    rank = INPUT_FORMATS[fmt]
    return {name: fmt if rank is None or r == rank else "ND" for name, r in ranks.items()}


def check_image_size_dims(shapes: dict, fmt: str | None) -> None:
    """--dynamic_image_size: the -1 dims of each input must be its H and W under --input_format
    (NCHW when none is given, ATC's default for ONNX)."""
    fmt = fmt or "NCHW"
    if fmt not in HW_AXES:
        raise GeError(f"--dynamic_image_size needs --input_format NCHW or NHWC, not {fmt}")
    for name, dims in shapes.items():
        unknown = tuple(k for k, d in enumerate(dims) if d == -1)
        if unknown and (len(dims) != 4 or unknown != HW_AXES[fmt]):
            raise GeError(f"--dynamic_image_size: input '{name}' {dims}: under {fmt} the -1 dims must be H and W "
                          f"(dims {HW_AXES[fmt][0]} and {HW_AXES[fmt][1]} of 4)")


def is_dynamic(shapes: dict, gears: dict) -> bool:
    return any(gears.values()) or any(d == -1 or isinstance(d, tuple) for dims in shapes.values() for d in dims)


def parse_gears(gears: dict, shapes: dict) -> tuple[str, list[tuple]]:
    """(option, the values of the -1 dims per gear) after ATC's checks."""
    given = [k for k in GEAR_OPTIONS if gears.get(k)]
    if len(given) > 1:
        raise GeError(f"--{given[0]} and --{given[1]} are mutually exclusive")
    kind = given[0]
    unknown = sum(d == -1 for dims in shapes.values() for d in dims)
    if not unknown:
        raise GeError(f"--{kind} needs -1 dims in --input_shape (e.g. \"x:-1,3,224,224\")")
    groups = [g.strip() for g in (gears[kind].split(";") if kind != "dynamic_batch_size" else gears[kind].split(","))]
    try:
        values = [tuple(int(v) for v in g.split(",")) for g in groups if g]
    except ValueError:
        raise GeError(f"--{kind}: '{gears[kind]}' must be integers") from None
    if kind == "dynamic_batch_size":
        values = [v * unknown for v in values]
    if not 1 <= len(values) <= MAX_GEARS:
        raise GeError(f"--{kind}: {len(values)} gears; between 1 and {MAX_GEARS} are allowed")
    for v in values:
        if len(v) != unknown:
            raise GeError(f"--{kind}: gear {','.join(map(str, v))} has {len(v)} values for {unknown} -1 dims")
        if any(x <= 0 for x in v):
            raise GeError(f"--{kind}: gear {','.join(map(str, v))} has a dim <= 0")
    if len(set(values)) != len(values):
        raise GeError(f"--{kind}: gears repeat")
    return kind, values


