"""The root model of a dynamic OM (format 1.2): submodel 0 holds the root graph's MODEL_DEF
(mode, inputs with -1 dims and ranges, the root weights, the partitions), its TASK_INFO (UNKNOWN
nodes and the execution steps) and WEIGHTS_DATA (one shared copy of every weight); submodels
1..n are static GeModels whose weight descs point into that shared blob. See docs/om-format.md."""
from __future__ import annotations

from ge.core.dynamic_model import MODES, Cluster, DynamicModel, DynNode, DynTensor, Step
from ge.core.ge_model import WeightDesc

MAX_RANGE_DIM = 1 << 62


def encode_root(m: DynamicModel, w) -> tuple[dict, dict]:
    """(MODEL_DEF, TASK_INFO) maps; `w` is the writer module (its typed field helpers)."""
    def tensor(t: DynTensor, where: str) -> dict:
        return {"name": w._s(t.name, f"{where} name"), "dtype": w._dtype(t.dtype, where),
                "shape": [w._i(d, f"{where} shape") for d in t.shape],
                "ranges": [[w._i(lo, f"{where} range"), w._i(hi, f"{where} range")] for lo, hi in t.ranges]}
    model_def = {
        "root": True, "name": w._s(m.name, "model name"), "soc_version": w._s(m.soc_version, "soc_version"),
        "opset": w._i(m.opset, "opset"), "mode": w._s(m.mode, "mode"),
        "inputs": [tensor(t, f"root input {k}") for k, t in enumerate(m.inputs)],
        "outputs": [tensor(t, f"root output {k}") for k, t in enumerate(m.outputs)],
        "weights": [{"name": w._s(x.name, "weight name"), "dtype": w._dtype(x.dtype, f"weight '{x.name}'"),
                     "shape": w._shape(x.shape, f"weight '{x.name}'"), "offset": w._i(x.offset, "weight offset"),
                     "nbytes": w._i(x.nbytes, "weight nbytes")} for x in m.weights],
        "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                      "submodel": c.submodel} for c in m.clusters],
        "submodels": len(m.submodels),
        "attrs": w._attr_map(m.attrs, "root attrs", 0),
    }
    task_info = {
        "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "opset": w._i(n.opset, "opset"),
                   "attrs": w._attr_map(n.attrs, f"root node '{n.name}' attrs", 0), "inputs": list(n.inputs),
                   "outputs": list(n.outputs), "dtypes": list(n.dtypes)} for n in m.nodes],
        "steps": [[s.kind, w._i(s.index, "step index")] for s in m.steps],
    }
    return model_def, task_info


def decode_root(md, ti, weight_bytes: int, r) -> DynamicModel:
    """Validate and build the root model; `r` is the reader module (Bad, _Fields, _attr_map...)."""
    f = r._Fields(md, "root MODEL_DEF")
    name, soc, opset = f.str("name"), f.str("soc_version"), f.int("opset")
    mode = f.str("mode")
    if mode not in MODES:
        raise r.Bad(f"root MODEL_DEF: mode '{r._clip(mode)}' is not one of {', '.join(MODES)}")
    n_sub = f.int("submodels", hi=r.MAX_MODELS - 1)

    def tensors(key: str) -> list[DynTensor]:
        out = []
        for k, t in enumerate(f.list(key)):
            tf = r._Fields(t, f"root MODEL_DEF {key[:-1]} {k}")
            tname = tf.str("name")
            dtype = tf.dtype("dtype")
            shape = tf.list("shape", r.MAX_RANK)
            if any(type(d) is not int or not -2 <= d <= r.MAX_DIM for d in shape):
                raise r.Bad(f"root {key[:-1]} '{r._clip(tname)}': shape {r._show(shape)} must be ints >= -2")
            ranges = []
            for rg in tf.list("ranges", r.MAX_RANK):
                if (type(rg) is not list or len(rg) != 2 or any(type(x) is not int for x in rg)
                        or not 0 <= rg[0] <= MAX_RANGE_DIM or not -1 <= rg[1] <= MAX_RANGE_DIM
                        or (rg[1] >= 0 and rg[1] < rg[0])):
                    raise r.Bad(f"root {key[:-1]} '{r._clip(tname)}': range {r._show(rg)} is not [lo, hi] "
                                f"with 0 <= lo <= hi (hi -1: unbounded)")
                ranges.append(tuple(rg))
            if ranges and len(ranges) != len(shape):
                raise r.Bad(f"root {key[:-1]} '{r._clip(tname)}': {len(ranges)} ranges for rank {len(shape)}")
            out.append(DynTensor(tname, dtype, tuple(shape), tuple(ranges)))
        return out

    inputs, outputs = tensors("inputs"), tensors("outputs")
    weights = []
    for k, x in enumerate(f.list("weights")):
        wf = r._Fields(x, f"root MODEL_DEF weight {k}")
        wname, dtype, shape = wf.str("name"), wf.dtype("dtype"), wf.shape("shape")
        offset, nbytes = wf.int("offset"), wf.int("nbytes")
        r._check_nbytes(nbytes, dtype, shape, f"root weight '{r._clip(wname)}'")
        if offset + nbytes > weight_bytes:
            raise r.Bad(f"root weight '{r._clip(wname)}': offset {offset} + {nbytes} bytes exceeds the shared "
                        f"WEIGHTS_DATA ({weight_bytes} bytes)")
        weights.append(WeightDesc(wname, dtype, shape, offset, nbytes))

    clusters = []
    for k, c in enumerate(f.list("clusters")):
        cf = r._Fields(c, f"root cluster {k}")
        kind, sub = cf.str("kind"), cf.int("submodel", lo=-1)
        if kind not in ("KNOWN", "UNKNOWN") or (kind == "KNOWN") != (0 <= sub < n_sub):
            raise r.Bad(f"root cluster {k}: kind '{r._clip(kind)}' with submodel {sub} (of {n_sub}) is inconsistent")
        nodes = cf.list("nodes")
        if any(type(n) is not str for n in nodes):
            raise r.Bad(f"root cluster {k}: node names must be strings")
        clusters.append(Cluster(cf.int("index"), kind, tuple(nodes), cf.str("reason"), sub))
    attrs = r._attr_map(f.get("attrs"), "root MODEL_DEF attrs", 0)

    t = r._Fields(ti, "root TASK_INFO")
    nodes = []
    for k, n in enumerate(t.list("nodes")):
        nf = r._Fields(n, f"root TASK_INFO node {k}")
        nname, op = nf.str("name"), nf.str("op_type")
        lists = {key: nf.list(key) for key in ("inputs", "outputs", "dtypes")}
        if any(type(s) is not str for v in lists.values() for s in v):
            raise r.Bad(f"root node '{r._clip(nname)}' ({r._clip(op)}): inputs/outputs/dtypes must be strings")
        if len(lists["dtypes"]) != len(lists["outputs"]):
            raise r.Bad(f"root node '{r._clip(nname)}': {len(lists['dtypes'])} dtypes for {len(lists['outputs'])} outputs")
        nodes.append(DynNode(nname, op, nf.str("domain"), nf.int("opset"),
                             r._attr_map(nf.get("attrs"), f"root node '{r._clip(nname)}' attrs", 0),
                             tuple(lists["inputs"]), tuple(lists["outputs"]), tuple(lists["dtypes"])))
    steps = []
    for k, s in enumerate(t.list("steps")):
        if type(s) is not list or len(s) != 2 or s[0] not in ("node", "submodel") or type(s[1]) is not int:
            raise r.Bad(f"root TASK_INFO step {k}: {r._show(s)} is not [\"node\"|\"submodel\", index]")
        limit = len(nodes) if s[0] == "node" else n_sub
        if not 0 <= s[1] < limit:
            raise r.Bad(f"root TASK_INFO step {k}: {s[0]} {s[1]} does not exist (there are {limit})")
        steps.append(Step(s[0], s[1]))
    return DynamicModel(name, mode, inputs, outputs, nodes, steps, clusters, [], weights, b"", soc_version=soc,
                        opset=opset, attrs=attrs)
