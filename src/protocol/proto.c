/*
 * proto.c -- memcached ASCII protocol: request parsing, response composing.
 *
 * Clients are written against memcached's behaviour rather than against its
 * documentation, so this module mimics memcached 1.6.18 down to its quirks:
 * the 24-token tokenizer, strtol()-style numbers that accept "+5", "\t5" and
 * "5\tjunk" and are then truncated to 32 bits, "noreply" detection on the
 * last token even when the command is then rejected, the HTTP sniffing that
 * closes the connection, and the exact error texts.
 *
 * The module is pure and allocation free: a request is parsed in place and
 * every pointer in struct proto_req points into the caller's buffer. That
 * keeps the hot path cheap and lets the unit tests drive every branch with
 * plain strings.
 *
 * Reply suppression: memcached decides "noreply" before validating the rest
 * of a line and then also swallows its own error reply. Hence on PROTO_ERROR
 * req->noreply may be true, and the caller must then send nothing (but still
 * honour req->swallow).
 */
#include "proto.h"

#include <stdint.h>
#include <string.h>

#include "num.h"
#include "proto_int.h"

#define MC_SPACE_SKIP 100 /* leading spaces memcached tolerates on long gets */

static const char ERR_ERROR[] = "ERROR";
static const char ERR_FORMAT[] = "CLIENT_ERROR bad command line format";
static const char ERR_DELTA[] = "CLIENT_ERROR invalid numeric delta argument";
static const char ERR_EXPTIME[] = "CLIENT_ERROR invalid exptime argument";
static const char ERR_DELETE[] =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";

/* ------------------------------------------------------------------------ */
/* Numbers                                                                   */
/* ------------------------------------------------------------------------ */

/* memcached's number parsers on one token (util/num.c does the work). */
bool
proto_parse_u64(const char *s, size_t n, uint64_t *out)
{
    return num_parse_u64(s, n, out);
}

bool
proto_parse_i64(const char *s, size_t n, int64_t *out)
{
    return num_parse_i64(s, n, out);
}

bool
proto_mc_strtoull(struct tok t, uint64_t *out)
{
    return num_mc_strtoull(t.p, t.n, out);
}

bool
proto_mc_strtoul(struct tok t, uint32_t *out)
{
    return num_mc_strtoul(t.p, t.n, out);
}

bool
proto_mc_strtol(struct tok t, int32_t *out)
{
    return num_mc_strtol(t.p, t.n, out);
}

/* ------------------------------------------------------------------------ */
/* Lines and tokens                                                          */
/* ------------------------------------------------------------------------ */

bool
proto_tok_is(struct tok t, const char *s)
{
    size_t n = strlen(s);
    return t.n == n && memcmp(t.p, s, n) == 0;
}

static bool
starts_with(const char *p, const char *end, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* Split on ' ' only, keeping at most MC_MAX_TOKENS like memcached does. */
static void
tokenize(struct line *ln)
{
    const char *p = ln->start;

    ln->ntok = 0;
    while (ln->ntok < MC_MAX_TOKENS) {
        const char *s;
        struct tok t;

        while (p < ln->end && *p == ' ')
            p++;
        if (p == ln->end)
            break;
        s = p;
        while (p < ln->end && *p != ' ')
            p++;
        t.p = s;
        t.n = (size_t)(p - s);
        if (ln->ntok < TOK_KEEP)
            ln->tok[ln->ntok] = t;
        ln->last = t;
        ln->ntok++;
    }
}

/* Everything after the command token, without surrounding spaces. */
static void
rest_of_line(const struct line *ln, const char **sub, size_t *nsub)
{
    const char *p = ln->tok[0].p + ln->tok[0].n, *end = ln->end;

    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    *sub = p;
    *nsub = (size_t)(end - p);
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

proto_status_t
proto_fail(struct proto_req *req, const char *msg)
{
    req->error = msg;
    return PROTO_ERROR;
}

/* memcached's set_noreply_maybe(): only the last token counts. */
static void
noreply_maybe(const struct line *ln, struct proto_req *req)
{
    if (proto_tok_is(ln->last, "noreply"))
        req->noreply = true;
}

bool
proto_key_ok(struct tok t)
{
    return t.n <= PROTO_KEY_MAX;
}

static void
set_key(struct proto_req *req, struct tok t)
{
    req->key = t.p;
    req->nkey = t.n;
}

/* The length field, judged exactly as process_update_command() does. */
static bool
storage_vlen(struct tok t, uint32_t *vlen)
{
    int32_t v;

    if (!proto_mc_strtol(t, &v) || v < 0 || v > INT32_MAX - 2)
        return false;
    *vlen = (uint32_t)v;
    return true;
}

/*
 * set/add/replace/append/prepend/cas. Whenever the length is usable the
 * data block is swallowed on error: otherwise client payload would be
 * executed as commands, which memcached does but we refuse to.
 */
static proto_status_t
parse_storage(const struct line *ln, struct proto_req *req)
{
    bool is_cas = req->cmd == PROTO_CMD_CAS;
    size_t ntok = is_cas ? 6 : 5;  /* command token included */
    int32_t exptime = 0;
    bool ok;

    if (ln->ntok != ntok && ln->ntok != ntok + 1)
        return proto_fail(req, ERR_ERROR);
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);

    req->swallow = storage_vlen(ln->tok[4], &req->vlen);
    ok = proto_key_ok(ln->tok[1]) && proto_mc_strtoul(ln->tok[2], &req->flags) &&
         proto_mc_strtol(ln->tok[3], &exptime) && req->swallow &&
         (!is_cas || proto_mc_strtoull(ln->tok[5], &req->cas));
    req->exptime = exptime;
    if (!ok)
        return proto_fail(req, ERR_FORMAT);
    req->swallow = false;
    return PROTO_OK;
}

/* Validate every key up front: memcached rejects the whole multiget. */
static proto_status_t
set_keys(const char *from, const char *end, struct proto_req *req)
{
    const char *cur = from, *k;
    size_t nk;

    req->keys = from;
    req->keys_end = end;
    while (proto_key_next(&cur, end, &k, &nk)) {
        if (req->key == NULL)
            set_key(req, (struct tok){k, nk});
        if (nk > PROTO_KEY_MAX)
            return proto_fail(req, ERR_FORMAT);
    }
    return PROTO_OK;
}

static proto_status_t
parse_get(const struct line *ln, struct proto_req *req)
{
    struct tok t1 = ln->tok[1];
    int32_t exptime;

    if (ln->ntok < 2)
        return proto_fail(req, ERR_ERROR);
    if (req->cmd == PROTO_CMD_GET || req->cmd == PROTO_CMD_GETS)
        return set_keys(t1.p, ln->end, req);
    if (!proto_mc_strtol(t1, &exptime))
        return proto_fail(req, ERR_EXPTIME);
    req->exptime = exptime;
    /* "gat 0" with no keys is legal and answers a bare "END". */
    return set_keys(t1.p + t1.n, ln->end, req);
}

static proto_status_t
parse_arith(const struct line *ln, struct proto_req *req)
{
    if (ln->ntok != 3 && ln->ntok != 4)
        return proto_fail(req, ERR_ERROR);
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1]))
        return proto_fail(req, ERR_FORMAT);
    if (!proto_mc_strtoull(ln->tok[2], &req->delta))
        return proto_fail(req, ERR_DELTA);
    return PROTO_OK;
}

static proto_status_t
parse_touch(const struct line *ln, struct proto_req *req)
{
    int32_t exptime;

    if (ln->ntok != 3 && ln->ntok != 4)
        return proto_fail(req, ERR_ERROR);
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1]))
        return proto_fail(req, ERR_FORMAT);
    if (!proto_mc_strtol(ln->tok[2], &exptime))
        return proto_fail(req, ERR_EXPTIME);
    req->exptime = exptime;
    return PROTO_OK;
}

/*
 * "delete <key> [0] [noreply]": the hold time is a relic and only "0" is
 * still tolerated. noreply is looked at only when extra tokens exist, so
 * "delete noreply" deletes the key "noreply".
 */
static proto_status_t
parse_delete(const struct line *ln, struct proto_req *req)
{
    if (ln->ntok < 2 || ln->ntok > 4)
        return proto_fail(req, ERR_ERROR);
    if (ln->ntok > 2) {
        bool hold_zero = proto_tok_is(ln->tok[2], "0");
        bool valid;

        noreply_maybe(ln, req);
        valid = (ln->ntok == 3 && (hold_zero || req->noreply)) ||
                (ln->ntok == 4 && hold_zero && req->noreply);
        if (!valid)
            return proto_fail(req, ERR_DELETE);
    }
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1]))
        return proto_fail(req, ERR_FORMAT);
    return PROTO_OK;
}

/* The delay is parsed only when an argument other than noreply is there. */
static proto_status_t
parse_flush_all(const struct line *ln, struct proto_req *req)
{
    int32_t delay;

    if (ln->ntok > 3)
        return proto_fail(req, ERR_ERROR);
    noreply_maybe(ln, req);
    if (ln->ntok == (req->noreply ? 2u : 1u))
        return PROTO_OK;
    if (!proto_mc_strtol(ln->tok[1], &delay))
        return proto_fail(req, ERR_EXPTIME);
    req->arg = delay;
    req->has_arg = true;
    return PROTO_OK;
}

/* verbosity and cache_memlimit differ only in their error text. */
static proto_status_t
parse_u32_arg(const struct line *ln, struct proto_req *req, const char *err)
{
    uint32_t v;

    if (ln->ntok != 2 && ln->ntok != 3)
        return proto_fail(req, ERR_ERROR);
    noreply_maybe(ln, req);
    if (!proto_mc_strtoul(ln->tok[1], &v))
        return proto_fail(req, err);
    req->arg = v;
    req->has_arg = true;
    return PROTO_OK;
}

static proto_status_t
parse_verbosity(const struct line *ln, struct proto_req *req)
{
    return parse_u32_arg(ln, req, ERR_FORMAT);
}

static proto_status_t
parse_memlimit(const struct line *ln, struct proto_req *req)
{
    return parse_u32_arg(ln, req, ERR_ERROR);
}

/* Arguments are the caller's business (stats subcommands, shutdown mode). */
static proto_status_t
parse_rest(const struct line *ln, struct proto_req *req)
{
    rest_of_line(ln, &req->sub, &req->nsub);
    return PROTO_OK;
}

/* version and quit ignore any arguments. */
static proto_status_t
parse_bare(const struct line *ln, struct proto_req *req)
{
    (void)ln;
    (void)req;
    return PROTO_OK;
}

typedef proto_status_t (*parse_fn)(const struct line *, struct proto_req *);

static const struct {
    const char *name;
    proto_cmd_t cmd;
    parse_fn parse;
} commands[] = {
    {"get", PROTO_CMD_GET, parse_get},
    {"gets", PROTO_CMD_GETS, parse_get},
    {"gat", PROTO_CMD_GAT, parse_get},
    {"gats", PROTO_CMD_GATS, parse_get},
    {"bget", PROTO_CMD_GET, parse_get},     /* ancient alias still served */
    {"set", PROTO_CMD_SET, parse_storage},
    {"add", PROTO_CMD_ADD, parse_storage},
    {"replace", PROTO_CMD_REPLACE, parse_storage},
    {"append", PROTO_CMD_APPEND, parse_storage},
    {"prepend", PROTO_CMD_PREPEND, parse_storage},
    {"cas", PROTO_CMD_CAS, parse_storage},
    {"touch", PROTO_CMD_TOUCH, parse_touch},
    {"delete", PROTO_CMD_DELETE, parse_delete},
    {"incr", PROTO_CMD_INCR, parse_arith},
    {"decr", PROTO_CMD_DECR, parse_arith},
    {"flush_all", PROTO_CMD_FLUSH_ALL, parse_flush_all},
    {"version", PROTO_CMD_VERSION, parse_bare},
    {"verbosity", PROTO_CMD_VERBOSITY, parse_verbosity},
    {"quit", PROTO_CMD_QUIT, parse_bare},
    {"shutdown", PROTO_CMD_SHUTDOWN, parse_rest},
    {"refresh_certs", PROTO_CMD_REFRESH_CERTS, parse_rest},
    {"cache_memlimit", PROTO_CMD_CACHE_MEMLIMIT, parse_memlimit},
    {"stats", PROTO_CMD_STATS, parse_rest},
    {"config", PROTO_CMD_CONFIG, parse_rest},
    {"lru_crawler", PROTO_CMD_LRU_CRAWLER, parse_rest},
    {"slabs", PROTO_CMD_SLABS, parse_rest},
    {"lru", PROTO_CMD_LRU, parse_rest},
    {"extstore", PROTO_CMD_EXTSTORE, parse_rest},
    {"watch", PROTO_CMD_WATCH, parse_rest},
};

/*
 * memcached closes the connection when an unknown command's last token
 * starts with "HTTP/", so a stray browser does not get a stream of ERRORs.
 * Commands whose first letter has its own dispatch branch in memcached
 * (and two-letter meta commands) never reach that check.
 */
static bool
looks_like_http(const struct line *ln)
{
    struct tok cmd = ln->tok[0];

    if (strchr("gsacidt", cmd.p[0]) != NULL)
        return false;
    if (cmd.p[0] == 'm' && cmd.n == 2)
        return false;
    return starts_with(ln->last.p, ln->last.p + ln->last.n, "HTTP/");
}

static proto_status_t
dispatch(const struct line *ln, struct proto_req *req)
{
    size_t i;

    /* No memcached command is shorter than two bytes. */
    if (ln->ntok == 0 || ln->tok[0].n < 2)
        return proto_fail(req, ERR_ERROR);
    /* Two letters starting with 'm' are meta commands, as in memcached. */
    if (ln->tok[0].n == 2 && ln->tok[0].p[0] == 'm')
        return proto_parse_meta(ln, req);
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (proto_tok_is(ln->tok[0], commands[i].name)) {
            req->cmd = commands[i].cmd;
            return commands[i].parse(ln, req);
        }
    }
    if (looks_like_http(ln))
        return PROTO_CLOSE;
    return proto_fail(req, ERR_ERROR);
}

/* ------------------------------------------------------------------------ */
/* Streamed multi-gets                                                       */
/* ------------------------------------------------------------------------ */

/*
 * memcached buffers a get line of any length before answering it. Here a
 * get line that outgrows PROTO_LINE_MAX without its newline is answered in
 * pieces as its keys arrive, so a 4 MB line of 20,000 keys costs a read
 * buffer, not 4 MB. memcached keeps waiting only for get and gets; gat and
 * gats are streamed too, since they are the same request with a touch.
 */
static const struct {
    const char *prefix;
    proto_cmd_t cmd;
    bool exptime;
} stream_cmds[] = {
    {"get ", PROTO_CMD_GET, false},
    {"gets ", PROTO_CMD_GETS, false},
    {"gat ", PROTO_CMD_GAT, true},
    {"gats ", PROTO_CMD_GATS, true},
};

/*
 * Keys in buf[from..len) of a line whose newline has not arrived: complete
 * up to the last space; after it comes an unfinished key, which is waited
 * for unless it already cannot be a key.
 */
static proto_status_t
stream_keys(const char *buf, const char *from, size_t len,
            struct proto_req *req, size_t *consumed)
{
    const char *end = buf + len, *last = end;

    while (last > from && last[-1] != ' ')
        last--;
    if ((size_t)(end - last) > PROTO_KEY_MAX) {
        *consumed = len;
        req->swallow_line = true;
        return proto_fail(req, ERR_FORMAT);
    }
    *consumed = (size_t)(last - buf);
    if (set_keys(from, last, req) != PROTO_OK) {
        *consumed = len;
        req->swallow_line = true;
        return PROTO_ERROR;
    }
    return *consumed == 0 ? PROTO_AGAIN : PROTO_PART;
}

/*
 * Keys of a streamed line from buf+from on. As for a whole line, a NUL
 * ends the line early (memcached reads it as a C string) and "\r" before
 * the newline is not part of the last key.
 */
static proto_status_t
stream_chunk(const char *buf, const char *from, size_t len,
             struct proto_req *req, size_t *consumed)
{
    const char *nl = memchr(from, '\n', len - (size_t)(from - buf));
    const char *scan_end = nl != NULL ? nl : buf + len;
    const char *end = memchr(from, '\0', (size_t)(scan_end - from));

    if (end == NULL && nl == NULL)
        return stream_keys(buf, from, len, req, consumed);
    *consumed = nl != NULL ? (size_t)(nl - buf) + 1 : len;
    if (end == NULL) {
        end = nl;
        if (end > buf && end[-1] == '\r')
            end--;
    } else {
        req->swallow_line = nl == NULL;
    }
    return set_keys(from, end, req);
}

/*
 * No newline yet. Past PROTO_LINE_MAX only a get line may go on (in
 * pieces, see above); anything else is junk or an attack, and the
 * connection is dropped, as memcached does.
 */
static proto_status_t
incomplete_line(const char *buf, size_t len, struct proto_req *req,
                size_t *consumed)
{
    const char *p = buf, *end = buf + len;
    size_t i;

    if (len <= PROTO_LINE_MAX)
        return PROTO_AGAIN;
    while (p < end && *p == ' ')
        p++;
    if (p - buf > MC_SPACE_SKIP)
        return PROTO_CLOSE;
    for (i = 0; i < sizeof(stream_cmds) / sizeof(stream_cmds[0]); i++) {
        if (starts_with(p, end, stream_cmds[i].prefix))
            break;
    }
    if (i == sizeof(stream_cmds) / sizeof(stream_cmds[0]))
        return PROTO_CLOSE;
    req->cmd = stream_cmds[i].cmd;
    p += strlen(stream_cmds[i].prefix);
    if (stream_cmds[i].exptime) {
        struct tok t;
        int32_t exptime;

        while (p < end && *p == ' ')
            p++;
        t.p = p;
        while (p < end && *p != ' ')
            p++;
        t.n = (size_t)(p - t.p);
        if (p == end)
            return PROTO_CLOSE;     /* a 2 KB exptime is no request */
        if (!proto_mc_strtol(t, &exptime)) {
            *consumed = len;
            req->swallow_line = true;
            return proto_fail(req, ERR_EXPTIME);
        }
        req->exptime = exptime;
    }
    proto_status_t st = stream_chunk(buf, p, len, req, consumed);
    return st == PROTO_AGAIN ? PROTO_PART : st;
}

proto_status_t
proto_parse_keys(const char *buf, size_t len, struct proto_req *req,
                 size_t *consumed)
{
    memset(req, 0, offsetof(struct proto_req, meta));
    *consumed = 0;
    return stream_chunk(buf, buf, len, req, consumed);
}

proto_status_t
proto_parse(const char *buf, size_t len, struct proto_req *req,
            size_t *consumed)
{
    const char *nl = memchr(buf, '\n', len);
    const char *nul;
    struct line ln;

    memset(req, 0, offsetof(struct proto_req, meta));
    *consumed = 0;
    if (nl == NULL)
        return incomplete_line(buf, len, req, consumed);
    *consumed = (size_t)(nl - buf) + 1;

    ln.start = buf;
    ln.end = nl;
    /* memcached strips "\r" only when something precedes it. */
    if (nl - buf > 1 && nl[-1] == '\r')
        ln.end--;
    /* It then treats the line as a C string: a NUL ends it early. */
    nul = memchr(buf, '\0', (size_t)(ln.end - buf));
    if (nul != NULL)
        ln.end = nul;

    tokenize(&ln);
    return dispatch(&ln, req);
}

bool
proto_key_next(const char **cursor, const char *end, const char **key,
               size_t *nkey)
{
    const char *p = *cursor;

    while (p < end && *p == ' ')
        p++;
    if (p == end) {
        *cursor = p;
        return false;
    }
    *key = p;
    while (p < end && *p != ' ')
        p++;
    *nkey = (size_t)(p - *key);
    *cursor = p;
    return true;
}

/* The key a one-key read line looks up, or false (see proto_peek_keys). */
static bool
peek_line_key(const char *p, const char *end, struct proto_key *key)
{
    const char *cur = p, *cmd, *k, *flag;
    size_t ncmd, nk, nflag;

    if (!proto_key_next(&cur, end, &cmd, &ncmd) || !proto_key_next(&cur, end, &k, &nk) ||
        nk > PROTO_KEY_MAX) {
        return false;
    }
    if ((ncmd == 3 && memcmp(cmd, "get", 3) == 0) || (ncmd == 4 && memcmp(cmd, "gets", 4) == 0)) {
        key->p = k;
        key->n = nk;
        return !proto_key_next(&cur, end, &flag, &nflag);   /* one key only */
    }
    if (ncmd != 2 || memcmp(cmd, "mg", 2) != 0) {
        return false;
    }
    while (proto_key_next(&cur, end, &flag, &nflag)) {
        if (nflag == 1 && flag[0] == 'b') {
            return false;       /* a base64 key: decoded by the real parse */
        }
    }
    key->p = k;
    key->n = nk;
    return true;
}

size_t
proto_peek_keys(const char *buf, size_t len, struct proto_key *keys, size_t max,
                size_t *scanned)
{
    const char *p = buf, *end = buf + len;
    size_t n = 0;

    *scanned = 0;
    while (n < max && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) {
            break;
        }
        const char *line_end = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (!peek_line_key(p, line_end, &keys[n])) {
            break;
        }
        n++;
        p = nl + 1;
        *scanned = (size_t)(p - buf);
    }
    return n;
}

bool
proto_data_ok(const char *data_tail2)
{
    return data_tail2[0] == '\r' && data_tail2[1] == '\n';
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */
/* ------------------------------------------------------------------------ */

#define RSP(s) {s "\r\n", sizeof(s "\r\n") - 1}

static const struct {
    const char *str;
    size_t len;
} rsp_table[PROTO_RSP_MAX] = {
    [PROTO_RSP_STORED] = RSP("STORED"),
    [PROTO_RSP_NOT_STORED] = RSP("NOT_STORED"),
    [PROTO_RSP_EXISTS] = RSP("EXISTS"),
    [PROTO_RSP_NOT_FOUND] = RSP("NOT_FOUND"),
    [PROTO_RSP_DELETED] = RSP("DELETED"),
    [PROTO_RSP_TOUCHED] = RSP("TOUCHED"),
    [PROTO_RSP_END] = RSP("END"),
    [PROTO_RSP_OK] = RSP("OK"),
    [PROTO_RSP_ERROR] = RSP("ERROR"),
    [PROTO_RSP_RESET] = RSP("RESET"),
    [PROTO_RSP_BAD_CHUNK] = RSP("CLIENT_ERROR bad data chunk"),
    [PROTO_RSP_BAD_FORMAT] = RSP("CLIENT_ERROR bad command line format"),
    [PROTO_RSP_TOO_LARGE] = RSP("SERVER_ERROR object too large for cache"),
    [PROTO_RSP_OOM] = RSP("SERVER_ERROR out of memory storing object"),
    [PROTO_RSP_NON_NUMERIC] =
        RSP("CLIENT_ERROR cannot increment or decrement non-numeric value"),
    [PROTO_RSP_INCR_OOM] = RSP("SERVER_ERROR out of memory"),
    [PROTO_RSP_TOO_MANY_CONNS] = RSP("ERROR Too many open connections"),
    /* memcached 1.6.45's text (1.6.18: "ERROR: shutdown not enabled") */
    [PROTO_RSP_SHUTDOWN_DISABLED] = RSP("SERVER_ERROR: shutdown not enabled"),
};

const char *
proto_rsp_str(proto_rsp_t rsp, size_t *len)
{
    if ((unsigned)rsp >= PROTO_RSP_MAX) {
        *len = 0;
        return NULL;
    }
    *len = rsp_table[rsp].len;
    return rsp_table[rsp].str;
}

/*
 * A bounded writer: every append checks the remaining room, and a single
 * overflow poisons the whole composition so callers just test for 0.
 */
struct out {
    char *buf;
    size_t cap;
    size_t len;
    bool overflow;
};

static void
out_mem(struct out *o, const char *s, size_t n)
{
    if (o->overflow || o->cap - o->len < n) {
        o->overflow = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void
out_str(struct out *o, const char *s)
{
    out_mem(o, s, strlen(s));
}

static void
out_u64(struct out *o, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    out_mem(o, tmp + i, sizeof(tmp) - i);
}

static size_t
out_done(struct out *o)
{
    out_mem(o, "\r\n", 2);
    return o->overflow ? 0 : o->len;
}

size_t
proto_compose_value(char *buf, size_t cap, const char *key, size_t nkey,
                    uint32_t flags, uint32_t vlen, bool with_cas, uint64_t cas)
{
    struct out o = {buf, cap, 0, false};

    out_mem(&o, "VALUE ", 6);
    out_mem(&o, key, nkey);
    out_mem(&o, " ", 1);
    out_u64(&o, flags);
    out_mem(&o, " ", 1);
    out_u64(&o, vlen);
    if (with_cas) {
        out_mem(&o, " ", 1);
        out_u64(&o, cas);
    }
    return out_done(&o);
}

size_t
proto_compose_uint(char *buf, size_t cap, uint64_t v)
{
    struct out o = {buf, cap, 0, false};

    out_u64(&o, v);
    return out_done(&o);
}

size_t
proto_compose_stat(char *buf, size_t cap, const char *name, const char *value)
{
    struct out o = {buf, cap, 0, false};

    out_mem(&o, "STAT ", 5);
    out_str(&o, name);
    out_mem(&o, " ", 1);
    out_str(&o, value);
    return out_done(&o);
}

size_t
proto_compose_line(char *buf, size_t cap, const char *text)
{
    struct out o = {buf, cap, 0, false};

    out_str(&o, text);
    return out_done(&o);
}

/* memcached's uriencode(): all but [A-Za-z0-9._~-] becomes %XX. */
static void
out_uri(struct out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
            c == '-') {
            out_mem(o, s + i, 1);
        } else {
            char e[3] = { '%', hex[c >> 4], hex[c & 15] };
            out_mem(o, e, 3);
        }
    }
}

size_t
proto_compose_metadump(char *buf, size_t cap, const char *key, size_t nkey,
                       int64_t exp, uint64_t la, uint64_t cas, bool fetched,
                       unsigned cls, uint64_t size, uint32_t flags)
{
    struct out o = {buf, cap, 0, false};

    out_mem(&o, "key=", 4);
    out_uri(&o, key, nkey);
    out_mem(&o, " exp=", 5);
    if (exp < 0) {
        out_mem(&o, "-1", 2);
    } else {
        out_u64(&o, (uint64_t)exp);
    }
    out_mem(&o, " la=", 4);
    out_u64(&o, la);
    out_mem(&o, " cas=", 5);
    out_u64(&o, cas);
    out_str(&o, fetched ? " fetch=yes" : " fetch=no");
    out_mem(&o, " cls=", 5);
    out_u64(&o, cls);
    out_mem(&o, " size=", 6);
    out_u64(&o, size);
    out_mem(&o, " flags=", 7);
    out_u64(&o, flags);
    out_mem(&o, " \n", 2);
    return o.overflow ? 0 : o.len;
}

size_t
proto_compose_cachedump(char *buf, size_t cap, const char *key, size_t nkey,
                        uint32_t vlen, uint64_t exp)
{
    struct out o = {buf, cap, 0, false};

    out_mem(&o, "ITEM ", 5);
    out_mem(&o, key, nkey);
    out_mem(&o, " [", 2);
    out_u64(&o, vlen);
    out_mem(&o, " b; ", 4);
    out_u64(&o, exp);
    out_mem(&o, " s]", 3);
    return out_done(&o);
}

size_t
proto_uri_encode(char *buf, size_t cap, const char *key, size_t nkey)
{
    struct out o = {buf, cap, 0, false};

    out_uri(&o, key, nkey);
    out_mem(&o, "", 1);
    return o.overflow ? 0 : o.len - 1;
}
