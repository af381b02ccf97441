/*
 * assoc.c -- partitioned chained hash table (see assoc.h for the why).
 *
 * Partition p holds the keys whose hash has p in its low bits; inside a
 * partition the bucket is chosen by the next bits, so doubling a
 * partition splits each chain in two without touching other partitions.
 *
 * Multi-gets prefetch buckets and chain heads without the lock
 * (assoc_prefetch_*). For that, a partition's bucket array and power are
 * published with release stores, array first, and read with acquire loads,
 * power first: a reader that sees the new power sees the new array (the
 * index stays in bounds), and one that sees the new array sees it filled.
 * Bucket words are stored atomically, and an array replaced by a doubling
 * is retired, not freed, until teardown: an unlocked reader may still hold
 * it. The retired arrays together are smaller than the live one (each is
 * half the next); `hash_bytes` counts them.
 */
#include "assoc.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "item.h"
#include "item_int.h"
#include "slab.h"

#define PART_BITS 10
#define PART_MASK (ASSOC_PARTITIONS - 1)
#define PART_MIN_POWER 4

_Static_assert((1u << PART_BITS) == ASSOC_PARTITIONS, "partition bits");

struct partition {
    pthread_mutex_t lock;
    uint32_t       *buckets;    /* slab handles: half a pointer each */
    uint32_t        power;      /* 2^power buckets */
    uint32_t        count;
} __attribute__((aligned(64)));

/*
 * Arrays replaced by doublings, kept until teardown (a reader without the
 * lock may still hold one). One list for every partition, so that a
 * partition is one cache line: the 1,024 of them are touched at setup.
 */
static uint32_t      **retired;
static size_t          nretired;
static size_t          retired_cap;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;

static struct partition parts[ASSOC_PARTITIONS];
static _Atomic uint64_t total_buckets;
static _Atomic uint64_t expansions;
static _Atomic uint64_t retired_buckets;    /* in arrays kept until teardown */

static inline struct partition *
part_of(uint32_t hv)
{
    return &parts[hv & PART_MASK];
}

static inline uint32_t
bucket_of(const struct partition *p, uint32_t hv)
{
    return (hv >> PART_BITS) & ((1u << p->power) - 1);
}

/* Bucket words are read without the lock by assoc_prefetch_head(). */
static inline void
word_store(uint32_t *w, uint32_t v)
{
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
}

int
assoc_setup(uint32_t hashpower)
{
    uint32_t power = hashpower > PART_BITS + PART_MIN_POWER ?
                     hashpower - PART_BITS : PART_MIN_POWER;

    for (size_t i = 0; i < ASSOC_PARTITIONS; i++) {
        struct partition *p = &parts[i];
        pthread_mutex_init(&p->lock, NULL);
        p->power = power;
        p->count = 0;
        p->buckets = calloc((size_t)1 << power, sizeof(*p->buckets));
        if (p->buckets == NULL) {
            return -1;
        }
    }
    atomic_store(&total_buckets, (uint64_t)ASSOC_PARTITIONS << power);
    atomic_store(&expansions, 0);
    atomic_store(&retired_buckets, 0);
    return 0;
}

void
assoc_teardown(void)
{
    for (size_t i = 0; i < ASSOC_PARTITIONS; i++) {
        free(parts[i].buckets);
        parts[i].buckets = NULL;
        pthread_mutex_destroy(&parts[i].lock);
    }
    for (size_t r = 0; r < nretired; r++) {
        free(retired[r]);
    }
    free(retired);
    retired = NULL;
    nretired = retired_cap = 0;
}

/* Keep a replaced array until teardown; false if the list cannot grow. */
static bool
retire(uint32_t *old)
{
    bool ok = true;

    pthread_mutex_lock(&retired_lock);
    if (nretired == retired_cap) {
        size_t cap = retired_cap > 0 ? retired_cap * 2 : ASSOC_PARTITIONS;
        uint32_t **r = realloc(retired, cap * sizeof(*r));
        if (r == NULL) {
            ok = false;
        } else {
            retired = r;
            retired_cap = cap;
        }
    }
    if (ok) {
        retired[nretired++] = old;
    }
    pthread_mutex_unlock(&retired_lock);
    return ok;
}

void
assoc_lock(uint32_t hv)
{
    pthread_mutex_lock(&part_of(hv)->lock);
}

void
assoc_unlock(uint32_t hv)
{
    pthread_mutex_unlock(&part_of(hv)->lock);
}

int
assoc_trylock(uint32_t hv)
{
    return pthread_mutex_trylock(&part_of(hv)->lock);
}

/*
 * An item with the key itself goes before a flash stub that matches it by
 * its hashes only (item_int.h): another key's stub of the same hashes
 * must not hide the key's own item.
 */
struct item *
assoc_find(const char *key, size_t nkey, uint32_t hv)
{
    struct partition *p = part_of(hv);
    struct item *stub = NULL;

    for (uint32_t h = p->buckets[bucket_of(p, hv)]; h != SLAB_HANDLE_NONE;) {
        struct item *it = slab_handle_item(h);
        if (item_key_matches(it, key, nkey, hv)) {
            if (item_nkey(it) != 0) {
                return it;
            }
            if (stub == NULL) {
                stub = it;
            }
        }
        h = it->h_next;
    }
    return stub;
}

struct item *
assoc_find_other(const char *key, size_t nkey, uint32_t hv, const struct item *except)
{
    struct partition *p = part_of(hv);

    for (uint32_t h = p->buckets[bucket_of(p, hv)]; h != SLAB_HANDLE_NONE;) {
        struct item *it = slab_handle_item(h);
        if (it != except && item_key_matches(it, key, nkey, hv)) {
            return it;
        }
        h = it->h_next;
    }
    return NULL;
}

bool
assoc_has(const struct item *it, uint32_t hv)
{
    struct partition *p = part_of(hv);
    uint32_t want = slab_handle(it);

    for (uint32_t h = p->buckets[bucket_of(p, hv)]; h != SLAB_HANDLE_NONE;
         h = slab_handle_item(h)->h_next) {
        if (h == want) {
            return true;
        }
    }
    return false;
}

/*
 * Double the partition's buckets. Runs under the partition lock; when
 * calloc fails the table simply stays smaller (longer chains).
 */
static void
partition_grow(struct partition *p)
{
    uint32_t old_n = 1u << p->power;
    uint32_t new_power = p->power + 1;
    uint32_t *nb;

    if (new_power + PART_BITS > 32) {
        return;                 /* hash bits exhausted */
    }
    nb = calloc((size_t)old_n * 2, sizeof(*nb));
    if (nb == NULL) {
        return;
    }
    /* Kept from here on (freed at teardown), live until nb replaces it. */
    if (!retire(p->buckets)) {
        free(nb);
        return;
    }
    for (uint32_t b = 0; b < old_n; b++) {
        uint32_t h = p->buckets[b];
        while (h != SLAB_HANDLE_NONE) {
            struct item *it = slab_handle_item(h);
            uint32_t next = it->h_next;
            uint32_t hv = item_hash(it);      /* a stub keeps it */
            uint32_t nbk = (hv >> PART_BITS) & ((old_n * 2) - 1);
            it->h_next = nb[nbk];
            nb[nbk] = h;
            h = next;
        }
    }
    __atomic_store_n(&p->buckets, nb, __ATOMIC_RELEASE);
    __atomic_store_n(&p->power, new_power, __ATOMIC_RELEASE);
    atomic_fetch_add(&total_buckets, old_n);
    atomic_fetch_add(&retired_buckets, old_n);
    atomic_fetch_add(&expansions, 1);
}

void
assoc_insert(struct item *it, uint32_t hv)
{
    struct partition *p = part_of(hv);
    uint32_t b = bucket_of(p, hv);

    it->h_next = p->buckets[b];
    word_store(&p->buckets[b], slab_handle(it));
    p->count++;
    if (p->count > (3u << p->power) / 2) {
        partition_grow(p);
    }
}

void
assoc_delete(struct item *it, uint32_t hv)
{
    struct partition *p = part_of(hv);
    uint32_t h = slab_handle(it);
    uint32_t *pp = &p->buckets[bucket_of(p, hv)];

    while (*pp != SLAB_HANDLE_NONE && *pp != h) {
        pp = &slab_handle_item(*pp)->h_next;
    }
    assert(*pp == h);
    if (*pp == h) {
        word_store(pp, it->h_next);
        it->h_next = SLAB_HANDLE_NONE;
        p->count--;
    }
}

bool
assoc_replace(struct item *old, struct item *to, uint32_t hv)
{
    struct partition *p = part_of(hv);
    uint32_t h = slab_handle(old);
    uint32_t *pp = &p->buckets[bucket_of(p, hv)];

    while (*pp != SLAB_HANDLE_NONE && *pp != h) {
        pp = &slab_handle_item(*pp)->h_next;
    }
    assert(*pp == h);
    if (*pp != h) {
        return false;
    }
    to->h_next = old->h_next;
    word_store(pp, slab_handle(to));
    old->h_next = SLAB_HANDLE_NONE;
    return true;
}

const uint32_t *
assoc_prefetch_bucket(uint32_t hv)
{
    struct partition *p = part_of(hv);
    uint32_t power = __atomic_load_n(&p->power, __ATOMIC_ACQUIRE);
    uint32_t *buckets = __atomic_load_n(&p->buckets, __ATOMIC_ACQUIRE);
    const uint32_t *slot = &buckets[(hv >> PART_BITS) & ((1u << power) - 1)];

    __builtin_prefetch(slot);
    return slot;
}

void
assoc_prefetch_head(const uint32_t *slot)
{
    uint32_t h = __atomic_load_n(slot, __ATOMIC_RELAXED);

    if (h != SLAB_HANDLE_NONE) {
        /* the header and key, and the lines after them: a small value
         * (which the answer copies) after a key of up to ~64 bytes ends
         * within four lines of the item's start; fewer lines measured
         * slower with memcaslap's 64-byte keys (notes/performance.md) */
        const char *it = (const char *)slab_handle_item(h);
        __builtin_prefetch(it);
        __builtin_prefetch(it + 64);
        __builtin_prefetch(it + 128);
        __builtin_prefetch(it + 192);
    }
}

uint64_t
assoc_buckets(void)
{
    return atomic_load(&total_buckets);
}

uint64_t
assoc_retired_buckets(void)
{
    return atomic_load(&retired_buckets);
}

uint64_t
assoc_expansions(void)
{
    return atomic_load(&expansions);
}

uint32_t
assoc_power(void)
{
    uint64_t buckets = assoc_buckets();
    uint32_t power = 0;

    /* the first p with buckets < 2^(p + 1/2), squared to stay in integers */
    while (power < 40 && (__uint128_t)buckets * buckets >= ((__uint128_t)1 << (2 * power + 1))) {
        power++;
    }
    return power;
}
