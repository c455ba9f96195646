"""ATC's I/O dtype options as Casts at the model boundary, before the passes run:

    --input_fp16_nodes "x;y"            the float inputs x and y take float16 data (Cast to their dtype)
    --output_type FP16                  every float output is cast to float16
    --output_type "conv:0:FP16;fc:0:UINT8"   per output: node name (or tensor name), output index, dtype

The user's I/O tensors keep their names; the Casts are ordinary ONNX Cast nodes, compiled like the rest.
"""
from __future__ import annotations

import numpy as np

from ..errors import GeError
from ..ir import Graph, Node, Value
from ..ir.graph import dtype_to_onnx

#: ATC's spellings of --output_type dtypes
ATC_DTYPES = {"FP32": np.float32, "FP16": np.float16, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16,
              "UINT16": np.uint16, "INT32": np.int32, "INT64": np.int64, "UINT32": np.uint32, "UINT64": np.uint64,
              "DOUBLE": np.float64}


def _dtype(name: str, option: str) -> np.dtype:
    if name.upper() not in ATC_DTYPES:
        raise GeError(f"{option}: dtype '{name}' is not one of {', '.join(ATC_DTYPES)}")
    return np.dtype(ATC_DTYPES[name.upper()])


def cast_inputs_from_fp16(graph: Graph, spec: str) -> list[str]:
    """--input_fp16_nodes: each named float input becomes float16, cast back to its dtype inside."""
    option = "--input_fp16_nodes"
    done = []
    for name in filter(None, (n.strip() for n in spec.split(";"))):
        if name not in graph.inputs:
            raise GeError(f"{option}: '{name}' is not a model input ({', '.join(graph.inputs)})")
        v = graph.value(name)
        if v.dtype is None or np.dtype(v.dtype).kind != "f":
            raise GeError(f"{option}: input '{name}' is {v.dtype}; only float inputs can take float16 data")
        if np.dtype(v.dtype) == np.float16:
            continue
        inside = f"{name}:from_fp16"
        _rename_uses(graph, name, inside, outputs=False)
        graph.nodes.insert(0, Node("Cast", [name], [inside], {"to": dtype_to_onnx(v.dtype)},
                                   name=f"{name}:input_fp16_cast"))
        graph.values[inside] = Value(inside, np.dtype(v.dtype), v.shape)
        v.dtype = np.dtype(np.float16)
        done.append(name)
    return done


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
