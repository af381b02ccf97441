/*
 * dispatch_meta.c -- what the meta commands (mg ms md ma mn me) do: each
 * parsed request (protocol/meta.c) mapped onto storage's operations, and
 * its answer composed by the protocol module.
 *
 * Semantics and counters follow memcached 1.6.18: an mg is a get (or a
 * touch, with T) in `stats`, ms a set, md a delete, ma an incr or decr; q
 * drops the answers memcached lets it drop (EN for mg; HD for ms, md and
 * ma), never an error.
 */
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "clock.h"
#include "dispatch.h"
#include "item.h"
#include "log.h"
#include "logger.h"
#include "outq.h"
#include "slab.h"
#include "stats.h"

/* The answer line's bytes go to the output queue. */
static void
meta_line(struct dispatch_ctx *d, const char *code, const char *echo,
          const struct proto_meta *m, const struct proto_meta_item *mi)
{
    char buf[PROTO_META_LINE_MAX];
    size_t n = proto_compose_meta(buf, sizeof(buf), code, echo, m, mi);

    outq_add(d->out, buf, n);
}

/* The key fields of an answer: the request's key as sent. */
static void
meta_key(struct proto_meta_item *mi, const struct proto_req *req)
{
    memset(mi, 0, sizeof(*mi));
    mi->key = req->key;
    mi->nkey = req->nkey;
    mi->key_binary = req->meta.key_binary;
}

static int64_t
ttl_left(rel_time_t exptime)
{
    rel_time_t now = clock_now();

    if (exptime == 0) {
        return -1;
    }
    return exptime > now ? (int64_t)(exptime - now) : 0;
}

/* Whether flag a comes after flag b in the request (memcached applies
 * flags in the order sent, so the later of N and T sets the TTL). */
static bool
flag_after(const struct proto_meta *m, char a, char b)
{
    const char *p = m->flags, *s;
    size_t n;
    int i = 0, ia = -1, ib = -1;

    while (proto_key_next(&p, m->flags_end, &s, &n)) {
        if (*s == a) {
            ia = i;
        } else if (*s == b) {
            ib = i;
        }
        i++;
    }
    return ia >= 0 && ia > ib;
}

/* --- mg ---------------------------------------------------------------------- */

static dispatch_result_t
cmd_mg(struct dispatch_ctx *d, const struct proto_req *req)
{
    const struct proto_meta *m = &req->meta;
    struct item_meta_get g = {
        .bump = !proto_meta_has(m, 'u'),
        .touch = proto_meta_has(m, 'T'),
        .exptime = clock_exptime(m->ttl),
        .vivify = proto_meta_has(m, 'N'),
        .vivify_exptime = clock_exptime(m->vivify_ttl),
        .recache = proto_meta_has(m, 'R'),
        .recache_time = clock_exptime(m->recache_ttl),
        .key_binary = m->key_binary,
        .vivify_last = flag_after(m, 'N', 'T'),
        .has_cas_in = proto_meta_has(m, 'E'),
        .cas_in = m->cas_in,
    };
    item_miss_t miss = ITEM_MISS_NONE;
    struct item *it = cache_meta_get(req->key, req->nkey, &g, &miss);
    struct proto_meta_item mi;

    /* As memcached: an mg with T counts as a touch when it hits, as a get
     * when it misses; a vivified miss counts as a hit, but its lookup is
     * logged as the miss it was. */
    bool touched = g.touch && it != NULL;
    dispatch_count_fetch(d, it, miss, !touched, touched);
    if (logger_wants(LOGGER_FETCHERS)) {
        logger_item_get(req->key, req->nkey, it != NULL && !g.created ? LOGGER_GET_FOUND :
                        miss == ITEM_MISS_EXPIRED ? LOGGER_GET_EXPIRED :
                        miss == ITEM_MISS_FLUSHED ? LOGGER_GET_FLUSHED :
                        LOGGER_GET_NOT_FOUND, it != NULL && !g.created ? slab_cls_of(it) : 0,
                        d->fd, it != NULL && !g.created ? item_vlen(it) : 0);
    }
    meta_key(&mi, req);
    if (it == NULL) {
        if (!req->noreply) {
            meta_line(d, "EN", "Ok", m, &mi);
        }
        return DISPATCH_DONE;
    }
    /* C on mg (memcached 1.6.45): the client holds that version already,
     * so a matching CAS answers without the value. */
    bool value = proto_meta_has(m, 'v') &&
                 !(proto_meta_has(m, 'C') && item_cas(it) == m->cas);
    if (!item_is_flash(it)) {
        mi.key = item_key(it);      /* else the key asked for: a stub keeps none */
        mi.nkey = item_nkey(it);
    }
    mi.key_binary = (item_iflags(it) & ITEM_KEY_BINARY) != 0;
    mi.vlen = item_vlen(it);
    mi.client_flags = it->flags;
    mi.cas = item_cas(it);
    mi.ttl_before = ttl_left(g.exptime_before);
    mi.ttl = ttl_left(g.touch ? g.exptime : it->exptime);
    mi.ttl_vivify = ttl_left(g.vivify_exptime);
    mi.vivified = g.created;
    mi.la = clock_now() - g.time;
    mi.fetched = g.fetched;
    mi.token_sent = g.token_sent;
    mi.stale = g.stale;
    mi.won = g.won;
    uint64_t hit = outq_mark(d->out);
    meta_line(d, value ? "VA" : "HD", "stcflhOk", m, &mi);
    if (value && item_is_flash(it)) {
        uint64_t miss_at = outq_mark(d->out);
        if (!req->noreply) {
            meta_key(&mi, req);
            meta_line(d, "EN", "Ok", m, &mi);
        }
        dispatch_flash_reply(d, it, req->key, req->nkey, hit, miss_at, it->nbytes);
    } else if (value) {
        dispatch_reply_data(d, it);
    } else {
        item_release(it);
    }
    return DISPATCH_DONE;
}

/* --- ms ---------------------------------------------------------------------- */

static item_store_op_t
ms_op(char mode)
{
    switch (mode) {
    case 'E': return ITEM_OP_ADD;
    case 'A': return ITEM_OP_APPEND;
    case 'P': return ITEM_OP_PREPEND;
    case 'R': return ITEM_OP_REPLACE;
    default:  return ITEM_OP_SET;
    }
}

/* Keep the flags the answer echoes (O, k, c, s): the request line is gone
 * by the time the data block has arrived. */
static void
ms_keep_echo(struct dispatch_ctx *d, const struct proto_meta *m)
{
    char *o = d->ms.echo, *end = d->ms.echo + sizeof(d->ms.echo);
    const char *p = m->flags, *s;
    size_t n;

    while (proto_key_next(&p, m->flags_end, &s, &n)) {
        if (*s != 'O' && *s != 'k' && *s != 'c' && *s != 's') {
            continue;
        }
        /* k, c and s answer with the item's key, CAS and size: their
         * letter is all that is kept. O is at most PROTO_META_OPAQUE_MAX
         * bytes and there is one of each at most, so all four always fit. */
        if (*s != 'O') {
            n = 1;
        }
        if ((size_t)(end - o) < n + 1) {
            break;                      /* cannot happen, see above */
        }
        memcpy(o, s, n);
        o += n;
        *o++ = ' ';
    }
    d->ms.echo_end = o;
}

static dispatch_result_t
cmd_ms(struct dispatch_ctx *d, const struct proto_req *req)
{
    const struct proto_meta *m = &req->meta;
    struct item *it;
    item_status_t st;

    /* An append or prepend with N creates a missing item, with N's TTL
     * (memcached 1.6.45); joined to an existing one, the TTL is its. */
    bool vivify = proto_meta_has(m, 'N') && (m->mode == 'A' || m->mode == 'P');

    STATS_INCR(d->stats, cmd_set);
    st = cache_alloc(req->key, req->nkey, m->client_flags,
                     clock_exptime(vivify ? m->vivify_ttl : m->ttl), req->vlen, &it);
    if (st != ITEM_OK) {
        dispatch_reply_line(d, st == ITEM_TOO_LARGE ?
                            "SERVER_ERROR object too large for cache" :
                            "SERVER_ERROR out of memory storing object");
        if (st == ITEM_TOO_LARGE) {
            STATS_INCR(d->stats, store_too_large);
        } else {
            STATS_INCR(d->stats, store_no_memory);
        }
        /* As memcached: no stale value left behind by a failed set. */
        item_unlink_key(req->key, req->nkey);
        d->swallow = (uint64_t)req->vlen + 2;
        return DISPATCH_SWALLOW;
    }
    STATS_CLASS_INCR(d->stats, slab_cls_of(it), cmd_set);
    ms_keep_echo(d, m);
    d->ms.op = ms_op(m->mode);
    d->ms.has_cas = proto_meta_has(m, 'C');
    d->ms.cas = m->cas;
    d->ms.vivify = vivify;
    d->ms.has_cas_in = proto_meta_has(m, 'E');
    d->ms.cas_in = m->cas_in;
    d->ms.stale_ok = proto_meta_has(m, 'I');
    d->ms.key_binary = m->key_binary;
    d->it = it;
    dispatch_fill_start(d, it, req->vlen + 2);
    d->cmd = PROTO_CMD_MS;
    d->noreply = req->noreply;
    return DISPATCH_NEED_DATA;
}

void
dispatch_meta_data_done(struct dispatch_ctx *d)
{
    struct item *it = d->it;

    d->it = NULL;
    if (!proto_data_ok(d->data + d->ndata - 2)) {
        dispatch_reply(d, PROTO_RSP_BAD_CHUNK);  /* errors ignore q */
        item_release(it);
        return;
    }
    struct item_store_meta sm = {
        .has_cas = d->ms.has_cas, .cas = d->ms.cas, .stale_ok = d->ms.stale_ok,
        .key_binary = d->ms.key_binary, .has_cas_in = d->ms.has_cas_in,
        .cas_in = d->ms.cas_in,
    };
    dispatch_log_lookup(d, item_key(it), item_nkey(it));
    item_status_t st = cache_store_meta(it, d->ms.op, &sm);
    /* Appending with N to no item: created as an add would; if another
     * client created it meanwhile, joined to that once more. */
    for (int k = 0; k < 2 && d->ms.vivify && st == ITEM_NOT_STORED; k++) {
        st = cache_store_meta(it, k == 0 ? ITEM_OP_ADD : d->ms.op, &sm);
    }
    /* A compared set or replace is a cas in memcached's counters. */
    if (sm.has_cas && (d->ms.op == ITEM_OP_SET || d->ms.op == ITEM_OP_REPLACE)) {
        dispatch_count_cas(d, st, slab_cls_of(it));
    }
    const char *code = st == ITEM_OK ? "HD" : st == ITEM_EXISTS ? "EX" :
                       st == ITEM_NOT_FOUND ? "NF" : "NS";
    if (logger_wants(LOGGER_MUTATIONS)) {
        static const char *const names[] = { "set", "add", "replace", "append",
                                             "prepend", "cas" };
        rel_time_t now = clock_now();
        logger_item_store(item_key(it), item_nkey(it),
                          st == ITEM_OK ? LOGGER_STORE_STORED :
                          st == ITEM_EXISTS ? LOGGER_STORE_EXISTS :
                          st == ITEM_NOT_FOUND ? LOGGER_STORE_NOT_FOUND :
                          LOGGER_STORE_NOT_STORED, names[d->ms.op],
                          it->exptime > now ? it->exptime - now : 0,
                          slab_cls_of(it), d->fd, item_vlen(it));
    }
    if (!(st == ITEM_OK && d->noreply)) {
        struct proto_meta m = { .flags = d->ms.echo, .flags_end = d->ms.echo_end };
        struct proto_meta_item mi = {
            .key = item_key(it), .nkey = item_nkey(it),
            .key_binary = d->ms.key_binary, .cas = sm.cas_out, .vlen = sm.vlen_out,
        };
        meta_line(d, code, "Okcs", &m, &mi);
    }
    item_release(it);
}

/* --- md ---------------------------------------------------------------------- */

/*
 * md x: the item stays, its value emptied: an empty item with the flags
 * of F and the TTL of T (none given: 0), keeping the item's CAS unless E
 * names one, stored in its place if the item is there (and its CAS is C's,
 * when given), as memcached 1.6.45 does.
 */
static item_status_t
md_empty_value(const struct proto_req *req, uint8_t *cls, uint32_t *vlen)
{
    const struct proto_meta *m = &req->meta;
    struct item *it;
    item_status_t st = cache_alloc(req->key, req->nkey, m->client_flags,
                                   clock_exptime(m->ttl), 0, &it);

    if (st != ITEM_OK) {
        return st;
    }
    item_value_write(it, 0, "\r\n", 2);
    struct item_store_meta sm = {
        .has_cas = proto_meta_has(m, 'C'), .cas = m->cas, .key_binary = m->key_binary,
        .has_cas_in = proto_meta_has(m, 'E'), .cas_in = m->cas_in, .keep_cas = true,
    };
    st = cache_store_meta(it, ITEM_OP_REPLACE, &sm);
    *cls = slab_cls_of(it);
    *vlen = 0;
    item_release(it);
    return st == ITEM_NOT_STORED ? ITEM_NOT_FOUND : st;
}

static dispatch_result_t
cmd_md(struct dispatch_ctx *d, const struct proto_req *req)
{
    const struct proto_meta *m = &req->meta;
    bool stale = proto_meta_has(m, 'I'), empty = proto_meta_has(m, 'x');
    uint8_t cls = 0;
    uint32_t vlen = 0;
    struct proto_meta_item mi;
    item_status_t st = ITEM_OK;

    dispatch_log_lookup(d, req->key, req->nkey);
    if (empty) {
        st = md_empty_value(req, &cls, &vlen);
        if (st == ITEM_TOO_LARGE || st == ITEM_NO_MEMORY) {
            dispatch_reply_line(d, "SERVER_ERROR out of memory");
            return DISPATCH_DONE;
        }
    }
    if (st == ITEM_OK && (stale || !empty)) {
        st = item_meta_delete(req->key, req->nkey, !empty && proto_meta_has(m, 'C'),
                              m->cas, stale, proto_meta_has(m, 'T'), clock_exptime(m->ttl),
                              proto_meta_has(m, 'E') ? &m->cas_in : NULL, &cls, &vlen);
    }
    if (st == ITEM_OK && !stale) {
        STATS_INCR(d->stats, delete_hits);
        STATS_CLASS_INCR(d->stats, cls, delete_hits);
        /* memcached logs a removal, not an item marked stale (I). */
        if (logger_wants(LOGGER_DELETIONS)) {
            logger_deletion(req->key, req->nkey, "md", cls, vlen);
        }
    } else if (st != ITEM_OK) {
        STATS_INCR(d->stats, delete_misses);
    }
    if (st == ITEM_OK && req->noreply) {
        return DISPATCH_DONE;
    }
    meta_key(&mi, req);
    meta_line(d, st == ITEM_OK ? "HD" : st == ITEM_EXISTS ? "EX" : "NF", "Ok", m, &mi);
    return DISPATCH_DONE;
}

/* --- ma ---------------------------------------------------------------------- */

/* N on a miss: store J (default 0) as the counter, as an add would. */
static item_status_t
ma_vivify(const struct proto_req *req, uint64_t *value, struct item_arith_meta *am)
{
    const struct proto_meta *m = &req->meta;
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)m->initial);
    struct item *it;

    /* The later of N and T sets the created counter's TTL. */
    rel_time_t exptime = clock_exptime(flag_after(m, 'N', 'T') ? m->vivify_ttl :
                                       proto_meta_has(m, 'T') ? m->ttl : m->vivify_ttl);

    if (cache_alloc(req->key, req->nkey, 0, exptime, (uint32_t)n, &it) != ITEM_OK) {
        return ITEM_NO_MEMORY;
    }
    item_value_write(it, 0, digits, (uint32_t)n);
    item_value_write(it, (uint32_t)n, "\r\n", 2);
    struct item_store_meta sm = { .key_binary = m->key_binary,
                                  .has_cas_in = proto_meta_has(m, 'E'), .cas_in = m->cas_in };
    item_status_t st = cache_store_meta(it, ITEM_OP_ADD, &sm);
    if (st == ITEM_OK) {
        *value = m->initial;
        am->cas_out = sm.cas_out;
        am->exptime_before = 0;         /* created without a TTL first */
        am->exptime_out = it->exptime;
    }
    item_release(it);
    return st == ITEM_OK ? ITEM_OK : ITEM_NOT_STORED;
}

static dispatch_result_t
cmd_ma(struct dispatch_ctx *d, const struct proto_req *req)
{
    const struct proto_meta *m = &req->meta;
    bool incr = m->mode == 0 || m->mode == 'I' || m->mode == '+';
    struct item_arith_meta am = {
        .cas = m->cas,
        .has_cas_in = proto_meta_has(m, 'E'),
        .cas_in = m->cas_in,
        .touch = proto_meta_has(m, 'T'),
        .exptime = clock_exptime(m->ttl),
    };
    uint64_t value = 0;
    uint8_t cls = 0;
    struct proto_meta_item mi;

    dispatch_log_lookup(d, req->key, req->nkey);
    item_status_t st = cache_arith_meta(req->key, req->nkey, incr, m->delta, &value,
                                       &cls, &am);
    /* A miss that vivifies is no miss in memcached's counters. */
    if (!(st == ITEM_NOT_FOUND && proto_meta_has(m, 'N'))) {
        dispatch_count_arith(d, incr, st, cls);
    }
    bool created = false;
    if (st == ITEM_NOT_FOUND && proto_meta_has(m, 'N')) {
        st = ma_vivify(req, &value, &am);
        created = st == ITEM_OK;
        if (st == ITEM_NO_MEMORY) {
            dispatch_reply_line(d, "SERVER_ERROR Out of memory allocating new item");
            return DISPATCH_DONE;
        }
    }
    switch (st) {
    case ITEM_NON_NUMERIC:
        dispatch_reply_line(d, "CLIENT_ERROR cannot increment or decrement non-numeric value");
        return DISPATCH_DONE;
    case ITEM_NO_MEMORY:
        dispatch_reply_line(d, "SERVER_ERROR out of memory");
        return DISPATCH_DONE;
    default:
        break;
    }
    meta_key(&mi, req);
    if (st != ITEM_OK) {
        meta_line(d, st == ITEM_EXISTS ? "EX" : st == ITEM_NOT_FOUND ? "NF" : "NS",
                  "Ok", m, &mi);
        return DISPATCH_DONE;
    }
    if (req->noreply) {
        return DISPATCH_DONE;
    }
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)value);
    bool with_value = proto_meta_has(m, 'v');
    mi.vlen = (uint32_t)n;
    mi.cas = am.cas_out;
    mi.ttl_before = ttl_left(am.exptime_before);
    mi.ttl = ttl_left(am.touch ? am.exptime : am.exptime_out);
    mi.ttl_vivify = ttl_left(clock_exptime(m->vivify_ttl));
    mi.vivified = created;
    meta_line(d, with_value ? "VA" : "HD", "ctOk", m, &mi);
    if (with_value) {
        outq_add(d->out, digits, (size_t)n);
        outq_add(d->out, "\r\n", 2);
    }
    return DISPATCH_DONE;
}

/* --- me, mn ------------------------------------------------------------------- */

static dispatch_result_t
cmd_me(struct dispatch_ctx *d, const struct proto_req *req)
{
    struct item_debug dbg;

    STATS_INCR(d->stats, cmd_meta);
    if (!item_debug(req->key, req->nkey, &dbg)) {
        dispatch_reply_line(d, "EN");
        return DISPATCH_DONE;
    }
    struct proto_meta_item mi = {
        .key = req->key, .nkey = req->nkey, .key_binary = dbg.key_binary,
        .la = clock_now() - dbg.time, .cas = dbg.cas, .fetched = dbg.fetched,
    };
    /* The seconds left, as memcached 1.6.45 prints them (1.6.18 printed
     * them negated); -1 for an item that never expires. */
    int64_t exp = dbg.exptime == 0 ? -1 : (int64_t)dbg.exptime - (int64_t)clock_now();
    char buf[PROTO_META_LINE_MAX];
    size_t n = proto_compose_me(buf, sizeof(buf), &mi, exp, dbg.cls, dbg.ntotal);
    outq_add(d->out, buf, n);
    return DISPATCH_DONE;
}

dispatch_result_t
dispatch_meta(struct dispatch_ctx *d, const struct proto_req *req)
{
    d->log_replies = false;
    switch (req->cmd) {
    case PROTO_CMD_MG: return cmd_mg(d, req);
    case PROTO_CMD_MS: return cmd_ms(d, req);
    case PROTO_CMD_MD: return cmd_md(d, req);
    case PROTO_CMD_MA: return cmd_ma(d, req);
    case PROTO_CMD_ME: return cmd_me(d, req);
    default:
        log_debug(">%d MN", d->fd);            /* memcached -vv logs mn's answer */
        outq_add(d->out, "MN\r\n", 4);
        return DISPATCH_DONE;
    }
}
