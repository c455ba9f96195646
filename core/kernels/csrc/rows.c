/* Row-wise kernels (a transformer's LayerNormalization, RMSNormalization and Softmax over the last axis): rows of
`cols` floats, items of ROWS_PER_ITEM rows. Statistics in float32 lanes, summed across lanes at
the end of the row. float16 rows (half) are converted into float32 a row at a time, computed as
float32 rows are, and rounded once as they are stored (on the stack up to HALF_STACK_COLS, longer
rows in a buffer of the item's). */
#include <stdlib.h>

#include "abi.h"
#include "half.h"

#define HALF_STACK_COLS 8192  /* float16 rows up to this long are converted on the stack (2 x 32 KB) */
#include "pool.h"
#include "simd.h"

#define ROWS_PER_ITEM 16

static inline float hsum(vec v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps((__m512)v);
#elif VL == 8 && defined(__AVX__)
    /* a tree of shuffles (the halves, then pairs), not 8 dependent scalar adds: a row of 128
       floats is only 16 vectors (with simd.h's AVX2 exp, softmax's rows of 128 and 197 20-30%
       faster, one thread) */
    __m128 h = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
#else
    float s = 0.0f;
    for (int i = 0; i < VL; i++) s += v[i];
    return s;
#endif
}

static void layer_norm_row(const Rows *r, const float *x, float *y) {
    int64_t n = r->cols, j;
    vec acc = (vec){0};
    float tail = 0.0f;
    for (j = 0; j + VL <= n; j += VL) acc += vload(x + j);
    for (; j < n; j++) tail += x[j];
    float mean = (hsum(acc) + tail) / (float)n;
    acc = (vec){0}, tail = 0.0f;
    for (j = 0; j + VL <= n; j += VL) { vec d = vload(x + j) - mean; acc += d * d; }
    for (; j < n; j++) tail += (x[j] - mean) * (x[j] - mean);
    float inv = 1.0f / __builtin_sqrtf((hsum(acc) + tail) / (float)n + r->eps);
    for (j = 0; j + VL <= n; j += VL) {
        vec v = (vload(x + j) - mean) * inv;
        if (r->scale) v *= vload(r->scale + j);
        if (r->bias) v += vload(r->bias + j);
        vstore(y + j, v);
    }
    for (; j < n; j++) y[j] = (x[j] - mean) * inv * (r->scale ? r->scale[j] : 1.0f) + (r->bias ? r->bias[j] : 0.0f);
}

/* x / sqrt(mean(x * x) + eps) * scale: one pass for the sum of squares (two chains), one for the
scaled row, the tail through masked loads */
static void rms_norm_row(const Rows *r, const float *x, float *y) {
    int64_t n = r->cols, j;
    int tail = (int)(n % VL);
    int64_t body = n - tail;
    vec acc = (vec){0}, acc2 = (vec){0};
    for (j = 0; j + 2 * VL <= body; j += 2 * VL) {
        vec v = vload(x + j), v2 = vload(x + j + VL);
        acc += v * v;
        acc2 += v2 * v2;
    }
    if (j < body) { vec v = vload(x + j); acc += v * v; }
    if (tail) { vec v = load_part(x + body, tail); acc2 += v * v; }
    float inv = 1.0f / __builtin_sqrtf(hsum(acc + acc2) / (float)n + r->eps);
    const float *s = r->scale;
    for (j = 0; j < body; j += VL) {
        vec v = vload(x + j) * inv;
        vstore(y + j, s ? v * vload(s + j) : v);
    }
    if (tail) {
        vec v = load_part(x + body, tail) * inv;
        store_part(y + body, s ? v * load_part(s + body, tail) : v, tail);
    }
}

/* The largest lane (NaNs aside) and whether any lane is set: one tree of shuffles on AVX-512
(_mm512_reduce_*), not VL dependent scalar steps (a row of 128 floats is 8 vectors: the scalar
reductions had cost as much as the row). */
static inline float hmax(vec v) {
#if defined(__AVX512F__)
    return _mm512_reduce_max_ps((__m512)v);
#elif VL == 8 && defined(__AVX__)
    __m128 h = _mm_max_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
#else
    float m = v[0];
    for (int i = 1; i < VL; i++) m = v[i] > m ? v[i] : m;
    return m;
#endif
}

static inline int any_lane(ivec v) {
#if defined(__AVX512F__)
    return _mm512_reduce_or_epi32((__m512i)v) != 0;
#elif VL == 8 && defined(__AVX__)
    return !_mm256_testz_si256((__m256i)v, (__m256i)v);
#else
    int any = 0;
    for (int i = 0; i < VL; i++) any |= v[i] != 0;
    return any;
#endif
}

/* Softmax over R rows at once (R a constant: 1, or 2 for a pair of rows), each row's steps in its own
   order (the same bytes as one at a time): the row's passes are chains of dependent steps (the maximum,
   the sum, then 1 / sum), and two rows' chains side by side keep the vector units busy where one row's
   would wait (BERT-small's attention, [1, 8, 128, 128]: 8% faster at v3, one thread). TRIP (a constant):
   x is read through r->x_trip and y stored through r->y_trip where they are on (a QDQ model's
   QuantizeDequantize before and after the softmax, in registers: each was a pass over the tensor).
   next: the rows after these, or NULL: a line of each is prefetched per step of the exponentials, so
   that a tensor larger than the caches streams in while these rows compute, not after them (Whisper's
   scores over 3000 frames, [6, 1500, 1500], written over in place: 8.6 -> 5.3 ms at v4, 10.6 -> 9.4 at
   v3, one thread on a Zen 4) */
static inline __attribute__((always_inline)) vec trip(vec v, const RoundTrip *t) {
    return vround_trip(v, (vec){0} + t->scale, (vec){0} + t->zp, (float)t->lo, (float)t->hi, t->is_signed);
}
#define X_IN(v) (TRIP && r->x_trip.on ? trip((v), &r->x_trip) : (v))
#define Y_OUT(v) (TRIP && r->y_trip.on ? trip((v), &r->y_trip) : (v))

static inline __attribute__((always_inline)) void softmax_rows(const Rows *r, const float *const *xs, float *const *ys,
                                                               const int R, const int TRIP, const float *next) {
    int64_t n = r->cols, j;
    int tail = (int)(n % VL);
    int64_t body = n - tail;
    ivec in_row = lanes_below(tail);
    float m[2], inv[2];
    const int KEPT = TRIP && r->x_trip.on;
    /* the row maximum (two chains of compare-and-blend; NaNs apart): a NaN anywhere makes it NaN,
       as np.max */
    vec vm[2], vm2[2];
    ivec nan[2];
    for (int k = 0; k < R; k++) {
        vm[k] = vm2[k] = X_IN((vec){0} + xs[k][0]);
        nan[k] = (ivec){0};
    }
    for (j = 0; j + 2 * VL <= body; j += 2 * VL)
        for (int k = 0; k < R; k++) {
            vec v = X_IN(vload(xs[k] + j)), v2 = X_IN(vload(xs[k] + j + VL));
            if (KEPT) {  /* the round trip's values kept in y (the row stays in L1) for the exponentials */
                vstore(ys[k] + j, v);
                vstore(ys[k] + j + VL, v2);
            }
#if VL == 8 && defined(__AVX__)
            /* one vmaxps each (a NaN in v leaves vm, its second operand; `nan` below sees it), not a
               compare and a blend: BERT's and ViT's rows of 128 and 197 12-18% faster, one thread */
            vm[k] = (vec)_mm256_max_ps((__m256)v, (__m256)vm[k]);
            vm2[k] = (vec)_mm256_max_ps((__m256)v2, (__m256)vm2[k]);
#else
            ivec gt = v > vm[k], gt2 = v2 > vm2[k];
            vm[k] = (vec)(((ivec)vm[k] & ~gt) | ((ivec)v & gt));
            vm2[k] = (vec)(((ivec)vm2[k] & ~gt2) | ((ivec)v2 & gt2));
#endif
            nan[k] |= (v != v) | (v2 != v2);
        }
    for (int k = 0; k < R; k++) {
        const float *x = xs[k];
        for (j = body - body % (2 * VL); j < body + (tail ? VL : 0); j += VL) {  /* the lanes past the row keep the running maximum */
            vec v = j < body ? X_IN(vload(x + j)) : (vec)(((ivec)X_IN(load_part(x + j, tail)) & in_row) | ((ivec)vm[k] & ~in_row));
            if (KEPT) store_part(ys[k] + j, v, j < body ? VL : tail);
            ivec gt = v > vm[k];
            vm[k] = (vec)(((ivec)vm[k] & ~gt) | ((ivec)v & gt));
            nan[k] |= v != v;
        }
        ivec gt = vm2[k] > vm[k];
        vm[k] = (vec)(((ivec)vm[k] & ~gt) | ((ivec)vm2[k] & gt));
        m[k] = any_lane(nan[k]) ? __builtin_nanf("") : hmax(vm[k]);
    }
    vec acc[2] = {(vec){0}, (vec){0}};
    const float *const *src = KEPT ? (const float *const *)ys : xs;
    for (j = 0; j < body; j += VL) {
        if (next)  /* the next rows into the caches while these compute: a line of each a step */
            for (int k = 0; k < R; k++) __builtin_prefetch(next + k * n + j, 0, 3);
        for (int k = 0; k < R; k++) {
            vec e = vexp(vload(src[k] + j) - m[k]);
            vstore(ys[k] + j, e);
            acc[k] += e;
        }
    }
    for (int k = 0; k < R; k++) {
        if (tail) {
            vec e = (vec)((ivec)vexp(load_part(src[k] + body, tail) - m[k]) & in_row);
            store_part(ys[k] + body, e, tail);
            acc[k] += e;
        }
        inv[k] = 1.0f / hsum(acc[k]);
    }
    for (j = 0; j < body; j += VL)
        for (int k = 0; k < R; k++) vstore(ys[k] + j, Y_OUT(vload(ys[k] + j) * inv[k]));
    for (int k = 0; k < R; k++)
        if (tail) store_part(ys[k] + body, Y_OUT(load_part(ys[k] + body, tail) * inv[k]), tail);
}
#undef X_IN
#undef Y_OUT

static void softmax_row(const Rows *r, const float *x, float *y) { softmax_rows(r, &x, &y, 1, 0, NULL); }
static void softmax_row_trips(const Rows *r, const float *x, float *y) { softmax_rows(r, &x, &y, 1, 1, NULL); }

static void rows_item(void *ctx, int64_t it, int slot) {
    const Rows *r = ctx;
    (void)slot;
    int64_t i1 = (it + 1) * ROWS_PER_ITEM < r->rows ? (it + 1) * ROWS_PER_ITEM : r->rows;
    const int trips = r->kind == ROWS_SOFTMAX && !r->half && (r->x_trip.on || r->y_trip.on);
    void (*row)(const Rows *, const float *, float *) =
        r->kind == ROWS_SOFTMAX ? (trips ? softmax_row_trips : softmax_row)
                                : r->kind == ROWS_RMS_NORM ? rms_norm_row : layer_norm_row;
    if (!r->half) {
        int64_t i = it * ROWS_PER_ITEM;
        if (r->kind == ROWS_SOFTMAX)  /* rows in pairs */
            for (; i + 1 < i1; i += 2) {
                const float *xs[2] = {r->x + i * r->cols, r->x + (i + 1) * r->cols};
                float *ys[2] = {r->y + i * r->cols, r->y + (i + 1) * r->cols};
                const float *next = i + 3 < i1 ? xs[1] + r->cols : NULL;  /* (the item's own rows) */
                if (trips) softmax_rows(r, xs, ys, 2, 1, next);
                else softmax_rows(r, xs, ys, 2, 0, next);
            }
        for (; i < i1; i++) row(r, r->x + i * r->cols, r->y + i * r->cols);
        return;
    }
    float stack[r->cols <= HALF_STACK_COLS ? 2 * r->cols : 1];
    float *xb = r->cols <= HALF_STACK_COLS ? stack : malloc((size_t)r->cols * 2 * sizeof(float));
    if (!xb) abort();  /* a few row buffers of memory: no way on without them */
    float *yb = xb + r->cols;
    for (int64_t i = it * ROWS_PER_ITEM; i < i1; i++) {
        halves_to_floats(xb, (const uint16_t *)r->x + i * r->cols, r->cols);
        row(r, xb, yb);
        floats_to_halves((uint16_t *)r->y + i * r->cols, yb, r->cols);
    }
    if (xb != stack) free(xb);
}

void ge_rows(const Rows *r) {
    if (r->cols > 0) pool_run(rows_item, (void *)r, (r->rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, r->threads);
}
