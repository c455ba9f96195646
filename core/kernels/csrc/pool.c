/* The thread pool of pool.h: one per process (the library's), workers started on demand. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

#define POOL_MAX 64
#define POOL_SPIN_NS 200000 /* how long an idle worker spins before sleeping */
#define POOL_STACK (8 << 20)  /* a worker's stack, whatever the libc's default (musl's is 128 KB) */

static struct {
    pthread_mutex_t submit, sleep_lock;
    pthread_cond_t wake;
    atomic_ulong generation;  /* odd while a job is open */
    atomic_int active, joined, sleepers;
    atomic_llong next;
    pool_fn fn;
    void *ctx;
    int64_t items;
    int slots, workers;
    pid_t pid;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

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

static void pool_drain(int slot) {
    for (int64_t it; (it = atomic_fetch_add(&pool.next, 1)) < pool.items;)
        pool.fn(pool.ctx, it, slot);
}

static void *pool_worker(void *arg) {
    (void)arg;
    unsigned long seen = atomic_load(&pool.generation);
    for (;;) {
        unsigned long g;
        int64_t until = now_ns() + POOL_SPIN_NS;
        for (int spins = 0; (g = atomic_load(&pool.generation)) == seen || !(g & 1); spins++) {
            seen = g;  /* a job that closed meanwhile is not ours to join */
            cpu_relax();
            if (spins % 64 == 63) {
                sched_yield();  /* let other threads (numpy's BLAS, the caller) have this core */
                if (now_ns() > until) {  /* idle: sleep until the next job opens */
                    pthread_mutex_lock(&pool.sleep_lock);
                    atomic_fetch_add(&pool.sleepers, 1);
                    while ((g = atomic_load(&pool.generation)) == seen || !(g & 1))
                        pthread_cond_wait(&pool.wake, &pool.sleep_lock);
                    atomic_fetch_sub(&pool.sleepers, 1);
                    pthread_mutex_unlock(&pool.sleep_lock);
                    break;
                }
            }
        }
        seen = g;
        atomic_fetch_add(&pool.active, 1);
        if (atomic_load(&pool.generation) == g && atomic_load(&pool.next) < pool.items) {
            int slot = atomic_fetch_add(&pool.joined, 1);
            if (slot < pool.slots) pool_drain(slot);
        }
        atomic_fetch_sub(&pool.active, 1);
    }
    return NULL;
}

/* A forked child has none of the workers, and locks or counts they held: start from scratch. */
static void pool_after_fork(void) {
    pthread_mutex_init(&pool.submit, NULL);
    pthread_mutex_init(&pool.sleep_lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    atomic_store(&pool.active, 0);
    atomic_store(&pool.sleepers, 0);
    pool.workers = 0;
    pool.pid = getpid();
}

static void pool_grow(int workers) {
    if (pool.pid == 0) {  /* the first job of this process */
        pool.pid = getpid();
        pthread_atfork(NULL, NULL, pool_after_fork);
    }
    while (pool.workers < workers && pool.workers < POOL_MAX - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, POOL_STACK);  /* kernels keep row buffers on the stack */
        int failed = pthread_create(&t, &attr, pool_worker, NULL);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.workers++;
    }
}

void pool_run(pool_fn fn, void *ctx, int64_t items, int threads) {
    int slots = threads < items ? threads : (int)items;
    if (slots <= 1 || pthread_mutex_trylock(&pool.submit) != 0) {
        for (int64_t it = 0; it < items; it++) fn(ctx, it, 0);  /* alone: one thread, or the pool is busy */
        return;
    }
    pool_grow(slots - 1);
    pool.fn = fn, pool.ctx = ctx, pool.items = items, pool.slots = slots;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.joined, 1);                /* slot 0 is the caller's */
    atomic_fetch_add(&pool.generation, 1);        /* open: odd */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.sleep_lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.sleep_lock);
    }
    pool_drain(0);
    atomic_fetch_add(&pool.generation, 1);        /* closed: even; late workers leave at once */
    for (int spins = 0; atomic_load(&pool.active) > 0; spins++) {
        cpu_relax();
        if (spins % 64 == 63) sched_yield();
    }
    pthread_mutex_unlock(&pool.submit);
}
