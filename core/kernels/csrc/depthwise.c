/* Depthwise convolution (2-D, any stride, dilation and padding, a channel multiplier), on the input
laid out by conv.PhaseLayout: there every kernel tap of output row oy is a unit-stride run starting
at tap_off[t] + oy * pitch in the input channel's planes. Per output channel and row:
y[ox] = act(bias + sum_t w[t] * x[tap_off[t] + oy * pitch + ox]). Items are runs of input
channels of one batch item, each with its mult output channels; no workspace.

With `fill`, an item lays out its channel's planes itself, as it goes: into a buffer on its stack
that stays in L1/L2 from one channel to the next when the channel's phases fit (DW_LOCAL), else into
the layout's own place. The input is read once from memory; a separate fill pass wrote the whole
layout to memory first and cost as much as the convolution.

3x3 and 5x5 kernels run with their weights in registers and the taps unrolled. */
#include "abi.h"
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
    float bias = d->bias ? d->bias[oc] : 0.0f, *y = d->y + oc * d->rows * d->cols;
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
            if (lo < hi) copy_floats(y + oy * cols + (lo - oy * pitch), buf + (lo - n0), hi - lo);
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

void ge_depthwise(const Depthwise *d) {
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, (void *)d, (d->channels + per - 1) / per, d->threads);
}
