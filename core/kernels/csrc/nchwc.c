/* Convolution in the blocked layout NCHW16c (onnxruntime's MLAS "NCHWc"): a tensor [N][C][H][W] is
held as [N][ceil(C/16)][H][W][16], 16 channels innermost (zeros past C). The block is 16 on every level
(ge_nchwc_block()), so that tensors planned in this layout (an OM's) fit any machine: one vector per
block on AVX-512, two on AVX2, four on SSE and NEON (NB); MLAS picks the vector width instead.

Why: in NCHW the activations are the GEMM's vector operand and must be packed or gathered per call
(gemm.c's panels, direct_conv.c's phase fill); here the weights are the vector operand, packed once as
panels of up to NV_MAX blocks of output channels (wp[group][icb][kh][kw][ic][the group's 16-channel
blocks]), and the input is read in place a broadcast scalar at a time: the 16 channels of an input
pixel are contiguous, so a tap of a tile of output pixels is R runs of 16 floats, and the output,
written a vector of channels at a time, is already the next convolution's input layout (no transpose
into planes).

Tile: R output pixels along a row (up to NR_MAX) x V vectors of output channels (up to 4: NV_MAX
blocks), R x V accumulators; per input channel V weight vectors and one broadcast per pixel (AVX-512
6 x 4: 24 FMAs per 4 loads and 6 broadcasts). Every tap of the tile's pixels must lie inside X: rows
outside X are skipped for the whole tile (all its pixels are on one output row), and the pixels whose
kernel columns hang over the left or right edge go in tiles down their column, each with only its
inside kernel columns. Input channels go in passes of `chunk`
blocks whose weights stay in L1 across a run of tiles; the partial sums wait in Y between passes
(the first pass starts from the residual Z, the last adds the bias, applies the activation, stores).
Z may be Y: every element of Z is read before its element of Y is written (in the first pass).

A stem's X of few channels (c->planar) is read as NCHW in place, a channel a plane apart, its output
blocked as any (MLAS's NCHW-input kernel: no reorder of the stem's wide output). Where a layer's padding
channels are a large share (skips_padding: 24 channels in 32), the pointwise path skips the last input
block's and, below AVX-512, the tiles stop at the last vector holding output channels.

A 1x1 convolution without padding (any stride) takes the pointwise path: its output pixels counted
flat over images and rows, cut into segments, tiles running across rows and images (pointwise_item).
Items: (batch item, group of NV_MAX output-channel blocks, run of rows), or (group, segment) on the
pointwise path, groups or runs innermost (ge_nchwc_conv chooses). */
#include <string.h>

#include "abi.h"
#include "caches.h"
#include "nchwc.h"
#include "pool.h"
#include "simd.h"
#if defined(__SSE__)
#include <immintrin.h>
#endif

#if VL == 16
#define NR_MAX 6  /* output pixels per tile: 6 x 4 accumulators + 4 weights + a broadcast of 32 registers */
#else
#define NR_MAX 3  /* 16 registers: 3 x 4 accumulators */
#endif
#define GATHER (-1)  /* nchwc_tile's S of a tile of pixels anywhere */
#define NR_TALL (2 * NR_MAX)  /* pixels per tile of one or two vectors (12 x 2 accumulators) */
#if VL == 8
#define NR_V3 4  /* pixels per tile of three vectors at AVX2 (a 24-channel layer's): 12 accumulators, the 3 x 3
                    tile's 9 left MobileNetV2's 24-channel projections 5-12% slower */
#else
#define NR_V3 NR_MAX
#endif
#define NV_MAX (4 / NB)   /* output-channel blocks per tile: 4 vectors */
#if VL == 8
#define NCHWC_KC 12288    /* AVX2: 48 KB, two input blocks of a 3x3 conv's weights for a group of 32 output channels
                             (36 KB): at 16384 three of them (54 KB) overflowed the 48 KB L1 beside the input
                             rows, 3x3 layers 5% slower */
#else
#define NCHWC_KC 16384    /* floats of weights per pass over input channels (64 KB, the L1 and some of the
                             L2: 1x1 layers of K >= 512 3-6% faster than at 8192, the 3x3 ones the same) */
#endif
#define NCHWC_PW_KC 8     /* input blocks per pass of the pointwise path (128 channels, MLAS's pass): the
                             group's weights of a pass, 32 KB on AVX-512 and 16 KB on AVX2, stay in L1 for
                             all the segment's tiles. NCHWC_KC's 64 KB came from L2 on every tile: 1x1
                             convs of 256+ input channels 5-12% slower on AVX-512, of 384+ 10-15% on AVX2 */
#define NCHWC_OUT 8192    /* floats of outputs per item's run of rows (the partial sums between passes) */
#define NCHWC_SEG 256     /* pixels per segment of the pointwise path: each segment reads all the weights
                             (groups innermost), so the longer the fewer reads; at 96, a 2048-channel conv
                             over 8 images of 7x7 read its 4 MB five times (10-13% slower) */
#define NCHWC_AHEAD 12     /* pixels ahead a tile prefetches X (two tiles of 6) */
#define NCHWC_FROM_MEMORY (4 << 20)  /* bytes of X (all images) beyond which it comes from memory, not a
                                        cache, and the tiles prefetch it: ResNet-50's 1x1 convs of 256 channels
                                        at 56x56 20-25% faster at batch 8; at batch 1, their 3 MB from L3,
                                        prefetching cost 2-4% */
#define PW_SEG_MAX 256    /* the pointwise path's longest segment */
#define NCHWC_ITEMS_PER_THREAD 4

int ge_nchwc_block(void) { return BLK; }
int ge_nchwc_group(void) { return NV_MAX; }

typedef struct {
    const ConvNchwc *c;
    int64_t groups, rows, width, in_h, in_w;  /* the output grid (rows x width), X's (in_h x in_w) */
    int64_t out_plane, in_plane, pixels;  /* pixels per plane; the pointwise path's in all images */
    int64_t rows_per_item, row_items, chunk, ow_lo, ow_hi, oh_lo, oh_hi;  /* outputs whose taps lie inside X */
    int64_t items;  /* of pool_run */
    int prefetch;  /* X comes from memory: each tile fetches the lines of the next ones (NCHWC_AHEAD) */
    int rows_outer;  /* items in the order (item, rows, group), else (item, group, rows); the pointwise
                        path's rows are segments of rows_per_item pixels */
} NchwcWork;

/* vclamp(v, lo, hi) as the vector min and max instructions where they give its results (x86's return
   their second operand when either is NaN: v's NaN stays, and -0 stays -0 as in vclamp); two
   instructions where vclamp's compares and blends took six */
static inline vec clamp_minmax(vec v, vec lo, vec hi) {
#if defined(__AVX512F__)
    return (vec)_mm512_min_ps((__m512)hi, _mm512_max_ps((__m512)lo, (__m512)v));
#elif defined(__AVX__)
    return (vec)_mm256_min_ps((__m256)hi, _mm256_max_ps((__m256)lo, (__m256)v));
#elif defined(__SSE__)
    return (vec)_mm_min_ps((__m128)hi, _mm_max_ps((__m128)lo, (__m128)v));
#else
    return vclamp(v, lo[0], hi[0]);
#endif
}

/* HardSigmoid clamp(v a + b, 0, 1), or HardSwish v clamp(v / 6 + 1/2, 0, 1), as vactivate computes them
   (the same product and sum, contracted alike; the clamp as clamp_minmax) */
static inline vec hard_sigmoid_swish(vec v, int hswish, vec a, vec b) {
    vec s = clamp_minmax(v * a + b, (vec){0}, (vec){0} + 1.0f);
    return hswish ? v * s : s;
}

#define VAT(j) (((j) / NB) * ystep + ((j) % NB) * VL)  /* vector j of a pixel's channels, from its first */
/* The activations other than Clip, HardSigmoid and HardSwish on a stored tile (R pixels ys apart, V
   vectors of channels): after the tile's stores, since vactivate is a call GCC does not inline, and a
   call between the products and the stores spilled every accumulator (a 1x1 conv of 64 input channels lost 10%) */
static __attribute__((noinline)) void activate_stored(const ConvNchwc *c, int R, int V, float *y, int64_t ys,
                                                     const int64_t *yo, int64_t ystep) {
    for (int i = 0; i < R; i++)
        for (int j = 0; j < V; j++) {
            float *p = y + (yo ? yo[i] : i * ys) + VAT(j);
            vstore(p, vactivate(vload(p), c->act));
        }
}

#if VL == 8 && defined(__FMA__) && defined(__GNUC__)
#define STEP_3X4 1
/* a[i] += b_i w and c[i] += b_i w' for the 3 pixels, w and w' the vectors at wi (an asm takes at most 30
   operands: step_3x4's 12 accumulators go in two of these) */
static inline __attribute__((always_inline)) void fma_3x2(vec *a, vec *c, vec b0, vec b1, vec b2, const float *wi) {
    vec t;
    __asm__("vmovups %[w0], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[a0]\n\t"
            "vfmadd231ps %[t], %[b1], %[a1]\n\t"
            "vfmadd231ps %[t], %[b2], %[a2]\n\t"
            "vmovups %[w1], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[c0]\n\t"
            "vfmadd231ps %[t], %[b1], %[c1]\n\t"
            "vfmadd231ps %[t], %[b2], %[c2]"
            : [a0] "+x"(a[0]), [a1] "+x"(a[1]), [a2] "+x"(a[2]), [c0] "+x"(c[0]), [c1] "+x"(c[1]), [c2] "+x"(c[2]),
              [t] "=&x"(t)
            : [b0] "x"(b0), [b1] "x"(b1), [b2] "x"(b2), [w0] "m"(*(const vec_u *)wi), [w1] "m"(*(const vec_u *)(wi + VL)));
}

/* One input channel of a tile of 3 pixels x 4 vectors on AVX2, as MLAS's FMA3 kernel runs it: the three
   broadcasts in registers, then one weight vector at a time in a fourth and its three FMAs: with the 12
   accumulators, the 16 ymm registers. In asm, unrolled over a block's 16 channels with constant offsets:
   GCC's own code for nchwc_tile's loop (rolled: a loop branch per channel, the fourth weight read three
   times; unrolled: the next channel's weights hoisted and accumulators spilled) left ResNet-50's 3x3
   layers 3-8% slower and its 1x1 ones 1-5% (single layers, one thread). */
static inline __attribute__((always_inline)) void step_3x4(vec *a0, vec *a1, vec *a2, vec *a3, const float *x0,
                                                           const float *x1, const float *x2, const float *wi) {
    vec b0, b1, b2;
    __asm__("vbroadcastss %[x0], %[b0]\n\t"
            "vbroadcastss %[x1], %[b1]\n\t"
            "vbroadcastss %[x2], %[b2]"
            : [b0] "=x"(b0), [b1] "=x"(b1), [b2] "=x"(b2)
            : [x0] "m"(*x0), [x1] "m"(*x1), [x2] "m"(*x2));
    fma_3x2(a0, a1, b0, b1, b2, wi);
    fma_3x2(a2, a3, b0, b1, b2, wi + 2 * VL);
}

/* step_3x4 for a tile of 2 pixels (8 accumulators): a row's remainder (a 14-wide row's 13 inside pixels
   of a 3x3 stride-2 conv in tiles of 3, 3, 3, 2, 2) or a column's. GCC's rolled loop for it left ResNet-50's
   3x3 stride-2 layer over 28x28 8% slower than onnxruntime. Each accumulator takes the same FMAs in the
   same order as in step_3x4 and the rolled loop (one per input channel, no split sums), so a pixel's sum
   does not depend on the tile it falls in (the executors split rows differently) */
static inline __attribute__((always_inline)) void step_2x4(vec *a0, vec *a1, vec *a2, vec *a3, const float *x0,
                                                           const float *x1, const float *wi) {
    vec b0, b1, t;
    __asm__("vbroadcastss %[x0], %[b0]\n\t"
            "vbroadcastss %[x1], %[b1]"
            : [b0] "=x"(b0), [b1] "=x"(b1)
            : [x0] "m"(*x0), [x1] "m"(*x1));
    __asm__("vmovups %[w0], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[a0]\n\t"
            "vfmadd231ps %[t], %[b1], %[a1]\n\t"
            "vmovups %[w1], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[c0]\n\t"
            "vfmadd231ps %[t], %[b1], %[c1]\n\t"
            "vmovups %[w2], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[d0]\n\t"
            "vfmadd231ps %[t], %[b1], %[d1]\n\t"
            "vmovups %[w3], %[t]\n\t"
            "vfmadd231ps %[t], %[b0], %[e0]\n\t"
            "vfmadd231ps %[t], %[b1], %[e1]"
            : [a0] "+x"(a0[0]), [a1] "+x"(a0[1]), [c0] "+x"(a1[0]), [c1] "+x"(a1[1]), [d0] "+x"(a2[0]),
              [d1] "+x"(a2[1]), [e0] "+x"(a3[0]), [e1] "+x"(a3[1]), [t] "=&x"(t)
            : [b0] "x"(b0), [b1] "x"(b1), [w0] "m"(*(const vec_u *)wi), [w1] "m"(*(const vec_u *)(wi + VL)),
              [w2] "m"(*(const vec_u *)(wi + 2 * VL)), [w3] "m"(*(const vec_u *)(wi + 3 * VL)));
}
#endif

/* R pixels from (oh, ow0) x V vectors of output channels from block ocb0 (vector j: block j / NB,
   lanes from (j % NB) VL), input blocks [c0, c1), kernel rows [kh0, kh1) and columns [kw0, kw1); S: the
   stride across as a constant (1 or 2), or 0 (c->sw): with it a runtime value GCC kept a pointer per
   pixel and spilled them; or GATHER: a 1x1 tile of pixels anywhere (called from (0, 0, 0)), pixel i's
   input at xo[i] and its output at yo[i] from block ocb0 of image 0 (pointwise_item). ONE: a 1x1
   tile's one tap as a constant (the loops' bounds over kernel rows and columns no longer take
   registers). One array per vector of channels: GCC keeps each in registers. The loop
   over a block's input channels is not unrolled: unrolled 16 times GCC hoisted the next channel's
   weights and spilled accumulators (6 x 4 tile); rolled it runs at 105-115 GFLOPS single-threaded,
   2-10% faster. The group's weights are a panel of V vectors per input channel (wp: see
   ge_nchwc_conv), so one pointer reaches all four. */
static inline __attribute__((always_inline)) void nchwc_tile(const int R, const int V, const int S, const int ONE,
                                                             const int PL, const int PART, const NchwcWork *w,
                                                             int64_t n, int64_t ocb0, int64_t oh, int64_t ow0,
                                                             int64_t c0, int64_t c1, int64_t kh0, int64_t kh1,
                                                             int64_t kw0, int64_t kw1, int first, int last,
                                                             int down, const int64_t *xo, const int64_t *yo) {
    const ConvNchwc *c = w->c;
    const int G = S == GATHER;
    vec a0[NR_TALL], a1[NR_TALL], a2[NR_V3], a3[NR_MAX];
    const int64_t ystep = w->out_plane * BLK;  /* between output-channel blocks */
    const int64_t yat = ((n * c->ocb + ocb0) * w->out_plane + oh * w->width + ow0) * BLK;
    const float *src = first ? c->z : c->y;
    const int64_t ys = S || !down ? BLK : w->width * BLK;  /* between the tile's pixels in Y */
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        if (src) {
            const float *s = src + yat + (G ? yo[i] : i * ys);
            a0[i] = vload(s);
            if (V > 1) a1[i] = vload(s + VAT(1));
            if (V > 2) a2[i] = vload(s + VAT(2));
            if (V > 3) a3[i] = vload(s + VAT(3));
        } else {
            a0[i] = a1[i] = (vec){0};
            if (V > 2) a2[i] = (vec){0};
            if (V > 3) a3[i] = (vec){0};
        }
    }
    /* PL: X is NCHW (c->ic channels, a plane apart; pixels 1 apart), else blocked (BLK channels); the
       weights' panel: cin input channels per block, P output channels (V vectors and the last block's
       ones past the channels that V stops at: see group_vectors) */
    const int64_t XB = PL ? 1 : BLK, cin = PL ? c->ic : BLK, cstep = PL ? w->in_plane : 1;
    const int64_t xs = S > 0 ? S * XB : (down ? c->sh * w->in_w : c->sw) * XB, taps = c->kh * c->kw;
    const int64_t P = (V + NB - 1) / NB * NB * VL;
    /* A pixel whose kernel rows hang over the top or bottom edge is always a tile of its own (nchwc_edges'
       corners; nchwc_row's tiles of a row do not depend on the split of the rows either): its sums go in two
       sets, the even and the odd input channels, added at the end, so that its FMAs no longer wait on each
       other (4 chains of 4-cycle FMAs had kept the ports half idle: a 7x7 plane's 4 corners of 49 pixels).
       The same pixel always takes this order, whatever the threads, so its sum does not depend on them. */
    const int split = R == 1 && !PL && !G && kh1 - kh0 < c->kh;
    vec e0 = {0}, e1 = {0}, e2 = {0}, e3 = {0};
    for (int64_t cb = c0; cb < c1; cb++) {
        /* the block's channels: PART skips the last block's padding (where it is a large share: see skips_padding) */
        const int64_t cn = PL ? cin : PART && c->ic - cb * BLK < BLK ? c->ic - cb * BLK : BLK;
        const float *xc = c->x + (n * c->icb + cb) * w->in_plane * (PL ? cin : BLK);
        const float *wc = c->wp + ocb0 * c->icb * taps * cin * BLK + cb * taps * cin * P;
        for (int64_t kh = kh0; kh < (ONE ? kh0 + 1 : kh1); kh++) {
            const float *xr = xc + ((oh * c->sh - c->ph + kh * c->dh) * w->in_w + ow0 * c->sw - c->pw) * XB;
            const float *wr = wc + kh * c->kw * cin * P;
            for (int64_t kw = kw0; kw < (ONE ? kw0 + 1 : kw1); kw++) {
                const float *xp = xr + kw * c->dw * XB, *wk = wr + kw * cin * P;
                if (!PL && S > 0 && w->prefetch)
#pragma GCC unroll 16
                    for (int i = 0; i < R; i++) __builtin_prefetch(xp + (NCHWC_AHEAD + i) * xs);
                if (R == 1 && split && cn == BLK) {
#pragma GCC unroll 8
                    for (int ci = 0; ci < BLK; ci += 2) {
                        const float *wi = wk + ci * P;
                        float b = xp[ci], d = xp[ci + 1];
                        a0[0] += b * vload(wi), e0 += d * vload(wi + P);
                        if (V > 1) a1[0] += b * vload(wi + VL), e1 += d * vload(wi + P + VL);
                        if (V > 2) a2[0] += b * vload(wi + 2 * VL), e2 += d * vload(wi + P + 2 * VL);
                        if (V > 3) a3[0] += b * vload(wi + 3 * VL), e3 += d * vload(wi + P + 3 * VL);
                    }
                    continue;
                }
#if defined(STEP_3X4)
                if (R == 3 && V == 4 && (PL || cn < BLK)) {  /* few channels (a stem's, a last block's): rolled */
#pragma GCC unroll 1
                    for (int64_t ci = 0; ci < cn; ci++)
                        step_3x4(a0, a1, a2, a3, xp + (G ? xo[0] : 0) + ci * cstep, xp + (G ? xo[1] : xs) + ci * cstep,
                                 xp + (G ? xo[2] : 2 * xs) + ci * cstep, wk + ci * P);
                    continue;
                }
                if (R == 3 && V == 4) {
#pragma GCC unroll 16
                    for (int ci = 0; ci < BLK; ci++)
                        step_3x4(a0, a1, a2, a3, xp + (G ? xo[0] : 0) + ci, xp + (G ? xo[1] : xs) + ci,
                                 xp + (G ? xo[2] : 2 * xs) + ci, wk + ci * P);
                    continue;
                }
                if (R == 2 && V == 4 && !PL && cn == BLK) {
#pragma GCC unroll 16
                    for (int ci = 0; ci < BLK; ci++)
                        step_2x4(a0, a1, a2, a3, xp + (G ? xo[0] : 0) + ci, xp + (G ? xo[1] : xs) + ci, wk + ci * P);
                    continue;
                }
#endif
#pragma GCC unroll 1
                for (int ci = 0; ci < (int)cn; ci++) {
                    const float *wi = wk + ci * P;
                    vec w0 = vload(wi), w1 = V > 1 ? vload(wi + VL) : w0, w2 = V > 2 ? vload(wi + 2 * VL) : w0,
                        w3 = V > 3 ? vload(wi + 3 * VL) : w0;
#pragma GCC unroll 16
                    for (int i = 0; i < R; i++) {
                        float b = xp[G ? xo[i] + ci : i * xs + ci * cstep];
                        a0[i] += b * w0;
                        if (V > 1) a1[i] += b * w1;
                        if (V > 2) a2[i] += b * w2;
                        if (V > 3) a3[i] += b * w3;
                    }
                }
            }
        }
    }
    if (R == 1 && split) {
        a0[0] += e0;
        if (V > 1) a1[0] += e1;
        if (V > 2) a2[0] += e2;
        if (V > 3) a3[0] += e3;
    }
    const float *bias = c->bias + ocb0 * BLK;
    const int clamp = last && c->act.act == ACT_CLAMP, hswish = c->act.act == ACT_HARDSWISH;
    const int hard = last && (hswish || c->act.act == ACT_HARDSIGMOID);  /* in the registers too: a few instructions */
    /* the activation's parameters: Clip's bounds, HardSigmoid's alpha and beta, HardSwish's 1/6 and 1/2 */
    const vec pa = (vec){0} + (hswish ? 1.0f / 6 : c->act.a), pb = (vec){0} + (hswish ? 0.5f : c->act.b);
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        float *y = c->y + yat + (G ? yo[i] : i * ys);
        if (last) {
            a0[i] += vload(bias);
            if (V > 1) a1[i] += vload(bias + VL);
            if (V > 2) a2[i] += vload(bias + 2 * VL);
            if (V > 3) a3[i] += vload(bias + 3 * VL);
        }
        if (clamp) {
            a0[i] = clamp_minmax(a0[i], pa, pb);
            if (V > 1) a1[i] = clamp_minmax(a1[i], pa, pb);
            if (V > 2) a2[i] = clamp_minmax(a2[i], pa, pb);
            if (V > 3) a3[i] = clamp_minmax(a3[i], pa, pb);
        }
        if (hard) {
            a0[i] = hard_sigmoid_swish(a0[i], hswish, pa, pb);
            if (V > 1) a1[i] = hard_sigmoid_swish(a1[i], hswish, pa, pb);
            if (V > 2) a2[i] = hard_sigmoid_swish(a2[i], hswish, pa, pb);
            if (V > 3) a3[i] = hard_sigmoid_swish(a3[i], hswish, pa, pb);
        }
        vstore(y, a0[i]);
        if (V > 1) vstore(y + VAT(1), a1[i]);
        if (V > 2) vstore(y + VAT(2), a2[i]);
        if (V > 3) vstore(y + VAT(3), a3[i]);
    }
    if (last && c->act.act != ACT_NONE && !clamp && !hard)
        activate_stored(c, R, V, c->y + yat, ys, G ? yo : NULL, ystep);
    /* the last block's vectors past the output channels, where V stops: what their zero weights and bias give */
#pragma GCC unroll 4
    for (int j = V; j < (V + NB - 1) / NB * NB; j++)
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            int64_t at = yat + (G ? yo[i] : i * ys) + VAT(j);
            vec v = src ? vload(src + at) : (vec){0};
            vstore(c->y + at, last && c->act.act != ACT_NONE ? vactivate(v, c->act) : v);
        }
}

/* nchwc_tile with R, V, S and ONE as constants (each case its own register allocation) */
#define TILE_R(r, v) \
    case r: nchwc_tile(r, v, S, ONE, PL, PART, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, down, xo, yo); break;
#if NR_V3 == 4
#define TILE_V3 TILE_RS(3) TILE_R(4, 3)
#else
#define TILE_V3 TILE_RS(3)
#endif
#if NR_MAX == 6
#define TILE_RS(v) TILE_R(1, v) TILE_R(2, v) TILE_R(3, v) TILE_R(4, v) TILE_R(5, v) TILE_R(6, v)
#define TILE_TALL(v) TILE_RS(v) TILE_R(7, v) TILE_R(8, v) TILE_R(9, v) TILE_R(10, v) TILE_R(11, v) TILE_R(12, v)
#else
#define TILE_RS(v) TILE_R(1, v) TILE_R(2, v) TILE_R(3, v)
#define TILE_TALL(v) TILE_RS(v) TILE_R(4, v) TILE_R(5, v) TILE_R(6, v)
#endif
#define TILE_VS switch (V) { \
        case 1: switch (R) { TILE_TALL(1) } break; \
        case 2: switch (R) { TILE_TALL(2) } break; \
        case 3: switch (R) { TILE_V3 } break; \
        default: switch (R) { TILE_RS(4) } break; \
    }

#define TILE_VS_SHORT switch (V) { \
        case 1: switch (R) { TILE_RS(1) } break; \
        case 2: switch (R) { TILE_RS(2) } break; \
        case 3: switch (R) { TILE_RS(3) } break; \
        default: switch (R) { TILE_RS(4) } break; \
    }

#define TILE_FN(name, s, one, pl, part, vs) \
    static void name(int R, int V, const NchwcWork *w, int64_t n, int64_t ocb0, int64_t oh, int64_t ow0, int64_t c0, \
                     int64_t c1, int64_t kh0, int64_t kh1, int64_t kw0, int64_t kw1, int first, int last, int down, \
                     const int64_t *xo, const int64_t *yo) { \
        const int S = s, ONE = one, PL = pl, PART = part; \
        vs \
    }
TILE_FN(nchwc_block_s1, 1, 0, 0, 0, TILE_VS)
TILE_FN(nchwc_block_s2, 2, 0, 0, 0, TILE_VS)
TILE_FN(nchwc_block_any, 0, 0, 0, 0, TILE_VS)
/* the pointwise path's: one tap (ONE), no loops over the kernel's rows and columns; PART: the last input
   block's padding channels skipped (a 24-channel expansion's, MobileNets') */
TILE_FN(nchwc_block_pw1, 1, 1, 0, 0, TILE_VS)
TILE_FN(nchwc_block_pw2, 2, 1, 0, 0, TILE_VS)
TILE_FN(nchwc_block_gather, GATHER, 1, 0, 0, TILE_VS_SHORT)  /* at most NR_MAX pixels: one register per pixel's offset */
TILE_FN(nchwc_block_pw1_part, 1, 1, 0, 1, TILE_VS)
TILE_FN(nchwc_block_gather_part, GATHER, 1, 0, 1, TILE_VS_SHORT)
/* an NCHW X (c->planar): a stem's, stride 2 or any */
TILE_FN(nchwc_block_planar_s2, 2, 0, 1, 0, TILE_VS)
TILE_FN(nchwc_block_planar_any, 0, 0, 1, 0, TILE_VS)

/* A tile along a row, or down a column (down: pixels (oh + i, ow0), the runtime strides' variant) */
static void nchwc_block(int R, int V, const NchwcWork *w, int64_t n, int64_t ocb0, int64_t oh, int64_t ow0, int64_t c0,
                        int64_t c1, int64_t kh0, int64_t kh1, int64_t kw0, int64_t kw1, int first, int last, int down) {
    int sw = down || R == 1 ? 0 : (int)w->c->sw;
    if (w->c->planar) {
        if (sw == 2) nchwc_block_planar_s2(R, V, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, 0, NULL, NULL);
        else nchwc_block_planar_any(R, V, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, down, NULL, NULL);
    } else if (sw == 1) nchwc_block_s1(R, V, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, 0, NULL, NULL);
    else if (sw == 2) nchwc_block_s2(R, V, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, 0, NULL, NULL);
    else nchwc_block_any(R, V, w, n, ocb0, oh, ow0, c0, c1, kh0, kh1, kw0, kw1, first, last, down, NULL, NULL);
}

/* A tile's most pixels for V vectors of output channels */
static inline int64_t tile_pixels(int V) { return V <= 2 ? NR_TALL : V == 3 ? NR_V3 : NR_MAX; }

/* The next pass's weights prefetched into L2 a slice per tile (as the pointwise path's): a model's weights
   come from memory or L3 (read once per inference), and each pass's first tile waited for them */
typedef struct {
    const char *at;  /* the next line to fetch; NULL: nothing to fetch */
    int64_t left, per_tile;  /* lines */
} Ahead;

static inline void ahead_step(Ahead *a) {
    if (!a->at) return;
    for (int64_t l = 0; l < a->per_tile && a->left > 0; l++, a->left--, a->at += 64) __builtin_prefetch(a->at, 0, 2);
}

/* One output row's inside pixels (every kernel column inside X) for input blocks [c0, c1), in near-equal
   tiles of at most tile_pixels(V) (NR_TALL for one or two vectors of output channels: at AVX-512 a 24-channel
   layer's two blocks would spend 8 loads on 12 FMAs; NR_V3 for three). */
static void nchwc_row(const NchwcWork *w, int V, int64_t n, int64_t ocb0, int64_t oh, int64_t c0, int64_t c1,
                      int first, int last, Ahead *ahead) {
    const ConvNchwc *c = w->c;
    int64_t kh0, kh1, width = w->width;
    tap_range(oh, c->sh, c->ph, c->dh, c->kh, w->in_h, &kh0, &kh1);
    int64_t lo = w->ow_lo < width ? w->ow_lo : width, hi = w->ow_hi < width ? w->ow_hi : width;
    int64_t inside = hi - lo;
    if (inside <= 0) return;
    int64_t rmax = tile_pixels(V);
    int64_t blocks = (inside + rmax - 1) / rmax, base = inside / blocks, rem = inside % blocks;
    for (int64_t b = 0, ow = lo; b < blocks; b++) {
        int R = (int)(base + (b < rem));
        ahead_step(ahead);
        nchwc_block(R, V, w, n, ocb0, oh, ow, c0, c1, kh0, kh1, 0, c->kw, first, last, 0);
        ow += R;
    }
}

/* The edge columns' pixels of rows [oh0, oh1) (kernel columns over the left or right edge: only their
   inside ones): down each column in tiles over the rows whose kernel rows all lie inside X, one pixel
   at a time on the others. One pixel per tile re-read the whole panel of weights for 4 FMAs a step:
   3x3 convs on 7x7 planes lost 15% on their 2 edge pixels of 7. */
static void nchwc_edges(const NchwcWork *w, int V, int64_t n, int64_t ocb0, int64_t oh0, int64_t oh1, int64_t c0,
                        int64_t c1, int first, int last, Ahead *ahead) {
    const ConvNchwc *c = w->c;
    int64_t rmax = tile_pixels(V), width = w->width;
    int64_t lo = w->ow_lo < width ? w->ow_lo : width, hi = w->ow_hi < width ? w->ow_hi : width;
    if (hi < lo) hi = lo;
    int64_t full0 = w->oh_lo < oh0 ? oh0 : w->oh_lo < oh1 ? w->oh_lo : oh1;
    int64_t full1 = w->oh_hi < full0 ? full0 : w->oh_hi < oh1 ? w->oh_hi : oh1;
    for (int64_t ow = 0; ow < width; ow++) {
        if (ow == lo) ow = hi;
        if (ow >= width) break;
        int64_t kw0, kw1;
        tap_range(ow, c->sw, c->pw, c->dw, c->kw, w->in_w, &kw0, &kw1);
        for (int64_t oh = oh0, R; oh < oh1; oh += R) {
            int64_t kh0, kh1;
            tap_range(oh, c->sh, c->ph, c->dh, c->kh, w->in_h, &kh0, &kh1);
            R = oh >= full0 && oh < full1 ? (full1 - oh < rmax ? full1 - oh : rmax) : 1;
            ahead_step(ahead);
            nchwc_block((int)R, V, w, n, ocb0, oh, ow, c0, c1, kh0, kh1, kw0, kw1, first, last, 1);
        }
    }
}

/* Whether the padding of `channels` in `blocks` blocks is a quarter of them or more (a 24-channel
   layer's 8 of 32, MLAS's AVX2 block of 8 has none): then the kernels skip it. Below that share (184
   channels in 12 blocks) skipping it cost more than it saved: the last block's channels rolled, and the
   last group of outputs in the compiler's 3 x 3 tile instead of step_3x4's (1x1 layers 5-9% slower at v3). */
static inline int skips_padding(int64_t channels, int64_t blocks) { return channels * 4 <= blocks * BLK * 3; }

/* The vectors of output channels of the group from block ocb0: below AVX-512, where skips_padding, only
   those that hold channels (a 24-channel layer's second block is one vector of channels, not two) */
static inline int group_vectors(const ConvNchwc *c, int64_t ocb0) {
    int64_t channels = skips_padding(c->oc, c->ocb) ? c->oc - ocb0 * BLK : (c->ocb - ocb0) * BLK, most = NV_MAX * BLK;
    return (int)(((channels < most ? channels : most) + VL - 1) / VL);
}

static void nchwc_item(void *ctx, int64_t it, int slot) {
    const NchwcWork *w = ctx;
    const ConvNchwc *c = w->c;
    (void)slot;
    int64_t g, r, n = it / (w->row_items * w->groups), at = it % (w->row_items * w->groups);
    if (w->rows_outer) g = at % w->groups, r = at / w->groups;
    else r = at % w->row_items, g = at / w->row_items;
    int64_t ocb0 = g * NV_MAX, oh0 = r * w->rows_per_item;
    int64_t oh1 = oh0 + w->rows_per_item < w->rows ? oh0 + w->rows_per_item : w->rows;
    int V = group_vectors(c, ocb0);
    /* the tiles of a pass, at least (a row's inside tiles, an edge column's full rows in tiles), so that its
       slices of the next pass's weights are all fetched before it ends */
    int64_t width = w->width, lo = w->ow_lo < width ? w->ow_lo : width, hi = w->ow_hi < width ? w->ow_hi : width;
    int64_t rmax = tile_pixels(V), inside = hi > lo ? hi - lo : 0, rows = oh1 - oh0;
    int64_t tiles = rows * ((inside + rmax - 1) / rmax) + (width - inside) * ((rows + rmax - 1) / rmax);
    const int64_t taps = c->kh * c->kw;
    for (int64_t c0 = 0; c0 < c->icb; c0 += w->chunk) {
        int64_t c1 = c0 + w->chunk < c->icb ? c0 + w->chunk : c->icb;
        /* the next pass: this group's, or after its last the first of the next item's group */
        Ahead ahead = {0};
        int64_t next_g = c1 < c->icb ? g : it + 1 < w->items ? (it + 1) % (w->row_items * w->groups) : -1;
        if (next_g >= 0 && c1 >= c->icb) next_g = w->rows_outer ? next_g % w->groups : next_g / w->row_items;
        if (!c->planar && next_g >= 0) {
            int64_t ocb = next_g * NV_MAX, n0 = c1 < c->icb ? c1 : 0;
            int64_t P = (c->ocb - ocb < NV_MAX ? c->ocb - ocb : NV_MAX) * BLK;  /* the group's channels */
            int64_t n1 = n0 + w->chunk < c->icb ? n0 + w->chunk : c->icb;
            ahead.at = (const char *)(c->wp + ocb * c->icb * taps * BLK * BLK + n0 * taps * BLK * P);
            ahead.left = ((n1 - n0) * taps * BLK * P * 4 + 63) / 64;
            ahead.per_tile = tiles > 0 ? (ahead.left + tiles - 1) / tiles : ahead.left;
        }
        for (int64_t oh = oh0; oh < oh1; oh++) nchwc_row(w, V, n, ocb0, oh, c0, c1, c0 == 0, c1 == c->icb, &ahead);
        nchwc_edges(w, V, n, ocb0, oh0, oh1, c0, c1, c0 == 0, c1 == c->icb, &ahead);
    }
}

/* The pointwise path: a 1x1 convolution without padding, at any stride, its output pixels counted flat
   over (image, row, column) and cut into segments of near-equal length, each a list of tiles of
   pixels in a row (at stride 1: in a plane, its rows contiguous) or, where a tile crosses a row or an
   image, gathered (GATHER: each pixel's offsets). Rows of 7 or 14 pixels made tiles of 4 + 3 or 5 + 5
   + 4, half the products per weight load of a tile of 6; and a batch's images share the weights each
   segment reads. Items: (group of output blocks, segment), in the order whose repeated reads are the
   smaller (see ge_nchwc_conv). */
typedef struct {
    int64_t n, oh, ow, k;  /* the tile's first pixel (image, row, column); a gathered one's offsets at k */
    int R, gather;
} PointwiseTile;

static inline void pointwise_step(const ConvNchwc *c, int64_t *n, int64_t *oh, int64_t *ow, int64_t by) {
    for (*ow += by; *ow >= c->ow; *ow -= c->ow)
        if (++*oh == c->oh) *oh = 0, ++*n;
}

/* The weights of the pass after the one of input blocks to c1 in item `it` (after its last, the first of item
   it + 1's group: the next group where groups run innermost, or where a segment is all the pixels), and their
   floats; NULL after the last item */
static const float *pointwise_ahead(const NchwcWork *w, int64_t it, int64_t ocb0, int64_t c1, int64_t *floats) {
    const ConvNchwc *c = w->c;
    int next_item = c1 >= c->icb;
    if (next_item && it + 1 >= w->items) return NULL;
    int64_t ocb = !next_item ? ocb0 : (w->rows_outer ? (it + 1) % w->groups : (it + 1) / w->row_items) * NV_MAX;
    int64_t c0 = next_item ? 0 : c1;
    int64_t P = (c->ocb - ocb < NV_MAX ? c->ocb - ocb : NV_MAX) * BLK;  /* the group's channels */
    int64_t c2 = c0 + w->chunk < c->icb ? c0 + w->chunk : c->icb;
    *floats = (c2 - c0) * BLK * P;
    return c->wp + ocb * c->icb * BLK * BLK + c0 * BLK * P;
}

static void pointwise_item(void *ctx, int64_t it, int slot) {
    const NchwcWork *w = ctx;
    const ConvNchwc *c = w->c;
    (void)slot;
    int64_t g, seg;
    if (w->rows_outer) g = it % w->groups, seg = it / w->groups;
    else seg = it % w->row_items, g = it / w->row_items;
    int64_t q0 = seg * w->rows_per_item, count = w->pixels - q0 < w->rows_per_item ? w->pixels - q0 : w->rows_per_item;
    int64_t ocb0 = g * NV_MAX;
    int V = group_vectors(c, ocb0);
    /* the segment's tiles, near-equal; one that crosses a row (a plane at stride 1) or an image in
       gathered tiles of at most NR_MAX pixels */
    PointwiseTile tiles[PW_SEG_MAX];
    int64_t xo[PW_SEG_MAX], yo[PW_SEG_MAX], k = 0;
    int nt = 0;
    int64_t n = q0 / w->out_plane, oh = q0 % w->out_plane / c->ow, ow = q0 % w->out_plane % c->ow;
    int64_t rmax = tile_pixels(V), blocks = (count + rmax - 1) / rmax;
    int plane = c->sh == 1 && c->sw == 1;  /* the rows of X and Y follow each other alike */
    for (int64_t b = 0; b < blocks; b++) {
        int R = (int)(count / blocks + (b < count % blocks));
        if (plane ? (oh * c->ow + ow + R <= w->out_plane) : (ow + R <= c->ow)) {
            tiles[nt++] = (PointwiseTile){.n = n, .oh = oh, .ow = ow, .R = R};
            pointwise_step(c, &n, &oh, &ow, R);
            continue;
        }
        for (int part = 0, parts = (R + NR_MAX - 1) / NR_MAX; part < parts; part++) {
            int r = R / parts + (part < R % parts);
            tiles[nt++] = (PointwiseTile){.k = k, .R = r, .gather = 1};
            for (int i = 0; i < r; i++, k++) {
                xo[k] = (n * c->icb * w->in_plane + oh * c->sh * c->w + ow * c->sw) * BLK;
                yo[k] = (n * c->ocb * w->out_plane + oh * c->ow + ow) * BLK;
                pointwise_step(c, &n, &oh, &ow, 1);
            }
        }
    }
    const int part = skips_padding(c->ic, c->icb);
    for (int64_t c0 = 0; c0 < c->icb; c0 += w->chunk) {
        int64_t c1 = c0 + w->chunk < c->icb ? c0 + w->chunk : c->icb;
        int first = c0 == 0, last = c1 == c->icb;
        /* the next pass's weights into L2, a slice per tile: from memory (a model's weights are read once per
           inference) the first tile of each pass had waited for them (CRNN's 488-channel 1x1 convs +10%) */
        int64_t ahead_floats = 0;
        const char *ahead = (const char *)pointwise_ahead(w, it, ocb0, c1, &ahead_floats);
        int64_t lines = ahead ? (ahead_floats * 4 + 63) / 64 : 0;
        for (int t = 0; t < nt; t++) {
            const PointwiseTile *p = &tiles[t];
            for (int64_t l = t * lines / nt; l < (t + 1) * lines / nt; l++) __builtin_prefetch(ahead + l * 64, 0, 2);
            if (p->gather && part)
                nchwc_block_gather_part(p->R, V, w, 0, ocb0, 0, 0, c0, c1, 0, 1, 0, 1, first, last, 0, xo + p->k, yo + p->k);
            else if (p->gather)
                nchwc_block_gather(p->R, V, w, 0, ocb0, 0, 0, c0, c1, 0, 1, 0, 1, first, last, 0, xo + p->k, yo + p->k);
            else if (c->sw == 1 && part)
                nchwc_block_pw1_part(p->R, V, w, p->n, ocb0, p->oh, p->ow, c0, c1, 0, 1, 0, 1, first, last, 0, NULL, NULL);
            else if (c->sw == 1)
                nchwc_block_pw1(p->R, V, w, p->n, ocb0, p->oh, p->ow, c0, c1, 0, 1, 0, 1, first, last, 0, NULL, NULL);
            else if (c->sw == 2)
                nchwc_block_pw2(p->R, V, w, p->n, ocb0, p->oh, p->ow, c0, c1, 0, 1, 0, 1, first, last, 0, NULL, NULL);
            else
                nchwc_block(p->R, V, w, p->n, ocb0, p->oh, p->ow, c0, c1, 0, 1, 0, 1, first, last, 0);
        }
    }
}

/* ge_nchwc_pack: a transpose of each panel's weights, (output channel) x (its block's input channels and
   taps) into (tap, input channel) x (output channel) (simd.h's transpose_into; numpy's strided copy of the
   same was ~5 instructions a weight: 11 M of MobileNetV2's load) */
void ge_nchwc_pack(const float *w, int64_t oc, int64_t c, int64_t kk, int64_t cin, int64_t ocp, int64_t group,
                   float *wp) {
    const int64_t icb = (c + cin - 1) / cin, sw = c * kk;  /* sw: one output channel's weights */
    for (int64_t o0 = 0; o0 < ocp; o0 += group) {
        const int64_t width = ocp - o0 < group ? ocp - o0 : group;
        const int64_t real = oc - o0 < width ? oc - o0 : width;  /* the panel's channels with weights */
        if (real < width || c % cin) memset(wp, 0, (size_t)(icb * kk * cin * width) * sizeof(float));
        for (int64_t b = 0; b < icb; b++) {
            const int64_t n = (c - b * cin < cin ? c - b * cin : cin) * kk;  /* (channel, tap)s of this block */
            const float *src = w + o0 * sw + b * cin * kk;
            float *dst = wp + b * kk * cin * width;
            /* (channel ci, tap t) = column ci * kk + t of the panel's rows: at [t][ci] of the block */
            transpose_into(src, sw, real, n, dst, kk, cin * width, width);
        }
        wp += icb * kk * cin * width;
    }
}

void ge_nchwc_conv(const ConvNchwc *c) {
    if (c->batch <= 0 || c->oh <= 0 || c->ow <= 0 || c->ocb <= 0) return;  /* nothing to write (the splits divide by these) */
    NchwcWork w = {.c = c, .out_plane = c->oh * c->ow, .in_plane = c->h * c->w};
    w.rows = c->oh, w.width = c->ow, w.in_h = c->h, w.in_w = c->w;
    w.groups = (c->ocb + NV_MAX - 1) / NV_MAX;
    int64_t per_block = c->kh * c->kw * BLK * BLK * NV_MAX;
    int64_t kc = cache_scaled(NCHWC_KC, cache_l1d(), TUNED_L1D);  /* (a smaller L1: fewer blocks a pass) */
    w.chunk = kc / per_block > 1 ? kc / per_block : 1;
    int threads = c->threads < 1 ? 1 : c->threads;
    int64_t want = NCHWC_ITEMS_PER_THREAD * threads;
    /* Each group of output blocks reads all of X, each run of rows (segment) all the weights: the order
       whose repeated reads are the smaller keeps the other operand's run in the caches (a 1x1 stride-2
       conv over 56x56 x 256 read its 3 MB input once per group, from L3) */
    int64_t x_bytes = c->icb * w.in_plane * (c->planar ? c->ic : BLK) * 4, w_bytes = c->ocb * c->icb * c->kh * c->kw * BLK * BLK * 4;
    w.prefetch = x_bytes * c->batch > NCHWC_FROM_MEMORY;
    if (!c->planar && c->kh == 1 && c->kw == 1 && !c->ph && !c->pw && (c->oh - 1) * c->sh < c->h && (c->ow - 1) * c->sw < c->w) {
        w.chunk = NCHWC_PW_KC;
        w.pixels = c->batch * w.out_plane;
        int64_t seg = NCHWC_SEG < PW_SEG_MAX ? NCHWC_SEG : PW_SEG_MAX, segs = (w.pixels + seg - 1) / seg;
        if (threads > 1 && w.groups * segs < want) segs = (want + w.groups - 1) / w.groups;
        if (segs > w.pixels) segs = w.pixels;
        w.rows_per_item = (w.pixels + segs - 1) / segs;  /* pixels per segment */
        w.row_items = (w.pixels + w.rows_per_item - 1) / w.rows_per_item;
        w.rows_outer = w_bytes * w.row_items < x_bytes * c->batch * w.groups;
        w.items = w.groups * w.row_items;
        pool_run(pointwise_item, &w, w.items, threads);
        return;
    }
    /* the output columns (rows) whose every kernel column (row) lies inside X */
    w.ow_lo = (c->pw + c->sw - 1) / c->sw;
    int64_t reach = w.in_w - 1 + c->pw - (c->kw - 1) * c->dw;
    w.ow_hi = reach < 0 ? 0 : reach / c->sw + 1;
    if (w.ow_hi > w.width) w.ow_hi = w.width;
    w.oh_lo = (c->ph + c->sh - 1) / c->sh;
    reach = w.in_h - 1 + c->ph - (c->kh - 1) * c->dh;
    w.oh_hi = reach < 0 ? 0 : reach / c->sh + 1;
    int64_t row_floats = w.width * NV_MAX * BLK;
    w.rows_per_item = NCHWC_OUT / row_floats > 1 ? NCHWC_OUT / row_floats : 1;
    if (w.rows_per_item > w.rows) w.rows_per_item = w.rows;
    int64_t outer = c->batch * w.groups;
    if (threads > 1 && outer * ((w.rows + w.rows_per_item - 1) / w.rows_per_item) < want) {
        int64_t split = (want + outer - 1) / outer;  /* runs of rows per (item, group) */
        int64_t per = (w.rows + split - 1) / split;
        if (per < w.rows_per_item) w.rows_per_item = per > 1 ? per : 1;
    }
    w.row_items = (w.rows + w.rows_per_item - 1) / w.rows_per_item;
    w.rows_outer = w_bytes * w.row_items < x_bytes * w.groups;
    w.items = outer * w.row_items;
    pool_run(nchwc_item, &w, w.items, threads);
}

/* NCHW <-> NCHW16c: VL x VL blocks (VL channels x VL pixels) transposed in registers, NB of them per
   block of channels; channels past C are zeros in the blocked tensor and dropped going back. Items:
   (batch item, channel block). Whole runs of pixels load and store as vectors: below AVX-512, load_part
   and store_part are loops GCC turned into a memcpy call each (ResNet-50's ReorderInput at v3: 8 calls
   per 8x8 block). */
static NO_LIBCALLS void reorder_item(void *ctx, int64_t it, int slot) {
    const NchwcReorder *r = ctx;
    (void)slot;
    int64_t cbs = (r->channels + BLK - 1) / BLK, cb = it % cbs, n = it / cbs, plane = r->plane;
    const float *planes = (r->to_blocked ? r->x : r->y) + (n * r->channels + cb * BLK) * plane;
    const float *blocked = (r->to_blocked ? r->y : r->x) + (n * cbs + cb) * plane * BLK;
    for (int sub = 0; sub < NB; sub++) {
        int64_t c0 = cb * BLK + sub * VL;
        int nc = r->channels - c0 < VL ? (int)(r->channels - c0) : VL;
        const float *pl = planes + sub * VL * plane, *bl = blocked + sub * VL;
        for (int64_t p = 0; p < plane; p += VL) {
            int np = plane - p < VL ? (int)(plane - p) : VL;
            vec t[VL];
            if (r->to_blocked) {
                for (int j = 0; j < VL; j++)
                    t[j] = j >= nc ? (vec){0} : np == VL ? vload(pl + j * plane + p) : load_part(pl + j * plane + p, np);
                transpose_blocks(t, VL);
                for (int j = 0; j < np; j++) vstore((float *)bl + (p + j) * BLK, t[j]);
            } else {
                if (nc <= 0) break;
                for (int j = 0; j < VL; j++) t[j] = j < np ? vload(bl + (p + j) * BLK) : (vec){0};
                transpose_blocks(t, VL);
                for (int j = 0; j < nc; j++) {
                    if (np == VL) vstore((float *)pl + j * plane + p, t[j]);
                    else store_part((float *)pl + j * plane + p, t[j], np);
                }
            }
        }
    }
}

void ge_nchwc_reorder(const NchwcReorder *r) {
    int64_t items = r->batch * ((r->channels + BLK - 1) / BLK);
    pool_run(reorder_item, (void *)r, items, r->threads < 1 ? 1 : r->threads);
}
