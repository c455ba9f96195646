/* ge's native kernels, float32: the GEMM C[M,N] = act(A[M,K] @ B[K,N] + bias + Z) with its epilogue
fused; after it, the direct convolution, the depthwise convolution, MaxPool, the phase fill of
conv.PhaseLayout, and the row kernels (LayerNormalization, Softmax).

Why: numpy's OpenBLAS reaches 55-75% of this machine's peak on the skinny products of a CNN or a
small transformer, and every bias, residual or activation costs one more pass over C. Here one
register-blocked micro-kernel does the products and applies the epilogue while the block of C is
still in registers.

Operands (B is the convolution's input, read through two offset tables, so im2col is the packing):
  A: row-major (a, lda), or prepacked by ge_pack_a (weights: once, at load);
  B: B[k, n] = b[koff[k] + noff[n]], or prepacked by ge_pack_b (weights);
  C: row-major (c, ldc), or a convolution's output seen through flat columns (pitch, width: the
  GEMM's column n is Y's column (n / pitch) * width + n % pitch, dropped when n % pitch >= width);
  Z (optional, the layout of C, ldz) is added before the activation;
  bias_m[i] (per row) and bias_n[j] (per column) are optional; the activation `act` is none, a clamp
  to [lo, hi] (Relu, Clip) or Gelu (erf form).
Packed layouts: A in blocks of MR rows, k-major inside (ap[blk*K*MR + k*MR + i]); B in panels of
NR columns, k-major inside (bp[p*K*NR + k*NR + j]).
Work: items (a group of adjacent panels, a chunk of rows) claimed one by one by the threads of
_pool.h, each over K split evenly into blocks of at most KC: per block and panel, pack the panel
(when gathered; a run of NR floats per row is two vector copies) into the thread's scratch, then
run the micro-kernel over the chunk's blocks of MR rows (with few panels and many rows, blocks of
rows go outermost over B packed whole, so each block of weights is read once). An item owns its
block of C through all of K, so one GEMM is one job of the pool: no barrier per block of K, and
enough items (ITEMS_PER_THREAD) that a thread finishing early has one to take. (Reading B's rows in
place, unpacked, measured slower: the hardware prefetcher follows one packed stream, not a row
pointer per step.) The caller's workspace
holds the packed A (when raw) and the packed panels of B; sizes from ge_workspace_floats.

Vector code through GCC/Clang vector extensions: one source for AVX-512, AVX2 and NEON, tile sizes
chosen by the register file the compiler targets (-march=native at build time). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_pool.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VL 16
#define MR 12
#elif defined(__AVX__)
#define VL 8
#define MR 6
#else
#define VL 4
#define MR 8
#endif
#define NR (2 * VL)
#define KC 640  /* the largest block of K (blocks are K split evenly: 576, 2 x 576, ...) */
#define FEW_PANELS 8  /* up to this many panels (and several chunks of rows), A blocks go outermost */
#define ITEMS_PER_THREAD 8  /* work items per thread: enough to balance them (measured: 4 left 3-6% idle) */
#define FILL_ITEM_FLOATS 8192  /* a fill's or depthwise item's least work: claiming it costs nothing beside it */
#define MC_MAX 480  /* rows of A per chunk: 480 x KC floats stay in a 2 MB L2 cache */

typedef float vec __attribute__((vector_size(VL * 4)));
typedef float vec_u __attribute__((vector_size(VL * 4), aligned(4), may_alias));  /* unaligned access */

static inline vec vload(const float *p) { return *(const vec_u *)p; }
static inline void vstore(float *p, vec v) { *(vec_u *)p = v; }
typedef int32_t ivec __attribute__((vector_size(VL * 4)));

/* min(max(v, lo), hi) per lane as masks and blends (vector code; NaN stays NaN, as in numpy) */
static inline vec vclamp(vec v, float lo, float hi) {
    vec l = (vec){0} + lo, h = (vec){0} + hi;
    ivec below = v < l, above = v > h, r = (ivec)v;
    r = (r & ~below) | ((ivec)l & below);
    r = (r & ~above) | ((ivec)h & above);
    return (vec)r;
}

/* exp(x) for float32 lanes: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial (degree 6:
   relative error below 2e-7), 2^n built in the exponent bits. Below -87 the result is exactly 0:
   a masked softmax (-inf, or float's lowest) must give zeros, not tiny values that turn into
   denormals downstream (the product after it then runs 100x slower). */
static inline vec vexp(vec x) {
    vec lo = (vec){0} - 87.0f, hi = (vec){0} + 88.0f;
    ivec below = x < lo, above = x > hi;
    x = (vec)(((ivec)x & ~below) | ((ivec)lo & below));
    x = (vec)(((ivec)x & ~above) | ((ivec)hi & above));
    vec fx = x * 1.44269504088896341f + 0.5f;
    ivec n = __builtin_convertvector(fx, ivec);
    n += (ivec)(__builtin_convertvector(n, vec) > fx);  /* truncation -> floor (true is -1) */
    vec nf = __builtin_convertvector(n, vec);
    vec r = x - nf * 0.693359375f - nf * -2.12194440e-4f;
    vec p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    return (vec)((ivec)(p * (vec)((n + 127) << 23)) & ~below);
}

/* Gelu(x) = x/2 (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7):
   erf(u) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-u^2), t = 1 / (1 + p u), u >= 0. */
static inline vec vgelu(vec x) {
    vec u = (vec)((ivec)(x * 0.70710678118654752f) & 0x7fffffff);
    vec t = 1.0f / (1.0f + 0.3275911f * u);
    vec poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    vec erf_abs = 1.0f - poly * vexp(-u * u);
    vec erf = (vec)((ivec)erf_abs | ((ivec)x & (int32_t)0x80000000));  /* the sign of x */
    return 0.5f * x * (1.0f + erf);
}

/* max(a, v) per lane; a NaN in v wins and stays (np.maximum's rule) */
static inline vec vmax(vec a, vec v) {
    ivec take = (v > a) | (v != v);
    return (vec)(((ivec)a & ~take) | ((ivec)v & take));
}

enum { ACT_NONE, ACT_CLAMP, ACT_GELU };

/* Short copies and fills as vector loops: a depthwise or fill row is a few dozen floats, where a
   memcpy/memset call costs more than the copy (GCC would turn the plain loops back into calls). */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_LIBCALLS
#endif

/* The first n (<= VL) lanes of a vector from or to memory (zeros past them): one masked access
   where the target has them. */
static inline vec load_part(const float *p, int n) {
#if defined(__AVX512F__)
    return n == VL ? vload(p) : (vec)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#else
    vec v = (vec){0};
    for (int j = 0; j < n; j++) v[j] = p[j];
    return v;
#endif
}

static inline void store_part(float *p, vec v, int n) {
#if defined(__AVX512F__)
    if (n == VL) vstore(p, v);
    else _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
#else
    for (int j = 0; j < n; j++) p[j] = v[j];
#endif
}

static inline void copy_floats(float *d, const float *s, int64_t n) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore(d + j, vload(s + j));
    if (j < n) store_part(d + j, load_part(s + j, (int)(n - j)), (int)(n - j));
}

static inline void fill_floats(float *d, int64_t n, float value) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) vstore(d + j, (vec){0} + value);
    if (j < n) store_part(d + j, (vec){0} + value, (int)(n - j));
}

typedef struct {
    const float *bias_m, *bias_n, *z;
    int64_t ldz;
    float lo, hi;
    int act;
    float alpha;  /* the product's scale, before bias and Z */
    /* flat columns (a convolution's output rows `pitch` apart, the columns past `width` padding):
       column n of C is Y's column (n / pitch) * width + n % pitch when n % pitch < width, else
       dropped; 0: C is plain */
    int64_t pitch, width;
} Epilogue;

/* The vector at src + at of a row of `cols` valid floats (zeros past them). */
static inline vec load_cols(const float *src, int cols, int at) {
    return at + VL <= cols ? vload(src + at) : at < cols ? load_part(src + at, cols - at) : (vec){0};
}

/* The epilogue's activation, on the two vectors of a row of a block. */
static inline void activate(const Epilogue *e, vec *v0, vec *v1) {
    if (e->act == ACT_CLAMP) *v0 = vclamp(*v0, e->lo, e->hi), *v1 = vclamp(*v1, e->lo, e->hi);
    else if (e->act == ACT_GELU) *v0 = vgelu(*v0), *v1 = vgelu(*v1);
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
        if (!first) {
            if (dst == tmp) memcpy(tmp, cr, (size_t)cols * 4);
            v0 += vload(dst); v1 += vload(dst + VL);
        }
        if (last) {
            if (e->alpha != 1.0f) { v0 *= e->alpha; v1 *= e->alpha; }
            if (e->bias_m) { v0 += e->bias_m[i0 + i]; v1 += e->bias_m[i0 + i]; }
            if (e->bias_n) v0 += load_cols(e->bias_n + j0, cols, 0), v1 += load_cols(e->bias_n + j0, cols, VL);
            if (e->z) {
                const float *zr = e->z + (i0 + i) * e->ldz + j0;
                v0 += load_cols(zr, cols, 0), v1 += load_cols(zr, cols, VL);
            }
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
        if (!first) {
            for (int r = 0; r < runs; r++) copy_floats(tmp + run_at[r], cr + run_to[r], run_n[r]);
            v0 += vload(tmp), v1 += vload(tmp + VL);  /* lanes outside the runs: dropped */
        }
        if (last) {
            if (e->alpha != 1.0f) { v0 *= e->alpha; v1 *= e->alpha; }
            if (e->bias_m) { v0 += e->bias_m[i0 + i]; v1 += e->bias_m[i0 + i]; }
            if (e->z) {
                const float *zr = e->z + (i0 + i) * e->ldz;
                for (int r = 0; r < runs; r++) copy_floats(zt + run_at[r], zr + run_to[r], run_n[r]);
                v0 += vload(zt), v1 += vload(zt + VL);
            }
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

/* Workspace (floats) for a call: the packed A when A is raw; for a gathered B, one panel per thread
   and room for the whole packed B, taken when several chunks of rows would each gather it again. */
int64_t ge_workspace_floats(int64_t M, int64_t N, int64_t K, int raw_a, int gathered_b, int threads) {
    int64_t panels = (int64_t)threads * KC * NR, whole = ge_packed_b_floats(K, N);
    int64_t b = !gathered_b ? 0 : panels > whole ? panels : whole;
    return (raw_a ? ge_packed_a_floats(M, K) : 0) + b + 16;
}

typedef struct {
    int64_t M, N, K, lda, ldc, mblocks, panels, chunks, chunk_blocks, group_panels;
    int few_panels;  /* all panels in every item, blocks of A outermost (B packed whole) */
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
        int first = k0 == 0, last = k0 + kc >= K;
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

/* A call's arguments in one struct: ctypes converts one pointer instead of 23 arguments
   (microseconds per call; a kernel keeps its struct while its buffers stay put). */
typedef struct {
    int64_t M, N, K;
    const float *a;
    int64_t lda;
    const float *ap, *b;
    const int64_t *koff, *noff;
    const float *bp;
    float *c;
    int64_t ldc;
    const float *bias_m, *bias_n, *z;
    int64_t ldz;
    int32_t act;
    float lo, hi;
    int32_t threads;
    float *ws;
    int64_t pitch, width;  /* flat columns (see Epilogue), or 0 */
    float alpha;
} GemmArgs;

void ge_gemm_args(const GemmArgs *args) {
    int64_t M = args->M, N = args->N, K = args->K;
    int threads = args->threads;
    const float *ap = args->ap, *bp = args->bp;
    float *ws = args->ws;
    Gemm g = {.M = M, .N = N, .K = K, .lda = args->lda, .ldc = args->ldc, .a = args->a, .b = args->b, .bp = bp,
              .koff = args->koff, .noff = args->noff, .a_packed = (float *)ap, .c = args->c, .scratch = ws,
              .e = {args->bias_m, args->bias_n, args->z, args->ldz, args->lo, args->hi, args->act, args->alpha,
                    args->pitch, args->width}};
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
    if (g.few_panels) g.group_panels = g.panels;
    if (!ap) {
        g.a_packed = ws;
        g.scratch = ws + ge_packed_a_floats(M, K);
        pool_run(pack_a_item, &g, g.mblocks, threads);
    }
    if (!bp && g.chunks > 1) {  /* pack B once, not once per chunk of rows */
        g.bp = g.scratch;
        pool_run(pack_b_item, &g, g.panels, threads);
    }
    /* blocks of K of equal size (576 = 1 x 576, not 512 + 64: a short block costs a pass over C too) */
    int64_t kblocks = (K + KC - 1) / KC;
    g.kc = kblocks ? (K + kblocks - 1) / kblocks : 0;
    pool_run(gemm_item, &g, (g.panels + g.group_panels - 1) / g.group_panels * g.chunks, threads);
}

/* A batch of products with one shape, C[i] = act(alpha A[i] @ B[i] + bias_n[i] + Z[i]) (attention's
Q K^T and P V per head): `g` holds the first one's arguments, the offsets (in floats, NULL: all 0)
where each operand of product i starts from it. Items are products, each a single-threaded GEMM
with its own slot of the workspace (ge_workspace_floats(M, N, K, 1, 1, 1) floats per slot): a head's
product is too small to share between threads. */
typedef struct {
    GemmArgs g;
    int64_t batch;
    const int64_t *a_off, *b_off, *c_off, *bias_off, *z_off;
} GemmBatch;

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
Items are (panel, chunk of blocks); no workspace. */
#if VL == 16
#define DV_WIDE 4  /* vectors of output channels per tile */
#define DR_WIDE 6  /* pixels per tile: DV_WIDE x DR_WIDE accumulators, DV_WIDE weights, one broadcast */
#define DR_TALL 14 /* pixels per tile of 2 vectors */
#else
#define DV_WIDE 2
#define DR_WIDE 6
#define DR_TALL 6
#endif
#define DV_MAX DV_WIDE
#define DR_MAX DR_TALL
#define DIRECT_ITEMS_PER_THREAD 4
#define DIRECT_KC 128  /* steps of K per pass: a wide panel's weights for them (32 KB) stay in L1 */
#define DIRECT_SUB 16  /* blocks whose partial sums are kept (on the stack) between the passes over K */

/* Output channels per panel of packed weights: the wide tile's, or the tall's (2 vectors). */
int ge_direct_panel(int wide) { return (wide ? DV_WIDE : 2) * VL; }

typedef struct {
    const float *x;
    const int64_t *koff;
    const float *wp;
    float *y;
    const float *bias, *z;
    int64_t K, M, rows, width, pitch, ldy;  /* y[ch * ldy + oy * width + ox], x row oy at oy * pitch */
    int32_t act;
    float lo, hi;
    int32_t threads;
    int32_t wide;  /* the wide tile (weights packed for it: ge_direct_panel(wide)) */
} ConvDirect;

typedef struct {
    const ConvDirect *d;
    int64_t seg_len, seg_pitch, seg_blocks, base, rem, blocks, panels, chunks, chunk_blocks, panel;
} DirectWork;

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

/* Transpose the rows x rows blocks of rows r[0, rows) in registers (rows a power of two, at most
VL): swap the off-diagonal h x h blocks for h = rows/2 .. 1. With rows = VL, the whole transpose;
with rows = VL/2, row i becomes [column i | column VL/2 + i] of the two halves. */
static inline __attribute__((always_inline)) void transpose_blocks(vec *r, const int rows) {
#if defined(__clang__)
    float t[VL][VL];
    for (int i = 0; i < rows; i++) for (int j = 0; j < VL; j++) t[i][j] = r[i][j];
    for (int i = 0; i < rows; i++) for (int j = 0; j < VL; j++) r[i][j] = t[j % rows][j / rows * rows + i];
#else
    ivec idx;
    for (int c = 0; c < VL; c++) idx[c] = c;
#pragma GCC unroll 8
    for (int h = rows / 2; h >= 1; h /= 2) {
        ivec upper = (idx & h) != 0;
        ivec lo = idx + (upper & (VL - h)), hi = idx + ((upper & VL) | (~upper & h));
#pragma GCC unroll 16
        for (int i = 0; i < rows; i++)
            if (!(i & h)) {
                vec a = r[i], b = r[i + h];
                r[i] = __builtin_shuffle(a, b, lo);
                r[i + h] = __builtin_shuffle(a, b, hi);
            }
    }
#endif
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
    if (d->z) {
        vec z = load_part(d->z + ch * d->ldy + at, n);
        val += upper ? load_upper(z, d->z + ch2 * d->ldy + at, n) : z;
    }
    if (d->act == ACT_CLAMP) val = vclamp(val, d->lo, d->hi);
    else if (d->act == ACT_GELU) val = vgelu(val);
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

static void direct_block(int wide, int V, int R, int64_t kc, int64_t k0, const float *x, const int64_t *koff,
                         const float *wp, float *acc) {
    if (wide) {
        switch (V) {
            case 1: switch (R) { DIRECT_R6(1, DV_WIDE * VL) } break;
            case 2: switch (R) { DIRECT_R6(2, DV_WIDE * VL) } break;
#if DV_WIDE > 2
            case 3: switch (R) { DIRECT_R6(3, DV_WIDE * VL) } break;
            case 4: switch (R) { DIRECT_R6(4, DV_WIDE * VL) } break;
#endif
        }
    } else if (V == 1) {
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
    float sums[DIRECT_SUB * DR_MAX * 2 * VL] __attribute__((aligned(64)));  /* DR_WIDE x DV_WIDE fits too */
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
                direct_block(d->wide, V, R, kc, k0, d->x + seg * w->seg_pitch + start, d->koff, wp, acc);
                if (k0 + kc >= K) direct_store(d, acc, R, (int)P, p * P, seg * w->seg_len + start);
            }
        }
    }
}

void ge_conv_direct(const ConvDirect *d) {
    DirectWork w = {.d = d};
    int contiguous = d->pitch == d->width;  /* no padding columns: blocks may run across rows */
    w.seg_len = contiguous ? d->rows * d->width : d->width;
    w.seg_pitch = contiguous ? w.seg_len : d->pitch;
    int64_t segs = contiguous ? 1 : d->rows;
    int rmax = d->wide ? DR_WIDE : DR_TALL;
    w.seg_blocks = (w.seg_len + rmax - 1) / rmax;  /* blocks of a segment: near-equal, at most rmax */
    w.base = w.seg_len / w.seg_blocks, w.rem = w.seg_len % w.seg_blocks;
    w.blocks = segs * w.seg_blocks;
    w.panel = ge_direct_panel(d->wide);
    w.panels = (d->M + w.panel - 1) / w.panel;
    int threads = d->threads < 1 ? 1 : d->threads;
    /* each chunk of blocks reads its panel's weights again (a deep layer's are megabytes, cold in a
       model): split the blocks only while there are too few panels to balance the threads */
    int64_t items = DIRECT_ITEMS_PER_THREAD * threads;
    w.chunks = threads > 1 && w.panels < items ? (items + w.panels - 1) / w.panels : 1;
    if (w.chunks > w.blocks) w.chunks = w.blocks;
    w.chunk_blocks = (w.blocks + w.chunks - 1) / w.chunks;
    w.chunks = (w.blocks + w.chunk_blocks - 1) / w.chunk_blocks;
    pool_run(direct_item, &w, w.panels * w.chunks, threads);
}

/* Depthwise convolution (2-D, any stride, dilation and padding, a channel multiplier), on the input
laid out by conv.PhaseLayout: there every kernel tap of output row oy is a unit-stride run starting
at tap_off[t] + oy * pitch in the input channel's planes. Per output channel and row:
y[ox] = clamp(bias + sum_t w[t] * x[tap_off[t] + oy * pitch + ox]). Items are runs of output
channels of one batch item; no workspace. */
typedef struct {
    const float *x, *w, *bias;
    const int64_t *tap_off;
    float *y;
    int64_t channels, mult, taps, rows, cols, pitch, in_channel_step;
    int32_t clamp;
    float lo, hi;
    int32_t threads;
} Depthwise;

/* Per output channel: the flat run of its rows (pitch apart, the columns past `cols` are padding)
in blocks that stay in L1, every element a vector lane; then the valid columns of each row are
copied into Y. Narrow images vectorize as well as wide ones. */
#define DW_BLOCK 1024

static NO_LIBCALLS void depthwise_channel(const Depthwise *d, int64_t oc) {
    const float *x = d->x + (oc / d->mult) * d->in_channel_step, *w = d->w + oc * d->taps;
    float bias = d->bias ? d->bias[oc] : 0.0f, *y = d->y + oc * d->rows * d->cols;
    const int64_t *off = d->tap_off, pitch = d->pitch, cols = d->cols;
    int64_t flat = (d->rows - 1) * pitch + cols;
    float buf[DW_BLOCK];
    for (int64_t n0 = 0; n0 < flat; n0 += DW_BLOCK) {
        int64_t n1 = n0 + DW_BLOCK < flat ? n0 + DW_BLOCK : flat, j = n0;
        for (; j + 2 * VL <= n1; j += 2 * VL) {  /* two vectors at a time: independent chains */
            vec a0 = (vec){0} + bias, a1 = a0;
            for (int64_t t = 0; t < d->taps; t++) {
                a0 += w[t] * vload(x + off[t] + j);
                a1 += w[t] * vload(x + off[t] + j + VL);
            }
            if (d->clamp) { a0 = vclamp(a0, d->lo, d->hi); a1 = vclamp(a1, d->lo, d->hi); }
            vstore(buf + j - n0, a0);
            vstore(buf + j - n0 + VL, a1);
        }
        for (; j < n1; j += VL) {  /* the tail, in masked vectors: a 7x7 plane is mostly tail */
            int n = n1 - j < VL ? (int)(n1 - j) : VL;
            vec a = (vec){0} + bias;
            for (int64_t t = 0; t < d->taps; t++) a += w[t] * load_part(x + off[t] + j, n);
            if (d->clamp) a = vclamp(a, d->lo, d->hi);
            store_part(buf + j - n0, a, n);
        }
        for (int64_t oy = n0 / pitch; oy * pitch < n1; oy++) {  /* the valid columns of each row */
            int64_t lo = oy * pitch > n0 ? oy * pitch : n0, hi = oy * pitch + cols < n1 ? oy * pitch + cols : n1;
            if (lo < hi) copy_floats(y + oy * cols + (lo - oy * pitch), buf + (lo - n0), hi - lo);
        }
    }
}

/* Channels per item: a 7x7 plane is too little work to be claimed alone (one atomic per channel). */
static int64_t depthwise_per_item(const Depthwise *d) { return 1 + FILL_ITEM_FLOATS / (d->rows * d->cols * d->taps + 1); }

static void depthwise_item(void *ctx, int64_t it, int slot) {
    const Depthwise *d = ctx;
    (void)slot;
    int64_t per = depthwise_per_item(d), end = d->channels * d->mult;
    for (int64_t oc = it * per; oc < (it + 1) * per && oc < end; oc++) depthwise_channel(d, oc);
}

void ge_depthwise(const Depthwise *d) {
    int64_t per = depthwise_per_item(d);
    pool_run(depthwise_item, (void *)d, (d->channels * d->mult + per - 1) / per, d->threads);
}

/* MaxPool, 2-D, float32: any window, stride, dilation and padding, read in place (no padded copy).
Per plane and output row: the maximum over the window's rows that fall inside X, into a row buffer
with -inf where the window hangs over the left and right edges; then per output column the maximum
over the window's columns, from the buffer split into its stride phases so that every tap is a
unit-stride vector load. A NaN wins (numpy's maximum). Items are runs of planes. */
#define POOL_ROW_MAX 8192  /* the longest padded row (floats) the stack buffers take (2 x 32 KB) */

typedef struct {
    const float *x;
    float *y;
    int64_t planes, h, w, oh, ow, k0, k1, s0, s1, d0, d1, pb0, pb1;
    int32_t threads;
} MaxPool2d;

static int64_t pool_row_len(const MaxPool2d *p) { return (p->ow - 1) * p->s1 + (p->k1 - 1) * p->d1 + 1; }

static NO_LIBCALLS void max_pool_plane(const MaxPool2d *p, int64_t plane) {
    const float *x = p->x + plane * p->h * p->w;
    float *y = p->y + plane * p->oh * p->ow;
    int64_t len = pool_row_len(p), phase_len = (len + p->s1 - 1) / p->s1 + VL;
    float row[POOL_ROW_MAX], phases[POOL_ROW_MAX];
    const float ninf = -__builtin_inff();
    int64_t lo = p->pb1 < len ? p->pb1 : len, hi = p->pb1 + p->w < len ? p->pb1 + p->w : len;  /* X's columns */
    for (int64_t oy = 0; oy < p->oh; oy++) {
        /* the window's rows inside X, combined over the columns inside X */
        fill_floats(row, lo, ninf);
        fill_floats(row + hi, len - hi, ninf);
        int rows = 0;
        for (int64_t t = 0; t < p->k0; t++) {
            int64_t iy = oy * p->s0 - p->pb0 + t * p->d0;
            if (iy < 0 || iy >= p->h) continue;
            const float *src = x + iy * p->w + (lo - p->pb1);
            int64_t j = 0, n = hi - lo;
            if (rows++ == 0) { copy_floats(row + lo, src, n); continue; }
            for (; j + VL <= n; j += VL) vstore(row + lo + j, vmax(vload(row + lo + j), vload(src + j)));
            for (; j < n; j++) row[lo + j] = src[j] > row[lo + j] || src[j] != src[j] ? src[j] : row[lo + j];
        }
        if (!rows) fill_floats(row + lo, hi - lo, ninf);
        /* the stride phases of the row, then per tap a unit-stride run of one phase */
        const float *ph = row;
        if (p->s1 > 1) {
            for (int64_t r = 0; r < p->s1; r++)
                for (int64_t j = 0; j * p->s1 + r < len; j++) phases[r * phase_len + j] = row[j * p->s1 + r];
            ph = phases;
        }
        float *out = y + oy * p->ow;
        for (int64_t ox = 0; ox < p->ow; ox += VL) {
            int n = p->ow - ox < VL ? (int)(p->ow - ox) : VL;
            vec m = (vec){0} + ninf;
            for (int64_t t = 0; t < p->k1; t++) {
                int64_t at = t * p->d1, r = at % p->s1, q = at / p->s1;
                m = vmax(m, load_part(ph + (p->s1 > 1 ? r * phase_len : 0) + q + ox, n));
            }
            store_part(out + ox, m, n);
        }
    }
}

static int64_t pool_per_item(const MaxPool2d *p) { return 1 + FILL_ITEM_FLOATS / (p->h * p->w + 1); }

static void max_pool_item(void *ctx, int64_t it, int slot) {
    const MaxPool2d *p = ctx;
    (void)slot;
    int64_t per = pool_per_item(p);
    for (int64_t plane = it * per; plane < (it + 1) * per && plane < p->planes; plane++) max_pool_plane(p, plane);
}

/* 0 when the rows are too long for the stack buffers (the caller keeps its numpy plan). */
int ge_max_pool_fits(const MaxPool2d *p) { return pool_row_len(p) + p->s1 * (VL + 1) <= POOL_ROW_MAX; }

void ge_max_pool2d(const MaxPool2d *p) {
    int64_t per = pool_per_item(p);
    pool_run(max_pool_item, (void *)p, (p->planes + per - 1) / per, p->threads);
}

/* conv.PhaseLayout.fill for 2-D inputs: the padded input split into its stride phases, ph[r0, r1,
plane, q0, q1] = x[plane, q0 * s0 + r0 - pb0, q1 * s1 + r1 - pb1], zero outside x. Items are runs of
planes (each source row is read once for all its phases); every element of a used phase is written. */
typedef struct {
    const float *x;
    float *ph;
    int64_t planes, h, w, s0, s1, pb0, pb1, sq0, sq1;
    uint64_t used;  /* bit r0 * s1 + r1: a kernel tap reads that phase (a 1x1 stride-2 conv reads one of 4) */
    int32_t threads;
} PhaseFill;

/* d[q] = src[2 q] for q < n, reading at most `avail` floats of src: pairs of vectors, one shuffle. */
static inline void take_evens(float *d, const float *src, int64_t n, int64_t avail) {
    int64_t q = 0;
#if !defined(__clang__)
    ivec even;
    for (int i = 0; i < VL; i++) even[i] = 2 * i;
    for (; q + VL <= n && 2 * q + 2 * VL <= avail; q += VL)
        vstore(d + q, __builtin_shuffle(vload(src + 2 * q), vload(src + 2 * q + VL), even));
#endif
    for (; q < n; q++) d[q] = src[2 * q];
}

static NO_LIBCALLS void phase_fill_plane(const PhaseFill *f, int64_t plane) {
    const float *x = f->x + plane * f->h * f->w;
    int64_t phase_size = f->planes * f->sq0 * f->sq1;
    for (int64_t r0 = 0; r0 < f->s0; r0++)
        for (int64_t q0 = 0; q0 < f->sq0; q0++) {
            int64_t hh = q0 * f->s0 + r0 - f->pb0;
            for (int64_t r1 = 0; r1 < f->s1; r1++) {  /* the phases of one source row, while it is in L1 */
                if (!(f->used >> (r0 * f->s1 + r1) & 1)) continue;
                float *d = f->ph + (r0 * f->s1 + r1) * phase_size + (plane * f->sq0 + q0) * f->sq1;
                int64_t lo = 0, hi = f->sq1;  /* the q1 whose column lies inside x */
                while (lo < hi && lo * f->s1 + r1 - f->pb1 < 0) lo++;
                while (hi > lo && (hi - 1) * f->s1 + r1 - f->pb1 >= f->w) hi--;
                if (hh < 0 || hh >= f->h || lo >= hi) { fill_floats(d, f->sq1, 0.0f); continue; }
                const float *src = x + hh * f->w + lo * f->s1 + r1 - f->pb1;
                fill_floats(d, lo, 0.0f);
                if (f->s1 == 1) copy_floats(d + lo, src, hi - lo);
                else if (f->s1 == 2) take_evens(d + lo, src, hi - lo, x + (hh + 1) * f->w - src);
                else for (int64_t q = 0; q < hi - lo; q++) d[lo + q] = src[q * f->s1];
                fill_floats(d + hi, f->sq1 - hi, 0.0f);
            }
        }
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

/* Row-wise kernels (a transformer's LayerNormalization and Softmax over the last axis): rows of
`cols` floats, items of ROWS_PER_ITEM rows. Statistics in float32 lanes, summed across lanes at
the end of the row. */
#define ROWS_PER_ITEM 16

typedef struct {
    const float *x, *scale, *bias;  /* scale and bias: `cols` floats, or NULL */
    float *y;
    int64_t rows, cols;
    float eps;
    int32_t softmax;  /* 0: LayerNormalization (x - mean) / sqrt(var + eps) * scale + bias; 1: Softmax */
    int32_t threads;
} Rows;

static inline float hsum(vec v) {
    float s = 0.0f;
    for (int i = 0; i < VL; i++) s += v[i];
    return s;
}

static void layer_norm_row(const Rows *r, const float *x, float *y) {
    int64_t n = r->cols, j;
    vec acc = (vec){0};
    float tail = 0.0f;
    for (j = 0; j + VL <= n; j += VL) acc += vload(x + j);
    for (; j < n; j++) tail += x[j];
    float mean = (hsum(acc) + tail) / (float)n;
    acc = (vec){0}, tail = 0.0f;
    for (j = 0; j + VL <= n; j += VL) { vec d = vload(x + j) - mean; acc += d * d; }
    for (; j < n; j++) tail += (x[j] - mean) * (x[j] - mean);
    float inv = 1.0f / __builtin_sqrtf((hsum(acc) + tail) / (float)n + r->eps);
    for (j = 0; j + VL <= n; j += VL) {
        vec v = (vload(x + j) - mean) * inv;
        if (r->scale) v *= vload(r->scale + j);
        if (r->bias) v += vload(r->bias + j);
        vstore(y + j, v);
    }
    for (; j < n; j++) y[j] = (x[j] - mean) * inv * (r->scale ? r->scale[j] : 1.0f) + (r->bias ? r->bias[j] : 0.0f);
}

static void softmax_row(const Rows *r, const float *x, float *y) {
    int64_t n = r->cols, j;
    vec vm = (vec){0} + x[0];
    ivec nan = (ivec){0};
    for (j = 0; j + VL <= n; j += VL) {  /* the row maximum; a NaN anywhere makes it NaN, as np.max */
        vec v = vload(x + j);
        ivec gt = v > vm;
        vm = (vec)(((ivec)vm & ~gt) | ((ivec)v & gt));
        nan |= v != v;
    }
    float m = vm[0];
    int any_nan = 0;
    for (int i = 0; i < VL; i++) { m = vm[i] > m ? vm[i] : m; any_nan |= nan[i] != 0; }
    for (; j < n; j++) { m = x[j] > m ? x[j] : m; any_nan |= x[j] != x[j]; }
    if (any_nan) m = __builtin_nanf("");
    vec acc = (vec){0};
    float tail = 0.0f;
    for (j = 0; j + VL <= n; j += VL) { vec e = vexp(vload(x + j) - m); vstore(y + j, e); acc += e; }
    for (; j < n; j++) { float e = vexp((vec){0} + (x[j] - m))[0]; y[j] = e; tail += e; }
    float inv = 1.0f / (hsum(acc) + tail);
    for (j = 0; j + VL <= n; j += VL) vstore(y + j, vload(y + j) * inv);
    for (; j < n; j++) y[j] *= inv;
}

static void rows_item(void *ctx, int64_t it, int slot) {
    const Rows *r = ctx;
    (void)slot;
    int64_t i1 = (it + 1) * ROWS_PER_ITEM < r->rows ? (it + 1) * ROWS_PER_ITEM : r->rows;
    for (int64_t i = it * ROWS_PER_ITEM; i < i1; i++)
        (r->softmax ? softmax_row : layer_norm_row)(r, r->x + i * r->cols, r->y + i * r->cols);
}

void ge_rows(const Rows *r) {
    if (r->cols > 0) pool_run(rows_item, (void *)r, (r->rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, r->threads);
}

/* A Python extension module only so that setuptools builds and installs it; ge calls the
   functions above through ctypes (core/kernels/native.py). */
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "ge's native kernels (called through ctypes)", -1, NULL};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
