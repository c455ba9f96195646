/* MaxPool (and AveragePool: the same walk summing instead, each output scaled by 1 / its window's
count, the product of its row's and its column's), 2-D, float32 or float16 (MaxPool2d.half: each row run converted as read, into the phase
buffer before the phases use it; each output vector rounded as stored, exact: a maximum of float16
values is one of them): any window, stride, dilation and padding, read in place (no padded copy).
Per plane and output row: the maximum over the window's rows that fall inside X, into a row buffer
with -inf where the window hangs over the left and right edges; then per output column the maximum
over the window's columns, from the buffer split into its stride phases so that every tap is a
unit-stride vector load (stride 2: the even lanes of two loads, no split). A NaN wins (numpy's maximum). Items are runs of planes. */
#include "abi.h"
#include "half.h"
#include "pool.h"
#include "simd.h"

#define POOL_ROW_MAX 8192  /* the longest padded row (floats) the stack buffers take (2 x 32 KB) */

static int64_t pool_row_len(const MaxPool2d *p) { return (p->ow - 1) * p->s1 + (p->k1 - 1) * p->d1 + 1; }

#if !defined(__clang__)
/* p[0], p[2], ..., p[2 VL - 2]: one permute of two loads (lanes past a row's end are never stored) */
static inline vec even_lanes(const float *p) {
    ivec idx;
    for (int c = 0; c < VL; c++) idx[c] = 2 * c;
    return __builtin_shuffle(vload(p), vload(p + VL), idx);
}
#endif

/* the taps' combination: the maximum (a NaN wins), or the sum */
static inline vec combine(vec a, vec b, int sum) { return sum ? a + b : vmax(a, b); }
static inline float combine1(float a, float b, int sum) { return sum ? a + b : b > a || b != b ? b : a; }

static NO_LIBCALLS void max_pool_plane(const MaxPool2d *p, int64_t plane) {
    const int64_t x_at = plane * p->h * p->w, y_at = plane * p->oh * p->ow;
    const float *x = p->x + x_at;  /* float32 */
    const uint16_t *xh = (const uint16_t *)p->x + x_at;  /* float16 */
    int64_t len = pool_row_len(p), phase_len = (len + p->s1 - 1) / p->s1 + VL;
    float row[POOL_ROW_MAX], phases[POOL_ROW_MAX];
    const int sum = p->inv_rows != 0;
    const float ninf = sum ? 0.0f : -__builtin_inff();  /* the identity of the combination */
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
            if (p->half) {  /* the run in float32, in the phase buffer (filled after this loop) */
                halves_to_floats(phases, xh + iy * p->w + (lo - p->pb1), n);
                src = phases;
            }
            if (rows++ == 0) { copy_floats(row + lo, src, n); continue; }
            for (; j + VL <= n; j += VL) vstore(row + lo + j, combine(vload(row + lo + j), vload(src + j), sum));
            for (; j < n; j++) row[lo + j] = combine1(row[lo + j], src[j], sum);
        }
        if (!rows) fill_floats(row + lo, hi - lo, ninf);
        const int64_t out = y_at + oy * p->ow;
#if !defined(__clang__)
        if (p->s1 == 2) {  /* stride 2 (ResNet's stem): each tap's columns are the even lanes of two vectors */
            for (int64_t ox = 0; ox < p->ow; ox += VL) {
                int n = p->ow - ox < VL ? (int)(p->ow - ox) : VL;
                vec m = (vec){0} + ninf;
                for (int64_t t = 0; t < p->k1; t++) m = combine(m, even_lanes(row + 2 * ox + t * p->d1), sum);
                if (sum) m *= load_part(p->inv_cols + ox, n) * p->inv_rows[oy];
                store_any_part(p->y, p->half, out + ox, m, n);
            }
            continue;
        }
#endif
        /* the stride phases of the row, then per tap a unit-stride run of one phase */
        const float *ph = row;
        if (p->s1 > 1) {
            for (int64_t r = 0; r < p->s1; r++)
                for (int64_t j = 0; j * p->s1 + r < len; j++) phases[r * phase_len + j] = row[j * p->s1 + r];
            ph = phases;
        }
        for (int64_t ox = 0; ox < p->ow; ox += VL) {
            int n = p->ow - ox < VL ? (int)(p->ow - ox) : VL;
            vec m = (vec){0} + ninf;
            for (int64_t t = 0; t < p->k1; t++) {
                int64_t at = t * p->d1, r = at % p->s1, q = at / p->s1;
                m = combine(m, load_part(ph + (p->s1 > 1 ? r * phase_len : 0) + q + ox, n), sum);
            }
            if (sum) m *= load_part(p->inv_cols + ox, n) * p->inv_rows[oy];
            store_any_part(p->y, p->half, out + ox, m, n);
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
