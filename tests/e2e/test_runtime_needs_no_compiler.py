"""A deployed runtime has no ATC in it: `ge run` of a static, gear, range or hybrid OM imports
neither ge.core.compile nor ge.core.passes (issue 13), nor onnx: what the runtime needs of an op's
schema is in the OM and the generated attribute table."""
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from ge.core import api

PROBE = """
import json, sys
from ge.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
compiler = sorted(m for m in sys.modules if m.startswith(("ge.core.compile", "ge.core.passes", "ge.formats.onnx")))
onnx = sorted(m for m in sys.modules if m == "onnx" or m.startswith("onnx."))
print(json.dumps({"code": code, "compiler": compiler, "onnx": onnx, "ml_dtypes": "ml_dtypes" in sys.modules}))
"""


@pytest.fixture(scope="module")
def bert_path(samples, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bert_rt") / "bert.onnx")
    onnx.save(samples.bert_style(layers=1, hidden=32, heads=2, intermediate=64, vocab=50), path)
    return path


@pytest.mark.parametrize("kind", ["static", "gears", "range", "hybrid"])
def test_ge_run_imports_no_compiler_nor_onnx(bert_path, tmp_path, kind):
    spec = {"static": "input_ids:2,8;attention_mask:2,8", "gears": "input_ids:-1,8;attention_mask:-1,8",
            "range": "input_ids:1~4,1~8;attention_mask:1~4,1~8", "hybrid": "input_ids:-1,-1;attention_mask:-1,-1"}[kind]
    dynamic = {"dynamic_batch_size": "1,2"} if kind == "gears" else {}
    om = api.atc(bert_path, str(tmp_path / kind), input_shape=spec, dynamic=dynamic).om_path
    shapes = ["--dymBatch", "2"] if kind == "gears" else []
    if kind == "range":  # inputs of a shape inside the range
        feeds = {"input_ids": np.ones((2, 8), np.int64), "attention_mask": np.ones((2, 8), np.int64)}
        np.savez(tmp_path / "feeds.npz", **feeds)
        shapes = ["--input", str(tmp_path / "feeds.npz")]
    if kind == "hybrid":  # onnx's own files, read and written without onnx
        folder = tmp_path / "test_data_set_0"
        folder.mkdir()
        for k in range(2):
            tensor = onnx.numpy_helper.from_array(np.ones((2, 8), np.int64))
            (folder / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
        shapes = ["--input", str(folder), "--outfmt", "pb"]
    r = subprocess.run([sys.executable, "-c", PROBE, "run", "--model", om, "--output-dir", str(tmp_path / "out"), *shapes],
                       capture_output=True, text=True, timeout=120)
    probe = json.loads(r.stdout.strip().splitlines()[-1])
    assert probe["code"] in (0, None), r.stderr
    assert probe["compiler"] == []
    assert probe["onnx"] == []


def test_ge_run_of_control_flow_imports_no_compiler_nor_onnx(tmp_path):
    """A Scan over a static body: its subgraph and submodel load and run without the compiler."""
    from onnx import TensorProto, helper
    F = TensorProto.FLOAT
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Relu", ["acc2"], ["y"])],
                             "body", [helper.make_tensor_value_info("acc", F, [4]), helper.make_tensor_value_info("x", F, [4])],
                             [helper.make_tensor_value_info("acc2", F, [4]), helper.make_tensor_value_info("y", F, [4])])
    g = helper.make_graph([helper.make_node("Scan", ["a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1)], "scan",
                          [helper.make_tensor_value_info("a0", F, [4]), helper.make_tensor_value_info("xs", F, [3, 4])],
                          [helper.make_tensor_value_info("a", F, [4]), helper.make_tensor_value_info("ys", F, [3, 4])])
    path = str(tmp_path / "scan.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    om = api.atc(path, str(tmp_path / "scan")).om_path
    r = subprocess.run([sys.executable, "-c", PROBE, "run", "--model", om, "--output-dir", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    probe = json.loads(r.stdout.strip().splitlines()[-1])
    assert probe["code"] in (0, None), r.stderr
    assert probe["compiler"] == []
    assert probe["onnx"] == []
    assert probe["ml_dtypes"] is False  # float32 control flow: no small type, no ml_dtypes (15-20 ms)


API_PROBE = """
import json, sys
import numpy as np
from ge.core import api
model_id = api.load_from_file(sys.argv[1])
outputs = api.execute(model_id, [np.ones((2, 8), np.int64), np.ones((2, 8), np.int64)])
assert all(np.isfinite(y).all() for y in outputs)
api.unload(model_id)
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("ge.core.atc", "ge.core.compile", "ge.core.inspection",
                                                               "ge.core.acl.dataset", "ge.core.acl.runner", "onnx")))))
"""


def test_the_python_api_loads_and_runs_with_the_runtime_only(bert_path, tmp_path):
    """ge.core.api gives every name on first use: a script that loads and runs imports no compiler,
    nor ge inspect's, the dataset runner's or onnx's modules."""
    om = api.atc(bert_path, str(tmp_path / "m"), input_shape="input_ids:2,8;attention_mask:2,8").om_path
    r = subprocess.run([sys.executable, "-c", API_PROBE, om], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def test_every_name_of_the_python_api_is_there():
    import ge.core.api as facade
    from ge.core.acl import models, runner
    from ge.core.atc import conversion
    found = {name: getattr(facade, name) for name in facade.__all__}  # (each imports its module)
    assert len(found) == 39 and set(facade.__all__) <= set(dir(facade))
    assert (found["load_from_file"], found["model_manager"], found["atc"], found["runner"]) == \
        (models.load_from_file, models.model_manager, conversion.atc, runner)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        facade.nothing


STDLIB_PROBE = """
import json, sys
import numpy as np
from ge.core import api
model_id = api.load_from_file(sys.argv[1])
api.execute(model_id, [np.ones((2, 8), np.int64), np.ones((2, 8), np.int64)])
api.unload(model_id)
print(json.dumps(sorted(m for m in ("logging", "queue", "dataclasses", "shlex", "threading", "copy") if m in sys.modules)))
"""


def test_loading_and_running_imports_no_stdlib_module_it_does_not_use(bert_path, tmp_path):
    """Where the standard library has no bytecode (containers' Python images) each module a process
    imports is compiled from source: `import logging` alone is ~160 M instructions there, a tenth of
    `import numpy`'s. A script that loads an OM and runs it on cpu leaves logging (used only for
    debug lines nobody configured), queue and threading (sim's streams), copy (the compiler's) and the rest out."""
    om = api.atc(bert_path, str(tmp_path / "m"), input_shape="input_ids:2,8;attention_mask:2,8").om_path
    r = subprocess.run([sys.executable, "-c", STDLIB_PROBE, om], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
