/*
 * slab.h -- slab allocator, slab classes and the append-only slab table.
 *
 * Memory is carved into slabs of settings.item_size_max bytes, at most
 * maxbytes in total. Every slab ever allocated is appended to the slab
 * table and never freed, only reassigned to another class, so eviction
 * policies can name any slab by its index in O(1). Each class has a lock
 * guarding its free list, its slabs and (used by item.c) its CLOCK hand.
 *
 * Slabs live in one reserved address range, slab i at a fixed offset, so
 * a chunk's slab (and so its class) follows from its address, and a chunk
 * can be named by a 32-bit handle: its offset in units of the chunk
 * alignment. Items store neither their slab nor pointers (item.h).
 */
#ifndef SC_SLAB_H
#define SC_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

#define SLAB_CLASS_MAX   200     /* classes are 1..SLAB_CLASS_MAX (uint8_t ids) */
#define SLAB_ID_NONE     UINT32_MAX
#define SLAB_HANDLE_NONE 0u

struct item;

/* Set once by slab_setup(); read on every hash chain step. */
struct slab_arena {
    uintptr_t handle_base;      /* address of handle 0 (never a chunk) */
    unsigned  handle_shift;     /* log2 of the chunk alignment */
};
extern struct slab_arena slab_arena;

static inline uint32_t
slab_handle(const struct item *it)
{
    return (uint32_t)(((uintptr_t)it - slab_arena.handle_base) >> slab_arena.handle_shift);
}

static inline struct item *
slab_handle_item(uint32_t h)
{
    return (struct item *)(slab_arena.handle_base + ((uintptr_t)h << slab_arena.handle_shift));
}

typedef enum slab_rstatus {
    SLAB_OK,
    SLAB_ENOMEM,        /* limit reached or malloc failed */
    SLAB_EINVAL,
} slab_rstatus_t;

/* Per-class figures for `stats slabs`. */
/*
 * `stats slabs` for one class, in memcached's order (printed as N:name by
 * stats.c, followed by the per-class request counters and the slab-move
 * figures). Kinds: VIEW, a figure slab_class_stats() reads under the class
 * lock; ZERO, memcached's field for what slabcache does not have (chunks
 * never carved at a slab's end: a slab is carved whole); MOVE, a field
 * reported with the slab-move figures (STATS_SLAB_EVICT_CLASS, stats.h).
 */
#define SLAB_CLASS_STATS(X)         \
    X(chunk_size,       VIEW)       \
    X(chunks_per_page,  VIEW)       \
    X(total_pages,      VIEW)       \
    X(total_chunks,     VIEW)       \
    X(used_chunks,      VIEW)       \
    X(free_chunks,      VIEW)       \
    X(free_chunks_end,  ZERO)       \
    X(slabs_evicted,    MOVE)       \
    X(slabs_gained,     MOVE)

#define SLAB_STAT_IF_FIELD_VIEW(x)  x
#define SLAB_STAT_IF_FIELD_MOVE(x)  x
#define SLAB_STAT_IF_FIELD_ZERO(x)

struct slab_class_stats {
#define SLAB_STAT_FIELD(name, kind) SLAB_STAT_IF_FIELD_##kind(uint64_t name;)
    SLAB_CLASS_STATS(SLAB_STAT_FIELD)
#undef SLAB_STAT_FIELD
};

/* A slab table entry as seen by eviction policies. */
struct slab_info {
    uint8_t  cls;               /* 0 = not assigned */
    uint64_t created_ms;        /* when it was (re)carved */
    uint64_t accessed_ms;       /* last read or write of one of its items */
    uint32_t used;              /* chunks handed out */
};

/*
 * memcached's item header: its first chunk is this plus -n, each next one
 * -f times the one before (aligned to 8). The server sizes its classes
 * from it, not from slabcache's smaller header (item_total_size), so the
 * same -n and -f give memcached's chunk sizes and class ids.
 */
#define SLAB_MC_HEADER 48
/* memcached's pages are 1 MB whatever -I is, and it has at most 63 classes:
 * what its first pages past -m can take (slab_room). */
#define SLAB_MC_PAGE    ((size_t)1 << 20)
#define SLAB_MC_CLASSES 63
slab_rstatus_t slab_setup(size_t maxbytes, size_t slab_size, double factor,
                          size_t chunk_min, size_t item_header);
/*
 * The same with the largest class's chunk at chunk_max bytes (it divides
 * slab_size), not a whole slab: items larger than it are chained from
 * chunks of that class (item.h, -o slab_chunk_max).
 */
/* Before slab_setup*(): one more class of exactly size bytes (aligned)
 * below the smallest -n gives, if it is smaller (flash stubs). */
void           slab_add_small_class(size_t size);
slab_rstatus_t slab_setup_chunked(size_t maxbytes, size_t slab_size, double factor,
                                  size_t chunk_min, size_t item_header, size_t chunk_max);
void           slab_teardown(void);

/* Class for an item of total size bytes; 0 if it is too large. */
uint8_t  slab_clsid(size_t size);
/*
 * The class such an item is allocated in: its own, unless memory is at
 * the limit and its own class has no slab. Classes are grouped by size
 * (from memcached's first chunk, its 48-byte header plus -n, each group's
 * top SLAB_SHARE times the one before): a class belongs to the group its
 * smallest item fits. The item then goes to the nearest larger class
 * that has a slab, within its own class's group or SLAB_SHARE times the
 * item, and with none, to the group's largest class, whose first slab is
 * granted past the limit (the first-slab rule). Where the room is
 * memcached's first pages (slab_room: small -m, many classes) a class
 * lands here when it gave its only slab away, or when another class's
 * allocation took the room its asking added; where it is -m, also a new
 * class at a full -m. Groups decide which classes may give their only
 * slab (those a larger class of their group can hold); coarser groups
 * leave more slabs free to move, finer ones kept more classes on slabs
 * they could not give (notes/eviction.md).
 */
#define SLAB_SHARE 1.4
uint8_t  slab_clsid_alloc(size_t size);
/*
 * Whether cls's items have a home at the limit without a slab of their
 * own: a larger class of its group holds one (slab_clsid_alloc sends them
 * there). Its only slab may then move without another being carved.
 */
bool     slab_class_homed(uint8_t cls);
uint8_t  slab_class_count(void);          /* highest valid class id */
size_t   slab_size(void);

/* Class lock: protects the class's free list, slab list and CLOCK hand. */
void     slab_lock(uint8_t cls);
int      slab_trylock(uint8_t cls);          /* 0 if taken, as pthread's */
void     slab_unlock(uint8_t cls);

/*
 * Take a free chunk of class cls: from its free list, else from a new
 * slab if the memory limit allows. NULL when neither has one (the caller
 * then reclaims or evicts). The chunk's slab id is stored in *sid.
 */
struct item *slab_alloc(uint8_t cls, uint32_t *sid);
/* slab_alloc() if the class lock is free now, else NULL: for a caller
 * holding another class's lock (the flash tier's stubs). */
struct item *slab_try_alloc(uint8_t cls, uint32_t *sid);
/* A chunk from the free list only (no new slab); caller holds slab_lock(cls). */
struct item *slab_pop_free_locked(uint8_t cls, uint32_t *sid);
/* Return a chunk to its class's free list. Caller holds slab_lock(cls). */
void     slab_free_locked(uint8_t cls, uint32_t sid, struct item *chunk);
void     slab_free(uint8_t cls, uint32_t sid, struct item *chunk);

/* The slab holding a chunk, and the class that slab is carved for. */
uint32_t slab_sid_of(const void *chunk);
uint8_t  slab_cls_of(const void *chunk);

/*
 * CLOCK hand over every chunk of cls's slabs, in slab then address order
 * (item.c's item-level eviction). Caller holds slab_lock(cls). next
 * returns the chunk under the hand and moves it on; peek looks ahead k
 * chunks without moving it. NULL when the class holds no slab.
 */
struct item *slab_clock_next(uint8_t cls);
struct item *slab_clock_peek(uint8_t cls, uint32_t k);

/* Slab table (append-only; a released slab keeps its id). */
uint32_t slab_table_count(void);
uint32_t slab_table_capacity(void);      /* slabs the reserved arena holds */
bool     slab_table_info(uint32_t sid, struct slab_info *out);
void     slab_touch(uint32_t sid);           /* move accessed (coarse ms) */

/*
 * Slab-level eviction support (used by item.c, which owns the items).
 * A slab is emptied by draining it: slab_drain_begin() takes its free
 * chunks off the class free list and makes slab_free_locked() keep any
 * chunk freed later off it too, so nothing new is allocated in the slab
 * while its items are unlinked one by one. Then either
 * slab_drain_finish() unassigns it (all chunks free) or
 * slab_drain_abort() gives its free chunks back to the class.
 */
/* Its class, or 0: not assigned, already draining, or its class would be
 * left with fewer than keep slabs not being drained (checked under the
 * class's lock, so two drains at once cannot both take the last). */
uint8_t      slab_drain_begin(uint32_t sid, uint32_t keep);
void         slab_drain_abort(uint8_t cls, uint32_t sid);
void         slab_drain_finish(uint8_t cls, uint32_t sid);
uint32_t     slab_class_perslab(uint8_t cls);
size_t       slab_class_chunk_size(uint8_t cls);
bool         slab_draining(uint32_t sid);
struct item *slab_chunk(uint32_t sid, uint32_t idx);
/* Chunk idx of slab sid carved for class cls (which may have changed since:
 * the caller validates what it finds there). */
struct item *slab_chunk_in(uint32_t sid, uint8_t cls, uint32_t idx);
/* Carve an unassigned slab for cls (takes the class lock). */
void         slab_attach(uint8_t cls, uint32_t sid);
/*
 * Give an unassigned slab's memory back to the system (madvise): it stays
 * in the table, in a pool that new slabs come from before the table grows,
 * and no longer counts in slab_malloced(). slab_pool_count(): slabs there
 * (memcached's slab_global_page_pool).
 */
void         slab_release(uint32_t sid);
/*
 * Put an unassigned slab in the pool but keep it within -m: carved,
 * resident and counted in slab_malloced(), as memcached's global page pool
 * keeps its pages. A class's next slab comes from these first, with no
 * limit to check. slab_pool_unkeep(): release one of them (slab_release),
 * false if there is none.
 */
void         slab_pool_keep(uint32_t sid);
bool         slab_pool_unkeep(void);
/* Slabs ever put in the pool (a move, as memcached counts slabs_moved). */
uint64_t     slab_pool_kept_total(void);
/* Carve a kept slab for cls (`slabs reassign 0 N`); false if none. */
bool         slab_pool_take(uint8_t cls);
/* Slabs in the pool, released or kept (slab_global_page_pool); kept. */
uint32_t     slab_pool_count(void);
uint32_t     slab_pool_kept(void);

/* Free chunks of cls now (read without the lock: a hint). */
uint64_t     slab_class_free(uint8_t cls);
/* All of the room is carved (pooled slabs included): memcached's
 * "memory limit reached". */
bool         slab_all_carved(void);
/* No new slab fits under the memory limit, and none is kept in the pool. */
bool         slab_at_limit(void);

/*
 * The first slab at or after from that belongs to a class other than
 * except and has no chunk handed out (nothing to evict: its memory is
 * free, just carved for the wrong class), or SLAB_ID_NONE. O(1) while no
 * slab is empty, else a scan of the table. A hint: the slab may be
 * allocated from before slab_move_empty() looks at it again.
 */
uint32_t     slab_find_empty(uint8_t except, uint32_t from);
/*
 * Re-carve slab sid for cls if, checked under its owner's lock, no chunk
 * of it is handed out; false (and nothing changed) otherwise.
 */
bool         slab_move_empty(uint32_t sid, uint8_t cls);

/* Least recent access time of cls's slabs; false if it holds none. */
bool         slab_class_coldest(uint8_t cls, uint64_t *accessed_ms);

/* Slabs held now by cls. */
uint32_t     slab_class_slabs(uint8_t cls);

/* Memory limit at run time (cache_memlimit); slabs past a lowered one are
 * given back by the eviction layer (evict_auto_trim). */
/*
 * memcached's rule for a class's first slab: carved even past the limit,
 * so every active class holds memory of its own (and eviction spares
 * another class's only slab, evict.c). Off after slab_setup(); the server
 * turns it on (-o first_slab_past_limit, default 1). slab_alloc() carves
 * it when asked for a chunk of such a class; the cache layer asks the
 * eviction layer first for an item placed by size, which moves a slab some
 * class can spare and grants one with slab_grow_first() only when none can.
 */
void     slab_set_first_past_limit(bool on);
bool     slab_first_past_limit(void);
/* Carve cls's first slab, past the limit if the rule is on; false if cls
 * holds a slab already, or no slab could be carved. Takes the class lock. */
bool     slab_grow_first(uint8_t cls);
void     slab_set_limit(size_t maxbytes);
size_t   slab_limit(void);
/*
 * Bytes within the limit held by what slabcache keeps beyond memcached:
 * the eviction layer's measurement (sizing.h), set once, and what is
 * booked as it is allocated (the probation FIFOs as they resize, the
 * stats history). Slabs get the limit less the whole slabs these need, to
 * the nearest (slab_held()): -m bounds them with the slabs, within half a
 * slab. The hash table stays outside -m, as memcached's does, so the same
 * -m holds as many items.
 */
void     slab_set_reserve(size_t bytes);
void     slab_book(int64_t delta);
size_t   slab_held(void);
/* What slabs may take: the limit plus a slab for each class given its
 * first slab while the room was full (as memcached's first pages add to
 * its memory), or with first slabs past it what memcached's first pages
 * would take for the classes slab_clsid_alloc() has been asked for (1 MB
 * each, or a slab if smaller) if that is more; 63 classes at most; less
 * slab_held(). Both sets of classes are forgotten by slab_set_limit()
 * (they ask again as they allocate) and kept across a warm restart. */
size_t   slab_room(void);
#define SLAB_ASKED_WORDS ((SLAB_CLASS_MAX + 64) / 64)
#define SLAB_ROOM_WORDS  (2 * SLAB_ASKED_WORDS)    /* asked, then past */
void     slab_room_classes_get(uint64_t out[SLAB_ROOM_WORDS]);
/* NULL: none. */
void     slab_room_classes_set(const uint64_t in[SLAB_ROOM_WORDS]);
size_t   slab_malloced(void);                /* bytes of slabs allocated */
/* What counts against -m: the slabs (pooled ones kept within -m too) and
 * the bookkeeping's whole slabs (slab_held): `total_malloced`, which
 * reaches -m when memory is full, as memcached's does. */
size_t   slab_charged(void);

void     slab_class_stats(uint8_t cls, struct slab_class_stats *out);

/*
 * Warm restart (-e, restart.h). slab_set_file(fd) before slab_setup*():
 * the arena is then a shared mapping of that file (sparse, sized to the
 * reservation), so slabs outlive the process; a released slab's pages are
 * punched out of it. A start that finds a saved table gives it back:
 * slab_restore_table() assigns slab i to cls[i] (0: released, pooled),
 * chunks on no list yet; slab_restore_visit() calls visit on each chunk
 * of a slab; slab_restore_chunks() asks keep of each (true: in use, as
 * allocated; false: onto the free list) and returns how many are in use.
 * slab_restore_handle() tells whether h names a chunk of a restored slab.
 */
typedef bool (*slab_keep_fn)(struct item *chunk, void *arg);
void     slab_set_file(int fd);
bool     slab_restore_table(uint32_t n, const uint8_t *cls);
void     slab_restore_visit(uint32_t sid, slab_keep_fn visit, void *arg);
uint32_t slab_restore_chunks(uint32_t sid, slab_keep_fn keep, void *arg);
bool     slab_restore_handle(uint32_t h);
/* The memory file's slabs written through to it (msync); 0 or -1. */
int      slab_sync(void);

#endif
