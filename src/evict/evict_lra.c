/*
 * evict_lra.c -- least recently accessed slab: the slab whose items were
 * read or written longest ago is the coldest memory in the cache, so it
 * is the one re-carved for the class that needs memory. A slab's access
 * time (milliseconds, from the kernel's coarse clock) is stored at most
 * once per clock tick (slab_touch), so the bookkeeping costs one relaxed
 * load per request and rarely a store.
 */
#include "evict.h"
#include "slab.h"

static uint64_t
lra_key(const struct slab_info *s)
{
    return s->accessed_ms;
}

static evict_rstatus_t
lra_evict(struct evict_req *req)
{
    return evict_slab_oldest(req, lra_key);
}

const struct evict_policy evict_policy_lra = {
    .name = "lra",
    .slab_level = true,
    .setup = NULL,
    .teardown = NULL,
    .evict = lra_evict,
};
