/*
 * dispatch_bin.c -- what binary-protocol requests do: each parsed request
 * (protocol/binary.c maps it onto an ASCII command) run against storage
 * and answered in binary, as memcached 1.6.18's proto_bin.c answers:
 * quiet opcodes drop their success answers (and GETQ its miss), errors
 * always go out, and counters move as for the ASCII commands.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bin_sasl.h"
#include "cache.h"
#include "clock.h"
#include "config.h"
#include "dispatch.h"
#include "item.h"
#include "logger.h"
#include "outq.h"
#include "settings.h"
#include "slab.h"
#include "stats.h"

#define BIN_LINE_MAX (PROTO_BIN_HDR_LEN + 64 + PROTO_KEY_MAX)

static void
bin_answer(struct dispatch_ctx *d, const struct proto_req *req, uint16_t status,
           uint64_t cas, const void *extras, uint8_t extlen, const char *key,
           uint16_t keylen, const void *value, uint32_t vlen)
{
    char buf[BIN_LINE_MAX];
    size_t n = proto_bin_compose(buf, sizeof(buf), req->bin.opcode, status,
                                 req->bin.opaque, cas, extras, extlen, key,
                                 keylen, vlen);

    if (n == 0) {
        return;                 /* cannot happen: BIN_LINE_MAX holds any */
    }
    outq_add(d->out, buf, n);
    if (vlen > 0 && value != NULL) {
        outq_add(d->out, value, vlen);
    }
}

static void bin_sasl_finish(struct dispatch_ctx *d, const char *data, size_t len);

static void
bin_error_text(struct dispatch_ctx *d, uint8_t opcode, uint32_t opaque,
               uint16_t status, const char *text)
{
    char buf[BIN_LINE_MAX];
    size_t n = proto_bin_compose_error(buf, sizeof(buf), opcode, status, opaque, text);

    outq_add(d->out, buf, n);
}

static void
bin_error(struct dispatch_ctx *d, uint8_t opcode, uint32_t opaque, uint16_t status)
{
    bin_error_text(d, opcode, opaque, status, NULL);
}


/* --- get, getk, gat, touch (and their quiet forms) --------------------------- */

/* A get's miss: getk answers with the key. */
static void
bin_get_miss(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (req->bin.with_key) {
        bin_answer(d, req, PROTO_BIN_KEY_ENOENT, 0, NULL, 0, req->key,
                   (uint16_t)req->nkey, NULL, 0);
    } else {
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_KEY_ENOENT);
    }
}

static dispatch_result_t
bin_get(struct dispatch_ctx *d, const struct proto_req *req)
{
    bool touch = req->cmd == PROTO_CMD_GAT || req->cmd == PROTO_CMD_TOUCH;
    item_miss_t miss;
    struct item *it = item_get(req->key, req->nkey, touch,
                               touch ? clock_exptime(req->exptime) : 0, &miss);

    /* memcached counts a binary touch as a touch only, not also a get */
    dispatch_note_fetch(d, req->key, req->nkey, it, miss);
    dispatch_count_fetch(d, it, miss, !touch, touch);
    if (it == NULL) {
        if (req->noreply) {
            return DISPATCH_DONE;
        }
        bin_get_miss(d, req);
        return DISPATCH_DONE;
    }
    unsigned char flags[4];
    proto_bin_put32(flags, it->flags);
    uint32_t vlen = req->bin.touch_only ? 0 : item_vlen(it);
    char buf[BIN_LINE_MAX];
    size_t n = proto_bin_compose(buf, sizeof(buf), req->bin.opcode, PROTO_BIN_OK,
                                 req->bin.opaque, item_cas(it), flags, 4,
                                 req->bin.with_key ? req->key : NULL,
                                 req->bin.with_key ? req->nkey : 0, vlen);
    uint64_t hit = outq_mark(d->out);
    outq_add(d->out, buf, n);
    if (vlen == 0) {
        item_release(it);
        return DISPATCH_DONE;
    }
    if (item_is_flash(it)) {
        uint64_t miss_at = outq_mark(d->out);
        if (!req->noreply) {
            bin_get_miss(d, req);
        }
        dispatch_flash_reply(d, it, req->key, req->nkey, hit, miss_at, vlen);
        return DISPATCH_DONE;
    }
    /* The value without its "\r\n": copied when small (a pipeline of
     * small hits then pins no items), else by reference. */
    dispatch_reply_bytes(d, it, vlen);
    return DISPATCH_DONE;
}

/* --- set, add, replace, append, prepend -------------------------------------- */

/* memcached's command name in `watch mutations` lines. */
static const char *
bin_cmd_name(proto_cmd_t cmd, uint64_t cas)
{
    switch (cmd) {
    case PROTO_CMD_APPEND:  return "append";
    case PROTO_CMD_PREPEND: return "prepend";
    default:                break;
    }
    if (cas != 0) {
        return "cas";
    }
    return cmd == PROTO_CMD_ADD ? "add" : cmd == PROTO_CMD_REPLACE ? "replace" : "set";
}

static dispatch_result_t
bin_update(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct item *it;

    STATS_INCR(d->stats, cmd_set);
    if (stats_detail_enabled()) {
        stats_detail_record(req->key, req->nkey, STATS_DETAIL_SET, false);
    }
    item_status_t st = cache_alloc(req->key, req->nkey, req->flags,
                                  clock_exptime(req->exptime), req->vlen, &it);
    if (st != ITEM_OK) {
        if (logger_wants(LOGGER_MUTATIONS)) {
            logger_item_store(req->key, req->nkey, st == ITEM_TOO_LARGE ?
                              LOGGER_STORE_TOO_LARGE : LOGGER_STORE_NO_MEMORY,
                              bin_cmd_name(req->cmd, req->bin.cas), 0, 0, d->fd, 0);
        }
        if (st == ITEM_TOO_LARGE) {
            bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_E2BIG);
        } else {
            bin_error_text(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_ENOMEM,
                           "Out of memory allocating item");
        }
        if (st == ITEM_TOO_LARGE) {
            STATS_INCR(d->stats, store_too_large);
        } else {
            STATS_INCR(d->stats, store_no_memory);
        }
        if (req->cmd == PROTO_CMD_SET) {
            item_unlink_key(req->key, req->nkey);
        }
        /* A value past 2 GB is no mistake but an attack or garbage: close
         * rather than read gigabytes to drop them. (memcached, whose
         * swallow count is an int, reads what follows as requests.) */
        if (req->vlen > INT32_MAX) {
            return DISPATCH_CLOSE;
        }
        d->swallow = req->vlen;
        return DISPATCH_SWALLOW;
    }
    STATS_CLASS_INCR(d->stats, slab_cls_of(it), cmd_set);
    item_value_write(it, req->vlen, "\r\n", 2);
    d->it = it;
    dispatch_fill_start(d, it, req->vlen);  /* binary values carry no "\r\n" */
    d->cmd = req->cmd;
    d->cas = req->bin.cas;
    d->noreply = req->noreply;
    d->bin.on = true;
    d->bin.opcode = req->bin.opcode;
    d->bin.opaque = req->bin.opaque;
    return DISPATCH_NEED_DATA;
}

void
dispatch_bin_data_done(struct dispatch_ctx *d)
{
    struct item *it = d->it;
    item_store_op_t op;

    if (d->bin.sasl) {
        d->bin.sasl = false;
        d->bin.on = false;
        bin_sasl_finish(d, d->sasl.data, d->ndata);
        free(d->sasl.data);
        d->sasl.data = NULL;
        return;
    }
    d->it = NULL;
    d->bin.on = false;
    switch (d->cmd) {
    case PROTO_CMD_ADD:     op = ITEM_OP_ADD; break;
    case PROTO_CMD_REPLACE: op = ITEM_OP_REPLACE; break;
    case PROTO_CMD_APPEND:  op = ITEM_OP_APPEND; break;
    case PROTO_CMD_PREPEND: op = ITEM_OP_PREPEND; break;
    default:                op = ITEM_OP_SET; break;
    }
    /* A cas in the header makes a set, add or replace a cas, as memcached's
     * binary update does; append and prepend compare a nonzero one. */
    struct item_store_meta sm = {
        .has_cas = d->cas != 0 && op != ITEM_OP_APPEND && op != ITEM_OP_PREPEND,
        .cas = d->cas,
    };
    if (sm.has_cas && op == ITEM_OP_ADD) {
        op = ITEM_OP_CAS;
    }
    dispatch_log_lookup(d, item_key(it), item_nkey(it));
    item_status_t st = cache_store_meta(it, op, &sm);
    uint16_t status = PROTO_BIN_OK;
    switch (st) {
    case ITEM_OK:
        break;
    case ITEM_EXISTS:
        status = PROTO_BIN_KEY_EEXISTS;
        break;
    case ITEM_NOT_FOUND:
        status = PROTO_BIN_KEY_ENOENT;
        break;
    default:
        status = op == ITEM_OP_ADD ? PROTO_BIN_KEY_EEXISTS :
                 op == ITEM_OP_REPLACE ? PROTO_BIN_KEY_ENOENT : PROTO_BIN_NOT_STORED;
        break;
    }
    if (op == ITEM_OP_CAS || sm.has_cas) {
        dispatch_count_cas(d, st, slab_cls_of(it));
    }
    if (logger_wants(LOGGER_MUTATIONS)) {
        rel_time_t now = clock_now();
        logger_item_store(item_key(it), item_nkey(it),
                          st == ITEM_OK ? LOGGER_STORE_STORED :
                          st == ITEM_EXISTS ? LOGGER_STORE_EXISTS :
                          st == ITEM_NOT_FOUND ? LOGGER_STORE_NOT_FOUND :
                          LOGGER_STORE_NOT_STORED, bin_cmd_name(d->cmd, d->cas),
                          it->exptime > now ? it->exptime - now : 0,
                          slab_cls_of(it), d->fd, item_vlen(it));
    }
    if (status != PROTO_BIN_OK) {
        bin_error(d, d->bin.opcode, d->bin.opaque, status);
    } else if (!d->noreply) {
        char buf[PROTO_BIN_HDR_LEN];
        size_t n = proto_bin_compose(buf, sizeof(buf), d->bin.opcode, PROTO_BIN_OK,
                                     d->bin.opaque, sm.cas_out, NULL, 0, NULL, 0, 0);
        outq_add(d->out, buf, n);
    }
    item_release(it);
}

/* --- delete, incr/decr ------------------------------------------------------- */

static dispatch_result_t
bin_delete(struct dispatch_ctx *d, const struct proto_req *req)
{
    uint8_t cls = 0;

    if (stats_detail_enabled()) {
        stats_detail_record(req->key, req->nkey, STATS_DETAIL_DELETE, false);
    }
    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = item_meta_delete(req->key, req->nkey, req->bin.cas != 0,
                                        req->bin.cas, false, false, 0, NULL, &cls, NULL);
    if (st == ITEM_OK) {
        STATS_INCR(d->stats, delete_hits);
        STATS_CLASS_INCR(d->stats, cls, delete_hits);
        if (!req->noreply) {
            bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        }
        return DISPATCH_DONE;
    }
    if (st == ITEM_NOT_FOUND) {
        STATS_INCR(d->stats, delete_misses);    /* a cas mismatch is none */
    }
    bin_error(d, req->bin.opcode, req->bin.opaque,
              st == ITEM_EXISTS ? PROTO_BIN_KEY_EEXISTS : PROTO_BIN_KEY_ENOENT);
    return DISPATCH_DONE;
}


/* A miss that creates the counter: its initial value, as an add would. */
static item_status_t
bin_arith_create(const struct proto_req *req, uint64_t *cas)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)req->bin.initial);
    struct item *it;

    if (cache_alloc(req->key, req->nkey, 0, clock_exptime(req->exptime), (uint32_t)n,
                   &it) != ITEM_OK) {
        return ITEM_NO_MEMORY;
    }
    item_value_write(it, 0, digits, (uint32_t)n);
    item_value_write(it, (uint32_t)n, "\r\n", 2);
    struct item_store_meta sm = { 0 };
    item_status_t st = cache_store_meta(it, ITEM_OP_ADD, &sm);
    *cas = sm.cas_out;
    item_release(it);
    return st;
}

static dispatch_result_t
bin_arith(struct dispatch_ctx *d, const struct proto_req *req)
{
    bool incr = req->cmd == PROTO_CMD_INCR;
    struct item_arith_meta am = { .cas = req->bin.cas };
    uint64_t value = 0;
    uint8_t cls = 0;

    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = cache_arith_meta(req->key, req->nkey, incr, req->delta, &value,
                                       &cls, &am);
    if (st == ITEM_NOT_FOUND && req->bin.create) {
        /* Not a miss in memcached's counters: the counter is created. */
        st = bin_arith_create(req, &am.cas_out);
        value = req->bin.initial;
    } else {
        dispatch_count_arith(d, incr, st, cls);
    }
    switch (st) {
    case ITEM_OK:
        if (!req->noreply) {
            unsigned char v[8];
            proto_bin_put64(v, value);
            bin_answer(d, req, PROTO_BIN_OK, am.cas_out, NULL, 0, NULL, 0, v, 8);
        }
        break;
    case ITEM_NOT_FOUND:
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_KEY_ENOENT);
        break;
    case ITEM_EXISTS:
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_KEY_EEXISTS);
        break;
    case ITEM_NON_NUMERIC:
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_DELTA_BADVAL);
        break;
    case ITEM_NOT_STORED:               /* created by someone else meanwhile */
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_NOT_STORED);
        break;
    default:
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_ENOMEM);
        break;
    }
    return DISPATCH_DONE;
}

/* --- stat ---------------------------------------------------------------------- */

struct bin_stat_ctx {
    struct dispatch_ctx     *d;
    const struct proto_req  *req;
};

static void
bin_stat_emit(void *ctx, const char *name, const char *value)
{
    struct bin_stat_ctx *s = ctx;
    size_t nk = strlen(name), nv = strlen(value);

    if (nk > PROTO_KEY_MAX) {
        return;
    }
    bin_answer(s->d, s->req, PROTO_BIN_OK, 0, NULL, 0, name, (uint16_t)nk,
               value, (uint32_t)nv);
}

/* The detail dump's lines gathered for one "detailed" stat, as memcached
 * sends it; bounded by the prefixes tracked (stats.h). */
struct detail_buf {
    char   *p;
    size_t  len, cap;
    bool    oom;
};

static void
detail_gather(void *ctx, const char *text)
{
    struct detail_buf *b = ctx;
    size_t n = strlen(text);

    if (b->oom) {
        return;
    }
    if (b->len + n + 2 > b->cap) {
        size_t cap = (b->cap + n + 2) * 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, text, n);
    memcpy(b->p + b->len + n, "\r\n", 2);
    b->len += n + 2;
}

static bool
key_is(const struct proto_req *req, const char *s)
{
    size_t n = strlen(s);

    return req->nkey >= n && memcmp(req->key, s, n) == 0;
}

static dispatch_result_t
bin_stat(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct bin_stat_ctx s = { d, req };

    if (key_is(req, "reset")) {
        stats_reset();
    } else if (key_is(req, "detail dump")) {
        struct detail_buf b = { 0 };
        stats_detail_dump(detail_gather, &b);
        detail_gather(&b, "END");
        if (b.oom) {
            free(b.p);
            bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_ENOMEM);
            return DISPATCH_DONE;
        }
        bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, "detailed", 8, b.p, (uint32_t)b.len);
        free(b.p);
    } else if (key_is(req, "detail on") || key_is(req, "detail off")) {
        stats_detail_set_enabled(key_is(req, "detail on"));
    } else if (key_is(req, "detail")) {
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_KEY_ENOENT);
        return DISPATCH_DONE;
    } else {
        stats_section_t section = stats_section(req->key, req->nkey);
        /* memcached serves "conns" over ASCII only */
        if (section == STATS_UNKNOWN || section == STATS_CONNS) {
            bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_KEY_ENOENT);
            return DISPATCH_DONE;
        }
        stats_emit(section, bin_stat_emit, &s);
    }
    bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, NULL, 0);  /* the end */
    return DISPATCH_DONE;
}

/* --- the rest -------------------------------------------------------------------- */

/* --- SASL (-S) ----------------------------------------------------------------- */

#define BIN_SASL_DATA_MAX 1024          /* client data per step (PLAIN needs ~ 300) */
#define BIN_SASL_MECH_MAX 32            /* memcached's MAX_SASL_MECH_LEN */

/* A response with a body and nothing else (SASL's). */
static void
bin_reply_body(struct dispatch_ctx *d, uint8_t opcode, uint32_t opaque, uint16_t status,
               const char *body, size_t len)
{
    char buf[BIN_LINE_MAX];
    size_t n = proto_bin_compose(buf, sizeof(buf), opcode, status, opaque, 0, NULL, 0,
                                 NULL, 0, (uint32_t)len);

    outq_add(d->out, buf, n);
    if (len > 0) {
        outq_add(d->out, body, len);
    }
}

/* memcached without -S: SASL opcodes are unknown commands, bodies dropped. */
static dispatch_result_t
bin_sasl_unknown(struct dispatch_ctx *d, const struct proto_req *req)
{
    bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_UNKNOWN_COMMAND);
    if (req->vlen > 0) {
        d->swallow = req->vlen;
        return DISPATCH_SWALLOW;
    }
    return DISPATCH_DONE;
}

static void
bin_sasl_finish(struct dispatch_ctx *d, const char *data, size_t len)
{
    const char *out;
    size_t outlen;
    bin_sasl_result_t r = BIN_SASL_FAIL;

#ifdef HAVE_SASL
    r = bin_sasl_auth(&d->sasl.state, d->cmd == PROTO_CMD_SASL_STEP, d->sasl.mech, data, len,
                      &out, &outlen);
#else
    (void)data;
    (void)len;
    out = NULL;
    outlen = 0;
#endif
    switch (r) {
    case BIN_SASL_OK:
        d->sasl.ok = true;
        STATS_INCR(d->stats, auth_cmds);
        bin_reply_body(d, d->bin.opcode, d->bin.opaque, PROTO_BIN_OK, "Authenticated", 13);
        break;
    case BIN_SASL_CONTINUE:
        bin_reply_body(d, d->bin.opcode, d->bin.opaque, PROTO_BIN_AUTH_CONTINUE, out, outlen);
        break;
    case BIN_SASL_FAIL:
        STATS_INCR(d->stats, auth_cmds);
        STATS_INCR(d->stats, auth_errors);
        bin_error(d, d->bin.opcode, d->bin.opaque, PROTO_BIN_AUTH_ERROR);
        break;
    }
}

static dispatch_result_t
bin_sasl(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (!settings.sasl) {
        return bin_sasl_unknown(d, req);
    }
    if (req->cmd == PROTO_CMD_SASL_LIST) {
        const char *list = NULL;
        size_t len = 0;
#ifdef HAVE_SASL
        if (bin_sasl_mechs(&d->sasl.state, &list, &len)) {
            bin_reply_body(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_OK, list, len);
            return DISPATCH_DONE;
        }
#endif
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_AUTH_ERROR);
        return DISPATCH_DONE;
    }
    if (req->nkey > BIN_SASL_MECH_MAX || req->vlen > BIN_SASL_DATA_MAX) {
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_EINVAL);
        d->swallow = req->vlen;
        return req->vlen > 0 ? DISPATCH_SWALLOW : DISPATCH_DONE;
    }
    memcpy(d->sasl.mech, req->key, req->nkey);
    d->sasl.mech[req->nkey] = '\0';
    d->cmd = req->cmd;
    d->bin.opcode = req->bin.opcode;
    d->bin.opaque = req->bin.opaque;
    if (req->vlen == 0) {
        bin_sasl_finish(d, NULL, 0);
        return DISPATCH_DONE;
    }
    d->sasl.data = malloc(req->vlen);
    if (d->sasl.data == NULL) {
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_ENOMEM);
        d->swallow = req->vlen;
        return DISPATCH_SWALLOW;
    }
    d->data = d->sasl.data;
    d->ndata = req->vlen;
    memset(&d->fill, 0, sizeof(d->fill));  /* one piece: no dispatch_data_next */
    d->bin.on = true;
    d->bin.sasl = true;
    return DISPATCH_NEED_DATA;
}

/* Before authenticating (-S), only SASL and VERSION: memcached answers
 * anything else "Auth failure." and closes. */
static bool
bin_sasl_allows(const struct dispatch_ctx *d, const struct proto_req *req)
{
    return !settings.sasl || d->sasl.ok || req->cmd == PROTO_CMD_SASL_LIST ||
           req->cmd == PROTO_CMD_SASL_AUTH || req->cmd == PROTO_CMD_SASL_STEP ||
           req->cmd == PROTO_CMD_VERSION;
}

dispatch_result_t
dispatch_bin(struct dispatch_ctx *d, const struct proto_req *req)
{
    if (!bin_sasl_allows(d, req)) {
        bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_AUTH_ERROR);
        d->close_reason = LOGGER_CLOSE_ERROR;
        return DISPATCH_CLOSE;
    }
    switch (req->cmd) {
    case PROTO_CMD_SASL_LIST:
    case PROTO_CMD_SASL_AUTH:
    case PROTO_CMD_SASL_STEP:
        return bin_sasl(d, req);
    case PROTO_CMD_GET:
    case PROTO_CMD_GAT:
    case PROTO_CMD_TOUCH:
        return bin_get(d, req);
    case PROTO_CMD_SET:
    case PROTO_CMD_ADD:
    case PROTO_CMD_REPLACE:
    case PROTO_CMD_APPEND:
    case PROTO_CMD_PREPEND:
        return bin_update(d, req);
    case PROTO_CMD_DELETE:
        return bin_delete(d, req);
    case PROTO_CMD_INCR:
    case PROTO_CMD_DECR:
        return bin_arith(d, req);
    case PROTO_CMD_STATS:
        return bin_stat(d, req);
    case PROTO_CMD_VERSION: {
        static const char version[] = SC_PROTOCOL_VERSION;
        bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, version,
                   (uint32_t)strlen(version));
        return DISPATCH_DONE;
    }
    case PROTO_CMD_FLUSH_ALL:
        /* -F: memcached answers "Auth failure.", even to FLUSHQ */
        if (settings.flush_disabled) {
            bin_error(d, req->bin.opcode, req->bin.opaque, PROTO_BIN_AUTH_ERROR);
            return DISPATCH_DONE;
        }
        STATS_INCR(d->stats, cmd_flush);
        item_flush(req->has_arg ? req->arg : 0);
        if (!req->noreply) {
            bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        }
        return DISPATCH_DONE;
    case PROTO_CMD_QUIT:
        if (!req->noreply) {
            bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        }
        d->close_reason = LOGGER_CLOSE_NORMAL;
        return DISPATCH_CLOSE;
    default:                            /* NOOP */
        bin_answer(d, req, PROTO_BIN_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        return DISPATCH_DONE;
    }
}

dispatch_result_t
dispatch_bin_error(struct dispatch_ctx *d, const struct proto_req *req)
{
    bin_error(d, req->bin.opcode, req->bin.opaque, req->bin.status);
    if (req->bin.close) {
        return DISPATCH_CLOSE;
    }
    if (req->bin.swallow > 0) {
        d->swallow = req->bin.swallow;
        return DISPATCH_SWALLOW;
    }
    return DISPATCH_DONE;
}
