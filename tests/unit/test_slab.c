/*
 * test_slab.c -- unit tests for the slab allocator (include/storage/slab.h).
 *
 * Geometry, carving, the memory limit, free lists and the append-only
 * slab table. Every test runs in its own process (check's fork mode) with
 * its own slab_setup().
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "clock.h"
#include "item.h"
#include "slab.h"

#define KB          ((size_t)1024)
#define MB          (1024 * KB)
#define SLAB_SZ     (64 * KB)
#define MAXBYTES    (4 * MB)
#define FACTOR      1.25
#define CHUNK_MIN   ((size_t)48)

static size_t
hdr(void)
{
    return item_total_size(0, 0) - 2;
}

static size_t
align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static void
setup_with(size_t maxbytes, size_t slab_sz)
{
    clock_setup();
    ck_assert_int_eq(slab_setup(maxbytes, slab_sz, FACTOR, CHUNK_MIN, hdr()), SLAB_OK);
}

static void
setup_default(void)
{
    setup_with(MAXBYTES, SLAB_SZ);
}

static void
teardown_default(void)
{
    slab_teardown();
}

static struct slab_class_stats
cstats(uint8_t cls)
{
    struct slab_class_stats st;

    slab_class_stats(cls, &st);
    return st;
}

/* --- geometry -------------------------------------------------------------- */

START_TEST(test_geometry_sizes)
{
    uint8_t n = slab_class_count();
    size_t expect = align8(hdr() + CHUNK_MIN);
    uint8_t expect_n = 0;

    /* Recompute the class table independently: sizes grow by factor,
     * rounded up to 8, while they fit under slab_size / factor. */
    while (expect_n + 1 < SLAB_CLASS_MAX && expect <= SLAB_SZ / FACTOR) {
        expect_n++;
        struct slab_class_stats st = cstats(expect_n);
        ck_assert_uint_eq(st.chunk_size, expect);
        ck_assert_uint_eq(st.chunks_per_page, SLAB_SZ / expect);
        expect = align8((size_t)(expect * FACTOR));
    }
    expect_n++;
    ck_assert_uint_eq(n, expect_n);
    ck_assert_uint_ge(n, 10);
    ck_assert_uint_le(n, SLAB_CLASS_MAX);

    /* First class holds the header plus chunk_min, rounded to 8. */
    ck_assert_uint_eq(cstats(1).chunk_size, align8(hdr() + CHUNK_MIN));

    for (uint8_t c = 1; c <= n; c++) {
        struct slab_class_stats st = cstats(c);
        ck_assert_uint_eq(st.chunk_size % 8, 0);
        ck_assert_uint_eq(st.total_pages, 0);
        ck_assert_uint_eq(st.total_chunks, 0);
        ck_assert_uint_eq(st.used_chunks, 0);
        ck_assert_uint_eq(st.free_chunks, 0);
        if (c > 1) {
            struct slab_class_stats pv = cstats((uint8_t)(c - 1));
            ck_assert_uint_gt(st.chunk_size, pv.chunk_size);
            if (c < n) {
                /* ~factor growth: within factor (+ alignment) of the previous */
                ck_assert_uint_le(st.chunk_size, (size_t)(pv.chunk_size * FACTOR) + 8);
                ck_assert_uint_ge(st.chunk_size, (size_t)(pv.chunk_size * FACTOR));
            }
        }
    }
    /* The last class is a whole slab, one chunk per slab. */
    ck_assert_uint_eq(cstats(n).chunk_size, SLAB_SZ);
    ck_assert_uint_eq(cstats(n).chunks_per_page, 1);
    ck_assert_uint_eq(slab_size(), SLAB_SZ);
}
END_TEST

START_TEST(test_geometry_out_of_range_class_stats)
{
    struct slab_class_stats st;

    memset(&st, 0xa5, sizeof(st));
    slab_class_stats(0, &st);
    ck_assert_uint_eq(st.chunk_size, 0);
    ck_assert_uint_eq(st.chunks_per_page, 0);
    ck_assert_uint_eq(st.total_chunks, 0);
    memset(&st, 0xa5, sizeof(st));
    slab_class_stats((uint8_t)(slab_class_count() + 1), &st);
    ck_assert_uint_eq(st.chunk_size, 0);
    ck_assert_uint_eq(st.total_pages, 0);
}
END_TEST

START_TEST(test_clsid_mapping)
{
    uint8_t n = slab_class_count();
    uint32_t first = cstats(1).chunk_size;

    ck_assert_uint_eq(slab_clsid(0), 0);
    ck_assert_uint_eq(slab_clsid(SLAB_SZ + 1), 0);
    ck_assert_uint_eq(slab_clsid(SIZE_MAX), 0);
    ck_assert_uint_eq(slab_clsid(1), 1);
    ck_assert_uint_eq(slab_clsid(first), 1);
    ck_assert_uint_eq(slab_clsid(first + 1), 2);
    ck_assert_uint_eq(slab_clsid(SLAB_SZ), n);
    ck_assert_uint_eq(slab_clsid(SLAB_SZ - 1), n);

    /* Each class boundary maps exactly; one byte more goes up one class. */
    for (uint8_t c = 1; c < n; c++) {
        uint32_t sz = cstats(c).chunk_size;
        ck_assert_uint_eq(slab_clsid(sz), c);
        ck_assert_uint_eq(slab_clsid(sz + 1), c + 1);
    }

    /* Monotone, and the chosen class is the smallest that fits. One
     * assertion at the end: check logs every passing assertion. */
    uint32_t sizes[SLAB_CLASS_MAX + 1] = { 0 };
    for (uint8_t c = 1; c <= n; c++) {
        sizes[c] = cstats(c).chunk_size;
    }
    uint8_t prev = 1;
    size_t bad = 0;
    for (size_t sz = 1; sz <= SLAB_SZ && bad == 0; sz++) {
        uint8_t c = slab_clsid(sz);
        if (c < prev || c < 1 || c > n || sizes[c] < sz || sizes[c - 1] >= sz) {
            bad = sz;
        }
        prev = c;
    }
    ck_assert_msg(bad == 0, "slab_clsid(%zu) = %u is not the smallest fitting class",
                  bad, bad ? slab_clsid(bad) : 0);
}
END_TEST

START_TEST(test_setup_rejects_bad_geometry)
{
    slab_teardown();
    ck_assert_int_eq(slab_setup(MAXBYTES, 1023, FACTOR, CHUNK_MIN, hdr()), SLAB_EINVAL);
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, 1.0, CHUNK_MIN, hdr()), SLAB_EINVAL);
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, 0.5, CHUNK_MIN, hdr()), SLAB_EINVAL);
    ck_assert_int_eq(slab_setup(MAXBYTES, 1024, FACTOR, 1024, hdr()), SLAB_EINVAL);
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, FACTOR, CHUNK_MIN, hdr()), SLAB_OK);
}
END_TEST

/* A fine factor: more classes than memcached's 63, strictly growing even
 * where factor * size rounds back to the same 8-byte step, capped at
 * SLAB_CLASS_MAX, and the lookup still picks the smallest fitting class. */
START_TEST(test_fine_factor_many_classes)
{
    const double factors[] = { 1.08, 1.01 };

    for (size_t f = 0; f < sizeof(factors) / sizeof(factors[0]); f++) {
        slab_teardown();
        ck_assert_int_eq(slab_setup(16 * MB, MB, factors[f], CHUNK_MIN, hdr()), SLAB_OK);
        uint8_t n = slab_class_count();
        ck_assert_uint_gt(n, 63);
        ck_assert_uint_le(n, SLAB_CLASS_MAX);
        ck_assert_uint_eq(cstats(n).chunk_size, MB);
        size_t bad = 0;
        for (uint8_t c = 2; c <= n; c++) {
            uint32_t lo = cstats((uint8_t)(c - 1)).chunk_size, hi = cstats(c).chunk_size;
            if (hi <= lo || slab_clsid(lo) != c - 1 || slab_clsid(lo + 1) != c ||
                slab_clsid(hi) != c) {
                bad = c;
            }
        }
        ck_assert_msg(bad == 0, "factor %.2f: class %zu", factors[f], bad);
    }
}
END_TEST

/* --- carving ---------------------------------------------------------------- */

START_TEST(test_alloc_carves_one_slab)
{
    struct slab_info info;
    uint32_t sid = 12345;
    uint8_t cls = 3;
    struct slab_class_stats st = cstats(cls);
    uint32_t per = st.chunks_per_page;

    ck_assert_uint_eq(slab_table_count(), 0);
    ck_assert(!slab_table_info(0, &info));
    ck_assert_uint_eq(slab_malloced(), 0);

    struct item *first = slab_alloc(cls, &sid);
    ck_assert_ptr_nonnull(first);
    ck_assert_uint_eq(sid, 0);
    ck_assert_uint_eq(slab_sid_of(first), 0);
    ck_assert_uint_eq(slab_cls_of(first), cls);
    ck_assert_uint_eq(slab_table_count(), 1);
    ck_assert_uint_eq(slab_malloced(), SLAB_SZ);
    ck_assert(slab_table_info(0, &info));
    ck_assert_uint_eq(info.cls, cls);
    ck_assert_uint_le(info.created_ms, clock_now_ms());
    ck_assert_uint_eq(info.accessed_ms, info.created_ms);
    ck_assert(!slab_table_info(1, &info));

    st = cstats(cls);
    ck_assert_uint_eq(st.total_pages, 1);
    ck_assert_uint_eq(st.total_chunks, per);
    ck_assert_uint_eq(st.used_chunks, 1);
    ck_assert_uint_eq(st.free_chunks, per - 1);

    /* The rest of the slab's chunks come from the same slab, all distinct,
     * inside one slab_size region, chunk_size apart. */
    struct item **got = calloc(per, sizeof(*got));
    ck_assert_ptr_nonnull(got);
    got[0] = first;
    uintptr_t lo = (uintptr_t)first, hi = (uintptr_t)first;
    for (uint32_t i = 1; i < per; i++) {
        uint32_t s2 = 999;
        got[i] = slab_alloc(cls, &s2);
        ck_assert_ptr_nonnull(got[i]);
        ck_assert_uint_eq(s2, 0);
        ck_assert_uint_eq(slab_cls_of(got[i]), cls);
        if ((uintptr_t)got[i] < lo) lo = (uintptr_t)got[i];
        if ((uintptr_t)got[i] > hi) hi = (uintptr_t)got[i];
        ck_assert_uint_eq(((uintptr_t)got[i] - (uintptr_t)first) % st.chunk_size, 0);
        for (uint32_t j = 0; j < i; j++) {
            ck_assert_ptr_ne(got[i], got[j]);
        }
    }
    ck_assert_uint_le(hi + st.chunk_size - lo, SLAB_SZ);
    ck_assert_uint_eq(hi - lo, (uintptr_t)(per - 1) * st.chunk_size);
    ck_assert_uint_eq(slab_table_count(), 1);
    st = cstats(cls);
    ck_assert_uint_eq(st.used_chunks, per);
    ck_assert_uint_eq(st.free_chunks, 0);

    /* Exhausted: the next chunk comes from a new slab. */
    uint32_t s3 = 999;
    struct item *next = slab_alloc(cls, &s3);
    ck_assert_ptr_nonnull(next);
    ck_assert_uint_eq(s3, 1);
    ck_assert_uint_eq(slab_sid_of(next), 1);
    ck_assert(next < (struct item *)lo || (uintptr_t)next > hi);
    ck_assert_uint_eq(slab_table_count(), 2);
    ck_assert_uint_eq(slab_malloced(), 2 * SLAB_SZ);
    ck_assert(slab_table_info(1, &info));
    ck_assert_uint_eq(info.cls, cls);
    st = cstats(cls);
    ck_assert_uint_eq(st.total_pages, 2);
    ck_assert_uint_eq(st.total_chunks, 2 * (uint64_t)per);
    ck_assert_uint_eq(st.used_chunks, per + 1);
    ck_assert_uint_eq(st.free_chunks, per - 1);
    free(got);
}
END_TEST

/* Slab 0 starts on a 2 MB boundary, so whole huge pages can back the
 * arena; slabs follow at stride spacing whatever the writable span. */
START_TEST(test_arena_huge_page_aligned)
{
    uint32_t sid;
    uint8_t last = slab_class_count();
    struct item *a = slab_alloc(last, &sid);
    struct item *b = slab_alloc(last, &sid);

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)a % (2 * MB), 0);
    ck_assert_uint_eq((uintptr_t)b - (uintptr_t)a, SLAB_SZ);
    memset(a, 0xab, SLAB_SZ);
    memset(b, 0xcd, SLAB_SZ);
    ck_assert_uint_eq(slab_sid_of(b), 1);
}
END_TEST

START_TEST(test_alloc_classes_get_own_slabs)
{
    struct slab_info info;
    uint32_t a, b, c;
    uint8_t last = slab_class_count();

    ck_assert_ptr_nonnull(slab_alloc(1, &a));
    ck_assert_ptr_nonnull(slab_alloc(5, &b));
    ck_assert_ptr_nonnull(slab_alloc(last, &c));
    ck_assert_uint_eq(a, 0);
    ck_assert_uint_eq(b, 1);
    ck_assert_uint_eq(c, 2);
    ck_assert_uint_eq(slab_table_count(), 3);
    ck_assert(slab_table_info(0, &info));
    ck_assert_uint_eq(info.cls, 1);
    ck_assert(slab_table_info(1, &info));
    ck_assert_uint_eq(info.cls, 5);
    ck_assert(slab_table_info(2, &info));
    ck_assert_uint_eq(info.cls, last);

    /* Another class-1 chunk reuses slab 0 rather than carving. */
    ck_assert_ptr_nonnull(slab_alloc(1, &a));
    ck_assert_uint_eq(a, 0);
    /* The whole-slab class carves a slab per chunk. */
    ck_assert_ptr_nonnull(slab_alloc(last, &c));
    ck_assert_uint_eq(c, 3);
    ck_assert_uint_eq(slab_table_count(), 4);
    ck_assert_uint_eq(cstats(last).total_pages, 2);
    ck_assert_uint_eq(cstats(last).used_chunks, 2);
}
END_TEST

/* --- memory limit ----------------------------------------------------------- */

START_TEST(test_limit_caps_slabs)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    uint32_t sid;

    ck_assert_uint_eq(slab_limit(), MAXBYTES);
    for (uint32_t i = 0; i < nslabs; i++) {
        struct item *it = slab_alloc(last, &sid);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_eq(sid, i);
    }
    ck_assert_uint_eq(slab_table_count(), nslabs);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES);

    sid = 777;
    ck_assert_ptr_null(slab_alloc(last, &sid));
    ck_assert_uint_eq(sid, 777);            /* untouched on failure */
    /* No class can grow now, even the smallest with no slab yet. */
    ck_assert_ptr_null(slab_alloc(1, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES);
    ck_assert_uint_eq(cstats(1).total_pages, 0);
}
END_TEST

/*
 * A reserve (the measurement's memory, sizing.h, and what slab_book()
 * adds: the probation FIFOs, the stats history) comes out of the limit in
 * whole slabs, to the nearest: slabs get the rest, and the limit itself
 * (limit_maxbytes) is unchanged.
 */
START_TEST(test_reserve_comes_out_of_the_limit)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    uint32_t sid, n = 0;

    ck_assert_uint_eq(slab_held(), 0);
    ck_assert_uint_eq(slab_room(), MAXBYTES);
    slab_set_reserve(SLAB_SZ / 2 - 1);
    ck_assert_uint_eq(slab_limit(), MAXBYTES);
    ck_assert_uint_eq(slab_room(), MAXBYTES);           /* under half: none */
    slab_book(1);
    ck_assert_uint_eq(slab_room(), MAXBYTES - SLAB_SZ); /* half: one */
    slab_book(SLAB_SZ / 2);
    ck_assert_uint_eq(slab_room(), MAXBYTES - SLAB_SZ); /* one: one */
    slab_book(SLAB_SZ);
    ck_assert_uint_eq(slab_held(), 2 * SLAB_SZ);        /* two: two */
    ck_assert_uint_eq(slab_room(), MAXBYTES - 2 * SLAB_SZ);
    slab_book(-(int64_t)SLAB_SZ);
    while (slab_alloc(last, &sid) != NULL) {
        n++;
    }
    ck_assert_uint_eq(slab_table_count(), nslabs - 1);
    ck_assert_uint_eq(n, (nslabs - 1) * cstats(last).chunks_per_page);
    ck_assert(slab_at_limit());
    ck_assert_uint_le(slab_malloced(), slab_room());
}
END_TEST

START_TEST(test_first_slab_past_limit)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    uint32_t sid;

    slab_set_first_past_limit(true);
    for (uint32_t i = 0; i < nslabs; i++) {
        ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    }
    ck_assert_ptr_null(slab_alloc(last, &sid));     /* it has slabs: no more */
    ck_assert(!slab_grow_first(last));
    /* A class with no slab gets its first one past the limit, granted
     * (the eviction layer, when no class can spare one)... */
    ck_assert(slab_grow_first(1));
    ck_assert(!slab_grow_first(1));
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert_uint_eq(sid, nslabs);
    ck_assert_uint_eq(slab_table_count(), nslabs + 1);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES + SLAB_SZ);
    ck_assert_uint_eq(cstats(1).total_pages, 1);
    /* ...and only that one. */
    uint32_t per = cstats(1).chunks_per_page;
    for (uint32_t i = 1; i < per; i++) {
        ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    }
    ck_assert_ptr_null(slab_alloc(1, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs + 1);
    /* ...or carved when a chunk of it is asked for (stubs, chained
     * values' chunks: classes not placed by size) */
    ck_assert_ptr_nonnull(slab_alloc(2, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs + 2);
    slab_set_first_past_limit(false);
    ck_assert(!slab_grow_first(3));                 /* rule off: none */
    ck_assert_ptr_null(slab_alloc(3, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs + 2);
}
END_TEST

/* The VmFlags of the mapping holding p (/proc/self/smaps), or "". */
static void
vm_flags_of(const void *p, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    bool inside = false;

    out[0] = '\0';
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ':') != NULL &&
            strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, cap, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

/*
 * Slabs within the limit are asked for huge pages, which they fill in
 * pairs; a slab carved past it (a first slab) comes alone and is asked
 * for small pages, or one slab would hold a 2 MB page by itself.
 */
START_TEST(test_slab_past_limit_on_small_pages)
{
    uint32_t sid;

    slab_teardown();
    setup_with(4 * MB, MB);
    uint8_t last = slab_class_count();
    struct item *inside = slab_alloc(last, &sid);
    ck_assert_ptr_nonnull(inside);
    while (!slab_at_limit()) {
        ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    }
    char flags[512];
    vm_flags_of(inside, flags, sizeof(flags));
    if (strstr(flags, " hg") == NULL) {
        return;                 /* no transparent huge pages here: nothing to show */
    }
    slab_set_first_past_limit(true);
    ck_assert(slab_grow_first(1));
    struct item *past = slab_alloc(1, &sid);
    ck_assert_ptr_nonnull(past);
    ck_assert_uint_eq(sid, 4);
    vm_flags_of(past, flags, sizeof(flags));
    ck_assert_msg(strstr(flags, " nh") != NULL, "past the limit: VmFlags%s", flags);
    vm_flags_of(inside, flags, sizeof(flags));
    ck_assert(strstr(flags, " hg") != NULL);
}
END_TEST

/*
 * A slab within the limit goes on a huge page only if the rest of that
 * page would be carved within the limit too: at -m 3 (1 MB slabs) the
 * third slab's huge page would back a fourth megabyte no slab ever takes,
 * held past -m (RSS one slab more than the slabs at an odd count).
 */
START_TEST(test_slab_ending_a_huge_page_early_on_small_pages)
{
    uint32_t sid;
    struct item *at[3];

    slab_teardown();
    setup_with(3 * MB, MB);
    uint8_t last = slab_class_count();
    for (uint32_t i = 0; i < 3; i++) {
        at[i] = slab_alloc(last, &sid);
        ck_assert_ptr_nonnull(at[i]);
        ck_assert_uint_eq(sid, i);
    }
    ck_assert(slab_at_limit());
    char flags[512];
    vm_flags_of(at[0], flags, sizeof(flags));
    if (strstr(flags, " hg") == NULL) {
        return;                 /* no transparent huge pages here: nothing to show */
    }
    vm_flags_of(at[1], flags, sizeof(flags));
    ck_assert(strstr(flags, " hg") != NULL);        /* its pair is whole */
    vm_flags_of(at[2], flags, sizeof(flags));
    ck_assert_msg(strstr(flags, " nh") != NULL, "third of three: VmFlags%s", flags);
}
END_TEST

/*
 * A drain can be told to leave its class some slabs (the first-slab rule:
 * another class's last slab stays). Counted under the class's lock with
 * the drains under way, so two drains at once cannot both take the last.
 */
START_TEST(test_drain_leaves_the_slabs_asked)
{
    uint32_t s0, s1, sid;
    uint32_t per = cstats(1).chunks_per_page;

    ck_assert_ptr_nonnull(slab_alloc(1, &s0));
    for (uint32_t i = 1; i <= per; i++) {
        ck_assert_ptr_nonnull(slab_alloc(1, &s1));
    }
    ck_assert_uint_ne(s0, s1);
    ck_assert_uint_eq(cstats(1).total_pages, 2);
    ck_assert_uint_eq(slab_drain_begin(s0, 1), 1);      /* one left */
    ck_assert_uint_eq(slab_drain_begin(s1, 1), 0);      /* would leave none */
    ck_assert_uint_eq(slab_drain_begin(s1, 0), 1);      /* no slab to keep */
    slab_drain_abort(1, s1);
    slab_drain_abort(1, s0);
    ck_assert_uint_eq(slab_drain_begin(s1, 1), 1);      /* s0 is back */
    slab_drain_abort(1, s1);
    ck_assert_uint_eq(slab_drain_begin(s1, 2), 0);
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));         /* free chunks back too */
}
END_TEST

/*
 * A released slab leaves slab_malloced() and its pages go back (they read
 * as zeros again); it waits in the pool, and the next slab carved is it:
 * the table does not grow while the pool holds one.
 */
START_TEST(test_released_slab_reused_before_table_grows)
{
    uint32_t s0, s1, sid;
    struct item *a = slab_alloc(1, &s0);
    struct item *b = slab_alloc(2, &s1);

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_ne(s0, s1);
    unsigned char *byte = (unsigned char *)slab_chunk(s0, 0) + 40;
    *byte = 0xab;
    slab_free(1, s0, a);
    ck_assert_uint_eq(slab_drain_begin(s0, 0), 1);
    slab_drain_finish(1, s0);
    ck_assert_uint_eq(cstats(1).total_pages, 0);
    size_t held = slab_malloced();
    ck_assert_uint_eq(slab_pool_count(), 0);
    slab_release(s0);
    ck_assert_uint_eq(slab_malloced(), held - SLAB_SZ);
    ck_assert_uint_eq(slab_pool_count(), 1);
    ck_assert_uint_eq(slab_table_count(), 2);
    ck_assert_uint_eq(*byte, 0);
    char flags[512];
    vm_flags_of(slab_chunk(s1, 0), flags, sizeof(flags));
    bool thp = strstr(flags, " hg") != NULL || strstr(flags, " nh") != NULL;
    /* The next slab, for any class, is the released one... */
    ck_assert_ptr_nonnull(slab_alloc(3, &sid));
    ck_assert_uint_eq(sid, s0);
    /* ...asked for huge pages again, being within the limit. */
    vm_flags_of(slab_chunk(s0, 0), flags, sizeof(flags));
    ck_assert_msg(!thp || strstr(flags, " hg") != NULL, "reused within -m: VmFlags%s", flags);
    ck_assert_uint_eq(slab_table_count(), 2);
    ck_assert_uint_eq(slab_pool_count(), 0);
    ck_assert_uint_eq(slab_malloced(), held);
    ck_assert_uint_eq(cstats(3).total_pages, 1);
    /* With the pool empty the table grows again. */
    ck_assert_ptr_nonnull(slab_alloc(4, &sid));
    ck_assert_uint_eq(sid, 2);
    ck_assert_uint_eq(slab_table_count(), 3);
}
END_TEST

/*
 * A slab kept in the pool (memcached's global page pool, where memory a
 * class stopped using waits for another) stays within -m: carved, counted
 * in slab_malloced() and total_malloced (slab_charged), so a full cache
 * still reads as full; yet a class can take it, first and with no limit to
 * check, and slab_at_limit() says so. Released (slab_pool_unkeep), it
 * leaves the count as any released slab does.
 */
START_TEST(test_kept_slab_stays_within_the_limit)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    struct item *first[2];
    uint32_t sid;

    for (uint32_t i = 0; i < nslabs; i++) {
        struct item *it = slab_alloc(last, &sid);
        ck_assert_ptr_nonnull(it);
        if (i < 2) {
            first[i] = it;
        }
        for (uint32_t k = 1; k < cstats(last).chunks_per_page; k++) {
            ck_assert_ptr_nonnull(slab_alloc(last, &sid));
        }
    }
    ck_assert(slab_at_limit());
    for (uint32_t i = 0; i < 2; i++) {
        for (uint32_t k = 0; k < cstats(last).chunks_per_page; k++) {
            struct item *it = slab_chunk(i, k);
            slab_free(last, i, it);
        }
        ck_assert_ptr_eq(first[i], slab_chunk(i, 0));
        ck_assert_uint_eq(slab_drain_begin(i, 0), last);
        slab_drain_finish(last, i);
    }
    slab_pool_keep(0);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES);
    ck_assert_uint_eq(slab_charged(), MAXBYTES);
    ck_assert_uint_eq(slab_pool_count(), 1);
    ck_assert_uint_eq(slab_pool_kept(), 1);
    ck_assert(slab_all_carved());
    ck_assert(!slab_at_limit());
    /* Any class's next slab is the kept one: nothing more carved. */
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert_uint_eq(sid, 0);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES);
    ck_assert_uint_eq(slab_table_count(), nslabs);
    ck_assert_uint_eq(slab_pool_count(), 0);
    ck_assert(slab_at_limit());
    /* Released, it leaves the count. */
    slab_pool_keep(1);
    ck_assert(slab_pool_unkeep());
    ck_assert(!slab_pool_unkeep());
    ck_assert_uint_eq(slab_malloced(), MAXBYTES - SLAB_SZ);
    ck_assert_uint_eq(slab_pool_count(), 1);
    ck_assert_uint_eq(slab_pool_kept(), 0);
    /* What counts against -m includes the bookkeeping's whole slabs. */
    slab_set_reserve(SLAB_SZ);
    ck_assert_uint_eq(slab_charged(), MAXBYTES);
}
END_TEST

/* The group (0, 1, ...) whose sizes an item of size bytes fits, groups
 * ending at 48 + CHUNK_MIN (memcached's first chunk for -n CHUNK_MIN),
 * then each at spacing times the one before, aligned to 8: slab.c's
 * groups at SLAB_SHARE, memcached's classes at its default 1.25. */
static uint32_t
size_group(size_t size, double spacing)
{
    size_t top = 48 + CHUNK_MIN;
    uint32_t k = 0;

    while (size > top) {
        top = (size_t)((double)top * spacing);
        top += (8 - top % 8) % 8;
        k++;
    }
    return k;
}

static uint32_t
memcached_class(size_t size)
{
    return size_group(size, 1.25);
}

/*
 * At the limit, an item whose class has no slab goes to the nearest larger
 * class of its group with one, else to its group's largest class, whose
 * first slab is granted: fine classes (-f 1.08) then carve past the limit
 * at most one slab per group (the classes whose smallest item fits one
 * step of SLAB_SHARE in sizes), not one per class, and not one per memcached class
 * either: memory past -m is what a home for every size costs, so groups
 * are coarser than memcached's classes. Below the limit every item keeps
 * its own class.
 */
START_TEST(test_first_slabs_shared_by_groups)
{
    uint32_t sid;

    slab_teardown();
    clock_setup();
    ck_assert_int_eq(slab_setup(MAXBYTES, SLAB_SZ, 1.08, CHUNK_MIN, hdr()), SLAB_OK);
    uint8_t n = slab_class_count(), last = n;
    for (size_t size = 40; size < cstats(n - 1).chunk_size; size += 37) {
        ck_assert_uint_eq(slab_clsid_alloc(size), slab_clsid(size));   /* memory to spare */
    }
    for (uint8_t c = 1; c < last; c++) {
        ck_assert_uint_eq(slab_clsid_alloc(cstats(c).chunk_size), c);   /* each asked for */
    }
    /* Every class was asked for: the room is a slab for each (slab_room),
     * all of it the last class's, so the others have none at the limit,
     * as classes whose only slab moved away. */
    slab_set_first_past_limit(true);
    while (slab_alloc(last, &sid) != NULL) {
    }
    ck_assert(slab_at_limit());
    uint32_t before = slab_table_count(), groups = 0, group = UINT32_MAX;
    uint32_t mc_classes = memcached_class(cstats(last - 1).chunk_size) -
                          memcached_class(1) + 1;
    for (uint8_t c = 1; c < last; c++) {
        size_t size = cstats(c).chunk_size;
        size_t smallest = c > 1 ? cstats(c - 1).chunk_size + 1 : 1;
        if (size_group(smallest, SLAB_SHARE) != group) {
            group = size_group(smallest, SLAB_SHARE);
            groups++;
        }
        uint8_t at = slab_clsid_alloc(size);
        ck_assert_uint_ge(at, c);
        ck_assert(cstats(at).chunk_size <= size * SLAB_SHARE * 1.08 * 1.08 + 8);
        if (cstats(at).total_pages == 0) {
            ck_assert_ptr_nonnull(slab_alloc(at, &sid));    /* the group's first slab */
        }
        /* homed: a larger class of its group holds a slab */
        if (at == c) {
            ck_assert(!slab_class_homed(c));
        } else if (size_group(cstats(at - 1).chunk_size + 1, SLAB_SHARE) == group) {
            ck_assert(slab_class_homed(c));
        }
        ck_assert_uint_eq(slab_clsid_alloc(size), at);      /* it has memory there now */
    }
    /* one class (the last) held every slab: the others shared first slabs */
    ck_assert_uint_gt(last - 1u, groups + 5u);
    ck_assert_uint_le(slab_table_count() - before, groups);
    /* past -m, at most three quarters of the pages memcached carves for
     * the same sizes */
    ck_assert_uint_le(4 * (slab_table_count() - before), 3 * mc_classes);
    slab_set_first_past_limit(false);
    /* with the rule off nothing is granted: a class without a slab borrows
     * one that has memory, or keeps its own (to get a slab moved to it) */
    for (uint8_t c = 1; c < last; c++) {
        uint8_t at = slab_clsid_alloc(cstats(c).chunk_size);
        ck_assert(at == c || cstats(at).total_pages > 0);
    }
}
END_TEST

/*
 * With first slabs past -m (the default) the room is at least what
 * memcached's first pages take for the classes any item was sized for (a
 * slab each here, where slabs are smaller than its 1 MB pages; 63 classes
 * at most); asked twice, a class counts once; slab_set_limit() forgets
 * them; strictly -m without the rule.
 */
START_TEST(test_room_is_a_slab_per_class_asked)
{
    size_t limit = 16 * SLAB_SZ;

    slab_teardown();
    clock_setup();
    ck_assert_int_eq(slab_setup(limit, SLAB_SZ, 1.08, CHUNK_MIN, hdr()), SLAB_OK);
    uint8_t n = slab_class_count();
    ck_assert_uint_gt(n - 1u, SLAB_MC_CLASSES);
    slab_set_first_past_limit(true);
    ck_assert_uint_eq(slab_room(), limit);
    for (uint8_t c = 1; c <= 10; c++) {
        slab_clsid_alloc(cstats(c).chunk_size);
    }
    ck_assert_uint_eq(slab_room(), limit);              /* -m is more */
    for (uint8_t c = 1; c <= 40; c++) {
        slab_clsid_alloc(cstats(c).chunk_size);
        slab_clsid_alloc(cstats(c).chunk_size - 1);     /* the same class */
    }
    ck_assert_uint_eq(slab_room(), 40 * SLAB_SZ);
    for (uint8_t c = 1; c < n; c++) {
        slab_clsid_alloc(cstats(c).chunk_size);
    }
    ck_assert_uint_eq(slab_room(), SLAB_MC_CLASSES * SLAB_SZ);   /* memcached's classes */
    slab_set_first_past_limit(false);
    ck_assert_uint_eq(slab_room(), limit);
    slab_set_first_past_limit(true);
    slab_set_limit(limit);
    ck_assert_uint_eq(slab_room(), limit);              /* forgotten */
    slab_set_first_past_limit(false);
}
END_TEST

START_TEST(test_limit_not_multiple_of_slab)
{
    uint8_t last = slab_class_count();
    uint32_t sid;

    slab_teardown();
    /* 2.5 slabs -> only 2 fit. */
    setup_with(2 * SLAB_SZ + SLAB_SZ / 2, SLAB_SZ);
    ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    ck_assert_ptr_null(slab_alloc(last, &sid));
    ck_assert_uint_eq(slab_table_count(), 2);
}
END_TEST

START_TEST(test_set_limit_raises_and_lowers_cap)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    uint32_t sid;

    for (uint32_t i = 0; i < nslabs; i++) {
        ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    }
    ck_assert_ptr_null(slab_alloc(last, &sid));

    slab_set_limit(MAXBYTES + 2 * SLAB_SZ);
    ck_assert_uint_eq(slab_limit(), MAXBYTES + 2 * SLAB_SZ);
    ck_assert_ptr_nonnull(slab_alloc(last, &sid));
    ck_assert_uint_eq(sid, nslabs);
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert_uint_eq(sid, nslabs + 1);
    ck_assert_ptr_null(slab_alloc(last, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs + 2);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES + 2 * SLAB_SZ);

    /* Lowering only caps future growth: nothing is taken away. */
    slab_set_limit(SLAB_SZ);
    ck_assert_uint_eq(slab_limit(), SLAB_SZ);
    ck_assert_uint_eq(slab_table_count(), nslabs + 2);
    ck_assert_uint_eq(slab_malloced(), MAXBYTES + 2 * SLAB_SZ);
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));   /* from slab nslabs+1 */
    ck_assert_uint_eq(sid, nslabs + 1);
    ck_assert_ptr_null(slab_alloc(last, &sid));
}
END_TEST

/* --- free -------------------------------------------------------------------- */

START_TEST(test_free_returns_chunks)
{
    uint8_t cls = 2;
    uint32_t per = cstats(cls).chunks_per_page;
    struct item *its[8];
    uint32_t sid;

    for (int i = 0; i < 8; i++) {
        its[i] = slab_alloc(cls, &sid);
        ck_assert_ptr_nonnull(its[i]);
    }
    struct slab_class_stats st = cstats(cls);
    ck_assert_uint_eq(st.used_chunks, 8);
    ck_assert_uint_eq(st.free_chunks, per - 8);

    slab_free(cls, slab_sid_of(its[2]), its[2]);
    slab_free(cls, slab_sid_of(its[5]), its[5]);
    st = cstats(cls);
    ck_assert_uint_eq(st.used_chunks, 6);
    ck_assert_uint_eq(st.free_chunks, per - 6);
    ck_assert_uint_eq(st.total_chunks, per);
    ck_assert_uint_eq(st.total_pages, 1);

    slab_lock(cls);
    slab_free_locked(cls, slab_sid_of(its[7]), its[7]);
    slab_unlock(cls);
    st = cstats(cls);
    ck_assert_uint_eq(st.used_chunks, 5);
    ck_assert_uint_eq(st.free_chunks, per - 5);
    ck_assert_uint_eq(slab_table_count(), 1);
}
END_TEST

/* A slab counts as empty once every chunk handed out has come back. */
START_TEST(test_find_empty_slab)
{
    uint32_t sid, sid2;

    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);
    struct item *a = slab_alloc(2, &sid);
    struct item *b = slab_alloc(2, &sid2);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(sid, sid2);
    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);
    slab_free(2, sid, a);
    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);    /* b is out */
    slab_free(2, sid, b);
    ck_assert_uint_eq(slab_find_empty(0, 0), sid);
    ck_assert_uint_eq(slab_find_empty(0, sid + 1), SLAB_ID_NONE);
    ck_assert_uint_eq(slab_find_empty(2, 0), SLAB_ID_NONE);    /* its own class */

    /* A second class's slab, in use: only the first one qualifies. */
    struct item *c = slab_alloc(3, &sid2);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_ne(sid2, sid);
    ck_assert_uint_eq(slab_find_empty(3, 0), sid);
    a = slab_alloc(2, &sid);                    /* in use again */
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);
    slab_free(3, sid2, c);
    ck_assert_uint_eq(slab_find_empty(0, 0), sid2);

    /* Moving checks emptiness again under the lock: class 2's slab holds
     * a, so it stays; class 3's is empty and goes to class 4. */
    ck_assert(!slab_move_empty(sid, 4));
    ck_assert_uint_eq(cstats(2).total_pages, 1);
    ck_assert(!slab_move_empty(sid2, 3));               /* its own class */
    ck_assert(slab_move_empty(sid2, 4));
    ck_assert_uint_eq(cstats(3).total_pages, 0);
    ck_assert_uint_eq(cstats(3).slabs_evicted, 1);
    ck_assert_uint_eq(cstats(4).total_pages, 1);
    ck_assert_uint_eq(cstats(4).free_chunks, cstats(4).chunks_per_page);
    ck_assert_uint_eq(slab_find_empty(0, 0), sid2);     /* empty, now class 4's */
    c = slab_alloc(4, &sid2);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(slab_find_empty(0, 0), SLAB_ID_NONE);
    slab_free(4, sid2, c);
    slab_free(2, sid, a);
}
END_TEST

START_TEST(test_free_chunk_reused_at_limit)
{
    uint8_t last = slab_class_count();
    uint32_t nslabs = (uint32_t)(MAXBYTES / SLAB_SZ);
    struct item *victim = NULL;
    uint32_t sid, vsid = 0;

    for (uint32_t i = 0; i < nslabs; i++) {
        struct item *it = slab_alloc(last, &sid);
        ck_assert_ptr_nonnull(it);
        if (i == 10) {
            victim = it;
            vsid = sid;
        }
    }
    ck_assert_ptr_null(slab_alloc(last, &sid));
    slab_free(last, vsid, victim);
    ck_assert_uint_eq(cstats(last).free_chunks, 1);
    /* Only the freed chunk is available; no new slab is carved. */
    sid = 0;
    ck_assert_ptr_eq(slab_alloc(last, &sid), victim);
    ck_assert_uint_eq(sid, vsid);
    ck_assert_uint_eq(sid, 10);
    ck_assert_ptr_null(slab_alloc(last, &sid));
    ck_assert_uint_eq(slab_table_count(), nslabs);
    ck_assert_uint_eq(cstats(last).free_chunks, 0);
    ck_assert_uint_eq(cstats(last).used_chunks, nslabs);
}
END_TEST

/* --- the append-only table ----------------------------------------------------- */

START_TEST(test_table_append_only_stable)
{
    /* Many small slabs (one page each). */
    const uint32_t total = 5000;
    struct item **chunk = calloc(total, sizeof(*chunk));
    struct slab_info *snap = calloc(64, sizeof(*snap));
    uint32_t sid;

    ck_assert_ptr_nonnull(chunk);
    ck_assert_ptr_nonnull(snap);
    slab_teardown();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    setup_with((size_t)total * page, page);
    uint8_t last = slab_class_count();
    ck_assert_uint_eq(cstats(last).chunk_size, page);

    /* A few small-class slabs first, then one-chunk slabs. */
    for (uint32_t i = 0; i < 64; i++) {
        uint8_t cls = (uint8_t)(1 + i % (last - 1));
        /* use up the class's free chunks so each i carves a fresh slab */
        uint64_t before = cstats(cls).free_chunks;
        if (before == 0) {
            chunk[i] = slab_alloc(cls, &sid);
        } else {
            for (uint64_t k = 0; k < before; k++) {
                ck_assert_ptr_nonnull(slab_alloc(cls, &sid));
            }
            chunk[i] = slab_alloc(cls, &sid);
        }
        ck_assert_ptr_nonnull(chunk[i]);
        ck_assert_uint_eq(sid, i);
        ck_assert(slab_table_info(i, &snap[i]));
        ck_assert_uint_eq(snap[i].cls, cls);
    }
    for (uint32_t i = 64; i < total; i++) {
        chunk[i] = slab_alloc(last, &sid);
        ck_assert_ptr_nonnull(chunk[i]);
        ck_assert_uint_eq(sid, i);
    }
    ck_assert_ptr_null(slab_alloc(last, &sid));
    ck_assert_uint_eq(slab_table_count(), total);

    for (uint32_t i = 0; i < 64; i++) {
        struct slab_info now_info;
        ck_assert(slab_table_info(i, &now_info));
        ck_assert_uint_eq(now_info.cls, snap[i].cls);
        ck_assert_uint_eq(now_info.created_ms, snap[i].created_ms);
        ck_assert_uint_eq(now_info.accessed_ms, snap[i].accessed_ms);
        ck_assert_uint_eq(slab_sid_of(chunk[i]), i);
    }
    for (uint32_t i = 64; i < total; i++) {
        struct slab_info now_info;
        ck_assert(slab_table_info(i, &now_info));
        ck_assert_uint_eq(now_info.cls, last);
        ck_assert_uint_eq(slab_sid_of(chunk[i]), i);
        ck_assert_uint_eq(slab_cls_of(chunk[i]), last);
    }
    ck_assert(!slab_table_info(total, &snap[0]));
    /* Freeing an early slab's chunk and taking it again keeps its id. */
    slab_free(last, 100, chunk[100]);
    ck_assert_ptr_eq(slab_alloc(last, &sid), chunk[100]);
    ck_assert_uint_eq(sid, 100);
    free(chunk);
    free(snap);
}
END_TEST

/* Handles name every chunk, are never 0, and map back to the chunk. */
START_TEST(test_handles_round_trip)
{
    uint8_t cls = 1;
    uint32_t per = slab_class_perslab(cls), sid;
    struct item *first = slab_alloc(cls, &sid), *prev = first;

    ck_assert_ptr_nonnull(first);
    ck_assert_uint_ne(slab_handle(first), SLAB_HANDLE_NONE);
    ck_assert_ptr_eq(slab_handle_item(slab_handle(first)), first);
    for (uint32_t i = 1; i < 2 * per; i++) {
        struct item *it = slab_alloc(cls, &sid);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_gt(slab_handle(it), slab_handle(prev));
        ck_assert_ptr_eq(slab_handle_item(slab_handle(it)), it);
        ck_assert_uint_eq(slab_sid_of(it), i / per);
        ck_assert_uint_eq(slab_cls_of(it), cls);
        prev = it;
    }
}
END_TEST

/* Count how often the hand shows each chunk of cls in n steps. */
static void
clock_walk(uint8_t cls, uint32_t n, struct item **chunks, uint32_t nchunks,
           uint32_t *seen)
{
    memset(seen, 0, nchunks * sizeof(*seen));
    slab_lock(cls);
    for (uint32_t i = 0; i < n; i++) {
        struct item *it = slab_clock_next(cls);
        ck_assert_ptr_nonnull(it);
        uint32_t j = 0;
        while (j < nchunks && chunks[j] != it) {
            j++;
        }
        ck_assert_msg(j < nchunks, "hand showed a chunk outside the class");
        seen[j]++;
    }
    slab_unlock(cls);
}

/*
 * The CLOCK hand shows every chunk of the class's slabs once per turn,
 * and after a slab leaves the class (drained) it shows only the others,
 * still once per turn, from wherever it stood.
 */
START_TEST(test_clock_hand_covers_class_slabs)
{
    uint8_t cls = 2;
    uint32_t per = slab_class_perslab(cls), n = 3 * per, sid;
    struct item **chunks = calloc(n, sizeof(*chunks));
    uint32_t *seen = calloc(n, sizeof(*seen));

    ck_assert_ptr_nonnull(chunks);
    ck_assert_ptr_nonnull(seen);
    slab_lock(cls);
    ck_assert_ptr_null(slab_clock_next(cls));       /* no slabs yet */
    slab_unlock(cls);
    for (uint32_t i = 0; i < n; i++) {
        chunks[i] = slab_alloc(cls, &sid);
        ck_assert_ptr_nonnull(chunks[i]);
    }
    clock_walk(cls, 2 * n, chunks, n, seen);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(seen[i], 2);
    }
    /* Stop the hand inside the middle slab, then take that slab away. */
    slab_lock(cls);
    for (uint32_t i = 0; i < per + per / 2; i++) {
        (void)slab_clock_next(cls);
    }
    slab_unlock(cls);
    uint32_t mid = slab_sid_of(chunks[per]);
    ck_assert_uint_eq(slab_drain_begin(mid, 0), cls);
    for (uint32_t i = per; i < 2 * per; i++) {
        slab_free(cls, mid, chunks[i]);
    }
    slab_drain_finish(cls, mid);
    ck_assert_uint_eq(slab_class_slabs(cls), 2);
    /* The last slab moved into the gap; the hand starts it from its top. */
    slab_lock(cls);
    ck_assert_ptr_eq(slab_clock_peek(cls, 0), chunks[2 * per]);
    slab_unlock(cls);
    clock_walk(cls, 2 * per, chunks, n, seen);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(seen[i], i / per == 1 ? 0 : 1);
    }
    /* peek looks ahead without moving the hand */
    slab_lock(cls);
    struct item *ahead = slab_clock_peek(cls, 1);
    ck_assert_ptr_eq(slab_clock_peek(cls, 0), slab_clock_next(cls));
    ck_assert_ptr_eq(slab_clock_next(cls), ahead);
    slab_unlock(cls);
    free(seen);
    free(chunks);
}
END_TEST

/* The hand stands in the last slab when another slab leaves: it follows
 * its slab to the new place, at the same chunk. */
START_TEST(test_clock_hand_follows_moved_slab)
{
    uint8_t cls = 2;
    uint32_t per = slab_class_perslab(cls), n = 3 * per, sid;
    struct item **chunks = calloc(n, sizeof(*chunks));

    ck_assert_ptr_nonnull(chunks);
    for (uint32_t i = 0; i < n; i++) {
        chunks[i] = slab_alloc(cls, &sid);
        ck_assert_ptr_nonnull(chunks[i]);
    }
    slab_lock(cls);
    for (uint32_t i = 0; i < 2 * per + per / 2; i++) {
        (void)slab_clock_next(cls);
    }
    slab_unlock(cls);
    uint32_t first = slab_sid_of(chunks[0]);
    ck_assert_uint_eq(slab_drain_begin(first, 0), cls);
    for (uint32_t i = 0; i < per; i++) {
        slab_free(cls, first, chunks[i]);
    }
    slab_drain_finish(cls, first);
    slab_lock(cls);
    ck_assert_ptr_eq(slab_clock_next(cls), chunks[2 * per + per / 2]);
    slab_unlock(cls);
    free(chunks);
}
END_TEST

/* A slab smaller than a page still makes a whole page resident: the
 * memory limit is charged per page-rounded slab, so -m holds. */
START_TEST(test_sub_page_slabs_charge_whole_pages)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint32_t sid, n = 0;

    slab_teardown();
    setup_with(8 * page, 1024);
    uint8_t last = slab_class_count();
    while (slab_alloc(last, &sid) != NULL) {
        n++;
    }
    ck_assert_uint_eq(n, 8);
    ck_assert_uint_eq(slab_malloced(), 8 * page);
    ck_assert(slab_at_limit());
}
END_TEST

START_TEST(test_teardown_and_setup_again)
{
    uint32_t sid;

    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert_ptr_nonnull(slab_alloc(slab_class_count(), &sid));
    ck_assert_uint_eq(slab_table_count(), 2);
    slab_teardown();
    setup_default();
    ck_assert_uint_eq(slab_table_count(), 0);
    ck_assert_uint_eq(slab_malloced(), 0);
    ck_assert_uint_eq(cstats(1).total_pages, 0);
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert_uint_eq(sid, 0);
    ck_assert_uint_eq(slab_table_count(), 1);
}
END_TEST

/* One bounded sleep: touch moves accessed, a later carve stamps created. */
START_TEST(test_touch_and_created_times)
{
    struct slab_info info;
    uint32_t sid;

    uint64_t before = clock_now_ms();
    ck_assert_ptr_nonnull(slab_alloc(1, &sid));
    ck_assert(slab_table_info(0, &info));
    uint64_t t0 = info.created_ms;
    ck_assert_uint_ge(t0, before);
    ck_assert_uint_le(t0, clock_now_ms());
    usleep(60 * 1000);
    uint64_t t1 = clock_now_ms();
    ck_assert_uint_ge(t1, t0 + 40);     /* coarse clock: a few ms per tick */

    slab_touch(0);
    ck_assert(slab_table_info(0, &info));
    ck_assert_uint_eq(info.created_ms, t0);
    ck_assert_uint_ge(info.accessed_ms, t1);

    ck_assert_ptr_nonnull(slab_alloc(2, &sid));
    ck_assert_uint_eq(sid, 1);
    ck_assert(slab_table_info(1, &info));
    ck_assert_uint_ge(info.created_ms, t1);
    ck_assert_uint_eq(info.accessed_ms, info.created_ms);
    /* slab 0 keeps its creation time */
    ck_assert(slab_table_info(0, &info));
    ck_assert_uint_eq(info.created_ms, t0);
}
END_TEST

static Suite *
slab_suite(void)
{
    Suite *s = suite_create("slab");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup_default, teardown_default);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_geometry_sizes);
    tcase_add_test(tc, test_geometry_out_of_range_class_stats);
    tcase_add_test(tc, test_clsid_mapping);
    tcase_add_test(tc, test_setup_rejects_bad_geometry);
    tcase_add_test(tc, test_fine_factor_many_classes);
    tcase_add_test(tc, test_alloc_carves_one_slab);
    tcase_add_test(tc, test_arena_huge_page_aligned);
    tcase_add_test(tc, test_alloc_classes_get_own_slabs);
    tcase_add_test(tc, test_limit_caps_slabs);
    tcase_add_test(tc, test_first_slabs_shared_by_groups);
    tcase_add_test(tc, test_room_is_a_slab_per_class_asked);
    tcase_add_test(tc, test_limit_not_multiple_of_slab);
    tcase_add_test(tc, test_set_limit_raises_and_lowers_cap);
    tcase_add_test(tc, test_free_returns_chunks);
    tcase_add_test(tc, test_find_empty_slab);
    tcase_add_test(tc, test_free_chunk_reused_at_limit);
    tcase_add_test(tc, test_table_append_only_stable);
    tcase_add_test(tc, test_teardown_and_setup_again);
    tcase_add_test(tc, test_handles_round_trip);
    tcase_add_test(tc, test_clock_hand_covers_class_slabs);
    tcase_add_test(tc, test_clock_hand_follows_moved_slab);
    tcase_add_test(tc, test_sub_page_slabs_charge_whole_pages);
    tcase_add_test(tc, test_touch_and_created_times);
    tcase_add_test(tc, test_first_slab_past_limit);
    tcase_add_test(tc, test_reserve_comes_out_of_the_limit);
    tcase_add_test(tc, test_slab_past_limit_on_small_pages);
    tcase_add_test(tc, test_slab_ending_a_huge_page_early_on_small_pages);
    tcase_add_test(tc, test_released_slab_reused_before_table_grows);
    tcase_add_test(tc, test_kept_slab_stays_within_the_limit);
    tcase_add_test(tc, test_drain_leaves_the_slabs_asked);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(slab_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
