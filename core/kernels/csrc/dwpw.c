/* A depthwise convolution and the pointwise (1x1) convolution that reads it, fused (ge::DepthwisePointwise):
y = act_p(Wp @ act_d(depthwise(x, Wd) + bd) + bp (+ z)), band by band of output rows; optionally with the
expanding 1x1 convolution before it too (ge::ExpandDepthwisePointwise): depthwise(act_e(We @ x + be)).

Why: in an inverted residual block (MobileNetV2/V3, PP-LCNet, EfficientNet) the depthwise output has
the block's expanded channel count; as two tasks it is written to memory whole (megabytes at 112x112
and 56x56, more than the L2 cache) and read back by the projection. Here an item is one batch item's
band of output rows: the depthwise rows of every channel go into the thread's band buffer (sized to
stay in L2), and the GEMM (gemm.c, single-threaded, its B gathered from the buffer) projects them
straight into Y, with bias, residual and activation as it stores. The expanded tensor never leaves
the cache. With the expansion, each item first expands the input rows its band reads (the rows
shared with the next band are computed twice: bands are sized so that this stays a small part) into
its slot, with its own single-threaded GEMM, and the depthwise rows read them there: the whole
inverted residual block runs in cache, only its narrow input and output in memory.

The depthwise rows read the input in place: per output row and block of up to DWPW_VECS vectors of
columns, each tap is a vector of the input row (stride 1: a load; stride 2: the even lanes of two
loads), masked where columns fall outside the row (the padding is never written anywhere). */
#include "abi.h"
#include "pool.h"
#include "simd.h"

#define DWPW_VECS 4

/* Lanes j of `row` at columns c0 + s j inside [0, w), zeros elsewhere (S: the stride, 0: any s). */
static inline __attribute__((always_inline)) vec dwpw_load(const int S, const float *row, int64_t c0, int64_t s,
                                                           int64_t w) {
    if (S == 1 || (S == 0 && s == 1)) {
        if (c0 >= 0 && c0 + VL <= w) return vload(row + c0);
        vec v = (vec){0};
        int64_t lo = c0 < 0 ? -c0 : 0, hi = w - c0 < VL ? w - c0 : VL;
        if (lo >= hi) return v;
#if defined(__AVX512F__)
        return (vec)_mm512_maskz_loadu_ps((__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), row + c0);
#else
        for (int64_t j = lo; j < hi; j++) v[j] = row[c0 + j];
        return v;
#endif
    }
    if (S == 2) {
        ivec even;
        for (int i = 0; i < VL; i++) even[i] = 2 * i;
        return __builtin_shuffle(dwpw_load(1, row, c0, 1, w), dwpw_load(1, row, c0 + VL, 1, w), even);
    }
    vec v = (vec){0};
    for (int j = 0; j < VL; j++) {
        int64_t c = c0 + j * s;
        if (c >= 0 && c < w) v[j] = row[c];
    }
    return v;
}

/* V vectors of output row oy of one channel (x: its plane from input row row0 on, taps w), from column
   ox0 (the last vector n lanes), into out. S: the stride across (1, 2; 0: any); K: the kernel's side
   (3, 5, dilation 1: the taps unrolled; 0: any). Vectors whose taps all read inside the row load
   plainly; the others (a row's first and last) mask. */
static inline __attribute__((always_inline)) void dwpw_vectors(const int S, const int K, const int V,
                                                               const DepthwisePointwise *d, const float *x,
                                                               int64_t row0, const float *w, float bias, int64_t oy,
                                                               int64_t ox0, int n, float *out) {
    const int64_t kh = K ? K : d->kh, kw = K ? K : d->kw, sw = S ? S : d->sw, dil = K ? 1 : d->dw;
    const int64_t width = d->w, c_lo = ox0 * sw - d->pl;
    /* per vector: whether its loads (at every tap) all read inside the row: then plain loads */
    int inner[DWPW_VECS];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        int64_t at = c_lo + (int64_t)v * VL * sw;
        inner[v] = S != 0 && at >= 0 && at + (kw - 1) * dil + (S == 2 ? 2 * VL : VL) <= width;
    }
    vec a[DWPW_VECS];
    ivec even;
    for (int i = 0; i < VL; i++) even[i] = 2 * i;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = (vec){0} + bias;
#pragma GCC unroll 5
    for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * d->sh + ky * (K ? 1 : d->dh) - d->pt;
        if (iy < 0 || iy >= d->h) continue;
        const float *row = x + (iy - row0) * width;
#pragma GCC unroll 5
        for (int64_t kx = 0; kx < kw; kx++) {
            vec wt = (vec){0} + w[ky * kw + kx];
            int64_t c0 = c_lo + kx * dil;
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) {
                const float *p = row + c0 + (int64_t)v * VL * sw;
                vec xv = !inner[v] ? dwpw_load(S, row, c0 + v * VL * sw, sw, width)
                         : S == 1 ? vload(p) : __builtin_shuffle(vload(p), vload(p + VL), even);
                a[v] += wt * xv;
            }
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        vec r = vactivate(a[v], d->act_d);
        if (v == V - 1 && n < VL) store_part(out + v * VL, r, n);
        else vstore(out + v * VL, r);
    }
}

/* Output rows [oy0, oy0 + rows) of one channel into out (rows of ow floats). */
static inline __attribute__((always_inline)) void dwpw_rows(const int S, const int K, const DepthwisePointwise *d,
                                                            const float *x, int64_t row0, const float *w, float bias,
                                                            int64_t oy0, int64_t rows, float *out) {
    for (int64_t oy = oy0; oy < oy0 + rows; oy++)
        for (int64_t ox0 = 0; ox0 < d->ow; ox0 += DWPW_VECS * VL) {
            int64_t left = d->ow - ox0;
            int V = left >= DWPW_VECS * VL ? DWPW_VECS : (int)((left + VL - 1) / VL);
            int n = (int)(left - (V - 1) * VL < VL ? left - (V - 1) * VL : VL);
            float *o = out + (oy - oy0) * d->ow + ox0;
            switch (V) {
                case 4: dwpw_vectors(S, K, 4, d, x, row0, w, bias, oy, ox0, n, o); break;
                case 3: dwpw_vectors(S, K, 3, d, x, row0, w, bias, oy, ox0, n, o); break;
                case 2: dwpw_vectors(S, K, 2, d, x, row0, w, bias, oy, ox0, n, o); break;
                default: dwpw_vectors(S, K, 1, d, x, row0, w, bias, oy, ox0, n, o); break;
            }
        }
}

typedef void (*dwpw_rows_fn)(const DepthwisePointwise *, const float *, int64_t, const float *, float, int64_t,
                             int64_t, float *);
#define DWPW_ROWS(S, K)                                                                                        \
    static NO_LIBCALLS void dwpw_rows_##S##_##K(const DepthwisePointwise *d, const float *x, int64_t row0,     \
                                                const float *w, float bias, int64_t oy0, int64_t rows,         \
                                                float *out) {                                                  \
        dwpw_rows(S, K, d, x, row0, w, bias, oy0, rows, out);                                                  \
    }
DWPW_ROWS(1, 3)
DWPW_ROWS(1, 5)
DWPW_ROWS(1, 0)
DWPW_ROWS(2, 3)
DWPW_ROWS(2, 5)
DWPW_ROWS(2, 0)
DWPW_ROWS(0, 0)

static dwpw_rows_fn rows_kernel(const DepthwisePointwise *d) {
    int side = d->kh == d->kw && d->dh == 1 && d->dw == 1 && (d->kh == 3 || d->kh == 5) ? (int)d->kh : 0;
    if (d->sw == 1) return side == 3 ? dwpw_rows_1_3 : side == 5 ? dwpw_rows_1_5 : dwpw_rows_1_0;
    if (d->sw == 2) return side == 3 ? dwpw_rows_2_3 : side == 5 ? dwpw_rows_2_5 : dwpw_rows_2_0;
    return dwpw_rows_0_0;
}

static int64_t dwpw_bands(const DepthwisePointwise *d) { return (d->oh + d->band - 1) / d->band; }

static int64_t whole_vectors(int64_t floats) { return (floats + 15) / 16 * 16; }

/* A slot: the band buffer (channels x band x ow), the expansion's (channels x rows_in x w), the GEMMs' scratch. */
static int64_t band_floats(const DepthwisePointwise *d) { return whole_vectors(d->channels * d->band * d->ow); }
static int64_t expanded_floats(const DepthwisePointwise *d) {
    return d->we ? whole_vectors(d->channels * d->rows_in * d->w) : 0;
}
static int64_t gemm_floats(const DepthwisePointwise *d) {
    int64_t project = ge_workspace_floats(d->oc, d->band * d->ow, d->channels, 0, 1, 1);
    int64_t expand = d->we ? ge_workspace_floats(d->channels, d->rows_in * d->w, d->cin, 0, 1, 1) : 0;
    return whole_vectors(project > expand ? project : expand);
}

int64_t ge_dwpw_slot_floats(const DepthwisePointwise *d) { return band_floats(d) + expanded_floats(d) + gemm_floats(d); }

/* The input rows [r0, r1) the band's output rows [oy0, oy0 + rows) read (inside the plane). */
static void rows_read(const DepthwisePointwise *d, int64_t oy0, int64_t rows, int64_t *r0, int64_t *r1) {
    int64_t lo = oy0 * d->sh - d->pt, hi = (oy0 + rows - 1) * d->sh - d->pt + (d->kh - 1) * d->dh + 1;
    *r0 = lo < 0 ? 0 : lo;
    *r1 = hi > d->h ? d->h : hi;
}

static void dwpw_item(void *ctx, int64_t it, int slot) {
    const DepthwisePointwise *d = ctx;
    int64_t bands = dwpw_bands(d), item = it / bands, oy0 = it % bands * d->band;
    int64_t rows = d->oh - oy0 < d->band ? d->oh - oy0 : d->band, plane = d->h * d->w, out_plane = d->oh * d->ow;
    int64_t taps = d->kh * d->kw, pitch = d->band * d->ow;
    float *mid = d->ws + slot * ge_dwpw_slot_floats(d), *expanded = mid + band_floats(d);
    float *gemm_ws = expanded + expanded_floats(d);
    dwpw_rows_fn channel_rows = rows_kernel(d);
    const float *x;
    int64_t row0 = 0, channel_step = plane;
    if (d->we) {  /* the expansion of the rows the band reads, into the slot */
        int64_t r1;
        rows_read(d, oy0, rows, &row0, &r1);
        channel_step = (r1 - row0) * d->w;
        if (channel_step > 0) {
            GemmArgs e = {.M = d->channels, .N = channel_step, .K = d->cin, .ap = d->we,
                          .b = d->x + item * d->cin * plane + row0 * d->w, .koff = d->ekoff, .noff = d->enoff,
                          .c = expanded, .ldc = channel_step, .bias_m = d->be, .act = d->act_e, .threads = 1,
                          .ws = gemm_ws, .alpha = 1.0f};
            ge_gemm_args(&e);
        }
        x = expanded;
    } else {
        x = d->x + item * d->channels * plane;
    }
    for (int64_t c = 0; c < d->channels; c++)
        channel_rows(d, x + c * channel_step, row0, d->wd + c * taps, d->bd ? d->bd[c] : 0.0f, oy0, rows,
                     mid + c * pitch);
    int64_t at = item * d->oc * out_plane + oy0 * d->ow;
    GemmArgs g = {.M = d->oc, .N = rows * d->ow, .K = d->channels, .ap = d->wp, .b = mid, .koff = d->koff,
                  .noff = d->noff, .c = d->y + at, .ldc = out_plane, .bias_m = d->bp, .z = d->z ? d->z + at : NULL,
                  .ldz = out_plane, .act = d->act_p, .threads = 1, .ws = gemm_ws, .alpha = 1.0f};
    ge_gemm_args(&g);
}

void ge_dwpw(const DepthwisePointwise *d) {
    pool_run(dwpw_item, (void *)d, d->n * dwpw_bands(d), d->threads);
}
