"""Run connected convolutions in the blocked layout NCHW16c (kernels/blocked.py, csrc/nchwc.c).

Why: in NCHW a convolution's activations are the GEMM's vector operand, packed or gathered at every
call, and each output is transposed back into planes; in NCHW16c the weights are the vector operand,
the input is read in place and the output is already the next convolution's input (onnxruntime's
MLAS runs CNNs so). The layout pays where convolutions follow each other: a value entering the
region costs a ReorderInput, one leaving it (a reader outside, a model output) a ReorderOutput,
about a pass over memory each.

Recognized: float32 2-D Conv and ge::FusedConv nodes of one group, and depthwise Convs (group ==
input == output channels: MobileNets'), with constant weights (their fused epilogues go along), whose
input and output channels waste little in blocks of 16; a conv of one group whose input has fewer
channels than a block, too few to block (a stem's 3), and a kernel of at most PLANAR_TAPS joins too,
reading its X as NCHW in place (ge::NchwcConv of a 4-D X: no ReorderInput, its output blocked). Convolutions are joined into a region
through a value one writes and another reads (as X or as FusedConv's residual Z), or that both read.
A region is rewritten when it pays: more convolutions than reorders (a lone conv between two reorders
does not) and at least PAYBACK multiply-adds per element reordered. With its depthwise convs inside,
MobileNetV2 is one region from its stem to its GlobalAveragePool. Inside, values become blocked
tensors, shape (N, ceil(C/16), H, W, 16), so the arena sizes the padded channels like any tensor.
A 2-D MaxPool (no Indices) or GlobalAveragePool of a value a region conv (or such a MaxPool) writes
joins the region (ge::NchwcMaxPool, ge::NchwcGlobalAveragePool, whose output is NCHW): no reorders
around it; so does a squeeze-excite's Mul of such a
value by an NCHW gate (N, C, 1, 1) (ge::NchwcMul: MobileNetV3's and PP-LCNet's gates, whose two 1x1
convs on the pooled means stay NCHW). So do a Concat or
a Split along the channels and an Add of one shape whose inputs members write blocked, when every part but
the last is whole blocks (YOLOv8's C2f blocks: a conv split in two, bottlenecks added, all concatenated,
SPPF's pools concatenated): they stay Concat, Split and Add, along axis 1 of the blocked tensors (the last
part's padding channels stay last). So does a nearest Resize over H and W of such a value (YOLO's and
FPNs' upsample between a conv and a Concat): the same Resize of the blocked tensor. So does a
ge::FusedElementwise of such a value whose other operands are of its shape, NCHW gates (N, C, 1, 1)
(reordered in) or single values, its steps finite on finite padding (PP-LCNet's residual squeeze-excite
x + x * gate in DBNet's neck, the neck's top-down adds): the same chain on the blocked tensors. A pool after a
conv left NCHW stays NCHW: reordering its larger input would cost more than its output.
Dynamic graphs (unknown batch or image size: an exporter's dynamic axes) are rewritten the same way, their
nodes of unknown dims (`dynamic`: passes.optimize_unknown, after infer_dynamic): what a rewrite may do is
decided by what the graph proves (dtypes, ranks, channels, constants), which holds at any size, the
hybrid executor builds each blocked op for the shapes a run brings, and a region's cost is weighed at a
nominal input size (passes/_nominal.py: the ratio of multiply-adds to reordered elements barely depends
on the size). Runs last among the fusions (after precision_mode when one is set), where ge's native
kernels run: the numpy plans of the blocked ops unblock and block around the NCHW ones (ResNet-50 on
numpy: 1.18x its NCHW plans), so a compiler without them keeps NCHW (an OM compiled with them still
runs on numpy)."""
from __future__ import annotations

import math

import numpy as np

from ..model.ir import Graph, Node, Value
from ._fusion import same_dim
from ._nominal import Sizes
from ._util import partial_shape, set_initializer
from ..kernels import backend as backends
from ..kernels.ops.blocked import BLOCK, blocked_shape
from ..kernels.fused import GE_DOMAIN

#: a conv joins a region when its input and output channels rounded up to blocks are at most this
#: many times what they are, (numerator, denominator) (24 -> 32 passes; 3 -> 16 or 17 -> 32 do not)
MAX_WASTE = (4, 3)
#: a region's multiply-adds per element its reorders move, at least: the blocked kernel saves about
#: 10% of ge's NCHW time, some 2 ps per multiply-add, a reorder costs about 0.2 ns per element
#: (benchmarks/nchwc_resnet_chain.py, docs/design-notes.md "NCHWc"): about 130 to break even. On thin
#: convs the blocked kernel saves far more (16-64 channels: 30-50% at v3 and v4), so regions well under
#: twice that pay too, measured in whole models, one thread: a MobileNetV2-style net at 222 (expansion 3)
#: 94 -> 80 us at v3, 75 -> 67 at v4, at 115 (expansion 1.5) level or 3-6% faster; DBNet's PP-LCNet
#: backbone at 191: 40.7 -> 37.1 ms at v3, 34.6 -> 31.6 at v4
PAYBACK = 128
#: the largest kernel (taps) of a conv reading its NCHW input in place (_planar): ResNet-50's 7x7 stem and
#: its blocked MaxPool ran 3.07-3.09 ms at v3 (1.73-1.81 at v4vnni) where ge's NCHW conv, NCHW MaxPool and
#: reorder took 3.60-3.70 (2.43-2.52): one thread, in the model, alternated runs, loaded machine (an
#: earlier measure, 4.3 ms planar, was not reproduced); MobileNets' 3x3 stems gain
PLANAR_TAPS = 49
_CONVS = (("", "Conv"), (GE_DOMAIN, "FusedConv"))
_POOLS = {("", "MaxPool"): "NchwcMaxPool", ("", "GlobalAveragePool"): "NchwcGlobalAveragePool"}
#: the steps of a FusedElementwise run on blocked tensors: finite in, finite out (not Div, Log, Sqrt, ...)
BLOCK_SAFE_STEPS = {("", op) for op in ("Add", "Sub", "Mul", "Max", "Min", "Relu", "LeakyRelu", "Clip", "HardSigmoid",
                                        "HardSwish", "Neg", "Abs", "Sigmoid", "Tanh")} | \
    {(GE_DOMAIN, "Swish"), (GE_DOMAIN, "HardSwish")}


def nchwc_layout(graph: Graph, stats: dict | None = None, dynamic: bool = False) -> Graph:
    """`dynamic`: the graph has unknown dims, and only nodes whose outputs have some join a region (the
    static parts become static submodels, whose own pipeline lays them out)."""
    if backends.select().lib is None:
        if stats is not None:
            stats["no_native_kernels"] = 1
        return graph
    sizes = Sizes(graph)
    members, writers = [], set()  # writers: the values a member writes blocked
    for n in graph.nodes:  # in graph order: a pool's producer is decided before it
        if dynamic and all(graph.value(o).is_static for o in n.outputs if o):
            continue
        if _eligible_conv(graph, n, sizes) or _eligible_pool(graph, n, writers) \
                or _eligible_mul(graph, n, writers, sizes) or _eligible_channel_op(graph, n, writers, sizes) \
                or _eligible_resize(graph, n, writers) or _eligible_chain(graph, n, writers, sizes):
            members.append(n)
            writers.update(_written(n))
    # a Resize whose output no member reads blocked would leave the region upsampled: reordered before it,
    # the smaller tensor moves (DBNet's neck upsamples 24 channels 2-8x into an NCHW Concat)
    reads = {id(n): _blocked_reads(graph, n, sizes) for n in members}  # (asked again and again by _regions)
    read_blocked = {x for xs in reads.values() for x in xs}
    members = [n for n in members if n.op_type != "Resize" or n.outputs[0] in read_blocked]
    regions = [r for r in _regions(graph, members, reads) if _pays(graph, r, sizes)]
    for region in regions:
        _rewrite(graph, region, sizes)
    if regions:
        graph.opset.setdefault(GE_DOMAIN, graph.opset.get("", 17))  # see kernels/fused.py
    if stats is not None:
        stats["regions"] = stats.get("regions", 0) + len(regions)
        stats["blocked_convs"] = stats.get("blocked_convs", 0) + sum(len(r.convs) for r in regions)
        stats["blocked_pools"] = stats.get("blocked_pools", 0) + sum(len(r.pools) for r in regions)
        stats["blocked_channel_ops"] = stats.get("blocked_channel_ops", 0) + sum(
            len(r.members) - len(r.convs) - len(r.muls) - len(r.pools) for r in regions)
        stats["blocked_muls"] = stats.get("blocked_muls", 0) + sum(len(r.muls) for r in regions)
        stats["reorders"] = stats.get("reorders", 0) + sum(len(r.entering) + len(r.leaving) for r in regions)
    return graph


def _nchw(v) -> bool:
    """A float32 4-D tensor whose channels the graph knows (its other dims may not be known: a dynamic graph)."""
    return v is not None and v.kind == "tensor" and v.dtype == np.float32 and v.shape is not None \
        and len(v.shape) == 4 and isinstance(v.shape[1], int) and v.shape[1] > 0


def _single(shape) -> bool:
    """Provably one element."""
    return all(d == 1 for d in shape)


def _eligible_pool(graph: Graph, node: Node, writers: set) -> bool:
    """A 2-D float32 MaxPool without Indices or a GlobalAveragePool of a value a member writes blocked."""
    if (node.domain, node.op_type) not in _POOLS or not node.inputs or node.inputs[0] not in writers:
        return False
    if len([o for o in node.outputs if o]) != 1 or not node.outputs[0]:
        return False
    return _nchw(graph.values.get(node.outputs[0]))


def _eligible_mul(graph: Graph, node: Node, writers: set, sizes: Sizes) -> bool:
    """A squeeze-excite's Mul: a value a member writes blocked times an NCHW gate (N, C, 1, 1) of its batch
    and channels (MobileNetV3's), in either order."""
    if (node.domain, node.op_type) != ("", "Mul") or len(node.inputs) != 2 or len(node.outputs) != 1:
        return False
    metas = [graph.values.get(v) for v in node.inputs + node.outputs]
    if not all(map(_nchw, metas)):
        return False
    y = tuple(metas[2].shape)
    return any(node.inputs[i] in writers and sizes.alike(node.inputs[i], node.outputs[0]) and y[2:] != (1, 1)
               and tuple(metas[1 - i].shape)[1:] == y[1:2] + (1, 1) and same_dim(metas[1 - i].shape[0], y[0])
               for i in (0, 1))


def _eligible_channel_op(graph: Graph, node: Node, writers: set, sizes: Sizes) -> bool:
    """A Concat or Split along the channels, or an Add of one shape, of values members write blocked (YOLO's
    C2f blocks: a conv's output split in two, bottlenecks added, all concatenated): blocked, each is the same
    op along axis 1 of the blocked tensors, when every part but the last is whole blocks (the last one's
    padding channels then stay last)."""
    if node.domain != "" or node.op_type not in ("Concat", "Split", "Add"):
        return False
    reads = node.inputs if node.op_type != "Split" else node.inputs[:1]
    outs = [o for o in node.outputs if o]
    if not outs or not all(x in writers for x in reads):
        return False
    metas = [graph.values.get(v) for v in reads + outs]
    if not all(map(_nchw, metas)):
        return False
    if node.op_type == "Add":
        return len(reads) == 2 and all(sizes.alike(x, outs[0]) for x in reads)
    if int(node.attrs.get("axis", 0)) not in (1, -3):
        return False
    parts = reads if node.op_type == "Concat" else node.outputs
    if node.op_type == "Split" and ("" in node.outputs or (len(node.inputs) > 1 and node.inputs[1]
                                                           and node.inputs[1] not in graph.initializers)):
        return False
    return all(partial_shape(graph, v)[1] % BLOCK == 0 for v in parts[:-1])


def _eligible_chain(graph: Graph, node: Node, writers: set, sizes: Sizes) -> bool:
    """A ge::FusedElementwise (fuse_elementwise's chain) of a value members write blocked, whose other
    operands are of its output's shape, NCHW gates (N or 1, C, 1, 1) of its channels, or single
    values, and whose steps keep finite values finite (BLOCK_SAFE_STEPS: the padding channels, act(0) or
    zeros, must not turn into a NaN the next conv's zero weights would spread): PP-LCNet's residual
    squeeze-excite x + x * gate (DBNet's neck), its top-down adds. Blocked, the same chain on the blocked
    tensors, the gates reordered to (N, C/16, 1, 1, 16) (zeros past C), which broadcast alike."""
    if (node.domain, node.op_type) != (GE_DOMAIN, "FusedElementwise") or len(node.outputs) != 1:
        return False
    if any((step[1], step[0]) not in BLOCK_SAFE_STEPS for step in node.attrs.get("steps", [])):
        return False
    metas = [graph.values.get(v) for v in node.inputs]
    y = graph.values.get(node.outputs[0])
    if not _nchw(y) or any(m is None or m.dtype != np.float32 or m.shape is None for m in metas):
        return False
    out, y = node.outputs[0], tuple(y.shape)
    if not any(x in writers and sizes.alike(x, out) for x in node.inputs):
        return False
    return all(_single(m.shape) or (x not in graph.initializers and (
        sizes.alike(x, out) or (len(m.shape) == 4 and tuple(m.shape)[1:] == y[1:2] + (1, 1))))
        for x, m in zip(node.inputs, metas))


def _eligible_resize(graph: Graph, node: Node, writers: set) -> bool:
    """A Resize (opset 11+) mode=nearest of a value a member writes blocked, over H and W only, by constant
    scales or sizes, without axes and not tf_crop_and_resize (the one mode that reads roi): YOLO's and
    FPNs' upsample. Blocked, it is the same Resize of the (N, C/16, H, W, 16) tensor, its scales (or
    sizes) given a fifth value that keeps the last axis."""
    if (node.domain, node.op_type) != ("", "Resize") or graph.opset.get("", 17) < 11 or not node.inputs or \
            node.inputs[0] not in writers or len(node.outputs) != 1:
        return False
    mode, coord, policy = (node.attrs.get(k, d) for k, d in (
        ("mode", "nearest"), ("coordinate_transformation_mode", "half_pixel"), ("keep_aspect_ratio_policy", "stretch")))
    text = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731
    if text(mode) != "nearest" or text(coord) == "tf_crop_and_resize" or text(policy) != "stretch" or "axes" in node.attrs:
        return False
    x, y = graph.values.get(node.inputs[0]), graph.values.get(node.outputs[0])
    if not (_nchw(x) and _nchw(y)):
        return False
    param = _resize_param(graph, node)
    if param is None or x.shape[1] != y.shape[1]:  # (N: scales of 1, or sizes equal to X's, below)
        return False
    i, values = param
    return bool(np.all(values[:2] == 1)) if i == 2 else [int(v) for v in values[:2]] == list(x.shape[:2])


def _resize_param(graph: Graph, node: Node):
    """(input index, its 4 constant values) of a Resize's scales or sizes, or None."""
    for i in (2, 3):
        name = node.inputs[i] if i < len(node.inputs) else ""
        a = graph.initializers.get(name) if name else None
        if a is not None and a.size == 4:
            return i, a.reshape(-1)
    return None


def _written(node: Node) -> list[str]:
    """The values a member writes blocked (a GlobalAveragePool's means are NCHW)."""
    if node.op_type == "GlobalAveragePool":
        return []
    return list(node.outputs) if node.op_type == "Split" else node.outputs[:1]


def _eligible_conv(graph: Graph, node: Node, sizes: Sizes) -> bool:
    if (node.domain, node.op_type) not in _CONVS or len(node.outputs) != 1:
        return False
    if node.inputs[0] in graph.initializers:
        return False
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else ""
    if w not in graph.initializers or (b and b not in graph.initializers):
        return False
    x, y = graph.values.get(node.inputs[0]), graph.values.get(node.outputs[0])
    if not (_nchw(x) and _nchw(y)):
        return False
    group = int(node.attrs.get("group", 1))
    if group != 1 and not _depthwise(graph, node):
        return False
    if node.op_type == "FusedConv":
        z = graph.values.get(node.inputs[3])
        if node.inputs[3] in graph.initializers or not _nchw(z) or not sizes.alike(node.inputs[3], node.outputs[0]):
            return False
    return _fits_blocks(y.shape[1]) and (_fits_blocks(x.shape[1]) or _planar(graph, node))


def _fits_blocks(c: int) -> bool:
    """c channels waste little in blocks (MAX_WASTE)"""
    return -(-c // BLOCK) * BLOCK * MAX_WASTE[1] <= MAX_WASTE[0] * c


def _planar(graph: Graph, node: Node) -> bool:
    """A conv of one group reading its few input channels (fewer than a block, too few to block: a stem's 3)
    as NCHW, in place, kernels up to PLANAR_TAPS: its output is blocked with no ReorderInput before it
    (MLAS's NCHW-input kernel). MobileNetV2's stem had written NCHW and its 32 channels at 112x112 were
    reordered, 5% of the model at v3."""
    c = partial_shape(graph, node.inputs[0])[1]
    w = graph.initializers.get(node.inputs[1])
    return (node.domain, node.op_type) in _CONVS and int(node.attrs.get("group", 1)) == 1 and not _fits_blocks(c) \
        and c < BLOCK and w is not None and w.ndim == 4 and w.shape[2] * w.shape[3] <= PLANAR_TAPS

def _depthwise(graph: Graph, node: Node) -> bool:
    """A depthwise conv: one input and one output channel per group (MobileNets'; no residual Z)."""
    c, oc = partial_shape(graph, node.inputs[0])[1], partial_shape(graph, node.outputs[0])[1]
    return (node.op_type == "Conv" and int(node.attrs.get("group", 1)) == c == oc
            and graph.initializers[node.inputs[1]].shape[1] == 1)


class _Region:
    def __init__(self, members: list[Node]):
        self.members = members
        self.convs = [n for n in members if (n.domain, n.op_type) in _CONVS]
        self.muls = [n for n in members if n.op_type == "Mul"]
        self.pools = [n for n in members if (n.domain, n.op_type) in _POOLS]
        self.ids = {id(n) for n in members}
        self.outputs = {y for n in members for y in _written(n)}  # written blocked
        self.entering: list[str] = []  # values read blocked, written outside: a ReorderInput each
        self.leaving: list[str] = []  # values written blocked, read outside or model outputs: a ReorderOutput each


def _blocked_reads(graph: Graph, node: Node, sizes: Sizes) -> list[str]:
    """What a member reads blocked: X, and FusedConv's Z; a gate Mul the input of its output's shape (the
    gate's is (N, C, 1, 1)), before and after the rewrite gives them the blocked shape."""
    if node.op_type == "Mul":
        return [x for x in node.inputs if sizes.alike(x, node.outputs[0])][:1]
    if node.op_type in ("Concat", "Add"):
        return list(node.inputs)
    if node.op_type == "FusedElementwise":  # its single values stay as they are
        return [x for x in node.inputs if not _single(partial_shape(graph, x))]
    at = ((3,) if _planar(graph, node) else (0, 3)) if (node.domain, node.op_type) in _CONVS else (0,)
    return [node.inputs[i] for i in at if i < len(node.inputs) and node.inputs[i]]


def _regions(graph: Graph, members: list[Node], reads: dict[int, list[str]]) -> list[_Region]:
    """The connected groups of members (union-find over the values they write and read blocked; `reads`:
    each member's _blocked_reads)."""
    parent = {id(n): id(n) for n in members}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    touching: dict[str, list[int]] = {}  # value -> the members writing or reading it blocked
    for n in members:
        for name in reads[id(n)] + _written(n):
            touching.setdefault(name, []).append(id(n))
    for ks in touching.values():
        for k in ks[1:]:
            parent[root(k)] = root(ks[0])
    groups: dict[int, list[Node]] = {}
    for n in members:
        groups.setdefault(root(id(n)), []).append(n)
    consumers = graph.consumers()
    regions = []
    for members in groups.values():
        r = _Region(members)
        for n in members:
            for name in reads[id(n)]:
                if name not in r.outputs and name not in r.entering:
                    r.entering.append(name)
        for n in members:
            for y in _written(n):
                outside = [u for u in consumers.get(y, []) if id(u) not in r.ids or y not in reads[id(u)]]
                if outside or y in graph.outputs:
                    r.leaving.append(y)
        regions.append(r)
    return regions


def _pays(graph: Graph, r: _Region, sizes: Sizes) -> bool:
    reorders = len(r.entering) + len(r.leaving)
    if len(r.convs) <= reorders:
        return False
    moved = [sizes.numel(v) for v in r.entering + r.leaving]
    outs = [sizes.numel(n.outputs[0]) for n in r.convs]
    if None in moved or None in outs:  # (a dynamic graph whose sizes the nominal shapes do not tell)
        return False
    macs = sum(k * math.prod(graph.initializers[n.inputs[1]].shape[1:]) for k, n in zip(outs, r.convs))
    return macs >= PAYBACK * sum(moved)


def _rewrite(graph: Graph, r: _Region, sizes: Sizes) -> None:
    """The region's members as ge's blocked ops; a ReorderInput before the first reader of each entering
    value, a ReorderOutput after the producer of each leaving one (which keeps its name and layout for
    its readers outside)."""
    reads = {id(n): _blocked_reads(graph, n, sizes) for n in r.members}  # before the shapes change
    split_blocks = {id(n): [-(-partial_shape(graph, y)[1] // BLOCK) for y in n.outputs] for n in r.members
                    if n.op_type == "Split"}
    blocked: dict[str, str] = {}
    for name in r.entering + r.leaving:
        blocked[name] = _unused(graph, f"{name}:nchwc")
        graph.values[blocked[name]] = Value(blocked[name], np.dtype(np.float32), blocked_shape(partial_shape(graph, name)))
    for y in r.outputs:  # the values inside keep their names, their layout becomes blocked
        if y not in blocked:
            v = graph.values[y]
            v.shape = blocked_shape(v.shape)
            blocked[y] = y
    first_reader = {name: min(k for k, n in enumerate(graph.nodes) if id(n) in r.ids and name in reads[id(n)])
                    for name in r.entering}
    nodes = []
    for k, n in enumerate(graph.nodes):
        for name in r.entering:
            if first_reader[name] == k:
                nodes.append(Node("ReorderInput", [name], [blocked[name]], name=_unused_node(graph, f"{name}:to_nchwc"),
                                  domain=GE_DOMAIN))
        if id(n) not in r.ids:
            nodes.append(n)
            continue
        inputs = [blocked[i] if i in reads[id(n)] else i for i in n.inputs]
        y = n.outputs[0]
        if n.op_type in ("Concat", "Split", "Add"):  # the same op along the blocked tensors' axis 1
            nodes.append(_channel_op(graph, n, inputs, [blocked[o] for o in n.outputs], split_blocks.get(id(n))))
            nodes.extend(Node("ReorderOutput", [blocked[o]], [o], attrs={"channels": int(partial_shape(graph, o)[1])},
                              name=_unused_node(graph, f"{o}:from_nchwc"), domain=GE_DOMAIN)
                         for o in n.outputs if o in r.leaving)
            continue
        if n.op_type in ("Resize", "FusedElementwise"):  # the same op on the blocked tensors
            nodes.append(_blocked_resize(graph, n, inputs, blocked[y]) if n.op_type == "Resize" else
                         Node(n.op_type, inputs, [blocked[y]], attrs=dict(n.attrs), name=n.name, domain=n.domain))
            if y in r.leaving:
                nodes.append(Node("ReorderOutput", [blocked[y]], [y], attrs={"channels": int(partial_shape(graph, y)[1])},
                                  name=_unused_node(graph, f"{y}:from_nchwc"), domain=GE_DOMAIN))
            continue
        if n.op_type == "GlobalAveragePool":  # reads blocked, writes NCHW
            nodes.append(Node("NchwcGlobalAveragePool", inputs[:1], [y], attrs={"channels": int(partial_shape(graph, y)[1])},
                              name=n.name, domain=GE_DOMAIN))
            continue
        if n.op_type == "Mul":  # the blocked input first, the NCHW gate second
            x = reads[id(n)][0]
            nodes.append(Node("NchwcMul", [blocked[x]] + [i for i in n.inputs if i != x], [blocked[y]], name=n.name,
                              domain=GE_DOMAIN))
        else:
            op = _POOLS.get((n.domain, n.op_type), "NchwcConv")
            nodes.append(Node(op, inputs[:1] if op != "NchwcConv" else inputs, [blocked[y]], attrs=dict(n.attrs),
                              name=n.name, domain=GE_DOMAIN))
        if y in r.leaving:
            nodes.append(Node("ReorderOutput", [blocked[y]], [y], attrs={"channels": int(partial_shape(graph, y)[1])},
                              name=_unused_node(graph, f"{y}:from_nchwc"), domain=GE_DOMAIN))
    graph.nodes = nodes


def _channel_op(graph: Graph, n: Node, inputs: list[str], outputs: list[str], split_blocks) -> Node:
    """Concat, Split or Add on the blocked tensors: Concat and Split along axis 1, Split's parts in blocks
    (an input from opset 13, the attribute before; num_outputs (opset 18) gives way to them); the other
    attributes kept (an Add's fused epilogue)."""
    attrs = {k: v for k, v in n.attrs.items() if k not in ("split", "num_outputs")}
    if n.op_type != "Add":
        attrs["axis"] = 1
    if n.op_type == "Split":
        if graph.opset.get("", 17) >= 13:
            split = _unused(graph, f"{n.name}:split_blocks")
            set_initializer(graph, split, np.array(split_blocks, np.int64))
            inputs = [inputs[0], split]
        else:
            attrs["split"] = split_blocks
    return Node(n.op_type, inputs, outputs, attrs=attrs, name=n.name)


def _blocked_resize(graph: Graph, n: Node, inputs: list[str], y: str) -> Node:
    """The Resize of the blocked tensor: scales (1, 1, sh, sw, 1), or sizes with the blocked channel and
    block dims (an unscaled axis maps straight through in every coordinate mode)."""
    i, values = _resize_param(graph, n)
    if i == 2:
        param = np.append(values, 1).astype(values.dtype)
    else:
        param = np.array(blocked_shape(tuple(int(v) for v in values)), np.int64)
    name = _unused(graph, f"{n.name}:{'scales' if i == 2 else 'sizes'}_nchwc")
    set_initializer(graph, name, param)
    inputs = list(inputs) + [""] * (i + 1 - len(inputs))
    inputs[i] = name
    return Node("Resize", inputs, [y], attrs=dict(n.attrs), name=n.name)


def _unused(graph: Graph, name: str) -> str:
    k, out = 1, name
    while out in graph.values or out in graph.initializers:
        k += 1
        out = f"{name}{k}"
    return out


def _unused_node(graph: Graph, name: str) -> str:
    taken = {n.name for n in graph.nodes}
    k, out = 1, name
    while out in taken:
        k += 1
        out = f"{name}{k}"
    return out
