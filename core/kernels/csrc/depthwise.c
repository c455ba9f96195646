/* Depthwise convolution (2-D: any kernel, stride, dilation and padding, a channel multiplier) of one
batch item, NCHW, three ways:
- the masked flat run (most layers): per output channel, y[i] = act(bias + sum_t w[t] src[i + off[t]])
  over its output positions i, in full vectors that cross row boundaries: the output plane is one
  flat run when the source's rows are as wide as the output's ("same" columns), else one run per
  output row. Each tap is a vector load whose lanes outside the source's columns are masked off (a
  column left of 0 or right of the row would read the neighbouring row): no padding column is
  computed or written, and Y is stored as it is computed, no copy. The source is the input plane
  itself (AVX-512, stride 1, float32, DW_IN_PLACE_MIN outputs and more: the loads near its first
  and last rows masked to the plane too), else the channel's stride phases (phase (r0, r1) row q
  holds input row s0 q + r0, column c its column s1 c + r1) in a buffer of the item, with zero rows
  above and below and rows as wide as the output's where the phases fit in them, filled as the
  vectors need their rows: every tap of a strided or dilated kernel is a unit-stride run of one
  phase, and only the columns need masks. Kernel columns outer, rows inner (one column mask per
  vector for all the rows of a kernel column), in the same order in place and from the buffer;
- channels in the vector lanes (use_blocked: 7x7 outputs and smaller, 14x14 strided ones), where the
  flat run would waste most of a 7x7 plane's last vector or pay a strided plane's phase split;
- 3x3 stride 2 on larger planes, rows read in place, pairs of vectors giving even and odd columns
  (use_rows, AVX-512).
The path depends on the geometry only, never on the dtype: float16 (HALF_C: Y rounded as it is
stored; x_half: X converted as it is read) gives the float32 kernel's results rounded once. The taps
of 3x3 and 5x5 kernels are unrolled with their weights in registers. */
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
    const int32_t *col_lo;              /* per kernel column: the output columns [lo, lo + pitch) read inside the row */
    int64_t min_off, max_off, src_len;  /* in place: loads outside the plane's [0, src_len) are masked */
    int64_t rows_buf, phase_stride, top, slack, buf_floats;  /* else the channel's phases, into a buffer */
} Plan;

/* What a channel's vectors read, in the channel's locals (stores into Y, through may_alias vectors,
   would make the compiler reload every field of the plan after each one). */
typedef struct {
    const int64_t *off;
    const int32_t *col_lo;
    int32_t step, period, pitch, half_y;
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
        for (int v = 0; v < V; v++) m[v] = cols_in(cols[v], sw->col_lo[dx], sw->pitch);
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
        lanes m = cols_in(col, sw->col_lo[dx], sw->pitch);
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

/* Zero what fill_phases leaves alone in the phases (the rows above and below the input's, the columns
   right of it) and the slack around them: once per item, the fill then writes only the input's. */
static NO_LIBCALLS void zero_padding(const Plan *p, float *buf) {
    const Depthwise *d = p->d;
    int64_t s0 = d->sh, s1 = d->sw, pitch = p->pitch;
    fill_floats(buf, p->slack, 0.0f);
    fill_floats(buf + p->buf_floats - p->slack, p->slack, 0.0f);
    for (int64_t r0 = 0; r0 < s0; r0++)
        for (int64_t r1 = 0; r1 < s1; r1++) {
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
    int32_t col_lo[K ? K : 1];
    for (int t = 0; t < K * K; t++) wv[t] = (vec){0} + w[t], off[t] = p->off[t];
    for (int dx = 0; dx < K; dx++) col_lo[dx] = p->col_lo[dx];
    Sweep sw = {K ? off : p->off, K ? col_lo : p->col_lo, (int32_t)p->step, (int32_t)p->period, (int32_t)p->pitch,
                d->half & HALF_C, d->act};
    int64_t runs = p->runs, run_len = p->run_len, pitch = p->pitch;
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
                else dw_edge(K, d, &sw, s, base + j, p->src_len, wv, w, bias, j, col, n, y);
#endif
                col = col_next(col, &sw);
                j += VL;
            }
        }
    }
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
static int64_t grid_rows(const Depthwise *d, int64_t rows) { return (rows - 1) * d->sh + (d->kh - 1) * d->dh + 1; }
static int64_t grid_cols(const Depthwise *d) { return (d->cols - 1) * d->sw + (d->kw - 1) * d->dw + 1; }

/* Output rows per band: as many as the grid and the outputs take (0: not even one). */
static int64_t band_rows(const Depthwise *d) {
    int64_t rows = DW_BAND_OUT / (d->cols * VL);
    if (rows > d->rows) rows = d->rows;
    while (rows > 0 && grid_rows(d, rows) * grid_cols(d) * VL > DW_GRID) rows--;
    return rows;
}

/* Channels in the lanes where one band covers a small plane: 7x7 outputs and smaller, 14x14 ones of a
   strided kernel (in MobileNets, 20-35% faster than the masked flat run, which wastes a 7x7 plane's
   last vector and pays a strided plane's phase split; from 28x28 outputs on, the flat run is faster). */
static int use_blocked(const Depthwise *d) {
    int64_t outputs = d->rows * d->cols;
    return d->mult == 1 && d->kh * d->kw <= 64 && band_rows(d) == d->rows &&
           (outputs <= 64 || (outputs <= 196 && (d->sh > 1 || d->sw > 1)));
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
    int64_t gc = grid_cols(d), s0 = d->sh, s1 = d->sw;
    for (int64_t oy = 0; oy < rows; oy++) {
        int64_t ox = 0;
        float *o = out + oy * d->cols * VL;
        for (; ox + DW_PIXELS <= d->cols; ox += DW_PIXELS)
            dw_pixels(T, DW_PIXELS, d->kh * d->kw, grid, off, wv, bias, oy * s0 * gc + ox * s1, s1, d->act, o + ox * VL);
        int64_t at = oy * s0 * gc + ox * s1;
        switch (d->cols - ox) {  /* the rest of the row as one block (a row of 7 is 4 + 3, not 4 + 1 + 1 + 1) */
            case 3: dw_pixels(T, 3, d->kh * d->kw, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
            case 2: dw_pixels(T, 2, d->kh * d->kw, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
            case 1: dw_pixels(T, 1, d->kh * d->kw, grid, off, wv, bias, at, s1, d->act, o + ox * VL); break;
        }
    }
}

/* The channels [c0, c0 + VL) (fewer at the end), band by band, through grid (its padding columns
   zero) and out. */
static NO_LIBCALLS void dw_group(const Depthwise *d, int64_t c0, float *grid, float *out, const int64_t *off) {
    int64_t plane = d->ih * d->iw, gc = grid_cols(d), band = band_rows(d), pixels = d->rows * d->cols;
    int n = d->channels - c0 < VL ? (int)(d->channels - c0) : VL;
    int64_t x0 = c0 * plane;  /* x's element of channel c0 */
    vec wv[64], bias = (vec){0};
    for (int64_t t = 0; t < d->kh * d->kw; t++) {
        wv[t] = (vec){0};
        for (int i = 0; i < n; i++) wv[t][i] = d->w[(c0 + i) * d->kh * d->kw + t];
    }
    if (d->bias)
        for (int i = 0; i < n; i++) bias[i] = d->bias[c0 + i];
    for (int64_t oy0 = 0; oy0 < d->rows; oy0 += band) {
        int64_t rows = d->rows - oy0 < band ? d->rows - oy0 : band, gr = grid_rows(d, rows);
        int64_t iy0 = oy0 * d->sh - d->pt;  /* the input row of grid row 0 */
        /* grid rows outside x: zero (a band's rows above or below the input) */
        for (int64_t gy = 0; gy < gr; gy++)
            if (iy0 + gy < 0 || iy0 + gy >= d->ih) fill_floats(grid + gy * gc * VL, gc * VL, 0.0f);
        /* x's rows inside the band's grid, transposed VL positions at a time */
        int64_t lo = iy0 < 0 ? 0 : iy0, hi = iy0 + gr < d->ih ? iy0 + gr : d->ih;
        int64_t iy = lo, ix = 0;  /* position q of the plane, stepped */
        for (int64_t q = lo * d->iw; q < hi * d->iw; q += VL) {
            int m = hi * d->iw - q < VL ? (int)(hi * d->iw - q) : VL;
            vec r[VL];
            for (int i = 0; i < VL; i++) r[i] = i < n ? load_any_part(d->x, d->x_half, x0 + i * plane + q, m) : (vec){0};
            transpose_blocks(r, VL);
            for (int j = 0; j < m; j++) {
                int64_t gx = ix + d->pl;
                if (gx < gc) vstore(grid + ((iy - iy0) * gc + gx) * VL, r[j]);
                if (++ix == d->iw) ix = 0, iy++;
            }
        }
        if (d->kh * d->kw == 9) dw_band_rows(9, d, rows, grid, off, wv, bias, out);
        else if (d->kh * d->kw == 25) dw_band_rows(25, d, rows, grid, off, wv, bias, out);
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

static int64_t groups_per_item(const Depthwise *d) { return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->kh * d->kw * VL); }

static void depthwise_blocked_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    float grid[DW_GRID] __attribute__((aligned(64))), out[DW_BAND_OUT] __attribute__((aligned(64)));
    int64_t off[64], gc = grid_cols(d);
    for (int64_t t = 0; t < d->kh * d->kw; t++) off[t] = (t / d->kw) * d->dh * gc + (t % d->kw) * d->dw;
    /* the padding columns, once: every band writes the same columns of its rows */
    fill_floats(grid, grid_rows(d, band_rows(d)) * gc * VL, 0.0f);
    int64_t per = groups_per_item(d), groups = (d->channels + VL - 1) / VL;
    for (int64_t g = it * per; g < (it + 1) * per && g < groups; g++) dw_group(d, g * VL, grid, out, off);
}

#if defined(__AVX512F__)
/* 3x3 stride 2 (no dilation; AVX-512), rows read in place: per output row and block of up to
DW_ROW_VECS vectors of columns, each kernel row's input row is loaded as pairs of vectors whose even
and odd columns are the first two taps, the third the even ones one lane on (valignd with the next
pair's first even column); zeros where the columns fall outside the row (masked loads: the padding
is never written anywhere). No phase layout and no copy of the output. */
#define DW_ROW_VECS 4

/* Lanes j of `row` at columns c0 + j inside [0, w), zeros elsewhere. */
static inline vec load_cols_in(const float *row, int64_t c0, int64_t w) {
    if (c0 >= 0 && c0 + VL <= w) return vload(row + c0);
    int64_t lo = c0 < 0 ? -c0 : 0, hi = w - c0 < VL ? w - c0 : VL;
    if (lo >= hi) return (vec){0};
    return (vec)_mm512_maskz_loadu_ps((__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), row + c0);
}

/* V vectors of output row oy from column ox0 (the last one n lanes); y float16 when d->half & HALF_C. */
static inline __attribute__((always_inline)) void dw_row_vectors(const int V, const Depthwise *d, const float *x,
                                                                 const vec *wv, vec bias, int64_t oy, int64_t ox0,
                                                                 int n, void *y) {
    ivec even, odd;
    for (int i = 0; i < VL; i++) even[i] = 2 * i, odd[i] = 2 * i + 1;
    vec a[DW_ROW_VECS];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[v] = bias;
#pragma GCC unroll 3
    for (int64_t ky = 0; ky < 3; ky++) {
        int64_t iy = oy * 2 + ky - d->pt;
        if (iy < 0 || iy >= d->ih) continue;
        const float *row = x + iy * d->iw;
        int64_t c0 = 2 * ox0 - d->pl;  /* the column of tap 0 of the block's first output */
        vec e[DW_ROW_VECS + 1], o[DW_ROW_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            vec lo = load_cols_in(row, c0 + 2 * v * VL, d->iw), hi = load_cols_in(row, c0 + 2 * v * VL + VL, d->iw);
            e[v] = __builtin_shuffle(lo, hi, even), o[v] = __builtin_shuffle(lo, hi, odd);
        }
        e[V] = load_cols_in(row, c0 + 2 * V * VL, d->iw);  /* lane 0: the column after the block's last even */
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            vec third = (vec)_mm512_alignr_epi32((__m512i)e[v + 1], (__m512i)e[v], 1);
            a[v] += wv[ky * 3] * e[v];
            a[v] += wv[ky * 3 + 1] * o[v];
            a[v] += wv[ky * 3 + 2] * third;
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

/* One output channel; a float16 plane is converted first into `plane`, where its rows are read from
   L1/L2 by every tap. */
static NO_LIBCALLS void dw_rows_channel(const Depthwise *d, int64_t oc, float *plane) {
    const float *x = d->x + (oc / d->mult) * d->ih * d->iw;
    if (d->x_half) {
        halves_to_floats(plane, (const uint16_t *)d->x + (oc / d->mult) * d->ih * d->iw, d->ih * d->iw);
        x = plane;
    }
    const float *w = d->w + oc * 9;
    vec wv[9], bias = (vec){0} + (d->bias ? d->bias[oc] : 0.0f);
    for (int t = 0; t < 9; t++) wv[t] = (vec){0} + w[t];
    int half_y = d->half & HALF_C;
    for (int64_t oy = 0; oy < d->rows; oy++)
        for (int64_t ox0 = 0; ox0 < d->cols; ox0 += DW_ROW_VECS * VL) {
            int64_t left = d->cols - ox0;
            int V = left >= DW_ROW_VECS * VL ? DW_ROW_VECS : (int)((left + VL - 1) / VL);
            int n = (int)(left - (V - 1) * VL < VL ? left - (V - 1) * VL : VL);
            void *yo = (void *)advance(d->y, half_y, oc * d->rows * d->cols + oy * d->cols + ox0);
            switch (V) {
                case 4: dw_row_vectors(4, d, x, wv, bias, oy, ox0, n, yo); break;
                case 3: dw_row_vectors(3, d, x, wv, bias, oy, ox0, n, yo); break;
                case 2: dw_row_vectors(2, d, x, wv, bias, oy, ox0, n, yo); break;
                default: dw_row_vectors(1, d, x, wv, bias, oy, ox0, n, yo); break;
            }
        }
}

/* 3x3 stride 2 on planes larger than use_blocked's (MobileNets' 112x112 and 56x56 ones: 10-25% faster
   in place than the masked flat run over the channel's phases, whose split costs as much as a third
   of the products). */
static int use_rows(const Depthwise *d) {
    return d->kh == 3 && d->kw == 3 && d->dh == 1 && d->dw == 1 && d->sh == 2 && d->sw == 2 && !use_blocked(d);
}

static void depthwise_rows_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    int64_t floats = d->x_half ? d->ih * d->iw : 0;
    float local[floats && floats <= DW_LOCAL ? DW_LOCAL : 1] __attribute__((aligned(64)));
    float *plane = floats > DW_LOCAL ? malloc((size_t)floats * sizeof(float)) : local;
    if (!plane) abort();  /* one channel's plane: no way on without it */
    int64_t per = depthwise_per_item(d), channels = d->channels * d->mult;
    for (int64_t oc = it * per; oc < (it + 1) * per && oc < channels; oc++) dw_rows_channel(d, oc, plane);
    if (plane != local) free(plane);
}
#endif

/* Per kernel index a along an axis (tap at a d - pb of the stride-s grid): the phase r and the phase's
   row or column offset q of output 0, with a d - pb = q s + r. */
static void axis_taps(int64_t k, int64_t s, int64_t dil, int64_t pb, int64_t *r, int64_t *q) {
    for (int64_t a = 0; a < k; a++) {
        int64_t e = a * dil - pb;
        r[a] = (e % s + s) % s, q[a] = (e - r[a]) / s;
    }
}

void ge_depthwise(const Depthwise *d) {
#if defined(__AVX512F__)
    if (use_rows(d)) {
        int64_t per = depthwise_per_item(d), channels = d->channels * d->mult;
        pool_run(depthwise_rows_item, (void *)d, (channels + per - 1) / per, d->threads);
        return;
    }
#endif
    if (use_blocked(d)) {
        int64_t per = groups_per_item(d), groups = (d->channels + VL - 1) / VL;
        pool_run(depthwise_blocked_item, (void *)d, (groups + per - 1) / per, d->threads);
        return;
    }
    int64_t kh = d->kh, kw = d->kw, taps = kh * kw, s0 = d->sh, s1 = d->sw;
    int64_t r0[kh], a0[kh], r1[kw], b1[kw], off[taps];
    int32_t col_lo[kw];
    axis_taps(kh, s0, d->dh, d->pt, r0, a0);
    axis_taps(kw, s1, d->dw, d->pl, r1, b1);
    Plan p = {.d = d, .taps = taps, .off = off, .col_lo = col_lo};
    p.in_place = VL == 16 && s0 == 1 && s1 == 1 && !d->x_half && d->rows * d->cols >= DW_IN_PLACE_MIN;
    int64_t hp = (d->ih + s0 - 1) / s0, wp = (d->iw + s1 - 1) / s1, a_min = 0, a_max = 0, b_max = 0;
    for (int64_t dy = 0; dy < kh; dy++) a_min = a0[dy] < a_min ? a0[dy] : a_min, a_max = a0[dy] > a_max ? a0[dy] : a_max;
    for (int64_t dx = 0; dx < kw; dx++) b_max = b1[dx] > b_max ? b1[dx] : -b1[dx] > b_max ? -b1[dx] : b_max;
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
    for (int64_t dx = 0; dx < kw; dx++) col_lo[dx] = (int32_t)-b1[dx];
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, &p, (d->channels + per - 1) / per, d->threads);
}
