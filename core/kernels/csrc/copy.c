/* Concat and Gather as block copies (copy.c): a decoding step's past keys/values concatenated with the
new token's, its embedding row gathered, are a few memcpy calls, where numpy's concatenate and take
cost microseconds of argument handling each. Single-threaded: these copies are small, or one
memory-bound stream. */
#include <stdint.h>
#include <string.h>

#include "abi.h"

void ge_concat(const ConcatBlocks *c) {
    char *y = c->y;
    for (int64_t o = 0; o < c->outer; o++)
        for (int64_t k = 0; k < c->n; k++)
            if (c->bytes[k])
                memcpy(y + o * c->y_step + c->offset[k], (const char *)c->src[k] + o * c->bytes[k], (size_t)c->bytes[k]);
}

int ge_gather(const GatherBlocks *g) {
    for (int64_t i = 0; i < g->n_idx; i++)
        if (g->idx[i] < -g->dim || g->idx[i] >= g->dim) return 1;
    const char *x = g->x;
    char *y = g->y;
    for (int64_t o = 0; o < g->outer; o++)
        for (int64_t i = 0; i < g->n_idx; i++) {
            int64_t j = g->idx[i] < 0 ? g->idx[i] + g->dim : g->idx[i];
            memcpy(y + (o * g->n_idx + i) * g->block, x + (o * g->dim + j) * g->block, (size_t)g->block);
        }
    return 0;
}
