/* Direct convolution: output channels in the vector lanes, output pixels broadcast. For a block of
R output pixels that are consecutive in the source (an output row of a phase layout, or a run of a
pointwise conv's plane) and a panel of output channels:
    acc[i][j] = sum_k x[koff[k] + pos + i] * wp[k][j]
so the input is read in place (one broadcast per pixel and k: no packing pass, no im2col), the
weights are packed once, at load, in panels (wp[p][k][j], see ge_direct_panel), and no lane is
spent on padding pixels or a tail of pixels: a 7x7 output's blocks cover its 49 pixels, where the
GEMM's 32-column panels would compute 64 or 63 columns. Two tiles (AVX-512):
  wide: 4 vectors of channels x up to 6 pixels, 10 loads per 24 FMAs, for deep products (K >=
        conv_native.DIRECT_WIDE_K);
  tall: 2 vectors x up to 14 pixels, a transpose per 14 pixels instead of 6: for a short K (a
        network's first conv), for rows narrower than 8 (a row of 7 is one block), and for 1x1
        kernels, whose input rows lie a plane (a page) apart per step of K, so each page visited
        should feed as many pixels as it can. (conv_native.NativeConv chooses.)
K runs in passes of DIRECT_KC steps whose weights stay in L1 for a run of blocks; then each block is
transposed (channels x pixels) and stored into Y (NCHW) with bias, residual Z and the activation.
Items are (panel, chunk of blocks); no workspace. A float16 Y and Z (half) are converted as each vector is
stored. x stays float32 (a pointwise conv's float16 X is widened whole first): it is read a broadcast
scalar at a time, and items are panel-major, so converting it per block and pass of K into a stack tile
converts every value once per panel of output channels; tried, bit for bit the same, that was 20-33%
slower single-threaded than one whole conversion (960x7x7 -> 160, 160 -> 960, 576x14x14 -> 96,
1280x7x7 -> 320). Converting once for all panels would need blocks outside panels and a K x R tile. */
#include "abi.h"
#include "pool.h"
#include "simd.h"
#include "half.h"

#if VL == 16
#define DV_WIDE 4  /* vectors of output channels per tile */
#define DR_WIDE 6  /* pixels per tile: DV_WIDE x DR_WIDE accumulators, DV_WIDE weights, one broadcast */
#define DR_TALL 14 /* pixels per tile of 2 vectors */
#else
#define DV_WIDE 2
#define DR_WIDE 6
#define DR_TALL 6
#endif
#if VL == 8
/* AVX2: the wide panel is 2 or 3 vectors by the layer's channels (ge_direct_panel), its tile 2 x 6 or
   3 x 4: 12 accumulators of the 16 registers */
#define PANELS_BY_M 1
#endif
#define DV_MAX DV_WIDE
#define DR_MAX DR_TALL
#define DIRECT_ITEMS_PER_THREAD 4
#define DIRECT_KC 96  /* steps of K per pass: a wide panel's weights for them (24 KB) stay in L1 beside the
                          input rows (128, all of a 32 KB L1, measured 1-5% slower on ResNet-50's 3x3 layers) */
#define DIRECT_SUB 16  /* blocks whose partial sums are kept (on the stack) between the passes over K */

/* Output channels per panel of packed weights for M of them: the wide tile's, or the tall's (2 vectors).
   On AVX2 a wide panel is 3 vectors (24 channels) where that pads fewer channels than panels of 2: a
   24-channel layer had run its third vector alone in 1 x 6 tiles, whose 6 chains of 4-cycle FMAs leave the
   two FMA pipes a quarter idle (DBNet's head, 96 -> 24 at 40 x 240, one thread on Zen 3: 5.5 ms, 4.8 in
   3 x 4 tiles; onnxruntime 4.5). A 4 x 3 tile (in asm, as MLAS's FMA3 kernel) ran 32- and 64-channel
   layers no faster than 2 x 6. */
int ge_direct_panel(int wide, int64_t m) {
#if defined(PANELS_BY_M)
    if (wide && (m + 3 * VL - 1) / (3 * VL) * 3 < (m + 2 * VL - 1) / (2 * VL) * 2) return 3 * VL;
#else
    (void)m;
#endif
    return (wide ? DV_WIDE : 2) * VL;
}

/* Pixels per tile of a panel of P channels */
static int panel_pixels(int wide, int64_t P) {
    return P == 3 * VL ? 4 : wide ? DR_WIDE : DR_TALL;
}

typedef struct {
    const ConvDirect *d;
    int64_t seg_len, seg_pitch, seg_blocks, base, rem, blocks, panels, chunks, chunk_blocks, panel;
} DirectWork;

#if defined(PANELS_BY_M) && defined(__FMA__) && defined(__GNUC__)
#define STEPS_ASM 1
/* The 3 x 4 tile's loop over K in asm: the 3 weight vectors in registers, each of the 4 pixels broadcast
   for its 3 FMAs. GCC's own code (the 12 accumulators, 3 weights and a broadcast fill the 16 registers)
   spilled an accumulator through the stack every step, a store-to-load chain through the loop. An asm
   takes 30 operands and an accumulator counts twice: the scratch registers are named (ymm12-15, rax). */
static inline __attribute__((always_inline)) void steps_3x4(vec *a0, vec *a1, vec *a2, const float *x,
                                                            const int64_t *koff, const float *wp, int64_t kc) {
    if (kc <= 0) return;
    const int64_t *end = koff + kc;
    __asm__ volatile(
        "1:\n\t"
        "movq (%[ko]), %%rax\n\t"
        "vmovups (%[w]), %%ymm12\n\t"
        "vmovups 32(%[w]), %%ymm13\n\t"
        "vmovups 64(%[w]), %%ymm14\n\t"
        "vbroadcastss (%[x],%%rax,4), %%ymm15\n\t"
        "vfmadd231ps %%ymm12, %%ymm15, %[p0]\n\t"
        "vfmadd231ps %%ymm13, %%ymm15, %[q0]\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %[r0]\n\t"
        "vbroadcastss 4(%[x],%%rax,4), %%ymm15\n\t"
        "vfmadd231ps %%ymm12, %%ymm15, %[p1]\n\t"
        "vfmadd231ps %%ymm13, %%ymm15, %[q1]\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %[r1]\n\t"
        "vbroadcastss 8(%[x],%%rax,4), %%ymm15\n\t"
        "vfmadd231ps %%ymm12, %%ymm15, %[p2]\n\t"
        "vfmadd231ps %%ymm13, %%ymm15, %[q2]\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %[r2]\n\t"
        "vbroadcastss 12(%[x],%%rax,4), %%ymm15\n\t"
        "vfmadd231ps %%ymm12, %%ymm15, %[p3]\n\t"
        "vfmadd231ps %%ymm13, %%ymm15, %[q3]\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %[r3]\n\t"
        "addq $8, %[ko]\n\t"
        "addq $96, %[w]\n\t"
        "cmpq %[ko], %[end]\n\t"
        "jne 1b"
        : [p0] "+x"(a0[0]), [p1] "+x"(a0[1]), [p2] "+x"(a0[2]), [p3] "+x"(a0[3]), [q0] "+x"(a1[0]), [q1] "+x"(a1[1]),
          [q2] "+x"(a1[2]), [q3] "+x"(a1[3]), [r0] "+x"(a2[0]), [r1] "+x"(a2[1]), [r2] "+x"(a2[2]), [r3] "+x"(a2[3]),
          [ko] "+r"(koff), [w] "+r"(wp)
        : [x] "r"(x), [end] "r"(end)
        : "rax", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
}
#endif

/* R pixels x V vectors of channels over kc steps of K (weights: P floats per step), into or onto
   acc[i * P + v * VL]. One array per vector of channels: GCC keeps each in registers (one 4 x 14
   array it would not). */
static inline __attribute__((always_inline)) void direct_product(const int R, const int V, const int P, int64_t kc,
                                                                 const float *x, const int64_t *koff,
                                                                 const float *wp, float *acc, int first) {
    vec a0[DR_MAX], a1[DR_MAX], a2[DR_MAX], a3[DR_MAX];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        const float *ai = acc + i * P;
        a0[i] = first ? (vec){0} : vload(ai);
        if (V > 1) a1[i] = first ? (vec){0} : vload(ai + VL);
        if (V > 2) a2[i] = first ? (vec){0} : vload(ai + 2 * VL);
        if (V > 3) a3[i] = first ? (vec){0} : vload(ai + 3 * VL);
    }
#if defined(STEPS_ASM)
    if (R == 4 && V == 3 && P == 3 * VL) steps_3x4(a0, a1, a2, x, koff, wp, kc), kc = 0;
#endif
    for (int64_t k = 0; k < kc; k++, wp += P) {
        const float *xk = x + koff[k];
        vec w0 = vload(wp), w1 = V > 1 ? vload(wp + VL) : w0, w2 = V > 2 ? vload(wp + 2 * VL) : w0,
            w3 = V > 3 ? vload(wp + 3 * VL) : w0;
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            float b = xk[i];
            a0[i] += b * w0;
            if (V > 1) a1[i] += b * w1;
            if (V > 2) a2[i] += b * w2;
            if (V > 3) a3[i] += b * w3;
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
        float *ai = acc + i * P;
        vstore(ai, a0[i]);
        if (V > 1) vstore(ai + VL, a1[i]);
        if (V > 2) vstore(ai + 2 * VL, a2[i]);
        if (V > 3) vstore(ai + 3 * VL, a3[i]);
    }
}

/* Lanes [VL/2, VL/2 + n) of v from or to p[0, n): the upper half of a row pair (n <= VL/2). */
static inline vec load_upper(vec v, const float *p, int n) {
#if defined(__AVX512F__)
    return (vec)_mm512_mask_loadu_ps((__m512)v, (__mmask16)(((1u << n) - 1) << 8), p - 8);
#else
    for (int j = 0; j < n; j++) v[VL / 2 + j] = p[j];
    return v;
#endif
}

static inline void store_upper(float *p, vec v, int n) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p - 8, (__mmask16)(((1u << n) - 1) << 8), (__m512)v);
#else
    for (int j = 0; j < n; j++) p[j] = v[VL / 2 + j];
#endif
}

/* One vector of results for up to VL pixels: bias, residual, activation, stored. Two channels
(lanes below VL/2: ch, n pixels; above: ch2 = ch + VL/2, when pair) or one (all lanes). */
static inline void direct_finish(const ConvDirect *d, vec val, int64_t ch, int pair, int64_t at, int n) {
    int upper = pair && ch + VL / 2 < d->M;
    int64_t ch2 = ch + VL / 2;
    if (d->bias) {
        vec b = (vec){0} + d->bias[ch];
        if (upper)
            for (int j = VL / 2; j < VL; j++) b[j] = d->bias[ch2];
        val += b;
    }
    if (d->half) {  /* float16 Y and Z: their lanes through a float32 buffer */
        float t[VL] __attribute__((aligned(64))) = {0};
        if (d->z) {
            halves_to_floats(t, (const uint16_t *)d->z + ch * d->ldy + at, n);
            if (upper) halves_to_floats(t + VL / 2, (const uint16_t *)d->z + ch2 * d->ldy + at, n);
            val += vload(t);
        }
        vstore(t, vactivate(val, d->act));
        floats_to_halves((uint16_t *)d->y + ch * d->ldy + at, t, n);
        if (upper) floats_to_halves((uint16_t *)d->y + ch2 * d->ldy + at, t + VL / 2, n);
        return;
    }
    if (d->z) {
        vec z = load_part(d->z + ch * d->ldy + at, n);
        val += upper ? load_upper(z, d->z + ch2 * d->ldy + at, n) : z;
    }
    val = vactivate(val, d->act);
    store_part(d->y + ch * d->ldy + at, val, n);
    if (upper) store_upper(d->y + ch2 * d->ldy + at, val, n);
}

/* The block's products (acc: R rows of pixels x P channels) into Y, channel by channel: a block of at
most VL/2 pixels (the wide tile's) in half transposes, each row then holding two channels. */
static void direct_store(const ConvDirect *d, const float *acc, int R, int P, int64_t ch0, int64_t out) {
    for (int v = 0; v < P / VL && ch0 + v * VL < d->M; v++) {
        vec t[VL];
        if (R <= VL / 2) {
            for (int r = 0; r < VL / 2; r++) t[r] = r < R ? vload(acc + r * P + v * VL) : (vec){0};
            transpose_blocks(t, VL / 2);
            for (int c = 0; c < VL / 2 && ch0 + v * VL + c < d->M; c++)
                direct_finish(d, t[c], ch0 + v * VL + c, 1, out, R);
            continue;
        }
        for (int g = 0; g < R; g += VL) {
            for (int r = 0; r < VL; r++) t[r] = g + r < R ? vload(acc + (g + r) * P + v * VL) : (vec){0};
            transpose_blocks(t, VL);
            for (int c = 0; c < VL && ch0 + v * VL + c < d->M; c++)
                direct_finish(d, t[c], ch0 + v * VL + c, 0, out + g, R - g < VL ? R - g : VL);
        }
    }
}

/* direct_product with R, V and the panel as constants (each case its own register allocation):
   V 1..4 x R 1..6 for the wide tile, V 1..2 x R 1..14 for the tall one. */
#define DIRECT_R(r, v, p) case r: direct_product(r, v, p, kc, x, koff + k0, wp + k0 * (p), acc, !k0); break;
#define DIRECT_R6(v, p) DIRECT_R(1, v, p) DIRECT_R(2, v, p) DIRECT_R(3, v, p) DIRECT_R(4, v, p) \
                        DIRECT_R(5, v, p) DIRECT_R(6, v, p)
#if DR_TALL > 6
#define DIRECT_R14(v, p) DIRECT_R6(v, p) DIRECT_R(7, v, p) DIRECT_R(8, v, p) DIRECT_R(9, v, p) \
                         DIRECT_R(10, v, p) DIRECT_R(11, v, p) DIRECT_R(12, v, p) DIRECT_R(13, v, p) DIRECT_R(14, v, p)
#else
#define DIRECT_R14(v, p) DIRECT_R6(v, p)
#endif

#define DIRECT_R4(v, p) DIRECT_R(1, v, p) DIRECT_R(2, v, p) DIRECT_R(3, v, p) DIRECT_R(4, v, p)

static void direct_block(int wide, int P, int V, int R, int64_t kc, int64_t k0, const float *x, const int64_t *koff,
                         const float *wp, float *acc) {
#if defined(PANELS_BY_M)
    if (P == 3 * VL) {  /* every panel of 3 vectors: ge_direct_panel takes them only where the last one
                           holds more than 2 vectors' channels */
        switch (R) { DIRECT_R4(3, 3 * VL) }
        return;
    }
#else
    (void)P;
#endif
    if (wide) {
        switch (V) {
            case 1: switch (R) { DIRECT_R6(1, DV_WIDE * VL) } break;
            case 2: switch (R) { DIRECT_R6(2, DV_WIDE * VL) } break;
#if DV_WIDE > 2
            case 3: switch (R) { DIRECT_R6(3, DV_WIDE * VL) } break;
            case 4: switch (R) { DIRECT_R6(4, DV_WIDE * VL) } break;
#endif
        }
        return;
    }
    if (V == 1) {
        switch (R) { DIRECT_R14(1, 2 * VL) }
    } else {
        switch (R) { DIRECT_R14(2, 2 * VL) }
    }
}

static void direct_item(void *ctx, int64_t it, int slot) {
    const DirectWork *w = ctx;
    const ConvDirect *d = w->d;
    (void)slot;
    int64_t P = w->panel, p = it / w->chunks, b0 = it % w->chunks * w->chunk_blocks, K = d->K;
    int64_t b1 = b0 + w->chunk_blocks < w->blocks ? b0 + w->chunk_blocks : w->blocks;
    const float *wp = d->wp + p * K * P;
    int64_t left = d->M - p * P;
    int V = left >= P ? (int)(P / VL) : (int)((left + VL - 1) / VL);
    float sums[DIRECT_SUB * DR_MAX * 2 * VL] __attribute__((aligned(64)));  /* DR_WIDE x DV_WIDE and 4 x 3 fit too */
    int64_t kblocks = (K + DIRECT_KC - 1) / DIRECT_KC, kstep = (K + kblocks - 1) / kblocks;
    for (int64_t s0 = b0; s0 < b1; s0 += DIRECT_SUB) {
        int64_t s1 = s0 + DIRECT_SUB < b1 ? s0 + DIRECT_SUB : b1;
        for (int64_t k0 = 0; k0 < K; k0 += kstep) {
            int64_t kc = K - k0 < kstep ? K - k0 : kstep;
            for (int64_t b = s0; b < s1; b++) {
                int64_t seg = b / w->seg_blocks, j = b % w->seg_blocks;
                int64_t start = j * w->base + (j < w->rem ? j : w->rem);
                int R = (int)(w->base + (j < w->rem));
                float *acc = sums + (b - s0) * DR_MAX * 2 * VL;
                direct_block(d->wide, (int)P, V, R, kc, k0, d->x + seg * w->seg_pitch + start, d->koff, wp, acc);
                if (k0 + kc >= K) direct_store(d, acc, R, (int)P, p * P, seg * w->seg_len + start);
            }
        }
    }
}

static void direct_work(const ConvDirect *d, DirectWork *out) {
    DirectWork w = {.d = d};
    int contiguous = d->pitch == d->width;  /* no padding columns: blocks may run across rows */
    w.seg_len = contiguous ? d->rows * d->width : d->width;
    w.seg_pitch = contiguous ? w.seg_len : d->pitch;
    int64_t segs = contiguous ? 1 : d->rows;
    w.panel = ge_direct_panel(d->wide, d->M);
    int rmax = panel_pixels(d->wide, w.panel);
    w.seg_blocks = (w.seg_len + rmax - 1) / rmax;  /* blocks of a segment: near-equal, at most rmax */
    w.base = w.seg_len / w.seg_blocks, w.rem = w.seg_len % w.seg_blocks;
    w.blocks = segs * w.seg_blocks;
    w.panels = (d->M + w.panel - 1) / w.panel;
    int threads = d->threads < 1 ? 1 : d->threads;
    /* each chunk of blocks reads its panel's weights again (a deep layer's are megabytes, cold in a
       model): split the blocks only while there are too few panels to balance the threads */
    int64_t items = DIRECT_ITEMS_PER_THREAD * threads;
    w.chunks = threads > 1 && w.panels < items ? (items + w.panels - 1) / w.panels : 1;
    if (w.chunks > w.blocks) w.chunks = w.blocks;
    /* so split, a multiple of the threads in items where the blocks allow (3 panels x 3 chunks left 2
       threads 5 and 4 items: 3 x 4) */
    for (int64_t c = w.chunks;; c++) {
        w.chunk_blocks = (w.blocks + c - 1) / c;
        w.chunks = (w.blocks + w.chunk_blocks - 1) / w.chunk_blocks;
        if (w.chunks == 1 || w.panels * w.chunks % threads == 0 || c >= w.blocks) break;
    }
    *out = w;
}

int64_t ge_conv_direct_items(const ConvDirect *d) {
    DirectWork w;
    direct_work(d, &w);
    return w.panels * w.chunks;
}

void ge_conv_direct(const ConvDirect *d) {
    DirectWork w;
    direct_work(d, &w);
    pool_run(direct_item, &w, w.panels * w.chunks, d->threads < 1 ? 1 : d->threads);
}
