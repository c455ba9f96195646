"""The Python face of everything the `ge` commands do (ACL's aclmdl* calls and ATC's conversion).

    from ge.cli import api
    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")
    model_id = api.load_from_file("out/model.om", device="sim")
    outputs = api.execute(model_id, [x])
    api.unload(model_id)
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..core.compile.build import build
from ..core.compile.summary import summarize
from ..core.errors import GeError
from ..core.ge_model import GeModel
from ..core.passes import optimize
from ..core.runtime.model_manager import ModelManager
from ..formats.om import read_om, write_om
from ..formats.onnx.importer import load_onnx

DEFAULT_SOC = "Ascend-sim"


@dataclass
class AtcResult:
    om_path: str
    model: GeModel
    summary: dict


def parse_input_shape(spec: str | None) -> dict[str, list[int]]:
    """ATC's --input_shape "in:1,3,224,224;in2:1,10" -> {"in": [1, 3, 224, 224], "in2": [1, 10]}."""
    shapes: dict[str, list[int]] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise GeError(f"--input_shape: '{part}' is not 'name:d1,d2,...'")
        try:
            shapes[name] = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            raise GeError(f"--input_shape: dims of '{name}' must be integers, got '{dims}'") from None
        if any(d < 0 for d in shapes[name]):
            raise GeError(f"--input_shape: input '{name}' has negative dims {shapes[name]}; "
                          "dynamic dims need gears or ranges, not supported yet")
    return shapes


def om_path_for(output: str) -> str:
    """ATC appends .om to --output."""
    return output if output.endswith(".om") else output + ".om"


def atc(model: str, output: str, *, input_shape: str | dict | None = None, out_nodes: str | list | None = None,
        soc_version: str = DEFAULT_SOC, cmdline: str = "") -> AtcResult:
    """Compile an ONNX model into an OM file (ATC --framework=5)."""
    t0 = time.perf_counter()
    shapes = input_shape if isinstance(input_shape, dict) else parse_input_shape(input_shape)
    nodes = out_nodes.split(";") if isinstance(out_nodes, str) else out_nodes
    graph = load_onnx(model, shapes or None, [n for n in (nodes or []) if n] or None)
    report = optimize(graph)
    name = os.path.splitext(os.path.basename(om_path_for(output)))[0]
    ge_model = build(graph, name=name, soc_version=soc_version, atc_cmdline=cmdline)
    om_path = om_path_for(output)
    os.makedirs(os.path.dirname(os.path.abspath(om_path)), exist_ok=True)
    write_om(ge_model, om_path)
    return AtcResult(om_path, ge_model, summarize(ge_model, time.perf_counter() - t0, report))


# -- the runtime, ACL style: one process-wide ModelManager -------------------------------------
model_manager = ModelManager()


def load_from_file(path: str, device: str = "cpu") -> int:
    return model_manager.load(read_om(path), device)


def load_from_mem(data: bytes, device: str = "cpu") -> int:
    return model_manager.load(read_om(bytes(data)), device)


def query_size(path: str) -> tuple[int, int]:
    """(work size, weight size) in bytes, as aclmdlQuerySize."""
    m = read_om(path)
    return m.memory_size, m.weight_size


def execute(model_id: int, inputs, outputs=None, timeout: float | None = None):
    return model_manager.execute(model_id, inputs, outputs, timeout)


def unload(model_id: int) -> None:
    model_manager.unload(model_id)


def model(model_id: int):
    """The loaded DavinciModel (descs, contexts, timings)."""
    return model_manager.model(model_id)
