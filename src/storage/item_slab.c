/*
 * item_slab.c -- emptying a slab for another class (its live items
 * moved into other chunks of their class where that is possible, the
 * rest dropped), and walking the linked items of selected classes for the
 * crawler and the key dumps.
 */
#include "item.h"

#include <assert.h>
#include <sched.h>
#include <string.h>

#include "assoc.h"
#include "hash.h"
#include "item_int.h"
#include "slab.h"

#define SLAB_LOCK_TRIES   1000  /* yields waiting for a partition lock */

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
 * The first look, before anything is dropped: is any chunk of slab sid
 * (of class cls) in use? Racy for items (settled under the locks); a
 * chained item's body is judged by its head under the body class's lock,
 * where the head is stable (item_chain.c).
 */
static bool
slab_any_busy(uint32_t sid, uint8_t cls)
{
    uint32_t n = slab_class_perslab(cls);
    bool busy = false, bodies = cls == item_chain_cls;

    if (bodies) {
        slab_lock(cls);
    }
    for (uint32_t i = 0; i < n && !busy; i++) {
        struct item *it = slab_chunk(sid, i);
        if (bodies && (item_iflags(it) & (ITEM_LINKED | ITEM_FREE)) == 0) {
            busy = item_chain_body_busy_locked(it);
        } else {
            busy = chunk_busy(it);
        }
    }
    if (bodies) {
        slab_unlock(cls);
    }
    return busy;
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
    atomic_store(&item_slab_rescue_on, on);
}

bool
item_slab_rescue(void)
{
    return atomic_load(&item_slab_rescue_on);
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

    if (item_chained(it)) {
        return false;           /* its bodies would be copied too: dropped */
    }
    struct item *dst = slab_pop_free_locked(cls, &dsid);

    if (dst == NULL && (item_iflags(it) & ITEM_ACTIVE) && item_clock_evict(cls, 1, now) >= 1) {
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
    item_classes[cls].slab_rescues++;
    return true;
}

/* Both locks held: drop a live or dead item for its slab's move. */
static void
slab_drop(struct item_class_state *l, struct item *it, uint32_t hv, rel_time_t now)
{
    bool dead = item_is_dead(it, now);

    if (item_class_drop_locked(l, it, hv, dead, now) && !dead) {
        /* Counted apart from CLOCK evictions; both are evictions. */
        l->evicted--;
        l->evicted_by_slab++;
    }
}

/*
 * A body chunk of a chained item in a draining slab of the body class:
 * moved into a free chunk of the class (chunk rescue), else its head goes
 * (wherever it is), and with it all its chunks. Locks in their order: the
 * head's partition, its class, the body class. false if the head is in
 * use.
 */
static bool
slab_unlink_body(struct item *b, rel_time_t now)
{
    uint8_t bcls = item_chain_cls;

    slab_lock(bcls);
    struct item *h = item_chain_body_head(b);
    if (h == NULL || (item_iflags(h) & (ITEM_LINKED | ITEM_FREE)) != ITEM_LINKED) {
        bool free = (item_iflags(b) & ITEM_FREE) != 0;
        slab_unlock(bcls);
        return free;            /* else being filled or unlinked: in use */
    }
    uint8_t hcls = slab_cls_of(h);
    uint32_t hv = item_hash(h);
    slab_unlock(bcls);
    if (!assoc_lock_patiently(hv)) {
        return false;
    }
    if (hcls != bcls) {
        slab_lock(hcls);
    }
    slab_lock(bcls);
    bool ok = true;
    if (!(item_iflags(b) & ITEM_FREE)) {
        /* Still a body of a head of that class and partition, unused? */
        struct item *now_h = item_chain_body_head(b);
        /* Linked (key written) before its key is hashed. */
        if (now_h != h || slab_cls_of(h) != hcls || chunk_busy(h) || item_hash(h) != hv) {
            ok = false;
        } else if (!item_is_dead(h, now) && !slab_draining(slab_sid_of(h)) &&
                   atomic_load_explicit(&item_slab_rescue_on, memory_order_relaxed) &&
                   item_chain_rescue_body_locked(h, b)) {
            item_classes[bcls].chunk_rescues++;
        } else {
            slab_drop(&item_classes[hcls], h, hv, now);
            item_chain_free_locked(hcls, h);
        }
    }
    slab_unlock(bcls);
    if (hcls != bcls) {
        slab_unlock(hcls);
    }
    assoc_unlock(hv);
    return ok;
}

/* Unlink one chunk of a draining slab; false if it is in use. */
static bool
slab_unlink_chunk(uint8_t cls, uint32_t sid, struct item *it, rel_time_t now)
{
    struct item_class_state *l = &item_classes[cls];

    if (item_iflags(it) & ITEM_FREE) {
        return true;
    }
    if (cls == item_chain_cls && item_nkey(it) == 0) {
        return slab_unlink_body(it, now);
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
                   atomic_load_explicit(&item_slab_rescue_on, memory_order_relaxed) &&
                   slab_rescue(cls, it, hv, now)) {
            slab_free_locked(cls, sid, it);
        } else {
            slab_drop(l, it, hv, now);
            item_free_locked(cls, it);
        }
    }
    slab_unlock(cls);
    assoc_unlock(hv);
    return ok;
}

/*
 * The slabs slab sid's class must keep if sid goes to cls (0: back to the
 * system): its last one under the first-slab rule, unless cls is the class
 * itself or a larger class of its group holds its items (the rule the
 * policies apply, evict_slab_last_other; applied again here, under the
 * class's lock, for two drains at once).
 */
static uint32_t
slabs_to_keep(uint32_t sid, uint8_t cls)
{
    struct slab_info info;

    if (!slab_table_info(sid, &info) || info.cls == 0) {
        return 0;               /* unassigned: slab_drain_begin() refuses it */
    }
    return slab_first_past_limit() && info.cls != cls && !item_class_homed(info.cls) ? 1 : 0;
}

/* Empty slab sid and unassign it (item_slab_evict's work but the carve). */
static item_slab_status_t
slab_empty(uint32_t sid, uint8_t cls)
{
    uint8_t vcls = slab_drain_begin(sid, slabs_to_keep(sid, cls));

    if (vcls == 0) {
        return ITEM_SLAB_UNOWNED;
    }
    uint32_t n = slab_class_perslab(vcls);
    rel_time_t now = clock_now();
    bool ok = true;
    /* A scan first: skip a busy slab before dropping anything. */
    ok = !slab_any_busy(sid, vcls);
    for (uint32_t i = 0; i < n && ok; i++) {
        ok = slab_unlink_chunk(vcls, sid, slab_chunk(sid, i), now);
    }
    if (!ok) {
        slab_drain_abort(vcls, sid);
        return ITEM_SLAB_BUSY;
    }
    slab_drain_finish(vcls, sid);
    return ITEM_SLAB_OK;
}

item_slab_status_t
item_slab_evict(uint32_t sid, uint8_t cls)
{
    item_slab_status_t st = slab_empty(sid, cls);

    if (st == ITEM_SLAB_OK) {
        /* The slab belongs to no class now; nobody else can reach it. */
        slab_attach(cls, sid);
    }
    return st;
}

/* Empty slab sid for no class, then hand it to put (release or pool). */
static item_slab_status_t
slab_empty_to(uint32_t sid, void (*put)(uint32_t))
{
    item_slab_status_t st = slab_empty(sid, 0);

    if (st == ITEM_SLAB_OK) {
        put(sid);
    }
    return st;
}

item_slab_status_t
item_slab_release(uint32_t sid)
{
    return slab_empty_to(sid, slab_release);
}

item_slab_status_t
item_slab_pool(uint32_t sid)
{
    return slab_empty_to(sid, slab_pool_keep);
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
        assoc_has(it, *hv)) {
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
    atomic_fetch_add_explicit(&item_classes[cls].crawler_items_checked, 1,
                              memory_order_relaxed);
    if (item_is_dead(it, now)) {
        do_item_unlink(it, hv);
        atomic_fetch_add_explicit(&item_classes[cls].crawler_reclaimed, 1,
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
    return atomic_load_explicit(&item_classes[cls].crawler_reclaimed, memory_order_relaxed);
}

uint64_t
item_crawler_checked(uint8_t cls)
{
    return atomic_load_explicit(&item_classes[cls].crawler_items_checked, memory_order_relaxed);
}

/* The dump's visit: copy a live item and stop there. A stub keeps no
 * key: its record's location is noted, the key read after the lock. */
struct dump_ctx {
    struct item_dump *out;
};

static bool
dump_visit(struct item *it, uint32_t hv, uint8_t cls, rel_time_t now, void *ctx)
{
    struct dump_ctx *d = ctx;
    struct item_dump *out = d->out;

    (void)hv;
    if (item_is_dead(it, now)) {
        return false;
    }
    out->stub = item_nkey(it) == 0 && item_is_flash(it);
    out->nkey = item_key_len(it);
    if (out->stub) {
        struct item_stub st = item_stub_of(it);
        out->loc = st.loc;
        out->hv = st.hv;
        out->fp = st.fp;
    } else {
        memcpy(out->key, item_key(it), out->nkey);
    }
    out->cls = cls;
    out->fetched = (item_iflags(it) & ITEM_FETCHED) != 0;
    out->key_binary = (item_iflags(it) & ITEM_KEY_BINARY) != 0;
    out->exptime = it->exptime;
    out->time = it->time;
    out->cas = item_cas(it);
    out->vlen = item_vlen(it);
    out->flags = it->flags;
    out->total = item_ntotal(it);
    return true;
}

bool
item_dump_next(struct item_cursor *cur, const uint64_t classes[4],
               struct item_dump *out)
{
    struct dump_ctx d = { .out = out };

    return walk_chunks(cur, classes, UINT32_MAX, dump_visit, &d);
}

void
item_dump_read_init(const struct item_dump *d, struct flash_read *r)
{
    assert(d->stub);
    r->loc = d->loc;
    r->nkey = d->nkey;
    r->nbytes = d->vlen + 2;
    r->cas = d->cas;
    r->key_only = true;
}

bool
item_dump_key_read(struct item_dump *d, const struct flash_read *r)
{
    if (r->status != FLASH_READ_OK || hash_key(r->key, r->nkey) != d->hv ||
        item_key_fp(r->key, r->nkey) != d->fp) {
        return false;
    }
    memcpy(d->key, r->key, r->nkey);
    return true;
}

uint64_t
item_class_items(uint8_t cls)
{
    return atomic_load_explicit(&item_classes[cls].number, memory_order_relaxed);
}
