/*
 * dispatch.c -- the classic ASCII commands: map each parsed request onto
 * storage and compose its answer (see dispatch.h), and the fetch, CAS and
 * arithmetic accounting the meta and binary handlers share. One function
 * per command family; command_handler() routes commands to them. Answers
 * are queued through the reply API (dispatch_reply.c).
 */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "admin.h"
#include "bin_sasl.h"
#include "cache.h"
#include "clock.h"
#include "config.h"
#include "evict.h"
#include "hash.h"
#include "item.h"
#include "log.h"
#include "logger.h"
#include "outq.h"
#include "settings.h"
#include "slab.h"
#include "stats.h"

#define MEMLIMIT_MIN_MB 8
#define MEMLIMIT_MAX_MB 1000000000  /* larger: bytes given for megabytes */

static dispatch_shutdown_fn shutdown_hook;
static dispatch_refresh_certs_fn refresh_certs_hook;

void
dispatch_set_refresh_certs(dispatch_refresh_certs_fn fn)
{
    refresh_certs_hook = fn;
}

void
dispatch_set_shutdown(dispatch_shutdown_fn fn)
{
    shutdown_hook = fn;
}

/*
 * Queue "VALUE ..." and the value. A value of DISPATCH_COPY_MAX bytes or
 * more is queued by reference (the item stays referenced until written).
 * A smaller one is copied next to its header and released at once: on
 * loopback the kernel's cost per iovec outweighs a copy that small
 * (notes/performance.md has the figures).
 */
static void
reply_value(struct dispatch_ctx *d, struct item *it, const char *key, size_t nkey,
            bool with_cas)
{
    char hdr[PROTO_VALUE_HDR_MAX];
    /* The key asked for (the item's: a flash stub keeps none). */
    size_t n = proto_compose_value(hdr, sizeof(hdr), key, nkey,
                                   it->flags, item_vlen(it), with_cas, item_cas(it));
    uint64_t hit = outq_mark(d->out);

    if (outq_add(d->out, hdr, n) != 0) {
        item_release(it);       /* no header, so no value either */
        return;
    }
    if (d->log_replies) {
        log_debug(">%d sending key %.*s", d->fd, (int)nkey, key);
    }
    if (item_is_flash(it)) {
        uint64_t miss_at = outq_mark(d->out);     /* a miss answers nothing */
        dispatch_flash_reply(d, it, key, nkey, hit, miss_at, it->nbytes);
        return;
    }
    dispatch_reply_data(d, it);
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

/* A `watch fetchers` line for one key looked up. */
static void
log_get(struct dispatch_ctx *d, const char *key, size_t nkey,
        struct item *it, item_miss_t miss)
{
    logger_get_status_t st = it != NULL ? LOGGER_GET_FOUND :
                             miss == ITEM_MISS_EXPIRED ? LOGGER_GET_EXPIRED :
                             miss == ITEM_MISS_FLUSHED ? LOGGER_GET_FLUSHED :
                             LOGGER_GET_NOT_FOUND;

    logger_item_get(key, nkey, st, it != NULL ? slab_cls_of(it) : 0, d->fd,
                    it != NULL ? item_vlen(it) : 0);
}

/*
 * memcached logs a fetch for every command that looks its key up first
 * (stores, delete, touch, incr/decr), found or not: the same line here,
 * from a lookup that changes nothing, made only while someone watches.
 */
void
dispatch_log_lookup(struct dispatch_ctx *d, const char *key, size_t nkey)
{
    item_miss_t miss;
    uint8_t cls = 0;
    uint32_t vlen = 0;

    if (!logger_wants(LOGGER_FETCHERS)) {
        return;
    }
    bool live = item_peek(key, nkey, &miss, &cls, &vlen);
    logger_item_get(key, nkey, live ? LOGGER_GET_FOUND :
                    miss == ITEM_MISS_EXPIRED ? LOGGER_GET_EXPIRED :
                    miss == ITEM_MISS_FLUSHED ? LOGGER_GET_FLUSHED :
                    LOGGER_GET_NOT_FOUND, cls, d->fd, vlen);
}

/* memcached's names for storage commands in `watch mutations` lines. */
static const char *
store_cmd_name(proto_cmd_t cmd)
{
    switch (cmd) {
    case PROTO_CMD_ADD:     return "add";
    case PROTO_CMD_REPLACE: return "replace";
    case PROTO_CMD_APPEND:  return "append";
    case PROTO_CMD_PREPEND: return "prepend";
    case PROTO_CMD_CAS:     return "cas";
    default:                return "set";
    }
}

/* One key of a multi-get, prefetched: look it up, count it, answer it. */
static void
get_one(struct dispatch_ctx *d, const struct item_probe *probe)
{
    const char *key = probe->key;
    size_t nkey = probe->nkey;
    proto_cmd_t cmd = d->mget.cmd;
    bool touch = cmd == PROTO_CMD_GAT || cmd == PROTO_CMD_GATS;
    bool with_cas = cmd == PROTO_CMD_GETS || cmd == PROTO_CMD_GATS;
    rel_time_t exptime = touch ? clock_exptime(d->mget.exptime) : 0;
    item_miss_t miss;
    struct item *it = item_get_probed(probe, touch, exptime, &miss);

    dispatch_note_fetch(d, key, nkey, it, miss);
    dispatch_count_fetch(d, it, miss, true, touch);
    if (it != NULL) {
        reply_value(d, it, key, nkey, with_cas);
    }
}

void
dispatch_note_fetch(struct dispatch_ctx *d, const char *key, size_t nkey,
                    struct item *it, item_miss_t miss)
{
    if (stats_detail_enabled()) {
        stats_detail_record(key, nkey, STATS_DETAIL_GET, it != NULL);
    }
    if (logger_wants(LOGGER_FETCHERS)) {
        log_get(d, key, nkey, it, miss);
    }
}

void
dispatch_count_fetch(struct dispatch_ctx *d, struct item *it, item_miss_t miss,
                     bool count_get, bool touch)
{
    if (count_get) {
        STATS_INCR(d->stats, cmd_get);
    }
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
    } else if (miss == ITEM_MISS_FLASH_GONE) {
        /* as memcached: its index entry was in RAM, its page was not */
        STATS_INCR(d->stats, miss_from_extstore);
    }
}

void
dispatch_count_cas(struct dispatch_ctx *d, item_status_t st, uint8_t cls)
{
    if (st == ITEM_OK) {
        STATS_INCR(d->stats, cas_hits);
        STATS_CLASS_INCR(d->stats, cls, cas_hits);
    } else if (st == ITEM_EXISTS) {
        STATS_INCR(d->stats, cas_badval);
        STATS_CLASS_INCR(d->stats, cls, cas_badval);
    } else if (st == ITEM_NOT_FOUND) {
        STATS_INCR(d->stats, cas_misses);
    }
}

/*
 * Keys are looked up a window at a time: hash the window, prefetch every
 * bucket, then every chain head (item_probe_prefetch), then look up and
 * answer each in order. A key's two dependent DRAM reads then overlap
 * with the other keys' instead of queueing behind them.
 */
dispatch_result_t
dispatch_get_keys(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct item_probe win[DISPATCH_MGET_WINDOW];
    const char *cursor = req->keys;

    for (;;) {
        size_t n = 0;
        while (n < DISPATCH_MGET_WINDOW &&
               proto_key_next(&cursor, req->keys_end, &win[n].key, &win[n].nkey)) {
            n++;
        }
        if (n == 0) {
            return DISPATCH_DONE;
        }
        if (n > 1) {
            item_probe_prefetch(win, n);
        } else {
            win[0].hv = hash_key(win[0].key, win[0].nkey);
        }
        for (size_t i = 0; i < n; i++) {
            if (dispatch_out_full(d)) {
                d->mget.resume = win[i].key;
                return DISPATCH_MORE_KEYS;
            }
            get_one(d, &win[i]);
            d->mget.nkeys++;
        }
    }
}

size_t
dispatch_prefetch(const char *buf, size_t len, bool binary)
{
    struct proto_key keys[DISPATCH_MGET_WINDOW];
    struct item_probe probes[DISPATCH_MGET_WINDOW];
    size_t scanned;
    size_t n = binary ? proto_bin_peek_keys(buf, len, keys, DISPATCH_MGET_WINDOW, &scanned) :
                        proto_peek_keys(buf, len, keys, DISPATCH_MGET_WINDOW, &scanned);

    if (n < 2) {
        return scanned;
    }
    for (size_t i = 0; i < n; i++) {
        probes[i].key = keys[i].p;
        probes[i].nkey = keys[i].n;
    }
    item_probe_prefetch(probes, n);
    return scanned;
}

static void
get_start(struct dispatch_ctx *d, const struct proto_req *req)
{
    d->mget.cmd = req->cmd;
    d->mget.exptime = req->exptime;
    d->mget.nkeys = 0;
    d->mget.mark = outq_mark(d->out);
    outq_track(d->out, &d->mget.mark);
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
        dispatch_reply_line(d, error);
    } else if (d->mget.nkeys == 0 && (d->mget.cmd == PROTO_CMD_GET ||
                                       d->mget.cmd == PROTO_CMD_GETS)) {
        dispatch_reply(d, PROTO_RSP_ERROR);  /* "get" and spaces, as memcached */
    } else {
        dispatch_reply(d, PROTO_RSP_END);
    }
}

/* A whole get line (validated up front by the parser). */
static dispatch_result_t
cmd_get(struct dispatch_ctx *d, const struct proto_req *req)
{
    get_start(d, req);
    if (dispatch_get_keys(d, req) == DISPATCH_MORE_KEYS) {
        return DISPATCH_MORE_KEYS;
    }
    dispatch_reply(d, PROTO_RSP_END);
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_update(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct item *it;
    item_status_t st;

    STATS_INCR(d->stats, cmd_set);
    if (stats_detail_enabled()) {
        stats_detail_record(req->key, req->nkey, STATS_DETAIL_SET, false);
    }
    st = cache_alloc(req->key, req->nkey, req->flags,
                    clock_exptime(req->exptime), req->vlen, &it);
    if (st != ITEM_OK) {
        if (logger_wants(LOGGER_MUTATIONS)) {
            logger_item_store(req->key, req->nkey, st == ITEM_TOO_LARGE ?
                              LOGGER_STORE_TOO_LARGE : LOGGER_STORE_NO_MEMORY,
                              store_cmd_name(req->cmd), 0, 0, d->fd, 0);
        }
        dispatch_reply_nr(d, req->noreply,
                          st == ITEM_TOO_LARGE ? PROTO_RSP_TOO_LARGE : PROTO_RSP_OOM);
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
    dispatch_fill_start(d, it, req->vlen + 2);
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

    if (d->bin.on) {
        dispatch_bin_data_done(d);
        return;
    }
    if (d->cmd == PROTO_CMD_MS) {
        dispatch_meta_data_done(d);
        return;
    }
    d->it = NULL;
    if (!proto_data_ok(d->data + d->ndata - 2)) {
        rsp = PROTO_RSP_BAD_CHUNK;
    } else {
        dispatch_log_lookup(d, item_key(it), item_nkey(it));
        item_status_t st = cache_store(it, store_op(d->cmd), d->cas);
        logger_store_status_t lst;
        switch (st) {
        case ITEM_OK:        rsp = PROTO_RSP_STORED; lst = LOGGER_STORE_STORED; break;
        case ITEM_EXISTS:    rsp = PROTO_RSP_EXISTS; lst = LOGGER_STORE_EXISTS; break;
        case ITEM_NOT_FOUND: rsp = PROTO_RSP_NOT_FOUND; lst = LOGGER_STORE_NOT_FOUND; break;
        default:             rsp = PROTO_RSP_NOT_STORED; lst = LOGGER_STORE_NOT_STORED; break;
        }
        if (logger_wants(LOGGER_MUTATIONS)) {
            rel_time_t now = clock_now();
            logger_item_store(item_key(it), item_nkey(it), lst,
                              store_cmd_name(d->cmd),
                              it->exptime > now ? it->exptime - now : 0,
                              slab_cls_of(it), d->fd, item_vlen(it));
        }
        if (d->cmd == PROTO_CMD_CAS) {
            dispatch_count_cas(d, st, slab_cls_of(it));
        }
    }
    item_release(it);
    dispatch_reply_nr(d, d->noreply, rsp);
}

void
dispatch_abort(struct dispatch_ctx *d)
{
    if (d->it != NULL) {
        item_release(d->it);
        d->it = NULL;
    }
    memset(&d->fill, 0, sizeof(d->fill));
    free(d->sasl.data);
    d->sasl.data = NULL;
#ifdef HAVE_SASL
    bin_sasl_free(&d->sasl.state);
#endif
}

void
dispatch_count_arith(struct dispatch_ctx *d, bool incr, item_status_t st, uint8_t cls)
{
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
}

static dispatch_result_t
cmd_arith(struct dispatch_ctx *d, const struct proto_req *req)
{
    bool incr = req->cmd == PROTO_CMD_INCR;
    uint64_t value = 0;
    uint8_t cls = 0;
    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = cache_arith(req->key, req->nkey, incr, req->delta, &value,
                                  &cls);

    dispatch_count_arith(d, incr, st, cls);
    switch (st) {
    case ITEM_OK: {
        char num[24];
        snprintf(num, sizeof(num), "%llu", (unsigned long long)value);
        dispatch_reply_line_nr(d, req->noreply, num);
        break;
    }
    case ITEM_NOT_FOUND:   dispatch_reply_nr(d, req->noreply, PROTO_RSP_NOT_FOUND); break;
    case ITEM_NON_NUMERIC: dispatch_reply_nr(d, req->noreply, PROTO_RSP_NON_NUMERIC); break;
    default:               dispatch_reply_nr(d, req->noreply, PROTO_RSP_INCR_OOM); break;
    }
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_delete(struct dispatch_ctx *d, const struct proto_req *req)
{
    uint8_t cls = 0;
    uint32_t vlen = 0;

    if (stats_detail_enabled()) {
        stats_detail_record(req->key, req->nkey, STATS_DETAIL_DELETE, false);
    }
    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = item_delete(req->key, req->nkey, &cls, &vlen);

    if (st == ITEM_OK) {
        STATS_INCR(d->stats, delete_hits);
        STATS_CLASS_INCR(d->stats, cls, delete_hits);
        if (logger_wants(LOGGER_DELETIONS)) {
            logger_deletion(req->key, req->nkey, "delete", cls, vlen);
        }
    } else {
        STATS_INCR(d->stats, delete_misses);
    }
    dispatch_reply_nr(d, req->noreply, st == ITEM_OK ? PROTO_RSP_DELETED : PROTO_RSP_NOT_FOUND);
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_touch(struct dispatch_ctx *d, const struct proto_req *req)
{
    uint8_t cls = 0;
    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = item_touch(req->key, req->nkey, clock_exptime(req->exptime),
                                  &cls);

    STATS_INCR(d->stats, cmd_touch);
    if (st == ITEM_OK) {
        STATS_INCR(d->stats, touch_hits);
        STATS_CLASS_INCR(d->stats, cls, touch_hits);
    } else {
        STATS_INCR(d->stats, touch_misses);
    }
    dispatch_reply_nr(d, req->noreply, st == ITEM_OK ? PROTO_RSP_TOUCHED : PROTO_RSP_NOT_FOUND);
    return DISPATCH_DONE;
}

/* -F: memcached refuses before it looks at the delay (and counts it). */
static bool
flush_refused(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (!settings.flush_disabled) {
        return false;
    }
    dispatch_reply_line_nr(d, req->noreply, "CLIENT_ERROR flush_all not allowed");
    return true;
}

static dispatch_result_t
cmd_flush_all(struct dispatch_ctx *d, const struct proto_req *req)
{
    STATS_INCR(d->stats, cmd_flush);
    if (flush_refused(d, req)) {
        return DISPATCH_DONE;
    }
    item_flush(req->has_arg ? req->arg : 0);
    dispatch_reply_nr(d, req->noreply, PROTO_RSP_OK);
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_version(struct dispatch_ctx *d, const struct proto_req *req)
{
    (void)req;
    dispatch_reply_line(d, "VERSION " SC_PROTOCOL_VERSION);
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_verbosity(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->has_arg) {
        log_set_level((int)req->arg);
    }
    dispatch_reply_nr(d, req->noreply, PROTO_RSP_OK);
    return DISPATCH_DONE;
}

static dispatch_result_t
cmd_quit(struct dispatch_ctx *d, const struct proto_req *req)
{
    (void)req;
    d->close_reason = LOGGER_CLOSE_NORMAL;
    return DISPATCH_CLOSE;
}

/*
 * refresh_certs: load the TLS certificate and key again for new
 * connections (memcached's answers: OK, or the reason raw; "Error TLS not
 * enabled" without -Z). A trailing noreply drops the OK only.
 */
static dispatch_result_t
cmd_refresh_certs(struct dispatch_ctx *d, const struct proto_req *req)
{
    char err[256];
    bool noreply = req->nsub >= 7 && memcmp(req->sub + req->nsub - 7, "noreply", 7) == 0;

    if (refresh_certs_hook == NULL) {
        outq_add(d->out, "Error TLS not enabled\r\n", 23);
    } else if (refresh_certs_hook(err, sizeof(err)) != 0) {
        dispatch_reply_line(d, err);
    } else {
        dispatch_reply_nr(d, noreply, PROTO_RSP_OK);
    }
    return DISPATCH_DONE;
}

/*
 * "shutdown" or "shutdown graceful" (-A): connections closed, exit 0. The
 * graceful mode, as memcached's, also saves the cache for the next start
 * when there is a memory file (-e; restart.h).
 */
static dispatch_result_t
cmd_shutdown(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (!settings.shutdown_ok || shutdown_hook == NULL) {
        dispatch_reply(d, PROTO_RSP_SHUTDOWN_DISABLED);
        return DISPATCH_DONE;
    }
    bool graceful = req->nsub == 8 && memcmp(req->sub, "graceful", 8) == 0;
    if (req->nsub != 0 && !graceful) {
        dispatch_reply_line(d, "CLIENT_ERROR invalid shutdown mode");
        return DISPATCH_DONE;
    }
    shutdown_hook(graceful);
    d->close_reason = LOGGER_CLOSE_SHUTDOWN;
    return DISPATCH_CLOSE;
}

static dispatch_result_t
cmd_memlimit(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->arg < MEMLIMIT_MIN_MB) {
        dispatch_reply_line_nr(d, req->noreply, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
        return DISPATCH_DONE;
    }
    if (req->arg > MEMLIMIT_MAX_MB) {
        dispatch_reply_line_nr(d, req->noreply, "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes");
        return DISPATCH_DONE;
    }
    slab_set_limit((size_t)req->arg * 1024 * 1024);
    dispatch_reply_nr(d, req->noreply, PROTO_RSP_OK);
    return DISPATCH_DONE;
}

/* Like memcached, only the first word after "stats" picks the section. */
static dispatch_result_t
cmd_stats(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->sub, *word = req->sub;
    size_t nword = 0;

    proto_key_next(&cursor, req->sub + req->nsub, &word, &nword);
    if (nword == 9 && memcmp(word, "cachedump", 9) == 0) {
        return admin_cachedump(d, cursor, req->sub + req->nsub);
    }
    if (nword == 6 && memcmp(word, "detail", 6) == 0) {
        return admin_stats_detail(d, cursor, req->sub + req->nsub);
    }
    if (nword == 5 && memcmp(word, "reset", 5) == 0) {
        stats_reset();
        dispatch_reply(d, PROTO_RSP_RESET);
        return DISPATCH_DONE;
    }
    stats_section_t section = stats_section(word, nword);
    if (section == STATS_UNKNOWN) {
        dispatch_reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    stats_emit(section, emit_stat, d);
    dispatch_reply(d, PROTO_RSP_END);
    return DISPATCH_DONE;
}

/* "config evict <list>": change the eviction stack at run time. */
static dispatch_result_t
cmd_config(struct dispatch_ctx *d, const struct proto_req *req)
{
    const char *cursor = req->sub, *end = req->sub + req->nsub;
    const char *name, *list;
    size_t nname, nlist;

    if (!proto_key_next(&cursor, end, &name, &nname) ||
        nname != 5 || memcmp(name, "evict", 5) != 0) {
        dispatch_reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    if (proto_key_next(&cursor, end, &list, &nlist) &&
        !proto_key_next(&cursor, end, &name, &nname) &&
        evict_configure(list, nlist) == 0) {
        dispatch_reply(d, PROTO_RSP_OK);
    } else {
        dispatch_reply_line(d, "CLIENT_ERROR bad eviction policy list");
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
    case PROTO_CMD_GATS:           return cmd_get;
    case PROTO_CMD_SET:
    case PROTO_CMD_ADD:
    case PROTO_CMD_REPLACE:
    case PROTO_CMD_APPEND:
    case PROTO_CMD_PREPEND:
    case PROTO_CMD_CAS:            return cmd_update;
    case PROTO_CMD_INCR:
    case PROTO_CMD_DECR:           return cmd_arith;
    case PROTO_CMD_DELETE:         return cmd_delete;
    case PROTO_CMD_TOUCH:          return cmd_touch;
    case PROTO_CMD_FLUSH_ALL:      return cmd_flush_all;
    case PROTO_CMD_VERSION:        return cmd_version;
    case PROTO_CMD_VERBOSITY:      return cmd_verbosity;
    case PROTO_CMD_QUIT:           return cmd_quit;
    case PROTO_CMD_SHUTDOWN:       return cmd_shutdown;
    case PROTO_CMD_REFRESH_CERTS:  return cmd_refresh_certs;
    case PROTO_CMD_SASL_LIST:          /* binary only (dispatch_bin) */
    case PROTO_CMD_SASL_AUTH:
    case PROTO_CMD_SASL_STEP:      return NULL;
    case PROTO_CMD_CACHE_MEMLIMIT: return cmd_memlimit;
    case PROTO_CMD_STATS:          return cmd_stats;
    case PROTO_CMD_CONFIG:         return cmd_config;
    case PROTO_CMD_LRU_CRAWLER:    return admin_lru_crawler;
    case PROTO_CMD_SLABS:          return admin_slabs;
    case PROTO_CMD_LRU:            return admin_lru;
    case PROTO_CMD_EXTSTORE:       return admin_extstore;
    case PROTO_CMD_WATCH:          return admin_watch;
    case PROTO_CMD_MG:
    case PROTO_CMD_MS:
    case PROTO_CMD_MD:
    case PROTO_CMD_MA:
    case PROTO_CMD_MN:
    case PROTO_CMD_ME:             return dispatch_meta;
    case PROTO_CMD_NONE:           break;
    }
    return NULL;
}

dispatch_result_t
dispatch_request(struct dispatch_ctx *d, const struct proto_req *req)
{
    /* memcached -vv logs the answers of classic commands, not binary or
     * meta ones (dispatch_meta clears this). */
    d->log_replies = !req->bin.on && log_enabled(LOG_LEVEL_DEBUG);
    if (req->bin.on) {
        return dispatch_bin(d, req);
    }
    command_fn fn = command_handler(req->cmd);

    if (fn == NULL) {
        dispatch_reply(d, PROTO_RSP_ERROR);
        return DISPATCH_DONE;
    }
    return fn(d, req);
}

dispatch_result_t
dispatch_error(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->bin.on) {
        return dispatch_bin_error(d, req);
    }
    d->log_replies = !req->bin.on && log_enabled(LOG_LEVEL_DEBUG);
    /* memcached -vv logs the END of a get it then answers with an error. */
    if (d->log_replies && strncmp(req->error, "CLIENT_ERROR", 12) == 0 &&
        (req->cmd == PROTO_CMD_GET || req->cmd == PROTO_CMD_GETS ||
         req->cmd == PROTO_CMD_GAT || req->cmd == PROTO_CMD_GATS)) {
        log_debug(">%d END", d->fd);
    }
    /* A bad delay reached memcached's flush_all handler; ERROR did not. */
    if (req->cmd == PROTO_CMD_FLUSH_ALL && strcmp(req->error, "ERROR") != 0) {
        STATS_INCR(d->stats, cmd_flush);
        if (flush_refused(d, req)) {
            return DISPATCH_DONE;
        }
    }
    dispatch_reply_line_nr(d, req->noreply, req->error);
    if (req->swallow) {
        d->swallow = (uint64_t)req->vlen + 2;
        return DISPATCH_SWALLOW;
    }
    return DISPATCH_DONE;
}
