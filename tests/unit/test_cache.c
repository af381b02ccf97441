/*
 * test_cache.c -- unit tests for the cache layer (include/cache/cache.h):
 * allocation with eviction (the item-level CLOCK through the `lru` policy,
 * `none` refusing and counting outofmemory) and the rebuilding operations
 * (append/prepend, incr past the old length, mg's vivify) completed by
 * eviction when no chunk is free. Storage's own semantics are test_item's;
 * the policies' victim choice is test_evict's.
 *
 * Each test runs in its own process (check's fork mode) with a fresh
 * storage stack set up like src/main.c does.
 */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "dispatch.h"
#include "evict.h"
#include "outq.h"
#include "stats.h"

#define FX_ALLOC(k, n, f, e, v, out)  cache_alloc(k, n, f, e, v, out)
#define FX_STORE(it, op, cas)         cache_store(it, op, cas)
#define FX_POLICY_SETUP(name)         ck_assert_int_eq(evict_setup(name), 0)
#define FX_POLICY_TEARDOWN()          evict_teardown()
#include "item_fixture.h"

/* --- multi-get windows ------------------------------------------------------------------------------------ */

static char sink[64 * 1024];
static size_t sink_len;

static ssize_t
sink_writev(void *ctx, const struct iovec *iov, int n)
{
    size_t total = 0;

    (void)ctx;
    for (int i = 0; i < n; i++) {
        ck_assert_uint_le(sink_len + iov[i].iov_len, sizeof(sink));
        memcpy(sink + sink_len, iov[i].iov_base, iov[i].iov_len);
        sink_len += iov[i].iov_len;
        total += iov[i].iov_len;
    }
    return (ssize_t)total;
}

static void
drain(struct outq *q)
{
    while (outq_pending(q) > 0) {
        ck_assert_int_gt(outq_write_with(q, sink_writev, NULL), 0);
    }
}

/*
 * A get of 40 keys (every fifth missing, one asked twice) answered with
 * the output bound paused after every k-th answer, for every k: the pause
 * falls at every position of a prefetch window, and each time the answer
 * is the same bytes as without a pause, every key once and in order.
 */
START_TEST(test_mget_pause_at_any_key)
{
    static struct stats_thread st;
    char line[1024], want[16 * 1024];
    size_t len = 0, wlen = 0;

    len += (size_t)snprintf(line, sizeof(line), "get");
    for (int i = 0; i < 40; i++) {
        int k = i == 25 ? 7 : i;        /* key 7 asked twice */
        char key[16], val[16];
        snprintf(key, sizeof(key), "mk%d", k);
        snprintf(val, sizeof(val), "value-%d", k);
        if (i != 25 && k % 5 != 3) {
            ck_assert_int_eq(set(key, val), ITEM_OK);
        }
        len += (size_t)snprintf(line + len, sizeof(line) - len, " %s", key);
        if (k % 5 != 3) {
            wlen += (size_t)snprintf(want + wlen, sizeof(want) - wlen,
                                     "VALUE %s 0 %zu\r\n%s\r\n", key, strlen(val), val);
        }
    }
    len += (size_t)snprintf(line + len, sizeof(line) - len, "\r\n");
    wlen += (size_t)snprintf(want + wlen, sizeof(want) - wlen, "END\r\n");

    for (size_t limit = 1; limit <= 40 * 24; limit += 23) {
        struct outq q;
        struct proto_req req;
        size_t used;
        outq_init(&q, dispatch_ref_release);
        struct dispatch_ctx d = { .out = &q, .stats = &st, .out_limit = limit,
                                  .out_copy_limit = SIZE_MAX, .out_segs_limit = UINT32_MAX,
                                  .fd = -1 };
        sink_len = 0;
        ck_assert_int_eq(proto_parse(line, len, &req, &used), PROTO_OK);
        dispatch_result_t r = dispatch_request(&d, &req);
        int pauses = 0;
        while (r == DISPATCH_MORE_KEYS) {
            drain(&q);
            pauses++;
            req.keys = d.mget.resume;   /* what the connection resumes with */
            r = dispatch_get_keys(&d, &req);
            if (r == DISPATCH_DONE) {
                dispatch_get_finish(&d, NULL);
            }
        }
        drain(&q);
        ck_assert_uint_eq(sink_len, wlen);
        ck_assert_int_eq(memcmp(sink, want, wlen), 0);
        ck_assert_int_gt(pauses, limit < 40 * 20 ? 0 : -1);
        outq_free(&q);
    }
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
 * An item read since it was stored outlives the unread ones, which go
 * first, in the order they were stored (probation, item_clock.c).
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
    /* Read once, it has left probation: new keys nobody reads go before
     * it (the oldest of them first), however many arrive. */
    for (unsigned i = 2 * cap - 1; i < 4 * cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    ck_assert_uint_eq(istats().evictions, 3 * cap);
    ck_assert(evict_present(0));
    ck_assert(!evict_present(cap));
    ck_assert(evict_present(4 * cap - 1));
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
    /* key 0 is the oldest but referenced: another item goes instead */
    ck_assert_int_eq(store_evict(cap, NULL), ITEM_OK);
    ck_assert_uint_eq(istats().evictions, 1);
    unsigned missing = 0;
    for (unsigned i = 1; i <= cap; i++) {
        missing += !evict_present(i);
    }
    ck_assert_uint_eq(missing, 1);
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
    ck_assert_int_eq(item_delete("key:00002", 9, NULL, NULL), ITEM_OK);
    /* overwrite churn: every new chunk must differ from the held one */
    for (unsigned i = cap; i < 3 * cap; i++) {
        struct item *it;
        char k[16];
        evict_key(k, sizeof(k), i);
        memset(evict_val, 'v', sizeof(evict_val));
        memcpy(evict_val, k, strlen(k));
        ck_assert_int_eq(make_item(k, evict_val, VLEN_EVICT, i, 0, &it), ITEM_OK);
        ck_assert_ptr_ne(it, held);
        ck_assert_int_eq(cache_store(it, ITEM_OP_SET, 0), ITEM_OK);
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
    ck_assert_int_eq(item_delete("key:00005", 9, NULL, NULL), ITEM_OK);
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
        ck_assert_int_eq(cache_store(doomed[i], ITEM_OP_SET, 0), ITEM_OK);
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

    /* no dead items left: now one live item is evicted (none was read:
     * the oldest on probation), and only one */
    ck_assert_int_eq(store_evict(cap + nexp, NULL), ITEM_OK);
    st = istats();
    ck_assert_uint_eq(st.reclaimed, nexp);
    ck_assert_uint_eq(st.evictions, 1);
    ck_assert_uint_eq(st.curr_items, cap);
    unsigned lost = 0;
    for (unsigned i = nexp; i <= cap + nexp; i++) {
        lost += !evict_present(i);
    }
    ck_assert_uint_eq(lost, 1);
    ck_assert(evict_present(cap + nexp));
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

START_TEST(test_none_no_memory)
{
    slab_set_limit(SMALL_LIMIT);
    uint32_t cap = evict_capacity();
    struct item *it = NULL;

    for (unsigned i = 0; i < cap; i++) {
        ck_assert_int_eq(store_evict(i, NULL), ITEM_OK);
    }
    ck_assert_int_eq(store_evict(cap, NULL), ITEM_NO_MEMORY);
    ck_assert_int_eq(cache_alloc("other", 5, 0, 0, VLEN_EVICT, &it), ITEM_NO_MEMORY);
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
    ck_assert_int_eq(item_delete(k, strlen(k), NULL, NULL), ITEM_OK);
    ck_assert_int_eq(store_evict(cap + 1, NULL), ITEM_OK);
    ck_assert_int_eq(store_evict(cap + 2, NULL), ITEM_NO_MEMORY);

    /* a different class with no slab cannot grow either */
    ck_assert_int_eq(cache_alloc("s", 1, 0, 0, 1, &it), ITEM_NO_MEMORY);
}
END_TEST

/* --- rebuilds under memory pressure ------------------------------------------------------------------ */

/* Fill all memory with small items of the first class (policy none). */
static void
fill_small(void)
{
    char key[16];
    unsigned n = 0;

    slab_set_limit(SMALL_LIMIT);
    for (;; n++) {
        snprintf(key, sizeof(key), "f%u", n);
        if (set(key, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") != ITEM_OK) {
            break;
        }
    }
    ck_assert_uint_gt(n, 1000);
}

/*
 * append/prepend/incr build a new item; when memory is full that may mean
 * emptying a slab holding items of the same hash partition. Storage hands
 * the allocation back (ITEM_NEED_MEMORY) rather than allocating under
 * that partition's lock (it once did, and failed); the cache layer
 * evicts, unlocked, and completes the operation. Here the append's joined
 * value needs a slab for its class; the prepend and incr that follow may
 * find free chunks in slabs the policies moved (the next test forces
 * incr and mg N through the hand-back).
 */
START_TEST(test_rebuild_ops_under_memory_pressure)
{
    /* The joined value lands in a bigger class with no slab yet: only a
     * slab-level policy can give it memory, by emptying some slab. */
    static const char *const policies[] = { "lra", "random", "lrc,lru" };
    const char *part = "pppppppppppppppppppppppppppppppppppppp";
    size_t plen = strlen(part);

    for (size_t p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        char key[16];
        if (p > 0) {
            teardown_storage();
            setup_none();
        }
        fill_small();
        ck_assert_int_eq(evict_configure(policies[p], strlen(policies[p])), 0);
        snprintf(key, sizeof(key), "k%zu", p);
        ck_assert_uint_eq(item_class_of(strlen(key), 1), item_class_of(strlen(key), plen));
        ck_assert_uint_ne(item_class_of(strlen(key), 2 * plen), item_class_of(strlen(key), plen));
        ck_assert_int_eq(set(key, part), ITEM_OK);
        ck_assert_int_eq(store_op(key, part, 0, 0, ITEM_OP_APPEND, 0), ITEM_OK);
        ck_assert_int_eq(store_op(key, "w", 0, 0, ITEM_OP_PREPEND, 0), ITEM_OK);
        struct item *it = get(key);
        ck_assert_ptr_nonnull(it);
        ck_assert_uint_eq(item_vlen(it), 2 * plen + 1);
        ck_assert_mem_eq(item_value(it), "w", 1);
        ck_assert_mem_eq(item_value(it) + 1, part, plen);
        ck_assert_mem_eq(item_value(it) + 1 + plen, part, plen);
        item_release(it);

        /* incr growing a counter past its length: 19 nines + 1. */
        char grown[24];
        uint64_t v = 0;
        ck_assert_int_eq(set("n", "9999999999999999999"), ITEM_OK);
        ck_assert_int_eq(cache_arith("n", 1, true, 1, &v, NULL), ITEM_OK);
        ck_assert_uint_eq(v, 10000000000000000000ull);
        snprintf(grown, sizeof(grown), "%llu", (unsigned long long)v);
        expect_value("n", grown);
    }
}
END_TEST

/* Take the free chunks of the smallest class (no eviction), from spare[n]
 * on; the new count. */
static unsigned
take_free(struct item **spare, unsigned n, unsigned max)
{
    while (n < max && item_alloc_try("s", 1, 0, 0, 1, &spare[n]) == ITEM_OK) {
        n++;
    }
    return n;
}

/* The same with item-level eviction in a full class: the pinned item is
 * never the victim, and append, incr past the counter's length and mg N
 * all land, each by evicting the class's CLOCK tail. */
START_TEST(test_rebuild_in_a_full_class_evicts_its_tail)
{
    char k[16], want[VLEN_EVICT + 2];
    struct item *tail;

    slab_set_limit(SMALL_LIMIT);
    evict_key(k, sizeof(k), 0);
    ck_assert_int_eq(store_evict(0, NULL), ITEM_OK);
    ck_assert_uint_eq(item_class_of(strlen(k), VLEN_EVICT + 1), evict_class());
    ck_assert_int_eq(make_item(k, "+", 1, 0, 0, &tail), ITEM_OK);  /* its class's slab first */
    ck_assert_int_eq(set("n", "9999999999999999999"), ITEM_OK);     /* same class as tail */
    ck_assert_uint_eq(item_class_of(1, 20), slab_cls_of(tail));
    ck_assert_uint_eq(item_class_of(3, 0), slab_cls_of(tail));
    ck_assert_uint_gt(fill_with("z", "1234567890123456789"), 100);
    (void)fill_all_big();                       /* whatever memory is left */
    ck_assert_int_eq(evict_configure("lru", 3), 0);

    struct item *held = get(k);                 /* a reader: forces a rebuild */
    ck_assert_int_eq(cache_store(tail, ITEM_OP_APPEND, 0), ITEM_OK);
    item_release(tail);
    assert_evict_item(held, 0);                 /* the reader's bytes unchanged */
    item_release(held);
    memset(want, 'v', VLEN_EVICT);
    memcpy(want, k, strlen(k));
    want[VLEN_EVICT] = '+';
    want[VLEN_EVICT + 1] = '\0';
    expect_value(k, want);
    ck_assert_uint_eq(istats().evictions, 1);

    uint64_t v = 0;
    struct item *spare[8];
    unsigned nspare = take_free(spare, 0, 8);   /* tail's chunk, given back */
    held = get("n");
    ck_assert_int_eq(cache_arith("n", 1, true, 1, &v, NULL), ITEM_OK);
    ck_assert_uint_eq(v, 10000000000000000000ull);
    ck_assert(memcmp(item_value(held), "9999999999999999999", 19) == 0);
    item_release(held);
    expect_value("n", "10000000000000000000");
    ck_assert_uint_eq(istats().evictions, 2);

    nspare = take_free(spare, nspare, 8);       /* the old counter's chunk */
    struct item_meta_get g = { .bump = true, .vivify = true,
                               .vivify_exptime = clock_exptime(30) };
    item_miss_t miss;
    struct item *it = cache_meta_get("viv", 3, &g, &miss);
    ck_assert_ptr_nonnull(it);
    ck_assert(g.created && g.won);
    ck_assert_uint_eq(item_refcount(it), 2);
    item_release(it);
    ck_assert_uint_eq(istats().evictions, 3);
    ck_assert_uint_eq(nspare, 2);
    while (nspare > 0) {
        item_release(spare[--nspare]);
    }
}
END_TEST

/* cache_alloc wakes the background evictor when a class runs low while
 * memory is full; it refills the class in batches while sets go on. */
START_TEST(test_background_evictor_keeps_a_reserve)
{
    const char *val = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    uint8_t a = item_class_of(4, (uint32_t)strlen(val));
    char key[16];
    uint64_t runs, evictions;

    fill_small();
    ck_assert_int_eq(evict_configure("lru", 3), 0);
    ck_assert_uint_eq(evict_bg_reserve(), 0);
    ck_assert_int_eq(evict_bg_start(16, 8), 0);
    ck_assert_uint_eq(evict_bg_reserve(), 16);
    ck_assert_uint_eq(evict_bg_target(a), 16);
    for (unsigned i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "n%03u", i);
        ck_assert_int_eq(set(key, val), ITEM_OK);
    }
    for (int i = 0; i < 500 && slab_class_free(a) < 16; i++) {
        usleep(2000);           /* bounded wait for the thread */
    }
    ck_assert_uint_ge(slab_class_free(a), 16);
    evict_bg_stats(&runs, &evictions);
    ck_assert_uint_gt(runs, 0);
    ck_assert_uint_ge(evictions, 16);
    evict_bg_stop();
    ck_assert_uint_eq(evict_bg_reserve(), 0);
    /* Stopped: no more refills. */
    uint64_t free_now = slab_class_free(a);
    for (uint64_t i = 0; i < free_now; i++) {
        snprintf(key, sizeof(key), "m%03u", (unsigned)i);
        ck_assert_int_eq(set(key, val), ITEM_OK);
    }
    usleep(20 * 1000);
    ck_assert_uint_eq(slab_class_free(a), 0);
}
END_TEST

static Suite *
cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("lru");
    TCase *tn = tcase_create("evict_none");

    tcase_add_checked_fixture(tc, setup_lru, teardown_storage);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_lru_evicts_oldest);
    tcase_add_test(tc, test_clock_spares_a_read_item);
    tcase_add_test(tc, test_lru_skips_held_writer_ref);
    tcase_add_test(tc, test_lru_skips_held_reader);
    tcase_add_test(tc, test_lru_held_deleted_item_not_reused);
    tcase_add_test(tc, test_lru_reclaims_expired_first);
    tcase_add_test(tc, test_lru_evicts_when_all_recently_read);
    tcase_add_test(tc, test_lru_evicts_single_recently_read);
    tcase_add_test(tc, test_mget_pause_at_any_key);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(tn, setup_none, teardown_storage);
    tcase_set_timeout(tn, 30);
    tcase_add_test(tn, test_none_no_memory);
    tcase_add_test(tn, test_rebuild_ops_under_memory_pressure);
    tcase_add_test(tn, test_rebuild_in_a_full_class_evicts_its_tail);
    tcase_add_test(tn, test_background_evictor_keeps_a_reserve);
    suite_add_tcase(s, tn);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cache_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
