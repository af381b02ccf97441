/*
 * test_item.c -- unit tests for items (include/storage/item.h) in the
 * storage layer alone, linked without eviction: store semantics, reference
 * counts, arithmetic, expiry, flush, dead-item reuse, allocation that never
 * evicts and the rebuild hand-back (struct item_rebuild). Eviction through
 * the policies is test_cache.c's.
 *
 * Each test runs in its own process (check's fork mode) with a fresh
 * storage stack set up like src/main.c does.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "item.h"
#include "slab.h"

/* Storage alone: allocation never evicts (eviction is the cache layer's,
 * tests/unit/test_cache.c). */
#define FX_ALLOC(k, n, f, e, v, out)  item_alloc_try(k, n, f, e, v, out)
#define FX_STORE(it, op, cas)         item_store(it, op, cas)
#define FX_POLICY_SETUP(name)         ((void)(name))
#define FX_POLICY_TEARDOWN()          ((void)0)
#include "item_fixture.h"
#include "flash.h"
#include "hash.h"
/* White box: the stub's layout and fingerprint, to forge a collision
 * (56 bits of hashes cannot be met by searching keys). */
#include "item_int.h"

/* --- clock ------------------------------------------------------------------------- */

START_TEST(test_clock_exptime)
{
    rel_time_t now = clock_now();

    ck_assert_uint_ge(now, 2);
    ck_assert_uint_eq(clock_exptime(0), 0);
    ck_assert_uint_eq(clock_exptime(-1), 1);
    ck_assert_uint_eq(clock_exptime(-1000), 1);
    ck_assert_uint_eq(clock_exptime(100), now + 100);
    ck_assert_uint_eq(clock_exptime(CLOCK_MAXDELTA), now + CLOCK_MAXDELTA);
    /* larger values are absolute unix times */
    ck_assert_uint_eq(clock_exptime((int64_t)clock_started() + 5000), 5000);
    ck_assert_uint_eq(clock_exptime((int64_t)clock_started() - 10), 1);
    ck_assert_int_eq((int64_t)clock_unix(now), (int64_t)clock_started() + now);
}
END_TEST

/* --- memcached's plain LRU (-o no_modern) ----------------------------------------------- */

/* A read marks an item for the CLOCK's second chance only once its last
 * store or mark is a minute old (memcached's ITEM_UPDATE_INTERVAL); by
 * default every read marks it. */
START_TEST(test_legacy_lru_marks_once_a_minute)
{
    ck_assert_int_eq(store_op("modern", "v", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    struct item *it = get("modern");
    ck_assert(item_iflags(it) & ITEM_ACTIVE);
    item_release(it);

    item_set_legacy_lru(true);
    ck_assert_int_eq(store_op("old", "v", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    it = get("old");
    ck_assert(item_iflags(it) & ITEM_FETCHED);
    ck_assert(!(item_iflags(it) & ITEM_ACTIVE));    /* stored just now */
    item_release(it);
    /* a minute on, still not: memcached bumps past the interval */
    clock_restore(clock_started() - ITEM_LEGACY_BUMP_S);
    it = get("old");
    ck_assert(!(item_iflags(it) & ITEM_ACTIVE));
    item_release(it);
    /* a second more: the next read marks it, and starts its minute */
    clock_restore(clock_started() - 1);
    it = get("old");
    ck_assert(item_iflags(it) & ITEM_ACTIVE);
    ck_assert_uint_eq(it->time, clock_now());
    item_release(it);
    item_set_legacy_lru(false);
}
END_TEST

/* --- basics -------------------------------------------------------------------------- */

START_TEST(test_roundtrip)
{
    struct item *it;
    item_miss_t miss = ITEM_MISS_EXPIRED;

    ck_assert_ptr_null(item_get("foo", 3, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_NONE);

    ck_assert_int_eq(store_op("foo", "bar-value", 0xdeadbeef, clock_exptime(100),
                              ITEM_OP_SET, 0), ITEM_OK);
    it = item_get("foo", 3, false, 0, &miss);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
    ck_assert_uint_eq(item_nkey(it), 3);
    ck_assert(memcmp(item_key(it), "foo", 3) == 0);
    assert_item_value(it, "bar-value");
    ck_assert_uint_eq(it->nbytes, 11);
    ck_assert_uint_eq(it->flags, 0xdeadbeef);
    ck_assert_uint_eq(it->exptime, clock_now() + 100);
    ck_assert(item_iflags(it) & ITEM_LINKED);
    ck_assert_uint_eq(item_refcount(it), 2);   /* link + our reference */
    item_release(it);

    /* binary value bytes, including NUL and CR/LF */
    static const char bin[] = { 'a', '\0', '\r', '\n', (char)0xff, 'z' };
    ck_assert_int_eq(make_item("bin", bin, sizeof(bin), 1, 0, &it), ITEM_OK);
    ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
    item_release(it);
    it = get("bin");
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(item_vlen(it), sizeof(bin));
    ck_assert(memcmp(item_value(it), bin, sizeof(bin)) == 0);
    ck_assert_uint_eq(it->flags, 1);
    item_release(it);

    /* similar keys are distinct */
    ck_assert_ptr_null(get("fo"));
    ck_assert_ptr_null(get("fooo"));
    ck_assert_ptr_null(get("FOO"));

    struct item_stats st = istats();
    ck_assert_uint_eq(st.curr_items, 2);
    ck_assert_uint_eq(st.total_items, 2);
    ck_assert_uint_eq(st.bytes, item_total_size(3, 9) + item_total_size(3, sizeof(bin)));
    ck_assert_uint_eq(st.evictions, 0);
}
END_TEST

START_TEST(test_empty_value_and_max_key)
{
    char key[251];

    memset(key, 'k', 250);
    key[250] = '\0';
    ck_assert_int_eq(set("empty", ""), ITEM_OK);
    expect_value("empty", "");
    ck_assert_int_eq(set(key, "long key"), ITEM_OK);
    expect_value(key, "long key");
    key[249] = '\0';
    expect_absent(key);
}
END_TEST

START_TEST(test_too_large)
{
    struct item *it = NULL;
    char key[300];

    /* total size exactly one slab fits (largest class) */
    size_t fit = SLAB_SZ - item_total_size(3, 0);
    ck_assert_int_eq(item_alloc_try("big", 3, 0, 0, (uint32_t)fit, &it), ITEM_OK);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(slab_cls_of(it), slab_class_count());
    item_release(it);

    it = NULL;
    ck_assert_int_eq(item_alloc_try("big", 3, 0, 0, (uint32_t)fit + 1, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);
    ck_assert_int_eq(item_alloc_try("big", 3, 0, 0, (uint32_t)SLAB_SZ, &it), ITEM_TOO_LARGE);
    ck_assert_int_eq(item_alloc_try("big", 3, 0, 0, UINT32_MAX - 2, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);

    memset(key, 'k', sizeof(key));
    ck_assert_int_eq(item_alloc_try(key, 256, 0, 0, 1, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);
    ck_assert_int_eq(item_alloc_try(key, 255, 0, 0, 1, &it), ITEM_OK);
    item_release(it);
    ck_assert_uint_eq(istats().curr_items, 0);
}
END_TEST

START_TEST(test_alloc_release_unstored_frees_chunk)
{
    struct item *it;
    struct slab_class_stats st;

    ck_assert_int_eq(make_item("tmp", "abc", 3, 0, 0, &it), ITEM_OK);
    uint8_t cls = slab_cls_of(it);
    ck_assert_uint_eq(cls, slab_clsid(item_total_size(3, 3)));
    ck_assert_uint_eq(item_refcount(it), 1);
    ck_assert_uint_eq(item_iflags(it) & ITEM_LINKED, 0);
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 1);
    item_release(it);
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 0);
    expect_absent("tmp");
}
END_TEST

/* A batch prefetched together answers as one-by-one lookups do: hits with
 * a reference, a miss, an expired item dropped and said so, a touch. */
START_TEST(test_probed_lookups)
{
    struct item_probe p[5] = {
        { .key = "a", .nkey = 1 }, { .key = "nope", .nkey = 4 },
        { .key = "old", .nkey = 3 }, { .key = "bb", .nkey = 2 }, { .key = "a", .nkey = 1 },
    };
    item_miss_t miss;

    ck_assert_int_eq(set("a", "one"), ITEM_OK);
    ck_assert_int_eq(set("bb", "two"), ITEM_OK);
    ck_assert_int_eq(store_op("old", "gone", 0, clock_now() - 1, ITEM_OP_SET, 0), ITEM_OK);
    item_probe_prefetch(p, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(p[i].hv, hash_key(p[i].key, p[i].nkey));
    }
    struct item *a = item_get_probed(&p[0], false, 0, &miss);
    assert_item_value(a, "one");
    ck_assert_uint_eq(item_refcount(a), 2);
    ck_assert_ptr_null(item_get_probed(&p[1], false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
    ck_assert_ptr_null(item_get_probed(&p[2], false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_EXPIRED);
    struct item *bb = item_get_probed(&p[3], true, clock_now() + 50, &miss);
    assert_item_value(bb, "two");
    ck_assert_uint_eq(bb->exptime, clock_now() + 50);
    struct item *a2 = item_get_probed(&p[4], false, 0, &miss);
    ck_assert_ptr_eq(a2, a);
    ck_assert_uint_eq(item_refcount(a), 3);
    item_release(a);
    item_release(a2);
    item_release(bb);
    expect_absent("old");
}
END_TEST

/* --- reference counts ------------------------------------------------------------------ */

/* Allocate (and hold) n chunks of class cls; none may be `forbidden`. */
static void
churn_class(const char *val, size_t n, struct item *forbidden, const char *forbidden_val)
{
    struct item **hold = calloc(n, sizeof(*hold));

    ck_assert_ptr_nonnull(hold);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(make_item("churn", val, strlen(val), 0, 0, &hold[i]), ITEM_OK);
        ck_assert_ptr_ne(hold[i], forbidden);
    }
    assert_item_value(forbidden, forbidden_val);
    for (size_t i = 0; i < n; i++) {
        item_release(hold[i]);
    }
    free(hold);
}

START_TEST(test_ref_survives_delete)
{
    struct item *held;
    struct slab_class_stats st;

    ck_assert_int_eq(set("k", "original-value"), ITEM_OK);
    held = get("k");
    ck_assert_ptr_nonnull(held);
    uint8_t cls = slab_cls_of(held);
    ck_assert_int_eq(item_delete("k", 1, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_delete("k", 1, NULL, NULL), ITEM_NOT_FOUND);
    expect_absent("k");
    ck_assert_uint_eq(istats().curr_items, 0);
    ck_assert_uint_eq(item_iflags(held) & ITEM_LINKED, 0);
    ck_assert_uint_eq(item_refcount(held), 1);

    /* Its chunk stays in use: two slabs' worth of allocations never get it. */
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 1);
    churn_class("XXXXXXXXXXXXXX", 2 * st.chunks_per_page, held, "original-value");
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 1);
    ck_assert(memcmp(item_key(held), "k", 1) == 0);

    item_release(held);
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 0);
}
END_TEST

START_TEST(test_ref_survives_overwrite)
{
    struct item *held;
    struct slab_class_stats st;

    ck_assert_int_eq(set("k", "old-value-1234"), ITEM_OK);
    held = get("k");
    ck_assert_ptr_nonnull(held);
    uint8_t cls = slab_cls_of(held);
    ck_assert_int_eq(set("k", "new-value-5678"), ITEM_OK);
    expect_value("k", "new-value-5678");
    assert_item_value(held, "old-value-1234");
    ck_assert_uint_eq(istats().curr_items, 1);

    struct item *cur = get("k");
    ck_assert_ptr_ne(cur, held);
    item_release(cur);

    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 2);
    churn_class("ZZZZZZZZZZZZZZ", 2 * st.chunks_per_page, held, "old-value-1234");
    item_release(held);
    slab_class_stats(cls, &st);
    ck_assert_uint_eq(st.used_chunks, 1);
    expect_value("k", "new-value-5678");
}
END_TEST

START_TEST(test_ref_store_keeps_callers_reference)
{
    struct item *it;

    ck_assert_int_eq(make_item("mine", "v1", 2, 0, 0, &it), ITEM_OK);
    ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_uint_eq(item_refcount(it), 2);
    ck_assert_int_eq(item_delete("mine", 4, NULL, NULL), ITEM_OK);
    ck_assert_uint_eq(item_refcount(it), 1);
    assert_item_value(it, "v1");
    item_release(it);

    /* a failed store leaves the item unlinked with only our reference */
    ck_assert_int_eq(make_item("absent", "v", 1, 0, 0, &it), ITEM_OK);
    ck_assert_int_eq(item_store(it, ITEM_OP_REPLACE, 0), ITEM_NOT_STORED);
    ck_assert_uint_eq(item_refcount(it), 1);
    ck_assert_uint_eq(item_iflags(it) & ITEM_LINKED, 0);
    item_release(it);
    ck_assert_uint_eq(istats().curr_items, 0);
}
END_TEST

/* --- store semantics --------------------------------------------------------------------- */

START_TEST(test_add_replace)
{
    ck_assert_int_eq(store_op("a", "1", 5, 0, ITEM_OP_ADD, 0), ITEM_OK);
    expect_value("a", "1");
    ck_assert_int_eq(store_op("a", "2", 6, 0, ITEM_OP_ADD, 0), ITEM_NOT_STORED);
    expect_value("a", "1");

    ck_assert_int_eq(store_op("r", "1", 0, 0, ITEM_OP_REPLACE, 0), ITEM_NOT_STORED);
    expect_absent("r");
    ck_assert_int_eq(store_op("a", "3", 7, 0, ITEM_OP_REPLACE, 0), ITEM_OK);
    expect_value("a", "3");
    struct item *it = get("a");
    ck_assert_uint_eq(it->flags, 7);
    item_release(it);

    ck_assert_int_eq(store_op("a", "4", 8, 0, ITEM_OP_SET, 0), ITEM_OK);
    expect_value("a", "4");
    ck_assert_int_eq(item_delete("a", 1, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(store_op("a", "5", 0, 0, ITEM_OP_REPLACE, 0), ITEM_NOT_STORED);
    ck_assert_int_eq(store_op("a", "6", 0, 0, ITEM_OP_ADD, 0), ITEM_OK);
    expect_value("a", "6");
    ck_assert_uint_eq(istats().curr_items, 1);
    ck_assert_uint_eq(istats().total_items, 4);
}
END_TEST

START_TEST(test_append_prepend)
{
    ck_assert_int_eq(store_op("x", "tail", 0, 0, ITEM_OP_APPEND, 0), ITEM_NOT_STORED);
    ck_assert_int_eq(store_op("x", "head", 0, 0, ITEM_OP_PREPEND, 0), ITEM_NOT_STORED);
    expect_absent("x");

    ck_assert_int_eq(store_op("x", "mid", 42, clock_exptime(500), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(store_op("x", "-tail", 99, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    expect_value("x", "mid-tail");
    ck_assert_int_eq(store_op("x", "head-", 99, 0, ITEM_OP_PREPEND, 0), ITEM_OK);
    expect_value("x", "head-mid-tail");
    ck_assert_int_eq(store_op("x", "", 99, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    expect_value("x", "head-mid-tail");

    /* the stored item keeps its flags and exptime */
    struct item *it = get("x");
    ck_assert_uint_eq(it->flags, 42);
    ck_assert_uint_eq(it->exptime, clock_now() + 500);
    item_release(it);
    ck_assert_uint_eq(istats().curr_items, 1);

    /* growing past the largest class */
    size_t big = SLAB_SZ - item_total_size(1, 0) - 2;
    char *v = malloc(big + 1);
    ck_assert_ptr_nonnull(v);
    memset(v, 'b', big);
    v[big] = '\0';
    ck_assert_int_eq(set("y", v), ITEM_OK);
    ck_assert_int_eq(store_op("y", "12", 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    ck_assert_int_eq(store_op("y", "3", 0, 0, ITEM_OP_APPEND, 0), ITEM_TOO_LARGE);
    it = get("y");
    ck_assert_uint_eq(item_vlen(it), big + 2);
    ck_assert(memcmp(item_value(it) + big, "12\r\n", 4) == 0);
    item_release(it);
    free(v);
}
END_TEST

START_TEST(test_append_while_held)
{
    ck_assert_int_eq(set("h", "abc"), ITEM_OK);
    struct item *held = get("h");
    ck_assert_int_eq(store_op("h", "def", 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    assert_item_value(held, "abc");
    expect_value("h", "abcdef");
    item_release(held);
    expect_value("h", "abcdef");
}
END_TEST

/*
 * Appends from many threads to one key all land, in each thread's order.
 * The value crosses a size class every few appends, and a crossing used
 * to allocate with the key unlocked: rivals that appended meanwhile made
 * the round start over, and after four such rounds the append answered
 * NOT_STORED though the key was there all along.
 */
#define APPEND_THREADS 4
#define APPENDS        200
#define APPEND_TOKLEN  8

struct append_worker {
    pthread_t th;
    int       id;
    int       failed;           /* appends not answered ITEM_OK */
};

static void *
append_worker_run(void *arg)
{
    struct append_worker *w = arg;
    char tok[APPEND_TOKLEN + 1];

    for (int j = 0; j < APPENDS; j++) {
        snprintf(tok, sizeof(tok), "[%d:%04d]", w->id, j);
        w->failed += store_op("log", tok, 0, 0, ITEM_OP_APPEND, 0) != ITEM_OK;
    }
    return NULL;
}

START_TEST(test_concurrent_appends_all_land)
{
    struct append_worker w[APPEND_THREADS];

    ck_assert_int_eq(set("log", ""), ITEM_OK);
    for (int i = 0; i < APPEND_THREADS; i++) {
        w[i] = (struct append_worker){ .id = i };
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, append_worker_run, &w[i]), 0);
    }
    for (int i = 0; i < APPEND_THREADS; i++) {
        ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
        ck_assert_int_eq(w[i].failed, 0);
    }
    struct item *it = get("log");
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(item_vlen(it), APPEND_THREADS * APPENDS * APPEND_TOKLEN);
    int next[APPEND_THREADS] = { 0 };
    for (uint32_t off = 0; off < item_vlen(it); off += APPEND_TOKLEN) {
        int id, j;
        ck_assert_int_eq(sscanf(item_value(it) + off, "[%d:%d]", &id, &j), 2);
        ck_assert(id >= 0 && id < APPEND_THREADS);
        ck_assert_int_eq(j, next[id]);
        next[id]++;
    }
    item_release(it);
}
END_TEST

START_TEST(test_cas_semantics)
{
    ck_assert_int_eq(store_op("c", "v", 0, 0, ITEM_OP_CAS, 1), ITEM_NOT_FOUND);
    expect_absent("c");

    ck_assert_int_eq(set("c", "v1"), ITEM_OK);
    uint64_t c1 = cas_of("c");
    ck_assert_uint_ne(c1, 0);
    ck_assert_int_eq(store_op("c", "v2", 0, 0, ITEM_OP_CAS, c1 + 1), ITEM_EXISTS);
    ck_assert_int_eq(store_op("c", "v2", 0, 0, ITEM_OP_CAS, c1 - 1), ITEM_EXISTS);
    ck_assert_int_eq(store_op("c", "v2", 0, 0, ITEM_OP_CAS, 0), ITEM_EXISTS);
    expect_value("c", "v1");
    ck_assert_int_eq(store_op("c", "v2", 0, 0, ITEM_OP_CAS, c1), ITEM_OK);
    expect_value("c", "v2");
    uint64_t c2 = cas_of("c");
    ck_assert_uint_gt(c2, c1);
    /* the old cas is stale now */
    ck_assert_int_eq(store_op("c", "v3", 0, 0, ITEM_OP_CAS, c1), ITEM_EXISTS);
    expect_value("c", "v2");

    ck_assert_int_eq(item_delete("c", 1, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(store_op("c", "v4", 0, 0, ITEM_OP_CAS, c2), ITEM_NOT_FOUND);
    expect_absent("c");
}
END_TEST

START_TEST(test_cas_increasing)
{
    uint64_t prev = 0;
    char key[16];

    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "k%d", i % 7);
        ck_assert_int_eq(set(key, "v"), ITEM_OK);
        uint64_t c = cas_of(key);
        ck_assert_uint_gt(c, prev);
        prev = c;
    }
    ck_assert_int_eq(store_op("k0", "w", 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    ck_assert_uint_gt(cas_of("k0"), prev);
    prev = cas_of("k0");
    ck_assert_int_eq(store_op("k1", "w", 0, 0, ITEM_OP_REPLACE, 0), ITEM_OK);
    ck_assert_uint_gt(cas_of("k1"), prev);
    /* a failed add does not change the stored cas */
    prev = cas_of("k1");
    ck_assert_int_eq(store_op("k1", "z", 0, 0, ITEM_OP_ADD, 0), ITEM_NOT_STORED);
    ck_assert_uint_eq(cas_of("k1"), prev);
}
END_TEST

START_TEST(test_nocas_zero)
{
    uint64_t r;

    ck_assert_int_eq(set("a", "1"), ITEM_OK);
    ck_assert_uint_eq(cas_of("a"), 0);
    ck_assert_int_eq(set("a", "2"), ITEM_OK);
    ck_assert_uint_eq(cas_of("a"), 0);
    ck_assert_int_eq(store_op("a", "3", 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    ck_assert_uint_eq(cas_of("a"), 0);
    expect_value("a", "23");
    ck_assert_int_eq(item_arith("a", 1, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 24);
    ck_assert_uint_eq(cas_of("a"), 0);
    ck_assert_int_eq(item_arith("a", 1, true, 100, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 124);
    ck_assert_uint_eq(cas_of("a"), 0);
}
END_TEST

START_TEST(test_unlink_key_and_touch)
{
    ck_assert_int_eq(set("u", "1"), ITEM_OK);
    item_unlink_key("u", 1);
    expect_absent("u");
    item_unlink_key("u", 1);            /* absent: no effect */
    ck_assert_uint_eq(istats().curr_items, 0);

    ck_assert_int_eq(item_touch("t", 1, clock_exptime(10), NULL), ITEM_NOT_FOUND);
    ck_assert_int_eq(set("t", "1"), ITEM_OK);
    ck_assert_int_eq(item_touch("t", 1, clock_exptime(10), NULL), ITEM_OK);
    struct item *it = get("t");
    ck_assert_uint_eq(it->exptime, clock_now() + 10);
    item_release(it);

    /* get-and-touch */
    it = item_get("t", 1, true, clock_exptime(77), NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(it->exptime, clock_now() + 77);
    item_release(it);
    it = get("t");
    ck_assert_uint_eq(it->exptime, clock_now() + 77);
    item_release(it);

    /* touch to an already expired time kills it */
    ck_assert_int_eq(item_touch("t", 1, clock_exptime(-1), NULL), ITEM_OK);
    item_miss_t miss = ITEM_MISS_NONE;
    ck_assert_ptr_null(item_get("t", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_EXPIRED);
}
END_TEST

/* --- arithmetic ---------------------------------------------------------------------------- */

START_TEST(test_arith_basic)
{
    uint64_t r = 0;

    ck_assert_int_eq(item_arith("n", 1, true, 1, &r, NULL), ITEM_NOT_FOUND);
    ck_assert_int_eq(set("n", "10"), ITEM_OK);
    ck_assert_int_eq(item_arith("n", 1, true, 5, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 15);
    expect_value("n", "15");
    ck_assert_int_eq(item_arith("n", 1, false, 3, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 12);
    expect_value("n", "12");
    ck_assert_int_eq(item_arith("n", 1, true, 0, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 12);
    expect_value("n", "12");

    /* decr floors at 0 */
    ck_assert_int_eq(set("d", "5"), ITEM_OK);
    ck_assert_int_eq(item_arith("d", 1, false, 10, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 0);
    expect_value("d", "0");
    ck_assert_int_eq(item_arith("d", 1, false, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 0);
    expect_value("d", "0");
    ck_assert_int_eq(set("d", "18446744073709551615"), ITEM_OK);
    ck_assert_int_eq(item_arith("d", 1, false, UINT64_MAX, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 0);
}
END_TEST

START_TEST(test_arith_wrap)
{
    uint64_t r = 0;

    ck_assert_int_eq(set("w", "18446744073709551615"), ITEM_OK);
    ck_assert_int_eq(item_arith("w", 1, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 0);
    /* shorter result in place, padded with spaces to the old length */
    expect_value("w", "0                   ");
    ck_assert_int_eq(item_arith("w", 1, true, 2, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 2);
    ck_assert_int_eq(set("w", "18446744073709551610"), ITEM_OK);
    ck_assert_int_eq(item_arith("w", 1, true, 10, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 4);
    ck_assert_int_eq(item_arith("w", 1, true, UINT64_MAX, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 3);
}
END_TEST

START_TEST(test_arith_in_place_padding)
{
    uint64_t r = 0;

    ck_assert_int_eq(store_op("p", "100", 3, 0, ITEM_OP_SET, 0), ITEM_OK);
    struct item *before = get("p");
    uint64_t cas_before = item_cas(before);
    item_release(before);

    ck_assert_int_eq(item_arith("p", 1, false, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 99);
    struct item *after = get("p");
    ck_assert_ptr_eq(after, before);            /* rewritten in place */
    assert_item_value(after, "99 ");
    ck_assert_uint_gt(item_cas(after), cas_before);  /* but with a new cas */
    ck_assert_uint_eq(after->flags, 3);
    item_release(after);

    /* a padded value still parses and grows back in place */
    ck_assert_int_eq(item_arith("p", 1, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 100);
    expect_value("p", "100");
    ck_assert_int_eq(item_arith("p", 1, false, 95, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 5);
    expect_value("p", "5  ");
    ck_assert_uint_eq(istats().curr_items, 1);
}
END_TEST

START_TEST(test_arith_grows_new_item)
{
    uint64_t r = 0;

    ck_assert_int_eq(store_op("g", "99", 11, clock_exptime(300), ITEM_OP_SET, 0), ITEM_OK);
    struct item *before = get("g");
    uint64_t cas_before = item_cas(before);
    item_release(before);

    ck_assert_int_eq(item_arith("g", 1, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 100);
    struct item *after = get("g");
    ck_assert_ptr_ne(after, before);
    assert_item_value(after, "100");
    ck_assert_uint_eq(after->flags, 11);
    ck_assert_uint_eq(after->exptime, clock_now() + 300);
    ck_assert_uint_gt(item_cas(after), cas_before);
    item_release(after);
    ck_assert_uint_eq(istats().curr_items, 1);

    ck_assert_int_eq(item_arith("g", 1, true, UINT64_MAX - 100, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, UINT64_MAX);
    expect_value("g", "18446744073709551615");
}
END_TEST

START_TEST(test_arith_held_not_modified)
{
    uint64_t r = 0;

    ck_assert_int_eq(set("h", "50"), ITEM_OK);
    struct item *held = get("h");
    ck_assert_int_eq(item_arith("h", 1, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 51);
    assert_item_value(held, "50");      /* a reader's bytes never change */
    struct item *cur = get("h");
    ck_assert_ptr_ne(cur, held);
    assert_item_value(cur, "51");
    item_release(cur);
    item_release(held);
    ck_assert_uint_eq(istats().curr_items, 1);
}
END_TEST

START_TEST(test_arith_non_numeric)
{
    uint64_t r = 12345;
    static const char *const bad[] = {
        "abc", "12abc", "", " ", "-5", "18446744073709551616",
        "99999999999999999999999", "1.5", "0x10",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(set("bad", bad[i]), ITEM_OK);
        ck_assert_msg(item_arith("bad", 3, true, 1, &r, NULL) == ITEM_NON_NUMERIC,
                      "incr of '%s' not rejected", bad[i]);
        ck_assert_msg(item_arith("bad", 3, false, 1, &r, NULL) == ITEM_NON_NUMERIC,
                      "decr of '%s' not rejected", bad[i]);
        expect_value("bad", bad[i]);
    }
    ck_assert_uint_eq(r, 12345);

    /* what memcached's strtoull accepts */
    ck_assert_int_eq(set("ok", " 7"), ITEM_OK);
    ck_assert_int_eq(item_arith("ok", 2, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 8);
    expect_value("ok", "8 ");
    ck_assert_int_eq(set("ok", "007"), ITEM_OK);
    ck_assert_int_eq(item_arith("ok", 2, true, 1, &r, NULL), ITEM_OK);
    ck_assert_uint_eq(r, 8);
    expect_value("ok", "8  ");
}
END_TEST

/* --- expiry ------------------------------------------------------------------------------------- */

START_TEST(test_expired_immediately)
{
    item_miss_t miss = ITEM_MISS_NONE;
    uint64_t r;

    ck_assert_int_eq(store_op("e", "v", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_ptr_null(item_get("e", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_EXPIRED);
    /* the dead item was dropped: a second lookup is a plain miss */
    miss = ITEM_MISS_EXPIRED;
    ck_assert_ptr_null(item_get("e", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
    ck_assert_uint_eq(istats().curr_items, 0);

    /* every command treats an expired item as absent */
    ck_assert_int_eq(store_op("e", "v", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(item_delete("e", 1, NULL, NULL), ITEM_NOT_FOUND);
    ck_assert_int_eq(store_op("e", "v", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(store_op("e", "w", 0, 0, ITEM_OP_REPLACE, 0), ITEM_NOT_STORED);
    ck_assert_int_eq(store_op("e", "1", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(item_arith("e", 1, true, 1, &r, NULL), ITEM_NOT_FOUND);
    ck_assert_int_eq(store_op("e", "1", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(item_touch("e", 1, 0, NULL), ITEM_NOT_FOUND);
    ck_assert_int_eq(store_op("e", "1", 0, clock_exptime(-1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(store_op("e", "2", 0, 0, ITEM_OP_APPEND, 0), ITEM_NOT_STORED);
    ck_assert_int_eq(store_op("e", "new", 0, 0, ITEM_OP_ADD, 0), ITEM_OK);
    expect_value("e", "new");

    /* an absolute unix time in the past is also dead */
    ck_assert_int_eq(store_op("u", "v", 0, clock_exptime((int64_t)clock_started() - 1),
                              ITEM_OP_SET, 0), ITEM_OK);
    miss = ITEM_MISS_NONE;
    ck_assert_ptr_null(item_get("u", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_EXPIRED);
}
END_TEST

/* One bounded sleep: a 1 s exptime passes; a touched item lives on. */
START_TEST(test_expiry_after_sleep)
{
    item_miss_t miss = ITEM_MISS_NONE;

    ck_assert_int_eq(store_op("short", "1", 0, clock_exptime(1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(store_op("touched", "2", 0, clock_exptime(1), ITEM_OP_SET, 0), ITEM_OK);
    ck_assert_int_eq(store_op("forever", "3", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    expect_value("short", "1");
    ck_assert_int_eq(item_touch("touched", 7, clock_exptime(100), NULL), ITEM_OK);
    sleep(2);
    clock_tick();
    ck_assert_ptr_null(item_get("short", 5, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_EXPIRED);
    expect_value("touched", "2");
    expect_value("forever", "3");
    ck_assert_uint_eq(istats().curr_items, 2);
}
END_TEST

/* --- flush -------------------------------------------------------------------------------------------- */

START_TEST(test_flush_now)
{
    item_miss_t miss = ITEM_MISS_NONE;

    ck_assert_int_eq(set("a", "1"), ITEM_OK);
    ck_assert_int_eq(set("b", "2"), ITEM_OK);
    item_flush(0);
    ck_assert_ptr_null(item_get("a", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_FLUSHED);
    ck_assert_int_eq(item_delete("b", 1, NULL, NULL), ITEM_NOT_FOUND);
    ck_assert_uint_eq(istats().curr_items, 0);

    /* stored after the flush (same second): visible */
    ck_assert_int_eq(set("c", "3"), ITEM_OK);
    ck_assert_int_eq(store_op("a", "4", 0, 0, ITEM_OP_ADD, 0), ITEM_OK);
    expect_value("c", "3");
    expect_value("a", "4");
    ck_assert_int_eq(store_op("c", "5", 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
    expect_value("c", "35");

    /* a second flush drops those too */
    item_flush(0);
    miss = ITEM_MISS_NONE;
    ck_assert_ptr_null(item_get("c", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_FLUSHED);
    ck_assert_int_eq(set("d", "6"), ITEM_OK);
    expect_value("d", "6");
}
END_TEST

START_TEST(test_flush_delayed_not_immediate)
{
    ck_assert_int_eq(set("a", "1"), ITEM_OK);
    item_flush(100);
    expect_value("a", "1");
    ck_assert_int_eq(set("b", "2"), ITEM_OK);
    expect_value("b", "2");
    ck_assert_uint_eq(istats().curr_items, 2);
}
END_TEST

START_TEST(test_flush_now_nocas)
{
    item_miss_t miss = ITEM_MISS_NONE;

    ck_assert_int_eq(set("a", "1"), ITEM_OK);
    item_flush(0);
    ck_assert_ptr_null(item_get("a", 1, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_FLUSHED);
    ck_assert_int_eq(item_delete("a", 1, NULL, NULL), ITEM_NOT_FOUND);
    ck_assert_uint_eq(istats().curr_items, 0);
}
END_TEST

/* One bounded sleep: a 1 s delayed flush takes effect later (cas off). */
START_TEST(test_flush_delayed_takes_effect)
{
    item_miss_t miss = ITEM_MISS_NONE;

    ck_assert_int_eq(set("before", "1"), ITEM_OK);
    item_flush(1);
    expect_value("before", "1");
    sleep(2);
    clock_tick();
    ck_assert_ptr_null(item_get("before", 6, false, 0, &miss));
    ck_assert_int_eq(miss, ITEM_MISS_FLUSHED);
    ck_assert_int_eq(set("after", "2"), ITEM_OK);
    expect_value("after", "2");
}
END_TEST

/* --- allocation without eviction ------------------------------------------------ */

/*
 * The reference count shares a word with the flags: item_get() refuses
 * an item whose count is at the cap instead of spilling into them.
 */
START_TEST(test_refcount_cap)
{
    ck_assert_int_eq(set("capped", "v"), ITEM_OK);
    struct item *it = get("capped");
    ck_assert_ptr_nonnull(it);
    uint32_t extra = ITEM_REF_MAX - item_refcount(it);
    atomic_fetch_add(&it->refs, extra);
    ck_assert_ptr_null(item_get("capped", 6, false, 0, NULL));
    ck_assert(item_iflags(it) & ITEM_LINKED);
    atomic_fetch_sub(&it->refs, extra);
    struct item *again = get("capped");
    ck_assert_ptr_eq(again, it);
    item_release(again);
    item_release(it);
    ck_assert_uint_eq(item_refcount(it), 1);
}
END_TEST





/* memcached t/issue_14.t: once a slab's items have expired, storing as
 * many again reuses their chunks instead of carving a second slab. */
START_TEST(test_alloc_reuses_dead_before_new_slab)
{
    uint32_t per = slab_class_perslab(evict_class());
    struct item **kept = calloc(per, sizeof(*kept));

    ck_assert_ptr_nonnull(kept);
    char k[16];

    /* stored with a TTL (a class that never saw one skips the look), then
     * expired by hand: no clock to advance */
    memset(evict_val, 'v', sizeof(evict_val));
    for (unsigned i = 0; i < per; i++) {
        evict_key(k, sizeof(k), i);
        ck_assert_int_eq(make_item(k, evict_val, VLEN_EVICT, i, clock_exptime(3600),
                                   &kept[i]), ITEM_OK);
        ck_assert_int_eq(item_store(kept[i], ITEM_OP_SET, 0), ITEM_OK);
    }
    size_t one = slab_malloced();
    ck_assert_uint_eq(one, SLAB_SZ);
    for (unsigned i = 0; i < per; i++) {
        kept[i]->exptime = clock_exptime(-1);
        item_release(kept[i]);
    }
    free(kept);
    for (unsigned i = per; i < 2 * per; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct item_stats st = istats();
    ck_assert_uint_eq(slab_malloced(), one);
    ck_assert_uint_eq(st.reclaimed, per);
    ck_assert_uint_eq(st.evictions, 0);
    ck_assert_uint_eq(st.curr_items, per);
}
END_TEST

/* Storage alone never evicts a live item: a full class answers
 * ITEM_NO_MEMORY and keeps everything (eviction is the cache layer's). */
START_TEST(test_alloc_try_never_evicts)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    struct item *it = NULL;

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    ck_assert_int_eq(store_evict(cap, NULL), ITEM_NO_MEMORY);
    ck_assert_int_eq(item_alloc_try("s", 1, 0, 0, 1, &it), ITEM_NO_MEMORY);
    ck_assert_ptr_null(it);
    for (unsigned i = 0; i < cap; i++) {
        ck_assert(evict_present(i));
    }
    ck_assert_uint_eq(istats().evictions, 0);
    struct item_class_stats cs;
    item_class_stats(evict_class(), &cs);
    ck_assert_uint_eq(cs.outofmemory, 0);       /* counted by the cache layer */
}
END_TEST

/*
 * A rebuild with no free chunk: without an item_rebuild it is one failed
 * attempt that pins nothing; with one it pins the stored item and asks for
 * memory, and the caller's chunk is linked on the second call (or dropped
 * with ITEM_RETRY when the key changed in between).
 */
START_TEST(test_rebuild_asks_for_memory)
{
    slab_set_limit(SMALL_LIMIT);
    char k[3][16];
    struct item *tail, *spare[4];
    unsigned n = 0;

    for (unsigned i = 0; i < 3; i++) {
        evict_key(k[i], sizeof(k[i]), i);
    }
    /* the appended piece first (its class takes a slab), then fill */
    ck_assert_int_eq(make_item(k[0], "+", 1, 0, 0, &tail), ITEM_OK);
    while (store_evict(n, NULL) == ITEM_OK) {
        n++;
    }
    ck_assert_uint_gt(n, 3);
    ck_assert_int_eq(item_store(tail, ITEM_OP_APPEND, 0), ITEM_NO_MEMORY);
    struct item *old = get(k[0]);
    ck_assert_uint_eq(item_refcount(old), 2);   /* the table's and ours: nothing pinned */

    struct item_store_meta m = { .cas = 0 };
    struct item_rebuild rb = { .old = NULL };
    ck_assert_int_eq(item_store_meta(tail, ITEM_OP_APPEND, &m, &rb), ITEM_NEED_MEMORY);
    ck_assert(rb.need && rb.old == old && rb.fresh == NULL);
    ck_assert_uint_eq(item_refcount(old), 3);
    ck_assert_uint_eq(rb.vlen, VLEN_EVICT + 1);
    ck_assert_uint_eq(rb.nkey, strlen(k[0]));
    ck_assert(memcmp(rb.key, k[0], rb.nkey) == 0);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_NO_MEMORY);
    ck_assert_int_eq(item_delete(k[1], strlen(k[1]), NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_OK);
    rb.need = false;

    /* the key changed while unlocked: the caller's chunk is given back */
    ck_assert_int_eq(item_delete(k[0], strlen(k[0]), NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_store_meta(tail, ITEM_OP_APPEND, &m, &rb), ITEM_RETRY);
    ck_assert(rb.fresh == NULL && rb.old == NULL && !rb.need);
    ck_assert_uint_eq(item_refcount(old), 1);    /* unlinked: ours alone */
    item_release(old);
    ck_assert_int_eq(item_store_meta(tail, ITEM_OP_APPEND, &m, &rb), ITEM_NOT_STORED);
    item_release(tail);

    /* the same rebuild on a key that stays: linked on the second call */
    ck_assert_int_eq(make_item(k[2], "+", 1, 0, 0, &tail), ITEM_OK);
    old = get(k[2]);
    unsigned nspare = 0;                        /* take the chunks freed above */
    while (nspare < 4 && item_alloc_try("s", 1, 0, 0, VLEN_EVICT, &spare[nspare]) == ITEM_OK) {
        nspare++;
    }
    ck_assert_uint_eq(nspare, 2);
    ck_assert_int_eq(item_store_meta(tail, ITEM_OP_APPEND, &m, &rb), ITEM_NEED_MEMORY);
    item_release(spare[0]);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_OK);
    ck_assert_int_eq(item_store_meta(tail, ITEM_OP_APPEND, &m, &rb), ITEM_OK);
    ck_assert(rb.fresh == NULL && rb.old == NULL);
    item_release(spare[1]);
    item_release(tail);
    ck_assert_uint_eq(item_refcount(old), 1);
    item_release(old);
    struct item *joined = get(k[2]);
    ck_assert_uint_eq(item_vlen(joined), VLEN_EVICT + 1);
    ck_assert_int_eq(item_value(joined)[VLEN_EVICT], '+');
    ck_assert_uint_eq(m.cas_out, item_cas(joined));
    item_release(joined);
}
END_TEST

/* Memory full, with every chunk of the smallest class taken: "n" holds
 * 19 nines there, "m" an empty value. */
static void
fill_small_class_and_memory(void)
{
    slab_set_limit(SMALL_LIMIT);
    ck_assert_int_eq(set("n", "9999999999999999999"), ITEM_OK);
    ck_assert_int_eq(set("m", ""), ITEM_OK);
    ck_assert_uint_eq(item_class_of(1, 20), item_class_of(1, 19));
    ck_assert_uint_eq(item_class_of(3, 0), item_class_of(1, 19));
    ck_assert_uint_gt(fill_with("z", "1234567890123456789"), 100);
    (void)fill_all_big();                       /* whatever memory is left */
}

/* incr past the counter's length with no free chunk: the same protocol
 * as append (ITEM_NEED_MEMORY with the counter pinned, linked on the
 * second call, ITEM_RETRY when the key changed meanwhile). */
START_TEST(test_arith_rebuild_asks_for_memory)
{
    uint64_t v = 0;
    uint8_t cls = 0;
    struct item_rebuild rb = { .old = NULL };

    fill_small_class_and_memory();
    struct item *old = get("n");
    ck_assert_int_eq(item_arith("n", 1, true, 1, &v, &cls), ITEM_NO_MEMORY);
    ck_assert_uint_eq(item_refcount(old), 2);   /* nothing pinned */
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, &cls, NULL, &rb), ITEM_NEED_MEMORY);
    ck_assert(rb.need && rb.old == old && rb.vlen == 20);
    ck_assert_uint_eq(item_refcount(old), 3);
    ck_assert_uint_eq(cls, item_class_of(1, 19));

    /* the key is set again while unlocked: start over */
    ck_assert_int_eq(item_delete("z0", 2, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_delete("z1", 2, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_OK);
    ck_assert_int_eq(set("n", "9999999999999999999"), ITEM_OK);
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, &cls, NULL, &rb), ITEM_RETRY);
    ck_assert(rb.old == NULL && rb.fresh == NULL);
    ck_assert_uint_eq(item_refcount(old), 1);
    item_release(old);
    expect_value("n", "9999999999999999999");

    /* a reader holds the new one: the rebuild lands on the second call */
    struct item *spare[4];
    unsigned nspare = 0;                        /* the chunks given back above */
    while (nspare < 4 && item_alloc_try("s", 1, 0, 0, 19, &spare[nspare]) == ITEM_OK) {
        nspare++;
    }
    ck_assert_uint_eq(nspare, 2);               /* the caller's chunk and the old counter's */
    old = get("n");
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, &cls, NULL, &rb), ITEM_NEED_MEMORY);
    item_release(spare[0]);
    item_release(spare[1]);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_OK);
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, &cls, NULL, &rb), ITEM_OK);
    ck_assert_uint_eq(v, 10000000000000000000ull);
    ck_assert(rb.old == NULL && rb.fresh == NULL);
    expect_value("n", "10000000000000000000");
    ck_assert(memcmp(item_value(old), "9999999999999999999", 19) == 0);  /* the reader's */
    ck_assert_uint_eq(item_refcount(old), 1);
    item_release(old);
}
END_TEST

/* mg N on a miss with no free chunk: without an item_rebuild nothing is
 * created; with one, the caller's chunk becomes the item. */
START_TEST(test_vivify_asks_for_memory)
{
    struct item_meta_get g = { .bump = true, .vivify = true };
    struct item_rebuild rb = { .old = NULL };
    item_miss_t miss;

    fill_small_class_and_memory();
    ck_assert_ptr_null(item_meta_get("viv", 3, &g, &miss, NULL));
    ck_assert(!g.created);
    ck_assert_ptr_null(item_meta_get("viv", 3, &g, &miss, &rb));
    ck_assert(rb.need && rb.old == NULL && rb.vlen == 0 && rb.nkey == 3);
    ck_assert_int_eq(item_delete("z0", 2, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_alloc_try(rb.key, rb.nkey, rb.flags, rb.exptime, rb.vlen,
                                    &rb.fresh), ITEM_OK);
    struct item *it = item_meta_get("viv", 3, &g, &miss, &rb);
    ck_assert_ptr_nonnull(it);
    ck_assert(g.created && g.won && rb.fresh == NULL);
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
    ck_assert_uint_eq(item_refcount(it), 2);
    item_release(it);
    expect_value("viv", "");
}
END_TEST

/* --- meta commands' storage operations ----------------------------------------- */

static uint64_t
used_chunks_of(struct item *it)
{
    struct slab_class_stats st;

    slab_class_stats(slab_cls_of(it), &st);
    return st.used_chunks;
}

START_TEST(test_meta_get_vivify_holds_one_reference)
{
    struct item_meta_get g = { .bump = true, .vivify = true,
                               .vivify_exptime = clock_exptime(30) };
    item_miss_t miss;
    struct item *it = item_meta_get("viv", 3, &g, &miss, NULL);

    ck_assert_ptr_nonnull(it);
    ck_assert(g.created && g.won && !g.token_sent && !g.fetched);
    ck_assert_uint_eq(item_vlen(it), 0);
    /* the hash table's reference and the caller's, no more */
    ck_assert_uint_eq(item_refcount(it), 2);
    uint64_t used = used_chunks_of(it);
    item_release(it);
    /* a second reader finds it, told a win was handed out already */
    it = item_meta_get("viv", 3, &g, &miss, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert(!g.created && !g.won && g.token_sent);
    ck_assert_uint_eq(item_refcount(it), 2);
    item_release(it);
    /* deleting it gives its chunk back: a leaked reference would keep it */
    ck_assert_int_eq(item_delete("viv", 3, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(make_item("viw", "", 0, 0, 0, &it), ITEM_OK);   /* same class */
    ck_assert_uint_eq(used_chunks_of(it), used);
    item_release(it);
}
END_TEST

START_TEST(test_meta_delete_marks_stale)
{
    struct item *it;
    struct item_meta_get g = { .bump = true };
    item_miss_t miss;

    ck_assert_int_eq(store_op("st", "v", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    it = get("st");
    uint64_t cas = item_cas(it);
    item_release(it);
    ck_assert_int_eq(item_meta_delete("st", 2, true, cas + 1, true, false, 0, NULL, NULL, NULL),
                     ITEM_EXISTS);
    ck_assert_int_eq(item_meta_delete("st", 2, true, cas, true, true,
                                      clock_exptime(30), NULL, NULL, NULL), ITEM_OK);
    it = item_meta_get("st", 2, &g, &miss, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert(g.stale && g.won && !g.token_sent);
    ck_assert_uint_ne(item_cas(it), cas);       /* a new CAS */
    ck_assert_uint_ne(it->exptime, 0);
    item_release(it);
    it = item_meta_get("st", 2, &g, &miss, NULL);
    ck_assert(g.stale && !g.won && g.token_sent);
    item_release(it);
    /* without I it goes */
    ck_assert_int_eq(item_meta_delete("st", 2, false, 0, false, false, 0, NULL, NULL, NULL), ITEM_OK);
    ck_assert_int_eq(item_meta_delete("st", 2, false, 0, false, false, 0, NULL, NULL, NULL),
                     ITEM_NOT_FOUND);
}
END_TEST

/*
 * meta E: a change gives the item the client's CAS instead of the next of
 * the sequence (ms, the stale mark of md I, ma, the item mg N creates);
 * md x keeps the item's own CAS (keep_cas). Without them the sequence
 * goes on.
 */
START_TEST(test_cas_given_by_the_client)
{
    struct item *it;
    uint64_t v;
    uint8_t cls;

    ck_assert_int_eq(make_item("e", "ab", 2, 0, 0, &it), ITEM_OK);
    struct item_store_meta sm = { .has_cas_in = true, .cas_in = 973 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_SET, &sm, NULL), ITEM_OK);
    ck_assert_uint_eq(sm.cas_out, 973);
    ck_assert_uint_eq(sm.vlen_out, 2);
    item_release(it);
    it = get("e");
    ck_assert_uint_eq(item_cas(it), 973);
    item_release(it);
    /* append: the joined item gets it, and its length is the joined one */
    ck_assert_int_eq(make_item("e", "cd", 2, 0, 0, &it), ITEM_OK);
    struct item_store_meta am = { .has_cas = true, .cas = 973, .has_cas_in = true,
                                  .cas_in = 4000 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_APPEND, &am, NULL), ITEM_OK);
    ck_assert_uint_eq(am.cas_out, 4000);
    ck_assert_uint_eq(am.vlen_out, 4);
    item_release(it);
    /* keep_cas: a replacement keeps the replaced item's CAS */
    ck_assert_int_eq(make_item("e", "", 0, 0, 0, &it), ITEM_OK);
    struct item_store_meta km = { .keep_cas = true };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_REPLACE, &km, NULL), ITEM_OK);
    ck_assert_uint_eq(km.cas_out, 4000);
    item_release(it);
    /* arithmetic */
    ck_assert_int_eq(set("n", "5"), ITEM_OK);
    struct item_arith_meta nm = { .has_cas_in = true, .cas_in = 123 };
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, &cls, &nm, NULL), ITEM_OK);
    ck_assert_uint_eq(v, 6);
    ck_assert_uint_eq(nm.cas_out, 123);
    /* the stale mark of md I */
    uint64_t given = 55;
    ck_assert_int_eq(item_meta_delete("n", 1, false, 0, true, false, 0, &given, NULL, NULL),
                     ITEM_OK);
    it = get("n");
    ck_assert_uint_eq(item_cas(it), 55);
    item_release(it);
    /* an item mg N creates */
    struct item_meta_get g = { .vivify = true, .has_cas_in = true, .cas_in = 9876 };
    item_miss_t miss;
    it = item_meta_get("viv", 3, &g, &miss, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert(g.created);
    ck_assert_uint_eq(item_cas(it), 9876);
    item_release(it);
    /* none given: the sequence goes on past what it had handed out */
    ck_assert_int_eq(set("f", "x"), ITEM_OK);
    it = get("f");
    ck_assert_uint_lt(item_cas(it), 55);
    item_release(it);
}
END_TEST

START_TEST(test_store_meta_cas_rules)
{
    struct item *it;

    ck_assert_int_eq(store_op("c", "v1", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    it = get("c");
    uint64_t cas = item_cas(it);
    item_release(it);
    /* C0 compares and matches nothing */
    ck_assert_int_eq(make_item("c", "v2", 2, 0, 0, &it), ITEM_OK);
    struct item_store_meta m = { .has_cas = true, .cas = 0 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_SET, &m, NULL), ITEM_EXISTS);
    ck_assert_uint_eq(m.cas_out, 0);
    /* an older CAS with I stores, marked stale, keeping the TTL */
    m = (struct item_store_meta){ .has_cas = true, .cas = cas - 1, .stale_ok = true };
    if (cas > 1) {
        ck_assert_int_eq(item_store_meta(it, ITEM_OP_SET, &m, NULL), ITEM_OK);
        ck_assert_uint_ne(m.cas_out, 0);
        ck_assert(item_iflags(it) & ITEM_STALE);
    }
    item_release(it);
    /* the right CAS stores and reports the new one */
    it = get("c");
    cas = item_cas(it);
    item_release(it);
    ck_assert_int_eq(make_item("c", "v3", 2, 0, 0, &it), ITEM_OK);
    m = (struct item_store_meta){ .has_cas = true, .cas = cas };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_REPLACE, &m, NULL), ITEM_OK);
    ck_assert_uint_eq(m.cas_out, item_cas(it));
    item_release(it);
    /* append compares a nonzero CAS only */
    ck_assert_int_eq(make_item("c", "+", 1, 0, 0, &it), ITEM_OK);
    m = (struct item_store_meta){ .has_cas = true, .cas = 1 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_APPEND, &m, NULL), ITEM_EXISTS);
    m = (struct item_store_meta){ .has_cas = true, .cas = 0 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_APPEND, &m, NULL), ITEM_OK);
    item_release(it);
}
END_TEST

START_TEST(test_arith_meta_cas_and_ttl)
{
    uint64_t v;
    struct item *it;

    ck_assert_int_eq(store_op("n", "5", 0, 0, ITEM_OP_SET, 0), ITEM_OK);
    it = get("n");
    uint64_t cas = item_cas(it);
    item_release(it);
    struct item_arith_meta m = { .cas = cas + 7 };
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, NULL, &m, NULL), ITEM_EXISTS);
    m = (struct item_arith_meta){ .cas = cas, .touch = true, .exptime = clock_exptime(60) };
    ck_assert_int_eq(item_arith_meta("n", 1, true, 2, &v, NULL, &m, NULL), ITEM_OK);
    ck_assert_uint_eq(v, 7);
    ck_assert_uint_ne(m.cas_out, cas);
    ck_assert_uint_eq(m.exptime_out, clock_exptime(60));
    ck_assert_uint_eq(m.vlen_out, 1);
}
END_TEST


START_TEST(test_lru_reclaims_flushed)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    item_flush(0);
    for (unsigned i = cap; i < 2 * cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct item_stats st = istats();
    ck_assert_uint_eq(st.evictions, 0);
    ck_assert_uint_eq(st.reclaimed, cap);
    ck_assert_uint_eq(st.curr_items, cap);
    ck_assert(evict_present(cap));
    ck_assert(evict_present(2 * cap - 1));
}
END_TEST


/* --- flash stubs: a fingerprint collision ------------------------------------------- */

static char flash_dir[64];
static char flash_file[96];

static void
setup_flash(void)
{
    char err[256];

    /* In the working directory: the build directory under make check. */
    snprintf(flash_dir, sizeof(flash_dir), "sc_item_flash_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(flash_dir));
    snprintf(flash_file, sizeof(flash_file), "%s/flash", flash_dir);
    struct flash_options o = { .path = flash_file, .size = 8 * SLAB_SZ, .slab_size = SLAB_SZ,
                               .wbufs = 4, .io_threads = 1, .min_value = 0,
                               .rewrite_share = 0.25 };
    ck_assert_int_eq(flash_setup(&o, err, sizeof(err)), FLASH_OK);
    storage_up("lru", true);
}

static void
teardown_flash(void)
{
    teardown_storage();
    flash_teardown();
    unlink(flash_file);
    rmdir(flash_dir);
}

/* Store key = vlen bytes of c, then evict it to flash: its stub. */
static void
stash(const char *key, char c, size_t vlen)
{
    char val[VLEN_EVICT];
    struct item *it;

    memset(val, c, vlen);
    ck_assert_int_eq(make_item(key, val, vlen, 0, 0, &it), ITEM_OK);
    uint8_t cls = slab_cls_of(it);
    ck_assert_int_eq(FX_STORE(it, ITEM_OP_SET, 0), ITEM_OK);
    item_release(it);
    ck_assert_uint_eq(item_clock_pull(cls, true, 1), 1);
    it = get(key);
    ck_assert_ptr_nonnull(it);
    ck_assert(item_is_flash(it));
    item_release(it);
}

/* A key of other's length in the same hash bucket (the partition's and
 * the bucket's bits of the hash, assoc.c: 16 at hashpower 16). */
static void
bucket_mate(const char *other, char *out, size_t cap)
{
    uint32_t want = hash_key(other, strlen(other)) & 0xfffff;

    for (unsigned i = 0; i < (1u << 28); i++) {
        snprintf(out, cap, "m%07x", i);
        if (strlen(out) == strlen(other) && (hash_key(out, strlen(out)) & 0xfffff) == want &&
            strcmp(out, other) != 0) {
            return;
        }
    }
    ck_abort_msg("no key shares %s's bucket", other);
}

/* Give key's stub the hashes of key2: what a 56-bit collision looks like. */
static void
forge_stub(const char *key, const char *key2)
{
    struct item *it = get(key);

    ck_assert_ptr_nonnull(it);
    ck_assert(item_is_flash(it));
    struct item_stub st = item_stub_of(it);
    st.hv = hash_key(key2, strlen(key2));
    st.fp = item_key_fp(key2, strlen(key2));
    memcpy(it->data, &st, sizeof(st));
    item_release(it);
}

START_TEST(test_stub_false_match_is_never_served)
{
    char mate[16], dst[VLEN_EVICT + 2];
    struct flash_read r;

    stash("stubkey1", 'a', 600);
    bucket_mate("stubkey1", mate, sizeof(mate));
    forge_stub("stubkey1", mate);
    /* The lookup matches the other key's stub by its hashes; the read
     * finds another key in the record: a miss, never 'a' x 600. */
    struct item *it = get(mate);
    ck_assert_ptr_nonnull(it);
    ck_assert(item_is_flash(it));
    memset(&r, 0, sizeof(r));
    ck_assert(item_flash_read_init(it, mate, strlen(mate), &r));
    item_release(it);
    r.dst = dst;
    ck_assert_int_eq(flash_read_sync(&r), FLASH_READ_BADCRC);
    /* A store of the key itself takes the false match out of the chain:
     * no older stub can answer for it after a later delete. */
    ck_assert_int_eq(set(mate, "real"), ITEM_OK);
    ck_assert_uint_eq(istats().curr_items, 1);
    expect_value(mate, "real");
    ck_assert_int_eq(item_delete(mate, strlen(mate), NULL, NULL), ITEM_OK);
    expect_absent(mate);
    ck_assert_uint_eq(istats().curr_items, 0);
}
END_TEST

START_TEST(test_stub_false_match_yields_to_the_key)
{
    char mate[16];

    bucket_mate("stubkey2", mate, sizeof(mate));
    ck_assert_int_eq(set(mate, "mine"), ITEM_OK);
    stash("stubkey2", 'b', 600);
    forge_stub("stubkey2", mate);
    ck_assert_uint_eq(istats().curr_items, 2);
    /* Both match mate: the item holding the key is the one found,
     * whichever comes first in the chain. */
    for (int i = 0; i < 3; i++) {
        struct item *it = get(mate);
        ck_assert_ptr_nonnull(it);
        ck_assert(!item_is_flash(it));
        assert_item_value(it, "mine");
        item_release(it);
    }
    /* A delete takes every match: the stub does not come back as mate. */
    ck_assert_int_eq(item_delete(mate, strlen(mate), NULL, NULL), ITEM_OK);
    expect_absent(mate);
    ck_assert_uint_eq(istats().curr_items, 0);
}
END_TEST

START_TEST(test_stub_dump_reads_its_key)
{
    struct item_cursor cur = { 0, 0 };
    uint64_t classes[4] = { 0 };
    uint8_t scls = item_stub_class();
    struct item_dump d;
    struct flash_read r;

    stash("dumpkey1", 'c', 600);
    classes[scls / 64] |= 1ull << (scls % 64);
    ck_assert(item_dump_next(&cur, classes, &d));
    ck_assert(d.stub);
    ck_assert_uint_eq(d.nkey, 8);
    memset(&r, 0, sizeof(r));
    item_dump_read_init(&d, &r);
    ck_assert_int_eq(flash_read_sync(&r), FLASH_READ_OK);
    ck_assert(item_dump_key_read(&d, &r));
    ck_assert_int_eq(memcmp(d.key, "dumpkey1", 8), 0);
    /* A stub whose fingerprint is another key's (its hash is kept: the
     * walk finds a stub through it): the key in its record is not the
     * stub's, and is not listed. */
    struct item *it = get("dumpkey1");
    ck_assert_ptr_nonnull(it);
    struct item_stub st = item_stub_of(it);
    st.fp = item_key_fp("otherkey", 8);
    memcpy(it->data, &st, sizeof(st));
    item_release(it);
    cur = (struct item_cursor){ 0, 0 };
    ck_assert(item_dump_next(&cur, classes, &d));
    ck_assert(d.stub);
    memset(&r, 0, sizeof(r));
    item_dump_read_init(&d, &r);
    ck_assert_int_eq(flash_read_sync(&r), FLASH_READ_OK);
    ck_assert(!item_dump_key_read(&d, &r));
}
END_TEST


static Suite *
item_suite(void)
{
    Suite *s = suite_create("item");
    TCase *tc = tcase_create("cas");
    TCase *tx = tcase_create("no_cas");

    tcase_add_checked_fixture(tc, setup_lru, teardown_storage);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_clock_exptime);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_legacy_lru_marks_once_a_minute);
    tcase_add_test(tc, test_probed_lookups);
    tcase_add_test(tc, test_refcount_cap);
    tcase_add_test(tc, test_alloc_try_never_evicts);
    tcase_add_test(tc, test_rebuild_asks_for_memory);
    tcase_add_test(tc, test_arith_rebuild_asks_for_memory);
    tcase_add_test(tc, test_vivify_asks_for_memory);
    tcase_add_test(tc, test_empty_value_and_max_key);
    tcase_add_test(tc, test_too_large);
    tcase_add_test(tc, test_alloc_release_unstored_frees_chunk);
    tcase_add_test(tc, test_ref_survives_delete);
    tcase_add_test(tc, test_ref_survives_overwrite);
    tcase_add_test(tc, test_ref_store_keeps_callers_reference);
    tcase_add_test(tc, test_add_replace);
    tcase_add_test(tc, test_append_prepend);
    tcase_add_test(tc, test_append_while_held);
    tcase_add_test(tc, test_concurrent_appends_all_land);
    tcase_add_test(tc, test_cas_semantics);
    tcase_add_test(tc, test_cas_increasing);
    tcase_add_test(tc, test_unlink_key_and_touch);
    tcase_add_test(tc, test_arith_basic);
    tcase_add_test(tc, test_arith_wrap);
    tcase_add_test(tc, test_arith_in_place_padding);
    tcase_add_test(tc, test_arith_grows_new_item);
    tcase_add_test(tc, test_arith_held_not_modified);
    tcase_add_test(tc, test_arith_non_numeric);
    tcase_add_test(tc, test_expired_immediately);
    tcase_add_test(tc, test_expiry_after_sleep);
    tcase_add_test(tc, test_flush_now);
    tcase_add_test(tc, test_flush_delayed_not_immediate);
    tcase_add_test(tc, test_alloc_reuses_dead_before_new_slab);
    tcase_add_test(tc, test_meta_get_vivify_holds_one_reference);
    tcase_add_test(tc, test_meta_delete_marks_stale);
    tcase_add_test(tc, test_store_meta_cas_rules);
    tcase_add_test(tc, test_cas_given_by_the_client);
    tcase_add_test(tc, test_arith_meta_cas_and_ttl);
    tcase_add_test(tc, test_lru_reclaims_flushed);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(tx, setup_nocas, teardown_storage);
    tcase_set_timeout(tx, 30);
    tcase_add_test(tx, test_nocas_zero);
    tcase_add_test(tx, test_flush_now_nocas);
    tcase_add_test(tx, test_flush_delayed_takes_effect);
    suite_add_tcase(s, tx);

    TCase *tf = tcase_create("flash_stub");
    tcase_add_checked_fixture(tf, setup_flash, teardown_flash);
    tcase_set_timeout(tf, 30);
    tcase_add_test(tf, test_stub_false_match_is_never_served);
    tcase_add_test(tf, test_stub_false_match_yields_to_the_key);
    tcase_add_test(tf, test_stub_dump_reads_its_key);
    suite_add_tcase(s, tf);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(item_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
