/*
 * crawler.c -- the LRU crawler thread (see crawler.h).
 *
 * The thread sleeps on a condition variable until a crawl is asked for,
 * then walks each chosen class with item_crawl_step() in batches, sleeping
 * `sleep` microseconds between batches so a crawl of a large cache costs
 * the workers little: they only ever wait for one item's partition lock.
 */
#include "crawler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "item.h"
#include "slab.h"

#define CRAWL_BATCH 1000        /* items between sleeps, as memcached */

static pthread_mutex_t   lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t    wake = PTHREAD_COND_INITIALIZER;
static pthread_t         thread;
static bool              thread_up;
static bool              stopping;
static bool              pending;       /* a crawl was asked for */
static uint64_t          want[4];       /* its classes */
static _Atomic bool      running;
static _Atomic uint64_t  starts;
static _Atomic uint32_t  sleep_us = 100;
static _Atomic uint32_t  tocrawl;

/* Walk one class, at most tocrawl chunks of it (0: all). */
static void
crawl_class(uint8_t cls)
{
    uint64_t only[4] = { 0 };
    struct item_cursor cur = { 0, 0 };
    uint32_t limit = atomic_load(&tocrawl);
    uint64_t done = 0;

    only[cls / 64] = 1ull << (cls % 64);
    for (;;) {
        uint32_t batch = CRAWL_BATCH;
        if (limit > 0 && limit - done < batch) {
            batch = (uint32_t)(limit - done);
        }
        if (batch == 0 || !item_crawl_step(&cur, only, batch)) {
            return;
        }
        done += batch;
        pthread_mutex_lock(&lock);
        bool stop = stopping;
        pthread_mutex_unlock(&lock);
        if (stop) {
            return;
        }
        uint32_t us = atomic_load(&sleep_us);
        if (us > 0) {
            usleep(us);
        }
    }
}

static void *
crawler_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!pending && !stopping) {
            pthread_cond_wait(&wake, &lock);
        }
        if (stopping) {
            break;
        }
        uint64_t classes[4];
        memcpy(classes, want, sizeof(classes));
        pending = false;
        pthread_mutex_unlock(&lock);
        for (unsigned c = 1; c <= slab_class_count(); c++) {
            if (classes[c / 64] & (1ull << (c % 64))) {
                crawl_class((uint8_t)c);
            }
        }
        atomic_store(&running, false);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int
crawler_enable(void)
{
    pthread_mutex_lock(&lock);
    if (thread_up) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    if (stopping) {             /* a disable is still joining the old one */
        pthread_mutex_unlock(&lock);
        return -1;
    }
    pending = false;
    int rc = pthread_create(&thread, NULL, crawler_main, NULL);
    thread_up = rc == 0;
    pthread_mutex_unlock(&lock);
    return rc == 0 ? 0 : -1;
}

/*
 * Stops after the current batch. Only the caller that marks the thread as
 * going down joins it (two workers disabling at once must not both join);
 * the others return at once. The join waits for the thread, which holds no
 * lock a caller could be holding.
 */
void
crawler_disable(void)
{
    pthread_mutex_lock(&lock);
    if (!thread_up) {
        pthread_mutex_unlock(&lock);
        return;
    }
    pthread_t t = thread;
    thread_up = false;
    stopping = true;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    pthread_mutex_lock(&lock);
    stopping = false;
    pthread_mutex_unlock(&lock);
    atomic_store(&running, false);
}

bool
crawler_enabled(void)
{
    pthread_mutex_lock(&lock);
    bool up = thread_up;
    pthread_mutex_unlock(&lock);
    return up;
}

crawler_status_t
crawler_start(const uint64_t classes[4])
{
    crawler_status_t st = CRAWLER_OK;

    pthread_mutex_lock(&lock);
    if (!thread_up) {
        st = CRAWLER_DISABLED;
    } else if (pending || atomic_load(&running)) {
        st = CRAWLER_RUNNING;
    } else {
        memcpy(want, classes, sizeof(want));
        pending = true;
        atomic_store(&running, true);
        atomic_fetch_add(&starts, 1);
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

int
crawler_setup(bool enabled)
{
    atomic_store(&starts, 0);
    atomic_store(&sleep_us, 100);
    atomic_store(&tocrawl, 0);
    return enabled ? crawler_enable() : 0;
}

void
crawler_teardown(void)
{
    crawler_disable();
}

void     crawler_set_sleep(uint32_t us)  { atomic_store(&sleep_us, us); }
uint32_t crawler_sleep(void)             { return atomic_load(&sleep_us); }
void     crawler_set_tocrawl(uint32_t n) { atomic_store(&tocrawl, n); }
uint32_t crawler_tocrawl(void)           { return atomic_load(&tocrawl); }
bool     crawler_running(void)           { return atomic_load(&running); }
uint64_t crawler_starts(void)            { return atomic_load(&starts); }
