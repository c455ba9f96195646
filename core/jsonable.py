"""Plain JSON data of what ge reports (ATC's summary, ge inspect, ge run's --json): shared by the
driver rooms, so that a `ge atc` process needs no inspection module to print its summary."""
from __future__ import annotations


def vars_of(obj) -> dict:
    """A record (a named tuple: Allocation, TensorDesc, TensorPlan, Arg, WeightDesc...) or a dataclass as a dict."""
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    import dataclasses
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def jsonable(v):
    """Plain JSON types: tuples -> lists, numpy scalars/arrays -> Python values, dtypes -> names,
    bytes -> hex, records and dataclasses -> dicts."""
    import math

    import numpy as np
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if hasattr(v, "_asdict"):  # a record (a named tuple): its fields by name, not a list
        return jsonable(v._asdict())
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return jsonable(v.tolist())
    if isinstance(v, np.generic):
        return jsonable(v.item())
    if isinstance(v, (np.dtype, type)) and not isinstance(v, bool):
        return np.dtype(v).name if isinstance(v, np.dtype) else v.__name__
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if hasattr(v, "__dataclass_fields__") and not isinstance(v, type):  # dataclasses.is_dataclass, not imported
        return jsonable(vars_of(v))
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")  # strict JSON has no Infinity/NaN
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)
