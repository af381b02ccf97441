/*
 * item_fixture.h -- the storage stack and item helpers that test_item.c
 * (storage alone) and test_cache.c (storage under the cache layer, with
 * eviction) share. The including file defines how items are allocated and
 * stored, and what a policy name sets up:
 *   FX_ALLOC(key, nkey, flags, exptime, vlen, &it)   item_alloc_try or cache_alloc
 *   FX_STORE(it, op, cas)                            item_store or cache_store
 *   FX_POLICY_SETUP(name), FX_POLICY_TEARDOWN()      nothing, or evict_setup
 * Static functions in a header: each test is one translation unit.
 */
#ifndef SC_TEST_ITEM_FIXTURE_H
#define SC_TEST_ITEM_FIXTURE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "assoc.h"
#include "clock.h"
#include "item.h"
#include "slab.h"

#define KB          ((size_t)1024)
#define MB          (1024 * KB)
#define SLAB_SZ     (64 * KB)
#define MAXBYTES    (4 * MB)
#define SMALL_LIMIT (4 * SLAB_SZ)   /* for eviction tests: 4 slabs */
#define VLEN_EVICT  1000            /* value size used to fill one class */

/* --- fixtures ------------------------------------------------------------------ */

static inline void
storage_up(const char *policy, bool use_cas)
{
    clock_setup();
    FX_POLICY_SETUP(policy);
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, 1.25, 48, item_total_size(0, 0) - 2),
                     SLAB_OK);
    ck_assert_int_eq(assoc_setup(16), 0);
    ck_assert_int_eq(item_setup(use_cas), 0);
}

static inline void setup_lru(void) { storage_up("lru", true); }
static inline void setup_none(void) { storage_up("none", true); }
static inline void setup_nocas(void) { storage_up("lru", false); }

static inline void
teardown_storage(void)
{
    item_teardown();
    assoc_teardown();
    slab_teardown();
    FX_POLICY_TEARDOWN();
}

/* --- helpers --------------------------------------------------------------------- */

/* Allocate key=val (value gets "\r\n"); *out keeps the caller's reference. */
static inline item_status_t
make_item(const char *key, const char *val, size_t vlen, uint32_t flags,
          rel_time_t exptime, struct item **out)
{
    struct item *it;
    item_status_t st = FX_ALLOC(key, strlen(key), flags, exptime, (uint32_t)vlen, &it);

    if (st != ITEM_OK) {
        return st;
    }
    memcpy(item_value(it), val, vlen);
    memcpy(item_value(it) + vlen, "\r\n", 2);
    *out = it;
    return ITEM_OK;
}

static inline item_status_t
store_op(const char *key, const char *val, uint32_t flags, rel_time_t exptime,
         item_store_op_t op, uint64_t cas)
{
    struct item *it;
    item_status_t st = make_item(key, val, strlen(val), flags, exptime, &it);

    if (st != ITEM_OK) {
        return st;
    }
    st = FX_STORE(it, op, cas);
    item_release(it);
    return st;
}

static inline item_status_t
set(const char *key, const char *val)
{
    return store_op(key, val, 0, 0, ITEM_OP_SET, 0);
}

static inline struct item *
get(const char *key)
{
    return item_get(key, strlen(key), false, 0, NULL);
}

static inline void
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
static inline void
expect_value(const char *key, const char *want)
{
    struct item *it = get(key);

    ck_assert_msg(it != NULL, "key '%s' missing, want '%s'", key, want);
    assert_item_value(it, want);
    item_release(it);
}

static inline void
expect_absent(const char *key)
{
    item_miss_t miss = ITEM_MISS_FLUSHED;
    struct item *it = item_get(key, strlen(key), false, 0, &miss);

    ck_assert_msg(it == NULL, "key '%s' unexpectedly present", key);
    ck_assert_int_eq(miss, ITEM_MISS_NONE);
}

static inline uint64_t
cas_of(const char *key)
{
    struct item *it = get(key);
    uint64_t cas;

    ck_assert_ptr_nonnull(it);
    cas = item_cas(it);
    item_release(it);
    return cas;
}

static inline struct item_stats
istats(void)
{
    struct item_stats st;

    item_get_stats(&st);
    return st;
}

static inline void
evict_key(char *buf, size_t cap, unsigned i)
{
    snprintf(buf, cap, "key:%05u", i);
}

/* Class and capacity (chunks) of the eviction test items under SMALL_LIMIT. */
static inline uint8_t
evict_class(void)
{
    char k[16];

    evict_key(k, sizeof(k), 0);
    return slab_clsid(item_total_size(strlen(k), VLEN_EVICT));
}

static inline uint32_t
evict_capacity(void)
{
    struct slab_class_stats st;

    slab_class_stats(evict_class(), &st);
    return (uint32_t)(SMALL_LIMIT / SLAB_SZ) * st.chunks_per_page;
}

/* Store <prefix>0, <prefix>1, ... = val until refused (storage without
 * eviction, or policy none): fills val's class, then memory. The count. */
static inline unsigned
fill_with(const char *prefix, const char *val)
{
    char k[32];
    unsigned n = 0;

    for (;; n++) {
        snprintf(k, sizeof(k), "%s%u", prefix, n);
        if (store_op(k, val, 0, 0, ITEM_OP_SET, 0) != ITEM_OK) {
            return n;
        }
    }
}

/* Fill the rest of memory with VLEN_EVICT values (new slabs until -m). */
static inline unsigned
fill_all_big(void)
{
    static char big[VLEN_EVICT + 1];

    memset(big, 'b', VLEN_EVICT);
    return fill_with("big", big);
}

/* The value buffer of the eviction helpers (and of tests that fill by hand). */
static char evict_val[VLEN_EVICT] __attribute__((unused));

/* Store key i with a value that names i (first bytes) padded with 'v'. */
static inline item_status_t
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
    st = FX_STORE(it, ITEM_OP_SET, 0);
    if (keep != NULL) {
        *keep = it;
    } else {
        item_release(it);
    }
    return st;
}

static inline void
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

static inline bool
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


#endif
