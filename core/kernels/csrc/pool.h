/* A small thread pool for ge's native kernels: run fn(ctx, item, slot) for items [0, n) on up to `threads`
threads, the caller included.

Why not OpenMP: its parallel region ends in a barrier that waits for every thread of the team,
also one the scheduler has not run yet; on a loaded machine (or beside numpy's own BLAS threads)
that costs a whole time slice, several milliseconds per call. Here items are claimed one at a
time, so the caller does all of them when the workers are late, and it waits only for workers
that have joined the job. A job costs a few atomics: workers spin (yielding) for the next one,
since GEMMs come in bursts, and sleep on a condition variable after POOL_SPIN_NS idle.

`slot` numbers the threads working on one job (0 for the caller): per-thread scratch. One job
runs at a time; a caller that finds the pool busy (another context's thread) runs alone.

Joining: a worker announces itself (active++), then checks that the job it saw is still the
current one and still has items; only then does it take a slot. The caller, done with the items,
waits until no worker is active, so no worker touches a job (or the caller's scratch) after
pool_run returns. */
#ifndef GE_POOL_H
#define GE_POOL_H

#include <stdint.h>

typedef void (*pool_fn)(void *ctx, int64_t item, int slot);

/* Run fn(ctx, item, slot) for items [0, items) on up to `threads` threads, the caller included. */
__attribute__((visibility("hidden"))) void pool_run(pool_fn fn, void *ctx, int64_t items, int threads);

#endif
