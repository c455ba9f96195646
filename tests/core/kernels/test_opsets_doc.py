"""docs/opsets.md lists the ops ge compiles as they are registered (regenerate it with
`python -m tests.core.kernels.opsets_doc`)."""
from .opsets_doc import current_doc, updated


def test_opsets_doc_lists_every_op_ge_compiles():
    text = current_doc()
    assert text == updated(text), "docs/opsets.md is stale: run python -m tests.core.kernels.opsets_doc"
    assert "no kernel yet" not in text


def test_the_section_names_the_ops_with_their_kernels_versions():
    text = current_doc()
    assert "Conv (1, 11)" in text or "Conv (1" in text
    assert "RMSNormalization (23)" in text and "Attention (23" in text
