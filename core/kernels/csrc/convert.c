/* float16 <-> float32 conversion (core/kernels/float16.py's adapter: float16 ops run by their float32
kernels), bit for bit numpy's: round to nearest even, overflow to infinity, subnormals exact, and a
NaN keeps its sign and the top of its payload, signalling or not (F16C's instructions quiet a
signalling NaN: the vectors holding a NaN are redone by the portable code, which numpy's rules are).

F16C (x86-64-v3) converts 8 lanes per instruction, AVX-512 16; other levels run the portable code.
Large tensors are split over the thread pool: the conversion is bound by memory bandwidth, which
one core does not fill. */
#include <string.h>

#include "abi.h"
#include "pool.h"
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define CONVERT_ITEM 32768  /* elements per work item: the pool's claim costs nothing beside it */

static inline uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h & 0x7c00, sig = h & 0x3ff;
    if (exp == 0x7c00) return bits_float(sign | 0x7f800000 | sig << 13);  /* inf, NaN: payload kept */
    if (exp == 0) return bits_float(sign | float_bits((float)sig * 0x1p-24f));  /* zero, subnormal: exact */
    return bits_float(sign | ((uint32_t)(h & 0x7fff) + 0x1c000) << 13);  /* rebias 15 -> 127 */
}

static inline uint16_t float_to_half(float x) {
    uint32_t f = float_bits(x), sign = (f >> 16) & 0x8000, mag = f & 0x7fffffff;
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

static void to_float_range(const uint16_t *s, float *d, int64_t i, int64_t end) {
#if defined(__AVX512F__)
    for (; i + 16 <= end; i += 16) {
        __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i)));
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {
            for (int j = 0; j < 16; j++) d[i + j] = half_to_float(s[i + j]);
        } else {
            _mm512_storeu_ps(d + i, v);
        }
    }
#elif defined(__F16C__)
    for (; i + 8 <= end; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++) d[i + j] = half_to_float(s[i + j]);
        } else {
            _mm256_storeu_ps(d + i, v);
        }
    }
#endif
    for (; i < end; i++) d[i] = half_to_float(s[i]);
}

static void to_half_range(const float *s, uint16_t *d, int64_t i, int64_t end) {
#if defined(__AVX512F__)
    for (; i + 16 <= end; i += 16) {
        __m512 v = _mm512_loadu_ps(s + i);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {
            for (int j = 0; j < 16; j++) d[i + j] = float_to_half(s[i + j]);
        } else {
            _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
#elif defined(__F16C__)
    for (; i + 8 <= end; i += 8) {
        __m256 v = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++) d[i + j] = float_to_half(s[i + j]);
        } else {
            _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
#endif
    for (; i < end; i++) d[i] = float_to_half(s[i]);
}

typedef struct {
    const void *src;
    void *dst;
    int64_t n;
    int to_half;
} Convert;

static void convert_item(void *ctx, int64_t it, int slot) {
    const Convert *c = ctx;
    (void)slot;
    int64_t i = it * CONVERT_ITEM, end = i + CONVERT_ITEM < c->n ? i + CONVERT_ITEM : c->n;
    if (c->to_half) to_half_range(c->src, c->dst, i, end);
    else to_float_range(c->src, c->dst, i, end);
}

static void convert(const void *src, void *dst, int64_t n, int to_half, int threads) {
    Convert c = {src, dst, n, to_half};
    int64_t items = (n + CONVERT_ITEM - 1) / CONVERT_ITEM;
    if (items <= 1 || threads <= 1) {
        if (to_half) to_half_range(src, dst, 0, n);
        else to_float_range(src, dst, 0, n);
    } else {
        pool_run(convert_item, &c, items, threads);
    }
}

void ge_half_to_float(const uint16_t *src, float *dst, int64_t n, int threads) { convert(src, dst, n, 0, threads); }
void ge_float_to_half(const float *src, uint16_t *dst, int64_t n, int threads) { convert(src, dst, n, 1, threads); }
