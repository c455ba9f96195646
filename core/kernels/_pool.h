/* A small thread pool for _gemm.c: run fn(ctx, item, slot) for items [0, n) on up to `threads`
threads, the caller included.

Why not OpenMP: its parallel region ends in a barrier that waits for every thread of the team,
also one the scheduler has not run yet; on a loaded machine (or beside numpy's own BLAS threads)
that costs a whole time slice, several milliseconds per call. Here items are claimed one at a
time, so the caller does all of them when the workers are late, and it waits only for items a
worker has actually started. Workers spin briefly for the next job (GEMMs come in bursts), then
sleep on a condition variable.

`slot` numbers the threads working on one job (0 for the caller): per-thread scratch. One job
runs at a time; a caller that finds the pool busy (another context's thread) runs alone. */
#ifndef GE_POOL_H
#define GE_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX 64
#define POOL_SPIN_NS 200000  /* how long an idle worker spins before sleeping */

typedef void (*pool_fn)(void *ctx, int64_t item, int slot);

typedef struct {
    pool_fn fn;
    void *ctx;
    int64_t items;
    atomic_llong next;   /* the next item to claim */
    int slots;           /* threads allowed on this job, the caller included */
    int joined;          /* threads that took a slot (under the pool lock) */
    int active;          /* workers inside the job (under the pool lock) */
} PoolJob;

static struct {
    pthread_mutex_t lock, submit;
    pthread_cond_t wake, left;
    atomic_ulong generation;
    PoolJob *job;
    int workers;
    pid_t pid;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, NULL, 0, 0};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pool_drain(PoolJob *job, int slot) {
    for (int64_t it; (it = atomic_fetch_add(&job->next, 1)) < job->items;)
        job->fn(job->ctx, it, slot);
}

static void *pool_worker(void *arg) {
    (void)arg;
    unsigned long seen = atomic_load(&pool.generation);
    for (;;) {
        unsigned long g = atomic_load(&pool.generation);
        if (g == seen) {  /* spin a while, then sleep until the next job */
            int64_t until = now_ns() + POOL_SPIN_NS;
            int spins = 0;
            while ((g = atomic_load(&pool.generation)) == seen) {
                cpu_relax();
                if (++spins % 64 == 0 && now_ns() > until) break;
            }
            if (g == seen) {
                pthread_mutex_lock(&pool.lock);
                while ((g = atomic_load(&pool.generation)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
                pthread_mutex_unlock(&pool.lock);
            }
        }
        seen = g;
        pthread_mutex_lock(&pool.lock);
        PoolJob *job = pool.job;
        int slot = -1;
        if (job && job->joined < job->slots && atomic_load(&job->next) < job->items) {
            slot = job->joined++;
            job->active++;
        }
        pthread_mutex_unlock(&pool.lock);
        if (slot < 0) continue;
        pool_drain(job, slot);
        pthread_mutex_lock(&pool.lock);
        if (--job->active == 0) pthread_cond_signal(&pool.left);
        pthread_mutex_unlock(&pool.lock);
    }
    return NULL;
}

static void pool_grow(int workers) {
    pid_t pid = getpid();
    if (pool.pid != pid) { pool.pid = pid; pool.workers = 0; }  /* a forked child has no workers */
    while (pool.workers < workers && pool.workers < POOL_MAX - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&t, &attr, pool_worker, NULL);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.workers++;
    }
}

static void pool_run(pool_fn fn, void *ctx, int64_t items, int threads) {
    PoolJob job = {fn, ctx, items, 0, threads < items ? threads : (int)items, 1, 0};
    if (job.slots <= 1 || pthread_mutex_trylock(&pool.submit) != 0) {
        pool_drain(&job, 0);  /* one thread asked for, or the pool is busy: run alone */
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool_grow(job.slots - 1);
    pool.job = &job;
    atomic_fetch_add(&pool.generation, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    pool_drain(&job, 0);
    pthread_mutex_lock(&pool.lock);
    pool.job = NULL;  /* late workers find nothing; wait only for those inside */
    while (job.active > 0) pthread_cond_wait(&pool.left, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.submit);
}

#endif
