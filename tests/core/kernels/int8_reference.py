"""Exact references for ge's integer products, in numpy int64 arithmetic: what the int8 tests compare
ge with instead of onnxruntime's int8 kernels. Those (MLAS's u8 x s8 GEMM) add pairs of 8-bit
products in 16 bits on AVX2 without VNNI (vpmaddubsw) and saturate there, so their result depends on
the CPU they run on (issue 29); the products and sums here are exact on every CPU.

After the product the steps are ONNX's, in the float32 order onnxruntime's MlasRequantizeOutput takes
and core/kernels/ops/quantization.py documents for ge: y = saturate(round_half_even(float32(acc) *
multiplier) + y_zero_point), multiplier = x_scale * w_scale / y_scale in float32. So the comparison
stays bit-exact for the quantized outputs."""
from __future__ import annotations

import itertools

import numpy as np

F32 = np.float32


def centered(x, zero_point=None, axis: int | None = None) -> np.ndarray:
    """x - zero_point in int64; a 1-D zero point applies along `axis` of x (per channel)."""
    x = np.asarray(x).astype(np.int64)
    if zero_point is None:
        return x
    z = np.asarray(zero_point).astype(np.int64)
    if z.size > 1 and axis is not None:
        shape = [1] * x.ndim
        shape[axis] = z.size
        z = z.reshape(shape)
    return x - (z.reshape(()) if z.size == 1 else z)


def int_matmul(a, b, az=None, bz=None) -> np.ndarray:
    """(A - az) @ (B - bz) exactly, numpy's matmul broadcasting; bz per column of B (or one)."""
    bm = centered(b, bz, axis=-1 if np.ndim(b) > 1 else None)
    return np.matmul(centered(a, az), bm)


def conv_pads(xshape, wshape, attrs) -> tuple[list[int], list[int], list[int]]:
    """Begin and end pads and strides of an N-d convolution, auto_pad resolved as ONNX's Conv does."""
    spatial = xshape[2:]
    kernel = wshape[2:]
    n = len(spatial)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for d, k, s, dl in zip(spatial, kernel, strides, dil):
            total = max(0, (-(-d // s) - 1) * s + (k - 1) * dl + 1 - d)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin, end, strides
    if auto == "VALID":
        return [0] * n, [0] * n, strides
    pads = list(attrs.get("pads", [0] * 2 * n))
    return pads[:n], pads[n:], strides


def int_conv(x, w, xz=None, wz=None, attrs=None) -> np.ndarray:
    """ConvInteger's accumulator, exactly: (x - xz) convolved with (w - wz), wz per output channel (or
    one), padding with the zero point (a centered 0); N-d, groups, strides, dilations, auto_pad."""
    attrs = attrs or {}
    xc, wc = centered(x, xz), centered(w, wz, axis=0)
    begin, end, strides = conv_pads(xc.shape, wc.shape, attrs)
    dil = list(attrs.get("dilations", [1] * (xc.ndim - 2)))
    group = int(attrs.get("group", 1))
    xp = np.pad(xc, [(0, 0), (0, 0)] + list(zip(begin, end)))
    kernel = wc.shape[2:]
    out = [(p - (k - 1) * d - 1) // s + 1 for p, k, d, s in zip(xp.shape[2:], kernel, dil, strides)]
    n, c = xc.shape[:2]
    oc = wc.shape[0]
    acc = np.zeros((n, group, oc // group) + tuple(out), np.int64)
    wg = wc.reshape((group, oc // group, c // group) + tuple(kernel))
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = xp[(slice(None), slice(None)) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                                                       for t, d, o, s in zip(tap, dil, out, strides))]
        xg = window.reshape((n, group, c // group, -1))
        acc += np.einsum("ngcp,goc->ngop", xg, wg[(Ellipsis,) + tap]).reshape(acc.shape)
    return acc.reshape((n, oc) + tuple(out))


def requantize(acc, multiplier, y_zero_point, dtype, axis: int | None = None) -> np.ndarray:
    """saturate(round_half_even(float32(acc) * multiplier) + y_zero_point): the multiplier (float32)
    per `axis` of acc when it has several values."""
    m = np.asarray(multiplier, F32)
    if m.size > 1:
        shape = [1] * acc.ndim
        shape[axis] = m.size
        m = m.reshape(shape)
    t = np.rint(acc.astype(F32) * m.reshape(()) if m.size == 1 else acc.astype(F32) * m)
    info = np.iinfo(dtype)
    return np.clip(t + F32(np.asarray(y_zero_point).reshape(())), info.min, info.max).astype(dtype)


def multiplier(s0, s1, sy) -> np.ndarray:
    """x_scale * w_scale / y_scale in float32, per channel where w_scale is."""
    return (np.asarray(s0, F32).reshape(()) * np.asarray(s1, F32).reshape(-1)) / np.asarray(sy, F32).reshape(())


def qlinear_matmul(a, a_scale, az, b, b_scale, bz, y_scale, yz) -> np.ndarray:
    return requantize(int_matmul(a, b, az, bz), multiplier(a_scale, b_scale, y_scale), yz,
                      np.asarray(yz).dtype, axis=-1)


def qlinear_conv(x, x_scale, xz, w, w_scale, wz, y_scale, yz, bias=None, attrs=None) -> np.ndarray:
    acc = int_conv(x, w, xz, wz, attrs)
    if bias is not None:
        acc += np.asarray(bias, np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    return requantize(acc, multiplier(x_scale, w_scale, y_scale), yz, np.asarray(yz).dtype, axis=1)


def qgemm(a, a_scale, az, b, b_scale, bz, c=None, y_scale=None, yz=None, attrs=None) -> np.ndarray:
    """com.microsoft QGemm: alpha * a_scale * b_scale * (A'B' + C), requantized when y_scale is given
    (onnxruntime's order: the scale alpha * a_scale * b_scale, then divided by y_scale)."""
    attrs = attrs or {}
    a = np.asarray(a).T if attrs.get("transA") else a
    b = np.asarray(b).T if attrs.get("transB") else b
    acc = int_matmul(a, b, az, bz)
    if c is not None:
        acc = acc + np.asarray(c, np.int64)
    scale = F32(attrs.get("alpha", 1.0)) * np.asarray(a_scale, F32).reshape(()) * np.asarray(b_scale, F32).reshape(-1)
    if y_scale is None:
        return acc.astype(F32) * scale
    yz = np.zeros((), np.uint8) if yz is None else np.asarray(yz)
    return requantize(acc, scale / np.asarray(y_scale, F32).reshape(()), yz, yz.dtype, axis=-1)


def matmul_integer_to_float(a, b, a_scale, b_scale, az=None, bz=None, bias=None) -> np.ndarray:
    """com.microsoft MatMulIntegerToFloat: float32(acc) * (a_scale * b_scale) (+ bias)."""
    y = int_matmul(a, b, az, bz).astype(F32) * (np.asarray(a_scale, F32).reshape(()) * np.asarray(b_scale, F32).reshape(-1))
    return y if bias is None else y + np.asarray(bias, F32).reshape(-1)


def qlinear_add(a, a_scale, az, b, b_scale, bz, c_scale, cz) -> np.ndarray:
    """com.microsoft QLinearAdd in MLAS's float32 formula (no integer product; the same on every CPU
    when its steps round one by one, as numpy's do): C = (zc - rA za - rB zb) + rA A + rB B, rA = sa / sc,
    rB = sb / sc, rounded half to even and saturated."""
    f = [np.asarray(v, F32).reshape(()) for v in (a_scale, az, b_scale, bz, c_scale, cz)]
    ra, rb = f[0] / f[4], f[2] / f[4]
    fixed = f[5] - ra * f[1] - rb * f[3]
    t = np.rint((np.asarray(a, F32) * ra + fixed) + np.asarray(b, F32) * rb)
    info = np.iinfo(np.asarray(cz).dtype)
    return np.clip(t, info.min, info.max).astype(np.asarray(cz).dtype)


def fma_atol(product: np.ndarray) -> float:
    """What a fused multiply-add (the native kernels' store step, onnxruntime's on some CPUs) may change
    in float32(acc) * scale + bias against the two roundings here: at most one rounding of the product,
    half an ulp of its largest magnitude, 2^-24 relative; twice that for headroom."""
    return float(np.abs(product).max(initial=0)) * 2.0 ** -23


#: the reference of each op, called with the node's inputs in ONNX order (None for an absent one) and
#: its attributes
REFERENCES = {
    "MatMulInteger": lambda a, b, az=None, bz=None, attrs=None: int_matmul(a, b, az, bz).astype(np.int32),
    "ConvInteger": lambda x, w, xz=None, wz=None, attrs=None: int_conv(x, w, xz, wz, attrs).astype(np.int32),
    "QLinearMatMul": lambda *xs, attrs=None: qlinear_matmul(*xs),
    "QLinearConv": lambda *xs, attrs=None: qlinear_conv(*xs, attrs=attrs),
    "QGemm": lambda *xs, attrs=None: qgemm(*xs, attrs=attrs),
    "MatMulIntegerToFloat": lambda *xs, attrs=None: matmul_integer_to_float(*xs),
    "QLinearAdd": lambda *xs, attrs=None: qlinear_add(*xs),
}


def reference(op: str, inputs: list, attrs: dict | None = None) -> np.ndarray:
    """The exact result of integer node `op` on `inputs` (ONNX's order, None for absent ones;
    trailing absent ones may be left out)."""
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return REFERENCES[op](*inputs, attrs=attrs or {})
