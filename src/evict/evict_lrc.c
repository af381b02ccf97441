/*
 * evict_lrc.c -- least recently created slab: FIFO by the time a slab was
 * (re)carved. Oblivious to reads, so it suits write-once data whose value
 * lies in its age (e.g. caches of time-ordered feeds).
 *
 * In a stack with an item-level policy after it (gated, e.g. the default
 * lrc,lru) a slab goes only if it is colder than the requesting class's
 * own coldest memory. A class with no items has nothing to compare, and
 * must get a slab: there the oldest slab could be one whose items are
 * hot (a key appended to every few milliseconds was lost that way, see
 * notes/eviction.md), so the coldest slab goes instead.
 */
#include "evict.h"
#include "item.h"
#include "slab.h"

static uint64_t
lrc_key(const struct slab_info *s)
{
    return s->created_ms;
}

static uint64_t
accessed_key(const struct slab_info *s)
{
    return s->accessed_ms;
}

static evict_rstatus_t
lrc_evict(struct evict_req *req)
{
    if (req->gated && item_class_items(req->cls) == 0) {
        return evict_slab_oldest(req, accessed_key);
    }
    return evict_slab_oldest(req, lrc_key);
}

const struct evict_policy evict_policy_lrc = {
    .name = "lrc",
    .slab_level = true,
    .setup = NULL,
    .teardown = NULL,
    .evict = lrc_evict,
};
