/* MaxPool, GlobalAveragePool and a squeeze-excite gate's per-channel scale on the blocked layout NCHW16c
(nchwc.c's: [N][ceil(C/16)][H][W][16]), so that a region of blocked convolutions does not end at a pool
or at MobileNetV3's gates (kernels/blocked.py). The 16 channels of a
pixel are one to four vectors: a window's max is one vmax per tap and vector, a plane's mean a sum of
its pixels' vectors; no transpose, no strided access.

MaxPool: x [planes][h][w][B], y [planes][oh][ow][B] (planes = batch x blocks), pads at the beginnings;
taps outside X are skipped (ONNX pads MaxPool with -inf), a NaN wins as in np.maximum; separable (rows,
then columns) where the window is 2-D. Items: (plane, run of output rows).
GlobalAveragePool: x [batch][blocks][plane][B] into the NCHW means y [batch][channels]. Items: (batch
item, block).
Scale: y = x * scale, the NCHW gate [batch][channels] one vector per block, loaded once (zeros past the
channels); y may be x. Items: (batch item, block). */
#include <math.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "abi.h"
#include "pool.h"
#include "simd.h"

#define BLK 16
#define NB (BLK / VL)           /* vectors per block */
#define POOL_ITEM_FLOATS 4096   /* an item's least output: claiming it costs nothing beside it */

typedef struct {
    const NchwcMaxPool *p;
    int64_t rows_per_item, row_items;
} MaxPoolWork;

/* The window's taps [k0, k1) along one axis that lie inside [0, size) for output index o */
static inline void pool_taps(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t size, int64_t *k0,
                             int64_t *k1) {
    int64_t at = o * stride - pad;
    *k0 = 0, *k1 = k;
    while (*k0 < k && at + *k0 * dil < 0) ++*k0;
    while (*k1 > *k0 && at + (*k1 - 1) * dil >= size) --*k1;
}

/* One output row, separably: the maximum over the window's rows of every input pixel of the row, in
   registers and stored once into a row buffer, then per output pixel over the window's columns of the
   buffer: kh + kw vector maxima per pixel instead of kh x kw (SPPF's 5x5: 10 instead of 25). The taps inside X
   are a range per row and column (pool_taps), not a test per tap. */
static void max_pool_row_separable(const NchwcMaxPool *p, const float *x, float *y, int64_t oh, float *row) {
    int64_t k0, k1;
    pool_taps(oh, p->sh, p->ph, p->dh, p->kh, p->h, &k0, &k1);
    const float *src = x + (oh * p->sh - p->ph) * p->w * BLK;
    const int64_t down = p->dh * p->w * BLK;
    for (int64_t q = 0; q < p->w * NB; q++) {
        vec m = (vec){0} - INFINITY;
        for (int64_t kh = k0; kh < k1; kh++) m = vmax(m, vload(src + kh * down + q * VL));
        vstore(row + q * VL, m);
    }
    for (int64_t ow = 0; ow < p->ow; ow++) {
        int64_t j0, j1;
        pool_taps(ow, p->sw, p->pw, p->dw, p->kw, p->w, &j0, &j1);
        const float *r = row + (ow * p->sw - p->pw) * BLK;
        vec m[NB];
        for (int j = 0; j < NB; j++) m[j] = (vec){0} - INFINITY;
        for (int64_t kw = j0; kw < j1; kw++)
            for (int j = 0; j < NB; j++) m[j] = vmax(m[j], vload(r + kw * p->dw * BLK + j * VL));
        for (int j = 0; j < NB; j++) vstore(y + (oh * p->ow + ow) * BLK + j * VL, m[j]);
    }
}

/* The window's maximum as vmax takes it (tap after tap from -inf, the first of equal ones kept: -0 or +0),
   in one instruction per tap: x86's max, GREATER(v, m), is v where v > m, else m: vmax's where no tap is
   NaN; and beside it whether any tap was NaN (an unordered compare): a window with a NaN is taken again
   with vmax, whose NaN wins. Each row of the window is one chain and the rows' maxima are taken in row
   order, which keeps the first of equal taps as the one chain did, so a window waits on 3 + 3
   maxima's latencies in a 3x3 window, not 9. vmax's compares and blends, 6 instructions a tap in one
   chain, left ResNet-50's stem pool 1.5x onnxruntime's at AVX2. */
#if defined(__AVX512F__)
typedef __mmask16 NanSeen;
#define NAN_NONE 0
#define SEE_NAN(seen, v) ((seen) |= _mm512_cmp_ps_mask((__m512)(v), (__m512)(v), _CMP_UNORD_Q))
#define GREATER(v, m) ((vec)_mm512_max_ps((__m512)(v), (__m512)(m)))
#define NAN_ANY(seen) ((seen) != 0)
#elif defined(__AVX__)
typedef __m256 NanSeen;
#define NAN_NONE _mm256_setzero_ps()
#define SEE_NAN(seen, v) ((seen) = _mm256_or_ps((seen), _mm256_cmp_ps((__m256)(v), (__m256)(v), _CMP_UNORD_Q)))
#define GREATER(v, m) ((vec)_mm256_max_ps((__m256)(v), (__m256)(m)))
#define NAN_ANY(seen) (_mm256_movemask_ps(seen) != 0)
#elif defined(__SSE__)
typedef __m128 NanSeen;
#define NAN_NONE _mm_setzero_ps()
#define SEE_NAN(seen, v) ((seen) = _mm_or_ps((seen), _mm_cmpunord_ps((__m128)(v), (__m128)(v))))
#define GREATER(v, m) ((vec)_mm_max_ps((__m128)(v), (__m128)(m)))
#define NAN_ANY(seen) (_mm_movemask_ps(seen) != 0)
#else
typedef int NanSeen;
#define NAN_NONE 0
#define SEE_NAN(seen, v) ((void)(seen))
#define GREATER(v, m) vmax((m), (v))
#define NAN_ANY(seen) ((void)(seen), 0)
#endif

/* One output row, a window at a time: kh x kw vector maxima per pixel, each input vector loaded once
   per window (a 3x3 stride-2 window: 9 loads per output vector, where the separable plan's row buffer
   took 4 + 4 loads and stores per input column and output vector) */
static void max_pool_row_direct(const NchwcMaxPool *p, const float *x, float *y, int64_t oh) {
    int64_t k0, k1;
    pool_taps(oh, p->sh, p->ph, p->dh, p->kh, p->h, &k0, &k1);
    const float *src = x + (oh * p->sh - p->ph) * p->w * BLK;
    const int64_t down = p->dh * p->w * BLK, across = p->dw * BLK;
    for (int64_t ow = 0; ow < p->ow; ow++) {
        int64_t j0, j1;
        pool_taps(ow, p->sw, p->pw, p->dw, p->kw, p->w, &j0, &j1);
        const float *r = src + (ow * p->sw - p->pw) * BLK;
        vec m[NB];
        NanSeen seen = NAN_NONE;
        for (int j = 0; j < NB; j++) m[j] = (vec){0} - INFINITY;
        for (int64_t kh = k0; kh < k1 && j0 < j1; kh++) {
            const float *t = r + kh * down + j0 * across;
            vec row[NB];
            for (int j = 0; j < NB; j++) row[j] = vload(t + j * VL), SEE_NAN(seen, row[j]);
            for (int64_t kw = j0 + 1; kw < j1; kw++)
                for (int j = 0; j < NB; j++) {
                    vec v = vload(t + (kw - j0) * across + j * VL);
                    SEE_NAN(seen, v);
                    row[j] = GREATER(v, row[j]);
                }
            for (int j = 0; j < NB; j++) m[j] = GREATER(row[j], m[j]);
        }
        if (NAN_ANY(seen)) {
            for (int j = 0; j < NB; j++) m[j] = (vec){0} - INFINITY;
            for (int64_t kh = k0; kh < k1; kh++)
                for (int64_t kw = j0; kw < j1; kw++)
                    for (int j = 0; j < NB; j++) m[j] = vmax(m[j], vload(r + kh * down + kw * across + j * VL));
        }
        float *dst = y + (oh * p->ow + ow) * BLK;
        for (int j = 0; j < NB; j++) vstore(dst + j * VL, m[j]);
    }
}

#define SEPARABLE_ROW_FLOATS 16384  /* the widest input row (floats) the separable plan's buffer takes */

/* Whether the separable plan loads and stores fewer vectors per output row than the direct one */
static int pool_separable(const NchwcMaxPool *p) {
    if (p->kh < 2 || p->kw < 2 || p->w * BLK > SEPARABLE_ROW_FLOATS) return 0;
    return (p->kh + 1) * p->w + (p->kw + 1) * p->ow < (p->kh * p->kw + 1) * p->ow;
}

static void max_pool_item(void *ctx, int64_t it, int slot) {
    const MaxPoolWork *w = ctx;
    const NchwcMaxPool *p = w->p;
    (void)slot;
    int64_t plane = it / w->row_items, oh0 = it % w->row_items * w->rows_per_item;
    int64_t oh1 = oh0 + w->rows_per_item < p->oh ? oh0 + w->rows_per_item : p->oh;
    const float *x = p->x + plane * p->h * p->w * BLK;
    float *y = p->y + plane * p->oh * p->ow * BLK;
    if (pool_separable(p)) {
        _Alignas(64) float row[SEPARABLE_ROW_FLOATS];
        for (int64_t oh = oh0; oh < oh1; oh++) max_pool_row_separable(p, x, y, oh, row);
        return;
    }
    for (int64_t oh = oh0; oh < oh1; oh++) max_pool_row_direct(p, x, y, oh);
}

void ge_nchwc_max_pool(const NchwcMaxPool *p) {
    if (p->planes <= 0 || p->oh <= 0 || p->ow <= 0) return;  /* nothing to write (the split divides by these) */
    MaxPoolWork w = {.p = p};
    int64_t row = p->ow * BLK;
    w.rows_per_item = POOL_ITEM_FLOATS / row > 1 ? POOL_ITEM_FLOATS / row : 1;
    if (w.rows_per_item > p->oh) w.rows_per_item = p->oh;
    w.row_items = (p->oh + w.rows_per_item - 1) / w.rows_per_item;
    pool_run(max_pool_item, &w, p->planes * w.row_items, p->threads < 1 ? 1 : p->threads);
}

static void mean_item(void *ctx, int64_t it, int slot) {
    const NchwcMean *m = ctx;
    (void)slot;
    int64_t blocks = (m->channels + BLK - 1) / BLK, n = it / blocks, cb = it % blocks;
    const float *x = m->x + it * m->plane * BLK;
    vec acc[2][NB];  /* two sums in turn: the adds of one pixel do not wait for the last one's */
    for (int j = 0; j < NB; j++) acc[0][j] = acc[1][j] = (vec){0};
    int64_t q = 0;
    for (; q + 1 < m->plane; q += 2)
        for (int j = 0; j < NB; j++) {
            acc[0][j] += vload(x + q * BLK + j * VL);
            acc[1][j] += vload(x + (q + 1) * BLK + j * VL);
        }
    if (q < m->plane)
        for (int j = 0; j < NB; j++) acc[0][j] += vload(x + q * BLK + j * VL);
    float sums[BLK];
    for (int j = 0; j < NB; j++) vstore(sums + j * VL, (acc[0][j] + acc[1][j]) * (1.0f / (float)m->plane));
    int64_t c0 = cb * BLK, nc = m->channels - c0 < BLK ? m->channels - c0 : BLK;
    float *y = m->y + n * m->channels + c0;
    for (int64_t c = 0; c < nc; c++) y[c] = sums[c];
}

void ge_nchwc_mean(const NchwcMean *m) {
    int64_t items = m->batch * ((m->channels + BLK - 1) / BLK);
    pool_run(mean_item, (void *)m, items, m->threads < 1 ? 1 : m->threads);
}

static void scale_item(void *ctx, int64_t it, int slot) {
    const NchwcScale *s = ctx;
    (void)slot;
    int64_t blocks = (s->channels + BLK - 1) / BLK, n = it / blocks, c0 = it % blocks * BLK;
    int64_t nc = s->channels - c0 < BLK ? s->channels - c0 : BLK;
    float gate[BLK] = {0};
    for (int64_t c = 0; c < nc; c++) gate[c] = s->scale[n * s->channels + c0 + c];
    vec g[NB];
    for (int j = 0; j < NB; j++) g[j] = vload(gate + j * VL);
    const float *x = s->x + it * s->plane * BLK;
    float *y = s->y + it * s->plane * BLK;
    for (int64_t q = 0; q < s->plane; q++)
        for (int j = 0; j < NB; j++) vstore(y + q * BLK + j * VL, vload(x + q * BLK + j * VL) * g[j]);
}

void ge_nchwc_scale(const NchwcScale *s) {
    int64_t items = s->batch * ((s->channels + BLK - 1) / BLK);
    pool_run(scale_item, (void *)s, items, s->threads < 1 ? 1 : s->threads);
}
