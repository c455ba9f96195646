/* The pixels convolution: the weights broadcast, output pixels in the vector lanes, the input read in
place. For a block of RR output channels and a tile of up to RV vectors of output pixels that are
consecutive in the source (a run of a pointwise conv's plane, or an output row of a phase layout):
    acc[i][p] = sum_k wp[k][i] * x[koff[k] + pos + p]
then bias, residual Z and the activation straight from the registers into Y's rows (NCHW), each a
full vector but the last of a run.

Why: where K is short (a pointwise conv of 16-32 channels over a 112x112 plane, a network's first
conv of 3 channels), the work per pixel is a few dozen FMAs and every pass over the plane shows.
The GEMM packs B (the activations) per panel and stores each tile through a buffer, with 12-row
blocks of which 16 output channels waste a third; the direct kernel (channels in the lanes) ends
each block in a transpose and masked stores. Here nothing is packed per call, K's rows are read
where they lie, and Y is written once, in full vectors; on large planes that also beats the GEMM for a
longer K (conv_native.use_pixels says where). (onnxruntime's MLAS does these with channels in the
lanes of its blocked NCHWc layout, which has no transpose to pay; in NCHW the pixels go in the lanes
instead.)

Work: items are strips of a run of pixels (a strip's K input rows stay in L2: PIXELS_STRIP), each
over every block of channels, so the input is read from memory once and Y is written in long runs of
a strip per channel. A plane of too few strips to balance the threads (14x14: 5 strips of 3 vectors)
is split in parts of its blocks of channels too (part-major: a thread's share is a part), so 2 threads
do not wait on the one that took 3 of 5 strips. The weights: blocks of RR channels, k-major inside (wp[blk][k][i], zeros past M; the
GEMM's A layout, see ge_pixels_block). x float16 with HALF_B (each vector converted as it is loaded:
exact, so the sums are the float32 kernel's on the widened X); y and z float16 with HALF_C (rounded
once, as stored, after the whole epilogue). Same arguments as the direct convolution (abi.h ConvDirect). */
#include "abi.h"
#include "pool.h"
#include "simd.h"
#include "half.h"

#if VL == 16
#define RR 8  /* output channels per block: RR x RV accumulators, RV pixel vectors, a broadcast */
#else
#define RR 4
#endif
#define RV 3
/* bytes of a strip's input rows (K x strip), read again from L2 for each block of channels: strips of
   16 KB (in L1) wrote Y in runs of 128-256 pixels per channel and were 10-25% slower in MobileNetV2
   and V3 (single-threaded, in the model) than these: each channel's run is then 2048 pixels or more */
#define PIXELS_STRIP 131072
#define PIXELS_ITEMS_PER_THREAD 4

int ge_pixels_block(void) { return RR; }

typedef struct {
    const ConvDirect *d;
    int64_t seg_len, seg_pitch, seg_vecs, strips_per_seg, strips, parts;  /* strips: of every segment */
} PixelsWork;

/* The epilogue in the tile's registers for a float32 Y and the activations inlined here (vactivate
   is a call GCC does not inline, as are the float16 conversions', and a call there spills every
   accumulator); else (a float16 Y; HardSigmoid, Gelu, Sigmoid, Swish, LeakyRelu) the sums go to a
   stack buffer and the epilogue runs from there, after the products. */
enum { PX_NONE, PX_CLAMP, PX_HARDSWISH, PX_LATER };

static int px_class(const ConvDirect *d) {
    if (d->half & HALF_C) return PX_LATER;
    Activation f = d->act;
    return f.act == ACT_NONE ? PX_NONE : f.act == ACT_CLAMP ? PX_CLAMP : f.act == ACT_HARDSWISH ? PX_HARDSWISH
                                                                                                 : PX_LATER;
}

typedef struct {
    void *y;
    const void *z;
    int64_t ldy;
    int half;
    Activation act;
} PxOut;

/* n (VL, or fewer at the end of a run) results at element `at` of a float32 or float16 array */
static inline __attribute__((always_inline)) vec px_load(const void *p, int half, int64_t at, int n) {
    if (half) return n == VL ? vload_half((const uint16_t *)p + at) : load_half_part((const uint16_t *)p + at, n);
    return n == VL ? vload((const float *)p + at) : load_part((const float *)p + at, n);
}

static inline __attribute__((always_inline)) void px_store(void *p, int half, int64_t at, vec v, int n) {
    if (half) {
        if (n == VL) vstore_half((uint16_t *)p + at, v);
        else store_half_part((uint16_t *)p + at, v, n);
    } else if (n == VL) {
        vstore((float *)p + at, v);
    } else {
        store_part((float *)p + at, v, n);
    }
}

/* One vector of sums (bias added) at Y offset at, n valid pixels: Z, the activation, stored (a float32
   Y); with PX_LATER into the tile buffer t instead */
static inline __attribute__((always_inline)) void px_finish(const int A, const PxOut *o, vec v, int64_t at, int n,
                                                            float *t) {
    if (A == PX_LATER) { vstore(t, v); return; }
    if (o->z) v += px_load(o->z, 0, at, n);
    if (A == PX_CLAMP) v = vclamp(v, o->act.a, o->act.b);
    if (A == PX_HARDSWISH) v = v * vclamp(v * (1.0f / 6) + 0.5f, 0.0f, 1.0f);  /* vactivate's */
    px_store(o->y, 0, at, v, n);
}

/* A vector of X (float16 when XH) at element `at`, its first `last` lanes when partial */
static inline __attribute__((always_inline)) vec px_x(const int XH, const int partial, const void *x, int64_t at,
                                                      int last) {
    if (XH) return partial ? load_half_part((const uint16_t *)x + at, last) : vload_half((const uint16_t *)x + at);
    return partial ? load_part((const float *)x + at, last) : vload((const float *)x + at);
}

/* RR channels (rows of them stored) x V vectors of pixels (the last one `last` pixels: VL, or fewer
   at the end of a run, loaded masked: the run may end at the end of the buffer), over all of K,
   stored into Y from channel ch0 and offset at. One array per vector of pixels: GCC keeps each in
   registers. */
static inline __attribute__((always_inline)) void pixels_tile(const int V, const int tail, const int A, const int XH,
                                                              const ConvDirect *d, const PxOut *o, const void *x,
                                                              const float *wp, int rows, int64_t ch0, int64_t at,
                                                              int last) {
    vec a0[RR], a1[RR], a2[RR];
#pragma GCC unroll 16
    for (int i = 0; i < RR; i++) a0[i] = a1[i] = a2[i] = (vec){0};
    const int64_t *koff = d->koff;
    for (int64_t k = 0; k < d->K; k++, wp += RR) {
        int64_t xk = koff[k];
        vec b0 = px_x(XH, V == 1 && tail, x, xk, last);
        vec b1 = V < 2 ? b0 : px_x(XH, V == 2 && tail, x, xk + VL, last);
        vec b2 = V < 3 ? b0 : px_x(XH, tail, x, xk + 2 * VL, last);
#pragma GCC unroll 16
        for (int i = 0; i < RR; i++) {
            float w = wp[i];
            a0[i] += w * b0;
            if (V > 1) a1[i] += w * b1;
            if (V > 2) a2[i] += w * b2;
        }
    }
    float t[A == PX_LATER ? RR * RV * VL : 1] __attribute__((aligned(64)));
    int n0 = V == 1 && tail ? last : VL, n1 = V == 2 && tail ? last : VL, n2 = tail ? last : VL;
#pragma GCC unroll 16
    for (int i = 0; i < RR; i++) {
        if (i >= rows) break;
        int64_t row = (ch0 + i) * o->ldy + at;
        float bias = d->bias ? d->bias[ch0 + i] : 0.0f;
        float *ti = t + (A == PX_LATER ? i * RV * VL : 0);
        px_finish(A, o, a0[i] + bias, row, n0, ti);
        if (V > 1) px_finish(A, o, a1[i] + bias, row + VL, n1, ti + VL);
        if (V > 2) px_finish(A, o, a2[i] + bias, row + 2 * VL, n2, ti + 2 * VL);
    }
    if (A == PX_LATER)
        for (int i = 0; i < rows; i++)
            for (int v = 0; v < V; v++) {
                int64_t to = (ch0 + i) * o->ldy + at + v * VL;
                int n = v == V - 1 ? last : VL;
                vec sum = vload(t + i * RV * VL + v * VL);
                if (o->z) sum += px_load(o->z, o->half, to, n);
                px_store(o->y, o->half, to, vactivate(sum, o->act), n);
            }
}

/* pixels_tile with V, tail, the activation's class and X's type as constants (each case its own
   register allocation); a float16 X stores through the tile buffer (PX_LATER), as a float16 Y does */
#define PIXELS_A(v, tl) \
    if (xh) { pixels_tile(v, tl, PX_LATER, 1, d, o, x, wp, rows, ch0, at, last); break; } \
    switch (A) { \
        case PX_NONE: pixels_tile(v, tl, PX_NONE, 0, d, o, x, wp, rows, ch0, at, last); break; \
        case PX_CLAMP: pixels_tile(v, tl, PX_CLAMP, 0, d, o, x, wp, rows, ch0, at, last); break; \
        case PX_HARDSWISH: pixels_tile(v, tl, PX_HARDSWISH, 0, d, o, x, wp, rows, ch0, at, last); break; \
        default: pixels_tile(v, tl, PX_LATER, 0, d, o, x, wp, rows, ch0, at, last); \
    }
#define PIXELS_V(v) case v: if (tail) { PIXELS_A(v, 1) } else { PIXELS_A(v, 0) } break;

static void pixels_block(int V, int tail, int A, int xh, const ConvDirect *d, const PxOut *o, const void *x,
                         const float *wp, int rows, int64_t ch0, int64_t at, int last) {
    switch (V) { PIXELS_V(1) PIXELS_V(2) PIXELS_V(3) }
}

/* Strip `it`: its vectors of one run (segment), near-equal tiles of at most RV vectors, for every
   block of channels. */
static void pixels_item(void *ctx, int64_t it, int slot) {
    const PixelsWork *w = ctx;
    const ConvDirect *d = w->d;
    (void)slot;
    int64_t part = it / w->strips, blocks = (d->M + RR - 1) / RR;
    int64_t ch_lo = part * blocks / w->parts * RR, ch_hi = (part + 1) * blocks / w->parts * RR;
    it %= w->strips;
    int64_t seg = it / w->strips_per_seg, s = it % w->strips_per_seg;
    int64_t v0 = s * w->seg_vecs / w->strips_per_seg, v1 = (s + 1) * w->seg_vecs / w->strips_per_seg;
    int64_t tiles = (v1 - v0 + RV - 1) / RV;
    int xh = (d->half & HALF_B) != 0;
    const char *xs = (const char *)d->x + seg * w->seg_pitch * (xh ? 2 : 4);
    int64_t ys = seg * w->seg_len;
    PxOut o = {d->y, d->z, d->ldy, d->half & HALF_C, d->act};
    int A = px_class(d);
    for (int64_t ch0 = ch_lo; ch0 < ch_hi && ch0 < d->M; ch0 += RR) {
        int rows = d->M - ch0 < RR ? (int)(d->M - ch0) : RR;
        const float *wp = d->wp + ch0 * d->K;
        for (int64_t t = 0, v = v0; t < tiles; t++) {
            int V = (int)((v1 - v0) / tiles + (t < (v1 - v0) % tiles));
            int64_t pos = v * VL, end = (v + V) * VL < w->seg_len ? (v + V) * VL : w->seg_len;
            int last = (int)(end - (pos + (V - 1) * VL)), tail = last < VL;
            pixels_block(V, tail, A, xh, d, &o, xs + pos * (xh ? 2 : 4), wp, rows, ch0, ys + pos, last);
            v += V;
        }
    }
}

static void pixels_work(const ConvDirect *d, PixelsWork *out) {
    PixelsWork w = {.d = d};
    int threads = d->threads < 1 ? 1 : d->threads;
    int contiguous = d->pitch == d->width;  /* no padding columns: one run over every row */
    w.seg_len = contiguous ? d->rows * d->width : d->width;
    w.seg_pitch = contiguous ? w.seg_len : d->pitch;
    int64_t segs = contiguous ? 1 : d->rows;
    w.seg_vecs = (w.seg_len + VL - 1) / VL;
    int64_t strip_vecs = PIXELS_STRIP / (4 * VL * (d->K > 0 ? d->K : 1));
    if (strip_vecs < RV) strip_vecs = RV;
    w.strips_per_seg = (w.seg_vecs + strip_vecs - 1) / strip_vecs;
    /* enough items to balance the threads (a plane is one segment) */
    if (segs * w.strips_per_seg < PIXELS_ITEMS_PER_THREAD * threads) {
        int64_t want = (PIXELS_ITEMS_PER_THREAD * threads + segs - 1) / segs, most = (w.seg_vecs + RV - 1) / RV;
        w.strips_per_seg = want < most ? want : most;
    }
    if (w.strips_per_seg < 1) w.strips_per_seg = 1;
    w.strips = segs * w.strips_per_seg;
    int64_t want = PIXELS_ITEMS_PER_THREAD * threads, blocks = (d->M + RR - 1) / RR;
    w.parts = threads > 1 && w.strips < want ? (want + w.strips - 1) / w.strips : 1;
    if (w.parts > blocks) w.parts = blocks > 0 ? blocks : 1;
    *out = w;
}

int64_t ge_conv_pixels_items(const ConvDirect *d) {
    PixelsWork w;
    pixels_work(d, &w);
    return w.parts * w.strips;
}

void ge_conv_pixels(const ConvDirect *d) {
    PixelsWork w;
    pixels_work(d, &w);
    pool_run(pixels_item, &w, w.parts * w.strips, d->threads < 1 ? 1 : d->threads);
}
