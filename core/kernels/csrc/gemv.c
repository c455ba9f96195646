/* Few rows times constant weights as rows of K (a squeeze-excite block's 1x1 convs on a 1x1 plane, a
recurrent layer's input projection): y[r, n] = act(bias[n] + sum_k x[r, k] w[n, k]) for r < rows
(a Conv's [Cout, Cin]), streamed once, in order. Without x (GemmArgs.a NULL,
one row): y[n] = alpha * sum_k w[n, k], the means of GlobalAveragePool's planes. Such a product is bound by
reading the weights: the GEMM's panels would cost a packing pass over A and compute whole tiles of
rows for one. Items are blocks of GEMV_ITEM weight rows; each block of VL
weight rows is read in order and stays in cache while every row of x is dotted with it. A MatMul's
or Gemm's constant W takes the packed GEMV at the end of this file instead (W packed at load). */
#include <stdlib.h>

#include "abi.h"
#include "half.h"
#include "pool.h"
#include "simd.h"

#define GEMV_ITEM 64  /* a multiple of every VL */

static inline float hsum(vec v) {
    float s = 0.0f;
    for (int i = 0; i < VL; i++) s += v[i];
    return s;
}

/* Lane j: the sum of the lanes of r[j], for VL vectors r (overwritten). Pairs of vectors are halved
   and added, log2(VL) rounds (VL - 1 pairs of shuffles, where a transpose costs VL log2(VL) / 2 pairs
   and VL - 1 adds after it: a 7x7 plane's sum is mostly this), which leaves row bitreverse(j) in
   lane j; one shuffle puts the rows in order. */
static inline __attribute__((always_inline)) vec sum_across(vec *r) {
#if defined(__clang__)
    transpose_blocks(r, VL);
    vec s = r[0];
    for (int j = 1; j < VL; j++) s += r[j];
    return s;
#else
    ivec idx, rev;
    for (int c = 0; c < VL; c++) {
        idx[c] = c, rev[c] = 0;
        for (int m = 1, x = c; m < VL; m <<= 1, x >>= 1) rev[c] = (rev[c] << 1) | (x & 1);
    }
#pragma GCC unroll 8
    for (int h = VL / 2, n = VL; h >= 1; h /= 2, n /= 2) {
        ivec upper = (idx & h) != 0;
        ivec lo = idx + (upper & (VL - h)), hi = idx + ((upper & VL) | (~upper & h));
#pragma GCC unroll 16
        for (int i = 0; i < n / 2; i++)
            r[i] = __builtin_shuffle(r[2 * i], r[2 * i + 1], lo) + __builtin_shuffle(r[2 * i], r[2 * i + 1], hi);
    }
    return __builtin_shuffle(r[0], rev);
#endif
}

/* acc[j] = per-lane partial sums of x . w[j * K ..] for j < VL (of w's row alone without X: a
   constant at each inlined call, so neither loop tests it), the block read in order, row by row (a row is a short stream at
   small K: 960 bytes at K = 240; VL rows read side by side run 2x slower there) */
static inline __attribute__((always_inline)) void row_partials(const int X, const float *x, const float *w,
                                                               int64_t K, vec *acc) {
    const int64_t body = K - K % VL;
    const int tail = (int)(K % VL);
    vec xt = X && tail ? load_part(x + body, tail) : (vec){0};
#pragma GCC unroll 16
    for (int j = 0; j < VL; j++) {
        const float *row = w + j * K;
        vec a0 = (vec){0}, a1 = (vec){0};
        int64_t k = 0;
        for (; k + 2 * VL <= body; k += 2 * VL) {
            a0 += X ? vload(x + k) * vload(row + k) : vload(row + k);
            a1 += X ? vload(x + k + VL) * vload(row + k + VL) : vload(row + k + VL);
        }
        if (k < body) a0 += X ? vload(x + k) * vload(row + k) : vload(row + k);
        if (tail) a1 += X ? xt * load_part(row + body, tail) : load_part(row + body, tail);
        acc[j] = a0 + a1;
    }
}

/* y[j] = x . w[j * K ..] for j < VL, one accumulator per row summed across lanes by a transpose (a
   lane-by-lane sum per output would cost as much as the products at K = 240) */
static inline void dot_block(const float *x, const float *w, int64_t K, float *y) {
    vec acc[VL];
    row_partials(1, x, w, K, acc);
    /* not sum_across: it would change every product's rounding, for a gain only small planes see */
    transpose_blocks(acc, VL);
    vec s = acc[0];
#pragma GCC unroll 16
    for (int j = 1; j < VL; j++) s += acc[j];
    vstore(y, s);
}

/* y[j] = scale * the sum of w[j * K ..] for j < VL (GemmArgs.a NULL: GlobalAveragePool's planes as
   rows, scale 1/plane): dot_block without the loads of a row of ones */
static inline void sum_block(const float *w, int64_t K, float scale, float *y) {
    vec acc[VL];
    row_partials(0, NULL, w, K, acc);
    vstore(y, sum_across(acc) * scale);
}

static inline float sum1(const float *w, int64_t K) {
    vec a = (vec){0};
    int64_t k = 0;
    for (; k + VL <= K; k += VL) a += vload(w + k);
    if (k < K) a += load_part(w + k, (int)(K - k));
    return hsum(a);
}

static inline float dot1(const float *x, const float *w, int64_t K) {
    vec a = (vec){0};
    int64_t k = 0;
    for (; k + VL <= K; k += VL) a += vload(x + k) * vload(w + k);
    if (k < K) a += load_part(x + k, (int)(K - k)) * load_part(w + k, (int)(K - k));
    return hsum(a);
}

/* float16 (GemmArgs.half): HALF_A rows converted once per call (malloc: K is any length), HALF_B
   weight rows (GlobalAveragePool's planes) an item's block at a time, HALF_C results computed into a
   float32 block of GEMV_ROWS rows per item and rounded once as stored. */
#define GEMV_ROWS 8

static void gemv_item(void *ctx, int64_t it, int slot) {
    const GemmArgs *g = ctx;
    (void)slot;
    const int64_t K = g->K, n0 = it * GEMV_ITEM, n1 = n0 + GEMV_ITEM < g->N ? n0 + GEMV_ITEM : g->N;
    const int half_c = g->half & HALF_C;
    float block[GEMV_ROWS * GEMV_ITEM];
    const float *bp = g->bp;
    float *wide = NULL;
    if (g->half & HALF_B) {  /* the item's weight rows in float32, read from cache below */
        wide = malloc((size_t)((n1 - n0) * K) * sizeof(float) + 64);
        if (!wide) abort();  /* one item's rows of memory: no way on without them */
        halves_to_floats(wide, (const uint16_t *)g->bp + n0 * K, (n1 - n0) * K);
        bp = wide - n0 * K;
    }
    for (int64_t r0 = 0; r0 < g->M; r0 += GEMV_ROWS) {
        const int64_t r1 = r0 + GEMV_ROWS < g->M ? r0 + GEMV_ROWS : g->M;
        /* row r's outputs, column n at [n]: C itself, or the float32 block of a float16 C */
#define OUT(r) (half_c ? block + ((r) - r0) * GEMV_ITEM - n0 : g->c + (r) * g->ldc)
        int64_t n = n0;
        if (!g->a) {  /* one row: the means of W's rows */
            for (; n + VL <= n1; n += VL) sum_block(bp + n * K, K, g->alpha, OUT(r0) + n);
            for (; n < n1; n++) OUT(r0)[n] = sum1(bp + n * K, K) * g->alpha;
        }
        for (; n + VL <= n1; n += VL)
            for (int64_t r = r0; r < r1; r++) dot_block(g->a + r * g->lda, bp + n * K, K, OUT(r) + n);
        for (; n < n1; n++)
            for (int64_t r = r0; r < r1; r++) OUT(r)[n] = dot1(g->a + r * g->lda, bp + n * K, K);
        for (int64_t r = r0; r < r1; r++) {  /* bias and activation over the item's outputs */
            float *y = OUT(r);
            for (n = n0; n < n1; n += VL) {
                int part = n1 - n < VL ? (int)(n1 - n) : VL;
                vec v = load_part(y + n, part);
                if (g->bias_n) v += load_part(g->bias_n + n, part);
                store_part(y + n, vactivate(v, g->act), part);
            }
            if (half_c) floats_to_halves((uint16_t *)g->c + r * g->ldc + n0, y + n0, n1 - n0);
        }
#undef OUT
    }
    free(wide);
}

void ge_gemv(const GemmArgs *g) {
    if (g->M <= 0 || g->N <= 0) return;
    if (!(g->half & HALF_A)) {
        pool_run(gemv_item, (void *)g, (g->N + GEMV_ITEM - 1) / GEMV_ITEM, g->threads);
        return;
    }
    GemmArgs wide = *g;
    float *a = malloc((size_t)(g->M * g->K) * sizeof(float) + 64);
    if (!a) return;
    for (int64_t r = 0; r < g->M; r++) halves_to_floats(a + r * g->K, (const uint16_t *)g->a + r * g->lda, g->K);
    wide.a = a, wide.lda = g->K, wide.half = g->half & ~HALF_A;
    pool_run(gemv_item, &wide, (g->N + GEMV_ITEM - 1) / GEMV_ITEM, g->threads);
    free(a);
}

/* The packed GEMV (ge_gemv_panels): a MatMul's constant W [K][N] against a few rows of x (plus Z, a
residual, where GemmArgs.z is set), W packed once at load into column panels of GEMV_PANEL outputs, each
panel K rows of GEMV_PANEL floats (the last panel as narrow as its columns need, in whole vectors, zeros
past N). The loop streams a panel contiguously, broadcasts each x[k] once and FMAs it into the panel's
GEMV_NV accumulators: no sums across lanes, each lane is one output. Even and odd k go to two sets of
accumulators (GEMV_NV chains are too few to hide the FMA's latency), added once at the end: every output
is the same sum, in the same order, whatever the rows, threads or chunks, so results are deterministic
per level. Items are panels (threads where N is large). */
#define GEMV_NV 4                     /* vectors per panel: 2 GEMV_NV accumulators, 8 chains */
#define GEMV_PANEL (GEMV_NV * VL)
#define GEMV_CHUNK 256                /* k per pass over the rows when there are several (even) */

int64_t ge_gemv_panel(void) { return GEMV_PANEL; }

int64_t ge_gemv_packed_floats(int64_t K, int64_t N) {
    const int64_t full = N / GEMV_PANEL, rest = N % GEMV_PANEL;
    return K * (full * GEMV_PANEL + (rest + VL - 1) / VL * VL);
}

void ge_gemv_pack(const float *w, int64_t K, int64_t N, int64_t sk, int64_t sn, float *out) {
    /* a panel's columns of a transposed W are its rows: the panel's source lines stay in L1 as k goes */
    for (int64_t n0 = 0; n0 < N; n0 += GEMV_PANEL) {
        const int64_t cols = N - n0 < GEMV_PANEL ? N - n0 : GEMV_PANEL;
        const int64_t width = (cols + VL - 1) / VL * VL;
        if (sk == 1 && sn != 1) {  /* column j of the panel is K contiguous floats at w + (n0 + j) * sn */
            transpose_into(w + n0 * sn, sn, cols, K, out, 1, 0, width);
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = cols; j < width; j++) out[k * width + j] = 0.0f;
            out += K * width;
            continue;
        }
        for (int64_t k = 0; k < K; k++, out += width) {
            const float *row = w + k * sk + n0 * sn;
            for (int64_t j = 0; j < cols; j++) out[j] = row[j * sn];
            for (int64_t j = cols; j < width; j++) out[j] = 0.0f;
        }
    }
}

/* acc[p][v] += x[k] * panel[k][v] over k in [k0, k1) (k0 even), the parity p of k; NV a constant
   at each inlined call */
static inline __attribute__((always_inline)) void panel_span(const int NV, const float *x, const float *panel,
                                                             int64_t k0, int64_t k1, vec acc[2][GEMV_NV]) {
    const float *w = panel + k0 * NV * VL;
    int64_t k = k0;
    for (; k + 2 <= k1; k += 2, w += 2 * NV * VL) {
        const vec x0 = (vec){0} + x[k], x1 = (vec){0} + x[k + 1];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[0][v] += x0 * vload(w + v * VL);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[1][v] += x1 * vload(w + NV * VL + v * VL);
    }
    if (k < k1) {
        const vec x0 = (vec){0} + x[k];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[0][v] += x0 * vload(w + v * VL);
    }
}

/* Row r's outputs of a panel from its accumulators: the two parities, Z's row (a residual, of C's
   type; it may be C itself: each vector is read before it is written), the bias and activation, in
   the GEMM's order, stored (cols of them; through block, then rounded, for a float16 C) */
static inline __attribute__((always_inline)) void panel_store(const int NV, const GemmArgs *g, vec acc[2][GEMV_NV],
                                                              const vec *bias, int64_t r, int64_t n0, int64_t cols,
                                                              float *block) {
    const int half_c = g->half & HALF_C;
    float *y = half_c ? block : g->c + r * g->ldc + n0;
    for (int v = 0; v < NV; v++) {
        const int64_t left = cols - v * VL;
        const int part = left < VL ? (int)left : VL;
        vec s = acc[0][v] + acc[1][v];
        if (g->z) s += load_any_part(g->z, half_c, r * g->ldz + n0 + v * VL, part);
        store_part(y + v * VL, vactivate(s + bias[v], g->act), part);
    }
    if (half_c) floats_to_halves((uint16_t *)g->c + r * g->ldc + n0, block, cols);
}

/* One panel's outputs for rows [0, M) */
static inline __attribute__((always_inline)) void panel_rows(const int NV, const GemmArgs *g, const float *panel,
                                                             int64_t n0, int64_t cols, float *block) {
    const int64_t K = g->K;
    vec bias[GEMV_NV];
    for (int v = 0; v < NV; v++) {
        const int64_t left = cols - v * VL;
        bias[v] = g->bias_n ? load_part(g->bias_n + n0 + v * VL, left < VL ? (int)left : VL) : (vec){0};
    }
    if (g->M == 1) {  /* the decoding step's case: the accumulators stay in registers */
        vec acc[2][GEMV_NV];
        for (int v = 0; v < NV; v++) acc[0][v] = acc[1][v] = (vec){0};
        panel_span(NV, g->a, panel, 0, K, acc);
        panel_store(NV, g, acc, bias, 0, n0, cols, block);
        return;
    }
    for (int64_t r0 = 0; r0 < g->M; r0 += GEMV_ROWS) {
        const int64_t rows = g->M - r0 < GEMV_ROWS ? g->M - r0 : GEMV_ROWS;
        vec acc[GEMV_ROWS][2][GEMV_NV];
        for (int64_t r = 0; r < rows; r++)
            for (int v = 0; v < NV; v++) acc[r][0][v] = acc[r][1][v] = (vec){0};
        /* a chunk of the panel stays in cache while every row passes over it */
        for (int64_t k0 = 0; k0 < K; k0 += GEMV_CHUNK)
            for (int64_t r = 0; r < rows; r++)
                panel_span(NV, g->a + (r0 + r) * g->lda, panel, k0, k0 + GEMV_CHUNK < K ? k0 + GEMV_CHUNK : K, acc[r]);
        for (int64_t r = 0; r < rows; r++) panel_store(NV, g, acc[r], bias, r0 + r, n0, cols, block);
    }
}

static void gemv_panel_item(void *ctx, int64_t it, int slot) {
    const GemmArgs *g = ctx;
    (void)slot;
    float block[GEMV_PANEL];
    const int64_t n0 = it * GEMV_PANEL, cols = g->N - n0 < GEMV_PANEL ? g->N - n0 : GEMV_PANEL;
    const float *panel = g->bp + n0 * g->K;  /* every panel before it is full */
    switch ((cols + VL - 1) / VL) {
        case 1: panel_rows(1, g, panel, n0, cols, block); break;
        case 2: panel_rows(2, g, panel, n0, cols, block); break;
        case 3: panel_rows(3, g, panel, n0, cols, block); break;
        default: panel_rows(GEMV_NV, g, panel, n0, cols, block); break;
    }
}

void ge_gemv_panels(const GemmArgs *g) {
    if (g->M <= 0 || g->N <= 0) return;
    const int64_t items = (g->N + GEMV_PANEL - 1) / GEMV_PANEL;
    /* below about 64 KiB of weights a second thread costs more than it saves */
    const int threads = g->N * g->K < (1 << 14) ? 1 : g->threads;
    if (!(g->half & HALF_A)) {
        pool_run(gemv_panel_item, (void *)g, items, threads);
        return;
    }
    GemmArgs wide = *g;
    float *a = malloc((size_t)(g->M * g->K) * sizeof(float) + 64);
    if (!a) abort();  /* the rows' float32 copy: no way on without it */
    for (int64_t r = 0; r < g->M; r++) halves_to_floats(a + r * g->K, (const uint16_t *)g->a + r * g->lda, g->K);
    wide.a = a, wide.lda = g->K, wide.half = g->half & ~HALF_A;
    pool_run(gemv_panel_item, &wide, items, threads);
    free(a);
}
