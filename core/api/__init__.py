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

The conversion is imported on first use of its names: loading and running an OM never imports
the compiler, as a deployed ACL runtime has no ATC in it.
"""
from ..model.errors import GeError
from ..acl.models import (default_weight_dir, execute, free, gear_sizes, load_from_file, load_from_mem, malloc,
                          memcpy_h2d, model, model_manager, query_size, set_dynamic_batch_size, set_dynamic_hw_size,
                          set_input_dynamic_dims, soc_info, unload)
from ..acl.dataset import run_dataset
from ..acl.aipp import dynamic_aipp_data
from ..inspection.om_info import INSPECT_SECTIONS, inspect, inspect_section, model_info, om_to_json, plot_memory
from ..jsonable import jsonable
from ..version import kernels, version
from ..acl.profiling import dump, profile
from ..acl import inference, runner
from ..shape_options import parse_shape_spec
from ..model.soc import DEFAULT_SOC

_CONVERSION = ("atc", "AtcResult", "om_path_for", "precheck")


def __getattr__(name: str):
    if name in _CONVERSION:
        from ..atc import conversion, pre_check
        return getattr(conversion if name != "precheck" else pre_check, name)
    if name == "compare":  # ge compare: the reference side imports onnxruntime or onnx.reference
        from ..inspection.comparison import compare
        return compare
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
