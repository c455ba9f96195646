/* The cache sizes of caches.h: the tuned ones until the binding sets this CPU's at load. */
#include <unistd.h>

#include "abi.h"
#include "caches.h"

static int64_t l1d = TUNED_L1D, l2 = TUNED_L2;

static int64_t clamped(int64_t bytes, int64_t least, int64_t tuned) {
    return bytes < least ? least : bytes > tuned ? tuned : bytes;
}

/* The C library's answer (glibc's, from CPUID), 0 where it has none: a value it cannot give, or
   an implausible one (some hypervisors report 0 or a byte), keeps the tuned size. */
static int64_t reported(int name) {
    long v = sysconf(name);
    return v >= 4096 ? (int64_t)v : 0;
}

void ge_cache_sizes(int64_t l1d_bytes, int64_t l2_bytes) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    if (l1d_bytes == 0) l1d_bytes = reported(_SC_LEVEL1_DCACHE_SIZE);
    if (l2_bytes == 0) l2_bytes = reported(_SC_LEVEL2_CACHE_SIZE);
#endif
    l1d = l1d_bytes > 0 ? clamped(l1d_bytes, 16 << 10, TUNED_L1D) : TUNED_L1D;
    l2 = l2_bytes > 0 ? clamped(l2_bytes, 256 << 10, TUNED_L2) : TUNED_L2;
}

int64_t ge_cache_size(int level) { return level == 1 ? l1d : l2; }
int64_t cache_l1d(void) { return l1d; }
int64_t cache_l2(void) { return l2; }
