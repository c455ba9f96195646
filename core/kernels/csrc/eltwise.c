/* A fused chain of elementwise ops (kernels/fused_elementwise.py lowers it): the output is walked in
blocks of BLOCK elements and every op runs over the block in registers that stay in L1, so a chain
of 1000 tiny ops is one call and the intermediate tensors never reach memory.

Exactness: each op is one IEEE operation per element, the one numpy's ufunc does (one loop per op,
so nothing can be contracted into an FMA); Max/Min propagate NaN as np.maximum/np.minimum; integer
Add/Sub/Mul/Neg/Abs wrap as numpy's do (computed unsigned).

float16 chains (EW_F16): the float32 interpreter on float32 blocks, each float16 operand converted as
its block is read, the output rounded as its block is stored, and every step's result rounded to
float16 and back (EW_ROUND on the step's last micro-op): what each op's float16 kernel gives (the
float32 result of float16 operands, rounded once), bit for bit, in one pass instead of a conversion
of every operand and result per op. */
#include <string.h>

#include "abi.h"
#include "half.h"

#define BLOCK 256
#define MAX_SLOTS 16
#define MAX_F16_OPERANDS 32  /* a float16 chain's operands, converted into blocks on the stack */

/* The block [start, start + len) of register r: an operand in place (contiguous), an operand gathered
   through its broadcast into `gather`, a scratch slot, or the output. */
#define REGISTER(T, r, gather)                                                                            \
    ((r) < e->n_ext ? (e->inner[r] == 0 ? (T *)e->ext[r] + start                                          \
                                         : gather_##T(e, r, start, len, (T *)(gather)))                   \
     : (r) == e->n_regs - 1 ? (T *)e->y + start : (T *)slots + (int64_t)((r) - e->n_ext) * BLOCK)

#define FLOAT_MAX(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))
#define FLOAT_MIN(a, b) (((a) <= (b) || (a) != (a)) ? (a) : (b))
#define INT_MAX_(a, b) ((a) >= (b) ? (a) : (b))
#define INT_MIN_(a, b) ((a) <= (b) ? (a) : (b))

/* One micro-op over a block: d[j] = op(a[j], b[j], p) for j < len (T: the type, U: its unsigned form). */
#define APPLY_OP(T, U, IS_FLOAT, SQRT, ERF)                                                                  \
                switch (op) {                                                                             \
                case EW_ADD: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? a[j] + b[j] : (T)((U)a[j] + (U)b[j]); break; \
                case EW_SUB: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? a[j] - b[j] : (T)((U)a[j] - (U)b[j]); break; \
                case EW_MUL: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? a[j] * b[j] : (T)((U)a[j] * (U)b[j]); break; \
                case EW_DIV: for (j = 0; j < len; j++) d[j] = a[j] / b[j]; break;                         \
                case EW_MAX: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? FLOAT_MAX(a[j], b[j]) : INT_MAX_(a[j], b[j]); break; \
                case EW_MIN: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? FLOAT_MIN(a[j], b[j]) : INT_MIN_(a[j], b[j]); break; \
                case EW_NEG: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? -a[j] : (T)(0 - (U)a[j]); break; \
                case EW_ABS: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? (a[j] < 0 ? -a[j] : a[j] + 0)   \
                                                                      : (a[j] < 0 ? (T)(0 - (U)a[j]) : a[j]); break; \
                case EW_SQRT: for (j = 0; j < len; j++) d[j] = SQRT(a[j]); break;                         \
                case EW_RECIP: for (j = 0; j < len; j++) d[j] = (T)1 / a[j]; break;                       \
                case EW_ADDC: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? a[j] + p : (T)((U)a[j] + (U)p); break; \
                case EW_MULC: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? a[j] * p : (T)((U)a[j] * (U)p); break; \
                case EW_MAXC: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? FLOAT_MAX(a[j], p) : INT_MAX_(a[j], p); break; \
                case EW_MINC: for (j = 0; j < len; j++) d[j] = IS_FLOAT ? FLOAT_MIN(a[j], p) : INT_MIN_(a[j], p); break; \
                case EW_ERF: case EW_SIGMOID: case EW_GELU: ERF(op, d, a, len); break;                    \
                }                                                                                         \

/* The block [start, start + len) of broadcast operand r (element i: ext[r][(i / inner) % period]) in
   runs: of consecutive values (inner 1: a vector along the last axes) or of one value repeated (a
   scalar, a per-row value), each a vectorizable loop. */
#define DEFINE_GATHER(T)                                                                                  \
    static T *gather_##T(const Eltwise *e, int r, int64_t start, int64_t len, T *out) {                   \
        const T *src = (const T *)e->ext[r];                                                              \
        int64_t inner = e->inner[r], period = e->period[r];                                               \
        int64_t idx = (start / inner) % period, rem = start % inner;                                      \
        if (period == 1) inner = len + 1;  /* a scalar: one run */                                        \
        for (int64_t j = 0; j < len;) {                                                                   \
            if (inner == 1) {                                                                             \
                int64_t run = period - idx < len - j ? period - idx : len - j;                            \
                for (int64_t k = 0; k < run; k++) out[j + k] = src[idx + k];                              \
                j += run, idx += run;                                                                     \
                if (idx == period) idx = 0;                                                               \
            } else {                                                                                      \
                int64_t run = inner - rem < len - j ? inner - rem : len - j;                              \
                T v = src[idx];                                                                           \
                for (int64_t k = 0; k < run; k++) out[j + k] = v;                                         \
                j += run, rem += run;                                                                     \
                if (rem == inner) { rem = 0; if (++idx == period) idx = 0; }                              \
            }                                                                                             \
        }                                                                                                 \
        return out;                                                                                       \
    }

/* erf of float32 lanes, within 2 ulp of the correctly rounded value (1 ulp
   for 99.4% of them; numpy's formula in erf.py: 3) (tests/core/kernels/test_eltwise_erf.py):
   |x| < SPLIT: x P(x^2) (P: a minimax fit of erf(x) / x, relative error 1.6e-8);
   above: 1 - e^(-x^2) Q(1 / (1 + |x|)) (Q: a fit of erfc(x) e^(x^2), 1.3e-8), |x| clamped at 4, where
   erf rounds to 1. Both branches over the whole vector, blended by mask; NaN stays NaN. */
#define ERF_SPLIT 0.921875f
static inline vec verf(vec x) {
    ivec sign = (ivec)x & (int32_t)0x80000000;
    vec ax = (vec)((ivec)x & 0x7fffffff);
    vec s = ax * ax;
    vec small = ax * (1.1283791496552396f + s * (-0.37612493916515866f + s * (0.11281817658903032f
                + s * (-0.026766655829148278f + s * (0.0049932262783801895f + s * -0.0005991048556684522f)))));
    vec al = vclamp(ax, ERF_SPLIT, 4.0f);
    vec t = 1.0f / (1.0f + al);
    vec q = -0.0001364122021738153f + t * (0.5674054663915491f + t * (0.5329550399802955f + t * (0.43819975496919505f
            + t * (-0.6651310928960017f + t * (-0.5514653972621243f + t * (1.2341981801488138f
            + t * -0.5730341730464813f))))));
    vec large = 1.0f - q * vexp(-(al * al));
    ivec is_small = ax < ERF_SPLIT, nan = x != x;
    ivec r = (((ivec)small & is_small) | ((ivec)large & ~is_small)) | sign;
    return (vec)((r & ~nan) | ((ivec)x & nan));
}

/* d[j] = f(a[j]), j < len (d may be a): the tail through a zero-padded vector */
static inline __attribute__((always_inline)) void map_block(float *d, const float *a, int64_t len, vec (*f)(vec)) {
    int64_t j = 0;
    for (; j + VL <= len; j += VL) vstore(d + j, f(vload(a + j)));
    if (j < len) {
        float tail[VL] = {0};
        memcpy(tail, a + j, (size_t)(len - j) * sizeof(float));
        vec v = f(vload(tail));
        memcpy(d + j, &v, (size_t)(len - j) * sizeof(float));
    }
}
/* Gelu's exact form (0.5 + 0.5 erf(x / sqrt 2)) x on the erf above, as the numpy formula orders it (ops/erf.py):
   within 2e-7 of it relative where x is small, where the GEMM epilogue's vgelu (Abramowitz-Stegun) is not */
static inline vec vgelu_exact(vec x) { return (0.5f + 0.5f * verf(x * 0.70710678118654752f)) * x; }

/* erf; 1 / (1 + e^-a[j]) (simd.h's vsigmoid: the sigmoid the conv epilogues apply); Gelu */
static void erf_block(float *d, const float *a, int64_t len) { map_block(d, a, len, verf); }
static void sigmoid_block(float *d, const float *a, int64_t len) { map_block(d, a, len, vsigmoid); }
static void gelu_block(float *d, const float *a, int64_t len) { map_block(d, a, len, vgelu_exact); }

/* the float32 ops that are no IEEE operation: erf, the sigmoid and Gelu */
static void special_block(int op, float *d, const float *a, int64_t len) {
    if (op == EW_ERF) erf_block(d, a, len);
    else if (op == EW_GELU) gelu_block(d, a, len);
    else sigmoid_block(d, a, len);
}
#define NO_ERF(op, d, a, len) ((void)0)  /* EW_ERF, EW_SIGMOID and EW_GELU are refused for the other types */

#define DEFINE_CHAIN(T, U, IS_FLOAT, SQRT, ERF)                                                              \
    DEFINE_GATHER(T)                                                                                      \
    static void chain_##T(const Eltwise *e) {                                                             \
        T slots[MAX_SLOTS * BLOCK], ga[BLOCK], gb[BLOCK];                                                 \
        for (int64_t start = 0; start < e->n; start += BLOCK) {                                           \
            int64_t len = e->n - start < BLOCK ? e->n - start : BLOCK;                                    \
            for (int32_t k = 0; k < e->n_ops; k++) {                                                      \
                const int32_t *c = e->code + 4 * k;                                                       \
                int op = c[0];                                                                            \
                T *d = REGISTER(T, c[1], ga);                                                             \
                const T *a = REGISTER(T, c[2], ga);                                                       \
                const T *b = op <= EW_MIN ? REGISTER(T, c[3], gb) : a;                                    \
                const T p = (T)e->param[k];                                                               \
                int64_t j;                                                                                \
                APPLY_OP(T, U, IS_FLOAT, SQRT, ERF)                                                       \
            }                                                                                             \
        }                                                                                                 \
    }

typedef float f32;
typedef double f64;
#define NO_SQRT(x) (x)
DEFINE_CHAIN(f32, uint32_t, 1, __builtin_sqrtf, special_block)
DEFINE_CHAIN(f64, uint64_t, 1, __builtin_sqrt, NO_ERF)
DEFINE_CHAIN(int32_t, uint32_t, 0, NO_SQRT, NO_ERF)
DEFINE_CHAIN(int64_t, uint64_t, 0, NO_SQRT, NO_ERF)

static void float_op(int op, float *d, const float *a, const float *b, float p, int64_t len) {
    int64_t j;
    APPLY_OP(float, uint32_t, 1, __builtin_sqrtf, special_block)
}

DEFINE_GATHER(uint16_t)

/* The block [start, start + len) of float16 operand r, in float32 (gathered through its broadcast). */
static void half_operand(const Eltwise *e, int r, int64_t start, int64_t len, float *out, uint16_t *tmp) {
    const uint16_t *src = (const uint16_t *)e->ext[r];
    halves_to_floats(out, e->inner[r] == 0 ? src + start : gather_uint16_t(e, r, start, len, tmp), len);
}

/* v rounded to float16 and back (numpy's rounding: a vector holding a NaN through the portable code) */
static inline vec round_half(vec v) {
#if defined(__AVX512F__) && VL == 16
    if (!_mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q))
        return (vec)_mm512_cvtph_ps(_mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__) && VL == 8
    if (!_mm256_movemask_ps(_mm256_cmp_ps((__m256)v, (__m256)v, _CMP_UNORD_Q)))
        return (vec)_mm256_cvtph_ps(_mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (int j = 0; j < VL; j++) v[j] = half_to_float(float_to_half(v[j]));
    return v;
}

/* Registers: the operands' blocks converted once per block (a scalar once per call) into ext, the
   slots, and the output's block (stored at the end of each block). */
static void chain_f16(const Eltwise *e) {
    float slots[(MAX_SLOTS + 1) * BLOCK] __attribute__((aligned(64)));
    float ext[e->n_ext * BLOCK + 1] __attribute__((aligned(64)));
    uint16_t tmp[BLOCK];
    float *out = slots + MAX_SLOTS * BLOCK;
    for (int r = 0; r < e->n_ext; r++)
        if (e->inner[r] != 0 && e->period[r] == 1) half_operand(e, r, 0, BLOCK, ext + r * BLOCK, tmp);
#define F16_REG(r) ((r) < e->n_ext ? ext + (int64_t)(r) * BLOCK : (r) == e->n_regs - 1 ? out \
                    : slots + (int64_t)((r) - e->n_ext) * BLOCK)
    for (int64_t start = 0; start < e->n; start += BLOCK) {
        int64_t len = e->n - start < BLOCK ? e->n - start : BLOCK;
        for (int r = 0; r < e->n_ext; r++)
            if (e->inner[r] == 0 || e->period[r] != 1) half_operand(e, r, start, len, ext + r * BLOCK, tmp);
        for (int32_t k = 0; k < e->n_ops; k++) {
            const int32_t *c = e->code + 4 * k;
            int op = c[0] & ~EW_ROUND;
            float *d = F16_REG(c[1]);
            const float *a = F16_REG(c[2]), *b = op <= EW_MIN ? F16_REG(c[3]) : a;
            float_op(op, d, a, b, (float)e->param[k], len);
            if (c[0] & EW_ROUND) {  /* the step's result in float16, as its kernel stores it */
                int64_t j = 0;
                for (; j + VL <= len; j += VL) vstore(d + j, round_half(vload(d + j)));
                for (; j < len; j++) d[j] = half_to_float(float_to_half(d[j]));
            }
        }
        floats_to_halves((uint16_t *)e->y + start, out, len);
    }
#undef F16_REG
}

/* A lone binary op between a contiguous operand and one that holds one value per run of `inner`
   elements (element i reads ext[r][(i / inner) % period]: a squeeze-excite gate [N,C,1,1] over
   [N,C,H,W], a per-channel bias, a scalar): each run one vector loop against its value in every
   lane, one pass, where the chain would gather the value into a block and read it back. float16
   (half): converted as loaded, the float32 result rounded once as stored (chain_f16's step). */
#define PER_RUN(EXPR)                                                                                     \
    for (j = 0; j + VL <= len; j += VL) {                                                               \
        vec x = vload_any(src, half, i + j);                                                              \
        store_any_part(dst, half, i + j, EXPR, VL);                                                       \
    }                                                                                                     \
    if (j < len) {                                                                                        \
        vec x = load_any_part(src, half, i + j, (int)(len - j));                                          \
        store_any_part(dst, half, i + j, EXPR, (int)(len - j));                                           \
    }

static inline __attribute__((always_inline)) void per_run(const Eltwise *e, int op, int value_first, int r,
                                                          int half) {
    const void *src = e->ext[1 - r];
    void *dst = e->y;
    const int64_t inner = e->inner[r], period = e->period[r];
    for (int64_t i = 0, idx = 0; i < e->n; i += inner, idx = idx + 1 == period ? 0 : idx + 1) {
        const float value = half ? half_to_float(((const uint16_t *)e->ext[r])[idx]) : ((const float *)e->ext[r])[idx];
        vec v;
        for (int l = 0; l < VL; l++) v[l] = value;  /* the value itself in every lane (-0 stays -0) */
        const int64_t len = inner;
        int64_t j;
        switch (op) {
        case EW_ADD: PER_RUN(x + v) break;
        case EW_SUB: if (value_first) { PER_RUN(v - x) } else { PER_RUN(x - v) } break;
        case EW_MUL: PER_RUN(x * v) break;
        case EW_DIV: if (value_first) { PER_RUN(v / x) } else { PER_RUN(x / v) } break;
        }
    }
}
#undef PER_RUN

/* Whether e is such an op (ext 0 and 1 its operands, one contiguous, the other constant along runs
   that tile n), and then runs it. */
static int try_per_run(const Eltwise *e) {
    if (e->n_ops != 1 || e->n_ext != 2 || (e->dtype != EW_F32 && e->dtype != EW_F16)) return 0;
    const int32_t *c = e->code;
    int op = c[0] & ~EW_ROUND;
    if (op > EW_DIV || c[1] != e->n_regs - 1 || c[2] == c[3] || c[2] > 1 || c[3] > 1) return 0;
    int r = e->inner[0] == 0 ? 1 : 0;  /* the operand with one value per run */
    if (e->inner[1 - r] != 0 || e->inner[r] < VL || e->n % e->inner[r] != 0) return 0;  /* short runs: the chain */
    if (e->dtype == EW_F16) per_run(e, op, c[2] == r, r, 1);
    else per_run(e, op, c[2] == r, r, 0);
    return 1;
}

/* 0, or -1 when the program does not fit (the Python side checks first: this is the last guard). */
int ge_eltwise(const Eltwise *e) {
    if (e->n_regs - e->n_ext - 1 > MAX_SLOTS || e->n_regs <= e->n_ext) return -1;
    for (int32_t k = 0; k < e->n_ops; k++) {
        const int32_t *c = e->code + 4 * k;
        int op = e->dtype == EW_F16 ? c[0] & ~EW_ROUND : c[0];  /* EW_ROUND: float16 chains only */
        if (op < 0 || op >= EW_NUM_OPS || c[1] < e->n_ext || c[1] >= e->n_regs) return -1;
        if ((op == EW_ERF || op == EW_SIGMOID || op == EW_GELU) && e->dtype != EW_F32 && e->dtype != EW_F16) return -1;
        for (int i = 2; i < 4; i++)
            if (c[i] < 0 || c[i] >= e->n_regs) return -1;
    }
    for (int32_t r = 0; r < e->n_ext; r++)
        if (e->inner[r] < 0 || (e->inner[r] > 0 && e->period[r] <= 0)) return -1;
    if (try_per_run(e)) return 0;
    switch (e->dtype) {
    case EW_F32: chain_f32(e); return 0;
    case EW_F64: chain_f64(e); return 0;
    case EW_I32: chain_int32_t(e); return 0;
    case EW_I64: chain_int64_t(e); return 0;
    case EW_F16:
        if (e->n_ext > MAX_F16_OPERANDS) return -1;
        chain_f16(e);
        return 0;
    }
    return -1;
}

/* abi.h's Compare: one loop per (dtype, op), a step of 0 reading a broadcast operand's one value */
#define COMPARE(T, OP)                                                                                    \
    do {                                                                                                  \
        const T *a = c->a, *b = c->b;                                                                     \
        for (int64_t i = 0; i < c->n; i++) c->y[i] = a[i * c->a_step] OP b[i * c->b_step];             \
    } while (0)
#define COMPARE_OPS(T)                                                                                    \
    switch (c->op) {                                                                                      \
    case CMP_LT: COMPARE(T, <); break;                                                                    \
    case CMP_LE: COMPARE(T, <=); break;                                                                   \
    case CMP_GT: COMPARE(T, >); break;                                                                    \
    case CMP_GE: COMPARE(T, >=); break;                                                                   \
    case CMP_EQ: COMPARE(T, ==); break;                                                                   \
    }

void ge_compare(const Compare *c) {
    switch (c->dtype) {
    case EW_F32: COMPARE_OPS(float); break;
    case EW_F64: COMPARE_OPS(double); break;
    case EW_I32: COMPARE_OPS(int32_t); break;
    case EW_I64: COMPARE_OPS(int64_t); break;
    }
}
