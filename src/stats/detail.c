/*
 * detail.c -- `stats detail`: per key-prefix counts of gets, hits, sets
 * and deletes (memcached's stats_prefix). A key's prefix is what comes
 * before its first ':'; keys without one are not counted, as in memcached.
 *
 * Off by default and costing one relaxed load per request while off. On,
 * every counted request takes one global lock, as in memcached: it is a
 * debugging aid. Unlike memcached's, the table is bounded: past
 * DETAIL_MAX prefixes new ones are not tracked (stats_detail_untracked).
 */
#include "stats.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define DETAIL_BUCKETS 256
#define DETAIL_MAX     4096

struct prefix {
    struct prefix *next;
    uint64_t       get, hit, set, del;
    size_t         n;
    char           p[];
};

static pthread_mutex_t  lock = PTHREAD_MUTEX_INITIALIZER;
static struct prefix   *buckets[DETAIL_BUCKETS];
static size_t           nprefixes;
static uint64_t         untracked;
static _Atomic bool     enabled;

void stats_detail_set_enabled(bool on) { atomic_store(&enabled, on); }
bool stats_detail_enabled(void)
{
    return atomic_load_explicit(&enabled, memory_order_relaxed);
}

/* The key's prefix record, created if needed; NULL if it has none. */
static struct prefix *
prefix_find(const char *key, size_t nkey)
{
    const char *colon = memchr(key, ':', nkey);

    if (colon == NULL) {
        return NULL;
    }
    size_t n = (size_t)(colon - key);
    uint32_t b = hash_key(key, n) % DETAIL_BUCKETS;
    for (struct prefix *p = buckets[b]; p != NULL; p = p->next) {
        if (p->n == n && memcmp(p->p, key, n) == 0) {
            return p;
        }
    }
    struct prefix *p = nprefixes < DETAIL_MAX ? calloc(1, sizeof(*p) + n + 1) : NULL;
    if (p == NULL) {
        untracked++;
        return NULL;
    }
    memcpy(p->p, key, n);
    p->n = n;
    p->next = buckets[b];
    buckets[b] = p;
    nprefixes++;
    return p;
}

void
stats_detail_record(const char *key, size_t nkey, stats_detail_op_t op, bool hit)
{
    pthread_mutex_lock(&lock);
    struct prefix *p = prefix_find(key, nkey);
    if (p != NULL) {
        switch (op) {
        case STATS_DETAIL_GET:
            p->get++;
            p->hit += hit;
            break;
        case STATS_DETAIL_SET:
            p->set++;
            break;
        case STATS_DETAIL_DELETE:
            p->del++;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

void
stats_detail_dump(void (*line)(void *ctx, const char *text), void *ctx)
{
    char buf[512];      /* "PREFIX", a prefix of up to 250 bytes, 4 counts */

    pthread_mutex_lock(&lock);
    for (size_t b = 0; b < DETAIL_BUCKETS; b++) {
        for (struct prefix *p = buckets[b]; p != NULL; p = p->next) {
            snprintf(buf, sizeof(buf), "PREFIX %s get %" PRIu64 " hit %" PRIu64
                     " set %" PRIu64 " del %" PRIu64, p->p, p->get, p->hit,
                     p->set, p->del);
            line(ctx, buf);
        }
    }
    pthread_mutex_unlock(&lock);
}

void
stats_detail_clear(void)
{
    pthread_mutex_lock(&lock);
    for (size_t b = 0; b < DETAIL_BUCKETS; b++) {
        while (buckets[b] != NULL) {
            struct prefix *p = buckets[b];
            buckets[b] = p->next;
            free(p);
        }
    }
    nprefixes = 0;
    untracked = 0;
    pthread_mutex_unlock(&lock);
}

uint64_t
stats_detail_untracked(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = untracked;
    pthread_mutex_unlock(&lock);
    return n;
}
