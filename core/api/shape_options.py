"""ATC's shape options parsed: `--input_shape` (static dims, -1 for unknown, lo~hi for a range) and
the gear lists of `--dynamic_batch_size`, `--dynamic_image_size`, `--dynamic_dims` (also msame's
`--dymDims` at run time)."""
from __future__ import annotations

import re

from ..errors import GeError
from ..runtime.gears import MAX_GEARS

GEAR_OPTIONS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")


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
            if not m and out[-1] < -1:
                raise GeError(f"{option}: input '{name}' has dim {out[-1]}; dims are >= 0, -1 or lo~hi")
        shapes[name] = out
    return shapes


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


