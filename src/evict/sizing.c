/*
 * sizing.c -- sampled LRU stack distances per slab class (see sizing.h).
 *
 * Each class keeps its sampled keys on a time line: a key's position is
 * the class's counter when it was last requested, and a Fenwick tree over
 * positions counts the keys requested since any position, so a key's
 * stack distance costs O(log n). When the time line is used up its live
 * keys are renumbered in order (amortised O(1) per request), which is
 * also where it grows or shrinks with the class's share of the sample.
 * Keys are found by their 32-bit hash in a chained table of their own: two
 * sampled keys sharing a hash are counted as one, which only blurs the
 * estimate. One mutex guards it all; only sampled requests take it.
 */
#include "sizing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "slab.h"

#define SZ_NONE     UINT32_MAX
#define SZ_MIN_CAP  8u          /* time-line positions of a class at least */
#define SZ_FULL     (1u << 24)  /* sample thresholds are on 24 bits */
#define SZ_SHIFT_MAX 24u

struct sz_entry {
    uint32_t hv;
    uint32_t next;              /* hash chain, or the free list */
    uint32_t t;                 /* position on its class's time line */
    uint8_t  cls;               /* 0: free */
    uint16_t n;                 /* its gets in the short window, halved with it */
};

struct sz_class {
    uint32_t *fen;              /* Fenwick tree over positions, 1-based */
    uint32_t *slot;             /* entry at each position, or SZ_NONE */
    uint32_t  cap;              /* positions */
    uint32_t  clock;            /* next position */
    uint32_t  low;              /* no entry below this position */
    uint32_t  n;                /* entries */
    uint32_t  rate0;            /* threshold at shift 0 */
    double   *hist;             /* weighted gets by distance in slabs; [depth]: beyond */
    double   *hist_long;        /* the same over the long window; [long_depth]: beyond */
    double    gets;             /* weighted gets, all of them */
    double    cold;             /* weighted gets of keys not in the sample */
    double    hits;             /* hits counted (every one), decayed as hist */
    uint64_t  hits_mark;        /* the tallies' sum when the last short window ended */
    double    hits_sampled;     /* the sample's estimate of the same hits: its
                                   gets that hit, weighted */
};

/*
 * Every hit, counted per class by the thread that served it: the sample
 * weighs a class by the keys it happens to hold, and one hot key sampled
 * (or not) moves a class's estimate of all its gets by a quarter or more
 * (test_sizing `test_curve_is_calibrated_by_counted_hits`). A thread's
 * tally is written only by that thread; others read it at a window's end.
 * Tallies are never freed: one per thread that ever served a get.
 */
struct sz_tally {
    _Atomic uint64_t  hits[SLAB_CLASS_MAX + 1];     /* [0]: the misses */
    struct sz_tally  *next;
};

static pthread_mutex_t  sz_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool     sz_on;
static struct sz_entry *ents;
static uint32_t         nents;
static uint32_t         free_head;
static uint32_t         nused;
static uint32_t        *buckets;
static uint32_t         bucket_mask;
static struct sz_class  classes[SLAB_CLASS_MAX + 1];
static _Atomic uint32_t thresh[SLAB_CLASS_MAX + 1];
static _Atomic uint32_t miss_thresh;
static unsigned         shift;
static uint32_t         depth;          /* slabs followed per class */
static uint32_t         long_depth;     /* by the long histograms: -m's slabs and a pool */
static size_t           budget;
static size_t           bytes;
static uint64_t         window_gets;
static _Atomic uint32_t window_len = SIZING_WINDOW_UNIT;   /* sizing_window_set */
static unsigned         short_windows;  /* since the long histograms last halved */
static double           misses;         /* misses counted (every one), decayed as the hists */
static uint64_t         misses_mark;    /* the tallies' misses when the last short window ended */
static double           gets_decayed;   /* every get counted (hits and misses), decayed so */
static uint64_t         gets_mark;
static _Atomic(struct sz_tally *) tallies;
static _Atomic size_t   tally_bytes;
static _Thread_local struct sz_tally *tally_mine;

/* 24 bits of the hash, mixed so they do not follow the hash table's bucket. */
static inline uint32_t
sample_of(uint32_t hv)
{
    return (hv * 0x9e3779b1u) >> 8;
}

/* Sampled keys per slab of cls's items at the current shift. */
static double
per_slab(uint8_t cls)
{
    return (double)slab_class_perslab(cls) * (double)atomic_load(&thresh[cls]) / SZ_FULL;
}

static double
weight(uint8_t cls)
{
    uint32_t t = atomic_load(&thresh[cls]);

    return t == 0 ? 0.0 : (double)SZ_FULL / t;
}

/* --- Fenwick tree ------------------------------------------------------- */

static void
fen_add(struct sz_class *c, uint32_t t, int32_t delta)
{
    for (uint32_t i = t + 1; i <= c->cap; i += i & (~i + 1)) {
        c->fen[i] += (uint32_t)delta;
    }
}

/* Entries at positions [0, t]. */
static uint32_t
fen_prefix(const struct sz_class *c, uint32_t t)
{
    uint32_t sum = 0;

    for (uint32_t i = t + 1; i > 0; i -= i & (~i + 1)) {
        sum += c->fen[i];
    }
    return sum;
}

/* Renumber the live entries 0..n-1 in order. */
static void
line_pack(struct sz_class *c)
{
    uint32_t k = 0;

    for (uint32_t t = c->low; t < c->clock; t++) {
        uint32_t e = c->slot[t];
        if (e != SZ_NONE) {
            c->slot[k] = e;
            ents[e].t = k++;
        }
    }
    c->clock = k;
    c->low = 0;
}

/* Arrays of want positions for a packed line; false if refused. */
static bool
line_resize(struct sz_class *c, uint32_t want)
{
    uint32_t *slot = malloc((size_t)want * sizeof(*slot));
    uint32_t *fen = malloc(((size_t)want + 1) * sizeof(*fen));

    if (slot == NULL || fen == NULL) {
        free(slot);
        free(fen);
        return false;
    }
    if (c->clock > 0) {
        memcpy(slot, c->slot, (size_t)c->clock * sizeof(*slot));
    }
    free(c->slot);
    free(c->fen);
    c->slot = slot;
    c->fen = fen;
    bytes = bytes - (size_t)c->cap * 8 + (size_t)want * 8;
    c->cap = want;
    return true;
}

/* The Fenwick tree of a packed line, built in O(cap). */
static void
line_rebuild(struct sz_class *c)
{
    if (c->fen == NULL) {
        return;
    }
    memset(c->fen, 0, ((size_t)c->cap + 1) * sizeof(*c->fen));
    for (uint32_t i = 1; i <= c->clock; i++) {
        c->fen[i] += 1;
    }
    for (uint32_t i = 1; i <= c->cap; i++) {
        uint32_t j = i + (i & (~i + 1));
        if (j <= c->cap) {
            c->fen[j] += c->fen[i];
        }
    }
    for (uint32_t t = c->clock; t < c->cap; t++) {
        c->slot[t] = SZ_NONE;
    }
}

static uint32_t
line_want(const struct sz_class *c)
{
    return 2 * c->n + SZ_MIN_CAP;
}

/* Shrink every line to twice its keys: their share of the sample moves. */
static void
lines_fit(void)
{
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        struct sz_class *c = &classes[i];
        if (c->cap > line_want(c)) {
            line_pack(c);
            (void)line_resize(c, line_want(c));
            line_rebuild(c);
        }
    }
}

/*
 * Renumber the live entries in order, resized to room for as many again
 * within the budget. False when that leaves no free position.
 */
static bool
line_compact(struct sz_class *c)
{
    uint32_t want = line_want(c);

    line_pack(c);
    if (want > c->cap && bytes + (size_t)(want - c->cap) * 8 > budget) {
        lines_fit();
    }
    if (want != c->cap && (want < c->cap || bytes + (size_t)(want - c->cap) * 8 <= budget)) {
        (void)line_resize(c, want);
    }
    line_rebuild(c);
    return c->clock < c->cap;
}

/* --- entries ------------------------------------------------------------ */

static uint32_t
entry_find(uint32_t hv)
{
    uint32_t e = buckets[hv & bucket_mask];

    while (e != SZ_NONE && ents[e].hv != hv) {
        e = ents[e].next;
    }
    return e;
}

static void
line_remove(uint32_t e)
{
    struct sz_class *c = &classes[ents[e].cls];

    fen_add(c, ents[e].t, -1);
    c->slot[ents[e].t] = SZ_NONE;
    c->n--;
}

/* Put e on top of cls's stack (e is on no time line); false: no memory. */
static bool
line_push(uint8_t cls, uint32_t e)
{
    struct sz_class *c = &classes[cls];

    if (c->clock == c->cap && !line_compact(c) && c->clock == c->cap) {
        return false;
    }
    ents[e].cls = cls;
    ents[e].t = c->clock++;
    c->slot[ents[e].t] = e;
    fen_add(c, ents[e].t, 1);
    c->n++;
    return true;
}

static void
chain_unlink(uint32_t e)
{
    uint32_t *pp = &buckets[ents[e].hv & bucket_mask];

    while (*pp != e) {
        pp = &ents[*pp].next;
    }
    *pp = ents[e].next;
    ents[e].cls = 0;
    ents[e].next = free_head;
    free_head = e;
    nused--;
}

static void
entry_free(uint32_t e)
{
    if (ents[e].cls != 0) {
        line_remove(e);
    }
    chain_unlink(e);
}

static void
drop_oldest(uint8_t cls)
{
    struct sz_class *c = &classes[cls];

    while (c->low < c->clock && c->slot[c->low] == SZ_NONE) {
        c->low++;
    }
    if (c->low < c->clock) {
        entry_free(c->slot[c->low]);
    }
}

static void
miss_thresh_update(void)
{
    uint32_t top = 0;

    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        uint32_t t = atomic_load(&thresh[i]);
        top = t > top ? t : top;
    }
    atomic_store(&miss_thresh, top);
}

/* The sample outgrew its memory: halve every rate, drop the keys past it. */
static void
shift_up(void)
{
    shift++;
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        atomic_store(&thresh[i], classes[i].rate0 >> shift);
    }
    miss_thresh_update();
    for (uint32_t e = 0; e < nents; e++) {
        uint8_t cls = ents[e].cls;
        if (cls != 0 && sample_of(ents[e].hv) >= atomic_load(&thresh[cls])) {
            entry_free(e);
        }
    }
    lines_fit();
}

/* A new entry for hv on top of cls's stack, or SZ_NONE. */
static uint32_t
entry_new(uint32_t hv, uint8_t cls)
{
    while (free_head == SZ_NONE && shift < SZ_SHIFT_MAX) {
        shift_up();
    }
    if (free_head == SZ_NONE) {
        drop_oldest(cls);
    }
    if (free_head == SZ_NONE || sample_of(hv) >= atomic_load(&thresh[cls])) {
        return SZ_NONE;         /* a shift just excluded this key */
    }
    uint32_t e = free_head, *b = &buckets[hv & bucket_mask];
    free_head = ents[e].next;
    ents[e].hv = hv;
    ents[e].cls = 0;
    ents[e].n = 0;
    ents[e].next = *b;
    *b = e;
    nused++;
    if (!line_push(cls, e)) {
        chain_unlink(e);
        return SZ_NONE;
    }
    /* Past the depth followed, the oldest key leaves: all its gets would
     * fall in the last bucket anyway. */
    if ((double)classes[cls].n > per_slab(cls) * depth + 1) {
        drop_oldest(cls);
    }
    return e;
}

/* --- counted hits ------------------------------------------------------- */

/* A thread whose tally could not be allocated counts here, unread, rather
 * than ask malloc again at every hit (under the key's partition lock). */
static struct sz_tally  tally_unread;

static void
tally_hit(uint8_t cls)
{
    struct sz_tally *t = tally_mine;

    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL) {
            tally_mine = &tally_unread;
            return;
        }
        t->next = atomic_load(&tallies);
        while (!atomic_compare_exchange_weak(&tallies, &t->next, t)) {
        }
        tally_mine = t;
        atomic_fetch_add(&tally_bytes, sizeof(*t));
    }
    uint64_t n = atomic_load_explicit(&t->hits[cls], memory_order_relaxed);
    atomic_store_explicit(&t->hits[cls], n + 1, memory_order_relaxed);
}

static uint64_t
tally_sum(uint8_t cls)
{
    uint64_t sum = 0;

    for (struct sz_tally *t = atomic_load(&tallies); t != NULL; t = t->next) {
        sum += atomic_load_explicit(&t->hits[cls], memory_order_relaxed);
    }
    return sum;
}

/* The hits counted in cls over the short window, decayed as its histogram. */
static double
hits_counted(const struct sz_class *c, uint8_t cls)
{
    return c->hits + (double)(tally_sum(cls) - c->hits_mark);
}

/* Every get counted so far: the misses and every class's hits. */
static uint64_t
tally_gets(void)
{
    uint64_t got = 0;

    for (unsigned i = 0; i <= SLAB_CLASS_MAX; i++) {
        got += tally_sum((uint8_t)i);
    }
    return got;
}

/* --- the histograms ----------------------------------------------------- */

static void
hist_halve(double *h, uint32_t top)
{
    for (uint32_t b = 0; b <= top; b++) {
        h[b] *= 0.5;
    }
}

/* A short window ends; every SIZING_LONG_WINDOWS of them a long one. */
static void
window_halve(void)
{
    bool long_too = ++short_windows >= SIZING_LONG_WINDOWS;

    short_windows = long_too ? 0 : short_windows;
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        struct sz_class *c = &classes[i];
        if (c->hist == NULL) {
            continue;
        }
        hist_halve(c->hist, depth);
        if (long_too) {
            hist_halve(c->hist_long, long_depth);
        }
        uint64_t sum = tally_sum((uint8_t)i);
        double since = (double)(sum - c->hits_mark);
        c->hits_mark = sum;
        c->hits = (c->hits + since) * 0.5;
        c->hits_sampled *= 0.5;
        c->gets *= 0.5;
        c->cold *= 0.5;
    }
    for (uint32_t e = 0; e < nents; e++) {
        ents[e].n >>= 1;
    }
    uint64_t missed = tally_sum(0), got = tally_gets();
    misses = (misses + (double)(missed - misses_mark)) * 0.5;
    misses_mark = missed;
    gets_decayed = (gets_decayed + (double)(got - gets_mark)) * 0.5;
    gets_mark = got;
}

static bool
hist_ready(uint8_t cls)
{
    struct sz_class *c = &classes[cls];

    if (c->hist == NULL) {
        size_t n = (size_t)depth + 1 + long_depth + 1;
        double *h = calloc(n, sizeof(*h));
        if (h == NULL) {
            return false;
        }
        c->hist = h;
        c->hist_long = h + depth + 1;
        c->hits_mark = tally_sum(cls);
        bytes += n * sizeof(*h);
    }
    return true;
}

static void
note_get(uint8_t cls, uint32_t e, bool hit)
{
    struct sz_class *c = &classes[cls];
    double w = weight(cls);

    if (!hist_ready(cls)) {
        return;
    }
    c->gets += w;
    c->hits_sampled += hit ? w : 0.0;
    if (e == SZ_NONE) {
        c->cold += w;
    } else {
        ents[e].n += ents[e].n < UINT16_MAX ? 1 : 0;
        uint32_t dist = c->n - fen_prefix(c, ents[e].t);
        double ps = per_slab(cls);
        double b = ps > 0 ? dist / ps : depth;
        c->hist[b < depth ? (uint32_t)b : depth] += w;
        c->hist_long[b < long_depth ? (uint32_t)b : long_depth] += w;
    }
    if (++window_gets >= (uint64_t)nents / SIZING_WINDOW_DIV * atomic_load(&window_len) /
                         SIZING_WINDOW_UNIT + 1) {
        window_gets = 0;
        window_halve();
    }
}

/* Move e to the top of cls's stack (from whichever it was on). */
static void
entry_touch(uint32_t e, uint8_t cls)
{
    if (ents[e].cls != cls) {
        ents[e].n = 0;          /* its gets so far were another class's */
    }
    if (ents[e].cls != 0) {
        line_remove(e);
    }
    if (!line_push(cls, e)) {
        chain_unlink(e);
    }
}

static void
sample_ref(uint32_t hv, uint8_t cls, item_ref_t kind)
{
    uint32_t s = sample_of(hv);

    if (kind == ITEM_REF_MISS ? s >= atomic_load_explicit(&miss_thresh, memory_order_relaxed)
                            : cls == 0 ||
                              s >= atomic_load_explicit(&thresh[cls], memory_order_relaxed)) {
        return;
    }
    pthread_mutex_lock(&sz_lock);
    /* Again under the lock: a shift may have lowered the threshold since. */
    if (!atomic_load(&sz_on) ||
        (kind != ITEM_REF_MISS && s >= atomic_load(&thresh[cls]))) {
        pthread_mutex_unlock(&sz_lock);
        return;
    }
    uint32_t e = entry_find(hv);
    if (kind == ITEM_REF_MISS) {
        /* A key in the sample: its class is the one it was last seen in
         * (a key in none is only in the counted misses). */
        cls = e != SZ_NONE ? ents[e].cls : 0;
    }
    if (kind != ITEM_REF_STORE && cls != 0) {
        /* A hit on a key not in the sample (or sampled in another class)
         * is a get of unknown distance: counted, then it joins. */
        note_get(cls, e != SZ_NONE && ents[e].cls == cls ? e : SZ_NONE, kind == ITEM_REF_HIT);
    }
    if (e != SZ_NONE && cls != 0) {
        entry_touch(e, cls);
    } else if (cls != 0) {
        (void)entry_new(hv, cls);
    }
    pthread_mutex_unlock(&sz_lock);
}

/* The sample's part first: a class's histograms begin at its first
 * sampled get, and the tally read then must not hold that get's hit. */
void
sizing_ref(uint32_t hv, uint8_t cls, item_ref_t kind)
{
    sample_ref(hv, cls, kind);
    if (kind == ITEM_REF_HIT && cls != 0) {
        tally_hit(cls);
    } else if (kind == ITEM_REF_MISS) {
        tally_hit(0);
    }
}

/* --- queries ------------------------------------------------------------ */

static double
hist_sum(const double *hist, uint32_t top, uint32_t from, uint32_t to)
{
    double sum = 0.0;

    if (hist == NULL) {
        return 0.0;
    }
    to = to > top ? top + 1 : to;
    for (uint32_t b = from; b < to; b++) {
        sum += hist[b];
    }
    return sum;
}

/*
 * The factor that brings cls's short-window estimate to the level its
 * counted hits show: the hits counted over the sample's estimate of the
 * same hits (its sampled gets that hit, weighted); 1 when either is
 * missing. A fixed-hash sample holds some of a class's keys and not
 * others, and which ones moves the estimate of its level (a hot key in
 * the sample or not: a quarter to a third on the four-tenant mix); a
 * ratio estimator takes the level from the count and the shape from the
 * sample. Both sides are the same gets' outcomes, so the factor measures
 * the sample's luck alone, not the policy (CLOCK, not LRU) nor keys the
 * sample has yet to learn (after a warm restart, a restored key's first
 * hit is in both). It levels a class's gets (sizing_gets); the curves
 * are levelled by the counts in curve_fill, and the allocation rule's
 * edges do not read it (their variance is the sample's).
 */
static double
calibration(uint8_t cls)
{
    const struct sz_class *c = &classes[cls];
    double counted = c->hist != NULL ? hits_counted(c, cls) : 0.0;

    return c->hits_sampled > 0.0 && counted > 0.0 ? counted / c->hits_sampled : 1.0;
}

double
sizing_hits(uint8_t cls, uint32_t from, uint32_t to, double *var)
{
    pthread_mutex_lock(&sz_lock);
    double sum = hist_sum(classes[cls].hist, depth, from, to);
    if (var != NULL) {
        *var = sum * weight(cls);
    }
    pthread_mutex_unlock(&sz_lock);
    return sum;
}

/*
 * Whether one slab's sampled gets (n) could come from the same level as
 * the k pooled so far (mean m): their difference within SIZING_POOL_Z
 * standard deviations of a Poisson count at the pooled level (at least
 * one get). Coarse noise (0, 3, 5, 4) pools; a cliff (0, 0, 978) does not.
 */
static bool
pool_level(double n, double m, uint32_t k)
{
    double level = (n + m * k) / (k + 1), d = n - m;

    level = level > 1.0 ? level : 1.0;
    return d * d <= SIZING_POOL_Z * SIZING_POOL_Z * level * (1.0 + 1.0 / k);
}

/*
 * The mean estimated gets per slab over the slabs next to an edge, from
 * `first` outward (down when down, else up) to `end` (exclusive), pooled
 * until they hold SIZING_POOL_GETS sampled gets, reach SIZING_POOL_SLABS
 * slabs or meet a slab at another level (pool_level: a class's dead last
 * slabs are not averaged with its live ones); and that mean's variance.
 * One slab's figure is a count of sampled gets: its noise grows as its
 * class is sampled more coarsely, and pooling keeps it near
 * 1/sqrt(SIZING_POOL_GETS) of the estimate where the curve allows. A hit
 * curve is concave past its first slabs, so the pooled mean errs toward
 * keeping the donor's slab and not giving the taker one: toward not
 * moving. The variance is that of at least one sampled get: a count of
 * none says the level is low, not that it is known to be zero (a
 * Poisson level of up to three gives none one time in twenty).
 */
/* The variance of an estimate of `est` gets from sampled gets that each
 * stand for w: est * w, and at least one sampled get's, w * w. */
static double
estimate_var(double est, double w)
{
    return (est > w ? est : w) * w;
}

static void
edge_pool(const double *hist, uint32_t first, uint32_t end, bool down, double w,
          double *mean, double *var)
{
    double sum = 0.0;
    uint32_t k = 0;

    *mean = 0.0;
    *var = 0.0;
    if (hist == NULL) {
        return;
    }
    while (k < SIZING_POOL_SLABS && (down ? first >= end + k : first + k < end)) {
        double h = hist[down ? first - k : first + k];
        if (k > 0 && w > 0.0 && !pool_level(h / w, sum / w / k, k)) {
            break;
        }
        sum += h;
        k++;
        if (w > 0.0 && sum / w >= SIZING_POOL_GETS) {
            break;
        }
    }
    if (k > 0) {
        *mean = sum / k;
        *var = estimate_var(sum, w) / ((double)k * k);
    }
}

void
sizing_edges(const uint32_t *slabs, struct sizing_edge *out, unsigned ncls,
             sizing_window_t win)
{
    pthread_mutex_lock(&sz_lock);
    for (unsigned i = 1; i <= ncls && i <= SLAB_CLASS_MAX; i++) {
        const struct sz_class *c = &classes[i];
        const double *hist = win == SIZING_LONG ? c->hist_long : c->hist;
        uint32_t top = win == SIZING_LONG ? long_depth : depth;
        double w = weight((uint8_t)i);
        uint32_t s = slabs[i];
        double ps = per_slab((uint8_t)i);
        out[i].last = out[i].last_var = 0.0;
        out[i].reach = ps > 0 ? (double)c->n / ps : 0.0;
        /* A class past the depth followed (small slabs, -I) is valued
         * by its deepest measured slabs: more than its last earns (the
         * curve is concave), so it keeps its memory rather than give it
         * away as unmeasured. */
        if (s > 0) {
            edge_pool(hist, (s <= top ? s : top) - 1, 0, true, w, &out[i].last,
                      &out[i].last_var);
        }
        if (s < top) {
            /* No get has a distance past the keys the sample holds
             * (reach): the slabs past them lie outside the curve, not at
             * a low level of it, and are not pooled with the slabs
             * before them. */
            uint32_t end = (uint32_t)out[i].reach;
            end += (double)end < out[i].reach ? 1 : 0;
            end = end <= s ? s + 1 : end < top ? end : top;
            edge_pool(hist, s, end, false, w, &out[i].next, &out[i].next_var);
        } else if (win == SIZING_LONG) {
            /* Past -m and its pool (-m raised at run time): the long
             * window's last bucket holds every get out to the short
             * one's depth, not one slab's, and it makes no claim. */
            out[i].next = out[i].next_var = 0.0;
        } else {
            /* At the depth followed, the bucket of everything beyond it
             * (nearly empty: keys past the depth leave the sample); past
             * it, nothing. */
            out[i].next = hist_sum(hist, top, s, s + 1);
            out[i].next_var = estimate_var(out[i].next, w);
        }
    }
    pthread_mutex_unlock(&sz_lock);
}

/*
 * The curves: for each class, the hits it would have at each of its
 * slabs (cur[cls][b], the b+1-th slab's), from the short histograms.
 *
 * The level comes from the count, the shape from the sample. A class's
 * curve passes through the hits counted at the slabs it holds, which is
 * also what its policy (CLOCK and probation, not an LRU) scored there.
 * Past its first slab the slope is the sample's: there its keys stand
 * for the keys they were sampled for. The first slab takes what the count
 * leaves: the hot keys, where one sampled or not moves a class's estimate
 * most (SHARDS's adjustment, Waldspurger et al., FAST'15). A sampled key
 * whose gets, at its weight, would stand for more than its class's gets
 * (its counted hits and at most the counted misses) stands for itself
 * alone (a Zipf head key: its weight is taken off the first slab). If the
 * slope past the first slab leaves the first slab less than the sample put
 * there, the sample's keys are dense all along (or the policy did worse
 * than an LRU of its slabs): the whole curve scales to the count. A class
 * that holds no slab is read from the sample, its heavy keys as
 * themselves, scaled to its counted hits if it has any. No curve passes its class's gets, and the
 * hit ratio is against the gets counted. Only the curve reads this; the
 * allocation rule's edges take the sample as it is.
 */
static void
heavy_excess(const double *bound, double *excess)
{
    for (uint32_t e = 0; e < nents; e++) {
        uint8_t cls = ents[e].cls;
        if (cls != 0 && ents[e].n > 0) {
            double w = weight(cls), as_sampled = ents[e].n * w;
            excess[cls] += as_sampled > bound[cls] ? as_sampled - ents[e].n : 0.0;
        }
    }
}

static void
curve_fill(uint8_t cls, double counted, double bound, double excess, double *cur)
{
    const struct sz_class *c = &classes[cls];
    uint32_t held = slab_class_slabs(cls);
    double first = c->hist[0] > excess ? c->hist[0] - excess : 0.0, rest = 0.0, g = 1.0;

    for (uint32_t b = 1; b < held && b < depth; b++) {
        rest += c->hist[b];
    }
    cur[0] = first;
    if (held > 0 && held <= depth && counted > 0.0) {
        if (counted - rest >= first) {
            cur[0] = counted - rest;
        } else {
            g = counted / (first + rest);
            cur[0] *= g;
        }
    } else if (counted > 0.0 && c->hits_sampled > excess) {
        g = counted / (c->hits_sampled - excess);   /* its heavy keys' gets hit */
        cur[0] *= g;
    }
    double sum = cur[0] < bound ? cur[0] : bound;
    cur[0] = sum;
    for (uint32_t b = 1; b < depth; b++) {
        double v = c->hist[b] * g;
        cur[b] = sum + v < bound ? v : bound - sum;
        sum += cur[b];
    }
}

/* The gets counted since sizing_setup(), decayed as the histograms. */
static double
gets_counted(void)
{
    return gets_decayed + (double)(tally_gets() - gets_mark);
}

/* The curves and the gets they are read against, under the lock; NULL if
 * memory runs out. */
static double **
curves_make(double *gets)
{
    double **cur = calloc(SLAB_CLASS_MAX + 1, sizeof(*cur));
    double *counted = calloc(3 * (SLAB_CLASS_MAX + 1), sizeof(double));

    if (cur == NULL || counted == NULL) {
        free(cur);
        free(counted);
        return NULL;
    }
    double *bound = counted + SLAB_CLASS_MAX + 1, *excess = bound + SLAB_CLASS_MAX + 1;
    double missed = misses + (double)(tally_sum(0) - misses_mark);
    *gets = gets_counted();
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        const struct sz_class *c = &classes[i];
        if (c->hist != NULL) {
            double sampled_misses = c->gets > c->hits_sampled ? c->gets - c->hits_sampled : 0.0;
            counted[i] = hits_counted(c, (uint8_t)i);
            bound[i] = counted[i] + (sampled_misses < missed ? sampled_misses : missed);
        }
    }
    heavy_excess(bound, excess);
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        if (classes[i].hist != NULL &&
            (cur[i] = malloc((size_t)depth * sizeof(double))) != NULL) {
            curve_fill((uint8_t)i, counted[i], bound[i], excess[i], cur[i]);
        }
    }
    free(counted);
    return cur;
}

static void
curves_free(double **cur)
{
    for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
        free(cur[i]);
    }
    free(cur);
}

/* Best average gain per slab of a curve over its next 1..SZ_LOOK slabs from s. */
#define SZ_LOOK 4
static double
best_step(const double *curve, uint32_t s, uint32_t *k)
{
    double sum = 0, best = -1;

    *k = 1;
    for (uint32_t j = 1; j <= SZ_LOOK && s + j <= depth; j++) {
        sum += curve[s + j - 1];
        if (sum / j > best) {
            best = sum / j;
            *k = j;
        }
    }
    return best;
}

double
sizing_curve(uint32_t slabs, uint32_t *split)
{
    uint32_t got[SLAB_CLASS_MAX + 1] = { 0 };
    double hits = 0, gets = 0;

    pthread_mutex_lock(&sz_lock);
    double **cur = curves_make(&gets);
    for (uint32_t left = slabs; cur != NULL && left > 0;) {
        unsigned top = 0;
        uint32_t top_k = 1, k;
        double top_gain = 0;
        for (unsigned i = 1; i <= SLAB_CLASS_MAX; i++) {
            if (cur[i] == NULL || got[i] >= depth) {
                continue;
            }
            double g = best_step(cur[i], got[i], &k);
            if (g > top_gain) {
                top = i;
                top_gain = g;
                top_k = k;
            }
        }
        if (top == 0) {
            break;              /* no class gains from more */
        }
        top_k = top_k < left ? top_k : left;
        for (uint32_t j = 0; j < top_k; j++) {
            hits += cur[top][got[top]++];
        }
        left -= top_k;
    }
    if (cur != NULL) {
        curves_free(cur);
    }
    pthread_mutex_unlock(&sz_lock);
    if (split != NULL) {
        memcpy(split, got, sizeof(got));
    }
    return gets <= 0 ? 0.0 : hits < gets ? hits / gets : 1.0;
}

double
sizing_gets(uint8_t cls)
{
    pthread_mutex_lock(&sz_lock);
    double g = classes[cls].gets * calibration(cls);
    pthread_mutex_unlock(&sz_lock);
    return g;
}

uint32_t
sizing_depth(void)
{
    return depth;
}

void
sizing_state(struct sizing_state *out)
{
    pthread_mutex_lock(&sz_lock);
    out->bytes = bytes + atomic_load(&tally_bytes);
    out->budget = budget;
    out->samples = nused;
    out->shift = shift;
    pthread_mutex_unlock(&sz_lock);
}

bool
sizing_enabled(void)
{
    return atomic_load(&sz_on);
}

/* --- setup -------------------------------------------------------------- */

/*
 * Budget: the two histograms of every class that exists, each class's
 * smallest time line, then entries at 16 bytes, two time-line positions
 * (8 bytes each) and a bucket each.
 */
int
sizing_setup(size_t limit, uint32_t slabs)
{
    uint8_t ncls = slab_class_count();
    size_t fixed, per_entry = sizeof(struct sz_entry) + 2 * 8 + 2 * sizeof(uint32_t);

    sizing_teardown();
    pthread_mutex_lock(&sz_lock);
    budget = limit / 100 * SIZING_BUDGET_PCT;
    /* The short histograms take at most a quarter of the budget: with
     * small slabs (-I) the curve stops short of 4x -m rather than leave
     * no room for keys. The long ones, beside that quarter, follow only
     * as far as a class's edges lie at the -m set here: its slabs and a
     * pool past them (at most as far as the short ones). */
    uint64_t want = (uint64_t)SIZING_DEPTH * (slabs > 0 ? slabs : 1);
    uint64_t room = budget / 4 / ((size_t)(ncls > 0 ? ncls : 1) * sizeof(double));
    depth = (uint32_t)(want < room ? want : room > 1 ? room - 1 : 1);
    uint64_t lwant = (uint64_t)(slabs > 0 ? slabs : 1) + SIZING_POOL_SLABS;
    long_depth = (uint32_t)(lwant < depth ? lwant : depth);
    fixed = (size_t)ncls * (((size_t)depth + 1 + long_depth + 1) * sizeof(double) +
                            8 * SZ_MIN_CAP);
    nents = budget > fixed + 64 * per_entry ? (uint32_t)((budget - fixed) / per_entry) : 64;
    uint32_t nb = 1;
    while (nb < nents) {
        nb <<= 1;
    }
    ents = calloc(nents, sizeof(*ents));
    buckets = malloc((size_t)nb * sizeof(*buckets));
    if (ents == NULL || buckets == NULL) {
        free(ents);
        free(buckets);
        ents = NULL;
        buckets = NULL;
        pthread_mutex_unlock(&sz_lock);
        return -1;
    }
    bucket_mask = nb - 1;
    memset(buckets, 0xff, (size_t)nb * sizeof(*buckets));
    for (uint32_t e = 0; e < nents; e++) {
        ents[e].next = e + 1 < nents ? e + 1 : SZ_NONE;
    }
    free_head = 0;
    nused = 0;
    shift = 0;
    window_gets = 0;
    short_windows = 0;
    misses = 0;
    misses_mark = tally_sum(0);
    gets_decayed = 0;
    gets_mark = tally_gets();
    bytes = (size_t)nents * sizeof(*ents) + (size_t)nb * sizeof(*buckets);
    for (unsigned i = 1; i <= ncls; i++) {
        uint32_t per = slab_class_perslab((uint8_t)i);
        classes[i].rate0 = per > SIZING_PER_SLAB ?
            (uint32_t)(((uint64_t)SIZING_PER_SLAB << 24) / per) : SZ_FULL;
        atomic_store(&thresh[i], per > 0 ? classes[i].rate0 : 0);
    }
    miss_thresh_update();
    atomic_store(&sz_on, true);
    pthread_mutex_unlock(&sz_lock);
    return 0;
}

void
sizing_window_set(uint32_t window)
{
    atomic_store(&window_len, window > 0 ? window : SIZING_WINDOW_UNIT);
}

uint32_t
sizing_window(void)
{
    return atomic_load(&window_len);
}

void
sizing_teardown(void)
{
    pthread_mutex_lock(&sz_lock);
    atomic_store(&sz_on, false);
    for (unsigned i = 0; i <= SLAB_CLASS_MAX; i++) {
        free(classes[i].fen);
        free(classes[i].slot);
        free(classes[i].hist);
        memset(&classes[i], 0, sizeof(classes[i]));
        atomic_store(&thresh[i], 0);
    }
    atomic_store(&miss_thresh, 0);
    free(ents);
    free(buckets);
    ents = NULL;
    buckets = NULL;
    nents = nused = 0;
    free_head = SZ_NONE;
    bytes = 0;
    pthread_mutex_unlock(&sz_lock);
}
