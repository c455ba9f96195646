"""The root model of a dynamic OM (format 1.2): submodel 0 holds the root graph's MODEL_DEF
(mode, inputs with -1 dims and ranges, the root weights, the partitions), its TASK_INFO (UNKNOWN
nodes and the execution steps) and WEIGHTS_DATA (one shared copy of every weight); submodels
1..n are static GeModels whose weight descs point into that shared blob. See docs/om-format.md."""
from __future__ import annotations

from ge.core.dynamic_model import MODES, Cluster, DynamicModel, DynNode, DynTensor, Step
from ge.core.ge_model import WeightDesc

from .decode import Bad, Fields, attr_map, check_nbytes, clip, show
from .encode import as_attr_map, as_dtype, as_int, as_shape, as_str
from .records import ROOT_ATTRS, decode
from .schema import MAX_DIM, MAX_MODELS, MAX_RANK

MAX_RANGE_DIM = 1 << 62


def encode_root(m: DynamicModel) -> tuple[dict, dict]:
    """(MODEL_DEF, TASK_INFO) maps; `w` is the writer module (its typed field helpers)."""
    def tensor(t: DynTensor, where: str) -> dict:
        return {"name": as_str(t.name, f"{where} name"), "dtype": as_dtype(t.dtype, where),
                "shape": [as_int(d, f"{where} shape") for d in t.shape],
                "ranges": [[as_int(lo, f"{where} range"), as_int(hi, f"{where} range")] for lo, hi in t.ranges]}
    model_def = {
        "root": True, "name": as_str(m.name, "model name"), "soc_version": as_str(m.soc_version, "soc_version"),
        "opset": as_int(m.opset, "opset"), "mode": as_str(m.mode, "mode"),
        "inputs": [tensor(t, f"root input {k}") for k, t in enumerate(m.inputs)],
        "outputs": [tensor(t, f"root output {k}") for k, t in enumerate(m.outputs)],
        "weights": [{"name": as_str(x.name, "weight name"), "dtype": as_dtype(x.dtype, f"weight '{x.name}'"),
                     "shape": as_shape(x.shape, f"weight '{x.name}'"), "offset": as_int(x.offset, "weight offset"),
                     "nbytes": as_int(x.nbytes, "weight nbytes")} for x in m.weights],
        "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                      "submodel": c.submodel} for c in m.clusters],
        "submodels": len(m.submodels),
        "attrs": as_attr_map(m.attrs, "root attrs", 0),
    }
    task_info = {
        "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "opset": as_int(n.opset, "opset"),
                   "attrs": as_attr_map(n.attrs, f"root node '{n.name}' attrs", 0), "inputs": list(n.inputs),
                   "outputs": list(n.outputs), "dtypes": list(n.dtypes)} for n in m.nodes],
        "steps": [[s.kind, as_int(s.index, "step index")] for s in m.steps],
    }
    return model_def, task_info


def decode_root(md, ti, weight_bytes: int) -> DynamicModel:
    """Validate and build the root model; `r` is the reader module (Bad, _Fields, _attr_map...)."""
    f = Fields(md, "root MODEL_DEF")
    name, soc, opset = f.str("name"), f.str("soc_version"), f.int("opset")
    mode = f.str("mode")
    if mode not in MODES:
        raise Bad(f"root MODEL_DEF: mode '{clip(mode)}' is not one of {', '.join(MODES)}")
    n_sub = f.int("submodels", hi=MAX_MODELS - 1)

    def tensors(key: str) -> list[DynTensor]:
        out = []
        for k, t in enumerate(f.list(key)):
            tf = Fields(t, f"root MODEL_DEF {key[:-1]} {k}")
            tname = tf.str("name")
            dtype = tf.dtype("dtype")
            shape = tf.list("shape", MAX_RANK)
            if any(type(d) is not int or not -2 <= d <= MAX_DIM for d in shape):
                raise Bad(f"root {key[:-1]} '{clip(tname)}': shape {show(shape)} must be ints >= -2")
            ranges = []
            for rg in tf.list("ranges", MAX_RANK):
                if (type(rg) is not list or len(rg) != 2 or any(type(x) is not int for x in rg)
                        or not 0 <= rg[0] <= MAX_RANGE_DIM or not -1 <= rg[1] <= MAX_RANGE_DIM
                        or (rg[1] >= 0 and rg[1] < rg[0])):
                    raise Bad(f"root {key[:-1]} '{clip(tname)}': range {show(rg)} is not [lo, hi] "
                                f"with 0 <= lo <= hi (hi -1: unbounded)")
                ranges.append(tuple(rg))
            if ranges and len(ranges) != len(shape):
                raise Bad(f"root {key[:-1]} '{clip(tname)}': {len(ranges)} ranges for rank {len(shape)}")
            out.append(DynTensor(tname, dtype, tuple(shape), tuple(ranges)))
        return out

    inputs, outputs = tensors("inputs"), tensors("outputs")
    weights = []
    for k, x in enumerate(f.list("weights")):
        wf = Fields(x, f"root MODEL_DEF weight {k}")
        wname, dtype, shape = wf.str("name"), wf.dtype("dtype"), wf.shape("shape")
        offset, nbytes = wf.int("offset"), wf.int("nbytes")
        check_nbytes(nbytes, dtype, shape, f"root weight '{clip(wname)}'")
        if offset + nbytes > weight_bytes:
            raise Bad(f"root weight '{clip(wname)}': offset {offset} + {nbytes} bytes exceeds the shared "
                        f"WEIGHTS_DATA ({weight_bytes} bytes)")
        weights.append(WeightDesc(wname, dtype, shape, offset, nbytes))

    clusters = []
    for k, c in enumerate(f.list("clusters")):
        cf = Fields(c, f"root cluster {k}")
        kind, sub = cf.str("kind"), cf.int("submodel", lo=-1)
        if kind not in ("KNOWN", "UNKNOWN") or (kind == "KNOWN") != (0 <= sub < n_sub):
            raise Bad(f"root cluster {k}: kind '{clip(kind)}' with submodel {sub} (of {n_sub}) is inconsistent")
        nodes = cf.list("nodes")
        if any(type(n) is not str for n in nodes):
            raise Bad(f"root cluster {k}: node names must be strings")
        clusters.append(Cluster(cf.int("index"), kind, tuple(nodes), cf.str("reason"), sub))
    attrs = decode(ROOT_ATTRS, f.get("attrs"), "root MODEL_DEF attrs")

    t = Fields(ti, "root TASK_INFO")
    nodes = []
    for k, n in enumerate(t.list("nodes")):
        nf = Fields(n, f"root TASK_INFO node {k}")
        nname, op = nf.str("name"), nf.str("op_type")
        lists = {key: nf.list(key) for key in ("inputs", "outputs", "dtypes")}
        if any(type(s) is not str for v in lists.values() for s in v):
            raise Bad(f"root node '{clip(nname)}' ({clip(op)}): inputs/outputs/dtypes must be strings")
        if len(lists["dtypes"]) != len(lists["outputs"]):
            raise Bad(f"root node '{clip(nname)}': {len(lists['dtypes'])} dtypes for {len(lists['outputs'])} outputs")
        nodes.append(DynNode(nname, op, nf.str("domain"), nf.int("opset"),
                             attr_map(nf.get("attrs"), f"root node '{clip(nname)}' attrs", 0),
                             tuple(lists["inputs"]), tuple(lists["outputs"]), tuple(lists["dtypes"])))
    steps = []
    for k, s in enumerate(t.list("steps")):
        if type(s) is not list or len(s) != 2 or s[0] not in ("node", "submodel") or type(s[1]) is not int:
            raise Bad(f"root TASK_INFO step {k}: {show(s)} is not [\"node\"|\"submodel\", index]")
        limit = len(nodes) if s[0] == "node" else n_sub
        if not 0 <= s[1] < limit:
            raise Bad(f"root TASK_INFO step {k}: {s[0]} {s[1]} does not exist (there are {limit})")
        steps.append(Step(s[0], s[1]))
    return DynamicModel(name, mode, inputs, outputs, nodes, steps, clusters, [], weights, b"", soc_version=soc,
                        opset=opset, attrs=attrs)
