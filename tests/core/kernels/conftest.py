"""`check_op`: one ONNX node through onnxruntime and through ge's kernel (compute, infer and run)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core.model.ir import Meta, dtype_to_onnx
from ge.core.kernels import lookup, native

from .levels import level_params


def run_onnxruntime(op_type, inputs, attrs, n_outputs, opset, const_names, domain=""):
    names = list(inputs)
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, [n if inputs[n] is not None else "" for n in names], outs, domain=domain, **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, dtype_to_onnx(a.dtype), a.shape)
                    for n, a in inputs.items() if a is not None and n not in const_names]
    inits = [numpy_helper.from_array(inputs[n], n) for n in const_names]
    graph_outputs = [onnx.ValueInfoProto(name=o) for o in outs]
    graph = helper.make_graph([node], "t", graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in inputs.items() if a is not None and n not in const_names}
    return sess.run(None, feeds)


@pytest.fixture
def check_op():
    """Compare ge's kernel with onnxruntime on one node. `consts` names inputs that are initializers
    (weights, shapes, axes): the kernel receives their values at build time, as after compilation.
    `expected`: the outputs to compare with instead of onnxruntime's, where its result depends on the
    CPU (int8_reference.py)."""

    def check(op_type, inputs: dict, attrs=None, n_outputs=1, opset=17, consts=(), rtol=1e-5, atol=1e-6,
              expected=None):
        attrs = attrs or {}
        if expected is None:
            expected = run_onnxruntime(op_type, inputs, attrs, n_outputs, opset, consts)
        arrays = list(inputs.values())
        metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
        const_values = [inputs[n] if n in consts else None for n in inputs]
        kernel_cls = lookup(op_type, opset=opset)
        kernel = kernel_cls(attrs, metas, const_values, opset=opset, name="n0", num_outputs=n_outputs)
        inferred = kernel.infer()
        assert [(m.dtype, m.shape) for m in inferred] == [(e.dtype, e.shape) for e in expected], "infer()"
        for got, want in zip(kernel.compute(*arrays), expected):
            assert np.asarray(got).dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg="compute()")
        # the planned path: outputs pre-filled with garbage, a workspace of the declared size
        planned = kernel_cls(attrs, metas, const_values, outputs=inferred, opset=opset, name="n0",
                             num_outputs=n_outputs).load()
        ys = [np.full(m.shape, 77, m.dtype) for m in inferred]
        ws = np.zeros(planned.workspace_nbytes(), np.uint8) if planned.workspace_nbytes() else None
        with np.errstate(all="ignore"):  # as the runtime runs kernels
            planned.run(arrays, ys, ws)
        for got, want in zip(ys, expected):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg="run()")
        # the runtime's path: the call bound to these arrays (Kernel.bound), called twice
        ys = [np.full(m.shape, 77, m.dtype) for m in inferred]
        call = planned.bound(arrays, ys, ws)
        with np.errstate(all="ignore"):
            call()
            call()
        for got, want in zip(ys, expected):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg="bound()")
        return expected

    return check


@pytest.fixture(params=["native", "numpy"])
def native_and_numpy(request, default_backend):
    """A test once with ge's native kernels and once with the numpy plans (kernels built in it
    select that backend). Modules with native plans use it on every test."""
    default_backend(request.param)
    return request.param


@pytest.fixture(params=level_params())
def nat(request):
    """Every native level this CPU runs, loaded (test_nchwc*.py); the others skipped, naming why."""
    return native.load_level(request.param)
