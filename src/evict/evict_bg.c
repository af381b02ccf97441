/*
 * evict_bg.c -- the background evictor (after CacheLib's background
 * evictors): keep a small reserve of free chunks in each class
 * that is allocating while memory is full, so a set rarely evicts inline.
 *
 * The cache layer (cache_alloc) reports a class below the reserve with
 * evict_bg_notify(): an atomic flag per class, and a condition-variable
 * signal only when the flag goes up, so a busy class costs no syscall per
 * set. The thread
 * sleeps on the condition variable when no class is flagged (no polling),
 * and refills a flagged class through the item-level policies of the
 * stack only (evict_run_items), up to `batch` items per class-lock hold:
 * moving slabs between classes stays with inline eviction.
 */
#include "evict.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "slab.h"

/* Bound on batches per class per wake-up, so one class can't starve others. */
#define BG_ROUNDS_MAX 64

static pthread_t        bg_thread;
static pthread_mutex_t  bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t   bg_cond = PTHREAD_COND_INITIALIZER;
static bool             bg_running;
static bool             bg_stopping;
static _Atomic uint32_t bg_reserve;
static uint32_t         bg_batch;
static _Atomic bool     pending[SLAB_CLASS_MAX + 1];
static _Atomic bool     any_pending;
static _Atomic uint64_t bg_runs;
static _Atomic uint64_t bg_evictions;

void
evict_bg_notify(uint8_t cls)
{
    if (atomic_load_explicit(&pending[cls], memory_order_relaxed) ||
        atomic_exchange(&pending[cls], true)) {
        return;                 /* already flagged: the thread will come */
    }
    pthread_mutex_lock(&bg_lock);
    atomic_store(&any_pending, true);
    pthread_cond_signal(&bg_cond);
    pthread_mutex_unlock(&bg_lock);
}

uint64_t
evict_bg_target(uint8_t cls)
{
    uint64_t reserve = atomic_load_explicit(&bg_reserve, memory_order_relaxed);
    uint64_t cap = (uint64_t)slab_class_slabs(cls) * slab_class_perslab(cls) / 16;

    return reserve < cap ? reserve : cap;
}

static void
bg_refill(uint8_t cls)
{
    uint64_t target = evict_bg_target(cls);

    for (int round = 0; round < BG_ROUNDS_MAX; round++) {
        uint32_t freed = 0;
        if (slab_class_free(cls) >= target ||
            evict_run_items(cls, bg_batch, &freed) != EVICT_OK) {
            break;
        }
        atomic_fetch_add_explicit(&bg_evictions, freed, memory_order_relaxed);
    }
}

static void *
bg_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bg_lock);
    while (!bg_stopping) {
        if (!atomic_load(&any_pending)) {
            pthread_cond_wait(&bg_cond, &bg_lock);
            continue;
        }
        atomic_store(&any_pending, false);
        pthread_mutex_unlock(&bg_lock);

        atomic_fetch_add_explicit(&bg_runs, 1, memory_order_relaxed);
        for (uint8_t cls = 1; cls <= slab_class_count(); cls++) {
            if (atomic_exchange(&pending[cls], false)) {
                bg_refill(cls);
            }
        }
        pthread_mutex_lock(&bg_lock);
    }
    pthread_mutex_unlock(&bg_lock);
    return NULL;
}

int
evict_bg_start(uint32_t reserve, uint32_t batch)
{
    if (reserve == 0 || bg_running) {
        return 0;
    }
    bg_batch = batch > 0 ? batch : 1;
    bg_stopping = false;
    atomic_store(&bg_runs, 0);
    atomic_store(&bg_evictions, 0);
    if (pthread_create(&bg_thread, NULL, bg_main, NULL) != 0) {
        return -1;
    }
    bg_running = true;
    atomic_store(&bg_reserve, reserve);
    return 0;
}

void
evict_bg_stop(void)
{
    if (!bg_running) {
        return;
    }
    atomic_store(&bg_reserve, 0);
    pthread_mutex_lock(&bg_lock);
    bg_stopping = true;
    pthread_cond_signal(&bg_cond);
    pthread_mutex_unlock(&bg_lock);
    pthread_join(bg_thread, NULL);
    bg_running = false;
    for (int c = 0; c <= SLAB_CLASS_MAX; c++) {
        atomic_store(&pending[c], false);
    }
    atomic_store(&any_pending, false);
}

uint32_t
evict_bg_reserve(void)
{
    return atomic_load_explicit(&bg_reserve, memory_order_relaxed);
}

void
evict_bg_stats(uint64_t *runs, uint64_t *evictions)
{
    *runs = atomic_load(&bg_runs);
    *evictions = atomic_load(&bg_evictions);
}
