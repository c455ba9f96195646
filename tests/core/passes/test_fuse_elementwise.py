"""fuse_elementwise: connected elementwise ops run as one ge::FusedElementwise task, on the native
block interpreter (csrc/eltwise.c) or the ops' own numpy kernels, with the results of the unfused
tasks (bit for bit) and of onnxruntime."""
import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup, native as native_mod
from ge.core.kernels.backend import NUMPY
from ge.core.passes import optimize

n = helper.make_node
rng = np.random.default_rng(5)
ELEM = {np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32,
        np.int64: TensorProto.INT64}


def model_of(nodes, inputs: dict, outputs, inits: dict, dtype=np.float32, opset=17):
    """inputs: name -> shape; outputs: names; inits: name -> array."""
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info(k, ELEM[dtype], s) for k, s in inputs.items()],
        [helper.make_tensor_value_info(o, ELEM[dtype], None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def feeds_of(model, dtype) -> dict:
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if np.dtype(dtype).kind == "f":
            feeds[vi.name] = (rng.standard_normal(shape) * 3).astype(dtype)
        else:
            feeds[vi.name] = rng.integers(-50, 50, shape).astype(dtype)
    return feeds


def run_ge(model, feeds, tmp_path, name="m", **atc):
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / name), **atc).om_path, "cpu")
    try:
        plans = [t.plan for t in api.model(model_id).default_context.handle]
        return api.execute(model_id, feeds), plans
    finally:
        api.unload(model_id)


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def w(shape, dtype=np.float32):
    return (rng.standard_normal(shape) if np.dtype(dtype).kind == "f" else rng.integers(-9, 9, shape)).astype(dtype)


def chains():
    """(id, model, dtype, steps the fused task must hold): broadcasting, mixed unary/binary, trees, ints."""
    f = np.float32
    yield ("broadcast", model_of(
        [n("Add", ["x", "b"], ["t0"]), n("Relu", ["t0"], ["t1"]), n("Mul", ["t1", "s"], ["t2"]),
         n("HardSwish", ["t2"], ["t3"]), n("Clip", ["t3", "lo", "hi"], ["t4"]), n("Sub", ["r", "t4"], ["y"])],
        {"x": [2, 3, 4, 5]}, ["y"], {"b": w([3, 1, 1]), "s": f(0.7), "lo": f(-0.4), "hi": f(1.5), "r": w([5])}),
        f, 6)
    yield ("mixed", model_of(
        [n("Abs", ["x"], ["a"]), n("Sqrt", ["a"], ["b"]), n("Div", ["b", "d"], ["c"]), n("Neg", ["c"], ["e"]),
         n("Max", ["e", "m"], ["g"]), n("Min", ["g", "m2"], ["h"]), n("LeakyRelu", ["h"], ["i"], alpha=0.2),
         n("HardSigmoid", ["i"], ["j"], alpha=0.3, beta=0.4), n("Reciprocal", ["j"], ["k"]), n("Exp", ["k"], ["l"]),
         n("Tanh", ["l"], ["o"]), n("Sigmoid", ["o"], ["y"])],
        {"x": [3, 17]}, ["y"], {"d": w([17]), "m": w([3, 1]), "m2": f(0.9)}), f, 12)
    yield ("tree", model_of(  # (x + a) * (z - b), then Relu: two branches meet
        [n("Add", ["x", "a"], ["p"]), n("Sub", ["z", "b"], ["q"]), n("Mul", ["p", "q"], ["r"]), n("Relu", ["r"], ["y"])],
        {"x": [4, 300], "z": [4, 300]}, ["y"], {"a": w([300]), "b": w([4, 1])}), f, 4)
    yield ("float64", model_of(
        [n("Mul", ["x", "a"], ["p"]), n("Add", ["p", "b"], ["q"]), n("Clip", ["q", "lo"], ["y"])],
        {"x": [2, 700]}, ["y"], {"a": w([700], np.float64), "b": w([2, 1], np.float64), "lo": np.float64(-0.1)},
        np.float64), np.float64, 3)
    for dtype in (np.int32, np.int64):
        yield (np.dtype(dtype).name, model_of(
            [n("Mul", ["x", "a"], ["p"]), n("Sub", ["p", "b"], ["q"]), n("Abs", ["q"], ["r"]), n("Neg", ["r"], ["s"]),
             n("Max", ["s", "m"], ["t"]), n("Clip", ["t", "lo", "hi"], ["u"]), n("Add", ["u", "x"], ["y"])],
            {"x": [5, 6]}, ["y"], {"a": w([6], dtype), "b": w([5, 1], dtype), "m": np.asarray(-40, dtype),
                                   "lo": np.asarray(-30, dtype), "hi": np.asarray(20, dtype)}, dtype), dtype, 7)


CHAINS = {key: rest for key, *rest in chains()}


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("key", list(CHAINS))
def test_chain_is_one_task_with_onnxruntime_results(tmp_path, default_backend, plan, key):
    default_backend(plan)
    model, dtype, steps = CHAINS[key]
    feeds = feeds_of(model, dtype)
    got, plans = run_ge(model, feeds, tmp_path)
    (task,) = plans
    assert task.kernel.op_type == "FusedElementwise" and len(task.kernel.steps) == steps
    # the native interpreter takes every chain but those with ops it does not lower (Exp, Tanh, Sigmoid)
    assert task.kernel.native == (plan == "native" and key != "mixed")
    want = ort_run(model, feeds)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got[0], want[0])
    unfused, plans = run_ge(model, feeds, tmp_path, "unfused", fusion_switch_file=_switch(tmp_path, "fuse_elementwise"))
    assert len(plans) > 1 and "FusedElementwise" not in [p.kernel.op_type for p in plans]
    np.testing.assert_array_equal(got[0], unfused[0])  # exactly the unfused tasks' results


def _switch(tmp_path, *off) -> str:
    path = tmp_path / "switch.json"
    path.write_text(json.dumps({"Switch": {"UBFusion": {name: "off" for name in off}}}))
    return str(path)


def test_output_and_shared_values_stay_tensors(tmp_path, default_backend):
    """A middle value that is a model output, or read by two nodes, is not fused away: the chain
    splits there and the value is computed once, as a tensor of its own."""
    default_backend("native")
    f = np.float32
    model = model_of(
        [n("Add", ["x", "a"], ["p"]), n("Relu", ["p"], ["mid"]), n("Mul", ["mid", "s"], ["q"]), n("Neg", ["q"], ["y"]),
         n("Sub", ["x", "a"], ["u"]), n("Abs", ["u"], ["shared"]), n("Exp", ["shared"], ["v"]),
         n("Add", ["shared", "v"], ["z"]), n("Sqrt", ["z"], ["z2"])],
        {"x": [2, 8]}, ["y", "mid", "z2"], {"a": w([8]), "s": f(1.5)})
    feeds = feeds_of(model, f)
    got, plans = run_ge(model, feeds, tmp_path)
    ops = [(p.kernel.op_type, [s[0].op_type for s in getattr(p.kernel, "steps", ())]) for p in plans]
    # Add+Relu -> mid (an output: the Add with the Relu its epilogue, one chain of its own), [Mul, Neg]
    # -> y, [Sub, Abs] -> shared (read twice), [Exp, Add, Sqrt] -> z2 (reading shared twice, as an operand)
    assert sorted(ops) == sorted([("FusedElementwise", ["Add", "Relu"]), ("FusedElementwise", ["Mul", "Neg"]),
                                  ("FusedElementwise", ["Sub", "Abs"]), ("FusedElementwise", ["Exp", "Add", "Sqrt"])])
    for g, want in zip(got, ort_run(model, feeds)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_a_value_read_twice_by_one_node_is_an_operand(load):
    """Mul(t, t): t is read twice by its reader, so its producer is not merged into the reader."""
    model = model_of([n("Add", ["x", "a"], ["t"]), n("Mul", ["t", "t"], ["u"]), n("Relu", ["u"], ["y"])],
                     {"x": [4]}, ["y"], {"a": w([4])})
    g = load(model)
    optimize(g)
    assert [(node.op_type, node.inputs) for node in g.nodes] == [("Add", ["x", "a"]), ("FusedElementwise", ["t"])]
    assert g.nodes[1].attrs["steps"] == [["Mul", "", {}, [0, 0]], ["Relu", "", {}, [-1]]]


def test_epilogues_and_switches(load):
    """An Add with its fused Relu joins the chain with the Relu as a step; the fusion can be switched
    off by its name or by UBFusion's ALL, like the other fusions."""
    model = model_of([n("Add", ["x", "a"], ["t"]), n("Relu", ["t"], ["u"]), n("Mul", ["u", "b"], ["y"])],
                     {"x": [4]}, ["y"], {"a": w([4]), "b": w([4])})
    g = load(model)
    report = optimize(g)
    assert [node.op_type for node in g.nodes] == ["FusedElementwise"]
    assert [s[0] for s in g.nodes[0].attrs["steps"]] == ["Add", "Relu", "Mul"]
    assert report["passes"]["fuse_elementwise"] == {"fused": 1, "fused_steps": 3}
    for disabled in ({"fuse_elementwise"},):
        g = load(model)
        report = optimize(g, disabled=disabled)
        assert [node.op_type for node in g.nodes] == ["Add", "Mul"] and report["passes"]["fuse_elementwise"] == \
            {"switched_off": 1}
    from ge.core.passes import fusion_switches
    assert "fuse_elementwise" in fusion_switches({"UBFusion": {"ALL": False}})[0]
    assert fusion_switches({"UBFusion": {"fuse_elementwise": False}})[0] == {"fuse_elementwise"}


@pytest.mark.parametrize("plan", ["native", "numpy"])
def test_float16_chains_fuse_with_each_ops_rounding(tmp_path, load, default_backend, plan):
    """A float16 chain is one task: natively, float32 steps on float16 blocks (tails of the interpreter's
    256-element blocks, broadcast operands, a NaN and an overflow to infinity), each step's result
    rounded to float16; in numpy, numpy's float16 loops: both bit for bit the unfused ops' results."""
    default_backend(plan)
    half = lambda a: np.asarray(a).astype(np.float16)  # noqa: E731
    model = model_of([n("Add", ["x", "a"], ["t"]), n("Relu", ["t"], ["u"]), n("Mul", ["u", "b"], ["v"]),
                      n("Div", ["v", "c"], ["d"]), n("Sub", ["d", "x"], ["e"]), n("Clip", ["e", "lo", "hi"], ["y"])],
                     {"x": [3, 301]}, ["y"], {"a": w([301]).astype(np.float16), "b": w([3, 1]).astype(np.float16),
                                              "c": half(0.37), "lo": half(-2.5), "hi": half(60000)},
                     dtype=np.float16)
    g = load(model)
    optimize(g)
    assert [node.op_type for node in g.nodes] == ["FusedElementwise"]
    x = feeds_of(model, np.float16)["x"]
    x[0, :3] = [np.nan, 30000, -7]
    got, plans = run_ge(model, {"x": x}, tmp_path)
    (task,) = plans
    assert task.kernel.native == (plan == "native")
    a, b, c, lo, hi = (onnx.numpy_helper.to_array(t) for t in model.graph.initializer)
    with np.errstate(all="ignore"):
        expected = np.clip((np.maximum(x + a, np.float16(0)) * b) / c - x, lo, hi)
    assert got[0].dtype == np.float16
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    ok = ~np.isnan(expected)
    assert np.array_equal(got[0].view(np.uint16)[ok], expected.view(np.uint16)[ok])
    unfused, plans = run_ge(model, {"x": x}, tmp_path, "unfused", fusion_switch_file=_switch(tmp_path, "fuse_elementwise"))
    assert "FusedElementwise" not in [p.kernel.op_type for p in plans]
    assert np.array_equal(got[0].view(np.uint16)[ok], unfused[0].view(np.uint16)[ok])


@pytest.mark.parametrize("plan", ["native", "numpy"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_exported_gelu_with_rounded_constants_is_one_chain(tmp_path, load, default_backend, plan, dtype):
    """An fp16 export's GELU, x * 0.5 * (1 + Erf(x / sqrt 2)) with its constants rounded (1.414 is no
    sqrt 2 for fuse_gelu), is one chain with Erf a step: bit for bit the unfused ops (Erf's own kernel
    on the same backend, each op rounded to the dtype), near onnxruntime."""
    default_backend(plan)
    c = lambda v: np.asarray(v).astype(dtype)  # noqa: E731
    model = model_of([n("Div", ["x", "r2"], ["d"]), n("Erf", ["d"], ["e"]), n("Add", ["e", "one"], ["f"]),
                      n("Mul", ["x", "f"], ["g"]), n("Mul", ["g", "half"], ["y"])],
                     {"x": [3, 301]}, ["y"], {"r2": c(1.4140625), "one": c(1.0), "half": c(0.5)}, dtype=dtype)
    g = load(model)
    optimize(g)
    assert [node.op_type for node in g.nodes] == ["FusedElementwise"]
    assert [s[0] for s in g.nodes[0].attrs["steps"]] == ["Div", "Erf", "Add", "Mul", "Mul"]
    x = feeds_of(model, dtype)["x"]
    x[0, :6] = [np.nan, np.inf, -np.inf, 6e-8 if dtype == np.float16 else 1e-40, 3e4, -0.0]
    got, plans = run_ge(model, {"x": x}, tmp_path)
    assert plans[0].kernel.native == (plan == "native")
    with np.errstate(all="ignore"):
        d = x / c(1.4140625)
        e = lookup("Erf", opset=17)({}, [Meta(np.dtype(dtype), d.shape)], name="erf").compute(d)[0]
        expected = x * (e + c(1.0)) * c(0.5)
    assert got[0].dtype == dtype
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    ok = ~np.isnan(expected)
    assert np.array_equal(got[0].view(np.uint16 if dtype == np.float16 else np.uint32)[ok],
                          expected.view(np.uint16 if dtype == np.float16 else np.uint32)[ok])
    want = ort_run(model, {"x": x})[0]
    # onnxruntime rounds the steps its own way: float16 within a few of its ulps (1 + erf near -1 cancels)
    tol = dict(rtol=4e-3, atol=2e-3) if dtype == np.float16 else dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0][1:], want[1:], **tol)


@pytest.mark.parametrize("op,ufunc", [("Add", np.add), ("Div", np.divide), ("Relu", None)])
def test_a_float16_op_alone_is_a_one_step_chain(tmp_path, load, op, ufunc):
    """A float16 op alone runs on the interpreter (blocks converted as read, rounded as stored, not whole
    tensors around a float32 kernel, nor numpy's float16 loop): numpy's float16 result, bit for bit. A
    float32 op alone stays itself, and so does a float16 op the interpreter does not run."""
    b = w([301]).astype(np.float16)
    nodes = [n(op, ["x", "b"] if ufunc else ["x"], ["y"])]
    model = model_of(nodes, {"x": [3, 301]}, ["y"], {"b": b} if ufunc else {}, dtype=np.float16)
    g = load(model)
    optimize(g)
    assert [node.op_type for node in g.nodes] == ["FusedElementwise"]
    x = feeds_of(model, np.float16)["x"]
    x[0, :4] = [np.nan, np.inf, 6e-8, -0.0]
    got, plans = run_ge(model, {"x": x}, tmp_path)
    assert plans[0].kernel.native == (native_mod.native() is not None)  # (numpy's plan without a native library)
    with np.errstate(all="ignore"):
        want = ufunc(x, b) if ufunc else np.maximum(x, np.float16(0))
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[0].view(np.uint16)[ok], want.view(np.uint16)[ok])
    for other in (model_of(nodes, {"x": [3, 301]}, ["y"], {"b": b.astype(np.float32)} if ufunc else {}),
                  model_of([n("Sigmoid", ["x"], ["y"])], {"x": [3, 301]}, ["y"], {}, dtype=np.float16)):
        g = load(other)
        optimize(g)
        assert [node.op_type for node in g.nodes] == [other.graph.node[0].op_type]


def test_float16_formulas_stay_separate_ops(load):
    """A float16 op whose kernel converts blocks into workspace (Sigmoid's formula) joins no chain the
    native interpreter cannot run (its numpy plan would run Add in numpy's float16 loop)."""
    model = model_of([n("Add", ["x", "a"], ["t"]), n("Sigmoid", ["t"], ["y"])], {"x": [4, 8]}, ["y"],
                     {"a": w([8]).astype(np.float16)}, dtype=np.float16)
    g = load(model)
    optimize(g)
    assert [node.op_type for node in g.nodes] == ["Add", "Sigmoid"]


def test_precision_mode_lowers_ops_before_fusing(tmp_path):
    """Under --precision_mode each op of a chain takes its own precision first (Exp stays float32,
    the ops after it follow), then what shares a dtype fuses."""
    model = model_of([n("Exp", ["x"], ["e"]), n("Add", ["e", "a"], ["t"]), n("Relu", ["t"], ["y"])],
                     {"x": [4, 8]}, ["y"], {"a": w([8])})
    feeds = feeds_of(model, np.float32)
    got, plans = run_ge(model, feeds, tmp_path, precision_mode="allow_mix_precision")
    assert "FusedElementwise" in [p.kernel.op_type for p in plans]
    np.testing.assert_allclose(got[0], ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)


def kernel(steps, metas, backend=NUMPY):
    return lookup("FusedElementwise", "ge", 17)({"steps": steps}, metas, opset=17, name="f", backend=backend)


@pytest.mark.parametrize("steps, message", [
    ([], "attrs['steps'] must be a non-empty list"),
    ([["Add", "", {}]], "attrs['steps'][0] must be [op_type, domain, attrs, refs]"),
    ([["Conv", "", {}, [0]]], "attrs['steps'][0]: Conv cannot be fused into a chain"),
    ([["Add", "", {}, [0, 2]]], "attrs['steps'][0]: refs [0, 2] must be 2 input indices (< 2)"),
    ([["Relu", "", {}, [-1]]], "attrs['steps'][0]: refs [-1] must be 1 input indices"),
    ([["Relu", "", {}, [0]], ["Add", "", {}, [-1, -1]]], "every step but the last must be read by exactly one"),
    ([["Relu", "", {}, [0]], ["Relu", "", {}, [1]]], "every step but the last must be read by exactly one"),
    ([["Clip", "", {"min": "low"}, [0]]], "attrs['steps'][0] (Clip): attrs must be the numbers 'min' and 'max'"),
    ([["Relu", "", {}, [0]], ["Add", "", {}, [-1, 1]]], "attrs['steps'][0] (Relu) computes float32 [4]"),
])
def test_kernel_refuses_a_bad_chain(steps, message):
    """A mutated OM's chain fails naming the step (the loader turns it into an error naming the task)."""
    with pytest.raises(GeError, match="node 'f' \\(FusedElementwise\\): .*" + re.escape(message)):
        kernel(steps, [Meta(np.float32, (4,)), Meta(np.float32, (3, 4))])


def test_native_plan_broadcasts_and_falls_back(default_backend):
    """Operands broadcast along one run of dims take the native plan; others the ops' kernels."""
    with default_backend("native") as backend:
        steps = [["Add", "", {}, [0, 1]], ["Mul", "", {}, [-1, 2]]]
        x, a = w([2, 3, 4]), w([3, 1])
        for b, native in ((w([2, 1, 4]), False), (w([3, 4]), True), (np.float32(2.0), True)):
            k = kernel(steps, [Meta(np.float32, x.shape), Meta(np.float32, a.shape), Meta(np.float32, np.shape(b))],
                       backend).load()
            assert k.native == native
            np.testing.assert_array_equal(k.compute(x, a, np.asarray(b))[0], (x + a) * b)


def test_native_plan_runs_a_blocked_gate_per_block(default_backend):
    """A gate (N, C/16, 1, 1, 16) over a blocked (N, C/16, H, W, 16) tensor (nchwc_layout's squeeze-excite
    chains) varies along two runs of dims: one native call per block, numpy's results exactly."""
    with default_backend("native") as backend:
        steps = [["Mul", "", {}, [0, 1]], ["Add", "", {}, [-1, 0]]]
        x, g = w([2, 3, 8, 8, 16]), w([2, 3, 1, 1, 16])
        k = kernel(steps, [Meta(np.float32, x.shape), Meta(np.float32, g.shape)], backend).load()
        assert k.native and k.lead == 2
        y = np.full(x.shape, 7, np.float32)
        k.bound([x, g], [y], None)()
        np.testing.assert_array_equal(y, x * g + x)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_chain_from_threads_on_both_devices(tmp_path, default_backend, device):
    """Callers in several threads (a context each) get their own results, as one thread does."""
    import threading
    default_backend("native")
    model, dtype, _ = CHAINS["broadcast"]
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m")).om_path, device)
    try:
        xs = [feeds_of(model, dtype)["x"] for _ in range(4)]
        want = [api.execute(model_id, [x])[0] for x in xs]
        got, errors = [None] * len(xs), []

        def call(i):
            try:
                for _ in range(20):
                    got[i] = api.execute(model_id, [xs[i]])[0]
            except Exception as e:  # surfaced below
                errors.append(e)
        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for g, w_ in zip(got, want):
            np.testing.assert_array_equal(g, w_)
        np.testing.assert_allclose(want[0], ort_run(model, {"x": xs[0]})[0], rtol=1e-5, atol=1e-6)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_every_chain_op_is_correct_in_place(dtype):
    """The numpy plan writes a step into the buffer it reads: each chain op's kernel must give the
    same result with its output being its input (operand 0, and operand 1 of a binary op)."""
    from ge.core.kernels.ops.fused_elementwise import CHAIN_OPS
    x, b = w([3, 5], dtype), w([5], dtype)
    if np.dtype(dtype).kind == "f":
        x, b = np.abs(x) + 0.5, np.abs(b) + 0.5  # in every op's domain (Sqrt, Log)
    else:
        b[b == 0] = 1
    checked = 0
    for (domain, op), arity in CHAIN_OPS.items():
        attrs = {"min": -1.0, "max": 2.0} if op == "Clip" else {}
        steps = [[op, domain, attrs, [0, 1][:arity]]]
        metas = [Meta(dtype, x.shape), Meta(dtype, b.shape)][:arity]
        try:
            k = kernel(steps, metas)
        except GeError:  # not an op of this dtype
            continue
        step = k.steps[0][0]
        want = k.compute(x, b)[0] if arity == 2 else k.compute(x)[0]
        for position in range(arity):
            buf = x.copy() if position == 0 else np.broadcast_to(b, x.shape).copy()
            xs = [buf, b] if position == 0 else [x, buf]
            ws = np.empty(step.workspace_nbytes(), np.uint8) if step.workspace_nbytes() else None
            step.run(xs[:arity] + k.steps[0][2], [buf], ws)
            np.testing.assert_array_equal(buf, want, err_msg=f"{op} in place of operand {position}")
        checked += 1
    # float64 Erf needs workspace and the interpreter has no float64 erf: it joins no chain
    assert checked == {"f": len(CHAIN_OPS) - (dtype == np.float64)}.get(np.dtype(dtype).kind, 9)
