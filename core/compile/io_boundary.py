"""ATC's I/O options as ops at the model boundary, before the passes run:

    --input_fp16_nodes "x;y"            the float inputs x and y take float16 data (Cast to their dtype)
    --is_input_adjust_hw_layout "true,false"   ... x in the NPU's NC1HWC0 layout (per fp16 node)
    --output_type FP16                  every float output is cast to float16
    --output_type "conv:0:FP16;fc:0:UINT8"   per output: node name (or tensor name), output index, dtype
    --is_output_adjust_hw_layout "true"   the output (per --out_nodes entry) in float16 NC1HWC0

NC1HWC0 is the NPU's 5-D layout of an NCHW tensor: [N, C1, H, W, C0] with C0 = 16 channels per block
and C1 = ceil(C / 16), the last block zero-padded. The user's I/O tensors keep their names; the
boundary is ordinary ONNX ops (Cast, Transpose, Reshape, Gather, Concat), compiled like the rest.
"""
from __future__ import annotations

import numpy as np

from ..model.log import Logger
from ..model.errors import GeError
from ..model.ir import Graph, Node, Value
from ..model.ir import dtype_to_onnx

log = Logger("ge.atc")

#: ATC's spellings of --output_type dtypes
ATC_DTYPES = {"FP32": np.float32, "FP16": np.float16, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16,
              "UINT16": np.uint16, "INT32": np.int32, "INT64": np.int64, "UINT32": np.uint32, "UINT64": np.uint64,
              "DOUBLE": np.float64}


def _dtype(name: str, option: str) -> np.dtype:
    if name.upper() not in ATC_DTYPES:
        raise GeError(f"{option}: dtype '{name}' is not one of {', '.join(ATC_DTYPES)}")
    return np.dtype(ATC_DTYPES[name.upper()])


C0 = 16  # channels per NC1HWC0 block


def cast_inputs_from_fp16(graph: Graph, spec: str, nc1hwc0: list[bool] | None = None) -> list[str]:
    """--input_fp16_nodes: each named float input becomes float16, cast back to its dtype inside;
    `nc1hwc0[k]` (--is_input_adjust_hw_layout): the k-th one also arrives in NC1HWC0."""
    option = "--input_fp16_nodes"
    done = []
    names = [n.strip() for n in spec.split(";") if n.strip()]
    for k, name in enumerate(names):
        if name not in graph.inputs:
            raise GeError(f"{option}: '{name}' is not a model input ({', '.join(graph.inputs)})")
        v = graph.value(name)
        if v.dtype is None or np.dtype(v.dtype).kind != "f":
            raise GeError(f"{option}: input '{name}' is {v.dtype}; only float inputs can take float16 data")
        layout = bool(nc1hwc0 and nc1hwc0[k])
        if np.dtype(v.dtype) == np.float16 and not layout:
            continue
        inside = f"{name}:from_fp16"
        _rename_uses(graph, name, inside, outputs=False)
        nodes, src = [], name
        if layout:
            n, c, h, w = _nchw(graph, name, "--is_input_adjust_hw_layout", "input")
            c1 = -(-c // C0)
            b = _Boundary(graph, f"{name}:from_nc1hwc0")
            t = b.op("Transpose", [name], perm=[0, 1, 4, 2, 3])                        # [N, C1, C0, H, W]
            t = b.op("Reshape", [t, b.const(np.array([n, c1 * C0, h, w], np.int64))])
            src = b.op("Gather", [t, b.const(np.arange(c, dtype=np.int64))], axis=1) if c % C0 else t
            nodes = b.nodes
            v.shape = (n, c1, h, w, C0)
        nodes.append(Node("Cast", [src], [inside], {"to": dtype_to_onnx(v.dtype)}, name=f"{name}:input_fp16_cast"))
        graph.nodes[:0] = nodes
        graph.values[inside] = Value(inside, np.dtype(v.dtype), None if layout else v.shape)
        v.dtype = np.dtype(np.float16)
        log.debug("--input_fp16_nodes: input '%s' takes float16%s", name, " in NC1HWC0" if layout else "")
        done.append(name)
    return done


def outputs_to_nc1hwc0(graph: Graph, flags: list[bool]) -> list[str]:
    """--is_output_adjust_hw_layout: the flagged outputs (in output order) become float16 NC1HWC0."""
    done = []
    for j, flag in enumerate(flags):
        if not flag or j >= len(graph.outputs):
            continue
        t = graph.outputs[j]
        n, c, h, w = _nchw(graph, t, "--is_output_adjust_hw_layout", "output")
        c1 = -(-c // C0)
        inner = f"{t}:before_nc1hwc0"
        if t in graph.inputs or t in graph.initializers:
            inner, t = t, f"{t}:nc1hwc0"
            graph.outputs[j] = t
        else:
            _rename_uses(graph, t, inner, outputs=True)
            graph.values[inner] = Value(inner, graph.value(t).dtype, graph.value(t).shape)
        b = _Boundary(graph, f"{t}:to_nc1hwc0")
        x = b.op("Cast", [inner], to=dtype_to_onnx(np.float16))
        if c % C0:
            x = b.op("Concat", [x, b.const(np.zeros((n, c1 * C0 - c, h, w), np.float16))], axis=1)
        x = b.op("Reshape", [x, b.const(np.array([n, c1, C0, h, w], np.int64))])
        b.op("Transpose", [x], out=t, perm=[0, 1, 3, 4, 2])                             # [N, C1, H, W, C0]
        graph.nodes.extend(b.nodes)
        graph.values[t] = Value(t, np.dtype(np.float16), (n, c1, h, w, C0))
        done.append(t)
    return done


def _nchw(graph: Graph, name: str, option: str, role: str) -> tuple[int, int, int, int]:
    shape = graph.value(name).shape
    if shape is None or len(shape) != 4 or not all(isinstance(d, int) and d > 0 for d in shape):
        raise GeError(f"{option}: {role} '{name}' has shape {shape}; NC1HWC0 needs a static 4-D NCHW tensor")
    return tuple(shape)


class _Boundary:
    """Nodes and constants of one boundary conversion, named after it."""

    def __init__(self, graph: Graph, prefix: str):
        self.graph, self.prefix, self.nodes = graph, prefix, []

    def const(self, array: np.ndarray) -> str:
        name = f"{self.prefix}/const{len(self.nodes)}_{len(self.graph.initializers)}"
        self.graph.initializers[name] = array
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        out = out or f"{self.prefix}/{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(Node(op_type, inputs, [out], attrs, name=f"{self.prefix}/{op_type}{len(self.nodes)}"))
        self.graph.value(out)
        return out


def cast_outputs(graph: Graph, spec: str) -> dict[str, str]:
    """--output_type: {output tensor: dtype name} of the Casts added."""
    option = "--output_type"
    entries = [e.strip() for e in spec.split(";") if e.strip()]
    wanted: dict[int, np.dtype] = {}
    if len(entries) == 1 and ":" not in entries[0]:
        dtype = _dtype(entries[0], option)
        wanted = {j: dtype for j in range(len(graph.outputs))}
    else:
        producers = {n.name: n for n in graph.nodes if n.name}
        for e in entries:
            parts = e.rsplit(":", 2)
            if len(parts) != 3 or not parts[1].strip().isdigit():
                raise GeError(f"{option}: '{e}' is not 'node:index:dtype' (or one dtype for every output)")
            node, index, dtype = parts[0].strip(), int(parts[1]), _dtype(parts[2].strip(), option)
            tensor = _output_of(graph, producers, node, index, option)
            wanted[graph.outputs.index(tensor)] = dtype
    done = {}
    for j, dtype in sorted(wanted.items()):
        t = graph.outputs[j]
        v = graph.value(t)
        if v.dtype is not None and np.dtype(v.dtype) == dtype:
            continue
        inner = f"{t}:before_output_cast"
        if t in graph.inputs or t in graph.initializers:  # nothing computes it: the Cast gets a name of its own
            inner, t = t, f"{t}:{dtype.name}"
            graph.outputs[j] = t
        else:
            _rename_uses(graph, t, inner, outputs=True)
            graph.values[inner] = Value(inner, v.dtype, v.shape)
        graph.nodes.append(Node("Cast", [inner], [t], {"to": dtype_to_onnx(dtype)}, name=f"{t}:output_type_cast"))
        graph.values[t] = Value(t, dtype, graph.value(inner).shape)
        log.debug("--output_type: output '%s' is cast to %s", t, dtype.name)
        done[t] = dtype.name
    return done


def _output_of(graph: Graph, producers: dict, node: str, index: int, option: str) -> str:
    if node in producers:
        outs = producers[node].outputs
        if index >= len(outs) or not outs[index]:
            raise GeError(f"{option}: node '{node}' has no output {index}")
        tensor = outs[index]
    elif node in graph.outputs and index == 0:  # ONNX users often name the output tensor
        tensor = node
    else:
        raise GeError(f"{option}: '{node}' is neither a node nor a model output")
    if tensor not in graph.outputs:
        raise GeError(f"{option}: output {index} of '{node}' ('{tensor}') is not a model output "
                      f"({', '.join(graph.outputs)})")
    return tensor


def _rename_uses(graph: Graph, old: str, new: str, outputs: bool) -> None:
    """Every reader of `old` reads `new`; with `outputs`, its producer writes `new` too."""
    for n in graph.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]
        if outputs:
            n.outputs = [new if o == old else o for o in n.outputs]
