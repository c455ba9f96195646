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

/* One output row, separably: the maximum over the window's rows of every input pixel of the row (a
   row buffer), then per output pixel over the window's columns of the buffer: kh + kw vector maxima
   per pixel instead of kh x kw (SPPF's 5x5: 10 instead of 25). */
static void max_pool_row_separable(const NchwcMaxPool *p, const float *x, float *y, int64_t oh, float *row) {
    for (int64_t q = 0; q < p->w * NB; q++) vstore(row + q * VL, (vec){0} - INFINITY);
    for (int64_t kh = 0; kh < p->kh; kh++) {
        int64_t ih = oh * p->sh - p->ph + kh * p->dh;
        if (ih < 0 || ih >= p->h) continue;
        const float *src = x + ih * p->w * BLK;
        for (int64_t q = 0; q < p->w * NB; q++) vstore(row + q * VL, vmax(vload(row + q * VL), vload(src + q * VL)));
    }
    for (int64_t ow = 0; ow < p->ow; ow++) {
        vec m[NB];
        for (int j = 0; j < NB; j++) m[j] = (vec){0} - INFINITY;
        for (int64_t kw = 0; kw < p->kw; kw++) {
            int64_t iw = ow * p->sw - p->pw + kw * p->dw;
            if (iw < 0 || iw >= p->w) continue;
            for (int j = 0; j < NB; j++) m[j] = vmax(m[j], vload(row + iw * BLK + j * VL));
        }
        for (int j = 0; j < NB; j++) vstore(y + (oh * p->ow + ow) * BLK + j * VL, m[j]);
    }
}

#define SEPARABLE_ROW_FLOATS 16384  /* the widest input row (floats) the separable plan's buffer takes */

static void max_pool_item(void *ctx, int64_t it, int slot) {
    const MaxPoolWork *w = ctx;
    const NchwcMaxPool *p = w->p;
    (void)slot;
    int64_t plane = it / w->row_items, oh0 = it % w->row_items * w->rows_per_item;
    int64_t oh1 = oh0 + w->rows_per_item < p->oh ? oh0 + w->rows_per_item : p->oh;
    const float *x = p->x + plane * p->h * p->w * BLK;
    float *y = p->y + plane * p->oh * p->ow * BLK;
    if (p->kh > 1 && p->kw > 1 && p->w * BLK <= SEPARABLE_ROW_FLOATS) {
        _Alignas(64) float row[SEPARABLE_ROW_FLOATS];
        for (int64_t oh = oh0; oh < oh1; oh++) max_pool_row_separable(p, x, y, oh, row);
        return;
    }
    for (int64_t oh = oh0; oh < oh1; oh++) {
        for (int64_t ow = 0; ow < p->ow; ow++) {
            vec m[NB];
            for (int j = 0; j < NB; j++) m[j] = (vec){0} - INFINITY;
            for (int64_t kh = 0; kh < p->kh; kh++) {
                int64_t ih = oh * p->sh - p->ph + kh * p->dh;
                if (ih < 0 || ih >= p->h) continue;
                for (int64_t kw = 0; kw < p->kw; kw++) {
                    int64_t iw = ow * p->sw - p->pw + kw * p->dw;
                    if (iw < 0 || iw >= p->w) continue;
                    const float *src = x + (ih * p->w + iw) * BLK;
                    for (int j = 0; j < NB; j++) m[j] = vmax(m[j], vload(src + j * VL));
                }
            }
            float *dst = y + (oh * p->ow + ow) * BLK;
            for (int j = 0; j < NB; j++) vstore(dst + j * VL, m[j]);
        }
    }
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
