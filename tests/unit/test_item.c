/*
 * test_item.c -- unit tests for items (include/item.h): store semantics,
 * reference counts, arithmetic, expiry, flush and LRU eviction.
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
#include "evict.h"
#include "item.h"
#include "slab.h"

#define KB          ((size_t)1024)
#define MB          (1024 * KB)
#define SLAB_SZ     (64 * KB)
#define MAXBYTES    (4 * MB)
#define SMALL_LIMIT (4 * SLAB_SZ)   /* for eviction tests: 4 slabs */
#define VLEN_EVICT  1000            /* value size used to fill one class */

/* --- fixtures ------------------------------------------------------------------ */

static void
storage_up(const char *policy, bool use_cas)
{
    clock_setup();
    ck_assert_int_eq(evict_setup(policy), 0);
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, 1.25, 48, item_total_size(0, 0) - 2),
                     SLAB_OK);
    ck_assert_int_eq(assoc_setup(16), 0);
    ck_assert_int_eq(item_setup(use_cas), 0);
}

static void setup_lru(void) { storage_up("lru", true); }
static void setup_none(void) { storage_up("none", true); }
static void setup_nocas(void) { storage_up("lru", false); }

static void
teardown_storage(void)
{
    item_teardown();
    assoc_teardown();
    slab_teardown();
    evict_teardown();
}

/* --- helpers --------------------------------------------------------------------- */

/* Allocate key=val (value gets "\r\n"); *out keeps the caller's reference. */
static item_status_t
make_item(const char *key, const char *val, size_t vlen, uint32_t flags,
          rel_time_t exptime, struct item **out)
{
    struct item *it;
    item_status_t st = item_alloc(key, strlen(key), flags, exptime, (uint32_t)vlen, &it);

    if (st != ITEM_OK) {
        return st;
    }
    memcpy(item_value(it), val, vlen);
    memcpy(item_value(it) + vlen, "\r\n", 2);
    *out = it;
    return ITEM_OK;
}

static item_status_t
store_op(const char *key, const char *val, uint32_t flags, rel_time_t exptime,
         item_store_op_t op, uint64_t cas)
{
    struct item *it;
    item_status_t st = make_item(key, val, strlen(val), flags, exptime, &it);

    if (st != ITEM_OK) {
        return st;
    }
    st = item_store(it, op, cas);
    item_release(it);
    return st;
}

static item_status_t
set(const char *key, const char *val)
{
    return store_op(key, val, 0, 0, ITEM_OP_SET, 0);
}

static struct item *
get(const char *key)
{
    return item_get(key, strlen(key), false, 0, NULL);
}

static void
assert_item_value(struct item *it, const char *want)
{
    size_t n = strlen(want);

    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(item_vlen(it), n);
    ck_assert_msg(memcmp(item_value(it), want, n) == 0, "value '%.*s', want '%s'",
                  (int)item_vlen(it), item_value(it), want);
    ck_assert(memcmp(item_value(it) + n, "\r\n", 2) == 0);
}

/* Get key, check its value, release. */
static void
expect_value(const char *key, const char *want)
{
    struct item *it = get(key);

    ck_assert_msg(it != NULL, "key '%s' missing, want '%s'", key, want);
    assert_item_value(it, want);
    item_release(it);
}

static void
expect_absent(const char *key)
{
    item_miss_t miss = ITEM_MISS_FLUSHED;
    struct item *it = item_get(key, strlen(key), false, 0, &miss);

    ck_assert_msg(it == NULL, "key '%s' unexpectedly present", key);
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
}

static uint64_t
cas_of(const char *key)
{
    struct item *it = get(key);
    uint64_t cas;

    ck_assert_ptr_nonnull(it);
    cas = item_cas(it);
    item_release(it);
    return cas;
}

static struct item_stats
istats(void)
{
    struct item_stats st;

    item_get_stats(&st);
    return st;
}

static void
evict_key(char *buf, size_t cap, unsigned i)
{
    snprintf(buf, cap, "key:%05u", i);
}

/* Class and capacity (chunks) of the eviction test items under SMALL_LIMIT. */
static uint8_t
evict_class(void)
{
    char k[16];

    evict_key(k, sizeof(k), 0);
    return slab_clsid(item_total_size(strlen(k), VLEN_EVICT));
}

static uint32_t
evict_capacity(void)
{
    struct slab_class_stats st;

    slab_class_stats(evict_class(), &st);
    return (uint32_t)(SMALL_LIMIT / SLAB_SZ) * st.chunks_per_page;
}

static char evict_val[VLEN_EVICT];

/* Store key i with a value that names i (first bytes) padded with 'v'. */
static item_status_t
store_evict(unsigned i, struct item **keep)
{
    char k[16];
    struct item *it;
    item_status_t st;

    evict_key(k, sizeof(k), i);
    memset(evict_val, 'v', sizeof(evict_val));
    memcpy(evict_val, k, strlen(k));
    st = make_item(k, evict_val, VLEN_EVICT, i, 0, &it);
    if (st != ITEM_OK) {
        return st;
    }
    st = item_store(it, ITEM_OP_SET, 0);
    if (keep != NULL) {
        *keep = it;
    } else {
        item_release(it);
    }
    return st;
}

static void
assert_evict_item(struct item *it, unsigned i)
{
    char k[16];

    evict_key(k, sizeof(k), i);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(item_nkey(it), strlen(k));
    ck_assert(memcmp(item_key(it), k, strlen(k)) == 0);
    ck_assert_uint_eq(item_vlen(it), VLEN_EVICT);
    ck_assert(memcmp(item_value(it), k, strlen(k)) == 0);
    /* one assertion for the whole fill (check logs every assertion) */
    size_t bad = VLEN_EVICT;
    for (size_t j = strlen(k); j < VLEN_EVICT && bad == VLEN_EVICT; j++) {
        if (item_value(it)[j] != 'v') {
            bad = j;
        }
    }
    ck_assert_msg(bad == VLEN_EVICT, "item %u value byte %zu corrupted", i, bad);
    ck_assert(memcmp(item_value(it) + VLEN_EVICT, "\r\n", 2) == 0);
    ck_assert_uint_eq(it->flags, i);
}

static bool
evict_present(unsigned i)
{
    char k[16];
    struct item *it;

    evict_key(k, sizeof(k), i);
    it = get(k);
    if (it == NULL) {
        return false;
    }
    assert_evict_item(it, i);
    item_release(it);
    return true;
}

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
    ck_assert_int_eq(item_alloc("big", 3, 0, 0, (uint32_t)fit, &it), ITEM_OK);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(slab_cls_of(it), slab_class_count());
    item_release(it);

    it = NULL;
    ck_assert_int_eq(item_alloc("big", 3, 0, 0, (uint32_t)fit + 1, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);
    ck_assert_int_eq(item_alloc("big", 3, 0, 0, (uint32_t)SLAB_SZ, &it), ITEM_TOO_LARGE);
    ck_assert_int_eq(item_alloc("big", 3, 0, 0, UINT32_MAX - 2, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);

    memset(key, 'k', sizeof(key));
    ck_assert_int_eq(item_alloc(key, 256, 0, 0, 1, &it), ITEM_TOO_LARGE);
    ck_assert_ptr_null(it);
    ck_assert_int_eq(item_alloc(key, 255, 0, 0, 1, &it), ITEM_OK);
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
    ck_assert_int_eq(item_delete("k", 1, NULL), ITEM_OK);
    ck_assert_int_eq(item_delete("k", 1, NULL), ITEM_NOT_FOUND);
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
    ck_assert_int_eq(item_delete("mine", 4, NULL), ITEM_OK);
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
    ck_assert_int_eq(item_delete("a", 1, NULL), ITEM_OK);
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

    ck_assert_int_eq(item_delete("c", 1, NULL), ITEM_OK);
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
    ck_assert_int_eq(item_delete("e", 1, NULL), ITEM_NOT_FOUND);
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
    ck_assert_int_eq(item_delete("b", 1, NULL), ITEM_NOT_FOUND);
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
    ck_assert_int_eq(item_delete("a", 1, NULL), ITEM_NOT_FOUND);
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

/* --- eviction ------------------------------------------------------------------------------------------ */

START_TEST(test_lru_evicts_oldest)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    uint32_t n = cap * 3 + 17;

    ck_assert_uint_gt(cap, 40);
    for (unsigned i = 0; i < n; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct slab_class_stats ss;
    slab_class_stats(evict_class(), &ss);
    ck_assert_uint_eq(ss.total_pages, SMALL_LIMIT / SLAB_SZ);
    ck_assert_uint_eq(ss.total_chunks, cap);

    struct item_stats st = istats();
    ck_assert_uint_eq(st.curr_items, cap);
    ck_assert_uint_eq(st.evictions, n - cap);
    ck_assert_uint_eq(st.total_items, n);
    ck_assert_uint_eq(st.evicted_unfetched, n - cap);
    ck_assert_uint_eq(st.reclaimed, 0);

    /* exactly the newest cap keys remain */
    for (unsigned i = 0; i < n; i++) {
        bool want = i >= n - cap;
        ck_assert_msg(evict_present(i) == want, "key %u: want present=%d (cap %u, n %u)",
                      i, (int)want, cap, n);
    }
    struct item_class_stats cs;
    item_class_stats(evict_class(), &cs);
    ck_assert_uint_eq(cs.evicted, n - cap);
    ck_assert_uint_eq(cs.number, cap);
    ck_assert_uint_eq(cs.outofmemory, 0);
    ck_assert_uint_eq(slab_table_count(), SMALL_LIMIT / SLAB_SZ);

    item_reset_stats();
    st = istats();
    ck_assert_uint_eq(st.evictions, 0);
    ck_assert_uint_eq(st.curr_items, cap);
}
END_TEST

/*
 * CLOCK second chance: an item read since the hand last passed is spared
 * once; the unread ones behind it go first, in the order they were stored.
 */
START_TEST(test_clock_spares_a_read_item)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    char k[16];

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    evict_key(k, sizeof(k), 0);
    struct item *it = get(k);
    ck_assert_ptr_nonnull(it);
    item_release(it);
    for (unsigned i = cap; i < 2 * cap - 1; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    /* Key 0 is not read here: a get would mark it again. All cap items
     * are there and 1..cap-1 are not, so key 0 is. */
    ck_assert_uint_eq(istats().evictions, cap - 1);
    ck_assert_uint_eq(istats().curr_items, cap);
    for (unsigned i = 1; i < cap; i++) {
        ck_assert_msg(!evict_present(i), "unread key %u outlived a read one", i);
    }
    /* Spared once only: unread since, it is the next to go. */
    ck_assert_int_eq(store_evict(2 * cap - 1, NULL), ITEM_OK);
    ck_assert_uint_eq(istats().evictions, cap);
    ck_assert(!evict_present(0));
    ck_assert(evict_present(cap));
}
END_TEST

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

START_TEST(test_none_no_memory)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    struct item *it = NULL;

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    ck_assert_int_eq(store_evict(cap, NULL), ITEM_NO_MEMORY);
    ck_assert_int_eq(item_alloc("other", 5, 0, 0, VLEN_EVICT, &it), ITEM_NO_MEMORY);
    ck_assert_ptr_null(it);
    for (unsigned i = 0; i < cap; i++) {
        ck_assert(evict_present(i));
    }
    ck_assert(!evict_present(cap));
    struct item_stats st = istats();
    ck_assert_uint_eq(st.evictions, 0);
    ck_assert_uint_eq(st.curr_items, cap);
    struct item_class_stats cs;
    item_class_stats(evict_class(), &cs);
    ck_assert_uint_eq(cs.outofmemory, 2);

    /* deleting one makes room for exactly one */
    char k[16];
    evict_key(k, sizeof(k), 3);
    ck_assert_int_eq(item_delete(k, strlen(k), NULL), ITEM_OK);
    ck_assert_int_eq(store_evict(cap + 1, NULL), ITEM_OK);
    ck_assert_int_eq(store_evict(cap + 2, NULL), ITEM_NO_MEMORY);

    /* a different class with no slab cannot grow either */
    ck_assert_int_eq(item_alloc("s", 1, 0, 0, 1, &it), ITEM_NO_MEMORY);
}
END_TEST

START_TEST(test_lru_skips_held_writer_ref)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    struct item *held = NULL;

    ck_assert_int_eq(store_evict(0, &held), ITEM_OK);   /* keep alloc ref */
    for (unsigned i = 1; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    ck_assert_uint_eq(istats().evictions, 0);
    /* key 0 is the LRU tail but referenced: key 1 goes instead */
    ck_assert_int_eq(store_evict(cap, NULL), ITEM_OK);
    ck_assert_uint_eq(istats().evictions, 1);
    ck_assert(!evict_present(1));
    ck_assert(evict_present(0));

    /* a full turnover later key 0 is still linked and intact */
    for (unsigned i = cap + 1; i < 3 * cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    assert_evict_item(held, 0);
    ck_assert(item_iflags(held) & ITEM_LINKED);
    struct item *again = get("key:00000");
    ck_assert_ptr_eq(again, held);
    item_release(again);
    ck_assert_uint_eq(istats().curr_items, cap);
    item_release(held);
}
END_TEST

START_TEST(test_lru_skips_held_reader)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct item *held = get("key:00000");
    assert_evict_item(held, 0);
    ck_assert_int_eq(item_delete("key:00002", 9, NULL), ITEM_OK);
    /* overwrite churn: every new chunk must differ from the held one */
    for (unsigned i = cap; i < 3 * cap; i++) {
        struct item *it;
        char k[16];
        evict_key(k, sizeof(k), i);
        memset(evict_val, 'v', sizeof(evict_val));
        memcpy(evict_val, k, strlen(k));
        ck_assert_int_eq(make_item(k, evict_val, VLEN_EVICT, i, 0, &it), ITEM_OK);
        ck_assert_ptr_ne(it, held);
        ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
        item_release(it);
    }
    /* the first set took key 2's freed chunk, the rest evicted */
    ck_assert_uint_eq(istats().evictions, 2 * cap - 1);
    assert_evict_item(held, 0);
    ck_assert(evict_present(0));
    ck_assert(!evict_present(1));
    ck_assert(evict_present(3 * cap - 1));
    item_release(held);
    ck_assert_uint_eq(istats().curr_items, cap);
}
END_TEST

START_TEST(test_lru_held_deleted_item_not_reused)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct item *held = get("key:00005");
    ck_assert_int_eq(item_delete("key:00005", 9, NULL), ITEM_OK);
    for (unsigned i = cap; i < 3 * cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    assert_evict_item(held, 5);
    ck_assert(!evict_present(5));
    /* one chunk is pinned by us, so one fewer item fits */
    ck_assert_uint_eq(istats().curr_items, cap - 1);
    item_release(held);
    ck_assert_int_eq(store_evict(3 * cap, NULL), ITEM_OK);
    ck_assert_uint_eq(istats().curr_items, cap);
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
    struct item *it = item_meta_get("viv", 3, &g, &miss);

    ck_assert_ptr_nonnull(it);
    ck_assert(g.created && g.won && !g.token_sent && !g.fetched);
    ck_assert_uint_eq(item_vlen(it), 0);
    /* the hash table's reference and the caller's, no more */
    ck_assert_uint_eq(item_refcount(it), 2);
    uint64_t used = used_chunks_of(it);
    item_release(it);
    /* a second reader finds it, told a win was handed out already */
    it = item_meta_get("viv", 3, &g, &miss);
    ck_assert_ptr_nonnull(it);
    ck_assert(!g.created && !g.won && g.token_sent);
    ck_assert_uint_eq(item_refcount(it), 2);
    item_release(it);
    /* deleting it gives its chunk back: a leaked reference would keep it */
    ck_assert_int_eq(item_delete("viv", 3, NULL), ITEM_OK);
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
    ck_assert_int_eq(item_meta_delete("st", 2, true, cas + 1, true, false, 0, NULL),
                     ITEM_EXISTS);
    ck_assert_int_eq(item_meta_delete("st", 2, true, cas, true, true,
                                      clock_exptime(30), NULL), ITEM_OK);
    it = item_meta_get("st", 2, &g, &miss);
    ck_assert_ptr_nonnull(it);
    ck_assert(g.stale && g.won && !g.token_sent);
    ck_assert_uint_ne(item_cas(it), cas);       /* a new CAS */
    ck_assert_uint_ne(it->exptime, 0);
    item_release(it);
    it = item_meta_get("st", 2, &g, &miss);
    ck_assert(g.stale && !g.won && g.token_sent);
    item_release(it);
    /* without I it goes */
    ck_assert_int_eq(item_meta_delete("st", 2, false, 0, false, false, 0, NULL), ITEM_OK);
    ck_assert_int_eq(item_meta_delete("st", 2, false, 0, false, false, 0, NULL),
                     ITEM_NOT_FOUND);
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
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_SET, &m), ITEM_EXISTS);
    ck_assert_uint_eq(m.cas_out, 0);
    /* an older CAS with I stores, marked stale, keeping the TTL */
    m = (struct item_store_meta){ .has_cas = true, .cas = cas - 1, .stale_ok = true };
    if (cas > 1) {
        ck_assert_int_eq(item_store_meta(it, ITEM_OP_SET, &m), ITEM_OK);
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
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_REPLACE, &m), ITEM_OK);
    ck_assert_uint_eq(m.cas_out, item_cas(it));
    item_release(it);
    /* append compares a nonzero CAS only */
    ck_assert_int_eq(make_item("c", "+", 1, 0, 0, &it), ITEM_OK);
    m = (struct item_store_meta){ .has_cas = true, .cas = 1 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_APPEND, &m), ITEM_EXISTS);
    m = (struct item_store_meta){ .has_cas = true, .cas = 0 };
    ck_assert_int_eq(item_store_meta(it, ITEM_OP_APPEND, &m), ITEM_OK);
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
    ck_assert_int_eq(item_arith_meta("n", 1, true, 1, &v, NULL, &m), ITEM_EXISTS);
    m = (struct item_arith_meta){ .cas = cas, .touch = true, .exptime = clock_exptime(60) };
    ck_assert_int_eq(item_arith_meta("n", 1, true, 2, &v, NULL, &m), ITEM_OK);
    ck_assert_uint_eq(v, 7);
    ck_assert_uint_ne(m.cas_out, cas);
    ck_assert_uint_eq(m.exptime_out, clock_exptime(60));
    ck_assert_uint_eq(m.vlen_out, 1);
}
END_TEST

START_TEST(test_lru_reclaims_expired_first)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    const unsigned nexp = 3;
    char k[16];

    /* oldest: three items that expire once the class is full (stored
     * live: an allocation reuses a dead item at the hand first, so items
     * stored already expired would replace one another), then live ones */
    struct item *doomed[3];
    for (unsigned i = 0; i < nexp; i++) {
        evict_key(k, sizeof(k), i);
        memset(evict_val, 'v', sizeof(evict_val));
        memcpy(evict_val, k, strlen(k));
        ck_assert_int_eq(make_item(k, evict_val, VLEN_EVICT, i, 0, &doomed[i]),
                         ITEM_OK);
        ck_assert_int_eq(item_store(doomed[i], ITEM_OP_SET, 0), ITEM_OK);
    }
    for (unsigned i = nexp; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    for (unsigned i = 0; i < nexp; i++) {
        doomed[i]->exptime = clock_exptime(-1);
        item_release(doomed[i]);
    }
    ck_assert_uint_eq(istats().curr_items, cap);

    for (unsigned i = cap; i < cap + nexp; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    struct item_stats st = istats();
    ck_assert_uint_eq(st.reclaimed, nexp);
    ck_assert_uint_eq(st.expired_unfetched, nexp);
    ck_assert_uint_eq(st.evictions, 0);
    ck_assert_uint_eq(st.curr_items, cap);

    /* no dead items left: now the oldest live one is evicted (checked
     * before any read so read-recency plays no part) */
    ck_assert_int_eq(store_evict(cap + nexp, NULL), ITEM_OK);
    st = istats();
    ck_assert_uint_eq(st.reclaimed, nexp);
    ck_assert_uint_eq(st.evictions, 1);
    ck_assert_uint_eq(st.curr_items, cap);
    ck_assert(!evict_present(nexp));
    for (unsigned i = nexp + 1; i <= cap + nexp; i++) {
        ck_assert_msg(evict_present(i), "live key %u lost", i);
    }
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

/*
 * A class whose items were all read since they were stored must still
 * evict one of them for a new set: the LRU policy only refuses when
 * every candidate is referenced. Largest class: one item per slab, so
 * the whole class is SMALL_LIMIT / SLAB_SZ = 4 items.
 */
START_TEST(test_lru_evicts_when_all_recently_read)
{
    slab_set_limit(SMALL_LIMIT);
    size_t vlen = SLAB_SZ - item_total_size(9, 0);
    char *v = malloc(vlen + 1);
    char k[16];

    ck_assert_ptr_nonnull(v);
    memset(v, 'L', vlen);
    v[vlen] = '\0';
    for (unsigned i = 0; i < 4; i++) {
        evict_key(k, sizeof(k), i);
        ck_assert_int_eq(set(k, v), ITEM_OK);
    }
    ck_assert_uint_eq(slab_table_count(), 4);
    for (unsigned i = 0; i < 4; i++) {
        evict_key(k, sizeof(k), i);
        struct item *it = get(k);
        ck_assert_ptr_nonnull(it);
        item_release(it);
    }
    /* nothing is referenced: a new large set must evict, not fail */
    evict_key(k, sizeof(k), 4);
    ck_assert_int_eq(set(k, v), ITEM_OK);
    ck_assert_uint_eq(istats().evictions, 1);
    ck_assert_uint_eq(istats().curr_items, 4);
    expect_value(k, v);
    free(v);
}
END_TEST

/*
 * Same with a class that holds a single item: memory for one slab only,
 * one whole-slab item, read once. The LRU walk must still evict it for
 * the next set (nothing references it) instead of failing with
 * ITEM_NO_MEMORY.
 */
START_TEST(test_lru_evicts_single_recently_read)
{
    slab_set_limit(SLAB_SZ);
    size_t vlen = SLAB_SZ - item_total_size(1, 0);
    char *v = malloc(vlen + 1);

    ck_assert_ptr_nonnull(v);
    memset(v, 'S', vlen);
    v[vlen] = '\0';
    ck_assert_int_eq(set("a", v), ITEM_OK);
    struct item *it = get("a");
    ck_assert_ptr_nonnull(it);
    item_release(it);

    v[0] = 'T';
    ck_assert_int_eq(set("b", v), ITEM_OK);
    ck_assert_uint_eq(istats().evictions, 1);
    expect_absent("a");
    expect_value("b", v);
    struct item_class_stats cs;
    item_class_stats(slab_class_count(), &cs);
    ck_assert_uint_eq(cs.outofmemory, 0);
    free(v);
}
END_TEST

static Suite *
item_suite(void)
{
    Suite *s = suite_create("item");
    TCase *tc = tcase_create("lru_cas");
    TCase *tn = tcase_create("evict_none");
    TCase *tx = tcase_create("no_cas");

    tcase_add_checked_fixture(tc, setup_lru, teardown_storage);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_clock_exptime);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_refcount_cap);
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
    tcase_add_test(tc, test_lru_evicts_oldest);
    tcase_add_test(tc, test_clock_spares_a_read_item);
    tcase_add_test(tc, test_lru_skips_held_writer_ref);
    tcase_add_test(tc, test_lru_skips_held_reader);
    tcase_add_test(tc, test_lru_held_deleted_item_not_reused);
    tcase_add_test(tc, test_lru_reclaims_expired_first);
    tcase_add_test(tc, test_alloc_reuses_dead_before_new_slab);
    tcase_add_test(tc, test_meta_get_vivify_holds_one_reference);
    tcase_add_test(tc, test_meta_delete_marks_stale);
    tcase_add_test(tc, test_store_meta_cas_rules);
    tcase_add_test(tc, test_arith_meta_cas_and_ttl);
    tcase_add_test(tc, test_lru_reclaims_flushed);
    tcase_add_test(tc, test_lru_evicts_when_all_recently_read);
    tcase_add_test(tc, test_lru_evicts_single_recently_read);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(tn, setup_none, teardown_storage);
    tcase_set_timeout(tn, 30);
    tcase_add_test(tn, test_none_no_memory);
    suite_add_tcase(s, tn);

    tcase_add_checked_fixture(tx, setup_nocas, teardown_storage);
    tcase_set_timeout(tx, 30);
    tcase_add_test(tx, test_nocas_zero);
    tcase_add_test(tx, test_flush_now_nocas);
    tcase_add_test(tx, test_flush_delayed_takes_effect);
    suite_add_tcase(s, tx);
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
