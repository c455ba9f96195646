"""onnx's backend node test cases for one op, collected in memory (the onnx wheel ships no data
files), and run through ge's Python API: `ge atc` of the case's model, then load and execute on a
device, outputs compared with the case's expected ones at onnx's own runner tolerance."""
from __future__ import annotations

import numpy as np
import onnx

from ge.core import api
from tests.conformance.cases import onnx_node_cases


def node_cases(op_type: str, domain: str = "") -> list:
    """The node cases whose model holds an `op_type` node (the function-expanded ones excluded)."""
    return [c for c in onnx_node_cases() if "_expanded" not in c.name
            and any(n.op_type == op_type and n.domain in ((domain,) if domain else ("", "ai.onnx"))
                   for n in c.model.graph.node)]


def case_ids(cases) -> list[str]:
    return [c.name for c in cases]


def allow_opset(monkeypatch, model: onnx.ModelProto) -> None:
    """Until ge's importer takes the newest default-domain opsets (another change raises the limit),
    let it take this case's one: the kernels are looked up at the model's own opset."""
    from ge.formats.onnx import importer
    v = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if v > importer.onnx_opset_version():
        monkeypatch.setattr(importer, "onnx_opset_version", lambda: v)


def run_case(case, tmp_path, monkeypatch, device: str = "cpu") -> list[np.ndarray]:
    """Compile the case's model with api.atc, run it on `device`; its outputs."""
    allow_opset(monkeypatch, case.model)
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(case.model, str(path))
    result = api.atc(str(path), str(tmp_path / case.name))
    inputs, _ = case.data_sets[0]
    feeds = [np.asarray(x) for x in inputs]
    model_id = api.load_from_file(result.om_path, device=device)
    try:
        return [np.asarray(y) for y in api.execute(model_id, feeds)]
    finally:
        api.unload(model_id)


def check_case(case, tmp_path, monkeypatch, device: str = "cpu") -> list[np.ndarray]:
    """Run the case and compare every output with its expected one (dtype, shape, values)."""
    got = run_case(case, tmp_path, monkeypatch, device)
    _, expected = case.data_sets[0]
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype}, {e.dtype} expected"
        assert g.shape == e.shape, f"output {i}: shape {g.shape}, {e.shape} expected"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
    return got


def ort_outputs(case):
    """onnxruntime's outputs for the case, or None where onnxruntime cannot run it."""
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
        inputs, _ = case.data_sets[0]
        return sess.run(None, {i.name: np.asarray(x) for i, x in zip(sess.get_inputs(), inputs)})
    except Exception:
        return None


def check_against_onnxruntime(case, got, rtol=1e-4, atol=1e-5, outputs=None) -> bool:
    """Compare ge's outputs (those numbered in `outputs`, default all) with onnxruntime's; False
    when onnxruntime cannot run the case."""
    want = ort_outputs(case)
    if want is None:
        return False
    for i, (g, w) in enumerate(zip(got, want)):
        if outputs is not None and i not in outputs:
            continue
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, onnxruntime {w.shape}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i} vs onnxruntime")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i} vs onnxruntime")
    return True


def node_model(op_type, inputs: dict, attrs: dict, n_outputs=1, domain="", opset=None, default_opset=21):
    """A one-node model (inputs: name -> array), importing the default domain and `domain`."""
    from onnx import helper
    from ge.core.model.ir import dtype_to_onnx
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, list(inputs), outs, domain=domain, **attrs)
    graph = helper.make_graph([node], op_type, [
        helper.make_tensor_value_info(n, dtype_to_onnx(a.dtype), a.shape) for n, a in inputs.items()],
        [onnx.ValueInfoProto(name=o) for o in outs])
    imports = [helper.make_opsetid("", default_opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, opset or 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 9
    return model


def run_model(model, inputs: list, tmp_path, monkeypatch, device="cpu") -> list[np.ndarray]:
    """ge atc + run of a model (on `device`) through the API."""
    allow_opset(monkeypatch, model)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    result = api.atc(str(path), str(tmp_path / "m"))
    model_id = api.load_from_file(result.om_path, device=device)
    try:
        return [np.asarray(y) for y in api.execute(model_id, [np.asarray(x) for x in inputs])]
    finally:
        api.unload(model_id)


def compare_with_onnxruntime(model, inputs: dict, tmp_path, monkeypatch, rtol=1e-5, atol=1e-6, device="cpu"):
    """The model through ge's API and through onnxruntime: same dtypes, shapes and values."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, inputs)
    got = run_model(model, list(inputs.values()), tmp_path, monkeypatch, device)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), f"output {i}: {g.dtype} {g.shape}, onnxruntime {w.dtype} {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
    return got
