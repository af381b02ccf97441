/*
 * assoc.h -- the key -> item hash table, partitioned under striped locks.
 *
 * The table is split into ASSOC_PARTITIONS independent sub-tables chosen
 * by the low bits of the key hash. Each has its own lock and bucket array
 * and doubles on its own when its load factor passes 1.5, so growth
 * stalls only the 1/ASSOC_PARTITIONS of keys that share that lock, for
 * the time it takes to rehash that slice. The partition lock is also the
 * item lock: whoever holds it may read and change the items it indexes.
 */
#ifndef SC_ASSOC_H
#define SC_ASSOC_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define ASSOC_PARTITIONS 1024

struct item;

int          assoc_setup(uint32_t hashpower);
void         assoc_teardown(void);

void         assoc_lock(uint32_t hv);
void         assoc_unlock(uint32_t hv);
int          assoc_trylock(uint32_t hv);   /* 0 on success */

/* The following require assoc_lock(hv) held. */
struct item *assoc_find(const char *key, size_t nkey, uint32_t hv);
/* it is in hv's chain (partition lock held): found by address, so a stub,
 * which keeps no key, too. */
bool         assoc_has(const struct item *it, uint32_t hv);
/* Another entry than except that matches key (a flash stub of the same
 * hashes, item_int.h), or NULL. */
struct item *assoc_find_other(const char *key, size_t nkey, uint32_t hv,
                              const struct item *except);
void         assoc_insert(struct item *it, uint32_t hv);
void         assoc_delete(struct item *it, uint32_t hv);
/* Put to where old was in its chain (an item moved to another chunk);
 * false (nothing changed) if old is not in the table. */
bool         assoc_replace(struct item *old, struct item *to, uint32_t hv);

/*
 * Batched lookups (multi-gets) warm the cache for many keys before
 * locking any: assoc_prefetch_bucket() prefetches hv's bucket and returns
 * its slot, assoc_prefetch_head() then prefetches the slot's first item.
 * Neither locks nor changes anything, and the slot stays readable even if
 * the partition doubles meanwhile (old arrays are kept until teardown): a
 * stale slot costs a useless prefetch, never a wrong answer, since the
 * lookup itself is assoc_find() under the lock.
 */
const uint32_t *assoc_prefetch_bucket(uint32_t hv);
void         assoc_prefetch_head(const uint32_t *slot);

uint64_t     assoc_buckets(void);          /* total buckets, all partitions */
/* memcached's hash_power_level: partitions double one at a time, so the
 * power of two nearest the buckets (2^17 keys make it 17 as in memcached,
 * even while a few partitions have not doubled yet). */
uint32_t     assoc_power(void);
uint64_t     assoc_retired_buckets(void);  /* in replaced arrays kept for prefetches */
uint64_t     assoc_expansions(void);

#endif
