import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(8)
TOL = dict(rtol=1e-4, atol=1e-4)


def i64(v):
    return np.array(v, np.int64)


# -- DFT -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("shape,axis", [((2, 8, 1), 1), ((2, 8, 2), 1), ((3, 5, 4, 1), 1), ((3, 5, 4, 2), 2),
                                        ((2, 6, 1), -2), ((1, 16, 2), 1)])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("length", [None, 6, 12])
def test_dft(check_op, opset, shape, axis, inverse, onesided, length):
    if onesided and shape[-1] == 2:
        return
    x = rng.standard_normal(shape).astype(np.float32)
    inputs = {"x": x}
    attrs = {"inverse": inverse, "onesided": onesided}
    consts = []
    if length is not None:
        inputs["n"] = i64(length)
        consts.append("n")
    if opset >= 20:
        if length is None:
            inputs["n"] = None
        inputs["axis"] = i64(axis)
        consts.append("axis")
    else:
        attrs["axis"] = axis
    check_op("DFT", inputs, attrs, opset=opset, consts=tuple(consts), **TOL)


def test_dft_float64(check_op):
    check_op("DFT", {"x": rng.standard_normal((2, 10, 2))}, {"axis": 1}, opset=17, rtol=1e-10, atol=1e-10)


def test_dft_errors():
    f = np.dtype(np.float32)
    k = lookup("DFT", opset=17)
    with pytest.raises(GraphError, match=r"node 'd' \(DFT\): onesided=1 needs a real input"):
        k({"onesided": 1}, [Meta(f, (2, 8, 2))], name="d", opset=17)
    with pytest.raises(GraphError, match="axis=2 is out of range"):
        k({"axis": 2}, [Meta(f, (2, 8, 2))], name="d", opset=17)
    with pytest.raises(GraphError, match="dft_length.*must be a constant"):
        k({}, [Meta(f, (2, 8, 2)), Meta(np.dtype(np.int64), ())], name="d", opset=17)


# -- STFT ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("length,step,flen", [(64, 16, 32), (100, 10, 25), (32, 32, 32), (50, 7, 16)])
@pytest.mark.parametrize("window", [True, False])
@pytest.mark.parametrize("onesided", [1, 0])
@pytest.mark.parametrize("complex_", [False, True])
def test_stft(check_op, length, step, flen, window, onesided, complex_):
    if complex_ and onesided:
        return
    x = rng.standard_normal((2, length, 2 if complex_ else 1)).astype(np.float32)
    inputs = {"x": x, "step": i64(step), "w": np.hanning(flen).astype(np.float32) if window else None,
              "len": i64(flen)}
    consts = ("step", "len")
    check_op("STFT", inputs, {"onesided": onesided}, opset=17, consts=consts, **TOL)


def test_stft_window_defines_frame_length(check_op):
    inputs = {"x": rng.standard_normal((1, 40, 1)).astype(np.float32), "step": i64(8),
              "w": np.hamming(16).astype(np.float32)}
    check_op("STFT", inputs, opset=17, consts=("step",), **TOL)


# -- windows, MelWeightMatrix --------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size", [1, 2, 10, 31])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("odt", [1, 11])
def test_windows(check_op, op, size, periodic, odt):
    if size == 1 and not periodic:
        return  # 0/0 in the symmetric formula
    check_op(op, {"n": np.array(size, np.int32)}, {"periodic": periodic, "output_datatype": odt}, opset=17,
             consts=("n",), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mel,dft,rate,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (40, 512, 16000, 20.0, 8000.0),
                                                 (80, 400, 16000, 0.0, 8000.0), (10, 64, 22050, 300.0, 5000.0)])
def test_mel_weight_matrix(check_op, mel, dft, rate, lo, hi):
    inputs = {"m": i64(mel), "d": i64(dft), "r": i64(rate), "lo": np.array(lo, np.float32),
              "hi": np.array(hi, np.float32)}
    check_op("MelWeightMatrix", inputs, opset=17, consts=tuple(inputs), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n,length", [(10, None), (9, 9), (8, 12)])
def test_dft_inverse_onesided_is_the_inverse_real_fft(n, length):
    """inverse=1, onesided=1: a half spectrum [.., n // 2 + 1, 2] back to the real signal [.., n, 1]."""
    signal = np.random.default_rng(3).standard_normal((2, n)).astype(np.float32)
    spec = np.fft.rfft(signal, axis=1)
    x = np.stack([spec.real, spec.imag], axis=-1).astype(np.float32)
    xs = [x] + ([np.array(length, np.int64)] if length else [])
    k = lookup("DFT", opset=17)({"inverse": 1, "onesided": 1, "axis": 1}, [Meta(a.dtype, a.shape) for a in xs],
                                xs if length else [None], name="d", opset=17)
    y = k.compute(*xs)[0]
    out = length or 2 * (n // 2)
    assert y.shape == (2, out, 1)
    np.testing.assert_allclose(y[..., 0], np.fft.irfft(spec, n=out, axis=1), rtol=1e-5, atol=1e-5)
    if not length and n % 2 == 0:
        np.testing.assert_allclose(y[..., 0], signal, rtol=1e-5, atol=1e-5)
