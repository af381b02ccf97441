/*
 * sizing.h -- what a slab earns in each class, measured.
 *
 * For every slab class, a sample of the keys requested (spatial sampling
 * by key hash, as SHARDS: Waldspurger et al., FAST'15) is kept in LRU
 * order with each key's class, and every sampled get is filed by its
 * stack distance: how many distinct keys of the class were requested
 * since this key was last requested. Under LRU a get hits in a class of
 * capacity C items exactly when its distance is below C, so the histogram
 * of distances, in slabs of the class's items, is the class's hit curve
 * at every size at once (Mattson's stack property): the hits its last
 * slab earns are the gets at distance [S-1, S) slabs, the hits one slab
 * more would earn the gets at [S, S+1) -- Cliffhanger's shadow queue
 * (Cidon et al., NSDI'16) is the first slab past S of the same stack.
 * Distances do not depend on the class's current size, so a slab moved
 * leaves the measurement valid.
 *
 * Gets are weighted by the inverse of their class's sampling rate, so the
 * figures estimate all gets. Each class samples about SIZING_PER_SLAB keys
 * per slab of its items, so a class of 10 KB values is measured as finely
 * as one of 100 B values, and a class of small values costs a lock on few
 * of its gets. Where one slab's figure rests on too few sampled gets, the
 * allocation rule's estimates pool the slabs beside it (sizing_edges).
 * Everything (entries, their order, the histograms) fits in 1% of -m: when
 * the sample outgrows it, every rate is halved and the keys past the new
 * threshold dropped. Each class keeps two histograms. The short one is
 * halved every time the sample has seen a quarter as many sampled gets
 * as it can hold keys (SIZING_WINDOW_DIV; scaled by sizing_window_set),
 * so it follows a workload that changes. The long one is halved
 * SIZING_LONG_WINDOWS times less often and
 * holds that many times the evidence, as deep as a class's edges lie at
 * the -m set at start (its slabs and a pool past them; past that it makes
 * no claim): a class with a small share of the
 * gets, sampled coarsely, has a few sampled gets a slab in the short
 * window, too few to tell its slabs' worth from another class's (the rule
 * in evict_auto.c says when each is used).
 *
 * The request path calls sizing_ref() (through storage's reference hook);
 * an unsampled key costs a multiply and a compare, and a hit or a miss
 * one more count in its thread's own tally (sizing.c); a sampled key a
 * mutex and a few hundred nanoseconds.
 */
#ifndef SC_SIZING_H
#define SC_SIZING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "item.h"

#define SIZING_PER_SLAB   128   /* sampled keys per slab of a class's items, at most */
#define SIZING_DEPTH      4     /* stacks are followed to 4x -m */
#define SIZING_WINDOW_DIV 4     /* short histograms halve every capacity/4 sampled gets */
#define SIZING_WINDOW_UNIT 10   /* ... times window/10 (sizing_window_set) */
#define SIZING_LONG_WINDOWS 4   /* long ones every 4 short windows */
#define SIZING_BUDGET_PCT 1     /* all of it within 1% of -m */
#define SIZING_POOL_GETS  32.0  /* sampled gets an edge's estimate pools slabs for */
#define SIZING_POOL_SLABS 8u    /* slabs it pools at most */
#define SIZING_POOL_Z     3.0   /* a slab this many deviations off the pool's level ends it */

/* limit: -m in bytes; slabs: how many slabs it holds. */
int      sizing_setup(size_t limit, uint32_t slabs);
/*
 * The windows' length, as memcached's slab_automove_window (3 to 1800,
 * SIZING_WINDOW_UNIT by default): the short window holds window/10 times
 * capacity/SIZING_WINDOW_DIV sampled gets, the long one SIZING_LONG_WINDOWS
 * of those. More history moves slabs later and on surer evidence. Takes
 * effect from the window under way; kept across sizing_setup().
 */
void     sizing_window_set(uint32_t window);
uint32_t sizing_window(void);
void     sizing_teardown(void);
bool     sizing_enabled(void);

/* Storage's reference hook (item_set_ref_hook): a get that hit an item
 * of cls, a get that missed (cls 0), an item of cls linked. */
void     sizing_ref(uint32_t hv, uint8_t cls, item_ref_t kind);

/*
 * One class at its current size, for the allocation rule: the gets its
 * last slab earns and those one slab more would earn, with the variance
 * of each estimate. Below the depth followed, each is the mean over the
 * slabs nearest the edge on its side that lie at one level (no cliff
 * between them), as many as it takes to hold SIZING_POOL_GETS sampled gets
 * (at most SIZING_POOL_SLABS): a coarsely sampled class is not judged on
 * one slab's few gets. Each variance is at least one sampled get's (a
 * count of none is a low level, not a known zero). `last` below one
 * sampled get in all: unmeasured.
 */
struct sizing_edge {
    double last, last_var;
    double next, next_var;
    double reach;               /* slabs' worth of the class's keys the sample
                                   holds: how deep its stack is known */
};
typedef enum sizing_window { SIZING_SHORT, SIZING_LONG } sizing_window_t;
/* For classes 1..ncls at slabs[c] slabs each, from one window's
 * histograms, under one lock. */
void     sizing_edges(const uint32_t *slabs, struct sizing_edge *out, unsigned ncls,
                      sizing_window_t win);

/*
 * The queries below read the short window.
 *
 * Estimated gets (decayed) at stack distance [from, to) slabs in cls;
 * *var (may be NULL) receives the estimate's variance (sampling noise).
 * to past the followed depth includes everything beyond it.
 */
double   sizing_hits(uint8_t cls, uint32_t from, uint32_t to, double *var);
/* Estimated gets of cls in the window (calibrated, as the curve's). */
double   sizing_gets(uint8_t cls);
/*
 * The hit ratio the measured gets would have with `slabs` slabs divided
 * among the classes at best (greedy on each class's curve, looking a few
 * slabs ahead past flat stretches), and that division: split[c] slabs for
 * class c (SLAB_CLASS_MAX + 1 entries; may be NULL). Each class's curve
 * passes through the hits counted at the slabs it holds (what its policy
 * scored there), its slope past the first slab is the sample's, and the
 * first slab takes the rest (hot keys; a sampled key that would stand for
 * more than its class's gets stands for itself); where the sample
 * claims more than the count the curve scales to it (sizing.c). The hit
 * ratio is against the gets counted (hits and misses), so first requests
 * are misses at every size.
 */
double   sizing_curve(uint32_t slabs, uint32_t *split);
/* The stacks' depth in slabs (SIZING_DEPTH x the slabs of -m). */
uint32_t sizing_depth(void);

struct sizing_state {
    size_t   bytes;             /* memory the measurement holds */
    size_t   budget;            /* its bound */
    uint64_t samples;           /* keys in the sample */
    unsigned shift;             /* every rate is 2^-shift of its class's own */
};
void     sizing_state(struct sizing_state *out);

#endif
