/*
 * item_clock.c -- allocation and the per-class CLOCK: take a chunk
 * (reusing a dead item at the hand first) without evicting anything live
 * (the cache layer asks the eviction policies when that fails); the sweep
 * that frees chunks for item-level eviction (a second chance for items
 * read since the hand last passed).
 */
#include "item.h"

#include <assert.h>
#include <string.h>

#include "assoc.h"
#include "item_int.h"
#include "slab.h"

#define CLOCK_SEARCH_DEPTH  5     /* busy items passed over per freed one */
#define CLOCK_RESCUE_MAX    32    /* active items given a second chance per freed one */
#define CLOCK_SCAN_EXTRA    256   /* chunks a sweep may pass beyond two slabs' worth */

/* --- allocation ------------------------------------------------------------ */

/*
 * Unlink an item we hold both locks for (its only reference is the hash
 * table's); the caller gives its chunk back to the class. Accounted as
 * reclaimed (dead) or evicted (live).
 */
bool
item_class_drop_locked(struct item_class_state *l, struct item *it, uint32_t hv,
                       bool dead, rel_time_t now)
{
    uint8_t f = item_iflags(it);

    if (!dead && item_flash_stash(it, hv, now)) {
        return false;           /* lives on as a stub: not an eviction */
    }
    do_item_unlink_nofree(it, hv);
    if (dead) {
        l->reclaimed++;
        l->expired_unfetched += !(f & ITEM_FETCHED);
    } else {
        l->evicted++;
        l->evicted_time = now - it->time;
        l->evicted_nonzero += it->exptime != 0;
        l->evicted_unfetched += !(f & ITEM_FETCHED);
        item_evict_hook_fn hook = atomic_load_explicit(&item_evict_hook,
                                                       memory_order_acquire);
        if (hook != NULL) {
            hook(it, now);
        }
    }
    return true;
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
    item_class_drop_locked(&item_classes[cls], it, hv, dead, now);
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
    rel_time_t live = atomic_load_explicit(&item_oldest_live, memory_order_relaxed);

    if (exp != 0 && exp <= now) {
        return true;
    }
    if (item_flash_gone(it)) {
        return true;
    }
    if (live == 0 || live > now) {
        return false;
    }
    return __atomic_load_n(&it->time, __ATOMIC_RELAXED) <= live ||
           atomic_load_explicit(&item_oldest_cas, memory_order_relaxed) != 0;
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

    for (int n = 0; n < CLOCK_SEARCH_DEPTH && freed < max; n++) {
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
uint32_t
item_clock_evict(uint8_t cls, uint32_t max, rel_time_t now)
{
    uint32_t freed = 0;
    int busy = CLOCK_SEARCH_DEPTH, rescues = CLOCK_RESCUE_MAX;
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
        busy = CLOCK_SEARCH_DEPTH;
        rescues = CLOCK_RESCUE_MAX;
    }
    return freed;
}

uint32_t
item_clock_pull(uint8_t cls, bool evict_live, uint32_t max)
{
    rel_time_t now = clock_now();
    uint32_t freed;

    /* One lock hold for the whole batch: background eviction's point. */
    slab_lock(cls);
    freed = evict_live ? item_clock_evict(cls, max, now) : clock_reclaim(cls, max, now);
    slab_unlock(cls);
    return freed;
}

bool
item_class_may_hold_dead(uint8_t cls)
{
    return atomic_load_explicit(&item_classes[cls].ttl_seen, memory_order_relaxed) ||
           atomic_load_explicit(&item_oldest_live, memory_order_relaxed) != 0;
}

/* From the first item given an exptime on, the class checks for dead items
 * before it allocates (item_alloc_try). */
void
item_note_ttl(uint8_t cls, rel_time_t exptime)
{
    if (exptime != 0 &&
        !atomic_load_explicit(&item_classes[cls].ttl_seen, memory_order_relaxed)) {
        atomic_store_explicit(&item_classes[cls].ttl_seen, true, memory_order_relaxed);
    }
}

/* The class for an item of this shape, or 0 if it cannot be stored. */
uint8_t
item_class_of(size_t nkey, uint32_t vlen)
{
    if (nkey > UINT8_MAX || vlen > UINT32_MAX - 2) {
        return 0;
    }
    return slab_clsid(item_total_size(nkey, vlen));
}

void
item_note_outofmemory(uint8_t cls)
{
    slab_lock(cls);
    item_classes[cls].outofmemory++;
    slab_unlock(cls);
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
item_alloc_try(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
               uint32_t vlen, struct item **out)
{
    uint8_t cls = item_class_of(nkey, vlen);
    struct item *it;
    uint32_t sid;

    if (cls == 0) {
        return ITEM_TOO_LARGE;
    }
    /* Dead items at the hand (expired, flushed) are reused before a free
     * chunk or a fresh slab is taken, as memcached does before allocating:
     * memory does not grow while expired items sit in the class. Only a
     * class that ever held an item with an exptime, or after a flush_all,
     * can have any: others skip the look (2 % of a set's cost). */
    if (item_class_may_hold_dead(cls)) {
        (void)item_clock_pull(cls, false, 1);
    } else {
        item_note_ttl(cls, exptime);
    }
    it = slab_alloc(cls, &sid);
    if (it == NULL && item_clock_pull(cls, false, 1) > 0) {
        it = slab_alloc(cls, &sid);
    }
    if (it == NULL) {
        return ITEM_NO_MEMORY;
    }
    assert(slab_cls_of(it) == cls && slab_sid_of(it) == sid);
    (void)sid;
    item_init(it, key, nkey, flags, exptime, vlen);
    *out = it;
    return ITEM_OK;
}

/*
 * A free chunk (or a fresh slab while under -m) and nothing more: no
 * eviction, so no partition lock is taken and a caller may hold one
 * (slab_alloc takes only the class lock, which ranks below it). NULL
 * when that is not enough (see struct item_rebuild).
 */
struct item *
item_alloc_nowait(const char *key, size_t nkey, uint32_t flags,
                  rel_time_t exptime, uint32_t vlen)
{
    uint8_t cls = item_class_of(nkey, vlen);
    uint32_t sid;
    struct item *it;

    if (cls == 0 || (it = slab_alloc(cls, &sid)) == NULL) {
        return NULL;
    }
    item_note_ttl(cls, exptime);
    item_init(it, key, nkey, flags, exptime, vlen);
    return it;
}
