/*
 * evict_lrc.c -- least recently created slab: FIFO by the time a slab was
 * (re)carved. Oblivious to reads, so it suits write-once data whose value
 * lies in its age (e.g. caches of time-ordered feeds).
 *
 * In a stack with an item-level policy after it (gated, e.g. lrc,lru) the
 * oldest slab moves only when the measured allocator says it pays, and a
 * class that holds no slab gets the slab the measurement values
 * least (evict.c: a hot old slab is never the price of a new value size).
 */
#include "evict.h"
#include "slab.h"

static uint64_t
lrc_key(const struct slab_info *s)
{
    return s->created_ms;
}

static evict_rstatus_t
lrc_evict(struct evict_req *req)
{
    return evict_slab_oldest(req, lrc_key);
}

const struct evict_policy evict_policy_lrc = {
    .name = "lrc",
    .slab_level = true,
    .setup = NULL,
    .teardown = NULL,
    .evict = lrc_evict,
};
