"""The native depthwise convolution (csrc/depthwise.c) against onnxruntime: 3x3 and 5x5 (the unrolled
kernels) and other sizes, strides 1, 2, 3, even and odd padding on each side, channel multipliers,
batches; the masked flat run on planes read in place (stride 1, 1024 outputs and more: the loads near
the plane's edges masked to it) and through the channel's phases in a buffer (on the stack, or heap
memory for a large plane), as one flat run (rows as wide as the output's) or a run per output row, with
every column mask: planes narrower than a vector, 1xW and Hx1, pads larger than the plane, asymmetric
pads, dilation, non-square kernels and strides; channels in the lanes (7x7 outputs and smaller, 14x14
strided ones); 3x3 stride 2 on larger planes, rows read in place (AVX-512); the numpy plan alike."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.epilogue import ATTR as EPILOGUE, Epilogue

rng = np.random.default_rng(5)
F32 = np.dtype(np.float32)

# (x shape, kernel, strides, pads, dilations, multiplier)
CASES = [
    ((1, 3, 140, 140), 3, 1, [1, 1, 1, 1], 1, 1),   # read in place
    ((1, 3, 140, 140), 3, 2, [1, 1, 1, 1], 1, 1),   # phases larger than the stack buffer: heap memory
    ((1, 2, 131, 129), 5, 2, [2, 2, 2, 2], 1, 1),
    ((2, 5, 37, 37), 5, 2, [2, 1, 2, 0], 1, 1),     # even and odd padding at the start of each axis
    ((1, 4, 33, 40), 3, 2, [0, 0, 0, 0], 1, 1),
    ((1, 4, 7, 7), 5, 1, [2, 2, 2, 2], 1, 1),
    ((1, 4, 14, 14), 3, 2, [0, 1, 1, 0], 1, 2),     # two output channels per input channel
    ((2, 6, 28, 28), 3, 1, [1, 1, 1, 1], 1, 1),
    ((1, 3, 20, 23), 3, 3, [1, 2, 1, 2], 1, 1),
    ((1, 3, 20, 20), 7, 2, [3, 3, 3, 3], 1, 1),     # neither 3x3 nor 5x5: the generic loop
    ((1, 3, 20, 20), 3, 1, [2, 2, 2, 2], 2, 1),     # dilated
    ((1, 40, 35, 35), 3, 2, [1, 1, 1, 1], 1, 1),    # rows wider than two vectors
    # stride 2 on large planes: 3x3 rows read in place (AVX-512), else the phases filled as the vectors need
    # their rows (rows of even widths as one stream)
    ((2, 3, 70, 67), 3, 2, [0, 1, 1, 0], 1, 1),     # batch 2, padding on one side of each axis, odd width
    ((1, 5, 90, 91), 3, 2, [1, 1, 1, 1], 1, 1),
    ((1, 2, 66, 66), 3, 2, [1, 1, 1, 1], 1, 2),     # two output channels per input channel
    ((1, 3, 64, 75), 2, 2, [0, 0, 0, 0], 1, 1),     # 2x2: the generic loop
    ((1, 2, 80, 80), 5, 2, [1, 2, 2, 1], 1, 1),
    ((1, 4, 60, 150), 3, 2, [1, 1, 1, 1], 1, 1),    # rows of 75 outputs: a run of 4 vectors, then one
    # small planes: channels in the lanes, groups of 16 (8) channels, the last one partial, batch 2
    ((2, 37, 14, 14), 5, 2, [2, 2, 2, 2], 1, 1),
    ((1, 20, 8, 8), 3, 1, [1, 1, 1, 1], 1, 1),
    ((1, 33, 9, 9), 7, 1, [3, 3, 3, 3], 1, 1),
    ((1, 18, 11, 11), 3, 1, [0, 2, 1, 1], 2, 1),
    ((1, 300, 7, 7), 3, 1, [1, 1, 1, 1], 1, 1),     # several groups per item
    ((1, 300, 7, 7), 3, 1, [1, 1, 1, 1], 1, 2),     # a multiplier: the masked flat run, several channels per item
    # the column masks: planes narrower than a vector, 1xW, Hx1, pads larger than the plane
    ((1, 5, 6, 5), 3, 1, [1, 1, 1, 1], 1, 1),
    ((1, 3, 1, 40), 3, 1, [1, 1, 1, 1], 1, 1),
    ((1, 3, 40, 1), 3, 1, [1, 1, 1, 1], 1, 1),
    ((1, 3, 2, 3), 5, 1, [3, 3, 3, 3], 1, 1),       # output rows wider than the input's: a run per row
    ((1, 4, 3, 2), 5, 2, [4, 3, 2, 4], 1, 1),
    ((1, 3, 21, 22), 3, 2, [2, 2, 2, 2], 2, 1),     # stride 2 and dilation: the phases' taps
    ((1, 3, 20, 33), (1, 5), (2, 1), [0, 2, 0, 2], 1, 1),  # a 1x5 kernel, strides (2, 1)
    ((1, 3, 19, 20), (5, 3), (1, 2), [1, 2, 3, 0], (2, 1), 1),
    # read in place (stride 1, 1024 outputs and more): the plane's first and last rows masked too
    ((1, 3, 40, 41), 3, 1, [0, 2, 2, 0], 1, 1),     # asymmetric pads, one flat run
    ((1, 2, 40, 40), 3, 1, [0, 0, 0, 0], 1, 1),     # no pads: a run per (narrower) output row
    ((1, 2, 34, 34), 5, 1, [3, 1, 3, 4], 1, 1),     # output rows wider than the input's
    ((1, 3, 36, 36), 3, 1, [2, 2, 2, 2], 2, 1),     # dilated
    ((1, 2, 40, 40), 3, 1, [1, 1, 1, 1], 1, 3),     # three output channels per input channel
    ((1, 2, 1, 2000), (1, 3), 1, [0, 1, 0, 1], 1, 1),  # one row: every vector at the plane's edges
    ((2, 3, 33, 35), 7, 1, [3, 3, 3, 3], 1, 1),     # neither 3x3 nor 5x5, batch 2
]


def ort_conv(x, w, b, attrs, act):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"], **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("act", [None, "HardSwish"])
@pytest.mark.parametrize("shape,k,s,pads,dil,mult", CASES)
def test_depthwise_as_onnxruntime(default_backend, backend, act, shape, k, s, pads, dil, mult):
    default_backend(backend)
    c = shape[1]
    k, s, dil = (v if isinstance(v, tuple) else (v, v) for v in (k, s, dil))
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((c * mult, 1) + k) * 0.3).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    attrs = dict(kernel_shape=list(k), strides=list(s), pads=pads, dilations=list(dil), group=c)
    want = ort_conv(x, w, b, attrs, act)
    if act:
        attrs[EPILOGUE] = [[act, {}]]
    metas = [Meta(F32, x.shape), Meta(F32, w.shape), Meta(F32, b.shape)]
    kernel = lookup("Conv", "", 17)(attrs, metas, [None, w, b], opset=17).load()
    assert kernel.uses_native == (backend == "native")
    assert getattr(getattr(kernel, "native", None), "kind", None) == ("depthwise" if backend == "native" else None)
    y = np.full(want.shape, np.nan, np.float32)
    ws = np.empty(kernel.workspace_nbytes(), np.uint8)
    for _ in range(2):  # the second run on the same buffers: the prepared calls, the kernel's padding kept
        kernel.run([x, w, b], [y], ws)
        epilogue = Epilogue.unless_absorbed(kernel, attrs.get(EPILOGUE), Meta(F32, y.shape))
        if epilogue is not None:
            epilogue(y)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
