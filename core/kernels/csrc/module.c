/* The extension module (only so that setuptools builds and installs the library: ge calls the
kernels through ctypes, core/kernels/native/), the ABI layout table that the loader checks the
generated ctypes structs (native/abi.py) against at load, and what the library was built for: its level (setup.py defines
GE_LEVEL, the library is _native_<GE_LEVEL>) and the instruction sets the compiler targeted. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "abi.h"

#define SIZE(T) {#T, NULL, 0, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}
#define CONSTANT(name) {"", #name, 0, (int64_t)(name)} /* an enum's or #define's value, as its size */

static const AbiEntry layout[] = {
#include "abi_layout.h" /* generated from abi.h: python -m ge.core.kernels.native.generate */
    {NULL, NULL, 0, 0},
};

/* Every argument struct's size and every field's offset and size, then every constant (type ""),
   ended by a NULL type. */
const AbiEntry *ge_abi_layout(void) { return layout; }

#ifndef GE_LEVEL
#error "setup.py defines GE_LEVEL: the instruction-set level this library is built for"
#endif
#define STRING_(x) #x
#define STRING(x) STRING_(x)
#define INIT_(level) PyInit__native_##level
#define INIT(level) INIT_(level)

/* The level's name (native_levels.py), and the instruction sets of its compiled code, as the
   compiler's predefined macros say: what the level's flags gave, whatever else the build added. */
const char *ge_level(void) { return STRING(GE_LEVEL); }
const char *ge_isa(void) {
    return ""
#if defined(__SSE4_2__)
        " sse4.2"
#endif
#if defined(__AVX__)
        " avx"
#endif
#if defined(__AVX2__)
        " avx2"
#endif
#if defined(__FMA__)
        " fma"
#endif
#if defined(__F16C__)
        " f16c"
#endif
#if defined(__AVX512F__)
        " avx512f"
#endif
#if defined(__AVX512BW__)
        " avx512bw"
#endif
#if defined(__AVX512VNNI__)
        " avx512vnni"
#endif
#if defined(__AVX512BF16__)
        " avx512bf16"
#endif
#if defined(__AVX512FP16__)
        " avx512fp16"
#endif
#if defined(__AVXVNNI__)
        " avxvnni"
#endif
#if defined(__ARM_NEON)
        " neon"
#endif
#if defined(__ARM_FEATURE_DOTPROD)
        " dotprod"
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
        " fp16"
#endif
        ;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_" STRING(GE_LEVEL),
                                    "ge's native kernels (called through ctypes)", -1, NULL};
PyMODINIT_FUNC INIT(GE_LEVEL)(void) { return PyModule_Create(&module); }
