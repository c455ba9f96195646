/* The recurrence of RNN, GRU and LSTM (float32, the default activations Sigmoid/Tanh/Tanh), all
steps of a direction in one call (core/kernels/ops/recurrent.py computes the input projection of every
step, X W^T + biases, as one GEMM before it).

Why: per step the work is one small product H R^T ([B, H] x [H, G*H]) and a few vector passes over
[B, H]; as numpy calls each costs microseconds of dispatch, more than the arithmetic. Here a step is
the product on the GEMV (gemv.c: R's rows read once, in order; few batch rows) or, for larger
batches, the GEMM on R^T packed once at load (gemm.c), then one pass per batch row that adds the
step's input projection and applies the gates, updating h (and c) in place and writing Y.

sequence_lens: batch item b runs its first lens[b] steps (reversed: from step lens[b] - 1 down),
so at loop step s item b is at step t = s (reversed: lens[b] - 1 - s) while s < lens[b]. The product
covers the rows up to the last item still running (with lengths sorted longest first, as PyTorch's
packed sequences are, only those); a row past its length in there is computed and ignored. Its state stays as it was, Y past lens[b] is
zero, and a sequence_lens of 0 ends in zero states, not the initial ones (as onnxruntime; T = 0
keeps them). Bidirectional with two threads: one direction per thread. */
#include "abi.h"
#include "pool.h"
#include "simd.h"

/* 1 / (1 + e^-x) (simd.h's vsigmoid with its reciprocal vrecip) */
static inline vec vsig(vec x) { return vrecip(1.0f + vexp(-x)); }

typedef struct {
    const Recurrent *r;
    const RecurrentDirection *d;
    int64_t GH, len_max;
    int threads;
    float *h, *c, *g, *hr, *gemm_ws;
} Run;

#define LOAD(p, j, n) load_part((p) + (j), (n))

static inline vec clipped(const Recurrent *r, vec v) {
    return r->has_clip ? vclamp(v, -r->clip, r->clip) : v;
}

/* g[b, col0:col0+N] = a[b] @ R^T for batch rows b < M: the GEMV on R's rows (weights: rows + col0 * H),
   or the GEMM on packed panels */
static void product(const Run *u, int64_t M, const float *a, const float *rows, const float *panels, int64_t col0,
                    int64_t N) {
    const Recurrent *r = u->r;
    GemmArgs g = {.M = M, .N = N, .K = r->H, .a = a, .lda = r->H, .c = u->g + col0, .ldc = u->GH,
                  .act = {ACT_NONE, 0, 0}, .threads = u->threads, .alpha = 1.0f};
    if (panels && M > 1) {  /* one row (the other items' sequences ended): the GEMV reads R once, no 4-row tile */
        g.bp = panels, g.ws = u->gemm_ws;
        ge_gemm_args(&g);
    } else {
        g.bp = rows + col0 * r->H;
        ge_gemv(&g);
    }
}

/* The step of batch row b: its projection x, product g (both [G*H]), state h (c), output y (or NULL). */
static void lstm_row(const Recurrent *r, const RecurrentDirection *d, const float *x, const float *g, float *h,
                     float *c, float *y) {
    const int64_t H = r->H;
    const float *p = d->p;
    for (int64_t j = 0; j < H; j += VL) {
        int n = H - j < VL ? (int)(H - j) : VL;
        vec gi = LOAD(g, j, n) + LOAD(x, j, n), go = LOAD(g + H, j, n) + LOAD(x + H, j, n);
        vec gf = LOAD(g + 2 * H, j, n) + LOAD(x + 2 * H, j, n), gc = LOAD(g + 3 * H, j, n) + LOAD(x + 3 * H, j, n);
        vec cv = LOAD(c, j, n);
        if (p) gi += LOAD(p, j, n) * cv, gf += LOAD(p + 2 * H, j, n) * cv;
        vec i = vsig(clipped(r, gi));
        vec f = r->input_forget ? 1.0f - i : vsig(clipped(r, gf));
        vec cn = f * cv + i * vtanh(clipped(r, gc));
        if (p) go += LOAD(p + H, j, n) * cn;
        vec hn = vsig(clipped(r, go)) * vtanh(cn);
        store_part(c + j, cn, n);
        store_part(h + j, hn, n);
        if (y) store_part(y + j, hn, n);
    }
}

static void rnn_row(const Recurrent *r, const float *x, const float *g, float *h, float *y) {
    for (int64_t j = 0; j < r->H; j += VL) {
        int n = r->H - j < VL ? (int)(r->H - j) : VL;
        vec hn = vtanh(clipped(r, LOAD(g, j, n) + LOAD(x, j, n)));
        store_part(h + j, hn, n);
        if (y) store_part(y + j, hn, n);
    }
}

/* GRU, gates z, r, h: z and r into g's first 2H (linear_before_reset 0: then hr = r * h, the second
   product's row) */
static void gru_gates(const Recurrent *r, const float *x, float *g, const float *h, float *hr) {
    const int64_t H = r->H;
    for (int64_t j = 0; j < H; j += VL) {
        int n = H - j < VL ? (int)(H - j) : VL;
        vec z = vsig(clipped(r, LOAD(g, j, n) + LOAD(x, j, n)));
        vec rr = vsig(clipped(r, LOAD(g + H, j, n) + LOAD(x + H, j, n)));
        store_part(g + j, z, n);
        store_part(g + H + j, rr, n);
        if (hr) store_part(hr + j, rr * LOAD(h, j, n), n);
    }
}

/* GRU's new state from z, r (g's first 2H, gru_gates) and h~'s product (g's last H):
   linear_before_reset h~ = tanh(x_h + r * (product + Rbh)), else tanh(x_h + product); H' = h~ + z (H - h~) */
static void gru_row(const Recurrent *r, const RecurrentDirection *d, const float *x, const float *g, float *h,
                    float *y) {
    const int64_t H = r->H;
    for (int64_t j = 0; j < H; j += VL) {
        int n = H - j < VL ? (int)(H - j) : VL;
        vec prod = LOAD(g + 2 * H, j, n);
        if (r->lbr) {
            if (d->rbh) prod += LOAD(d->rbh, j, n);
            prod *= LOAD(g + H, j, n);
        }
        vec hc = vtanh(clipped(r, prod + LOAD(x + 2 * H, j, n)));
        vec hn = hc + LOAD(g, j, n) * (LOAD(h, j, n) - hc);
        store_part(h + j, hn, n);
        if (y) store_part(y + j, hn, n);
    }
}

static inline int64_t aligned(int64_t floats) { return (floats + 15) / 16 * 16; }  /* 64 bytes */

static inline int64_t len_of(const Recurrent *r, int64_t b) { return r->lens ? r->lens[b] : r->T; }

static void init_state(const Recurrent *r, const float *src, float *dst) {
    for (int64_t b = 0; b < r->B; b++) {
        if (src) copy_floats(dst + b * r->H, src + b * r->state_batch, r->H);
        else fill_floats(dst + b * r->H, r->H, 0.0f);
    }
}

static void run_direction(const Recurrent *r, int dir, int threads) {
    const RecurrentDirection *d = &r->dir[dir];
    const int64_t B = r->B, H = r->H, G = r->kind == REC_LSTM ? 4 : r->kind == REC_GRU ? 3 : 1;
    Run u = {.r = r, .d = d, .GH = G * H, .threads = threads};
    u.h = d->ws, u.c = u.h + aligned(B * H), u.g = u.c + aligned(B * H), u.hr = u.g + aligned(B * G * H);
    u.gemm_ws = u.hr + aligned(B * H);
    init_state(r, d->h0, u.h);
    if (r->kind == REC_LSTM) init_state(r, d->c0, u.c);
    if (r->kind == REC_GRU && !r->lbr) fill_floats(u.hr, B * H, 0.0f);
    u.len_max = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = len_of(r, b);
        u.len_max = len > u.len_max ? len : u.len_max;
        if (d->y)
            for (int64_t t = len; t < r->T; t++) fill_floats(d->y + t * r->y_step + b * r->y_batch, H, 0.0f);
    }
    for (int64_t s = 0; s < u.len_max; s++) {
        int64_t rows = 0;  /* up to the last item still running (lengths sorted longest first: only those) */
        for (int64_t b = 0; b < B; b++)
            if (s < len_of(r, b)) rows = b + 1;
        int first_gates = r->kind == REC_GRU && !r->lbr;  /* the product of h~ waits for r * h */
        product(&u, rows, u.h, d->r, d->rp, 0, first_gates ? 2 * H : G * H);
        if (first_gates) {
            for (int64_t b = 0; b < B; b++) {
                int64_t len = len_of(r, b);
                if (s >= len) continue;
                int64_t t = d->reverse ? len - 1 - s : s;
                gru_gates(r, d->xw + t * r->x_step + b * r->x_batch, u.g + b * u.GH, u.h + b * H, u.hr + b * H);
            }
            product(&u, rows, u.hr, d->r, d->rp_h, 2 * H, H);
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t len = len_of(r, b);
            if (s >= len) continue;
            int64_t t = d->reverse ? len - 1 - s : s;
            const float *x = d->xw + t * r->x_step + b * r->x_batch;
            float *g = u.g + b * u.GH, *h = u.h + b * H;
            float *y = d->y ? d->y + t * r->y_step + b * r->y_batch : NULL;
            if (r->kind == REC_LSTM) {
                lstm_row(r, d, x, g, h, u.c + b * H, y);
            } else if (r->kind == REC_GRU) {
                if (r->lbr) gru_gates(r, x, g, h, NULL);
                gru_row(r, d, x, g, h, y);
            } else {
                rnn_row(r, x, g, h, y);
            }
        }
    }
    for (int64_t b = 0; b < B; b++) {  /* a sequence_lens of 0 ends in zero states (onnxruntime's; T = 0 keeps h0) */
        if (r->lens && r->lens[b] == 0 && r->T > 0) fill_floats(u.h + b * H, H, 0.0f), fill_floats(u.c + b * H, H, 0.0f);
        if (d->yh) copy_floats(d->yh + b * r->state_batch, u.h + b * H, H);
        if (d->yc) copy_floats(d->yc + b * r->state_batch, u.c + b * H, H);
    }
}

static void direction_item(void *ctx, int64_t dir, int slot) {
    (void)slot;
    run_direction(ctx, (int)dir, 1);
}

#define THREADED_PRODUCT (1 << 17)  /* multiply-adds per step below which one thread does the product */

int64_t ge_recurrent_workspace_floats(int32_t kind, int64_t B, int64_t H) {
    int64_t G = kind == REC_LSTM ? 4 : kind == REC_GRU ? 3 : 1;
    return 3 * aligned(B * H) + aligned(B * G * H) + ge_workspace_floats(B, G * H, H, 1, 0, 16);
}

void ge_recurrent(const Recurrent *r) {
    int threads = r->threads < 1 ? 1 : r->threads;
    if (r->directions == 2 && threads >= 2) {
        pool_run(direction_item, (void *)r, 2, 2);
        return;
    }
    int64_t G = r->kind == REC_LSTM ? 4 : r->kind == REC_GRU ? 3 : 1;
    if (r->B * G * r->H * r->H < THREADED_PRODUCT) threads = 1;
    for (int dir = 0; dir < r->directions; dir++) run_direction(r, dir, threads);
}
