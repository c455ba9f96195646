/* Vector helpers shared by the kernels: one source for AVX-512, AVX2 and NEON through GCC/Clang
vector extensions, the width (VL) chosen by the register file the compiler targets (each level's
-march: setup.py builds one library per level; SSE at x86-64-v2, AVX2 at v3, AVX-512 at v4);
lane-wise clamp, exp, Gelu and max; partial loads and stores; short copies and fills. */
#ifndef GE_SIMD_H
#define GE_SIMD_H

#include <stdint.h>
#include <string.h>

#include "abi.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VL 16
#elif defined(__AVX__)
#define VL 8
#else
#define VL 4
#endif
#define FILL_ITEM_FLOATS 8192  /* a fill's or depthwise item's least work: claiming it costs nothing beside it */

typedef float vec __attribute__((vector_size(VL * 4)));
typedef float vec_u __attribute__((vector_size(VL * 4), aligned(4), may_alias));  /* unaligned access */

static inline vec vload(const float *p) { return *(const vec_u *)p; }
static inline void vstore(float *p, vec v) { *(vec_u *)p = v; }
typedef int32_t ivec __attribute__((vector_size(VL * 4)));

/* min(max(v, lo), hi) per lane as masks and blends (vector code; NaN stays NaN, as in numpy; lo >
   hi gives hi everywhere, as Clip's spec says) */
static inline vec vclamp(vec v, float lo, float hi) {
    vec l = (vec){0} + lo, h = (vec){0} + hi;
    ivec below = v < l, r = (ivec)v;
    r = (r & ~below) | ((ivec)l & below);
    ivec above = (vec)r > h;
    r = (r & ~above) | ((ivec)h & above);
    return (vec)r;
}

/* half to even, lane by lane, always inlined (qgemm.c's quantizers, compiled under other options,
   call it once per vector) */
static inline __attribute__((always_inline)) vec vrint(vec v) {
#if defined(__AVX512F__)
    return (vec)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif defined(__AVX__)
    return (vec)_mm256_round_ps((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    for (int k = 0; k < VL; k++) v[k] = __builtin_rintf(v[k]);
    return v;
#endif
}

/* QuantizeLinear then DequantizeLinear per tensor in the numpy plans' float32 steps (qgemm.c's
   QR_ROUND_TRIP, rows.c's softmax between two of them): clamp(rint(x / s) + z, lo, hi), the byte stored
   (the low byte of its int32 conversion) read back as the 8-bit type, minus z, times s. The same bits
   as clamp(rint(x / s), lo - z, hi - z) * s, in floats: z and the bounds are small integers, so adding
   z and taking it away again is exact, and a value beyond the bounds meets the same one either way;
   rint's -0 becomes +0, as the byte's conversion makes it, and a NaN the byte 0 (its int32 conversion
   is INT_MIN): lo - z where lo is 0, -z set apart for a signed type. 6 vector steps where the byte's
   round trip took 15: a QDQ softmax makes two per element (Whisper's attention: 13.5M a layer). */
static inline __attribute__((always_inline)) vec vround_trip(vec x, vec s, vec z, float lo, float hi,
                                                             int is_signed) {
    vec t = vrint(x / s) + 0.0f, l = lo - z, h = hi - z;
#if defined(__AVX512F__)
    vec q = (vec)_mm512_min_ps(_mm512_max_ps((__m512)t, (__m512)l), (__m512)h);  /* (max: a NaN gives l) */
#elif defined(__AVX__)
    vec q = (vec)_mm256_min_ps(_mm256_max_ps((__m256)t, (__m256)l), (__m256)h);
#else
    ivec above = t > l;  /* (false for NaN: l) */
    vec q = (vec)(((ivec)t & above) | ((ivec)l & ~above));
    ivec below = q < h;
    q = (vec)(((ivec)q & below) | ((ivec)h & ~below));
#endif
    if (is_signed) {
        ivec nan = t != t;
        q = (vec)(((ivec)q & ~nan) | ((ivec)(0.0f - z) & nan));
    }
    return q * s;
}

/* exp(x) for float32 lanes: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial (degree 6:
   relative error below 2e-7), 2^n built in the exponent bits. Below -87 the result is exactly 0:
   a masked softmax (-inf, or float's lowest) must give zeros, not tiny values that turn into
   denormals downstream (the product after it then runs 100x slower). */
#if defined(__AVX512F__)
/* AVX-512: the same steps as below on its own instructions (min/max clamp, roundscale's floor, scalef for
   2^n, a zeroing mask for x < -87, NaN kept), the same bits (the sigmoid and softmax of 3M floats in
   [-100, 100] and the edges, compared bit for bit); a harness of rows.c's softmax over rows of 128, 197 and
   1500 in cache ran 20-28% faster than by the generic compares and blends */
static inline vec vexp(vec x) {
    __m512 v = (__m512)x, lo = _mm512_set1_ps(-87.0f), hi = _mm512_set1_ps(88.0f);
    __mmask16 keep = _mm512_cmp_ps_mask(v, lo, _CMP_NLT_UQ);  /* not below -87 (NaN kept) */
    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    __m512 nf = _mm512_roundscale_ps(_mm512_fmadd_ps(v, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                     _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    vec r = (vec)v - (vec)nf * 0.693359375f - (vec)nf * -2.12194440e-4f;
    vec p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    return (vec)_mm512_maskz_mov_ps(keep, _mm512_scalef_ps((__m512)p, nf));
}
#else
static inline vec vexp(vec x) {
    vec lo = (vec){0} - 87.0f, hi = (vec){0} + 88.0f;
    ivec below = x < lo;
#if VL == 8 && defined(__AVX__)
    /* AVX2 (no mask registers): the clamp by min/max (a NaN lane stays NaN: it is their second
       operand) and the floor by the hardware rounding, 4 operations where the blends and the
       truncation's fix took 11; same results (softmax's rows 20-30% faster with rows.c's reductions) */
    x = (vec)_mm256_min_ps((__m256)hi, _mm256_max_ps((__m256)lo, (__m256)x));
    vec fx = x * 1.44269504088896341f + 0.5f;
    vec nf = (vec)_mm256_floor_ps((__m256)fx);
    ivec n = __builtin_convertvector(nf, ivec);
#else
    ivec above = x > hi;
    x = (vec)(((ivec)x & ~below) | ((ivec)lo & below));
    x = (vec)(((ivec)x & ~above) | ((ivec)hi & above));
    vec fx = x * 1.44269504088896341f + 0.5f;
    ivec n = __builtin_convertvector(fx, ivec);
    n += (ivec)(__builtin_convertvector(n, vec) > fx);  /* truncation -> floor (true is -1) */
    vec nf = __builtin_convertvector(n, vec);
#endif
    vec r = x - nf * 0.693359375f - nf * -2.12194440e-4f;
    vec p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    return (vec)((ivec)(p * (vec)((n + 127) << 23)) & ~below);
}
#endif

/* Gelu(x) = x/2 (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7):
   erf(u) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-u^2), t = 1 / (1 + p u), u >= 0. */
static inline vec vgelu(vec x) {
    vec u = (vec)((ivec)(x * 0.70710678118654752f) & 0x7fffffff);
    vec t = 1.0f / (1.0f + 0.3275911f * u);
    vec poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    vec erf_abs = 1.0f - poly * vexp(-u * u);
    vec erf = (vec)((ivec)erf_abs | ((ivec)x & (int32_t)0x80000000));  /* the sign of x */
    return 0.5f * x * (1.0f + erf);
}

/* Gelu's tanh form 0.5 x (1 + tanh(z)) = x / (1 + e^(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3), as
   ge's numpy kernel computes it (ops/erf.py): e^(-2z) is 0 past x of about 10 (so x) and capped at
   e^88 below about -10 (so about -6e-38 x / 10, where the form gives -0). */
static inline vec vgelu_tanh(vec x) {
    const float k = -2 * 0.7978845608028654f;
    return x / (1.0f + vexp(x * (k + (k * 0.044715f) * x * x)));
}

/* 1 / (1 + e^-x); e^-x is 0 below x = -87 (so 1) and capped at e^88 above 87 (about 6e-39) */
static inline vec vsigmoid(vec x) { return 1.0f / (1.0f + vexp(-x)); }

/* 1 / x: the reciprocal estimate and Newton steps to float precision (relative error a few 1e-8) where the
   level has one, a division elsewhere; a step divides 5 vectors per hidden unit (LSTM), and a division
   costs several times the multiply-adds around it. A Newton step squares the estimate's error: AVX-512's
   14 bits need one, AVX's 12 bits two. The step is r + r (1 - x r), the correction computed small (fused),
   not r (2 - x r), whose 2 - x r rounds at 2's ulp: 1 / 1 came out 1 - 2^-23, and a GRU's 1 - z, which
   should be 0, -1.2e-7 (ONNX's GRU tests allow 1e-7) */
static inline vec newton(vec x, vec r) { return r + r * (1.0f - x * r); }
static inline vec vrecip(vec x) {
#if defined(__AVX512F__)
    return newton(x, (vec)_mm512_rcp14_ps((__m512)x));
#elif defined(__AVX__)
    return newton(x, newton(x, (vec)_mm256_rcp_ps((__m256)x)));
#else
    return 1.0f / x;
#endif
}

/* tanh by the rational approximation x P(x^2) / Q(x^2) on [-9, 9] (beyond it tanh is +-1 in float),
   as Eigen and MLAS compute it: a few ulp, with no cancellation near 0 (1 - 2 / (1 + e^2x) has). */
static inline vec vtanh(vec x) {
    x = vclamp(x, -9.0f, 9.0f);
    vec x2 = x * x;
    vec p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    vec q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p * vrecip(q);
}

/* The activation of abi.h's Activation on one vector (a switch per vector: the branch is the same
   every time, predicted, and a few cycles beside the vector's products). */
static inline vec vactivate(vec v, Activation f) {
    switch (f.act) {
        case ACT_CLAMP: return vclamp(v, f.a, f.b);
        case ACT_GELU: return vgelu(v);
        case ACT_GELU_TANH: return vgelu_tanh(v);
        case ACT_HARDSIGMOID: return vclamp(v * f.a + f.b, 0.0f, 1.0f);
        case ACT_HARDSWISH: return v * vclamp(v * (1.0f / 6) + 0.5f, 0.0f, 1.0f);
        case ACT_SIGMOID: return vsigmoid(v);
        case ACT_TANH: return vtanh(v);
        case ACT_SWISH: return v * vsigmoid(v * f.a);
        case ACT_LEAKY_RELU: {
            ivec neg = v < (vec){0};
            return (vec)(((ivec)v & ~neg) | ((ivec)(v * f.a) & neg));
        }
        default: return v;
    }
}

/* max(a, v) per lane; a NaN in v wins and stays (np.maximum's rule) */
static inline vec vmax(vec a, vec v) {
    ivec take = (v > a) | (v != v);
    return (vec)(((ivec)a & ~take) | ((ivec)v & take));
}


/* Short copies and fills as vector loops: a depthwise or fill row is a few dozen floats, where a
   memcpy/memset call costs more than the copy (GCC would turn the plain loops back into calls). */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_LIBCALLS
#endif

/* Lanes [0, n) set (all bits) */
static inline ivec lanes_below(int n) {
    ivec idx;
    for (int i = 0; i < VL; i++) idx[i] = i;
    return idx < n;
}

/* The first n (<= VL) lanes of a vector from or to memory (zeros past them): one masked access
   where the target has them (AVX-512's and AVX2's never touch the other lanes' memory; at AVX2 GCC
   had made the scalar loops memcpy/memset calls, 122 of them in the v3 library). */
static inline vec load_part(const float *p, int n) {
#if defined(__AVX512F__)
    return n == VL ? vload(p) : (vec)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#elif defined(__AVX2__)
    return n == VL ? vload(p) : (vec)_mm256_maskload_ps(p, (__m256i)lanes_below(n));
#else
    vec v = (vec){0};
    for (int j = 0; j < n; j++) v[j] = p[j];
    return v;
#endif
}

static inline void store_part(float *p, vec v, int n) {
#if defined(__AVX512F__)
    if (n == VL) vstore(p, v);
    else _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
#elif defined(__AVX2__)
    if (n == VL) vstore(p, v);
    else _mm256_maskstore_ps(p, (__m256i)lanes_below(n), (__m256)v);
#else
    for (int j = 0; j < n; j++) p[j] = v[j];
#endif
}

static inline void copy_floats(float *d, const float *s, int64_t n) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore(d + j, vload(s + j));
    if (j < n) store_part(d + j, load_part(s + j, (int)(n - j)), (int)(n - j));
}

static inline void fill_floats(float *d, int64_t n, float value) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore(d + j, (vec){0} + value);
    if (j < n) store_part(d + j, (vec){0} + value, (int)(n - j));
}

/* Transpose the rows x rows blocks of rows r[0, rows) in registers (rows a power of two, at most
VL): swap the off-diagonal h x h blocks for h = rows/2 .. 1. With rows = VL, the whole transpose;
with rows = VL/2, row i becomes [column i | column VL/2 + i] of the two halves. */
static inline __attribute__((always_inline)) void transpose_blocks(vec *r, const int rows) {
#if defined(__clang__)
    float t[VL][VL];
    for (int i = 0; i < rows; i++) for (int j = 0; j < VL; j++) t[i][j] = r[i][j];
    for (int i = 0; i < rows; i++) for (int j = 0; j < VL; j++) r[i][j] = t[j % rows][j / rows * rows + i];
#else
    ivec idx;
    for (int c = 0; c < VL; c++) idx[c] = c;
#pragma GCC unroll 8
    for (int h = rows / 2; h >= 1; h /= 2) {
        ivec upper = (idx & h) != 0;
        ivec lo = idx + (upper & (VL - h)), hi = idx + ((upper & VL) | (~upper & h));
#pragma GCC unroll 16
        for (int i = 0; i < rows; i++)
            if (!(i & h)) {
                vec a = r[i], b = r[i + h];
                r[i] = __builtin_shuffle(a, b, lo);
                r[i + h] = __builtin_shuffle(a, b, hi);
            }
    }
#endif
}

/* A packing's transpose: dst[(c % kk) * a + (c / kk) * b + r] = src[r * ld + c] for r < rows, c < n (the
   destination row of source column c: its place in the layout of the caller; kk 1: row c at c * b), by VL x VL
   blocks transposed in registers, the edges a float at a time (a strided copy a float at a time was ~5-6.5
   instructions a weight: most of a float CNN's packing at load) */
static inline void transpose_into(const float *src, int64_t ld, int64_t rows, int64_t n, float *dst, int64_t kk,
                                  int64_t a, int64_t b) {
    int64_t r = 0;
    for (; r + VL <= rows; r += VL) {
        int64_t c = 0;
        for (; c + VL <= n; c += VL) {
            vec v[VL];
#pragma GCC unroll 16
            for (int i = 0; i < VL; i++) v[i] = vload(src + (r + i) * ld + c);
            transpose_blocks(v, VL);
#pragma GCC unroll 16
            for (int i = 0; i < VL; i++) vstore(dst + ((c + i) % kk) * a + ((c + i) / kk) * b + r, v[i]);
        }
        for (; c < n; c++) {
            float *row = dst + (c % kk) * a + (c / kk) * b + r;
            for (int i = 0; i < VL; i++) row[i] = src[(r + i) * ld + c];
        }
    }
    for (int64_t c = 0; r < rows && c < n; c++) {
        float *row = dst + (c % kk) * a + (c / kk) * b;
        for (int64_t i = r; i < rows; i++) row[i] = src[i * ld + c];
    }
}

#endif
