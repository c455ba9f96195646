"""The native binding is generated from csrc/abi.h (core/kernels/native/generate.py): the checked-in
abi.py and csrc/abi_layout.h are what the generator writes today, every function it declares is in
every built library, and the generator reads what the header says (a planted field shows up)."""
import ctypes

import pytest

from ge.core.kernels import native as native_mod
from ge.core.kernels.native import abi, generate


def test_the_generated_files_are_current():
    for path, text in generate.generated().items():
        with open(path) as f:
            assert f.read() == text, f"{path} is stale: run python -m ge.core.kernels.native.generate"


@pytest.mark.parametrize("level", list(native_mod.built_levels()))
def test_every_declared_function_is_exported(level):
    lib = ctypes.CDLL(native_mod.built_levels()[level])
    missing = [name for name in abi.SIGNATURES if not hasattr(lib, name)]
    assert missing == []


def test_the_generator_reads_the_header():
    with open(generate.HEADER) as f:
        text = f.read()
    header = generate.Header(text)
    names = [name for name, _ in header.structs]
    assert names[:3] == ["Activation", "GemmArgs", "GemmBatch"] and "Recurrent" in names
    assert ("EW_ROUND", 0x100) in header.constants and ("REC_LSTM", 2) in header.constants
    planted = generate.Header(text.replace("    int32_t half;  /* HALF_* bits", "    int64_t planted;\n    int32_t half;  /* HALF_* bits", 1))
    fields = dict(planted.structs)["GemmArgs"]
    assert [f for f, *_ in fields][-3:] == ["alpha", "planted", "half"]
    assert "FIELD(GemmArgs, planted)," in generate.layout_source(planted)


def test_the_binding_is_what_the_kernels_use():
    """The package's face re-exports the generated classes and constants (one definition each)."""
    assert native_mod.GemmArgs is abi.GemmArgs and native_mod.QOut is abi.QOut
    assert (native_mod.ACT_SWISH, native_mod.QOUT_S8, native_mod.EW_ERF) == (abi.ACT_SWISH, abi.QOUT_S8, abi.EW_ERF)
