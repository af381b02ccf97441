/*
 * test_assoc.c -- unit tests for the partitioned hash table (assoc.h).
 *
 * Items are fake: chunks from the slab allocator (the table links them by
 * slab handle) holding just the key and its length, which is all the
 * table looks at. Each test runs in its own
 * process (check's fork mode) with its own assoc_setup().
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assoc.h"
#include "hash.h"
#include "item.h"
#include "slab.h"

static struct item *
fake_item(const char *key, size_t nkey)
{
    uint8_t cls = slab_clsid(item_total_size(nkey, 0));
    uint32_t sid;
    struct item *it = slab_alloc(cls, &sid);

    ck_assert_ptr_nonnull(it);
    it->cas_key = (uint8_t)nkey;
    it->h_next = SLAB_HANDLE_NONE;
    memcpy(item_key(it), key, nkey);
    return it;
}

static void
fake_free(struct item *it)
{
    slab_free(slab_cls_of(it), slab_sid_of(it), it);
}

static struct item *
fake(const char *key)
{
    return fake_item(key, strlen(key));
}

static void
insert(struct item *it)
{
    uint32_t hv = hash_key(item_key(it), item_nkey(it));

    assoc_lock(hv);
    assoc_insert(it, hv);
    assoc_unlock(hv);
}

static void
delete(struct item *it)
{
    uint32_t hv = hash_key(item_key(it), item_nkey(it));

    assoc_lock(hv);
    assoc_delete(it, hv);
    assoc_unlock(hv);
}

static struct item *
find_n(const char *key, size_t nkey)
{
    uint32_t hv = hash_key(key, nkey);
    struct item *it;

    assoc_lock(hv);
    it = assoc_find(key, nkey, hv);
    assoc_unlock(hv);
    return it;
}

static struct item *
find(const char *key)
{
    return find_n(key, strlen(key));
}

static void
key_of(char *buf, size_t cap, const char *prefix, unsigned i)
{
    snprintf(buf, cap, "%s%u", prefix, i);
}

/* Low bits that pick partition and bucket while a partition has 2^4 buckets. */
#define MIN_BUCKET_MASK ((1u << (10 + 4)) - 1)

static void
setup_slabs(void)
{
    ck_assert_int_eq(slab_setup((size_t)256 << 20, 1 << 20, 1.25, 48,
                                item_total_size(0, 0) - 2), SLAB_OK);
}

static void setup_small(void) { setup_slabs(); ck_assert_int_eq(assoc_setup(0), 0); }
static void setup_16(void) { setup_slabs(); ck_assert_int_eq(assoc_setup(16), 0); }
static void teardown_table(void) { assoc_teardown(); slab_teardown(); }

/* --- sizes ------------------------------------------------------------------ */

START_TEST(test_initial_buckets)
{
    /* fixture: hashpower 0 -> the 16-bucket minimum per partition */
    ck_assert_uint_eq(assoc_buckets(), (uint64_t)ASSOC_PARTITIONS * 16);
    ck_assert_uint_eq(assoc_expansions(), 0);
    assoc_teardown();
    ck_assert_int_eq(assoc_setup(14), 0);
    ck_assert_uint_eq(assoc_buckets(), (uint64_t)ASSOC_PARTITIONS * 16);
    assoc_teardown();
    ck_assert_int_eq(assoc_setup(16), 0);
    ck_assert_uint_eq(assoc_buckets(), 65536);
    assoc_teardown();
    ck_assert_int_eq(assoc_setup(20), 0);
    ck_assert_uint_eq(assoc_buckets(), 1u << 20);
    ck_assert_uint_eq(assoc_expansions(), 0);
}
END_TEST

/* --- basic operations ----------------------------------------------------------- */

START_TEST(test_empty_find)
{
    ck_assert_ptr_null(find("nothing"));
    ck_assert_ptr_null(find("a"));
    ck_assert_ptr_null(find_n("", 0));
}
END_TEST

START_TEST(test_insert_find_delete_many)
{
    enum { N = 10000 };
    struct item **its = calloc(N, sizeof(*its));
    char key[32];

    ck_assert_ptr_nonnull(its);
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "item:", i);
        its[i] = fake(key);
        insert(its[i]);
    }
    /* one assertion per key is slow under check; count mismatches */
    unsigned missing = 0, wrong = 0;
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "item:", i);
        struct item *it = find(key);
        missing += it == NULL;
        wrong += it != NULL && it != its[i];
    }
    ck_assert_uint_eq(missing, 0);
    ck_assert_uint_eq(wrong, 0);
    ck_assert_ptr_null(find("item:"));
    key_of(key, sizeof(key), "item:", N);
    ck_assert_ptr_null(find(key));
    ck_assert_uint_eq(assoc_expansions(), 0);       /* 10k < 1.5 * 65536 */
    ck_assert_uint_eq(assoc_buckets(), 65536);

    for (unsigned i = 0; i < N; i += 2) {
        delete(its[i]);
    }
    unsigned present_even = 0, missing_odd = 0;
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "item:", i);
        struct item *it = find(key);
        if (i % 2 == 0) {
            present_even += it != NULL;
        } else {
            missing_odd += it != its[i];
        }
    }
    ck_assert_uint_eq(present_even, 0);
    ck_assert_uint_eq(missing_odd, 0);

    /* reinsert the deleted ones */
    for (unsigned i = 0; i < N; i += 2) {
        insert(its[i]);
    }
    missing = 0;
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "item:", i);
        missing += find(key) != its[i];
    }
    ck_assert_uint_eq(missing, 0);
    for (unsigned i = 0; i < N; i++) {
        delete(its[i]);
        fake_free(its[i]);
    }
    ck_assert_ptr_null(find("item:0"));
    free(its);
}
END_TEST

START_TEST(test_growth)
{
    enum { N = 200000 };
    struct item **its = calloc(N, sizeof(*its));
    char key[32];
    uint64_t initial = assoc_buckets();

    ck_assert_ptr_nonnull(its);
    ck_assert_uint_eq(initial, 65536);
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "grow:", i);
        its[i] = fake(key);
        insert(its[i]);
    }
    uint64_t buckets = assoc_buckets();
    uint64_t exp = assoc_expansions();
    ck_assert_uint_gt(buckets, initial);
    ck_assert_uint_gt(exp, 0);
    /* load factor stays <= 1.5 in every partition, so overall too */
    ck_assert_uint_ge(buckets * 3, (uint64_t)N * 2);
    /* every expansion doubles a partition of >= 64 buckets */
    ck_assert_uint_ge(buckets - initial, exp * 64);
    /* 200k keys over 1024 partitions of 64: every partition passes 96 */
    ck_assert_uint_ge(exp, ASSOC_PARTITIONS);

    unsigned missing = 0;
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "grow:", i);
        missing += find(key) != its[i];
    }
    ck_assert_uint_eq(missing, 0);

    /* deletes after growth find the right chains */
    for (unsigned i = 1; i < N; i += 2) {
        delete(its[i]);
    }
    unsigned bad = 0;
    for (unsigned i = 0; i < N; i++) {
        key_of(key, sizeof(key), "grow:", i);
        struct item *it = find(key);
        bad += (i % 2 == 0) ? it != its[i] : it != NULL;
    }
    ck_assert_uint_eq(bad, 0);
    /* the table does not shrink */
    ck_assert_uint_eq(assoc_buckets(), buckets);
    for (unsigned i = 0; i < N; i++) {
        if (i % 2 == 0) {
            delete(its[i]);
        }
        fake_free(its[i]);
    }
    free(its);
}
END_TEST

/*
 * A slot handed out for prefetching names the key's bucket (its chain
 * starts there) and stays readable after the partition doubles (under
 * ASan a freed array would fail here); a new slot names the new bucket.
 */
START_TEST(test_prefetch_slot_survives_growth)
{
    enum { N = 200000 };
    struct item **its = calloc(N, sizeof(*its));
    char key[32];

    ck_assert_ptr_nonnull(its);
    its[0] = fake("probe");
    insert(its[0]);
    uint32_t hv = hash_key("probe", 5);
    const uint32_t *old = assoc_prefetch_bucket(hv);
    ck_assert_uint_eq(__atomic_load_n(old, __ATOMIC_RELAXED), slab_handle(its[0]));
    uint64_t exp = assoc_expansions();
    for (unsigned i = 1; i < N; i++) {
        key_of(key, sizeof(key), "grow:", i);
        its[i] = fake(key);
        insert(its[i]);
    }
    ck_assert_uint_ge(assoc_expansions(), exp + ASSOC_PARTITIONS);
    assoc_prefetch_head(old);       /* the retired array is still there */
    const uint32_t *now = assoc_prefetch_bucket(hv);
    ck_assert_ptr_ne(now, old);
    bool found = false;
    assoc_lock(hv);
    for (uint32_t h = *now; h != SLAB_HANDLE_NONE; h = slab_handle_item(h)->h_next) {
        found |= slab_handle_item(h) == its[0];
    }
    assoc_unlock(hv);
    ck_assert(found);
    for (unsigned i = 0; i < N; i++) {
        delete(its[i]);
        fake_free(its[i]);
    }
    free(its);
}
END_TEST

/* --- chains ------------------------------------------------------------------------ */

/* Find n keys "<prefix><i>" whose hashes share bucket and partition. */
static unsigned
colliding_keys(const char *prefix, char keys[][32], unsigned n)
{
    unsigned found = 0;
    uint32_t want = 0;

    for (unsigned i = 0; i < 10000000 && found < n; i++) {
        char k[32];
        key_of(k, sizeof(k), prefix, i);
        uint32_t hv = hash_key(k, strlen(k));
        if (found == 0) {
            want = hv & MIN_BUCKET_MASK;
        } else if ((hv & MIN_BUCKET_MASK) != want) {
            continue;
        }
        memcpy(keys[found++], k, sizeof(k));
    }
    return found;
}

START_TEST(test_chain_delete_middle)
{
    char keys[4][32];
    struct item *it[4];

    ck_assert_uint_eq(colliding_keys("chain:", keys, 4), 4);
    for (int i = 0; i < 4; i++) {
        it[i] = fake(keys[i]);
        insert(it[i]);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_eq(find(keys[i]), it[i]);
    }
    /* chain is it3 -> it2 -> it1 -> it0 (head insertion): drop a middle one */
    delete(it[1]);
    ck_assert_ptr_null(find(keys[1]));
    ck_assert_ptr_eq(find(keys[0]), it[0]);
    ck_assert_ptr_eq(find(keys[2]), it[2]);
    ck_assert_ptr_eq(find(keys[3]), it[3]);
    delete(it[2]);
    ck_assert_ptr_null(find(keys[2]));
    ck_assert_ptr_eq(find(keys[0]), it[0]);
    ck_assert_ptr_eq(find(keys[3]), it[3]);
    /* head, then tail */
    delete(it[3]);
    ck_assert_ptr_null(find(keys[3]));
    ck_assert_ptr_eq(find(keys[0]), it[0]);
    insert(it[1]);
    delete(it[0]);
    ck_assert_ptr_null(find(keys[0]));
    ck_assert_ptr_eq(find(keys[1]), it[1]);
    delete(it[1]);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_null(find(keys[i]));
        fake_free(it[i]);
    }
}
END_TEST

START_TEST(test_keys_differing_in_length)
{
    static const char *const ks[] = { "a", "ab", "abc", "abcd", "abcde", "b", "abd" };
    enum { NK = sizeof(ks) / sizeof(ks[0]) };
    struct item *it[NK];

    for (size_t i = 0; i < NK; i++) {
        it[i] = fake(ks[i]);
        insert(it[i]);
    }
    for (size_t i = 0; i < NK; i++) {
        ck_assert_ptr_eq(find(ks[i]), it[i]);
    }
    ck_assert_ptr_null(find("abcdef"));
    ck_assert_ptr_null(find("bc"));

    /* Same bucket, same bytes up to the shorter length: a find for the
     * longer or shorter key must not match. (hv is passed explicitly.) */
    uint32_t hv = hash_key("abcd", 4);
    assoc_lock(hv);
    ck_assert_ptr_eq(assoc_find("abcd", 4, hv), it[3]);
    ck_assert_ptr_null(assoc_find("abcdX", 5, hv));
    struct item *r = assoc_find("abc", 3, hv);     /* its own bucket or none */
    ck_assert(r == NULL || r == it[2]);
    ck_assert_ptr_ne(assoc_find("abcd", 3, hv), it[3]);
    assoc_unlock(hv);

    delete(it[2]);                                  /* "abc" */
    ck_assert_ptr_null(find("abc"));
    ck_assert_ptr_eq(find("ab"), it[1]);
    ck_assert_ptr_eq(find("abcd"), it[3]);
    for (size_t i = 0; i < NK; i++) {
        if (i != 2) {
            delete(it[i]);
        }
        fake_free(it[i]);
    }
}
END_TEST

/* A key and the same key plus one byte, hashed into the same bucket. */
START_TEST(test_prefix_keys_same_bucket)
{
    char k1[32], k2[40];
    bool found = false;

    for (unsigned i = 0; i < 10000000 && !found; i++) {
        key_of(k1, sizeof(k1), "pre:", i);
        snprintf(k2, sizeof(k2), "%sZ", k1);
        found = (hash_key(k1, strlen(k1)) & MIN_BUCKET_MASK) ==
                (hash_key(k2, strlen(k2)) & MIN_BUCKET_MASK);
    }
    ck_assert(found);
    struct item *a = fake(k1), *b = fake(k2);

    insert(a);
    ck_assert_ptr_eq(find(k1), a);
    ck_assert_ptr_null(find(k2));
    insert(b);
    ck_assert_ptr_eq(find(k1), a);
    ck_assert_ptr_eq(find(k2), b);
    delete(a);
    ck_assert_ptr_null(find(k1));
    ck_assert_ptr_eq(find(k2), b);
    insert(a);
    delete(b);
    ck_assert_ptr_eq(find(k1), a);
    ck_assert_ptr_null(find(k2));
    delete(a);
    fake_free(a);
    fake_free(b);
}
END_TEST

/* Binary keys: bytes after a NUL still count. */
START_TEST(test_binary_keys)
{
    struct item *a = fake_item("x\0a", 3), *b = fake_item("x\0b", 3);

    insert(a);
    insert(b);
    ck_assert_ptr_eq(find_n("x\0a", 3), a);
    ck_assert_ptr_eq(find_n("x\0b", 3), b);
    ck_assert_ptr_null(find_n("x\0c", 3));
    ck_assert_ptr_null(find_n("x", 1));
    delete(a);
    delete(b);
    fake_free(a);
    fake_free(b);
}
END_TEST

/* --- locks --------------------------------------------------------------------------- */

struct trylock_arg {
    uint32_t hv;
    int      rc;
};

static void *
trylock_thread(void *p)
{
    struct trylock_arg *a = p;

    a->rc = assoc_trylock(a->hv);
    if (a->rc == 0) {
        assoc_unlock(a->hv);
    }
    return NULL;
}

static int
trylock_elsewhere(uint32_t hv)
{
    struct trylock_arg a = { hv, -1 };
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, trylock_thread, &a), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    return a.rc;
}

START_TEST(test_partition_locks)
{
    uint32_t hv = 0x12345678;

    ck_assert_int_eq(assoc_trylock(hv), 0);
    assoc_unlock(hv);
    assoc_lock(hv);
    /* same partition: low bits equal */
    ck_assert_int_ne(trylock_elsewhere(hv), 0);
    ck_assert_int_ne(trylock_elsewhere(hv + ASSOC_PARTITIONS), 0);
    ck_assert_int_ne(trylock_elsewhere(hv ^ 0xfffff000u), 0);
    /* neighbouring partitions are independent */
    ck_assert_int_eq(trylock_elsewhere(hv + 1), 0);
    ck_assert_int_eq(trylock_elsewhere(hv - 1), 0);
    assoc_unlock(hv);
    ck_assert_int_eq(trylock_elsewhere(hv), 0);
}
END_TEST

static Suite *
assoc_suite(void)
{
    Suite *s = suite_create("assoc");
    TCase *ts = tcase_create("small");
    TCase *tl = tcase_create("hp16");

    tcase_add_checked_fixture(ts, setup_small, teardown_table);
    tcase_set_timeout(ts, 30);
    tcase_add_test(ts, test_initial_buckets);
    tcase_add_test(ts, test_empty_find);
    tcase_add_test(ts, test_chain_delete_middle);
    tcase_add_test(ts, test_keys_differing_in_length);
    tcase_add_test(ts, test_prefix_keys_same_bucket);
    tcase_add_test(ts, test_binary_keys);
    tcase_add_test(ts, test_partition_locks);
    suite_add_tcase(s, ts);

    tcase_add_checked_fixture(tl, setup_16, teardown_table);
    tcase_set_timeout(tl, 60);
    tcase_add_test(tl, test_insert_find_delete_many);
    tcase_add_test(tl, test_growth);
    tcase_add_test(tl, test_prefetch_slot_survives_growth);
    suite_add_tcase(s, tl);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(assoc_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
