"""`ge compare` (msquickcmp, `polygraphy run --compare`): the ONNX model on a reference and the OM
on ge, with the same inputs, compared output by output and layer by layer.

A model whose shapes are decided as it runs (control flow, sequences, ranges) is compared at its
outputs only. ge's side runs once, with an observer after every task that copies its outputs (ExecutionContext.observe):
no recompiling per layer. Each task output is named through the OM's tensor table; a fused chain's
output carries the name of the chain's last op, so the chain is compared at its end, and tensors a
fusion removed exist on one side only and are left out. The reference is onnxruntime when it is
installed (`pip install ge[compare]`), else onnx's reference evaluator: this module is the only
place ge imports them, and only for that side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model.dynamic_model import GEARS, DynamicModel
from ..model.errors import GeError
from ...formats.dataset import test_data_set_files
from ...formats.om import read_om
from ...formats.tensors import load_inputs, random_inputs
from ..runtime.external_weight_manager import ExternalWeightConfig
from ..acl.models import default_weight_dir, model_manager
from ..acl.dataset import file_descs
from ..acl.inference import select_gear

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


def metrics(name: str, op: str, got, want, atol: float, rtol: float) -> Metrics:
    """Cosine similarity, max |got - want|, max |got - want| / |want| (where want != 0), and
    whether every element is within atol + rtol * |want| (NaNs must agree). A sequence (a list)
    passes when it has as many tensors as the reference and each passes (its figures the worst
    tensor's); an optional (None when empty) when both are empty or both pass; strings when equal."""
    if got is None or want is None:
        same = got is None and want is None
        return Metrics(name, op, 1.0 if same else float("nan"), 0.0 if same else float("inf"),
                       0.0 if same else float("inf"), same)
    if isinstance(got, list) or isinstance(want, list):
        if not (isinstance(got, list) and isinstance(want, list)) or len(got) != len(want):
            return Metrics(name, op, float("nan"), float("inf"), float("inf"), False)
        each = [metrics(name, op, g, w, atol, rtol) for g, w in zip(got, want)]
        return Metrics(name, op, min((e.cosine for e in each), default=1.0), max((e.max_abs for e in each), default=0.0),
                       max((e.max_rel for e in each), default=0.0), all(e.passed for e in each))
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind in "OSU" or want.dtype.kind in "OSU":  # text: equal or not
        same = got.shape == want.shape and bool(np.all(got.astype(str) == want.astype(str)))
        return Metrics(name, op, 1.0 if same else 0.0, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same)
    return _tensor_metrics(name, op, got, want, atol, rtol)


def _tensor_metrics(name: str, op: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> Metrics:
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
            device: str = "cpu", weight_dir: str | None = None, seed: int = 0, dym_batch: int | None = None,
            dym_hw: str | None = None, dym_dims: str | None = None) -> dict:
    """Run both and compare. `inputs`: arrays in the OM's input order, a {name: array} dict, file
    paths (as `ge run --input`), or None for seeded random inputs. A gear model is compared at the
    gear of `dym_batch`, `dym_hw` or `dym_dims` (as `ge run --dymBatch ...`), else at the gear of the
    inputs' shapes; a model whose shapes are decided as it runs at its outputs only ("outputs_only":
    True, no layers). Returns
    {"outputs": [{name, cosine, max_abs, max_rel, pass}], "layers": [{name, op, ...}],
    "first_bad_layer": name or None, "reference": "onnxruntime" | "onnx.reference", "passed": bool}."""
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(x, str) for x in inputs):
        inputs = test_data_set_files(list(inputs))  # onnx's test_data_set_N/: its input_K.pb files
    m = read_om(om_path)
    if isinstance(m.attrs, dict) and m.attrs.get("aipp"):
        raise GeError(f"{om_path}: the OM's inputs are AIPP raw images; compare it with the model before AIPP "
                      "(compile it without --insert_op_conf)")
    reference_model = _onnx_model(onnx_path)
    check_same_model(m, reference_model.graph, om_path, onnx_path)
    config = ExternalWeightConfig(weight_dir or default_weight_dir(om_path), {}, True)
    model_id = model_manager.load(m, device, config)
    try:
        static, runner, feeds, gear = _static_part(m, model_id, om_path, inputs, seed, (dym_batch, dym_hw, dym_dims))
        outputs_only = static is None  # shapes decided as it runs (hybrid, ranges): no task table names its layers
        if outputs_only:
            got, outputs, static = {}, _run_outputs(runner, feeds), m
        else:
            got, outputs = _run_ge(static, runner, feeds, _task_output_names(static))
    finally:
        model_manager.unload(model_id)
    reference, want, producers, order = _run_reference(reference_model,
                                                       {d.name: x for d, x in zip(static.inputs, feeds)})

    out_rows = [metrics(d.name, producers.get(d.name, ""), y, want.get(d.name), atol, rtol)
                for d, y in zip(static.outputs, outputs)]
    layers = [metrics(n, producers[n], got[n], want[n], atol, rtol) for n in order if n in got and n in want]
    first_bad = next((r.name for r in layers if not r.passed), None)
    return {"reference": reference, "atol": atol, "rtol": rtol,
            **({"gear": gear} if gear is not None else {}), **({"outputs_only": True} if outputs_only else {}),
            "outputs": [r.as_dict(with_op=False) for r in out_rows],
            "layers": [r.as_dict() for r in layers],
            "first_bad_layer": first_bad, "passed": all(r.passed for r in out_rows)}


def _static_part(m, model_id: int, om_path: str, inputs, seed: int, gear_options: tuple):
    """(the static model compared, the loaded DavinciModel that runs it, its inputs, the gear's values
    or None): the OM itself, or the gear a gear model's options or inputs choose; no static model
    (None, the loaded model) when its shapes are decided as it runs."""
    loaded = model_manager.model(model_id)
    if not isinstance(m, DynamicModel):
        return m, loaded, _inputs(m.inputs, inputs, seed), None
    if m.mode != GEARS:
        if inputs is None and any(x < 0 for d in m.inputs for x in d.shape):
            raise GeError(f"{om_path} has {m.mode} shapes: give its inputs (--input), ge makes no random data "
                          f"of unknown dims ({', '.join(f'{d.name} {list(d.shape)}' for d in m.inputs)})")
        return None, loaded, _inputs(m.inputs, inputs, seed), None
    if any(v is not None for v in gear_options):
        descs = select_gear(model_id, *gear_options)
        feeds = _inputs(descs, inputs, seed)
        k = loaded.gear_for(feeds)
    elif inputs is not None:
        files = all(isinstance(x, str) for x in inputs)
        descs = file_descs(m.inputs, list(inputs), loaded.gear_list()) if files else m.inputs
        feeds = _inputs(descs, inputs, seed)
        k = loaded.gear_for(feeds)
    else:
        raise GeError(f"{om_path} is a gear model: compare it at one gear, chosen by --dymBatch, --dymHW or "
                      f"--dymDims (as ge run) or by the shapes of --input; its gears ({loaded.kind}): "
                      f"{loaded.gear_list()}")
    return m.submodels[k], loaded.gear(k), feeds, list(m.attrs["gear_values"][k])


def check_same_model(m, graph, om_path: str, onnx_path: str) -> None:
    """The OM was compiled from this ONNX graph: its inputs are the graph's inputs (same names, the
    dims static on both sides agree) and its outputs tensors of the graph. Else an error naming the
    mismatch."""
    initializers = {t.name for t in graph.initializer}
    onnx_inputs = {vi.name: vi for vi in graph.input if vi.name not in initializers}
    names = [d.name for d in m.inputs]
    if sorted(names) != sorted(onnx_inputs):
        raise GeError(f"{om_path} was not compiled from {onnx_path}: the OM's inputs {names} are not the ONNX "
                      f"model's {list(onnx_inputs)}")
    for d in m.inputs:
        dims = [x.dim_value if x.HasField("dim_value") else -1 for x in onnx_inputs[d.name].type.tensor_type.shape.dim]
        if dims and (len(dims) != len(d.shape) or any(w >= 0 and x >= 0 and w != x for w, x in zip(dims, d.shape))):
            raise GeError(f"{om_path} was not compiled from {onnx_path} as it stands: input '{d.name}' is "
                          f"{list(d.shape)} in the OM, {['?' if w < 0 else w for w in dims]} in the ONNX model (another "
                          f"model, or --input_shape changed a static dim: the reference cannot run at the OM's shape)")
    tensors = {vi.name for vi in graph.input} | {o for n in graph.node for o in n.output}
    missing = [d.name for d in m.outputs if d.name not in tensors]
    if missing:
        raise GeError(f"{om_path} was not compiled from {onnx_path}: the OM's output(s) {missing} are not tensors "
                      f"of the ONNX model")


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
    """(task, output position) -> (name, shape, first element) of the tensors it writes: its own, and
    its aliases' (a Reshape's view: the same bytes in the alias's shape; a Split's part: a run of
    them from its offset)."""
    by_place: dict = {}
    offsets = {t.name: t.offset for t in m.tensors}
    for t in m.tensors:
        if not t.alias_of:
            by_place.setdefault((t.first, t.allocation, t.offset), []).append((t.name, tuple(t.shape), 0))
    aliases: dict = {}
    for t in m.tensors:
        if t.alias_of:
            start = (t.offset - offsets[t.alias_of]) // np.dtype(t.dtype).itemsize
            aliases.setdefault(t.alias_of, []).append((t.name, tuple(t.shape), start))
    names = {}
    for k, td in enumerate(m.tasks):
        for j, a in enumerate(td.outputs):
            if a is None:
                continue
            own = by_place.get((k, a.allocation, a.offset), [])
            names[(k, j)] = own + [x for n, _, _ in own for x in aliases.get(n, [])]
    return names


def _run_ge(m, loaded, feeds, names: dict):
    """`m` on its loaded model, once, with an observer copying every task's outputs."""
    dumps: dict = {}

    def keep(t: int, task, seconds: float) -> None:
        for j, y in enumerate(task.ys):
            for name, shape, start in names.get((t, j), ()) if y is not None else ():
                dumps[name] = np.array(y).reshape(-1)[start:start + math.prod(shape)].reshape(shape)

    ctx = loaded.create_context()
    try:
        ctx.observe(keep)
        outputs = [np.array(y) for y in ctx.execute(feeds)]
    finally:
        loaded.destroy_context(ctx)
    for d, y in zip(m.outputs, outputs):
        dumps[d.name] = y
    return dumps, outputs


def _run_outputs(loaded, feeds) -> list:
    """The model's outputs only (tensors, sequences as lists, empty optionals as None)."""
    ctx = loaded.create_context()
    try:
        return list(ctx.execute(feeds))
    finally:
        loaded.destroy_context(ctx)


def _onnx_model(onnx_path: str):
    import onnx
    return onnx.load(onnx_path)


def _run_reference(model, feeds: dict):
    """(reference name, {tensor: value} of every node output, {tensor: op type}, node outputs in graph order)."""
    graph = model.graph
    producers = {o: n.op_type for n in graph.node for o in n.output if o}
    order = [o for n in graph.node for o in n.output if o]
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    # onnxruntime's Python API takes no ml_dtypes array (bfloat16, float8, int4 ...: numpy's user
    # dtypes, numbered from 256); onnx's reference evaluator does
    if ort is not None and not any(np.asarray(v).dtype.num >= 256 for v in feeds.values()):
        return "onnxruntime", _with_onnxruntime(ort, model, feeds), producers, order
    from onnx.reference import ReferenceEvaluator
    values = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
    outputs = {o.name: o.type.HasField("optional_type") for o in graph.output}  # kept as they are: lists, None
    return "onnx.reference", {k: _unwrapped(v) if outputs.get(k) else v if k in outputs else np.asarray(v)
                              for k, v in values.items() if k in outputs or isinstance(v, np.ndarray)}, \
        producers, order


def _unwrapped(optional):
    """An optional as ge and onnxruntime hold it (its value, None when empty); onnx's reference
    evaluator holds it as a list of at most one."""
    if isinstance(optional, list) and len(optional) <= 1:
        return optional[0] if optional else None
    return optional


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
