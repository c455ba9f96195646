"""`ge compare` (msquickcmp, `polygraphy run --compare`): the ONNX model on a reference and the OM
on ge, with the same inputs, compared output by output and layer by layer.

ge's side runs once, with an observer after every task that copies its outputs (TracingExecutor):
no recompiling per layer. Each task output is named through the OM's tensor table; a fused chain's
output carries the name of the chain's last op, so the chain is compared at its end, and tensors a
fusion removed exist on one side only and are left out. The reference is onnxruntime when it is
installed (`pip install ge[compare]`), else onnx's reference evaluator: this module is the only
place ge imports them, and only for that side.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dynamic_model import DynamicModel
from ..errors import GeError
from ..runtime.executors import TracingExecutor
from ...formats.om import read_om
from ...formats.tensors import load_inputs, random_inputs
from ..runtime.external_weight_manager import ExternalWeightConfig
from .acl import default_weight_dir, model_manager

DEFAULT_ATOL, DEFAULT_RTOL = 1e-4, 1e-3


@dataclass
class Metrics:
    name: str
    op: str
    cosine: float
    max_abs: float
    max_rel: float
    passed: bool

    def as_dict(self, with_op: bool = True) -> dict:
        d = {"name": self.name, "cosine": self.cosine, "max_abs": self.max_abs, "max_rel": self.max_rel,
             "pass": self.passed}
        if with_op:
            d = {"name": self.name, "op": self.op, **{k: v for k, v in d.items() if k != "name"}}
        return d


def metrics(name: str, op: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> Metrics:
    """Cosine similarity, max |got - want|, max |got - want| / |want| (where want != 0), and
    whether every element is within atol + rtol * |want| (NaNs must agree)."""
    if got.shape != want.shape:
        return Metrics(name, op, float("nan"), float("inf"), float("inf"), False)
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    if g.size == 0:
        return Metrics(name, op, 1.0, 0.0, 0.0, True)
    both_nan = np.isnan(g) & np.isnan(w)
    diff = np.where(both_nan, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    nz = w != 0
    max_rel = float(np.max(diff[nz] / np.abs(w[nz]))) if nz.any() else (0.0 if not diff.any() else float("inf"))
    gn, wn = np.linalg.norm(np.nan_to_num(g)), np.linalg.norm(np.nan_to_num(w))
    if gn == 0 and wn == 0:
        cosine = 1.0
    elif gn == 0 or wn == 0:
        cosine = 0.0
    else:
        cosine = float(np.dot(np.nan_to_num(g), np.nan_to_num(w)) / (gn * wn))
    passed = bool(np.all(diff <= atol + rtol * np.abs(np.nan_to_num(w))))
    return Metrics(name, op, cosine, float(diff.max()), max_rel, passed)


def compare(onnx_path: str, om_path: str, inputs=None, *, atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL,
            device: str = "cpu", weight_dir: str | None = None, seed: int = 0) -> dict:
    """Run both and compare. `inputs`: arrays in the OM's input order, a {name: array} dict, file
    paths (as `ge run --input`), or None for seeded random inputs. Returns
    {"outputs": [{name, cosine, max_abs, max_rel, pass}], "layers": [{name, op, ...}],
    "first_bad_layer": name or None, "reference": "onnxruntime" | "onnx.reference", "passed": bool}."""
    m = read_om(om_path)
    if isinstance(m, DynamicModel):
        raise GeError(f"{om_path}: ge compare runs static OMs (this one has dynamic shapes: compile it with "
                      "--input_shape giving every dim)")
    if isinstance(m.attrs, dict) and m.attrs.get("aipp"):
        raise GeError(f"{om_path}: the OM's inputs are AIPP raw images; compare it with the model before AIPP "
                      "(compile it without --insert_op_conf)")
    feeds = _inputs(m.inputs, inputs, seed)
    names = _task_output_names(m)
    got, outputs = _run_ge(m, om_path, feeds, names, device, weight_dir)
    reference, want, producers, order = _run_reference(onnx_path, {d.name: x for d, x in zip(m.inputs, feeds)})

    out_rows = []
    for d, y in zip(m.outputs, outputs):
        if d.name not in want:
            raise GeError(f"output '{d.name}' of {om_path} is not a tensor of {onnx_path}: are they the same model?")
        out_rows.append(metrics(d.name, producers.get(d.name, ""), y, want[d.name], atol, rtol))
    layers = [metrics(n, producers[n], got[n], want[n], atol, rtol) for n in order if n in got and n in want]
    first_bad = next((r.name for r in layers if not r.passed), None)
    return {"reference": reference, "atol": atol, "rtol": rtol,
            "outputs": [r.as_dict(with_op=False) for r in out_rows],
            "layers": [r.as_dict() for r in layers],
            "first_bad_layer": first_bad, "passed": all(r.passed for r in out_rows)}


def _inputs(descs, inputs, seed: int) -> list[np.ndarray]:
    if inputs is None:
        return random_inputs(descs, seed)
    if isinstance(inputs, dict):
        missing = [d.name for d in descs if d.name not in inputs]
        if missing:
            raise GeError(f"inputs {missing} missing (the model's inputs: {[d.name for d in descs]})")
        return [np.asarray(inputs[d.name]) for d in descs]
    inputs = list(inputs)
    if inputs and all(isinstance(x, str) for x in inputs):
        return load_inputs(inputs, descs)
    return [np.asarray(x) for x in inputs]


def _task_output_names(m) -> dict:
    """(task, output position) -> (name, shape) of the tensors it writes: its own, and its aliases'
    (a Reshape's view: the same bytes in the alias's shape)."""
    by_place: dict = {}
    for t in m.tensors:
        if not t.alias_of:
            by_place.setdefault((t.first, t.allocation, t.offset), []).append((t.name, tuple(t.shape)))
    aliases: dict = {}
    for t in m.tensors:
        if t.alias_of:
            aliases.setdefault(t.alias_of, []).append((t.name, tuple(t.shape)))
    names = {}
    for k, td in enumerate(m.tasks):
        for j, a in enumerate(td.outputs):
            if a is None:
                continue
            own = by_place.get((k, a.allocation, a.offset), [])
            names[(k, j)] = own + [x for n, _ in own for x in aliases.get(n, [])]
    return names


def _run_ge(m, om_path: str, feeds, names: dict, device: str, weight_dir):
    dumps: dict = {}

    def keep(t: int, task, seconds: float) -> None:
        for j, y in enumerate(task.ys):
            for name, shape in names.get((t, j), ()) if y is not None else ():
                dumps[name] = np.array(y).reshape(shape)

    config = ExternalWeightConfig(weight_dir or default_weight_dir(om_path), {}, True)
    model_id = model_manager.load(m, device, config)
    try:
        dm = model_manager.model(model_id)
        ctx = dm.create_context()
        try:
            ctx.executor = TracingExecutor(keep)
            outputs = [np.array(y) for y in ctx.execute(feeds)]
        finally:
            dm.destroy_context(ctx)
    finally:
        model_manager.unload(model_id)
    for d, y in zip(m.outputs, outputs):
        dumps[d.name] = y
    return dumps, outputs


def _run_reference(onnx_path: str, feeds: dict):
    """(reference name, {tensor: value} of every node output, {tensor: op type}, node outputs in graph order)."""
    import onnx
    model = onnx.load(onnx_path)
    graph = model.graph
    producers = {o: n.op_type for n in graph.node for o in n.output if o}
    order = [o for n in graph.node for o in n.output if o]
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        return "onnxruntime", _with_onnxruntime(ort, model, feeds), producers, order
    from onnx.reference import ReferenceEvaluator
    values = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
    return "onnx.reference", {k: np.asarray(v) for k, v in values.items() if isinstance(v, np.ndarray)}, \
        producers, order


def _with_onnxruntime(ort, model, feeds) -> dict:
    """Every typed node output of the graph as a model output, run once."""
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    typed = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    have = {o.name for o in model.graph.output}
    extra = [typed[o] for n in model.graph.node for o in n.output
             if o and o not in have and o in typed and typed[o].type.tensor_type.elem_type]
    model.graph.output.extend(extra)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # every tensor as the graph has it
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))
