/* Depthwise convolution (2-D: any kernel, stride, dilation and padding, a channel multiplier) of one
batch item, NCHW. Per output channel: y[i] = act(bias + sum_t w[t] src[i + off[t]]) over its output
positions i, in full vectors that cross row boundaries: the output plane is one flat run when the
source's rows are as wide as the output's ("same" columns), else one run per output row. Each tap is
a vector load whose lanes outside the source's columns are masked off (a column left of 0 or right
of the row would read the neighbouring row): no padding column is computed or written, and Y is
stored as it is computed, no copy. The source:
- in place (AVX-512, stride 1, float32 planes of DW_IN_PLACE_MIN positions and more): the input
  plane itself, rows above and below it masked too (loads whose lanes fall outside the plane);
- else the channel's stride phases (phase_fill.c: phase (r0, r1) row q holds input row s0 q + r0,
  column c its column s1 c + r1), laid out in a buffer of the item (on its stack while it fits, the
  padding zeroed once per item), with zero rows above and below and rows as wide as the output's
  where the phases fit in them: every tap of a strided or dilated kernel is a unit-stride run of one
  phase, and only the columns need masks. Small planes go through it too: their copy is cheap, and
  rows every vector of them would mask cost more.
The taps of 3x3 and 5x5 kernels are unrolled with their weights in registers; kernel columns outer,
rows inner (one column mask per vector for all the rows of a kernel column), in the same order on
every path: float16 (HALF_C: Y rounded as it is stored; x_half: the fill converts X) gives the
float32 kernel's results rounded once. */
#include <stdlib.h>

#include "abi.h"
#include "half.h"
#include "pool.h"
#include "simd.h"

#define DW_LOCAL 16384         /* floats of a channel's phases on the item's stack (64 KB); more: malloc */
#define DW_GROUP 4             /* vectors per block of accumulators (independent FMA chains) */
#define DW_IN_PLACE_MIN 1024   /* output positions from which a stride-1 float32 plane is read in place */
#define DW_FILL_FLOATS 1024    /* x's floats filled at least at a time (one row at least) */

/* Lanes of a vector that load: a k-mask on AVX-512 (masked-off lanes never fault), else all-ones
   lanes ANDed onto a whole load (the source's slack keeps it inside the buffer). */
#if defined(__AVX512F__)
typedef __mmask16 lanes;
static inline lanes cols_in(ivec col, int32_t lo, int32_t span) {  /* lo <= col < lo + span */
    return _mm512_cmplt_epu32_mask((__m512i)(col - lo), _mm512_set1_epi32(span));
}
static inline vec load_lanes(const float *p, lanes m) { return (vec)_mm512_maskz_loadu_ps(m, p); }
#else
typedef ivec lanes;
typedef uint32_t uvec __attribute__((vector_size(VL * 4)));
static inline lanes cols_in(ivec col, int32_t lo, int32_t span) { return (ivec)((uvec)(col - lo) < (uint32_t)span); }
static inline vec load_lanes(const float *p, lanes m) { return (vec)((ivec)vload(p) & m); }
#endif

/* Lanes [lo, hi) of v into p + lo .. p + hi */
static inline void store_lanes(float *p, vec v, int lo, int hi) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), (__m512)v);
#else
    for (int l = lo; l < hi; l++) p[l] = v[l];
#endif
}

/* One call's geometry, shared by its items. */
typedef struct {
    const Depthwise *d;
    int64_t taps, runs, run_len, pitch, period, step;  /* runs of run_len outputs, source rows pitch apart */
    ivec col0;                          /* the columns of a run's first vector: lane % period */
    int in_place;
    const int64_t *off;                 /* per tap t = dy kw + dx: the source index minus the run's position */
    const int32_t *col_lo, *col_span;   /* per kernel column: the output columns whose source column is inside */
    int64_t min_off, max_off, src_len;  /* in place: loads outside the plane's [0, src_len) are masked */
    int64_t rows_buf, phase_stride, top, slack, buf_floats;  /* else the channel's phases, into a buffer */
    uint64_t used;                      /* bit r0 s1 + r1: a tap reads phase (r0, r1) */
} Plan;

/* What a channel's vectors read, in the channel's locals (stores into Y, through may_alias vectors,
   would make the compiler reload every field of the plan after each one). */
typedef struct {
    const int64_t *off;
    const int32_t *col_lo, *col_span;
    int32_t step, period, half_y;
    Activation act;
} Sweep;

/* The columns of the next vector's lanes: VL positions on, wrapping at the period (the row's width) */
static inline ivec col_next(ivec col, const Sweep *sw) {
    col += sw->step;
    return col - ((col >= sw->period) & sw->period);
}

/* V vectors of outputs from run position j (the last one n lanes), at y (element j of the run's
   output); K: 3 or 5 (weights wv in registers, taps unrolled) or 0 (any kernel, weights w). */
static inline __attribute__((always_inline)) void dw_vectors(const int K, const int V, const Depthwise *d,
                                                             const Sweep *sw, const float *src, const vec *wv,
                                                             const float *w, vec bias, int64_t j, ivec col, int n,
                                                             void *y) {
    int64_t kh = K ? K : d->kh, kw = K ? K : d->kw;
    ivec cols[DW_GROUP];
    vec a[DW_GROUP];
    cols[0] = col;
#pragma GCC unroll 4
    for (int v = 1; v < V; v++) cols[v] = col_next(cols[v - 1], sw);
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = bias;
#pragma GCC unroll 5
    for (int64_t dx = 0; dx < kw; dx++) {
        lanes m[DW_GROUP];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) m[v] = cols_in(cols[v], sw->col_lo[dx], sw->col_span[dx]);
#pragma GCC unroll 5
        for (int64_t dy = 0; dy < kh; dy++) {
            int64_t t = dy * kw + dx;
            const float *xt = src + sw->off[t] + j;
            vec wt = K ? wv[t] : (vec){0} + w[t];
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) a[v] += wt * load_lanes(xt + v * VL, m[v]);
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        vec r = vactivate(a[v], sw->act);
        if (v == V - 1 && n < VL) store_any_part(y, sw->half_y, v * VL, r, n);
        else if (sw->half_y) vstore_half((uint16_t *)y + v * VL, r);
        else vstore((float *)y + v * VL, r);
    }
}

#if defined(__AVX512F__)
/* One vector of an in-place run whose loads may leave the plane (its first and last rows, its end):
   each tap's lanes also masked to the plane's [0, len), from the plane's index `at` of lane 0. */
static inline __attribute__((always_inline)) void dw_edge(const int K, const Depthwise *d, const Sweep *sw,
                                                          const float *src, int64_t at, int64_t len, const vec *wv,
                                                          const float *w, vec bias, int64_t j, ivec col, int n,
                                                          void *y) {
    int64_t kh = K ? K : d->kh, kw = K ? K : d->kw;
    vec a = bias;
#pragma GCC unroll 5
    for (int64_t dx = 0; dx < kw; dx++) {
        lanes m = cols_in(col, sw->col_lo[dx], sw->col_span[dx]);
#pragma GCC unroll 5
        for (int64_t dy = 0; dy < kh; dy++) {
            int64_t t = dy * kw + dx, first = at + sw->off[t];  /* the plane's index of lane 0 */
            int64_t lo = first < 0 ? -first : 0, hi = len - first < VL ? len - first : VL;
            lanes in = lo >= hi ? 0 : (lanes)(((1u << hi) - 1) & ~((1u << lo) - 1));
            a += (K ? wv[t] : (vec){0} + w[t]) * load_lanes(src + sw->off[t] + j, m & in);
        }
    }
    store_any_part(y, sw->half_y, 0, vactivate(a, sw->act), n);
}
#endif

/* Whether the loads of `count` positions from run position j, the run at the plane's index base, stay
   inside the plane (always, from a buffer: its padding rows and slack hold every load). */
static inline int inside(const Plan *p, int64_t base, int64_t j, int64_t count) {
    return !p->in_place || (base + j + p->min_off >= 0 && base + j + count - 1 + p->max_off < p->src_len);
}

/* Zero what fill_phases leaves alone in the used phases (the rows above and below the input's, the
   columns right of it) and the slack around them: once per item, the fill then writes only the input's. */
static NO_LIBCALLS void zero_padding(const Plan *p, float *buf) {
    const Depthwise *d = p->d;
    int64_t s0 = d->sh, s1 = d->sw, pitch = p->pitch;
    fill_floats(buf, p->slack, 0.0f);
    fill_floats(buf + p->buf_floats - p->slack, p->slack, 0.0f);
    for (int64_t r0 = 0; r0 < s0; r0++)
        for (int64_t r1 = 0; r1 < s1; r1++) {
            if (!(p->used >> (r0 * s1 + r1) & 1)) continue;
            float *ph = buf + p->slack + (r0 * s1 + r1) * p->phase_stride;
            int64_t hp = (d->ih - r0 + s0 - 1) / s0, wp = (d->iw - r1 + s1 - 1) / s1;
            fill_floats(ph, p->top * pitch, 0.0f);
            for (int64_t q = p->top; q < p->top + hp; q++) fill_floats(ph + q * pitch + wp, pitch - wp, 0.0f);
            fill_floats(ph + (p->top + hp) * pitch, (p->rows_buf - p->top - hp) * pitch, 0.0f);
        }
}

/* Input rows [from, to) of channel ic into its phases at ph (padding zeroed): phase (r0, r1) row top + q, column c holds
   x[s0 q + r0][s1 c + r1], a float16 x converted as it is read. Stride 2 across: two loads and two
   shuffles per 2 VL columns give both phases; a row's last vector is stored masked (the columns
   right of it stay zero). */
static NO_LIBCALLS void fill_phases(const Plan *p, int64_t ic, float *ph, int64_t from, int64_t to) {
    const Depthwise *d = p->d;
    int64_t s0 = d->sh, s1 = d->sw, iw = d->iw, pitch = p->pitch;
    int half = d->x_half;
    int64_t x0 = ic * d->ih * iw;  /* x's element of the plane's first */
    if (s0 == 1 && s1 == 1 && pitch == iw) {  /* rows as wide as x's: one run */
        float *dst = ph + (p->top + from) * pitch;
        int64_t c = 0, n = (to - from) * iw, at = x0 + from * iw;
        for (; c + VL <= n; c += VL) vstore(dst + c, vload_any(d->x, half, at + c));
        if (c < n) store_part(dst + c, load_any_part(d->x, half, at + c, (int)(n - c)), (int)(n - c));
        return;
    }
#if !defined(__clang__)
    ivec even, odd;
    for (int i = 0; i < VL; i++) even[i] = 2 * i, odd[i] = 2 * i + 1;
    if (s1 == 2 && iw % 2 == 0) {  /* the rows as one stream: its even floats are the rows' even columns */
        int64_t w2 = iw / 2, n = (to - from) * iw, at = x0 + from * iw, row_k = 0;  /* row_k: the row's first even */
        int64_t r0 = from % s0, q = p->top + from / s0;
        for (int64_t c = 0; c < n; c += 2 * VL) {
            int64_t have = n - c, k0 = c / 2, k1 = k0 + VL < n / 2 ? k0 + VL : n / 2;
            vec lo = have >= VL ? vload_any(d->x, half, at + c) : load_any_part(d->x, half, at + c, (int)have);
            vec hi = have >= 2 * VL ? vload_any(d->x, half, at + c + VL)
                   : have > VL ? load_any_part(d->x, half, at + c + VL, (int)(have - VL)) : (vec){0};
            vec e = __builtin_shuffle(lo, hi, even), o = __builtin_shuffle(lo, hi, odd);
            for (;;) {  /* each row the vector's evens [k0, k1) span: lane l is the row's column k0 + l - row_k */
                int64_t end = row_k + w2;
                float *de = ph + r0 * 2 * p->phase_stride + q * pitch + (k0 - row_k);
                if (row_k <= k0 && end >= k0 + VL) {
                    vstore(de, e), vstore(de + p->phase_stride, o);
                } else {
                    int lo_l = row_k > k0 ? (int)(row_k - k0) : 0, hi_l = (int)((end < k1 ? end : k1) - k0);
                    store_lanes(de, e, lo_l, hi_l), store_lanes(de + p->phase_stride, o, lo_l, hi_l);
                }
                if (end > k1) break;
                row_k = end, r0 = r0 + 1 == s0 ? 0 : r0 + 1, q += r0 == 0;
                if (end == k1) break;
            }
        }
        return;
    }
#endif
    for (int64_t hh = from, r0 = from % s0, q = p->top + from / s0; hh < to;
         hh++, r0 = r0 + 1 == s0 ? 0 : r0 + 1, q += r0 == 0) {
        int64_t at = x0 + hh * iw;  /* the row's first element in x */
        float *row = ph + r0 * s1 * p->phase_stride + q * pitch;
        if (s1 == 1) {
            int64_t c = 0;
            for (; c + VL <= iw; c += VL) vstore(row + c, vload_any(d->x, half, at + c));
            if (c < iw) store_part(row + c, load_any_part(d->x, half, at + c, (int)(iw - c)), (int)(iw - c));
#if !defined(__clang__)
        } else if (s1 == 2) {
            float *odd_row = row + p->phase_stride;
            int64_t n_even = (iw + 1) / 2, n_odd = iw / 2;
            for (int64_t c = 0; c < n_even; c += VL) {  /* input columns 2c .. 2c + 2 VL */
                int64_t have = iw - 2 * c;
                vec lo = have >= VL ? vload_any(d->x, half, at + 2 * c) : load_any_part(d->x, half, at + 2 * c, (int)have);
                vec hi = have >= 2 * VL ? vload_any(d->x, half, at + 2 * c + VL)
                       : have > VL ? load_any_part(d->x, half, at + 2 * c + VL, (int)(have - VL)) : (vec){0};
                vec e = __builtin_shuffle(lo, hi, even), o = __builtin_shuffle(lo, hi, odd);
                if (n_even - c >= VL) vstore(row + c, e);
                else store_part(row + c, e, (int)(n_even - c));
                if (n_odd - c >= VL) vstore(odd_row + c, o);
                else if (n_odd > c) store_part(odd_row + c, o, (int)(n_odd - c));
            }
#endif
        } else {
            for (int64_t c = 0; c < iw; c++)
                row[c % s1 * p->phase_stride + c / s1] =
                    half ? half_to_float(((const uint16_t *)d->x)[at + c]) : d->x[at + c];
        }
    }
}

/* A buffered channel's fill, made as its first output channel's vectors need its rows: reading x
   interleaved with the products (the fill of a whole large plane first stalled on memory alone). */
typedef struct {
    int64_t ic, rows_in, rows_out;  /* x's rows filled; the output rows whose taps are all filled */
    float *ph;
} Filling;

/* Fill on until output row oy's taps are filled (at least DW_FILL_FLOATS of x at a time). */
static NO_LIBCALLS void fill_until(const Plan *p, Filling *f, int64_t oy) {
    const Depthwise *d = p->d;
    int64_t last = d->sh * oy + (d->kh - 1) * d->dh - d->pt + 1;  /* x's rows output row oy reads end here */
    int64_t to = f->rows_in + 1 + DW_FILL_FLOATS / d->iw;
    to = to > last ? to : last;
    to = to < d->ih ? to : d->ih;
    if (to > f->rows_in) fill_phases(p, f->ic, f->ph, f->rows_in, to);
    f->rows_in = to;
    /* the output rows whose last row is filled now */
    f->rows_out = to == d->ih ? d->rows : (to - 1 - (d->kh - 1) * d->dh + d->pt) / d->sh + 1;
    if (f->rows_out <= oy) f->rows_out = oy + 1;
}

/* One output channel from its source plane src, filled on the way through f (NULL: src is whole). */
static inline __attribute__((always_inline)) void dw_channel(const int K, const Plan *p, int64_t oc, const float *src,
                                                             Filling *f) {
    const Depthwise *d = p->d;
    const float *w = d->w + oc * p->taps;
    vec wv[K ? K * K : 1], bias = (vec){0} + (d->bias ? d->bias[oc] : 0.0f);
    int64_t off[K ? K * K : 1];
    int32_t col_lo[K ? K : 1], col_span[K ? K : 1];
    for (int t = 0; t < K * K; t++) wv[t] = (vec){0} + w[t], off[t] = p->off[t];
    for (int dx = 0; dx < K; dx++) col_lo[dx] = p->col_lo[dx], col_span[dx] = p->col_span[dx];
    Sweep sw = {K ? off : p->off, K ? col_lo : p->col_lo, K ? col_span : p->col_span, (int32_t)p->step,
                (int32_t)p->period, d->half & HALF_C, d->act};
    int64_t runs = p->runs, run_len = p->run_len, pitch = p->pitch, len = p->src_len;
    int64_t cols = d->cols, ready = f ? 0 : INT64_MAX;  /* positions of the run whose taps are filled */
    for (int64_t r = 0; r < runs; r++) {
        const float *s = src + r * pitch;
        int64_t base = r * pitch, y0 = (oc * runs + r) * run_len;
        ivec col = p->col0;
        for (int64_t j = 0; j < run_len;) {
            int64_t left = run_len - j;
            if (f && (runs > 1 ? f->rows_out <= r : ready < (left < DW_GROUP * VL ? run_len : j + DW_GROUP * VL))) {
                int64_t end = left < DW_GROUP * VL ? run_len : j + DW_GROUP * VL;  /* the positions the next step reads */
                fill_until(p, f, runs > 1 ? r : (end - 1) / cols);
                ready = runs > 1 ? run_len : f->rows_out * cols;
            }
            void *y = (void *)advance(d->y, sw.half_y, y0 + j);
            if (left >= DW_GROUP * VL && inside(p, base, j, DW_GROUP * VL)) {
                dw_vectors(K, DW_GROUP, d, &sw, s, wv, w, bias, j, col, VL, y);
                for (int v = 0; v < DW_GROUP; v++) col = col_next(col, &sw);
                j += DW_GROUP * VL;
            } else if (!p->in_place) {  /* the run's last vectors, the last one masked */
                int n = (int)(left - (left - 1) / VL * VL);
                switch ((left + VL - 1) / VL) {
                    case 4: dw_vectors(K, 4, d, &sw, s, wv, w, bias, j, col, n, y); break;
                    case 3: dw_vectors(K, 3, d, &sw, s, wv, w, bias, j, col, n, y); break;
                    case 2: dw_vectors(K, 2, d, &sw, s, wv, w, bias, j, col, n, y); break;
                    default: dw_vectors(K, 1, d, &sw, s, wv, w, bias, j, col, n, y); break;
                }
                j = run_len;
            } else {  /* in place, one vector at a time near the plane's edges */
                int n = left < VL ? (int)left : VL;
                if (n == VL && inside(p, base, j, VL)) dw_vectors(K, 1, d, &sw, s, wv, w, bias, j, col, VL, y);
#if defined(__AVX512F__)
                else dw_edge(K, d, &sw, s, base + j, len, wv, w, bias, j, col, n, y);
#endif
                col = col_next(col, &sw);
                j += VL;
            }
        }
    }
    (void)len;
}

#define DW_CHANNEL(name, K) \
    static NO_LIBCALLS void name(const Plan *p, int64_t oc, const float *src, Filling *f) { dw_channel(K, p, oc, src, f); }
DW_CHANNEL(dw_channel_3x3, 3)
DW_CHANNEL(dw_channel_5x5, 5)
DW_CHANNEL(dw_channel_any, 0)

/* Input channels per item: a 7x7 plane is too little work to be claimed alone (one atomic per channel). */
static int64_t depthwise_per_item(const Depthwise *d) {
    return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->kh * d->kw * d->mult + 1);
}

static void depthwise_item(void *ctx, int64_t it, int slot) {
    const Plan *p = ctx;
    const Depthwise *d = p->d;
    (void)slot;
    void (*channel)(const Plan *, int64_t, const float *, Filling *) =
        d->kh == 3 && d->kw == 3 ? dw_channel_3x3 : d->kh == 5 && d->kw == 5 ? dw_channel_5x5 : dw_channel_any;
    float local[p->in_place ? 1 : DW_LOCAL] __attribute__((aligned(64)));
    float *buf = p->in_place || p->buf_floats <= DW_LOCAL ? local : malloc((size_t)p->buf_floats * sizeof(float));
    if (!buf) abort();  /* one channel's phases: no way on without them */
    if (!p->in_place) zero_padding(p, buf);
    int64_t per = depthwise_per_item(d);
    for (int64_t ic = it * per; ic < (it + 1) * per && ic < d->channels; ic++) {
        const float *src = p->in_place ? d->x + ic * d->ih * d->iw : buf + p->slack;
        Filling fill = {ic, 0, 0, buf + p->slack};
        for (int64_t oc = ic * d->mult; oc < (ic + 1) * d->mult; oc++)
            channel(p, oc, src, p->in_place || oc > ic * d->mult ? NULL : &fill);
    }
    if (buf != local) free(buf);
}

/* Per kernel index a along an axis (tap at a d - pb of the stride-s grid): the phase r and the phase's
   row or column offset q of output 0, with a d - pb = q s + r. */
static void axis_taps(int64_t k, int64_t s, int64_t dil, int64_t pb, int64_t *r, int64_t *q) {
    for (int64_t a = 0; a < k; a++) {
        int64_t e = a * dil - pb;
        r[a] = (e % s + s) % s, q[a] = (e - r[a]) / s;
    }
}

void ge_depthwise(const Depthwise *d) {
    int64_t kh = d->kh, kw = d->kw, taps = kh * kw, s0 = d->sh, s1 = d->sw;
    int64_t r0[kh], a0[kh], r1[kw], b1[kw], off[taps];
    int32_t col_lo[kw], col_span[kw];
    axis_taps(kh, s0, d->dh, d->pt, r0, a0);
    axis_taps(kw, s1, d->dw, d->pl, r1, b1);
    Plan p = {.d = d, .taps = taps, .off = off, .col_lo = col_lo, .col_span = col_span};
    p.in_place = VL == 16 && s0 == 1 && s1 == 1 && !d->x_half && d->rows * d->cols >= DW_IN_PLACE_MIN;
    int64_t hp = (d->ih + s0 - 1) / s0, wp = (d->iw + s1 - 1) / s1, a_min = 0, a_max = 0, b_max = 0;
    for (int64_t dy = 0; dy < kh; dy++) a_min = a0[dy] < a_min ? a0[dy] : a_min, a_max = a0[dy] > a_max ? a0[dy] : a_max;
    for (int64_t dx = 0; dx < kw; dx++) b_max = (b1[dx] < 0 ? -b1[dx] : b1[dx]) > b_max ? (b1[dx] < 0 ? -b1[dx] : b1[dx]) : b_max;
    if (p.in_place) {
        p.pitch = d->iw, p.src_len = d->ih * d->iw;
    } else {  /* rows as wide as the output's where the phases' fit (one flat run), else the phases' */
        p.pitch = d->cols > wp ? d->cols : wp;
        p.top = -a_min;
        int64_t bottom = d->rows + a_max - hp > 0 ? d->rows + a_max - hp : 0;
        p.rows_buf = p.top + hp + bottom;
        p.phase_stride = p.rows_buf * p.pitch;
        p.slack = (DW_GROUP + 1) * VL + p.pitch + b_max;
        p.buf_floats = s0 * s1 * p.phase_stride + 2 * p.slack;
        for (int64_t t = 0; t < taps; t++) p.used |= 1ull << (r0[t / kw] * s1 + r1[t % kw]);
    }
    int flat = p.pitch == d->cols;
    p.runs = flat ? 1 : d->rows, p.run_len = flat ? d->rows * d->cols : d->cols;
    p.period = flat ? d->cols : p.run_len + (DW_GROUP + 1) * VL;  /* row runs: columns never wrap */
    p.step = VL % p.period;
    for (int l = 0; l < VL; l++) p.col0[l] = (int32_t)(l % p.period);
    p.min_off = INT64_MAX, p.max_off = INT64_MIN;
    for (int64_t t = 0; t < taps; t++) {
        int64_t dy = t / kw, dx = t % kw;
        off[t] = (p.in_place ? 0 : (r0[dy] * s1 + r1[dx]) * p.phase_stride) + (a0[dy] + p.top) * p.pitch + b1[dx];
        p.min_off = off[t] < p.min_off ? off[t] : p.min_off, p.max_off = off[t] > p.max_off ? off[t] : p.max_off;
    }
    for (int64_t dx = 0; dx < kw; dx++) col_lo[dx] = (int32_t)-b1[dx], col_span[dx] = (int32_t)p.pitch;
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, &p, (d->channels + per - 1) / per, d->threads);
}
