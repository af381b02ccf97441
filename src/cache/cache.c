/*
 * cache.c -- allocate, else reclaim, else evict, retry (see cache.h).
 *
 * Storage answers a rebuild it cannot finish under its lock with
 * ITEM_NEED_MEMORY (struct item_rebuild): the loops here allocate for it
 * with eviction, holding no lock, and call it again. A rebuild that loses
 * a race (ITEM_RETRY: the key changed while unlocked) starts over, a
 * bounded number of times: a failed round frees its chunk, which the next
 * round's locked attempt can take, so running out of rounds means memory
 * is contended, not that the key is gone. It is reported as a failed
 * allocation (which the client sees as NOT_STORED, memcached's answer when
 * an append cannot allocate).
 */
#include "cache.h"

#include "evict.h"
#include "flash.h"
#include "item.h"
#include "settings.h"
#include "slab.h"

#define CACHE_ALLOC_TRIES   8   /* failed evictions before giving up (flash on) */
/* Rounds in all: an eviction that succeeds frees a chunk another writer
 * may take before this one's next try, and several writers at a small -m
 * with the flash tier lose such races several times in a row (test_flash.py's
 * load_overflows_into_flash answered a set out of memory although every
 * eviction had freed a chunk, before aab4a63). Each lost race stored
 * someone's item, so the bound is only against a livelock. */
#define CACHE_ALLOC_ROUNDS  64
#define CACHE_REBUILD_TRIES 8   /* rebuild rounds lost to races before giving up */
#define CACHE_STUB_BATCH    32  /* chunks made for flash stubs at a time */
/* An eviction waits this long at most for the flash writer (a burst of
 * sets is slowed to the device's pace rather than losing items). */
#define CACHE_FLASH_WAIT_MS 100

/* Running low while memory is full: let the background evictor refill. */
static void
cache_note_low(uint8_t cls)
{
    if (cls != 0 && evict_bg_reserve() > 0 && slab_class_free(cls) < evict_bg_target(cls) &&
        slab_at_limit()) {
        evict_bg_notify(cls);
    }
}

/*
 * An eviction could not keep its item on flash for want of a chunk for
 * its stub, or the stub's class is running low (item_flash.c cannot
 * evict under its locks): make room there now, with the policies, so the
 * next evictions can keep theirs.
 */
static void
cache_stub_room(void)
{
    uint8_t cls = item_flash_stub_wanted();

    /* Under the limit the class grows by itself (a fresh slab). At the
     * limit it takes a whole slab from colder memory elsewhere (a slab
     * of stubs holds thousands of flash items for the RAM of a few values
     * it displaces), unless slabs may not move; else it recycles its own
     * coldest stubs. */
    if (cls == 0 || !slab_at_limit()) {
        return;
    }
    /* More stubs than records the file still holds: some point at
     * reclaimed flash slabs. Those are freed first (the CLOCK takes dead
     * items as it passes), rather than growing the index with dead stubs,
     * most of which a grown index would otherwise hold. */
    /* Nor past half of memory: then the stubs' own coldest make room
     * (evict_stubs_kept, the same rule that keeps their slabs). */
    if (evict_stubs_kept() != 0 && settings.slab_reassign && evict_slab_for(cls) == EVICT_OK) {
        return;
    }
    (void)evict_run(cls, CACHE_STUB_BATCH, NULL);
}

/*
 * Failed evictions before an allocation gives up. Usually 2 (a second
 * sweep passes what the first found busy). With the flash tier on, an
 * eviction holds its locks longer (the value is copied to the write
 * buffer, a stub allocated), so more sweeps find items busy: every round
 * is used (with 2, test_flash.py's 4-writer load at -m 8 sometimes
 * answered a set out of memory).
 */
static int
cache_fail_limit(void)
{
    return flash_enabled() ? CACHE_ALLOC_TRIES : 2;
}

static item_status_t
cache_alloc_with(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                 uint32_t vlen, struct item **out, bool wait_flash)
{
    uint8_t cls = item_class_of(nkey, vlen);
    item_status_t st = ITEM_NO_MEMORY;

    /* A class with no slab at the limit (new at a full -m, or it gave
     * its only one away): an empty slab, a policy's pick or a move the
     * measurement pays for before a first one past the room (evict_run
     * grants that when none of those did; fixed classes, the stubs' and
     * the chained values', get a first slab from slab_alloc). */
    if (cls != 0 && slab_first_past_limit() && slab_class_slabs(cls) == 0 && slab_at_limit()) {
        (void)evict_run(cls, 1, NULL);
    }
    /* A failed eviction is retried once: the CLOCK hand has moved past
     * whatever was busy (e.g. values still being sent), so a second sweep
     * usually finds something. */
    for (int tries = 0, failed = 0; tries < CACHE_ALLOC_ROUNDS; tries++) {
        st = item_alloc_try(key, nkey, flags, exptime, vlen, out);
        if (st != ITEM_NO_MEMORY) {
            break;
        }
        /* Once per allocation, and only where evicted items go to flash
         * (chained ones never do). */
        if (wait_flash && tries == 0 && vlen >= flash_min_value() && !item_chains(nkey, vlen)) {
            (void)flash_wait_room(CACHE_FLASH_WAIT_MS);
        }
        /* A chained item may want many chunks of the largest class, and
         * one of its head's: memory for either does not come from the
         * other while that one holds its part (item_alloc_spare). */
        uint32_t want;
        uint8_t lacks = item_alloc_lacks(nkey, vlen, &want);
        uint8_t spare = item_alloc_spare(nkey, vlen, lacks);
        if (evict_run_sparing(lacks, want, spare, NULL) != EVICT_OK &&
            ++failed == cache_fail_limit()) {
            break;
        }
    }
    if (st == ITEM_NO_MEMORY && wait_flash) {
        /* A copy back to RAM (nowait) is a best effort, not a refused
         * store: not counted in outofmemory. */
        item_note_outofmemory(cls);
    } else if (st == ITEM_OK) {
        cache_note_low(cls);
        if (item_chains(nkey, vlen)) {
            cache_note_low(item_chain_class());
        }
        cache_stub_room();
    }
    return st;
}

item_status_t
cache_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
            uint32_t vlen, struct item **out)
{
    return cache_alloc_with(key, nkey, flags, exptime, vlen, out, true);
}

item_status_t
cache_alloc_nowait(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                   uint32_t vlen, struct item **out)
{
    return cache_alloc_with(key, nkey, flags, exptime, vlen, out, false);
}

/* ITEM_NEED_MEMORY answered: allocate what the rebuild asks for. */
static item_status_t
cache_rebuild_alloc(struct item_rebuild *rb)
{
    rb->need = false;
    item_status_t st = cache_alloc(rb->key, rb->nkey, rb->flags, rb->exptime, rb->vlen,
                                   &rb->fresh);
    if (st != ITEM_OK) {
        item_rebuild_drop(rb);
    }
    return st;
}

/* One rebuilding operation, called again with the same rb until done. */
typedef item_status_t (*cache_step_fn)(void *arg, struct item_rebuild *rb);

static item_status_t
cache_rebuild(cache_step_fn step, void *arg)
{
    struct item_rebuild rb = { .old = NULL };

    for (int round = 0; round < CACHE_REBUILD_TRIES; round++) {
        item_status_t st = step(arg, &rb);
        if (st == ITEM_NEED_MEMORY) {
            st = cache_rebuild_alloc(&rb);
            if (st != ITEM_OK) {
                return st;
            }
            st = step(arg, &rb);
        }
        cache_note_low(rb.cls);
        if (st != ITEM_RETRY) {
            return st;
        }
    }
    return ITEM_NO_MEMORY;
}

struct store_args {
    struct item            *it;
    item_store_op_t         op;
    struct item_store_meta *m;
};

static item_status_t
store_step(void *arg, struct item_rebuild *rb)
{
    struct store_args *a = arg;

    return item_store_meta(a->it, a->op, a->m, rb);
}

item_status_t
cache_store_meta(struct item *it, item_store_op_t op, struct item_store_meta *m)
{
    struct store_args a = { .it = it, .op = op, .m = m };

    return cache_rebuild(store_step, &a);
}

item_status_t
cache_store(struct item *it, item_store_op_t op, uint64_t cas_in)
{
    struct item_store_meta m = { .has_cas = op == ITEM_OP_CAS,
                                 .cas = op == ITEM_OP_CAS ? cas_in : 0 };

    return cache_store_meta(it, op, &m);
}

struct arith_args {
    const char             *key;
    size_t                  nkey;
    bool                    incr;
    uint64_t                delta;
    uint64_t               *result;
    uint8_t                *cls;
    struct item_arith_meta *m;
};

static item_status_t
arith_step(void *arg, struct item_rebuild *rb)
{
    struct arith_args *a = arg;

    return item_arith_meta(a->key, a->nkey, a->incr, a->delta, a->result, a->cls, a->m, rb);
}

item_status_t
cache_arith_meta(const char *key, size_t nkey, bool incr, uint64_t delta,
                 uint64_t *result, uint8_t *cls, struct item_arith_meta *m)
{
    struct arith_args a = { .key = key, .nkey = nkey, .incr = incr, .delta = delta,
                            .result = result, .cls = cls, .m = m };

    return cache_rebuild(arith_step, &a);
}

item_status_t
cache_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
            uint64_t *result, uint8_t *cls)
{
    return cache_arith_meta(key, nkey, incr, delta, result, cls, NULL);
}

struct item *
cache_meta_get(const char *key, size_t nkey, struct item_meta_get *m, item_miss_t *miss)
{
    struct item_rebuild rb = { .old = NULL };
    struct item *it = item_meta_get(key, nkey, m, miss, &rb);

    /* A vivify with no free chunk: allocate unlocked and look again (the
     * second look links it, or finds what another client stored). */
    if (it == NULL && rb.need && cache_rebuild_alloc(&rb) == ITEM_OK) {
        it = item_meta_get(key, nkey, m, miss, &rb);
    }
    cache_note_low(rb.cls);
    return it;
}
