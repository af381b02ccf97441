/*
 * evict_random.c -- twemcache's random slab eviction: pick a slab
 * uniformly from the append-only slab table (O(1)), drop its items and
 * re-carve it for the class that needs memory. Every pick is used; a busy
 * slab (an item in it is referenced) is skipped and another is drawn.
 */
#include "evict.h"
#include "slab.h"

#define RANDOM_DRAWS_MAX (4 * EVICT_PICKS)   /* draws of spared slabs */

/*
 * Gated (random,lru), a draw of a slab that damping spares is drawn again
 * instead of spending a pick; the only draws not used.
 */
static evict_rstatus_t
random_evict(struct evict_req *req)
{
    uint32_t n = slab_table_count();
    int spared = 0;

    for (int pick = 0; n > 0 && pick < EVICT_PICKS;) {
        uint32_t sid = (uint32_t)(evict_random() % n);
        if (req->damp && evict_slab_last_in_use(sid)) {
            if (++spared < RANDOM_DRAWS_MAX) {
                continue;
            }
            if (!evict_undamp(req)) {
                break;
            }
            continue;
        }
        evict_rstatus_t st = evict_slab(sid, req);
        if (st != EVICT_FAIL) {
            return st;
        }
        pick++;
    }
    return EVICT_FAIL;
}

const struct evict_policy evict_policy_random = {
    .name = "random",
    .slab_level = true,
    .setup = NULL,
    .teardown = NULL,
    .evict = random_evict,
};
