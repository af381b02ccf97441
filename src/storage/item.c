/*
 * item.c -- items: allocation, linkage, per-class CLOCK, and memcached's
 * store/get/delete/touch/arith/flush semantics (see item.h for the
 * reference counting and lock order rules).
 *
 * Expired and flushed items are removed lazily: whoever finds one under
 * its partition lock unlinks it. Allocation reclaims expired items just
 * ahead of the CLOCK hand before it asks the eviction policies for memory.
 *
 * Item-level eviction is CLOCK (second chance) rather than a linked LRU:
 * the hand sweeps the class's slabs in address order; an item read since
 * the hand last passed (ITEM_ACTIVE, set by readers without the class
 * lock) is spared once, anything else is evicted. It approximates LRU
 * without two list pointers per item, and neither reads nor stores take
 * the class lock.
 */
#include "item.h"

#include <assert.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "assoc.h"
#include "evict.h"
#include "hash.h"
#include "num.h"
#include "slab.h"

#define ALLOC_TRIES       8     /* evict/alloc rounds before giving up */
#define LRU_SEARCH_DEPTH  5     /* busy items passed over per freed one */
#define LRU_RESCUE_MAX    32    /* active items given a second chance per freed one */
#define CLOCK_SCAN_EXTRA  256   /* chunks a sweep may pass beyond two slabs' worth */
#define SLAB_LOCK_TRIES   1000  /* yields waiting for a partition lock */

/*
 * Per-class counters. number/bytes/total_items change on every link and
 * unlink, so they are atomics (no class lock on the store path); the
 * eviction counters are written under the class lock.
 */
struct lru {
    _Atomic uint64_t number;
    _Atomic uint64_t bytes;
    _Atomic uint64_t total_items;
    uint64_t     evicted;
    uint64_t     evicted_nonzero;
    uint64_t     evicted_time;
    uint64_t     evicted_unfetched;
    uint64_t     reclaimed;
    uint64_t     expired_unfetched;
    uint64_t     outofmemory;
    uint64_t     evicted_by_slab;
    uint64_t     slab_rescues;      /* items moved out of a slab being emptied */
    _Atomic bool ttl_seen;          /* an item with an exptime was stored */
    _Atomic uint64_t crawler_reclaimed;     /* written by the crawler only */
    _Atomic uint64_t crawler_items_checked;
};

static struct lru             lrus[SLAB_CLASS_MAX + 1];
static _Atomic item_evict_hook_fn evict_hook;
static bool                   cas_enabled;
static _Atomic uint64_t       cas_seq;
static _Atomic bool           slab_rescue_on = true;
static _Atomic rel_time_t     oldest_live;
static _Atomic uint64_t       oldest_cas;

void
item_set_evict_hook(item_evict_hook_fn fn)
{
    atomic_store_explicit(&evict_hook, fn, memory_order_release);
}

int
item_setup(bool use_cas)
{
    memset(lrus, 0, sizeof(lrus));
    cas_enabled = use_cas;
    atomic_store(&cas_seq, 0);
    atomic_store(&oldest_live, 0);
    atomic_store(&oldest_cas, 0);
    return 0;
}

void
item_teardown(void)
{
    memset(lrus, 0, sizeof(lrus));
}

size_t
item_total_size(size_t nkey, size_t vlen)
{
    return offsetof(struct item, data) + nkey + vlen + 2;
}

static inline uint32_t
item_hash(struct item *it)
{
    return hash_key(item_key(it), item_nkey(it));
}

static inline size_t
item_ntotal(struct item *it)
{
    return offsetof(struct item, data) + item_nkey(it) + it->nbytes;
}

static inline struct lru *
lru_of(const struct item *it)
{
    return &lrus[slab_cls_of(it)];
}

/* exptime of a linked item: written under its partition lock, read by
 * the CLOCK's dead-item hint without it (clock_maybe_dead). */
static inline void
item_set_exptime(struct item *it, rel_time_t exptime)
{
    __atomic_store_n(&it->exptime, exptime, __ATOMIC_RELAXED);
}

/* memcached's item_is_flushed(): stored at or before the flush point. */
static bool
item_is_flushed(struct item *it, rel_time_t now)
{
    rel_time_t live = atomic_load_explicit(&oldest_live, memory_order_relaxed);
    uint64_t ocas = atomic_load_explicit(&oldest_cas, memory_order_relaxed);

    if (live == 0 || live > now) {
        return false;
    }
    uint64_t cas = item_cas(it);

    return it->time <= live || (ocas != 0 && cas != 0 && cas < ocas);
}

static bool
item_is_dead(struct item *it, rel_time_t now)
{
    return (it->exptime != 0 && it->exptime <= now) || item_is_flushed(it, now);
}

/* --- link / unlink (partition lock held) ---------------------------------- */

static void
do_item_link(struct item *it, uint32_t hv)
{
    struct lru *l = lru_of(it);

    assert((item_iflags(it) & (ITEM_LINKED | ITEM_FREE)) == 0);
    it->time = clock_now();
    item_set_cas(it, cas_enabled ? atomic_fetch_add(&cas_seq, 1) + 1 : 0);
    /* The hash table's reference and the flag in one atomic step. */
    atomic_fetch_add(&it->refs, 1u | (uint32_t)ITEM_LINKED << ITEM_REF_BITS);
    assoc_insert(it, hv);
    slab_touch(slab_sid_of(it));
    atomic_fetch_add_explicit(&l->number, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->total_items, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->bytes, item_ntotal(it), memory_order_relaxed);
}

/* Remove from the hash table. Caller must item_release() the link's ref. */
static void
do_item_unlink_nofree(struct item *it, uint32_t hv)
{
    struct lru *l = lru_of(it);

    assert(item_iflags(it) & ITEM_LINKED);
    item_iflags_clear(it, ITEM_LINKED);
    assoc_delete(it, hv);
    atomic_fetch_sub_explicit(&l->number, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&l->bytes, item_ntotal(it), memory_order_relaxed);
}

static void
do_item_unlink(struct item *it, uint32_t hv)
{
    do_item_unlink_nofree(it, hv);
    item_release(it);
}

static void
do_item_replace(struct item *old, struct item *it, uint32_t hv)
{
    do_item_unlink(old, hv);
    do_item_link(it, hv);
}

void
item_release(struct item *it)
{
    uint32_t prev = atomic_fetch_sub_explicit(&it->refs, 1, memory_order_acq_rel);

    assert((prev & ITEM_REF_MASK) > 0);
    if ((prev & ITEM_REF_MASK) == 1) {
        assert(!((prev >> ITEM_REF_BITS) & ITEM_LINKED));
        slab_free(slab_cls_of(it), slab_sid_of(it), it);
    }
}

/* --- allocation ------------------------------------------------------------ */

/*
 * Unlink an item we hold both locks for (its only reference is the hash
 * table's); the caller gives its chunk back to the class. Accounted as
 * reclaimed (dead) or evicted (live).
 */
static void
lru_drop_locked(struct lru *l, struct item *it, uint32_t hv, bool dead,
                rel_time_t now)
{
    uint8_t f = item_iflags(it);

    do_item_unlink_nofree(it, hv);
    if (dead) {
        l->reclaimed++;
        l->expired_unfetched += !(f & ITEM_FETCHED);
    } else {
        l->evicted++;
        l->evicted_time = now - it->time;
        l->evicted_nonzero += it->exptime != 0;
        l->evicted_unfetched += !(f & ITEM_FETCHED);
        item_evict_hook_fn hook = atomic_load_explicit(&evict_hook,
                                                       memory_order_acquire);
        if (hook != NULL) {
            hook(it, now);
        }
    }
}

/* What the hand found in one chunk (class lock held). */
typedef enum clock_verdict {
    CLOCK_HOLE,         /* free, being filled or unlinked, or draining */
    CLOCK_BUSY,         /* referenced, or its partition is locked */
    CLOCK_LIVE,         /* an unreferenced live item: partition locked */
    CLOCK_DEAD,         /* an unreferenced dead item: partition locked */
} clock_verdict_t;

static clock_verdict_t
clock_examine(struct item *it, rel_time_t now, uint32_t *hv)
{
    /* Free, being filled, or being unlinked: not ours to judge. */
    if ((item_iflags(it) & (ITEM_LINKED | ITEM_FREE)) != ITEM_LINKED) {
        return CLOCK_HOLE;
    }
    /* Its chunk leaves with its slab: freeing it gives the class nothing. */
    if (slab_draining(slab_sid_of(it))) {
        return CLOCK_HOLE;
    }
    /* A referenced item is being read or written: never reuse it. The key
     * read here is stable: the chunk cannot be reallocated while the
     * caller holds the class lock. */
    *hv = item_hash(it);
    if (item_refcount(it) != 1 || assoc_trylock(*hv) != 0) {
        return CLOCK_BUSY;
    }
    if (!(item_iflags(it) & ITEM_LINKED) || item_refcount(it) != 1) {
        assoc_unlock(*hv);
        return CLOCK_BUSY;
    }
    return item_is_dead(it, now) ? CLOCK_DEAD : CLOCK_LIVE;
}

/* Both locks held: unlink, count, give the chunk back to the class. */
static void
clock_drop(uint8_t cls, struct item *it, uint32_t hv, bool dead, rel_time_t now)
{
    lru_drop_locked(&lrus[cls], it, hv, dead, now);
    assoc_unlock(hv);
    slab_free_locked(cls, slab_sid_of(it), it);
}

/*
 * Whether a linked item at the hand may be dead, read without its
 * partition lock (a touch may be writing exptime: hence the atomic load).
 * "No" ends clock_reclaim's look at no cost in the common case, a live
 * item with no flush pending; "maybe" is settled under both locks.
 */
static bool
clock_maybe_dead(struct item *it, rel_time_t now)
{
    rel_time_t exp = __atomic_load_n(&it->exptime, __ATOMIC_RELAXED);
    rel_time_t live = atomic_load_explicit(&oldest_live, memory_order_relaxed);

    if (exp != 0 && exp <= now) {
        return true;
    }
    if (live == 0 || live > now) {
        return false;
    }
    return __atomic_load_n(&it->time, __ATOMIC_RELAXED) <= live ||
           atomic_load_explicit(&oldest_cas, memory_order_relaxed) != 0;
}

/*
 * Reclaim only: dead items (expired, flushed) and holes right at the hand
 * are passed, the dead ones freed; the first live or busy item stops it,
 * so no live item loses its turn in the rotation.
 */
static uint32_t
clock_reclaim(uint8_t cls, uint32_t max, rel_time_t now)
{
    uint32_t freed = 0;

    for (int n = 0; n < LRU_SEARCH_DEPTH && freed < max; n++) {
        struct item *it = slab_clock_peek(cls, 0);
        uint32_t hv;
        if (it == NULL) {
            break;
        }
        if ((item_iflags(it) & (ITEM_LINKED | ITEM_FREE)) == ITEM_LINKED &&
            !slab_draining(slab_sid_of(it)) && !clock_maybe_dead(it, now)) {
            break;
        }
        clock_verdict_t v = clock_examine(it, now, &hv);
        if (v == CLOCK_BUSY) {
            break;
        }
        if (v == CLOCK_LIVE) {
            assoc_unlock(hv);
            break;
        }
        (void)slab_clock_next(cls);
        if (v == CLOCK_DEAD) {
            clock_drop(cls, it, hv, true, now);
            freed++;
        }
    }
    return freed;
}

/* The sweep proper (see the file header). */
static uint32_t
clock_evict(uint8_t cls, uint32_t max, rel_time_t now)
{
    uint32_t freed = 0;
    int busy = LRU_SEARCH_DEPTH, rescues = LRU_RESCUE_MAX;
    /* Enough to pass a slab being drained and the hand's wrap. */
    uint64_t budget = 2 * (uint64_t)slab_class_perslab(cls) + CLOCK_SCAN_EXTRA;

    while (budget-- > 0) {
        struct item *it = slab_clock_next(cls);
        uint32_t hv;
        if (it == NULL) {
            break;
        }
        clock_verdict_t v = clock_examine(it, now, &hv);
        if (v == CLOCK_HOLE) {
            continue;
        }
        if (v == CLOCK_BUSY) {
            if (--busy == 0) {
                break;
            }
            continue;
        }
        if (v == CLOCK_LIVE && (item_iflags(it) & ITEM_ACTIVE) && rescues > 0) {
            item_iflags_clear(it, ITEM_ACTIVE);
            it->time = now;             /* as memcached's bump does */
            assoc_unlock(hv);
            rescues--;
            continue;
        }
        clock_drop(cls, it, hv, v == CLOCK_DEAD, now);
        if (++freed == max) {
            break;
        }
        busy = LRU_SEARCH_DEPTH;
        rescues = LRU_RESCUE_MAX;
    }
    return freed;
}

uint32_t
item_lru_pull_tail(uint8_t cls, bool evict_live, uint32_t max)
{
    rel_time_t now = clock_now();
    uint32_t freed;

    /* One lock hold for the whole batch: background eviction's point. */
    slab_lock(cls);
    freed = evict_live ? clock_evict(cls, max, now) : clock_reclaim(cls, max, now);
    slab_unlock(cls);
    return freed;
}

/* From the first item given an exptime on, the class checks for dead items
 * before it allocates (item_alloc). */
static void
note_ttl(uint8_t cls, rel_time_t exptime)
{
    if (exptime != 0 &&
        !atomic_load_explicit(&lrus[cls].ttl_seen, memory_order_relaxed)) {
        atomic_store_explicit(&lrus[cls].ttl_seen, true, memory_order_relaxed);
    }
}

/* The class for an item of this shape, or 0 if it cannot be stored. */
static uint8_t
item_class_for(size_t nkey, uint32_t vlen)
{
    if (nkey > UINT8_MAX || vlen > UINT32_MAX - 2) {
        return 0;
    }
    return slab_clsid(item_total_size(nkey, vlen));
}

/* Running low while memory is full: let the background evictor refill. */
static void
alloc_note_low(uint8_t cls)
{
    if (evict_bg_reserve() > 0 && slab_class_free(cls) < evict_bg_target(cls) &&
        slab_at_limit()) {
        evict_bg_notify(cls);
    }
}

static void
item_init(struct item *it, const char *key, size_t nkey, uint32_t flags,
          rel_time_t exptime, uint32_t vlen)
{
    atomic_store(&it->refs, 1);
    it->h_next = SLAB_HANDLE_NONE;
    atomic_store_explicit(&it->cas_key, (uint8_t)nkey, memory_order_relaxed);
    it->nbytes = vlen + 2;
    it->flags = flags;
    it->exptime = exptime;
    it->time = clock_now();
    memcpy(item_key(it), key, nkey);
}

item_status_t
item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
           uint32_t vlen, struct item **out)
{
    uint8_t cls = item_class_for(nkey, vlen);
    struct item *it = NULL;
    uint32_t sid;

    if (cls == 0) {
        return ITEM_TOO_LARGE;
    }
    /* Dead items at the hand (expired, flushed) are reused before a free
     * chunk or a fresh slab is taken, as memcached does before allocating:
     * memory does not grow while expired items sit in the class. Only a
     * class that ever held an item with an exptime, or after a flush_all,
     * can have any: others skip the look (2 % of a set's cost). */
    if (atomic_load_explicit(&lrus[cls].ttl_seen, memory_order_relaxed) ||
        atomic_load_explicit(&oldest_live, memory_order_relaxed) != 0) {
        (void)item_lru_pull_tail(cls, false, 1);
    } else {
        note_ttl(cls, exptime);
    }
    /* A failed eviction is retried once: the CLOCK hand has moved past
     * whatever was busy (e.g. values still being sent), so a second sweep
     * usually finds something. */
    for (int tries = 0, failed = 0; tries < ALLOC_TRIES && it == NULL; tries++) {
        it = slab_alloc(cls, &sid);
        if (it != NULL) {
            break;
        }
        if (item_lru_pull_tail(cls, false, 1) > 0) {
            continue;
        }
        if (evict_run(cls, 1, NULL) != EVICT_OK && ++failed == 2) {
            break;
        }
    }
    if (it == NULL) {
        slab_lock(cls);
        lrus[cls].outofmemory++;
        slab_unlock(cls);
        return ITEM_NO_MEMORY;
    }
    assert(slab_cls_of(it) == cls && slab_sid_of(it) == sid);
    (void)sid;
    alloc_note_low(cls);
    item_init(it, key, nkey, flags, exptime, vlen);
    *out = it;
    return ITEM_OK;
}

/*
 * A free chunk (or a fresh slab while under -m) and nothing more: no
 * eviction, so no partition lock is taken and a caller may hold one
 * (slab_alloc takes only the class lock, which ranks below it). NULL
 * when that is not enough; the caller then falls back to item_alloc().
 */
static struct item *
item_alloc_nowait(const char *key, size_t nkey, uint32_t flags,
                  rel_time_t exptime, uint32_t vlen)
{
    uint8_t cls = item_class_for(nkey, vlen);
    uint32_t sid;
    struct item *it;

    if (cls == 0 || (it = slab_alloc(cls, &sid)) == NULL) {
        return NULL;
    }
    note_ttl(cls, exptime);
    alloc_note_low(cls);
    item_init(it, key, nkey, flags, exptime, vlen);
    return it;
}

/* --- slab-level eviction ---------------------------------------------------- */

/* A chunk that is neither free nor linked-and-unreferenced is in use. */
static bool
chunk_busy(struct item *it)
{
    uint32_t r = atomic_load(&it->refs);
    uint8_t f = (uint8_t)(r >> ITEM_REF_BITS);

    if (f & ITEM_FREE) {
        return false;
    }
    return !(f & ITEM_LINKED) || (r & ITEM_REF_MASK) != 1;
}

/*
 * Take a partition lock without holding any class lock. Holders may be
 * waiting for a class lock themselves, so waiting here (bounded) is safe
 * where a try-once under a class lock would fail spuriously. A partition
 * held for long (e.g. by this very thread, inside append) reads as busy.
 */
static bool
assoc_lock_patiently(uint32_t hv)
{
    for (int i = 0; i < SLAB_LOCK_TRIES; i++) {
        if (assoc_trylock(hv) == 0) {
            return true;
        }
        sched_yield();
    }
    return false;
}

void
item_set_slab_rescue(bool on)
{
    atomic_store(&slab_rescue_on, on);
}

bool
item_slab_rescue(void)
{
    return atomic_load(&slab_rescue_on);
}

/*
 * A live item of a slab being emptied is moved to another chunk of its
 * class rather than dropped with its slab: to a free one if the class has
 * one (as memcached's page mover does); else, if it was read since the
 * CLOCK hand last passed it, to the chunk the class's CLOCK frees (the
 * class's coldest item goes instead). So the items lost to a slab move are
 * the class's coldest, as item-level eviction would pick, not whichever
 * happened to share the slab. Both locks held; false when no chunk could
 * be had (the item is then dropped).
 */
static bool
slab_rescue(uint8_t cls, struct item *it, uint32_t hv, rel_time_t now)
{
    uint32_t dsid;
    struct item *dst = slab_pop_free_locked(cls, &dsid);

    if (dst == NULL && (item_iflags(it) & ITEM_ACTIVE) && clock_evict(cls, 1, now) == 1) {
        dst = slab_pop_free_locked(cls, &dsid);
    }
    if (dst == NULL) {
        return false;
    }
    uint8_t f = item_iflags(it);
    memcpy(dst, it, item_ntotal(it));
    /* The copy has had its second chance, as a CLOCK rescue gives it. */
    atomic_store(&dst->refs, ((uint32_t)(f & ~ITEM_ACTIVE) << ITEM_REF_BITS) | 1u);
    dst->time = now;
    if (!assoc_replace(it, dst, hv)) {
        item_iflags_reset(dst, 0);              /* cannot happen: linked */
        slab_free_locked(cls, dsid, dst);
        return false;
    }
    item_iflags_clear(it, ITEM_LINKED);
    lrus[cls].slab_rescues++;
    return true;
}

/* Unlink one chunk of a draining slab; false if it is in use. */
static bool
slab_unlink_chunk(uint8_t cls, uint32_t sid, struct item *it, rel_time_t now)
{
    struct lru *l = &lrus[cls];

    if (item_iflags(it) & ITEM_FREE) {
        return true;
    }
    /* The key read here may race with a free; it is re-checked below. */
    uint32_t hv = item_hash(it);
    if (!assoc_lock_patiently(hv)) {
        return false;
    }
    slab_lock(cls);
    bool ok = true;
    if (!(item_iflags(it) & ITEM_FREE)) {
        if (chunk_busy(it) || item_hash(it) != hv) {
            ok = false;
        } else if (!item_is_dead(it, now) &&
                   atomic_load_explicit(&slab_rescue_on, memory_order_relaxed) &&
                   slab_rescue(cls, it, hv, now)) {
            slab_free_locked(cls, sid, it);
        } else {
            bool dead = item_is_dead(it, now);
            lru_drop_locked(l, it, hv, dead, now);
            if (!dead) {
                /* Counted apart from LRU evictions; both are evictions. */
                l->evicted--;
                l->evicted_by_slab++;
            }
            slab_free_locked(cls, sid, it);
        }
    }
    slab_unlock(cls);
    assoc_unlock(hv);
    return ok;
}

item_slab_status_t
item_slab_evict(uint32_t sid, uint8_t cls)
{
    uint8_t vcls = slab_drain_begin(sid);

    if (vcls == 0) {
        return ITEM_SLAB_UNOWNED;
    }
    uint32_t n = slab_class_perslab(vcls);
    rel_time_t now = clock_now();
    bool ok = true;
    /* A racy scan first: skip an obviously busy slab before dropping any. */
    for (uint32_t i = 0; i < n && ok; i++) {
        ok = !chunk_busy(slab_chunk(sid, i));
    }
    for (uint32_t i = 0; i < n && ok; i++) {
        ok = slab_unlink_chunk(vcls, sid, slab_chunk(sid, i), now);
    }
    if (!ok) {
        slab_drain_abort(vcls, sid);
        return ITEM_SLAB_BUSY;
    }
    slab_drain_finish(vcls, sid);
    /* The slab belongs to no class now; nobody else can reach it. */
    slab_attach(cls, sid);
    return ITEM_SLAB_OK;
}

/* --- walking live items ------------------------------------------------------- */

/*
 * The walks read chunks of a slab as the class it had when they looked;
 * if it was re-carved since, "it" may lie inside another item's value.
 * Hashing its key must then not read past the chunk (and so never past
 * the slab, whose end may be unmapped): the key must fit the class's chunk.
 */
static bool
chunk_key_fits(struct item *it, uint8_t cls)
{
    return offsetof(struct item, data) + item_nkey(it) <= slab_class_chunk_size(cls);
}

/*
 * The item the hash table holds in chunk idx of slab sid, read as class
 * cls, with its partition lock held (*hv); NULL otherwise. The key is read
 * racily to find its partition; under that lock only a linked item that
 * the table points to counts, so a stale or misaligned read is skipped.
 */
static struct item *
chunk_lock_linked(uint32_t sid, uint8_t cls, uint32_t idx, uint32_t *hv)
{
    struct item *it = slab_chunk_in(sid, cls, idx);
    uint8_t f = item_iflags(it);

    if ((f & ITEM_FREE) || !(f & ITEM_LINKED) || !chunk_key_fits(it, cls)) {
        return NULL;
    }
    *hv = item_hash(it);
    assoc_lock(*hv);
    f = item_iflags(it);
    if (!(f & ITEM_FREE) && (f & ITEM_LINKED) &&
        assoc_find(item_key(it), item_nkey(it), *hv) == it) {
        return it;
    }
    assoc_unlock(*hv);
    return NULL;
}

/* Called with the item's partition lock held; true stops the walk. */
typedef bool (*chunk_visit_fn)(struct item *it, uint32_t hv, uint8_t cls,
                               rel_time_t now, void *ctx);

/*
 * Visit the linked items of the selected classes from *cur on, looking at
 * max chunks at most. Returns true if stopped (by visit, or max reached:
 * the cursor is past the last chunk looked at), false when the walk is over.
 */
static bool
walk_chunks(struct item_cursor *cur, const uint64_t classes[4], uint32_t max,
            chunk_visit_fn visit, void *ctx)
{
    rel_time_t now = clock_now();
    uint32_t n = slab_table_count();

    for (; cur->sid < n; cur->sid++, cur->idx = 0) {
        struct slab_info info;
        if (!slab_table_info(cur->sid, &info) || info.cls == 0 ||
            !(classes[info.cls / 64] & (1ull << (info.cls % 64)))) {
            continue;
        }
        uint32_t per = slab_class_perslab(info.cls);
        while (cur->idx < per) {
            uint32_t hv;
            if (max-- == 0) {
                return true;
            }
            struct item *it = chunk_lock_linked(cur->sid, info.cls, cur->idx++, &hv);
            if (it == NULL) {
                continue;
            }
            bool stop = visit(it, hv, info.cls, now, ctx);
            assoc_unlock(hv);
            if (stop) {
                return true;
            }
        }
    }
    return false;
}

/* The crawler's visit: unlink a dead item, as a get would have. */
static bool
crawl_visit(struct item *it, uint32_t hv, uint8_t cls, rel_time_t now, void *ctx)
{
    (void)ctx;
    atomic_fetch_add_explicit(&lrus[cls].crawler_items_checked, 1,
                              memory_order_relaxed);
    if (item_is_dead(it, now)) {
        do_item_unlink(it, hv);
        atomic_fetch_add_explicit(&lrus[cls].crawler_reclaimed, 1,
                                  memory_order_relaxed);
    }
    return false;
}

bool
item_crawl_step(struct item_cursor *cur, const uint64_t classes[4],
                uint32_t max)
{
    return walk_chunks(cur, classes, max, crawl_visit, NULL);
}

uint64_t
item_crawler_reclaimed(uint8_t cls)
{
    return atomic_load_explicit(&lrus[cls].crawler_reclaimed, memory_order_relaxed);
}

uint64_t
item_crawler_checked(uint8_t cls)
{
    return atomic_load_explicit(&lrus[cls].crawler_items_checked, memory_order_relaxed);
}

/* The dump's visit: copy a live item and stop there. */
static bool
dump_visit(struct item *it, uint32_t hv, uint8_t cls, rel_time_t now, void *ctx)
{
    struct item_dump *out = ctx;

    (void)hv;
    if (item_is_dead(it, now)) {
        return false;
    }
    out->nkey = (uint8_t)item_nkey(it);
    memcpy(out->key, item_key(it), out->nkey);
    out->cls = cls;
    out->fetched = (item_iflags(it) & ITEM_FETCHED) != 0;
    out->exptime = it->exptime;
    out->time = it->time;
    out->cas = item_cas(it);
    out->vlen = item_vlen(it);
    out->total = item_ntotal(it);
    return true;
}

bool
item_dump_next(struct item_cursor *cur, const uint64_t classes[4],
               struct item_dump *out)
{
    return walk_chunks(cur, classes, UINT32_MAX, dump_visit, out);
}

uint64_t
item_class_items(uint8_t cls)
{
    return atomic_load_explicit(&lrus[cls].number, memory_order_relaxed);
}

/* --- lookups ----------------------------------------------------------------- */

/* Find a live item under the partition lock; unlink it if it is dead. */
static struct item *
do_item_find_why(const char *key, size_t nkey, uint32_t hv, item_miss_t *miss)
{
    struct item *it = assoc_find(key, nkey, hv);
    rel_time_t now = clock_now();

    *miss = ITEM_MISS_NONE;
    if (it == NULL) {
        return NULL;
    }
    if (item_is_flushed(it, now)) {
        *miss = ITEM_MISS_FLUSHED;
    } else if (it->exptime != 0 && it->exptime <= now) {
        *miss = ITEM_MISS_EXPIRED;
    } else {
        return it;
    }
    do_item_unlink(it, hv);
    return NULL;
}

static struct item *
do_item_find(const char *key, size_t nkey, uint32_t hv)
{
    item_miss_t miss;

    return do_item_find_why(key, nkey, hv, &miss);
}

/* Mark as recently read; the LRU acts on it lazily (item_lru_pull_tail). */
static inline void
do_item_bump(struct item *it)
{
    /* Read first: the common hot-key case then writes nothing. */
    if ((item_iflags(it) & (ITEM_FETCHED | ITEM_ACTIVE)) != (ITEM_FETCHED | ITEM_ACTIVE)) {
        item_iflags_set(it, ITEM_FETCHED | ITEM_ACTIVE);
    }
}

struct item *
item_get(const char *key, size_t nkey, bool touch, rel_time_t exptime,
         item_miss_t *miss)
{
    uint32_t hv = hash_key(key, nkey);
    struct item *it;
    item_miss_t why;

    assoc_lock(hv);
    it = do_item_find_why(key, nkey, hv, miss != NULL ? miss : &why);
    if (it != NULL && item_refcount(it) >= ITEM_REF_MAX) {
        /* Millions of sends of this one item are queued: the count would
         * spill into the flags. Unreachable with bounded output queues
         * short of ~2,000 connections pipelining the same key; answered
         * as a miss rather than corrupting the item. */
        it = NULL;
    }
    if (it != NULL) {
        atomic_fetch_add(&it->refs, 1);
        slab_touch(slab_sid_of(it));
        if (touch) {
            item_set_exptime(it, exptime);
            note_ttl(slab_cls_of(it), exptime);
        }
        do_item_bump(it);
    }
    assoc_unlock(hv);
    return it;
}

bool
item_peek(const char *key, size_t nkey, item_miss_t *miss, uint8_t *cls,
          uint32_t *vlen)
{
    uint32_t hv = hash_key(key, nkey);
    rel_time_t now = clock_now();
    bool live = false;

    *miss = ITEM_MISS_NONE;
    assoc_lock(hv);
    struct item *it = assoc_find(key, nkey, hv);
    if (it != NULL) {
        if (item_is_flushed(it, now)) {
            *miss = ITEM_MISS_FLUSHED;
        } else if (it->exptime != 0 && it->exptime <= now) {
            *miss = ITEM_MISS_EXPIRED;
        } else {
            *cls = slab_cls_of(it);
            *vlen = item_vlen(it);
            live = true;
        }
    }
    assoc_unlock(hv);
    return live;
}

static void
item_report_cls(const struct item *it, uint8_t *cls)
{
    if (cls != NULL) {
        *cls = slab_cls_of(it);
    }
}

item_status_t
item_touch(const char *key, size_t nkey, rel_time_t exptime, uint8_t *cls)
{
    uint32_t hv = hash_key(key, nkey);
    item_status_t st = ITEM_NOT_FOUND;

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it != NULL) {
        item_set_exptime(it, exptime);
        note_ttl(slab_cls_of(it), exptime);
        do_item_bump(it);
        item_report_cls(it, cls);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

item_status_t
item_meta_delete(const char *key, size_t nkey, bool has_cas, uint64_t cas,
                 bool stale, bool new_ttl, rel_time_t exptime, uint8_t *cls)
{
    uint32_t hv = hash_key(key, nkey);
    item_status_t st = ITEM_NOT_FOUND;

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it != NULL && has_cas && item_cas(it) != cas) {
        st = ITEM_EXISTS;
    } else if (it != NULL && stale) {
        /* Served on, marked stale, with a new CAS; the next reader wins
         * the recache (mg answers W). */
        if (new_ttl) {
            item_set_exptime(it, exptime);
            note_ttl(slab_cls_of(it), exptime);
        }
        item_iflags_set(it, ITEM_STALE);
        item_iflags_clear(it, ITEM_TOKEN_SENT);
        item_set_cas(it, cas_enabled ? atomic_fetch_add(&cas_seq, 1) + 1 : 0);
        st = ITEM_OK;
    } else if (it != NULL) {
        item_report_cls(it, cls);
        do_item_unlink(it, hv);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

bool
item_debug(const char *key, size_t nkey, struct item_debug *out)
{
    uint32_t hv = hash_key(key, nkey);

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it != NULL) {
        out->exptime = it->exptime;
        out->time = it->time;
        out->cas = item_cas(it);
        out->fetched = (item_iflags(it) & ITEM_FETCHED) != 0;
        out->key_binary = (item_iflags(it) & ITEM_KEY_BINARY) != 0;
        out->cls = slab_cls_of(it);
        out->ntotal = (uint32_t)item_ntotal(it);
    }
    assoc_unlock(hv);
    return it != NULL;
}

/* The empty item an mg with N creates on a miss; NULL if no memory. */
static struct item *
vivify_alloc(const char *key, size_t nkey, const struct item_meta_get *m)
{
    struct item *it;

    if (item_alloc(key, nkey, 0, m->vivify_exptime, 0, &it) != ITEM_OK) {
        return NULL;
    }
    memcpy(item_value(it), "\r\n", 2);
    if (m->key_binary) {
        item_iflags_set(it, ITEM_KEY_BINARY);
    }
    return it;
}

struct item *
item_meta_get(const char *key, size_t nkey, struct item_meta_get *m,
              item_miss_t *miss)
{
    uint32_t hv = hash_key(key, nkey);
    struct item *it, *fresh = NULL;

    m->won = m->created = m->fetched = m->token_sent = m->stale = false;
    m->time = 0;
    /* Allocation may evict, which takes partition locks: never under ours.
     * So a miss that vivifies allocates unlocked and looks again. */
    for (int pass = 0; pass < 2; pass++) {
        assoc_lock(hv);
        it = do_item_find_why(key, nkey, hv, miss);
        if (it != NULL || !m->vivify || fresh != NULL) {
            break;
        }
        assoc_unlock(hv);
        fresh = vivify_alloc(key, nkey, m);
        if (fresh == NULL) {
            assoc_lock(hv);
            break;
        }
    }
    if (it == NULL && fresh != NULL) {
        do_item_link(fresh, hv);
        note_ttl(slab_cls_of(fresh), fresh->exptime);
        it = fresh;
        fresh = NULL;
        m->created = m->won = true;
    }
    if (it != NULL && item_refcount(it) >= ITEM_REF_MAX) {
        it = NULL;                      /* see item_get() */
    }
    if (it != NULL) {
        uint8_t f = item_iflags(it);
        m->fetched = (f & ITEM_FETCHED) != 0 && !m->created;
        m->exptime_before = it->exptime;
        m->time = it->time;
        m->token_sent = (f & ITEM_TOKEN_SENT) != 0;
        m->stale = (f & ITEM_STALE) != 0;
        if (m->touch && !(m->created && m->vivify_last)) {
            item_set_exptime(it, m->exptime);
            note_ttl(slab_cls_of(it), m->exptime);
        }
        if (m->recache && !m->token_sent && !m->created && it->exptime != 0 &&
            it->exptime < m->recache_time) {
            m->won = true;
        }
        if (m->stale && !m->token_sent) {
            m->won = true;
        }
        if (m->won) {
            item_iflags_set(it, ITEM_TOKEN_SENT);
        }
        /* The caller's reference: a created item's is the allocation's. */
        if (!m->created) {
            atomic_fetch_add(&it->refs, 1);
        }
        slab_touch(slab_sid_of(it));
        if (m->bump) {
            do_item_bump(it);
        }
    }
    assoc_unlock(hv);
    if (fresh != NULL) {
        item_release(fresh);            /* someone else stored it meanwhile */
    }
    return it;
}

item_status_t
item_delete(const char *key, size_t nkey, uint8_t *cls)
{
    uint32_t hv = hash_key(key, nkey);
    item_status_t st = ITEM_NOT_FOUND;

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it != NULL) {
        item_report_cls(it, cls);
        do_item_unlink(it, hv);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

void
item_unlink_key(const char *key, size_t nkey)
{
    (void)item_delete(key, nkey, NULL);
}

/* --- storage commands ----------------------------------------------------------- */

/*
 * Operations that build a new item from a stored one (append, prepend,
 * incr past the old length) must not evict under the partition lock:
 * emptying a slab needs partition locks, perhaps this one. So the new item
 * is first taken from a free chunk under the lock (item_alloc_nowait): no
 * window, so concurrent appends to one key all land. Only when that finds
 * nothing: pin the stored item (a reference keeps its bytes and address),
 * unlock, allocate with eviction, re-lock, and replace only if the pinned
 * item is still the one linked under the key; otherwise start over. A
 * failed round frees its chunk, which the next round's locked attempt can
 * take, so running out of rounds means memory is contended, not that the
 * key is gone: it is reported as a failed allocation (which the client
 * sees as NOT_STORED, memcached's answer when an append cannot allocate).
 */
#define REBUILD_TRIES 8

static struct item *
pin_locked(struct item *it)
{
    atomic_fetch_add(&it->refs, 1);
    return it;
}

/* Under the lock again: is old still what the key maps to? */
static bool
still_linked(struct item *old, uint32_t hv)
{
    return (item_iflags(old) & ITEM_LINKED) &&
           assoc_find(item_key(old), item_nkey(old), hv) == old;
}

/* joined's value = old's and it's, in order. */
static void
concat_fill(struct item *joined, struct item *old, struct item *it, bool append)
{
    uint32_t ovlen = item_vlen(old), nvlen = item_vlen(it);
    char *dst = item_value(joined);

    if (append) {
        memcpy(dst, item_value(old), ovlen);
        memcpy(dst + ovlen, item_value(it), nvlen + 2);
    } else {
        memcpy(dst, item_value(it), nvlen);
        memcpy(dst + nvlen, item_value(old), ovlen + 2);
    }
    item_iflags_set(joined, item_iflags(old) & ITEM_KEY_BINARY);
}

/* Under the lock: touch/gat change these in place, so copy them last. */
static void
concat_link(struct item *joined, struct item *old, uint32_t hv)
{
    joined->exptime = old->exptime;
    joined->flags = old->flags;
    do_item_replace(old, joined, hv);
}

/* append/prepend: a new item holding old and new values joined. */
static item_status_t
item_concat(struct item *it, bool append, uint64_t cas_in, uint64_t *cas_out)
{
    uint32_t hv = item_hash(it), nvlen = item_vlen(it);
    const char *key = item_key(it);
    uint8_t nkey = item_nkey(it);

    for (int attempt = 0; attempt < REBUILD_TRIES; attempt++) {
        assoc_lock(hv);
        struct item *old = do_item_find(key, nkey, hv);
        if (old == NULL) {
            assoc_unlock(hv);
            return ITEM_NOT_STORED;
        }
        if (cas_in != 0 && item_cas(old) != cas_in) {
            assoc_unlock(hv);
            return ITEM_EXISTS;
        }
        uint32_t ovlen = item_vlen(old);
        if ((uint64_t)ovlen + nvlen > UINT32_MAX - 2) {
            assoc_unlock(hv);
            return ITEM_TOO_LARGE;
        }
        struct item *joined = item_alloc_nowait(key, nkey, old->flags,
                                                old->exptime, ovlen + nvlen);
        if (joined != NULL) {
            concat_fill(joined, old, it, append);
            concat_link(joined, old, hv);
            *cas_out = item_cas(joined);
            assoc_unlock(hv);
            item_release(joined);
            return ITEM_OK;
        }
        pin_locked(old);
        assoc_unlock(hv);

        item_status_t st = item_alloc(key, nkey, old->flags, old->exptime,
                                      ovlen + nvlen, &joined);
        if (st != ITEM_OK) {
            item_release(old);
            return st;
        }
        concat_fill(joined, old, it, append);
        assoc_lock(hv);
        bool same = still_linked(old, hv) &&
                    (cas_in == 0 || item_cas(old) == cas_in);
        if (same) {
            concat_link(joined, old, hv);
            *cas_out = item_cas(joined);
        }
        assoc_unlock(hv);
        item_release(joined);
        item_release(old);
        if (same) {
            return ITEM_OK;
        }
    }
    return ITEM_NO_MEMORY;
}

item_status_t
item_store(struct item *it, item_store_op_t op, uint64_t cas_in)
{
    struct item_store_meta m = { .has_cas = op == ITEM_OP_CAS,
                                 .cas = op == ITEM_OP_CAS ? cas_in : 0 };

    return item_store_meta(it, op, &m);
}

/* ms I: the cas was older than the item's; store anyway, marked stale,
 * with the item's TTL and any win already handed out for it. */
static bool
store_stale_ok(struct item *it, struct item *old, const struct item_store_meta *m)
{
    if (!m->stale_ok || m->cas == 0 || m->cas >= item_cas(old)) {
        return false;
    }
    it->exptime = old->exptime;
    item_iflags_set(it, ITEM_STALE | (item_iflags(old) & ITEM_TOKEN_SENT));
    return true;
}

item_status_t
item_store_meta(struct item *it, item_store_op_t op, struct item_store_meta *m)
{
    uint32_t hv = item_hash(it);
    item_status_t st = ITEM_NOT_STORED;

    m->cas_out = 0;
    if (m->key_binary) {
        item_iflags_set(it, ITEM_KEY_BINARY);
    }
    if (op == ITEM_OP_APPEND || op == ITEM_OP_PREPEND) {
        return item_concat(it, op == ITEM_OP_APPEND, m->cas, &m->cas_out);
    }
    /* A compared set or replace is a cas, as in memcached's mset. */
    if (m->has_cas && (op == ITEM_OP_SET || op == ITEM_OP_REPLACE)) {
        op = ITEM_OP_CAS;
    }

    assoc_lock(hv);
    struct item *old = do_item_find(item_key(it), item_nkey(it), hv);
    switch (op) {
    case ITEM_OP_SET:
        if (old != NULL) {
            do_item_replace(old, it, hv);
        } else {
            do_item_link(it, hv);
        }
        st = ITEM_OK;
        break;
    case ITEM_OP_ADD:
        if (old == NULL) {
            do_item_link(it, hv);
            st = ITEM_OK;
        } else {
            item_iflags_set(old, ITEM_ACTIVE);  /* memcached bumps on a failed add */
        }
        break;
    case ITEM_OP_REPLACE:
        if (old != NULL) {
            do_item_replace(old, it, hv);
            st = ITEM_OK;
        }
        break;
    case ITEM_OP_APPEND:
    case ITEM_OP_PREPEND:
        break;                  /* handled by item_concat(), unlocked */
    case ITEM_OP_CAS:
        if (old == NULL) {
            st = ITEM_NOT_FOUND;
        } else if ((m->cas != 0 && item_cas(old) == m->cas) ||
                   store_stale_ok(it, old, m)) {
            do_item_replace(old, it, hv);
            st = ITEM_OK;
        } else {
            st = ITEM_EXISTS;
        }
        break;
    }
    if (st == ITEM_OK) {
        m->cas_out = item_cas(it);
    }
    assoc_unlock(hv);
    return st;
}

/* Under the lock: read the counter, apply the delta, format the result. */
static item_status_t
arith_compute(struct item *it, bool incr, uint64_t delta, uint64_t *result,
              char *buf, uint32_t *len)
{
    uint64_t value;
    char *val = item_value(it);

    /* The value ends in "\r\n", so the digits always end at white space,
     * as memcached's safe_strtoull() requires. */
    if (it->nbytes <= 2 || !num_mc_strtoull(val, it->nbytes, &value)) {
        return ITEM_NON_NUMERIC;
    }
    if (incr) {
        value += delta;
    } else {
        value = delta > value ? 0 : value - delta;
    }
    *result = value;
    *len = (uint32_t)snprintf(buf, 24, "%llu", (unsigned long long)value);
    return ITEM_OK;
}

static void
write_counter(struct item *it, const char *buf, uint32_t len)
{
    uint32_t vlen = item_vlen(it);

    memcpy(item_value(it), buf, len);
    memset(item_value(it) + len, ' ', vlen - len);
    memcpy(item_value(it) + vlen, "\r\n", 2);
}

/*
 * memcached keeps the value's length when the number shrinks, padding with
 * spaces, and writes in place when nobody else holds the item. Same bytes
 * here; when a reader still holds it (e.g. a pipelined get not yet sent),
 * or the number grew, a new item is built (see REBUILD_TRIES above).
 */
item_status_t
item_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
           uint64_t *result, uint8_t *cls)
{
    return item_arith_meta(key, nkey, incr, delta, result, cls, NULL);
}

/* ma's extras on the item now holding the counter; partition lock held. */
static void
arith_meta_done(struct item *it, struct item_arith_meta *m, uint32_t len)
{
    if (m == NULL) {
        return;
    }
    m->exptime_before = it->exptime;
    if (m->touch) {
        item_set_exptime(it, m->exptime);
        note_ttl(slab_cls_of(it), m->exptime);
    }
    m->cas_out = item_cas(it);
    m->exptime_out = it->exptime;
    m->vlen_out = len;
}

item_status_t
item_arith_meta(const char *key, size_t nkey, bool incr, uint64_t delta,
                uint64_t *result, uint8_t *cls, struct item_arith_meta *m)
{
    uint32_t hv = hash_key(key, nkey);
    char buf[24];
    uint32_t len;

    for (int attempt = 0; attempt < REBUILD_TRIES; attempt++) {
        assoc_lock(hv);
        struct item *it = do_item_find(key, nkey, hv);
        if (it == NULL) {
            assoc_unlock(hv);
            return ITEM_NOT_FOUND;
        }
        if (m != NULL && m->cas != 0 && item_cas(it) != m->cas) {
            assoc_unlock(hv);
            return ITEM_EXISTS;
        }
        item_status_t st = arith_compute(it, incr, delta, result, buf, &len);
        if (st != ITEM_OK) {
            assoc_unlock(hv);
            return st;
        }
        item_report_cls(it, cls);
        uint32_t vlen = len + 2 <= it->nbytes ? it->nbytes - 2 : len;
        if (item_refcount(it) == 1 && vlen == item_vlen(it)) {
            write_counter(it, buf, len);
            item_set_cas(it, cas_enabled ? atomic_fetch_add(&cas_seq, 1) + 1 : 0);
            do_item_bump(it);
            arith_meta_done(it, m, len);
            assoc_unlock(hv);
            return ITEM_OK;
        }
        struct item *nit = item_alloc_nowait(key, nkey, it->flags, it->exptime, vlen);
        if (nit != NULL) {
            write_counter(nit, buf, len);
            item_iflags_set(nit, item_iflags(it) & ITEM_KEY_BINARY);
            do_item_replace(it, nit, hv);
            arith_meta_done(nit, m, len);
            assoc_unlock(hv);
            item_release(nit);
            return ITEM_OK;
        }
        pin_locked(it);
        assoc_unlock(hv);

        st = item_alloc(key, nkey, it->flags, it->exptime, vlen, &nit);
        if (st != ITEM_OK) {
            item_release(it);
            return st;
        }
        assoc_lock(hv);
        bool same = still_linked(it, hv) &&
                    (m == NULL || m->cas == 0 || item_cas(it) == m->cas);
        if (same) {
            /* Pinned, so its value is unchanged: recompute to format into
             * the new item. touch/gat may have moved exptime meanwhile. */
            arith_compute(it, incr, delta, result, buf, &len);
            write_counter(nit, buf, len);
            nit->exptime = it->exptime;
            nit->flags = it->flags;
            item_iflags_set(nit, item_iflags(it) & ITEM_KEY_BINARY);
            do_item_replace(it, nit, hv);
            arith_meta_done(nit, m, len);
        }
        assoc_unlock(hv);
        item_release(nit);
        item_release(it);
        if (same) {
            return ITEM_OK;
        }
    }
    return ITEM_NO_MEMORY;
}

void
item_flush(int64_t delay)
{
    rel_time_t now = clock_now();
    rel_time_t new_oldest = delay > 0 ? clock_exptime(delay) : now;

    if (cas_enabled) {
        atomic_store(&oldest_live, new_oldest - 1);
        if (new_oldest - 1 <= now) {
            atomic_store(&oldest_cas, atomic_load(&cas_seq) + 1);
        }
    } else {
        atomic_store(&oldest_live, new_oldest);
    }
}

/* --- stats ------------------------------------------------------------------------ */

void
item_get_stats(struct item_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        slab_lock(c);
        out->curr_items += lrus[c].number;
        out->total_items += lrus[c].total_items;
        out->bytes += lrus[c].bytes;
        out->evictions += lrus[c].evicted + lrus[c].evicted_by_slab;
        out->evicted_by_slab += lrus[c].evicted_by_slab;
        out->slab_rescues += lrus[c].slab_rescues;
        out->reclaimed += lrus[c].reclaimed;
        out->expired_unfetched += lrus[c].expired_unfetched;
        out->evicted_unfetched += lrus[c].evicted_unfetched;
        slab_unlock(c);
    }
}

void
item_class_stats(uint8_t cls, struct item_class_stats *out)
{
    struct lru *l = &lrus[cls];

    memset(out, 0, sizeof(*out));
    slab_lock(cls);
    out->number = l->number;
    /* memcached's age is its LRU tail's; ours is the item at the hand. */
    struct item *hand = slab_clock_peek(cls, 0);
    out->age = hand != NULL && (item_iflags(hand) & ITEM_LINKED) ?
               clock_now() - hand->time : 0;
    out->evicted = l->evicted;
    out->evicted_nonzero = l->evicted_nonzero;
    out->evicted_time = l->evicted_time;
    out->outofmemory = l->outofmemory;
    out->reclaimed = l->reclaimed;
    out->expired_unfetched = l->expired_unfetched;
    out->evicted_unfetched = l->evicted_unfetched;
    out->evicted_by_slab = l->evicted_by_slab;
    out->mem_requested = atomic_load_explicit(&l->bytes, memory_order_relaxed);
    slab_unlock(cls);
}

void
item_reset_stats(void)
{
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        slab_lock(c);
        lrus[c].total_items = 0;
        lrus[c].evicted = lrus[c].evicted_nonzero = 0;
        lrus[c].evicted_time = lrus[c].evicted_unfetched = 0;
        lrus[c].reclaimed = lrus[c].expired_unfetched = 0;
        lrus[c].outofmemory = 0;
        lrus[c].evicted_by_slab = 0;
        lrus[c].slab_rescues = 0;
        atomic_store(&lrus[c].crawler_reclaimed, 0);
        atomic_store(&lrus[c].crawler_items_checked, 0);
        slab_unlock(c);
    }
}
