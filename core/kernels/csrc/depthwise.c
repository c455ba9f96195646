/* Depthwise convolution (2-D, any stride, dilation and padding, a channel multiplier), on the input
laid out by conv.PhaseLayout: there every kernel tap of output row oy is a unit-stride run starting
at tap_off[t] + oy * pitch in the input channel's planes. Per output channel and row:
y[ox] = act(bias + sum_t w[t] * x[tap_off[t] + oy * pitch + ox]). Items are runs of input
channels of one batch item, each with its mult output channels; no workspace.

With `fill`, an item lays out its channel's planes itself, as it goes: into a buffer on its stack
that stays in L1/L2 from one channel to the next when the channel's phases fit (DW_LOCAL), else into
the layout's own place. The input is read once from memory; a separate fill pass wrote the whole
layout to memory first and cost as much as the convolution.

3x3 and 5x5 kernels run with their weights in registers and the taps unrolled.

float16 (half: HALF_C, Y float16; the fill's x_half, X float16): the fill converts X as it lays it out,
channels in the lanes convert each vector as they load it, the stride-2 rows convert the channel's
plane into a buffer first (each input vector is read by several taps), and Y is rounded as it is
stored; the arithmetic is float32, as on float32 tensors. */
#include "abi.h"
#include "half.h"
#include "phase_fill.h"
#include "pool.h"
#include "simd.h"

#define DW_LOCAL 16384  /* floats of a channel's phases laid out on the stack (64 KB) */
#define DW_BLOCK 1024   /* outputs per block of a channel's flat run (in L1) */

/* V vectors of outputs from flat position j (the last one `tail` lanes when tail < VL): bias +
   sum_t w[t] x[off[t] + j + v VL], activated, into buf. T taps when T > 0 (3x3, 5x5: weights in
   registers, the taps unrolled), else `taps`. */
static inline __attribute__((always_inline)) void dw_vectors(const int T, const int V, int64_t taps, const float *x,
                                                             const int64_t *off, const vec *wv, const float *w,
                                                             float bias, int64_t j, int tail, Activation act,
                                                             float *buf) {
    vec a[4];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = (vec){0} + bias;
    if (T > 0) {
#pragma GCC unroll 25
        for (int t = 0; t < T; t++) {
            const float *xt = x + off[t] + j;
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                a[v] += wv[t] * (v == V - 1 && tail < VL ? load_part(xt + v * VL, tail) : vload(xt + v * VL));
        }
    } else {
        for (int64_t t = 0; t < taps; t++) {
            const float *xt = x + off[t] + j;
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                a[v] += w[t] * (v == V - 1 && tail < VL ? load_part(xt + v * VL, tail) : vload(xt + v * VL));
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) vstore(buf + v * VL, vactivate(a[v], act));
}

/* One output channel from its input channel's phases at x, the taps at off[t]: the flat run of its
   rows (pitch apart, the columns past `cols` padding) in blocks that stay in L1, every element a
   vector lane (narrow planes vectorize as well as wide ones); then the valid columns of each row
   are copied into Y. */
static inline __attribute__((always_inline)) void dw_channel(const int T, const Depthwise *d, int64_t oc,
                                                             const float *x, const int64_t *off) {
    const float *w = d->w + oc * d->taps;
    float bias = d->bias ? d->bias[oc] : 0.0f;
    int64_t y0 = oc * d->rows * d->cols;
    int64_t pitch = d->pitch, cols = d->cols, flat = (d->rows - 1) * pitch + cols;
    vec wv[T > 0 ? T : 1];
    for (int t = 0; t < T; t++) wv[t] = (vec){0} + w[t];
    float buf[DW_BLOCK + VL] __attribute__((aligned(64)));
    for (int64_t n0 = 0; n0 < flat; n0 += DW_BLOCK) {
        int64_t n1 = n0 + DW_BLOCK < flat ? n0 + DW_BLOCK : flat, j = n0;
        for (; j + 4 * VL <= n1; j += 4 * VL)  /* four vectors at a time: independent chains */
            dw_vectors(T, 4, d->taps, x, off, wv, w, bias, j, VL, d->act, buf + j - n0);
        for (; j < n1; j += VL)  /* the tail, one vector at a time, the last one masked */
            dw_vectors(T, 1, d->taps, x, off, wv, w, bias, j, n1 - j < VL ? (int)(n1 - j) : VL, d->act, buf + j - n0);
        for (int64_t oy = n0 / pitch; oy * pitch < n1; oy++) {  /* the valid columns of each row */
            int64_t lo = oy * pitch > n0 ? oy * pitch : n0, hi = oy * pitch + cols < n1 ? oy * pitch + cols : n1;
            if (lo >= hi) continue;
            int64_t at = y0 + oy * cols + (lo - oy * pitch);
            if (d->half & HALF_C) floats_to_halves((uint16_t *)d->y + at, buf + (lo - n0), hi - lo);
            else copy_floats(d->y + at, buf + (lo - n0), hi - lo);
        }
    }
}

static NO_LIBCALLS void dw_channel_3x3(const Depthwise *d, int64_t oc, const float *x, const int64_t *off) {
    dw_channel(9, d, oc, x, off);
}
static NO_LIBCALLS void dw_channel_5x5(const Depthwise *d, int64_t oc, const float *x, const int64_t *off) {
    dw_channel(25, d, oc, x, off);
}
static NO_LIBCALLS void dw_channel_any(const Depthwise *d, int64_t oc, const float *x, const int64_t *off) {
    dw_channel(0, d, oc, x, off);
}

/* Channels in the vector lanes (mult 1): VL channels at a time run on the input itself (no phase
layout: a pixel is one vector whatever the stride). Per group of VL channels and band of output rows,
the input rows the band reads are transposed (register transposes of VL x VL blocks) into a
zero-padded grid of positions x channels; every tap is then one unmasked vector (the flat run wastes
the lanes of padding columns and masks a tail: half of a 7x7 plane's lanes), the weights one vector
per tap reused over several pixels; the band's result is transposed back into each channel's plane.
The grid and the band's outputs stay in L1/L2 on the item's stack. */
#define DW_GRID 32768        /* floats of a band's padded input grid (positions x VL, 128 KB) */
#define DW_BAND_OUT 16384    /* floats of a band's outputs (pixels x VL, 64 KB) */
#define DW_PIXELS 4          /* pixels per block of accumulators (independent FMA chains) */

/* The grid of a band of `rows` output rows: its rows and columns, from the first padding one to the
   last one read. */
static int64_t grid_rows(const Depthwise *d, int64_t rows) { return (rows - 1) * d->fill->s0 + (d->kh - 1) * d->dh + 1; }
static int64_t grid_cols(const Depthwise *d) { return (d->cols - 1) * d->fill->s1 + (d->kw - 1) * d->dw + 1; }

/* Output rows per band: as many as the grid and the outputs take (0: not even one). */
static int64_t band_rows(const Depthwise *d) {
    int64_t rows = DW_BAND_OUT / (d->cols * VL);
    if (rows > d->rows) rows = d->rows;
    while (rows > 0 && grid_rows(d, rows) * grid_cols(d) * VL > DW_GRID) rows--;
    return rows;
}

/* Channels in the lanes when one band covers the plane (up to 28x28 outputs of a 3x3 or 5x5 kernel):
   for larger planes the flat run wastes few lanes, and bands re-read the rows they share (measured:
   112x112 and 56x56 planes 10-20% slower in bands, 28x28 and smaller 15-60% faster in one). */
static int use_blocked(const Depthwise *d) {
    return d->fill && d->mult == 1 && d->taps <= 64 && d->kh * d->kw == d->taps && band_rows(d) == d->rows;
}

/* R pixels `step` positions apart from position at of the grid, T taps (0: taps), into out. */
static inline __attribute__((always_inline)) void dw_pixels(const int T, const int R, int64_t taps, const float *grid,
                                                            const int64_t *off, const vec *wv, vec bias, int64_t at,
                                                            int64_t step, Activation act, float *out) {
    vec a[DW_PIXELS];
#pragma GCC unroll 8
    for (int k = 0; k < R; k++) a[k] = bias;
    if (T > 0) {
#pragma GCC unroll 25
        for (int t = 0; t < T; t++) {
            const float *xt = grid + (off[t] + at) * VL;
#pragma GCC unroll 8
            for (int k = 0; k < R; k++) a[k] += wv[t] * vload(xt + k * step * VL);
        }
    } else {
        for (int64_t t = 0; t < taps; t++) {
            const float *xt = grid + (off[t] + at) * VL;
#pragma GCC unroll 8
            for (int k = 0; k < R; k++) a[k] += wv[t] * vload(xt + k * step * VL);
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < R; k++) vstore(out + k * VL, vactivate(a[k], act));
}

static inline __attribute__((always_inline)) void dw_band_rows(const int T, const Depthwise *d, int64_t rows,
                                                               const float *grid, const int64_t *off, const vec *wv,
                                                               vec bias, float *out) {
    int64_t gc = grid_cols(d), s0 = d->fill->s0, s1 = d->fill->s1;
    for (int64_t oy = 0; oy < rows; oy++) {
        int64_t ox = 0;
        float *o = out + oy * d->cols * VL;
        for (; ox + DW_PIXELS <= d->cols; ox += DW_PIXELS)
            dw_pixels(T, DW_PIXELS, d->taps, grid, off, wv, bias, oy * s0 * gc + ox * s1, s1, d->act, o + ox * VL);
        int64_t at = oy * s0 * gc + ox * s1;
        switch (d->cols - ox) {  /* the rest of the row as one block (a row of 7 is 4 + 3, not 4 + 1 + 1 + 1) */
            case 3: dw_pixels(T, 3, d->taps, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
            case 2: dw_pixels(T, 2, d->taps, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
            case 1: dw_pixels(T, 1, d->taps, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
        }
    }
}

/* The channels [c0, c0 + VL) (fewer at the end), band by band, through grid (its padding columns
   zero) and out. */
static NO_LIBCALLS void dw_group(const Depthwise *d, int64_t c0, float *grid, float *out, const int64_t *off) {
    const PhaseFill *f = d->fill;
    int64_t plane = f->h * f->w, gc = grid_cols(d), band = band_rows(d), pixels = d->rows * d->cols;
    int n = d->channels - c0 < VL ? (int)(d->channels - c0) : VL;
    int64_t x0 = (d->fill_plane0 + c0) * plane;  /* f->x's element of channel c0 */
    vec wv[64], bias = (vec){0};
    for (int64_t t = 0; t < d->taps; t++) {
        wv[t] = (vec){0};
        for (int i = 0; i < n; i++) wv[t][i] = d->w[(c0 + i) * d->taps + t];
    }
    if (d->bias)
        for (int i = 0; i < n; i++) bias[i] = d->bias[c0 + i];
    for (int64_t oy0 = 0; oy0 < d->rows; oy0 += band) {
        int64_t rows = d->rows - oy0 < band ? d->rows - oy0 : band, gr = grid_rows(d, rows);
        int64_t iy0 = oy0 * f->s0 - f->pb0;  /* the input row of grid row 0 */
        /* grid rows outside x: zero (a band's rows above or below the input) */
        for (int64_t gy = 0; gy < gr; gy++)
            if (iy0 + gy < 0 || iy0 + gy >= f->h) fill_floats(grid + gy * gc * VL, gc * VL, 0.0f);
        /* x's rows inside the band's grid, transposed VL positions at a time */
        int64_t lo = iy0 < 0 ? 0 : iy0, hi = iy0 + gr < f->h ? iy0 + gr : f->h;
        int64_t iy = lo, ix = 0;  /* position q of the plane, stepped */
        for (int64_t q = lo * f->w; q < hi * f->w; q += VL) {
            int m = hi * f->w - q < VL ? (int)(hi * f->w - q) : VL;
            vec r[VL];
            for (int i = 0; i < VL; i++) r[i] = i < n ? load_any_part(f->x, f->x_half, x0 + i * plane + q, m) : (vec){0};
            transpose_blocks(r, VL);
            for (int j = 0; j < m; j++) {
                int64_t gx = ix + f->pb1;
                if (gx < gc) vstore(grid + ((iy - iy0) * gc + gx) * VL, r[j]);
                if (++ix == f->w) ix = 0, iy++;
            }
        }
        if (d->taps == 9) dw_band_rows(9, d, rows, grid, off, wv, bias, out);
        else if (d->taps == 25) dw_band_rows(25, d, rows, grid, off, wv, bias, out);
        else dw_band_rows(0, d, rows, grid, off, wv, bias, out);
        int64_t count = rows * d->cols, at = oy0 * d->cols;  /* the band's pixels, from pixel at */
        for (int64_t q = 0; q < count; q += VL) {
            int m = count - q < VL ? (int)(count - q) : VL;
            vec r[VL];
            for (int i = 0; i < VL; i++) r[i] = i < m ? vload(out + (q + i) * VL) : (vec){0};
            transpose_blocks(r, VL);
            for (int c = 0; c < n; c++) store_any_part(d->y, d->half & HALF_C, (c0 + c) * pixels + at + q, r[c], m);
        }
    }
}

static int64_t groups_per_item(const Depthwise *d) { return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->taps * VL); }

static void depthwise_blocked_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    float grid[DW_GRID] __attribute__((aligned(64))), out[DW_BAND_OUT] __attribute__((aligned(64)));
    int64_t off[64], gc = grid_cols(d);
    for (int64_t t = 0; t < d->taps; t++) off[t] = (t / d->kw) * d->dh * gc + (t % d->kw) * d->dw;
    /* the padding columns, once: every band writes the same columns of its rows */
    fill_floats(grid, grid_rows(d, band_rows(d)) * gc * VL, 0.0f);
    int64_t per = groups_per_item(d), groups = (d->channels + VL - 1) / VL;
    for (int64_t g = it * per; g < (it + 1) * per && g < groups; g++) dw_group(d, g * VL, grid, out, off);
}

/* Input channels per item: a 7x7 plane is too little work to be claimed alone (one atomic per channel). */
static int64_t depthwise_per_item(const Depthwise *d) {
    return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->taps * d->mult + 1);
}

static int64_t local_floats(const PhaseFill *f) { return f->s0 * f->s1 * f->sq0 * f->sq1; }

static void depthwise_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    const PhaseFill *f = d->fill;
    (void)slot;
    void (*channel)(const Depthwise *, int64_t, const float *, const int64_t *) =
        d->taps == 9 ? dw_channel_3x3 : d->taps == 25 ? dw_channel_5x5 : dw_channel_any;
    int local = f && local_floats(f) <= DW_LOCAL && d->taps <= 64;
    float buf[local ? DW_LOCAL : 1] __attribute__((aligned(64)));
    int64_t local_off[64];  /* the taps in the buffer's layout: phase (r0, r1) at its index x the phase's size */
    if (local) {
        int64_t plane = f->sq0 * f->sq1, phase_elems = f->planes * plane;
        for (int64_t t = 0; t < d->taps; t++)
            local_off[t] = d->tap_off[t] / phase_elems * plane + d->tap_off[t] % phase_elems;
    }
    int64_t per = depthwise_per_item(d);
    for (int64_t ic = it * per; ic < (it + 1) * per && ic < d->channels; ic++) {
        const float *x = d->x + ic * d->in_channel_step;
        const int64_t *off = d->tap_off;
        if (local) {  /* the padding written once per item: every channel fills the same part */
            phase_fill_plane_into(f, d->fill_plane0 + ic, buf, f->sq0 * f->sq1, ic > it * per);
            x = buf, off = local_off;
        } else if (f) {
            phase_fill_plane(f, d->fill_plane0 + ic);
        }
        for (int64_t oc = ic * d->mult; oc < (ic + 1) * d->mult; oc++) channel(d, oc, x, off);
    }
}

/* Stride 2 across, rows read in place (no dilation; AVX-512): per output row and block of up to
DW_ROW_VECS vectors of columns, each kernel row's input row is loaded as pairs of vectors, each pair
giving two taps (its even and its odd columns), zeros where the columns fall outside the row (masked
loads: the padding is never written anywhere). No phase layout and no copy of the output. */
#define DW_ROW_VECS 4

/* Lanes j of `row` at columns c0 + j inside [0, w), zeros elsewhere. */
static inline vec load_cols_in(const float *row, int64_t c0, int64_t w) {
    if (c0 >= 0 && c0 + VL <= w) return vload(row + c0);
    int64_t lo = c0 < 0 ? -c0 : 0, hi = w - c0 < VL ? w - c0 : VL;
    if (lo >= hi) return (vec){0};
#if defined(__AVX512F__)
    return (vec)_mm512_maskz_loadu_ps((__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), row + c0);
#else
    vec v = (vec){0};
    for (int64_t j = lo; j < hi; j++) v[j] = row[c0 + j];
    return v;
#endif
}

/* V vectors of output row oy from column ox0 (the last one n lanes), T taps (0: any); y float16 when
   d->half & HALF_C. */
static inline __attribute__((always_inline)) void dw_row_vectors(const int T, const int V,
                                                                 const Depthwise *d, const float *x,
                                                                 const vec *wv, const float *w, vec bias,
                                                                 int64_t oy, int64_t ox0, int n, void *y) {
    const PhaseFill *f = d->fill;
    int64_t kh = d->kh, kw = T > 0 ? (T == 9 ? 3 : 5) : d->kw;
    vec a[DW_ROW_VECS];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = bias;
#pragma GCC unroll 5
    for (int64_t ky = 0; ky < (T > 0 ? kw : kh); ky++) {
        int64_t iy = oy * f->s0 + ky - f->pb0;
        if (iy < 0 || iy >= f->h) continue;
        const float *row = x + iy * f->w;
        ivec even, odd;
        for (int i = 0; i < VL; i++) even[i] = 2 * i, odd[i] = 2 * i + 1;
#pragma GCC unroll 3
        for (int64_t kx = 0; kx < kw; kx += 2) {
            vec we = T > 0 ? wv[ky * kw + kx] : (vec){0} + w[ky * kw + kx];
            vec wo = kx + 1 < kw ? (T > 0 ? wv[ky * kw + kx + 1] : (vec){0} + w[ky * kw + kx + 1]) : (vec){0};
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) {
                int64_t c0 = 2 * (ox0 + v * VL) + kx - f->pb1;
                vec lo = load_cols_in(row, c0, f->w), hi = load_cols_in(row, c0 + VL, f->w);
                a[v] += we * __builtin_shuffle(lo, hi, even);
                if (kx + 1 < kw) a[v] += wo * __builtin_shuffle(lo, hi, odd);
            }
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        vec r = vactivate(a[v], d->act);
        if (d->half & HALF_C) store_any_part(y, 1, v * VL, r, v == V - 1 ? n : VL);
        else if (v == V - 1 && n < VL) store_part((float *)y + v * VL, r, n);
        else vstore((float *)y + v * VL, r);  /* a whole vector unmasked (masked: ~5% of the rows) */
    }
}

/* One output channel; a float16 plane is converted first into `plane` (DW_LOCAL floats at most:
   use_rows), where its rows are read from L1/L2 by every tap. */
static inline __attribute__((always_inline)) void dw_rows_channel(const int T, const Depthwise *d,
                                                                  int64_t oc, float *plane) {
    const PhaseFill *f = d->fill;
    const float *x = f->x + (d->fill_plane0 + oc / d->mult) * f->h * f->w;
    if (f->x_half) {
        halves_to_floats(plane, (const uint16_t *)f->x + (d->fill_plane0 + oc / d->mult) * f->h * f->w, f->h * f->w);
        x = plane;
    }
    const float *w = d->w + oc * d->taps;
    vec wv[T > 0 ? T : 1], bias = (vec){0} + (d->bias ? d->bias[oc] : 0.0f);
    for (int t = 0; t < T; t++) wv[t] = (vec){0} + w[t];
    int half_y = d->half & HALF_C;
    for (int64_t oy = 0; oy < d->rows; oy++)
        for (int64_t ox0 = 0; ox0 < d->cols; ox0 += DW_ROW_VECS * VL) {
            int64_t left = d->cols - ox0;
            int V = left >= DW_ROW_VECS * VL ? DW_ROW_VECS : (int)((left + VL - 1) / VL);
            int n = (int)(left - (V - 1) * VL < VL ? left - (V - 1) * VL : VL);
            void *yo = (void *)advance(d->y, half_y, oc * d->rows * d->cols + oy * d->cols + ox0);
            switch (V) {
                case 4: dw_row_vectors(T, 4, d, x, wv, w, bias, oy, ox0, n, yo); break;
                case 3: dw_row_vectors(T, 3, d, x, wv, w, bias, oy, ox0, n, yo); break;
                case 2: dw_row_vectors(T, 2, d, x, wv, w, bias, oy, ox0, n, yo); break;
                default: dw_row_vectors(T, 1, d, x, wv, w, bias, oy, ox0, n, yo); break;
            }
        }
}

static NO_LIBCALLS void dw_rows_3x3(const Depthwise *d, int64_t oc, float *p) { dw_rows_channel(9, d, oc, p); }
static NO_LIBCALLS void dw_rows_5x5(const Depthwise *d, int64_t oc, float *p) { dw_rows_channel(25, d, oc, p); }
static NO_LIBCALLS void dw_rows_any(const Depthwise *d, int64_t oc, float *p) { dw_rows_channel(0, d, oc, p); }

/* Where the fill's split of every row into its two column phases cost twice the products
   (MobileNetV2's 3x3s2 at 112x112 and 56x56: 25-35% faster in place; 5x5 stride 2 as fast). Stride 1
   read in place measured 10-30% slower than the flat run over filled rows, which masks no edges. */
static int use_rows(const Depthwise *d) {
    const PhaseFill *f = d->fill;
    return VL == 16 && f && d->dh == 1 && d->dw == 1 && f->s1 == 2 && !use_blocked(d) &&
           (!f->x_half || f->h * f->w <= DW_LOCAL);
}

static void depthwise_rows_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    void (*channel)(const Depthwise *, int64_t, float *) =
        d->kh == 3 && d->kw == 3 ? dw_rows_3x3 : d->kh == 5 && d->kw == 5 ? dw_rows_5x5 : dw_rows_any;
    float plane[d->fill->x_half ? DW_LOCAL : 1] __attribute__((aligned(64)));
    int64_t per = depthwise_per_item(d), channels = d->channels * d->mult;
    for (int64_t oc = it * per; oc < (it + 1) * per && oc < channels; oc++) channel(d, oc, plane);
}

void ge_depthwise(const Depthwise *d) {
    if (use_rows(d)) {
        int64_t per = depthwise_per_item(d), channels = d->channels * d->mult;
        pool_run(depthwise_rows_item, (void *)d, (channels + per - 1) / per, d->threads);
        return;
    }
    if (use_blocked(d)) {
        int64_t per = groups_per_item(d), groups = (d->channels + VL - 1) / VL;
        pool_run(depthwise_blocked_item, (void *)d, (groups + per - 1) / per, d->threads);
        return;
    }
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, (void *)d, (d->channels + per - 1) / per, d->threads);
}
