/* Depthwise convolution (2-D, any stride, dilation and padding, a channel multiplier), on the input
laid out by conv.PhaseLayout: there every kernel tap of output row oy is a unit-stride run starting
at tap_off[t] + oy * pitch in the input channel's planes. Per output channel and row:
y[ox] = act(bias + sum_t w[t] * x[tap_off[t] + oy * pitch + ox]). Items are runs of output
channels of one batch item; no workspace. */
#include "abi.h"
#include "pool.h"
#include "simd.h"


/* Per output channel: the flat run of its rows (pitch apart, the columns past `cols` are padding)
in blocks that stay in L1, every element a vector lane; then the valid columns of each row are
copied into Y. Narrow images vectorize as well as wide ones. */
#define DW_BLOCK 1024

static NO_LIBCALLS void depthwise_channel(const Depthwise *d, int64_t oc) {
    const float *x = d->x + (oc / d->mult) * d->in_channel_step, *w = d->w + oc * d->taps;
    float bias = d->bias ? d->bias[oc] : 0.0f, *y = d->y + oc * d->rows * d->cols;
    const int64_t *off = d->tap_off, pitch = d->pitch, cols = d->cols;
    int64_t flat = (d->rows - 1) * pitch + cols;
    float buf[DW_BLOCK];
    for (int64_t n0 = 0; n0 < flat; n0 += DW_BLOCK) {
        int64_t n1 = n0 + DW_BLOCK < flat ? n0 + DW_BLOCK : flat, j = n0;
        for (; j + 2 * VL <= n1; j += 2 * VL) {  /* two vectors at a time: independent chains */
            vec a0 = (vec){0} + bias, a1 = a0;
            for (int64_t t = 0; t < d->taps; t++) {
                a0 += w[t] * vload(x + off[t] + j);
                a1 += w[t] * vload(x + off[t] + j + VL);
            }
            a0 = vactivate(a0, d->act), a1 = vactivate(a1, d->act);
            vstore(buf + j - n0, a0);
            vstore(buf + j - n0 + VL, a1);
        }
        for (; j < n1; j += VL) {  /* the tail, in masked vectors: a 7x7 plane is mostly tail */
            int n = n1 - j < VL ? (int)(n1 - j) : VL;
            vec a = (vec){0} + bias;
            for (int64_t t = 0; t < d->taps; t++) a += w[t] * load_part(x + off[t] + j, n);
            a = vactivate(a, d->act);
            store_part(buf + j - n0, a, n);
        }
        for (int64_t oy = n0 / pitch; oy * pitch < n1; oy++) {  /* the valid columns of each row */
            int64_t lo = oy * pitch > n0 ? oy * pitch : n0, hi = oy * pitch + cols < n1 ? oy * pitch + cols : n1;
            if (lo < hi) copy_floats(y + oy * cols + (lo - oy * pitch), buf + (lo - n0), hi - lo);
        }
    }
}

/* Channels per item: a 7x7 plane is too little work to be claimed alone (one atomic per channel). */
static int64_t depthwise_per_item(const Depthwise *d) { return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->taps + 1); }

static void depthwise_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    int64_t per = depthwise_per_item(d), end = d->channels * d->mult;
    for (int64_t oc = it * per; oc < (it + 1) * per && oc < end; oc++) depthwise_channel(d, oc);
}

void ge_depthwise(const Depthwise *d) {
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, (void *)d, (d->channels * d->mult + per - 1) / per, d->threads);
}
