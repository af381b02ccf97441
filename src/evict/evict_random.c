/*
 * evict_random.c -- twemcache's random slab eviction: pick a slab
 * uniformly from the append-only slab table (O(1)), drop its items and
 * re-carve it for the class that needs memory. Every pick is used; a busy
 * slab (an item in it is referenced) is skipped and another is drawn.
 */
#include "evict.h"
#include "slab.h"

static evict_rstatus_t
random_pass(struct evict_req *req)
{
    uint32_t n = slab_table_count();

    for (int pick = 0; n > 0 && pick < EVICT_PICKS; pick++) {
        uint32_t sid = (uint32_t)(evict_random() % n);
        evict_rstatus_t st = evict_slab(sid, req);
        if (st != EVICT_FAIL) {
            return st;
        }
    }
    return EVICT_FAIL;
}

/* Gated (random,lru): if every pick was a slab damping spares and the
 * class holds no slab at all, one more round without damping. */
static evict_rstatus_t
random_evict(struct evict_req *req)
{
    evict_rstatus_t st = random_pass(req);

    if (st == EVICT_FAIL && evict_undamp(req)) {
        st = random_pass(req);
    }
    return st;
}

const struct evict_policy evict_policy_random = {
    .name = "random",
    .slab_level = true,
    .setup = NULL,
    .teardown = NULL,
    .evict = random_evict,
};
