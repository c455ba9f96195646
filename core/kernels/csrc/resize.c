/* Resize mode=nearest (resize.c): every output row a gather of one input row by the column index, a
row whose source row is the previous output row's a copy of it. The index arrays come from the plan
(ops/resize.py), which computes them for every coordinate_transformation_mode and nearest_mode; an
integer-scale upsample's columns (repeat) are written without reading the index. An element is
`unit` bytes: a float32 or float16 value, or in the blocked layout (N, C/16, H, W, 16) the 16
channels of one pixel. Items are bands of output rows of one plane. */
#include <stdint.h>
#include <string.h>

#include "abi.h"
#include "pool.h"

#define ROWS_PER_ITEM 8

static void gather_row(const Nearest2d *p, const char *src, char *dst) {
    const int64_t *cols = p->cols;
    int64_t ow = p->ow, unit = p->unit, j;
    if (unit == 4 && p->repeat == 2) {  /* YOLO's and FPNs' x2 upsample: each value twice */
        const uint32_t *s = (const uint32_t *)src;
        uint32_t *d = (uint32_t *)dst;
        for (j = 0; j < ow / 2; j++) d[2 * j] = d[2 * j + 1] = s[j];
        return;
    }
    if (unit == 4) {
        const uint32_t *s = (const uint32_t *)src;
        uint32_t *d = (uint32_t *)dst;
        for (j = 0; j < ow; j++) d[j] = s[cols[j]];
    } else if (unit == 2) {
        const uint16_t *s = (const uint16_t *)src;
        uint16_t *d = (uint16_t *)dst;
        for (j = 0; j < ow; j++) d[j] = s[cols[j]];
    } else if (unit == 64) {  /* a blocked pixel: one vector's copy */
        for (j = 0; j < ow; j++) memcpy(dst + j * 64, src + cols[j] * 64, 64);
    } else {
        for (j = 0; j < ow; j++) memcpy(dst + j * unit, src + cols[j] * unit, (size_t)unit);
    }
}

static void nearest_item(void *ctx, int64_t it, int slot) {
    const Nearest2d *p = ctx;
    (void)slot;
    int64_t bands = (p->oh + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM;
    int64_t plane = it / bands, i0 = it % bands * ROWS_PER_ITEM;
    int64_t i1 = i0 + ROWS_PER_ITEM < p->oh ? i0 + ROWS_PER_ITEM : p->oh;
    size_t in_row = (size_t)(p->iw * p->unit), out_row = (size_t)(p->ow * p->unit);
    const char *x = (const char *)p->x + (size_t)plane * p->ih * in_row;
    char *y = (char *)p->y + (size_t)plane * p->oh * out_row;
    for (int64_t i = i0; i < i1; i++) {
        if (i > i0 && p->rows[i] == p->rows[i - 1]) memcpy(y + i * out_row, y + (i - 1) * out_row, out_row);
        else gather_row(p, x + p->rows[i] * in_row, y + i * out_row);
    }
}

void ge_nearest2d(const Nearest2d *p) {
    if (p->planes > 0 && p->oh > 0 && p->ow > 0)
        pool_run(nearest_item, (void *)p, p->planes * ((p->oh + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM), p->threads);
}
