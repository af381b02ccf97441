/*
 * item.h -- cache items: layout, reference counts, CLOCK and the store,
 * fetch, delete, arithmetic and flush semantics of memcached.
 *
 * Reference counting: item_alloc_try() returns an item with one reference
 * (the caller's). Linking into the hash table adds one; unlinking drops
 * it. Every reader holds a reference until it is done (e.g. until its
 * write to a socket completes), and the chunk returns to its slab class
 * only when the count reaches zero, so a value being sent is never
 * reused underneath the writer.
 *
 * Locking: an item's hash partition lock (assoc.h) guards its linkage
 * and fields; its class lock (slab.h) guards the CLOCK hand and free
 * chunks. Order: partition lock, then class lock. Code holding a class
 * lock only try-locks partitions.
 */
#ifndef SC_ITEM_H
#define SC_ITEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "flash.h"

#define ITEM_LINKED  0x01       /* in the hash table */
#define ITEM_FREE    0x02       /* on its class free list */
#define ITEM_FETCHED 0x04       /* read at least once since stored */
#define ITEM_ACTIVE  0x08       /* read since the CLOCK hand last passed */
#define ITEM_STALE   0x10       /* meta: invalidated (md I, ms I), still served */
#define ITEM_TOKEN_SENT 0x20    /* meta: a recache win (W) was handed out */
#define ITEM_KEY_BINARY 0x40    /* meta: stored under a base64 ('b') key */
#define ITEM_FLASH   0x80       /* a stub: the value is on flash (flash.h);
                                   nbytes is the value's length, and the
                                   chunk holds a struct flash_loc instead */

/* refs: the reference count in the low bits, the ITEM_* flags above it. */
#define ITEM_REF_BITS   24
#define ITEM_REF_MASK   ((1u << ITEM_REF_BITS) - 1)
#define ITEM_REF_MAX    (ITEM_REF_MASK - 1024)  /* item_get() refuses past */

/*
 * 32 bytes (memcached: 48, plus 8 for CAS). No LRU links: eviction is a
 * CLOCK hand over the class's slabs (slab.h). No slab id or class: both
 * follow from the address. The hash chain is a 32-bit chunk handle, and
 * the key length shares a word with the CAS (56 bits of CAS outlast any
 * server: 10M sets/s for 200 years).
 */
struct item {
    union {
        struct {                        /* linked or being filled */
            uint32_t    h_next;         /* hash chain (slab handle) */
            rel_time_t  time;           /* last store or CLOCK rescue */
        };
        struct {                        /* ITEM_FREE: class lock held */
            uint32_t    f_next;
            uint32_t    f_prev;
        };
    };
    rel_time_t         exptime; /* 0 = never */
    uint32_t           nbytes;  /* value length including "\r\n" */
    uint32_t           flags;   /* client flags */
    _Atomic uint32_t   refs;    /* refcount | iflags << ITEM_REF_BITS */
    _Atomic uint64_t   cas_key; /* cas << 8 | key length; relaxed atomic:
                                   incr rewrites the CAS under the partition
                                   lock while the CLOCK hand reads nkey */
    char               data[];  /* key, then value with "\r\n" */
};

_Static_assert(sizeof(struct item) == 32, "item header is 32 bytes");

static inline uint8_t
item_nkey(struct item *it)
{
    return (uint8_t)atomic_load_explicit(&it->cas_key, memory_order_relaxed);
}

static inline uint64_t
item_cas(struct item *it)
{
    return atomic_load_explicit(&it->cas_key, memory_order_relaxed) >> 8;
}

static inline void
item_set_cas(struct item *it, uint64_t cas)
{
    atomic_store_explicit(&it->cas_key, cas << 8 | item_nkey(it), memory_order_relaxed);
}

static inline uint32_t
item_refcount(struct item *it)
{
    return atomic_load_explicit(&it->refs, memory_order_acquire) & ITEM_REF_MASK;
}

static inline uint8_t
item_iflags(struct item *it)
{
    return (uint8_t)(atomic_load_explicit(&it->refs, memory_order_acquire) >> ITEM_REF_BITS);
}

static inline void
item_iflags_set(struct item *it, uint8_t f)
{
    atomic_fetch_or(&it->refs, (uint32_t)f << ITEM_REF_BITS);
}

static inline void
item_iflags_clear(struct item *it, uint8_t f)
{
    atomic_fetch_and(&it->refs, ~((uint32_t)f << ITEM_REF_BITS));
}

/* Flags f and no references: only for chunks nobody else can reach. */
static inline void
item_iflags_reset(struct item *it, uint8_t f)
{
    atomic_store(&it->refs, (uint32_t)f << ITEM_REF_BITS);
}

typedef enum item_status {
    ITEM_OK,
    ITEM_NOT_STORED,
    ITEM_EXISTS,
    ITEM_NOT_FOUND,
    ITEM_TOO_LARGE,
    ITEM_NO_MEMORY,
    ITEM_NON_NUMERIC,
    ITEM_NEED_MEMORY,   /* a rebuild wants memory: see struct item_rebuild */
    ITEM_RETRY,         /* a rebuild lost a race: start it over */
} item_status_t;

typedef enum item_store_op {
    ITEM_OP_SET,
    ITEM_OP_ADD,
    ITEM_OP_REPLACE,
    ITEM_OP_APPEND,
    ITEM_OP_PREPEND,
    ITEM_OP_CAS,
} item_store_op_t;

/*
 * `stats items` for one class, in memcached's order (printed as
 * items:N:name by stats.c, which appends hits_to_cold and hits_to_temp
 * from the request counters). Kinds:
 *   COUNT   a counter kept per class under the class lock: a field of the
 *           class's state (item_int.h) and of struct item_class_stats,
 *           cleared by `stats reset`;
 *   SUM     a COUNT also summed into struct item_stats;
 *   HIDDEN  a SUM that `stats items` does not show (reported elsewhere:
 *           items_evicted_by_slab in `stats slabs`, slab_reassign_rescues);
 *   VIEW    a figure item_class_stats() computes when asked;
 *   ZERO    memcached's field for a mechanism slabcache does not have
 *           (segmented LRU, tail repair): always 0 (notes/compatibility.md).
 * So a new per-class counter is one row (and the line that counts it).
 */
#define ITEM_CLASS_STATS(X)             \
    X(number,                VIEW)      \
    X(number_hot,            ZERO)      \
    X(number_warm,           ZERO)      \
    X(number_cold,           VIEW)      \
    X(age_hot,               ZERO)      \
    X(age_warm,              ZERO)      \
    X(age,                   VIEW)      \
    X(mem_requested,         VIEW)      \
    X(evicted,               SUM)       \
    X(evicted_nonzero,       COUNT)     \
    X(evicted_time,          COUNT)     \
    X(outofmemory,           COUNT)     \
    X(tailrepairs,           ZERO)      \
    X(reclaimed,             SUM)       \
    X(expired_unfetched,     SUM)       \
    X(evicted_unfetched,     SUM)       \
    X(evicted_active,        ZERO)      \
    X(crawler_reclaimed,     VIEW)      \
    X(crawler_items_checked, VIEW)      \
    X(lrutail_reflocked,     ZERO)      \
    X(moves_to_cold,         ZERO)      \
    X(moves_to_warm,         ZERO)      \
    X(moves_within_lru,      ZERO)      \
    X(direct_reclaims,       ZERO)      \
    X(hits_to_hot,           ZERO)      \
    X(hits_to_warm,          ZERO)      \
    X(evicted_by_slab,       HIDDEN)    \
    X(slab_rescues,          HIDDEN)    \
    X(chunk_rescues,         HIDDEN)

/* Expand ITEM_CLASS_STATS rows of some kinds only: X_COUNT etc. */
#define ITEM_STAT_IF_COUNTER_COUNT(x)   x
#define ITEM_STAT_IF_COUNTER_SUM(x)     x
#define ITEM_STAT_IF_COUNTER_HIDDEN(x)  x
#define ITEM_STAT_IF_COUNTER_VIEW(x)
#define ITEM_STAT_IF_COUNTER_ZERO(x)
#define ITEM_STAT_IF_SUMMED_COUNT(x)
#define ITEM_STAT_IF_SUMMED_SUM(x)      x
#define ITEM_STAT_IF_SUMMED_HIDDEN(x)   x
#define ITEM_STAT_IF_SUMMED_VIEW(x)
#define ITEM_STAT_IF_SUMMED_ZERO(x)
#define ITEM_STAT_IF_FIELD_COUNT(x)     x
#define ITEM_STAT_IF_FIELD_SUM(x)       x
#define ITEM_STAT_IF_FIELD_HIDDEN(x)    x
#define ITEM_STAT_IF_FIELD_VIEW(x)      x
#define ITEM_STAT_IF_FIELD_ZERO(x)

/* Per-class item figures for `stats items`. */
struct item_class_stats {
#define ITEM_STAT_FIELD(name, kind) ITEM_STAT_IF_FIELD_##kind(uint64_t name;)
    ITEM_CLASS_STATS(ITEM_STAT_FIELD)
#undef ITEM_STAT_FIELD
};

/* Totals over the classes, for `stats`. */
struct item_stats {
    uint64_t curr_items;
    uint64_t total_items;
    uint64_t bytes;
    uint64_t evictions;         /* evicted + evicted_by_slab */
#define ITEM_STAT_FIELD(name, kind) ITEM_STAT_IF_SUMMED_##kind(uint64_t name;)
    ITEM_CLASS_STATS(ITEM_STAT_FIELD)
#undef ITEM_STAT_FIELD
};

int   item_setup(bool use_cas);
void  item_teardown(void);

size_t item_total_size(size_t nkey, size_t vlen);  /* header+key+value+2 */

static inline bool item_is_flash(struct item *it) { return item_iflags(it) & ITEM_FLASH; }
static inline char *item_key(struct item *it) { return it->data; }
static inline char *item_value(struct item *it) { return it->data + item_nkey(it); }
static inline uint32_t item_vlen(const struct item *it) { return it->nbytes - 2; }

/*
 * A value's bytes as pieces of contiguous memory, in order: one piece for
 * most items; one per chunk for a chained item, a value larger than the
 * largest class's chunk (-o slab_chunk_max; storage/item_chain.c). Code
 * outside storage reads and fills values through these, never through
 * item_value() alone. The spans cover value bytes [off, off + len).
 */
struct item_spans {
    struct item *it;
    uint32_t     pos, end;      /* value offsets: next byte, end */
    uint32_t     next;          /* the next body chunk's handle */
    uint32_t     base;          /* value offset where that chunk starts */
    bool         chained;
};
void  item_spans_begin(struct item_spans *si, struct item *it, uint32_t off, uint32_t len);
/* The next piece (*p, *n > 0); false after the last. */
bool  item_spans_next(struct item_spans *si, char **p, uint32_t *n);
/* Copy n bytes into the value at off. */
void  item_value_write(struct item *it, uint32_t off, const void *src, uint32_t n);
/*
 * A slab of the body class is being emptied and body chunk b of head h is
 * in it: copy b into a free chunk of the body class and link the copy in
 * its place (h's partition lock, h's class lock and the body class's held,
 * h linked and unreferenced). false if the class has no free chunk.
 */
bool    item_chain_rescue_body_locked(struct item *h, struct item *b);
/* An item of this shape is chained (-o slab_chunk_max), and the class
 * of its body chunks (0: nothing is chained). */
bool    item_chains(size_t nkey, uint32_t vlen);
uint8_t item_chain_class(void);
/* Whether a chained value's head was ever taken from cls (a fixed class). */
bool    item_chain_head_class_used(uint8_t cls);

/*
 * Allocate an unlinked item able to hold vlen value bytes plus "\r\n"
 * without evicting anything live: a dead item at the class's CLOCK hand,
 * a free chunk, or a fresh slab while under the memory limit. Anything
 * more (asking the eviction policies) is the cache layer's (cache.h):
 * storage never calls eviction. ITEM_NO_MEMORY or ITEM_TOO_LARGE.
 */
item_status_t item_alloc_try(const char *key, size_t nkey, uint32_t flags,
                             rel_time_t exptime, uint32_t vlen, struct item **out);
/*
 * After ITEM_NO_MEMORY: the class to make room in, and (*n) how many of
 * its chunks are wanted (a chained item takes several of the largest
 * class's). A hint read without locks.
 */
uint8_t       item_alloc_lacks(size_t nkey, uint32_t vlen, uint32_t *n);
/*
 * Then, for a chained item: its other class (the head's, or the bodies')
 * when that one holds its own part free, or 0. Memory for the class that
 * lacks must not come from it: taken, it would be taken back at once and
 * the two would trade one slab until the set gave up. One lacking its
 * part too may give (it is then spared in its turn).
 */
uint8_t       item_alloc_spare(size_t nkey, uint32_t vlen, uint8_t lacks);
/* The slab class an item of this shape goes to; 0 if none can hold it. */
uint8_t       item_class_of(size_t nkey, uint32_t vlen);
/*
 * Whether cls's only slab may go without a first slab carved for it again
 * at once: its items are placed by size (not the chained values' bodies
 * or heads, nor the flash stubs, whose classes are fixed) and a larger
 * class of its group holds a slab (slab_class_homed).
 */
bool          item_class_homed(uint8_t cls);
/*
 * When the latest whole slab's worth of cls's own evictions (live items its
 * CLOCK or probation FIFO dropped for room) began, in clock_now_ms() time;
 * 0 before the class has evicted a slab's worth. At least a slab's worth
 * of its items went after that moment: the evidence, where no read
 * measures anything, that the class needs more memory than it holds.
 */
uint64_t      item_class_overflow_ms(uint8_t cls);
/* Count an allocation that failed even after eviction (outofmemory). */
void          item_note_outofmemory(uint8_t cls);
void          item_release(struct item *it);

/*
 * Operations that build a new item from a stored one (append/prepend, incr
 * past the old length) or create one on a miss (mg N) first take a free
 * chunk under the key's partition lock. Finding none, they must not evict
 * there (emptying a slab takes partition locks, perhaps this one), so with
 * an item_rebuild they pin the stored item, unlock and answer
 * ITEM_NEED_MEMORY: the caller allocates rb->vlen bytes for rb->key (with
 * eviction, holding no lock: cache.c) into rb->fresh and calls again with
 * the same rb. That call links the new item if the pinned one is still
 * the key's (ITEM_OK), or drops both and answers ITEM_RETRY. With a NULL
 * rb the operation is one attempt and ITEM_NEED_MEMORY is ITEM_NO_MEMORY.
 */
struct item_rebuild {
    struct item *old;           /* the stored item, pinned */
    struct item *fresh;         /* in: the caller's allocation */
    const char  *key;           /* allocate this */
    size_t       nkey;
    uint32_t     flags;
    rel_time_t   exptime;
    uint32_t     vlen;
    bool         need;          /* an allocation is wanted */
    uint8_t      cls;           /* out: the class a chunk was taken from */
};
/* Give back the references a rebuild holds. */
void          item_rebuild_drop(struct item_rebuild *rb);

/*
 * Store a filled item (its value ends in "\r\n") with memcached's
 * semantics for op. cas_in is the client's value for ITEM_OP_CAS.
 * Does not consume the caller's reference. One attempt (rb NULL).
 */
item_status_t item_store(struct item *it, item_store_op_t op, uint64_t cas_in);

/*
 * The meta set's additions (ms): with has_cas (flag C), set and replace
 * become a cas (a cas of 0 matches nothing) and append/prepend answer
 * ITEM_EXISTS on a mismatch of a nonzero cas; with stale_ok (flag I) a cas
 * older than the item's still stores, keeping the old TTL and marked
 * stale. cas_out: the stored item's CAS (0 if not stored).
 */
struct item_store_meta {
    bool     has_cas;
    uint64_t cas;
    bool     stale_ok;
    bool     key_binary;
    bool     has_cas_in;        /* E: the stored item's CAS is cas_in */
    uint64_t cas_in;
    bool     keep_cas;          /* else the replaced item's (md x) */
    uint64_t cas_out;
    uint32_t vlen_out;          /* the stored value's length (append: joined) */
};
item_status_t item_store_meta(struct item *it, item_store_op_t op,
                              struct item_store_meta *m, struct item_rebuild *rb);

/*
 * Meta delete (md): compare the CAS first when has_cas (ITEM_EXISTS on a
 * mismatch); with stale, mark the item stale with a new CAS (*cas_in if
 * given, meta E) and new TTL if new_ttl, instead of removing it. *cls and
 * *vlen as item_delete().
 */
item_status_t item_meta_delete(const char *key, size_t nkey, bool has_cas,
                               uint64_t cas, bool stale, bool new_ttl,
                               rel_time_t exptime, const uint64_t *cas_in,
                               uint8_t *cls, uint32_t *vlen);

/* Meta arithmetic (ma): item_arith() with a CAS compare and a new TTL. */
struct item_arith_meta {
    uint64_t   cas;             /* compare first; 0: none (C) */
    bool       has_cas_in;      /* E: the result's CAS is cas_in */
    uint64_t   cas_in;
    bool       touch;           /* T: set exptime on success */
    rel_time_t exptime;
    /* out, on ITEM_OK */
    uint64_t   cas_out;
    rel_time_t exptime_before;  /* before T changed it */
    rel_time_t exptime_out;
    uint32_t   vlen_out;        /* the digits (memcached answers them alone) */
};
item_status_t item_arith_meta(const char *key, size_t nkey, bool incr,
                              uint64_t delta, uint64_t *result, uint8_t *cls,
                              struct item_arith_meta *m, struct item_rebuild *rb);

/* me: the item's figures, changing nothing. false on a miss. */
struct item_debug {
    rel_time_t exptime;
    rel_time_t time;
    uint64_t   cas;
    bool       fetched;
    bool       key_binary;
    uint8_t    cls;
    uint32_t   ntotal;
};
bool          item_debug(const char *key, size_t nkey, struct item_debug *out);

/*
 * A stub's read (flash.h): the record's location and what identifies it
 * (key, length; and the stub's CAS, which item_flash_promote asks of the
 * stub later), for a fetch that holds a reference to the stub and found
 * it by key (a stub keeps no key of its own). false for an item that is
 * not a stub.
 */
struct flash_read;
bool          item_flash_read_init(struct item *it, const char *key, size_t nkey,
                                   struct flash_read *r);
/*
 * Evictions that found no chunk for a stub (flash tier on) name the class
 * the stub needed: the cache layer makes room there (cache.c) so later
 * evictions can keep their items on flash. 0: none wanted.
 */
uint8_t       item_flash_stub_wanted(void);
/* Bytes of a stub's chunk (any key): the class slab_add_small_class()
 * adds when the flash tier is on. */
size_t        item_stub_size(void);
/* The class flash stubs go to; 0 while the flash tier is off. */
uint8_t       item_stub_class(void);
/* Once the flash tier is set up: offer the records of a flash slab about
 * to be reclaimed back to the items (read ones are written again). */
void          item_flash_attach(void);
/*
 * -o ext_item_age=N: a thread writes items idle more than N seconds to
 * flash (they become stubs) once a second, before memory runs out; -1 if
 * the flash tier is off or the thread could not start. Stopped before the
 * flash tier is torn down.
 */
int           item_flash_age_start(uint32_t min_idle);
void          item_flash_age_stop(void);
/* At run time (the `extstore item_age` command): a new age, the thread
 * started or (UINT32_MAX) stopped as needed; -1 if it cannot start. */
int           item_flash_age_set(uint32_t min_idle);
/*
 * Does key still name the stub of this CAS and value length pointing at
 * loc? A look before item_flash_promote's allocation, which a copy made
 * meanwhile (another read of the key) would waste.
 */
struct flash_loc;
bool          item_flash_is_at(const char *key, size_t nkey, uint64_t cas, uint32_t nbytes,
                               const struct flash_loc *loc);
/*
 * Copy a flash-resident item back to RAM (ext_recache_rate,
 * ext_recache_hot): fresh, filled with its key and value, replaces the
 * stub if the key still names the stub of that CAS pointing at the record
 * read (from), keeping CAS, flags and TTL. ITEM_NOT_STORED if the key
 * changed meanwhile. Does not consume the caller's reference.
 */
item_status_t item_flash_promote(struct item *fresh, uint64_t cas,
                                 const struct flash_loc *from);

/* Unlink whatever is stored under key (used after a failed set). */
void          item_unlink_key(const char *key, size_t nkey);

/* Why item_get() missed, for get_expired / get_flushed /
 * miss_from_extstore. */
typedef enum item_miss {
    ITEM_MISS_NONE,             /* hit, or simply absent */
    ITEM_MISS_EXPIRED,
    ITEM_MISS_FLUSHED,
    ITEM_MISS_FLASH_GONE,       /* a stub whose flash record was reclaimed */
} item_miss_t;

/*
 * Fetch with a reference, or NULL. touch: also set exptime (gat).
 * *miss (may be NULL) tells whether a dead item was found and dropped.
 */
struct item  *item_get(const char *key, size_t nkey, bool touch,
                       rel_time_t exptime, item_miss_t *miss);

/*
 * Batched lookups (multi-gets): item_probe_prefetch() hashes n keys and
 * warms the cache lines their lookups will read, in two rounds (every
 * bucket, then every chain's first item), so the DRAM misses of the n
 * keys overlap instead of queueing; item_get_probed() is then item_get()
 * for one of them, without hashing again. Prefetching changes nothing.
 */
struct item_probe {
    const char     *key;
    size_t          nkey;
    uint32_t        hv;
    const uint32_t *slot;       /* its bucket, for the second round */
};
void          item_probe_prefetch(struct item_probe *p, size_t n);
struct item  *item_get_probed(const struct item_probe *p, bool touch,
                              rel_time_t exptime, item_miss_t *miss);
/*
 * What a lookup of key finds, changing nothing (no reference, no bump, a
 * dead item left for whoever looks next): for the `watch fetchers` line
 * memcached writes when a store, delete, touch or incr looks its key up.
 * true with *cls and *vlen when live; else *miss says why not.
 */
bool          item_peek(const char *key, size_t nkey, item_miss_t *miss,
                        uint8_t *cls, uint32_t *vlen);
/*
 * A meta get (mg): one lookup under the partition lock that can also
 * touch (T), create an empty item on a miss (N, vivify), and hand out a
 * recache win (R, or a stale item's first reader). The figures a client
 * may ask for are read before this request changes them.
 */
struct item_meta_get {
    bool       bump;            /* false: flag u, no LRU bump */
    bool       touch;           /* T */
    rel_time_t exptime;
    bool       vivify;          /* N */
    rel_time_t vivify_exptime;
    bool       recache;         /* R */
    rel_time_t recache_time;
    bool       key_binary;      /* b: a vivified item keeps its key binary */
    bool       vivify_last;     /* N sent after T: a created item keeps N's TTL */
    bool       has_cas_in;      /* E: a created item's CAS is cas_in */
    uint64_t   cas_in;
    /* out */
    bool       fetched;         /* read before */
    rel_time_t exptime_before;  /* before T changed it */
    rel_time_t time;            /* last access (store or CLOCK rescue) */
    bool       token_sent;      /* a win was handed out before */
    bool       stale;
    bool       won;             /* this reader is to recache */
    bool       created;         /* vivified by this request */
};
/* A vivify that found no free chunk returns NULL with rb->need set. */
struct item  *item_meta_get(const char *key, size_t nkey, struct item_meta_get *m,
                            item_miss_t *miss, struct item_rebuild *rb);

/* On ITEM_OK, *cls (may be NULL) is the item's class, for per-class stats. */
item_status_t item_touch(const char *key, size_t nkey, rel_time_t exptime,
                         uint8_t *cls);
/* item_delete: on ITEM_OK also *vlen (may be NULL), the value's length. */
item_status_t item_delete(const char *key, size_t nkey, uint8_t *cls, uint32_t *vlen);
/* One attempt (see struct item_rebuild). */
item_status_t item_arith(const char *key, size_t nkey, bool incr,
                         uint64_t delta, uint64_t *result, uint8_t *cls);

/* flush_all: invalidate items stored before now + delay seconds. */
void          item_flush(int64_t delay);

/*
 * For eviction policies (the `lru` policy): free up to max items of class
 * cls at its CLOCK hand under one lock hold, giving items read since the
 * hand last passed a second chance. With evict_live false only expired
 * or flushed items are reclaimed. Returns the chunks freed into the class.
 */
uint32_t      item_clock_pull(uint8_t cls, bool evict_live, uint32_t max);

typedef enum item_slab_status {
    ITEM_SLAB_OK,       /* emptied and re-carved for the target class */
    ITEM_SLAB_BUSY,     /* an item in it is referenced: left alone */
    ITEM_SLAB_UNOWNED,  /* not assigned (in transit) or no such slab */
} item_slab_status_t;

/*
 * For slab-level policies: empty slab sid and re-carve it for class cls.
 * Its items read since the CLOCK hand last passed are moved to other
 * chunks of their class when slab rescue is on (the class's coldest items
 * go instead); the rest are dropped. A slab holding any referenced item
 * (being read, written or filled) is never touched under its user:
 * ITEM_SLAB_BUSY.
 */
item_slab_status_t item_slab_evict(uint32_t sid, uint8_t cls);
/* The same, but the emptied slab's memory goes back to the system
 * (slab_release) instead of to a class. */
item_slab_status_t item_slab_release(uint32_t sid);
/* The same, but the emptied slab stays within -m, in the global pool
 * (slab_pool_keep) for whichever class needs a slab next. */
item_slab_status_t item_slab_pool(uint32_t sid);
/* -o slab_rescue=0|1 (default 1). */
/*
 * Warm restart (restart.h). item_state_save/restore: what the items are
 * judged by besides themselves (the CAS counter, the flush_all point).
 * item_restore(): after slab_restore_table() gave nslabs slabs back, and
 * item_state_restore() and the clock their times, relink every whole item
 * whose time has not passed and free the other chunks (item_restore.c).
 */
struct item_state {
    uint64_t   cas_seq;
    rel_time_t oldest_live;
    uint64_t   oldest_cas;
};
struct item_restored {
    uint64_t items;     /* relinked */
    uint64_t stubs;     /* of them, flash stubs */
    uint64_t bytes;
    uint64_t expired;   /* expired or flushed while stopped or before */
    uint64_t broken;    /* not whole: dropped */
    uint64_t max_cas;
};
void          item_state_save(struct item_state *out);
void          item_state_restore(const struct item_state *in);
void          item_restore(uint32_t nslabs, struct item_restored *out);
/* -o temporary_ttl: items stored with a TTL of at most seconds are not
 * evicted, only expire (memcached's temporary LRU); 0: off. */
void          item_set_temporary_ttl(uint32_t seconds);
void          item_set_slab_rescue(bool on);
bool          item_slab_rescue(void);
/*
 * memcached's LRU without its segments (-o no_modern, no_lru_maintainer):
 * a read marks an item for the CLOCK's second chance only if it was last
 * stored or marked over ITEM_LEGACY_BUMP_S ago (memcached's
 * ITEM_UPDATE_INTERVAL), and new items go on no probation.
 */
#define ITEM_LEGACY_BUMP_S 60
void          item_set_legacy_lru(bool on);
/*
 * Probation (item_clock.c): each class's newest items, about a tenth of its
 * chunks, in a FIFO; the oldest never read go first (item_clock_pull
 * judges them before the CLOCK hand moves).
 */
/* Bytes of the classes' probation FIFOs (item_clock.c), outside -m. */
uint64_t      item_probation_bytes(void);
/* Items linked in class cls now. */
uint64_t      item_class_items(uint8_t cls);

/*
 * Walking the live items (lru_crawler metadump, stats cachedump): a cursor
 * over the slab table, resumable between calls so a dump of any size is
 * written in pieces as the client reads it. Items stored or moved during
 * the walk may be missed; none is reported twice unless its slab is
 * re-carved under the cursor.
 */
struct item_cursor {
    uint32_t sid;
    uint32_t idx;
};

struct item_dump {
    char       key[256];
    uint8_t    nkey;
    uint8_t    cls;
    bool       fetched;
    rel_time_t exptime;         /* 0 = never */
    rel_time_t time;            /* last store (the CLOCK's access time) */
    uint64_t   cas;
    uint32_t   vlen;            /* value bytes */
    uint32_t   flags;           /* client flags */
    size_t     total;           /* header + key + value */
    bool       key_binary;      /* stored with meta b: shown base64 */
    /* A flash item: its stub keeps no key, so key is not filled in (nkey
     * is its length); item_dump_read_init() sets up the read of its
     * record, item_dump_key_read() takes the key from it. */
    bool       stub;
    struct flash_loc loc;
    uint32_t   hv, fp;          /* the key's hashes, which the stub keeps */
};

/*
 * The next live item of a class in `classes` (a 256-bit set indexed by
 * class id) at or after *cur, copied under its partition lock; false when
 * the walk is over. Advances *cur past it.
 */
bool          item_dump_next(struct item_cursor *cur, const uint64_t classes[4],
                             struct item_dump *out);
/* A stub's record read (flash.h: key_only, so dst is not written): the
 * caller says how it is done (done, or flash_read_sync). */
void          item_dump_read_init(const struct item_dump *d, struct flash_read *r);
/* The read done: true, with d->key filled in, if it brought back the
 * stub's key (a record reclaimed meanwhile, or another key of the same
 * hashes: false, the item is not listed, as one moved during the walk). */
bool          item_dump_key_read(struct item_dump *d, const struct flash_read *r);

/*
 * Called for every live item evicted (by the CLOCK or with its slab), with
 * its partition and class locks held: it may read the item and must take
 * no storage lock. How `watch evictions` sees evictions without storage
 * knowing about watchers.
 */
typedef void (*item_evict_hook_fn)(struct item *it, rel_time_t now);
void          item_set_evict_hook(item_evict_hook_fn fn);

/*
 * Called on every reference to a key, under its partition lock: a get
 * that found a live item of cls (ITEM_REF_HIT), a get that found nothing
 * (ITEM_REF_MISS, cls 0), an item of cls linked by a store
 * (ITEM_REF_STORE). cls is the class whose memory holds the item (a
 * chained item's body class). hv is the key's hash.
 * It must take no storage lock. How the allocator measures what memory
 * earns in each class (evict/sizing.h) without storage knowing of it.
 */
typedef enum item_ref {
    ITEM_REF_HIT,
    ITEM_REF_MISS,
    ITEM_REF_STORE,
} item_ref_t;
typedef void (*item_ref_hook_fn)(uint32_t hv, uint8_t cls, item_ref_t kind);
void          item_set_ref_hook(item_ref_hook_fn fn);

/*
 * The LRU crawler's step (lru_crawler crawl): look at up to max chunks of
 * the selected classes from *cur on, unlinking the expired and flushed
 * items found, each under its own partition lock, so requests never wait
 * for more than one item. Returns false when the walk is over.
 */
bool          item_crawl_step(struct item_cursor *cur, const uint64_t classes[4],
                              uint32_t max);
/* Per class: items the crawler unlinked, and linked items it looked at. */
uint64_t      item_crawler_reclaimed(uint8_t cls);
uint64_t      item_crawler_checked(uint8_t cls);

void          item_get_stats(struct item_stats *out);
void          item_class_stats(uint8_t cls, struct item_class_stats *out);
void          item_reset_stats(void);

#endif
