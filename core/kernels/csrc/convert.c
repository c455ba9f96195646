/* float16 <-> float32 conversion (core/kernels/float16.py's adapter: float16 ops run by their float32
kernels), bit for bit numpy's: round to nearest even, overflow to infinity, subnormals exact, and a
NaN keeps its sign and the top of its payload, signalling or not (F16C's instructions quiet a
signalling NaN: the vectors holding a NaN are redone by the portable code, which numpy's rules are);
half.h has them, for the kernels that read and write float16 themselves too. Large tensors are split over the thread pool: the conversion is bound by memory bandwidth, which
one core does not fill. */
#include "abi.h"
#include "half.h"
#include "pool.h"

#define CONVERT_ITEM 32768  /* elements per work item: the pool's claim costs nothing beside it */

static void to_float_range(const uint16_t *s, float *d, int64_t i, int64_t end) { halves_to_floats(d + i, s + i, end - i); }
static void to_half_range(const float *s, uint16_t *d, int64_t i, int64_t end) { floats_to_halves(d + i, s + i, end - i); }

typedef struct {
    const void *src;
    void *dst;
    int64_t n;
    int to_half;
} Convert;

static void convert_item(void *ctx, int64_t it, int slot) {
    const Convert *c = ctx;
    (void)slot;
    int64_t i = it * CONVERT_ITEM, end = i + CONVERT_ITEM < c->n ? i + CONVERT_ITEM : c->n;
    if (c->to_half) to_half_range(c->src, c->dst, i, end);
    else to_float_range(c->src, c->dst, i, end);
}

static void convert(const void *src, void *dst, int64_t n, int to_half, int threads) {
    Convert c = {src, dst, n, to_half};
    int64_t items = (n + CONVERT_ITEM - 1) / CONVERT_ITEM;
    if (items <= 1 || threads <= 1) {
        if (to_half) to_half_range(src, dst, 0, n);
        else to_float_range(src, dst, 0, n);
    } else {
        pool_run(convert_item, &c, items, threads);
    }
}

void ge_half_to_float(const uint16_t *src, float *dst, int64_t n, int threads) { convert(src, dst, n, 0, threads); }
void ge_float_to_half(const float *src, uint16_t *dst, int64_t n, int threads) { convert(src, dst, n, 1, threads); }

/* out[i][j] = (float)(w[i][j] * s[i]), the product in double rounded once to float: numpy's float32 weights
   times a float64 scale cast back (a folded BatchNormalization, passes/fuse_conv_bn.py), bit for bit, in one
   pass (numpy's casting multiply buffers both operands: ten times the instructions) */
void ge_scale_rows(const float *w, const double *s, int64_t rows, int64_t cols, float *out) {
    for (int64_t i = 0; i < rows; i++) {
        const double si = s[i];
        const float *a = w + i * cols;
        float *b = out + i * cols;
        for (int64_t j = 0; j < cols; j++) b[j] = (float)((double)a[j] * si);
    }
}
