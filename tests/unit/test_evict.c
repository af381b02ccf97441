/*
 * test_evict.c -- unit tests for the eviction policies (include/evict/evict.h):
 * victim choice of random / lra / lrc, the busy-slab skip, re-carving,
 * the per-class and global counters, the stacking gate, and a stress test
 * of readers verifying values while writers force slab evictions.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "evict.h"
#include "item.h"
#include "sizing.h"
#include "slab.h"

#define SLAB_SZ   (64 * 1024)
#define NSLABS    8
#define SMALL_LEN 38            /* class A values: 32 + key (<= 8) + 40 fits the first class (80) */
#define LARGE_LEN 20000         /* class B values */

/*
 * These tests move slabs between classes and count them; what the
 * bookkeeping's share of the limit does is test_slab's. So the probation
 * FIFOs here are lent two slabs' worth (booked negative): as they grow
 * they take no slab from the counts checked.
 */
static void
setup_factor(size_t slabs, size_t slab_sz, double factor, const char *policy)
{
    clock_setup();
    ck_assert_int_eq(evict_setup(policy), 0);
    ck_assert_int_eq(slab_setup(slabs * slab_sz, slab_sz, factor, 48,
                                item_total_size(0, 0) - 2), SLAB_OK);
    ck_assert_int_eq(assoc_setup(12), 0);
    slab_book(-2 * (int64_t)slab_sz);
    ck_assert_int_eq(item_setup(true), 0);
}

static void
setup_sized(size_t slabs, size_t slab_sz, const char *policy)
{
    setup_factor(slabs, slab_sz, 2.0, policy);
}

static void
setup_with(size_t slabs, const char *policy)
{
    setup_sized(slabs, SLAB_SZ, policy);
}

static void
setup(void)
{
    setup_with(NSLABS, "none");
}

static void
teardown(void)
{
    item_teardown();
    assoc_teardown();
    slab_teardown();
    sizing_teardown();
    evict_teardown();
}

/* Deterministic value bytes: any torn or foreign value fails verify. */
static char
pattern(const char *key, size_t nkey, uint32_t len, uint32_t i)
{
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < nkey; k++) {
        h = (h ^ (uint8_t)key[k]) * 16777619u;
    }
    return (char)('a' + (h + len * 7 + i) % 26);
}

/*
 * Allocation as the cache layer does it (cache_alloc: try, else ask the
 * policies, retry; wake the background evictor when the class runs low
 * while memory is full), written out so that the policies are tested on
 * their own, linked only with storage below them.
 */
static item_status_t
alloc_evicting(const char *key, size_t nkey, uint32_t len, struct item **out)
{
    uint8_t cls = item_class_of(nkey, len);
    item_status_t st = ITEM_NO_MEMORY;

    if (cls != 0 && slab_first_past_limit() && slab_class_slabs(cls) == 0 && slab_at_limit()) {
        (void)evict_run(cls, 1, NULL);      /* a spare slab before a first past -m */
    }
    for (int tries = 0, failed = 0; tries < 8; tries++) {
        st = item_alloc_try(key, nkey, 0, 0, len, out);
        if (st != ITEM_NO_MEMORY || (evict_run(cls, 1, NULL) != EVICT_OK && ++failed == 2)) {
            break;
        }
    }
    if (st == ITEM_OK && evict_bg_reserve() > 0 && slab_at_limit() &&
        slab_class_free(cls) < evict_bg_target(cls)) {
        evict_bg_notify(cls);
    }
    return st;
}

static item_status_t
store(const char *key, uint32_t len)
{
    struct item *it;
    size_t nkey = strlen(key);
    item_status_t st = alloc_evicting(key, nkey, len, &it);

    if (st != ITEM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < len; i++) {
        item_value(it)[i] = pattern(key, nkey, len, i);
    }
    memcpy(item_value(it) + len, "\r\n", 2);
    st = item_store(it, ITEM_OP_SET, 0);
    item_release(it);
    return st;
}

static bool
verify(struct item *it)
{
    uint32_t len = item_vlen(it);
    const char *v = item_value(it);

    for (uint32_t i = 0; i < len; i++) {
        if (v[i] != pattern(item_key(it), item_nkey(it), len, i)) {
            return false;
        }
    }
    return v[len] == '\r' && v[len + 1] == '\n';
}

/* Fill every slab with class-A items (policy none: until refused). */
static uint32_t
fill_small(const char *prefix)
{
    char key[32];
    uint32_t n = 0;

    for (;;) {
        snprintf(key, sizeof(key), "%s%u", prefix, n);
        if (store(key, SMALL_LEN) != ITEM_OK) {
            break;
        }
        n++;
    }
    return n;
}

static uint8_t
cls_of(uint32_t len)
{
    return slab_clsid(item_total_size(8, len));
}

static uint32_t
slabs_of(uint8_t cls)
{
    struct slab_class_stats s;
    slab_class_stats(cls, &s);
    return s.total_pages;
}

static uint8_t
owner(uint32_t sid)
{
    struct slab_info info;
    ck_assert(slab_table_info(sid, &info));
    return info.cls;
}

/*
 * Wait until the coarse ms clock is past every slab's last access, so
 * that what happens next is strictly later: a class that then evicts a
 * slab's worth of its own items has shown its need since those slabs were
 * used (item_class_overflow_ms).
 */
static void
clock_past_slabs(void)
{
    uint64_t newest = 0;
    struct slab_info info;

    for (uint32_t sid = 0; sid < slab_table_count(); sid++) {
        if (slab_table_info(sid, &info) && info.accessed_ms > newest) {
            newest = info.accessed_ms;
        }
    }
    for (int i = 0; i < 1000 && clock_now_ms() <= newest; i++) {
        usleep(1000);
    }
}

/*
 * Read (and so touch) one item of slab sid. fill_small() stores keys in
 * chunk order, so key sid * perslab is the first item of slab sid; only
 * that slab is touched.
 */
static void
key_in_slab(const char *prefix, uint32_t n, uint32_t sid, char *out, size_t cap)
{
    uint32_t idx = sid * slab_class_perslab(cls_of(SMALL_LEN));

    ck_assert_uint_lt(idx, n);
    snprintf(out, cap, "%s%u", prefix, idx);
    struct item *it = item_get(out, strlen(out), false, 0, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(slab_sid_of(it), sid);
    item_release(it);
}

static bool
present(const char *prefix, uint32_t i)
{
    char key[32];

    snprintf(key, sizeof(key), "%s%u", prefix, i);
    struct item *it = item_get(key, strlen(key), false, 0, NULL);
    if (it == NULL) {
        return false;
    }
    ck_assert(verify(it));
    item_release(it);
    return true;
}

static uint32_t
count_present(const char *prefix, uint32_t n)
{
    uint32_t found = 0;

    for (uint32_t i = 0; i < n; i++) {
        found += present(prefix, i);
    }
    return found;
}

static void
store_n(const char *prefix, uint32_t n)
{
    char key[32];

    for (uint32_t i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s%u", prefix, i);
        ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
    }
}

static uint32_t
synth_hv(uint8_t cls, uint32_t k)
{
    uint64_t x = ((uint64_t)cls << 40 | k) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(x >> 32);
}

/*
 * Requests measured for cls (sizing.h), without items behind them: gets
 * uniform over `slabs` slabs' worth of keys, so every slab of the class's
 * hit curve up to there earns gets / slabs hits.
 */
static void
measure_uniform(uint8_t cls, uint32_t slabs, uint32_t gets, uint64_t *seed)
{
    uint32_t keys = slabs * slab_class_perslab(cls);

    for (uint32_t k = 0; k < keys; k++) {
        sizing_ref(synth_hv(cls, k), cls, ITEM_REF_STORE);
    }
    for (uint32_t i = 0; i < gets; i++) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        sizing_ref(synth_hv(cls, (uint32_t)(*seed % keys)), cls, ITEM_REF_HIT);
    }
}

/* Fill: class A's items in the first `a_slabs` slabs, B's in the rest. */
static void
fill_two(uint32_t a_slabs)
{
    char key[32];
    uint8_t a = cls_of(SMALL_LEN);

    for (uint32_t i = 0; slabs_of(a) < a_slabs || slab_class_free(a) > 0; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
    }
    for (uint32_t i = 0;; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        if (store(key, LARGE_LEN) != ITEM_OK) {
            break;
        }
    }
    ck_assert_uint_eq(slabs_of(a) + slabs_of(cls_of(LARGE_LEN)), NSLABS);
}

START_TEST(test_none_refuses_when_full)
{
    uint32_t n = fill_small("a");
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(slab_table_count(), NSLABS);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_NO_MEMORY);
    ck_assert_uint_eq(slabs_of(cls_of(SMALL_LEN)), NSLABS);
}
END_TEST

/*
 * The first-slab rule (slab_set_first_past_limit): a new class at the
 * limit gets a slab -- one another class can spare, where the policy picks
 * a slab at every eviction (twemcache's random, lra, lrc); past the limit
 * where the measurement decides (auto, and lrc,lru gated by it), as
 * memcached's first page, since the other slabs hold unread items and the
 * new class has evicted nothing -- and no policy takes another class's
 * only slab, so the classes keep one slab each and memory stays there.
 */
START_TEST(test_first_slab_rule_spares_only_slabs)
{
    static const char *const policies[] = { "random", "lra", "lrc", "lrc,lru", "auto" };

    for (size_t p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        if (p > 0) {            /* the fixture set up the first round */
            teardown();
            setup_with(NSLABS, "none");
        }
        slab_set_first_past_limit(true);
        uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
        fill_small("a");
        ck_assert_uint_eq(slabs_of(a), NSLABS);
        clock_past_slabs();
        ck_assert_int_eq(evict_configure(policies[p], strlen(policies[p])), 0);
        uint32_t past = strcmp(policies[p], "auto") == 0 || strcmp(policies[p], "lrc,lru") == 0;
        ck_assert_int_eq(store("big0", LARGE_LEN), ITEM_OK);
        ck_assert_uint_eq(slab_table_count(), NSLABS + past);
        ck_assert_uint_eq(slabs_of(a), NSLABS - 1 + past);
        ck_assert_uint_eq(slabs_of(b), 1);
        /* b filling up takes a's slabs, never a's last one. */
        char key[32];
        for (int i = 1; i < 400; i++) {
            snprintf(key, sizeof(key), "big%d", i);
            ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
        }
        ck_assert_uint_ge(slabs_of(a), 1);
        ck_assert_uint_eq(slab_table_count(), NSLABS + past);
        /* a, down to one slab, still stores: in its own slab. */
        for (int i = 0; i < 50; i++) {
            snprintf(key, sizeof(key), "a2-%d", i);
            ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
        }
        ck_assert_uint_ge(slabs_of(a), 1);
        ck_assert_uint_ge(slabs_of(b), 1);
        slab_set_first_past_limit(false);
    }
}
END_TEST

/*
 * A class with no slab at the limit carves one past it only when no class
 * can spare one: every class holds its only slab, or slabs may not move
 * (an item-level stack: memcached's first page).
 */
START_TEST(test_first_slab_past_limit_when_none_can_spare)
{
    static const char *const policies[] = { "auto", "lrc,lru", "random", "lru" };
    char key[32];

    for (size_t p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        teardown();
        setup_with(NSLABS, policies[p]);
        slab_set_first_past_limit(true);
        /* NSLABS classes with one slab each fill memory, each in a group
         * of its own (from the second class: the first class's items fit
         * memcached's first, as the second's smallest do), so that none
         * is homed. */
        uint8_t used[NSLABS];
        uint32_t len = 2 * SMALL_LEN, n = 0;
        while (n < NSLABS) {
            uint8_t c = cls_of(len);
            if (n == 0 || c != used[n - 1]) {
                snprintf(key, sizeof(key), "k%u", n);
                ck_assert_int_eq(store(key, len), ITEM_OK);
                ck_assert_uint_eq(slabs_of(c), 1);
                used[n++] = c;
            }
            len = len * 2;
        }
        ck_assert(slab_at_limit());
        uint8_t fresh = cls_of(len);
        while (fresh == used[NSLABS - 1]) {
            len = len * 2;
            fresh = cls_of(len);
        }
        ck_assert_uint_ne(fresh, 0);
        ck_assert_int_eq(store("new", len), ITEM_OK);
        ck_assert_uint_eq(slabs_of(fresh), 1);
        ck_assert_uint_eq(slab_table_count(), NSLABS + 1);
        for (n = 0; n < NSLABS; n++) {
            ck_assert_uint_eq(slabs_of(used[n]), 1);
        }
        slab_set_first_past_limit(false);
    }
    /* One class holding every slab, but an item-level stack moves none. */
    teardown();
    setup_with(NSLABS, "none");
    slab_set_first_past_limit(true);
    fill_small("a");
    ck_assert_int_eq(evict_configure("lru", 3), 0);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(cls_of(LARGE_LEN)), 1);
    ck_assert_uint_eq(slabs_of(cls_of(SMALL_LEN)), NSLABS);
    ck_assert_uint_eq(slab_table_count(), NSLABS + 1);
    slab_set_first_past_limit(false);
}
END_TEST

/* The slab-moving stacks the first-slab tests run under. */
static const char *const slab_policies[] = { "auto", "random", "lrc,lru" };
#define N_SLAB_POLICIES (sizeof(slab_policies) / sizeof(slab_policies[0]))

/* -m of four slabs, fine classes (-f 1.08), first slabs past the limit. */
static void
setup_four_fine_slabs(const char *policy)
{
    teardown();
    setup_factor(4, SLAB_SZ, 1.08, policy);
    slab_set_first_past_limit(true);
}

/*
 * A class whose items have a home in a larger class of its group (fine
 * classes, -f 1.08) may give its only slab to a class that needs one at
 * the limit: its items then go to that larger class, and memory stays at
 * the limit. No other class's only slab moves.
 */
START_TEST(test_only_slab_of_a_homed_class_moves)
{
    char key[32];

    for (size_t p = 0; p < N_SLAB_POLICIES; p++) {
        setup_four_fine_slabs(slab_policies[p]);
        /* Two neighbouring classes of the first group, then two far apart:
         * four classes asked for, four slabs, the room (slab_room). */
        uint32_t lens[4] = { 20, 0, 2000, 20000 };
        uint8_t c0 = cls_of(20);
        lens[1] = 20;
        while (cls_of(lens[1]) == c0) {
            lens[1]++;
        }
        uint8_t c1 = cls_of(lens[1]);
        for (int i = 0; i < 4; i++) {
            snprintf(key, sizeof(key), "key0000%d", i);     /* 8 bytes, as cls_of */
            ck_assert_int_eq(store(key, lens[i]), ITEM_OK);
        }
        ck_assert_uint_eq(slab_table_count(), 4);
        ck_assert(slab_at_limit());
        ck_assert(item_class_homed(c0));
        ck_assert(!item_class_homed(c1));
        uint8_t big = cls_of(20000);
        ck_assert(!item_class_homed(big));
        /* The 20000-byte class fills its slab and needs more, evicting a
         * slab's worth of its own first (nothing is read: that is its
         * need): c0's is the only slab a class can spare. */
        clock_past_slabs();
        uint32_t per = slab_class_perslab(big);
        for (uint32_t i = 1; i <= 2 * per; i++) {
            snprintf(key, sizeof(key), "big%05u", i);
            ck_assert_int_eq(store(key, 20000), ITEM_OK);
        }
        ck_assert_uint_eq(slabs_of(big), 2);
        ck_assert_uint_eq(slab_table_count(), 4);
        ck_assert_uint_eq(slabs_of(c0), 0);
        ck_assert_uint_eq(slabs_of(c1), 1);
        ck_assert_uint_eq(slabs_of(cls_of(2000)), 1);
        /* c0's items now go to c1, and c1 keeps its only slab. */
        ck_assert_uint_eq(item_class_of(8, 20), c1);
        for (int i = 0; i < 50; i++) {
            snprintf(key, sizeof(key), "small%03d", i);
            ck_assert_int_eq(store(key, 20), ITEM_OK);
        }
        ck_assert_uint_eq(slabs_of(c1), 1);
        ck_assert_uint_eq(slab_table_count(), 4);
        slab_set_first_past_limit(false);
    }
}
END_TEST

/*
 * A new class at a full -m gets a first slab past it, as memcached's first
 * page, and the room grows by that slab (nothing is given back for it):
 * the slabs there hold unread items, and a class that has evicted nothing
 * has shown no need for them. A policy that picks a slab at every
 * eviction (random alone) still moves its pick, as twemcache's.
 */
START_TEST(test_new_class_at_a_full_m_gets_a_first_slab)
{
    char key[32];

    for (size_t p = 0; p < N_SLAB_POLICIES; p++) {
        setup_four_fine_slabs(slab_policies[p]);
        bool picks = strcmp(slab_policies[p], "random") == 0;
        uint8_t big = cls_of(20000);
        uint32_t per = slab_class_perslab(big);
        ck_assert_int_eq(store("key00000", 20), ITEM_OK);
        ck_assert_int_eq(store("key00001", 2000), ITEM_OK);
        for (uint32_t i = 0; i <= per; i++) {
            snprintf(key, sizeof(key), "big%05u", i);
            ck_assert_int_eq(store(key, 20000), ITEM_OK);
        }
        ck_assert_uint_eq(slabs_of(big), 2);
        ck_assert_uint_eq(slab_table_count(), 4);
        ck_assert(slab_at_limit());
        size_t room = slab_room();
        ck_assert_int_eq(store("newkey00", 8000), ITEM_OK);
        ck_assert_uint_eq(slabs_of(item_class_of(8, 8000)), 1);
        ck_assert_uint_eq(slab_table_count(), picks ? 4 : 5);
        ck_assert_uint_eq(slabs_of(big), picks ? 1 : 2);
        ck_assert_uint_eq(slab_room(), picks ? room : room + SLAB_SZ);
        evict_give_back();
        ck_assert_uint_eq(slab_table_count() - slab_pool_count(), picks ? 4 : 5);
        slab_set_first_past_limit(false);
    }
}
END_TEST

START_TEST(test_random_moves_a_slab)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint32_t n = fill_small("a");
    struct item_stats before, after;

    item_get_stats(&before);
    ck_assert_int_eq(evict_configure("random", 6), 0);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_OK);

    ck_assert_uint_eq(slab_table_count(), NSLABS);      /* re-carved, not new */
    ck_assert_uint_eq(slabs_of(a), NSLABS - 1);
    ck_assert_uint_eq(slabs_of(b), 1);
    struct slab_class_stats sa, sb;
    slab_class_stats(a, &sa);
    slab_class_stats(b, &sb);
    ck_assert_uint_eq(sa.slabs_evicted, 1);
    ck_assert_uint_eq(sb.slabs_gained, 1);
    ck_assert_uint_eq(sb.used_chunks, 1);
    ck_assert_uint_eq(sb.total_chunks, slab_class_perslab(b));

    item_get_stats(&after);
    uint32_t perslab = slab_class_perslab(a);
    ck_assert_uint_eq(after.evicted_by_slab - before.evicted_by_slab, perslab);
    ck_assert_uint_eq(after.evictions - before.evictions, perslab);
    ck_assert_uint_eq(after.curr_items, (uint64_t)n - perslab + 1);
    struct item_class_stats ia;
    item_class_stats(a, &ia);
    ck_assert_uint_eq(ia.evicted_by_slab, perslab);
}
END_TEST

START_TEST(test_random_uses_every_slab)
{
    /* Over many picks every slab id is chosen (uniform, seeded, no pick
     * thrown away): P(some slab never chosen in 100) is about 1e-5. The
     * picks are for class b, which stores nothing: a pick of its own slab
     * has no item to judge and re-carves it, so every pick shows. */
    uint8_t b = cls_of(LARGE_LEN);
    bool seen[NSLABS] = { false };

    fill_small("a");
    ck_assert_int_eq(evict_configure("random", 6), 0);
    for (int round = 0; round < 100; round++) {
        uint64_t created[NSLABS];
        struct slab_info info;
        for (uint32_t sid = 0; sid < NSLABS; sid++) {
            ck_assert(slab_table_info(sid, &info));
            created[sid] = info.created_ms;
        }
        /* The coarse ms clock must move past every creation time (on a
         * loaded machine its ticks can lag a fixed sleep). */
        uint64_t newest = 0;
        for (uint32_t sid = 0; sid < NSLABS; sid++) {
            newest = created[sid] > newest ? created[sid] : newest;
        }
        for (int i = 0; i < 1000 && clock_now_ms() <= newest; i++) {
            usleep(1000);
        }
        ck_assert_int_eq(evict_run(b, 1, NULL), EVICT_OK);
        int changed = 0;
        for (uint32_t sid = 0; sid < NSLABS; sid++) {
            ck_assert(slab_table_info(sid, &info));
            if (info.created_ms != created[sid]) {
                seen[sid] = true;
                changed++;
            }
        }
        ck_assert_int_eq(changed, 1);   /* exactly one slab re-carved */
    }
    for (int i = 0; i < NSLABS; i++) {
        ck_assert_msg(seen[i], "slab %d never chosen", i);
    }
}
END_TEST

START_TEST(test_random_takes_other_classes_first)
{
    /* Once b holds slabs, its picks land on a's (colder) slabs, not its
     * own: six more of a's slabs move in six runs. With uniform draws over
     * every slab that happens with probability 7/8 * 6/8 * ... * 2/8 =
     * 0.019. (The last of a's slabs is left out: 64 redraws that all land
     * on b's seven slabs, (7/8)^64 = 2e-4, would keep the own pick.) */
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);

    fill_small("a");
    ck_assert_int_eq(evict_configure("random", 6), 0);
    for (uint32_t k = 1; k < NSLABS; k++) {
        ck_assert_int_eq(evict_run(b, 1, NULL), EVICT_OK);
        ck_assert_uint_eq(slabs_of(b), k);
        ck_assert_uint_eq(slabs_of(a), NSLABS - k);
    }
    /* Once b holds every slab its own slab is the victim. */
    for (int i = 0; i < 1000 && slabs_of(a) > 0; i++) {
        ck_assert_int_eq(evict_run(b, 1, NULL), EVICT_OK);
    }
    ck_assert_uint_eq(slabs_of(b), NSLABS);
    ck_assert_int_eq(evict_run(b, 1, NULL), EVICT_OK);
    ck_assert_uint_eq(slabs_of(b), NSLABS);
}
END_TEST

START_TEST(test_lra_picks_least_recently_accessed)
{
    uint8_t b = cls_of(LARGE_LEN);
    uint32_t n = fill_small("a");
    char key[32];

    usleep(30 * 1000);
    /* Read one item in every slab but slab 3: it becomes the coldest. */
    for (uint32_t sid = 0; sid < NSLABS; sid++) {
        if (sid == 3) {
            continue;
        }
        key_in_slab("a", n, sid, key, sizeof(key));
    }
    ck_assert_int_eq(evict_configure("lra", 3), 0);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(owner(3), b);
    for (uint32_t sid = 0; sid < NSLABS; sid++) {
        if (sid != 3) {
            ck_assert_uint_ne(owner(sid), b);
        }
    }
}
END_TEST

START_TEST(test_lrc_picks_least_recently_created)
{
    uint8_t b = cls_of(LARGE_LEN);
    uint32_t n = fill_small("a");
    char key[32];

    /* Slab 0 was carved first; reading it makes it hot for lra, not lrc.
     * The others idle for over a second are colder than the new items B
     * will have on probation, so lrc takes them rather than B's own. */
    usleep(2100 * 1000);
    key_in_slab("a", n, 0, key, sizeof(key));
    ck_assert_int_eq(evict_configure("lrc", 3), 0);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(owner(0), b);

    /* The re-carved slab is now the youngest: the next victim is slab 1. */
    struct slab_info info;
    ck_assert(slab_table_info(0, &info));
    uint64_t created = info.created_ms;
    for (uint32_t sid = 1; sid < NSLABS; sid++) {
        ck_assert(slab_table_info(sid, &info));
        ck_assert_uint_ge(created, info.created_ms);
    }
    ck_assert_int_eq(store("big2", LARGE_LEN), ITEM_OK);   /* fits in slab 0 */
    ck_assert_int_eq(store("big3", LARGE_LEN), ITEM_OK);
    ck_assert_int_eq(store("big4", LARGE_LEN), ITEM_OK);
    ck_assert_int_eq(store("big5", LARGE_LEN), ITEM_OK);   /* needs a slab */
    ck_assert_uint_eq(owner(1), b);
}
END_TEST

START_TEST(test_busy_slab_is_skipped)
{
    uint8_t b = cls_of(LARGE_LEN);
    uint32_t n = fill_small("a");
    char key[32];

    /* The coldest slab (5) holds an item being "sent": it must be skipped. */
    char held_key[32];
    key_in_slab("a", n, 5, held_key, sizeof(held_key));
    struct item *held = item_get(held_key, strlen(held_key), false, 0, NULL);
    ck_assert_ptr_nonnull(held);
    ck_assert_uint_eq(slab_sid_of(held), 5);
    /* Access order made: slab 5 (fill time), then slab 3, then the rest. */
    usleep(30 * 1000);
    key_in_slab("a", n, 3, key, sizeof(key));
    usleep(30 * 1000);
    for (uint32_t sid = 0; sid < NSLABS; sid++) {
        if (sid != 3 && sid != 5) {
            key_in_slab("a", n, sid, key, sizeof(key));
        }
    }
    char before[SMALL_LEN];
    memcpy(before, item_value(held), SMALL_LEN);

    uint64_t skipped = evict_skipped_busy();
    ck_assert_int_eq(evict_configure("lra", 3), 0);
    ck_assert_int_eq(store("big", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(evict_skipped_busy(), skipped + 1);
    ck_assert_uint_ne(owner(5), b);             /* never under the reader */
    ck_assert_uint_eq(owner(3), b);             /* the next coldest */
    ck_assert_mem_eq(item_value(held), before, SMALL_LEN);
    ck_assert(verify(held));
    item_release(held);
}
END_TEST

START_TEST(test_gate_prefers_own_tail_when_class_has_its_share)
{
    uint8_t a = cls_of(SMALL_LEN);
    char key[32];

    fill_small("a");
    ck_assert_int_eq(evict_configure("lra,lru", 7), 0);
    /* All memory is A's: its coldest memory is its own, so it reuses its
     * LRU tail instead of dropping one of its own slabs. */
    ck_assert(!evict_slab_wanted(a, 0));
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "more%d", i);
        ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
    }
    struct slab_class_stats sa;
    slab_class_stats(a, &sa);
    ck_assert_uint_eq(sa.slabs_evicted, 0);
    struct item_stats is;
    item_get_stats(&is);
    ck_assert_uint_ge(is.evictions, 200);
    ck_assert_uint_eq(is.evicted_by_slab, 0);
}
END_TEST

START_TEST(test_gate_moves_unread_slabs_to_the_class)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    char key[32];

    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    item_set_ref_hook(sizing_ref);      /* as the server: A's keys are sampled as stored */
    fill_small("a");
    clock_past_slabs();
    ck_assert_int_eq(evict_configure("lra,lru", 7), 0);
    /* Nobody reads A: its slabs earn no measured hit; but B, measured on
     * nothing either, has shown no need for them yet. */
    ck_assert(!evict_slab_wanted(b, 0));
    ck_assert_int_eq(store("b0", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(b), 1);
    /* Once B has evicted a slab's worth of its own, it takes them all;
     * then its memory is its own and it evicts items. */
    uint32_t per = slab_class_perslab(b);
    for (uint32_t i = 1; i < 2 * per; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert(!evict_slab_wanted(b, 0));
    for (int i = 2 * per; i < 40; i++) {
        snprintf(key, sizeof(key), "b%d", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(b), NSLABS);
    ck_assert_uint_eq(slabs_of(a), 0);
    struct item_class_stats ib;
    item_class_stats(b, &ib);
    ck_assert_uint_gt(ib.evicted, 0);           /* item-level, by its LRU */
    ck_assert_uint_eq(ib.evicted_by_slab, 0);   /* never its own slab */
}
END_TEST

/*
 * Gated lrc for a class with no items of its own takes the coldest slab,
 * not the oldest: the oldest (slab 0) was just read. Ungated lrc stays
 * FIFO (test_lrc_picks_least_recently_created).
 */
START_TEST(test_gated_lrc_spares_a_hot_old_slab_for_an_empty_class)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    char key[32];

    uint32_t n = fill_small("a");
    usleep(30 * 1000);
    key_in_slab("a", n, 0, key, sizeof(key));       /* slab 0: oldest, hot */
    ck_assert_int_eq(evict_configure("lrc,lru", 7), 0);
    ck_assert_uint_eq(item_class_items(b), 0);
    ck_assert_int_eq(store("b0", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert_uint_eq(owner(0), a);
    struct item *it = item_get(key, strlen(key), false, 0, NULL);
    ck_assert_ptr_nonnull(it);
    item_release(it);
}
END_TEST

/*
 * An empty slab of another class is taken before any policy evicts: here
 * lrc alone would drop the oldest slab (A's first, full of items), and
 * the gated lrc,lru would have B evict its own items; instead B gets A's
 * emptied slabs and nothing is evicted.
 */
START_TEST(test_empty_slab_taken_before_evicting)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint32_t per = slab_class_perslab(a);
    char key[32];

    uint32_t n = fill_small("a");
    ck_assert_uint_eq(slabs_of(a), NSLABS);
    /* Empty A's last two slabs (slabs 6 and 7): delete their keys. */
    for (uint32_t i = (NSLABS - 2) * per; i < n; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        ck_assert_int_eq(item_delete(key, strlen(key), NULL, NULL), ITEM_OK);
    }
    ck_assert_uint_eq(slab_find_empty(b, 0), NSLABS - 2);
    ck_assert_int_eq(evict_configure("lrc", 3), 0);
    /* Fill both slabs' worth of B. */
    uint32_t perb = slab_class_perslab(b);
    for (uint32_t i = 0; i < 2 * perb; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(b), 2);
    ck_assert_uint_eq(slabs_of(a), NSLABS - 2);
    struct item_stats is;
    item_get_stats(&is);
    ck_assert_uint_eq(is.evictions, 0);
    /* Every A key outside the emptied slabs is still there. */
    for (uint32_t i = 0; i < (NSLABS - 2) * per; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        ck_assert_ptr_nonnull(it);
        item_release(it);
    }
    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);
    /* Plain lru never moves slabs, empty or not. */
    for (uint32_t i = 0; i < per; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        ck_assert_int_eq(item_delete(key, strlen(key), NULL, NULL), ITEM_OK);
    }
    ck_assert_uint_eq(slab_find_empty(b, 0), 0);
    ck_assert_int_eq(evict_configure("lru", 3), 0);
    ck_assert_int_eq(store("b-more", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(b), 2);
    ck_assert_uint_eq(slab_find_empty(b, 0), 0);
}
END_TEST

/* Measured: a gated policy's pick stays with a class whose last slab
 * earns more than the asking class's next one would. */
START_TEST(test_gate_keeps_slabs_that_earn_more)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint64_t seed = 5;
    char key[32];

    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    fill_two(NSLABS - 1);
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert_int_eq(evict_configure("lra,lru", 7), 0);
    measure_uniform(a, NSLABS, 8000, &seed);    /* 1,000 hits a slab */
    measure_uniform(b, 1, 8000, &seed);         /* all within its one slab */
    for (uint32_t sid = 0; sid < NSLABS; sid++) {
        ck_assert(!evict_slab_wanted(b, sid));
    }
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "bnew%d", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert_uint_eq(slabs_of(a), NSLABS - 1);
    struct item_class_stats ib;
    item_class_stats(b, &ib);
    ck_assert_uint_ge(ib.evicted, 10);
}
END_TEST

/*
 * A class with nothing of its own, under a gated stack, gets the slab the
 * measurement values least: B's (no hit measured), not lrc's oldest (A's
 * slab 0, whose class earns hits).
 */
START_TEST(test_empty_class_gets_the_least_valued_slab)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN), c = cls_of(2000);
    uint64_t seed = 3;

    ck_assert_uint_ne(c, a);
    ck_assert_uint_ne(c, b);
    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    fill_two(NSLABS - 1);
    measure_uniform(a, NSLABS, 8000, &seed);
    ck_assert_uint_eq(owner(0), a);
    ck_assert_uint_eq(owner(NSLABS - 1), b);
    ck_assert_int_eq(evict_configure("lrc,lru", 7), 0);
    ck_assert_int_eq(store("c", 2000), ITEM_OK);
    ck_assert_uint_eq(owner(NSLABS - 1), c);
    ck_assert_uint_eq(slabs_of(a), NSLABS - 1);
}
END_TEST

/*
 * Emptying a slab moves its items read since the CLOCK hand last passed
 * to other chunks of their class, where the class's coldest items give
 * way; the rest go with the slab. With -o slab_rescue=0 all go.
 */
static void
slab_evict_with_reads(bool rescue, uint32_t nread)
{
    uint8_t a = cls_of(SMALL_LEN);
    uint32_t n = fill_small("a");
    uint32_t per = slab_class_perslab(a);
    char key[32];

    item_set_slab_rescue(rescue);
    ck_assert_uint_ge(per, nread + 1);
    ck_assert_uint_eq(owner(0), a);
    for (uint32_t i = 0; i < nread; i++) {          /* keys in slab 0 */
        snprintf(key, sizeof(key), "a%u", i);
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_eq(slab_sid_of(it), 0);
        item_release(it);
    }
    ck_assert_int_eq(item_slab_evict(0, cls_of(LARGE_LEN)), ITEM_SLAB_OK);
    ck_assert_uint_eq(owner(0), cls_of(LARGE_LEN));

    struct item_stats st;
    item_get_stats(&st);
    uint32_t kept = rescue ? nread : 0;
    ck_assert_uint_eq(st.slab_rescues, kept);
    ck_assert_uint_eq(st.evictions, per);           /* a slab's worth, either way */
    ck_assert_uint_eq(st.curr_items, n - per);
    for (uint32_t i = 0; i < per; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        if (i < kept) {
            ck_assert_ptr_nonnull(it);
            ck_assert_uint_ne(slab_sid_of(it), 0);
            ck_assert(verify(it));
            item_release(it);
        } else {
            ck_assert_ptr_null(it);
        }
    }
    /* the rescued items took the places of as many of the class's
     * coldest: unread items of the other slabs (the oldest on probation) */
    if (rescue) {
        uint32_t others = 0;
        for (uint32_t i = per; i < n; i++) {
            others += present("a", i);
        }
        ck_assert_uint_eq(others, n - per - nread);
    }
}

/* --- probation (item_clock.c) and own-slab sweeps ------------------------ */

/*
 * One slab of class A, its items all read (then, if overwrite, all given
 * new values nobody reads); then two slabs' worth of new keys nobody
 * reads. Returns how many old keys are still there and checks that the
 * newest new key is. A plain CLOCK clears the read marks on its first lap
 * and evicts every old item on its second; with probation the new keys
 * displace each other, and the old items lose only what the hand takes
 * while the FIFO fills.
 */
static uint32_t
old_items_kept(bool overwrite)
{
    uint8_t a = cls_of(SMALL_LEN);
    uint32_t per = slab_class_perslab(a);

    teardown();
    setup_with(1, "lru");
    store_n("old", per);
    ck_assert_uint_eq(count_present("old", per), per);     /* every one read */
    if (overwrite) {
        store_n("old", per);
    }
    store_n("new", 2 * per);
    ck_assert(present("new", 2 * per - 1));  /* new keys evicted each other */
    return count_present("old", per);
}

START_TEST(test_probation_spares_read_items)
{
    uint32_t per = slab_class_perslab(cls_of(SMALL_LEN));
    uint32_t kept = old_items_kept(false);

    ck_assert_uint_ge(kept, per / 2);
    ck_assert_uint_le(kept, per);
}
END_TEST

/* A new value for a key whose value was read is not on probation: the
 * overwritten old keys fare as the read ones did. */
START_TEST(test_probation_skips_overwrites)
{
    uint32_t per = slab_class_perslab(cls_of(SMALL_LEN));

    ck_assert_uint_ge(old_items_kept(true), per / 2);
}
END_TEST

/*
 * A plain slab-level policy whose victim is the asking class's own slab
 * judges the class's items one by one instead (probation, then the hand):
 * the oldest new item nobody read goes, and the class keeps its slabs.
 * Re-carving the slab instead dropped a slab's worth of items, or pushed
 * out items of the class's other slab to rescue its read ones.
 */
START_TEST(test_own_slab_judged_item_by_item)
{
    uint8_t a = cls_of(SMALL_LEN);
    uint32_t per = slab_class_perslab(a);

    teardown();
    setup_with(2, "lrc");
    item_set_slab_rescue(true);
    store_n("a", 2 * per);                  /* slab 0 then slab 1, in order */
    ck_assert_uint_eq(owner(0), a);
    ck_assert_uint_eq(owner(1), a);
    uint32_t nread = per / 2;
    for (uint32_t i = 0; i < nread; i++) {
        ck_assert(present("a", i));
    }
    ck_assert_int_eq(store("fresh", SMALL_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(a), 2);
    ck_assert_uint_eq(slab_table_count(), 2);
    struct item_stats st;
    item_get_stats(&st);
    ck_assert_uint_eq(st.evictions, 1);
    ck_assert_uint_eq(st.curr_items, 2 * per);
    ck_assert(!present("a", nread));        /* the oldest never read */
    ck_assert(present("a", 0));
    ck_assert(present("a", nread + 1));
    ck_assert(present("a", 2 * per - 1));
}
END_TEST

START_TEST(test_slab_evict_rescues_read_items)
{
    slab_evict_with_reads(true, 10);
}
END_TEST

START_TEST(test_slab_evict_without_rescue_drops_all)
{
    slab_evict_with_reads(false, 10);
}
END_TEST

/* With free chunks in its class, every live item of an emptied slab moves
 * into them, read or not (memcached's page mover does the same). */
START_TEST(test_slab_evict_moves_items_to_free_chunks)
{
    uint8_t a = cls_of(SMALL_LEN);
    uint32_t per = slab_class_perslab(a);
    char key[32];

    item_set_slab_rescue(true);
    for (uint32_t i = 0; i < per + per / 2; i++) {  /* slab 0 full, slab 1 half */
        snprintf(key, sizeof(key), "a%u", i);
        ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(owner(0), a);
    ck_assert_uint_eq(owner(1), a);
    ck_assert_int_eq(item_slab_evict(0, cls_of(LARGE_LEN)), ITEM_SLAB_OK);

    struct item_stats st;
    item_get_stats(&st);
    uint32_t room = per - per / 2;                  /* slab 1's free chunks */
    ck_assert_uint_eq(st.slab_rescues, room);
    ck_assert_uint_eq(st.evictions, per - room);
    ck_assert_uint_eq(st.curr_items, per);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < per; i++) {
        snprintf(key, sizeof(key), "a%u", i);
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        if (it != NULL) {
            ck_assert_uint_eq(slab_sid_of(it), 1);
            ck_assert(verify(it));
            item_release(it);
            kept++;
        }
    }
    ck_assert_uint_eq(kept, room);
}
END_TEST

/* --- the measured allocator (auto) ------------------------------------- */

/* Four slabs each for A and B, then `auto`. */
static void
auto_four_and_four(void)
{
    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    fill_two(4);
    ck_assert_uint_eq(slabs_of(cls_of(LARGE_LEN)), 4);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
}

/* Class B's next slab earns more than A's last: B gains slabs from A. */
START_TEST(test_auto_gives_slabs_to_higher_marginal_hits)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint64_t seed = 7;
    char key[32];

    auto_four_and_four();
    measure_uniform(a, 6, 6000, &seed);      /* 1,000 hits a slab */
    measure_uniform(b, 12, 18000, &seed);    /* 1,500 hits a slab */
    ck_assert_uint_eq(evict_auto_donor(b, false), a);
    ck_assert_uint_eq(evict_auto_donor(a, false), 0);
    uint64_t moved = evict_auto_moves();
    for (uint32_t i = 100; i < 112; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_gt(slabs_of(b), 4);
    ck_assert_uint_eq(slabs_of(a) + slabs_of(b), NSLABS);
    ck_assert_uint_eq(evict_auto_moves() - moved, slabs_of(b) - 4);
}
END_TEST

/*
 * Past the limit only first slabs stay: with -m lowered under what the
 * classes hold, allocations give back to the system (not to another class)
 * the slabs the measurement values least until the slabs fit, and each
 * class keeps one. Every item left is intact.
 */
START_TEST(test_auto_gives_back_slabs_past_the_limit)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint64_t seed = 7;
    char key[32];

    auto_four_and_four();
    slab_set_first_past_limit(true);
    measure_uniform(a, 6, 6000, &seed);      /* A's slabs earn least */
    measure_uniform(b, 12, 18000, &seed);
    ck_assert_uint_eq(slab_pool_count(), 0);
    slab_set_limit(3 * SLAB_SZ);
    for (uint32_t i = 100; i < 100 + 4 * slab_class_perslab(b); i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slab_malloced(), 3 * SLAB_SZ);
    ck_assert_uint_eq(slab_pool_count(), NSLABS - 3);
    ck_assert_uint_eq(slab_table_count(), NSLABS);
    ck_assert_uint_eq(slabs_of(a) + slabs_of(b), 3);
    ck_assert_uint_ge(slabs_of(a), 1);
    ck_assert_uint_ge(slabs_of(b), 1);
    ck_assert_uint_gt(count_present("a", 4 * NSLABS * slab_class_perslab(a)), 0);
    ck_assert_uint_gt(count_present("b", 200), 0);
    /* Memory back under the limit: a new slab comes out of the pool. */
    slab_set_limit(4 * SLAB_SZ);
    for (uint32_t i = 300; slabs_of(a) + slabs_of(b) < 4 && i < 300 + 8 * slab_class_perslab(b); i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(a) + slabs_of(b), 4);
    ck_assert_uint_eq(slab_pool_count(), NSLABS - 4);
    ck_assert_uint_eq(slab_table_count(), NSLABS);
    slab_set_first_past_limit(false);
}
END_TEST

/* A class's last slab as auto orders donors: nothing if unmeasured. */
static double
donor_value(const struct sizing_edge *e)
{
    return e->last_var <= 0.0 || e->last * e->last < e->last_var ? 0.0 : e->last;
}

/*
 * The cheapest donor by its estimate is not the only one asked: A's slabs
 * (4 MB of 80-byte chunks, about 1 key in 400 sampled) are measured on a
 * few sampled gets, B's (20 KB chunks, 128 keys of 204 sampled) on
 * thousands, and C's next slab out-earns both by about as much. Over many
 * draws of the same load, the donor is always the cheapest of those C's
 * next slab beats beyond the noise, and in some draws that is B though A
 * is cheaper.
 */
START_TEST(test_auto_asks_a_dearer_donor_measured_finely)
{
    uint8_t a, b, c;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];
    unsigned passed_over = 0;

    teardown();
    setup_sized(NSLABS, 4 * 1024 * 1024, "none");
    a = cls_of(SMALL_LEN);
    b = cls_of(LARGE_LEN);
    c = cls_of(2000);
    fill_two(2);
    ck_assert_uint_eq(slabs_of(a), 2);
    ck_assert_uint_eq(slabs_of(b), NSLABS - 2);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (unsigned i = 1; i <= slab_class_count(); i++) {
        slabs[i] = slabs_of((uint8_t)i);
    }
    for (uint64_t draw = 1; draw <= 40; draw++) {
        uint64_t seed = draw;
        ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
        measure_uniform(a, 2, 2 * 2000, &seed);     /* 2,000 a slab, ~5 sampled */
        measure_uniform(b, 8, 8 * 3000, &seed);     /* 3,000 a slab */
        measure_uniform(c, 8, 8 * 3800, &seed);     /* 3,800 a slab */
        evict_auto_note_move();                     /* the figures are read anew */
        sizing_edges(slabs, edge, slab_class_count(), SIZING_SHORT);
        uint8_t cheap = donor_value(&edge[a]) <= donor_value(&edge[b]) ? a : b;
        uint8_t dear = cheap == a ? b : a;
        uint8_t want = evict_auto_pays(c, cheap, 0) ? cheap : evict_auto_pays(c, dear, 0) ? dear : 0;
        ck_assert_uint_eq(evict_auto_donor(c, false), want);
        passed_over += want == dear;
    }
    ck_assert_uint_gt(passed_over, 0);
}
END_TEST

/*
 * Gets measured for A (uniform over a_slabs slabs' worth of keys) and B
 * (over b_slabs), a_gets and b_gets of them interleaved at random: the
 * keys first, as stored.
 */
static void
measure_two(uint8_t a, uint32_t a_slabs, uint32_t a_gets, uint8_t b, uint32_t b_slabs,
            uint32_t b_gets, uint64_t *seed)
{
    uint32_t a_keys = a_slabs * slab_class_perslab(a), b_keys = b_slabs * slab_class_perslab(b);

    for (uint32_t k = 0; k < a_keys; k++) {
        sizing_ref(synth_hv(a, k), a, ITEM_REF_STORE);
    }
    for (uint32_t k = 0; k < b_keys; k++) {
        sizing_ref(synth_hv(b, k), b, ITEM_REF_STORE);
    }
    while (a_gets + b_gets > 0) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        bool to_a = *seed % (a_gets + b_gets) < a_gets;
        uint8_t cls = to_a ? a : b;
        uint32_t keys = to_a ? a_keys : b_keys;
        sizing_ref(synth_hv(cls, (uint32_t)((*seed >> 20) % keys)), cls, ITEM_REF_HIT);
        *(to_a ? &a_gets : &b_gets) -= 1;
    }
}

/* The rule's test on one window's edges alone: to's next slab out-earns
 * from's last by more than 3 (AUTO_Z) standard deviations. */
static bool
window_shows(const struct sizing_edge *to, const struct sizing_edge *from)
{
    double d = to->next - from->last;

    return d > 0 && d * d > 9.0 * (to->next_var + from->last_var);
}

/* A measurement whose short window ends every few hundred sampled gets. */
#define SHORT_WINDOWS_LIMIT (8u << 20)
/* One whose short window holds a few thousand. */
#define SHIFT_LIMIT (64u << 20)

/*
 * A class with a small share of the gets, sampled coarsely (A: 1 key in
 * about 6), whose keys end one slab past its size: its next slab earns
 * about twice what B's last earns. The short window holds a dozen or two
 * of A's sampled gets there, too few to show the difference beyond the
 * noise; the long window holds about four times as many, and the rule
 * moves B's slab to A in nearly every draw.
 */
START_TEST(test_auto_long_window_shows_a_coarse_class_s_worth)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1];
    unsigned draws = 20, short_shows = 0, moved = 0;

    fill_two(4);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (unsigned i = 1; i <= slab_class_count(); i++) {
        slabs[i] = slabs_of((uint8_t)i);
    }
    ck_assert_uint_eq(slabs[a], 4);
    for (uint64_t draw = 1; draw <= draws; draw++) {
        uint64_t seed = draw * 0x9e3779b97f4a7c15ull;
        ck_assert_int_eq(sizing_setup(SHORT_WINDOWS_LIMIT, NSLABS), 0);
        /* A's keys over 5 slabs, B's over 12; about 20 short windows
         * of sampled gets. */
        measure_two(a, 5, 8 * 1150, b, 12, 8 * 1000, &seed);
        evict_auto_note_move();
        sizing_edges(slabs, edge, slab_class_count(), SIZING_SHORT);
        short_shows += window_shows(&edge[a], &edge[b]);
        moved += evict_auto_donor(a, false) == b;
    }
    ck_assert_msg(short_shows <= draws / 2, "the short window alone showed it in %u of %u",
                  short_shows, draws);
    ck_assert_msg(moved >= draws - 3, "moved in %u of %u draws", moved, draws);
}
END_TEST

/*
 * Two classes whose slabs earn the same, with windows that end: the long
 * window, asked whenever the short one leans one way, moves no more than
 * the noise allows (a move in at most 1 of 20 draws, each way).
 */
START_TEST(test_auto_long_window_equal_classes_do_not_trade)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    unsigned draws = 20, to_a = 0, to_b = 0;

    fill_two(4);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (uint64_t draw = 1; draw <= draws; draw++) {
        uint64_t seed = draw * 0x2545f4914f6cdd1dull;
        ck_assert_int_eq(sizing_setup(SHORT_WINDOWS_LIMIT, NSLABS), 0);
        /* Both over 8 slabs' worth of keys, the same gets a slab. */
        measure_two(a, 8, 8 * 1000, b, 8, 8 * 1000, &seed);
        evict_auto_note_move();
        to_a += evict_auto_donor(a, false) == b;
        to_b += evict_auto_donor(b, false) == a;
    }
    ck_assert_msg(to_a <= 1 && to_b <= 1, "moves to A in %u, to B in %u of %u draws", to_a, to_b,
                  draws);
}
END_TEST

/*
 * The long window remembers a shift's past: A was read much, then nobody
 * reads A and B is read. The long window still shows A's next slab above
 * B's last beyond the noise; the short one shows the gets since, and no
 * slab moves from B to A.
 */
START_TEST(test_auto_long_window_does_not_undo_a_shift)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1], edge_long[SLAB_CLASS_MAX + 1];
    uint64_t seed = 5;

    fill_two(4);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (unsigned i = 1; i <= slab_class_count(); i++) {
        slabs[i] = slabs_of((uint8_t)i);
    }
    ck_assert_int_eq(sizing_setup(SHORT_WINDOWS_LIMIT, NSLABS), 0);
    measure_two(a, 6, 20000, b, 12, 1000, &seed);  /* A hot */
    measure_two(a, 6, 0, b, 12, 2500, &seed);      /* then only B */
    evict_auto_note_move();
    sizing_edges(slabs, edge, slab_class_count(), SIZING_SHORT);
    sizing_edges(slabs, edge_long, slab_class_count(), SIZING_LONG);
    ck_assert_msg(edge[a].next <= edge[b].last, "short: A next %f, B last %f", edge[a].next,
                  edge[b].last);
    ck_assert_msg(window_shows(&edge_long[a], &edge_long[b]), "long: A next %f, B last %f",
                  edge_long[a].next, edge_long[b].last);
    ck_assert_uint_eq(evict_auto_donor(a, false), 0);
    ck_assert_uint_eq(evict_auto_donor(a, true), b);    /* B could give */
}
END_TEST

/*
 * Anew with 4 MB slabs, so that A (80-byte chunks) is sampled at about 1
 * key in 400: A holds 4 slabs, B (LARGE_LEN) the rest, under `auto`;
 * slabs[] each class's slabs.
 */
static void
coarse_two(uint8_t *a, uint8_t *b, uint32_t *slabs)
{
    teardown();
    setup_sized(NSLABS, 4 * 1024 * 1024, "none");
    *a = cls_of(SMALL_LEN);
    *b = cls_of(LARGE_LEN);
    fill_two(4);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (unsigned i = 1; i <= slab_class_count(); i++) {
        slabs[i] = slabs_of((uint8_t)i);
    }
}

/*
 * A class sampled coarsely (A: 4 MB slabs of 80-byte chunks, about 1 key
 * in 800 once the sample is full) whose slabs earn half again what B's
 * next would, but with so small a share of the sampled gets that its
 * short window often holds less than one of them: unmeasured there. The
 * long window holds a few, and it, not the blank short one, decides: B
 * takes no slab from A in any draw, though in about a third A's short
 * window is blank (and B took one in each of those before).
 */
START_TEST(test_auto_long_window_keeps_a_coarse_class_s_slab)
{
    uint8_t a, b;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1], edge_long[SLAB_CLASS_MAX + 1];
    unsigned draws = 30, blank = 0, taken = 0;

    coarse_two(&a, &b, slabs);
    for (uint64_t draw = 1; draw <= draws; draw++) {
        uint64_t seed = draw * 0xd1342543de82ef95ull;
        ck_assert_int_eq(sizing_setup(SHORT_WINDOWS_LIMIT, NSLABS), 0);
        /* A's keys over its 4 slabs, B's over 12: 1,500 and 1,000 gets
         * a slab. */
        measure_two(a, 4, 6000, b, 12, 12000, &seed);
        evict_auto_note_move();
        sizing_edges(slabs, edge, slab_class_count(), SIZING_SHORT);
        sizing_edges(slabs, edge_long, slab_class_count(), SIZING_LONG);
        ck_assert_msg(donor_value(&edge_long[a]) > 0.0, "draw %u: A's long window is blank",
                      (unsigned)draw);
        blank += donor_value(&edge[a]) == 0.0;
        taken += evict_auto_donor(b, false) == a;
    }
    ck_assert_msg(blank > 0, "A's short window was measured in all %u draws", draws);
    ck_assert_msg(taken == 0, "B took A's slab in %u of %u draws (%u blank)", taken, draws,
                  blank);
}
END_TEST

/*
 * The load moves from A (4 MB slabs of 80-byte chunks, about 1 key in
 * 400 sampled) to B. In the short window A's last slab shows no sampled
 * get; the long one still holds A's worth from before, above B's next
 * slab. A blank is a low level, not a known zero, and read with one
 * sampled get's noise it is still far below what B's next slab earns in
 * the short window: B takes A's slab. Judged on the long window alone,
 * B took none.
 */
START_TEST(test_auto_blank_donor_gives_to_a_clear_taker)
{
    uint8_t a, b;
    uint32_t slabs[SLAB_CLASS_MAX + 1] = { 0 };
    struct sizing_edge edge[SLAB_CLASS_MAX + 1], edge_long[SLAB_CLASS_MAX + 1];
    uint64_t seed = 7;

    coarse_two(&a, &b, slabs);
    ck_assert_int_eq(sizing_setup(SHIFT_LIMIT, NSLABS), 0);
    measure_two(a, 4, 200000, b, 12, 2000, &seed);     /* A hot */
    measure_two(a, 4, 0, b, 12, 80000, &seed);         /* then B */
    evict_auto_note_move();
    sizing_edges(slabs, edge, slab_class_count(), SIZING_SHORT);
    sizing_edges(slabs, edge_long, slab_class_count(), SIZING_LONG);
    ck_assert_msg(donor_value(&edge[a]) == 0.0, "A's short window: last %f", edge[a].last);
    ck_assert_msg(edge_long[a].last > edge_long[b].next && donor_value(&edge_long[a]) > 0.0,
                  "long: A last %f, B next %f", edge_long[a].last, edge_long[b].next);
    ck_assert_uint_eq(evict_auto_donor(b, false), a);
}
END_TEST

/* Two classes whose next and last slabs earn the same trade nothing. */
START_TEST(test_auto_equal_classes_do_not_trade)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint64_t seed = 11;
    char key[32];

    auto_four_and_four();
    measure_uniform(a, 6, 6000, &seed);
    measure_uniform(b, 6, 6000, &seed);
    ck_assert_uint_eq(evict_auto_donor(a, false), 0);
    ck_assert_uint_eq(evict_auto_donor(b, false), 0);
    uint64_t moved = evict_auto_moves();
    for (uint32_t i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "x%u", i);
        ck_assert_int_eq(store(key, i % 2 ? SMALL_LEN : LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(evict_auto_moves(), moved);
    ck_assert_uint_eq(slabs_of(a), 4);
    ck_assert_uint_eq(slabs_of(b), 4);
}
END_TEST

/*
 * A class with no slab gets its first one, measured or not; and memory
 * nobody reads (a last slab with no measured hit) goes to whoever needs
 * it: a shift to new keys of a new size, sets only at first.
 */
START_TEST(test_auto_first_slab_and_unread_memory)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);

    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    item_set_ref_hook(sizing_ref);      /* as the server: A's keys are sampled as stored */
    ck_assert_uint_gt(fill_small("a"), 0);  /* policy none: until refused */
    ck_assert_uint_eq(slabs_of(a), NSLABS);
    clock_past_slabs();
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    ck_assert_int_eq(store("b0", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(b), 1);      /* a strict -m: A's slab */
    /* Nobody reads A: B, storing, evicts a slab's worth of its own (its
     * need, where nothing is measured), then takes A's slabs one by one. */
    char key[32];
    uint32_t per = slab_class_perslab(b);
    for (uint32_t i = 1; i < 2 * per; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
        /* a slab's worth of its own evictions is its need, not fewer */
        ck_assert_uint_eq(item_class_overflow_ms(b) > 0, i + 1 >= 2 * per);
    }
    ck_assert_uint_eq(slabs_of(b), 1);
    for (uint32_t i = 2 * per; i < 4 * per + 1; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_ge(slabs_of(b), 3);
}
END_TEST

/*
 * Memory the sample knows nothing of is not "nobody reads it": after a
 * warm restart every class is full of items whose keys the sample has not
 * seen. A (filled with no sampling, as restored) keeps its slabs: B gets
 * its first slab and evicts its own items, until the sample knows A.
 */
START_TEST(test_auto_keeps_memory_the_sample_has_not_seen)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    char key[32];

    ck_assert_int_eq(sizing_setup(1u << 30, NSLABS), 0);
    ck_assert_uint_gt(fill_small("a"), 0);  /* no ref hook: A's keys unsampled */
    item_set_ref_hook(sizing_ref);
    ck_assert_int_eq(evict_configure("auto", 4), 0);
    for (uint32_t i = 0; i < 3 * slab_class_perslab(b) + 1; i++) {
        snprintf(key, sizeof(key), "b%u", i);
        ck_assert_int_eq(store(key, LARGE_LEN), ITEM_OK);
    }
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert_uint_eq(slabs_of(a), NSLABS - 1);
}
END_TEST

/*
 * Memory a class stopped using goes to the global pool (evict_pool.c): A
 * fills every slab, then 3 of every 4 of its items are deleted (6 slabs of
 * free chunks). Nothing moves with a stack that moves no slab, nor while A
 * needed memory within the window (an out-of-memory answer counts); a
 * window after that, its emptiest slabs go to the pool until at most 2.5
 * slabs of free chunks are left (4 slabs of 8), within -m, every item left
 * still there (moved into free chunks). B's first slab then comes from the
 * pool and evicts nothing.
 */
START_TEST(test_idle_free_memory_goes_to_the_pool)
{
    uint8_t a = cls_of(SMALL_LEN), b = cls_of(LARGE_LEN);
    uint32_t w = sizing_window(), n = fill_small("a");
    char key[32];

    ck_assert_uint_eq(slabs_of(a), NSLABS);
    for (uint32_t i = 0; i < n; i++) {
        if (i % 4 != 0) {
            snprintf(key, sizeof(key), "a%u", i);
            item_unlink_key(key, strlen(key));
        }
    }
    uint32_t left = (n + 3) / 4;
    ck_assert_uint_eq(count_present("a", n), left);
    evict_tick(100);                        /* "none" moves no slab */
    evict_tick(100 + w);
    ck_assert_uint_eq(slab_pool_count(), 0);
    ck_assert_int_eq(evict_configure("lra", 3), 0);
    evict_tick(200);                        /* first look: A's slabs are new */
    item_note_outofmemory(a);
    evict_tick(200 + w - 1);                /* A needed memory: a window again */
    evict_tick(200 + w);
    evict_tick(200 + 2 * w - 2);
    ck_assert_uint_eq(slab_pool_count(), 0);
    ck_assert_uint_eq(slabs_of(a), NSLABS);
    evict_tick(200 + 2 * w - 1);
    ck_assert_uint_eq(slabs_of(a), 4);
    ck_assert_uint_eq(slab_pool_count(), 4);
    ck_assert_uint_eq(slab_pool_kept(), 4);
    ck_assert_uint_eq(slab_malloced(), NSLABS * SLAB_SZ);
    ck_assert_uint_le(2 * slab_class_free(a), 5 * slab_class_perslab(a));
    ck_assert_uint_eq(count_present("a", n), left);
    ck_assert_int_eq(store("b0", LARGE_LEN), ITEM_OK);
    ck_assert_uint_eq(slabs_of(b), 1);
    ck_assert_uint_eq(slab_pool_count(), 3);
    ck_assert_uint_eq(slab_malloced(), NSLABS * SLAB_SZ);
    ck_assert_uint_eq(count_present("a", n), left);
}
END_TEST

/*
 * Memory a class stopped using goes to the pool only where nothing is lost:
 * in a class of chained values' heads, only an empty slab (moving one with
 * heads in it drops their items, chunk rescue or not). Chained values of
 * 6 KB in 4 KB chunks (one body each, heads about 2 KB) fill -m; 3 of 4
 * are deleted, so the heads' class has more than 2.5 slabs free but no
 * empty slab: a window later every item left still reads back whole.
 */
/* A chained value of vlen bytes, all c, written through its pieces. */
static item_status_t
store_chained(const char *key, uint32_t vlen, char c)
{
    struct item *it;
    char buf[1024];
    item_status_t st = alloc_evicting(key, strlen(key), vlen, &it);

    if (st != ITEM_OK) {
        return st;
    }
    memset(buf, c, sizeof(buf));
    for (uint32_t off = 0; off < vlen; off += sizeof(buf)) {
        uint32_t k = vlen - off < sizeof(buf) ? vlen - off : (uint32_t)sizeof(buf);
        item_value_write(it, off, buf, k);
    }
    item_value_write(it, vlen, "\r\n", 2);
    st = item_store(it, ITEM_OP_SET, 0);
    item_release(it);
    return st;
}

/* Whether key holds vlen bytes of c, read through its pieces. */
static bool
chained_whole(const char *key, uint32_t vlen, char c)
{
    struct item *it = item_get(key, strlen(key), false, 0, NULL);
    struct item_spans si;
    char *p;
    uint32_t n, seen = 0;
    bool ok = it != NULL && item_vlen(it) == vlen;

    if (it == NULL) {
        return false;
    }
    item_spans_begin(&si, it, 0, vlen);
    while (ok && item_spans_next(&si, &p, &n)) {
        for (uint32_t i = 0; i < n && ok; i++) {
            ok = p[i] == c;
        }
        seen += n;
    }
    item_release(it);
    return ok && seen == vlen;
}

START_TEST(test_pool_keeps_slabs_of_chained_heads)
{
    const uint32_t vlen = 6062;     /* one 4 KB body, a head of about 2 KB */
    char key[32];

    teardown();
    clock_setup();
    ck_assert_int_eq(evict_setup("none"), 0);
    ck_assert_int_eq(slab_setup_chunked(16 * SLAB_SZ, SLAB_SZ, 1.25, 48,
                                        item_total_size(0, 0) - 2, 4 * 1024), SLAB_OK);
    ck_assert_int_eq(assoc_setup(12), 0);
    slab_book(-2 * (int64_t)SLAB_SZ);
    ck_assert_int_eq(item_setup(true), 0);
    uint32_t n = 0;
    for (;; n++) {
        snprintf(key, sizeof(key), "c%u", n);
        if (store_chained(key, vlen, (char)('a' + n % 26)) != ITEM_OK) {
            break;
        }
    }
    ck_assert(slab_all_carved());
    struct item *it = item_get("c0", 2, false, 0, NULL);
    ck_assert_ptr_nonnull(it);
    uint8_t heads = slab_cls_of(it);
    item_release(it);
    ck_assert_uint_ne(heads, item_chain_class());
    for (uint32_t i = 0; i < n; i++) {
        if (i % 4 != 0) {
            snprintf(key, sizeof(key), "c%u", i);
            item_unlink_key(key, strlen(key));
        }
    }
    ck_assert_uint_gt(2 * slab_class_free(heads), 5 * (uint64_t)slab_class_perslab(heads));
    uint32_t held = slabs_of(heads), w = sizing_window();
    ck_assert_int_eq(evict_configure("lra", 3), 0);
    evict_tick(100);
    evict_tick(100 + w);
    ck_assert_uint_eq(slabs_of(heads), held);
    for (uint32_t i = 0; i < n; i += 4) {
        snprintf(key, sizeof(key), "c%u", i);
        ck_assert_msg(chained_whole(key, vlen, (char)('a' + i % 26)), "%s whole", key);
    }
}
END_TEST

/*
 * A new class at a full -m gets a first slab past it even where a class
 * whose slabs earn hits could give one: it has shown no need (nothing of
 * it is measured), and a slab of hits is not the price of a new value
 * size; memcached gives a first page too.
 */
START_TEST(test_new_class_leaves_earning_slabs_alone)
{
    static const char *const stacks[] = { "auto", "lrc,lru" };
    char key[32];

    for (size_t p = 0; p < sizeof(stacks) / sizeof(stacks[0]); p++) {
        setup_four_fine_slabs(stacks[p]);
        ck_assert_int_eq(sizing_setup(1u << 30, 4), 0);
        item_set_ref_hook(sizing_ref);
        uint8_t a = cls_of(20);
        uint32_t n = 0;
        while (!slab_all_carved() || slab_class_free(a) > 0) {
            snprintf(key, sizeof(key), "k%07u", n++);
            ck_assert_int_eq(store(key, 20), ITEM_OK);
        }
        for (int round = 0; round < 4; round++) {
            for (uint32_t i = 0; i < n; i++) {
                snprintf(key, sizeof(key), "k%07u", i);
                struct item *it = item_get(key, strlen(key), false, 0, NULL);
                ck_assert_ptr_nonnull(it);
                item_release(it);
            }
        }
        uint32_t before = slabs_of(a), table = slab_table_count();
        ck_assert_int_eq(store("newkey00", 8000), ITEM_OK);
        ck_assert_uint_eq(slabs_of(item_class_of(8, 8000)), 1);
        ck_assert_msg(slabs_of(a) == before, "%s: %u of %u", stacks[p], slabs_of(a), before);
        ck_assert_uint_eq(slab_table_count(), table + 1);
        item_set_ref_hook(NULL);
        sizing_teardown();
        slab_set_first_past_limit(false);
    }
}
END_TEST

START_TEST(test_configure_validates)
{
    char names[EVICT_NAMES_MAX];

    ck_assert_int_eq(evict_configure("lra,lru", 7), 0);
    evict_names(names, sizeof(names));
    ck_assert_str_eq(names, "lra,lru");
    ck_assert_int_eq(evict_configure("bogus", 5), -1);
    ck_assert_int_eq(evict_configure("lra,lra", 7), -1);
    ck_assert_int_eq(evict_configure("", 0), -1);
    ck_assert_int_eq(evict_configure("lra,", 4), -1);
    evict_names(names, sizeof(names));
    ck_assert_str_eq(names, "lra,lru");
    ck_assert_int_eq(evict_configure("random,lrc,lru,none", 19), 0);
    evict_names(names, sizeof(names));
    ck_assert_str_eq(names, "random,lrc,lru,none");
}
END_TEST

/*
 * A slab being drained holds the oldest items, i.e. the LRU tail. Evicting
 * them would free chunks that leave with the slab: the LRU must walk past
 * them to items whose chunks stay in the class (once, sets failed here).
 */
START_TEST(test_lru_skips_a_draining_slab)
{
    uint8_t a = cls_of(SMALL_LEN);

    fill_small("a");
    ck_assert_int_eq(evict_configure("lru", 3), 0);
    ck_assert_uint_eq(slab_drain_begin(0, 0), a);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof(key), "new%d", i);
        ck_assert_int_eq(store(key, SMALL_LEN), ITEM_OK);
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_ne(slab_sid_of(it), 0);
        item_release(it);
    }
    slab_drain_abort(a, 0);
    ck_assert_int_eq(store("after", SMALL_LEN), ITEM_OK);
}
END_TEST

/* --- stress: readers verify values while writers force slab evictions --- */

#define STRESS_KEYS     2000
#define STRESS_READERS  3
#define STRESS_WRITERS  2
#define STRESS_OPS      40000
/* Writers go on, round after round of STRESS_OPS sets, until slabs have
 * moved this often (at most STRESS_ROUNDS rounds): judged moves are
 * budgeted in time (ten a second), so a fixed count of sets moved 14 to
 * 8,600 slabs depending on the machine's speed (CI once saw 14). */
#define STRESS_MIN_MOVES 20
#define STRESS_ROUNDS   8

static _Atomic uint64_t bad_values;
static _Atomic uint64_t hits;
static _Atomic int      writers_left;
static int              writer_rounds;  /* STRESS_ROUNDS while racing */

static uint64_t
slabs_moved(void)
{
    uint64_t moved = 0;
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct slab_class_stats sc;
        slab_class_stats(c, &sc);
        moved += sc.slabs_evicted;
    }
    return moved;
}

/* Two small sizes, then two large ones, in turns of 5,000 sets: each turn
 * leaves the other pair's slabs idle, so slabs move while readers read. */
static uint32_t
stress_len(uint64_t r, int i)
{
    static const uint32_t sizes[] = { 30, 300, 3000, 12000 };
    return sizes[r % 2 + 2 * (uint32_t)((i / 5000) % 2)] + (uint32_t)(r >> 8) % 50;
}

static uint64_t
next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *
stress_writer(void *arg)
{
    uint64_t s = (uintptr_t)arg * 7919 + 17;
    char key[32];

    for (int round = 0; round < writer_rounds; round++) {
        if (round > 0 && slabs_moved() >= STRESS_MIN_MOVES) {
            break;
        }
        for (int i = 0; i < STRESS_OPS; i++) {
            uint64_t r = next_rand(&s);
            snprintf(key, sizeof(key), "k%u", (unsigned)(r % STRESS_KEYS));
            store(key, stress_len(r >> 16, i));
        }
    }
    atomic_fetch_sub(&writers_left, 1);
    return NULL;
}

static void *
stress_reader(void *arg)
{
    uint64_t s = (uintptr_t)arg * 104729 + 3;
    char key[32];

    /* Read for as long as slabs are moving (and at least STRESS_OPS). */
    for (long i = 0; i < STRESS_OPS * 20L; i++) {
        if (i >= STRESS_OPS && atomic_load(&writers_left) == 0) {
            break;
        }
        uint64_t r = next_rand(&s);
        snprintf(key, sizeof(key), "k%u", (unsigned)(r % STRESS_KEYS));
        struct item *it = item_get(key, strlen(key), false, 0, NULL);
        if (it == NULL) {
            continue;
        }
        atomic_fetch_add(&hits, 1);
        /* Hold it a little, as a socket write would, then check it. */
        if ((r & 7) == 0) {
            sched_yield();
        }
        if (item_nkey(it) != strlen(key) || memcmp(item_key(it), key, item_nkey(it)) != 0 ||
            !verify(it)) {
            atomic_fetch_add(&bad_values, 1);
        }
        item_release(it);
    }
    return NULL;
}

static void
stress_run(const char *policy, bool background)
{
    pthread_t th[STRESS_READERS + STRESS_WRITERS];

    setup_with(NSLABS, policy);
    if (background) {
        ck_assert_int_eq(evict_bg_start(8, 4), 0);
    }
    atomic_store(&bad_values, 0);
    atomic_store(&hits, 0);
    atomic_store(&writers_left, STRESS_WRITERS);
    writer_rounds = 1;
    stress_writer((void *)(uintptr_t)99);      /* populate before racing */
    writer_rounds = STRESS_ROUNDS;
    atomic_store(&writers_left, STRESS_WRITERS);
    for (uintptr_t i = 0; i < STRESS_WRITERS; i++) {
        pthread_create(&th[i], NULL, stress_writer, (void *)(i + 1));
    }
    for (uintptr_t i = 0; i < STRESS_READERS; i++) {
        pthread_create(&th[STRESS_WRITERS + i], NULL, stress_reader, (void *)(i + 1));
    }
    for (size_t i = 0; i < STRESS_READERS + STRESS_WRITERS; i++) {
        pthread_join(th[i], NULL);
    }
    uint64_t bg_runs, bg_evictions;
    evict_bg_stats(&bg_runs, &bg_evictions);
    evict_bg_stop();
    struct item_stats is;
    item_get_stats(&is);
    uint64_t moved = slabs_moved();
    teardown();
    ck_assert_uint_eq(atomic_load(&bad_values), 0);
    ck_assert_uint_gt(atomic_load(&hits), 1000);     /* readers did read */
    ck_assert_uint_ge(moved, STRESS_MIN_MOVES);      /* slabs did move */
    ck_assert_uint_gt(is.evicted_by_slab, 0);
    if (background) {
        ck_assert_uint_gt(bg_runs, 0);                /* the evictor did run */
        ck_assert_uint_gt(bg_evictions, 0);
    }
}

START_TEST(test_stress_random)
{
    stress_run("random", false);
}
END_TEST

START_TEST(test_stress_lra_lru)
{
    stress_run("lra,lru", false);
}
END_TEST

START_TEST(test_stress_lrc_lru_background)
{
    stress_run("lrc,lru", true);
}
END_TEST

static Suite *
evict_suite(void)
{
    Suite *s = suite_create("evict");
    TCase *tc = tcase_create("policies");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_none_refuses_when_full);
    tcase_add_test(tc, test_random_moves_a_slab);
    tcase_add_test(tc, test_random_uses_every_slab);
    tcase_add_test(tc, test_first_slab_rule_spares_only_slabs);
    tcase_add_test(tc, test_first_slab_past_limit_when_none_can_spare);
    tcase_add_test(tc, test_only_slab_of_a_homed_class_moves);
    tcase_add_test(tc, test_new_class_at_a_full_m_gets_a_first_slab);
    tcase_add_test(tc, test_random_takes_other_classes_first);
    tcase_add_test(tc, test_lra_picks_least_recently_accessed);
    tcase_add_test(tc, test_lrc_picks_least_recently_created);
    tcase_add_test(tc, test_busy_slab_is_skipped);
    tcase_add_test(tc, test_gate_prefers_own_tail_when_class_has_its_share);
    tcase_add_test(tc, test_gate_moves_unread_slabs_to_the_class);
    tcase_add_test(tc, test_gate_keeps_slabs_that_earn_more);
    tcase_add_test(tc, test_empty_class_gets_the_least_valued_slab);
    tcase_add_test(tc, test_probation_spares_read_items);
    tcase_add_test(tc, test_probation_skips_overwrites);
    tcase_add_test(tc, test_own_slab_judged_item_by_item);
    tcase_add_test(tc, test_slab_evict_rescues_read_items);
    tcase_add_test(tc, test_slab_evict_without_rescue_drops_all);
    tcase_add_test(tc, test_slab_evict_moves_items_to_free_chunks);
    tcase_add_test(tc, test_empty_slab_taken_before_evicting);
    tcase_add_test(tc, test_gated_lrc_spares_a_hot_old_slab_for_an_empty_class);
    tcase_add_test(tc, test_configure_validates);
    tcase_add_test(tc, test_auto_gives_slabs_to_higher_marginal_hits);
    tcase_add_test(tc, test_auto_gives_back_slabs_past_the_limit);
    tcase_add_test(tc, test_auto_equal_classes_do_not_trade);
    tcase_add_test(tc, test_auto_asks_a_dearer_donor_measured_finely);
    tcase_add_test(tc, test_auto_long_window_shows_a_coarse_class_s_worth);
    tcase_add_test(tc, test_auto_long_window_does_not_undo_a_shift);
    tcase_add_test(tc, test_auto_long_window_equal_classes_do_not_trade);
    tcase_add_test(tc, test_auto_long_window_keeps_a_coarse_class_s_slab);
    tcase_add_test(tc, test_auto_blank_donor_gives_to_a_clear_taker);
    tcase_add_test(tc, test_auto_keeps_memory_the_sample_has_not_seen);
    tcase_add_test(tc, test_idle_free_memory_goes_to_the_pool);
    tcase_add_test(tc, test_pool_keeps_slabs_of_chained_heads);
    tcase_add_test(tc, test_new_class_leaves_earning_slabs_alone);
    tcase_add_test(tc, test_auto_first_slab_and_unread_memory);
    tcase_add_test(tc, test_lru_skips_a_draining_slab);
    suite_add_tcase(s, tc);

    TCase *stress = tcase_create("stress");
    tcase_set_timeout(stress, 120);
    tcase_add_test(stress, test_stress_random);
    tcase_add_test(stress, test_stress_lra_lru);
    tcase_add_test(stress, test_stress_lrc_lru_background);
    suite_add_tcase(s, stress);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(evict_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
