/* conv.PhaseLayout.fill for 2-D inputs: the padded input split into its stride phases, ph[r0, r1,
plane, q0, q1] = x[plane, q0 * s0 + r0 - pb0, q1 * s1 + r1 - pb1], zero outside x. Items are runs of
planes (each source row is read once for all its phases); every element of a used phase is written.
A float16 x (x_half) is converted a row at a time, as the row is laid out: the fill is the conversion
of a convolution's input. */
#include <stdlib.h>

#include "abi.h"
#include "pool.h"
#include "simd.h"
#include "half.h"

#define HALF_STACK_ROW 4096  /* float16 rows up to this long are converted on the stack (16 KB) */


/* d[q] = src[2 q] for q < n, reading at most `avail` floats of src: pairs of vectors, one shuffle;
   the row's tail in masked loads and a masked store (a 28-wide row is one such step, no scalar). */
static inline void take_evens(float *d, const float *src, int64_t n, int64_t avail) {
    int64_t q = 0;
#if !defined(__clang__)
    ivec even;
    for (int i = 0; i < VL; i++) even[i] = 2 * i;
    for (; q + VL <= n && 2 * q + 2 * VL <= avail; q += VL)
        vstore(d + q, __builtin_shuffle(vload(src + 2 * q), vload(src + 2 * q + VL), even));
    for (; q < n; q += VL) {
        int cnt = n - q < VL ? (int)(n - q) : VL;
        int64_t have = avail - 2 * q < 2 * VL ? avail - 2 * q : 2 * VL;  /* >= 2 cnt - 1: the last even is inside */
        vec lo = load_part(src + 2 * q, have < VL ? (int)have : VL);
        vec hi = have > VL ? load_part(src + 2 * q + VL, (int)(have - VL)) : (vec){0};
        store_part(d + q, __builtin_shuffle(lo, hi, even), cnt);
    }
#endif
    for (; q < n; q++) d[q] = src[2 * q];
}

/* A source row of w floats into its two column phases at once (stride 2 across): column c = 2 i + e
   goes to d[e][i] for i < n[e] (d[e] NULL: that phase unused). Two loads, two shuffles, two stores
   per 2 VL columns (one pass over the row for both phases). */
static inline void split_row(float *const d[2], const int64_t n[2], const float *row, int64_t w) {
#if !defined(__clang__)
    ivec even, odd;
    for (int i = 0; i < VL; i++) even[i] = 2 * i, odd[i] = 2 * i + 1;
    int64_t n_max = n[0] > n[1] ? n[0] : n[1];
    for (int64_t i = 0; i < n_max; i += VL) {
        int64_t have = w - 2 * i < 2 * VL ? w - 2 * i : 2 * VL;
        vec lo = have >= VL ? vload(row + 2 * i) : load_part(row + 2 * i, (int)have);
        vec hi = have >= 2 * VL ? vload(row + 2 * i + VL) : have > VL ? load_part(row + 2 * i + VL, (int)(have - VL))
                                                                     : (vec){0};
        for (int e = 0; e < 2; e++) {
            if (!d[e] || i >= n[e]) continue;
            vec v = __builtin_shuffle(lo, hi, e ? odd : even);
            if (n[e] - i >= VL) vstore(d[e] + i, v);
            else store_part(d[e] + i, v, (int)(n[e] - i));
        }
    }
#else
    for (int e = 0; e < 2; e++)
        if (d[e])
            for (int64_t i = 0; i < n[e]; i++) d[e][i] = row[2 * i + e];
#endif
}

/* One plane (all its used phases) into its place in the layout, phase (r0, r1) at dst + (r0 s1 + r1)
phase_stride, its rows sq1 apart: the used phases are zeroed whole, then each row of x is copied into
the phase rows it feeds, while it is in L1: no per-row work for the padding (a small plane has about
as many padding rows and columns as rows). */
static NO_LIBCALLS void phase_fill_plane(const PhaseFill *f, int64_t plane) {
    int64_t phase_stride = f->planes * f->sq0 * f->sq1;
    float *dst = f->ph + plane * f->sq0 * f->sq1;
    const float *x = f->x + plane * f->h * f->w;
    /* a float16 row, converted: on the stack up to HALF_STACK_ROW floats, a longer one in a buffer of its own */
    float stack_row[f->x_half && f->w <= HALF_STACK_ROW ? f->w : 1];
    float *widened = f->x_half && f->w > HALF_STACK_ROW ? malloc((size_t)f->w * sizeof(float)) : stack_row;
    if (!widened) abort();  /* one row of memory: no way on without it */
    int64_t lo[64], hi[64];  /* per r1 (s0 s1 <= 64): the q1 whose column lies inside x */
    for (int64_t r1 = 0; r1 < f->s1; r1++) {
        int64_t l = 0, h = f->sq1;
        while (l < h && l * f->s1 + r1 - f->pb1 < 0) l++;
        while (h > l && (h - 1) * f->s1 + r1 - f->pb1 >= f->w) h--;
        lo[r1] = l, hi[r1] = h;
    }
    for (int64_t p = 0; p < f->s0 * f->s1; p++)
        if (f->used >> p & 1) fill_floats(dst + p * phase_stride, f->sq0 * f->sq1, 0.0f);
    int64_t r0 = f->pb0 % f->s0, q0 = f->pb0 / f->s0;  /* source row hh's phase row, stepped (no division per row) */
    for (int64_t hh = 0; hh < f->h; hh++, r0 = r0 + 1 == f->s0 ? 0 : r0 + 1, q0 += r0 == 0) {
        if (q0 >= f->sq0) break;
        const float *row = x + hh * f->w;
        if (f->x_half) {
            halves_to_floats(widened, (const uint16_t *)f->x + (plane * f->h + hh) * f->w, f->w);
            row = widened;
        }
        if (f->s1 == 2 && f->pb1 >= 0) {  /* column c = 2 i + e: phase r1 = (e + pb1) % 2, q1 = i + (e + pb1) / 2 */
            float *d[2] = {NULL, NULL};
            int64_t n[2] = {0, 0};
            for (int e = 0; e < 2; e++) {
                int64_t r1 = (e + f->pb1) % 2, q1 = (e + f->pb1) / 2;
                n[e] = (f->w - e + 1) / 2 < hi[r1] - q1 ? (f->w - e + 1) / 2 : hi[r1] - q1;
                if (f->used >> (r0 * 2 + r1) & 1 && n[e] > 0) d[e] = dst + (r0 * 2 + r1) * phase_stride + q0 * f->sq1 + q1;
            }
            split_row(d, n, row, f->w);
            continue;
        }
        for (int64_t r1 = 0; r1 < f->s1; r1++) {
            int64_t l = lo[r1], h = hi[r1];
            if (!(f->used >> (r0 * f->s1 + r1) & 1) || l >= h) continue;
            float *d = dst + (r0 * f->s1 + r1) * phase_stride + q0 * f->sq1 + l;
            const float *src = row + l * f->s1 + r1 - f->pb1;
            if (f->s1 == 1) copy_floats(d, src, h - l);
            else if (f->s1 == 2) take_evens(d, src, h - l, row + f->w - src);
            else for (int64_t q = 0; q < h - l; q++) d[q] = src[q * f->s1];
        }
    }
    if (widened != stack_row) free(widened);
}

static void phase_fill_item(void *ctx, int64_t it, int slot) {
    const PhaseFill *f = ctx;
    (void)slot;
    int64_t per = 1 + FILL_ITEM_FLOATS / (f->h * f->w + 1);
    for (int64_t plane = it * per; plane < (it + 1) * per && plane < f->planes; plane++) phase_fill_plane(f, plane);
}

void ge_phase_fill(const PhaseFill *f) {
    int64_t per = 1 + FILL_ITEM_FLOATS / (f->h * f->w + 1);
    pool_run(phase_fill_item, (void *)f, (f->planes + per - 1) / per, f->threads);
}
