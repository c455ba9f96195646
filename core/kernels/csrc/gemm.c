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
Packed layouts: A in blocks of MR rows, k-major inside (ap[blk*K*MR + k*MR + i]); B in panels of
NR columns, k-major inside (bp[p*K*NR + k*NR + j]).
Work: items (a group of adjacent panels, a chunk of rows) claimed one by one by the threads of
pool.h, each over K split evenly into blocks of at most KC: per block and panel, pack the panel
(when gathered; a run of NR floats per row is two vector copies) into the thread's scratch, then
run the micro-kernel over the chunk's blocks of MR rows (with few panels and many rows, blocks of
rows go outermost over B packed whole, so each block of weights is read once). An item owns its
block of C through all of K, so one GEMM is one job of the pool: no barrier per block of K, and
enough items (ITEMS_PER_THREAD) that a thread finishing early has one to take. (Reading B's rows in
place, unpacked, measured slower: the hardware prefetcher follows one packed stream, not a row
pointer per step.) The caller's workspace
holds the packed A (when raw) and the packed panels of B; sizes from ge_workspace_floats.

Vector code through GCC/Clang vector extensions (simd.h): one source for AVX-512, AVX2 and NEON, tile
sizes chosen by the register file the compiler targets (the level's -march: setup.py builds one library per level). */
#include "abi.h"
#include "pool.h"
#include "simd.h"

#define MR_OF(vl) ((vl) == 16 ? 12 : (vl) == 8 ? 6 : 8)  /* the micro-kernel's rows per vector width */
#define MR MR_OF(VL)
#define NR (2 * VL)
#define KC 640  /* the largest block of K (blocks are K split evenly: 576, 2 x 576, ...) */
#define FEW_PANELS 8  /* up to this many panels (and several chunks of rows), A blocks go outermost */
#define ITEMS_PER_THREAD 8  /* work items per thread: enough to balance them (measured: 4 left 3-6% idle) */
#define MC_MAX 480  /* rows of A per chunk: 480 x KC floats stay in a 2 MB L2 cache */

typedef struct {
    const float *bias_m, *bias_n, *z;
    int64_t ldz;
    Activation act;
    float alpha;  /* the product's scale, before bias and Z */
    /* flat columns (a convolution's output rows `pitch` apart, the columns past `width` padding):
       column n of C is Y's column (n / pitch) * width + n % pitch when n % pitch < width, else
       dropped; 0: C is plain */
    int64_t pitch, width;
    /* Z is added with the first block of K (before the bias: the order is the same whether Y is written
       over Z or not, so both give the same bits); only with alpha 1, else with the last block */
    int z_first;
} Epilogue;

/* The vector at src + at of a row of `cols` valid floats (zeros past them). */
static inline vec load_cols(const float *src, int cols, int at) {
    return at + VL <= cols ? vload(src + at) : at < cols ? load_part(src + at, cols - at) : (vec){0};
}

/* The epilogue's activation, on the two vectors of a row of a block. */
static inline void activate(const Epilogue *e, vec *v0, vec *v1) {
    if (e->act.act != ACT_NONE) *v0 = vactivate(*v0, e->act), *v1 = vactivate(*v1, e->act);
}

/* Write a block of products to C: overwrite (first) or add to it, and apply the epilogue (last).
   rows/cols: the valid part of the block. Kept apart from the product loop, whose accumulators
   need every register. */
static void store_block(const float *acc, float *c, int64_t ldc, int rows, int cols, int first, int last,
                        const Epilogue *e, int64_t i0, int64_t j0) {
    float tmp[NR];
    for (int i = 0; i < rows; i++) {
        const float *src = acc + i * NR;
        float *cr = c + i * ldc;
        vec v0 = vload(src), v1 = vload(src + VL);
        float *dst = cols == NR ? cr : tmp;  /* a partial panel goes through a full-width buffer */
        const float *zr = e->z && (e->z_first ? first : last) ? e->z + (i0 + i) * e->ldz + j0 : NULL;
        if (!first) {
            if (dst == tmp) memcpy(tmp, cr, (size_t)cols * 4);
            v0 += vload(dst); v1 += vload(dst + VL);
        } else if (zr && e->z_first) {
            v0 += load_cols(zr, cols, 0), v1 += load_cols(zr, cols, VL);
        }
        if (last) {
            if (e->alpha != 1.0f) { v0 *= e->alpha; v1 *= e->alpha; }
            if (e->bias_m) { v0 += e->bias_m[i0 + i]; v1 += e->bias_m[i0 + i]; }
            if (e->bias_n) v0 += load_cols(e->bias_n + j0, cols, 0), v1 += load_cols(e->bias_n + j0, cols, VL);
            if (zr && !e->z_first) v0 += load_cols(zr, cols, 0), v1 += load_cols(zr, cols, VL);
            activate(e, &v0, &v1);
        }
        vstore(dst, v0); vstore(dst + VL, v1);
        if (dst == tmp) memcpy(cr, tmp, (size_t)cols * 4);
    }
}

/* store_block for flat columns (e->pitch): the valid runs of the panel's columns are found once,
   then each row goes through a full-width buffer: gathered from Y and Z along those runs,
   scattered back along them. Only per-row bias (a convolution's) applies here. */
static void store_block_flat(const float *acc, float *c, int64_t ldc, int rows, int cols, int first, int last,
                             const Epilogue *e, int64_t i0, int64_t j0) {
    int64_t run_at[NR], run_to[NR], run_n[NR];  /* offset in the panel, column of Y, length */
    int runs = 0;
    for (int64_t t = 0; t < cols;) {
        int64_t n = j0 + t, oy = n / e->pitch, ox = n % e->pitch;
        int64_t rest = e->pitch - ox < cols - t ? e->pitch - ox : cols - t;
        if (ox < e->width) {
            run_at[runs] = t, run_to[runs] = oy * e->width + ox;
            run_n[runs++] = e->width - ox < rest ? e->width - ox : rest;
        }
        t += rest;
    }
    float tmp[NR] __attribute__((aligned(64))) = {0}, zt[NR] __attribute__((aligned(64))) = {0};
    for (int i = 0; i < rows; i++) {
        float *cr = c + i * ldc;
        vec v0 = vload(acc + i * NR), v1 = vload(acc + i * NR + VL);
        int add_z = e->z && (e->z_first ? first : last);
        if (add_z) {
            const float *zr = e->z + (i0 + i) * e->ldz;
            for (int r = 0; r < runs; r++) copy_floats(zt + run_at[r], zr + run_to[r], run_n[r]);
        }
        if (!first) {
            for (int r = 0; r < runs; r++) copy_floats(tmp + run_at[r], cr + run_to[r], run_n[r]);
            v0 += vload(tmp), v1 += vload(tmp + VL);  /* lanes outside the runs: dropped */
        } else if (add_z && e->z_first) {
            v0 += vload(zt), v1 += vload(zt + VL);
        }
        if (last) {
            if (e->alpha != 1.0f) { v0 *= e->alpha; v1 *= e->alpha; }
            if (e->bias_m) { v0 += e->bias_m[i0 + i]; v1 += e->bias_m[i0 + i]; }
            if (add_z && !e->z_first) v0 += vload(zt), v1 += vload(zt + VL);
            activate(e, &v0, &v1);
        }
        vstore(tmp, v0), vstore(tmp + VL, v1);
        for (int r = 0; r < runs; r++) copy_floats(cr + run_to[r], tmp + run_at[r], run_n[r]);
    }
}

/* The first R rows of a block of packed A times the first V vectors (V = 1 or 2) of a packed panel
of B, over kc steps. R and V are constants in each inlined copy, so the accumulators stay in
registers. */
static inline __attribute__((always_inline)) void block_product(const int R, const int V, int64_t kc,
                                                                const float *ap, const float *bp, float *acc) {
    vec acc0[MR], acc1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc0[i] = acc1[i] = (vec){0};
    for (int64_t k = 0; k < kc; k++, ap += MR, bp += NR) {
        vec b0 = vload(bp), b1 = V == 2 ? vload(bp + VL) : b0;
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            acc0[i] += ap[i] * b0;
            if (V == 2) acc1[i] += ap[i] * b1;
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) { vstore(acc + i * NR, acc0[i]); vstore(acc + i * NR + VL, acc1[i]); }
}

/* One block of MR rows x NR columns of C (c: the block's first row; j0: its first column). A tail block of rows runs a shorter product (64 rows are
   5 x 12 + 4, not 6 x 12), a tail panel of at most VL columns a one-vector product. */
static void micro_kernel(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                         int rows, int cols, int first, int last, const Epilogue *e,
                         int64_t i0, int64_t j0) {
    float acc[MR * NR] __attribute__((aligned(64)));
    if (cols > VL) {
        if (rows > 2 * MR / 3) block_product(MR, 2, kc, ap, bp, acc);
        else if (rows > MR / 3) block_product(2 * MR / 3, 2, kc, ap, bp, acc);
        else block_product(MR / 3, 2, kc, ap, bp, acc);
    } else {
        if (rows > MR / 2) block_product(MR, 1, kc, ap, bp, acc);
        else block_product(MR / 2, 1, kc, ap, bp, acc);
    }
    if (e->pitch) store_block_flat(acc, c, ldc, rows, cols, first, last, e, i0, j0);
    else store_block(acc, c + j0, ldc, rows, cols, first, last, e, i0, j0);
}

/* A rows [0, M) of a row-major matrix into blocks of MR rows (zero rows past M). */
static void pack_a_rows(const float *a, int64_t lda, int64_t M, int64_t K, float *ap, int64_t blk0, int64_t blk1) {
    for (int64_t blk = blk0; blk < blk1; blk++) {
        float *d = ap + blk * K * MR;
        int64_t r0 = blk * MR;
        for (int64_t k = 0; k < K; k++)
            for (int i = 0; i < MR; i++)
                d[k * MR + i] = r0 + i < M ? a[(r0 + i) * lda + k] : 0.0f;
    }
}

/* One panel of B, rows [k0, k0 + kc), columns [j0, j0 + cols): d[k * NR + j] (zero past cols).
   A panel of consecutive noff (a plain matrix, a convolution's flat columns) is two vector copies
   per row; any other is gathered element by element. */
static void pack_b_panel(const float *b, const int64_t *koff, const int64_t *noff, int64_t k0, int64_t kc,
                         int64_t j0, int cols, float *d) {
    const int64_t *no = noff + j0;
    if (cols == NR && no[NR - 1] - no[0] == NR - 1) {  /* one run: two vector copies per row */
        for (int64_t k = 0; k < kc; k++, d += NR) {
            const float *src = b + koff[k0 + k] + no[0];
            /* and the next panel's run of the row, into L2 (a panel is as big as L1): rows a plane apart
               (a 1x1 conv's B) are more streams than the hardware prefetcher follows (ResNet-50's GEMM
               convs 3-4% faster in the model; into L1 ~1% slower than into L2) */
            __builtin_prefetch(src + NR, 0, 2);
            __builtin_prefetch(src + NR + 16, 0, 2);
            vstore(d, vload(src));
            vstore(d + VL, vload(src + VL));
        }
        return;
    }
    for (int64_t k = 0; k < kc; k++, d += NR) {
        const float *src = b + koff[k0 + k];
        for (int j = 0; j < cols; j++) d[j] = src[no[j]];
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
    int64_t chunks = (mblocks * MR + MC_MAX - 1) / MC_MAX;
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
    int onto_c;  /* C holds Z (written over it): every block of K adds onto C, Z is not added again */
    int64_t kc;  /* the blocks of K */
    const float *a, *b, *bp;
    const int64_t *koff, *noff;
    float *a_packed, *c, *scratch;
    Epilogue e;
} Gemm;

static void pack_b_item(void *ctx, int64_t p, int slot) {
    Gemm *g = ctx;
    (void)slot;
    int cols = g->N - p * NR < NR ? (int)(g->N - p * NR) : NR;
    pack_b_panel(g->b, g->koff, g->noff, 0, g->K, p * NR, cols, (float *)g->bp + p * g->K * NR);
}

static void pack_a_item(void *ctx, int64_t blk, int slot) {
    Gemm *g = ctx;
    (void)slot;
    pack_a_rows(g->a, g->lda, g->M, g->K, g->a_packed, blk, blk + 1);
}

/* Weights, packed once at load (on the pool: a model's weights are ~100 MB to copy). */
void ge_pack_a(const float *a, int64_t lda, int64_t M, int64_t K, float *ap, int threads) {
    Gemm g = {.M = M, .K = K, .lda = lda, .a = a, .a_packed = ap};
    pool_run(pack_a_item, &g, (M + MR - 1) / MR, threads);
}

void ge_pack_b(const float *b, const int64_t *koff, const int64_t *noff, int64_t K, int64_t N, float *bp,
               int threads) {
    Gemm g = {.N = N, .K = K, .b = b, .koff = koff, .noff = noff, .bp = bp};
    pool_run(pack_b_item, &g, (N + NR - 1) / NR, threads);
}

/* One item: a group of panels times a chunk of rows, over every block of K in turn (so a thread
   that claimed it owns its block of C: no barrier between the blocks of K). */
static void gemm_item(void *ctx, int64_t it, int slot) {
    Gemm *g = ctx;
    int64_t group = it / g->chunks, ch = it % g->chunks, K = g->K;
    int64_t blk0 = ch * g->chunk_blocks;
    int64_t blk1 = blk0 + g->chunk_blocks < g->mblocks ? blk0 + g->chunk_blocks : g->mblocks;
    int64_t p0 = group * g->group_panels;
    int64_t p1 = p0 + g->group_panels < g->panels ? p0 + g->group_panels : g->panels;
    int64_t k0 = 0;
    do {  /* K = 0 still runs once: C = the epilogue of zero */
        int64_t kc = K - k0 < g->kc ? K - k0 : g->kc;
        int first = k0 == 0 && !g->onto_c, last = k0 + kc >= K;
        if (g->few_panels) {  /* few columns, many rows: each block of A (weights) is read once per block of K */
            for (int64_t blk = blk0; blk < blk1; blk++) {
                int64_t i0 = blk * MR;
                int rows = g->M - i0 < MR ? (int)(g->M - i0) : MR;
                for (int64_t p = p0; p < p1; p++) {
                    int64_t j0 = p * NR;
                    int cols = g->N - j0 < NR ? (int)(g->N - j0) : NR;
                    micro_kernel(kc, g->a_packed + blk * K * MR + k0 * MR, g->bp + p * K * NR + k0 * NR,
                                 g->c + i0 * g->ldc, g->ldc, rows, cols, first, last, &g->e, i0, j0);
                }
            }
        } else {
            for (int64_t p = p0; p < p1; p++) {
                int64_t j0 = p * NR;
                int cols = g->N - j0 < NR ? (int)(g->N - j0) : NR;
                const float *panel = g->bp ? g->bp + p * K * NR + k0 * NR : g->scratch + (int64_t)slot * KC * NR;
                if (!g->bp) pack_b_panel(g->b, g->koff, g->noff, k0, kc, j0, cols, (float *)panel);
                for (int64_t blk = blk0; blk < blk1; blk++) {
                    int64_t i0 = blk * MR;
                    int rows = g->M - i0 < MR ? (int)(g->M - i0) : MR;
                    micro_kernel(kc, g->a_packed + blk * K * MR + k0 * MR, panel, g->c + i0 * g->ldc, g->ldc,
                                 rows, cols, first, last, &g->e, i0, j0);
                }
            }
        }
        k0 += kc;
    } while (k0 < K);
}

void ge_gemm_args(const GemmArgs *args) {
    int64_t M = args->M, N = args->N, K = args->K;
    int threads = args->threads;
    const float *ap = args->ap, *bp = args->bp;
    float *ws = args->ws;
    Gemm g = {.M = M, .N = N, .K = K, .lda = args->lda, .ldc = args->ldc, .a = args->a, .b = args->b, .bp = bp,
              .koff = args->koff, .noff = args->noff, .a_packed = (float *)ap, .c = args->c, .scratch = ws,
              .e = {args->bias_m, args->bias_n, args->z, args->ldz, args->act, args->alpha,
                    args->pitch, args->width}};
    g.e.z_first = g.e.alpha == 1.0f;
    if (g.e.z && g.e.z == g.c && args->ldz == args->ldc && g.e.z_first) {  /* Y over Z: C starts as Z */
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
    if (!ap) {
        g.a_packed = ws;
        g.scratch = ws + ge_packed_a_floats(M, K);
        pool_run(pack_a_item, &g, g.mblocks, threads);
    }
    if (!bp && (g.chunks > 1 || g.few_panels)) {  /* pack B once, not once per chunk of rows */
        g.bp = g.scratch;
        pool_run(pack_b_item, &g, g.panels, threads);
    }
    /* blocks of K of equal size (576 = 1 x 576, not 512 + 64: a short block costs a pass over C too) */
    int64_t kblocks = (K + KC - 1) / KC;
    g.kc = kblocks ? (K + kblocks - 1) / kblocks : 0;
    pool_run(gemm_item, &g, (g.panels + g.group_panels - 1) / g.group_panels * g.chunks, threads);
}

static void gemm_batch_item(void *ctx, int64_t i, int slot) {
    const GemmBatch *bt = ctx;
    GemmArgs g = bt->g;
    g.a += bt->a_off ? bt->a_off[i] : 0;
    g.b += bt->b_off ? bt->b_off[i] : 0;
    g.c += bt->c_off ? bt->c_off[i] : 0;
    if (g.bias_n && bt->bias_off) g.bias_n += bt->bias_off[i];
    if (g.z && bt->z_off) g.z += bt->z_off[i];
    g.threads = 1;
    g.ws += slot * ge_workspace_floats(g.M, g.N, g.K, 1, 1, 1);
    ge_gemm_args(&g);
}

void ge_gemm_batch(const GemmBatch *bt) {
    pool_run(gemm_batch_item, (void *)bt, bt->batch, bt->g.threads);
}
