/* ge's int8 kernels: the u8 x s8 product with int32 accumulation (MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv, QGemm, MatMulIntegerToFloat) and the int8 depthwise convolution, with
the zero points, the bias and the requantization (or the scale to float32) applied as they store.

Why: as float64 BLAS GEMMs on centred operands (the numpy plans, exact) an int8 model runs slower
than its float32 build; here 4 products of bytes are one lane of one instruction.

The product C[i, j] = sum_k U * S over two operands, one u8 (activations, zero point zu), one s8
(weights, zero points zs per weight index w: per row of C when the rows are the weights, per
column otherwise). The zero points come out of the sums afterwards:
  acc = sum U S - zu sum_k S[w] - zs[w] sum_k U + K zu zs[w]
(sum_k S per weight index is packed with the weights; sum_k U is counted only when some zs != 0).
Operands: rows (broadcast, 4 bytes of K at a time) a[i * lda + k], and panels of NR columns, k in
groups of 4 inside (panel[q][j][4]): either weights prepacked by ge_qgemm_pack (s8; the rows are
then u8 activations: a product A @ W), or a u8 activation gathered per panel through offset tables,
B[k, n] = b[koff[k] + noff[n]] (the rows are then s8 weights padded with zeros to a multiple of 4:
a convolution W @ columns, NCHW output). int8 activations have their sign bit flipped (x + 128, the
zero point with it); uint8 weights are packed as w - 128 (their zero point too).

Instruction sets, chosen at compile time (the build decides which level it targets):
- AVX-512 VNNI: vpdpbusd, 16 lanes of 4 u8 x s8 products added into int32, no intermediate rounding;
- AVX2 (without VNNI: v3, and v4's AVX-512 without it) and SSSE3 + SSE4.1 (v2: the same on 128-bit
  vectors, the 16 columns in two halves), two paths, chosen per product by the caller
  from the weights (int8_native.product_plan; QGemm.path):
  QPATH_BYTES: vpmaddubsw adds the u8 x s8 products of each pair of k into saturating int16, then
  vpmaddwd by ones adds a quad's two pairs into int32 (32 products an instruction). 255 * 127 * 2
  overflows int16 (onnxruntime's AVX2 kernel accepts that saturation): the path is taken only for
  weights none of whose pairs can leave int16 (positive parts adding up to at most 128, negative
  ones to at least -128), or for weights split so (main + rest, each pair of both in int16), the
  rest's pass over only the quads of K where it is not zero (fix_start/fix_q/fix_b);
  QPATH_PAIRS: both operands as int16 pairs of k (the weights widened when packed, the activation's
  rows widened before the product or its gathered panels after the gather), vpmaddwd: exact for any
  bytes, 16 products an instruction, with no widening in the loop;
- otherwise portable C.
Every path gives the same int32 accumulator, so the results are identical. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "pool.h"
#include "simd.h"
#if defined(__SSSE3__)
#include <immintrin.h>
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define QMR 8
#define QNR 32
#elif defined(__AVX2__)  /* (6 rows: 12 accumulators, the panel's 2, a row's, ones, a product: 17 ymm, spilled) */
#define QMR 4
#define QNR 16
#else
#define QMR 4
#define QNR 16
#endif
#define ITEMS_PER_THREAD 4

int ge_qgemm_nr(void) { return QNR; }

static inline int64_t quads(int64_t k) { return (k + 3) / 4; }

int64_t ge_qgemm_packed_bytes(int64_t K, int64_t N) { return ((N + QNR - 1) / QNR) * quads(K) * QNR * 4; }

/* 4 bytes stored as one word: a panel's group of k (a quad of bytes, a pair of int16) */
typedef uint32_t __attribute__((may_alias, aligned(1))) word32;

/* A whole panel's quad of k: the 4 rows' QNR weights (flipped by fl) interleaved into d[j][4], their
   sums added to s[j]; a constant count on unaliased pointers, so that it vectorizes (a column's 4 bytes
   shifted into a word were 4 instructions a weight, most of BERT-small int8's packing) */
static inline __attribute__((always_inline)) void pack_quads(const int8_t *restrict a, const int8_t *restrict b,
                                                             const int8_t *restrict c, const int8_t *restrict e,
                                                             int8_t fl, int8_t *restrict d, int32_t *restrict s) {
    for (int j = 0; j < QNR; j++) {
        d[4 * j] = a[j] ^ fl;
        d[4 * j + 1] = b[j] ^ fl;
        d[4 * j + 2] = c[j] ^ fl;
        d[4 * j + 3] = e[j] ^ fl;
    }
    for (int j = 0; j < QNR; j++) s[j] += (int8_t)(a[j] ^ fl) + (int8_t)(b[j] ^ fl) + (int8_t)(c[j] ^ fl) + (int8_t)(e[j] ^ fl);
}

/* W (K, N) int8 or uint8 (flip: w - 128) at w[k * ldw + n] into panels of groups of g values of k
   (panel[k / g][j][g]: quads as bytes, g 4, or pairs as int16, g 2; zeros past K); sums[n] = sum_k
   of the packed values. A panel holds 4 quads(K) QNR values either way. A group of g rows of W at a
   time, each column's g values stored as one word (vectorized; a column at a time, read a row's
   stride apart with a division per weight, was 15-20 instructions a weight: most of BERT-small
   int8's load). Only what no group writes is zeroed (a short panel's columns, each panel's k past
   K's whole groups): a memset of all the panels was a fifth of the packing's instructions. */
static void pack_groups(const int8_t *w, int64_t ldw, int64_t K, int64_t N, int flip, int g, void *bp,
                        int32_t *sums) {
    int64_t panel = quads(K) * QNR * 4, panels = (N + QNR - 1) / QNR, esize = g == 2 ? 2 : 1;
    int64_t whole = K / g * QNR * g;  /* a panel's values in K's whole groups */
    int8_t fl = (int8_t)(flip ? 0x80 : 0);  /* (uint8_t)w - 128 is w with its sign bit flipped */
    for (int64_t p = 0; p < panels && whole < panel; p++)
        memset((int8_t *)bp + (p * panel + whole) * esize, 0, (panel - whole) * esize);
    if (N % QNR)  /* the short last panel's missing columns, in each group of k */
        for (int64_t at = (panels - 1) * panel; at < panels * panel; at += QNR * g)
            memset((int8_t *)bp + (at + N % QNR * g) * esize, 0, (QNR - N % QNR) * g * esize);
    memset(sums, 0, N * sizeof(int32_t));
    for (int64_t k0 = 0; k0 < K; k0 += g) {
        const int8_t *r[4];
        for (int t = 0; t < g; t++) r[t] = w + (k0 + t < K ? k0 + t : k0) * ldw;  /* (past K: read, not stored) */
        int64_t rows = K - k0 < g ? K - k0 : g;
        for (int64_t n0 = 0, p = 0; n0 < N; n0 += QNR, p++) {
            int64_t nc = N - n0 < QNR ? N - n0 : QNR;
            int8_t *d = (int8_t *)bp + (p * panel + (k0 / g) * QNR * g) * esize;
            if (rows == 4 && nc == QNR) {
                pack_quads(r[0] + n0, r[1] + n0, r[2] + n0, r[3] + n0, fl, d, sums + n0);
            } else if (rows == 4) {
                for (int64_t j = 0; j < nc; j++) {
                    int8_t a = r[0][n0 + j] ^ fl, b = r[1][n0 + j] ^ fl, c = r[2][n0 + j] ^ fl, e = r[3][n0 + j] ^ fl;
                    *(word32 *)(d + 4 * j) = (uint32_t)(uint8_t)a | (uint32_t)(uint8_t)b << 8 |
                                             (uint32_t)(uint8_t)c << 16 | (uint32_t)(uint8_t)e << 24;
                    sums[n0 + j] += a + b + c + e;
                }
            } else if (rows == 2 && g == 2) {
                for (int64_t j = 0; j < nc; j++) {
                    int8_t a = r[0][n0 + j] ^ fl, b = r[1][n0 + j] ^ fl;
                    *(word32 *)(d + 4 * j) = (uint32_t)(uint16_t)(int16_t)a | (uint32_t)(uint16_t)(int16_t)b << 16;
                    sums[n0 + j] += a + b;
                }
            } else {  /* the last group, short of K */
                for (int64_t t = 0; t < rows; t++)
                    for (int64_t j = 0; j < nc; j++) {
                        int8_t v = r[t][n0 + j] ^ fl;
                        if (g == 2) ((int16_t *)d)[j * 2 + t] = v;
                        else d[j * 4 + t] = v;
                        sums[n0 + j] += v;
                    }
            }
        }
    }
}

void ge_qgemm_pack(const int8_t *w, int64_t ldw, int64_t K, int64_t N, int flip, int8_t *bp, int32_t *sums) {
    pack_groups(w, ldw, K, N, flip, 4, bp, sums);
}

/* Whether the pair a + b (flipped by fl) lies past [-128, 128]: ge_qgemm_split would give it a rest */
static inline int pair_past(int8_t a, int8_t b, int8_t fl) {
    int pair = (int8_t)(a ^ fl) + (int8_t)(b ^ fl);
    return (pair > 128) | (pair < -128);
}

/* Whether some pair a8[t * stride], b8[t * stride] (t < n, flipped by fl) sums past [-128, 128];
   inlined with a constant stride, it vectorizes */
static inline __attribute__((always_inline)) int pairs_overflow(const int8_t *a8, const int8_t *b8, int64_t stride,
                                                                 int64_t n, int8_t fl) {
    int bad = 0;
    for (int64_t t = 0; t < n; t++) bad |= pair_past(a8[t * stride], b8[t * stride], fl);
    return bad;
}

/* Whether every pair of k (0-1, 2-3, ...) of weights (index i < N, k < K) at w[i * si + k * sk], int8
   or uint8 (flip: w - 128), sums within [-128, 128]: vpmaddubsw is exact on them as they are
   (int8_native.pairs_fit_int16, whose numpy casts were 6 instructions a weight) */
int ge_qgemm_pairs_fit(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip) {
    int8_t fl = (int8_t)(flip ? 0x80 : 0);
    int bad = 0;
    if (sk == 1 && si != 1)  /* rows, k contiguous */
        for (int64_t i = 0; i < N && !bad; i++) bad = pairs_overflow(w + i * si, w + i * si + 1, 2, K / 2, fl);
    else  /* a pair of k at a time over every weight index */
        for (int64_t k = 0; k + 1 < K && !bad; k += 2)
            bad = si == 1 ? pairs_overflow(w + k * sk, w + (k + 1) * sk, 1, N, fl)
                          : pairs_overflow(w + k * sk, w + (k + 1) * sk, si, N, fl);
    return !bad;
}

/* How many quads ge_qgemm_split would give a rest (its return) for the same weights, with no writes:
   int8_native.product_plan's share of quads with a rest, by which it takes int16 pairs without splitting
   (a quantized MobileNetV2's classifier, 1.3 M weights with a rest in every quad, was split for nothing);
   0: every pair fits int16. -1: no memory. */
int64_t ge_qgemm_rest_quads(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip, int64_t width) {
    int64_t q4 = quads(K), groups = (N + width - 1) / width, count = 0;
    int8_t fl = (int8_t)(flip ? 0x80 : 0);
    uint8_t *used = malloc(3 * q4 + 1), *past = used + q4;  /* a group's quads with a rest; a row's pairs past */
    if (!used) return -1;
    memset(past, 0, 2 * q4 + 1);  /* (past K / 2 pairs: 0) */
    for (int64_t g = 0; g < groups; g++) {
        int64_t i0 = g * width, n = N - i0 < width ? N - i0 : width;
        memset(used, 0, q4);
        if (sk == 1 && si != 1)  /* rows, k contiguous: a row's pairs, then its quads (each loop vectorizes) */
            for (int64_t i = i0; i < i0 + n; i++) {
                const int8_t *row = w + i * si;
                for (int64_t j = 0; j < K / 2; j++) past[j] = (uint8_t)pair_past(row[2 * j], row[2 * j + 1], fl);
                for (int64_t q = 0; q < q4; q++) used[q] |= past[2 * q] | past[2 * q + 1];
            }
        else  /* a pair of k at a time over the group's weight indices */
            for (int64_t k = 0; k + 1 < K; k += 2)
                used[k / 4] |= si == 1 ? pairs_overflow(w + i0 + k * sk, w + i0 + (k + 1) * sk, 1, n, fl)
                                       : pairs_overflow(w + i0 * si + k * sk, w + i0 * si + (k + 1) * sk, si, n, fl);
        for (int64_t q = 0; q < q4; q++) count += used[q];
    }
    free(used);
    return count;
}

/* One pair of k of ge_qgemm_split's weights, a (row k) and b (row k + 1) at stride si, every weight
   index: main's rows ma, mb (stride mi), the rest ex[i] (0 where the pair fits), sums[i] += a + b.
   Inlined with constant strides of 1 (the product's panels: weight indices contiguous), it vectorizes. */
static inline __attribute__((always_inline)) void split_pair(const int8_t *a8, const int8_t *b8, int64_t si, int8_t *ma,
                                                             int8_t *mb, int64_t mi, int8_t flip, int64_t N, int8_t *ex,
                                                             int32_t *sums) {
    for (int64_t i = 0; i < N; i++) {
        int a = (int8_t)(a8[i * si] ^ flip), b = (int8_t)(b8[i * si] ^ flip);
        int pair = a + b, kept = pair > 128 ? 128 : pair < -128 ? -128 : pair;
        ma[i * mi] = (int8_t)a;
        mb[i * mi] = (int8_t)(kept - a);
        ex[i] = (int8_t)(pair - kept);
        sums[i] += pair;
    }
}

/* One row of ge_qgemm_split's weights, k contiguous: main's row m (stride mk), the pairs' rests ex[k / 2];
   returns the row's sum. Inlined with a constant mk of 1 (a convolution's rows), it vectorizes. */
static inline __attribute__((always_inline)) int32_t split_row(const int8_t *row, int64_t K, int8_t fl, int8_t *m,
                                                               int64_t mk, int8_t *ex) {
    int32_t s = 0;
    for (int64_t j = 0; j < K / 2; j++) {
        int a = (int8_t)(row[2 * j] ^ fl), b = (int8_t)(row[2 * j + 1] ^ fl);
        int pair = a + b, kept = pair > 128 ? 128 : pair < -128 ? -128 : pair;
        m[2 * j * mk] = (int8_t)a;
        m[(2 * j + 1) * mk] = (int8_t)(kept - a);
        ex[j] = (int8_t)(pair - kept);
        s += pair;
    }
    if (K % 2) {  /* the last k of an odd K pairs with nothing: as it is */
        int a = (int8_t)(row[K - 1] ^ fl);
        m[(K - 1) * mk] = (int8_t)a;
        s += a;
    }
    return s;
}

/* ge_qgemm_split's weights row by row (a convolution's: k contiguous, si the row's stride); quad q of
   weight index i's group at fix_b + ((i / width) * q4 * width + i % width) * 4 + q * width * 4; -1: no memory */
static int split_rows(const int8_t *w, int64_t si, int64_t N, int64_t K, int8_t fl, int64_t width, int8_t *main,
                      int64_t mi, int64_t mk, int32_t *sums, int32_t *used, int8_t *fix_b) {
    int64_t q4 = quads(K), bytes = width * 4;
    int8_t *ex = calloc(2 * q4 + 1, 1);  /* a row's rests by pair of k; past K / 2 pairs: 0 */
    if (!ex) return -1;
    for (int64_t i = 0; i < N; i++) {
        int8_t *block = fix_b + ((i / width) * q4 * width + i % width) * 4;
        sums[i] = mk == 1 ? split_row(w + i * si, K, fl, main + i * mi, 1, ex)
                          : split_row(w + i * si, K, fl, main + i * mi, mk, ex);
        for (int64_t q = 0; q < q4; q++) {  /* quad q: pairs 2q and 2q + 1, their rests at bytes 1 and 3 */
            if (!(ex[2 * q] | ex[2 * q + 1])) continue;
            int32_t *u = used + (i / width) * q4 + q;
            if (!*u) memset(block - i % width * 4 + q * bytes, 0, bytes);  /* the quad's bytes, at its first rest */
            *u = 1;
            block[q * bytes + 1] = ex[2 * q];
            block[q * bytes + 3] = ex[2 * q + 1];
        }
    }
    free(ex);
    return 0;
}

/* Whether some byte of p[0 .. n - 1] is not zero, 8 at a time (a byte at a time, widened to int, was 30
   instructions a group of 16: a third of BERT-small int8's split) */
static inline int any_byte(const int8_t *p, int64_t n) {
    uint64_t acc = 0, word;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        memcpy(&word, p + j, 8);
        acc |= word;
    }
    for (; j < n; j++) acc |= (uint8_t)p[j];
    return acc != 0;
}

/* ge_qgemm_split's weights a pair of k at a time, every weight index inside (the product's panels:
   weight indices contiguous, the loop vectorizes); -1: no memory */
static int split_by_pairs(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int8_t fl, int64_t width,
                          int8_t *main, int64_t mi, int64_t mk, int32_t *sums, int32_t *used, int8_t *fix_b) {
    int64_t q4 = quads(K), groups = (N + width - 1) / width, bytes = width * 4;
    int8_t *ex = malloc(N ? N : 1);
    if (!ex) return -1;
    for (int64_t k = 0; k + 1 < K; k += 2) {
        const int8_t *a8 = w + k * sk, *b8 = a8 + sk;
        int8_t *ma = main + k * mk, *mb = ma + mk;
        if (si == 1 && mi == 1) split_pair(a8, b8, 1, ma, mb, 1, fl, N, ex, sums);
        else split_pair(a8, b8, si, ma, mb, mi, fl, N, ex, sums);
        for (int64_t g = 0; g < groups; g++) {  /* the groups with a rest in this pair: their quad's bytes */
            int64_t i0 = g * width, n = N - i0 < width ? N - i0 : width;
            if (!any_byte(ex + i0, n)) continue;
            int8_t *quad = fix_b + (g * q4 + k / 4) * bytes, *block = quad + (k + 1) % 4;
            if (!used[g * q4 + k / 4]) memset(quad, 0, bytes);  /* the quad's bytes, at its first rest */
            used[g * q4 + k / 4] = 1;
            for (int64_t j = 0; j < n; j++) block[j * 4] = ex[i0 + j];
        }
    }
    if (K % 2)  /* the last k of an odd K pairs with nothing: as it is */
        for (int64_t i = 0; i < N; i++) {
            int a = (int8_t)(w[i * si + (K - 1) * sk] ^ fl);
            main[i * mi + (K - 1) * mk] = (int8_t)a;
            sums[i] += a;
        }
    free(ex);
    return 0;
}

/* Weights (weight index i < N, k < K) at w[i * si + k * sk], int8 or uint8 (flip: w - 128), split for
   vpmaddubsw (int8_native.product_plan): main + rest = the weights, every pair of k (0-1, 2-3, ...) of
   main and of rest in int16. A pair whose two weights add up past 128 (or below -128) keeps its first
   weight, its second becomes what fills the pair to 128 (-128) in main and the remainder in rest (at
   most 126 in size: 127 + 127 = (127 + 1) + (0 + 126)). Writes main[i * mi + k * mk], sums[i] (the whole
   weights' over K) and rest as QGemm's fix_start, fix_q, fix_b: per group of `width` weight indices
   (a panel's columns, or a tile's rows), the quads of K where some weight of the group has a rest,
   each as the group's bytes (width x 4). fix_b has room for every quad of every group (groups x
   quads(K) x width x 4 bytes; only the quads with a rest are zeroed, then written) and fix_q for one
   entry each, zeroed by the caller; returns the quads with a rest (-1: no memory). In C: the numpy version of these steps was a quarter of a
   quantized MobileNetV2's load. */
int64_t ge_qgemm_split(const int8_t *w, int64_t si, int64_t sk, int64_t N, int64_t K, int flip, int64_t width,
                       int8_t *main, int64_t mi, int64_t mk, int32_t *sums, int64_t *fix_start, int32_t *fix_q,
                       int8_t *fix_b) {
    int64_t q4 = quads(K), groups = (N + width - 1) / width, bytes = width * 4, slots = 0;
    int8_t fl = (int8_t)(flip ? 0x80 : 0);
    memset(sums, 0, N * sizeof(int32_t));
    if (sk == 1 && si != 1 ? split_rows(w, si, N, K, fl, width, main, mi, mk, sums, fix_q, fix_b)
                           : split_by_pairs(w, si, sk, N, K, fl, width, main, mi, mk, sums, fix_q, fix_b)) return -1;
    for (int64_t g = 0; g < groups; g++) {  /* the used quads (flagged in fix_q) gathered, group by group */
        fix_start[g] = slots;
        for (int64_t q = 0; q < q4; q++) {
            int64_t at = g * q4 + q;
            if (!fix_q[at]) continue;
            if (slots != at) memcpy(fix_b + slots * bytes, fix_b + at * bytes, bytes);
            fix_q[slots++] = (int32_t)q;
        }
    }
    fix_start[groups] = slots;
    return slots;
}

/* ---- the micro-kernel: acc[QMR][QNR] over all K of QMR rows and one panel ---------------------- */

/* 4 bytes of a row at p, of which `avail` are in the row (the last quad of K may be short); the short
   copies have constant sizes: inlined (a variable-size memcpy is a library call, and every
   accumulator of the tile spilled around it) */
static inline int32_t load_quad(const uint8_t *p, int64_t avail) {
    int32_t v = 0;
    if (__builtin_expect(avail >= 4, 1)) memcpy(&v, p, 4);
    else if (avail == 3) memcpy(&v, p, 3);
    else if (avail == 2) memcpy(&v, p, 2);
    else memcpy(&v, p, 1);
    return v;
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define HAVE_PAIRS 0
static inline __attribute__((always_inline)) void tile(const uint8_t *const *rows, int64_t K, int64_t row_len,
                                                       const uint8_t *panel, int rows_signed, int32_t *out,
                                                       const int32_t *fix_q, const int8_t *fix_b, int64_t nfix, int mr,
                                                       int nc) {
    (void)mr, (void)nc;  /* all QMR rows (the short tile's repeat its last), all QNR columns; no split weights
                            (exact as they are) */
    (void)fix_q, (void)fix_b, (void)nfix;
    __m512i acc[QMR][2];
    for (int i = 0; i < QMR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
    int64_t q4 = quads(K);
    for (int64_t q = 0; q < q4; q++) {
        __m512i b0 = _mm512_loadu_si512(panel + q * QNR * 4), b1 = _mm512_loadu_si512(panel + q * QNR * 4 + 64);
#pragma GCC unroll 8
        for (int i = 0; i < QMR; i++) {
            __m512i a = _mm512_set1_epi32(load_quad(rows[i] + 4 * q, row_len - 4 * q));
            if (rows_signed) {
                acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], b0, a);
                acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], b1, a);
            } else {
                acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, b0);
                acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, b1);
            }
        }
    }
    for (int i = 0; i < QMR; i++) {
        _mm512_storeu_si512(out + i * QNR, acc[i][0]);
        _mm512_storeu_si512(out + i * QNR + 16, acc[i][1]);
    }
}
#elif defined(__AVX2__)
#define HAVE_PAIRS 1
/* One quad of K into mr rows' accumulators: AT is row i's 4 bytes (broadcast), B0 and B1 the panel's 16
   columns' quads (nv 1: the first 8 only); vpmaddubsw adds each pair's two u8 x s8 products into int16,
   vpmaddwd by ones a quad's two pairs into int32 (rows_signed: the rows are the s8 operand) */
#define QUAD_BYTES(AT, B0, B1)                                                                           \
    do {                                                                                                 \
        for (int i = 0; i < mr; i++) {                                                                   \
            __m256i a_ = _mm256_set1_epi32(AT);                                                          \
            __m256i p0_ = rows_signed ? _mm256_maddubs_epi16(B0, a_) : _mm256_maddubs_epi16(a_, B0);      \
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0_, ones));                       \
            if (nv == 2) {                                                                               \
                __m256i p1_ = rows_signed ? _mm256_maddubs_epi16(B1, a_) : _mm256_maddubs_epi16(a_, B1);  \
                acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1_, ones));                   \
            }                                                                                            \
        }                                                                                                \
    } while (0)

/* Two quads of K into mr rows' accumulators (twinned panels, ge_qgemm_twin): quads QX and QY of the rows
   ROW[i] (broadcast) times the slots' columns at B and B + 64; the two vpmaddubsw sums of a lane added in
   int16 (exact: the twins' weights are chosen so) before one vpmaddwd by ones. Prepacked weights: the rows are u8. */
#define TWIN_QUADS(ROW, QX, QY, B)                                                                          \
    do {                                                                                                    \
        __m256i b0_ = _mm256_loadu_si256((const __m256i *)(B)), c0_ = _mm256_loadu_si256((const __m256i *)((B) + 64)); \
        __m256i b1_ = _mm256_loadu_si256((const __m256i *)((B) + 32)), c1_ = _mm256_loadu_si256((const __m256i *)((B) + 96)); \
        for (int i = 0; i < mr; i++) {                                                                      \
            __m256i x_ = _mm256_set1_epi32(quad_at(ROW[i] + 4 * (QX))), y_ = _mm256_set1_epi32(quad_at(ROW[i] + 4 * (QY))); \
            __m256i s0_ = _mm256_add_epi16(_mm256_maddubs_epi16(x_, b0_), _mm256_maddubs_epi16(y_, c0_));   \
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(s0_, ones));                          \
            if (nv == 2) {                                                                                  \
                __m256i s1_ = _mm256_add_epi16(_mm256_maddubs_epi16(x_, b1_), _mm256_maddubs_epi16(y_, c1_)); \
                acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(s1_, ones));                      \
            }                                                                                               \
        }                                                                                                   \
    } while (0)

static inline int32_t quad_at(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* A convolution's tile (rows_are_weights: a row is an output channel) stored straight from its registers
   (qgemm_item's `fuse`): the accumulators start at the row's correction, -zu sum_s[w] + bias[w] (int32 adds wrap:
   the same sums in any order), and each pair of rows is requantized as store_rows_bytes does it (scaled
   in float32, clamped below 2^31, rounded by cvtps2dq, saturated by the packs) and its 32 bytes put in
   order by one vpermd: no accumulators through memory, half the packs. Every QMR row, every QNR column,
   zero points of the weights 0, an 8-bit output over its whole range. */
static inline __attribute__((always_inline)) __m256i row_correction(const QGemm *g, int64_t w) {
    return _mm256_set1_epi32(-g->zu * g->sum_s[w] + (g->out.bias ? g->out.bias[w] : 0));
}

static inline __attribute__((always_inline)) void store_fused(const QGemm *g, __m256i acc[QMR][2], int64_t i0,
                                                              int64_t j0) {
    const __m256 top = _mm256_set1_ps(2147483520.0f);  /* the largest float32 below 2^31 */
    const __m256i zy16 = _mm256_set1_epi16((int16_t)g->out.zy), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const int u8 = g->out.kind == QOUT_U8;
    const float *scale = g->out.scale;
    const int64_t sstep = g->out.scale_step, ldc = g->ldc;
    uint8_t *c = (uint8_t *)g->c + i0 * ldc + j0;
    for (int i = 0; i < QMR; i += 2) {
        __m256i w[2];
        for (int r = 0; r < 2; r++) {
            __m256 sc = _mm256_set1_ps(scale[sstep * (i0 + i + r)]);
            __m256i v0 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[i + r][0]), sc), top));
            __m256i v1 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[i + r][1]), sc), top));
            w[r] = _mm256_adds_epi16(_mm256_packs_epi32(v0, v1), zy16);  /* columns 0-3 8-11 | 4-7 12-15 */
        }
        __m256i b = u8 ? _mm256_packus_epi16(w[0], w[1]) : _mm256_packs_epi16(w[0], w[1]);
        b = _mm256_permutevar8x32_epi32(b, order);  /* row i's 16 bytes, then row i + 1's */
        _mm_storeu_si128((__m128i *)(c + i * ldc), _mm256_castsi256_si128(b));
        _mm_storeu_si128((__m128i *)(c + (i + 1) * ldc), _mm256_extracti128_si256(b, 1));
    }
}

/* QPATH_BYTES: vpmaddubsw saturates its int16 sums; the caller takes this path only for weights none
   of whose pairs can leave int16 (product_plan in int8_native.py), or split so (the rest's quads
   added after), so it is exact. The rows are lda bytes apart (a short tile computes only its mr
   rows); the quads readable as 4 bytes run in a loop of their own (its broadcasts straight from
   memory: no per-quad check of the row's end), K's last short quad after. Both operand orders are
   compiled (rows_signed a constant in each), so that the loop has no choice in it. nv: the vectors of
   columns computed, 2, or 1 for a panel of at most 8 (a 7x7 plane's 49th pixel costs half a panel). */
static inline __attribute__((always_inline)) void tile_bytes_as(const uint8_t *a, int64_t lda, int64_t K,
                                                                int64_t row_len, const uint8_t *panel,
                                                                const int rows_signed, int32_t *out,
                                                                const int32_t *fix_q, const int8_t *fix_b,
                                                                int64_t nfix, const int mr, const int nv,
                                                                const int fused, const QGemm *g, int64_t i0,
                                                                int64_t j0, const int32_t *tq, int64_t slots) {
    __m256i acc[QMR][2];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = fused ? row_correction(g, i0 + i) : _mm256_setzero_si256();
    int64_t q4 = quads(K), whole = row_len / 4 < q4 ? row_len / 4 : q4, q = 0;
    if (!rows_signed && tq) {  /* twinned panel (ge_qgemm_twin): quads tq[s], tq[s + 1] at once, q4 done */
        const uint8_t *row[QMR];  /* (each row's own base register: the broadcasts need no address arithmetic) */
        for (int i = 0; i < mr; i++) row[i] = a + i * lda;
        for (int64_t s = 0; s < slots; s += 2) TWIN_QUADS(row, (int64_t)tq[s], (int64_t)tq[s + 1], panel + s * QNR * 4);
        q = q4;
    }
    for (; q < whole; q++) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 4));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 4 + 32));
        QUAD_BYTES(quad_at(a + i * lda + 4 * q), b0, b1);
    }
    for (; q < q4; q++) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 4));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 4 + 32));
        QUAD_BYTES(load_quad(a + i * lda + 4 * q, row_len - 4 * q), b0, b1);
    }
    /* the split weights' rest: the same products on the listed quads (the weights' operand from fix_b) */
    for (int64_t e = 0; e < nfix; e++) {
        int64_t fq = fix_q[e];
        if (rows_signed) {  /* the rows are the weights: QMR rows' quads */
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + fq * QNR * 4));
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + fq * QNR * 4 + 32));
            QUAD_BYTES(quad_at((const uint8_t *)fix_b + e * QMR * 4 + 4 * i), b0, b1);
        } else {  /* the panel is the weights: the panel's quad */
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(fix_b + e * QNR * 4));
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(fix_b + e * QNR * 4 + 32));
            QUAD_BYTES(load_quad(a + i * lda + 4 * fq, row_len - 4 * fq), b0, b1);
        }
    }
    if (fused) {
        store_fused(g, acc, i0, j0);
        return;
    }
    for (int i = 0; i < mr; i++) {
        _mm256_storeu_si256((__m256i *)(out + i * QNR), acc[i][0]);
        if (nv == 2) _mm256_storeu_si256((__m256i *)(out + i * QNR + 8), acc[i][1]);
    }
}

static inline __attribute__((always_inline)) void tile_bytes(const uint8_t *const *rows, int64_t K, int64_t row_len,
                                                             const uint8_t *panel, int rows_signed, int32_t *out,
                                                             const int32_t *fix_q, const int8_t *fix_b, int64_t nfix,
                                                             const int mr, const int nv) {
    int64_t lda = mr > 1 ? rows[1] - rows[0] : 0;  /* (the callers' rows are evenly spaced) */
    if (rows_signed) tile_bytes_as(rows[0], lda, K, row_len, panel, 1, out, fix_q, fix_b, nfix, mr, nv, 0, NULL, 0, 0, NULL, 0);
    else tile_bytes_as(rows[0], lda, K, row_len, panel, 0, out, fix_q, fix_b, nfix, mr, nv, 0, NULL, 0, 0, NULL, 0);
}

/* A twinned panel's tile (prepacked weights, u8 rows lda apart, whole quads): its `slots` slots at
   `panel`, slot s multiplying quad tq[s]; the split weights' rest after, as tile_bytes */
#define HAVE_TWINS 1
static inline __attribute__((always_inline)) void tile_twins(const uint8_t *const *rows, int64_t K, const uint8_t *panel,
                                                             const int32_t *tq, int64_t slots, int32_t *out,
                                                             const int32_t *fix_q, const int8_t *fix_b, int64_t nfix,
                                                             int mr, int nc) {
    int64_t lda = mr > 1 ? rows[1] - rows[0] : 0;
#define TWINS(M, NV) tile_bytes_as(rows[0], lda, K, K, panel, 0, out, fix_q, fix_b, nfix, M, NV, 0, NULL, 0, 0, tq, slots)
    switch (mr) {
    case 1: if (nc <= 8) TWINS(1, 1); else TWINS(1, 2); break;
    case 2: if (nc <= 8) TWINS(2, 1); else TWINS(2, 2); break;
    case 3: if (nc <= 8) TWINS(3, 1); else TWINS(3, 2); break;
    default: if (nc <= 8) TWINS(QMR, 1); else TWINS(QMR, 2);
    }
#undef TWINS
}

/* QPATH_PAIRS: rows and panel already int16, pairs of k as one 32-bit lane (panel[pair][j][2]): one
   vpmaddwd adds a pair's two products into int32, exact for any bytes */
static inline __attribute__((always_inline)) void tile_pairs_as(const int16_t *const *rows, int64_t K,
                                                                const int16_t *panel, int32_t *out, const int mr,
                                                                const int nv, const int fused, const QGemm *g,
                                                                int64_t i0, int64_t j0) {
    __m256i acc[QMR][2];
    for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = fused ? row_correction(g, i0 + i) : _mm256_setzero_si256();
    const int16_t *a = rows[0];
    int64_t lda = mr > 1 ? rows[1] - rows[0] : 0;
    int64_t pairs = 2 * quads(K);
    for (int64_t q = 0; q < pairs; q++) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 2));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + q * QNR * 2 + 16));
        for (int i = 0; i < mr; i++) {
            __m256i v = _mm256_set1_epi32(quad_at((const uint8_t *)(a + i * lda + 2 * q)));
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(v, b0));
            if (nv == 2) acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(v, b1));
        }
    }
    if (fused) {
        store_fused(g, acc, i0, j0);
        return;
    }
    for (int i = 0; i < mr; i++) {
        _mm256_storeu_si256((__m256i *)(out + i * QNR), acc[i][0]);
        if (nv == 2) _mm256_storeu_si256((__m256i *)(out + i * QNR + 8), acc[i][1]);
    }
}

static inline __attribute__((always_inline)) void tile_pairs(const int16_t *const *rows, int64_t K,
                                                             const int16_t *panel, int32_t *out, const int mr,
                                                             const int nv) {
    tile_pairs_as(rows, K, panel, out, mr, nv, 0, NULL, 0, 0);
}
#define HAVE_CONV_FUSED 1

#elif defined(__SSSE3__) && defined(__SSE4_1__)
#define HAVE_PAIRS 1
/* The AVX2 paths on 128-bit vectors (x86-64 v2): the 16 columns in two halves of 8 (4 rows x 2
   vectors of accumulators a half, within SSE's 16 registers) */
static inline __attribute__((always_inline)) void tile_bytes(const uint8_t *const *rows, int64_t K, int64_t row_len,
                                                             const uint8_t *panel, int rows_signed, int32_t *out,
                                                             const int32_t *fix_q, const int8_t *fix_b, int64_t nfix,
                                                             const int mr, const int nv) {
    (void)nv;  /* (every column: the halves are 8 columns each, of one loop) */
    const __m128i ones = _mm_set1_epi16(1);
    int64_t q4 = quads(K), whole = row_len / 4 < q4 ? row_len / 4 : q4;
    for (int h = 0; h < 2; h++) {
        __m128i acc[QMR][2];
        for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = _mm_setzero_si128();
        for (int64_t q = 0; q < q4; q++) {
            __m128i b0 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 4 + 32 * h));
            __m128i b1 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 4 + 32 * h + 16));
            for (int i = 0; i < mr; i++) {
                int32_t v;
                if (q < whole) memcpy(&v, rows[i] + 4 * q, 4);
                else v = load_quad(rows[i] + 4 * q, row_len - 4 * q);
                __m128i a = _mm_set1_epi32(v);
                __m128i p0 = rows_signed ? _mm_maddubs_epi16(b0, a) : _mm_maddubs_epi16(a, b0);
                __m128i p1 = rows_signed ? _mm_maddubs_epi16(b1, a) : _mm_maddubs_epi16(a, b1);
                acc[i][0] = _mm_add_epi32(acc[i][0], _mm_madd_epi16(p0, ones));
                acc[i][1] = _mm_add_epi32(acc[i][1], _mm_madd_epi16(p1, ones));
            }
        }
        for (int64_t e = 0; e < nfix; e++) {  /* the split weights' rest, as the AVX2 tile */
            int64_t q = fix_q[e];
            for (int i = 0; i < mr; i++) {
                __m128i a, b0, b1;
                int32_t v;
                if (rows_signed) {
                    memcpy(&v, fix_b + e * QMR * 4 + 4 * i, 4);
                    b0 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 4 + 32 * h));
                    b1 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 4 + 32 * h + 16));
                    a = _mm_set1_epi32(v);
                    b0 = _mm_maddubs_epi16(b0, a);
                    b1 = _mm_maddubs_epi16(b1, a);
                } else {
                    a = _mm_set1_epi32(load_quad(rows[i] + 4 * q, row_len - 4 * q));
                    b0 = _mm_maddubs_epi16(a, _mm_loadu_si128((const __m128i *)(fix_b + e * QNR * 4 + 32 * h)));
                    b1 = _mm_maddubs_epi16(a, _mm_loadu_si128((const __m128i *)(fix_b + e * QNR * 4 + 32 * h + 16)));
                }
                acc[i][0] = _mm_add_epi32(acc[i][0], _mm_madd_epi16(b0, ones));
                acc[i][1] = _mm_add_epi32(acc[i][1], _mm_madd_epi16(b1, ones));
            }
        }
        for (int i = 0; i < mr; i++) {
            _mm_storeu_si128((__m128i *)(out + i * QNR + 8 * h), acc[i][0]);
            _mm_storeu_si128((__m128i *)(out + i * QNR + 8 * h + 4), acc[i][1]);
        }
    }
}

static inline __attribute__((always_inline)) void tile_pairs(const int16_t *const *rows, int64_t K,
                                                             const int16_t *panel, int32_t *out, const int mr,
                                                             const int nv) {
    (void)nv;
    int64_t pairs = 2 * quads(K);
    for (int h = 0; h < 2; h++) {
        __m128i acc[QMR][2];
        for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = _mm_setzero_si128();
        for (int64_t q = 0; q < pairs; q++) {
            __m128i b0 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 2 + 16 * h));
            __m128i b1 = _mm_loadu_si128((const __m128i *)(panel + q * QNR * 2 + 16 * h + 8));
            for (int i = 0; i < mr; i++) {
                int32_t v;
                memcpy(&v, rows[i] + 2 * q, 4);
                __m128i a = _mm_set1_epi32(v);
                acc[i][0] = _mm_add_epi32(acc[i][0], _mm_madd_epi16(a, b0));
                acc[i][1] = _mm_add_epi32(acc[i][1], _mm_madd_epi16(a, b1));
            }
        }
        for (int i = 0; i < mr; i++) {
            _mm_storeu_si128((__m128i *)(out + i * QNR + 8 * h), acc[i][0]);
            _mm_storeu_si128((__m128i *)(out + i * QNR + 8 * h + 4), acc[i][1]);
        }
    }
}
#endif

#ifndef HAVE_CONV_FUSED
#define HAVE_CONV_FUSED 0
#endif
#ifndef HAVE_TWINS
#define HAVE_TWINS 0
#endif

#if HAVE_PAIRS
/* the tiles with the row count and the vectors of columns constants (a short tile computes only its
   rows; a panel of at most 8 columns, nc, the last of a 7x7 or 14x14 plane's pixels, only its first
   vector on AVX2), inlined into the item: called, they cost 4-8% of a product */
#define TILE_CASE(M, CALL_NV) case M: if (nc <= 8) CALL_NV(M, 1); else CALL_NV(M, 2); break
static inline __attribute__((always_inline)) void tile(const uint8_t *const *rows, int64_t K, int64_t row_len,
                                                       const uint8_t *panel, int rows_signed, int32_t *out,
                                                       const int32_t *fix_q, const int8_t *fix_b, int64_t nfix, int mr,
                                                       int nc) {
#define BYTES_NV(M, NV) tile_bytes(rows, K, row_len, panel, rows_signed, out, fix_q, fix_b, nfix, M, NV)
    switch (mr) {
    TILE_CASE(1, BYTES_NV);
    TILE_CASE(2, BYTES_NV);
    TILE_CASE(3, BYTES_NV);
    default: if (nc <= 8) BYTES_NV(QMR, 1); else BYTES_NV(QMR, 2);
    }
#undef BYTES_NV
}

static inline __attribute__((always_inline)) void tile16(const int16_t *const *rows, int64_t K, const int16_t *panel,
                                                         int32_t *out, int mr, int nc) {
#define PAIRS_NV(M, NV) tile_pairs(rows, K, panel, out, M, NV)
    switch (mr) {
    TILE_CASE(1, PAIRS_NV);
    TILE_CASE(2, PAIRS_NV);
    TILE_CASE(3, PAIRS_NV);
    default: if (nc <= 8) PAIRS_NV(QMR, 1); else PAIRS_NV(QMR, 2);
    }
#undef PAIRS_NV
}
#undef TILE_CASE
#elif !defined(__AVX512VNNI__) || !defined(__AVX512F__)
#define HAVE_PAIRS 0
static inline void tile(const uint8_t *const *rows, int64_t K, int64_t row_len, const uint8_t *panel, int rows_signed,
                        int32_t *out, const int32_t *fix_q, const int8_t *fix_b, int64_t nfix, int mr, int nc) {
    (void)row_len, (void)nc;
    (void)mr, (void)fix_q, (void)fix_b, (void)nfix;
    int32_t acc[QMR][QNR] = {{0}};
    for (int64_t k = 0; k < K; k++) {
        const uint8_t *p = panel + (k / 4) * QNR * 4 + k % 4;
        for (int i = 0; i < QMR; i++) {
            int32_t a = rows_signed ? (int32_t)(int8_t)rows[i][k] : (int32_t)rows[i][k];
            for (int j = 0; j < QNR; j++)
                acc[i][j] += a * (rows_signed ? (int32_t)p[4 * j] : (int32_t)(int8_t)p[4 * j]);
        }
    }
    memcpy(out, acc, sizeof acc);
}
#endif

/* per thread: a gathered panel (bytes, then as int16 pairs beside it where the build has that path),
   its column sums, the row sums */
int64_t ge_qgemm_workspace_bytes(int64_t K, int threads) {
    return (int64_t)threads * (quads(K) * QNR * 4 * (1 + 2 * HAVE_PAIRS) + 64 + QNR * 4 + QMR * 4 + 64);
}

int ge_qgemm_has_pairs(void) { return HAVE_PAIRS; }

int ge_qgemm_mr(void) { return QMR; }

/* W (K, N) as ge_qgemm_pack takes it into panels of int16 pairs of k (panel[pair][j][2]): QPATH_PAIRS's weights */
void ge_qgemm_pack_pairs(const int8_t *w, int64_t ldw, int64_t K, int64_t N, int flip, int16_t *bp, int32_t *sums) {
    pack_groups(w, ldw, K, N, flip, 2, bp, sums);
}

/* ---- twinned panels: two quads of K a vpmaddwd (AVX2 builds) ---------------------------------------- */

int ge_qgemm_has_twins(void) { return HAVE_TWINS; }

#if HAVE_TWINS
/* A quad's 2 QNR int16 lanes of vpmaddubsw (lane l: bytes 2l, 2l + 1, a column's pair of k) as bounds:
   bound[l] the weights' positive parts added, bound[2 QNR + l] their negative parts' magnitude (the pairs
   added by vpmaddubsw by ones, in int16: at most 256). Returns the quad's sort key, its largest bound << 15
   | the bounds' sum (at most 256 and 64 x 256: 24 bits). */
static int32_t quad_bounds(const int8_t *quad, int16_t *bound) {
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi8(1);
    __m256i top = zero, sum = zero;
    for (int h = 0; h < 2; h++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(quad + 32 * h));
        __m256i pos = _mm256_max_epi8(w, zero), neg = _mm256_sub_epi8(pos, w);  /* -w as u8 where w < 0: 128 too */
        __m256i up = _mm256_maddubs_epi16(pos, ones), down = _mm256_maddubs_epi16(neg, ones);
        _mm256_storeu_si256((__m256i *)(bound + 16 * h), up);
        _mm256_storeu_si256((__m256i *)(bound + 2 * QNR + 16 * h), down);
        top = _mm256_max_epi16(top, _mm256_max_epi16(up, down));
        sum = _mm256_add_epi16(sum, _mm256_add_epi16(up, down));
    }
    __m128i t = _mm_max_epi16(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
    t = _mm_max_epi16(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_max_epi16(t, _mm_shuffle_epi32(t, 0xB1));
    t = _mm_max_epi16(t, _mm_srli_epi32(t, 16));
    __m256i s8 = _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_extract_epi16(t, 0) << 15 | _mm_cvtsi128_si32(s);
}

/* whether two quads' vpmaddubsw sums add up in int16 for any u8 activation: in every lane 255 (positive
   parts) <= 32767 and 255 (negative parts) <= 32768, i.e. both <= 128 */
static int twins_fit(const int16_t *x, const int16_t *y) {
    const __m256i limit = _mm256_set1_epi16(128);
    __m256i over = _mm256_setzero_si256();
    for (int v = 0; v < 4; v++) {
        __m256i s = _mm256_add_epi16(_mm256_loadu_si256((const __m256i *)(x + 16 * v)),
                                     _mm256_loadu_si256((const __m256i *)(y + 16 * v)));
        over = _mm256_or_si256(over, _mm256_cmpgt_epi16(s, limit));
    }
    return _mm256_testz_si256(over, over);
}

/* order[0 .. n - 1]: the quads by their 24-bit keys, ties by index; a radix sort of 3 bytes (tmp: n more),
   not qsort: a panel's sort was a quarter of the pairing's instructions, its comparisons calls */
static void sort_quads(const int32_t *key, int32_t n, int32_t *order, int32_t *tmp) {
    int32_t at[3][256] = {{0}};
    for (int32_t q = 0; q < n; q++)
        for (int d = 0; d < 3; d++) at[d][key[q] >> 8 * d & 255]++;
    for (int d = 0; d < 3; d++)
        for (int32_t b = 0, s = 0; b < 256; b++) {
            int32_t c = at[d][b];
            at[d][b] = s;
            s += c;
        }
    for (int32_t q = 0; q < n; q++) order[at[0][key[q] & 255]++] = q;
    for (int32_t i = 0; i < n; i++) tmp[at[1][key[order[i]] >> 8 & 255]++] = order[i];
    for (int32_t i = 0; i < n; i++) order[at[2][key[tmp[i]] >> 16]++] = tmp[i];
}

/* The first unplaced position at or after i (ge_qgemm_twin's search): next[i] == i when unplaced, else a
   later position; paths halved as they are walked */
static inline int64_t unplaced(int32_t *next, int64_t i) {
    while (next[i] != i) {
        next[i] = next[next[i]];
        i = next[i];
    }
    return i;
}

/* Prepacked panels bp (ge_qgemm_pack's, K a multiple of 4, every pair of k fitting int16) regrouped so that
   the AVX2 tile adds the vpmaddubsw sums of two quads in int16 before its vpmaddwd (3 multiplies for two
   quads instead of 4): each panel's quads in twins that fit together (twins_fit), a quad without one
   twinned with zero weights. Per panel, the quads with the largest bounds first, each taking the first
   free quad from the smallest that fits (BERT's weights: under 1% alone); the twins in order of K.
   Writes start[p] (panels + 1 entries: panel p's 64-byte slots start[p] .. start[p + 1] - 1, at most
   2 quads(K) a panel) and quad[s] (the activation's quad slot s multiplies; a quad alone fills both
   slots of its twin); returns the slots, or -1 (K not a multiple of 4, no memory, or a build without
   the twinned tile). ge_qgemm_twin_fill then writes the slots: the caller sizes them in between. */
int64_t ge_qgemm_twin(const int8_t *bp, int64_t K, int64_t N, int64_t *start, int32_t *quad) {
    int64_t q4 = quads(K), panels = (N + QNR - 1) / QNR, qb = QNR * 4, slots = 0;
    int16_t *bound = malloc(q4 * 4 * QNR * sizeof(int16_t));
    int32_t *key = malloc((q4 * 5 + 1) * sizeof(int32_t)), *order = key + q4, *tmp = order + q4;
    int32_t *mate = tmp + q4;  /* a quad's twin (itself: alone), -1 not yet placed */
    int32_t *next = mate + q4;  /* by position in order: unplaced() (placed ones skipped in one step, not
                                   one at a time: that walk was half of BERT-small int8's pairing) */
    if (K % 4 || !bound || !key) slots = -1;
    for (int64_t p = 0; p < panels && slots >= 0; p++) {
        const int8_t *panel = bp + p * q4 * qb;
        start[p] = slots;
        for (int64_t q = 0; q < q4; q++) {
            key[q] = quad_bounds(panel + q * qb, bound + q * 4 * QNR);
            mate[q] = -1;
        }
        for (int64_t i = 0; i <= q4; i++) next[i] = (int32_t)i;
        sort_quads(key, (int32_t)q4, order, tmp);
        for (int64_t h = q4 - 1; h >= 0; h--) {  /* (positions past h are never searched again) */
            int32_t q = order[h];
            if (mate[q] >= 0) continue;
            mate[q] = q;
            for (int64_t e = unplaced(next, 0); e < h; e = unplaced(next, e + 1)) {
                int32_t c = order[e];
                if (twins_fit(bound + q * 4 * QNR, bound + c * 4 * QNR)) {
                    mate[q] = c;
                    mate[c] = q;
                    next[e] = (int32_t)(e + 1);
                    break;
                }
            }
        }
        for (int32_t q = 0; q < q4; q++) {
            int32_t c = mate[q];
            if (c < q) continue;  /* placed with its twin */
            quad[slots++] = q;
            quad[slots++] = c;
        }
    }
    if (slots >= 0) start[panels] = slots;
    free(bound);
    free(key);
    return slots;
}
#else
int64_t ge_qgemm_twin(const int8_t *bp, int64_t K, int64_t N, int64_t *start, int32_t *quad) {
    (void)bp, (void)K, (void)N, (void)start, (void)quad;
    return -1;
}
#endif

/* ge_qgemm_twin's slots of panels bp written into out (start[panels] slots of 64 bytes): slot s of panel p
   the quad quad[s] of panel p, the second slot of a quad alone (quad[s + 1] == quad[s]) zeros */
void ge_qgemm_twin_fill(const int8_t *bp, int64_t K, int64_t N, const int64_t *start, const int32_t *quad,
                        int8_t *out) {
    int64_t q4 = quads(K), panels = (N + QNR - 1) / QNR, qb = QNR * 4;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t s = start[p]; s + 1 < start[p + 1]; s += 2) {
            memcpy(out + s * qb, bp + (p * q4 + quad[s]) * qb, qb);
            if (quad[s + 1] == quad[s]) memset(out + (s + 1) * qb, 0, qb);
            else memcpy(out + (s + 1) * qb, bp + (p * q4 + quad[s + 1]) * qb, qb);
        }
}

#if HAVE_PAIRS
/* a gathered panel of u8 quads (panel[q][j][4]) as int16 pairs (panel[2q + h][j][2] = bytes 2h, 2h + 1),
   4 columns' quads a vector */
static void quads_to_pairs(const uint8_t *src, int64_t K, int16_t *dst) {
    const __m128i lo = _mm_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1);
    const __m128i hi = _mm_setr_epi8(2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1);
    for (int64_t q = 0; q < quads(K); q++)
        for (int c = 0; c < QNR / 4; c++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(src + q * QNR * 4 + 16 * c));
            _mm_storeu_si128((__m128i *)(dst + 2 * q * QNR * 2 + 8 * c), _mm_shuffle_epi8(v, lo));
            _mm_storeu_si128((__m128i *)(dst + (2 * q + 1) * QNR * 2 + 8 * c), _mm_shuffle_epi8(v, hi));
        }
}

/* the u8 rows (M, K) at a (stride lda) as int16 rows of 4 quads(K), zeros past K */
static void widen_rows(const uint8_t *a, int64_t lda, int64_t M, int64_t K, int16_t *a16) {
    int64_t ld16 = 4 * quads(K);
    for (int64_t i = 0; i < M; i++) {
        const uint8_t *src = a + i * lda;
        int16_t *dst = a16 + i * ld16;
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
            _mm_storeu_si128((__m128i *)(dst + k), _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(src + k))));
        for (; k < K; k++) dst[k] = src[k];
        for (; k < ld16; k++) dst[k] = 0;
    }
}
#endif

/* ---- the epilogue ------------------------------------------------------------------------------ */

/* y[0, n) = act(y) for a float32 output, after the store: compiled before the region below, so that
   its polynomials fuse their multiplies and adds (a Gelu then costs half as much: an int8 product's
   Gelu took as long as its products on AMX); the numpy plan's Gelu is another kernel and not
   bitwise equal either way */
__attribute__((noinline)) static void activate_row(float *y, int n, Activation act) {
    for (int j = 0; j < n; j += VL) {
        int part = n - j < VL ? n - j : VL;
        store_part(y + j, vactivate(load_part(y + j, part), act), part);
    }
}

/* From here on no multiply and add may fuse into one rounding: the numpy plans compute the same
   float32 expressions step by step, and both must give the same bytes. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

static inline int32_t clampi(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* rint (half to even, the default rounding), clamped as MLAS does before adding the zero point */
#define REQUANT(T, SCALE)                                                      \
    do {                                                                       \
        T *y = (T *)c + at;                                                    \
        for (int j = 0; j < n; j++) {                                          \
            float v = __builtin_rintf((float)acc[j] * (SCALE));                \
            v = v < lo ? lo : v;                                               \
            v = v > hi ? hi : v;                                               \
            y[j] = (T)((int32_t)v + zy);                                       \
        }                                                                      \
    } while (0)

/* One row of `n` accumulators (zero points taken out) of weight index w (wstep 1: w, w + 1, ... along
   the row; 0: w for all) stored through the QOut into c + at. Inlined into its callers, its loops
   have no branches and unit strides, so that they vectorize. */
static inline __attribute__((always_inline)) void store_row(const QOut *o, int64_t w, int wstep, int32_t *acc,
                                                            int n, void *c, int64_t at) {
    if (o->bias) {
        if (wstep)
            for (int j = 0; j < n; j++) acc[j] += o->bias[w + j];
        else
            for (int j = 0; j < n; j++) acc[j] += o->bias[w];
    }
    if (o->kind == QOUT_I32) {
        memcpy((int32_t *)c + at, acc, n * sizeof(int32_t));
        return;
    }
    int per_column = wstep && o->scale_step;
    const float *sc = o->scale + (o->scale_step ? w : 0);
    float s1 = sc[0];
    if (o->kind == QOUT_F32) {
        float *y = (float *)c + at, sa = o->scale_a ? *o->scale_a : 1.0f;
        if (per_column && o->scale_a)
            for (int j = 0; j < n; j++) y[j] = (float)acc[j] * (sa * sc[j]);
        else if (per_column)
            for (int j = 0; j < n; j++) y[j] = (float)acc[j] * sc[j];
        else {
            if (o->scale_a) s1 = sa * s1;
            for (int j = 0; j < n; j++) y[j] = (float)acc[j] * s1;
        }
        if (o->fbias && wstep)
            for (int j = 0; j < n; j++) y[j] = y[j] + o->fbias[w + j];
        else if (o->fbias)
            for (int j = 0; j < n; j++) y[j] = y[j] + o->fbias[w];
        if (o->act.act != ACT_NONE) activate_row(y, n, o->act);
    } else {
        float lo = (float)(o->lo - o->zy), hi = (float)(o->hi - o->zy);
        int32_t zy = o->zy;
        if (o->kind == QOUT_U8 && per_column) REQUANT(uint8_t, sc[j]);
        else if (o->kind == QOUT_U8) REQUANT(uint8_t, s1);
        else if (per_column) REQUANT(int8_t, sc[j]);
        else REQUANT(int8_t, s1);
    }
}

static void store_tile(const QGemm *g, int32_t *acc, int64_t i0, int mr, int64_t j0, int nc,
                       const int32_t *sum_u_rows, const int32_t *sum_u_cols) {
    int32_t zu = g->zu;
    int64_t K = g->K;
    for (int i = 0; i < mr; i++) {
        int32_t *row = acc + i * QNR;
        if (g->rows_are_weights) {  /* weight index: the row */
            int64_t w = i0 + i;
            int32_t zs = g->zs ? g->zs[w] : 0, base = -zu * g->sum_s[w] + (int32_t)(K * zu * zs);
            for (int j = 0; j < nc; j++) row[j] += base;
            if (zs)
                for (int j = 0; j < nc; j++) row[j] -= zs * sum_u_cols[j];
            store_row(&g->out, w, 0, row, nc, g->c, (i0 + i) * g->ldc + j0);
        } else {  /* weight index: the column */
            const int32_t *ss = g->sum_s + j0;
            for (int j = 0; j < nc; j++) row[j] -= zu * ss[j];
            if (g->zs) {
                const int32_t *zs = g->zs + j0;
                int32_t su = sum_u_rows[i];
                for (int j = 0; j < nc; j++) row[j] += zs[j] * (int32_t)(K * zu) - zs[j] * su;
            }
            store_row(&g->out, j0, 1, row, nc, g->c, (i0 + i) * g->ldc + j0);
        }
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
/* The same store as store_tile for weights with zero point 0 and an 8-bit or float32 output, a row
   of 32 accumulators as two vectors: the correction, the scale, rounding and saturation in registers
   (the generic path's scalar setup per row costs more than a small-K tile's products). Same bytes:
   float32 products, roundscale to nearest even, no fused multiply-add (this region). */
static void store_tile_fast(const QGemm *g, const int32_t *acc, int64_t i0, int mr, int64_t j0, int nc) {
    const QOut *o = &g->out;
    __mmask16 m0 = nc >= 16 ? 0xFFFF : (__mmask16)((1u << nc) - 1);
    __mmask16 m1 = nc <= 16 ? 0 : nc >= 32 ? 0xFFFF : (__mmask16)((1u << (nc - 16)) - 1);
    __m512 lo = _mm512_set1_ps((float)(o->lo - o->zy)), hi = _mm512_set1_ps((float)(o->hi - o->zy));
    __m512i zy = _mm512_set1_epi32(o->zy), zu = _mm512_set1_epi32(g->zu);
    __m512i corr[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    __m512 sc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, fb[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    if (!g->rows_are_weights) {  /* per column: -zu sum_s + bias, the scale (times scale_a), the float bias */
        for (int h = 0; h < 2; h++) {
            __mmask16 mk = h ? m1 : m0;
            __m512i ss = _mm512_maskz_loadu_epi32(mk, g->sum_s + j0 + 16 * h);
            corr[h] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_mullo_epi32(zu, ss));
            if (o->bias) corr[h] = _mm512_add_epi32(corr[h], _mm512_maskz_loadu_epi32(mk, o->bias + j0 + 16 * h));
            sc[h] = o->scale_step ? _mm512_maskz_loadu_ps(mk, o->scale + j0 + 16 * h) : _mm512_set1_ps(o->scale[0]);
            if (o->kind == QOUT_F32 && o->scale_a) sc[h] = _mm512_mul_ps(_mm512_set1_ps(*o->scale_a), sc[h]);
            if (o->kind == QOUT_F32 && o->fbias) fb[h] = _mm512_maskz_loadu_ps(mk, o->fbias + j0 + 16 * h);
        }
    }
    for (int i = 0; i < mr; i++) {
        int64_t at = (i0 + i) * g->ldc + j0;
        if (g->rows_are_weights) {  /* per row: one correction and one scale */
            int64_t w = i0 + i;
            corr[0] = corr[1] = _mm512_set1_epi32(-g->zu * g->sum_s[w] + (o->bias ? o->bias[w] : 0));
            sc[0] = sc[1] = _mm512_set1_ps(o->scale[o->scale_step * w]);
        }
        if (o->kind == QOUT_F32) {
            for (int h = 0; h < 2; h++) {
                __mmask16 mk = h ? m1 : m0;
                if (!mk) continue;
                __m512i v = _mm512_add_epi32(_mm512_loadu_si512(acc + i * QNR + 16 * h), corr[h]);
                __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), sc[h]);
                if (o->fbias) f = _mm512_add_ps(f, fb[h]);
                _mm512_mask_storeu_ps((float *)g->c + at + 16 * h, mk, f);
            }
            if (o->act.act != ACT_NONE) activate_row((float *)g->c + at, nc, o->act);
            continue;
        }
        /* clamped, then rounded to nearest even as converted (lo and hi are integers: the same as
           rounding first); the two halves packed in registers and stored as one 32-byte row */
        __m128i b[2];
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_add_epi32(_mm512_loadu_si512(acc + i * QNR + 16 * h), corr[h]);
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), sc[h]);
            f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            __m512i r = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
            b[h] = o->kind == QOUT_U8 ? _mm512_cvtusepi32_epi8(r) : _mm512_cvtsepi32_epi8(r);
        }
        __m256i row = _mm256_set_m128i(b[1], b[0]);
        if (nc == 32) _mm256_storeu_si256((__m256i *)((uint8_t *)g->c + at), row);
        else _mm256_mask_storeu_epi8((uint8_t *)g->c + at, ((__mmask32)m1 << 16) | m0, row);
    }
}
#define HAVE_FAST_STORE 1
#elif defined(__AVX2__)
/* store_tile_fast's rows over the whole 8-bit range: round first, then saturate by the packs (the
   bounds are integers: the same as clamping first); only a float32 past int32 needs clamping, as
   cvtps2dq would turn it into INT32_MIN (one from below does: it saturates to the low end as it
   should). Everything the loop reads is copied to locals first: its byte stores may alias any
   memory, the QGemm included, so that the compiler would read its fields again at every row. */
static inline __attribute__((always_inline)) void store_rows_bytes(const QGemm *g, const int32_t *acc, int64_t i0,
                                                                   int mr, int64_t j0, const __m256i *corr0,
                                                                   const __m256 *sc0, const int u8) {
    const QOut *o = &g->out;
    const __m256 top = _mm256_set1_ps(2147483520.0f);  /* the largest float32 below 2^31 */
    const __m256i zy16 = _mm256_set1_epi16((int16_t)o->zy);
    const int by_row = g->rows_are_weights;
    const int32_t *bias = o->bias, *sum_s = g->sum_s;
    const float *scale = o->scale;
    const int64_t sstep = o->scale_step, ldc = g->ldc;
    const int32_t zu = g->zu;
    uint8_t *c = (uint8_t *)g->c + i0 * ldc + j0;
    __m256i corr[2] = {corr0[0], corr0[1]};
    __m256 sc[2] = {sc0[0], sc0[1]};
    for (int i = 0; i < mr; i++, c += ldc) {
        if (by_row) {
            int64_t w = i0 + i;
            corr[0] = corr[1] = _mm256_set1_epi32(-zu * sum_s[w] + (bias ? bias[w] : 0));
            sc[0] = sc[1] = _mm256_set1_ps(scale[sstep * w]);
        }
        __m256i r0 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + i * QNR)), corr[0]);
        __m256i r1 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + i * QNR + 8)), corr[1]);
        r0 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(r0), sc[0]), top));
        r1 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(r1), sc[1]), top));
        __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);  /* 16 words in order */
        w16 = _mm256_adds_epi16(w16, zy16);
        __m256i b = u8 ? _mm256_packus_epi16(w16, w16) : _mm256_packs_epi16(w16, w16);
        b = _mm256_permute4x64_epi64(b, 0x08);
        _mm_storeu_si128((__m128i *)c, _mm256_castsi256_si128(b));
    }
}

/* store_tile_fast with 8 lanes, for full panels (16 columns: two vectors): the same steps as the
   AVX-512 one (cvtps rounds to nearest even, the default mode; the clamped values fit 8 bits, so the
   packs do not saturate) */
static void store_tile_fast(const QGemm *g, const int32_t *acc, int64_t i0, int mr, int64_t j0, int nc) {
    if (nc < QNR) {
        store_tile(g, (int32_t *)acc, i0, mr, j0, nc, NULL, NULL);
        return;
    }
    const QOut *o = &g->out;
    __m256 lo = _mm256_set1_ps((float)(o->lo - o->zy)), hi = _mm256_set1_ps((float)(o->hi - o->zy));
    __m256i zy = _mm256_set1_epi32(o->zy), zu = _mm256_set1_epi32(g->zu);
    __m256i corr[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256 sc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, fb[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    if (!g->rows_are_weights) {  /* per column: -zu sum_s + bias, the scale (times scale_a), the float bias */
        for (int h = 0; h < 2; h++) {
            __m256i ss = _mm256_loadu_si256((const __m256i *)(g->sum_s + j0 + 8 * h));
            corr[h] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_mullo_epi32(zu, ss));
            if (o->bias) corr[h] = _mm256_add_epi32(corr[h], _mm256_loadu_si256((const __m256i *)(o->bias + j0 + 8 * h)));
            sc[h] = o->scale_step ? _mm256_loadu_ps(o->scale + j0 + 8 * h) : _mm256_set1_ps(o->scale[0]);
            if (o->kind == QOUT_F32 && o->scale_a) sc[h] = _mm256_mul_ps(_mm256_set1_ps(*o->scale_a), sc[h]);
            if (o->kind == QOUT_F32 && o->fbias) fb[h] = _mm256_loadu_ps(o->fbias + j0 + 8 * h);
        }
    }
    if (o->kind != QOUT_F32 && o->lo == (o->kind == QOUT_U8 ? 0 : -128) && o->hi == (o->kind == QOUT_U8 ? 255 : 127)) {
        if (o->kind == QOUT_U8) store_rows_bytes(g, acc, i0, mr, j0, corr, sc, 1);
        else store_rows_bytes(g, acc, i0, mr, j0, corr, sc, 0);
        return;
    }
    for (int i = 0; i < mr; i++) {
        int64_t at = (i0 + i) * g->ldc + j0;
        if (g->rows_are_weights) {  /* per row: one correction and one scale */
            int64_t w = i0 + i;
            corr[0] = corr[1] = _mm256_set1_epi32(-g->zu * g->sum_s[w] + (o->bias ? o->bias[w] : 0));
            sc[0] = sc[1] = _mm256_set1_ps(o->scale[o->scale_step * w]);
        }
        __m256i r[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + i * QNR + 8 * h)), corr[h]);
            __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), sc[h]);
            if (o->kind == QOUT_F32) {
                if (o->fbias) f = _mm256_add_ps(f, fb[h]);
                _mm256_storeu_ps((float *)g->c + at + 8 * h, f);
                continue;
            }
            f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
            r[h] = _mm256_add_epi32(_mm256_cvtps_epi32(f), zy);
        }
        if (o->kind == QOUT_F32) {
            if (o->act.act != ACT_NONE) activate_row((float *)g->c + at, QNR, o->act);
            continue;
        }
        __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xD8);  /* 16 words in order */
        __m256i b = o->kind == QOUT_U8 ? _mm256_packus_epi16(w16, w16) : _mm256_packs_epi16(w16, w16);
        _mm_storeu_si128((__m128i *)((uint8_t *)g->c + at), _mm256_castsi256_si128(_mm256_permute4x64_epi64(b, 0x08)));
    }
}
#define HAVE_FAST_STORE 1
#else
#define HAVE_FAST_STORE 0
#endif

/* ---- AMX: the VNNI build's product over prepacked weights on tile registers ---------------------- */

/* Where the CPU has AMX-INT8 (Sapphire Rapids and later) and Linux lets the process use its tile data
   (arch_prctl ARCH_REQ_XCOMP_PERM), the VNNI build runs a prepacked product's full blocks of 32 rows
   with tdpbusd: one instruction adds 16 x 16 x 64 u8 x s8 products into int32 tiles, exact as
   vpdpbusd, 16 times vpdpbusd's work a cycle. The packed panels (panel[q][j][4], 32 columns) are its
   B tiles as they are: 16 quads of 16 columns a tile, rows 128 bytes apart. A block is 2 x 2 tiles (32
   rows, the panel's 32 columns), K in steps of 64; K's last (K mod 64) and blocks of fewer rows run on
   vpdpbusd. Every tile is loaded and stored within one item: the configuration is loaded at its start
   and released at its end, whatever else ran on the thread in between. */
#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 11
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_AMX 1
#define AMX_ROWS 32
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

static int amx_state = -1;  /* -1 not asked yet; 0 no; 1 usable */
static int amx_wanted = 1;  /* ge_qgemm_set_amx */

/* CPUID's AMX-TILE and AMX-INT8, the OS saving the tile state (XCR0 bits 17, 18), the process's permission */
static int amx_usable(void) {
    if (amx_state < 0) {
        unsigned a, b, c, d;
        int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1);
        ok = ok && __get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1);  /* OSXSAVE: xgetbv allowed */
        if (ok) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ok = (lo >> 17 & 3) == 3;
        }
        amx_state = ok && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    return amx_state;
}

/* tiles 0-3: the block's accumulators (rows 0-15 / 16-31 x columns 0-15 / 16-31); 4, 5: the two row
   halves' 64 bytes of K; 6, 7: the panel's column halves' 16 quads */
static const TileConfig tile_config = {.palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                       .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

/* (a static configuration: _tile_loadconfig's asm tells the compiler it reads 8 bytes, so that the
   stores filling a local one may be dropped) */
__attribute__((target("amx-tile,amx-int8"))) static void amx_begin(void) { _tile_loadconfig(&tile_config); }

__attribute__((target("amx-tile"))) static void amx_end(void) { _tile_release(); }

#else
#define HAVE_AMX 0
#define AMX_ROWS 1
static inline int amx_usable(void) { return 0; }
static const int amx_wanted = 0;
#endif

/* Whether ge_qgemm runs prepacked products on AMX where it can; want 0 turns it off (ge's GE_NO_AMX,
   the tests' way to the vpdpbusd path on an AMX CPU). 1 when AMX is used from now on. */
int ge_qgemm_set_amx(int want) {
#if HAVE_AMX
    amx_wanted = want;
    return want && amx_usable();
#else
    (void)want;
    return 0;
#endif
}

/* ---- the work: items are (panel group, chunk of rows) ------------------------------------------ */

typedef struct {
    const QGemm *g;
    int64_t panels, chunks, chunk_rows;
    int amx;  /* blocks of AMX_ROWS rows on AMX (prepacked weights, K >= 64) */
} QJob;

#if defined(__AVX512BW__)
/* Columns [ja, ja + len) (len <= 32) of a gathered panel whose input offsets step by s (1 or 2) from
   `base`, every quad of K: each of the quad's 4 rows of B loaded as one vector (masked: no byte past
   the run; stride 2: 64 bytes as words truncated to their even bytes), the 4 interleaved into quads
   (bytes, then 16-bit pairs) and stored masked */
static void gather_run(const QGemm *g, uint8_t *dst, int ja, int len, int64_t s, int64_t base, uint8_t flip) {
    int64_t q4 = quads(g->K);
    __m256i f = _mm256_set1_epi8((char)flip);
    __mmask32 m1 = len >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << len) - 1;
    __mmask64 m2 = len > 32 ? ~(__mmask64)0 : ((__mmask64)1 << (2 * len - 1)) - 1;
    __mmask32 mst[4];
    for (int h = 0; h < 4; h++) {
        int nb = 4 * (len - 8 * h);
        mst[h] = nb <= 0 ? 0 : nb >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << nb) - 1;
    }
    for (int64_t q = 0; q < q4; q++) {
        __m256i r[4];
        for (int t = 0; t < 4; t++) {
            int64_t k = 4 * q + t;
            if (k >= g->K) {
                r[t] = _mm256_setzero_si256();
                continue;
            }
            const uint8_t *src = g->b + g->koff[k] + base;
            __m256i v = s == 1 ? _mm256_maskz_loadu_epi8(m1, src) : _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(m2, src));
            r[t] = _mm256_xor_si256(v, f);
        }
        __m256i lo01 = _mm256_unpacklo_epi8(r[0], r[1]), hi01 = _mm256_unpackhi_epi8(r[0], r[1]);
        __m256i lo23 = _mm256_unpacklo_epi8(r[2], r[3]), hi23 = _mm256_unpackhi_epi8(r[2], r[3]);
        __m256i q0 = _mm256_unpacklo_epi16(lo01, lo23), q1 = _mm256_unpackhi_epi16(lo01, lo23);
        __m256i q2 = _mm256_unpacklo_epi16(hi01, hi23), q3 = _mm256_unpackhi_epi16(hi01, hi23);
        uint8_t *d = dst + q * QNR * 4 + 4 * ja;
        _mm256_mask_storeu_epi8(d, mst[0], _mm256_permute2x128_si256(q0, q1, 0x20));
        _mm256_mask_storeu_epi8(d + 32, mst[1], _mm256_permute2x128_si256(q2, q3, 0x20));
        _mm256_mask_storeu_epi8(d + 64, mst[2], _mm256_permute2x128_si256(q0, q1, 0x31));
        _mm256_mask_storeu_epi8(d + 96, mst[3], _mm256_permute2x128_si256(q2, q3, 0x31));
    }
}
#endif

#if QNR == 16 && defined(__AVX2__) && !defined(__AVX512BW__)
/* src[0], src[2], ..., src[30]: two loads within those 31 bytes (none past them: the input's end) */
static inline __m128i even_bytes16(const uint8_t *src) {
    const __m128i lo = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm_or_si128(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)src), lo),
                        _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(src + 15)), hi));
}
#endif

/* Panel p of the gathered u8 operand into dst (b_flip: int8 values, sign bit flipped); with `sums`,
   sums[j] = sum over k of column j */
static void gather_panel(const QGemm *g, int64_t p, uint8_t *dst, int32_t *sums) {
    int64_t q4 = quads(g->K), n0 = p * QNR;
    int nc = (int)(g->N - n0 < QNR ? g->N - n0 : QNR);
    uint8_t flip = g->b_flip ? 0x80 : 0;
    const int64_t *noff = g->noff + n0;
    if (nc < QNR) memset(dst, 0, q4 * QNR * 4);
#if defined(__AVX512BW__)
    /* the panel as runs of columns whose offsets step by 1 or 2 (one output row of a stride-1 or 2 conv) */
    for (int j = 0; j < nc;) {
        int64_t s = j + 1 < nc ? noff[j + 1] - noff[j] : 1;
        s = s == 2 ? 2 : 1;
        int len = 1;
        while (j + len < nc && noff[j + len] == noff[j] + len * s) len++;
        gather_run(g, dst, j, len, s, noff[j], flip);
        j += len;
    }
#else
    /* the panel's columns as one run of the input: step 1 (a 1x1 stride-1 conv's pixels) or, a whole
       panel, step 2 (a stride-2 conv's) */
    int contiguous = 1, step2 = nc == QNR;
    for (int j = 1; j < nc; j++) {
        contiguous &= noff[j] == noff[0] + j;
        step2 &= noff[j] == noff[0] + 2 * j;
    }
    for (int64_t q = 0; q < q4; q++) {
        uint8_t *d = dst + q * QNR * 4;
#if QNR == 16 && defined(__AVX2__)  /* (QNR is 32 only with VNNI, whose builds gather by gather_run) */
        if ((contiguous || step2) && nc == QNR && 4 * q + 3 < g->K) {
            /* 4 rows of 16 bytes into 16 quads: byte, then 16-bit interleaves */
            __m128i f = _mm_set1_epi8((char)flip), r[4];
            for (int t = 0; t < 4; t++) {
                const uint8_t *src = g->b + g->koff[4 * q + t] + noff[0];
                r[t] = _mm_xor_si128(step2 ? even_bytes16(src) : _mm_loadu_si128((const __m128i *)src), f);
            }
            __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
            __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
            _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(hi01, hi23));
            continue;
        }
#endif
        if (contiguous && 4 * q + 3 < g->K) {
            const uint8_t *s0 = g->b + g->koff[4 * q] + noff[0], *s1 = g->b + g->koff[4 * q + 1] + noff[0];
            const uint8_t *s2 = g->b + g->koff[4 * q + 2] + noff[0], *s3 = g->b + g->koff[4 * q + 3] + noff[0];
            for (int j = 0; j < nc; j++) {
                d[4 * j] = s0[j] ^ flip;
                d[4 * j + 1] = s1[j] ^ flip;
                d[4 * j + 2] = s2[j] ^ flip;
                d[4 * j + 3] = s3[j] ^ flip;
            }
            continue;
        }
        for (int t = 0; t < 4; t++) {
            int64_t k = 4 * q + t;
            if (k >= g->K) {
                for (int j = 0; j < nc; j++) d[4 * j + t] = 0;
                continue;
            }
            const uint8_t *src = g->b + g->koff[k];
            for (int j = 0; j < nc; j++) d[4 * j + t] = src[noff[j]] ^ flip;
        }
    }
#endif
    if (sums) {
        memset(sums, 0, QNR * sizeof(int32_t));
        for (int64_t q = 0; q < q4; q++)
            for (int j = 0; j < nc; j++) {
                const uint8_t *d = dst + q * QNR * 4 + 4 * j;
                sums[j] += d[0] + d[1] + d[2] + d[3];
            }
    }
}

/* A tile's accumulators (mr rows, QNR apart) stored: the zero points taken out (the rows' sums
   counted first when the weights have zero points), the store step applied */
static inline void finish_tile(const QGemm *g, int32_t *acc, int64_t i0, int mr, int64_t j0, int nc,
                               const uint8_t *const *rows, int32_t *row_sums, const int32_t *col_sums) {
    if (g->zs && !g->rows_are_weights)
        for (int i = 0; i < mr; i++) {
            int32_t s = 0;
            for (int64_t k = 0; k < g->K; k++) s += rows[i][k];
            row_sums[i] = s;
        }
#if HAVE_FAST_STORE
    if (!g->zs && g->out.kind != QOUT_I32) {
        store_tile_fast(g, acc, i0, mr, j0, nc);
        return;
    }
#endif
    store_tile(g, acc, i0, mr, j0, nc, row_sums, col_sums);
}

#if HAVE_AMX
/* Rows QMR h .. QMR h + QMR - 1 of a block's accumulators (QNR apart) stored, h < AMX_ROWS / QMR: K's last
   bytes (K mod 64) added on vpdpbusd, then finish_tile */
static inline void amx_finish(const QGemm *g, int32_t *block, int64_t i0, int h, const uint8_t *panel, int64_t j0,
                              int nc, int32_t *row_sums, const int32_t *col_sums) {
    int64_t k64 = g->K / 64 * 64;
    const uint8_t *rows[QMR];
    int32_t acc[QMR * QNR] __attribute__((aligned(64)));
    int32_t *part = block + h * QMR * QNR;
    for (int i = 0; i < QMR; i++) rows[i] = g->a + (i0 + h * QMR + i) * g->lda + k64;
    if (k64 < g->K) {
        tile(rows, g->K - k64, g->K - k64, panel + k64 / 4 * QNR * 4, 0, acc, NULL, NULL, 0, QMR, nc);
        for (int e = 0; e < QMR * QNR; e++) part[e] += acc[e];
    }
    for (int i = 0; i < QMR; i++) rows[i] -= k64;
    finish_tile(g, part, i0 + h * QMR, QMR, j0, nc, rows, row_sums, col_sums);
}

/* The panel's rows [r0, r1) in whole blocks of AMX_ROWS on the tiles (2 x 2: rows 0-15 / 16-31 x
   columns 0-15 / 16-31 in tiles 0-3, the rows' 64 bytes of K in 4 and 5, the column halves' 16 quads
   in 6 and 7); returns where the rest starts. A block's store step runs while the next block's
   products are in flight, QMR of its rows after each few steps of K: the tile unit works beside the
   vector units, so that the store (a Gelu's most) costs little beside the products. */
__attribute__((target("amx-tile,amx-int8"))) static int64_t amx_rows(const QGemm *g, const uint8_t *panel, int64_t r0,
                                                                      int64_t r1, int64_t j0, int nc, int32_t *row_sums,
                                                                      const int32_t *col_sums) {
    int32_t block[2][AMX_ROWS * QNR] __attribute__((aligned(64)));
    const int parts = AMX_ROWS / QMR;
    int64_t steps = g->K / 64, blocks = (r1 - r0) / AMX_ROWS, lda = g->lda;
    amx_begin();
    for (int64_t b = 0; b <= blocks; b++) {
        int32_t *last = block[(b + 1) & 1];  /* block b - 1's accumulators */
        int64_t last_i0 = r0 + (b - 1) * AMX_ROWS;
        int done = b > 0 ? 0 : parts;  /* of its parts stored */
        if (b < blocks) {
            const uint8_t *a = g->a + (r0 + b * AMX_ROWS) * lda;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t s = 0; s < steps; s++) {
                const uint8_t *as = a + 64 * s, *bs = panel + s * 16 * QNR * 4;
                _tile_loadd(4, as, lda);
                _tile_loadd(6, bs, QNR * 4);
                _tile_loadd(7, bs + 64, QNR * 4);
                _tile_dpbusd(0, 4, 6);
                _tile_dpbusd(1, 4, 7);
                _tile_loadd(5, as + 16 * lda, lda);
                _tile_dpbusd(2, 5, 6);
                _tile_dpbusd(3, 5, 7);
                for (int upto = (int)((s + 1) * parts / steps); done < upto; done++)
                    amx_finish(g, last, last_i0, done, panel, j0, nc, row_sums, col_sums);
            }
            int32_t *cur = block[b & 1];
            _tile_stored(0, cur, QNR * 4);
            _tile_stored(1, cur + 16, QNR * 4);
            _tile_stored(2, cur + 16 * QNR, QNR * 4);
            _tile_stored(3, cur + 16 * QNR + 16, QNR * 4);
        }
        for (; done < parts; done++) amx_finish(g, last, last_i0, done, panel, j0, nc, row_sums, col_sums);
    }
    amx_end();
    return r0 + blocks * AMX_ROWS;
}
#endif

static void qgemm_item(void *ctx, int64_t item, int slot) {
    const QJob *job = ctx;
    const QGemm *g = job->g;
    int64_t p = item % job->panels, chunk = item / job->panels;
    int64_t r0 = chunk * job->chunk_rows, r1 = r0 + job->chunk_rows < g->M ? r0 + job->chunk_rows : g->M;
    uint8_t *ws = g->ws + slot * ge_qgemm_workspace_bytes(g->K, 1);
    uint8_t *panel_buf = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    int32_t *col_sums = (int32_t *)(panel_buf + quads(g->K) * QNR * 4 * (1 + 2 * HAVE_PAIRS));
    int32_t *row_sums = col_sums + QNR;
    const uint8_t *panel;
    if (HAVE_TWINS && g->bp && g->twin_start) {  /* (builds without the twinned tile have no twins to read) */
        panel = (const uint8_t *)g->bp + g->twin_start[p] * QNR * 4;
    } else if (g->bp) {
        panel = (const uint8_t *)g->bp + p * quads(g->K) * QNR * 4 * (g->path == QPATH_PAIRS ? 2 : 1);
    } else {
        gather_panel(g, p, panel_buf, g->zs ? col_sums : NULL);
        panel = panel_buf;
#if HAVE_PAIRS
        if (g->path == QPATH_PAIRS) {  /* beside the bytes: col_sums and row_sums after both */
            int16_t *pairs = (int16_t *)(panel_buf + quads(g->K) * QNR * 4);
            quads_to_pairs(panel_buf, g->K, pairs);
            panel = (const uint8_t *)pairs;
        }
#endif
    }
    int64_t j0 = p * QNR;
    int nc = (int)(g->N - j0 < QNR ? g->N - j0 : QNR);
    int32_t acc[QMR * QNR] __attribute__((aligned(64)));
#if HAVE_AMX
    if (job->amx) r0 = amx_rows(g, panel, r0, r1, j0, nc, row_sums, col_sums);  /* whole blocks; the rest below */
#endif
#if HAVE_CONV_FUSED
    const QOut *o = &g->out;
    /* (K of 512 and more: the store is under 2% of a tile, and the fused tile measured 4% slower on
       MobileNetV2's 960 x 320 projection at v3: kept as it was) */
    int fuse = g->rows_are_weights && !g->zs && nc == QNR && g->K < 512 &&
               ((o->kind == QOUT_U8 && o->lo == 0 && o->hi == 255) || (o->kind == QOUT_S8 && o->lo == -128 && o->hi == 127));
#endif
    for (int64_t i0 = r0; i0 < r1; i0 += QMR) {
        int mr = (int)(r1 - i0 < QMR ? r1 - i0 : QMR);
        const uint8_t *rows[QMR];
        for (int i = 0; i < QMR; i++) rows[i] = g->a + (i0 + (i < mr ? i : mr - 1)) * g->lda;
#if HAVE_PAIRS
        if (g->path == QPATH_PAIRS) {
            const int16_t *rows16[QMR];
            int64_t ld16 = 4 * quads(g->K);
            for (int i = 0; i < QMR; i++) rows16[i] = g->a16 + (i0 + (i < mr ? i : mr - 1)) * ld16;
#if HAVE_CONV_FUSED
            if (fuse && mr == QMR) {
                tile_pairs_as(rows16, g->K, (const int16_t *)panel, NULL, QMR, 2, 1, g, i0, j0);
                continue;
            }
#endif
            tile16(rows16, g->K, (const int16_t *)panel, acc, mr, nc);
        } else
#endif
        {
            int64_t group = g->rows_are_weights ? i0 / QMR : p, f0 = 0, nfix = 0;
            if (g->fix_start) {
                f0 = g->fix_start[group];
                nfix = g->fix_start[group + 1] - f0;
            }
            const int32_t *fq = g->fix_start ? g->fix_q + f0 : NULL;
            const int8_t *fb = g->fix_start ? g->fix_b + f0 * (g->rows_are_weights ? QMR * 4 : QNR * 4) : NULL;
#if HAVE_CONV_FUSED
            if (fuse && mr == QMR) {  /* (the rows are the weights, padded to quads) */
                tile_bytes_as(rows[0], rows[1] - rows[0], g->K, (g->K + 3) & ~(int64_t)3, panel, 1, NULL, fq, fb, nfix,
                              QMR, 2, 1, g, i0, j0, NULL, 0);
                continue;
            }
#endif
#if HAVE_TWINS
            if (g->twin_start) {
                int64_t t0 = g->twin_start[p];
                tile_twins(rows, g->K, panel, g->twin_q + t0, g->twin_start[p + 1] - t0, acc, fq, fb, nfix, mr, nc);
            } else
#endif
            if (g->rows_are_weights) tile(rows, g->K, (g->K + 3) & ~(int64_t)3, panel, 1, acc, fq, fb, nfix, mr, nc);  /* rows padded to quads */
            else tile(rows, g->K, g->K, panel, 0, acc, fq, fb, nfix, mr, nc);
        }
        finish_tile(g, acc, i0, mr, j0, nc, rows, row_sums, col_sums);
    }
}

void ge_qgemm(const QGemm *g) {
    if (g->M <= 0 || g->N <= 0) return;
#if HAVE_PAIRS
    if (g->path == QPATH_PAIRS && !g->rows_are_weights) widen_rows(g->a, g->lda, g->M, g->K, g->a16);
#endif
    QJob job = {g, (g->N + QNR - 1) / QNR, 1, g->M, 0};
    job.amx = amx_wanted && g->bp && !g->twin_start && !g->rows_are_weights && g->path == QPATH_BYTES && g->K >= 64 &&
              g->M >= AMX_ROWS && amx_usable();
    int64_t want = (int64_t)g->threads * ITEMS_PER_THREAD, unit = job.amx ? AMX_ROWS : QMR;
    if (g->threads > 1 && job.panels < want) {  /* few panels: split the rows too */
        int64_t chunks = (want + job.panels - 1) / job.panels;
        int64_t rows = (g->M + chunks - 1) / chunks;
        rows = (rows + unit - 1) / unit * unit;
        job.chunk_rows = rows < unit ? unit : rows;
        job.chunks = (g->M + job.chunk_rows - 1) / job.chunk_rows;
    }
    pool_run(qgemm_item, &job, job.panels * job.chunks, g->threads);
}

/* ---- the depthwise convolution ------------------------------------------------------------------ */

/* Per channel (an item), the input plane is laid out in the thread's scratch as its stride phases
   (phase (r, c): the padded input's rows r, r + sh, ... and columns c, c + sw, ..., padding = the
   zero point), so that every tap reads one unit-stride run: the output's rows flat, oh rows of
   `pitch` (the phase width; the columns past ow are computed and dropped). The accumulators start at
   -zx sum(w) (the weights are centred, the input is not). */
typedef struct {
    int64_t hh, pitch, phase, nbytes, acc_at;  /* phase rows, width and size; scratch bytes; where the accumulators start */
    int64_t stage_at;  /* AVX2 builds, and narrow planes: where a copy of the input plane goes (0: none) */
    int64_t bytes_at, out_at;  /* AVX2 / AVX-512 builds, narrow planes: a channel's run requantized; a group's outputs (0: none) */
} DwLayout;

/* AVX2 builds without AVX-512BW copy the phases' rows by whole vectors (copy_row's scalar loops cost
   more than the products on the small planes of a network's late layers), reading from a copy of the
   plane with slack past it (no read past the tensor) */
#if defined(__AVX2__) && !defined(__AVX512BW__)
#define DW_STAGED 1
#else
#define DW_STAGED 0
#endif

/* Small planes (the late layers' 7x7 and 14x14) cost more in fixed work per channel than in taps: on
   AVX2 and AVX-512 builds an item is DW_GROUP channels, whose phases are filled by one vector a row (fill_narrow)
   from the tensor itself where the vector's overrun stays inside it, whose runs are requantized whole
   into bytes and their rows compacted by vector stores into the group's outputs, copied out at once
   (requantized into bytes, planes of 16 pixels and more take the float32 path below instead) */
#define DW_GROUP 8
#if defined(__AVX2__)
#define DW_NARROW 1
#else
#define DW_NARROW 0
#endif

#if DW_NARROW
static inline int dw_narrow(const QDepthwise *d, int64_t pitch) {
    return d->sw <= 2 && d->sh <= 4 && pitch <= 32 / d->sw && d->pl <= 32;
}
#endif

static DwLayout dw_layout(const QDepthwise *d) {
    DwLayout l;
    int64_t hp = (d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1, wp = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1;
    l.hh = (hp + d->sh - 1) / d->sh;
    l.pitch = (wp + d->sw - 1) / d->sw;
    l.phase = l.hh * l.pitch;
    l.acc_at = (d->sh * d->sw * l.phase + l.pitch + 64 + 63) / 64 * 64;  /* a row and 64 bytes of slack: the last taps' overrun */
    l.nbytes = l.acc_at + (d->oh * l.pitch + 32) * 4 + 64;
    l.stage_at = l.bytes_at = l.out_at = 0;
    int narrow = 0;
#if DW_NARROW
    narrow = dw_narrow(d, l.pitch);
    if (narrow) {  /* the run's bytes (16 past it: whole vectors; 32 read past a last row) */
        l.bytes_at = (l.nbytes + 63) / 64 * 64;
        l.out_at = (l.bytes_at + d->oh * l.pitch + 32 + 63) / 64 * 64;
        l.nbytes = l.out_at + DW_GROUP * d->oh * d->ow + 32;  /* a row's store runs up to 32 bytes past */
    }
#endif
    if (DW_STAGED || narrow) {
        l.stage_at = (l.nbytes + 63) / 64 * 64 + 64;  /* 64 bytes of slack before the plane, 64 after */
        l.nbytes = l.stage_at + d->height * d->width + 64;
    }
    return l;
}

/* acc[0, run) = corr + sum over the taps of tap[t][j] * wt[t]. Blocks of outputs stay in registers
   through all taps; the last block runs past `run` into the scratch's slack (the accumulators' 32
   spare lanes, the phases' spare row and 64 bytes). With SSE4.1 / AVX2 / AVX-512 the taps go in pairs: their
   bytes interleaved and widened to int16, vpmaddwd (vpdpwssd with VNNI) adds x0 w0 + x1 w1 into
   int32 (|w| <= 255: exact), an odd last tap paired with itself at weight 0. */
static void dw_taps(const uint8_t *base, const int64_t *tap_at, const int16_t *wt, int64_t taps, int32_t corr,
                    int64_t run, int32_t *acc) {
#if defined(__AVX512BW__) || defined(__AVX2__) || defined(__SSE4_1__)
    /* tap t reads base + tap_at[t] (built from arrays written long before: a table of pointers just
       stored, read back as vectors, stalls on store forwarding) */
    const uint8_t *t0[32], *t1[32];
    int32_t wpair[32];
    int64_t pairs = (taps + 1) / 2;
    for (int64_t p = 0; p < pairs; p++) {
        int has2 = 2 * p + 1 < taps;
        t0[p] = base + tap_at[2 * p];
        t1[p] = base + tap_at[2 * p + has2];
        wpair[p] = (int32_t)((uint32_t)(uint16_t)wt[2 * p] | (uint32_t)(uint16_t)(has2 ? wt[2 * p + 1] : 0) << 16);
    }
#endif
#if defined(__AVX512BW__)
    /* 32 outputs: lo holds outputs 0-7 and 16-23, hi 8-15 and 24-31 (the unpacks work per 128-bit lane) */
    for (int64_t j = 0; j < run; j += 32) {
        __m512i lo = _mm512_set1_epi32(corr), hi = lo;
        for (int64_t p = 0; p < pairs; p++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(t0[p] + j));
            __m256i b = _mm256_loadu_si256((const __m256i *)(t1[p] + j));
            __m512i w = _mm512_set1_epi32(wpair[p]);
            __m512i xl = _mm512_cvtepu8_epi16(_mm256_unpacklo_epi8(a, b));
            __m512i xh = _mm512_cvtepu8_epi16(_mm256_unpackhi_epi8(a, b));
#if defined(__AVX512VNNI__)
            lo = _mm512_dpwssd_epi32(lo, xl, w);
            hi = _mm512_dpwssd_epi32(hi, xh, w);
#else
            lo = _mm512_add_epi32(lo, _mm512_madd_epi16(xl, w));
            hi = _mm512_add_epi32(hi, _mm512_madd_epi16(xh, w));
#endif
        }
        _mm256_storeu_si256((__m256i *)(acc + j), _mm512_castsi512_si256(lo));
        _mm256_storeu_si256((__m256i *)(acc + j + 8), _mm512_castsi512_si256(hi));
        _mm256_storeu_si256((__m256i *)(acc + j + 16), _mm512_extracti64x4_epi64(lo, 1));
        _mm256_storeu_si256((__m256i *)(acc + j + 24), _mm512_extracti64x4_epi64(hi, 1));
    }
#elif defined(__AVX2__)
    /* 32 outputs: the two taps' bytes interleaved, then widened by interleaving with zeros (in-lane
       shuffles only); s[0] holds outputs 0-3 and 16-19, s[1] 4-7 and 20-23, s[2] 8-11 and 24-27, s[3]
       12-15 and 28-31 */
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t j = 0; j < run; j += 32) {
        __m256i s[4];
        for (int h = 0; h < 4; h++) s[h] = _mm256_set1_epi32(corr);
        for (int64_t p = 0; p < pairs; p++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(t0[p] + j));
            __m256i b = _mm256_loadu_si256((const __m256i *)(t1[p] + j));
            __m256i w = _mm256_set1_epi32(wpair[p]);
            __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
            s[0] = _mm256_add_epi32(s[0], _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), w));
            s[1] = _mm256_add_epi32(s[1], _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), w));
            s[2] = _mm256_add_epi32(s[2], _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), w));
            s[3] = _mm256_add_epi32(s[3], _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), w));
        }
        _mm256_storeu_si256((__m256i *)(acc + j), _mm256_permute2x128_si256(s[0], s[1], 0x20));
        _mm256_storeu_si256((__m256i *)(acc + j + 8), _mm256_permute2x128_si256(s[2], s[3], 0x20));
        _mm256_storeu_si256((__m256i *)(acc + j + 16), _mm256_permute2x128_si256(s[0], s[1], 0x31));
        _mm256_storeu_si256((__m256i *)(acc + j + 24), _mm256_permute2x128_si256(s[2], s[3], 0x31));
    }
#elif defined(__SSE4_1__)
    const __m128i zero = _mm_setzero_si128();
    for (int64_t j = 0; j < run; j += 16) {  /* 16 outputs: s[h] holds outputs 4h-4h+3 */
        __m128i s[4];
        for (int h = 0; h < 4; h++) s[h] = _mm_set1_epi32(corr);
        for (int64_t p = 0; p < pairs; p++) {
            __m128i a = _mm_loadu_si128((const __m128i *)(t0[p] + j));
            __m128i b = _mm_loadu_si128((const __m128i *)(t1[p] + j));
            __m128i w = _mm_set1_epi32(wpair[p]);
            __m128i lo = _mm_unpacklo_epi8(a, b), hi = _mm_unpackhi_epi8(a, b);
            s[0] = _mm_add_epi32(s[0], _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), w));
            s[1] = _mm_add_epi32(s[1], _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), w));
            s[2] = _mm_add_epi32(s[2], _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), w));
            s[3] = _mm_add_epi32(s[3], _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), w));
        }
        for (int h = 0; h < 4; h++) _mm_storeu_si128((__m128i *)(acc + j + 4 * h), s[h]);
    }
#else
    for (int64_t j = 0; j < run; j += 16) {
        int32_t a[16];
        for (int k = 0; k < 16; k++) a[k] = corr;
        for (int64_t t = 0; t < taps; t++) {
            const uint8_t *src = base + tap_at[t] + j;
            int32_t wv = wt[t];
            for (int k = 0; k < 16; k++) a[k] += (int32_t)src[k] * wv;
        }
        memcpy(acc + j, a, sizeof a);
    }
#endif
}

/* dst[j] = src[j * sw] ^ flip for j < n (reading no byte past src[(n - 1) * sw]) */
static inline void copy_row(uint8_t *dst, const uint8_t *src, int64_t n, int64_t sw, uint8_t flip) {
#if defined(__AVX512BW__)
    if (sw == 1) {
        __m512i f = _mm512_set1_epi8((char)flip);
        for (int64_t j = 0; j < n; j += 64) {
            __mmask64 m = n - j >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - j)) - 1;
            _mm512_mask_storeu_epi8(dst + j, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + j), f));
        }
        return;
    }
    if (sw == 2) {  /* 64 bytes as 32 words, truncated to their low (even) bytes */
        __m256i f = _mm256_set1_epi8((char)flip);
        for (int64_t j = 0; j < n; j += 32) {
            int64_t left = n - j;
            __mmask64 m = left > 32 ? ~(__mmask64)0 : ((__mmask64)1 << (2 * left - 1)) - 1;
            __mmask32 ms = left >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << left) - 1;
            __m256i even = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(m, src + 2 * j));
            _mm256_mask_storeu_epi8(dst + j, ms, _mm256_xor_si256(even, f));
        }
        return;
    }
#endif
    if (sw == 1)
        for (int64_t j = 0; j < n; j++) dst[j] = src[j] ^ flip;
    else if (sw == 2)  /* a constant stride: vectorized */
        for (int64_t j = 0; j < n; j++) dst[j] = src[2 * j] ^ flip;
    else
        for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw] ^ flip;
}

/* the columns j of phase column cc whose input column j * sw + cc - pl is inside the row: [*j0, *j1) */
static inline void phase_columns(const QDepthwise *d, int64_t pitch, int64_t cc, int64_t *j0, int64_t *j1) {
    int64_t a = d->pl - cc > 0 ? (d->pl - cc + d->sw - 1) / d->sw : 0;
    int64_t b = (d->width - 1 + d->pl - cc) / d->sw + 1;
    b = d->width - 1 + d->pl - cc < 0 ? 0 : b < pitch ? b : pitch;
    *j0 = a < b ? a : b;
    *j1 = b;
}

/* a phase row all padding (AVX2 builds: by 32-byte stores, running past its end as fill_row's) */
static inline void pad_row(uint8_t *dst, int64_t pitch, uint8_t zx) {
#if DW_STAGED
    const __m256i z = _mm256_set1_epi8((char)zx);
    for (int64_t j = 0; j < pitch; j += 32) _mm256_storeu_si256((__m256i *)(dst + j), z);
#else
    memset(dst, zx, pitch);
#endif
}

/* A phase row: zx, then src[0], src[sw], ... ^ flip in columns [j0, j1), then zx. AVX2 builds read a
   copy of the plane with 64 bytes of slack past it and copy by 32-byte vectors (stride 2: the even
   bytes of 32 picked per 16 columns), the stores running past the row's end into the next row, written
   after it (phases and rows in memory order; past the last one, the spare row, set after, and the
   slack): copy_row's scalar loops cost more than the products on a network's small late planes. */
static inline void fill_row(uint8_t *dst, const uint8_t *src, int64_t j0, int64_t j1, int64_t pitch, int64_t sw,
                            uint8_t flip, uint8_t zx) {
#if DW_STAGED
    const __m256i f = _mm256_set1_epi8((char)flip);
    int64_t n = j1 - j0;
    if (sw == 1)
        for (int64_t j = 0; j < n; j += 32)
            _mm256_storeu_si256((__m256i *)(dst + j0 + j), _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(src + j)), f));
    else if (sw == 2) {
        const __m256i evens = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1,
                                               0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
        for (int64_t j = 0; j < n; j += 16) {
            __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(src + 2 * j)), evens);
            v = _mm256_permute4x64_epi64(v, 0x08);  /* the two lanes' 8 bytes together */
            _mm_storeu_si128((__m128i *)(dst + j0 + j), _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_castsi256_si128(f)));
        }
    } else
        copy_row(dst + j0, src, n, sw, flip);
    for (int64_t j = 0; j < j0; j++) dst[j] = zx;
    for (int64_t j = j1; j < pitch; j++) dst[j] = zx;
#else
    for (int64_t j = 0; j < j0; j++) dst[j] = zx;  /* a pad or two: no memset call */
    for (int64_t j = j1; j < pitch; j++) dst[j] = zx;
    copy_row(dst + j0, src, j1 - j0, sw, flip);
#endif
}

#if DW_NARROW
/* what fill_narrow needs of the geometry, the same for every channel: per phase column the columns
   to keep, per phase row r the rows [rows[r][0], rows[r][1]) inside the plane (input row i * sh + r - pt) */
static void narrow_plan(const QDepthwise *d, DwLayout l, uint8_t keep[2][32], int64_t rows[4][2]) {
    for (int64_t cc = 0; cc < d->sw; cc++) {
        int64_t j0, j1;
        phase_columns(d, l.pitch, cc, &j0, &j1);
        for (int64_t j = 0; j < 32; j++) keep[cc][j] = j >= j0 && j < j1 ? 0xFF : 0;
    }
    for (int64_t r = 0; r < d->sh; r++) {
        int64_t i0 = d->pt - r > 0 ? (d->pt - r + d->sh - 1) / d->sh : 0, i1 = (d->height - 1 + d->pt - r) / d->sh + 1;
        i1 = d->height - 1 + d->pt - r < 0 ? 0 : i1 < l.hh ? i1 : l.hh;
        rows[r][0] = i0 < i1 ? i0 : i1;
        rows[r][1] = i1;
    }
}

/* The phases of a plane whose phase rows fit one vector (pitch <= 32 at stride 1, 16 at stride 2; the
   late layers' 7x7 and 14x14 planes): each row one load from the plane (read in place, or staged at the
   tensor's ends: the loads reach 32 bytes either side of it), the padding blended in under the phase's
   mask of columns [j0, j1), one store running past the row's end as fill_row's. */
static void fill_narrow(const QDepthwise *d, DwLayout l, const uint8_t keep[2][32], const int64_t rows[4][2],
                        const uint8_t *stage, uint8_t *ph, uint8_t flip, uint8_t zx) {
    const __m256i f = _mm256_set1_epi8((char)flip), z = _mm256_set1_epi8((char)zx);
    const __m256i evens = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1,
                                           0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    /* the geometry in locals: the stores (may_alias vectors) would make it reloaded from d every row */
    const int64_t sh = d->sh, sw = d->sw, width = d->width, pitch = l.pitch, hh = l.hh;
    for (int64_t r = 0; r < sh; r++) {
        int64_t i0 = rows[r][0], i1 = rows[r][1];
        for (int64_t cc = 0; cc < sw; cc++) {
            uint8_t *dst = ph + (r * sw + cc) * l.phase;
            const __m256i k = _mm256_loadu_si256((const __m256i *)keep[cc]);
            const uint8_t *src = stage + (i0 * sh + r - d->pt) * width + cc - d->pl;  /* column j: src[j * sw] */
            int64_t i = 0;
            for (; i < i0; i++) _mm256_storeu_si256((__m256i *)(dst + i * pitch), z);
            if (sw == 2)
                for (; i < i1; i++, src += sh * width) {
                    __m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)src), evens), 0x08);
                    _mm256_storeu_si256((__m256i *)(dst + i * pitch), _mm256_blendv_epi8(z, _mm256_xor_si256(v, f), k));
                }
            else
                for (; i < i1; i++, src += sh * width) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)src);
                    _mm256_storeu_si256((__m256i *)(dst + i * pitch), _mm256_blendv_epi8(z, _mm256_xor_si256(v, f), k));
                }
            for (; i < hh; i++) _mm256_storeu_si256((__m256i *)(dst + i * pitch), z);
        }
    }
    _mm256_storeu_si256((__m256i *)(ph + d->sh * d->sw * l.phase), z);  /* the spare row */
}

/* store_row for weight index w (one bias, one scale) into bytes over the whole 8-bit range, 16 at a
   time as store_tile_fast stores (round, then saturate by the packs; the same bytes), reading acc up
   to 15 past n (the accumulators' spare lanes); 0 when the output is another kind (store_row's then) */
static inline int out_is_bytes(const QOut *o) {
    int u8 = o->kind == QOUT_U8;
    return (o->kind == QOUT_U8 || o->kind == QOUT_S8) && o->lo == (u8 ? 0 : -128) && o->hi == (u8 ? 255 : 127);
}

/* whole: y has room for every vector's 16 bytes (up to 15 past n) */
static inline __attribute__((always_inline)) int store_row_bytes(const QOut *o, int64_t w, const int32_t *acc,
                                                                 int64_t n, uint8_t *y, int whole) {
    int u8 = o->kind == QOUT_U8;
    if (!out_is_bytes(o))
        return 0;
    const __m256i bias = _mm256_set1_epi32(o->bias ? o->bias[w] : 0), zy16 = _mm256_set1_epi16((int16_t)o->zy);
    const __m256 sc = _mm256_set1_ps(o->scale[o->scale_step ? w : 0]), top = _mm256_set1_ps(2147483520.0f);
    for (int64_t j = 0; j < n; j += 16) {
        __m256i r0 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)), bias);
        __m256i r1 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j + 8)), bias);
        r0 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(r0), sc), top));
        r1 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(r1), sc), top));
        __m256i w16 = _mm256_adds_epi16(_mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8), zy16);
        __m256i b = u8 ? _mm256_packus_epi16(w16, w16) : _mm256_packs_epi16(w16, w16);
        __m128i v = _mm256_castsi256_si128(_mm256_permute4x64_epi64(b, 0x08));
        if (whole || n - j >= 16) {
            _mm_storeu_si128((__m128i *)(y + j), v);
        } else {  /* no byte past n: the next plane's may be another thread's */
            uint8_t part[16];
            _mm_storeu_si128((__m128i *)part, v);
            for (int64_t k = 0; k < n - j; k++) y[j + k] = part[k];
        }
    }
    return 1;
}
#endif

typedef struct {
    const QDepthwise *d;
    DwLayout l;
    int64_t tap_at[64];  /* where each tap's run starts in the phases: the same for every channel */
    int64_t group;  /* channels an item */
    int narrow, grouped;  /* AVX2 / AVX-512 builds: fill_narrow's phases; the group's outputs compacted in the scratch */
    uint8_t keep[2][32];  /* fill_narrow's columns to keep, per phase column, */
    int64_t rows[4][2];  /* and rows inside the plane, per phase row (narrow_plan) */
} DwJob;

/* channel c (slot's scratch); grouped: its bytes at out (the group's outputs, rows stored by vectors) */
static inline __attribute__((always_inline)) void qdepthwise_channel(const DwJob *job, int64_t c, int slot, uint8_t *out) {
    const QDepthwise *d = job->d;
    DwLayout l = job->l;
    uint8_t *ph = d->ws + slot * l.nbytes;
    int32_t *acc = (int32_t *)(ph + l.acc_at);
    int64_t plane = d->height * d->width;
    const uint8_t *x = d->x + c * plane;
    uint8_t flip = d->x_flip ? 0x80 : 0, zx = (uint8_t)d->zx;
#if DW_NARROW
    if (job->narrow) {  /* the rows' loads reach 32 bytes either side of the plane: staged at the tensor's ends */
        if (c * plane < 64 || (c + 1) * plane + 64 > d->channels * plane) {
            memcpy(ph + l.stage_at, x, plane);
            x = ph + l.stage_at;
        }
        fill_narrow(d, l, job->keep, job->rows, x, ph, flip, zx);
    } else {
#else
    {
#endif
#if DW_STAGED
        memcpy(ph + l.stage_at, x, plane);
        x = ph + l.stage_at;
#endif
    /* the phases: row i of phase (r, cc) is padded row i * sh + r, its column j padded column j * sw + cc */
    for (int64_t r = 0; r < d->sh; r++)
        for (int64_t cc = 0; cc < d->sw; cc++) {
            uint8_t *dst = ph + (r * d->sw + cc) * l.phase;
            int64_t j0, j1;
            phase_columns(d, l.pitch, cc, &j0, &j1);
            for (int64_t i = 0, y = r - d->pt; i < l.hh; i++, dst += l.pitch, y += d->sh) {
                if (y < 0 || y >= d->height || j0 == j1) pad_row(dst, l.pitch, zx);
                else fill_row(dst, x + y * d->width + j0 * d->sw + cc - d->pl, j0, j1, l.pitch, d->sw, flip, zx);
            }
        }
    pad_row(ph + d->sh * d->sw * l.phase, l.pitch, zx);  /* the spare row */
    }
    const int16_t *w = d->w + c * d->kh * d->kw;
    int64_t run = d->oh * l.pitch;
    int32_t corr = -(int32_t)d->zx * d->wsum[c];
    dw_taps(ph, job->tap_at, w, d->kh * d->kw, corr, run, acc);
    int64_t n = d->oh * d->ow;
#if DW_NARROW
    if (out) {  /* the whole run requantized, then its rows' first ow bytes stored by vectors, in order */
        uint8_t *b = ph + l.bytes_at;
        const int64_t oh = d->oh, ow = d->ow, pitch = l.pitch;  /* locals: not reloaded after each store */
        store_row_bytes(&d->out, c, acc, run, b, 1);
        if (ow <= 8)
            for (int64_t oy = 0; oy < oh; oy++)
                _mm_storel_epi64((__m128i *)(out + oy * ow), _mm_loadl_epi64((const __m128i *)(b + oy * pitch)));
        else if (ow <= 16)
            for (int64_t oy = 0; oy < oh; oy++)
                _mm_storeu_si128((__m128i *)(out + oy * ow), _mm_loadu_si128((const __m128i *)(b + oy * pitch)));
        else
            for (int64_t oy = 0; oy < oh; oy++)
                _mm256_storeu_si256((__m256i *)(out + oy * ow), _mm256_loadu_si256((const __m256i *)(b + oy * pitch)));
        return;
    }
#else
    (void)out;
#endif
    if (l.pitch != d->ow)  /* the rows' runs together: store_row works best on long runs */
        for (int64_t oy = 1; oy < d->oh; oy++) {
#if DW_STAGED  /* forward, 8 at a time (the source is past the destination), the tail masked: no call */
            int32_t *to = acc + oy * d->ow;
            const int32_t *from = acc + oy * l.pitch;
            int64_t j = 0;
            for (; j + 8 <= d->ow; j += 8)
                _mm256_storeu_si256((__m256i *)(to + j), _mm256_loadu_si256((const __m256i *)(from + j)));
            if (j < d->ow) {
                __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(d->ow - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                _mm256_maskstore_epi32(to + j, m, _mm256_maskload_epi32(from + j, m));
            }
#else
            memmove(acc + oy * d->ow, acc + oy * l.pitch, d->ow * sizeof(int32_t));
#endif
        }
#if DW_STAGED
    if (store_row_bytes(&d->out, c, acc, n, (uint8_t *)d->y + c * n, 0))
        return;
#endif
    for (int64_t j0 = 0; j0 < n; j0 += 1024)
        store_row(&d->out, c, 0, acc + j0, (int)(n - j0 < 1024 ? n - j0 : 1024), d->y, c * n + j0);
}

static void qdepthwise_item(void *ctx, int64_t item, int slot) {
    const DwJob *job = ctx;
    const QDepthwise *d = job->d;
    int64_t c0 = item * job->group, c1 = c0 + job->group < d->channels ? c0 + job->group : d->channels;
    if (!job->grouped) {
        for (int64_t c = c0; c < c1; c++) qdepthwise_channel(job, c, slot, NULL);
        return;
    }
    int64_t n = d->oh * d->ow;
    uint8_t *out = d->ws + slot * job->l.nbytes + job->l.out_at;
    for (int64_t c = c0; c < c1; c++) qdepthwise_channel(job, c, slot, out + (c - c0) * n);
    memcpy((uint8_t *)d->y + c0 * n, out, (c1 - c0) * n);
}

#if DW_NARROW
/* ---- the depthwise convolution in float32, by groups of 16 channels ----
   The products of bytes and centred weights, x <= 255 and |w| <= 255, are integers below 2^16 and their
   sums over up to 64 taps below 2^22: in float32 every FMA of them is exact, and float32 computes the
   int32 accumulator of the integer kernels. An item is BLK (16) channels and a band of output rows: their
   input rows transposed into a channel-interleaved plane of floats inside its padding (zx; -zx sum(w)
   joins the bias), nchwc_depthwise.c's tiles over it (with d->wf, the weights in its layout), then each
   output pixel's 16 accumulators requantized as store_row_bytes does and transposed back into the
   channels' planes. Taken for outputs requantized into bytes over the whole range (the others, and
   planes under 16 pixels, run the per-channel kernel above).
   No fixed work per channel: on the late layers' 7x7 and 14x14 planes the per-channel kernel's
   phases and runs had cost more than the products. */
#include "nchwc.h"

#define DWF_BAND_PIXELS 512  /* output pixels a band, at least (its input rows past the band read twice) */
#define DWF_EXACT_BIAS 12615616  /* 2^24 - 64 * 255^2: a bias (-zx sum(w) in it) no larger keeps acc + bias exact in float32 */

typedef struct {
    const QDepthwise *d;
    int64_t band_rows, bands;  /* output rows per band at most (the rows split evenly) and bands per group */
    int64_t pitch;  /* the padded input's width: the columns the outputs read, and at least pl + width */
    int64_t y_at, b_at, sink_at, nbytes;  /* a slot's scratch: the padded input at 0, the outputs, the bias, */
} DwfJob;                                  /* where the missing channels of a last group are stored */

/* The output rows split into bands of DWF_BAND_PIXELS or more (or the plane): how many, and rows a band at most */
static void dw_bands(const QDepthwise *d, int64_t *bands, int64_t *band_rows) {
    *bands = *band_rows = 1;
    if (d->oh > 0 && d->ow > 0) {
        int64_t rows = (DWF_BAND_PIXELS + d->ow - 1) / d->ow;  /* a band: at least these rows (or the plane) */
        *bands = d->oh / (rows < d->oh ? rows : d->oh);
        *band_rows = (d->oh + *bands - 1) / *bands;
    }
}

/* An item of the paths over channel-interleaved planes: BLK channels from c0 (nc of them real) and the
   output rows [oy0, oy1), which read the padded input rows of a plane of hp rows: the input rows [r0,
   r1) at its row top (channel c's from src[c]); channel c's outputs go to dst[c] (past the channels: the
   last one's input again, stored in the sink) */
typedef struct {
    int64_t c0, oy0, oy1, hp, r0, r1, top;
    int nc;
    const uint8_t *src[BLK];
    uint8_t *dst[BLK];
} DwBand;

static void dw_band(const QDepthwise *d, int64_t bands, int64_t item, uint8_t *sink, DwBand *b) {
    int64_t plane = d->height * d->width, n = d->oh * d->ow;
    if (bands == 1) {  /* a plane a band (every plane under DWF_BAND_PIXELS): no divisions, 4% of a 7 x 7 item */
        b->c0 = item * BLK, b->oy0 = 0, b->oy1 = d->oh;
    } else {
        int64_t band = item % bands;
        b->c0 = item / bands * BLK;
        b->oy0 = band * d->oh / bands, b->oy1 = (band + 1) * d->oh / bands;
    }
    b->nc = (int)(d->channels - b->c0 < BLK ? d->channels - b->c0 : BLK);
    b->hp = (b->oy1 - b->oy0 - 1) * d->sh + (d->kh - 1) * d->dh + 1;
    int64_t r0 = b->oy0 * d->sh - d->pt, r1 = r0 + b->hp;  /* the padded rows' input rows, those inside read */
    b->top = r0 < 0 ? -r0 : 0;
    b->r0 = r0 < 0 ? 0 : r0;
    r1 = r1 > d->height ? d->height : r1;
    b->r1 = r1 < b->r0 ? b->r0 : r1;
    /* from locals: b's pointers, stored, may alias d's and b's fields, which GCC had reloaded every
       channel (1% of a 7 x 7 item's instructions) */
    const uint8_t *x = d->x + b->c0 * plane + b->r0 * d->width;
    uint8_t *y = (uint8_t *)d->y + b->c0 * n + b->oy0 * d->ow;
    const int nc = b->nc;
    for (int c = 0; c < BLK; c++) {
        b->src[c] = x + (c < nc ? c : nc - 1) * plane;
        b->dst[c] = c < nc ? y + c * n : sink;
    }
}

static DwfJob dwf_job(const QDepthwise *d) {
    DwfJob j = {d, 1, 1, 0, 0, 0, 0, 0};
    dw_bands(d, &j.bands, &j.band_rows);
    int64_t rows = j.band_rows;
    int64_t hp = (rows - 1) * d->sh + (d->kh - 1) * d->dh + 1, wp = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1;
    j.pitch = wp > d->pl + d->width ? wp : d->pl + d->width;
    j.y_at = (hp * j.pitch * BLK * 4 + 63) / 64 * 64;
    j.b_at = j.y_at + (rows * d->ow * BLK * 4 + 63) / 64 * 64;
    j.sink_at = j.b_at + BLK * 4;
    j.nbytes = j.sink_at + rows * d->ow;
    return j;
}

/* Whether the float path takes d: requantized into bytes, a plane of at least 16 pixels (its stores) */
static int dwf_takes(const QDepthwise *d) {
    return out_is_bytes(&d->out) && d->oh * d->ow >= 16;
}

/* r[i] = [row i | row i + 8] of a 16 x 16 byte matrix -> r[k] = [columns 2k and 2k + 1, rows 0-7 |
   the same columns, rows 8-15] (8 bytes each) */
static inline __attribute__((always_inline)) void transpose_16x16(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi8(r[2 * i], r[2 * i + 1]);  /* rows 2i, 2i + 1: columns 0-7 */
        t[2 * i + 1] = _mm256_unpackhi_epi8(r[2 * i], r[2 * i + 1]);  /* columns 8-15 */
    }
    for (int h = 0; h < 2; h++)  /* rows 4h .. 4h + 3: columns 0-3, 4-7, 8-11, 12-15 */
        for (int q = 0; q < 2; q++) {
            u[4 * h + 2 * q] = _mm256_unpacklo_epi16(t[4 * h + q], t[4 * h + 2 + q]);
            u[4 * h + 2 * q + 1] = _mm256_unpackhi_epi16(t[4 * h + q], t[4 * h + 2 + q]);
        }
    for (int q = 0; q < 4; q++) {  /* rows 0-7: columns 4q, 4q + 1 and 4q + 2, 4q + 3 */
        r[2 * q] = _mm256_unpacklo_epi32(u[q], u[4 + q]);
        r[2 * q + 1] = _mm256_unpackhi_epi32(u[q], u[4 + q]);
    }
}

static inline void pad_pixels(float *p, int64_t n, __m256 v) {
    for (int64_t j = 0; j < n; j++) {
        _mm256_storeu_ps(p + j * BLK, v);
        _mm256_storeu_ps(p + j * BLK + 8, v);
    }
}

/* 16 channels' 16 bytes from q (channel c's at src[c] + q), x ^ f, as transpose_16x16 takes them */
static inline __attribute__((always_inline)) void dwf_load16(const uint8_t *const src[16], int64_t q, __m256i f, __m256i r[8]) {
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_xor_si256(_mm256_loadu2_m128i((const __m128i *)(src[i + 8] + q), (const __m128i *)(src[i] + q)), f);
}

/* The input rows [r0, r1) of 16 channels (channel c's at src[c], row by row) into the padded plane xp,
   [row][pitch][16] floats x ^ flip, input row r0 at xp's row top, column 0 at column pl; zx around (the
   padding: xp has hp rows). The rows are taken as one run of pixels, 16 at a time. */
static void dwf_gather(const QDepthwise *d, const uint8_t *const src[16], int64_t r0, int64_t r1, int64_t top,
                       int64_t hp, int64_t pitch, float *xp) {
    const int64_t width = d->width, pl = d->pl, n = (r1 - r0) * width, skip = (pitch - width) * BLK;
    const __m256 zx = _mm256_set1_ps((float)d->zx);
    pad_pixels(xp, top * pitch, zx);
    for (int64_t i = top; i < top + r1 - r0; i++) {
        pad_pixels(xp + i * pitch * BLK, pl, zx);
        pad_pixels(xp + (i * pitch + pl + width) * BLK, pitch - pl - width, zx);
    }
    pad_pixels(xp + (top + r1 - r0) * pitch * BLK, (hp - top - (r1 - r0)) * pitch, zx);
    const uint8_t flip = d->x_flip ? 0x80 : 0;
    if (n < 16) {  /* a few pixels in wide padding */
        for (int64_t p = 0; p < n; p++)
            for (int c = 0; c < BLK; c++) xp[((top + p / width) * pitch + pl + p % width) * BLK + c] = (float)(src[c][p] ^ flip);
        return;
    }
    const __m256i f = _mm256_set1_epi8((char)flip);
    __m256i r[8];
    dwf_load16(src, 0, f, r);
    for (int64_t p0 = 0; p0 < n; p0 += 16) {
        int64_t q = p0 + 16 <= n ? p0 : n - 16;  /* the last 16 again: no load past the rows */
        transpose_16x16(r);
        /* pixel k's channels 0-7 at t[k / 2][8 (k % 2)], 8-15 16 bytes on, widened by loads (vpmovzxbd from
           memory: no extract or shift; the barrier keeps GCC from taking them from the registers again) */
        uint8_t t[8][32] __attribute__((aligned(32)));
        for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)t[k], r[k]);
        __asm__ volatile("" : : "r"(t) : "memory");
        if (p0 + 16 < n)  /* the next 16 pixels' bytes loaded before this run's stores: 3% of a layer */
            dwf_load16(src, p0 + 32 <= n ? p0 + 16 : n - 16, f, r);
        int64_t col = q % width;
        float *o = xp + ((top + q / width) * pitch + pl + col) * BLK;
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
            const uint8_t *b = t[k / 2] + 8 * (k % 2);
            _mm256_storeu_ps(o, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)b))));
            _mm256_storeu_ps(o + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 16)))));
            o += BLK;
            if (++col == width) col = 0, o += skip;
        }
    }
}

/* Two vectors of int32 sums (the bias in them) requantized as store_row_bytes does, by the scales s0
   and s1, as int16 in packs' order (a0's 0-3, a1's 0-3 | a0's 4-7, a1's 4-7) */
static inline __attribute__((always_inline)) __m256i dwq_requant(__m256i a0, __m256i a1, __m256 s0, __m256 s1, __m256i zy16) {
    const __m256 top = _mm256_set1_ps(2147483520.0f);
    __m256i r0 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a0), s0), top));
    __m256i r1 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a1), s1), top));
    return _mm256_adds_epi16(_mm256_packs_epi32(r0, r1), zy16);
}

/* A pixel's 16 float accumulators a0, a1 requantized as store_row_bytes does, as int16 in packs' order
   (channels 0-3, 8-11 | 4-7, 12-15). FOLDED: the bias is in them already (exact, DWF_EXACT_BIAS) and
   the scales at most 127 in size: |acc scale| < 2^31, never past the clamp below 2^31; else the bias
   added in int32, as the integer kernels add it */
static inline __attribute__((always_inline)) __m256i dwf_requant2(__m256 a0, __m256 a1, const int FOLDED, __m256i b0,
                                                                  __m256i b1, __m256 s0, __m256 s1, __m256i zy16) {
    if (!FOLDED)
        return dwq_requant(_mm256_add_epi32(_mm256_cvttps_epi32(a0), b0), _mm256_add_epi32(_mm256_cvttps_epi32(a1), b1), s0, s1, zy16);
    a0 = _mm256_mul_ps(a0, s0), a1 = _mm256_mul_ps(a1, s1);
    return _mm256_adds_epi16(_mm256_packs_epi32(_mm256_cvtps_epi32(a0), _mm256_cvtps_epi32(a1)), zy16);
}

static inline __attribute__((always_inline)) __m256i dwf_requant(const float *acc, const int FOLDED, __m256i b0,
                                                                 __m256i b1, __m256 s0, __m256 s1, __m256i zy16) {
    return dwf_requant2(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + 8), FOLDED, b0, b1, s0, s1, zy16);
}

/* 16 output pixels' bytes, r[i] = [pixel i's | pixel i + 8's] as packs orders dwf_requant2's int16 (channels
   0-3, 8-11 then 4-7, 12-15 of each), transposed into the channels' rows dst[c][q .. q + 15] */
static inline __attribute__((always_inline)) void dw_store16(__m256i r[8], int64_t q, uint8_t *const dst[16]) {
    transpose_16x16(r);
    for (int m = 0; m < 8; m++) {  /* channel A[m]: column m (pixels 0-7) and m + 8 (8-15); B[m] = A[m] + 4 */
        __m256i v = m % 2 ? _mm256_unpackhi_epi64(r[m / 2], r[m / 2 + 4]) : _mm256_unpacklo_epi64(r[m / 2], r[m / 2 + 4]);
        int a = m < 4 ? m : m + 4;
        _mm_storeu_si128((__m128i *)(dst[a] + q), _mm256_castsi256_si128(v));
        _mm_storeu_si128((__m128i *)(dst[a + 4] + q), _mm256_extracti128_si256(v, 1));
    }
}

/* The n >= 16 output pixels acc[p][16] requantized into the channels' rows dst[c][p]; bias and scale:
   the group's */
static inline __attribute__((always_inline)) void dwf_store(const QDepthwise *d, const int FOLDED, const int32_t *bias,
                                                            const float *scale, const float *acc, int64_t n,
                                                            uint8_t *const dst[16]) {
    int u8 = d->out.kind == QOUT_U8;
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)bias), b1 = _mm256_loadu_si256((const __m256i *)(bias + 8));
    const __m256 s0 = _mm256_loadu_ps(scale), s1 = _mm256_loadu_ps(scale + 8);
    const __m256i zy16 = _mm256_set1_epi16((int16_t)d->out.zy);
    for (int64_t p0 = 0; p0 < n; p0 += 16) {
        int64_t q = p0 + 16 <= n ? p0 : n - 16;
        __m256i r[8];
        for (int i = 0; i < 8; i++) {
            __m256i lo = dwf_requant(acc + (q + i) * BLK, FOLDED, b0, b1, s0, s1, zy16);
            __m256i hi = dwf_requant(acc + (q + i + 8) * BLK, FOLDED, b0, b1, s0, s1, zy16);
            r[i] = u8 ? _mm256_packus_epi16(lo, hi) : _mm256_packs_epi16(lo, hi);
        }
        dw_store16(r, q, dst);
    }
}

/* The group's bias with -zx sum(w) in it (int32, wrapping as the integer kernels add them; zx: the inputs'
   zero point as the path reads them) and scales, past the channels 0 and the last scale; a whole group
   by vectors (per channel they had cost a tenth of a 7x7 item) */
static void dwf_bias(const QDepthwise *d, int64_t c0, int nc, int32_t zx, int32_t bias[BLK], float scale[BLK]) {
    const QOut *o = &d->out;
    if (nc < BLK) {
        for (int c = 0; c < BLK; c++) {
            int64_t cc = c0 + (c < nc ? c : nc - 1);
            bias[c] = c < nc ? (int32_t)((uint32_t)(o->bias ? o->bias[cc] : 0) - (uint32_t)zx * (uint32_t)d->wsum[cc]) : 0;
            scale[c] = o->scale[o->scale_step ? cc : 0];
        }
        return;
    }
    for (int h = 0; h < BLK; h += 8) {
        __m256i b = o->bias ? _mm256_loadu_si256((const __m256i *)(o->bias + c0 + h)) : _mm256_setzero_si256();
        __m256i zw = _mm256_mullo_epi32(_mm256_set1_epi32(zx), _mm256_loadu_si256((const __m256i *)(d->wsum + c0 + h)));
        _mm256_storeu_si256((__m256i *)(bias + h), _mm256_sub_epi32(b, zw));
        _mm256_storeu_ps(scale + h, o->scale_step ? _mm256_loadu_ps(o->scale + c0 + h) : _mm256_set1_ps(o->scale[0]));
    }
}

static void dwf_item(void *ctx, int64_t item, int slot) {
    const DwfJob *job = ctx;
    const QDepthwise *d = job->d;
    uint8_t *ws = d->ws + slot * job->nbytes;
    float *xp = (float *)ws, *yf = (float *)(ws + job->y_at), *bf = (float *)(ws + job->b_at);
    DwBand b;
    dw_band(d, job->bands, item, ws + job->sink_at, &b);
    int32_t bias[BLK];
    float scale[BLK];
    dwf_bias(d, b.c0, b.nc, d->zx, bias, scale);
    int folded = 1;
    for (int c = 0; c < BLK; c++)
        folded &= bias[c] >= -DWF_EXACT_BIAS && bias[c] <= DWF_EXACT_BIAS && scale[c] >= -127.0f && scale[c] <= 127.0f;
    for (int c = 0; c < BLK; c++) bf[c] = folded ? (float)bias[c] : 0.0f;
    dwf_gather(d, b.src, b.r0, b.r1, b.top, b.hp, job->pitch, xp);
    DepthwiseNchwc dd = {xp, d->wf + b.c0 * d->kh * d->kw, bf, NULL, yf, 1, 1, b.hp, job->pitch, b.oy1 - b.oy0, d->ow,
                         d->kh, d->kw, d->sh, d->sw, 0, 0, d->dh, d->dw, {ACT_NONE, 0.0f, 0.0f}, 1};
    nchwc_depthwise_padded(&dd);
    if (folded) dwf_store(d, 1, bias, scale, yf, (b.oy1 - b.oy0) * d->ow, b.dst);
    else dwf_store(d, 0, bias, scale, yf, (b.oy1 - b.oy0) * d->ow, b.dst);
}

/* ---- 3x3 depthwise on a channel-interleaved plane of int16 pairs ----
   As the float path, an item is BLK channels and a band of output rows, but their input is laid out as
   pairs of columns (2k, 2k + 1) of 8 channels, [row][pair][2 groups of 8 channels][2 columns] int16: a
   16 x 16 byte transpose by 16-bit units (the pairs stay together) and a widening, no float conversion,
   each input pixel once. An output reads the padded columns s, s + 1, s + 2 (s = S x): the pairs j and
   j + 1 hold them, (w0, w1), (w2, 0) where s is a pair's first column, else (0, w0), (w1, w2), so
   vpmaddwd takes 8 channels' two taps at once, 6 a pixel of 8 channels (stride 1: the outputs of each
   parity in a pass, one set of weight pairs in registers). The int32 sums start at the bias (wrapping as
   the integer kernels'), exact, requantized as store_row_bytes (dwq_requant), each pixel once, and
   transposed out as the float path's. int8 inputs are sign-extended as they are (their zero point and
   padding zx - 128, + 128 sum(w) in the bias), no flip. */
#define DWQ_MAX_WIDTH2 48  /* stride 2: rows of fewer outputs (112 -> 56 stays on the channels' own planes) */
#define DWQ_MAX_WIDTH1 128  /* stride 1: rows of fewer outputs (at v3 112 x 112 0.85 -> 0.77x, 56 x 56 1.01 -> 0.86x
                               the float32 layer against dwp_item's float rows) */

/* Where a slot's plane holds the padding (zx) now: the rows of its band's plane (hp), input row r0's (top)
   and the input's rows (inside); hp -1: none yet. Every item of a call pads its plane alike (bands of a
   tall plane: but the first and the last), so a slot pads once a call, not once an item (the padding had
   taken 6% of a 7 x 7 item by perf) */
typedef struct {
    int64_t hp, top, inside;
} DwqPad;

typedef struct {
    const QDepthwise *d;
    int64_t band_rows, bands;  /* output rows per band at most and bands per group (dw_bands) */
    int64_t pitch, lead;  /* a plane row's pairs (the outputs' and the input's), the padding's before the input */
    int64_t v_at, stage_at, sink_at, nbytes;  /* a slot's scratch: the plane at 0, the outputs' requantized int16, */
                                              /* a copy of the tensor's last rows, the sink */
    DwqPad *pads;  /* a slot's (each slot's plane written by its own thread only) */
} DwqJob;

/* the pair holding the padded column s = S x of an output x (lead pairs of padding before input column 0) */
static inline int64_t dwq_pair(const QDepthwise *d, int64_t lead, int64_t x) {
    return (2 * lead + d->sw * x - d->pl) >> 1;
}

static DwqJob dwq_job(const QDepthwise *d) {
    DwqJob j = {d, 1, 1, 0, (d->pl + 1) / 2, 0, 0, 0, 0, NULL};
    dw_bands(d, &j.bands, &j.band_rows);
    int64_t hp = (j.band_rows - 1) * d->sh + 3, in = j.lead + (d->width + 1) / 2, out = dwq_pair(d, j.lead, d->ow - 1) + 2;
    j.pitch = out > in ? out : in;
    j.v_at = (hp * j.pitch * 64 + 63) / 64 * 64;
    j.stage_at = j.v_at + j.band_rows * d->ow * 32;
    j.sink_at = j.stage_at + (hp * d->width + 16 + 63) / 64 * 64;
    j.nbytes = j.sink_at + (j.band_rows * d->ow + 63) / 64 * 64;
    return j;
}

/* 3x3 at strides 1 and 2 (AVX-512 builds too since their pixels are zmm: at v4vnni 10-15% faster than
   the float path at stride 1); even widths (no pair straddles two rows) or odd ones under 16 (a row at a
   time), outputs into bytes */
static int dwq_takes(const QDepthwise *d) {
    return out_is_bytes(&d->out) && d->kh == 3 && d->kw == 3 && d->dh == 1 && d->dw == 1 && d->sh == d->sw &&
           d->sw <= 2 && (d->width % 2 == 0 || d->width < 16) && d->oh * d->ow >= 16 &&
           d->ow < (d->sw == 1 ? DWQ_MAX_WIDTH1 : DWQ_MAX_WIDTH2);
}

/* r[i] = [channel i's 8 pairs | channel i + 8's] -> r[k] = [pair k of channels 0-7 | of channels 8-15]
   (an 8 x 8 transpose of 16-bit units in each lane) */
static inline __attribute__((always_inline)) void transpose_pairs(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {  /* channels 2i, 2i + 1: units 0-3, 4-7 */
        t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {  /* units 4h, 4h + 1 and 4h + 2, 4h + 3 of channels 0-3, then of 4-7 */
        u[4 * h] = _mm256_unpacklo_epi32(t[h], t[2 + h]);
        u[4 * h + 1] = _mm256_unpackhi_epi32(t[h], t[2 + h]);
        u[4 * h + 2] = _mm256_unpacklo_epi32(t[4 + h], t[6 + h]);
        u[4 * h + 3] = _mm256_unpackhi_epi32(t[4 + h], t[6 + h]);
    }
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < 2; m++) {
            r[4 * h + 2 * m] = _mm256_unpacklo_epi64(u[4 * h + m], u[4 * h + 2 + m]);
            r[4 * h + 2 * m + 1] = _mm256_unpackhi_epi64(u[4 * h + m], u[4 * h + 2 + m]);
        }
}

/* 8 bytes from each of 16 channels' rows at src[c] + q, as transpose_pairs takes them, in the order dwq_widen
   wants: r[i] = [channel i's | i + 4's] for i < 4, [channel i + 4's | i + 8's] after */
static inline __attribute__((always_inline)) void dwq_load(const uint8_t *const src[16], int64_t q, __m256i r[8]) {
    for (int i = 0; i < 8; i++) {
        int lo = i < 4 ? i : i + 4;
        r[i] = _mm256_loadu2_m128i((const __m128i *)(src[lo + 4] + q), (const __m128i *)(src[lo] + q));
    }
}

/* Pair k of dwq_load's channels after transpose_pairs, widened to int16 by unpacking: the low halves of
   its lanes hold channels 0-3 | 4-7 (the plane's first group), the high ones 8-11 | 12-15 (one shuffle a
   group, not an extract and two widenings: a tenth of a stride-2 item) */
static inline __attribute__((always_inline)) void dwq_widen(const int SIGNED, __m256i r, __m256i *g0, __m256i *g1) {
    const __m256i hi = SIGNED ? _mm256_cmpgt_epi8(_mm256_setzero_si256(), r) : _mm256_setzero_si256();
    *g0 = _mm256_unpacklo_epi8(r, hi), *g1 = _mm256_unpackhi_epi8(r, hi);
}

/* The input rows [r0, r1) of 16 channels (channel c's at src[c], row by row) into the plane xp of hp rows,
   input row r0 at its row top, column 0 at pair lead; zx around (the padding, when pad). Even widths: the rows
   taken as one run of pixels, 16 at a time (the last 16 again: no load past the rows); odd ones (under
   16), a row at a time, 16 bytes from its start (src: 16 bytes readable past the rows), the last pair's
   second column padding. */
static inline __attribute__((always_inline)) void dwq_gather(const DwqJob *job, const int SIGNED, const uint8_t *const src[16],
                                                             int64_t r0, int64_t r1, int64_t top, int64_t hp, const int pad,
                                                             int16_t zx, int16_t *xp) {
    const QDepthwise *d = job->d;
    const int64_t width = d->width, pitch = job->pitch, lead = job->lead, n = (r1 - r0) * width, skip = (pitch - width / 2) * 32;
    const __m256i z = _mm256_set1_epi16(zx);
    for (int64_t i = 0; pad && i < hp; i++) {  /* the padding's pairs: whole rows, or either side of the input's */
        int inside = i >= top && i < top + r1 - r0;
        for (int64_t j = 0; j < pitch; j++) {
            if (inside && j == lead && (j += (width + 1) / 2) >= pitch)
                break;
            _mm256_storeu_si256((__m256i *)(xp + (i * pitch + j) * 32), z);
            _mm256_storeu_si256((__m256i *)(xp + (i * pitch + j) * 32 + 16), z);
        }
    }
    if (width % 2) {
        for (int64_t i = 0; i < r1 - r0; i++) {
            __m256i r[8];
            dwq_load(src, i * width, r);
            transpose_pairs(r);
            int16_t *o = xp + ((top + i) * pitch + lead) * 32;
            for (int64_t k = 0; k <= width / 2; k++, o += 32) {
                __m256i a, b;
                dwq_widen(SIGNED, r[k], &a, &b);
                if (k == width / 2) a = _mm256_blend_epi16(a, z, 0xAA), b = _mm256_blend_epi16(b, z, 0xAA);
                _mm256_storeu_si256((__m256i *)o, a);
                _mm256_storeu_si256((__m256i *)(o + 16), b);
            }
        }
        return;
    }
    if (n < 16) {  /* a few pixels */
        for (int64_t p = 0; p < n; p++)
            for (int c = 0; c < BLK; c++)
                xp[((top + p / width) * pitch + lead + p % width / 2) * 32 + c / 8 * 16 + c % 8 * 2 + p % 2] =
                    SIGNED ? (int8_t)src[c][p] : src[c][p];
        return;
    }
    int16_t *o = xp + (top * pitch + lead) * 32;
    int64_t col = 0;
    for (int64_t p0 = 0; p0 < n; p0 += 16) {
        int64_t q = p0;
        if (p0 + 16 > n)  /* the last 16 again */
            q = n - 16, col = q % width, o = xp + ((top + q / width) * pitch + lead + col / 2) * 32;
        __m256i r[8];
        dwq_load(src, q, r);
        transpose_pairs(r);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m256i a, b;
            dwq_widen(SIGNED, r[k], &a, &b);
            _mm256_storeu_si256((__m256i *)o, a);
            _mm256_storeu_si256((__m256i *)(o + 16), b);
            o += 32, col += 2;
            if (col == width) col = 0, o += skip;
        }
    }
}

/* The weight pairs of the group's channels from c0, k[ky][0] = (w0, w1) and k[ky][1] = (w1, w2) of kernel
   row ky, from wf (the float path's weights, [9][16] a group, zeros past the channels: exact integers) by
   vector loads and conversions, not 12 gathers (5% of a 7 x 7 item) */
static inline void dwq_load_weights(const QDepthwise *d, int64_t c0, __m256i k[3][2][2]) {
    const float *wf = d->wf + c0 * 9;
    for (int g = 0; g < 2; g++) {
        __m256i w[9];
        for (int t = 0; t < 9; t++) w[t] = _mm256_cvttps_epi32(_mm256_loadu_ps(wf + t * BLK + 8 * g));
        for (int ky = 0; ky < 3; ky++)
            for (int t = 0; t < 2; t++)
                k[ky][t][g] = _mm256_blend_epi16(w[3 * ky + t], _mm256_slli_epi32(w[3 * ky + t + 1], 16), 0xAA);
    }
}

/* The pairs of k for outputs whose first column is a pair's first (odd 0: (w0, w1), (w2, 0)) or second
   (odd 1: (0, w0), (w1, w2)); stride 1 takes both from one gather */
static inline void dwq_weights(__m256i k[3][2][2], int odd, __m256i w[3][2][2]) {
    for (int ky = 0; ky < 3; ky++)
        for (int g = 0; g < 2; g++) {
            w[ky][0][g] = odd ? _mm256_slli_epi32(k[ky][0][g], 16) : k[ky][0][g];
            w[ky][1][g] = odd ? k[ky][1][g] : _mm256_srli_epi32(k[ky][1][g], 16);
        }
}

/* A pixel's 16 sums from its pairs at o (kernel row ky's pitch32 * ky on), requantized (dwq_requant's order;
   FOLDED: bias and scales as the float path folds them, the sums below 2^24 and their products below 2^31:
   converted and scaled without the clamp, the same bytes) */
static inline __attribute__((always_inline)) __m256i dwq_pixel(const int16_t *o, int64_t pitch32, const __m256i w[3][2][2],
                                                               const int FOLDED, __m256i b0, __m256i b1, __m256 s0,
                                                               __m256 s1, __m256i zy16) {
#if defined(__AVX512F__)
    /* both groups in a zmm (a pair's 64 bytes): half the madds, adds and conversions */
    __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(b0), b1, 1);
    for (int ky = 0; ky < 3; ky++, o += pitch32)
        for (int t = 0; t < 2; t++) {
            __m512i x = _mm512_loadu_si512(o + 32 * t), wk = _mm512_inserti64x4(_mm512_castsi256_si512(w[ky][t][0]), w[ky][t][1], 1);
#if defined(__AVX512VNNI__)
            a = _mm512_dpwssd_epi32(a, x, wk);  /* vpdpwssd: the multiply-add and the add in one instruction */
#else
            a = _mm512_add_epi32(a, _mm512_madd_epi16(x, wk));
#endif
        }
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_insertf32x8(_mm512_castps256_ps512(s0), s1, 1));
    if (!FOLDED)
        f = _mm512_min_ps(f, _mm512_set1_ps(2147483520.0f));
    __m512i r = _mm512_cvtps_epi32(f);
    return _mm256_adds_epi16(_mm256_packs_epi32(_mm512_castsi512_si256(r), _mm512_extracti64x4_epi64(r, 1)), zy16);
#else
    __m256i a0 = b0, a1 = b1;
    for (int ky = 0; ky < 3; ky++, o += pitch32)
        for (int t = 0; t < 2; t++) {  /* a chain a group: the empty asm keeps GCC from reassociating the sums
                                          into parallel chains, whose temporaries spilled 8 of the 12 weights
                                          to the stack every pixel */
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(o + 32 * t)), w[ky][t][0]));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(o + 32 * t + 16)), w[ky][t][1]));
            __asm__("" : "+x"(a0), "+x"(a1));
        }
    if (FOLDED)
        return dwf_requant2(_mm256_cvtepi32_ps(a0), _mm256_cvtepi32_ps(a1), 1, b0, b1, s0, s1, zy16);
    return dwq_requant(a0, a1, s0, s1, zy16);
#endif
}

/* The band's outputs requantized into v[oy ow + x] from the plane xp; bias (-zx sum(w) in it) and scale:
   the group's */
static inline __attribute__((always_inline)) void dwq_outputs(const DwqJob *job, const DwBand *b, const int FOLDED,
                                                              const int16_t *xp, const int32_t *bias, const float *scale,
                                                              __m256i *v) {
    const QDepthwise *d = job->d;
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)bias), b1 = _mm256_loadu_si256((const __m256i *)(bias + 8));
    const __m256 s0 = _mm256_loadu_ps(scale), s1 = _mm256_loadu_ps(scale + 8);
    const __m256i zy16 = _mm256_set1_epi16((int16_t)d->out.zy);
    const int64_t ow = d->ow, S = d->sw, rows = b->oy1 - b->oy0, pitch32 = job->pitch * 32;
    __m256i k[3][2][2];
    dwq_load_weights(d, b->c0, k);
    for (int64_t x0 = 0; x0 < (S == 1 ? 2 : 1); x0++) {  /* stride 1: the outputs x0, x0 + 2, ... */
        __m256i w[3][2][2];
        dwq_weights(k, (int)((S * x0 - d->pl) & 1), w);
        /* the band's outputs of this parity as one run, across a row (a loop a row, which reloaded the
           spilled weights, had cost 6% of a 7 x 7 item's instructions at v3, 2-3% of 14 x 14 and 28 x 28 ones) */
        const int64_t step = 3 - S, across = (ow - x0 + step - 1) / step;
        const int16_t *o = xp + dwq_pair(d, job->lead, x0) * 32;
        __m256i *out = v + x0;
        for (int64_t n = rows * across, x = 0; n > 0; n--) {
            _mm256_storeu_si256(out, dwq_pixel(o, pitch32, w, FOLDED, b0, b1, s0, s1, zy16));
            o += 32, out += step;
            if (++x == across)
                x = 0, o += S * pitch32 - across * 32, out += ow - across * step;
        }
    }
}

static inline __attribute__((always_inline)) void dwq_band(const DwqJob *job, const int SIGNED, int64_t item, int slot) {
    const QDepthwise *d = job->d;
    uint8_t *ws = d->ws + slot * job->nbytes;
    int16_t *xp = (int16_t *)ws;
    DwBand b;
    dw_band(d, job->bands, item, ws + job->sink_at, &b);
    int32_t bias[BLK];
    float scale[BLK];
    /* int8 inputs as they are: zero point zx - 128 (a fix-up loop after it had stalled on the store
       forwarding: 3% of a 7 x 7 item at v4vnni) */
    dwf_bias(d, b.c0, b.nc, SIGNED ? d->zx - 128 : d->zx, bias, scale);
    if (d->width % 2 && b.c0 + b.nc == d->channels) {  /* odd widths read 16 bytes past a row: the last channel's copied */
        uint8_t *stage = ws + job->stage_at;
        memcpy(stage, b.src[b.nc - 1], (b.r1 - b.r0) * d->width);
        for (int c = b.nc - 1; c < BLK; c++) b.src[c] = stage;
    }
    DwqPad *pad = &job->pads[slot], now = {b.hp, b.top, b.r1 - b.r0};
    int padded = pad->hp == now.hp && pad->top == now.top && pad->inside == now.inside;
    dwq_gather(job, SIGNED, b.src, b.r0, b.r1, b.top, b.hp, !padded, (int16_t)(SIGNED ? d->zx - 128 : d->zx), xp);
    *pad = now;
    __m256i *v = (__m256i *)(ws + job->v_at);  /* each pixel once (the stores take the last 16 again) */
    int folded = 1;
    for (int c = 0; c < BLK; c++)
        folded &= bias[c] >= -DWF_EXACT_BIAS && bias[c] <= DWF_EXACT_BIAS && scale[c] >= -127.0f && scale[c] <= 127.0f;
    if (folded) dwq_outputs(job, &b, 1, xp, bias, scale, v);
    else dwq_outputs(job, &b, 0, xp, bias, scale, v);
    const int64_t n = (b.oy1 - b.oy0) * d->ow;
    const int u8 = d->out.kind == QOUT_U8;
    for (int64_t p0 = 0; p0 < n; p0 += 16) {
        int64_t q = p0 + 16 <= n ? p0 : n - 16;
        __m256i r[8];
        for (int i = 0; i < 8; i++) {
            __m256i lo = _mm256_loadu_si256(v + q + i), hi = _mm256_loadu_si256(v + q + i + 8);
            r[i] = u8 ? _mm256_packus_epi16(lo, hi) : _mm256_packs_epi16(lo, hi);
        }
        dw_store16(r, q, b.dst);
    }
}

static void dwq_item(void *ctx, int64_t item, int slot) {
    const DwqJob *job = ctx;
    if (job->d->x_flip) dwq_band(job, 1, item, slot);
    else dwq_band(job, 0, item, slot);
}

/* ---- 3x3 depthwise on the channels' own planes: stride 2 in int16 pairs, stride 1 in float32 ----
   The float path above transposes its 16 channels' rows into pixels of 16 and back and converts every
   input pixel to a float: at stride 2 four an output, as much as the taps cost. Here an item is 16
   channels, each read in NCHW as it is, each input row once into a ring of padded rows, two output
   rows at a time (their middle input row's vectors loaded once), 16 outputs a step:
   - stride 2: a row's bytes widened to int16 (vpmovzxbw) are, as int32 lanes, the pairs of columns a
     kernel row's first two taps read, and vpmaddwd multiplies 8 outputs' pairs by the weight pair (w0,
     w1) at once, their third tap from the bytes 2 on against (w2, 0): no conversion of the input, int32
     sums exact as the integer kernels' (started at the bias, wrapping alike), requantized as
     store_row_bytes (dwq_requant); rows of 8 outputs or more (16 on AVX-512 builds).
     MobileNetV2's 112 -> 56 layer 0.57x, 56 -> 28 0.76x the float path at v3 (0.63x, 0.81x at v4).
   - stride 1, rows of DWP_MIN_WIDTH outputs or more, AVX2 builds without AVX-512 (under DWQ_MAX_WIDTH1:
     the int16 pairs path above instead): rows converted to
     floats, 9 FMAs a vector with the weights in registers, requantized by dwf_requant2 (the float path's
     bytes: the same integer products and sums). 112 x 112: 0.85-0.88x the float path, 56 x 56 0.975x;
     on AVX-512 builds (whose float path is faster) 1.0-1.14x: not taken there. */
#define DWP_RING 16  /* ring rows: two output rows' 3 S + 3 (theirs and the next two's), a power of 2 */

typedef struct {
    const QDepthwise *d;
    int64_t pitch;  /* a ring row (bytes at stride 2, floats at 1): the padded columns read, and slack */
    int64_t lead;  /* stride 1: where padded column 0 is in a row (the input's columns stored aligned) */
    int64_t nbytes;  /* a slot's scratch: the ring and a row of zx (the padding's rows) */
} DwpJob;

static DwpJob dwp_job(const QDepthwise *d) {
    int64_t cols = (d->ow - 1) * d->sw + 3 + 16;  /* up to the last 8 outputs' reads (stride 2: their 16 bytes) */
    cols = cols > d->pl + d->width ? cols : d->pl + d->width;
    DwpJob j = {d, 0, (8 - d->pl % 8) % 8, 0};
    j.pitch = (j.lead + cols + 7) / 8 * 8;
    j.nbytes = (DWP_RING + 1) * j.pitch * (d->sw == 1 ? 4 : 1) + 32;
    return j;
}

#define DWP_MIN_WIDTH 48  /* stride 1: rows at least this long (56 x 56 2.5% faster, 28 x 28 25% slower) */
static int dwp_takes(const QDepthwise *d) {
    if (!out_is_bytes(&d->out) || d->kh != 3 || d->kw != 3 || d->dh != 1 || d->dw != 1 || d->width < 16 || d->ow < 8 || d->sh != d->sw)
        return 0;
#if defined(__AVX512F__)
    return d->sw == 2 && d->ow >= 16;  /* 14 a row (28 -> 14): 8% slower than the float path there, 4% faster at v3 */
#else
    return d->sw == 2 || (d->sw == 1 && d->ow >= DWP_MIN_WIDTH);
#endif
}

/* Input row src (width >= 16 bytes, x ^ f) into padded row o from column pl (stride 1: as floats), 16
   bytes a step, the last 16 again (no read past the row) */
static inline __attribute__((always_inline)) void dwp_convert(const uint8_t *src, int64_t width, __m128i f, const int S, void *o) {
    if (S == 2 && width >= 32) {  /* bytes: 32 a step */
        const __m256i f2 = _mm256_broadcastsi128_si256(f);
        for (int64_t j = 0;; j += 32) {
            j = j + 32 <= width ? j : width - 32;
            _mm256_storeu_si256((__m256i *)((uint8_t *)o + j), _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(src + j)), f2));
            if (j + 32 == width) return;
        }
    }
    for (int64_t j = 0;; j += 16) {
        j = j + 16 <= width ? j : width - 16;
        __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + j)), f);
        if (S == 2) {
            _mm_storeu_si128((__m128i *)((uint8_t *)o + j), b);
        } else {
            _mm256_storeu_ps((float *)o + j, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)));
            _mm256_storeu_ps((float *)o + j + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b))));
        }
        if (j + 16 == width) return;
    }
}

/* 8 outputs of row a (and b: two) from padded column S x of rows r[0..2] (b: r[S..S + 2]), each input
   vector loaded once. Stride 2: int32 sums, each kernel row's taps 0, 1 by the pairs at 2x (wq[2 ky]),
   tap 2 by those at 2x + 2 (wq[2 ky + 1]: (w2, 0)); stride 1: float32, three chains (a kernel row each) */
static inline __attribute__((always_inline)) void dwp_sums(const int S, const int two, const void *const r[5], int64_t x,
                                                           const __m256i wq[6], const __m256 wf[9], __m256i *a, __m256i *b) {
    if (S == 2) {
        for (int i = 0; i < (two ? 5 : 3); i++)
            for (int k = 0; k < 2; k++) {
                __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)((const uint8_t *)r[i] + 2 * x + 2 * k)));
                if (i < 3) *a = _mm256_add_epi32(*a, _mm256_madd_epi16(v, wq[2 * i + k]));
                if (two && i >= 2) *b = _mm256_add_epi32(*b, _mm256_madd_epi16(v, wq[2 * (i - 2) + k]));
            }
        return;
    }
    __m256 sa[3], sb[3];
    for (int i = 0; i < (two ? 4 : 3); i++)
        for (int k = 0; k < 3; k++) {
            __m256 v = _mm256_loadu_ps((const float *)r[i] + x + k);
            if (i < 3) sa[i] = k ? _mm256_fmadd_ps(wf[3 * i + k], v, sa[i]) : _mm256_mul_ps(wf[3 * i], v);
            if (two && i >= 1) sb[i - 1] = k ? _mm256_fmadd_ps(wf[3 * (i - 1) + k], v, sb[i - 1]) : _mm256_mul_ps(wf[3 * (i - 1)], v);
        }
    *a = _mm256_castps_si256(_mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(*a), sa[0]), _mm256_add_ps(sa[1], sa[2])));
    if (two) *b = _mm256_castps_si256(_mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(*b), sb[0]), _mm256_add_ps(sb[1], sb[2])));
}

/* N (16 or 8) outputs from x of rows a at y (and b at y + ow: two) from the ring rows r, requantized and
   stored; the sums start at a0 (stride 2: the bias; stride 1: the bias, as float, when FOLDED) */
static inline __attribute__((always_inline)) void dwp_step(const QDepthwise *d, const int S, const int FOLDED, const int two,
                                                           const int N, const void *const r[5], const __m256i wq[6],
                                                           const __m256 wf[9], __m256i a0, __m256i bias, __m256 sc,
                                                           int64_t x, uint8_t *y) {
    const int64_t ow = d->ow;
    const __m256i zy16 = _mm256_set1_epi16((int16_t)d->out.zy), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i a[2] = {a0, a0}, b[2] = {a0, a0}, q[2];
    for (int h = 0; h < N / 8; h++) dwp_sums(S, two, r, x + 8 * h, wq, wf, &a[h], &b[h]);
    /* requantized in twos: rows a's 16 and b's 16, or a's 8 and b's 8 */
    __m256i u[2][2] = {{a[0], N == 16 ? a[1] : b[0]}, {b[0], b[1]}};
    for (int t = 0; t < (N == 16 && two ? 2 : 1); t++)
        q[t] = S == 2 ? dwq_requant(u[t][0], u[t][1], sc, sc, zy16)
                      : dwf_requant2(_mm256_castsi256_ps(u[t][0]), _mm256_castsi256_ps(u[t][1]), FOLDED, bias, bias, sc, sc, zy16);
    if (N == 8 || !two) q[1] = q[0];
    /* N 16: rows a's and b's bytes in the low and high halves; 8: in the low half's two quarters */
    __m256i p = _mm256_permutevar8x32_epi32(d->out.kind == QOUT_U8 ? _mm256_packus_epi16(q[0], q[1]) : _mm256_packs_epi16(q[0], q[1]), order);
    if (N == 16) {
        _mm_storeu_si128((__m128i *)(y + x), _mm256_castsi256_si128(p));
        if (two) _mm_storeu_si128((__m128i *)(y + ow + x), _mm256_extracti128_si256(p, 1));
    } else {
        _mm_storel_epi64((__m128i *)(y + x), _mm256_castsi256_si128(p));
        if (two) _mm_storeh_pd((double *)(y + ow + x), _mm_castsi128_pd(_mm256_castsi256_si128(p)));
    }
}

/* Output rows a at y (and b at y + ow: two): 16 outputs a step, then 8 (the last 8 again) */
static inline __attribute__((always_inline)) void dwp_rows(const QDepthwise *d, const int S, const int FOLDED, const int two,
                                                           const void *const r[5], const __m256i wq[6], const __m256 wf[9],
                                                           __m256i a0, __m256i bias, __m256 sc, uint8_t *y) {
    int64_t x = 0;
    for (; x + 16 <= d->ow; x += 16) dwp_step(d, S, FOLDED, two, 16, r, wq, wf, a0, bias, sc, x, y);
    for (; x < d->ow; x += 8) dwp_step(d, S, FOLDED, two, 8, r, wq, wf, a0, bias, sc, x = x + 8 <= d->ow ? x : d->ow - 8, y);
}

/* Channel c at stride S: its weights, bias and scale, and its rows in twos; ring: DWP_RING rows and a row of zx */
static inline __attribute__((always_inline)) void dwp_channel(const DwpJob *job, const int S, int64_t c, int32_t bias,
                                                              float scale, uint8_t *ring) {
    const QDepthwise *d = job->d;
    const int64_t rowb = job->pitch * (S == 1 ? 4 : 1);
    const int16_t *w = d->w + c * 9;
    __m256i wq[6];
    __m256 wf[9];
    for (int ky = 0; ky < 3; ky++) {
        wq[2 * ky] = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)w[3 * ky] | (uint32_t)(uint16_t)w[3 * ky + 1] << 16));
        wq[2 * ky + 1] = _mm256_set1_epi32((int32_t)(uint16_t)w[3 * ky + 2]);
        for (int kx = 0; kx < 3; kx++) wf[3 * ky + kx] = _mm256_set1_ps((float)w[3 * ky + kx]);
    }
    int folded = bias >= -DWF_EXACT_BIAS && bias <= DWF_EXACT_BIAS && scale >= -127.0f && scale <= 127.0f;
    const __m256i b = _mm256_set1_epi32(bias);
    const __m256i a0 = S == 2 ? b : _mm256_castps_si256(_mm256_set1_ps(folded ? (float)bias : 0.0f));
    const __m256 sc = _mm256_set1_ps(scale);
    const __m128i f = _mm_set1_epi8(d->x_flip ? (char)0x80 : 0);
    const uint8_t *x = d->x + c * d->height * d->width;
    uint8_t *y = (uint8_t *)d->y + c * d->oh * d->ow;
    /* input rows [0, done) converted, each once; the next two output rows' before these ones' sums (loads
       across the stores just made stall on the store forwarding) */
    int64_t done = 0;
    for (int64_t oy = 0; oy < d->oh; oy += 2) {
        int64_t r0 = oy * S - d->pt, upto = r0 + 3 * S + 3 < d->height ? r0 + 3 * S + 3 : d->height;
        for (; done < upto; done++)
            dwp_convert(x + done * d->width, d->width, f, S, ring + done % DWP_RING * rowb + (job->lead + d->pl) * (S == 1 ? 4 : 1));
        const void *r[5];
        for (int i = 0; i < S + 3; i++) {
            const uint8_t *row = r0 + i >= 0 && r0 + i < d->height ? ring + (r0 + i) % DWP_RING * rowb : ring + DWP_RING * rowb;
            r[i] = row + job->lead * (S == 1 ? 4 : 1);
        }
        int two = oy + 1 < d->oh;
        uint8_t *yr = y + oy * d->ow;
        if (S == 2) {
            if (two) dwp_rows(d, 2, 0, 1, r, wq, wf, a0, b, sc, yr);
            else dwp_rows(d, 2, 0, 0, r, wq, wf, a0, b, sc, yr);
        } else if (folded) {
            if (two) dwp_rows(d, 1, 1, 1, r, wq, wf, a0, b, sc, yr);
            else dwp_rows(d, 1, 1, 0, r, wq, wf, a0, b, sc, yr);
        } else {
            if (two) dwp_rows(d, 1, 0, 1, r, wq, wf, a0, b, sc, yr);
            else dwp_rows(d, 1, 0, 0, r, wq, wf, a0, b, sc, yr);
        }
    }
}

static void dwp_item(void *ctx, int64_t item, int slot) {
    const DwpJob *job = ctx;
    const QDepthwise *d = job->d;
    const int64_t c0 = item * BLK;
    const int nc = (int)(d->channels - c0 < BLK ? d->channels - c0 : BLK);
    uint8_t *ring = (uint8_t *)(((uintptr_t)(d->ws + slot * job->nbytes) + 31) & ~(uintptr_t)31);
    int64_t n = (DWP_RING + 1) * job->pitch;  /* the padding: zx (the input's columns overwritten) */
    if (d->sw == 2) memset(ring, d->zx, n);
    else for (int64_t i = 0; i < n; i++) ((float *)ring)[i] = (float)d->zx;
    int32_t bias[BLK];
    float scale[BLK];
    dwf_bias(d, c0, nc, d->zx, bias, scale);
    for (int64_t c = c0; c < c0 + nc; c++) {
        if (d->sw == 2) dwp_channel(job, 2, c, bias[c - c0], scale[c - c0], ring);
        else dwp_channel(job, 1, c, bias[c - c0], scale[c - c0], ring);
    }
}
#endif

int64_t ge_qdepthwise_slot_bytes(const QDepthwise *d) {
    int64_t nbytes = dw_layout(d).nbytes;
#if DW_NARROW
    int64_t f = dwf_job(d).nbytes, p = dwp_job(d).nbytes, q = dwq_job(d).nbytes;  /* the kind of output is not known yet: room for every path */
    nbytes = f > nbytes ? f : nbytes;
    nbytes = p > nbytes ? p : nbytes;
    nbytes = q > nbytes ? q : nbytes;
#endif
    return nbytes;
}

int32_t ge_qdepthwise_path(const QDepthwise *d) {
#if DW_NARROW
    if (dwq_takes(d)) return QDW_COLUMN_PAIRS;
    if (dwp_takes(d)) return QDW_ROW_PAIRS;
    if (dwf_takes(d)) return QDW_FLOAT;
#endif
    (void)d;
    return QDW_TAPS;
}

void ge_qdepthwise(const QDepthwise *d) {
#if DW_NARROW
    switch (ge_qdepthwise_path(d)) {
    case QDW_COLUMN_PAIRS: {
        DwqJob job = dwq_job(d);
        const int slots = d->threads > 1 ? d->threads : 1;  /* pool_run's slots at most */
        DwqPad pads[slots];
        for (int i = 0; i < slots; i++) pads[i].hp = -1;
        job.pads = pads;
        pool_run(dwq_item, &job, (d->channels + BLK - 1) / BLK * job.bands, d->threads);
        return;
    }
    case QDW_ROW_PAIRS: {
        DwpJob job = dwp_job(d);
        pool_run(dwp_item, &job, (d->channels + BLK - 1) / BLK, d->threads);
        return;
    }
    case QDW_FLOAT: {
        DwfJob job = dwf_job(d);
        pool_run(dwf_item, &job, (d->channels + BLK - 1) / BLK * job.bands, d->threads);
        return;
    }
    }
#endif
    DwJob job = {d, dw_layout(d), {0}, 1, 0, 0, {{0}}, {{0}}};
    for (int64_t t = 0; t < d->kh * d->kw; t++) {
        int64_t ry = (t / d->kw) * d->dh, rx = (t % d->kw) * d->dw;
        job.tap_at[t] = ((ry % d->sh) * d->sw + rx % d->sw) * job.l.phase + (ry / d->sh) * job.l.pitch + rx / d->sw;
    }
#if DW_NARROW
    job.narrow = dw_narrow(d, job.l.pitch);
    if (job.narrow) {
        narrow_plan(d, job.l, job.keep, job.rows);
        job.grouped = out_is_bytes(&d->out);
        job.group = DW_GROUP;
    }
#endif
    pool_run(qdepthwise_item, &job, (d->channels + job.group - 1) / job.group, d->threads);
}

/* ---- QLinearAdd -------------------------------------------------------------------------------- */

/* VL bytes from p as float32 (int8 or uint8); widened by one instruction where there is one (GCC
   splits the generic conversion of a byte vector into scalar moves) */
static inline __attribute__((always_inline)) vec load_bytes(const uint8_t *p, int is_signed) {
#if defined(__AVX512F__)
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    return (vec)_mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
#elif defined(__AVX2__)
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return (vec)_mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
#else
    vec v;
    for (int k = 0; k < VL; k++) v[k] = is_signed ? (float)(int8_t)p[k] : (float)p[k];
    return v;
#endif
}

/* VL int32 lanes (in the 8-bit range) stored as bytes */
static inline __attribute__((always_inline)) void store_bytes(uint8_t *p, ivec r) {
#if defined(__AVX512F__)
    _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8((__m512i)r));
#elif defined(__AVX2__)  /* each lane's low byte (GCC stores the generic loop's bytes one by one) */
    const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                         0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i b = _mm256_shuffle_epi8((__m256i)r, low);
    _mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
#else
    for (int k = 0; k < VL; k++) p[k] = (uint8_t)r[k];
#endif
}

/* C = rint((A ra + fixed) + B rb) saturated: MLAS's float32 formula, in the numpy plan's order
   (VL lanes at a time, the tail one by one: the same float32 steps) */
static inline float qadd_one(const QAdd *q, float a, float b) {
    float t = a * q->ra;
    t = t + q->fixed;
    float u = b * q->rb;
    float v = __builtin_rintf(t + u);
    v = v < q->lo ? (float)q->lo : v;
    return v > q->hi ? (float)q->hi : v;
}

static void qadd_item(void *ctx, int64_t item, int slot) {
    (void)slot;
    const QAdd *q = ctx;
    int64_t i0 = item * 16384, i1 = i0 + 16384 < q->n ? i0 + 16384 : q->n, i = i0;
    vec ra = (vec){0} + q->ra, rb = (vec){0} + q->rb, fixed = (vec){0} + q->fixed;
    float lo = (float)q->lo, hi = (float)q->hi;
    /* a single value: its vector of VL copies, loaded in place of the tensor's */
    uint8_t a1[VL], b1[VL];
    memset(a1, q->a[0], VL);
    memset(b1, q->b[0], VL);
    const int64_t as = q->a_step, bs = q->b_step;
    for (; i + VL <= i1; i += VL) {
        vec t = load_bytes(as ? q->a + i : a1, q->is_signed) * ra;
        t = t + fixed;
        vec u = load_bytes(bs ? q->b + i : b1, q->is_signed) * rb;
        store_bytes(q->c + i, __builtin_convertvector(vclamp(vrint(t + u), lo, hi), ivec));
    }
    for (; i < i1; i++) {
        float v = q->is_signed ? qadd_one(q, (float)((const int8_t *)q->a)[i * as], (float)((const int8_t *)q->b)[i * bs])
                               : qadd_one(q, (float)q->a[i * as], (float)q->b[i * bs]);
        if (q->is_signed) ((int8_t *)q->c)[i] = (int8_t)v;
        else q->c[i] = (uint8_t)v;
    }
}
#pragma GCC pop_options

/* ---- DynamicQuantizeLinear ----------------------------------------------------------------------- */

/* uint8 quantization of x[n] with scale and zero point from its range (including 0), in the numpy
   plan's float32 steps: scale = (hi - lo) / 255 (1 when hi == lo), zp = rint(clamp(-lo / scale, 0, 255)),
   y = clamp(rint(x / scale) + zp, 0, 255). One thread: a layer's activations are a few hundred KB. */

/* the lanes' minimum (above 0) or maximum (above 1) of v and m, m where v is NaN: one vminps (vmaxps),
   whose second operand is kept where either is NaN, on AVX builds (DynamicQuantizeLinear's range pass
   twice as fast as by compares and blends); the compares and blends elsewhere */
static inline vec vextreme(vec v, vec m, const int above) {
#if defined(__AVX512F__)
    return (vec)(above ? _mm512_max_ps((__m512)v, (__m512)m) : _mm512_min_ps((__m512)v, (__m512)m));
#elif VL == 8 && defined(__AVX__)
    return (vec)(above ? _mm256_max_ps((__m256)v, (__m256)m) : _mm256_min_ps((__m256)v, (__m256)m));
#else
    ivec pick = above ? v > m : v < m;
    return (vec)(((ivec)v & pick) | ((ivec)m & ~pick));
#endif
}

void ge_dynamic_quantize(const float *x, int64_t n, uint8_t *y, float *scale_out, uint8_t *zp_out) {
    /* per lane first (vector code), then across lanes; 4 independent pairs of running extremes, or
       the loop waits for each compare and blend before the next (a minimum is the same in any order) */
    vec vlo[4] = {{0}}, vhi[4] = {{0}};
    int64_t i = 0;
    for (; i + 4 * VL <= n; i += 4 * VL)
        for (int u = 0; u < 4; u++) {
            vec v = vload(x + i + u * VL);
            vlo[u] = vextreme(v, vlo[u], 0);
            vhi[u] = vextreme(v, vhi[u], 1);
        }
    float lo = 0.0f, hi = 0.0f;
    for (int u = 0; u < 4; u++)
        for (int k = 0; k < VL; k++) {
            lo = vlo[u][k] < lo ? vlo[u][k] : lo;
            hi = vhi[u][k] > hi ? vhi[u][k] : hi;
        }
    for (; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float z = 0.0f - lo / scale;
    z = __builtin_rintf(z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z);
    vec vs = (vec){0} + scale, vz = (vec){0} + z;
    for (i = 0; i + VL <= n; i += VL) {
        ivec q = __builtin_convertvector(vclamp(vrint(vload(x + i) / vs) + vz, 0.0f, 255.0f), ivec);
        store_bytes(y + i, q);
    }
    for (; i < n; i++) {
        float v = __builtin_rintf(x[i] / scale) + z;
        v = v < 0.0f ? 0.0f : v;
        v = v > 255.0f ? 255.0f : v;
        y[i] = (uint8_t)v;
    }
    if (scale_out) *scale_out = scale;
    if (zp_out) *zp_out = (uint8_t)z;
}

/* ---- QuantizeLinear and DequantizeLinear per tensor ---------------------------------------------- */

/* The numpy plans' float32 steps, so that the results are theirs bit for bit: QR_QUANTIZE float32 x to
   8 bits, y = clamp(rint(x / scale) + zp, lo, hi) stored as the low byte of its int32 conversion;
   QR_DEQUANTIZE 8 bits to float32, y = (x - zp) * scale; QR_ROUND_TRIP float32 to float32, the one then
   the other (a QuantizeLinear read only by DequantizeLinears of its scale and zero point), the 8-bit
   value kept in a register: one pass over the tensor where there were two and a byte tensor. */
static inline int32_t quantize_one(float x, const QuantizeRun *q) {
    float v = __builtin_rintf(x / q->scale) + q->zp;
    v = v < (float)q->lo ? (float)q->lo : v;
    v = v > (float)q->hi ? (float)q->hi : v;
    int32_t b = (int32_t)v;
    return q->is_signed ? (int32_t)(int8_t)b : (int32_t)(uint8_t)b;  /* (the byte stored, read back) */
}

static void quantize_item(void *ctx, int64_t item, int slot) {
    (void)slot;
    const QuantizeRun *q = ctx;
    int64_t i = item * QR_CHUNK, i1 = i + QR_CHUNK < q->n ? i + QR_CHUNK : q->n;
    const vec vs = (vec){0} + q->scale, vz = (vec){0} + q->zp;
    const float lo = (float)q->lo, hi = (float)q->hi;
    const float *xf = q->x;
    const uint8_t *xb = q->x;
    float *yf = q->y;
    uint8_t *yb = q->y;
    if (q->mode == QR_QUANTIZE) {
        for (; i + VL <= i1; i += VL)
            store_bytes(yb + i, __builtin_convertvector(vclamp(vrint(vload(xf + i) / vs) + vz, lo, hi), ivec));
        for (; i < i1; i++) yb[i] = (uint8_t)quantize_one(xf[i], q);
    } else if (q->mode == QR_DEQUANTIZE) {
        for (; i + VL <= i1; i += VL) vstore(yf + i, (load_bytes(xb + i, q->is_signed) - vz) * vs);
        for (; i < i1; i++) yf[i] = ((q->is_signed ? (float)(int8_t)xb[i] : (float)xb[i]) - q->zp) * q->scale;
    } else {
        for (; i + VL <= i1; i += VL) vstore(yf + i, vround_trip(vload(xf + i), vs, vz, lo, hi, q->is_signed));
        for (; i < i1; i++) yf[i] = ((float)quantize_one(xf[i], q) - q->zp) * q->scale;
    }
}

void ge_quantize_run(const QuantizeRun *q) {
    pool_run(quantize_item, (void *)q, (q->n + QR_CHUNK - 1) / QR_CHUNK, q->threads);
}

void ge_qadd(const QAdd *q) { pool_run(qadd_item, (void *)q, (q->n + 16383) / 16384, q->threads); }
