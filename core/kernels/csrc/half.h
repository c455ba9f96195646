/* float16 operands of the float32 kernels: the kernels read float16 activations and write float16
results themselves, converting a vector (or a short run) at a time as they load and store, and
compute in float32 (core/kernels/float16.py: one rounding per op output, as the float32 kernel
between whole-tensor conversions gave, bit for bit). The conversions are numpy's: round to nearest
even, overflow to infinity, subnormals exact, a NaN keeps its sign and the top of its payload
(F16C's instructions quiet a signalling NaN: a vector holding a NaN is redone by the portable code).
F16C (x86-64-v3) converts 8 lanes per instruction, AVX-512 16; other levels run the portable code.
On aarch64 numpy converts with the FCVT instructions, which quiet a signalling NaN (keeping the top of
its payload): so do ge's conversions there (__fp16 casts are FCVT, part of armv8-a's base FP). */
#ifndef GE_HALF_H
#define GE_HALF_H

#include <stdint.h>
#include <string.h>

#include "simd.h"
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

static inline uint32_t half_float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float half_bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#if defined(__aarch64__)
static inline float half_to_float(uint16_t h) { __fp16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t float_to_half(float f) { __fp16 x = (__fp16)f; uint16_t h; memcpy(&h, &x, 2); return h; }
#else
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h & 0x7c00, sig = h & 0x3ff;
    if (exp == 0x7c00) return half_bits_float(sign | 0x7f800000 | sig << 13);  /* inf, NaN: payload kept */
    if (exp == 0) return half_bits_float(sign | half_float_bits((float)sig * 0x1p-24f));  /* zero, subnormal: exact */
    return half_bits_float(sign | ((uint32_t)(h & 0x7fff) + 0x1c000) << 13);  /* rebias 15 -> 127 */
}

static inline uint16_t float_to_half(float x) {
    uint32_t f = half_float_bits(x), sign = (f >> 16) & 0x8000, mag = f & 0x7fffffff;
    if (mag > 0x7f800000) {  /* NaN: the payload's top 10 bits, and at least one of them */
        uint32_t payload = (mag & 0x7fffff) >> 13;
        return (uint16_t)(sign | 0x7c00 | (payload ? payload : 1));
    }
    if (mag >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  /* rounds to 65536 or more: infinity */
    if (mag < 0x38800000) {  /* below 2^-14: a subnormal half (or zero), in steps of 2^-24 */
        if (mag < 0x33000000) return (uint16_t)sign;  /* at most half the least subnormal: zero */
        /* the value is m 2^(e - 150) (m: the 24-bit significand, e: the exponent field), in units of
           2^-24 m >> s with s = 126 - e in [14, 24], rounded half to even */
        uint32_t s = 126 - (mag >> 23), m = (mag & 0x7fffff) | 0x800000;
        uint32_t q = m >> s, rest = m & ((1u << s) - 1), half = 1u << (s - 1);
        q += rest > half || (rest == half && (q & 1));
        return (uint16_t)(sign | q);  /* q reaching 0x400 is the least normal: right as it is */
    }
    uint32_t rest = mag & 0x1fff, q = (mag >> 13) - (112 << 10);  /* rebias 127 -> 15 */
    q += rest > 0x1000 || (rest == 0x1000 && (q & 1));  /* a carry into the exponent is right too */
    return (uint16_t)(sign | q);
}
#endif

/* VL float16 values at p as a vector of float32 */
static inline vec vload_half(const uint16_t *p) {
    vec v;
#if defined(__AVX512F__) && VL == 16
    v = (vec)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    if (!_mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q)) return v;
#elif defined(__F16C__) && VL == 8
    v = (vec)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (!_mm256_movemask_ps(_mm256_cmp_ps((__m256)v, (__m256)v, _CMP_UNORD_Q))) return v;
#endif
    for (int j = 0; j < VL; j++) v[j] = half_to_float(p[j]);
    return v;
}

/* a vector rounded to VL float16 values at p */
static inline void vstore_half(uint16_t *p, vec v) {
#if defined(__AVX512F__) && VL == 16
    if (!_mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q)) {
        _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        return;
    }
#elif defined(__F16C__) && VL == 8
    if (!_mm256_movemask_ps(_mm256_cmp_ps((__m256)v, (__m256)v, _CMP_UNORD_Q))) {
        _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        return;
    }
#endif
    for (int j = 0; j < VL; j++) p[j] = float_to_half(v[j]);
}

/* The first n (<= VL) lanes from or to float16 memory (zeros past them on loads): one masked access
   where the target has them, else through a buffer (a loop, not a memcpy call). */
static inline vec load_half_part(const uint16_t *p, int n) {
    if (n == VL) return vload_half(p);
#if defined(__AVX512BW__) && defined(__AVX512VL__) && VL == 16
    vec v = (vec)_mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p));
    if (!_mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q)) return v;
#endif
    uint16_t t[VL] = {0};
    for (int j = 0; j < n; j++) t[j] = p[j];
    return vload_half(t);
}

static inline void store_half_part(uint16_t *p, vec v, int n) {
    if (n == VL) { vstore_half(p, v); return; }
#if defined(__AVX512BW__) && defined(__AVX512VL__) && VL == 16
    if (!_mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q)) {
        _mm256_mask_storeu_epi16(p, (__mmask16)((1u << n) - 1),
                                 _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        return;
    }
#endif
    uint16_t t[VL];
    vstore_half(t, v);
    for (int j = 0; j < n; j++) p[j] = t[j];
}

/* Runs of n values between float16 and float32 memory. */
static inline void halves_to_floats(float *d, const uint16_t *s, int64_t n) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore(d + j, vload_half(s + j));
    if (j < n) store_part(d + j, load_half_part(s + j, (int)(n - j)), (int)(n - j));
}

static inline void floats_to_halves(uint16_t *d, const float *s, int64_t n) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore_half(d + j, vload(s + j));
    if (j < n) store_half_part(d + j, load_part(s + j, (int)(n - j)), (int)(n - j));
}

/* VL lanes of a float32 (half 0) or float16 (half 1) array at element i, or its first n of them */
static inline vec vload_any(const void *p, int half, int64_t i) {
    return half ? vload_half((const uint16_t *)p + i) : vload((const float *)p + i);
}

static inline vec load_any_part(const void *p, int half, int64_t i, int n) {
    return half ? load_half_part((const uint16_t *)p + i, n) : load_part((const float *)p + i, n);
}

static inline void store_any_part(void *p, int half, int64_t i, vec v, int n) {
    if (half) store_half_part((uint16_t *)p + i, v, n);
    else store_part((float *)p + i, v, n);
}

/* p advanced by n elements of float32 (half 0) or float16 (half 1) */
static inline const void *advance(const void *p, int half, int64_t n) {
    return p ? (const char *)p + n * (half ? 2 : 4) : p;
}

#endif
