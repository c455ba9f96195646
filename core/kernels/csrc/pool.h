/* A small thread pool for ge's native kernels: run fn(ctx, item, slot) for items [0, n) on up to `threads`
threads, the caller included.

Why not OpenMP: its parallel region ends in a barrier that waits for every thread of the team,
also one the scheduler has not run yet; on a loaded machine (or beside numpy's own BLAS threads)
that costs a whole time slice, several milliseconds per call. Here items are claimed one at a
time, so the caller does all of them when the workers are late, and it waits only for workers
that have joined the job. A job costs a few atomics: workers spin (yielding) for the next one,
since GEMMs come in bursts, and sleep on a condition variable after POOL_SPIN_NS idle.

`slot` numbers the threads working on one job (0 for the caller, worker w is always slot w):
per-thread scratch. Slot s owns a share of the items, [s n / slots, (s + 1) n / slots), and claims
them in order; a slot done with its share steals the others' last items. So, as kernels number their
items in the order of the data they write (pixels, rows, channels), each thread works on the same
part of every layer and reads, in the next layer, mostly what it wrote itself (lines another core
wrote read ~3.5x slower than local ones here), where items taken in turn from one counter read half
of every layer's input from the other core. One job runs at a time; a caller that finds the pool busy
(another context's thread, or a call run as an item of abi.h's CallBatch) runs alone.

Joining: a worker announces itself (active++), then checks that the job it saw is still the
current one and has its slot; only then does it drain. The caller, done with the items, waits
until no worker is active, so no worker touches a job (or the caller's scratch) after pool_run
returns. */
#ifndef GE_POOL_H
#define GE_POOL_H

#include <stdint.h>

typedef void (*pool_fn)(void *ctx, int64_t item, int slot);

/* Run fn(ctx, item, slot) for items [0, items) on up to `threads` threads, the caller included. */
__attribute__((visibility("hidden"))) void pool_run(pool_fn fn, void *ctx, int64_t items, int threads);

#endif
