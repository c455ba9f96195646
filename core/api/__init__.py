"""ge's Python API: what the `ge` commands do, spelled after ACL's and ATC's calls. A facade over
the three rooms that do it: core/atc (ATC's driver), core/acl (the runtime face) and
core/inspection (ge inspect, ge compare).

    from ge.core import api
    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")    # atc/conversion.py
    model_id = api.load_from_file("out/model.om", device="sim")         # acl/models.py (the runtime)
    outputs = api.execute(model_id, [x])
    api.unload(model_id)
    api.inspect("out/model.om")                                          # inspection/om_info.py
    api.compare("model.onnx", "out/model.om")                            # inspection/comparison.py
    trace = api.profile(model_id, runs=10)                               # acl/profiling.py (ge run --profile)
    api.dump(model_id, inputs, "out/dump")                               # every op's outputs (--dump true)
    api.run_dataset(model_id, ["data/"], "out")                          # acl/dataset.py (ge run --input DIR)
    inference.select_gear(model_id, batch=4)                            # acl/inference.py: msame/ais_bench steps
    runner.run(runner.RunOptions("model.om", inputs=["data/"], output="out"))  # acl/runner.py: all of ge run
    inputs = inference.read_inputs(model_id, ["test_data_set_0"])     # ge run's input files (.npy, .pb ...)
    params = api.dynamic_aipp_data(model_id, "actual.config")          # acl/aipp.py: dynamic AIPP's input
    inference.write_outputs(model_id, outputs, "out", "model", "PB")   # and its output files (--outfmt)

Each name's module is imported on first use of the name: loading and running an OM imports the
runtime only (never the compiler, as a deployed ACL runtime has no ATC in it, nor ge inspect's or
the dataset runner's modules; all of them at once were ~70 M instructions of a load's process).
"""
import importlib

from ..model.errors import GeError

#: module (relative to ge.core) -> the names it gives the API
_FROM = {
    "acl.models": ("default_weight_dir", "execute", "free", "gear_sizes", "load_from_file", "load_from_mem", "malloc",
                   "memcpy_h2d", "model", "model_manager", "query_size", "set_dynamic_batch_size",
                   "set_dynamic_hw_size", "set_input_dynamic_dims", "soc_info", "unload"),
    "acl.dataset": ("run_dataset",),
    "acl.aipp": ("dynamic_aipp_data",),
    "acl.profiling": ("dump", "profile"),
    "acl": ("inference", "runner"),
    "inspection.om_info": ("INSPECT_SECTIONS", "inspect", "inspect_section", "model_info", "om_to_json",
                           "plot_memory"),
    "inspection.comparison": ("compare",),  # ge compare: its reference side imports onnxruntime or onnx.reference
    "jsonable": ("jsonable",),
    "version": ("kernels", "version"),
    "shape_options": ("parse_shape_spec",),
    "model.soc": ("DEFAULT_SOC",),
    "atc.conversion": ("atc", "AtcResult", "om_path_for"),
    "atc.pre_check": ("precheck",),
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}
__all__ = ["GeError", *_MODULE_OF]


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f"ge.core.{module}"), name)
    except AttributeError:  # a submodule (acl's inference and runner), not yet imported
        value = importlib.import_module(f"ge.core.{module}.{name}")
    globals()[name] = value  # (found by the module's dict from now on)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
