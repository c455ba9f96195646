/* ConvTranspose whose kernel equals its stride (no dilation, padding or output padding: DBNet's and
U-Nets' 2x2 stride-2 upsampling), 2-D, one group: every output element is one tap's,
y[n][o][ih kh + a][iw kw + b] = act(bias[o] + sum_c x[n][c][ih][iw] w[c][o][a][b]).

Why: as a GEMM into columns and a scatter of each tap's columns into Y (ops/conv.py's numpy plan) the
columns went through memory twice, the scatter with stride-2 stores; here a tile of output channels x
the kernel's columns x 2 vectors of input pixels accumulates in registers, the input row's channels
broadcast-multiplied by the weights, and stores its output row once, the kernel columns interleaved
(kw == 2: two shuffles per pair of vectors), with the bias and activation applied in the registers.
Each output's sum runs over the channels in order from zero, whatever tile it falls in: the results do
not depend on the tiling or the threads. Items: (image, input row). */
#include "abi.h"
#include "pool.h"
#include "simd.h"

#if VL == 16
#define CT_O 6  /* output channels per tile: 6 x 2 kernel columns x 2 vectors = 24 accumulators of 32 */
#else
#define CT_O 3  /* 16 registers: 12 accumulators, 2 input vectors, a broadcast weight */
#endif
#define CT_P 2  /* vectors of input pixels per tile */
#define CT_P1 4  /* with one output channel (a map's last upsampling): 8 accumulators, as many as two FMA units
                    with a latency of 4 keep busy */

/* The activation in the registers where it is a clamp (Relu, Clip); the others by vactivate */
static inline vec ct_activate(vec v, Activation act) {
    return act.act == ACT_CLAMP ? vclamp(v, act.a, act.b) : vactivate(v, act);
}

/* Pixels [iw0, iw0 + n) of input row (n_img, ih), n <= P VL, output channels [o0, o0 + O), kernel row a
   (kw == 2: the interleaving shuffles). Weights wp[a][c][o][b] (b the kernel column, fastest). */
static inline __attribute__((always_inline)) void ct_tile2(const int O, const int P, const ConvTransposeArgs *t,
                                                           const float *x, const float *wa, float *yrow, int64_t o0,
                                                           int64_t iw0, int n) {
    const int64_t C = t->channels, OC = t->oc, xplane = t->h * t->w, yplane = t->h * t->kh * t->w * 2;
    vec acc[CT_O][2][CT_P1];
#pragma GCC unroll 8
    for (int o = 0; o < O; o++)
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) acc[o][0][p] = acc[o][1][p] = (vec){0};
    for (int64_t c = 0; c < C; c++) {
        const float *xc = x + c * xplane + iw0, *wc = wa + (c * OC + o0) * 2;
        vec xv[CT_P1];
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            int m = n - p * VL;
            xv[p] = m >= VL ? vload(xc + p * VL) : load_part(xc + p * VL, m > 0 ? m : 0);
        }
#pragma GCC unroll 8
        for (int o = 0; o < O; o++)
#pragma GCC unroll 2
            for (int b = 0; b < 2; b++) {
                vec wv = (vec){0} + wc[o * 2 + b];
#pragma GCC unroll 4
                for (int p = 0; p < P; p++) acc[o][b][p] += xv[p] * wv;
            }
    }
#pragma GCC unroll 8
    for (int o = 0; o < O; o++) {
        float *yo = yrow + (o0 + o) * yplane + iw0 * 2;
        const float bias = t->bias ? t->bias[o0 + o] : 0.0f;
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            vec e = ct_activate(acc[o][0][p] + bias, t->act), f = ct_activate(acc[o][1][p] + bias, t->act), lo, hi;
#if defined(__clang__)
            for (int i = 0; i < VL / 2; i++) lo[2 * i] = e[i], lo[2 * i + 1] = f[i], hi[2 * i] = e[VL / 2 + i],
                                             hi[2 * i + 1] = f[VL / 2 + i];
#else
            ivec il, ih;
            for (int i = 0; i < VL; i++) il[i] = i / 2 + (i % 2) * VL, ih[i] = VL / 2 + i / 2 + (i % 2) * VL;
            lo = __builtin_shuffle(e, f, il), hi = __builtin_shuffle(e, f, ih);
#endif
            int m = 2 * (n - p * VL);  /* the outputs of this vector's pixels */
            if (m >= 2 * VL) vstore(yo + 2 * p * VL, lo), vstore(yo + 2 * p * VL + VL, hi);
            else if (m > VL) vstore(yo + 2 * p * VL, lo), store_part(yo + 2 * p * VL + VL, hi, m - VL);
            else if (m > 0) store_part(yo + 2 * p * VL, lo, m);
        }
    }
}

/* Any kernel width: one output channel and one vector of pixels at a time, each kernel column's sums
   stored a column apart */
static void ct_tile_any(const ConvTransposeArgs *t, const float *x, const float *wa, float *yrow, int64_t o,
                        int64_t iw0, int n) {
    const int64_t C = t->channels, OC = t->oc, KW = t->kw, xplane = t->h * t->w, yplane = t->h * t->kh * t->w * KW;
    for (int64_t b = 0; b < KW; b++) {
        vec acc = (vec){0};
        for (int64_t c = 0; c < C; c++)
            acc += load_part(x + c * xplane + iw0, n) * ((vec){0} + wa[(c * OC + o) * KW + b]);
        acc = ct_activate(acc + (t->bias ? t->bias[o] : 0.0f), t->act);
        float *yo = yrow + o * yplane + iw0 * KW + b;
        for (int i = 0; i < n; i++) yo[i * KW] = acc[i];
    }
}

#define CT_CASE(o) case o: ct_tile2(o, CT_P, t, x, wa, yrow, o0, iw, n); break;
#define CT_CASE1 case 1: ct_tile2(1, CT_P1, t, x, wa, yrow, o0, iw, n); break;
#if CT_O == 6
#define CT_CASES CT_CASE1 CT_CASE(2) CT_CASE(3) CT_CASE(4) CT_CASE(5) CT_CASE(6)
#else
#define CT_CASES CT_CASE1 CT_CASE(2) CT_CASE(3)
#endif

static void ct_item(void *ctx, int64_t it, int slot) {
    const ConvTransposeArgs *t = ctx;
    (void)slot;
    const int64_t n_img = it / t->h, ih = it % t->h, W = t->w, KH = t->kh, KW = t->kw, OC = t->oc;
    const float *x = t->x + (n_img * t->channels * t->h + ih) * W;
    for (int64_t a = 0; a < KH; a++) {
        const float *wa = t->wp + a * t->channels * OC * KW;
        float *yrow = t->y + (n_img * OC * t->h * KH + ih * KH + a) * W * KW;
        for (int64_t o0 = 0; o0 < OC; o0 += CT_O) {
            int O = OC - o0 < CT_O ? (int)(OC - o0) : CT_O, P = O == 1 ? CT_P1 : CT_P;
            for (int64_t iw = 0; iw < W; iw += P * VL) {
                int n = W - iw < P * VL ? (int)(W - iw) : P * VL;
                if (KW == 2) {
                    switch (O) { CT_CASES }
                } else {
                    for (int o = 0; o < O; o++)
                        for (int64_t i = iw; i < iw + n; i += VL)
                            ct_tile_any(t, x, wa, yrow, o0 + o, i, iw + n - i < VL ? (int)(iw + n - i) : VL);
                }
            }
        }
    }
}

void ge_conv_transpose(const ConvTransposeArgs *t) {
    if (t->batch <= 0 || t->h <= 0 || t->w <= 0 || t->oc <= 0) return;
    pool_run(ct_item, (void *)t, t->batch * t->h, t->threads < 1 ? 1 : t->threads);
}
