/* What the kernels of the blocked layout NCHW16c (nchwc.c, nchwc_depthwise.c) share: the block of
16 channels (the same on every level, so a blocked tensor's size does not depend on the machine),
the vectors per block, and the kernel taps of an output position that fall inside the input. */
#ifndef GE_NCHWC_H
#define GE_NCHWC_H

#include <stdint.h>

#include "abi.h"
#include "simd.h"

#define BLK 16
#define NB (BLK / VL)  /* vectors per block */

/* The kernel positions t in [*t0, *t1) whose input coordinate o * s - p + t * d lies in [0, in) */
static inline void tap_range(int64_t o, int64_t s, int64_t p, int64_t d, int64_t k, int64_t in, int64_t *t0,
                             int64_t *t1) {
    int64_t base = o * s - p, last = in - 1 - base;
    int64_t lo = base >= 0 ? 0 : (-base + d - 1) / d, hi = last < 0 ? 0 : last / d + 1;
    if (hi > k) hi = k;
    *t0 = lo < hi ? lo : hi, *t1 = hi;
}

/* nchwc_depthwise.c: ge_nchwc_depthwise of batch item 0, block 0 on the calling thread, for an X that
   holds its padding (ph = pw = 0), no Z (the int8 depthwise convolution of qgemm.c runs its groups of
   16 channels so) */
__attribute__((visibility("hidden"))) void nchwc_depthwise_padded(const DepthwiseNchwc *d);

#endif
