"""Run one conformance case as a user with files does: `ge atc` on the case's model, then for each
of its data sets `ge run --input test_data_set_N --outfmt pb`, the outputs read back from their
output_K.pb files as onnx's runner reads them and compared as runner.compare does. The data sets are
onnx's own layout: the data kinds' shipped test_data_set_N folders, and for the node cases (the
wheel ships no data for them) the same folders written with onnx's numpy_helper. The command line
runs in this process (click's CliRunner): the same code as `ge` on a shell, without a process per
call."""
from __future__ import annotations

import glob
import os
import tempfile

import onnx
from click.testing import CliRunner
from onnx import numpy_helper

from ge.cli.main import cli

from .cases import Case, _read_pb
from .runner import COMPILE, CRASH, MISMATCH, PASS, RUN, DEVICES, Result, _fail, _input_shapes, compare

_CLI = CliRunner()


def run_case_files(case: Case, devices=DEVICES) -> Result:
    result = Result(case.name, case.op, case.kind, PASS)
    with tempfile.TemporaryDirectory(prefix="ge-conformance-files-") as tmp:
        model = os.path.join(tmp, "model.onnx")
        onnx.save(case.model, model)
        shapes = _input_shapes(case)  # (a dim of 0 is unknown: ATC's --input_shape refuses 0)
        spec = ";".join(f"{name}:{','.join(str(d or -1) for d in dims)}" for name, dims in shapes.items())
        status, message = _ge(["atc", "--model", model, "--framework", "5", "--output", os.path.join(tmp, "model"),
                               *(["--input_shape", spec] if spec else [])], COMPILE)
        if status != PASS:
            return _fail(result, status, message.replace(model, case.name))
        folders = _data_sets(case, tmp)
        for device in devices:
            status, message = _run(case, tmp, folders, device)
            result.devices[device] = status
            if status != PASS and result.status == PASS:
                _fail(result, status, f"[{device}] {message}")
    return result


def _run(case: Case, tmp: str, folders: list[str], device: str) -> tuple[str, str]:
    for k, (folder, (_, expected)) in enumerate(zip(folders, case.data_sets)):
        out = os.path.join(tmp, f"out_{device}_{k}")
        status, message = _ge(["run", os.path.join(tmp, "model.om"), "--input", folder, "--output-dir", out,
                               "--outfmt", "pb", "--device", device], RUN)
        if status != PASS:
            return status, message
        outputs = [_read_pb(os.path.join(out, f"model_output_{i}.pb"), vi.type)
                   for i, vi in enumerate(case.model.graph.output)]
        problem = compare(expected, outputs, case.rtol, case.atol)
        if problem:
            return MISMATCH, problem
    return PASS, ""


def _data_sets(case: Case, tmp: str) -> list[str]:
    """The case's test_data_set_N folders: onnx's own for the data kinds, else written here as onnx
    writes them (a value per graph input that is not an initializer, by its type)."""
    if case.kind != "node":
        root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", case.kind, case.name)
        return sorted(glob.glob(os.path.join(root, "test_data_set_*")))
    inits = {t.name for t in case.model.graph.initializer}
    declared = [vi for vi in case.model.graph.input if vi.name not in inits]
    folders = []
    for k, (inputs, _) in enumerate(case.data_sets):
        folder = os.path.join(tmp, f"test_data_set_{k}")
        os.makedirs(folder)
        for i, (vi, x) in enumerate(zip(declared, inputs)):
            with open(os.path.join(folder, f"input_{i}.pb"), "wb") as f:
                f.write(_proto(vi, x).SerializeToString())
        folders.append(folder)
    return folders


def _proto(vi: onnx.ValueInfoProto, x):
    which = vi.type.WhichOneof("value")
    if which == "optional_type":
        return numpy_helper.from_optional(x, vi.name)
    if which == "sequence_type":
        return numpy_helper.from_list(x, vi.name)
    return numpy_helper.from_array(x, vi.name)


def _ge(args: list[str], failed: str) -> tuple[str, str]:
    """(PASS, "") or (the status, the error line) of one `ge` command."""
    r = _CLI.invoke(cli, args)
    if r.exit_code == 0:
        return PASS, ""
    lines = [ln.strip() for ln in (r.output or "").splitlines() if ln.strip()]
    line = next((ln for ln in lines if ln.startswith(("error:", "internal error:"))), lines[-1] if lines else
                repr(r.exception))
    return (CRASH if line.startswith("internal error:") or r.exception and not isinstance(r.exception, SystemExit)
            else failed), line[:300]
