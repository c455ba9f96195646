/* The data caches the kernels' blockings are sized to. The blockings (gemm.c's chunk of rows,
nchwc.c's pass over input channels) were tuned on a Xeon with a 48 KB L1d and a 2 MB L2 a core;
a CPU with smaller caches (a Zen 3's 32 KB and 512 KB) gets blocks shrunk in proportion, so that
what was meant to stay in L1 or L2 still does there; larger caches leave them as tuned. */
#ifndef GE_CACHES_H
#define GE_CACHES_H

#include <stdint.h>

#define TUNED_L1D (48 << 10)
#define TUNED_L2 (2 << 20)

/* This CPU's L1d and L2 (bytes) as ge_cache_sizes set them, at most the tuned sizes. */
__attribute__((visibility("hidden"))) int64_t cache_l1d(void);
__attribute__((visibility("hidden"))) int64_t cache_l2(void);

/* n scaled by the cache's share of the tuned size (at least 1). */
static inline int64_t cache_scaled(int64_t n, int64_t cache, int64_t tuned) {
    int64_t s = n * cache / tuned;
    return s > 0 ? s : 1;
}

#endif
