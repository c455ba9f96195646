/* A depthwise convolution and the pointwise (1x1) convolution that reads it, fused (ge::DepthwisePointwise):
y = act_p(Wp @ act_d(depthwise(x, Wd) + bd) + bp (+ z)), band by band of output rows.

Why: in an inverted residual block (MobileNetV2/V3, PP-LCNet, EfficientNet) the depthwise output has
the block's expanded channel count; as two tasks it is written to memory whole (megabytes at 112x112
and 56x56, more than the L2 cache) and read back by the projection. Here an item is one batch item's
band of output rows: the depthwise rows of every channel go into the thread's band buffer (sized to
stay in L2), and the GEMM (gemm.c, single-threaded, its B gathered from the buffer) projects them
straight into Y, with bias, residual and activation as it stores. The expanded tensor never leaves
the cache.

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

/* V vectors of output row oy of one channel (plane x, taps w), from column ox0 (the last vector n
   lanes), into out. */
static inline __attribute__((always_inline)) void dwpw_vectors(const int S, const int V, const DepthwisePointwise *d,
                                                               const float *x, const float *w, float bias,
                                                               int64_t oy, int64_t ox0, int n, float *out) {
    vec a[DWPW_VECS];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = (vec){0} + bias;
    for (int64_t ky = 0; ky < d->kh; ky++) {
        int64_t iy = oy * d->sh + ky * d->dh - d->pt;
        if (iy < 0 || iy >= d->h) continue;
        const float *row = x + iy * d->w;
        for (int64_t kx = 0; kx < d->kw; kx++) {
            vec wt = (vec){0} + w[ky * d->kw + kx];
            int64_t c0 = ox0 * d->sw + kx * d->dw - d->pl;
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) a[v] += wt * dwpw_load(S, row, c0 + v * VL * d->sw, d->sw, d->w);
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
static inline __attribute__((always_inline)) void dwpw_rows(const int S, const DepthwisePointwise *d, const float *x,
                                                            const float *w, float bias, int64_t oy0, int64_t rows,
                                                            float *out) {
    for (int64_t oy = oy0; oy < oy0 + rows; oy++)
        for (int64_t ox0 = 0; ox0 < d->ow; ox0 += DWPW_VECS * VL) {
            int64_t left = d->ow - ox0;
            int V = left >= DWPW_VECS * VL ? DWPW_VECS : (int)((left + VL - 1) / VL);
            int n = (int)(left - (V - 1) * VL < VL ? left - (V - 1) * VL : VL);
            float *o = out + (oy - oy0) * d->ow + ox0;
            switch (V) {
                case 4: dwpw_vectors(S, 4, d, x, w, bias, oy, ox0, n, o); break;
                case 3: dwpw_vectors(S, 3, d, x, w, bias, oy, ox0, n, o); break;
                case 2: dwpw_vectors(S, 2, d, x, w, bias, oy, ox0, n, o); break;
                default: dwpw_vectors(S, 1, d, x, w, bias, oy, ox0, n, o); break;
            }
        }
}

static NO_LIBCALLS void dwpw_rows_s1(const DepthwisePointwise *d, const float *x, const float *w, float bias,
                                     int64_t oy0, int64_t rows, float *out) {
    dwpw_rows(1, d, x, w, bias, oy0, rows, out);
}
static NO_LIBCALLS void dwpw_rows_s2(const DepthwisePointwise *d, const float *x, const float *w, float bias,
                                     int64_t oy0, int64_t rows, float *out) {
    dwpw_rows(2, d, x, w, bias, oy0, rows, out);
}
static NO_LIBCALLS void dwpw_rows_any(const DepthwisePointwise *d, const float *x, const float *w, float bias,
                                      int64_t oy0, int64_t rows, float *out) {
    dwpw_rows(0, d, x, w, bias, oy0, rows, out);
}

static int64_t dwpw_bands(const DepthwisePointwise *d) { return (d->oh + d->band - 1) / d->band; }

/* The band buffer's floats (channels x band x ow, rounded up to whole vectors of 16). */
static int64_t band_floats(const DepthwisePointwise *d) { return (d->channels * d->band * d->ow + 15) / 16 * 16; }

int64_t ge_dwpw_slot_floats(const DepthwisePointwise *d) {
    return band_floats(d) + (ge_workspace_floats(d->oc, d->band * d->ow, d->channels, 0, 1, 1) + 15) / 16 * 16;
}

static void dwpw_item(void *ctx, int64_t it, int slot) {
    const DepthwisePointwise *d = ctx;
    int64_t bands = dwpw_bands(d), item = it / bands, oy0 = it % bands * d->band;
    int64_t rows = d->oh - oy0 < d->band ? d->oh - oy0 : d->band, plane = d->h * d->w, out_plane = d->oh * d->ow;
    int64_t taps = d->kh * d->kw, pitch = d->band * d->ow;
    float *mid = d->ws + slot * ge_dwpw_slot_floats(d);
    void (*channel_rows)(const DepthwisePointwise *, const float *, const float *, float, int64_t, int64_t, float *) =
        d->sw == 1 ? dwpw_rows_s1 : d->sw == 2 ? dwpw_rows_s2 : dwpw_rows_any;
    const float *x = d->x + item * d->channels * plane;
    for (int64_t c = 0; c < d->channels; c++)
        channel_rows(d, x + c * plane, d->wd + c * taps, d->bd ? d->bd[c] : 0.0f, oy0, rows, mid + c * pitch);
    int64_t at = item * d->oc * out_plane + oy0 * d->ow;
    GemmArgs g = {.M = d->oc, .N = rows * d->ow, .K = d->channels, .ap = d->wp, .b = mid, .koff = d->koff,
                  .noff = d->noff, .c = d->y + at, .ldc = out_plane, .bias_m = d->bp, .z = d->z ? d->z + at : NULL,
                  .ldz = out_plane, .act = d->act_p, .threads = 1, .ws = mid + band_floats(d), .alpha = 1.0f};
    ge_gemm_args(&g);
}

void ge_dwpw(const DepthwisePointwise *d) {
    pool_run(dwpw_item, (void *)d, d->n * dwpw_bands(d), d->threads);
}
