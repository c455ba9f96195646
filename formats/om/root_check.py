"""Cross-references of a dynamic OM's root model, checked once root.py has decoded its records
and the reader its submodels: the runtime trusts every one of them.

- names: root inputs and outputs are distinct;
- dataflow (hybrid, range): the steps read only what exists when they run (root inputs, root weights, outputs of
  earlier steps) and leave every root output produced;
- gears (`attrs["gears"]`, `["gear_values"]`, `["gear_kind"]`): one gear per submodel, each
  naming root inputs with the shapes its submodel was compiled for;
- range (`attrs["capacities"]`, `["growable"]`, `["arena"]`): every capacity a root tensor's (or a
  node's workspace) bytes, every growable name a root tensor (or workspace) without a capacity,
  every planned region inside the arena, each submodel's feature maps and workspace included;
- external weights (`weight_files`): each file read by a weight of the root, a subgraph or a submodel.
"""
from __future__ import annotations

from ge.core.model.dynamic_model import GEARS, DynamicModel
from ge.core.model.ge_model import FEATURE_MAP, WORKSPACE

from .decode import Bad, clip, show
from .schema import MAX_ALLOCATION_SIZE

GEAR_KINDS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")


def check_root(root: DynamicModel) -> None:
    if not root.outputs:
        raise Bad("root MODEL_DEF.outputs is empty (a model has at least one output)")
    for key, descs in (("inputs", root.inputs), ("outputs", root.outputs)):
        names = [d.name for d in descs]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise Bad(f"root MODEL_DEF.{key}: '{clip(dup)}' appears twice")
    if root.mode == GEARS:  # no steps: the gear whose shapes match runs
        _check_gears(root)
    else:
        _check_dataflow(root)
    if "capacities" in root.attrs or "arena" in root.attrs or "growable" in root.attrs:
        _check_range_plan(root)
    _check_subgraph_dataflow(root)
    _check_weight_files(root)


def _check_weight_files(root: DynamicModel) -> None:
    """Every external weight file of the root is read by some graph or submodel (as a static OM's)."""
    used = {w.file for g in (root, *root.subgraphs) for w in g.weights} | {a.file for m in root.submodels
                                                                          for a in m.weight_files}
    unused = sorted(set(root.weight_files) - used)
    if unused:
        raise Bad(f"root MODEL_DEF.weight_files: '{clip(unused[0])}' is read by no weight of the root or its submodels")


def _check_dataflow(root: DynamicModel) -> None:
    _check_steps(root, root, "root TASK_INFO.steps", "root input or root weight",
                 lambda name: f"root MODEL_DEF.outputs: '{name}' is produced by no step")


def _check_subgraph_dataflow(root: DynamicModel) -> None:
    """Each control-flow subgraph's steps likewise (a step may run any of the root's submodels)."""
    for k, sg in enumerate(root.subgraphs):
        label = f"subgraph {k} '{clip(sg.name)}'"
        _check_steps(sg, root, f"{label} TASK_INFO.steps", "input or weight of the subgraph",
                     lambda name: f"{label}: output '{name}' is produced by no step")


def _check_steps(graph, root: DynamicModel, where: str, sources: str, unproduced) -> None:
    """The steps of `graph` (the root or a subgraph) read only what exists when they run (its inputs,
    its weights, outputs of earlier steps) and leave every output of `graph` produced."""
    ready = {d.name for d in graph.inputs} | {w.name for w in graph.weights} | set(graph.string_constants)
    for k, step in enumerate(graph.steps):
        if step.kind == "node":
            node = graph.nodes[step.index]
            reads, writes, what = [n for n in node.inputs if n], node.outputs, f"node '{clip(node.name)}'"
        else:
            sm = root.submodels[step.index]
            reads, writes, what = [d.name for d in sm.inputs], [d.name for d in sm.outputs], f"submodel {step.index}"
        missing = next((n for n in reads if n not in ready), None)
        if missing is not None:
            raise Bad(f"{where}[{k}] ({what}) reads '{clip(missing)}', which no earlier step, {sources} provides")
        ready.update(n for n in writes if n)
    missing = next((d.name for d in graph.outputs if d.name not in ready), None)
    if missing is not None:
        raise Bad(unproduced(clip(missing)))


def _check_gears(root: DynamicModel) -> None:
    attrs, n = root.attrs, len(root.submodels)
    if not n:
        raise Bad("root MODEL_DEF: a gears model has no submodel (one per gear)")
    kind = attrs.get("gear_kind", "dynamic_dims")
    if kind not in GEAR_KINDS:
        raise Bad(f"root MODEL_DEF.attrs.gear_kind must be one of {', '.join(GEAR_KINDS)}, got {show(kind)}")
    gears, values = attrs.get("gears"), attrs.get("gear_values")
    if type(gears) is not list or len(gears) != n:
        raise Bad(f"root MODEL_DEF.attrs.gears must be a list of {n} maps (one per submodel), got {show(gears)}")
    if (type(values) is not list or len(values) != n or any(type(v) is not list or not v for v in values)
            or any(type(x) is not int or x < 1 for v in values for x in v) or len({len(v) for v in values}) != 1):
        raise Bad(f"root MODEL_DEF.attrs.gear_values must be {n} equally long lists of positive ints, got {show(values)}")
    root_inputs = {d.name for d in root.inputs}
    outputs = [(d.name, d.dtype) for d in root.outputs]
    for k, (gear, sm) in enumerate(zip(gears, root.submodels)):
        if [(d.name, d.dtype) for d in sm.outputs] != outputs:
            raise Bad(f"submodel {k + 1}'s outputs {[d.name for d in sm.outputs]} are not the root's "
                      f"{[name for name, _ in outputs]} (same names and dtypes, in order)")
        where = f"root MODEL_DEF.attrs.gears[{k}]"
        if type(gear) is not dict or not gear:
            raise Bad(f"{where} must be a map of input name -> shape, got {show(gear)}")
        compiled = {d.name: tuple(d.shape) for d in sm.inputs}
        for name, shape in gear.items():
            if name not in root_inputs or name not in compiled:
                raise Bad(f"{where}: '{clip(name)}' is not an input of the model and of submodel {k + 1}")
            if type(shape) is not list or tuple(shape) != compiled[name]:
                raise Bad(f"{where}['{clip(name)}'] is {show(shape)}; submodel {k + 1} was compiled for "
                          f"{list(compiled[name])}")


def _check_range_plan(root: DynamicModel) -> None:
    caps, arena = root.attrs.get("capacities", {}), root.attrs.get("arena")
    if type(caps) is not dict or any(type(v) is not int or not 0 <= v <= MAX_ALLOCATION_SIZE for v in caps.values()):
        raise Bad(f"root MODEL_DEF.attrs.capacities must map tensor names to byte counts, got {show(caps)}")
    tensors = ({d.name for d in root.inputs} | {o for n in root.nodes for o in n.outputs if o}
               | {d.name for sm in root.submodels for d in sm.outputs} | {f"{n.name}:workspace" for n in root.nodes})
    unknown = next((name for name in caps if name not in tensors), None)
    if unknown is not None:
        raise Bad(f"root MODEL_DEF.attrs.capacities['{clip(unknown)}'] is not a tensor or node workspace of the root graph")
    growable = root.attrs.get("growable", [])
    if type(growable) is not list or any(type(g) is not str for g in growable):
        raise Bad(f"root MODEL_DEF.attrs.growable must be a list of tensor names, got {show(growable)}")
    odd = next((g for g in growable if g not in tensors or g in caps), None)
    if odd is not None:
        raise Bad(f"root MODEL_DEF.attrs.growable: '{clip(odd)}' is not a root tensor or node workspace without "
                  f"a capacity")
    if "arena" not in root.attrs:
        return
    if type(arena) is not dict or type(arena.get("offsets")) is not dict:
        raise Bad(f"root MODEL_DEF.attrs.arena must be a map with 'size', 'lower_bound' and 'offsets', got {show(arena)}")
    size, lower = arena.get("size"), arena.get("lower_bound")
    for key, v in (("size", size), ("lower_bound", lower)):
        if type(v) is not int or not 0 <= v <= MAX_ALLOCATION_SIZE:
            raise Bad(f"root MODEL_DEF.attrs.arena.{key} must be a byte count, got {show(v)}")
    regions = dict(caps)
    for k, sm in enumerate(root.submodels):
        regions[f"submodel{k}:fm"] = sm.allocation(FEATURE_MAP).size
        regions[f"submodel{k}:workspace"] = sm.allocation(WORKSPACE).size
    offsets = arena["offsets"]
    for name, nbytes in regions.items():
        offset = offsets.get(name)
        if type(offset) is not int or not 0 <= offset or offset + nbytes > size:
            raise Bad(f"root MODEL_DEF.attrs.arena.offsets['{clip(name)}'] must place {nbytes} bytes inside the "
                      f"{size}-byte arena, got {show(offset)}")
