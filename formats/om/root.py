"""The root model of a dynamic OM (format 1.2): submodel 0 holds the root graph's MODEL_DEF
(mode, inputs with -1 dims and ranges, the root weights, the partitions), its TASK_INFO (UNKNOWN
nodes and the execution steps) and WEIGHTS_DATA (one shared copy of every weight); submodels
1..n are static GeModels whose weight descs point into that shared blob. Format 1.5 adds the
control-flow subgraphs: the root MODEL_DEF's "subgraphs" (each a graph in the root's own schema,
over the same submodels and weights) and each node's "subgraphs" ([attribute, index] pairs).
Format 1.7 adds external weights: the root's "weight_files" and each graph's "file_weights".
See docs/om-format.md."""
from __future__ import annotations

import numpy as np

from ge.core.model.dynamic_model import HYBRID, KINDS, MODES, Cluster, DynamicModel, DynNode, DynTensor, Step
from ge.core.model.ge_model import WeightDesc
from ge.core.model.ir import CAPTURES

from .decode import Bad, Fields, attr_map, check_nbytes, check_weight_file_name, clip, show
from .encode import as_attr_map, as_dtype, as_int, as_shape, as_str
from .records import ROOT_ATTRS, decode
from .schema import MAX_ALLOCATION_SIZE, MAX_DIM, MAX_MODELS, MAX_RANK

MAX_RANGE_DIM = 1 << 62
MAX_SUBGRAPHS = 1 << 16
MAX_WEIGHT_FILES = 1 << 20  # mode 1: a file per distinct weight


def encode_root(m: DynamicModel) -> tuple[dict, dict]:
    """(MODEL_DEF, TASK_INFO) maps of the root; its control-flow subgraphs are in MODEL_DEF
    "subgraphs", each {"model_def", "task_info"} in the same schema (format 1.5)."""
    model_def, task_info = _encode_graph(m, "root")
    model_def["subgraphs"] = [dict(zip(("model_def", "task_info"), _encode_graph(sg, f"subgraph {k}")))
                              for k, sg in enumerate(m.subgraphs)]
    if m.weight_files:  # format 1.7: the external weight files the root and every submodel share
        model_def["weight_files"] = [{"file": as_str(name, "weight file"), "size": as_int(size, f"weight file '{name}' size")}
                                     for name, size in m.weight_files.items()]
    return model_def, task_info


def _encode_graph(m: DynamicModel, label: str) -> tuple[dict, dict]:
    def tensor(t: DynTensor, where: str) -> dict:
        return {"name": as_str(t.name, f"{where} name"), "dtype": as_dtype(t.dtype, where, strings=True),
                "shape": [as_int(d, f"{where} shape") for d in t.shape],
                "ranges": [[as_int(lo, f"{where} range"), as_int(hi, f"{where} range")] for lo, hi in t.ranges],
                **({"kind": as_str(t.kind, f"{where} kind")} if t.kind != "tensor" else {})}
    model_def = {
        "root": label == "root", "name": as_str(m.name, "model name"), "soc_version": as_str(m.soc_version, "soc_version"),
        "opset": as_int(m.opset, "opset"), "mode": as_str(m.mode, "mode"),
        "inputs": [tensor(t, f"{label} input {k}") for k, t in enumerate(m.inputs)],
        "outputs": [tensor(t, f"{label} output {k}") for k, t in enumerate(m.outputs)],
        "weights": [_weight(x) for x in m.weights if not x.file],
        "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                      "submodel": c.submodel} for c in m.clusters],
        "submodels": len(m.submodels),
        "attrs": as_attr_map(m.attrs, f"{label} attrs", 0),
        **({"string_constants": as_attr_map(m.string_constants, f"{label} string constants", 0)}
           if m.string_constants else {}),
    }
    external = [x for x in m.weights if x.file]
    if external:  # format 1.7, apart from "weights": a 1.6 reader finds them missing and refuses the steps
        model_def["file_weights"] = [dict(_weight(x), file=as_str(x.file, f"weight '{x.name}' file"),
                                          sha256=as_str(x.sha256, f"weight '{x.name}' sha256")) for x in external]
    task_info = {
        "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "opset": as_int(n.opset, "opset"),
                   "attrs": as_attr_map(n.attrs, f"{label} node '{n.name}' attrs", 0), "inputs": list(n.inputs),
                   "outputs": list(n.outputs), "dtypes": list(n.dtypes),
                   "subgraphs": [[as_str(key, "subgraph attribute"), as_int(i, "subgraph index")]
                                 for key, i in n.subgraphs],
                   **({"kinds": [as_str(k, f"{label} node '{n.name}' kinds") for k in n.kinds]} if n.kinds else {})}
                  for n in m.nodes],
        "steps": [[s.kind, as_int(s.index, "step index")] for s in m.steps],
    }
    return model_def, task_info


def _weight(x) -> dict:
    return {"name": as_str(x.name, "weight name"), "dtype": as_dtype(x.dtype, f"weight '{x.name}'"),
            "shape": as_shape(x.shape, f"weight '{x.name}'"), "offset": as_int(x.offset, "weight offset"),
            "nbytes": as_int(x.nbytes, "weight nbytes")}


def decode_root(md, ti, weight_bytes: int) -> DynamicModel:
    """Validate and build the root model and its control-flow subgraphs."""
    f = Fields(md, "root MODEL_DEF")
    n_sub = f.int("submodels", hi=MAX_MODELS - 1)
    files = _weight_files(f.m.get("weight_files", []))  # none before format 1.7
    root = _decode_graph(md, ti, weight_bytes, n_sub, "root", files)
    root.weight_files = files
    root.subgraphs = decode_subgraphs(f.m.get("subgraphs", []), weight_bytes, n_sub, files)  # none before format 1.5
    check_subgraph_refs(root, -1, "root", root.subgraphs)
    for k, sg in enumerate(root.subgraphs):
        check_subgraph_refs(sg, k, f"subgraph {k} '{clip(sg.name)}'", root.subgraphs)
    return root


# ---------------------------------------------------------------- control-flow subgraphs (format 1.5)
#: the subgraph attributes of each control-flow op, in the order its kernel takes them
SUBGRAPH_ATTRS = {"If": ("else_branch", "then_branch"), "Loop": ("body",), "Scan": ("body",),
                  "SequenceMap": ("body",)}
#: ops of other domains whose subgraph attributes are each optional (at least one present)
OPTIONAL_SUBGRAPHS = {("ai.onnx.preview", "FlexAttention"): ("prob_mod", "score_mod")}


def _weight_files(v) -> dict:
    """The root MODEL_DEF's "weight_files": [{"file", "size"}], plain names, each once."""
    if type(v) is not list or len(v) > MAX_WEIGHT_FILES:
        raise Bad(f"root MODEL_DEF: 'weight_files' must be a list of at most {MAX_WEIGHT_FILES} entries, got {show(v)}")
    files = {}
    for k, x in enumerate(v):
        f = Fields(x, f"root MODEL_DEF weight_files[{k}]")
        name, size = f.str("file"), f.int("size", hi=MAX_ALLOCATION_SIZE)
        check_weight_file_name(name, f"root MODEL_DEF weight_files[{k}]")
        if name in files:
            raise Bad(f"root MODEL_DEF weight_files: '{clip(name)}' appears twice")
        files[name] = size
    return files


def decode_subgraphs(v, weight_bytes: int, n_sub: int, files: dict | None = None) -> list[DynamicModel]:
    """The root MODEL_DEF's "subgraphs": each a hybrid graph over the root's submodels and weights."""
    if type(v) is not list or len(v) > MAX_SUBGRAPHS:
        raise Bad(f"root MODEL_DEF: 'subgraphs' must be a list of at most {MAX_SUBGRAPHS} entries, got {show(v)}")
    out = []
    for k, x in enumerate(v):
        label = f"subgraph {k}"
        f = Fields(x, label)
        md, ti = f.get("model_def"), f.get("task_info")
        sg = _decode_graph(md, ti, weight_bytes, n_sub, label, files or {})
        if md.get("root") is not False or sg.mode != HYBRID:
            raise Bad(f"{label} '{clip(sg.name)}': must be a hybrid graph that is not a root (root "
                      f"{show(md.get('root'))}, mode '{clip(sg.mode)}')")
        captures = sg.attrs.get("captures")
        if type(captures) is not int or not 0 <= captures <= len(sg.inputs):
            raise Bad(f"{label} '{clip(sg.name)}': attrs 'captures' must be an integer in [0, {len(sg.inputs)}] "
                      f"(its inputs), got {show(captures)}")
        if "subgraphs" in md and md["subgraphs"] != []:
            raise Bad(f"{label} '{clip(sg.name)}': subgraphs are listed by the root only")
        out.append(sg)
    return out


def check_subgraph_refs(g: DynamicModel, own: int, label: str, subgraphs: list[DynamicModel]) -> None:
    """Each control-flow node of `g` names existing subgraphs, later in the list than `g` itself
    (so no graph can run itself), under its op's attribute names, with inputs and outputs that
    line up with the node's."""
    for n in g.nodes:
        where = f"{label} node '{clip(n.name)}' ({clip(n.op_type)})"
        expected = SUBGRAPH_ATTRS.get(n.op_type) if n.domain == "" else OPTIONAL_SUBGRAPHS.get((n.domain, n.op_type))
        keys = tuple(sorted(key for key, _ in n.subgraphs))
        if expected is None and not n.subgraphs:
            continue
        if keys != expected and not ((n.domain, n.op_type) in OPTIONAL_SUBGRAPHS and keys and set(keys) <= set(expected)):
            raise Bad(f"{where}: subgraph attributes {list(keys)}, expected {list(expected or ())}")
        captures = n.attrs.get(CAPTURES)
        for key, j in n.subgraphs:
            if not own < j < len(subgraphs):
                raise Bad(f"{where}: attribute '{clip(key)}' names subgraph {j}; it must be one of "
                          f"{own + 1}..{len(subgraphs) - 1} (nested subgraphs come after their parent)")
            sg = subgraphs[j]
            if captures != sg.attrs["captures"]:
                raise Bad(f"{where}: captures {show(captures)} but its subgraph {j} captures {sg.attrs['captures']}")
            ins, outs = _subgraph_io(n)
            if (len(sg.inputs), len(sg.outputs)) != (ins, outs):
                raise Bad(f"{where}: subgraph {j} '{clip(sg.name)}' has {len(sg.inputs)} inputs and "
                          f"{len(sg.outputs)} outputs; the node needs {ins} and {outs}")


def _subgraph_io(n: DynNode) -> tuple[int, int]:
    """(inputs, outputs) a node's subgraphs must have, from its own inputs and outputs."""
    captures = n.attrs.get(CAPTURES)
    if n.op_type == "If":
        return captures, len(n.outputs)
    if n.op_type == "Loop":
        return len(n.inputs), 1 + len(n.outputs)
    if n.op_type == "SequenceMap":
        return len(n.inputs), len(n.outputs)
    if n.op_type == "FlexAttention":  # a modifier: the scores (or probabilities) in, the same shape out
        return 1 + captures, 1
    return len(n.inputs) - (1 if n.opset < 9 else 0), len(n.outputs)  # Scan (opset 8: sequence_lens)


def _decode_graph(md, ti, weight_bytes: int, n_sub: int, label: str, files: dict) -> DynamicModel:
    """One graph's MODEL_DEF and TASK_INFO (the root's or a subgraph's); `n_sub` static submodels
    exist; `files` the root's external weight files (name -> bytes)."""
    f = Fields(md, f"{label} MODEL_DEF")
    name, soc, opset = f.str("name"), f.str("soc_version"), f.int("opset")
    mode = f.str("mode")
    if mode not in MODES:
        raise Bad(f"{label} MODEL_DEF: mode '{clip(mode)}' is not one of {', '.join(MODES)}")

    def tensors(key: str) -> list[DynTensor]:
        out = []
        for k, t in enumerate(f.list(key)):
            tf = Fields(t, f"{label} MODEL_DEF {key[:-1]} {k}")
            tname = tf.str("name")
            dtype = tf.dtype("dtype", strings=True)
            shape = tf.list("shape", MAX_RANK)
            if any(type(d) is not int or not -2 <= d <= MAX_DIM for d in shape):
                raise Bad(f"{label} {key[:-1]} '{clip(tname)}': shape {show(shape)} must be ints >= -2")
            ranges = []
            for rg in tf.list("ranges", MAX_RANK):
                if (type(rg) is not list or len(rg) != 2 or any(type(x) is not int for x in rg)
                        or not 0 <= rg[0] <= MAX_RANGE_DIM or not -1 <= rg[1] <= MAX_RANGE_DIM
                        or (rg[1] >= 0 and rg[1] < rg[0])):
                    raise Bad(f"{label} {key[:-1]} '{clip(tname)}': range {show(rg)} is not [lo, hi] "
                                f"with 0 <= lo <= hi (hi -1: unbounded)")
                ranges.append(tuple(rg))
            if ranges and len(ranges) != len(shape):
                raise Bad(f"{label} {key[:-1]} '{clip(tname)}': {len(ranges)} ranges for rank {len(shape)}")
            kind = tf.str("kind") if "kind" in t else "tensor"  # format 1.6: sequences and optionals
            if kind not in KINDS:
                raise Bad(f"{label} {key[:-1]} '{clip(tname)}': kind '{clip(kind)}' is not one of {', '.join(KINDS)}")
            if kind != "tensor" and (shape != [-2] or ranges):
                raise Bad(f"{label} {key[:-1]} '{clip(tname)}': a {kind} has no shape or ranges (shape [-2]), got "
                          f"shape {show(shape)}")
            out.append(DynTensor(tname, dtype, tuple(shape), tuple(ranges), kind))
        return out

    inputs, outputs = tensors("inputs"), tensors("outputs")
    weights = []
    for k, x in enumerate(f.list("weights")):
        wf = Fields(x, f"{label} MODEL_DEF weight {k}")
        wname, dtype, shape = wf.str("name"), wf.dtype("dtype"), wf.shape("shape")
        offset, nbytes = wf.int("offset"), wf.int("nbytes")
        check_nbytes(nbytes, dtype, shape, f"{label} weight '{clip(wname)}'")
        if offset + nbytes > weight_bytes:
            raise Bad(f"{label} weight '{clip(wname)}': offset {offset} + {nbytes} bytes exceeds the shared "
                        f"WEIGHTS_DATA ({weight_bytes} bytes)")
        weights.append(WeightDesc(wname, dtype, shape, offset, nbytes))
    for k, x in enumerate(f.list("file_weights") if "file_weights" in md else []):  # format 1.7
        where = f"{label} MODEL_DEF file_weights[{k}]"
        wf = Fields(x, where)
        wname, dtype, shape = wf.str("name"), wf.dtype("dtype"), wf.shape("shape")
        offset, nbytes, file, sha = wf.int("offset"), wf.int("nbytes"), wf.str("file"), wf.str("sha256")
        check_nbytes(nbytes, dtype, shape, f"{label} weight '{clip(wname)}'")
        check_weight_file_name(file, where)
        if file not in files:
            raise Bad(f"{where} '{clip(wname)}': weight file '{clip(file)}' is not in the root's weight_files")
        if offset + nbytes > files[file]:
            raise Bad(f"{where} '{clip(wname)}': offset {offset} + {nbytes} bytes exceeds weight file "
                      f"'{clip(file)}' ({files[file]} bytes)")
        if len(sha) != 64 or sha.strip("0123456789abcdef"):
            raise Bad(f"{where} '{clip(wname)}': sha256 '{clip(sha)}' is not 64 lowercase hex digits")
        weights.append(WeightDesc(wname, dtype, shape, offset, nbytes, file, offset, sha))

    clusters = []
    for k, c in enumerate(f.list("clusters")):
        cf = Fields(c, f"{label} cluster {k}")
        kind, sub = cf.str("kind"), cf.int("submodel", lo=-1)
        if kind not in ("KNOWN", "UNKNOWN") or (kind == "KNOWN") != (0 <= sub < n_sub):
            raise Bad(f"{label} cluster {k}: kind '{clip(kind)}' with submodel {sub} (of {n_sub}) is inconsistent")
        nodes = cf.list("nodes")
        if any(type(n) is not str for n in nodes):
            raise Bad(f"{label} cluster {k}: node names must be strings")
        clusters.append(Cluster(cf.int("index"), kind, tuple(nodes), cf.str("reason"), sub))
    attrs = decode(ROOT_ATTRS, f.get("attrs"), f"{label} MODEL_DEF attrs")

    t = Fields(ti, f"{label} TASK_INFO")
    nodes = []
    for k, n in enumerate(t.list("nodes")):
        nf = Fields(n, f"{label} TASK_INFO node {k}")
        nname, op = nf.str("name"), nf.str("op_type")
        lists = {key: nf.list(key) for key in ("inputs", "outputs", "dtypes")}
        if any(type(s) is not str for v in lists.values() for s in v):
            raise Bad(f"{label} node '{clip(nname)}' ({clip(op)}): inputs/outputs/dtypes must be strings")
        if len(lists["dtypes"]) != len(lists["outputs"]):
            raise Bad(f"{label} node '{clip(nname)}': {len(lists['dtypes'])} dtypes for {len(lists['outputs'])} outputs")
        refs = nf.list("subgraphs") if "subgraphs" in n else []  # format 1.5
        if any(type(r) is not list or len(r) != 2 or type(r[0]) is not str or type(r[1]) is not int for r in refs):
            raise Bad(f"{label} node '{clip(nname)}': subgraphs must be [attribute, index] pairs")
        kinds = nf.list("kinds") if "kinds" in n else []  # format 1.6
        if kinds and (len(kinds) != len(lists["outputs"]) or any(k not in KINDS for k in kinds)):
            raise Bad(f"{label} node '{clip(nname)}': kinds {show(kinds)} must name one of {', '.join(KINDS)} per "
                      f"output ({len(lists['outputs'])})")
        nodes.append(DynNode(nname, op, nf.str("domain"), nf.int("opset"),
                             attr_map(nf.get("attrs"), f"{label} node '{clip(nname)}' attrs", 0),
                             tuple(lists["inputs"]), tuple(lists["outputs"]), tuple(lists["dtypes"]),
                             tuple((key, i) for key, i in refs), tuple(kinds)))
    steps = []
    for k, s in enumerate(t.list("steps")):
        if type(s) is not list or len(s) != 2 or s[0] not in ("node", "submodel") or type(s[1]) is not int:
            raise Bad(f"{label} TASK_INFO step {k}: {show(s)} is not [\"node\"|\"submodel\", index]")
        limit = len(nodes) if s[0] == "node" else n_sub
        if not 0 <= s[1] < limit:
            raise Bad(f"{label} TASK_INFO step {k}: {s[0]} {s[1]} does not exist (there are {limit})")
        steps.append(Step(s[0], s[1]))
    return DynamicModel(name, mode, inputs, outputs, nodes, steps, clusters, [], weights, b"", soc_version=soc,
                        opset=opset, attrs=attrs, string_constants=_string_constants(f, label, weights))


def _string_constants(f: Fields, label: str, weights: list[WeightDesc]) -> dict:
    """MODEL_DEF "string_constants" (format 1.8): {name: string ndarray}, none also a weight."""
    if "string_constants" not in f.m:
        return {}
    consts = attr_map(f.get("string_constants"), f"{label} MODEL_DEF string_constants", 0)
    for name, a in consts.items():
        if not isinstance(a, np.ndarray) or a.dtype != object:
            raise Bad(f"{label} MODEL_DEF string_constants['{clip(name)}'] must be a string ndarray, got {show(a)}")
    both = sorted(set(consts) & {w.name for w in weights})
    if both:
        raise Bad(f"{label} MODEL_DEF string_constants['{clip(both[0])}'] is also a weight")
    return consts
