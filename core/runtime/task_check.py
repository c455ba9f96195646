"""A loaded OM's tasks checked against their ops' specs, the half of an OM's validation the
format reader cannot do (formats/om knows msgpack and the layout, not the ops):

- before any kernel is built, each task's attributes against its op's onnx schema: of the declared
  type, and for a model read from a file every attribute with a default present (ge writes them
  all; a missing one would silently take the default);
- while building, a kernel that refuses the task is a FormatError naming the task, whatever it
  raised (an attribute value in range for its type but not for the op, e.g. a stride of 2**62);
- after building, the output metas the kernel computes from its inputs and attributes must be the
  ones the task declares: a task whose attributes were edited to another valid-looking value
  (pads, strides, a kernel shape) would otherwise write a different tensor into the same place.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..model.errors import FormatError, GeError
from ..model.ir import Meta
from ..kernels.epilogue import ATTR as EPILOGUE
from ..kernels.fused import GE_DOMAIN
from ..kernels.schema import attribute_problem
from ...formats.om.decode import clip, show
from ...formats.om.schema import MAX_OPSET

# what a kernel raises when the values it was given do not fit its op (kernels raise GeError for
# the cases they check; a stored file can reach the others)
_KERNEL_REFUSALS = (TypeError, ValueError, IndexError, KeyError, OverflowError, ZeroDivisionError, ArithmeticError,
                    AttributeError, MemoryError, RecursionError, NotImplementedError)


def task_label(model: str, k: int, node: str, op_type: str) -> str:
    return f"model '{clip(model)}': TASK_INFO.tasks[{k}] '{clip(node)}' ({clip(op_type)})"


def check_attributes(where: str, domain: str, op_type: str, opset: int, attrs: dict, complete: bool) -> None:
    if type(opset) is not int or not 1 <= opset <= MAX_OPSET:
        raise FormatError(f"{where}: opset {opset!r} is not in [1, {MAX_OPSET}]")
    problem = attribute_problem(domain, op_type, opset, attrs, complete)
    if problem is None and EPILOGUE in attrs:
        problem = epilogue_problem(attrs[EPILOGUE], opset, complete)
    if problem:
        raise FormatError(f"{where}: {problem}")


def epilogue_problem(spec, opset: int, complete: bool) -> str | None:
    """The fused activations a task applies to its output (kernels/epilogue.py): a non-empty list
    of [op_type, attrs] of default-domain ops or [op_type, attrs, domain] of ge's own (Swish), each
    step's attributes as its schema says (Clip's bounds travel as numbers "min"/"max")."""
    where = f"attrs['{EPILOGUE}']"
    if type(spec) is not list or not spec:
        return f"{where} must be a non-empty list of [op_type, attrs], got {show(spec)}"
    for j, step in enumerate(spec):
        if (type(step) is not list or len(step) not in (2, 3) or type(step[0]) is not str or type(step[1]) is not dict
                or (len(step) == 3 and step[2] not in ("", GE_DOMAIN))):
            return f"{where}[{j}] must be [op_type, attrs] or [op_type, attrs, '{GE_DOMAIN}'], got {show(step)}"
        op_type, attrs, domain = step[0], step[1], step[2] if len(step) == 3 else ""
        if op_type == "Clip":
            bad = next((k for k, v in attrs.items() if k not in ("min", "max") or type(v) not in (int, float)), None)
            if bad is not None:
                return f"{where}[{j}] (Clip): attrs['{bad}'] must be a number 'min' or 'max', got {show(attrs[bad])}"
            continue
        problem = attribute_problem(domain, op_type, opset, attrs, complete)
        if problem:
            return f"{where}[{j}] ({op_type}): {problem}"
    return None


def check_model_tasks(ge_model, complete: bool = False) -> None:
    """Every task of a static GeModel (and of a dynamic model's submodels and root nodes).
    `complete` (a model read from a file): every attribute with a schema default is present."""
    for k, td in enumerate(getattr(ge_model, "tasks", ())):
        check_attributes(task_label(ge_model.name, k, td.node, td.op_type), td.domain, td.op_type, td.opset, td.attrs,
                         complete)
    for k, node in enumerate(getattr(ge_model, "nodes", ())):
        check_attributes(f"model '{clip(ge_model.name)}': root TASK_INFO.nodes[{k}] '{clip(node.name)}' "
                         f"({clip(node.op_type)})",
                         node.domain, node.op_type, node.opset, node.attrs, complete)
    for sub in getattr(ge_model, "submodels", ()):
        check_model_tasks(sub, complete)
    for sub in getattr(ge_model, "subgraphs", ()):  # control-flow bodies (format 1.5)
        check_model_tasks(sub, complete)


def built_kernel(where: str, build: Callable, declared: Sequence[Meta | None]):
    """build() the task's kernel; refused or disagreeing with the declared outputs: FormatError."""
    try:
        kernel = build()
        metas = kernel.infer()
    except GeError as e:
        raise FormatError(f"{where}: {e}") from None
    except _KERNEL_REFUSALS as e:
        raise FormatError(f"{where}: its attributes or arguments do not fit the op ({type(e).__name__}: "
                          f"{str(e)[:120]})") from None
    for j, (got, want) in enumerate(zip(metas, declared)):
        if want is not None and (got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape)):
            raise FormatError(f"{where}: outputs[{j}] is declared {want.dtype} {list(want.shape)} but the op "
                              f"computes {got.dtype} {list(got.shape)} from its inputs and attributes")
    return kernel
