"""ATC's small configuration files, parsed and checked (every error names the file and line):

    --fusion_switch_file   {"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off", "ALL": "off"},
                                       "UBFusion": {...}}}          (or the older "PassName:off" lines)
    --op_precision_mode    an ini file: [ByOpType] optype=mode, [ByNodeName] node=mode
    --keep_dtype           one node name per line, or OpType::type
    --modify_mixlist       {"allow_mix_precision": {"black-list"|"white-list"|"gray-list": {"to-add": [...],
                           "to-remove": [...]}}} (the mode's key may be left out)
    --customize_dtypes     [OpName::|OpType::]name::InputDtype:d1,d2,...,OutputDtype:d1,...
"""
from __future__ import annotations

import re

from ..core.model.errors import GeError

FUSION_SECTIONS = ("GraphFusion", "UBFusion")
OP_PRECISION_SECTIONS = ("ByOpType", "ByNodeName")
OP_PRECISION_MODES = ("high_precision", "high_performance", "enable_float_32_execution",
                      "enable_hi_float_32_execution", "support_out_of_bound_index", "keep_fp16", "super_performance")
MIXLISTS = ("black-list", "white-list", "gray-list")
CUSTOM_DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                 "uint64", "bool", "bfloat16")


def _text(path: str, option: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise GeError(f"{option}: cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise GeError(f"{option}: {path} is not a UTF-8 text file") from None


def _json(path: str, option: str):
    import json  # (here: most compiles read no configuration file, and json is ~38 M instructions to compile)
    text = _text(path, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GeError(f"{option}: {path} line {e.lineno}: not valid JSON ({e.msg})") from None


def _lines(text: str):
    """(line number, stripped line) for every line that is not blank or a # comment."""
    for no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield no, line


def read_fusion_switch(path: str) -> dict[str, dict[str, bool]]:
    """{"GraphFusion": {pass name: on?}, "UBFusion": {...}}; "ALL" is a name like the others."""
    option = "--fusion_switch_file"
    text = _text(path, option)
    if not text.lstrip().startswith("{"):  # the older form: one "PassName:off" per line, graph fusions
        out: dict[str, dict[str, bool]] = {s: {} for s in FUSION_SECTIONS}
        for no, line in _lines(text):
            name, sep, value = line.partition(":")
            out["GraphFusion"][name.strip()] = _switch(value.strip() if sep else "", f"{path} line {no}", option)
        return out
    data = _json(path, option)
    if not isinstance(data, dict) or set(data) != {"Switch"} or not isinstance(data["Switch"], dict):
        raise GeError(f"{option}: {path} must hold one object {{\"Switch\": {{\"GraphFusion\": {{...}}, "
                      f"\"UBFusion\": {{...}}}}}}")
    out = {s: {} for s in FUSION_SECTIONS}
    for section, passes in data["Switch"].items():
        if section not in FUSION_SECTIONS:
            raise GeError(f"{option}: {path}: section {section!r} is not one of {', '.join(FUSION_SECTIONS)}")
        if not isinstance(passes, dict):
            raise GeError(f"{option}: {path}: {section} must map pass names to \"on\" or \"off\"")
        for name, value in passes.items():
            out[section][name] = _switch(value, f"{path} {section}.{name}", option)
    return out


def _switch(value, where: str, option: str) -> bool:
    if value not in ("on", "off"):
        raise GeError(f"{option}: {where}: value {value!r} must be \"on\" or \"off\"")
    return value == "on"


def read_op_precision_mode(path: str) -> dict[str, dict[str, str]]:
    """{"ByOpType": {op type: mode}, "ByNodeName": {node: mode}}; lines before any section are by op type."""
    option = "--op_precision_mode"
    out: dict[str, dict[str, str]] = {s: {} for s in OP_PRECISION_SECTIONS}
    section = "ByOpType"
    for no, line in _lines(_text(path, option)):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            if section not in OP_PRECISION_SECTIONS:
                raise GeError(f"{option}: {path} line {no}: section [{section}] is not "
                              f"{' or '.join(f'[{s}]' for s in OP_PRECISION_SECTIONS)}")
            continue
        key, sep, mode = (p.strip() for p in line.partition("="))
        if not sep or not key:
            raise GeError(f"{option}: {path} line {no}: '{line}' is not 'name=mode'")
        if mode not in OP_PRECISION_MODES:
            raise GeError(f"{option}: {path} line {no}: mode {mode!r} of '{key}' is not one of "
                          f"{', '.join(OP_PRECISION_MODES)}")
        out[section][key] = mode
    return out


def read_keep_dtype(path: str) -> dict[str, list[str]]:
    """{"op_names": [...], "op_types": [...]}: the nodes that keep their original dtype."""
    out: dict[str, list[str]] = {"op_names": [], "op_types": []}
    for no, line in _lines(_text(path, "--keep_dtype")):
        kind, sep, name = line.partition("::")
        if not sep:
            out["op_names"].append(line)
        elif kind in ("OpType", "OpName") and name.strip():
            out["op_types" if kind == "OpType" else "op_names"].append(name.strip())
        else:
            raise GeError(f"--keep_dtype: {path} line {no}: '{line}' is not a node name or 'OpType::type'")
    return out


MIXLIST_MODES = ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16", "mixed_float16",
                 "mixed_bfloat16")


def read_modify_mixlist(path: str) -> dict[str, dict[str, list[str]]]:
    """{list name: {"to-add": [op types], "to-remove": [...]}} (the mode's key taken off)."""
    option = "--modify_mixlist"
    data = _json(path, option)
    if isinstance(data, dict) and len(data) == 1 and next(iter(data)) in MIXLIST_MODES:
        data = next(iter(data.values()))
    if not isinstance(data, dict):
        raise GeError(f"{option}: {path} must hold an object {{\"allow_mix_precision\": {{list: changes}}}} with lists "
                      f"{', '.join(MIXLISTS)}")
    for name, change in data.items():
        if name not in MIXLISTS:
            raise GeError(f"{option}: {path}: {name!r} is not one of {', '.join(MIXLISTS)}")
        if not isinstance(change, dict) or not set(change) <= {"to-add", "to-remove"}:
            raise GeError(f"{option}: {path}: {name} must be {{\"to-add\": [op types], \"to-remove\": [op types]}}")
        for key, ops in change.items():
            if not isinstance(ops, list) or not all(isinstance(o, str) and o for o in ops):
                raise GeError(f"{option}: {path}: {name}.{key} must be a list of op type names")
    return data


_CUSTOM = re.compile(r"InputDtype:(?P<inputs>[\w,]*?),?OutputDtype:(?P<outputs>[\w,]+)|"
                     r"InputDtype:(?P<only_inputs>[\w,]+)|OutputDtype:(?P<only_outputs>[\w,]+)")


def read_customize_dtypes(path: str) -> list[dict]:
    """[{"by": "op_name"|"op_type", "name", "inputs": [dtype], "outputs": [dtype]}]."""
    option = "--customize_dtypes"
    out = []
    for no, line in _lines(_text(path, option)):
        parts = line.split("::")
        by = "op_name"
        if parts[0] in ("OpType", "OpName"):
            by = "op_type" if parts[0] == "OpType" else "op_name"
            parts = parts[1:]
        m = _CUSTOM.fullmatch(parts[-1].replace(" ", "")) if len(parts) == 2 else None
        if m is None or not parts[0]:
            raise GeError(f"{option}: {path} line {no}: '{line}' is not "
                          f"'[OpType::]name::InputDtype:d1,...,OutputDtype:d1,...'")
        inputs = [d for d in (m["inputs"] or m["only_inputs"] or "").split(",") if d]
        outputs = [d for d in (m["outputs"] or m["only_outputs"] or "").split(",") if d]
        bad = [d for d in inputs + outputs if d not in CUSTOM_DTYPES]
        if bad:
            raise GeError(f"{option}: {path} line {no}: dtype {bad[0]!r} is not one of {', '.join(CUSTOM_DTYPES)}")
        out.append({"by": by, "name": parts[0], "inputs": inputs, "outputs": outputs})
    return out
