/*
 * evict_slab.c -- the slab choices every policy stack shares: which slab
 * may move to a class and which stays. A slab of another class that holds
 * nothing goes first (evict_take_empty_slab); a class's only slab stays
 * (the first-slab rule); a slab-level policy followed by an item-level one
 * moves its pick only when the measured allocator says it pays
 * (evict_slab_wanted); a pick of the asking class's own slab judges its
 * items instead (evict_slab_own); slabs of flash stubs are kept while the
 * stubs hold at most half of memory (evict_stubs_kept). The stack itself
 * (evict.c) calls these; the policies call evict_slab() and
 * evict_slab_oldest(), the cache layer evict_slab_for() (a slab for the
 * flash tier's stubs). Here too: the count of victims skipped busy and
 * the policies' random numbers (evict_rand64).
 */
#include "evict.h"
#include "evict_int.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "clock.h"
#include "flash.h"
#include "item.h"
#include "slab.h"

static _Atomic uint64_t skipped_busy;
static _Atomic uint64_t seed_salt;

/*
 * The slab evict_slab_for() last gave a class (the flash tier's stubs,
 * which ask before they run out): empty because it was just given, not
 * because its class does not need it. Taking it back as "empty" at once
 * would pass it around in a circle (a slab move per set),
 * so it is spared for EVICT_GIVEN_MS.
 */
#define EVICT_GIVEN_MS 1000
static _Atomic uint32_t given_sid = SLAB_ID_NONE;
static _Atomic uint64_t given_until_ms;

static bool
slab_just_given(uint32_t sid)
{
    return atomic_load(&given_sid) == sid && atomic_load(&given_until_ms) > clock_now_ms();
}

/* evict_run_sparing's class, for the run under way in this thread. */
static _Thread_local uint8_t run_spare;

void
evict_spare_set(uint8_t cls)
{
    run_spare = cls;
}

static bool
slab_spared(uint32_t sid)
{
    struct slab_info info;

    return run_spare != 0 && slab_table_info(sid, &info) && info.cls == run_spare;
}

/*
 * A slab of another class with nothing allocated in it is free memory
 * carved for the wrong size: moving it evicts nothing, so it goes before
 * any policy is asked to judge victims. Without this a value that grows
 * by appends leaves an empty slab in every class it passes through, and
 * the policies drop live slabs while those sit idle
 * (notes/bench/eviction-history.md).
 * Under the first-slab rule a class's only slab stays; a slab just given
 * and the class a run spares are skipped too.
 */
bool
evict_take_empty_slab(uint8_t cls, uint32_t *freed)
{
    uint32_t sid = 0;

    for (int tries = 0; tries < EVICT_PICKS; tries++, sid++) {
        sid = slab_find_empty(cls, sid);
        if (sid == SLAB_ID_NONE) {
            return false;
        }
        if (evict_slab_last_other(sid, cls) || slab_just_given(sid) || slab_spared(sid)) {
            continue;
        }
        if (slab_move_empty(sid, cls)) {
            evict_auto_note_move();
            *freed = slab_class_perslab(cls);
            return true;
        }
    }
    return false;
}

/*
 * The gate of a slab-level policy followed by an item-level one: the
 * victim moves to cls when the measured allocator says it pays
 * (evict_auto.c: cls's next slab earns more than the victim class's last
 * one, beyond the noise, or the victim's earns nothing measurable and
 * cls has shown its need). Never cls's own slab: the item-level policy
 * frees its coldest items finer.
 */
bool
evict_slab_wanted(uint8_t cls, uint32_t sid)
{
    struct slab_info victim;

    if (!slab_table_info(sid, &victim) || victim.cls == cls || victim.cls == 0) {
        return false;
    }
    return evict_auto_pays(cls, victim.cls, victim.accessed_ms);
}

/*
 * Under the first-slab rule (slab.h), another class's only slab stays:
 * that class would carve another past -m at once, unless its items have a
 * home in a larger class of its group (item_class_homed). A class may
 * always re-carve its own.
 */
bool
evict_slab_last_other(uint32_t sid, uint8_t cls)
{
    struct slab_info victim;

    return slab_first_past_limit() && slab_table_info(sid, &victim) &&
           victim.cls != cls && victim.cls != 0 && slab_class_slabs(victim.cls) == 1 &&
           !item_class_homed(victim.cls);
}

uint8_t
evict_stubs_kept(void)
{
    uint8_t stubs = item_stub_class();

    if (stubs == 0) {
        return 0;
    }
    /* An index of dead stubs (their records reclaimed) is not worth
     * keeping; nor one past half of memory (values need RAM too). Read
     * once per choice: the live-record count takes the flash lock. */
    uint64_t used = flash_objects_used();
    size_t limit = slab_limit(), held = slab_held();
    if (used >= flash_records_live() ||
        used * item_stub_size() * 2 > (limit > held ? limit - held : 0)) {
        return 0;
    }
    return stubs;
}

static bool
slab_kept_by(uint32_t sid, uint8_t cls, uint8_t kept)
{
    struct slab_info victim;

    if (evict_slab_last_other(sid, cls) || slab_spared(sid)) {
        return true;
    }
    return kept != 0 && cls != kept && slab_table_info(sid, &victim) && victim.cls == kept;
}

bool
evict_slab_kept(uint32_t sid, uint8_t cls)
{
    return slab_kept_by(sid, cls, evict_stubs_kept());
}

static bool
slab_owned_by(uint32_t sid, uint8_t cls)
{
    struct slab_info info;

    return slab_table_info(sid, &info) && info.cls == cls;
}

/*
 * The victim is a slab of the class asking: re-carving it for the same
 * class would gain nothing, and could rescue none of its read items (their
 * class's free chunks would have to come from the slab itself), so a class
 * holding one slab lost every item at each slab eviction. Its own memory
 * is judged item by item instead: probation, then the CLOCK hand, which
 * keeps more than judging the slab's items in place (both measured:
 * notes/bench/eviction-history.md). A class with nothing to judge
 * re-carves it.
 */
static evict_rstatus_t
evict_slab_own(uint32_t sid, struct evict_req *req)
{
    uint32_t got = item_clock_pull(req->cls, true, req->batch);

    if (got == 0) {
        return EVICT_DECLINE;   /* nothing to judge: re-carved as before */
    }
    req->freed = got;
    req->sid = sid;
    return EVICT_OK;
}

evict_rstatus_t
evict_slab(uint32_t sid, struct evict_req *req)
{
    if (req->gated && !evict_slab_wanted(req->cls, sid)) {
        return EVICT_DECLINE;
    }
    if (evict_slab_kept(sid, req->cls)) {
        return EVICT_FAIL;
    }
    if (slab_owned_by(sid, req->cls) && evict_slab_own(sid, req) == EVICT_OK) {
        return EVICT_OK;
    }
    switch (item_slab_evict(sid, req->cls)) {
    case ITEM_SLAB_OK:
        evict_auto_note_move();
        req->freed = slab_class_perslab(req->cls);
        req->sid = sid;
        return EVICT_OK;
    case ITEM_SLAB_BUSY:
        atomic_fetch_add_explicit(&skipped_busy, 1, memory_order_relaxed);
        return EVICT_FAIL;
    case ITEM_SLAB_UNOWNED:
        break;
    }
    return EVICT_FAIL;
}

static bool
sid_tried(const uint32_t *tried, int n, uint32_t sid)
{
    for (int i = 0; i < n; i++) {
        if (tried[i] == sid) {
            return true;
        }
    }
    return false;
}

/* O(slabs) scan: one per slab evicted, i.e. per slab-size of writes. */
evict_rstatus_t
evict_slab_oldest(struct evict_req *req,
                 uint64_t (*age_key)(const struct slab_info *))
{
    uint8_t cls = req->cls;
    uint32_t tried[EVICT_PICKS];
    uint32_t n = slab_table_count();
    uint8_t kept = evict_stubs_kept();

    for (int pick = 0; pick < EVICT_PICKS; pick++) {
        uint32_t best = SLAB_ID_NONE;
        uint64_t best_key = UINT64_MAX;
        bool best_own = false;
        for (uint32_t sid = 0; sid < n; sid++) {
            struct slab_info info;
            if (!slab_table_info(sid, &info) || info.cls == 0 ||
                (req->others_only && info.cls == cls) ||
                sid_tried(tried, pick, sid) ||
                slab_kept_by(sid, cls, kept)) {
                continue;       /* another class's only slab stays, stubs too */
            }
            uint64_t key = age_key(&info);
            bool own = info.cls == cls;
            /* On a tie, take memory from another class: cls gains. */
            if (best == SLAB_ID_NONE || key < best_key ||
                (key == best_key && best_own && !own)) {
                best = sid;
                best_key = key;
                best_own = own;
            }
        }
        if (best == SLAB_ID_NONE) {
            break;
        }
        evict_rstatus_t st = evict_slab(best, req);
        if (st != EVICT_FAIL) {
            return st;
        }
        tried[pick] = best;
    }
    return EVICT_FAIL;
}



static uint64_t
accessed_key(const struct slab_info *s)
{
    return s->accessed_ms;
}

evict_rstatus_t
evict_slab_for(uint8_t cls)
{
    struct evict_req req = { .cls = cls, .gated = false, .batch = 1,
                             .others_only = true };
    evict_rstatus_t st = evict_slab_oldest(&req, accessed_key);

    if (st == EVICT_OK) {
        atomic_store(&given_sid, req.sid);
        atomic_store(&given_until_ms, clock_now_ms() + EVICT_GIVEN_MS);
    }
    return st;
}

uint64_t
evict_skipped_busy(void)
{
    return atomic_load(&skipped_busy);
}

uint64_t
evict_rand64(void)
{
    static _Thread_local uint64_t state;

    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* Distinct per thread even when threads start in the same ns. */
        state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                (atomic_fetch_add(&seed_salt, 1) + 1) * 0x9e3779b97f4a7c15ull;
        if (state == 0) {
            state = 0x2545f4914f6cdd1dull;
        }
    }
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dull;
}
