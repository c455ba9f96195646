/* Row-wise kernels (a transformer's LayerNormalization and Softmax over the last axis): rows of
`cols` floats, items of ROWS_PER_ITEM rows. Statistics in float32 lanes, summed across lanes at
the end of the row. float16 rows (half) are converted into float32 a row at a time, computed as
float32 rows are, and rounded once as they are stored (on the stack up to HALF_STACK_COLS, longer
rows in a buffer of the item's). */
#include <stdlib.h>

#include "abi.h"
#include "half.h"

#define HALF_STACK_COLS 8192  /* float16 rows up to this long are converted on the stack (2 x 32 KB) */
#include "pool.h"
#include "simd.h"

#define ROWS_PER_ITEM 16

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
    void (*row)(const Rows *, const float *, float *) = r->softmax ? softmax_row : layer_norm_row;
    if (!r->half) {
        for (int64_t i = it * ROWS_PER_ITEM; i < i1; i++) row(r, r->x + i * r->cols, r->y + i * r->cols);
        return;
    }
    float stack[r->cols <= HALF_STACK_COLS ? 2 * r->cols : 1];
    float *xb = r->cols <= HALF_STACK_COLS ? stack : malloc((size_t)r->cols * 2 * sizeof(float));
    if (!xb) abort();  /* a few row buffers of memory: no way on without them */
    float *yb = xb + r->cols;
    for (int64_t i = it * ROWS_PER_ITEM; i < i1; i++) {
        halves_to_floats(xb, (const uint16_t *)r->x + i * r->cols, r->cols);
        row(r, xb, yb);
        floats_to_halves((uint16_t *)r->y + i * r->cols, yb, r->cols);
    }
    if (xb != stack) free(xb);
}

void ge_rows(const Rows *r) {
    if (r->cols > 0) pool_run(rows_item, (void *)r, (r->rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, r->threads);
}
