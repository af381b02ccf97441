/*
 * test_sizing.c -- unit tests for the per-class hit curves (include/evict/
 * sizing.h): stack distances against a brute-force LRU at full sampling,
 * the estimate under sampling, the memory bound, the window's decay, and
 * a key that changes class.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "item.h"
#include "sizing.h"
#include "slab.h"

#define SLAB_SZ (1024 * 1024)

static void
setup(void)
{
    clock_setup();
    /* Factor 2 from 80 B: classes 80, 160, ..., 655360 B; perslab 13107 .. 1. */
    ck_assert_int_eq(slab_setup(64 * SLAB_SZ, SLAB_SZ, 2.0, 48,
                                item_total_size(0, 0) - 2), SLAB_OK);
}

static void
teardown(void)
{
    sizing_teardown();
    slab_teardown();
}

/* A class of a few dozen items per slab: sampled at rate 1, and a few
 * hundred keys span several slabs. */
static uint8_t
full_rate_class(void)
{
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        uint32_t per = slab_class_perslab(c);
        if (per > 1 && per <= 32) {
            return c;
        }
    }
    ck_abort_msg("no class with few items per slab");
    return 0;
}

static struct sizing_state
state(void)
{
    struct sizing_state st;

    sizing_state(&st);
    return st;
}

static uint32_t
key_hash(uint32_t k)
{
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull + 12345;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x >> 32);
}

static uint32_t
rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Brute-force LRU: distance of k (keys used since), then k on top; -1 if new. */
static long
lru_ref(uint32_t *stack, uint32_t *n, uint32_t k)
{
    for (uint32_t i = 0; i < *n; i++) {
        if (stack[i] == k) {
            memmove(stack + 1, stack, i * sizeof(*stack));
            stack[0] = k;
            return (long)i;
        }
    }
    memmove(stack + 1, stack, *n * sizeof(*stack));
    stack[0] = k;
    (*n)++;
    return -1;
}

/* nkeys keys of cls stored, then `gets` gets uniform over them. */
static void
uniform_gets(uint8_t cls, uint32_t nkeys, uint32_t gets, uint64_t *seed)
{
    for (uint32_t k = 0; k < nkeys; k++) {
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < gets; i++) {
        sizing_ref(key_hash(rnd(seed) % nkeys), cls, ITEM_REF_HIT);
    }
}

START_TEST(test_distances_match_lru_at_full_rate)
{
    uint8_t cls = full_rate_class();
    uint32_t per = slab_class_perslab(cls), nkeys = 300, n = 0;
    uint32_t *stack = calloc(nkeys, sizeof(*stack));
    double want[64] = { 0 };
    uint64_t seed = 88172645463325252ull;

    ck_assert_int_eq(sizing_setup(1u << 30, 4), 0);    /* room for every key, no halving */
    uint32_t depth = sizing_depth();
    ck_assert_uint_eq(depth, 16);
    for (int i = 0; i < 20000; i++) {
        /* skewed: half the requests to the first 30 keys */
        uint32_t k = rnd(&seed) % 2 ? rnd(&seed) % 30 : rnd(&seed) % nkeys;
        long d = lru_ref(stack, &n, k);
        if (d < 0) {
            sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
        } else {
            sizing_ref(key_hash(k), cls, ITEM_REF_HIT);
            uint32_t b = (uint32_t)d / per;
            want[b < depth ? b : depth] += 1;
        }
    }
    ck_assert_uint_eq(state().shift, 0);
    double total = 0;
    for (uint32_t b = 0; b <= depth; b++) {
        ck_assert_msg(sizing_hits(cls, b, b + 1, NULL) == want[b],
                      "bucket %u: %f measured, %f by LRU", b,
                      sizing_hits(cls, b, b + 1, NULL), want[b]);
        total += want[b];
    }
    ck_assert(sizing_gets(cls) == total);
    ck_assert(total > 15000);
    free(stack);
}
END_TEST

START_TEST(test_a_miss_is_filed_in_the_key_s_last_class)
{
    uint8_t cls = full_rate_class();

    ck_assert_int_eq(sizing_setup(256u << 20, 4), 0);
    sizing_ref(key_hash(1), cls, ITEM_REF_STORE);
    sizing_ref(key_hash(2), cls, ITEM_REF_STORE);
    sizing_ref(key_hash(1), 0, ITEM_REF_MISS);      /* distance 1 */
    ck_assert(sizing_gets(cls) == 1.0);
    ck_assert(sizing_hits(cls, 0, 1, NULL) == 1.0);
    /* A key never seen, missed: no class to file it in. */
    sizing_ref(key_hash(3), 0, ITEM_REF_MISS);
    ck_assert(sizing_gets(cls) == 1.0);
    /* Stored again in another class: it moves; its next get is there. */
    sizing_ref(key_hash(1), (uint8_t)(cls + 1), ITEM_REF_STORE);
    sizing_ref(key_hash(1), 0, ITEM_REF_MISS);
    ck_assert(sizing_gets((uint8_t)(cls + 1)) > 0);
    ck_assert(sizing_gets(cls) == 1.0);
}
END_TEST

/*
 * Class 1 (80 B chunks, 13,107 per slab) is sampled at about 1/13: the
 * estimate of gets within a distance must still be near the truth.
 */
START_TEST(test_sampled_estimate_is_close)
{
    uint8_t cls = 1;
    uint32_t per = slab_class_perslab(cls), nkeys = 60000;
    uint64_t seed = 0x1234567ull;
    double near = 0, total = 0;

    ck_assert_uint_gt(per, 10 * SIZING_PER_SLAB);
    ck_assert_uint_lt(nkeys, per * 4 * 32);     /* within the depth followed */
    ck_assert_int_eq(sizing_setup(256u << 20, 32), 0);
    for (uint32_t k = 0; k < nkeys; k++) {
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
    }
    /* Uniform over nkeys keys: a get's distance is below one slab's worth
     * of items with probability perslab / nkeys. */
    for (int i = 0; i < 400000; i++) {
        sizing_ref(key_hash(rnd(&seed) % nkeys), cls, ITEM_REF_HIT);
    }
    near = sizing_hits(cls, 0, 1, NULL);
    total = sizing_gets(cls);
    double want = (double)per / nkeys;
    ck_assert_msg(total > 400000 * 0.7 && total < 400000 * 1.3, "gets %f", total);
    ck_assert_msg(near / total > want * 0.8 && near / total < want * 1.2,
                  "fraction within 4 slabs %f, want %f", near / total, want);
}
END_TEST

/*
 * Class 1, sampled coarsely (13,107 items a slab, about 1 key in 100
 * sampled), gets uniform over key_slabs slabs' worth of its keys with no
 * halving; its edges read at `at` slabs into edge (of SLAB_CLASS_MAX + 1).
 */
static uint8_t
coarse_uniform_edges(uint32_t key_slabs, uint32_t gets, uint64_t seed, uint32_t at,
                     struct sizing_edge *edge)
{
    uint8_t cls = 1;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };

    ck_assert_uint_gt(slab_class_perslab(cls), 100 * SIZING_PER_SLAB / 2);
    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    uniform_gets(cls, key_slabs * slab_class_perslab(cls), gets, &seed);
    ck_assert_uint_eq(state().shift, 0);
    slabs[cls] = at;
    sizing_edges(slabs, edge, cls, SIZING_SHORT);
    return cls;
}

/* Chunks of cls allocated (and kept) until it holds `slabs` slabs. */
static void
grow_to(uint8_t cls, uint32_t slabs)
{
    uint32_t sid;

    while (slab_class_slabs(cls) < slabs) {
        ck_assert_ptr_nonnull(slab_alloc(cls, &sid));
    }
}

/* Keys 0..nkeys-1 of cls stored; the first one the sample holds. */
static uint32_t
store_keys(uint8_t cls, uint32_t nkeys)
{
    uint32_t first = UINT32_MAX;

    for (uint32_t k = 0; k < nkeys; k++) {
        uint32_t before = state().samples;
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
        first = first == UINT32_MAX && state().samples > before ? k : first;
    }
    ck_assert_uint_ne(first, UINT32_MAX);
    return first;
}

/*
 * The curve counts each get once. Class 1 (about 1 key in 100 sampled)
 * is served as by a cache of 4 of the 8 slabs its keys need: gets of the
 * first half of its keys hit, of the other half miss. A miss names no
 * class; the hit ratio is against the gets counted, each once (an earlier
 * curve that also counted a missed key no sample knows put every size's
 * hit ratio near 1 / (1 + 0.5)). At 16 slabs every get hits.
 */
START_TEST(test_curve_counts_a_coarse_class_s_misses_once)
{
    uint8_t cls = 1;
    uint32_t nkeys = 8 * slab_class_perslab(cls);
    uint64_t seed = 0x5eedull;

    ck_assert_uint_gt(slab_class_perslab(cls), 100 * SIZING_PER_SLAB / 2);
    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    for (uint32_t k = 0; k < nkeys; k++) {
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t k = rnd(&seed) % nkeys;
        bool hit = k < nkeys / 2;
        sizing_ref(key_hash(k), hit ? cls : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    ck_assert_uint_eq(state().shift, 0);
    double at4 = sizing_curve(4, NULL), at16 = sizing_curve(16, NULL);
    ck_assert_msg(at16 > 0.95, "at 16 slabs %f", at16);
    ck_assert_msg(fabs(at4 - 0.5) < 0.1, "at 4 slabs %f", at4);
}
END_TEST

/*
 * The sample weighs a class by the keys it happens to hold: class 1
 * (about 1 key in 100 sampled, one slab) has a hot key, half of its gets,
 * that the sample holds, so its sampled gets stand for about 50 times the
 * gets it had. B (sampled at every key, no slab of its own) has the same
 * number of gets, uniform over 8 slabs' worth of keys. With 2 slabs the
 * best split gives one to each: class 1 hits all its gets, B an eighth.
 * Calibrated by the hits counted in class 1, the curve says so; on the
 * sample alone it said nearly every get hits.
 */
START_TEST(test_curve_is_calibrated_by_counted_hits)
{
    uint8_t a = 1, b = full_rate_class();
    uint32_t a_keys = 2000, b_keys = 8 * slab_class_perslab(b), hot;
    uint64_t seed = 0xca1b;

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    grow_to(a, 1);
    ck_assert_uint_eq(slab_class_slabs(b), 0);
    hot = store_keys(a, a_keys);
    for (uint32_t k = 0; k < b_keys; k++) {
        sizing_ref(key_hash(1000000 + k), b, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t k = rnd(&seed);
        if (i % 2 == 0) {
            sizing_ref(key_hash(i % 4 == 0 ? hot : k % a_keys), a, ITEM_REF_HIT);
        } else {
            /* B holds 1 slab's worth in the cache: the rest are misses. */
            k %= b_keys;
            bool hit = k < b_keys / 8;
            sizing_ref(key_hash(1000000 + k), hit ? b : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
        }
    }
    ck_assert_uint_eq(state().shift, 0);
    double gets_a = sizing_gets(a), at2 = sizing_curve(2, NULL);
    ck_assert_msg(fabs(gets_a - 10000) < 500, "class 1's gets %f, counted 10000", gets_a);
    ck_assert_msg(fabs(at2 - 0.5625) < 0.03, "at 2 slabs %f, truth 0.5625", at2);
}
END_TEST

/*
 * The curve is the class's policy's, not an LRU's. Class B holds 4 slabs;
 * its gets are uniform over 8 slabs' worth of keys, so an LRU of 4 slabs
 * would hit half of them. The cache reports what its policy kept: 3/4 of
 * the keys hit (a policy beating an LRU of its size), or 1/4 (one doing
 * worse). At the 4 slabs held the curve reads what the class scored; the
 * better one hits them all by 8 and no more than all. Read as an LRU's,
 * the curve said 0.5 at 4 slabs either way.
 */
static double
curve_for_a_policy_keeping(uint32_t kept_slabs, double *at8)
{
    uint8_t b = full_rate_class();
    uint32_t per = slab_class_perslab(b), keys = 8 * per;
    uint64_t seed = 0x9011c4;

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    grow_to(b, 4);
    for (uint32_t k = 0; k < keys; k++) {
        sizing_ref(key_hash(k), b, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < 40000; i++) {
        uint32_t k = rnd(&seed) % keys;
        bool hit = k < kept_slabs * per;
        sizing_ref(key_hash(k), hit ? b : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    ck_assert_uint_eq(state().shift, 0);
    *at8 = sizing_curve(8, NULL);
    return sizing_curve(4, NULL);
}

START_TEST(test_curve_reads_the_policy_at_its_slabs)
{
    double at8, better = curve_for_a_policy_keeping(6, &at8);

    ck_assert_msg(fabs(better - 0.75) < 0.03, "better than an LRU: at 4 slabs %f, scored 0.75",
                  better);
    ck_assert_msg(at8 > 0.97 && at8 < 1.001, "at 8 slabs %f", at8);
    teardown();
    setup();
    double worse = curve_for_a_policy_keeping(2, &at8);
    ck_assert_msg(fabs(worse - 0.25) < 0.03, "worse than an LRU: at 4 slabs %f, scored 0.25",
                  worse);
}
END_TEST

/*
 * A hot key in a coarse sample stands for itself. Class 1 (about 1 key in
 * 100 sampled) holds 4 of the 8 slabs its keys need; half its gets go to
 * one key the sample holds, the rest are uniform over the keys, and the
 * first half of the keys hit. At 2 slabs the truth is 0.5 + 0.5 * 2/8.
 * Scaled as a whole to the count, the curve shrank the uniform keys'
 * slope with the hot key's weight and read about 0.75 at any size.
 */
START_TEST(test_a_sampled_hot_key_stands_for_itself)
{
    uint8_t cls = 1;
    uint32_t per = slab_class_perslab(cls), nkeys = 8 * per, hot;
    uint64_t seed = 0x407ull;

    ck_assert_uint_gt(per, 100 * SIZING_PER_SLAB / 2);
    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    grow_to(cls, 4);
    hot = store_keys(cls, nkeys);
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t k = i % 2 == 0 ? hot : rnd(&seed) % nkeys;
        bool hit = k == hot || k < 4 * per;
        sizing_ref(key_hash(k), hit ? cls : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    ck_assert_uint_eq(state().shift, 0);
    double at2 = sizing_curve(2, NULL), at4 = sizing_curve(4, NULL);
    ck_assert_msg(fabs(at4 - 0.75) < 0.02, "at 4 slabs %f, scored 0.75", at4);
    ck_assert_msg(fabs(at2 - 0.625) < 0.03, "at 2 slabs %f, truth 0.625", at2);
}
END_TEST

/*
 * A class that holds no slab is read from the sample, its heavy keys as
 * themselves: class 1 (about 1 key in 100 sampled) has 2,000 keys, half
 * its gets to one key the sample holds. Its keys fit in one slab, so at
 * one slab every get hits, whether the cache hit them (a class whose
 * slabs went elsewhere: scaled to its counted hits) or missed them all
 * (one that never had any: the other 1,999 keys are read from the 20 or so
 * sampled, unscaled, so only the hot key's half is sure). A curve marked
 * down twice for the hot key read 0.016 for the first; one that took every
 * key as heavy for want of counted hits read 0.5 for the second.
 */
static double
no_slab_curve(bool hit)
{
    uint8_t a = 1;
    uint64_t seed = 0xca1b;

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    ck_assert_uint_eq(slab_class_slabs(a), 0);
    uint32_t hot = store_keys(a, 2000);
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t k = i % 2 == 0 ? hot : rnd(&seed) % 2000;
        sizing_ref(key_hash(k), hit ? a : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    ck_assert_uint_eq(state().shift, 0);
    return sizing_curve(1, NULL);
}

START_TEST(test_a_class_with_no_slab_reads_from_the_sample)
{
    double hits = no_slab_curve(true);

    ck_assert_msg(hits > 0.97 && hits <= 1.0, "all hit: at 1 slab %f", hits);
    teardown();
    setup();
    double missed = no_slab_curve(false);
    ck_assert_msg(missed > 0.6 && missed <= 1.0, "all missed: at 1 slab %f", missed);
}
END_TEST

/*
 * A hit ratio is at most 1: class 1 holds 4 of the 40 slabs its keys
 * need (a tenth of its uniform gets hit). At 64 slabs every get but the
 * first of each key would hit; the curve's cap (the class's counted hits
 * and its sampled misses) is an estimate, the gets it is read against a
 * count, and the ratio read 1.0037.
 */
START_TEST(test_the_hit_ratio_is_at_most_one)
{
    uint8_t a = 1;
    uint32_t per = slab_class_perslab(a), nkeys = 40 * per;
    uint64_t seed = 0x77;

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    grow_to(a, 4);
    store_keys(a, nkeys);
    for (uint32_t i = 0; i < 200000; i++) {
        uint32_t k = rnd(&seed) % nkeys;
        bool hit = k < 4 * per;
        sizing_ref(key_hash(k), hit ? a : 0, hit ? ITEM_REF_HIT : ITEM_REF_MISS);
    }
    double at4 = sizing_curve(4, NULL), at64 = sizing_curve(64, NULL);
    ck_assert_msg(fabs(at4 - 0.1) < 0.02, "at 4 slabs %f, scored 0.1", at4);
    ck_assert_msg(at64 <= 1.0, "at 64 slabs %f", at64);
}
END_TEST

/*
 * The calibration compares the same gets' outcomes, counted and sampled:
 * after a warm restart a class is full of keys the sample has not seen,
 * and every get hits. Each first hit of a restored key is in both (a
 * sampled get of a key not yet in the sample still hit), so the class's
 * gets read as made. Judged by the sample's distances instead, those
 * first hits were counted and not sampled: 300 gets read as 528.
 */
START_TEST(test_calibration_after_a_warm_restart)
{
    uint8_t b = full_rate_class();
    uint32_t keys = 6 * slab_class_perslab(b);
    uint64_t seed = 0x51ce;

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    grow_to(b, 6);                      /* restored: no key stored since */
    for (uint32_t i = 0; i < 900; i++) {
        sizing_ref(key_hash(rnd(&seed) % keys), b, ITEM_REF_HIT);
    }
    ck_assert_uint_eq(state().shift, 0);
    ck_assert_msg(fabs(sizing_gets(b) - 900) < 45, "gets %f, 900 made", sizing_gets(b));
}
END_TEST

/*
 * A class sampled coarsely (class 1: 13,107 items a slab, about 1 key in
 * 100 sampled) has a few sampled gets per slab: the estimate of its last
 * and next slabs pools the slabs beside them, so its noise stays near a
 * quarter of the estimate or less, and the estimate stays near the truth.
 */
START_TEST(test_edges_pool_a_coarsely_sampled_class)
{
    uint32_t gets = 16 * 4 * 103;
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];
    /* Uniform over 16 slabs' worth of keys: each slab of the curve earns
     * gets / 16, about 4 sampled gets. */
    uint8_t cls = coarse_uniform_edges(16, gets, 0xabcdefull, 8, edge);
    double truth = gets / 16.0;
    ck_assert_msg(edge[cls].last_var <= edge[cls].last * edge[cls].last / 16,
                  "last %f, sd %f", edge[cls].last, sqrt(edge[cls].last_var));
    ck_assert_msg(edge[cls].next_var <= edge[cls].next * edge[cls].next / 16,
                  "next %f, sd %f", edge[cls].next, sqrt(edge[cls].next_var));
    ck_assert_msg(fabs(edge[cls].last - truth) <= 3 * sqrt(edge[cls].last_var),
                  "last %f, truth %f", edge[cls].last, truth);
    ck_assert_msg(fabs(edge[cls].next - truth) <= 3 * sqrt(edge[cls].next_var),
                  "next %f, truth %f", edge[cls].next, truth);
}
END_TEST

/*
 * Pooling stops at a cliff: a class sampled at every key whose gets all
 * fall within its first two slabs has nothing behind slabs 3 to 5, and
 * at 5 slabs its last slab earns nothing (unmeasured), not the live
 * slabs' gets averaged with the dead ones.
 */
START_TEST(test_edges_do_not_pool_across_a_cliff)
{
    uint8_t cls = full_rate_class();
    uint32_t per = slab_class_perslab(cls), nkeys = 2 * per;
    uint64_t seed = 77;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];

    ck_assert_int_eq(sizing_setup(1u << 30, 64), 0);
    uniform_gets(cls, nkeys, 4000, &seed);
    slabs[cls] = 5;
    sizing_edges(slabs, edge, cls, SIZING_SHORT);
    ck_assert_msg(edge[cls].last == 0.0, "last %f", edge[cls].last);
    slabs[cls] = 2;
    sizing_edges(slabs, edge, cls, SIZING_SHORT);
    ck_assert_msg(edge[cls].last > 1000.0, "last %f", edge[cls].last);
    ck_assert_msg(edge[cls].next == 0.0, "next %f", edge[cls].next);
}
END_TEST

/*
 * No get has a distance past the keys the sample holds: a coarsely
 * sampled class whose keys end two slabs past its size is judged on those
 * two slabs, not on them averaged with the empty ones past its keys (a
 * few sampled gets a slab cannot tell those from a low level).
 */
START_TEST(test_edges_do_not_pool_past_the_keys)
{
    uint32_t gets = 5 * 8 * 103;                            /* about 8 sampled a slab */
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];
    uint8_t cls = coarse_uniform_edges(5, gets, 0x5eedull, 3, edge);
    double truth = gets / 5.0;
    ck_assert_msg(edge[cls].reach < 6.0, "reach %f", edge[cls].reach);
    ck_assert_msg(fabs(edge[cls].next - truth) <= 3 * sqrt(edge[cls].next_var),
                  "next %f (sd %f), truth %f", edge[cls].next, sqrt(edge[cls].next_var), truth);
}
END_TEST

/*
 * The long window follows a class's stack only to the slabs of the -m it
 * was set up for and a pool past them (4 + 8 here); a class that holds
 * that many slabs (memory raised at run time) gets no figure for its next
 * slab from it, not the bucket of every get beyond, which the short
 * window still follows slab by slab.
 */
START_TEST(test_long_window_makes_no_claim_past_its_depth)
{
    uint8_t cls = full_rate_class();
    uint32_t per = slab_class_perslab(cls);
    uint64_t seed = 99;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];

    ck_assert_int_eq(sizing_setup(1u << 30, 4), 0);        /* short: 16 slabs deep */
    uniform_gets(cls, 16 * per, 16 * 200, &seed);
    slabs[cls] = 12;
    sizing_edges(slabs, edge, cls, SIZING_SHORT);
    ck_assert_msg(edge[cls].next > 0.0, "short next %f", edge[cls].next);
    sizing_edges(slabs, edge, cls, SIZING_LONG);
    ck_assert_msg(edge[cls].next == 0.0 && edge[cls].next_var == 0.0, "long next %f",
                  edge[cls].next);
    ck_assert_msg(edge[cls].last > 0.0, "long last %f", edge[cls].last);
}
END_TEST

/*
 * A class holding more slabs than the depth followed (16 here) is valued
 * by its deepest measured slabs, not as unmeasured: its slabs would
 * otherwise go to any class that asks.
 */
START_TEST(test_edge_past_the_depth_is_measured)
{
    uint8_t cls = full_rate_class();
    uint32_t per = slab_class_perslab(cls), nkeys = 30 * per;
    uint64_t seed = 99;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];

    ck_assert_int_eq(sizing_setup(1u << 30, 4), 0);
    ck_assert_uint_eq(sizing_depth(), 16);
    uniform_gets(cls, nkeys, 30000, &seed);
    slabs[cls] = 20;
    sizing_edges(slabs, edge, cls, SIZING_SHORT);
    ck_assert_msg(edge[cls].last > 500.0 && edge[cls].last * edge[cls].last > edge[cls].last_var,
                  "last %f, variance %f", edge[cls].last, edge[cls].last_var);
}
END_TEST

START_TEST(test_memory_stays_within_the_budget)
{
    uint64_t seed = 42;

    ck_assert_int_eq(sizing_setup(8u << 20, 128), 0);
    ck_assert_uint_eq(state().budget, (8u << 20) / 100);
    for (uint32_t k = 0; k < 2000000; k++) {
        uint8_t cls = (uint8_t)(1 + rnd(&seed) % slab_class_count());
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
        if (k % 3 == 0) {
            sizing_ref(key_hash(rnd(&seed) % (k + 1)), 0, ITEM_REF_MISS);
        }
    }
    struct sizing_state st = state();
    ck_assert_uint_gt(st.shift, 0);
    ck_assert_uint_gt(st.samples, 100);
    ck_assert_msg(st.bytes <= st.budget, "%zu bytes over a budget of %zu", st.bytes, st.budget);
}
END_TEST

/* With small slabs (-I) the histograms alone would pass the budget: the
 * curve stops short of 4x -m instead, and room stays for keys. */
START_TEST(test_small_slabs_stay_within_the_budget)
{
    uint64_t seed = 9;

    ck_assert_int_eq(sizing_setup(8u << 20, 8192), 0);
    ck_assert_uint_lt(sizing_depth(), 4 * 8192);
    for (uint32_t k = 0; k < 200000; k++) {
        uint8_t cls = (uint8_t)(1 + rnd(&seed) % slab_class_count());
        sizing_ref(key_hash(k), cls, ITEM_REF_STORE);
        sizing_ref(key_hash(rnd(&seed) % (k + 1)), 0, ITEM_REF_MISS);
    }
    struct sizing_state st = state();
    ck_assert_uint_gt(st.samples, 500);
    ck_assert_msg(st.bytes <= st.budget, "%zu bytes over a budget of %zu", st.bytes, st.budget);
}
END_TEST

/* The histograms halve each window: old gets fade, new ones count. */
/*
 * The counted hits decay with the windows, in step with the sample's: A
 * (class 1, one slab, a hot key the sample holds) and B (sampled at every
 * key, one slab) have the same gets, all hits, over hundreds of windows.
 * Calibrated, A's gets read as B's; counted hits kept whole while the
 * sample's halve would put A far above.
 */
START_TEST(test_calibration_decays_with_the_windows)
{
    uint8_t a = 1, b = full_rate_class();
    uint32_t hot;
    uint64_t seed = 0xdeca;

    ck_assert_int_eq(sizing_setup(1u << 20, 4), 0);
    grow_to(a, 1);
    grow_to(b, 1);
    hot = store_keys(a, 2000);
    for (uint32_t k = 0; k < 8; k++) {
        sizing_ref(key_hash(1000000 + k), b, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t k = rnd(&seed);
        sizing_ref(key_hash(i % 2 == 0 ? hot : k % 2000), a, ITEM_REF_HIT);
        sizing_ref(key_hash(1000000 + k % 8), b, ITEM_REF_HIT);
    }
    double ga = sizing_gets(a), gb = sizing_gets(b);
    ck_assert_msg(gb > 0 && gb < 20000, "B's gets %f: more than its windows hold", gb);
    ck_assert_msg(fabs(ga / gb - 1.0) < 0.2, "A's gets %f, B's %f", ga, gb);
}
END_TEST

START_TEST(test_old_gets_fade)
{
    uint8_t cls = full_rate_class();

    ck_assert_int_eq(sizing_setup(1u << 20, 4), 0);
    sizing_ref(key_hash(1), cls, ITEM_REF_STORE);
    for (int i = 0; i < 20; i++) {
        sizing_ref(key_hash(1), cls, ITEM_REF_HIT);
    }
    double before = sizing_gets(cls);
    ck_assert(before == 20.0);      /* a window: a quarter of the entries (about 47) */
    sizing_ref(key_hash(2), (uint8_t)(cls + 1), ITEM_REF_STORE);
    for (int i = 0; i < 200000; i++) {
        sizing_ref(key_hash(2), (uint8_t)(cls + 1), ITEM_REF_HIT);
    }
    ck_assert_msg(sizing_gets(cls) < before / 4, "%f left of %f", sizing_gets(cls), before);
    ck_assert_msg(sizing_gets((uint8_t)(cls + 1)) > 40.0, "new gets %f", sizing_gets((uint8_t)(cls + 1)));
}
END_TEST

/*
 * memcached's slab_automove_window sets how much history the windows
 * hold: at twice the default the first window ends at twice as many
 * sampled gets.
 */
START_TEST(test_window_follows_the_automove_window)
{
    uint8_t cls = full_rate_class();
    uint32_t windows[2] = { SIZING_WINDOW_UNIT, 2 * SIZING_WINDOW_UNIT };
    unsigned ended[2];

    for (int i = 0; i < 2; i++) {
        sizing_window_set(windows[i]);
        ck_assert_uint_eq(sizing_window(), windows[i]);
        ck_assert_int_eq(sizing_setup(1u << 20, 4), 0);
        sizing_ref(key_hash(1), cls, ITEM_REF_STORE);
        unsigned n = 0;
        while (n < 100000 && sizing_gets(cls) == (double)n) {
            sizing_ref(key_hash(1), cls, ITEM_REF_HIT);
            n++;
        }
        ended[i] = n;       /* the get that ended the first window */
    }
    sizing_window_set(SIZING_WINDOW_UNIT);
    ck_assert_msg(ended[0] > 10 && ended[0] < 100000, "first window: %u gets", ended[0]);
    ck_assert_msg(ended[1] + 1 >= 2 * ended[0] && ended[1] <= 2 * ended[0] + 1,
                  "window %u ended at %u gets, %u at %u", windows[0], ended[0], windows[1],
                  ended[1]);
}
END_TEST

static Suite *
sizing_suite(void)
{
    Suite *s = suite_create("sizing");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_distances_match_lru_at_full_rate);
    tcase_add_test(tc, test_a_miss_is_filed_in_the_key_s_last_class);
    tcase_add_test(tc, test_sampled_estimate_is_close);
    tcase_add_test(tc, test_edges_pool_a_coarsely_sampled_class);
    tcase_add_test(tc, test_curve_counts_a_coarse_class_s_misses_once);
    tcase_add_test(tc, test_curve_is_calibrated_by_counted_hits);
    tcase_add_test(tc, test_curve_reads_the_policy_at_its_slabs);
    tcase_add_test(tc, test_a_sampled_hot_key_stands_for_itself);
    tcase_add_test(tc, test_a_class_with_no_slab_reads_from_the_sample);
    tcase_add_test(tc, test_the_hit_ratio_is_at_most_one);
    tcase_add_test(tc, test_calibration_after_a_warm_restart);
    tcase_add_test(tc, test_edges_do_not_pool_across_a_cliff);
    tcase_add_test(tc, test_edges_do_not_pool_past_the_keys);
    tcase_add_test(tc, test_long_window_makes_no_claim_past_its_depth);
    tcase_add_test(tc, test_edge_past_the_depth_is_measured);
    tcase_add_test(tc, test_memory_stays_within_the_budget);
    tcase_add_test(tc, test_old_gets_fade);
    tcase_add_test(tc, test_window_follows_the_automove_window);
    tcase_add_test(tc, test_calibration_decays_with_the_windows);
    tcase_add_test(tc, test_small_slabs_stay_within_the_budget);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(sizing_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
