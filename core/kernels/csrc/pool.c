/* The thread pool of pool.h: one per process (the library's), workers started on demand. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "pool.h"

#define POOL_MAX 64
#define POOL_SPIN_NS 200000 /* how long an idle worker spins before sleeping */
#define POOL_STACK (8 << 20)  /* a worker's stack, whatever the libc's default (musl's is 128 KB) */

/* A slot's share of a job's items, [front, back) packed as front | back << 32: its own thread claims from
   the front, the others steal from the back. On a line of its own: every claim writes it. */
typedef struct {
    _Alignas(64) atomic_ullong range;
} Share;

static struct {
    pthread_mutex_t submit, sleep_lock;
    pthread_cond_t wake;
    atomic_ulong generation;  /* odd while a job is open */
    atomic_int active, sleepers;
    pool_fn fn;
    void *ctx;
    int slots, workers;
    pid_t pid;
    Share share[POOL_MAX];
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

/* An item of share s into *it: its first (the owner) or its last (a thief); 0 when none is left. */
static int claim(int s, int owner, int64_t *it) {
    atomic_ullong *range = &pool.share[s].range;
    unsigned long long r = atomic_load(range);
    for (;;) {
        uint32_t front = (uint32_t)r, back = (uint32_t)(r >> 32);
        if (front >= back) return 0;
        unsigned long long next = owner ? r + 1 : r - (1ull << 32);
        if (atomic_compare_exchange_weak(range, &r, next)) {
            *it = owner ? front : back - 1;
            return 1;
        }
    }
}

/* Slot `slot`'s own share first, then what is left of the others' (the next slots' first). */
static void pool_drain(int slot) {
    int64_t it;
    while (claim(slot, 1, &it)) pool.fn(pool.ctx, it, slot);
    for (int k = 1; k < pool.slots; k++) {
        int s = (slot + k) % pool.slots;
        while (claim(s, 0, &it)) pool.fn(pool.ctx, it, slot);
    }
}

static void *pool_worker(void *arg) {
    int slot = (int)(intptr_t)arg;  /* this worker's slot in every job of more slots than it */
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
        if (atomic_load(&pool.generation) == g && slot < pool.slots) pool_drain(slot);
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
        int failed = pthread_create(&t, &attr, pool_worker, (void *)(intptr_t)(pool.workers + 1));
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.workers++;
    }
}

void pool_run(pool_fn fn, void *ctx, int64_t items, int threads) {
    int slots = threads < items ? threads : (int)items;
    if (slots > POOL_MAX) slots = POOL_MAX;
    /* alone: one thread, items past a share's 32 bits (no kernel splits that finely), or the pool is busy */
    if (slots <= 1 || items > UINT32_MAX || pthread_mutex_trylock(&pool.submit) != 0) {
        for (int64_t it = 0; it < items; it++) fn(ctx, it, 0);
        return;
    }
    pool_grow(slots - 1);
    if (slots > pool.workers + 1) slots = pool.workers + 1;  /* workers that could not be started */
    pool.fn = fn, pool.ctx = ctx, pool.slots = slots;
    for (int s = 0; s < slots; s++)  /* slot s: items [s n / slots, (s + 1) n / slots) */
        atomic_store(&pool.share[s].range, (unsigned long long)(s * items / slots) |
                                               (unsigned long long)((s + 1) * items / slots) << 32);
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

/* abi.h's CallBatch: each call an item */
static void call_item(void *ctx, int64_t it, int slot) {
    const CallBatch *b = ctx;
    (void)slot;
    b->fn[it](b->args[it]);
}

void ge_call_batch(const CallBatch *b) { pool_run(call_item, (void *)b, b->count, b->threads); }
