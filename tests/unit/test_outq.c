/*
 * test_outq.c -- unit tests for the output queue (include/util/outq.h):
 * coalescing copies, references released only once sent, partial writes
 * on a full socket, release of unsent references on free.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "outq.h"

static int released[16];

static void
release(void *ref)
{
    released[(int)(intptr_t)ref]++;
}

static void
pair(int fds[2], int sndbuf)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    if (sndbuf > 0) {
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
}

static size_t
drain(int fd, char *out, size_t cap)
{
    size_t got = 0;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        ssize_t n = read(fd, out + got, cap - got);
        if (n <= 0) {
            return got;
        }
        got += (size_t)n;
    }
}

START_TEST(test_copies_coalesce_and_refs_wait)
{
    struct outq q;
    int fds[2];
    char got[256];
    static const char value[] = "0123456789";

    memset(released, 0, sizeof(released));
    pair(fds, 0);
    outq_init(&q, release);
    ck_assert_int_eq(outq_add(&q, "VALUE k 0 10\r\n", 14), 0);
    ck_assert_int_eq(outq_add_ref(&q, value, 10, (void *)(intptr_t)1), 0);
    ck_assert_int_eq(outq_add(&q, "\r\nEND\r\n", 7), 0);
    ck_assert_int_eq(outq_add(&q, "STORED\r\n", 8), 0);
    ck_assert_uint_eq(outq_segments(&q), 3);        /* last two coalesced */
    ck_assert_uint_eq(outq_pending(&q), 39);
    ck_assert_int_eq(released[1], 0);               /* not sent yet */
    ck_assert_int_eq(outq_write(&q, fds[0]), 39);
    ck_assert_int_eq(released[1], 1);
    ck_assert_uint_eq(outq_pending(&q), 0);
    ck_assert_uint_eq(outq_segments(&q), 0);
    ck_assert_uint_eq(drain(fds[1], got, sizeof(got)), 39);
    ck_assert_mem_eq(got, "VALUE k 0 10\r\n0123456789\r\nEND\r\nSTORED\r\n", 39);
    outq_free(&q);
    ck_assert_int_eq(released[1], 1);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_partial_writes_keep_order)
{
    struct outq q;
    int fds[2];
    enum { BIG = 600 * 1024 };
    char *big = malloc(BIG), *got = malloc(BIG + 64);

    memset(released, 0, sizeof(released));
    for (int i = 0; i < BIG; i++) {
        big[i] = (char)('a' + i % 26);
    }
    pair(fds, 4096);
    outq_init(&q, release);
    ck_assert_int_eq(outq_add(&q, "head", 4), 0);
    ck_assert_int_eq(outq_add_ref(&q, big, BIG, (void *)(intptr_t)2), 0);
    ck_assert_int_eq(outq_add(&q, "tail", 4), 0);
    size_t total = 0, got_n = 0;
    int rounds = 0;
    while (outq_pending(&q) > 0 && rounds++ < 100000) {
        ssize_t w = outq_write(&q, fds[0]);
        ck_assert(w > 0 || errno == EAGAIN);
        if (w > 0) {
            total += (size_t)w;
        }
        if (outq_pending(&q) > 0) {
            ck_assert_int_eq(released[2], total >= 4 + BIG ? 1 : 0);
        }
        got_n += drain(fds[1], got + got_n, BIG + 64 - got_n);
    }
    got_n += drain(fds[1], got + got_n, BIG + 64 - got_n);
    ck_assert_uint_eq(total, BIG + 8);
    ck_assert_uint_eq(got_n, BIG + 8);
    ck_assert_mem_eq(got, "head", 4);
    ck_assert_mem_eq(got + 4, big, BIG);
    ck_assert_mem_eq(got + 4 + BIG, "tail", 4);
    ck_assert_int_eq(released[2], 1);
    outq_free(&q);
    free(big);
    free(got);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_rollback_takes_back_unsent_tail)
{
    struct outq q;
    int fds[2];
    char got[256];
    static const char value[] = "0123456789";
    uint64_t mark;

    memset(released, 0, sizeof(released));
    pair(fds, 0);
    outq_init(&q, release);
    ck_assert_int_eq(outq_add(&q, "STORED\r\n", 8), 0);
    mark = outq_mark(&q);
    /* Coalesces with the copy before the mark, then a reference. */
    ck_assert_int_eq(outq_add(&q, "VALUE k 0 10\r\n", 14), 0);
    ck_assert_int_eq(outq_add_ref(&q, value, 10, (void *)(intptr_t)2), 0);
    ck_assert_int_eq(outq_add(&q, "\r\n", 2), 0);
    ck_assert_int_eq(outq_rollback(&q, mark), 0);
    ck_assert_int_eq(released[2], 1);
    ck_assert_uint_eq(outq_pending(&q), 8);
    ck_assert_int_eq(outq_add(&q, "ERROR\r\n", 7), 0);
    ck_assert_int_eq((int)outq_write(&q, fds[0]), 15);
    ck_assert_uint_eq(drain(fds[1], got, sizeof(got)), 15);
    ck_assert(memcmp(got, "STORED\r\nERROR\r\n", 15) == 0);

    /* Once a byte after the mark has left, nothing can be taken back. */
    mark = outq_mark(&q);
    ck_assert_int_eq(outq_add(&q, "VALUE", 5), 0);
    ck_assert_int_eq((int)outq_write(&q, fds[0]), 5);
    ck_assert_int_eq(outq_add(&q, "END\r\n", 5), 0);
    ck_assert_int_eq(outq_rollback(&q, mark), -1);
    ck_assert_uint_eq(outq_pending(&q), 5);
    ck_assert_int_eq(outq_rollback(&q, outq_mark(&q)), 0);
    outq_free(&q);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_free_releases_unsent)
{
    struct outq q;

    memset(released, 0, sizeof(released));
    outq_init(&q, release);
    for (int i = 3; i < 8; i++) {
        ck_assert_int_eq(outq_add(&q, "x", 1), 0);
        ck_assert_int_eq(outq_add_ref(&q, "yy", 2, (void *)(intptr_t)i), 0);
    }
    ck_assert_uint_eq(outq_segments(&q), 10);
    outq_free(&q);
    for (int i = 3; i < 8; i++) {
        ck_assert_int_eq(released[i], 1);
    }
}
END_TEST

/* A waiting answer holds back what follows it until it is ready; ready
 * with fewer bytes (a miss) takes the rest back, and marks after it move. */
START_TEST(test_waiting_answer_keeps_order)
{
    struct outq q;
    int fds[2];
    char got[256], slot[32] = "VALUE f 0 3\r\nabc\r\nEN\r\n";

    memset(released, 0, sizeof(released));
    pair(fds, 0);
    outq_init(&q, release);
    ck_assert_int_eq(outq_add(&q, "first\r\n", 7), 0);
    int64_t w = outq_add_wait(&q, slot, 22, (void *)(intptr_t)2);
    ck_assert_int_ge(w, 0);
    ck_assert_int_eq(outq_add(&q, "after\r\n", 7), 0);
    ck_assert_uint_eq(outq_sendable(&q), 7);
    ck_assert_int_eq(outq_write(&q, fds[0]), 7);
    ck_assert_uint_eq(outq_sendable(&q), 0);
    ck_assert_uint_eq(outq_pending(&q), 29);
    ck_assert_int_eq(outq_write(&q, fds[0]), 0);
    /* The read missed: the answer is the 4 bytes the caller put first. */
    memmove(slot, slot + 18, 4);
    outq_ready(&q, (uint32_t)w, 4);
    ck_assert_uint_eq(outq_pending(&q), 11);
    ck_assert_int_eq(outq_write(&q, fds[0]), 11);
    size_t n = drain(fds[1], got, sizeof(got));
    ck_assert_uint_eq(n, 18);
    ck_assert_int_eq(memcmp(got, "first\r\nEN\r\nafter\r\n", 18), 0);
    ck_assert_int_eq(released[2], 1);
    outq_free(&q);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_waiting_answers_and_marks)
{
    struct outq q;
    char slot1[8] = "AAAAAAAA", slot2[8] = "BBBBBBBB";
    uint64_t mark;

    memset(released, 0, sizeof(released));
    outq_init(&q, release);
    int64_t w1 = outq_add_wait(&q, slot1, 8, (void *)(intptr_t)3);
    int64_t w2 = outq_add_wait(&q, slot2, 8, (void *)(intptr_t)4);
    mark = outq_mark(&q);
    outq_track(&q, &mark);
    outq_hold(&q, mark);
    ck_assert_int_eq(outq_add(&q, "tail", 4), 0);
    /* The second is ready first: still nothing may go. */
    outq_ready(&q, (uint32_t)w2, 8);
    ck_assert_uint_eq(outq_sendable(&q), 0);
    /* The first shrinks by 6: the mark and the hold move with their bytes. */
    outq_ready(&q, (uint32_t)w1, 2);
    ck_assert_uint_eq(mark, 10);
    ck_assert_uint_eq(q.hold, 10);
    ck_assert_uint_eq(outq_sendable(&q), 10);
    /* Rolling back to the tracked mark takes back exactly "tail". */
    ck_assert_int_eq(outq_rollback(&q, mark), 0);
    ck_assert_uint_eq(outq_pending(&q), 10);
    outq_free(&q);
    ck_assert_int_eq(released[3], 1);
    ck_assert_int_eq(released[4], 1);
}
END_TEST

START_TEST(test_rollback_releases_a_waiting_answer)
{
    struct outq q;
    char slot[8] = "CCCCCCCC";

    memset(released, 0, sizeof(released));
    outq_init(&q, release);
    ck_assert_int_eq(outq_add(&q, "x", 1), 0);
    uint64_t mark = outq_mark(&q);
    ck_assert_int_ge(outq_add_wait(&q, slot, 8, (void *)(intptr_t)5), 0);
    ck_assert_int_eq(outq_rollback(&q, mark), 0);
    ck_assert_int_eq(released[5], 1);
    ck_assert_uint_eq(q.nwait, 0);
    ck_assert_uint_eq(outq_sendable(&q), 1);
    outq_free(&q);
}
END_TEST

static Suite *
outq_suite(void)
{
    Suite *s = suite_create("outq");
    TCase *tc = tcase_create("outq");

    tcase_add_test(tc, test_copies_coalesce_and_refs_wait);
    tcase_add_test(tc, test_partial_writes_keep_order);
    tcase_add_test(tc, test_free_releases_unsent);
    tcase_add_test(tc, test_rollback_takes_back_unsent_tail);
    tcase_add_test(tc, test_waiting_answer_keeps_order);
    tcase_add_test(tc, test_waiting_answers_and_marks);
    tcase_add_test(tc, test_rollback_releases_a_waiting_answer);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(outq_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
