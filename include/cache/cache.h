/*
 * cache.h -- memcached's command semantics over storage and eviction:
 * allocate, else reclaim, else evict, retry; and the operations that
 * allocate (stores, append/prepend, incr/decr, mg's vivify).
 *
 * Why a layer of its own: storage (item.h) only tries (a free chunk, a
 * dead item at the CLOCK hand, a fresh slab under -m) and never calls
 * eviction; eviction (evict.h) only uses storage. Here the two meet, with
 * no lock held, so "nothing allocates under a partition lock" follows from
 * the structure: storage hands a rebuild back (struct item_rebuild) rather
 * than allocating under its lock. The dispatcher calls these for every
 * command that stores; reads go to storage directly.
 */
#ifndef SC_CACHE_H
#define SC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "item.h"

/*
 * An unlinked item for vlen value bytes: storage's try, then the eviction
 * policies (evict_run) and a retry; ITEM_NO_MEMORY (counted as the class's
 * outofmemory) when they give nothing twice. Wakes the background evictor
 * when the class runs low while memory is full.
 */
item_status_t cache_alloc(const char *key, size_t nkey, uint32_t flags,
                          rel_time_t exptime, uint32_t vlen, struct item **out);
/* The same, never waiting for the flash writer (an eviction may then drop
 * an item the writer has no room for), and a failure is not counted in
 * outofmemory: for work done on a worker's behalf that should not stall
 * its loop and may be given up (copying a flash item back). */
item_status_t cache_alloc_nowait(const char *key, size_t nkey, uint32_t flags,
                                 rel_time_t exptime, uint32_t vlen, struct item **out);

/* item_store()/item_store_meta() with append and prepend completed under
 * memory pressure. */
item_status_t cache_store(struct item *it, item_store_op_t op, uint64_t cas_in);
item_status_t cache_store_meta(struct item *it, item_store_op_t op,
                               struct item_store_meta *m);

/* item_arith()/item_arith_meta() with a grown counter completed. */
item_status_t cache_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
                          uint64_t *result, uint8_t *cls);
item_status_t cache_arith_meta(const char *key, size_t nkey, bool incr,
                               uint64_t delta, uint64_t *result, uint8_t *cls,
                               struct item_arith_meta *m);

/* item_meta_get() whose vivify (N) may evict to create the item. */
struct item  *cache_meta_get(const char *key, size_t nkey, struct item_meta_get *m,
                             item_miss_t *miss);

#endif
