"""Shared test helpers: build ONNX models with onnx.helper, load them, run them through
onnxruntime and through ge's kernels (compute() in a plain loop, epilogues included)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core.model.errors import UnsupportedOpError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.passes.fuse_activation import EPILOGUE, build_epilogue
from ge.formats.onnx import load_onnx


class _OneThreadSession(ort.InferenceSession):
    """onnxruntime, the tests' oracle, on one intra-op thread unless a test asks for more: a session's
    own thread pool (one spinning thread per core, started and joined per session) cost more than the
    single-node models most tests build run for, and the suite runs beside test_every_level's reruns,
    one process per core already. The results compared do not change (where an op's result depends on
    its threads, as the dynamically quantized LSTM's per batch row, tests/e2e/test_quantizer_models.py
    asked for one thread already)."""

    def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
        options = sess_options or ort.SessionOptions()
        if options.intra_op_num_threads == 0:  # onnxruntime's default: one thread per core
            options.intra_op_num_threads = 1
        super().__init__(path_or_bytes, options, *args, **kwargs)


ort.InferenceSession = _OneThreadSession  # every test module calls it as ort.InferenceSession, at run time


def _model(nodes, inputs, outputs, inits=None, opset=17):
    """inputs/outputs: {name: (elem_type or numpy dtype, shape)} or a list of names for untyped outputs."""
    def vi(name, spec):
        if spec is None:
            return onnx.ValueInfoProto(name=name)
        t, shape = spec
        t = t if isinstance(t, int) else helper.np_dtype_to_tensor_dtype(np.dtype(t))
        return helper.make_tensor_value_info(name, t, shape)
    ins = [vi(k, v) for k, v in inputs.items()]
    outs = [vi(k, v) for k, v in (outputs.items() if isinstance(outputs, dict) else ((o, None) for o in outputs))]
    tensors = [numpy_helper.from_array(np.asarray(a), k) for k, a in (inits or {}).items()]
    g = helper.make_graph(nodes, "test", ins, outs, tensors)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.fixture
def make_model():
    return _model


@pytest.fixture
def load(tmp_path):
    """Save a ModelProto and load it back as a ge Graph."""
    def do(model, input_shape=None, out_nodes=None, name="m.onnx"):
        path = tmp_path / name
        onnx.save(model, str(path))
        return load_onnx(path, input_shape, out_nodes)
    return do


def ort_run(model, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def exact_integer_products(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose MatMulIntegers are float64 MatMuls of the centered operands, cast to
    int32: exact, as every partial sum of 8-bit products is an integer below 2^53. Zero points as
    quantize_dynamic writes them (a scalar for A; a scalar or one per column for B)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = []
    for node in out.graph.node:
        if node.op_type != "MatMulInteger" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        centered = []
        for i, x in enumerate(node.input[:2]):
            p = f"{node.output[0]}__exact{i}"
            nodes.append(helper.make_node("Cast", [x], [p], to=onnx.TensorProto.DOUBLE))
            zp = node.input[2 + i] if len(node.input) > 2 + i else ""
            if zp:
                nodes += [helper.make_node("Cast", [zp], [p + "z"], to=onnx.TensorProto.DOUBLE),
                          helper.make_node("Sub", [p, p + "z"], [p + "c"])]
                p += "c"
            centered.append(p)
        nodes += [helper.make_node("MatMul", centered, [node.output[0] + "__exact"]),
                  helper.make_node("Cast", [node.output[0] + "__exact"], [node.output[0]], to=onnx.TensorProto.INT32)]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def ort_unfused(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's results without its int8 kernels, whose u8 x s8 products saturate on AVX2 without
    VNNI (tests/core/kernels/int8_reference.py): graph optimizations off, so that a QDQ graph runs as
    DequantizeLinear -> float op -> QuantizeLinear instead of fused into QLinearConv & co., and each
    MatMulInteger exact (exact_integer_products). Float ops round where ge's fused integer kernels do
    not: a value on a rounding boundary may land one quantization step away, which the tests allow."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(exact_integer_products(model).SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ge_run(graph, feeds: dict) -> list[np.ndarray]:
    """Evaluate a ge Graph with the kernels' compute(), applying fused epilogues in place."""
    graph.toposort()
    env = dict(graph.initializers)
    env.update(feeds)
    opset = graph.opset.get("", 17)
    for node in graph.nodes:
        xs = [env[i] if i else None for i in node.inputs]
        metas = [None if x is None else Meta(np.asarray(x).dtype, np.shape(x)) for x in xs]
        consts = [graph.initializers.get(i) if i else None for i in node.inputs]
        kernel = lookup(node.op_type, node.domain, opset, node.name)(
            node.attrs, metas, consts, opset=opset, name=node.name, num_outputs=len(node.outputs))
        ys = [np.array(y) for y in kernel.compute(*xs)]
        if node.attrs.get(EPILOGUE) and not kernel.absorbs_epilogue:
            y = ys[0]
            build_epilogue(node.attrs[EPILOGUE], Meta(y.dtype, y.shape), opset, node.name)(y)
        for o, y in zip(node.outputs, ys):
            if o:
                env[o] = y
    return [env[o] for o in graph.outputs]


@pytest.fixture
def run_ort():
    return ort_run


@pytest.fixture
def run_ge():
    return ge_run


@pytest.fixture
def requires():
    """Fail the test, naming the op, when a kernel it needs is missing (a lost kernel is a
    regression: it must not pass as a skip)."""
    def check(*ops, opset=17):
        for op in ops:
            try:
                lookup(op, "", opset)
            except UnsupportedOpError:
                pytest.fail(f"no kernel for {op} (opset {opset})")
    return check



@pytest.fixture
def default_backend(monkeypatch):
    """`use("numpy")` or `use("native", direct="always"|"never"|"auto")`: the backend the compiler,
    the loader and kernels built without one select from now on in this test (production code
    selects once per model; tests steer that selection here). `use` returns a context manager that
    restores the previous choice, for a part of a test."""
    import contextlib

    from ge.core.kernels import backend as backends, native

    def use(kind: str = "numpy", direct: str = "auto"):
        if kind == "native" and native.native() is None:
            pytest.skip(f"ge's native kernels do not run here: {native.status()}")
        chosen = backends.NUMPY if kind == "numpy" else backends.Backend(native.native(), direct)
        before = backends.select
        monkeypatch.setattr(backends, "select", lambda *a, **k: chosen)

        @contextlib.contextmanager
        def restore_after():
            try:
                yield chosen
            finally:
                monkeypatch.setattr(backends, "select", before)
        return restore_after()

    return use


@pytest.fixture(scope="session")
def local_ray():
    """One local 2-CPU Ray instance for the tests that use Ray (issue 21), started on first use."""
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def pytest_collection_finish(session):
    """test_every_level's reruns start now, beside the suite, rather than when its turn comes."""
    every_level = next((item.module for item in session.items if item.path.name == "test_every_level.py"), None)
    if every_level is not None and not session.config.option.collectonly:
        every_level.start(session.items)
        session.config.stash[_EVERY_LEVEL] = every_level


def pytest_sessionfinish(session):
    every_level = session.config.stash.get(_EVERY_LEVEL, None)
    if every_level is not None:
        every_level.stop()


_EVERY_LEVEL = pytest.StashKey()
