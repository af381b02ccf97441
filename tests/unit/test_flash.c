/*
 * test_flash.c -- unit tests for the flash tier's log (include/storage/
 * flash.h): FILE:SIZE parsing, records read back from a write buffer and
 * from the file, FIFO reclaim by sequence number, checksums catching
 * bytes changed underneath, a short file counted as a short read, writes
 * the device refuses losing their records only, bad
 * paths refused, the I/O threads' completion callback, and a worker's
 * read ring (io_uring): reads queued past its depth, finished in order of
 * the kernel, each checked, and every done() called by close.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flash.h"

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define SLAB  8192u
#define NSLAB 4u

static char dir[PATH_MAX];
static char path[PATH_MAX + 16];

static void
setup(void)
{
    char err[256];
    /* In the working directory: the build directory under make check. */
    snprintf(dir, sizeof(dir), "sc_flash_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/flash", dir);
    struct flash_options o = {
        .path = path, .size = (uint64_t)SLAB * NSLAB, .slab_size = SLAB, .wbufs = 4,
        .io_threads = 1, .min_value = 0, .rewrite_share = 0.25,
    };
    ck_assert_int_eq(flash_setup(&o, err, sizeof(err)), FLASH_OK);
}

static void
teardown(void)
{
    flash_teardown();
    unlink(path);
    rmdir(dir);
}

static void
value_of(int i, char *out, uint32_t n)
{
    for (uint32_t j = 0; j + 2 < n; j++) {
        out[j] = (char)('a' + (i + (int)j) % 26);
    }
    memcpy(out + n - 2, "\r\n", 2);
}

/* Append record i (key "k<i>", nbytes bytes); returns its location. */
static struct flash_loc
put(int i, uint32_t nbytes)
{
    char key[32], val[4096];
    struct flash_loc loc;
    int nkey = snprintf(key, sizeof(key), "k%d", i);

    value_of(i, val, nbytes);
    if (!flash_append(key, (uint8_t)nkey, val, nbytes, 7, 1000u + (unsigned)i, &loc)) {
        flash_sync();               /* both buffers were waiting for the writer */
        ck_assert(flash_append(key, (uint8_t)nkey, val, nbytes, 7, 1000u + (unsigned)i, &loc));
    }
    return loc;
}

static flash_read_status_t
get(int i, struct flash_loc loc, uint32_t nbytes, uint64_t cas, char *dst)
{
    struct flash_read r = { .loc = loc, .nbytes = nbytes, .cas = cas, .dst = dst };

    r.nkey = (uint8_t)snprintf(r.key, sizeof(r.key), "k%d", i);
    return flash_read_sync(&r);
}

START_TEST(test_parse_path)
{
    char p[64], err[128];
    uint64_t size;

    ck_assert_int_eq(flash_parse_path("/x/f:64m", p, sizeof(p), &size, err, sizeof(err)), FLASH_OK);
    ck_assert_str_eq(p, "/x/f");
    ck_assert_uint_eq(size, 64ull << 20);
    ck_assert_int_eq(flash_parse_path("a:b:2k", p, sizeof(p), &size, err, sizeof(err)), FLASH_OK);
    ck_assert_str_eq(p, "a:b");
    ck_assert_uint_eq(size, 2048);
    ck_assert_int_eq(flash_parse_path("f:16G", p, sizeof(p), &size, err, sizeof(err)), FLASH_OK);
    ck_assert_uint_eq(size, 16ull << 30);
    static const char *const bad[] = { "f", "f:", ":64m", "f:abc", "f:0", "f:-1", "f:64x",
                                       "f:99999999999t" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(flash_parse_path(bad[i], p, sizeof(p), &size, err, sizeof(err)),
                         FLASH_EINVAL);
        ck_assert(strstr(err, "ext_path") != NULL);
    }
}
END_TEST

START_TEST(test_bad_setup_refused)
{
    char err[256];
    struct flash_options o = { .path = "/nonexistent-dir/flash", .size = 1 << 20,
                               .slab_size = SLAB, .wbufs = 2, .io_threads = 1 };

    ck_assert_int_eq(flash_setup(&o, err, sizeof(err)), FLASH_EIO);
    ck_assert(strstr(err, "/nonexistent-dir/flash") != NULL);
    ck_assert(!flash_enabled());
    o.path = "sc_flash_small";
    o.size = SLAB;                  /* one slab: not a ring */
    ck_assert_int_eq(flash_setup(&o, err, sizeof(err)), FLASH_EINVAL);
    ck_assert(!flash_enabled());
    unlink(o.path);
}
END_TEST

START_TEST(test_buffered_record_reads_back)
{
    char dst[4096];
    struct flash_loc loc = put(1, 100);

    ck_assert(flash_loc_valid(&loc));
    ck_assert_int_eq(get(1, loc, 100, 1001, dst), FLASH_READ_OK);
    char want[100];
    value_of(1, want, 100);
    ck_assert_int_eq(memcmp(dst, want, 100), 0);
    /* Another length or key is not this record. */
    ck_assert_int_eq(get(1, loc, 99, 1001, dst), FLASH_READ_BADCRC);
    ck_assert_int_eq(get(2, loc, 100, 1001, dst), FLASH_READ_BADCRC);
    /* The CAS is the stub's (md I gives it a new one): not asked. */
    memset(dst, 0, sizeof(dst));
    ck_assert_int_eq(get(1, loc, 100, 999, dst), FLASH_READ_OK);
    ck_assert_int_eq(memcmp(dst, want, 100), 0);
}
END_TEST

START_TEST(test_written_record_reads_back_and_old_slabs_are_reclaimed)
{
    char dst[4096], want[1000];
    struct flash_loc first = put(0, 1000), loc = first;
    int i = 1;

    /* Fill past the ring: the first slab's sequence number is reused. */
    while (loc.seq < first.seq + NSLAB) {
        loc = put(i++, 1000);
    }
    flash_sync();
    ck_assert(!flash_loc_valid(&first));
    ck_assert_int_eq(get(0, first, 1000, 1000, dst), FLASH_READ_GONE);
    /* A record of the slab before the newest one is on the file now. */
    struct flash_loc older = put(i, 1000);
    int j = i++;
    while (loc.seq <= older.seq) {
        loc = put(i++, 1000);
    }
    flash_sync();
    ck_assert(flash_loc_valid(&older));
    ck_assert_int_eq(get(j, older, 1000, 1000u + (unsigned)j, dst), FLASH_READ_OK);
    value_of(j, want, 1000);
    ck_assert_int_eq(memcmp(dst, want, 1000), 0);
    struct flash_stats st;
    flash_get_stats(&st);
    ck_assert_uint_gt(st.extstore_page_evictions, 0);
    ck_assert_uint_gt(st.extstore_objects_evicted, 0);
    ck_assert_uint_eq(st.extstore_objects_written, (uint64_t)i);
    ck_assert_uint_eq(st.extstore_write_errors, 0);
}
END_TEST

/* Fill one slab and seal it so loc's record is on the file. */
static struct flash_loc
put_on_file(int i)
{
    struct flash_loc loc = put(i, 1000), l = loc;
    int k = 1000;

    while (l.seq == loc.seq) {
        l = put(k++, 1000);
    }
    flash_sync();
    return loc;
}

/* A dump's read: the record's header and key only, the key copied out. */
START_TEST(test_key_only_read)
{
    struct flash_loc loc = put(3, 1000);
    struct flash_read r = { .loc = loc, .nkey = 2, .nbytes = 1000, .key_only = true };

    ck_assert_int_eq(flash_read_sync(&r), FLASH_READ_OK);     /* from the buffer */
    ck_assert_int_eq(memcmp(r.key, "k3", 2), 0);
    loc = put_on_file(4);
    struct flash_read f = { .loc = loc, .nkey = 2, .nbytes = 1000, .key_only = true };
    ck_assert_int_eq(flash_read_sync(&f), FLASH_READ_OK);     /* from the file */
    ck_assert_int_eq(memcmp(f.key, "k4", 2), 0);
    f.nbytes = 999;                                           /* not this record */
    ck_assert_int_eq(flash_read_sync(&f), FLASH_READ_BADCRC);
    f.nbytes = 1000;
    f.nkey = 3;
    ck_assert_int_eq(flash_read_sync(&f), FLASH_READ_BADCRC);
}
END_TEST

START_TEST(test_changed_bytes_fail_the_checksum)
{
    char dst[4096];
    struct flash_loc loc = put_on_file(5);
    int fd = open(path, O_WRONLY);
    off_t at = (off_t)(loc.seq % NSLAB) * SLAB + loc.off + 40;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "XY", 2, at), 2);
    close(fd);
    ck_assert_int_eq(get(5, loc, 1000, 1005, dst), FLASH_READ_BADCRC);
}
END_TEST

START_TEST(test_short_file_is_a_read_error)
{
    char dst[4096];
    struct flash_loc loc = put_on_file(6);

    ck_assert_int_eq(truncate(path, 0), 0);
    ck_assert_int_eq(get(6, loc, 1000, 1006, dst), FLASH_READ_EIO);
    struct flash_stats st;
    flash_get_stats(&st);
    ck_assert_uint_eq(st.extstore_short_reads, 1);
    ck_assert_uint_eq(st.extstore_read_errors, 0);
}
END_TEST

/* Offers every record, keeps none: reclaim reads each slab back first. */
static uint32_t
keep_none(const struct flash_rec_view *r, uint32_t budget)
{
    (void)r;
    (void)budget;
    return 0;
}

#define PER_SLAB 7u     /* records of 1,000 bytes (1,032 on flash) in a slab */

/* Records id .. id+PER_SLAB-1 fill one slab, written before this returns. */
static void
fill_slab(int id, struct flash_loc *locs)
{
    for (uint32_t j = 0; j < PER_SLAB; j++) {
        locs[j] = put(id + (int)j, 1000);
        ck_assert_uint_eq(locs[j].seq, locs[0].seq);
    }
    flash_sync();
}

/*
 * The device refuses writes to the ring's last two slots for a lap, then
 * takes them again (writes past RLIMIT_FSIZE fail with EFBIG, SIGXFSZ
 * ignored; a short write where one straddles it). The refused slabs'
 * records are gone, not written, not live; the others read back; the next
 * laps write, read back and reclaim every slot as if nothing happened
 * (a refused slot's byte count once carried into its next lap, and its
 * reclaim read that many bytes into a slab-sized buffer).
 */
START_TEST(test_failed_writes_lose_their_records_only)
{
    struct flash_loc locs[4 * NSLAB][PER_SLAB];
    struct rlimit was, lim;
    struct flash_stats st;
    char dst[1000];

    flash_set_rewrite(keep_none);
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
    signal(SIGXFSZ, SIG_IGN);
    lim = was;
    lim.rlim_cur = 2 * SLAB;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (uint32_t s = 0; s < NSLAB; s++) {
        fill_slab((int)(s * PER_SLAB), locs[s]);
    }
    flash_get_stats(&st);
    ck_assert_uint_eq(st.extstore_write_errors + st.extstore_short_writes, 2);
    ck_assert_uint_eq(st.extstore_objects_written, 2 * PER_SLAB);
    ck_assert_uint_eq(st.extstore_objects_dropped, 2 * PER_SLAB);
    ck_assert_uint_eq(flash_records_live(), 2 * PER_SLAB);
    for (uint32_t s = 0; s < NSLAB; s++) {
        for (uint32_t j = 0; j < PER_SLAB; j++) {
            int id = (int)(s * PER_SLAB + j);
            ck_assert_int_eq(get(id, locs[s][j], 1000, 1000u + (unsigned)id, dst),
                             locs[s][j].seq % NSLAB < 2 ? FLASH_READ_OK : FLASH_READ_GONE);
        }
    }
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &was), 0);
    for (uint32_t s = NSLAB; s < 4 * NSLAB; s++) {
        fill_slab((int)(s * PER_SLAB), locs[s]);
    }
    flash_get_stats(&st);
    ck_assert_uint_eq(st.extstore_write_errors + st.extstore_short_writes, 2);
    ck_assert_uint_eq(st.extstore_objects_written, (4 * NSLAB - 2) * PER_SLAB);
    ck_assert_uint_eq(flash_records_live(), NSLAB * PER_SLAB);
    for (uint32_t s = 3 * NSLAB; s < 4 * NSLAB; s++) {
        for (uint32_t j = 0; j < PER_SLAB; j++) {
            int id = (int)(s * PER_SLAB + j);
            ck_assert_int_eq(get(id, locs[s][j], 1000, 1000u + (unsigned)id, dst),
                             FLASH_READ_OK);
        }
    }
}
END_TEST

START_TEST(test_record_larger_than_a_slab_is_refused)
{
    static char big[SLAB];
    struct flash_loc loc;

    memset(big, 'x', sizeof(big));
    ck_assert(!flash_append("big", 3, big, SLAB, 0, 1, &loc));
}
END_TEST

static struct flash_loc kept_loc;
static _Atomic int kept_moves;

/* A rewrite function that keeps the record of key "keep" alive. */
static uint32_t
keep_one(const struct flash_rec_view *r, uint32_t budget)
{
    struct flash_loc to;

    if (r->nkey != 4 || memcmp(r->key, "keep", 4) != 0 ||
        r->loc.seq != kept_loc.seq || r->loc.off != kept_loc.off) {
        return 0;
    }
    ck_assert_uint_ge(budget, flash_rec_len(r->nkey, r->nbytes));
    if (!flash_append(r->key, r->nkey, r->value, r->nbytes, r->flags, r->cas, &to)) {
        return 0;
    }
    kept_loc = to;
    atomic_fetch_add(&kept_moves, 1);
    return flash_rec_len(r->nkey, r->nbytes);
}

START_TEST(test_reclaim_offers_records_for_rewriting)
{
    char val[1000], dst[1000];
    struct flash_loc first;

    value_of(42, val, sizeof(val));
    ck_assert(flash_append("keep", 4, val, sizeof(val), 3, 4242, &first));
    kept_loc = first;
    flash_set_rewrite(keep_one);
    /* Fill the ring over and over: each time the slab holding "keep" is
     * about to be reclaimed, the record is written again first. (Bounded:
     * 8 times around the ring.) The writer catches up at every new slab:
     * a rewrite is best effort, and one that finds every buffer queued
     * behind a slow writer is dropped, which is not what this checks. */
    struct flash_loc loc = put(0, 1000);
    for (int i = 1; atomic_load(&kept_moves) < 2 && loc.seq < first.seq + 8 * NSLAB; i++) {
        uint32_t before = loc.seq;
        loc = put(i, 1000);
        if (loc.seq != before) {
            flash_sync();
        }
    }
    flash_sync();
    ck_assert(!flash_loc_valid(&first));
    ck_assert_int_ge(atomic_load(&kept_moves), 2);
    struct flash_read r = { .loc = kept_loc, .nkey = 4, .nbytes = sizeof(val), .cas = 4242,
                            .dst = dst };
    memcpy(r.key, "keep", 4);
    ck_assert_int_eq(flash_read_sync(&r), FLASH_READ_OK);
    ck_assert_int_eq(memcmp(dst, val, sizeof(val)), 0);
    struct flash_stats st;
    flash_get_stats(&st);
    ck_assert_uint_ge(st.extstore_compact_rescues, 2);
    flash_set_rewrite(NULL);
}
END_TEST

static _Atomic int done_calls;

static void
on_done(struct flash_read *r)
{
    (void)r;
    atomic_fetch_add(&done_calls, 1);
}

START_TEST(test_io_threads_call_done)
{
    char dst[3][4096];
    struct flash_read r[3];
    struct flash_loc loc[3];

    for (int i = 0; i < 3; i++) {
        loc[i] = put(10 + i, 1000);
    }
    (void)put_on_file(99);          /* seals their slab: read from the file */
    for (int i = 0; i < 3; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].loc = loc[i];
        r[i].nkey = (uint8_t)snprintf(r[i].key, sizeof(r[i].key), "k%d", 10 + i);
        r[i].nbytes = 1000;
        r[i].cas = 1010u + (unsigned)i;
        r[i].dst = dst[i];
        r[i].done = on_done;
    }
    atomic_store(&done_calls, 0);
    for (int i = 0; i < 3; i++) {
        flash_read_submit(&r[i]);
    }
    for (int spins = 0; atomic_load(&done_calls) < 3 && spins < 5000000; spins++) {
        sched_yield();
    }
    ck_assert_int_eq(atomic_load(&done_calls), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].status, FLASH_READ_OK);
    }
}
END_TEST

/* A read of record i (put at loc, 1000 bytes, CAS 1000 + i) into dst. */
static void
read_init(struct flash_read *r, int i, struct flash_loc loc, char *dst)
{
    memset(r, 0, sizeof(*r));
    r->loc = loc;
    r->nkey = (uint8_t)snprintf(r->key, sizeof(r->key), "k%d", i);
    r->nbytes = 1000;
    r->cas = 1000u + (unsigned)i;
    r->dst = dst;
    r->done = on_done;
}

/* Flush and reap until n done() calls in all, as a worker's turns do. */
static void
ring_turns(struct flash_ring *q, int n)
{
    for (int turns = 0; atomic_load(&done_calls) < n && turns < 1000; turns++) {
        ck_assert(flash_ring_flush(q));
        flash_ring_reap(q);
        if (atomic_load(&done_calls) < n && !flash_ring_busy(q)) {
            struct pollfd p = { .fd = flash_ring_fd(q), .events = POLLIN };
            (void)poll(&p, 1, 100);
        }
    }
}

START_TEST(test_ring_reads)
{
    char err[256], dst[6][4096], want[1000];
    struct flash_read r[6];
    struct flash_loc loc[6];
    struct flash_ring *q = flash_ring_open(2, err, sizeof(err));

#ifndef HAVE_LIBURING
    ck_assert_ptr_null(q);
    return;
#else
    if (q == NULL) {
        /* Only where this process cannot set up a ring (or a sandbox
         * refuses what goes through it: flash_ring_open says so). */
        struct io_uring probe;
        ck_assert_msg(io_uring_queue_init(2, &probe, 0) != 0 || strstr(err, "no-op") != NULL,
                      "io_uring works here, but flash_ring_open failed: %s", err);
        fprintf(stderr, "test_ring_reads: no io_uring here (%s): not tested\n", err);
        return;
    }
#endif
    for (int i = 0; i < 4; i++) {
        loc[i] = put(20 + i, 1000);
    }
    (void)put_on_file(98);          /* seals their slab: read from the file */
    loc[4] = put(24, 1000);         /* still in a write buffer */
    loc[5] = loc[0];                /* asks for record 0 under another key */
    for (int i = 0; i < 6; i++) {
        read_init(&r[i], 20 + i, loc[i], dst[i]);
    }
    atomic_store(&done_calls, 0);
    flash_ring_submit(q, &r[4]);
    ck_assert_int_eq(atomic_load(&done_calls), 1);  /* the buffered one, at once */
    for (int i = 0; i < 6; i++) {
        if (i != 4) {
            flash_ring_submit(q, &r[i]);    /* 2 deep: the rest wait their turn */
        }
    }
    ck_assert_int_eq(atomic_load(&done_calls), 1);
    ring_turns(q, 6);
    ck_assert_int_eq(atomic_load(&done_calls), 6);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(r[i].status, FLASH_READ_OK);
        value_of(20 + i, want, 1000);
        ck_assert_int_eq(memcmp(dst[i], want, 1000), 0);
    }
    ck_assert_int_eq(r[5].status, FLASH_READ_BADCRC);
    struct flash_stats st;
    flash_get_stats(&st);
    ck_assert_uint_eq(st.extstore_ring_reads, 5);  /* the buffered one is not */
    ck_assert_uint_eq(st.extstore_io_queue, 0);
    flash_ring_close(q);
    flash_ring_free(q);
}
END_TEST

START_TEST(test_ring_close_finishes_every_read)
{
    char err[256], dst[5][4096];
    struct flash_read r[5];
    struct flash_ring *q = flash_ring_open(2, err, sizeof(err));

    if (q == NULL) {
        return;                     /* test_ring_reads says why */
    }
    struct flash_loc loc = put(30, 1000);
    (void)put_on_file(97);
    for (int i = 0; i < 5; i++) {
        read_init(&r[i], 30, loc, dst[i]);
    }
    atomic_store(&done_calls, 0);
    for (int i = 0; i < 4; i++) {
        flash_ring_submit(q, &r[i]);    /* 2 prepared, 2 waiting; none flushed */
    }
    flash_ring_close(q);
    ck_assert_int_eq(atomic_load(&done_calls), 4);
    ck_assert_int_eq(r[0].status, FLASH_READ_OK);
    ck_assert_int_eq(r[1].status, FLASH_READ_OK);
    ck_assert_int_eq(r[2].status, FLASH_READ_GONE);
    ck_assert_int_eq(r[3].status, FLASH_READ_GONE);
    flash_ring_submit(q, &r[4]);        /* closed: a miss at once */
    ck_assert_int_eq(atomic_load(&done_calls), 5);
    ck_assert_int_eq(r[4].status, FLASH_READ_GONE);
    flash_ring_free(q);
}
END_TEST

static Suite *
flash_suite(void)
{
    Suite *s = suite_create("flash");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_parse_path);
    tcase_add_test(tc, test_bad_setup_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("log");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_buffered_record_reads_back);
    tcase_add_test(tc, test_written_record_reads_back_and_old_slabs_are_reclaimed);
    tcase_add_test(tc, test_key_only_read);
    tcase_add_test(tc, test_changed_bytes_fail_the_checksum);
    tcase_add_test(tc, test_short_file_is_a_read_error);
    tcase_add_test(tc, test_failed_writes_lose_their_records_only);
    tcase_add_test(tc, test_record_larger_than_a_slab_is_refused);
    tcase_add_test(tc, test_io_threads_call_done);
    tcase_add_test(tc, test_ring_reads);
    tcase_add_test(tc, test_ring_close_finishes_every_read);
    tcase_add_test(tc, test_reclaim_offers_records_for_rewriting);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(flash_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
