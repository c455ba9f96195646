/* The extension module (only so that setuptools builds and installs the library: ge calls the
kernels through ctypes, core/kernels/native.py), the ABI layout table that native.py checks its
ctypes structs against at load, and what the library was built for: its level (setup.py defines
GE_LEVEL, the library is _native_<GE_LEVEL>) and the instruction sets the compiler targeted. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "abi.h"

#define SIZE(T) {#T, NULL, 0, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

static const AbiEntry layout[] = {
    SIZE(Activation),
    FIELD(Activation, act),
    FIELD(Activation, a),
    FIELD(Activation, b),
    SIZE(GemmArgs),
    FIELD(GemmArgs, M),
    FIELD(GemmArgs, N),
    FIELD(GemmArgs, K),
    FIELD(GemmArgs, a),
    FIELD(GemmArgs, lda),
    FIELD(GemmArgs, ap),
    FIELD(GemmArgs, b),
    FIELD(GemmArgs, koff),
    FIELD(GemmArgs, noff),
    FIELD(GemmArgs, bp),
    FIELD(GemmArgs, c),
    FIELD(GemmArgs, ldc),
    FIELD(GemmArgs, bias_m),
    FIELD(GemmArgs, bias_n),
    FIELD(GemmArgs, z),
    FIELD(GemmArgs, ldz),
    FIELD(GemmArgs, act),
    FIELD(GemmArgs, threads),
    FIELD(GemmArgs, ws),
    FIELD(GemmArgs, pitch),
    FIELD(GemmArgs, width),
    FIELD(GemmArgs, alpha),
    FIELD(GemmArgs, half),
    SIZE(GemmBatch),
    FIELD(GemmBatch, g),
    FIELD(GemmBatch, batch),
    FIELD(GemmBatch, a_off),
    FIELD(GemmBatch, b_off),
    FIELD(GemmBatch, c_off),
    FIELD(GemmBatch, bias_off),
    FIELD(GemmBatch, z_off),
    SIZE(ConvDirect),
    FIELD(ConvDirect, x),
    FIELD(ConvDirect, koff),
    FIELD(ConvDirect, wp),
    FIELD(ConvDirect, y),
    FIELD(ConvDirect, bias),
    FIELD(ConvDirect, z),
    FIELD(ConvDirect, K),
    FIELD(ConvDirect, M),
    FIELD(ConvDirect, rows),
    FIELD(ConvDirect, width),
    FIELD(ConvDirect, pitch),
    FIELD(ConvDirect, ldy),
    FIELD(ConvDirect, act),
    FIELD(ConvDirect, threads),
    FIELD(ConvDirect, wide),
    FIELD(ConvDirect, half),
    SIZE(CallBatch),
    FIELD(CallBatch, fn),
    FIELD(CallBatch, args),
    FIELD(CallBatch, count),
    FIELD(CallBatch, threads),
    SIZE(Depthwise),
    FIELD(Depthwise, x),
    FIELD(Depthwise, w),
    FIELD(Depthwise, bias),
    FIELD(Depthwise, y),
    FIELD(Depthwise, channels),
    FIELD(Depthwise, mult),
    FIELD(Depthwise, ih),
    FIELD(Depthwise, iw),
    FIELD(Depthwise, rows),
    FIELD(Depthwise, cols),
    FIELD(Depthwise, kh),
    FIELD(Depthwise, kw),
    FIELD(Depthwise, sh),
    FIELD(Depthwise, sw),
    FIELD(Depthwise, dh),
    FIELD(Depthwise, dw),
    FIELD(Depthwise, pt),
    FIELD(Depthwise, pl),
    FIELD(Depthwise, act),
    FIELD(Depthwise, threads),
    FIELD(Depthwise, x_half),
    FIELD(Depthwise, half),
    SIZE(MaxPool2d),
    FIELD(MaxPool2d, x),
    FIELD(MaxPool2d, y),
    FIELD(MaxPool2d, planes),
    FIELD(MaxPool2d, h),
    FIELD(MaxPool2d, w),
    FIELD(MaxPool2d, oh),
    FIELD(MaxPool2d, ow),
    FIELD(MaxPool2d, k0),
    FIELD(MaxPool2d, k1),
    FIELD(MaxPool2d, s0),
    FIELD(MaxPool2d, s1),
    FIELD(MaxPool2d, d0),
    FIELD(MaxPool2d, d1),
    FIELD(MaxPool2d, pb0),
    FIELD(MaxPool2d, pb1),
    FIELD(MaxPool2d, threads),
    FIELD(MaxPool2d, half),
    SIZE(PhaseFill),
    FIELD(PhaseFill, x),
    FIELD(PhaseFill, ph),
    FIELD(PhaseFill, planes),
    FIELD(PhaseFill, h),
    FIELD(PhaseFill, w),
    FIELD(PhaseFill, s0),
    FIELD(PhaseFill, s1),
    FIELD(PhaseFill, pb0),
    FIELD(PhaseFill, pb1),
    FIELD(PhaseFill, sq0),
    FIELD(PhaseFill, sq1),
    FIELD(PhaseFill, used),
    FIELD(PhaseFill, threads),
    FIELD(PhaseFill, x_half),
    SIZE(Rows),
    FIELD(Rows, x),
    FIELD(Rows, scale),
    FIELD(Rows, bias),
    FIELD(Rows, y),
    FIELD(Rows, rows),
    FIELD(Rows, cols),
    FIELD(Rows, eps),
    FIELD(Rows, softmax),
    FIELD(Rows, threads),
    FIELD(Rows, half),
    SIZE(Eltwise),
    FIELD(Eltwise, n),
    FIELD(Eltwise, dtype),
    FIELD(Eltwise, n_ext),
    FIELD(Eltwise, n_regs),
    FIELD(Eltwise, n_ops),
    FIELD(Eltwise, ext),
    FIELD(Eltwise, inner),
    FIELD(Eltwise, period),
    FIELD(Eltwise, code),
    FIELD(Eltwise, param),
    FIELD(Eltwise, y),
    SIZE(RecurrentDirection),
    FIELD(RecurrentDirection, xw),
    FIELD(RecurrentDirection, r),
    FIELD(RecurrentDirection, rp),
    FIELD(RecurrentDirection, rp_h),
    FIELD(RecurrentDirection, rbh),
    FIELD(RecurrentDirection, p),
    FIELD(RecurrentDirection, h0),
    FIELD(RecurrentDirection, c0),
    FIELD(RecurrentDirection, y),
    FIELD(RecurrentDirection, yh),
    FIELD(RecurrentDirection, yc),
    FIELD(RecurrentDirection, ws),
    FIELD(RecurrentDirection, reverse),
    SIZE(Recurrent),
    FIELD(Recurrent, kind),
    FIELD(Recurrent, lbr),
    FIELD(Recurrent, input_forget),
    FIELD(Recurrent, has_clip),
    FIELD(Recurrent, clip),
    FIELD(Recurrent, directions),
    FIELD(Recurrent, threads),
    FIELD(Recurrent, T),
    FIELD(Recurrent, B),
    FIELD(Recurrent, H),
    FIELD(Recurrent, x_step),
    FIELD(Recurrent, x_batch),
    FIELD(Recurrent, y_step),
    FIELD(Recurrent, y_batch),
    FIELD(Recurrent, state_batch),
    FIELD(Recurrent, lens),
    FIELD(Recurrent, dir),
    SIZE(QOut),
    FIELD(QOut, kind),
    FIELD(QOut, bias),
    FIELD(QOut, scale),
    FIELD(QOut, scale_step),
    FIELD(QOut, scale_a),
    FIELD(QOut, fbias),
    FIELD(QOut, zy),
    FIELD(QOut, lo),
    FIELD(QOut, hi),
    FIELD(QOut, act),
    SIZE(QGemm),
    FIELD(QGemm, M),
    FIELD(QGemm, N),
    FIELD(QGemm, K),
    FIELD(QGemm, a),
    FIELD(QGemm, lda),
    FIELD(QGemm, rows_are_weights),
    FIELD(QGemm, bp),
    FIELD(QGemm, b),
    FIELD(QGemm, koff),
    FIELD(QGemm, noff),
    FIELD(QGemm, b_flip),
    FIELD(QGemm, zu),
    FIELD(QGemm, zs),
    FIELD(QGemm, sum_s),
    FIELD(QGemm, c),
    FIELD(QGemm, ldc),
    FIELD(QGemm, out),
    FIELD(QGemm, threads),
    FIELD(QGemm, ws),
    SIZE(QDepthwise),
    FIELD(QDepthwise, x),
    FIELD(QDepthwise, w),
    FIELD(QDepthwise, wsum),
    FIELD(QDepthwise, channels),
    FIELD(QDepthwise, height),
    FIELD(QDepthwise, width),
    FIELD(QDepthwise, pt),
    FIELD(QDepthwise, pl),
    FIELD(QDepthwise, kh),
    FIELD(QDepthwise, kw),
    FIELD(QDepthwise, sh),
    FIELD(QDepthwise, sw),
    FIELD(QDepthwise, dh),
    FIELD(QDepthwise, dw),
    FIELD(QDepthwise, oh),
    FIELD(QDepthwise, ow),
    FIELD(QDepthwise, zx),
    FIELD(QDepthwise, x_flip),
    FIELD(QDepthwise, y),
    FIELD(QDepthwise, out),
    FIELD(QDepthwise, threads),
    FIELD(QDepthwise, ws),
    SIZE(QAdd),
    FIELD(QAdd, a),
    FIELD(QAdd, b),
    FIELD(QAdd, c),
    FIELD(QAdd, n),
    FIELD(QAdd, ra),
    FIELD(QAdd, rb),
    FIELD(QAdd, fixed),
    FIELD(QAdd, lo),
    FIELD(QAdd, hi),
    FIELD(QAdd, is_signed),
    FIELD(QAdd, threads),
    SIZE(ConvNchwc),
    FIELD(ConvNchwc, x),
    FIELD(ConvNchwc, wp),
    FIELD(ConvNchwc, bias),
    FIELD(ConvNchwc, z),
    FIELD(ConvNchwc, y),
    FIELD(ConvNchwc, batch),
    FIELD(ConvNchwc, icb),
    FIELD(ConvNchwc, ocb),
    FIELD(ConvNchwc, h),
    FIELD(ConvNchwc, w),
    FIELD(ConvNchwc, oh),
    FIELD(ConvNchwc, ow),
    FIELD(ConvNchwc, kh),
    FIELD(ConvNchwc, kw),
    FIELD(ConvNchwc, sh),
    FIELD(ConvNchwc, sw),
    FIELD(ConvNchwc, ph),
    FIELD(ConvNchwc, pw),
    FIELD(ConvNchwc, dh),
    FIELD(ConvNchwc, dw),
    FIELD(ConvNchwc, act),
    FIELD(ConvNchwc, threads),
    SIZE(NchwcReorder),
    FIELD(NchwcReorder, x),
    FIELD(NchwcReorder, y),
    FIELD(NchwcReorder, batch),
    FIELD(NchwcReorder, channels),
    FIELD(NchwcReorder, plane),
    FIELD(NchwcReorder, to_blocked),
    FIELD(NchwcReorder, threads),
    SIZE(NchwcMaxPool),
    FIELD(NchwcMaxPool, x),
    FIELD(NchwcMaxPool, y),
    FIELD(NchwcMaxPool, planes),
    FIELD(NchwcMaxPool, h),
    FIELD(NchwcMaxPool, w),
    FIELD(NchwcMaxPool, oh),
    FIELD(NchwcMaxPool, ow),
    FIELD(NchwcMaxPool, kh),
    FIELD(NchwcMaxPool, kw),
    FIELD(NchwcMaxPool, sh),
    FIELD(NchwcMaxPool, sw),
    FIELD(NchwcMaxPool, ph),
    FIELD(NchwcMaxPool, pw),
    FIELD(NchwcMaxPool, dh),
    FIELD(NchwcMaxPool, dw),
    FIELD(NchwcMaxPool, threads),
    SIZE(NchwcMean),
    FIELD(NchwcMean, x),
    FIELD(NchwcMean, y),
    FIELD(NchwcMean, batch),
    FIELD(NchwcMean, channels),
    FIELD(NchwcMean, plane),
    FIELD(NchwcMean, threads),
    SIZE(DepthwiseNchwc),
    FIELD(DepthwiseNchwc, x),
    FIELD(DepthwiseNchwc, wp),
    FIELD(DepthwiseNchwc, bias),
    FIELD(DepthwiseNchwc, z),
    FIELD(DepthwiseNchwc, y),
    FIELD(DepthwiseNchwc, batch),
    FIELD(DepthwiseNchwc, cb),
    FIELD(DepthwiseNchwc, h),
    FIELD(DepthwiseNchwc, w),
    FIELD(DepthwiseNchwc, oh),
    FIELD(DepthwiseNchwc, ow),
    FIELD(DepthwiseNchwc, kh),
    FIELD(DepthwiseNchwc, kw),
    FIELD(DepthwiseNchwc, sh),
    FIELD(DepthwiseNchwc, sw),
    FIELD(DepthwiseNchwc, ph),
    FIELD(DepthwiseNchwc, pw),
    FIELD(DepthwiseNchwc, dh),
    FIELD(DepthwiseNchwc, dw),
    FIELD(DepthwiseNchwc, act),
    FIELD(DepthwiseNchwc, threads),
    {NULL, NULL, 0, 0},
};

/* Every argument struct's size and every field's offset and size, ended by a NULL type. */
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
