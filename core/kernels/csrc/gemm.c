/* ge's GEMM, float32: C[M,N] = act(A[M,K] @ B[K,N] + bias + Z) with its epilogue fused.

Why: numpy's OpenBLAS reaches 55-75% of this machine's peak on the skinny products of a CNN or a
small transformer, and every bias, residual or activation costs one more pass over C. Here one
register-blocked micro-kernel does the products and applies the epilogue while the block of C is
still in registers.

Operands (B is the convolution's input, read through two offset tables, so im2col is the packing):
  A: row-major (a, lda), or prepacked by ge_pack_a (weights: once, at load);
  B: B[k, n] = b[koff[k] + noff[n]], or prepacked by ge_pack_b (weights);
  C: row-major (c, ldc), or a convolution's output seen through flat columns (pitch, width: the
  GEMM's column n is Y's column (n / pitch) * width + n % pitch, dropped when n % pitch >= width);
  Z (optional, the layout of C, ldz) is added with the first block of K's products (alpha 1), else before
  the activation; Z may be C itself (alpha 1: C is then added onto, from the first block of K);
  bias_m[i] (per row) and bias_n[j] (per column) are optional; the activation `act` is one of abi.h's
  (Relu, Clip, Gelu, HardSigmoid, HardSwish, Sigmoid, Swish, LeakyRelu) or none.
Packed layouts: A in blocks of MR rows (a short last block shares rows with the one before it, see
block_first), k-major inside (ap[blk*K*MR + k*MR + i]); B in panels of
NR columns, k-major inside (bp[p*K*NR + k*NR + j]).
Work: items (a group of adjacent panels, a chunk of rows) claimed one by one by the threads of
pool.h, each over K split evenly into blocks of at most KC: per block and panel, pack the panel
(when gathered; a run of NR floats per row is two vector copies, a transposed matrix's VL x VL
register transposes) into the thread's scratch, then
run the micro-kernel over the chunk's blocks of MR rows (with few panels and many rows, blocks of
rows go outermost over B packed whole, so each block of weights is read once). An item owns its
block of C through all of K, so one GEMM is one job of the pool: no barrier per block of K, and
enough items (ITEMS_PER_THREAD) that a thread finishing early has one to take. (Reading B's rows in
place, unpacked, measured slower: the hardware prefetcher follows one packed stream, not a row
pointer per step. A raw A of activations is another matter: its whole blocks of rows are read in
place where K is short enough to be one block, see a_in_place.) The caller's workspace holds the
packed A (when raw) and the packed panels of B; sizes from ge_workspace_floats.

float16 operands (GemmArgs.half, abi.h's HALF_*): A's raw rows and B's gathered values are converted
as they are packed, Z and a per-column bias as they are added, C rounded as it is stored, after the
whole epilogue; the arithmetic stays float32. A float16 C is written once: with several blocks of K,
each tile's block sums are added in a float32 buffer (gemm_tiles_item, B packed whole), in the order
C accumulated them, so the rounding is the float32 kernel's result's, bit for bit.

Vector code through GCC/Clang vector extensions (simd.h): one source for AVX-512, AVX2 and NEON, tile
sizes chosen by the register file the compiler targets (the level's -march: setup.py builds one library per level). */
#include "abi.h"
#include "caches.h"
#include "pool.h"
#include "simd.h"
#include "half.h"

#define MR_OF(vl) ((vl) == 16 ? 12 : (vl) == 8 ? 6 : 8)  /* the micro-kernel's rows per vector width */
#define MR MR_OF(VL)
#define NR (2 * VL)
/* B's panel prefetched GEMM_AHEAD floats (32 k steps) ahead as the micro-kernel reads it, every cache line
   of a k step: a few-row product (a short sequence's, 8-128 rows) streams its weights from L2 or L3 at one
   line per 6-12 FMAs, faster than the hardware prefetcher ramps up on each new panel (v3, one thread, the
   raw call: 12x256x1024 62 -> 57 us, 12x512x1024 150 -> 134, 128x768x768 1400 -> 1280, 8x256x2048 123 ->
   115; 16 or 64 steps ahead measured alike) */
#define GEMM_AHEAD (32 * NR)
#define GEMM_LINES (NR * 4 >= 64 ? NR * 4 / 64 : 1)  /* cache lines of B per k step */
static inline __attribute__((always_inline)) void prefetch_b(const float *bp) {
#pragma GCC unroll 4
    for (int l = 0; l < GEMM_LINES; l++) __builtin_prefetch((const char *)(bp + GEMM_AHEAD) + 64 * l, 0, 3);
}
/* Blocks of rows: MR each, except that where the last one would hold at most MR / 3 rows, whose tile's
   2 x MR / 3 accumulators are too few to hide the FMA's latency (here 8 independent chains reach ~80%
   of the FMA throughput, 12 all of it: AVX2's 2-row tile has 4, AVX-512's 4-row tile 8), it and the
   full block before it become 2 MR / 3 and MR / 3 + r rows: AVX2's 8 rows run as 4 + 4, not 6 + 2
   (whose 2-row tile takes as long as a 4-row one), AVX-512's 16 as 8 + 8, not 12 + 4 (3-5% faster).
   A function of M alone (each element's sum over K is the same whichever block holds its row: any
   thread count and split give the same bits). */
#define SPLIT_TAIL (2 * (MR / 3) <= 8)
static inline int split_tail(int64_t M) { return SPLIT_TAIL && M > MR && M % MR && M % MR <= MR / 3; }

static inline int64_t block_first(int64_t M, int64_t blk) {  /* the first row of block blk */
    return split_tail(M) && blk == (M + MR - 1) / MR - 1 ? (blk - 1) * MR + 2 * MR / 3 : blk * MR;
}

static inline int block_rows(int64_t M, int64_t blk) {
    if (split_tail(M) && blk == (M + MR - 1) / MR - 2) return 2 * MR / 3;
    int64_t rest = M - block_first(M, blk);
    return rest < MR ? (int)rest : MR;
}

#define KC 640  /* the largest block of K (blocks are K split evenly: 576, 2 x 576, ...) */
#define FEW_PANELS 8  /* up to this many panels (and several chunks of rows), A blocks go outermost */
#define ITEMS_PER_THREAD 8  /* work items per thread: enough to balance them (measured: 4 left 3-6% idle) */
#define MC_MAX 480  /* rows of A per chunk: 480 x KC floats stay in a 2 MB L2 cache (caches.h: fewer in a smaller one) */

typedef struct {
    const float *bias_m, *bias_n, *z;
    int64_t ldz;
    Activation act;
    float alpha;  /* the product's scale, before bias and Z */
    /* flat columns (a convolution's output rows `pitch` apart, the columns past `width` padding):
       column n of C is Y's column (n / pitch) * width + n % pitch when n % pitch < width, else
       dropped; 0: C is plain */
    int64_t pitch, width;
    int half_c, half_bias;  /* C and Z float16; bias_n float16 */
    /* Z is added with the first block of K (before the bias: the order is the same whether Y is written
       over Z or not, so both give the same bits); only with alpha 1, else with the last block */
    int z_first;
} Epilogue;

/* The vector at src + at of a row of `cols` valid floats (zeros past them). */
static inline vec load_cols(const float *src, int cols, int at) {
    return at + VL <= cols ? vload(src + at) : at < cols ? load_part(src + at, cols - at) : (vec){0};
}

/* load_cols of a float32 or float16 row starting at element i of p */
static inline vec load_cols_any(const void *p, int half, int64_t i, int cols, int at) {
    return at + VL <= cols ? vload_any(p, half, i + at) : at < cols ? load_any_part(p, half, i + at, cols - at)
                                                                    : (vec){0};
}

/* Z's row `row` (columns j0 .. j0 + cols) added to its two vectors */
static inline void add_z(const Epilogue *e, vec *v0, vec *v1, int64_t row, int64_t j0, int cols) {
    *v0 += load_cols_any(e->z, e->half_c, row * e->ldz + j0, cols, 0);
    *v1 += load_cols_any(e->z, e->half_c, row * e->ldz + j0, cols, VL);
}

/* The epilogue on the two vectors of row `row` (columns j0 .. j0 + cols) of C: scale, biases, Z
   (with_z: when its turn is the last block of K, see z_first), activation. */
static inline void finish_row(const Epilogue *e, vec *v0, vec *v1, int64_t row, int64_t j0, int cols, int with_z) {
    if (e->alpha != 1.0f) { *v0 *= e->alpha; *v1 *= e->alpha; }
    if (e->bias_m) { *v0 += e->bias_m[row]; *v1 += e->bias_m[row]; }
    if (e->bias_n) {
        *v0 += load_cols_any(e->bias_n, e->half_bias, j0, cols, 0);
        *v1 += load_cols_any(e->bias_n, e->half_bias, j0, cols, VL);
    }
    if (with_z) add_z(e, v0, v1, row, j0, cols);
    if (e->act.act != ACT_NONE) *v0 = vactivate(*v0, e->act), *v1 = vactivate(*v1, e->act);
}

/* Write a block of products to a float32 C: overwrite (first) or add to it, and apply the epilogue
   (last). rows/cols: the valid part of the block. Kept apart from the product loop, whose
   accumulators need every register, but inlined into micro_kernel (a call there cost the short-K
   expanding convs 7%: their time is the store). */
static inline __attribute__((always_inline)) void store_block(const float *acc, float *c, int64_t ldc, int rows,
                                                              int cols, int first, int last, const Epilogue *e,
                                                              int64_t i0, int64_t j0) {
    float tmp[NR];
    for (int i = 0; i < rows; i++) {
        const float *src = acc + i * NR;
        vec v0 = vload(src), v1 = vload(src + VL);
        int z_now = e->z && (e->z_first ? first : last);  /* Z's turn: the first block of K or the last */
        if (z_now && e->z_first) add_z(e, &v0, &v1, i0 + i, j0, cols);
        float *cr = c + (i0 + i) * ldc + j0;
        float *dst = cols == NR ? cr : tmp;  /* a partial panel goes through a full-width buffer */
        if (!first) {
            if (dst == tmp) memcpy(tmp, cr, (size_t)cols * 4);
            v0 += vload(dst); v1 += vload(dst + VL);
        }
        if (last) finish_row(e, &v0, &v1, i0 + i, j0, cols, z_now && !e->z_first);
        vstore(dst, v0); vstore(dst + VL, v1);
        if (dst == tmp) memcpy(cr, tmp, (size_t)cols * 4);
    }
}

/* store_block for a float16 C, always first and last (the whole sum, see gemm_tiles_item): rounded
   once as it is stored, after the whole epilogue */
static void store_block_half(const float *acc, uint16_t *c, int64_t ldc, int rows, int cols, const Epilogue *e,
                             int64_t i0, int64_t j0) {
    for (int i = 0; i < rows; i++) {
        vec v0 = vload(acc + i * NR), v1 = vload(acc + i * NR + VL);
        if (e->z && e->z_first) add_z(e, &v0, &v1, i0 + i, j0, cols);
        finish_row(e, &v0, &v1, i0 + i, j0, cols, e->z && !e->z_first);
        uint16_t *cr = c + (i0 + i) * ldc + j0;
        if (cols == NR) vstore_half(cr, v0), vstore_half(cr + VL, v1);
        else if (cols > VL) vstore_half(cr, v0), store_half_part(cr + VL, v1, cols - VL);
        else store_half_part(cr, v0, cols);
    }
}

/* The valid runs of a flat panel's columns j0 .. j0 + cols (e->pitch): where each starts in the
   panel, its column of Y, its length */
typedef struct {
    int n;
    int64_t at[NR], to[NR], len[NR];
} FlatRuns;

static void flat_runs(const Epilogue *e, int64_t j0, int cols, FlatRuns *fr) {
    fr->n = 0;
    for (int64_t t = 0; t < cols;) {
        int64_t n = j0 + t, oy = n / e->pitch, ox = n % e->pitch;
        int64_t rest = e->pitch - ox < cols - t ? e->pitch - ox : cols - t;
        if (ox < e->width) {
            fr->at[fr->n] = t, fr->to[fr->n] = oy * e->width + ox;
            fr->len[fr->n++] = e->width - ox < rest ? e->width - ox : rest;
        }
        t += rest;
    }
}

/* Z's row `row` along the runs, into the full-width row zt (its other lanes untouched) */
static void gather_z_row(const Epilogue *e, int64_t row, const FlatRuns *fr, float *zt) {
    int64_t zr = row * e->ldz;
    for (int r = 0; r < fr->n; r++) {
        if (e->half_c) halves_to_floats(zt + fr->at[r], (const uint16_t *)e->z + zr + fr->to[r], fr->len[r]);
        else copy_floats(zt + fr->at[r], e->z + zr + fr->to[r], fr->len[r]);
    }
}

/* store_block for flat columns (e->pitch): the valid runs of the panel's columns are found once,
   then each row goes through a full-width buffer: gathered from Y and Z along those runs,
   scattered back along them. Only per-row bias (a convolution's) applies here. */
static void store_block_flat(const float *acc, void *c, int64_t ldc, int rows, int cols, int first, int last,
                             const Epilogue *e, int64_t i0, int64_t j0) {
    FlatRuns fr;
    flat_runs(e, j0, cols, &fr);
    float tmp[NR] __attribute__((aligned(64))) = {0}, zt[NR] __attribute__((aligned(64))) = {0};
    for (int i = 0; i < rows; i++) {
        int64_t row = (i0 + i) * ldc;
        float *cr = e->half_c ? NULL : (float *)c + row;
        vec v0 = vload(acc + i * NR), v1 = vload(acc + i * NR + VL);
        int add_z = e->z && (e->z_first ? first : last);  /* Z's turn: the first block of K or the last */
        if (add_z) gather_z_row(e, i0 + i, &fr, zt);
        if (!first) {  /* float32 C only */
            for (int r = 0; r < fr.n; r++) copy_floats(tmp + fr.at[r], cr + fr.to[r], fr.len[r]);
            v0 += vload(tmp), v1 += vload(tmp + VL);  /* lanes outside the runs: dropped */
        } else if (add_z && e->z_first) {
            v0 += vload(zt), v1 += vload(zt + VL);
        }
        if (last) {
            if (e->alpha != 1.0f) { v0 *= e->alpha; v1 *= e->alpha; }
            if (e->bias_m) { v0 += e->bias_m[i0 + i]; v1 += e->bias_m[i0 + i]; }
            if (add_z && !e->z_first) v0 += vload(zt), v1 += vload(zt + VL);
            if (e->act.act != ACT_NONE) v0 = vactivate(v0, e->act), v1 = vactivate(v1, e->act);
        }
        vstore(tmp, v0), vstore(tmp + VL, v1);
        for (int r = 0; r < fr.n; r++) {
            if (e->half_c) floats_to_halves((uint16_t *)c + row + fr.to[r], tmp + fr.at[r], fr.len[r]);
            else copy_floats(cr + fr.to[r], tmp + fr.at[r], fr.len[r]);
        }
    }
}

/* Z's block (i0, j0) added to the products acc of the first block of K, as the stores add it
   (e->z_first): gemm_tiles_item's sums then add the further blocks in C's order */
static void add_z_block(const Epilogue *e, float *acc, int rows, int cols, int64_t i0, int64_t j0) {
    FlatRuns fr;
    if (e->pitch) flat_runs(e, j0, cols, &fr);
    float zt[NR] __attribute__((aligned(64))) = {0};
    for (int i = 0; i < rows; i++) {
        vec v0 = vload(acc + i * NR), v1 = vload(acc + i * NR + VL);
        if (e->pitch) {
            gather_z_row(e, i0 + i, &fr, zt);
            v0 += vload(zt), v1 += vload(zt + VL);
        } else {
            add_z(e, &v0, &v1, i0 + i, j0, cols);
        }
        vstore(acc + i * NR, v0), vstore(acc + i * NR + VL, v1);
    }
}

/* Where a tile's sums go: into acc (MR x NR floats, for store()), or, where c is set, straight from the
   registers into a float32 C (a full panel holding the whole sum over K, without scale, its activation
   none or a clamp (Relu, Clip): C = clamp(products + Z + bias_m + bias_n), store_block's order, so the
   same bits without the pass through acc; a transformer's few-row products spend ~3% of their time
   there, a short-K conv more) */
typedef struct {
    float *acc;
    float *c;  /* the tile's first element, its rows ldc apart, or NULL */
    const float *z, *bias_m, *bias_n;  /* Z's first element of the tile (rows ldz apart), the biases of the
                                          tile's rows and columns; or NULL */
    int64_t ldc, ldz;
    int rows;  /* the valid rows of the tile */
    int clamp;  /* then [lo, hi] */
    float lo, hi;
} TileOut;

static inline __attribute__((always_inline)) void tile_out(const int R, const int V, const vec *acc0, const vec *acc1,
                                                           const TileOut *o) {
    if (V == 2 && o->c) {
        const vec bias0 = o->bias_n ? vload(o->bias_n) : (vec){0}, bias1 = o->bias_n ? vload(o->bias_n + VL) : (vec){0};
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            if (i >= o->rows) break;
            vec v0 = acc0[i], v1 = acc1[i];
            if (o->z) v0 += vload(o->z + i * o->ldz), v1 += vload(o->z + i * o->ldz + VL);
            if (o->bias_m) v0 += o->bias_m[i], v1 += o->bias_m[i];
            if (o->bias_n) v0 += bias0, v1 += bias1;
            if (o->clamp) v0 = vclamp(v0, o->lo, o->hi), v1 = vclamp(v1, o->lo, o->hi);
            vstore(o->c + i * o->ldc, v0), vstore(o->c + i * o->ldc + VL, v1);
        }
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) { vstore(o->acc + i * NR, acc0[i]); vstore(o->acc + i * NR + VL, acc1[i]); }
}

/* Steps of K per turn of a tile's loop: AVX-512's full tile's loop unrolled 4 times (its loads and
   address updates shared: 64-row and 128 x 768 x 768 products ~3% faster). Not with AVX2's 16
   registers: unrolled, GCC keeps the next steps' B vectors beside the 12 accumulators and spills some
   of these through the stack (unrolled twice: 64 rows 4% slower than not; 4 times, once the code
   after the loop grew: 13-15% slower at 12-128 rows); nor a smaller, latency-bound tile's (AVX2's
   4-row tile ran 3-4% slower so). The steps stay in order: the same sums. */
#define K_UNROLL(R) (VL == 16 && (R) == MR ? 4 : 1)

/* The first R rows of a block of packed A times the first V vectors (V = 1 or 2) of a packed panel
of B, over kc steps. R and V are constants in each inlined copy, so the accumulators stay in
registers. */
static inline __attribute__((always_inline)) void block_product(const int R, const int V, int64_t kc,
                                                                const float *ap, const float *bp, const TileOut *o) {
    vec acc0[MR], acc1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc0[i] = acc1[i] = (vec){0};
    const int U = K_UNROLL(R);
    int64_t k = 0;
    for (; k + U <= kc; k += U)
#pragma GCC unroll 4
        for (int u = 0; u < U; u++, ap += MR, bp += NR) {
            prefetch_b(bp);
            vec b0 = vload(bp), b1 = V == 2 ? vload(bp + VL) : b0;
#pragma GCC unroll 16
            for (int i = 0; i < R; i++) {
                acc0[i] += ap[i] * b0;
                if (V == 2) acc1[i] += ap[i] * b1;
            }
        }
    for (; k < kc; k++, ap += MR, bp += NR) {
        vec b0 = vload(bp), b1 = V == 2 ? vload(bp + VL) : b0;
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            acc0[i] += ap[i] * b0;
            if (V == 2) acc1[i] += ap[i] * b1;
        }
    }
    tile_out(R, V, acc0, acc1, o);
}

/* block_product with A read in place: a block of exactly R rows of a (rows lda apart, unit stride in
K; a block of any other height comes packed). Three rows per base pointer, read at base[q][k],
base[q][k + lda] and base[q][k + 2 lda]: R / 3 pointers and one stride, where R pointers would not
fit the general registers beside the loop's own. */
static inline __attribute__((always_inline)) void block_product_rows(const int R, const int V, int64_t kc,
                                                                     const float *a, int64_t lda, const float *bp,
                                                                     const TileOut *o) {
    vec acc0[MR], acc1[MR];
    const float *base[(MR + 2) / 3];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc0[i] = acc1[i] = (vec){0};
#pragma GCC unroll 16
    for (int q = 0; q < (R + 2) / 3; q++) base[q] = a + 3 * q * lda;
    const int U = K_UNROLL(R);
    int64_t k = 0;
    for (; k + U <= kc; k += U)
#pragma GCC unroll 4
        for (int u = 0; u < U; u++, bp += NR) {
            prefetch_b(bp);
            vec b0 = vload(bp), b1 = V == 2 ? vload(bp + VL) : b0;
#pragma GCC unroll 16
            for (int i = 0; i < R; i++) {
                float x = base[i / 3][k + u + i % 3 * lda];
                acc0[i] += x * b0;
                if (V == 2) acc1[i] += x * b1;
            }
        }
    for (; k < kc; k++, bp += NR) {
        vec b0 = vload(bp), b1 = V == 2 ? vload(bp + VL) : b0;
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            float x = base[i / 3][k + i % 3 * lda];
            acc0[i] += x * b0;
            if (V == 2) acc1[i] += x * b1;
        }
    }
    tile_out(R, V, acc0, acc1, o);
}

/* A block of rows read in place: its height is one of the tiles' (MR, 2 MR / 3, MR / 3) */
static inline int in_place_tile(int rows) { return rows == MR || rows == 2 * MR / 3 || rows == MR / 3; }

/* One block of rows x NR columns of C. A short block of rows runs a shorter product (64 rows are
   5 x 12 + 4, not 6 x 12), a tail panel of at most VL columns a one-vector product; a (NULL: A packed)
   holds a block of in_place_tile rows in place. */
static void product(int64_t kc, const float *ap, const float *a, int64_t lda, const float *bp, int rows, int cols,
                    const TileOut *o) {
    if (!ap) {
        if (cols > VL) {
            if (rows == MR) block_product_rows(MR, 2, kc, a, lda, bp, o);
            else if (rows == 2 * MR / 3) block_product_rows(2 * MR / 3, 2, kc, a, lda, bp, o);
            else block_product_rows(MR / 3, 2, kc, a, lda, bp, o);
        } else {
            if (rows == MR) block_product_rows(MR, 1, kc, a, lda, bp, o);
            else if (rows == 2 * MR / 3) block_product_rows(2 * MR / 3, 1, kc, a, lda, bp, o);
            else block_product_rows(MR / 3, 1, kc, a, lda, bp, o);
        }
    } else if (cols > VL) {
        if (rows > 2 * MR / 3) block_product(MR, 2, kc, ap, bp, o);
        else if (rows > MR / 3) block_product(2 * MR / 3, 2, kc, ap, bp, o);
        else block_product(MR / 3, 2, kc, ap, bp, o);
    } else {
        if (rows > MR / 2) block_product(MR, 1, kc, ap, bp, o);
        else block_product(MR / 2, 1, kc, ap, bp, o);
    }
}

/* The block (i0, j0) of C from its products acc (see store_block). */
static void store(const float *acc, void *c, int64_t ldc, int rows, int cols, int first, int last, const Epilogue *e,
                  int64_t i0, int64_t j0) {
    if (e->pitch) store_block_flat(acc, c, ldc, rows, cols, first, last, e, i0, j0);
    else if (e->half_c) store_block_half(acc, c, ldc, rows, cols, e, i0, j0);
    else store_block(acc, c, ldc, rows, cols, first, last, e, i0, j0);
}

static void micro_kernel(int64_t kc, const float *ap, const float *a, int64_t lda, const float *bp, void *c,
                         int64_t ldc, int rows, int cols, int first, int last, const Epilogue *e,
                         int64_t i0, int64_t j0) {
    float acc[MR * NR] __attribute__((aligned(64)));
    TileOut o = {.acc = acc, .rows = rows};
    if (cols == NR && first && last && !e->pitch && !e->half_c && !e->half_bias && e->alpha == 1.0f
        && (e->act.act == ACT_NONE || e->act.act == ACT_CLAMP)) {  /* straight into C (see TileOut) */
        o.c = (float *)c + i0 * ldc + j0, o.ldc = ldc;
        if (e->z) o.z = e->z + i0 * e->ldz + j0, o.ldz = e->ldz;
        if (e->bias_m) o.bias_m = e->bias_m + i0;
        if (e->bias_n) o.bias_n = e->bias_n + j0;
        o.clamp = e->act.act == ACT_CLAMP, o.lo = e->act.a, o.hi = e->act.b;
    }
    product(kc, ap, a, lda, bp, rows, cols, &o);
    if (!o.c) store(acc, c, ldc, rows, cols, first, last, e, i0, j0);
}

/* A rows [0, M) of a row-major matrix into its blocks of rows (block_first, block_rows), each MR rows
   deep (zero rows past its own); float16 rows (half) converted a run of A_RUN at a time. */
#define A_RUN 256
static void pack_a_rows(const void *a, int half, int64_t lda, int64_t M, int64_t K, float *ap, int64_t blk0,
                        int64_t blk1) {
    for (int64_t blk = blk0; blk < blk1; blk++) {
        float *d = ap + blk * K * MR;
        int64_t r0 = block_first(M, blk);
        int rows = block_rows(M, blk);
        if (!half) {
            const float *af = a;
            for (int64_t k = 0; k < K; k++)
                for (int i = 0; i < MR; i++)
                    d[k * MR + i] = i < rows ? af[(r0 + i) * lda + k] : 0.0f;
            continue;
        }
        float run[A_RUN] __attribute__((aligned(64)));
        for (int64_t k0 = 0; k0 < K; k0 += A_RUN) {
            int64_t kn = K - k0 < A_RUN ? K - k0 : A_RUN;
            for (int i = 0; i < MR; i++) {
                if (i < rows) halves_to_floats(run, (const uint16_t *)a + (r0 + i) * lda + k0, kn);
                else fill_floats(run, kn, 0.0f);
                for (int64_t k = 0; k < kn; k++) d[(k0 + k) * MR + i] = run[k];
            }
        }
    }
}

/* One panel of B, rows [k0, k0 + kc), columns [j0, j0 + cols): d[k * NR + j] (zero past cols).
   A panel of consecutive noff (a plain matrix, a convolution's flat columns) is two vector copies
   per row; any other is gathered element by element. */
static void pack_b_panel(const void *b, int half, const int64_t *koff, const int64_t *noff, int64_t k0, int64_t kc,
                         int64_t j0, int cols, float *d) {
    const int64_t *no = noff + j0;
    if (cols == NR && no[NR - 1] - no[0] == NR - 1) {  /* one run: two vector copies (conversions) per row */
        for (int64_t k = 0; k < kc; k++, d += NR) {
            int64_t at = koff[k0 + k] + no[0];
            /* and the next panel's run of the row, into L2 (a panel is as big as L1): rows a plane apart
               (a 1x1 conv's B) are more streams than the hardware prefetcher follows (ResNet-50's GEMM
               convs 3-4% faster in the model; into L1 ~1% slower than into L2) */
            const char *next = (const char *)b + (at + NR) * (half ? 2 : 4);
            __builtin_prefetch(next, 0, 2);
            __builtin_prefetch(next + 64, 0, 2);
            if (half) {
                vstore(d, vload_half((const uint16_t *)b + at));
                vstore(d + VL, vload_half((const uint16_t *)b + at + VL));
            } else {
                vstore(d, vload((const float *)b + at));
                vstore(d + VL, vload((const float *)b + at + VL));
            }
        }
        return;
    }
    if (!half && cols == NR && kc >= VL && koff[k0 + kc - 1] - koff[k0] == kc - 1) {
        /* a transposed float32 matrix (attention's K^T: each column a run of K): VL x VL blocks read
           as runs of each column, transposed in registers */
        const float *src = (const float *)b + koff[k0];
        int64_t k = 0;
        for (; k + VL <= kc; k += VL)
            for (int j0 = 0; j0 < NR; j0 += VL) {
                vec r[VL];
#pragma GCC unroll 16
                for (int j = 0; j < VL; j++) r[j] = vload(src + no[j0 + j] + k);
                transpose_blocks(r, VL);
#pragma GCC unroll 16
                for (int i = 0; i < VL; i++) vstore(d + (k + i) * NR + j0, r[i]);
            }
        for (; k < kc; k++)
            for (int j = 0; j < NR; j++) d[k * NR + j] = src[no[j] + k];
        return;
    }
    for (int64_t k = 0; k < kc; k++, d += NR) {
        if (half) {
            const uint16_t *src = (const uint16_t *)b + koff[k0 + k];
            for (int j = 0; j < cols; j++) d[j] = half_to_float(src[no[j]]);
        } else {
            const float *src = (const float *)b + koff[k0 + k];
            for (int j = 0; j < cols; j++) d[j] = src[no[j]];
        }
        for (int j = cols; j < NR; j++) d[j] = 0.0f;
    }
}

int ge_mr(void) { return MR; }
int ge_nr(void) { return NR; }
int ge_kc(void) { return KC; }

int64_t ge_packed_a_floats(int64_t M, int64_t K) { return (M + MR - 1) / MR * MR * K; }
int64_t ge_packed_b_floats(int64_t K, int64_t N) { return (N + NR - 1) / NR * NR * K; }

/* Chunks of rows per panel: enough rows in a chunk to reuse each B panel (at most MC_MAX, whose
   block of A fits the L2 cache), and enough items (panels x chunks) to balance the threads. */
static int64_t row_chunks(int64_t M, int64_t N, int threads) {
    int64_t mblocks = (M + MR - 1) / MR, panels = (N + NR - 1) / NR;
    int64_t mc = cache_scaled(MC_MAX, cache_l2(), TUNED_L2);
    int64_t chunks = (mblocks * MR + mc - 1) / mc;
    int64_t items = ITEMS_PER_THREAD * threads;
    int64_t balance = panels <= FEW_PANELS ? items : (items + panels - 1) / panels;
    if (threads > 1 && chunks < balance) chunks = balance;
    return chunks < mblocks ? chunks : (mblocks > 0 ? mblocks : 1);
}

static int64_t padded(int64_t n, int64_t tile) { return (n + tile - 1) / tile * tile; }

/* Workspace (floats) for a call: the packed A when A is raw; for a gathered B, one panel per thread
   and room for the whole packed B, taken when several chunks of rows would each gather it again.
   What any level's tiles need (vector widths 4, 8 and 16), not only this one's: the compiler plans
   it into the OM, which then runs on CPUs of every level (setup.py builds one library per level). */
int64_t ge_workspace_floats(int64_t M, int64_t N, int64_t K, int raw_a, int gathered_b, int threads) {
    int64_t need = 0;
    for (int vl = 4; vl <= 16; vl *= 2) {
        int64_t panels = (int64_t)threads * KC * 2 * vl, whole = padded(N, 2 * vl) * K;
        int64_t b = !gathered_b ? 0 : panels > whole ? panels : whole;
        int64_t floats = (raw_a ? padded(M, MR_OF(vl)) * K : 0) + b + 16;
        need = floats > need ? floats : need;
    }
    return need;
}

/* A short K and at least as many rows (a pointwise conv that expands a large plane: 16 -> 96 channels
   at 112x112): C is most of the traffic, and panels outermost write MR-row strips of every one of M
   rows per panel, M streams into cold memory. With B packed whole (it fits in L2) and blocks of rows
   outermost, a block of MR rows is written as MR long runs; B is read again per block, from L2.
   (In MobileNetV2 and V3, single-threaded: 16 -> 96 at 112x112 30-45% faster, 16 -> 16 with its
   residual 15%.) */
#define SWEEP_K 64
#define SWEEP_B_FLOATS (1 << 18)  /* B packed whole: 1 MB */
static int sweep_rows(int64_t M, int64_t N, int64_t K) {
    return K <= SWEEP_K && M >= K && M > MR && ge_packed_b_floats(K, N) <= SWEEP_B_FLOATS;
}

typedef struct {
    int64_t M, N, K, lda, ldc, mblocks, panels, chunks, chunk_blocks, group_panels;
    int few_panels;  /* all panels in every item, blocks of A outermost (B packed whole) */
    int in_place;  /* A's whole blocks of rows read in place (a_in_place), its tail block packed */
    int onto_c;  /* C holds Z (written over it): every block of K adds onto C, Z is not added again */
    int b_weights;  /* B came packed (a layer's weights, from memory), not packed here from activations */
    int64_t kc;  /* the blocks of K */
    const void *a, *b;  /* float16 when half & HALF_A, HALF_B */
    const float *bp;
    const int64_t *koff, *noff;
    float *a_packed, *scratch;
    void *c;  /* float16 when e.half_c */
    int half;
    Epilogue e;
} Gemm;

/* A raw A is read in place, never packed, where the product is rows of activations: times packed
weights (a MatMul's A @ W, a transformer's layers) or one of a batch (attention's Q K^T and P V),
with a K of at most WHOLE_K, which is then one block, so C is written once. (A packed per call was
3-4% of ViT's 197 x 768 x 768 products and a fifth of attention's; K = 768 in two blocks of 384 cost
another 3-5% at N = 3072.) Not when A's rows are a multiple of 4 KB apart: the block's 12 rows fall
into one set of the L1 cache, whose 8 ways do not hold them (rows 8 KB and 12 KB apart measured 5%
slower in place). */
#define WHOLE_K 1024
/* A gathered B packed whole (several chunks of rows, or few panels) leaves no limit on K's block: a raw A
   is read in place up to IN_PLACE_K, K in one block, not packed first (a pass over A and another over
   its copy, for nothing). Attention's P V over 1500 positions (Whisper's encoder: 1500 x 1500 x 64 per
   head, one thread): 17.0 -> 10.7 ms with AVX-512, 27.3 -> 21.3 at v3; 2 x 1500^3 3% faster. */
#define IN_PLACE_K 4096
/* Products with packed weights take K in one block up to WEIGHTS_WHOLE_K (C written once; the panel
   of B, K x NR floats, stays in L2 across the blocks of rows): with AVX-512, ViT's and BERT's 3072 ->
   768 products 3-5% faster than in blocks of 615. Not with AVX2's 6 x 16 tile: there blocks of at
   most WEIGHTS_KC = 512 (a 32 KB block of the panel stays in L1 while the blocks of rows pass over
   it) made the 3072 -> 768 products 3-17% faster in five interleaved pairs (one thread, loaded
   machine), 2048 -> 512 0-16%. */
#if VL == 8
#define WEIGHTS_WHOLE_K 1024
#define WEIGHTS_KC 512
#else
#define WEIGHTS_WHOLE_K 4096
#define WEIGHTS_KC KC
#endif
static int a_in_place(const Gemm *g, const float *ap, const float *bp, int rows_of_activations) {
    /* (a gathered B's panels have KC rows of room in the workspace: K is one block up to KC there, unless
       B is packed whole: several chunks of rows, or few panels) */
    const int whole_b = !bp && (g->chunks > 1 || g->few_panels);
    return !ap && rows_of_activations && !(g->half & HALF_A) && g->K <= (bp ? WHOLE_K : whole_b ? IN_PLACE_K : KC)
           && (g->lda * 4) % 4096 != 0;
}

/* The block of rows at (i0, k0) of a float32 A read in place (NULL where A is packed) */
static const float *in_place_rows(const Gemm *g, int64_t i0, int64_t k0) {
    return g->in_place ? (const float *)g->a + i0 * g->lda + k0 : NULL;
}

static void pack_b_item(void *ctx, int64_t p, int slot) {
    Gemm *g = ctx;
    (void)slot;
    int cols = g->N - p * NR < NR ? (int)(g->N - p * NR) : NR;
    pack_b_panel(g->b, g->half & HALF_B, g->koff, g->noff, 0, g->K, p * NR, cols, (float *)g->bp + p * g->K * NR);
}

static void pack_a_item(void *ctx, int64_t blk, int slot) {
    Gemm *g = ctx;
    (void)slot;
    pack_a_rows(g->a, g->half & HALF_A, g->lda, g->M, g->K, g->a_packed, blk, blk + 1);
}

/* Weights, packed once at load (on the pool: a model's weights are ~100 MB to copy). */
void ge_pack_a(const float *a, int64_t lda, int64_t M, int64_t K, float *ap, int threads) {
    Gemm g = {.M = M, .K = K, .lda = lda, .a = a, .a_packed = ap};  /* float32 */
    pool_run(pack_a_item, &g, (M + MR - 1) / MR, threads);
}

void ge_pack_b(const float *b, const int64_t *koff, const int64_t *noff, int64_t K, int64_t N, float *bp,
               int threads) {
    Gemm g = {.N = N, .K = K, .b = b, .koff = koff, .noff = noff, .bp = bp};
    pool_run(pack_b_item, &g, (N + NR - 1) / NR, threads);
}

/* Item it's blocks of rows [blk0, blk1) and panels [p0, p1). */
static void item_range(const Gemm *g, int64_t it, int64_t *blk0, int64_t *blk1, int64_t *p0, int64_t *p1) {
    int64_t group = it / g->chunks, ch = it % g->chunks;
    *blk0 = ch * g->chunk_blocks;
    *blk1 = *blk0 + g->chunk_blocks < g->mblocks ? *blk0 + g->chunk_blocks : g->mblocks;
    *p0 = group * g->group_panels;
    *p1 = *p0 + g->group_panels < g->panels ? *p0 + g->group_panels : g->panels;
}

#define NEXT_PANEL_BYTES (96 << 10)  /* the largest block of a panel of weights gemm_item prefetches */
#define NEXT_PANEL_ROWS 96  /* the fewest rows of an item that gemm_item prefetches the next panel for */
/* One item: a group of panels times a chunk of rows, over every block of K in turn (so a thread
   that claimed it owns its block of C: no barrier between the blocks of K). */
static void gemm_item(void *ctx, int64_t it, int slot) {
    Gemm *g = ctx;
    int64_t K = g->K, blk0, blk1, p0, p1;
    item_range(g, it, &blk0, &blk1, &p0, &p1);
    int64_t k0 = 0;
    do {  /* K = 0 still runs once: C = the epilogue of zero */
        int64_t kc = K - k0 < g->kc ? K - k0 : g->kc;
        int first = k0 == 0 && !g->onto_c, last = k0 + kc >= K;
        if (g->few_panels) {  /* few columns, many rows: each block of A (weights) is read once per block of K */
            for (int64_t blk = blk0; blk < blk1; blk++) {
                int64_t i0 = block_first(g->M, blk);
                int rows = block_rows(g->M, blk);
                for (int64_t p = p0; p < p1; p++) {
                    int64_t j0 = p * NR;
                    int cols = g->N - j0 < NR ? (int)(g->N - j0) : NR;
                    const float *ab = g->in_place && in_place_tile(rows) ? NULL : g->a_packed + blk * K * MR + k0 * MR;
                    micro_kernel(kc, ab, in_place_rows(g, i0, k0), g->lda, g->bp + p * K * NR + k0 * NR,
                                 g->c, g->ldc, rows, cols, first, last, &g->e, i0, j0);
                }
            }
        } else {
            for (int64_t p = p0; p < p1; p++) {
                int64_t j0 = p * NR;
                int cols = g->N - j0 < NR ? (int)(g->N - j0) : NR;
                const float *panel = g->bp ? g->bp + p * K * NR + k0 * NR : g->scratch + (int64_t)slot * KC * NR;
                if (!g->bp) pack_b_panel(g->b, g->half & HALF_B, g->koff, g->noff, k0, kc, j0, cols, (float *)panel);
                /* packed weights: the next panel's block into L2, a slice of it per block of rows. A
                   model's weights come from memory, read once per inference, and the hardware
                   prefetcher restarts at every page of a new panel (BERT's and ViT's products, 128-197
                   rows, cold weights, one thread: 3-9% faster at v3, 5-8% with AVX-512). Not past
                   NEXT_PANEL_BYTES: AVX-512's panels of 2048-3072 rows (256-384 KB) ran 3-5% slower,
                   AVX2's of 2048 (128 KB) 0-7%. Nor for fewer than NEXT_PANEL_ROWS rows (a short
                   sequence's products): their few blocks issue a whole panel's prefetches in a burst or
                   two, and the next panel arrives as fast without them (weights in L2 or L3: 8 x 768 x
                   2304 20-25% faster without at v3 and v4, 16 rows 10-20%, 32 rows 10%). */
                const char *next = g->b_weights && p + 1 < g->panels && kc * NR * 4 <= NEXT_PANEL_BYTES
                                   && (blk1 - blk0) * MR >= NEXT_PANEL_ROWS ? (const char *)(panel + K * NR) : NULL;
                int64_t lines = kc * NR * 4 / 64, blocks = blk1 > blk0 ? blk1 - blk0 : 1;
                int64_t slice = (lines + blocks - 1) / blocks;
                for (int64_t blk = blk0; blk < blk1; blk++) {
                    int64_t i0 = block_first(g->M, blk);
                    int rows = block_rows(g->M, blk);
                    for (int64_t l = (blk - blk0) * slice; next && l < (blk - blk0 + 1) * slice && l < lines; l++)
                        __builtin_prefetch(next + l * 64, 0, 2);
                    const float *ab = g->in_place && in_place_tile(rows) ? NULL : g->a_packed + blk * K * MR + k0 * MR;
                    micro_kernel(kc, ab, in_place_rows(g, i0, k0), g->lda, panel, g->c, g->ldc,
                                 rows, cols, first, last, &g->e, i0, j0);
                }
            }
        }
        k0 += kc;
    } while (k0 < K);
}

/* gemm_item for a float16 C over several blocks of K (B packed whole): per tile, the blocks' products
   summed in float32 as store_block would have summed them in C, then stored once. */
static void gemm_tiles_item(void *ctx, int64_t it, int slot) {
    Gemm *g = ctx;
    (void)slot;
    int64_t K = g->K, blk0, blk1, p0, p1;
    item_range(g, it, &blk0, &blk1, &p0, &p1);
    float sum[MR * NR] __attribute__((aligned(64))), acc[MR * NR] __attribute__((aligned(64)));
    Epilogue e = g->e;  /* Z added with the first block (z_first) is not added again as the sum is stored */
    if (e.z_first) e.z = NULL;
    for (int64_t p = p0; p < p1; p++) {
        int64_t j0 = p * NR;
        int cols = g->N - j0 < NR ? (int)(g->N - j0) : NR;
        for (int64_t blk = blk0; blk < blk1; blk++) {
            int64_t i0 = block_first(g->M, blk);
            int rows = block_rows(g->M, blk);
            for (int64_t k0 = 0; k0 < K; k0 += g->kc) {
                int64_t kc = K - k0 < g->kc ? K - k0 : g->kc;
                TileOut o = {.acc = k0 ? acc : sum, .rows = rows};
                product(kc, g->a_packed + blk * K * MR + k0 * MR, NULL, 0, g->bp + p * K * NR + k0 * NR, rows, cols, &o);
                if (!k0 && g->e.z && g->e.z_first) add_z_block(&g->e, sum, rows, cols, i0, j0);
                if (k0)
                    for (int t = 0; t < rows * NR; t += VL) vstore(sum + t, vload(acc + t) + vload(sum + t));
            }
            store(sum, g->c, g->ldc, rows, cols, 1, 1, &e, i0, j0);
        }
    }
}

/* in_place_ok: A is rows of activations (see a_in_place) */
static void gemm_run(const GemmArgs *args, int in_place_ok) {
    int64_t M = args->M, N = args->N, K = args->K;
    int threads = args->threads;
    const float *ap = args->ap, *bp = args->bp;
    float *ws = args->ws;
    int half = args->half;
    Gemm g = {.M = M, .N = N, .K = K, .lda = args->lda, .ldc = args->ldc, .a = args->a, .b = args->b, .bp = bp,
              .koff = args->koff, .noff = args->noff, .a_packed = (float *)ap, .c = args->c, .scratch = ws,
              .half = half,
              .e = {args->bias_m, args->bias_n, args->z, args->ldz, args->act, args->alpha,
                    args->pitch, args->width, !!(half & HALF_C), !!(half & HALF_BIAS)}};
    g.e.z_first = g.e.alpha == 1.0f;
    g.b_weights = bp != NULL;
    /* Y over Z: C starts as Z (a float16 C is stored once, its tile of Z read just before) */
    if (g.e.z && g.e.z == g.c && args->ldz == args->ldc && g.e.z_first && !g.e.half_c) {
        g.onto_c = 1;
        g.e.z = NULL;
    }
    g.mblocks = (M + MR - 1) / MR;
    g.panels = (N + NR - 1) / NR;
    if (threads < 1) threads = 1;
    g.chunks = row_chunks(M, N, threads);
    g.chunk_blocks = (g.mblocks + g.chunks - 1) / g.chunks;
    g.chunks = (g.mblocks + g.chunk_blocks - 1) / g.chunk_blocks;
    /* adjacent panels in one item (a wide strip of each row of C, in few pages) while there are
       more than enough items to balance the threads */
    g.group_panels = g.panels / (ITEMS_PER_THREAD * threads * g.chunks);
    if (g.group_panels < 1) g.group_panels = 1;
    g.few_panels = g.panels <= FEW_PANELS && g.chunks > 1;
    if (!bp && sweep_rows(M, N, K)) {  /* each item a block of rows across every panel */
        g.few_panels = 1;
        g.chunks = g.mblocks, g.chunk_blocks = 1;
    }
    if (g.few_panels) g.group_panels = g.panels;
    g.in_place = a_in_place(&g, ap, bp, in_place_ok);
    if (!ap) {
        g.a_packed = ws;
        g.scratch = ws + ge_packed_a_floats(M, K);
        if (!g.in_place) pool_run(pack_a_item, &g, g.mblocks, threads);
        else if (g.mblocks && !in_place_tile(block_rows(M, g.mblocks - 1)))  /* (only the last block can be) */
            pack_a_item(&g, g.mblocks - 1, 0);  /* in place reads a tile's rows: a block of another height is packed */
    }
    /* blocks of K of equal size (576 = 1 x 576, not 512 + 64: a short block costs a pass over C too) */
    const int64_t block = bp && !ap ? WEIGHTS_KC : KC;
    int64_t kblocks = g.in_place || (bp && !ap && K <= WEIGHTS_WHOLE_K) ? 1 : (K + block - 1) / block;
    g.kc = kblocks ? (K + kblocks - 1) / kblocks : 0;
    int tiles = g.e.half_c && kblocks > 1;  /* a float16 C is stored once: tiles summed over K (B packed whole) */
    if (!bp && (g.chunks > 1 || g.few_panels || tiles)) {  /* pack B once, not once per chunk of rows */
        g.bp = g.scratch;
        pool_run(pack_b_item, &g, g.panels, threads);
    }
    pool_run(tiles ? gemm_tiles_item : gemm_item, &g, (g.panels + g.group_panels - 1) / g.group_panels * g.chunks,
             threads);
}

void ge_gemm_args(const GemmArgs *args) { gemm_run(args, args->bp != NULL); }

/* One row of A against a B read in place (a decoding step's attention, one query row a head: Q K^T
and P V), float32 and plain C: packing B's panels (K^T's through register transposes) and running a
tile of MR rows for one cost more than the products, and so did numpy's strided matmul. B as it
lies: its columns runs of K (K^T, a transposed matrix: VL dot products at a time, summed across
lanes by one register transpose), or its rows runs of N (a plain matrix: each a[k] broadcast over
ROW_NV vectors of a row, the even and odd k in two sets of accumulators). The epilogue in
store_block's order. (Four heads of [1, 64] x [64, 129], one thread, v3: 2.8 us, numpy's matmul of
the same contiguous operands 4.3, of GPT-2's strided views with its scale about 20; at 2-4 rows
numpy's BLAS caught up or won, so those rows keep the GEMM.) */
#define ROW_NV 4  /* vectors of columns per pass over a plain B's rows: 2 ROW_NV accumulators */
enum { B_GATHERED, B_COLUMNS, B_ROWS };  /* how B lies: neither, runs of K per column, runs of N per row */

static int b_layout(const GemmArgs *g) {
    if (g->M != 1 || g->half || g->pitch || g->K < 1 || !g->koff || !g->noff) return B_GATHERED;
    int columns = 1, rows = 1;
    for (int64_t k = 1; k < g->K && columns; k++) columns = g->koff[k] == g->koff[0] + k;
    for (int64_t n = 1; n < g->N && rows; n++) rows = g->noff[n] == g->noff[0] + n;
    return columns ? B_COLUMNS : rows ? B_ROWS : B_GATHERED;
}

/* C's columns [n, n + part): v with the epilogue (as store_block and finish_row add it) */
static inline void row_store(const GemmArgs *g, vec v, int64_t n, int part) {
    const int z_first = g->alpha == 1.0f;
    if (g->z && z_first) v += load_part(g->z + n, part);
    if (g->alpha != 1.0f) v *= g->alpha;
    if (g->bias_m) v += g->bias_m[0];
    if (g->bias_n) v += load_part(g->bias_n + n, part);
    if (g->z && !z_first) v += load_part(g->z + n, part);
    store_part(g->c + n, vactivate(v, g->act), part);
}

/* B's columns runs of K: C[n] = a . column n, VL columns at a time, one accumulator each (a vector
   of a loaded once for the VL columns) */
static void row_times_columns(const GemmArgs *g) {
    const int64_t K = g->K, body = K - K % VL;
    const int tail = (int)(K % VL);
    const float *b = g->b + g->koff[0], *x = g->a;
    const vec xt = tail ? load_part(x + body, tail) : (vec){0};
    for (int64_t n0 = 0; n0 < g->N; n0 += VL) {
        const int cols = g->N - n0 < VL ? (int)(g->N - n0) : VL;
        const float *col[VL];
        for (int j = 0; j < VL; j++) col[j] = b + g->noff[n0 + (j < cols ? j : 0)];
        vec acc[VL];
#pragma GCC unroll 16
        for (int j = 0; j < VL; j++) acc[j] = (vec){0};
        for (int64_t k = 0; k < body; k += VL) {
            const vec xv = vload(x + k);
#pragma GCC unroll 16
            for (int j = 0; j < VL; j++) acc[j] += xv * vload(col[j] + k);
        }
        if (tail) {
#pragma GCC unroll 16
            for (int j = 0; j < VL; j++) acc[j] += xt * load_part(col[j] + body, tail);
        }
        transpose_blocks(acc, VL);
        vec s = acc[0];
#pragma GCC unroll 16
        for (int j = 1; j < VL; j++) s += acc[j];
        row_store(g, s, n0, cols);
    }
}

/* B's rows runs of N: C[n0 .. n0 + NV VL) = sum_k a[k] B[k, n0 ..], the last vector `last` lanes
   wide; NV a constant at each inlined call */
static inline __attribute__((always_inline)) void row_span(const int NV, const GemmArgs *g, int64_t n0, int last) {
    const float *x = g->a, *b = g->b + g->noff[0] + n0;
    const int64_t *koff = g->koff;
    vec acc[2][ROW_NV];
    for (int v = 0; v < NV; v++) acc[0][v] = acc[1][v] = (vec){0};
#define ROW_VEC(row, v) ((v) == NV - 1 && last < VL ? load_part((row) + (v) * VL, last) : vload((row) + (v) * VL))
    int64_t k = 0;
    for (; k + 2 <= g->K; k += 2) {
        const float *r0 = b + koff[k], *r1 = b + koff[k + 1];
        const vec x0 = (vec){0} + x[k], x1 = (vec){0} + x[k + 1];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[0][v] += x0 * ROW_VEC(r0, v);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[1][v] += x1 * ROW_VEC(r1, v);
    }
    if (k < g->K) {
        const float *r0 = b + koff[k];
        const vec x0 = (vec){0} + x[k];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[0][v] += x0 * ROW_VEC(r0, v);
    }
#undef ROW_VEC
    for (int v = 0; v < NV; v++) row_store(g, acc[0][v] + acc[1][v], n0 + v * VL, v == NV - 1 ? last : VL);
}

static void row_times_rows(const GemmArgs *g) {
    for (int64_t n0 = 0; n0 < g->N; n0 += ROW_NV * VL) {
        const int64_t cols = g->N - n0 < ROW_NV * VL ? g->N - n0 : ROW_NV * VL;
        const int nv = (int)((cols + VL - 1) / VL), last = (int)(cols - (nv - 1) * VL);
        switch (nv) {
            case 1: row_span(1, g, n0, last); break;
            case 2: row_span(2, g, n0, last); break;
            case 3: row_span(3, g, n0, last); break;
            default: row_span(ROW_NV, g, n0, last); break;
        }
    }
}

typedef struct {
    const GemmBatch *bt;
    int layout;
} BatchRun;

static void gemm_batch_item(void *ctx, int64_t i, int slot) {
    const BatchRun *run = ctx;
    const GemmBatch *bt = run->bt;
    GemmArgs g = bt->g;
    g.a = advance(g.a, g.half & HALF_A, bt->a_off ? bt->a_off[i] : 0);
    g.b = advance(g.b, g.half & HALF_B, bt->b_off ? bt->b_off[i] : 0);
    g.c = (float *)advance(g.c, g.half & HALF_C, bt->c_off ? bt->c_off[i] : 0);
    if (bt->bias_off) g.bias_n = advance(g.bias_n, g.half & HALF_BIAS, bt->bias_off[i]);
    if (bt->z_off) g.z = advance(g.z, g.half & HALF_C, bt->z_off[i]);
    if (run->layout == B_COLUMNS) {
        row_times_columns(&g);
        return;
    }
    if (run->layout == B_ROWS) {
        row_times_rows(&g);
        return;
    }
    g.threads = 1;
    g.ws += slot * ge_workspace_floats(g.M, g.N, g.K, 1, 1, 1);
    gemm_run(&g, 1);
}

void ge_gemm_batch(const GemmBatch *bt) {
    BatchRun run = {bt, bt->g.M > 0 && bt->g.N > 0 ? b_layout(&bt->g) : B_GATHERED};
    pool_run(gemm_batch_item, &run, bt->batch, bt->g.threads);
}
