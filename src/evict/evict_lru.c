/*
 * evict_lru.c -- item LRU inside the requesting class (memcached's way):
 * evict the least recently used unreferenced item of that class.
 */
#include "evict.h"
#include "item.h"

static evict_rstatus_t
lru_evict(struct evict_req *req)
{
    req->freed = item_clock_pull(req->cls, true, req->batch);
    return req->freed > 0 ? EVICT_OK : EVICT_FAIL;
}

const struct evict_policy evict_policy_lru = {
    .name = "lru",
    .slab_level = false,
    .setup = NULL,
    .teardown = NULL,
    .evict = lru_evict,
    .evict_items = lru_evict,
};
