"""Run one conformance case through ge's Python API, as a user would: the model compiled by
`api.atc` (its symbolic dims fixed from the case's inputs, as `--input_shape` would), the OM
loaded from memory on each device, executed, and every output compared as onnx's own runner
does (same count, shape and dtype; np.testing.assert_allclose at the case's rtol/atol, exact
for strings)."""
from __future__ import annotations

import os
import tempfile
import traceback
from dataclasses import dataclass, field

import numpy as np
import onnx

from ge.core import api
from ge.core.model.errors import GeError

from .cases import Case

DEVICES = ("cpu", "sim")
PASS, COMPILE, RUN, MISMATCH, CRASH = "pass", "compile", "run", "mismatch", "crash"


@dataclass
class Result:
    name: str
    op: str
    kind: str
    status: str  # PASS, or the stage that failed
    message: str = ""  # the first failure: "[device] ..." for RUN/MISMATCH
    devices: dict = field(default_factory=dict)  # device -> PASS or its failure status

    @property
    def passed(self) -> bool:
        return self.status == PASS


def run_case(case: Case, devices=DEVICES) -> Result:
    result = Result(case.name, case.op, case.kind, PASS)
    with tempfile.TemporaryDirectory(prefix="ge-conformance-") as tmp:
        try:
            om = _compile(case, tmp)
        except GeError as e:  # (the temporary folder named as the case)
            return _fail(result, COMPILE, _line(e).replace(os.path.join(tmp, "model.onnx"), case.name))
        except Exception as e:  # a bug of ge's, not a refusal: say where
            return _fail(result, CRASH, f"compile: {_crash(e)}")
    for device in devices:
        status, message = _run(case, om, device)
        result.devices[device] = status
        if status != PASS and result.status == PASS:
            _fail(result, status, f"[{device}] {message}")
    return result


def _compile(case: Case, tmp: str) -> bytes:
    path = os.path.join(tmp, "model.onnx")
    onnx.save(case.model, path)
    shapes = _input_shapes(case)
    out = api.atc(path, os.path.join(tmp, "model"), input_shape=shapes or None)
    with open(out.om_path, "rb") as f:
        return f.read()


def _input_shapes(case: Case) -> dict:
    """The shapes of the inputs whose declared dims are not all fixed, from the first data set."""
    inits = {t.name for t in case.model.graph.initializer}
    declared = [vi for vi in case.model.graph.input if vi.name not in inits]
    if not case.data_sets:
        return {}
    shapes = {}
    for vi, x in zip(declared, case.data_sets[0][0]):
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and isinstance(x, np.ndarray) and (
                not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim)):
            shapes[vi.name] = list(x.shape)
    return shapes


def _run(case: Case, om: bytes, device: str) -> tuple[str, str]:
    try:
        model_id = api.load_from_mem(om, device)
    except GeError as e:
        return RUN, f"load: {_line(e)}"
    except Exception as e:
        return CRASH, f"load: {_crash(e)}"
    try:
        names = [d.name for d in api.model(model_id).inputs]
        declared = [vi.name for vi in case.model.graph.input]
        for inputs, expected in case.data_sets:
            by_name = dict(zip(declared, inputs))
            missing = [n for n in names if n not in by_name]
            if missing:
                return RUN, f"the OM's inputs {missing} are not inputs of the case"
            try:
                with np.errstate(all="ignore"):
                    outputs = api.execute(model_id, [by_name[n] for n in names])
            except GeError as e:
                return RUN, _line(e)
            except Exception as e:
                return CRASH, f"run: {_crash(e)}"
            problem = compare(expected, outputs, case.rtol, case.atol)
            if problem:
                return MISMATCH, problem
        return PASS, ""
    finally:
        api.unload(model_id)


def compare(expected, actual, rtol: float, atol: float) -> str:
    """onnx's runner's assert_similar_outputs; '' when they match, else the first difference."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for i, (ref, out) in enumerate(zip(expected, actual)):
        if ref is None or out is None:  # an empty optional
            if ref is not out:
                return f"output {i}: {'an empty optional' if out is None else 'a value'}, expected " \
                       f"{'an empty optional' if ref is None else 'a value'}"
            continue
        if isinstance(ref, (list, tuple)):
            if not isinstance(out, (list, tuple)):
                return f"output {i}: a {type(out).__name__}, expected a sequence"
            problem = compare(ref, out, rtol, atol)
            if problem:
                return f"output {i}: {problem}"
            continue
        out = np.asarray(out)
        if out.shape != ref.shape:
            return f"output {i}: shape {list(out.shape)}, expected {list(ref.shape)}"
        try:
            if ref.dtype == object:
                np.testing.assert_array_equal(out, ref)
                continue
            if out.dtype != ref.dtype:
                return f"output {i}: dtype {out.dtype}, expected {ref.dtype}"
            out_rtol = rtol
            if out.dtype.name == "bfloat16":
                out_rtol, out, ref = max(rtol, 2**-6), out.astype(np.float32), ref.astype(np.float32)
            np.testing.assert_allclose(out, ref, rtol=out_rtol, atol=atol)
        except AssertionError as e:
            detail = [ln.strip() for ln in str(e).splitlines() if ln.strip().startswith(("Mismatched", "Max abs"))]
            return f"output {i}: values differ ({'; '.join(detail) or _line(e)})"
    return ""


def _fail(result: Result, status: str, message: str) -> Result:
    result.status, result.message = status, message
    return result


def _line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _crash(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {_line(e)} ({os.path.basename(frame.filename)}:{frame.lineno})"
