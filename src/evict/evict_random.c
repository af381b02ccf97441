/*
 * evict_random.c -- twemcache's random slab eviction: pick a slab
 * uniformly from the append-only slab table (O(1)), drop its items and
 * re-carve it for the class that needs memory. Every pick is used; a busy
 * slab (an item in it is referenced) is skipped and another is drawn.
 *
 * One change from twemcache: when the draw lands on the requesting
 * class's own slab, a slab of another class is drawn too (uniformly, a
 * bounded number of draws), and it is taken instead if it was accessed no
 * later than the requester's least recently accessed slab. Re-carving its
 * own slab moves no memory to the class; when the workload has moved on
 * (the seed experiment) the other classes' slabs are all colder, and with
 * uniform draws over every slab the newest class stalled short of the
 * slabs the experiment requires. When every class is busy (a steady mixed
 * load) the own pick mostly stands, which keeps uniform draws' balance:
 * always taking another class's slab there lowers the steady hit ratio
 * (notes/bench/eviction-history.md has both measurements).
 */
#include "evict.h"
#include "item.h"
#include "slab.h"

#define RANDOM_REDRAWS 64       /* draws spent looking for another class */

/*
 * Draw a victim into *sid. When the draw is the class's own slab and a
 * colder slab of another class turns up, that one goes into *sid and the
 * own draw into *fallback (tried if the other is busy: with few slabs the
 * redraws keep finding the same one); otherwise *fallback is none.
 */
static void
random_draw(uint8_t cls, uint32_t n, uint32_t *sid, uint32_t *fallback)
{
    struct slab_info info, alt;
    uint64_t own_coldest;

    *sid = (uint32_t)(evict_rand64() % n);
    *fallback = SLAB_ID_NONE;
    if (!slab_table_info(*sid, &info) || info.cls != cls ||
        slab_class_slabs(cls) >= n) {
        return;
    }
    for (int i = 0; i < RANDOM_REDRAWS; i++) {
        uint32_t other = (uint32_t)(evict_rand64() % n);
        if (slab_table_info(other, &alt) && alt.cls != cls && alt.cls != 0) {
            if (slab_class_coldest(cls, &own_coldest) &&
                alt.accessed_ms <= own_coldest) {
                *fallback = *sid;
                *sid = other;
            }
            return;
        }
    }
}

static bool
slab_unassigned(uint32_t sid)
{
    struct slab_info info;

    return slab_table_info(sid, &info) && info.cls == 0;
}

static evict_rstatus_t
random_pass(struct evict_req *req)
{
    uint32_t n = slab_table_count();
    int draws = 0;

    for (int pick = 0; n > 0 && pick < EVICT_PICKS; pick++) {
        uint32_t sid, fallback;
        random_draw(req->cls, n, &sid, &fallback);
        /* Another class's only slab stays, stubs too, and a slab given
         * back to the system belongs to none: draw again (bounded). */
        if ((evict_slab_kept(sid, req->cls) || slab_unassigned(sid)) &&
            draws++ < RANDOM_REDRAWS) {
            pick--;
            continue;
        }
        evict_rstatus_t st = evict_slab(sid, req);
        if (st == EVICT_FAIL && fallback != SLAB_ID_NONE) {
            st = evict_slab(fallback, req);
        }
        if (st != EVICT_FAIL) {
            return st;
        }
    }
    return EVICT_FAIL;
}

/*
 * Alone: if every draw was another class's only slab (most of them, when
 * a small cache has more active classes than slabs), or every pick failed
 * otherwise, the class judges its own items, as a draw of its own slab
 * would have; without it, a set that finds no victim is refused, as many
 * were in a small cache with many active classes
 * (notes/bench/eviction-history.md).
 */
static evict_rstatus_t
random_evict(struct evict_req *req)
{
    evict_rstatus_t st = random_pass(req);

    if (st == EVICT_FAIL && !req->gated && !req->others_only &&
        slab_class_slabs(req->cls) > 0) {
        req->freed = item_clock_pull(req->cls, true, req->batch);
        st = req->freed > 0 ? EVICT_OK : EVICT_FAIL;
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
