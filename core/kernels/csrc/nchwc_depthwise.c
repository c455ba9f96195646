/* Depthwise convolution (group == channels, one output channel per group) in the blocked layout
NCHW16c of nchwc.c: x [N][ceil(C/16)][H][W][16], y and z [N][ceil(C/16)][OH][OW][16], weights
[cb][kh][kw][16], bias [cb * 16]. The channels are the vector lanes (one AVX-512 vector per block,
two AVX2 ones, four SSE/NEON ones: each handled in turn), so every tap of a pixel is one vector
FMA of the input pixel and the tap's weights, with no transpose and no phase split: onnxruntime's
MLAS runs MobileNets' depthwise convs this way, and the output is the next pointwise conv's input.

One output row at a time (its kernel rows outside X skipped for the whole row), in tiles of up to
DW_R pixels along the row. Where the kernel is 3 or 5 columns wide with stride 1 or 2 and no
dilation across (MobileNets', EfficientNets'), a tile loads each input column it reads once per
kernel row and applies it to every pixel of the tile that reads it (a 3x3 stride-1 tile of 8: 10
loads for 24 FMAs instead of 24), the row's weights in registers; the tiles with pixels whose
kernel columns hang over the left or right edge (only those) check each input column and skip the
ones outside X. Other geometries take the same tiles with a load per tap over the inside pixels and
one pixel at a time, only its inside taps, at the edges.

Padding channels: zero weights and bias, so Y holds act(0) there (plus Z's padding: finite).
Z may be Y: each tile reads its pixels of Z before it writes them.
Items: runs of output rows of the flattened (batch item, block, row) space, in order (a kernel
row's input is reused from L1 by the next output rows), near-equal and at least DW_ITEMS_PER_THREAD
per thread: a 7x7 plane of 960 channels is 420 rows of 7 pixels, split evenly between 2 threads. */
#include "abi.h"
#include "nchwc.h"
#include "pool.h"
#include "simd.h"

#define DW_R 8                 /* output pixels per tile: 8 accumulators, 5 weights and an input fit 16 registers */
#define DW_AHEAD 2             /* output rows ahead whose input rows a tile prefetches */
#define DW_PREFETCH_BYTES (8 << 20)  /* an input this large comes from memory (dw_prefetch) */
#define DW_KW_MAX 5            /* the widest kernel of the tiles that load each input column once */
#define DW_ITEM_FLOATS 4096    /* least outputs per item (a few microseconds: claiming it costs nothing beside) */
#define DW_ITEMS_PER_THREAD 8  /* a late thread's share stays small */

typedef struct DwTile DwTile;
typedef void (*DwTiles)(int R, int check, const DepthwiseNchwc *d, const DwTile *t);

typedef struct {
    const DepthwiseNchwc *d;
    DwTiles fast;  /* the tiles of the kernel's width and stride (dw_fast), or NULL: dw_tiles_any */
    int64_t tiles, base, rem;  /* a row's tiles: the first rem of base + 1 pixels, the others of base */
    int64_t rows, rows_per_item;
    int64_t ow_lo, ow_hi;  /* the output columns whose every kernel column lies inside X */
    int prefetch;          /* the tiles prefetch the input rows ahead (dw_prefetch) */
} DwWork;

/* One load per input column, not one memory operand per FMA that reads it (GCC's choice) */
#if defined(__x86_64__) || defined(__i386__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#elif defined(__aarch64__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+w"(v))
#else
#define KEEP_IN_REGISTER(v) (void)(v)
#endif

/* What one tile needs: X's plane, the block's weights and bias at the tile's lanes; Z and Y at its
   first pixel; the input row of kernel row 0 and the input column of the first pixel's first tap. */
struct DwTile {
    const float *x, *wt, *bias, *z;
    float *y;
    int64_t ih0, kh0, kh1, c0;
    const float *pf;  /* the first of pf_rows input rows (W apart) to prefetch at the tile's columns, or NULL */
    int64_t pf_rows;
};

/* Prefetch into L2 the input rows DW_AHEAD output rows on will add, at the columns [c0, c0 + n) (one line
   a pixel). Stride 2 over an input from memory only (DW_PREFETCH_BYTES and more): there the hardware
   prefetcher, two new input rows per output row, left MobileNetV2's 56x56 and 112x112 stride-2 layers
   at batch 8 1.1-2x slower than with it; stride 1 (one new row) gained nothing measurable, and an
   input in the caches lost 10-18% to the prefetches' loads. */
static inline __attribute__((always_inline)) void dw_prefetch(const DepthwiseNchwc *d, const DwTile *t, const int n) {
    if (!t->pf) return;
    for (int64_t r = 0; r < t->pf_rows; r++)
#pragma GCC unroll 16
        for (int j = 0; j < n; j++) __builtin_prefetch(t->pf + (r * d->w + j) * BLK, 0, 2);
}

/* act(acc[i]) into Y's R pixels: the switch once per tile, not per vector (vactivate's), Clip/Relu and
   HardSwish (MobileNets') inline */
static inline __attribute__((always_inline)) void dw_store(const int R, vec *acc, float *y, Activation act) {
    switch (act.act) {
        case ACT_NONE: break;
        case ACT_CLAMP:
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) acc[i] = vclamp(acc[i], act.a, act.b);
            break;
        case ACT_HARDSWISH:
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) acc[i] *= vclamp(acc[i] * (1.0f / 6) + 0.5f, 0.0f, 1.0f);
            break;
        default:
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) acc[i] = vactivate(acc[i], act);
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) vstore(y + i * BLK, acc[i]);
}

/* R pixels from t->c0, kernel KW columns wide, stride S across, dilation 1 across: input column j
   of the tile (c0 + j) is loaded once per kernel row and feeds pixel i's tap k where j = i S + k.
   CHECK: skip the columns outside X (edge tiles). */
static inline __attribute__((always_inline)) void dw_tile(const int R, const int KW, const int S, const int CHECK,
                                                          const DepthwiseNchwc *d, const DwTile *t) {
    vec acc[DW_R];
    const vec b = vload(t->bias);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) acc[i] = t->z ? b + vload(t->z + i * BLK) : b;
    for (int64_t kh = t->kh0; kh < t->kh1; kh++) {
        const float *xr = t->x + ((t->ih0 + kh * d->dh) * d->w + t->c0) * BLK, *wr = t->wt + kh * KW * BLK;
        vec wv[DW_KW_MAX];  /* not wv[KW]: a const int is no constant expression, and GCC put the VLA on the stack */
#pragma GCC unroll 8
        for (int k = 0; k < KW; k++) wv[k] = vload(wr + k * BLK);
#pragma GCC unroll 32
        for (int j = 0; j < (R - 1) * S + KW; j++) {
            if (CHECK && (uint64_t)(t->c0 + j) >= (uint64_t)d->w) continue;
            vec v = vload(xr + j * BLK);
            KEEP_IN_REGISTER(v);
#pragma GCC unroll 8
            for (int k = 0; k < KW; k++)
                if (j >= k && (j - k) % S == 0 && (j - k) / S < R) acc[(j - k) / S] += v * wv[k];
        }
    }
    dw_prefetch(d, t, R * S);
    dw_store(R, acc, t->y, d->act);
}

/* Any kernel, stride and dilation: R pixels whose kernel columns [kw0, kw1) all lie inside X, a load
   per tap, the tap's weights shared by the R pixels. */
static inline __attribute__((always_inline)) void dw_tile_any(const int R, const DepthwiseNchwc *d, const DwTile *t,
                                                              int64_t kw0, int64_t kw1) {
    vec acc[DW_R];
    const vec b = vload(t->bias);
    const int64_t xs = d->sw * BLK;
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) acc[i] = t->z ? b + vload(t->z + i * BLK) : b;
    for (int64_t kh = t->kh0; kh < t->kh1; kh++) {
        const float *xr = t->x + ((t->ih0 + kh * d->dh) * d->w + t->c0) * BLK, *wr = t->wt + kh * d->kw * BLK;
        for (int64_t kw = kw0; kw < kw1; kw++) {
            const float *xp = xr + kw * d->dw * BLK;
            vec wv = vload(wr + kw * BLK);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) acc[i] += vload(xp + i * xs) * wv;
        }
    }
    dw_store(R, acc, t->y, d->act);
}

/* The tiles with R, KW, S and CHECK as constants (each its own register allocation) */
#define DW_CASE(r) \
    case r: if (check) dw_tile(r, KW, S, 1, d, t); else dw_tile(r, KW, S, 0, d, t); break;
#define DW_FN(name, kw, s) \
    static void name(int R, int check, const DepthwiseNchwc *d, const DwTile *t) { \
        const int KW = kw, S = s; \
        switch (R) { DW_CASE(1) DW_CASE(2) DW_CASE(3) DW_CASE(4) DW_CASE(5) DW_CASE(6) DW_CASE(7) DW_CASE(8) } \
    }
DW_FN(dw_tiles_3s1, 3, 1)
DW_FN(dw_tiles_3s2, 3, 2)
DW_FN(dw_tiles_5s1, 5, 1)
DW_FN(dw_tiles_5s2, 5, 2)
static void dw_tiles_any(int R, int64_t kw0, int64_t kw1, const DepthwiseNchwc *d, const DwTile *t) {
    switch (R) {
#define DW_ANY(r) case r: dw_tile_any(r, d, t, kw0, kw1); break;
        DW_ANY(1) DW_ANY(2) DW_ANY(3) DW_ANY(4) DW_ANY(5) DW_ANY(6) DW_ANY(7) DW_ANY(8)
#undef DW_ANY
    }
}

static DwTiles dw_fast(const DepthwiseNchwc *d) {
    if (d->dw != 1) return NULL;
    if (d->kw == 3) return d->sw == 1 ? dw_tiles_3s1 : d->sw == 2 ? dw_tiles_3s2 : NULL;
    if (d->kw == 5) return d->sw == 1 ? dw_tiles_5s1 : d->sw == 2 ? dw_tiles_5s2 : NULL;
    return NULL;
}

/* Output row oh of plane `plane` (batch item x block; cb its block): its VL-lane vectors in turn, each in
   w's tiles. Everything per row is a few additions: on a 7x7 plane a row is one tile, and the divisions
   of the row's coordinates had cost a third of the instructions. */
static void dw_row(const DwWork *w, int64_t plane, int64_t cb, int64_t oh) {
    const DepthwiseNchwc *d = w->d;
    DwTile t;
    t.ih0 = oh * d->sh - d->ph;
    if (d->dh == 1) {
        t.kh0 = t.ih0 < 0 ? -t.ih0 : 0, t.kh1 = d->h - t.ih0 < d->kh ? d->h - t.ih0 : d->kh;
        if (t.kh1 < t.kh0) t.kh1 = t.kh0;
    } else {
        tap_range(oh, d->sh, d->ph, d->dh, d->kh, d->h, &t.kh0, &t.kh1);
    }
    /* the rows output row oh + DW_AHEAD adds to those of the row before it (in this plane) */
    int64_t pf0 = (oh + DW_AHEAD) * d->sh - d->ph + (d->kh - 1) * d->dh - (d->sh - 1), pf1 = pf0 + d->sh;
    if (pf0 < 0) pf0 = 0;
    if (pf1 > d->h) pf1 = d->h;
    t.pf_rows = w->prefetch && oh + DW_AHEAD < d->oh && pf0 < pf1 ? pf1 - pf0 : 0;
    const int64_t yat = (plane * d->oh + oh) * d->ow * BLK;
    for (int sub = 0; sub < NB; sub++) {
        const float *x = d->x + plane * d->h * d->w * BLK + sub * VL;
        t.wt = d->wp + cb * d->kh * d->kw * BLK + sub * VL, t.bias = d->bias + cb * BLK + sub * VL;
        for (int64_t k = 0, o0 = 0; k < w->tiles; k++) {
            int R = (int)(w->base + (k < w->rem));
            t.x = x, t.y = d->y + yat + o0 * BLK + sub * VL, t.z = d->z ? d->z + yat + o0 * BLK + sub * VL : NULL;
            t.c0 = o0 * d->sw - d->pw;
            t.pf = t.pf_rows && sub == 0 ? d->x + (plane * d->h + pf0) * d->w * BLK + (t.c0 > 0 ? t.c0 : 0) * BLK : NULL;
            if (w->fast) {
                w->fast(R, o0 < w->ow_lo || o0 + R > w->ow_hi, d, &t);
            } else if (o0 >= w->ow_lo && o0 + R <= w->ow_hi) {
                dw_tiles_any(R, 0, d->kw, d, &t);
            } else {  /* edge pixels one at a time, each with its inside kernel columns */
                DwTile p = t;
                for (int i = 0; i < R; i++, p.y += BLK, p.z = p.z ? p.z + BLK : NULL, p.c0 += d->sw) {
                    int64_t kw0, kw1;
                    tap_range(o0 + i, d->sw, d->pw, d->dw, d->kw, d->w, &kw0, &kw1);
                    dw_tiles_any(1, kw0, kw1, d, &p);
                }
            }
            o0 += R;
        }
    }
}

/* Rows [it * rows_per_item, ...) of the flattened (batch item, block, row) space, in order */
static void dw_item(void *ctx, int64_t it, int slot) {
    const DwWork *w = ctx;
    const DepthwiseNchwc *d = w->d;
    (void)slot;
    int64_t r0 = it * w->rows_per_item, r1 = r0 + w->rows_per_item < w->rows ? r0 + w->rows_per_item : w->rows;
    int64_t plane = r0 / d->oh, oh = r0 % d->oh, cb = plane % d->cb;
    for (int64_t r = r0; r < r1; r++) {
        dw_row(w, plane, cb, oh);
        if (++oh == d->oh) {
            oh = 0, plane++;
            if (++cb == d->cb) cb = 0;
        }
    }
}

/* The tiling of d's rows (the same for every row); prefetch: as ge_nchwc_depthwise's inputs from memory */
static DwWork dw_work(const DepthwiseNchwc *d, int prefetch) {
    DwWork w = {.d = d, .rows = d->batch * d->cb * d->oh};
    w.ow_lo = (d->pw + d->sw - 1) / d->sw;
    int64_t reach = d->w - 1 + d->pw - (d->kw - 1) * d->dw;
    w.ow_hi = reach < 0 ? 0 : reach / d->sw + 1;
    if (w.ow_hi > d->ow) w.ow_hi = d->ow;
    w.fast = dw_fast(d);
    w.tiles = (d->ow + DW_R - 1) / DW_R, w.base = d->ow / w.tiles, w.rem = d->ow % w.tiles;
    w.prefetch = prefetch && d->sh == 2 && d->batch * d->cb * d->h * d->w * BLK * 4 >= DW_PREFETCH_BYTES;
    return w;
}

/* dw_row's work without its edges (no pads: X holds them), batch item 0, block 0, no Z, no prefetch:
   on the 7x7 planes of qgemm.c's int8 groups dw_row's generality had cost as much as the tiles */
void nchwc_depthwise_padded(const DepthwiseNchwc *d) {
    DwWork w = dw_work(d, 0);
    DwTile t = {.kh0 = 0, .kh1 = d->kh};
    for (int64_t oh = 0; oh < d->oh; oh++)
        for (int sub = 0; sub < NB; sub++) {
            t.x = d->x + sub * VL, t.wt = d->wp + sub * VL, t.bias = d->bias + sub * VL, t.ih0 = oh * d->sh;
            for (int64_t k = 0, o0 = 0; k < w.tiles; k++) {
                int R = (int)(w.base + (k < w.rem));
                t.y = d->y + (oh * d->ow + o0) * BLK + sub * VL, t.c0 = o0 * d->sw;
                if (w.fast) w.fast(R, 0, d, &t);
                else dw_tiles_any(R, 0, d->kw, d, &t);
                o0 += R;
            }
        }
}

void ge_nchwc_depthwise(const DepthwiseNchwc *d) {
    if (d->batch * d->cb * d->oh <= 0 || d->ow <= 0) return;  /* an empty batch or plane: nothing to write */
    DwWork w = dw_work(d, 1);
    int threads = d->threads < 1 ? 1 : d->threads;
    int64_t per = DW_ITEM_FLOATS / (d->ow * BLK), want = DW_ITEMS_PER_THREAD * threads;
    if (per < 1) per = 1;
    if (threads > 1 && (w.rows + per - 1) / per < want) per = (w.rows + want - 1) / want;
    w.rows_per_item = per;
    pool_run(dw_item, &w, (w.rows + per - 1) / per, threads);
}
