"""A failing case's category: why it fails, in words the lead can assign work by."""
from __future__ import annotations

import re

from .runner import COMPILE, CRASH, MISMATCH, Result

CONTROL_FLOW = {"If", "Loop", "Scan"}
SEQUENCES = {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength",
             "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
             "OptionalHasElement"}
STRINGS = {"StringNormalizer", "StringSplit", "StringConcat", "RegexFullMatch", "TfIdfVectorizer"}


#: cases ge fails on purpose, by name prefix, and why
KNOWN = {
    "test_bernoulli": "random output (onnx's data is one draw of numpy's generator)",
    "test_attention_4d_causal_fp16_expanded": "float16 rounding: onnx's reference rounds each step of the float16 "
                                              "Softmax, ge (as onnxruntime) computes it in float32 and rounds once; "
                                              "all three differ by 1 ulp",
    "test_maxunpool_export_with_output_shape": "ge follows onnxruntime and PyTorch (indices into output_shape), "
                                               "onnx's data keeps the default shape's coordinates",
    "test_resize_downsample_scales_cubic_align_corners": "ge follows onnxruntime and PyTorch (the integer output "
                                                         "length), onnx's data divides by length * scale",
    "test_resize_downsample_scales_linear_align_corners": "ge follows onnxruntime and PyTorch (the integer output "
                                                          "length), onnx's data divides by length * scale",
}


def category(r: Result) -> str:
    m = r.message
    if r.passed:
        return ""
    for prefix, why in KNOWN.items():
        if r.name.startswith(prefix):
            return why
    if re.search(r"opset \d+ of the default domain", m):
        return "opset outside 7..newest"
    if "sequence_type" in m or "optional_type" in m or "sequence" in m.lower() and "not a tensor" in m:
        return "sequence/optional values"
    if "STRING" in m or "string" in m and "dtype" in m:
        return "string tensors"
    if "is a subgraph" in m:
        return "control flow (If/Loop/Scan)"
    if "bfloat16" in m and ("takes" in m or "not supported" in m):
        return "bfloat16 arithmetic"
    ops = re.findall(r"'[^']*' \(([\w.:]+)\)", m) if "no kernel" in m else re.findall(r"op ([\w.:]+) is not supported", m)
    if ops:
        names = {o.split("::")[-1] for o in ops}
        if names & CONTROL_FLOW:
            return "control flow (If/Loop/Scan)"
        if names & SEQUENCES:
            return "sequence/optional values"
        if names & STRINGS:
            return "string tensors"
        if any("::" in o for o in ops):
            return "no kernel: " + ", ".join(sorted({o.split("::")[0] for o in ops if "::" in o})) + " domain"
        return "no kernel: " + ", ".join(sorted(names))
    if re.search(r"element type|dtype|bfloat16|float8|int4|uint4|float4|int2", m) and r.status == COMPILE:
        return "unsupported dtype"
    if r.status == MISMATCH:
        return "wrong result"
    if r.status == CRASH:
        return "ge bug (exception)"
    return f"{r.status} error"
