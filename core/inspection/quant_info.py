"""What `ge inspect` shows of a quantized model: each 8-bit tensor's scale and zero point, read from
the tasks that quantize or read it (their scale and zero-point arguments are weights of the OM)."""
from __future__ import annotations

import numpy as np

from ..model.ge_model import GeModel

_LINEAR = (("in", 0, 1, 2), ("in", 3, 4, 5), ("out", 0, 6, 7))
#: op -> (side, argument, its scale argument, its zero-point argument) for each quantized tensor it touches;
#: "dynamic" when the op computes them at run time
PARAMS = {
    "QuantizeLinear": (("out", 0, 1, 2),), "DequantizeLinear": (("in", 0, 1, 2),),
    "QLinearConv": _LINEAR, "QLinearMatMul": _LINEAR, "QLinearAdd": _LINEAR, "QLinearMul": _LINEAR,
    "QGemm": (("in", 0, 1, 2), ("in", 3, 4, 5), ("out", 0, 7, 8)),
    "QLinearGlobalAveragePool": (("in", 0, 1, 2), ("out", 0, 3, 4)),
    "QLinearAveragePool": (("in", 0, 1, 2), ("out", 0, 3, 4)),
    "MatMulIntegerToFloat": (("in", 0, 2, 4), ("in", 1, 3, 5)),
    "DynamicQuantizeLinear": (("out", 0, "dynamic", "dynamic"),),
}


def _fmt(a: np.ndarray | None) -> str:
    if a is None:
        return "-"
    a = a.reshape(-1)
    if a.size == 1:
        return f"{a[0]:.6g}" if a.dtype.kind == "f" else str(int(a[0]))
    return f"per channel ({a.size}: {a.min():.4g}..{a.max():.4g})" if a.dtype.kind == "f" else \
        f"per channel ({a.size}: {int(a.min())}..{int(a.max())})"


def _weight_value(m: GeModel):
    """A function: a task argument -> its value when it is a weight of the OM (else None)."""
    weights = {(w.allocation, w.offset): w for w in m.weights if not w.file}

    def value(arg) -> np.ndarray | None:
        w = weights.get((arg.allocation, arg.offset)) if arg is not None else None
        if w is None:
            return None
        return np.frombuffer(m.weight_data, np.dtype(w.dtype), int(np.prod(w.shape, dtype=np.int64)),
                             w.offset).reshape(w.shape)
    return value


#: the int8 products over constant weights: op -> the weights' argument (int8_native.py's plans)
PRODUCT_WEIGHTS = {"QLinearConv": 3, "ConvInteger": 1, "QLinearMatMul": 3, "MatMulInteger": 1,
                   "MatMulIntegerToFloat": 1, "QGemm": 3}


def int8_products(m: GeModel, nat) -> dict[int, str]:
    """{task index: the instructions its int8 product runs on}, for native library `nat` (None: the
    numpy plans): chosen per layer by its weights where the build has a choice (int8_native.product_plan:
    without VNNI (SSE or AVX2), vpmaddubsw where the weight pairs fit int16 or split weights leave few
    rests, else int16 pairs; a depthwise layer's path by its geometry). Tasks whose weights are not constants of the OM, or whose shapes the
    native plans do not take, are left out."""
    from ..kernels.native import QOUT_I32
    from ..kernels.ops.int8_native import (depthwise_geometry, depthwise_kernel, on_amx, pack_product, packed_values,
                                           product_kernel, product_plan, requant_kind)
    value = _weight_value(m)
    found = {}
    for step, task in enumerate(m.tasks):
        i = PRODUCT_WEIGHTS.get(task.op_type)
        w = value(task.inputs[i]) if i is not None and i < len(task.inputs) else None
        if w is None or w.dtype not in (np.uint8, np.int8):
            continue
        attrs = task.attrs if isinstance(task.attrs, dict) else {}
        if task.op_type.endswith("Conv") or task.op_type == "ConvInteger":
            if w.ndim != 4:
                continue
            group = int(attrs.get("group", 1))
            x, y = task.inputs[0], task.outputs[0]
            if group == w.shape[0] > 1 and w.shape[1] == 1 and w.shape[2] * w.shape[3] <= 64 and \
                    len(x.shape) == len(y.shape) == 4:
                out = requant_kind(y.dtype) if task.op_type == "QLinearConv" else QOUT_I32
                path = None if nat is None else nat.qdepthwise_path(
                    depthwise_geometry(x.shape, w.shape, y.shape, attrs), out)
                found[step] = depthwise_kernel(nat, path)
            elif group == 1:
                found[step] = product_kernel(nat, product_plan(nat, packed_values(w.reshape(w.shape[0], -1)), True))
            continue
        if w.ndim == 2 and len(task.inputs[0].shape) >= 2:  # (K, N), or QGemm's transB (N, K)
            rows = w if task.op_type == "QGemm" and int(attrs.get("transB", 0)) else w.T
            a_shape = task.inputs[0].shape
            amx = on_amx(nat, int(np.prod(a_shape[:-1])), a_shape[-1])
            twins = nat is not None and pack_product(nat, rows.T)[3] is not None
            found[step] = product_kernel(nat, product_plan(nat, packed_values(rows), False), amx, twins)
    return found


def quant_params(m: GeModel) -> dict[str, str]:
    """{tensor or weight name: "scale S, zero point Z"} for the quantized tensors of a static OM."""
    weights = {(w.allocation, w.offset): w for w in m.weights if not w.file}
    value = _weight_value(m)

    def name_of(arg, step: int, side: str) -> str | None:
        w = weights.get((arg.allocation, arg.offset))
        if w is not None:
            return w.name
        for t in m.tensors:
            if (t.allocation, t.offset, t.dtype, tuple(t.shape)) == (arg.allocation, arg.offset, arg.dtype, tuple(arg.shape)) \
                    and (t.first == step if side == "out" else t.first <= step <= t.last):
                return t.name
        return None

    found: dict[str, str] = {}
    for step, task in enumerate(m.tasks):
        for side, i, si, zi in PARAMS.get(task.op_type, ()):
            args = task.inputs if side == "in" else task.outputs
            arg = args[i] if i < len(args) else None
            if arg is None or np.dtype(arg.dtype) not in (np.dtype(np.uint8), np.dtype(np.int8)):
                continue
            name = name_of(arg, step, side)
            if name is None or name in found:
                continue
            if si == "dynamic":
                found[name] = "scale and zero point computed at run time"
                continue
            s = value(task.inputs[si]) if si < len(task.inputs) else None
            z = value(task.inputs[zi]) if zi < len(task.inputs) else None
            found[name] = f"scale {_fmt(s)}, zero point {_fmt(z)}"
    return found
