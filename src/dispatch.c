/*
 * dispatch.c -- map each parsed request onto storage and compose its
 * answer (see dispatch.h). One function per command family; the table
 * at the bottom routes commands to them.
 */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>


#include "clock.h"
#include "config.h"
#include "evict.h"
#include "item.h"
#include "log.h"
#include "outq.h"
#include "settings.h"
#include "slab.h"
#include "stats.h"

#define MEMLIMIT_MIN_MB 8
#define DISPATCH_COPY_MAX 256   /* smaller values are copied, see reply_value */

static dispatch_shutdown_fn shutdown_hook;

void
dispatch_set_shutdown(dispatch_shutdown_fn fn)
{
    shutdown_hook = fn;
}

/* --- output helpers --------------------------------------------------------- */

static void
reply(struct dispatch_ctx *d, proto_rsp_t rsp)
{
    size_t len;
    const char *s = proto_rsp_str(rsp, &len);

    outq_add(d->out, s, len);
}

static void
reply_line(struct dispatch_ctx *d, const char *text)
{
    char buf[PROTO_LINE_MAX];
    size_t n = proto_compose_line(buf, sizeof(buf), text);

    outq_add(d->out, buf, n);
}

void
dispatch_ref_release(void *ref)
{
    item_release(ref);
}

/*
 * Queue "VALUE ..." and the value. A value of DISPATCH_COPY_MAX bytes or
 * more is queued by reference (the item stays referenced until written).
 * A smaller one is copied next to its header and released at once: on
 * loopback the kernel's cost per iovec outweighs a copy that small
 * (measured, notes/performance.md: kernel CPU per get 5.6-5.8 us copied
 * vs 6.6-7.1 us by reference, closed-loop throughput 1.19-1.26x vs
 * 0.92-1.03x memcached's).
 */
static void
reply_value(struct dispatch_ctx *d, struct item *it, bool with_cas)
{
    char hdr[PROTO_VALUE_HDR_MAX];
    size_t n = proto_compose_value(hdr, sizeof(hdr), item_key(it), item_nkey(it),
                                   it->flags, item_vlen(it), with_cas, item_cas(it));

    if (outq_add(d->out, hdr, n) != 0) {
        item_release(it);       /* no header, so no value either */
        return;
    }
    if (it->nbytes < DISPATCH_COPY_MAX) {
        outq_add(d->out, item_value(it), it->nbytes);
        item_release(it);
        return;
    }
    outq_add_ref(d->out, item_value(it), it->nbytes, it);
}

static void
emit_stat(void *ctx, const char *name, const char *value)
{
    struct dispatch_ctx *d = ctx;
    char buf[512];
    size_t n = proto_compose_stat(buf, sizeof(buf), name, value);

    if (n > 0) {
        outq_add(d->out, buf, n);
    }
}

/* --- commands ------------------------------------------------------------------ */

/* One key of a multi-get: look it up, count it, answer it. */
static void
get_one(struct dispatch_ctx *d, const char *key, size_t nkey)
{
    proto_cmd_t cmd = d->mget.cmd;
    bool touch = cmd == PROTO_CMD_GAT || cmd == PROTO_CMD_GATS;
    bool with_cas = cmd == PROTO_CMD_GETS || cmd == PROTO_CMD_GATS;
    rel_time_t exptime = touch ? clock_exptime(d->mget.exptime) : 0;
    item_miss_t miss;
    struct item *it = item_get(key, nkey, touch, exptime, &miss);

    STATS_INCR(d->stats, cmd_get);
    if (touch) {
        STATS_INCR(d->stats, cmd_touch);
    }
    if (it != NULL) {
        if (touch) {
            STATS_INCR(d->stats, touch_hits);
            STATS_CLASS_INCR(d->stats, slab_cls_of(it), touch_hits);
        } else {
            STATS_INCR(d->stats, get_hits);
            STATS_CLASS_INCR(d->stats, slab_cls_of(it), get_hits);
        }
        reply_value(d, it, with_cas);
        return;
    }
    if (touch) {
        STATS_INCR(d->stats, touch_misses);
    } else {
        STATS_INCR(d->stats, get_misses);
    }
    if (miss == ITEM_MISS_EXPIRED) {
        STATS_INCR(d->stats, get_expired);
    } else if (miss == ITEM_MISS_FLUSHED) {
        STATS_INCR(d->stats, get_flushed);
    }
}

static bool
out_full(const struct dispatch_ctx *d)
{
    return outq_pending(d->out) > d->out_limit ||
           outq_segments(d->out) > d->out_segs_limit;
}

dispatch_result_t
dispatch_get_keys(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->keys, *key;
    size_t nkey;

    for (;;) {
        const char *before = cursor;
        if (!proto_key_next(&cursor, req->keys_end, &key, &nkey)) {
            return DISPATCH_DONE;
        }
        if (out_full(d)) {
            d->mget.resume = before;
            return DISPATCH_MORE_KEYS;
        }
        get_one(d, key, nkey);
        d->mget.nkeys++;
    }
}

static void
get_start(struct dispatch_ctx *d, const struct proto_req *req)
{
    d->mget.cmd = req->cmd;
    d->mget.exptime = req->exptime;
    d->mget.nkeys = 0;
    d->mget.mark = outq_mark(d->out);
}

dispatch_result_t
dispatch_get_begin(struct dispatch_ctx *d, const struct proto_req *req)
{
    get_start(d, req);
    if (dispatch_get_keys(d, req) == DISPATCH_DONE) {
        d->mget.resume = req->keys_end;
    }
    return DISPATCH_MORE_KEYS;
}

void
dispatch_get_finish(struct dispatch_ctx *d, const char *error)
{
    if (error != NULL) {
        outq_rollback(d->out, d->mget.mark);
        reply_line(d, error);
    } else if (d->mget.nkeys == 0 && (d->mget.cmd == PROTO_CMD_GET ||
                                       d->mget.cmd == PROTO_CMD_GETS)) {
        reply(d, PROTO_RSP_ERROR);  /* "get" and spaces, as memcached */
    } else {
        reply(d, PROTO_RSP_END);
    }
}

/* A whole get line (validated up front by the parser). */
static dispatch_result_t
do_get(struct dispatch_ctx *d, const struct proto_req *req)
{
    get_start(d, req);
    if (dispatch_get_keys(d, req) == DISPATCH_MORE_KEYS) {
        return DISPATCH_MORE_KEYS;
    }
    reply(d, PROTO_RSP_END);
    return DISPATCH_DONE;
}

static dispatch_result_t
do_update(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct item *it;
    item_status_t st;

    STATS_INCR(d->stats, cmd_set);
    st = item_alloc(req->key, req->nkey, req->flags,
                    clock_exptime(req->exptime), req->vlen, &it);
    if (st != ITEM_OK) {
        if (!req->noreply) {
            reply(d, st == ITEM_TOO_LARGE ? PROTO_RSP_TOO_LARGE : PROTO_RSP_OOM);
        }
        if (st == ITEM_TOO_LARGE) {
            STATS_INCR(d->stats, store_too_large);
        } else {
            STATS_INCR(d->stats, store_no_memory);
        }
        /* As memcached: a failed set must not leave the old value behind. */
        if (req->cmd == PROTO_CMD_SET) {
            item_unlink_key(req->key, req->nkey);
        }
        d->swallow = (uint64_t)req->vlen + 2;
        return DISPATCH_SWALLOW;
    }
    STATS_CLASS_INCR(d->stats, slab_cls_of(it), cmd_set);
    d->it = it;
    d->data = item_value(it);
    d->ndata = req->vlen + 2;
    d->cmd = req->cmd;
    d->cas = req->cas;
    d->noreply = req->noreply;
    return DISPATCH_NEED_DATA;
}

static item_store_op_t
store_op(proto_cmd_t cmd)
{
    switch (cmd) {
    case PROTO_CMD_ADD:     return ITEM_OP_ADD;
    case PROTO_CMD_REPLACE: return ITEM_OP_REPLACE;
    case PROTO_CMD_APPEND:  return ITEM_OP_APPEND;
    case PROTO_CMD_PREPEND: return ITEM_OP_PREPEND;
    case PROTO_CMD_CAS:     return ITEM_OP_CAS;
    default:                return ITEM_OP_SET;
    }
}

void
dispatch_data_done(struct dispatch_ctx *d)
{
    struct item *it = d->it;
    proto_rsp_t rsp;

    d->it = NULL;
    if (!proto_data_ok(d->data + d->ndata - 2)) {
        rsp = PROTO_RSP_BAD_CHUNK;
    } else {
        item_status_t st = item_store(it, store_op(d->cmd), d->cas);
        switch (st) {
        case ITEM_OK:        rsp = PROTO_RSP_STORED; break;
        case ITEM_EXISTS:    rsp = PROTO_RSP_EXISTS; break;
        case ITEM_NOT_FOUND: rsp = PROTO_RSP_NOT_FOUND; break;
        default:             rsp = PROTO_RSP_NOT_STORED; break;
        }
        if (d->cmd == PROTO_CMD_CAS) {
            if (st == ITEM_OK) {
                STATS_INCR(d->stats, cas_hits);
                STATS_CLASS_INCR(d->stats, slab_cls_of(it), cas_hits);
            } else if (st == ITEM_EXISTS) {
                STATS_INCR(d->stats, cas_badval);
                STATS_CLASS_INCR(d->stats, slab_cls_of(it), cas_badval);
            } else if (st == ITEM_NOT_FOUND) {
                STATS_INCR(d->stats, cas_misses);
            }
        }
    }
    item_release(it);
    if (!d->noreply) {
        reply(d, rsp);
    }
}

void
dispatch_abort(struct dispatch_ctx *d)
{
    if (d->it != NULL) {
        item_release(d->it);
        d->it = NULL;
    }
}

static dispatch_result_t
do_arith(struct dispatch_ctx *d, const struct proto_req *req)
{
    bool incr = req->cmd == PROTO_CMD_INCR;
    uint64_t value = 0;
    uint8_t cls = 0;
    item_status_t st = item_arith(req->key, req->nkey, incr, req->delta, &value,
                                  &cls);

    if (st == ITEM_NOT_FOUND) {
        if (incr) {
            STATS_INCR(d->stats, incr_misses);
        } else {
            STATS_INCR(d->stats, decr_misses);
        }
    } else if (st == ITEM_OK) {
        if (incr) {
            STATS_INCR(d->stats, incr_hits);
            STATS_CLASS_INCR(d->stats, cls, incr_hits);
        } else {
            STATS_INCR(d->stats, decr_hits);
            STATS_CLASS_INCR(d->stats, cls, decr_hits);
        }
    }
    if (req->noreply) {
        return DISPATCH_DONE;
    }
    switch (st) {
    case ITEM_OK: {
        char buf[32];
        outq_add(d->out, buf, proto_compose_uint(buf, sizeof(buf), value));
        break;
    }
    case ITEM_NOT_FOUND:   reply(d, PROTO_RSP_NOT_FOUND); break;
    case ITEM_NON_NUMERIC: reply(d, PROTO_RSP_NON_NUMERIC); break;
    default:               reply(d, PROTO_RSP_INCR_OOM); break;
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
do_delete(struct dispatch_ctx *d, const struct proto_req *req)
{
    uint8_t cls = 0;
    item_status_t st = item_delete(req->key, req->nkey, &cls);

    if (st == ITEM_OK) {
        STATS_INCR(d->stats, delete_hits);
        STATS_CLASS_INCR(d->stats, cls, delete_hits);
    } else {
        STATS_INCR(d->stats, delete_misses);
    }
    if (!req->noreply) {
        reply(d, st == ITEM_OK ? PROTO_RSP_DELETED : PROTO_RSP_NOT_FOUND);
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
do_touch(struct dispatch_ctx *d, const struct proto_req *req)
{
    uint8_t cls = 0;
    item_status_t st = item_touch(req->key, req->nkey, clock_exptime(req->exptime),
                                  &cls);

    STATS_INCR(d->stats, cmd_touch);
    if (st == ITEM_OK) {
        STATS_INCR(d->stats, touch_hits);
        STATS_CLASS_INCR(d->stats, cls, touch_hits);
    } else {
        STATS_INCR(d->stats, touch_misses);
    }
    if (!req->noreply) {
        reply(d, st == ITEM_OK ? PROTO_RSP_TOUCHED : PROTO_RSP_NOT_FOUND);
    }
    return DISPATCH_DONE;
}

/* -F: memcached refuses before it looks at the delay (and counts it). */
static bool
flush_refused(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (!settings.flush_disabled) {
        return false;
    }
    if (!req->noreply) {
        reply_line(d, "CLIENT_ERROR flush_all not allowed");
    }
    return true;
}

static dispatch_result_t
do_flush_all(struct dispatch_ctx *d, const struct proto_req *req)
{
    STATS_INCR(d->stats, cmd_flush);
    if (flush_refused(d, req)) {
        return DISPATCH_DONE;
    }
    item_flush(req->has_arg ? req->arg : 0);
    if (!req->noreply) {
        reply(d, PROTO_RSP_OK);
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
do_version(struct dispatch_ctx *d, const struct proto_req *req)
{
    (void)req;
    reply_line(d, "VERSION " SC_PROTOCOL_VERSION);
    return DISPATCH_DONE;
}

static dispatch_result_t
do_verbosity(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->has_arg) {
        log_set_level((int)req->arg);
    }
    if (!req->noreply) {
        reply(d, PROTO_RSP_OK);
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
do_quit(struct dispatch_ctx *d, const struct proto_req *req)
{
    (void)d;
    (void)req;
    return DISPATCH_CLOSE;
}

static dispatch_result_t
do_shutdown(struct dispatch_ctx *d, const struct proto_req *req)
{
    (void)req;
    if (!settings.shutdown_ok || shutdown_hook == NULL) {
        reply(d, PROTO_RSP_SHUTDOWN_DISABLED);
        return DISPATCH_DONE;
    }
    shutdown_hook();
    return DISPATCH_CLOSE;
}

static dispatch_result_t
do_memlimit(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->arg < MEMLIMIT_MIN_MB) {
        if (!req->noreply) {
            reply_line(d, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
        }
        return DISPATCH_DONE;
    }
    slab_set_limit((size_t)req->arg * 1024 * 1024);
    if (!req->noreply) {
        reply(d, PROTO_RSP_OK);
    }
    return DISPATCH_DONE;
}

/* --- key dumps ------------------------------------------------------------- */

#define DUMP_BATCH 256          /* items per turn of a dump */

dispatch_result_t
dispatch_dump_more(struct dispatch_ctx *d)
{
    struct item_dump it;
    char line[PROTO_KEY_MAX * 3 + 160];

    for (int n = 0; n < DUMP_BATCH && !out_full(d); n++) {
        if (!item_dump_next(&d->dump.cur, d->dump.classes, &it)) {
            reply(d, PROTO_RSP_END);
            return DISPATCH_DONE;
        }
        size_t len;
        if (d->dump.meta) {
            len = proto_compose_metadump(line, sizeof(line), it.key, it.nkey,
                                         it.exptime ? (int64_t)clock_unix(it.exptime) : -1,
                                         (uint64_t)clock_unix(it.time), it.cas,
                                         it.fetched, it.cls, it.total);
        } else {
            len = proto_compose_cachedump(line, sizeof(line), it.key, it.nkey,
                                          it.vlen, it.exptime ?
                                          (uint64_t)clock_unix(it.exptime) : 0);
        }
        outq_add(d->out, line, len);
        if (d->dump.left > 0 && --d->dump.left == 0) {
            reply(d, PROTO_RSP_END);
            return DISPATCH_DONE;
        }
    }
    return DISPATCH_MORE_DUMP;
}

static dispatch_result_t
dump_start(struct dispatch_ctx *d, bool meta, uint64_t left)
{
    d->dump.meta = meta;
    d->dump.left = left;
    d->dump.cur = (struct item_cursor){ 0, 0 };
    return dispatch_dump_more(d);
}

static void
dump_select(struct dispatch_ctx *d, unsigned cls)
{
    d->dump.classes[cls / 64] |= 1ull << (cls % 64);
}

/*
 * "all", "hash" (the same walk: every item once) or "1,2,...". A class id
 * past the last class is refused (BADCLASS), as memcached refuses one
 * past its own.
 */
static bool
dump_classes(struct dispatch_ctx *d, const char *arg, size_t n)
{
    memset(d->dump.classes, 0, sizeof(d->dump.classes));
    if ((n == 3 && memcmp(arg, "all", 3) == 0) ||
        (n == 4 && memcmp(arg, "hash", 4) == 0)) {
        for (unsigned c = 1; c <= slab_class_count(); c++) {
            dump_select(d, c);
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
        dump_select(d, (unsigned)c);
        p = comma != NULL ? comma + 1 : end;
    }
    return true;
}

/* "lru_crawler metadump <classes>": memcached-tool's and memcdump's dump. */
static dispatch_result_t
do_lru_crawler(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->sub, *end = req->sub + req->nsub;
    const char *sub, *arg;
    size_t nsub, narg;

    if (!proto_key_next(&cursor, end, &sub, &nsub) ||
        nsub != 8 || memcmp(sub, "metadump", 8) != 0 ||
        !proto_key_next(&cursor, end, &arg, &narg)) {
        reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    if (!dump_classes(d, arg, narg)) {
        reply_line(d, "BADCLASS invalid class id");
        return DISPATCH_DONE;
    }
    return dump_start(d, true, 0);
}

/* "stats cachedump <class> <limit>" (limit 0: every item). */
static dispatch_result_t
do_cachedump(struct dispatch_ctx *d, const char *cursor, const char *end)
{
    const char *w;
    size_t nw;
    uint64_t cls, limit;

    if (!proto_key_next(&cursor, end, &w, &nw)) {
        reply_line(d, "CLIENT_ERROR bad command line");
        return DISPATCH_DONE;
    }
    bool cls_ok = proto_parse_u64(w, nw, &cls);
    if (!proto_key_next(&cursor, end, &w, &nw)) {
        reply_line(d, "CLIENT_ERROR bad command line");
        return DISPATCH_DONE;
    }
    if (!cls_ok || !proto_parse_u64(w, nw, &limit)) {
        reply(d, PROTO_RSP_BAD_FORMAT);
        return DISPATCH_DONE;
    }
    if (cls == 0 || cls > slab_class_count()) {
        reply_line(d, "CLIENT_ERROR Illegal slab id");
        return DISPATCH_DONE;
    }
    memset(d->dump.classes, 0, sizeof(d->dump.classes));
    dump_select(d, (unsigned)cls);
    return dump_start(d, false, limit);
}

/* Like memcached, only the first word after "stats" picks the section. */
static dispatch_result_t
do_stats(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->sub, *word = req->sub;
    size_t nword = 0;

    proto_key_next(&cursor, req->sub + req->nsub, &word, &nword);
    if (nword == 9 && memcmp(word, "cachedump", 9) == 0) {
        return do_cachedump(d, cursor, req->sub + req->nsub);
    }
    if (nword == 5 && memcmp(word, "reset", 5) == 0) {
        stats_reset();
        reply(d, PROTO_RSP_RESET);
        return DISPATCH_DONE;
    }
    stats_section_t section = stats_section(word, nword);
    if (section == STATS_UNKNOWN) {
        reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    stats_emit(section, emit_stat, d);
    reply(d, PROTO_RSP_END);
    return DISPATCH_DONE;
}

/* "config evict <list>": change the eviction stack at run time. */
static dispatch_result_t
do_config(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->sub, *end = req->sub + req->nsub;
    const char *name, *list;
    size_t nname, nlist;

    if (!proto_key_next(&cursor, end, &name, &nname) ||
        nname != 5 || memcmp(name, "evict", 5) != 0) {
        reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    if (proto_key_next(&cursor, end, &list, &nlist) &&
        !proto_key_next(&cursor, end, &name, &nname) &&
        evict_configure(list, nlist) == 0) {
        reply(d, PROTO_RSP_OK);
    } else {
        reply_line(d, "CLIENT_ERROR bad eviction policy list");
    }
    return DISPATCH_DONE;
}

typedef dispatch_result_t (*command_fn)(struct dispatch_ctx *,
                                        const struct proto_req *);

static command_fn
command_handler(proto_cmd_t cmd)
{
    switch (cmd) {
    case PROTO_CMD_GET:
    case PROTO_CMD_GETS:
    case PROTO_CMD_GAT:
    case PROTO_CMD_GATS:           return do_get;
    case PROTO_CMD_SET:
    case PROTO_CMD_ADD:
    case PROTO_CMD_REPLACE:
    case PROTO_CMD_APPEND:
    case PROTO_CMD_PREPEND:
    case PROTO_CMD_CAS:            return do_update;
    case PROTO_CMD_INCR:
    case PROTO_CMD_DECR:           return do_arith;
    case PROTO_CMD_DELETE:         return do_delete;
    case PROTO_CMD_TOUCH:          return do_touch;
    case PROTO_CMD_FLUSH_ALL:      return do_flush_all;
    case PROTO_CMD_VERSION:        return do_version;
    case PROTO_CMD_VERBOSITY:      return do_verbosity;
    case PROTO_CMD_QUIT:           return do_quit;
    case PROTO_CMD_SHUTDOWN:       return do_shutdown;
    case PROTO_CMD_CACHE_MEMLIMIT: return do_memlimit;
    case PROTO_CMD_STATS:          return do_stats;
    case PROTO_CMD_CONFIG:         return do_config;
    case PROTO_CMD_LRU_CRAWLER:    return do_lru_crawler;
    case PROTO_CMD_NONE:           break;
    }
    return NULL;
}

dispatch_result_t
dispatch_request(struct dispatch_ctx *d, const struct proto_req *req)
{
    command_fn fn = command_handler(req->cmd);

    if (fn == NULL) {
        reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    return fn(d, req);
}

dispatch_result_t
dispatch_error(struct dispatch_ctx *d, const struct proto_req *req)
{
    /* A bad delay reached memcached's flush_all handler; ERROR did not. */
    if (req->cmd == PROTO_CMD_FLUSH_ALL && strcmp(req->error, "ERROR") != 0) {
        STATS_INCR(d->stats, cmd_flush);
        if (flush_refused(d, req)) {
            return DISPATCH_DONE;
        }
    }
    if (!req->noreply) {
        reply_line(d, req->error);
    }
    if (req->swallow) {
        d->swallow = (uint64_t)req->vlen + 2;
        return DISPATCH_SWALLOW;
    }
    return DISPATCH_DONE;
}
