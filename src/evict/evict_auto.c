/*
 * evict_auto.c -- memory goes where it earns the most hits, by measurement.
 *
 * The rule, one for every class: a class that needs memory while memory
 * is full takes a slab from another class when its own next slab would
 * earn more than that class's last slab by more than the noise of the two
 * estimates (AUTO_Z standard deviations), asking the classes whose last
 * slabs earn least first; otherwise it reuses its own memory, item by
 * item (the CLOCK, as `lru`). The hits are measured (sizing.h): sampled
 * LRU stack distances per class, in slabs, so "last slab" and "next
 * slab" are the class's hit curve on either side of its current size
 * (pooled with the slabs beside them where one slab holds too few sampled
 * gets), and a 10 KB class and a 100 B class compare per byte (every slab
 * is the same size). A class whose last slab's estimate rests on less
 * than one sampled get, in the short window and the long one, earns
 * nothing: its slab goes to a class that needs memory -- one whose next
 * slab surely earns, or, measuring nothing either, one that has evicted
 * a slab's worth of its own items since that slab was last used. That is
 * how a workload that moves to new keys of a new size (only sets, at
 * first) takes over the memory of the old one, while a few sets past a
 * new class's first slab (which comes past -m, as memcached's first page)
 * move nothing.
 *
 * The pace is the measurement's: nothing moves until a difference stands
 * out of the noise, and then a slab moves at each eviction while it does,
 * since stack distances do not depend on the classes' sizes and the
 * histograms stay valid across moves. The threshold is the hysteresis:
 * two classes whose next and last slabs earn about the same trade nothing.
 *
 * The difference is judged on the short window (sizing.h), which follows
 * a shift, and failing that on the long one, which holds more evidence
 * of a class with a small share of the gets -- but only when the short
 * window points the same way: evidence from before a shift must not
 * undo what the gets since show. Every estimate's noise is at least one
 * sampled get's, so a donor blank in the short window gives a slab there
 * only to a taker that clearly out-earns that.
 *
 * Reading every class's figures costs a lock and a pass over the classes,
 * so they are read at most every AUTO_VIEW_MS, and again after a move.
 */
#include "evict.h"

#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"
#include "item.h"
#include "sizing.h"
#include "slab.h"

#define AUTO_Z        3.0       /* standard deviations a move must stand out by */
#define AUTO_VIEW_MS  10

struct auto_view {
    uint64_t           at_ms;
    uint32_t           slabs[SLAB_CLASS_MAX + 1];
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];        /* short window */
    struct sizing_edge edge_long[SLAB_CLASS_MAX + 1];   /* long window */
    uint8_t            order[SLAB_CLASS_MAX];   /* classes that may give, cheapest first */
    unsigned           n;
};

static pthread_mutex_t  view_lock = PTHREAD_MUTEX_INITIALIZER;
static struct auto_view view;
static _Atomic bool     view_stale = true;
static _Atomic uint64_t moves;

/* A class whose last slab's (pooled) estimate rests on less than one
 * sampled get earns nothing. */
static bool
edge_unmeasured(const struct sizing_edge *e)
{
    return e->last_var <= 0.0 || e->last * e->last < e->last_var;
}

static double
edge_value(uint8_t c)
{
    return edge_unmeasured(&view.edge[c]) ? 0.0 : view.edge[c].last;
}

/*
 * A class may give a slab if it has one that may move: not its only slab
 * under the first-slab rule (it would carve another past -m at once)
 * unless a larger class of its group holds one for its items
 * (item_class_homed), nor a slab of the flash tier's stubs while they are
 * kept (evict_stubs_kept).
 */
static bool
may_give(uint8_t c, uint8_t stubs)
{
    uint32_t keep = slab_first_past_limit() ? 1 : 0;

    if (c == stubs || view.slabs[c] == 0) {
        return false;
    }
    return view.slabs[c] > keep || item_class_homed(c);
}

static void
view_refresh(uint64_t now)
{
    unsigned ncls = slab_class_count();
    uint8_t stubs = evict_stubs_kept();

    for (unsigned c = 1; c <= ncls; c++) {
        view.slabs[c] = slab_class_slabs((uint8_t)c);
    }
    sizing_edges(view.slabs, view.edge, ncls, SIZING_SHORT);
    sizing_edges(view.slabs, view.edge_long, ncls, SIZING_LONG);
    view.n = 0;
    for (unsigned c = 1; c <= ncls; c++) {
        if (!may_give((uint8_t)c, stubs)) {
            continue;
        }
        double v = edge_value((uint8_t)c);
        unsigned i = view.n++;
        while (i > 0 && edge_value(view.order[i - 1]) > v) {
            view.order[i] = view.order[i - 1];
            i--;
        }
        view.order[i] = (uint8_t)c;
    }
    view.at_ms = now;
    atomic_store(&view_stale, false);
}

/* Lock the view, read anew if a move made it stale or it is old. */
static void
view_take(void)
{
    uint64_t now = clock_now_ms();

    pthread_mutex_lock(&view_lock);
    if (atomic_load(&view_stale) || now >= view.at_ms + AUTO_VIEW_MS) {
        view_refresh(now);
    }
}

/* How far to's next slab out-earns from's last; *sure: beyond the noise. */
static double
edge_gain(const struct sizing_edge *to, const struct sizing_edge *from, bool *sure)
{
    double d = to->next - from->last;

    *sure = d > 0 && d * d > AUTO_Z * AUTO_Z * (to->next_var + from->last_var);
    return d;
}

/*
 * Whether cls's next slab earns more than donor's last, beyond the noise
 * of the short window's estimates or, when the short window leans that
 * way, of the long window's.
 *
 * A donor whose last slab shows no sampled get in the short window reads
 * as earning nothing there, with the noise of one sampled get: a class
 * sampled coarsely, with a small share of the gets, goes blank in the
 * short window now and then while it still earns, and a blank is
 * evidence only against a taker whose next slab earns clearly more than
 * one sampled get's worth (after a shift, the class the load moved to);
 * otherwise the long window decides. Blank in both windows, it earns
 * nothing when the sample knows the donor's keys that deep (they were
 * stored or read since it began): no get behind them is then evidence,
 * whatever the taker earns. A stack known only a few slabs deep says
 * nothing of the slabs past it: after a warm restart every class is full
 * and its keys are not in the sample yet, and taking their slabs would
 * drop what the restart kept.
 */
static bool
move_pays(uint8_t cls, uint8_t donor)
{
    const struct sizing_edge *to = &view.edge[cls], *from = &view.edge[donor];
    bool sure, sure_long;

    if (edge_unmeasured(from) && edge_unmeasured(&view.edge_long[donor])) {
        uint32_t s = view.slabs[donor];
        uint32_t known = s < sizing_depth() ? s : sizing_depth();
        return from->reach + 1.0 >= (double)known;
    }
    if (edge_gain(to, from, &sure) <= 0) {
        return false;
    }
    (void)edge_gain(&view.edge_long[cls], &view.edge_long[donor], &sure_long);
    return sure || sure_long;
}

static bool
donor_tried(uint8_t c, const uint8_t *tried, unsigned ntried)
{
    for (unsigned i = 0; i < ntried; i++) {
        if (tried[i] == c) {
            return true;
        }
    }
    return false;
}

/*
 * The cheapest class, not among the ntried already asked, that should
 * give cls a slab now, or 0. any: whatever cls would earn. The order is
 * by what the last slab earns; a class that does not pass the test is
 * passed over, not the end of the search: a cheaper estimate can be a
 * noisier one (a class measured on a few sampled gets), and a dearer class
 * measured finely may still pay.
 */
static uint8_t
donor_next(uint8_t cls, bool any, const uint8_t *tried, unsigned ntried)
{
    uint8_t donor = 0;

    view_take();
    for (unsigned i = 0; i < view.n; i++) {
        uint8_t c = view.order[i];
        if (c == cls || donor_tried(c, tried, ntried) || (!any && !move_pays(cls, c))) {
            continue;
        }
        donor = c;
        break;
    }
    pthread_mutex_unlock(&view_lock);
    return donor;
}

uint8_t
evict_auto_donor(uint8_t cls, bool any)
{
    return donor_next(cls, any, NULL, 0);
}

static uint64_t newest_given_locked(uint8_t cls, uint8_t donor);

bool
evict_auto_pays(uint8_t cls, uint8_t donor, uint64_t accessed_ms)
{
    view_take();
    bool pays = view.slabs[donor] > 0 && move_pays(cls, donor) &&
                accessed_ms < newest_given_locked(cls, donor);
    pthread_mutex_unlock(&view_lock);
    return pays;
}

/*
 * The time (clock_now_ms()) a slab of donor must have been last used
 * before to go to cls (UINT64_MAX: any slab; 0: none). A donor blank in both
 * windows earns nothing, but a taker whose next slab is not surely worth
 * more (it is blank too: only sets, or new) has shown no need either,
 * and there memcached moves nothing. Its need is its own evictions: it
 * takes a blank donor's slab only once a slab's worth of its items has
 * gone since that slab was last used (item_class_overflow_ms), so a load
 * that moves to new keys of a new size takes the old one's memory after
 * a slab of turnover, and a few sets past a class's first slab do not.
 * Serving beats refusing: asked for any slab at all (nothing of its own
 * to evict), a class takes one.
 */
static uint64_t
newest_given_locked(uint8_t cls, uint8_t donor)
{
    bool sure, sure_long;

    if (!edge_unmeasured(&view.edge[donor]) || !edge_unmeasured(&view.edge_long[donor])) {
        return UINT64_MAX;
    }
    (void)edge_gain(&view.edge[cls], &view.edge[donor], &sure);
    (void)edge_gain(&view.edge_long[cls], &view.edge_long[donor], &sure_long);
    return sure || sure_long ? UINT64_MAX : item_class_overflow_ms(cls);
}

static uint64_t
newest_slab_given(uint8_t cls, uint8_t donor, bool any)
{
    if (any) {
        return UINT64_MAX;
    }
    view_take();
    uint64_t newest = newest_given_locked(cls, donor);
    pthread_mutex_unlock(&view_lock);
    return newest;
}

/* The donor's least recently accessed slab that may move, last used
 * before newest, into cls (0: back to the system). */
static bool
move_from(uint8_t donor, uint8_t cls, uint64_t newest)
{
    uint32_t tried[EVICT_PICKS];
    uint32_t n = slab_table_count();

    for (int pick = 0; pick < EVICT_PICKS; pick++) {
        uint32_t best = SLAB_ID_NONE;
        uint64_t best_ms = UINT64_MAX;
        for (uint32_t sid = 0; sid < n; sid++) {
            struct slab_info info;
            bool seen = false;
            for (int i = 0; i < pick; i++) {
                seen = seen || tried[i] == sid;
            }
            if (seen || !slab_table_info(sid, &info) || info.cls != donor ||
                info.accessed_ms >= best_ms || info.accessed_ms >= newest ||
                evict_slab_kept(sid, cls)) {
                continue;
            }
            best = sid;
            best_ms = info.accessed_ms;
        }
        if (best == SLAB_ID_NONE) {
            return false;
        }
        if (cls == 0 && item_slab_release(best) == ITEM_SLAB_OK) {
            atomic_store(&view_stale, true);
            return true;
        }
        if (cls != 0 && item_slab_evict(best, cls) == ITEM_SLAB_OK) {
            atomic_store(&view_stale, true);
            atomic_fetch_add_explicit(&moves, 1, memory_order_relaxed);
            return true;
        }
        tried[pick] = best;
    }
    return false;
}

/* Donors in order, while they pay (or any: whatever), a few at most;
 * each asked once, though the view may be read anew between them. */
static bool
move_to(uint8_t cls, bool any)
{
    uint8_t tried[EVICT_PICKS];

    for (unsigned k = 0; k < EVICT_PICKS; k++) {
        uint8_t donor = donor_next(cls, any, tried, k);
        if (donor == 0) {
            return false;
        }
        if (move_from(donor, cls, newest_slab_given(cls, donor, any))) {
            return true;
        }
        tried[k] = donor;
    }
    return false;
}

void
evict_auto_trim(void)
{
    uint8_t tried[EVICT_PICKS];
    unsigned ntried = 0;

    for (unsigned k = 0; k < EVICT_PICKS && slab_malloced() > slab_room(); k++) {
        uint8_t donor = donor_next(0, true, tried, ntried);
        if (donor == 0) {
            return;
        }
        if (!move_from(donor, 0, UINT64_MAX)) {
            tried[ntried++] = donor;
        }
    }
}

static evict_rstatus_t
auto_items(struct evict_req *req)
{
    req->freed = item_clock_pull(req->cls, true, req->batch);
    return req->freed > 0 ? EVICT_OK : EVICT_FAIL;
}

/* A class with no slab takes none from another by this rule when it may
 * carve a first one past -m (the stack's first-slab rule then does, as
 * memcached's first page): only under a strict -m. */
static bool
may_take_any(uint8_t cls)
{
    return slab_class_slabs(cls) > 0 || !slab_first_past_limit();
}

bool
evict_auto_first(uint8_t cls, uint32_t *freed)
{
    if (!may_take_any(cls) || !move_to(cls, true)) {
        return false;
    }
    *freed = slab_class_perslab(cls);
    return true;
}

static evict_rstatus_t
auto_evict(struct evict_req *req)
{
    if (move_to(req->cls, false) || auto_items(req) == EVICT_OK) {
        if (req->freed == 0) {
            req->freed = slab_class_perslab(req->cls);
        }
        return EVICT_OK;
    }
    /* Nothing of its own to reuse (a class with no slab under a strict -m,
     * or every item in use): serving beats refusing, the cheapest slab
     * goes. */
    if (may_take_any(req->cls) && move_to(req->cls, true)) {
        req->freed = slab_class_perslab(req->cls);
        return EVICT_OK;
    }
    return EVICT_FAIL;
}

void
evict_auto_note_move(void)
{
    atomic_store(&view_stale, true);
}

/* A new stack with auto in it: nothing cached from before counts. */
static int
auto_setup(void)
{
    atomic_store(&view_stale, true);
    return 0;
}

uint64_t
evict_auto_moves(void)
{
    return atomic_load(&moves);
}

const struct evict_policy evict_policy_auto = {
    .name = "auto",
    .slab_level = true,
    .setup = auto_setup,
    .teardown = NULL,
    .evict = auto_evict,
    .evict_items = auto_items,
};

int
evict_measure_start(void)
{
    if (sizing_enabled()) {
        return 0;
    }
    size_t limit = slab_limit();
    if (sizing_setup(limit, (uint32_t)(limit / slab_size())) != 0) {
        return -1;
    }
    /* -m bounds the measurement too (slab_room: in whole slabs). */
    struct sizing_state sz;
    sizing_state(&sz);
    slab_set_reserve(sz.budget);
    item_set_ref_hook(sizing_ref);
    return 0;
}
