"""ge's native kernels (csrc/, built once per instruction-set level as the extensions _native_<level>),
reached through ctypes: the GEMM C = act(alpha A @ B + bias + Z) (also as a batch of products), the
direct and the depthwise convolution, the convolution and the depthwise convolution in the blocked NCHW16c
layout and its reorders (nchwc.py), MaxPool, the phase fill, LayerNormalization and Softmax rows
(float32); fused elementwise chains (float32/64, int32/64); float16 <-> float32 conversion; the int8
kernels of csrc/qgemm.c (the u8 x s8 product, the int8 depthwise convolution, QLinearAdd,
DynamicQuantizeLinear; int8_native.py plans them).

setup.py builds the same sources for each level of native_levels.py (x86-64-v2, -v3, -v4, ...: no
library is built for the installing CPU alone), when a C compiler is there (optional: without one
the install succeeds, `native()` is None, the kernels keep their numpy plans, and the first use
warns; importing prints nothing). At first use, native() loads the best level the CPU's features allow (read from
/proc/cpuinfo; GE_NATIVE_LEVEL=<level> asks for one, GE_NO_NATIVE=1 for none); the argument structs'
layouts the library exports (csrc/module.c) are compared with abi.py's ctypes classes, and a
self-test checks the library against numpy, before anything uses it; either failing leaves the
numpy plans. status() says which ran and why (`ge --version`, `ge run --verbose`).

Operands, as csrc/gemm.c documents: A row-major or prepacked (weights, once at load); B gathered
through offset tables, B[k, n] = b[koff[k] + noff[n]] (a plain matrix, or a convolution's input,
so that im2col is the packing), or prepacked. Threads: a per-calling-thread count, set with
blas.set_local_threads together with OpenBLAS's (concurrent contexts use one each).

The package, by role: abi.py (generated from csrc/abi.h by generate.py: constants, structs,
signatures), binding.py (Native: a method per kernel), calls.py (prepared calls, thread counts),
loader.py (levels, CPU features, ABI check, self-test, status).
"""
from .abi import *  # noqa: F401,F403  the constants and structs of csrc/abi.h
from .binding import ALIGN, GELU, GEMM_SLOTS, Act, Native, aligned_empty, broadcast_pattern
from .calls import (CallCache, CallSequence, PreparedCall, default_threads, prepared_calls, run_for_threads, set_threads,
                    threads)
from .loader import (Unavailable, abi_mismatches, built_levels, choose_level, cpu_flags, load, load_level, native,
                     status, warn_if_not_built)
