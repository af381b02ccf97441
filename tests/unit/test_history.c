/*
 * test_history.c -- unit tests for the admin port's history ring
 * (include/stats/history.h): what a sample keeps, the ring's bound, the
 * order it renders in. `stats` is played by a test double of stats_emit
 * whose figures the test sets, so the ring is tested alone.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "slab.h"

static uint64_t figure;         /* what the double reports as cmd_get */
static int64_t  booked;         /* what the ring booked within -m */
static unsigned emits;          /* stats_emit calls */

void
slab_book(int64_t delta)
{
    booked += delta;
}

void
stats_emit(stats_section_t section, stats_emit_fn emit, void *ctx)
{
    char buf[32];

    emits++;
    if (section == STATS_GENERAL) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)figure);
        emit(ctx, "cmd_get", buf);
        emit(ctx, "not_in_the_history", "7");
    }
}

struct text {
    char  *s;
    size_t n;
};

static void
append(void *ctx, const char *s, size_t n)
{
    struct text *t = ctx;

    t->s = realloc(t->s, t->n + n + 1);
    ck_assert_ptr_nonnull(t->s);
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = '\0';
}

static unsigned
count(const char *s, const char *what)
{
    unsigned n = 0;

    for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what)) {
        n++;
    }
    return n;
}

START_TEST(test_ring_keeps_the_newest_samples_oldest_first)
{
    struct text t = { NULL, 0 };

    ck_assert_int_eq(history_setup(), 0);
    for (figure = 1; figure <= HISTORY_SAMPLES + 50; figure++) {
        history_sample(1000 + (int64_t)figure);
    }
    history_render_json(append, &t);
    /* one '[' per sample, and one each for "fields" and "samples" */
    ck_assert_uint_eq(count(t.s, "["), HISTORY_SAMPLES + 2);
    ck_assert_ptr_nonnull(strstr(t.s, "\"fields\":[\"time\",\"cmd_get\","));
    ck_assert_ptr_null(strstr(t.s, "not_in_the_history"));
    /* samples 51..650 kept: the first, cmd_get 51, right after its time */
    char *first = strstr(t.s, "\"samples\":[[");
    ck_assert_ptr_nonnull(first);
    char *comma = strchr(first + 12, ',');
    ck_assert_int_eq(strtol(comma + 1, NULL, 10), 51);
    char *last = strrchr(t.s, '[');
    comma = strchr(last, ',');
    ck_assert_int_eq(strtol(comma + 1, NULL, 10), HISTORY_SAMPLES + 50);
    free(t.s);
    history_teardown();
}
END_TEST

START_TEST(test_empty_before_the_first_sample)
{
    struct text t = { NULL, 0 };

    ck_assert_int_eq(history_setup(), 0);
    history_render_json(append, &t);
    ck_assert_ptr_nonnull(strstr(t.s, "\"samples\":[]}"));
    free(t.s);
    history_teardown();
}
END_TEST

/* A late tick and its catch-up fall in the same second: the later figures
 * replace that second's sample, so times never repeat; the next second
 * gets a sample of its own. */
START_TEST(test_one_sample_per_second)
{
    struct text t = { NULL, 0 };

    ck_assert_int_eq(history_setup(), 0);
    figure = 5;
    history_sample(2000);
    figure = 6;
    history_sample(2001);
    figure = 7;
    history_sample(2001);
    figure = 8;
    history_sample(2002);
    history_render_json(append, &t);
    ck_assert_ptr_nonnull(strstr(t.s, "\"samples\":[[2000,5,"));
    ck_assert_ptr_nonnull(strstr(t.s, "],[2001,7,"));
    ck_assert_ptr_null(strstr(t.s, "[2001,6,"));
    ck_assert_ptr_nonnull(strstr(t.s, "],[2002,8,"));
    ck_assert_uint_eq(count(t.s, "["), 3 + 2);
    free(t.s);
    history_teardown();
}
END_TEST

/* The ring counts within -m while it exists; without one (no admin port)
 * a tick reads no figures at all. */
START_TEST(test_ring_is_booked_and_no_ring_reads_nothing)
{
    emits = 0;
    history_sample(1000);
    ck_assert_uint_eq(emits, 0);
    ck_assert_int_eq(history_setup(), 0);
    ck_assert_int_ge(booked, (int64_t)HISTORY_SAMPLES * 8);
    ck_assert_int_eq(history_setup(), 0);           /* again: booked once */
    int64_t once = booked;
    history_sample(1000);
    ck_assert_uint_gt(emits, 0);
    history_teardown();
    ck_assert_int_eq(booked, 0);
    ck_assert_int_gt(once, 0);
}
END_TEST

static Suite *
history_suite(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("ring");

    tcase_add_test(tc, test_ring_keeps_the_newest_samples_oldest_first);
    tcase_add_test(tc, test_empty_before_the_first_sample);
    tcase_add_test(tc, test_one_sample_per_second);
    tcase_add_test(tc, test_ring_is_booked_and_no_ring_reads_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(history_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
