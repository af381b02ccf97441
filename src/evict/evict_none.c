/*
 * evict_none.c -- never evict (-M): a set that needs memory fails with
 * "SERVER_ERROR out of memory storing object".
 */
#include "evict.h"

static evict_rstatus_t
none_evict(struct evict_req *req)
{
    (void)req;
    return EVICT_FAIL;
}

const struct evict_policy evict_policy_none = {
    .name = "none",
    .slab_level = false,
    .setup = NULL,
    .teardown = NULL,
    .evict = none_evict,
};
