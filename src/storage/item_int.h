/*
 * item_int.h -- what the files of the item module share; private to
 * src/storage. item.c: references, linking, lookups, flush, stats;
 * item_clock.c: allocation and the per-class CLOCK; item_slab.c: emptying
 * a slab for another class and walking items (crawler, key dumps);
 * item_store.c: set/add/replace/cas, append/prepend and arithmetic;
 * item_chain.c: values larger than a chunk, as chains; item_flash.c:
 * stubs of flash-resident items; item_restore.c: relinking after a warm
 * restart. The do_ functions are called with the key's partition lock
 * held.
 */
#ifndef SC_ITEM_INT_H
#define SC_ITEM_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "flash.h"
#include "item.h"
#include "slab.h"

/*
 * Per-class counters. number/bytes/total_items change on every link and
 * unlink, so they are atomics (no class lock on the store path); the
 * eviction counters are written under the class lock.
 */
struct item_class_state {
    _Atomic uint64_t number;
    _Atomic uint64_t bytes;
    _Atomic uint64_t total_items;
    /* the counters of ITEM_CLASS_STATS (item.h), class lock held */
#define ITEM_STAT_COUNTER(name, kind) ITEM_STAT_IF_COUNTER_##kind(uint64_t name;)
    ITEM_CLASS_STATS(ITEM_STAT_COUNTER)
#undef ITEM_STAT_COUNTER
    _Atomic bool ttl_seen;          /* an item with an exptime was stored */
    /* The probation FIFO (item_clock.c), class lock held: a ring. */
    struct item_probation *prob;
    uint32_t         prob_cap;      /* entries the ring holds, or 0 */
    uint32_t         prob_head;
    uint32_t         prob_count;
    uint64_t         prob_owed;     /* left the FIFO unjudged: the hand's first */
    bool             prob_hand_turn;
    /* Chunks of live items the class's own CLOCK or FIFO dropped from RAM
     * (never reset), and when the latest slab's worth began (item_clock.c). */
    uint64_t         own_evicted;
    uint64_t         run_start_ms;
    _Atomic uint64_t overflow_ms;
    _Atomic uint64_t crawler_reclaimed;     /* written by the crawler only */
    _Atomic uint64_t crawler_items_checked;
};

extern struct item_class_state       item_classes[SLAB_CLASS_MAX + 1];
extern _Atomic item_evict_hook_fn    item_evict_hook;
extern _Atomic item_ref_hook_fn      item_ref_hook;
extern bool                          item_cas_enabled;
extern _Atomic uint64_t              item_cas_seq;
extern _Atomic bool                  item_slab_rescue_on;
extern _Atomic bool                  item_legacy_lru;   /* item_set_legacy_lru */
/* Partition lock held: a second chance for it at the CLOCK hand (once a
 * minute at most with the unsegmented LRU), without counting a read. */
void do_item_mark(struct item *it);
extern _Atomic rel_time_t            item_oldest_live;  /* flush_all point */
extern _Atomic rel_time_t            item_temporary_ttl;    /* 0: off */
extern _Atomic uint64_t              item_oldest_cas;

/*
 * -o temporary_ttl (memcached's temporary LRU): an item stored with a TTL
 * of at most that many seconds is never evicted by the CLOCK or the
 * probation FIFO; it goes when it expires. Judged from what the item
 * holds (its exptime against its store time, which the CLOCK's second
 * chance never rewrites for such an item), as memcached judges it once
 * at store. A slab moved to another class still takes it.
 */
static inline bool
item_temporary(struct item *it)
{
    rel_time_t ttl = atomic_load_explicit(&item_temporary_ttl, memory_order_relaxed);
    rel_time_t exp = __atomic_load_n(&it->exptime, __ATOMIC_RELAXED);

    return ttl != 0 && exp != 0 && exp - it->time <= ttl;
}

/* item_chain.c: chained items (see its header). */
extern uint32_t item_chain_max;         /* items larger are chained */
extern uint8_t  item_chain_cls;         /* the body chunks' class; 0: none */

static inline bool
item_chained(struct item *it)
{
    return !(item_iflags(it) & ITEM_FLASH) &&
           offsetof(struct item, data) + item_nkey(it) + it->nbytes > item_chain_max;
}

void          item_chain_setup(void);
bool          item_chain_needed(size_t nkey, uint32_t vlen);
uint8_t       item_chain_head_class(size_t nkey, uint32_t vlen);
uint32_t      item_chain_bodies(size_t nkey, uint32_t vlen);
size_t        item_chain_ntotal(struct item *it);
/* Bodies then head chunk (vlen + 2 bytes, key and first handle written
 * only); NULL with *short_cls the class that had no chunk. reclaim: reuse
 * dead items at the hands first. */
struct item  *item_chain_alloc(const char *key, size_t nkey, uint32_t vlen, bool reclaim,
                               uint8_t *short_cls);
/* The head a body chunk belongs to, or NULL if it is not a tagged body;
 * stable only under the body class's lock. */
struct item  *item_chain_body_head(struct item *b);
bool          item_chain_lock_head(struct item *b, struct item **head, uint32_t *hv);
/* A read or store: the slabs of its bodies count as accessed. */
void          item_chain_touch(struct item *it);
/* The item's bodies, last reference gone, no lock held. */
void          item_chain_release(struct item *it);
/* Give an unreferenced, unlinked item's chunks back; its class lock held
 * (the body class's is taken after it). */
void          item_free_locked(uint8_t cls, struct item *it);
/* The same with the body class's lock held too; the body chunks freed
 * into their class. */
uint32_t      item_chain_free_locked(uint8_t cls, struct item *it);
/* Body class lock held: chunk b of that class is in use (a body whose
 * head is referenced or not linked, or a chunk being filled). */
bool          item_chain_body_busy_locked(struct item *b);
/*
 * Warm restart: whether linked head's chain came back whole (each body a
 * chunk of a restored body-class slab, tagged with head's handle, the
 * lengths as the plan, the tail ending the value); then mark is called on
 * each body. The head's class is fixed from here on, as a store makes it.
 */
bool          item_chain_restore(struct item *head, void (*mark)(struct item *body));
void          item_value_copy(struct item *dst, uint32_t doff, struct item *src,
                              uint32_t soff, uint32_t n);

/*
 * A stub (ITEM_FLASH) keeps no key: after its header come the record's
 * location (where item_flash_loc() reads it, the key length being 0),
 * the key's hash and a second, 24-bit hash with the key length in its top
 * byte: 48 bytes for any key (memcached keeps header and key: 96 bytes
 * for an 8-byte key). A lookup matches a stub by both hashes (56 bits);
 * a read checks the key itself in the flash record, so a false match
 * never serves another key's value; other commands would act on the other
 * key (odds 2^-56), and a key keeps one entry (item.c item_unlink_others).
 */
struct item_stub {
    struct flash_loc loc;
    uint32_t         hv;        /* hash_key() */
    uint32_t         fp;        /* item_key_fp() */
};
#define ITEM_STUB_SIZE (offsetof(struct item, data) + sizeof(struct item_stub))

static inline struct item_stub
item_stub_of(struct item *it)
{
    struct item_stub st;

    memcpy(&st, it->data, sizeof(st));
    return st;
}

/* The fingerprint a stub keeps of its key. */
uint32_t      item_key_fp(const char *key, size_t nkey);

/* The key's length, for a stub too. */
static inline uint8_t
item_key_len(struct item *it)
{
    if (item_nkey(it) == 0 && (item_iflags(it) & ITEM_FLASH)) {
        return (uint8_t)(item_stub_of(it).fp >> 24);
    }
    return item_nkey(it);
}

/* Is it the item of this key (hv its hash)? A stub by its hashes. */
static inline bool
item_key_matches(struct item *it, const char *key, size_t nkey, uint32_t hv)
{
    if (item_nkey(it) == nkey) {
        return memcmp(item_key(it), key, nkey) == 0;
    }
    if (item_nkey(it) != 0 || !(item_iflags(it) & ITEM_FLASH)) {
        return false;
    }
    struct item_stub st = item_stub_of(it);
    return st.hv == hv && st.fp == item_key_fp(key, nkey);
}

/* RAM bytes of an item: a stub holds no key and no value (struct item_stub). */
static inline size_t
item_ntotal(struct item *it)
{
    if (item_iflags(it) & ITEM_FLASH) {
        return ITEM_STUB_SIZE;
    }
    if (item_chained(it)) {
        return item_chain_ntotal(it);
    }
    return offsetof(struct item, data) + item_nkey(it) + it->nbytes;
}

/* A stub's location, after its key (unaligned: copied). */
static inline struct flash_loc
item_flash_loc(struct item *it)
{
    struct flash_loc loc;

    memcpy(&loc, it->data + item_nkey(it), sizeof(loc));
    return loc;
}

/* A stub whose record was reclaimed or never written: dead, as expired. */
static inline bool
item_flash_gone(struct item *it)
{
    if (!(item_iflags(it) & ITEM_FLASH)) {
        return false;
    }
    struct flash_loc loc = item_flash_loc(it);
    return !flash_loc_alive(&loc);
}

static inline struct item_class_state *
class_state_of(const struct item *it)
{
    return &item_classes[slab_cls_of(it)];
}

/* exptime of a linked item: written under its partition lock, read by
 * the CLOCK's dead-item hint without it (clock_maybe_dead). */
static inline void
item_set_exptime(struct item *it, rel_time_t exptime)
{
    __atomic_store_n(&it->exptime, exptime, __ATOMIC_RELAXED);
}

uint32_t      item_hash(struct item *it);
bool          item_is_dead(struct item *it, rel_time_t now);
/* Expired or flushed (item_is_dead without a stub's record being gone). */
bool          item_is_stale_by_time(struct item *it, rel_time_t now);
void          item_report_cls(const struct item *it, uint8_t *cls);

/* The CAS a change gives an item when the client names none (meta E). */
uint64_t      item_cas_next(void);

/* Partition lock held (item.c). The _as forms link with the CAS given. */
void          do_item_link(struct item *it, uint32_t hv);
void          do_item_link_as(struct item *it, uint32_t hv, uint64_t cas);
void          do_item_replace_as(struct item *old, struct item *it, uint32_t hv, uint64_t cas);
void          do_item_unlink_nofree(struct item *it, uint32_t hv);
void          do_item_unlink(struct item *it, uint32_t hv);
void          do_item_replace(struct item *old, struct item *it, uint32_t hv);
struct item  *do_item_find(const char *key, size_t nkey, uint32_t hv);
void          do_item_bump(struct item *it);

/* item_clock.c */
void          item_note_ttl(uint8_t cls, rel_time_t exptime);
/* The class ever held an item with an exptime, or a flush_all is in force:
 * dead items may sit at its hand. */
bool          item_class_may_hold_dead(uint8_t cls);
struct item  *item_alloc_nowait(const char *key, size_t nkey, uint32_t flags,
                                rel_time_t exptime, uint32_t vlen);
/* item_store.c: partition lock held, no free chunk: ask the caller for
 * vlen bytes for old's key (old, pinned here, may be NULL: a key with
 * nothing stored). ITEM_NEED_MEMORY; ITEM_NO_MEMORY without rb. */
item_status_t item_rebuild_want(struct item_rebuild *rb, struct item *old,
                                const char *key, size_t nkey, uint32_t flags,
                                rel_time_t exptime, uint32_t vlen);
/* Both locks held: unlink, count as reclaimed (dead) or evicted (live);
 * or, a live item the flash tier keeps, replace it by its stub (false:
 * not counted as an eviction). Either way the chunk is the caller's. */
/* ext_item_age's sweep of one slab (item_clock.c). */
uint32_t      item_clock_flash_aged(uint32_t sid, uint8_t cls, rel_time_t min_idle);
bool          item_class_drop_locked(struct item_class_state *l, struct item *it,
                                     uint32_t hv, bool dead, rel_time_t now);
/* item_flash.c, both locks held: replace a live item being evicted by a
 * stub, its record appended to flash; false (nothing changed) if it is
 * not to be kept or there is no room. */
bool          item_flash_stash(struct item *it, uint32_t hv, rel_time_t now);
/* The same for ext_item_age's sweep, which must never write a record it
 * cannot keep (it would come back a second later): it checks for flash
 * room and a stub chunk first, and counts nothing when it gives up. */
typedef enum item_stash_status {
    ITEM_STASHED,
    ITEM_STASH_SKIP,            /* not a value the flash tier keeps */
    ITEM_STASH_FULL,            /* no room now (flash buffers or stubs) */
} item_stash_status_t;
item_stash_status_t item_flash_stash_early(struct item *it, uint32_t hv);
/* Partition lock held, not the class lock: a new item enters probation. */
void          item_probation_push(struct item *it);
/* Rings freed (item_teardown). */
void          item_probation_teardown(void);
/* Class lock held: the sweep; chunks freed into the class. */
uint32_t      item_clock_evict(uint8_t cls, uint32_t max, rel_time_t now);

/* The class whose memory holds it: a chained item's body class. */
static inline uint8_t
item_ref_class(struct item *it)
{
    return item_chained(it) ? item_chain_cls : slab_cls_of(it);
}

static inline void
item_ref_note(uint32_t hv, struct item *it, item_ref_t kind)
{
    item_ref_hook_fn fn = atomic_load_explicit(&item_ref_hook, memory_order_acquire);

    if (fn != NULL) {
        fn(hv, it != NULL ? item_ref_class(it) : 0, kind);
    }
}

#endif
