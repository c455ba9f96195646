"""What pyACL's model descriptions report, from what the loaded model holds: names, dtypes,
formats, dims and byte sizes of each input and output. A gear model reports its largest gear's
sizes and -1 for the dims its gears differ in, plus the input ATC adds to it last,
`ascend_mbatch_shape_data` (int64, one value per dynamic dim: the gear to run)."""
from __future__ import annotations

import math

import numpy as np

from ..model.dynamic_model import GEARS
from ..model.record import record
from ..runtime.loaded_model import STATIC, LoadedModel

MBATCH_INPUT = "ascend_mbatch_shape_data"
MBATCH_DTYPE = np.dtype(np.int64)
#: ATC's gear option -> pyACL's name of the gear kind
BATCH, HW, DIMS = "dynamic_batch_size", "dynamic_image_size", "dynamic_dims"


@record
class IoDesc:
    name: str
    dtype: str  # numpy dtype name
    dims: tuple  # -1 where dynamic
    nbytes: int  # the largest gear's
    format: str


@record
class ModelDescs:
    inputs: tuple  # IoDesc, the gear input last
    outputs: tuple
    gear_kind: str = ""  # "" for a static model
    gear_values: tuple = ()  # per gear: the values of its dynamic dims, in input order
    gear_inputs: tuple = ()  # per gear: the shape of each real input
    gear_outputs: tuple = ()  # per gear: the shape of each output
    dynamic: bool = False  # ranges or unknown dims: shapes known only at run time

    @property
    def num_real_inputs(self) -> int:
        return len(self.inputs) - (1 if self.gear_kind else 0)


def _nbytes(dtype: str, shape) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize if all(d >= 0 for d in shape) else 0


def _format(fmt: dict, name: str, rank: int, default_4d: str) -> str:
    return fmt.get(name) or (default_4d if rank == 4 else "ND")


def _merged(shapes: list) -> tuple:
    """Dims that every gear shares, -1 where they differ."""
    return tuple(d[0] if len(set(d)) == 1 else -1 for d in zip(*shapes))


def recorded_formats(om) -> dict:
    """{input name: layout} as ATC recorded --input_format in the OM (none: NCHW for 4-D inputs)."""
    return dict(om.attrs.get("atc_options", {}).get("input_formats", {}))


def describe(model: LoadedModel, formats: dict) -> ModelDescs:
    """`model`: any loaded model; `formats`: --input_format per input."""
    if model.shape_mode == STATIC:
        ins = tuple(IoDesc(d.name, d.dtype, tuple(d.shape), d.nbytes, _format(formats, d.name, len(d.shape), "NCHW"))
                    for d in model.inputs)
        outs = tuple(IoDesc(d.name, d.dtype, tuple(d.shape), d.nbytes, "ND") for d in model.outputs)
        return ModelDescs(ins, outs)
    dyn = model.dyn
    if model.shape_mode != GEARS:  # ranges, unknown dims: the planned capacity, else the ranges' upper ends
        capacities = dyn.attrs.get("capacities", {})

        def io(t, fmt):
            hi = tuple(r[1] for r in t.ranges) if t.ranges else tuple(t.shape)
            return IoDesc(t.name, t.dtype, tuple(t.shape), capacities.get(t.name, _nbytes(t.dtype, hi)), fmt)
        return ModelDescs(tuple(io(t, _format(formats, t.name, len(t.shape), "NCHW")) for t in dyn.inputs),
                          tuple(io(t, "ND") for t in dyn.outputs), dynamic=True)
    gears = dyn.submodels
    ins, outs = [], []
    for i, d in enumerate(gears[0].inputs):
        shapes = [tuple(g.inputs[i].shape) for g in gears]
        ins.append(IoDesc(d.name, d.dtype, _merged(shapes), max(g.inputs[i].nbytes for g in gears),
                          _format(formats, d.name, len(d.shape), "NCHW")))
    for i, d in enumerate(gears[0].outputs):
        shapes = [tuple(g.outputs[i].shape) for g in gears]
        outs.append(IoDesc(d.name, d.dtype, _merged(shapes), max(g.outputs[i].nbytes for g in gears), "ND"))
    count = len(model.gear_values[0])
    ins.append(IoDesc(MBATCH_INPUT, MBATCH_DTYPE.name, (count,), count * MBATCH_DTYPE.itemsize, "ND"))
    return ModelDescs(tuple(ins), tuple(outs), model.kind, tuple(model.gear_values),
                      tuple(tuple(tuple(d.shape) for d in g.inputs) for g in gears),
                      tuple(tuple(tuple(d.shape) for d in g.outputs) for g in gears))
