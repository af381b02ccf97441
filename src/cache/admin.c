/*
 * admin.c -- memcached's operator commands (see admin.h).
 *
 * Each handler splits its arguments into words and checks their count the
 * way memcached's tokenizer does (memcached counts the command and a final
 * empty token, hence "ntokens" = words + 2 in its source), so a wrong
 * count answers ERROR and a malformed number CLIENT_ERROR, as there.
 */
#include "admin.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crawler.h"
#include "evict.h"
#include "flash.h"
#include "item.h"
#include "logger.h"
#include "outq.h"
#include "settings.h"
#include "sizing.h"
#include "slab.h"
#include "stats.h"

#define ARGS_MAX 24

struct args {
    const char *w[ARGS_MAX];
    size_t      n[ARGS_MAX];
    size_t      count;          /* words, capped at ARGS_MAX */
};

static void
args_split(const char *s, const char *end, struct args *a)
{
    const char *cur = s, *w;
    size_t n;

    a->count = 0;
    while (a->count < ARGS_MAX && proto_key_next(&cur, end, &w, &n)) {
        a->w[a->count] = w;
        a->n[a->count] = n;
        a->count++;
    }
}

static bool
arg_is(const struct args *a, size_t i, const char *s)
{
    return i < a->count && a->n[i] == strlen(s) && memcmp(a->w[i], s, a->n[i]) == 0;
}

/* memcached's set_noreply_maybe(): the last word decides. */
static bool
args_noreply(const struct args *a)
{
    return a->count > 0 && arg_is(a, a->count - 1, "noreply");
}

static bool
arg_u32(const struct args *a, size_t i, uint32_t *out)
{
    uint64_t v;

    if (i >= a->count || !proto_parse_u64(a->w[i], a->n[i], &v) || v > UINT32_MAX) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool
arg_i32(const struct args *a, size_t i, int32_t *out)
{
    int64_t v;

    if (i >= a->count || !proto_parse_i64(a->w[i], a->n[i], &v) ||
        v < INT32_MIN || v > INT32_MAX) {
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool
arg_double(const struct args *a, size_t i, double *out)
{
    char buf[64], *end;

    if (i >= a->count || a->n[i] == 0 || a->n[i] >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, a->w[i], a->n[i]);
    buf[a->n[i]] = '\0';
    *out = strtod(buf, &end);
    return *end == '\0';
}

static void
answer(struct dispatch_ctx *d, bool noreply, const char *text)
{
    if (!noreply) {
        dispatch_reply_line(d, text);
    }
}

/* --- key dumps ------------------------------------------------------------- */

#define DUMP_BATCH 256          /* items per turn of a dump */

size_t
admin_dump_line(const struct item_dump *it, dispatch_dump_t kind, char *line, size_t cap)
{
    if (kind == DISPATCH_DUMP_MG) {
        return proto_compose_mgdump(line, cap, it->key, it->nkey, it->key_binary);
    }
    if (kind == DISPATCH_DUMP_META) {
        return proto_compose_metadump(line, cap, it->key, it->nkey,
                                      it->exptime ? (int64_t)clock_unix(it->exptime) : -1,
                                      (uint64_t)clock_unix(it->time), it->cas,
                                      it->fetched, it->cls, it->total, it->flags);
    }
    return proto_compose_cachedump(line, cap, it->key, it->nkey, it->vlen,
                                   it->exptime ? (uint64_t)clock_unix(it->exptime) : 0);
}

/* An mgdump ends as a meta answer does ("EN"), the others with END. */
static void
dump_end(struct dispatch_ctx *d)
{
    if (d->dump.kind == DISPATCH_DUMP_MG) {
        dispatch_reply_line(d, "EN");
    } else {
        dispatch_reply(d, PROTO_RSP_END);
    }
}

/*
 * A flash item's key is in its record (its stub keeps none): its line is
 * a waiting answer, written when the read brings the key back, through
 * the worker's ring or the I/O threads as a get's value is; the walk goes
 * on meanwhile, in order, bounded by the connection's output bound.
 */
dispatch_result_t
admin_dump_more(struct dispatch_ctx *d)
{
    struct item_dump it;
    char line[DISPATCH_DUMP_LINE_MAX];

    for (int n = 0; n < DUMP_BATCH && !dispatch_out_full(d); n++) {
        if (!item_dump_next(&d->dump.cur, d->dump.classes, &it)) {
            dump_end(d);
            return DISPATCH_DONE;
        }
        if (it.stub) {
            dispatch_flash_dump(d, &it);
        } else {
            outq_add(d->out, line, admin_dump_line(&it, d->dump.kind, line, sizeof(line)));
        }
        if (d->dump.left > 0 && --d->dump.left == 0) {
            dump_end(d);
            return DISPATCH_DONE;
        }
    }
    return DISPATCH_MORE_DUMP;
}

static dispatch_result_t
dump_start(struct dispatch_ctx *d, dispatch_dump_t kind, uint64_t left)
{
    d->dump.kind = kind;
    d->dump.left = left;
    d->dump.cur = (struct item_cursor){ 0, 0 };
    if (kind != DISPATCH_DUMP_CACHE) {
        dispatch_reply(d, PROTO_RSP_OK);    /* memcached 1.6.45 opens its dumps so */
    }
    return admin_dump_more(d);
}

static void
class_select(uint64_t classes[4], unsigned cls)
{
    classes[cls / 64] |= 1ull << (cls % 64);
}

/*
 * "all" or "1,2,...", also "hash" where allowed (metadump: the same walk,
 * every item once). A class id past the last class is refused, as
 * memcached refuses one past its own.
 */
static bool
parse_classes(uint64_t classes[4], const char *arg, size_t n, bool hash_ok)
{
    memset(classes, 0, 4 * sizeof(uint64_t));
    if ((n == 3 && memcmp(arg, "all", 3) == 0) ||
        (hash_ok && n == 4 && memcmp(arg, "hash", 4) == 0)) {
        for (unsigned c = 1; c <= slab_class_count(); c++) {
            class_select(classes, c);
        }
        return true;
    }
    const char *p = arg, *end = arg + n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma != NULL ? comma : end;
        uint64_t c;
        if (!proto_parse_u64(p, (size_t)(stop - p), &c) || c == 0 ||
            c > slab_class_count()) {
            return false;
        }
        class_select(classes, (unsigned)c);
        p = comma != NULL ? comma + 1 : end;
    }
    return true;
}

/* "stats cachedump <class> <limit>" (limit 0: every item). */
dispatch_result_t
admin_cachedump(struct dispatch_ctx *d, const char *args, const char *end)
{
    struct args a;
    uint32_t cls, limit;

    args_split(args, end, &a);
    if (settings.dump_disabled) {
        dispatch_reply_line(d, "CLIENT_ERROR stats cachedump not allowed");
        return DISPATCH_DONE;
    }
    if (a.count < 2) {
        dispatch_reply_line(d, "CLIENT_ERROR bad command line");
        return DISPATCH_DONE;
    }
    if (!arg_u32(&a, 0, &cls) || !arg_u32(&a, 1, &limit)) {
        dispatch_reply(d, PROTO_RSP_BAD_FORMAT);
        return DISPATCH_DONE;
    }
    if (cls == 0 || cls > slab_class_count()) {
        dispatch_reply_line(d, "CLIENT_ERROR Illegal slab id");
        return DISPATCH_DONE;
    }
    memset(d->dump.classes, 0, sizeof(d->dump.classes));
    class_select(d->dump.classes, cls);
    return dump_start(d, DISPATCH_DUMP_CACHE, limit);
}

/* --- lru_crawler --------------------------------------------------------------- */

static dispatch_result_t
crawler_crawl(struct dispatch_ctx *d, const struct args *a)
{
    uint64_t classes[4];

    if (!crawler_enabled()) {
        dispatch_reply_line(d, "CLIENT_ERROR lru crawler disabled");
    } else if (arg_is(a, 1, "hash")) {
        dispatch_reply_line(d, "ERROR an unknown error happened");
    } else if (!parse_classes(classes, a->w[1], a->n[1], false)) {
        dispatch_reply_line(d, "BADCLASS invalid class id");
    } else if (crawler_start(classes) == CRAWLER_RUNNING) {
        dispatch_reply_line(d, "BUSY currently processing crawler request");
    } else {
        dispatch_reply(d, PROTO_RSP_OK);
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
crawler_metadump(struct dispatch_ctx *d, const struct args *a, dispatch_dump_t kind)
{
    if (!crawler_enabled()) {
        dispatch_reply_line(d, "CLIENT_ERROR lru crawler disabled");
        return DISPATCH_DONE;
    }
    bool mg = kind == DISPATCH_DUMP_MG;
    if (settings.dump_disabled) {
        dispatch_reply_line(d, mg ? "ERROR key dump not allowed" : "ERROR metadump not allowed");
        return DISPATCH_DONE;
    }
    /* memcached refuses a dump behind answers still queued (pipelined
     * commands in the same read): they would interleave with it. */
    if (outq_pending(d->out) > 0) {
        dispatch_reply_line(d, mg ? "ERROR cannot pipeline other commands before mgdump" :
                               "ERROR cannot pipeline other commands before metadump");
        return DISPATCH_DONE;
    }
    if (!parse_classes(d->dump.classes, a->w[1], a->n[1], true)) {
        dispatch_reply_line(d, "BADCLASS invalid class id");
        return DISPATCH_DONE;
    }
    return dump_start(d, kind, 0);
}

dispatch_result_t
admin_lru_crawler(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct args a;
    uint32_t v;

    args_split(req->sub, req->sub + req->nsub, &a);
    if (a.count == 2 && arg_is(&a, 0, "crawl")) {
        return crawler_crawl(d, &a);
    }
    if (a.count == 2 && arg_is(&a, 0, "metadump")) {
        return crawler_metadump(d, &a, DISPATCH_DUMP_META);
    }
    if (a.count == 2 && arg_is(&a, 0, "mgdump")) {
        return crawler_metadump(d, &a, DISPATCH_DUMP_MG);
    }
    if (a.count == 2 && (arg_is(&a, 0, "tocrawl") || arg_is(&a, 0, "sleep"))) {
        bool sleep = arg_is(&a, 0, "sleep");
        if (!arg_u32(&a, 1, &v)) {
            dispatch_reply(d, PROTO_RSP_BAD_FORMAT);
        } else if (sleep && v > CRAWLER_SLEEP_MAX) {
            dispatch_reply_line(d, "CLIENT_ERROR sleep must be one second or less");
        } else {
            if (sleep) {
                crawler_set_sleep(v);
            } else {
                crawler_set_tocrawl(v);
            }
            dispatch_reply(d, PROTO_RSP_OK);
        }
        return DISPATCH_DONE;
    }
    if (a.count == 1 && arg_is(&a, 0, "enable")) {
        if (crawler_enable() == 0) {
            dispatch_reply(d, PROTO_RSP_OK);
        } else {
            dispatch_reply_line(d, "ERROR failed to start lru crawler thread");
        }
        return DISPATCH_DONE;
    }
    if (a.count == 1 && arg_is(&a, 0, "disable")) {
        crawler_disable();
        dispatch_reply(d, PROTO_RSP_OK);
        return DISPATCH_DONE;
    }
    dispatch_reply(d, PROTO_RSP_ERROR);
    return DISPATCH_DONE;
}

/* --- slabs ----------------------------------------------------------------------- */

static dispatch_result_t
slabs_reassign(struct dispatch_ctx *d, const struct args *a)
{
    static const char *const answers[] = {
        [EVICT_REASSIGN_OK] = "OK",
        [EVICT_REASSIGN_BUSY] = "BUSY currently processing reassign request",
        [EVICT_REASSIGN_BADCLASS] = "BADCLASS invalid src or dst class id",
        [EVICT_REASSIGN_NOSPARE] = "NOSPARE source class has no spare pages",
        [EVICT_REASSIGN_SAME] = "SAME src and dst class are identical",
    };
    int32_t src, dst;

    if (!settings.slab_reassign) {
        dispatch_reply_line(d, "CLIENT_ERROR slab reassignment disabled");
    } else if (!arg_i32(a, 1, &src) || !arg_i32(a, 2, &dst)) {
        dispatch_reply(d, PROTO_RSP_BAD_FORMAT);
    } else {
        dispatch_reply_line(d, answers[evict_reassign(src, dst)]);
    }
    return DISPATCH_DONE;
}

/*
 * `slabs automove window N`: how much history `auto` weighs, 3 to 1800
 * as memcached bounds its automover's window (sizing_window_set).
 */
static dispatch_result_t
slabs_automove_window(struct dispatch_ctx *d, const struct args *a)
{
    bool noreply = args_noreply(a);
    uint32_t window;

    if (a->count < 3 || !arg_u32(a, 2, &window)) {
        answer(d, noreply, "CLIENT_ERROR bad command line format");
    } else if (window < 3 || window > 1800) {
        answer(d, noreply, "CLIENT_ERROR automove window too low or too high");
    } else {
        sizing_window_set(window);
        answer(d, noreply, "OK");
    }
    return DISPATCH_DONE;
}

/*
 * memcached's automove levels pick how its page mover runs; here they pick
 * the eviction stack (README): 0 never moves slabs, 1 is the default
 * stack, 2 moves a slab on every eviction. The window is auto's history
 * (above); slabcache has no automove ratio, so `slabs automove ratio` is
 * refused, not ignored.
 */
static dispatch_result_t
slabs_automove(struct dispatch_ctx *d, const struct args *a)
{
    bool noreply = args_noreply(a);
    uint32_t level;
    double ratio;

    if (arg_is(a, 1, "window")) {
        return slabs_automove_window(d, a);
    }
    if (arg_is(a, 1, "ratio")) {
        if (a->count < 3 || !arg_double(a, 2, &ratio)) {
            answer(d, noreply, "ERROR");
        } else {
            answer(d, noreply, "CLIENT_ERROR slabcache has no automove ratio");
        }
        return DISPATCH_DONE;
    }
    if (!arg_u32(a, 1, &level)) {
        answer(d, noreply, "CLIENT_ERROR bad command line format");
        return DISPATCH_DONE;
    }
    const char *stack = evict_automove_stack(level);
    if (stack == NULL) {
        answer(d, noreply, "ERROR");
    } else if (level > 0 && !settings.slab_reassign) {
        answer(d, noreply, "CLIENT_ERROR slab reassignment disabled");
    } else if (evict_configure(stack, strlen(stack)) != 0) {
        answer(d, noreply, "SERVER_ERROR cannot change the eviction stack");
    } else {
        answer(d, noreply, "OK");
    }
    return DISPATCH_DONE;
}

dispatch_result_t
admin_slabs(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct args a;

    args_split(req->sub, req->sub + req->nsub, &a);
    if (a.count == 3 && arg_is(&a, 0, "reassign")) {
        return slabs_reassign(d, &a);
    }
    if (a.count >= 2 && arg_is(&a, 0, "automove")) {
        return slabs_automove(d, &a);
    }
    dispatch_reply(d, PROTO_RSP_ERROR);
    return DISPATCH_DONE;
}

/* --- lru ---------------------------------------------------------------------- */

/*
 * memcached's segmented LRU knobs. slabcache's single CLOCK per class is
 * what memcached runs without its LRU maintainer thread, so it answers as
 * memcached does then: `lru mode` and `lru temp_ttl` need the maintainer
 * (ERROR); `lru tune` is checked and accepted, and has no effect there
 * either.
 */
dispatch_result_t
admin_lru(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct args a;
    uint32_t hot, warm;
    double hot_factor, warm_factor;

    args_split(req->sub, req->sub + req->nsub, &a);
    bool noreply = args_noreply(&a);
    if (!arg_is(&a, 0, "tune") || a.count < 5) {
        answer(d, noreply, "ERROR");
    } else if (!arg_u32(&a, 1, &hot) || !arg_u32(&a, 2, &warm) ||
               !arg_double(&a, 3, &hot_factor) || !arg_double(&a, 4, &warm_factor)) {
        answer(d, noreply, "ERROR");
    } else if ((uint64_t)hot + warm > 80) {
        answer(d, noreply, "ERROR hot and warm pcts must not exceed 80");
    } else if (hot_factor <= 0 || warm_factor <= 0) {
        answer(d, noreply, "ERROR hot/warm age factors must be greater than 0");
    } else {
        answer(d, noreply, "OK");
    }
    return DISPATCH_DONE;
}

/* --- extstore ------------------------------------------------------------------ */

/*
 * "extstore <knob> <value>", memcached's run-time flash tuning: OK, or
 * ERROR as memcached answers anything it cannot take. The knobs with a
 * meaning here change at once (stats settings shows them); compact_under
 * is fixed at start here (the log's free pages are laid out by it), and
 * low_ttl, drop_under, max_sleep and the deprecated free_memchunks have
 * no counterpart (-o refuses them too).
 */
static bool
extstore_set(const struct args *a)
{
    uint32_t v;
    double f;

    if (arg_is(a, 0, "item_size") && arg_u32(a, 1, &v)) {
        __atomic_store_n(&settings.ext_item_size, (long)v, __ATOMIC_RELAXED);
        flash_set_min_value(v);
        return true;
    }
    if (arg_is(a, 0, "item_age") && arg_u32(a, 1, &v)) {
        if (item_flash_age_set(v) != 0) {
            return false;
        }
        __atomic_store_n(&settings.ext_item_age, (long)v, __ATOMIC_RELAXED);
        return true;
    }
    if (arg_is(a, 0, "recache_rate") && arg_u32(a, 1, &v)) {
        __atomic_store_n(&settings.ext_recache_rate, (long)v, __ATOMIC_RELAXED);
        return true;
    }
    if (arg_is(a, 0, "drop_unread") && arg_u32(a, 1, &v)) {
        __atomic_store_n(&settings.ext_drop_unread, v != 0, __ATOMIC_RELAXED);
        flash_set_drop_unread(v != 0);
        return true;
    }
    if (arg_is(a, 0, "max_frag") && arg_double(a, 1, &f) && f >= 0 && f <= 1) {
        __atomic_store(&settings.ext_max_frag, &f, __ATOMIC_RELAXED);
        flash_set_rewrite_share(f);
        return true;
    }
    return false;
}

/* One command at a time: a knob's setting and its effect change together. */
static pthread_mutex_t extstore_lock = PTHREAD_MUTEX_INITIALIZER;

dispatch_result_t
admin_extstore(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct args a;

    args_split(req->sub, req->sub + req->nsub, &a);
    bool noreply = args_noreply(&a);
    pthread_mutex_lock(&extstore_lock);
    bool ok = a.count >= 2 && extstore_set(&a);
    pthread_mutex_unlock(&extstore_lock);
    answer(d, noreply, ok ? "OK" : "ERROR");
    return DISPATCH_DONE;
}

/* --- stats detail ------------------------------------------------------------- */

static void
detail_line(void *ctx, const char *text)
{
    dispatch_reply_line(ctx, text);
}

dispatch_result_t
admin_stats_detail(struct dispatch_ctx *d, const char *args, const char *end)
{
    struct args a;

    args_split(args, end, &a);
    if (arg_is(&a, 0, "on") || arg_is(&a, 0, "off")) {
        stats_detail_set_enabled(arg_is(&a, 0, "on"));
        dispatch_reply(d, PROTO_RSP_OK);
    } else if (arg_is(&a, 0, "dump")) {
        stats_detail_dump(detail_line, d);
        dispatch_reply(d, PROTO_RSP_END);
    } else {
        dispatch_reply_line(d, "CLIENT_ERROR usage: stats detail on|off|dump");
    }
    return DISPATCH_DONE;
}

/* --- watch ------------------------------------------------------------------------ */

/*
 * "watch [kinds...]": the connection becomes a log stream (core drains
 * the watcher). Kinds slabcache does not log (rawcmds, sysevents,
 * proxy*) are refused rather than accepted and left silent.
 */
dispatch_result_t
admin_watch(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct args a;
    uint32_t kinds = 0;

    args_split(req->sub, req->sub + req->nsub, &a);
    bool noreply = args_noreply(&a);
    if (settings.watch_disabled) {
        answer(d, noreply, "CLIENT_ERROR watch commands not allowed");
        return DISPATCH_DONE;
    }
    if (outq_pending(d->out) > 0) {
        answer(d, noreply, "ERROR cannot pipeline other commands before watch");
        return DISPATCH_DONE;
    }
    /* As in memcached, "noreply" is no kind: it makes the ERROR silent. */
    for (size_t i = 0; i < a.count; i++) {
        if (arg_is(&a, i, "fetchers")) {
            kinds |= LOGGER_FETCHERS;
        } else if (arg_is(&a, i, "mutations")) {
            kinds |= LOGGER_MUTATIONS;
        } else if (arg_is(&a, i, "evictions")) {
            kinds |= LOGGER_EVICTIONS;
        } else if (arg_is(&a, i, "connevents")) {
            kinds |= LOGGER_CONNEVENTS;
        } else if (arg_is(&a, i, "deletions")) {
            kinds |= LOGGER_DELETIONS;
        } else {
            answer(d, noreply, "ERROR");
            return DISPATCH_DONE;
        }
    }
    if (kinds == 0) {
        kinds = LOGGER_FETCHERS;
    }
    d->watcher = logger_watch(kinds);
    if (d->watcher == NULL) {
        answer(d, noreply, "WATCHER_TOO_MANY log watcher limit reached");
        return DISPATCH_DONE;
    }
    dispatch_reply(d, PROTO_RSP_OK);
    return DISPATCH_WATCH;
}

void
admin_evict_hook(struct item *it, rel_time_t now)
{
    if (!logger_wants(LOGGER_EVICTIONS)) {
        return;
    }
    int64_t ttl = it->exptime > 0 ? (int64_t)it->exptime - (int64_t)now : -1;
    logger_eviction(item_key(it), item_nkey(it),
                    (item_iflags(it) & ITEM_FETCHED) != 0, ttl, now - it->time,
                    slab_cls_of(it), item_vlen(it));
}
