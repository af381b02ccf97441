/*
 * item.c -- items: references, linking, lookups and memcached's
 * get/touch/delete/flush semantics (see item.h for the reference counting
 * and lock order rules). The module's other files: item_clock.c
 * (allocation and the CLOCK), item_slab.c (emptying slabs, walks),
 * item_store.c (stores and arithmetic), item_chain.c (values larger than
 * a chunk, as chains), item_flash.c (stubs of flash-resident items),
 * item_restore.c (relinking after a warm restart); item_int.h is what
 * they share.
 *
 * Expired and flushed items are removed lazily: whoever finds one under
 * its partition lock unlinks it. Allocation reclaims expired items just
 * ahead of the CLOCK hand before it reports that memory is short (the
 * cache layer then asks the eviction policies: storage never does).
 *
 * Item-level eviction is CLOCK (second chance) rather than a linked LRU:
 * the hand sweeps the class's slabs in address order; an item read since
 * the hand last passed (ITEM_ACTIVE, set by readers without the class
 * lock) is spared once, anything else is evicted. It approximates LRU
 * without two list pointers per item, and neither reads nor stores take
 * the class lock. With the unsegmented LRU (-o no_modern or
 * no_lru_maintainer) a read marks an item only if its time (its store, or
 * the hand's or a read's last mark) is over a minute old, and writes its
 * time then, as memcached's plain LRU moves an item.
 */
#include "item.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "assoc.h"
#include "hash.h"
#include "item_int.h"
#include "slab.h"


struct item_class_state       item_classes[SLAB_CLASS_MAX + 1];
_Atomic item_evict_hook_fn    item_evict_hook;
_Atomic item_ref_hook_fn      item_ref_hook;
bool                          item_cas_enabled;
_Atomic uint64_t              item_cas_seq;
_Atomic bool                  item_slab_rescue_on = true;
_Atomic rel_time_t            item_oldest_live;
_Atomic rel_time_t            item_temporary_ttl;
_Atomic uint64_t              item_oldest_cas;
_Atomic bool                  item_legacy_lru;

static void item_unlink_others(struct item *it, uint32_t hv);
static void do_item_bump_legacy(struct item *it);
static void do_item_unlink_rest(const char *key, size_t nkey, uint32_t hv);

void
item_set_evict_hook(item_evict_hook_fn fn)
{
    atomic_store_explicit(&item_evict_hook, fn, memory_order_release);
}

void
item_set_legacy_lru(bool on)
{
    atomic_store(&item_legacy_lru, on);
}

void
item_set_ref_hook(item_ref_hook_fn fn)
{
    atomic_store_explicit(&item_ref_hook, fn, memory_order_release);
}

int
item_setup(bool use_cas)
{
    memset(item_classes, 0, sizeof(item_classes));
    item_cas_enabled = use_cas;
    item_chain_setup();
    atomic_store(&item_cas_seq, 0);
    atomic_store(&item_oldest_live, 0);
    atomic_store(&item_oldest_cas, 0);
    return 0;
}

void
item_teardown(void)
{
    item_probation_teardown();
    memset(item_classes, 0, sizeof(item_classes));
}

size_t
item_total_size(size_t nkey, size_t vlen)
{
    return offsetof(struct item, data) + nkey + vlen + 2;
}

uint32_t
item_hash(struct item *it)
{
    if (item_nkey(it) == 0 && (item_iflags(it) & ITEM_FLASH)) {
        return item_stub_of(it).hv;
    }
    return hash_key(item_key(it), item_nkey(it));
}

uint32_t
item_key_fp(const char *key, size_t nkey)
{
    return (hash_seeded(key, nkey, 0x5b1dca5eu) & 0xffffffu) | (uint32_t)nkey << 24;
}

/* memcached's item_is_flushed(): stored at or before the flush point. */
static bool
item_is_flushed(struct item *it, rel_time_t now)
{
    rel_time_t live = atomic_load_explicit(&item_oldest_live, memory_order_relaxed);
    uint64_t ocas = atomic_load_explicit(&item_oldest_cas, memory_order_relaxed);

    if (live == 0 || live > now) {
        return false;
    }
    uint64_t cas = item_cas(it);

    return it->time <= live || (ocas != 0 && cas != 0 && cas < ocas);
}

bool
item_is_stale_by_time(struct item *it, rel_time_t now)
{
    return (it->exptime != 0 && it->exptime <= now) || item_is_flushed(it, now);
}

bool
item_is_dead(struct item *it, rel_time_t now)
{
    return item_is_stale_by_time(it, now) || item_flash_gone(it);
}

/* --- link / unlink (partition lock held) ---------------------------------- */

/*
 * A key has one entry: a stub matched by its hashes alone may be another
 * key's (odds 2^-56), so the entry a store replaced or a delete removed
 * may not have been the key's own. Whatever else still matches the key
 * goes too, so no older value of it can come back.
 */
static void
item_unlink_others(struct item *it, uint32_t hv)
{
    struct item *other;

    if (!flash_enabled()) {
        return;                 /* without stubs keys are compared whole */
    }
    while ((other = assoc_find_other(item_key(it), item_nkey(it), hv, it)) != NULL) {
        do_item_unlink(other, hv);
    }
}

/* After a delete: whatever else matches the key (see item_unlink_others). */
static void
do_item_unlink_rest(const char *key, size_t nkey, uint32_t hv)
{
    struct item *other;

    while (flash_enabled() && (other = assoc_find(key, nkey, hv)) != NULL) {
        do_item_unlink(other, hv);
    }
}

/*
 * A store or read: its slab was accessed now, and a chained value's
 * slabs too. Walking a long chain under the partition lock on every read
 * would cost a cache miss per chunk: a read does it only when it is the
 * first since the CLOCK hand passed (ITEM_ACTIVE not set yet), once a lap.
 */
static void
item_touch_slabs(struct item *it)
{
    slab_touch(slab_sid_of(it));
    if (item_chained(it) && !(item_iflags(it) & ITEM_ACTIVE)) {
        item_chain_touch(it);
    }
}

uint64_t
item_cas_next(void)
{
    return item_cas_enabled ? atomic_fetch_add(&item_cas_seq, 1) + 1 : 0;
}

/* fresh: a key the cache did not hold, so the item starts on probation.
 * cas: the CAS it is linked with (set before the probation FIFO takes
 * its tag). */
static void
item_link(struct item *it, uint32_t hv, bool fresh, uint64_t cas)
{
    struct item_class_state *l = class_state_of(it);

    assert((item_iflags(it) & (ITEM_LINKED | ITEM_FREE)) == 0);
    it->time = clock_now();
    item_set_cas(it, cas);
    /* The hash table's reference and the flag in one atomic step. */
    atomic_fetch_add(&it->refs, 1u | (uint32_t)ITEM_LINKED << ITEM_REF_BITS);
    assoc_insert(it, hv);
    item_unlink_others(it, hv);
    item_ref_note(hv, it, ITEM_REF_STORE);
    if (fresh) {
        item_probation_push(it);
    }
    item_touch_slabs(it);
    atomic_fetch_add_explicit(&l->number, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->total_items, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->bytes, item_ntotal(it), memory_order_relaxed);
}

void
do_item_link(struct item *it, uint32_t hv)
{
    item_link(it, hv, true, item_cas_next());
}

void
do_item_link_as(struct item *it, uint32_t hv, uint64_t cas)
{
    item_link(it, hv, true, cas);
}

/* Remove from the hash table. Caller must item_release() the link's ref. */
void
do_item_unlink_nofree(struct item *it, uint32_t hv)
{
    struct item_class_state *l = class_state_of(it);

    assert(item_iflags(it) & ITEM_LINKED);
    item_iflags_clear(it, ITEM_LINKED);
    assoc_delete(it, hv);
    if (item_is_flash(it)) {
        flash_note_used(-1, -(int64_t)flash_rec_len(item_key_len(it), it->nbytes));
    }
    atomic_fetch_sub_explicit(&l->number, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&l->bytes, item_ntotal(it), memory_order_relaxed);
}

void
do_item_unlink(struct item *it, uint32_t hv)
{
    do_item_unlink_nofree(it, hv);
    item_release(it);
}

void
do_item_replace(struct item *old, struct item *it, uint32_t hv)
{
    do_item_replace_as(old, it, hv, item_cas_next());
}

void
do_item_replace_as(struct item *old, struct item *it, uint32_t hv, uint64_t cas)
{
    /* A new value for a key whose value was read has earned its place:
     * with every overwrite of a hot key on probation, new keys were judged
     * sooner and the mixed load's gain from probation vanished. An
     * overwrite of a value nobody read is as new as a new key (both
     * simulated: notes/bench/eviction-history.md). */
    bool fresh = !(item_iflags(old) & ITEM_FETCHED);

    do_item_unlink(old, hv);
    item_link(it, hv, fresh, cas);
}

void
item_release(struct item *it)
{
    uint32_t prev = atomic_fetch_sub_explicit(&it->refs, 1, memory_order_acq_rel);

    assert((prev & ITEM_REF_MASK) > 0);
    if ((prev & ITEM_REF_MASK) == 1) {
        assert(!((prev >> ITEM_REF_BITS) & ITEM_LINKED));
        if (item_chained(it)) {
            item_chain_release(it);
        }
        slab_free(slab_cls_of(it), slab_sid_of(it), it);
    }
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
    } else if (item_flash_gone(it)) {
        *miss = ITEM_MISS_FLASH_GONE;
    } else {
        return it;
    }
    do_item_unlink(it, hv);
    return NULL;
}

struct item *
do_item_find(const char *key, size_t nkey, uint32_t hv)
{
    item_miss_t miss;

    return do_item_find_why(key, nkey, hv, &miss);
}

/* Mark as recently read; the CLOCK acts on it lazily (item_clock_pull). */
void
do_item_bump(struct item *it)
{
    if (atomic_load_explicit(&item_legacy_lru, memory_order_relaxed)) {
        do_item_bump_legacy(it);
        return;
    }
    /* Read first: the common hot-key case then writes nothing. */
    if ((item_iflags(it) & (ITEM_FETCHED | ITEM_ACTIVE)) != (ITEM_FETCHED | ITEM_ACTIVE)) {
        item_iflags_set(it, ITEM_FETCHED | ITEM_ACTIVE);
    }
}

/* The unsegmented LRU: marked at most once a minute, as memcached's plain LRU
 * moves an item (partition lock held: the item's time is written under
 * it, as a store's is). */
static void
do_item_bump_legacy(struct item *it)
{
    if (!(item_iflags(it) & ITEM_FETCHED)) {
        item_iflags_set(it, ITEM_FETCHED);
    }
    do_item_mark(it);
}

void
do_item_mark(struct item *it)
{
    if (!atomic_load_explicit(&item_legacy_lru, memory_order_relaxed)) {
        item_iflags_set(it, ITEM_ACTIVE);
        return;
    }
    rel_time_t now = clock_now();
    if (!(item_iflags(it) & ITEM_ACTIVE) && it->time <= now &&
        now - it->time > ITEM_LEGACY_BUMP_S) {
        item_iflags_set(it, ITEM_ACTIVE);
        it->time = now;
    }
}

void
item_probe_prefetch(struct item_probe *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i].hv = hash_key(p[i].key, p[i].nkey);
        p[i].slot = assoc_prefetch_bucket(p[i].hv);
    }
    for (size_t i = 0; i < n; i++) {
        assoc_prefetch_head(p[i].slot);
    }
}

struct item *
item_get(const char *key, size_t nkey, bool touch, rel_time_t exptime,
         item_miss_t *miss)
{
    struct item_probe p = { .key = key, .nkey = nkey, .hv = hash_key(key, nkey) };

    return item_get_probed(&p, touch, exptime, miss);
}

struct item *
item_get_probed(const struct item_probe *p, bool touch, rel_time_t exptime,
                item_miss_t *miss)
{
    const char *key = p->key;
    size_t nkey = p->nkey;
    uint32_t hv = p->hv;
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
        item_touch_slabs(it);
        if (touch) {
            item_set_exptime(it, exptime);
            item_note_ttl(slab_cls_of(it), exptime);
        }
        do_item_bump(it);
    }
    /* Under the lock: the item cannot be freed while its class is read. */
    item_ref_note(hv, it, it != NULL ? ITEM_REF_HIT : ITEM_REF_MISS);
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

void
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
        item_note_ttl(slab_cls_of(it), exptime);
        do_item_bump(it);
        item_report_cls(it, cls);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

item_status_t
item_meta_delete(const char *key, size_t nkey, bool has_cas, uint64_t cas,
                 bool stale, bool new_ttl, rel_time_t exptime, const uint64_t *cas_in,
                 uint8_t *cls, uint32_t *vlen)
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
            item_note_ttl(slab_cls_of(it), exptime);
        }
        item_iflags_set(it, ITEM_STALE);
        item_iflags_clear(it, ITEM_TOKEN_SENT);
        item_set_cas(it, cas_in != NULL ? *cas_in : item_cas_next());
        st = ITEM_OK;
    } else if (it != NULL) {
        item_report_cls(it, cls);
        if (vlen != NULL) {
            *vlen = item_vlen(it);
        }
        do_item_unlink(it, hv);
        do_item_unlink_rest(key, nkey, hv);
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

/* The empty item an mg with N creates on a miss: a free chunk under the
 * lock, else the caller's allocation (struct item_rebuild). A class that
 * may hold dead items asks the caller at once: its allocation
 * (item_alloc_try) reuses them before it takes a free chunk or a slab. */
static struct item *
vivify_take(const char *key, size_t nkey, const struct item_meta_get *m,
            struct item_rebuild *rb)
{
    struct item *it = NULL;

    if (rb != NULL && rb->fresh != NULL) {
        it = rb->fresh;
        rb->fresh = NULL;
    } else if (rb == NULL || !item_class_may_hold_dead(item_class_of(nkey, 0))) {
        it = item_alloc_nowait(key, nkey, 0, m->vivify_exptime, 0);
    }
    if (it == NULL) {
        return NULL;
    }
    item_value_write(it, 0, "\r\n", 2);
    if (m->key_binary) {
        item_iflags_set(it, ITEM_KEY_BINARY);
    }
    if (rb != NULL) {
        rb->cls = slab_cls_of(it);
    }
    return it;
}

struct item *
item_meta_get(const char *key, size_t nkey, struct item_meta_get *m,
              item_miss_t *miss, struct item_rebuild *rb)
{
    uint32_t hv = hash_key(key, nkey);
    struct item *it;

    m->won = m->created = m->fetched = m->token_sent = m->stale = false;
    m->time = 0;
    assoc_lock(hv);
    it = do_item_find_why(key, nkey, hv, miss);
    if (it == NULL && m->vivify) {
        struct item *fresh = vivify_take(key, nkey, m, rb);
        if (fresh != NULL) {
            do_item_link_as(fresh, hv, m->has_cas_in ? m->cas_in : item_cas_next());
            item_note_ttl(slab_cls_of(fresh), fresh->exptime);
            it = fresh;
            m->created = m->won = true;
            if (miss != NULL) {
                *miss = ITEM_MISS_NONE;     /* created: no miss to report */
            }
        } else if (rb != NULL) {
            /* No free chunk: the caller allocates, holding no lock. */
            (void)item_rebuild_want(rb, NULL, key, nkey, 0, m->vivify_exptime, 0);
            assoc_unlock(hv);
            return NULL;
        }
    }
    if (it != NULL && item_refcount(it) >= ITEM_REF_MAX) {
        it = NULL;                      /* see item_get() */
    }
    if (it != NULL) {
        uint8_t f = item_iflags(it);
        m->fetched = (f & ITEM_FETCHED) != 0 && !m->created;
        m->exptime_before = m->created ? 0 : it->exptime;   /* created: none yet */
        m->time = it->time;
        m->token_sent = (f & ITEM_TOKEN_SENT) != 0;
        m->stale = (f & ITEM_STALE) != 0;
        if (m->touch && !(m->created && m->vivify_last)) {
            item_set_exptime(it, m->exptime);
            item_note_ttl(slab_cls_of(it), m->exptime);
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
        item_touch_slabs(it);
        if (m->bump) {
            do_item_bump(it);
        }
    }
    if (!m->created) {
        item_ref_note(hv, it, it != NULL ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    assoc_unlock(hv);
    if (rb != NULL && rb->fresh != NULL) {
        item_rebuild_drop(rb);          /* someone else stored it meanwhile */
    }
    return it;
}

item_status_t
item_delete(const char *key, size_t nkey, uint8_t *cls, uint32_t *vlen)
{
    uint32_t hv = hash_key(key, nkey);
    item_status_t st = ITEM_NOT_FOUND;

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it != NULL) {
        item_report_cls(it, cls);
        if (vlen != NULL) {
            *vlen = item_vlen(it);
        }
        do_item_unlink(it, hv);
        do_item_unlink_rest(key, nkey, hv);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

void
item_unlink_key(const char *key, size_t nkey)
{
    (void)item_delete(key, nkey, NULL, NULL);
}

void
item_flush(int64_t delay)
{
    rel_time_t now = clock_now();
    rel_time_t new_oldest = delay > 0 ? clock_exptime(delay) : now;

    if (item_cas_enabled) {
        atomic_store(&item_oldest_live, new_oldest - 1);
        if (new_oldest - 1 <= now) {
            atomic_store(&item_oldest_cas, atomic_load(&item_cas_seq) + 1);
        }
    } else {
        atomic_store(&item_oldest_live, new_oldest);
    }
}

/* --- stats ------------------------------------------------------------------------ */

void
item_get_stats(struct item_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct item_class_state *l = &item_classes[c];
        slab_lock(c);
        out->curr_items += l->number;
        out->total_items += l->total_items;
        out->bytes += l->bytes;
#define ITEM_STAT_SUM(name, kind) ITEM_STAT_IF_SUMMED_##kind(out->name += l->name;)
        ITEM_CLASS_STATS(ITEM_STAT_SUM)
#undef ITEM_STAT_SUM
        slab_unlock(c);
    }
    out->evictions = out->evicted + out->evicted_by_slab;
}

void
item_class_stats(uint8_t cls, struct item_class_stats *out)
{
    struct item_class_state *l = &item_classes[cls];

    memset(out, 0, sizeof(*out));
    slab_lock(cls);
#define ITEM_STAT_COPY(name, kind) ITEM_STAT_IF_COUNTER_##kind(out->name = l->name;)
    ITEM_CLASS_STATS(ITEM_STAT_COPY)
#undef ITEM_STAT_COPY
    /* One CLOCK holds every item: all "cold", as memcached reports a class
     * without segments. memcached's age is its LRU tail's; ours is the
     * item at the hand. */
    out->number = out->number_cold = l->number;
    struct item *hand = slab_clock_peek(cls, 0);
    out->age = hand != NULL && (item_iflags(hand) & ITEM_LINKED) ?
               clock_now() - hand->time : 0;
    out->mem_requested = atomic_load_explicit(&l->bytes, memory_order_relaxed);
    out->crawler_reclaimed = atomic_load_explicit(&l->crawler_reclaimed, memory_order_relaxed);
    out->crawler_items_checked = atomic_load_explicit(&l->crawler_items_checked,
                                                      memory_order_relaxed);
    slab_unlock(cls);
}

void
item_reset_stats(void)
{
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct item_class_state *l = &item_classes[c];
        slab_lock(c);
        l->total_items = 0;
#define ITEM_STAT_RESET(name, kind) ITEM_STAT_IF_COUNTER_##kind(l->name = 0;)
        ITEM_CLASS_STATS(ITEM_STAT_RESET)
#undef ITEM_STAT_RESET
        atomic_store(&item_classes[c].crawler_reclaimed, 0);
        atomic_store(&item_classes[c].crawler_items_checked, 0);
        slab_unlock(c);
    }
}
