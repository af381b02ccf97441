/*
 * test_item_chain.c -- unit tests for chained items (storage/item_chain.c,
 * -o slab_chunk_max): a value larger than the largest class's chunk is
 * split across chunks of that class and its head's, read back whole
 * through item_spans, and every chunk goes back when the item goes (by
 * release, by the body class's CLOCK hand, or with a slab moved to
 * another class); a referenced chained item keeps its slabs.
 *
 * Geometry: 64 KB slabs, chunk_max 4 KB (16 body chunks per slab).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "item.h"
#include "slab.h"

#define KB          ((size_t)1024)
#define SLAB_SZ     (64 * KB)
#define CHUNK_MAX   (4 * KB)

static void
setup_limit(size_t maxbytes)
{
    clock_setup();
    ck_assert_int_eq(slab_setup_chunked(maxbytes, SLAB_SZ, 1.25, 48,
                                        item_total_size(0, 0) - 2, CHUNK_MAX), SLAB_OK);
    ck_assert_int_eq(assoc_setup(16), 0);
    ck_assert_int_eq(item_setup(true), 0);
}

static void setup(void) { setup_limit(4 * 1024 * KB); }
static void setup_small(void) { setup_limit(6 * SLAB_SZ); }

static void
teardown(void)
{
    item_teardown();
    assoc_teardown();
    slab_teardown();
}

/* Byte i of a value of seed s: differs at every offset nearby. */
static char
pat(uint32_t s, uint32_t i)
{
    return (char)('a' + (i * 7 + s + i / 251) % 26);
}

/* Allocate key with vlen pattern bytes (and "\r\n"), filled through spans. */
static struct item *
make(const char *key, uint32_t vlen, uint32_t seed)
{
    struct item *it;
    struct item_spans si;
    char *p;
    uint32_t n, off = 0;

    if (item_alloc_try(key, strlen(key), 0, 0, vlen, &it) != ITEM_OK) {
        return NULL;
    }
    item_spans_begin(&si, it, 0, vlen);
    while (item_spans_next(&si, &p, &n)) {
        for (uint32_t i = 0; i < n; i++) {
            p[i] = pat(seed, off + i);
        }
        off += n;
    }
    ck_assert_uint_eq(off, vlen);
    item_value_write(it, vlen, "\r\n", 2);
    return it;
}

/*
 * The value's pieces, checked against the pattern; returns their count.
 * A chained value's pieces are its body chunks, full but perhaps the last,
 * then the tail in its head, which ends with "\r\n".
 */
static uint32_t
check_value(struct item *it, uint32_t seed)
{
    struct item_spans si;
    char *p;
    uint32_t n, off = 0, pieces = 0, last_n = 0, prev_n = 0, short_bodies = 0;
    const uint32_t body = (uint32_t)CHUNK_MAX - (uint32_t)item_total_size(0, 0) + 2;

    uint32_t bad = UINT32_MAX;
    item_spans_begin(&si, it, 0, item_vlen(it) + 2);
    while (item_spans_next(&si, &p, &n)) {
        for (uint32_t i = 0; i < n && bad == UINT32_MAX; i++) {
            uint32_t at = off + i;
            char want = at < item_vlen(it) ? pat(seed, at) : (at == item_vlen(it) ? '\r' : '\n');
            bad = p[i] == want ? UINT32_MAX : at;
        }
        off += n;
        pieces++;
        if (pieces > 2 && prev_n != body) {
            short_bodies++;             /* a body chunk before the last one */
        }
        prev_n = last_n;
        last_n = n;
    }
    if (pieces > 1) {
        ck_assert_uint_eq(short_bodies, 0);
        ck_assert_uint_le(prev_n, body);
        ck_assert_uint_ge(last_n, 2);
    }
    ck_assert_msg(bad == UINT32_MAX, "byte %u of %u differs", bad, item_vlen(it));
    ck_assert_uint_eq(off, item_vlen(it) + 2);
    return pieces;
}

/*
 * A class a chained value's head was taken from is not homed in a larger
 * class of its group (item_class_homed): heads are placed by exact size
 * (slab_clsid), so if its only slab went, the next such head would take
 * one back at once.
 */
START_TEST(test_head_class_is_not_homed)
{
    teardown();
    clock_setup();
    ck_assert_int_eq(slab_setup_chunked(4 * 1024 * KB, SLAB_SZ, 1.08, 48,
                                        item_total_size(0, 0) - 2, CHUNK_MAX), SLAB_OK);
    ck_assert_int_eq(assoc_setup(16), 0);
    ck_assert_int_eq(item_setup(true), 0);
    /* a head whose class is not its group's largest, and a slab in the
     * next class up (same group): the class would be homed by size */
    uint8_t hcls = 0;
    uint32_t sid;
    char key[32];
    for (uint32_t tail = 0; tail < (uint32_t)CHUNK_MAX && !slab_class_homed(hcls); tail += 40) {
        snprintf(key, sizeof(key), "chained%u", tail);
        struct item *it = make(key, (uint32_t)(3 * CHUNK_MAX) + tail, 1);
        ck_assert_ptr_nonnull(it);
        hcls = slab_cls_of(it);
        ck_assert_uint_ne(hcls, item_chain_class());
        item_release(it);
        if (hcls + 1u < slab_class_count()) {
            ck_assert_ptr_nonnull(slab_alloc((uint8_t)(hcls + 1), &sid));
        }
    }
    ck_assert(slab_class_homed(hcls));
    ck_assert(!item_class_homed(hcls));
}
END_TEST

static uint8_t
top_class(void)
{
    return slab_class_count();
}

START_TEST(test_geometry_and_round_trip)
{
    ck_assert_uint_eq(slab_class_chunk_size(top_class()), CHUNK_MAX);
    ck_assert_uint_eq(slab_class_perslab(top_class()), SLAB_SZ / CHUNK_MAX);
    /* Fits one chunk: one piece. */
    struct item *it = make("k", (uint32_t)CHUNK_MAX - 40, 1);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(check_value(it, 1), 1);
    item_release(it);
    /* Around every split of up to four body chunks, short and long keys. */
    char longkey[251];
    memset(longkey, 'L', 250);
    longkey[250] = '\0';
    const char *keys[] = { "k", longkey };
    for (int k = 0; k < 2; k++) {
        for (uint32_t v = (uint32_t)CHUNK_MAX - 300; v < 4 * CHUNK_MAX; v += 7) {
            it = make(keys[k], v, v);
            ck_assert_ptr_nonnull(it);
            ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
            item_release(it);
            struct item *got = item_get(keys[k], strlen(keys[k]), false, 0, NULL);
            ck_assert_ptr_nonnull(got);
            uint32_t pieces = check_value(got, v);
            bool chained = item_total_size(strlen(keys[k]), v) > CHUNK_MAX;
            ck_assert_msg(chained ? pieces >= 2 : pieces == 1, "%u bytes: %u pieces", v, pieces);
            item_release(got);
        }
    }
}
END_TEST

START_TEST(test_release_frees_every_chunk)
{
    uint8_t top = top_class();
    /* One slab of the body class carved and given back: the baseline. */
    struct item *it = make("a", 10 * CHUNK_MAX, 2);
    ck_assert_ptr_nonnull(it);
    uint8_t hcls = slab_cls_of(it);
    item_release(it);
    uint64_t top_free = slab_class_free(top), head_free = slab_class_free(hcls);
    for (int i = 0; i < 50; i++) {
        it = make("a", 10 * CHUNK_MAX + (uint32_t)i, 3);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_lt(slab_class_free(top), top_free);
        if (i % 2) {
            item_release(it);               /* never stored */
        } else {
            ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
            item_release(it);
            ck_assert_int_eq(item_delete("a", 1, NULL, NULL), ITEM_OK);
        }
        ck_assert_uint_eq(slab_class_free(top), top_free);
        ck_assert_uint_eq(slab_class_free(hcls), head_free);
    }
}
END_TEST

START_TEST(test_held_value_outlives_delete)
{
    struct item *it = make("h", 9000, 4);
    ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
    item_release(it);
    struct item *held = item_get("h", 1, false, 0, NULL);
    ck_assert_ptr_nonnull(held);
    ck_assert_int_eq(item_delete("h", 1, NULL, NULL), ITEM_OK);
    /* New chained items may not take the held one's chunks. */
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o%d", i);
        struct item *o = make(key, 9000, 5);
        ck_assert_ptr_nonnull(o);
        ck_assert_int_eq(item_store(o, ITEM_OP_SET, 0), ITEM_OK);
        item_release(o);
    }
    check_value(held, 4);
    item_release(held);
}
END_TEST

START_TEST(test_append_builds_chained_value)
{
    struct item *it = make("p", 100, 6);
    ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
    item_release(it);
    struct item *more = make("p", 3 * CHUNK_MAX, 7);
    ck_assert_int_eq(item_store(more, ITEM_OP_APPEND, 0), ITEM_OK);
    item_release(more);
    struct item *got = item_get("p", 1, false, 0, NULL);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(item_vlen(got), 100 + 3 * CHUNK_MAX);
    struct item_spans si;
    char *p;
    uint32_t n, off = 0;
    uint32_t bad = UINT32_MAX;
    item_spans_begin(&si, got, 0, item_vlen(got));
    while (item_spans_next(&si, &p, &n)) {
        for (uint32_t i = 0; i < n; i++, off++) {
            char want = off < 100 ? pat(6, off) : pat(7, off - 100);
            if (p[i] != want && bad == UINT32_MAX) {
                bad = off;
            }
        }
    }
    ck_assert_msg(bad == UINT32_MAX, "byte %u differs", bad);
    item_release(got);
    uint64_t result;
    ck_assert_int_eq(item_arith("p", 1, true, 1, &result, NULL), ITEM_NON_NUMERIC);
}
END_TEST

/* Store chained items until storage alone has no chunk for the next. */
static int
fill_chained(uint32_t vlen)
{
    int n = 0;
    for (;; n++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", n);
        struct item *it = make(key, vlen, (uint32_t)n);
        if (it == NULL) {
            return n;
        }
        ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
        item_release(it);
    }
}

/* fill_chained's items still stored, each checked whole. */
static int
fill_left(int n)
{
    int left = 0;

    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        struct item *got = item_get(key, strlen(key), false, 0, NULL);
        if (got != NULL) {
            check_value(got, (uint32_t)i);
            item_release(got);
            left++;
        }
    }
    return left;
}

START_TEST(test_body_class_hand_evicts_whole_items)
{
    uint32_t vlen = 3 * CHUNK_MAX;
    int n = fill_chained(vlen);
    ck_assert_int_gt(n, 4);
    struct item *it;
    ck_assert_int_eq(item_alloc_try("new", 3, 0, 0, vlen, &it), ITEM_NO_MEMORY);
    uint32_t want;
    ck_assert_uint_eq(item_alloc_lacks(3, vlen, &want), top_class());
    /* The hand over the body class drops the owners of the chunks it
     * passes, bodies and heads together. */
    ck_assert_uint_gt(item_clock_pull(top_class(), true, 2), 0);
    ck_assert_int_eq(item_alloc_try("new", 3, 0, 0, vlen, &it), ITEM_OK);
    item_release(it);
    struct item_stats st;
    item_get_stats(&st);
    ck_assert_uint_ge(st.evictions, 1);
    int left = fill_left(n);
    ck_assert_int_lt(left, n);
    ck_assert_uint_eq((uint64_t)left, st.curr_items);
}
END_TEST

/* The body class's slab holding the most used chunks. */
static uint32_t
a_body_slab(void)
{
    for (uint32_t sid = 0; sid < slab_table_count(); sid++) {
        struct slab_info info;
        if (slab_table_info(sid, &info) && info.cls == top_class()) {
            return sid;
        }
    }
    return SLAB_ID_NONE;
}

/* With slab rescue off (-o slab_rescue=0): with it, bodies would take the
 * chunks the dropped items free, and fewer new items fit; rescue is
 * test_slab_move_rescues_bodies_into_free_chunks's. */
START_TEST(test_slab_move_drops_owners_of_its_bodies)
{
    uint32_t vlen = 3 * CHUNK_MAX;
    item_set_slab_rescue(false);
    int n = fill_chained(vlen);
    uint32_t sid = a_body_slab();
    ck_assert_uint_ne(sid, SLAB_ID_NONE);
    uint8_t small = slab_clsid(100);
    struct item_stats before;
    item_get_stats(&before);
    ck_assert_int_eq(item_slab_evict(sid, small), ITEM_SLAB_OK);
    struct slab_info info;
    ck_assert(slab_table_info(sid, &info));
    ck_assert_uint_eq(info.cls, small);
    struct item_stats after;
    item_get_stats(&after);
    ck_assert_uint_gt(before.curr_items, after.curr_items);
    /* The dropped items' chunks elsewhere went back to their classes:
     * what is left reads whole, and as many new items fit again. */
    int left = fill_left(n);
    ck_assert_uint_eq((uint64_t)left, after.curr_items);
    uint64_t dropped = before.curr_items - after.curr_items;
    struct item *it;
    for (uint64_t i = 0; i + 1 < dropped; i++) {
        char key[16];
        snprintf(key, sizeof(key), "g%d", (int)i);
        it = make(key, vlen, 9);
        ck_assert_msg(it != NULL, "room for %d of %d dropped items", (int)i, (int)dropped);
        item_release(it);
    }
    item_set_slab_rescue(true);
}
END_TEST

/*
 * Chunk rescue: when a slab of the body class moves and the class has free
 * chunks elsewhere (here after deletes), the bodies in it are copied there
 * and linked in their place, as memcached's page mover rescues chunks:
 * every item still stored reads back whole, and slab_reassign_chunk_rescues
 * counts the copies. With rescue off the same move drops their items.
 */
START_TEST(test_slab_move_rescues_bodies_into_free_chunks)
{
    uint32_t vlen = 3 * CHUNK_MAX;
    uint8_t small = slab_clsid(100);

    for (int off = 0; off < 2; off++) {     /* rescue on, then off */
        bool rescue = off == 0;
        teardown();
        setup_small();
        item_set_slab_rescue(rescue);
        int n = fill_chained(vlen);
        ck_assert_int_gt(n, 8);
        for (int i = 1; i < n; i += 2) {
            char key[16];
            snprintf(key, sizeof(key), "f%d", i);
            item_unlink_key(key, strlen(key));
        }
        uint32_t sid = a_body_slab();
        ck_assert_uint_ne(sid, SLAB_ID_NONE);
        struct item_stats before, after;
        item_get_stats(&before);
        ck_assert_int_eq(item_slab_evict(sid, small), ITEM_SLAB_OK);
        item_get_stats(&after);
        ck_assert_int_eq(fill_left(n), (int)after.curr_items);
        if (rescue) {
            ck_assert_uint_eq(after.curr_items, before.curr_items);
            ck_assert_uint_gt(after.chunk_rescues, 0);
        } else {
            ck_assert_uint_lt(after.curr_items, before.curr_items);
            ck_assert_uint_eq(after.chunk_rescues, 0);
        }
        /* No chunk lost: with every item gone, the body class is all free. */
        for (int i = 0; i < n; i += 2) {
            char key[16];
            snprintf(key, sizeof(key), "f%d", i);
            item_unlink_key(key, strlen(key));
        }
        uint8_t top = top_class();
        ck_assert_uint_eq(slab_class_free(top),
                          (uint64_t)slab_class_slabs(top) * slab_class_perslab(top));
    }
    item_set_slab_rescue(true);
}
END_TEST

/*
 * A class's need where nothing is measured is a slab's worth of its own
 * chunks evicted (item_class_overflow_ms). Values whose heads fit only the
 * body class (one 4 KB body, a head of about 3 KB) free two of its chunks
 * each: half a slab's worth of evictions is a slab of chunks.
 */
START_TEST(test_overflow_counts_chunks_of_the_body_class)
{
    uint32_t vlen = 7062;
    uint8_t top = top_class();
    int n = fill_chained(vlen);

    ck_assert_int_gt(n, 8);
    struct item *it = item_get("f0", 2, false, 0, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert_uint_eq(slab_cls_of(it), top);     /* the head too */
    item_release(it);
    for (int i = 0; i < 1000 && clock_now_ms() == 0; i++) {
        usleep(1000);
    }
    uint32_t per = slab_class_perslab(top), evicted = 0;
    while (evicted < per / 2 - 1) {
        ck_assert_uint_gt(item_clock_pull(top, true, 1), 0);
        evicted++;
    }
    ck_assert_uint_eq(item_class_overflow_ms(top), 0);
    ck_assert_uint_gt(item_clock_pull(top, true, 1), 0);
    ck_assert_uint_gt(item_class_overflow_ms(top), 0);
}
END_TEST

START_TEST(test_referenced_chained_item_keeps_its_slab)
{
    struct item *it = make("r", 10 * CHUNK_MAX, 8);
    ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
    item_release(it);
    struct item *held = item_get("r", 1, false, 0, NULL);
    uint32_t sid = a_body_slab();
    ck_assert_int_eq(item_slab_evict(sid, slab_clsid(100)), ITEM_SLAB_BUSY);
    ck_assert_uint_eq(item_clock_pull(top_class(), true, 4), 0);
    check_value(held, 8);
    item_release(held);
    ck_assert_int_eq(item_slab_evict(sid, slab_clsid(100)), ITEM_SLAB_OK);
    ck_assert_ptr_null(item_get("r", 1, false, 0, NULL));
}
END_TEST

START_TEST(test_read_chained_item_gets_a_second_chance)
{
    uint32_t vlen = 3 * CHUNK_MAX;
    int n = fill_chained(vlen);
    ck_assert_int_gt(n, 3);
    /* f0's bodies are the first the hand meets; it was read. */
    struct item *got = item_get("f0", 2, false, 0, NULL);
    ck_assert_ptr_nonnull(got);
    item_release(got);
    ck_assert_uint_gt(item_clock_pull(top_class(), true, 1), 0);
    got = item_get("f0", 2, false, 0, NULL);
    ck_assert_msg(got != NULL, "a read chained item went at the hand's first pass");
    item_release(got);
    int gone = -1;
    for (int i = 0; i < n && gone < 0; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        got = item_get(key, strlen(key), false, 0, NULL);
        if (got == NULL) {
            gone = i;
        } else {
            item_release(got);
        }
    }
    ck_assert_msg(gone == 1, "the unread item after it should have gone, not f%d (of %d)", gone, n);
}
END_TEST

/*
 * Every chained item read once (memcached's chunked-items.t reads each
 * back): one sweep of the body class's hand gives each its second chance
 * and must still reach one to drop, counting items, not their chunks.
 */
START_TEST(test_hand_passes_read_chained_items)
{
    uint32_t vlen = 15 * CHUNK_MAX;
    int n = fill_chained(vlen);
    ck_assert_int_gt(n, 40);
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        struct item *got = item_get(key, strlen(key), false, 0, NULL);
        ck_assert_ptr_nonnull(got);
        item_release(got);
    }
    ck_assert_uint_gt(item_clock_pull(top_class(), true, 1), 0);
}
END_TEST

START_TEST(test_busy_body_slab_drops_nothing)
{
    /* Four chained items share the first slab of the body class. */
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof(key), "b%d", i);
        struct item *it = make(key, 3 * CHUNK_MAX, (uint32_t)i);
        ck_assert_int_eq(item_store(it, ITEM_OP_SET, 0), ITEM_OK);
        item_release(it);
    }
    struct item *held = item_get("b3", 2, false, 0, NULL);
    ck_assert_ptr_nonnull(held);
    ck_assert_int_eq(item_slab_evict(a_body_slab(), slab_clsid(100)), ITEM_SLAB_BUSY);
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof(key), "b%d", i);
        struct item *got = item_get(key, strlen(key), false, 0, NULL);
        ck_assert_msg(got != NULL, "%s dropped by a move that did not happen", key);
        check_value(got, (uint32_t)i);
        item_release(got);
    }
    item_release(held);
}
END_TEST

static Suite *
chain_suite(void)
{
    Suite *s = suite_create("item_chain");
    TCase *tc = tcase_create("chain");
    TCase *tf = tcase_create("full");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_geometry_and_round_trip);
    tcase_add_test(tc, test_release_frees_every_chunk);
    tcase_add_test(tc, test_held_value_outlives_delete);
    tcase_add_test(tc, test_append_builds_chained_value);
    tcase_add_test(tc, test_referenced_chained_item_keeps_its_slab);
    tcase_add_test(tc, test_busy_body_slab_drops_nothing);
    tcase_add_test(tc, test_hand_passes_read_chained_items);
    tcase_add_test(tc, test_head_class_is_not_homed);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(tf, setup_small, teardown);
    tcase_add_test(tf, test_body_class_hand_evicts_whole_items);
    tcase_add_test(tf, test_slab_move_drops_owners_of_its_bodies);
    tcase_add_test(tf, test_slab_move_rescues_bodies_into_free_chunks);
    tcase_add_test(tf, test_overflow_counts_chunks_of_the_body_class);
    tcase_add_test(tf, test_read_chained_item_gets_a_second_chance);
    suite_add_tcase(s, tf);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(chain_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
