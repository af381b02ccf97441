/*
 * item_clock.c -- allocation and the per-class CLOCK: take a chunk
 * (reusing a dead item at the hand first) without evicting anything live
 * (the cache layer asks the eviction policies when that fails); the sweep
 * that frees chunks for item-level eviction (a second chance for items
 * read since the hand last passed).
 *
 * New items are on probation first, as in S3-FIFO's small queue (and in
 * the spirit of memcached's HOT segment): each class keeps a FIFO of the
 * items it stored most recently, about a tenth of its chunks. While the
 * FIFO is that full, the oldest new item never read goes before the hand
 * is asked; one read stays where it is and leaves probation. With a plain
 * CLOCK every item stored after a miss held its chunk for a whole lap of
 * the hand, read or not, which put `lru` below memcached's segmented LRU
 * on the mixed-size Zipf load (notes/eviction.md).
 */
#include "item.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "assoc.h"
#include "item_int.h"
#include "slab.h"

#define CLOCK_SEARCH_DEPTH  5     /* busy items passed over per freed one */
#define CLOCK_RESCUE_MAX    32    /* active items given a second chance per freed one */
#define CLOCK_SCAN_EXTRA    256   /* chunks a sweep may pass beyond two slabs' worth */
#define PROBATION_PCT       10    /* of a class's chunks: the FIFO's quota */
#define PROBATION_MIN_CAP   16    /* entries of a ring's first allocation */
#define PROBATION_TICK_MS   16    /* resolution of an entry's age */
#define PROBATION_LOOKS     1024  /* entries judged per call, at most: read
                                     ones left behind are cheap to pass, and
                                     stopping early let the hand evict a read
                                     item while unread ones waited */

/* A new item's place in its class's probation FIFO (8 bytes). */
struct item_probation {
    uint32_t handle;    /* slab_handle() of its chunk */
    uint16_t tag;       /* probation_tag(): a later item in the chunk differs */
    uint16_t tick;      /* when it joined, in PROBATION_TICK_MS (wraps: ~17 min) */
};

static uint16_t
probation_tick(uint64_t ms)
{
    return (uint16_t)(ms / PROBATION_TICK_MS);
}

/* What tells this item from a later one in its chunk: its CAS, or with
 * -C (every CAS 0) its link time, which only a store sets for an item
 * still unread. */
static uint16_t
probation_tag(struct item *it)
{
    return item_cas_enabled ? (uint16_t)item_cas(it)
                            : (uint16_t)__atomic_load_n(&it->time, __ATOMIC_RELAXED);
}

static _Atomic uint64_t probation_bytes;

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
    if (item_is_dead(it, now)) {
        return CLOCK_DEAD;
    }
    if (item_temporary(it)) {
        assoc_unlock(*hv);
        return CLOCK_HOLE;      /* not evicted: it goes when it expires */
    }
    return CLOCK_LIVE;
}

/*
 * Class lock held: cls's CLOCK or FIFO dropped live items from RAM to make
 * room (to flash too: RAM was short), n of its chunks. Each run of a
 * slab's worth of such chunks records when it began, so
 * item_class_overflow_ms() can say "a slab's worth went since then".
 */
static void
clock_overflow_note(uint8_t cls, uint32_t n)
{
    struct item_class_state *l = &item_classes[cls];
    uint32_t per = slab_class_perslab(cls);

    for (uint32_t i = 0; per > 0 && i < n; i++) {
        if (l->own_evicted % per == 0) {
            l->run_start_ms = clock_now_ms();
        }
        if (++l->own_evicted % per == 0) {
            atomic_store_explicit(&l->overflow_ms, l->run_start_ms, memory_order_relaxed);
        }
    }
}

uint64_t
item_class_overflow_ms(uint8_t cls)
{
    return atomic_load_explicit(&item_classes[cls].overflow_ms, memory_order_relaxed);
}

/* Both locks held: unlink, count, give the chunk back to the class (a
 * chained value's head in the body class frees its bodies there too). */
static void
clock_drop(uint8_t cls, struct item *it, uint32_t hv, bool dead, rel_time_t now)
{
    uint32_t chunks = 1;

    if (cls == item_chain_cls && item_chained(it)) {
        chunks += item_chain_bodies(item_nkey(it), item_vlen(it));
    }
    item_class_drop_locked(&item_classes[cls], it, hv, dead, now);
    assoc_unlock(hv);
    item_free_locked(cls, it);
    if (!dead) {
        clock_overflow_note(cls, chunks);
    }
}

/*
 * The body class's hand at body chunk b: its head (in its own class, whose
 * lock item_chain_lock_head took), judged at its first body as the hand
 * judges items; with dead_only, only a dead head goes (reclaim). Returns
 * the body chunks freed into the class (0: the head stays).
 */
static uint32_t
clock_body(struct item *b, rel_time_t now, int *rescues, bool dead_only)
{
    struct item *head;
    uint32_t hv, freed = 0;

    /* A draining slab's chunks leave the class: freeing them gives it
     * nothing (as clock_examine says of items). */
    if (slab_draining(slab_sid_of(b)) || !item_chain_lock_head(b, &head, &hv)) {
        return 0;
    }
    uint8_t hcls = slab_cls_of(head);
    bool dead = item_is_dead(head, now);
    if ((dead_only || item_temporary(head)) && !dead) {
        assoc_unlock(hv);
    } else if (!dead && (item_iflags(head) & ITEM_ACTIVE) && *rescues > 0) {
        item_iflags_clear(head, ITEM_ACTIVE);
        head->time = now;
        (*rescues)--;
        assoc_unlock(hv);
    } else {
        item_class_drop_locked(&item_classes[hcls], head, hv, dead, now);
        assoc_unlock(hv);
        freed = item_chain_free_locked(hcls, head);
        if (!dead) {    /* the body class's chunks it freed, its head's too */
            clock_overflow_note(item_chain_cls, freed + (hcls == item_chain_cls));
        }
        freed += freed == 0;    /* its head went, at least */
    }
    if (hcls != item_chain_cls) {
        slab_unlock(hcls);
    }
    return freed;
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
        if (v == CLOCK_HOLE && cls == item_chain_cls && item_chain_body_head(it) != NULL) {
            /* A chained item's body: only a dead one is passed (freed);
             * a live one keeps its turn, as a live item does. */
            int none = 0;
            uint32_t got = clock_body(it, now, &none, true);
            if (got == 0) {
                break;
            }
            freed += got;
            (void)slab_clock_next(cls);
            continue;
        }
        (void)slab_clock_next(cls);
        if (v == CLOCK_DEAD) {
            clock_drop(cls, it, hv, true, now);
            freed++;
        }
    }
    return freed;
}

/*
 * ext_item_age: every item of slab sid (of class cls) idle longer than
 * min_idle seconds, with a value the flash tier keeps, becomes a stub now
 * rather than when memory runs out (memcached's storage writer does the
 * same at its COLD LRU's tail), so a burst of sets finds RAM already
 * free. Referenced and busy items wait for the next sweep. Class lock
 * held for one slab's chunks; returns the items written.
 */
uint32_t
item_clock_flash_aged(uint32_t sid, uint8_t cls, rel_time_t min_idle)
{
    struct slab_info info;
    uint32_t written = 0, per = slab_class_perslab(cls);

    slab_lock(cls);
    /* Read under the lock: an item linked since has time <= now. */
    rel_time_t now = clock_now();
    if (!slab_table_info(sid, &info) || info.cls != cls) {
        slab_unlock(cls);
        return 0;               /* moved to another class meanwhile */
    }
    for (uint32_t i = 0; i < per; i++) {
        struct item *it = slab_chunk_in(sid, cls, i);
        uint32_t hv;
        /* Cheap pre-check, settled below. */
        rel_time_t t = __atomic_load_n(&it->time, __ATOMIC_RELAXED);
        if ((item_iflags(it) & (ITEM_LINKED | ITEM_FREE | ITEM_FLASH)) != ITEM_LINKED ||
            t > now || now - t <= min_idle) {
            continue;
        }
        clock_verdict_t v = clock_examine(it, now, &hv);
        if (v == CLOCK_HOLE || v == CLOCK_BUSY) {
            continue;
        }
        /* Reads do not write an item's time (but once a minute with the
         * unsegmented LRU), only ITEM_ACTIVE: read since the hand (or this
         * sweep) last passed, it was not idle, and its age starts now, as
         * memcached's bump does. Dead ones are the hand's; a stub stays
         * one. */
        item_stash_status_t st = ITEM_STASH_SKIP;
        if (v == CLOCK_LIVE && (item_iflags(it) & ITEM_ACTIVE)) {
            item_iflags_clear(it, ITEM_ACTIVE);
            it->time = now;
        } else if (v == CLOCK_LIVE && it->time <= now && now - it->time > min_idle) {
            st = item_flash_stash_early(it, hv);
        }
        assoc_unlock(hv);
        if (st == ITEM_STASHED) {
            slab_free_locked(cls, sid, it);
            written++;
        } else if (st == ITEM_STASH_FULL) {
            break;              /* the next sweep tries again */
        }
    }
    slab_unlock(cls);
    return written;
}

/* --- probation ----------------------------------------------------------- */

/* Chunks the class holds now. */
static uint64_t
class_chunks(uint8_t cls)
{
    return (uint64_t)slab_class_slabs(cls) * slab_class_perslab(cls);
}

/* Entries the FIFO holds before its oldest are judged. */
static uint32_t
probation_quota(uint8_t cls)
{
    uint64_t q = class_chunks(cls) * PROBATION_PCT / 100;

    return q > 0 ? (uint32_t)q : 1;
}

/* Slot of the FIFO's i-th entry from its head (i < prob_cap). */
static uint32_t
probation_slot(const struct item_class_state *l, uint32_t i)
{
    uint32_t at = l->prob_head + i;

    return at < l->prob_cap ? at : at - l->prob_cap;
}

/* Entries the ring grows to next: twice as many, at most one per chunk
 * (exact, not a power of two: the FIFO is booked inside -m). */
static uint32_t
probation_grown(uint8_t cls, uint32_t cap)
{
    uint64_t want = cap > 0 ? 2 * (uint64_t)cap : PROBATION_MIN_CAP;
    uint64_t most = class_chunks(cls);

    if (want > most) {
        want = most > cap ? most : cap;
    }
    return want > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)want;
}

/* Class lock held; cap >= prob_count. False on malloc
 * failure (the ring is unchanged). */
static bool
probation_resize(struct item_class_state *l, uint32_t cap)
{
    struct item_probation *r = malloc((size_t)cap * sizeof(*r));

    if (r == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < l->prob_count; i++) {
        r[i] = l->prob[probation_slot(l, i)];
    }
    int64_t delta = ((int64_t)cap - (int64_t)l->prob_cap) * (int64_t)sizeof(*r);
    atomic_fetch_add_explicit(&probation_bytes, (uint64_t)delta, memory_order_relaxed);
    slab_book(delta);
    free(l->prob);
    l->prob = r;
    l->prob_cap = cap;
    l->prob_head = 0;
    return true;
}

/* Class lock held: the item entry e names, with its partition unlocked,
 * if it is still there and still on probation (never read); else NULL.
 * Under the class lock a slab of cls stays cls's: if it still is, the
 * handle is a chunk boundary of this class's geometry. */
static struct item *
probation_item(uint8_t cls, const struct item_probation *e)
{
    struct item *it = slab_handle_item(e->handle);

    if (slab_cls_of(it) != cls ||
        (item_iflags(it) & (ITEM_LINKED | ITEM_FREE | ITEM_FETCHED | ITEM_FLASH)) != ITEM_LINKED ||
        probation_tag(it) != e->tag) {
        return NULL;
    }
    return it;
}

/*
 * A new item joins its class's FIFO. Nothing is judged before the class
 * runs out of memory, so while it fills the FIFO holds every new item,
 * up to one entry per chunk of the class; it shrinks back once judging
 * brings it down to its quota (probation_evict). Only if it cannot grow
 * does its oldest entry leave unjudged (counted in prob_owed).
 */
void
item_probation_push(struct item *it)
{
    /* A stub is the flash tier's index entry, not a newly stored value;
     * memcached's unsegmented LRU (item_set_legacy_lru) has no probation. */
    if ((item_iflags(it) & ITEM_FLASH) ||
        atomic_load_explicit(&item_legacy_lru, memory_order_relaxed)) {
        return;
    }
    uint8_t cls = slab_cls_of(it);
    struct item_class_state *l = &item_classes[cls];

    slab_lock(cls);
    if (l->prob_count == l->prob_cap) {
        uint32_t grown = probation_grown(cls, l->prob_cap);
        if (grown <= l->prob_cap || !probation_resize(l, grown)) {
            if (l->prob_cap == 0) {
                slab_unlock(cls);
                return;
            }
            /* Only an item still on probation is owed a look (stale
             * entries counted too kept the hand first for good). */
            if (probation_item(cls, &l->prob[l->prob_head]) != NULL &&
                l->prob_owed < class_chunks(cls)) {
                l->prob_owed++;
            }
            l->prob_head = probation_slot(l, 1);
            l->prob_count--;
        }
    }
    uint32_t at = probation_slot(l, l->prob_count);
    l->prob[at] = (struct item_probation){ .handle = slab_handle(it),
                                           .tag = probation_tag(it),
                                           .tick = probation_tick(clock_now_ms()) };
    l->prob_count++;
    slab_unlock(cls);
}

/*
 * Class lock held: while the FIFO holds its quota, its oldest entries are
 * judged. An item never read since it was stored goes; one read stays and
 * leaves probation (the hand gives it its second chance later); an entry
 * whose chunk now holds something else, or whose slab left the class, is
 * dropped. Returns the chunks freed into the class.
 */
static uint32_t
probation_evict(uint8_t cls, uint32_t max, rel_time_t now)
{
    struct item_class_state *l = &item_classes[cls];
    uint32_t quota = probation_quota(cls), freed = 0;

    for (int looks = 0; looks < PROBATION_LOOKS && freed < max &&
                        l->prob_count > 0 && l->prob_count >= quota; looks++) {
        struct item_probation e = l->prob[l->prob_head];
        l->prob_head = probation_slot(l, 1);
        l->prob_count--;
        struct item *it = probation_item(cls, &e);
        uint32_t hv;
        if (it == NULL) {
            continue;
        }
        clock_verdict_t v = clock_examine(it, now, &hv);
        if (v == CLOCK_HOLE || v == CLOCK_BUSY) {
            continue;
        }
        if (item_iflags(it) & ITEM_FETCHED) {   /* read since we looked */
            assoc_unlock(hv);
            continue;
        }
        clock_drop(cls, it, hv, v == CLOCK_DEAD, now);
        freed++;
    }
    /* Back near its quota after a fill: give the memory back. */
    uint32_t keep = 2 * quota > PROBATION_MIN_CAP ? 2 * quota : PROBATION_MIN_CAP;
    if (l->prob_cap > 2 * keep && l->prob_count < keep) {
        (void)probation_resize(l, keep);
    }
    return freed;
}

void
item_probation_teardown(void)
{
    for (size_t c = 0; c < sizeof(item_classes) / sizeof(item_classes[0]); c++) {
        free(item_classes[c].prob);
        item_classes[c].prob = NULL;
        item_classes[c].prob_cap = item_classes[c].prob_head = item_classes[c].prob_count = 0;
        item_classes[c].prob_owed = 0;
        item_classes[c].prob_hand_turn = false;
    }
    slab_book(-(int64_t)atomic_exchange(&probation_bytes, 0));
}

uint64_t
item_probation_bytes(void)
{
    return atomic_load_explicit(&probation_bytes, memory_order_relaxed);
}

/*
 * The sweep proper (see the file header): probation first, then the hand.
 * Items that left the FIFO unjudged (it could not grow) are reached only
 * by the hand: until it has evicted as many, every other sweep is the
 * hand's (probation only if the hand finds too few), so a stream of new
 * keys nobody reads cannot churn the FIFO alone while those stay for good.
 */
uint32_t
item_clock_evict(uint8_t cls, uint32_t max, rel_time_t now)
{
    struct item_class_state *l = &item_classes[cls];
    uint32_t freed = 0;

    l->prob_hand_turn = l->prob_owed > 0 && !l->prob_hand_turn;
    if (!l->prob_hand_turn) {
        freed = probation_evict(cls, max, now);
        if (freed >= max) {
            return freed;
        }
    }
    int busy = CLOCK_SEARCH_DEPTH, rescues = CLOCK_RESCUE_MAX;
    /* Enough to pass two slabs' worth of items (a slab being drained and
     * the hand's wrap). In the body class an item spans up to a slab's
     * worth of chunks: counted in chunks, a sweep there passed a few
     * chained items, all read once and so rescued, and freed nothing
     * (memcached's chunked-items.t: 85th 573 KB set of 100 refused). */
    uint64_t per = slab_class_perslab(cls);
    uint64_t budget = 2 * per * (cls == item_chain_cls ? per : 1) + CLOCK_SCAN_EXTRA;

    while (budget-- > 0) {
        struct item *it = slab_clock_next(cls);
        uint32_t hv;
        if (it == NULL) {
            break;
        }
        clock_verdict_t v = clock_examine(it, now, &hv);
        uint32_t bodies = v == CLOCK_HOLE && cls == item_chain_cls ?
                          clock_body(it, now, &rescues, false) : 0;
        if (bodies > 0) {
            freed += bodies;
            if (freed >= max) {
                break;
            }
            busy = CLOCK_SEARCH_DEPTH;
            rescues = CLOCK_RESCUE_MAX;
            continue;
        }
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
        if (l->prob_owed > 0) {
            l->prob_owed--;
        }
        if (++freed >= max) {
            break;
        }
        busy = CLOCK_SEARCH_DEPTH;
        rescues = CLOCK_RESCUE_MAX;
    }
    if (freed < max && l->prob_hand_turn) {
        freed += probation_evict(cls, max - freed, now);    /* the hand found too few */
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
    if (item_chain_needed(nkey, vlen)) {
        /* -I bounds a chained item's total size, as a slab does others'. */
        return item_total_size(nkey, vlen) <= slab_size() ?
               item_chain_head_class(nkey, vlen) : 0;
    }
    return slab_clsid_alloc(item_total_size(nkey, vlen));
}

bool
item_class_homed(uint8_t cls)
{
    return cls != 0 && cls != item_chain_cls && cls != item_stub_class() &&
           !item_chain_head_class_used(cls) && slab_class_homed(cls);
}

uint8_t
item_alloc_lacks(size_t nkey, uint32_t vlen, uint32_t *n)
{
    *n = 1;
    if (item_class_of(nkey, vlen) != 0 && item_chain_needed(nkey, vlen)) {
        uint32_t want = item_chain_bodies(nkey, vlen);
        uint64_t have = slab_class_free(item_chain_cls);
        if (have < want) {
            *n = (uint32_t)(want - have);
            return item_chain_cls;
        }
    }
    return item_class_of(nkey, vlen);
}

uint8_t
item_alloc_spare(size_t nkey, uint32_t vlen, uint8_t lacks)
{
    uint8_t head = item_class_of(nkey, vlen);

    if (head == 0 || !item_chain_needed(nkey, vlen)) {
        return 0;
    }
    uint8_t other = lacks == head ? item_chain_cls : head;
    uint64_t part = other == item_chain_cls ? item_chain_bodies(nkey, vlen) : 1;
    return other != lacks && slab_class_free(other) >= part ? other : 0;
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
    if (item_chain_needed(nkey, vlen)) {
        uint8_t short_cls;
        it = item_chain_alloc(key, nkey, vlen, true, &short_cls);
        if (it == NULL) {
            return ITEM_NO_MEMORY;
        }
        item_note_ttl(slab_cls_of(it), exptime);
        item_init(it, key, nkey, flags, exptime, vlen);
        *out = it;
        return ITEM_OK;
    }
    /* Dead items at the hand (expired, flushed) are reused before a free
     * chunk or a fresh slab is taken, as memcached does before allocating:
     * memory does not grow while expired items sit in the class. Only a
     * class that ever held an item with an exptime, or after a flush_all,
     * can have any: others skip the look, a measurable part of a set. */
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

    if (cls != 0 && item_chain_needed(nkey, vlen)) {
        uint8_t short_cls;
        it = item_chain_alloc(key, nkey, vlen, false, &short_cls);
    } else {
        it = cls != 0 ? slab_alloc(cls, &sid) : NULL;
    }
    if (it == NULL) {
        return NULL;
    }
    item_note_ttl(cls, exptime);
    item_init(it, key, nkey, flags, exptime, vlen);
    return it;
}

void
item_set_temporary_ttl(uint32_t seconds)
{
    atomic_store(&item_temporary_ttl, seconds);
}
