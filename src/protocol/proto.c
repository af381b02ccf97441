/*
 * proto.c -- memcached ASCII protocol: request parsing, response composing.
 *
 * Clients are written against memcached's behaviour rather than against its
 * documentation, so this module follows the newest memcached's (1.6.45)
 * parser down to its rules: a line shorter than four bytes and a known
 * command with too few tokens are "CLIENT_ERROR bad command line format",
 * the command is the text before the first space (a leading space makes
 * it unknown, except for the admin commands, which are looked up by their
 * first token), extra tokens are ignored, "noreply" counts only as the
 * last token (even when the command is then rejected), the numbers of
 * most arguments are digits only (flags and exptime of a storage command
 * are still strtol()-style), and an unknown command whose last token
 * starts with "HTTP/" closes the connection. Where memcached 1.6.18
 * answered differently, notes/compatibility.md says so.
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

#include "base64.h"
#include "num.h"
#include "proto_int.h"

#define MC_SPACE_SKIP 100 /* leading spaces memcached tolerates on long gets */

#define MC_LINE_MIN   4   /* "mn\r\n": the shortest request */
#define MC_U32_DIGITS 11  /* longest 32-bit number token memcached reads */
#define MC_U64_DIGITS 22

static const char ERR_ERROR[] = "ERROR";
static const char ERR_FORMAT[] = "CLIENT_ERROR bad command line format";
static const char ERR_DELTA[] = "CLIENT_ERROR invalid numeric delta argument";
static const char ERR_EXPTIME[] = "CLIENT_ERROR invalid exptime argument";

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

bool
proto_tok_u64(struct tok t, uint64_t *out)
{
    return t.n <= MC_U64_DIGITS && num_parse_u64(t.p, t.n, out);
}

bool
proto_tok_u32(struct tok t, uint32_t *out)
{
    uint64_t v;

    if (t.n > MC_U32_DIGITS || !num_parse_u64(t.p, t.n, &v) || v > UINT32_MAX) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool
proto_tok_i32(struct tok t, int32_t *out)
{
    int64_t v;

    if (t.n > MC_U32_DIGITS || !num_parse_i64(t.p, t.n, &v) || v < INT32_MIN || v > INT32_MAX) {
        return false;
    }
    *out = (int32_t)v;
    return true;
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

        while (p < ln->end && *p == ' ') {
            p++;
        }
        if (p == ln->end) {
            break;
        }
        s = p;
        while (p < ln->end && *p != ' ') {
            p++;
        }
        t.p = s;
        t.n = (size_t)(p - s);
        if (ln->ntok < TOK_KEEP) {
            ln->tok[ln->ntok] = t;
        }
        ln->last = t;
        ln->ntok++;
    }
}

/* Everything after the command token, without surrounding spaces. */
static void
rest_of_line(const struct line *ln, const char **sub, size_t *nsub)
{
    const char *p = ln->tok[0].p + ln->tok[0].n, *end = ln->end;

    while (p < end && *p == ' ') {
        p++;
    }
    while (end > p && end[-1] == ' ') {
        end--;
    }
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
    if (proto_tok_is(ln->last, "noreply")) {
        req->noreply = true;
    }
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

/*
 * set/add/replace/append/prepend/cas <key> <flags> <exptime> <bytes> [<cas>]
 * [noreply]: a length that is not a number is refused with nothing
 * swallowed (it says nothing of what follows); once it is one, any other
 * error swallows the data block, as memcached 1.6.45 does. Tokens past
 * those are ignored, and noreply is looked for only once the length is.
 */
static proto_status_t
parse_storage(const struct line *ln, struct proto_req *req)
{
    bool is_cas = req->cmd == PROTO_CMD_CAS;
    int32_t exptime = 0, vlen;
    bool ok;

    if (ln->ntok < 5) {
        return proto_fail(req, ERR_FORMAT);
    }
    set_key(req, ln->tok[1]);
    if (!proto_tok_i32(ln->tok[4], &vlen) || vlen < 0 || vlen > INT32_MAX - 2) {
        return proto_fail(req, ERR_FORMAT);
    }
    noreply_maybe(ln, req);     /* not before: the error above is answered */
    req->vlen = (uint32_t)vlen;
    ok = proto_key_ok(ln->tok[1]) && proto_mc_strtoul(ln->tok[2], &req->flags) &&
         proto_mc_strtol(ln->tok[3], &exptime) &&
         (!is_cas || (ln->ntok > 5 && proto_tok_u64(ln->tok[5], &req->cas)));
    req->exptime = exptime;
    if (!ok) {
        req->swallow = true;
        return proto_fail(req, ERR_FORMAT);
    }
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
        if (req->key == NULL) {
            set_key(req, (struct tok){k, nk});
        }
        if (nk > PROTO_KEY_MAX) {
            return proto_fail(req, ERR_FORMAT);
        }
    }
    return PROTO_OK;
}

static proto_status_t
parse_get(const struct line *ln, struct proto_req *req)
{
    bool get = req->cmd == PROTO_CMD_GET || req->cmd == PROTO_CMD_GETS;
    int32_t exptime;

    if (ln->ntok < (get ? 2u : 3u)) {
        return proto_fail(req, ERR_FORMAT);
    }
    struct tok t1 = ln->tok[1];
    if (get) {
        return set_keys(t1.p, ln->end, req);
    }
    if (!proto_tok_i32(t1, &exptime)) {
        return proto_fail(req, ERR_EXPTIME);
    }
    req->exptime = exptime;
    return set_keys(t1.p + t1.n, ln->end, req);
}

static proto_status_t
parse_arith(const struct line *ln, struct proto_req *req)
{
    if (ln->ntok < 3) {
        return proto_fail(req, ERR_FORMAT);
    }
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1])) {
        return proto_fail(req, ERR_FORMAT);
    }
    if (!proto_tok_u64(ln->tok[2], &req->delta)) {
        return proto_fail(req, ERR_DELTA);
    }
    return PROTO_OK;
}

static proto_status_t
parse_touch(const struct line *ln, struct proto_req *req)
{
    int32_t exptime;

    if (ln->ntok < 3) {
        return proto_fail(req, ERR_FORMAT);
    }
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1])) {
        return proto_fail(req, ERR_FORMAT);
    }
    if (!proto_tok_i32(ln->tok[2], &exptime)) {
        return proto_fail(req, ERR_EXPTIME);
    }
    req->exptime = exptime;
    return PROTO_OK;
}

/* "delete <key> [noreply]": the hold time 1.6.18 still checked for "0"
 * is gone; any other token is ignored. */
static proto_status_t
parse_delete(const struct line *ln, struct proto_req *req)
{
    if (ln->ntok < 2) {
        return proto_fail(req, ERR_FORMAT);
    }
    noreply_maybe(ln, req);
    set_key(req, ln->tok[1]);
    if (!proto_key_ok(ln->tok[1])) {
        return proto_fail(req, ERR_FORMAT);
    }
    return PROTO_OK;
}

/* The delay is parsed only when an argument other than noreply is there. */
static proto_status_t
parse_flush_all(const struct line *ln, struct proto_req *req)
{
    int32_t delay;

    noreply_maybe(ln, req);
    if (ln->ntok == (req->noreply ? 2u : 1u)) {
        return PROTO_OK;
    }
    if (!proto_tok_i32(ln->tok[1], &delay)) {
        return proto_fail(req, ERR_EXPTIME);
    }
    req->arg = delay;
    req->has_arg = true;
    return PROTO_OK;
}

/* verbosity and cache_memlimit differ only in their error text. */
static proto_status_t
parse_u32_arg(const struct line *ln, struct proto_req *req, const char *err)
{
    uint32_t v;

    noreply_maybe(ln, req);
    if (ln->ntok < 2 || !proto_tok_u32(ln->tok[1], &v)) {
        return proto_fail(req, err);
    }
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

struct command {
    const char *name;
    proto_cmd_t cmd;
    parse_fn parse;
};

/* Known by the text before the first space. */
static const struct command commands[] = {
    {"get", PROTO_CMD_GET, parse_get},
    {"gets", PROTO_CMD_GETS, parse_get},
    {"gat", PROTO_CMD_GAT, parse_get},
    {"gats", PROTO_CMD_GATS, parse_get},
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
    {"version", PROTO_CMD_VERSION, parse_bare},
    {"quit", PROTO_CMD_QUIT, parse_bare},
    {"stats", PROTO_CMD_STATS, parse_rest},
    {"watch", PROTO_CMD_WATCH, parse_rest},
};

/* The admin commands: known by their first token, leading spaces or not. */
static const struct command admin_commands[] = {
    {"flush_all", PROTO_CMD_FLUSH_ALL, parse_flush_all},
    {"verbosity", PROTO_CMD_VERBOSITY, parse_verbosity},
    {"shutdown", PROTO_CMD_SHUTDOWN, parse_rest},
    {"refresh_certs", PROTO_CMD_REFRESH_CERTS, parse_rest},
    {"cache_memlimit", PROTO_CMD_CACHE_MEMLIMIT, parse_memlimit},
    {"config", PROTO_CMD_CONFIG, parse_rest},
    {"lru_crawler", PROTO_CMD_LRU_CRAWLER, parse_rest},
    {"slabs", PROTO_CMD_SLABS, parse_rest},
    {"lru", PROTO_CMD_LRU, parse_rest},
    {"extstore", PROTO_CMD_EXTSTORE, parse_rest},
};

static const struct command *
command_find(const struct command *table, size_t n, struct tok name)
{
    for (size_t i = 0; i < n; i++) {
        if (proto_tok_is(name, table[i].name)) {
            return &table[i];
        }
    }
    return NULL;
}

/*
 * memcached closes the connection when an unknown command's last token
 * starts with "HTTP/", so a stray browser does not get a stream of ERRORs.
 */
static bool
looks_like_http(const struct line *ln)
{
    return ln->ntok > 1 && starts_with(ln->last.p, ln->last.p + ln->last.n, "HTTP/");
}

static proto_status_t
dispatch(const struct line *ln, struct proto_req *req)
{
    /* The command: what precedes the first space. */
    struct tok name = ln->ntok > 0 && ln->tok[0].p == ln->start ? ln->tok[0]
                                                                : (struct tok){ ln->start, 0 };
    const struct command *c;

    /* Two letters starting with 'm' are meta commands, as in memcached. */
    if (name.n == 2 && name.p[0] == 'm' && strchr("gsdane", name.p[1]) != NULL) {
        return proto_parse_meta(ln, req);
    }
    c = command_find(commands, sizeof(commands) / sizeof(commands[0]), name);
    if (c == NULL && ln->ntok > 0) {
        c = command_find(admin_commands, sizeof(admin_commands) / sizeof(admin_commands[0]),
                         ln->tok[0]);
    }
    if (c != NULL) {
        req->cmd = c->cmd;
        return c->parse(ln, req);
    }
    if (looks_like_http(ln)) {
        return PROTO_CLOSE;
    }
    noreply_maybe(ln, req);     /* "foo noreply" is answered with nothing */
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

    while (last > from && last[-1] != ' ') {
        last--;
    }
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

    if (end == NULL && nl == NULL) {
        return stream_keys(buf, from, len, req, consumed);
    }
    *consumed = nl != NULL ? (size_t)(nl - buf) + 1 : len;
    if (end == NULL) {
        end = nl;
        if (end > buf && end[-1] == '\r') {
            end--;
        }
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

    if (len <= PROTO_LINE_MAX) {
        return PROTO_AGAIN;
    }
    while (p < end && *p == ' ') {
        p++;
    }
    if (p - buf > MC_SPACE_SKIP) {
        return PROTO_CLOSE;
    }
    for (i = 0; i < sizeof(stream_cmds) / sizeof(stream_cmds[0]); i++) {
        if (starts_with(p, end, stream_cmds[i].prefix)) {
            break;
        }
    }
    if (i == sizeof(stream_cmds) / sizeof(stream_cmds[0])) {
        return PROTO_CLOSE;
    }
    req->cmd = stream_cmds[i].cmd;
    p += strlen(stream_cmds[i].prefix);
    if (stream_cmds[i].exptime) {
        struct tok t;
        int32_t exptime;

        while (p < end && *p == ' ') {
            p++;
        }
        t.p = p;
        while (p < end && *p != ' ') {
            p++;
        }
        t.n = (size_t)(p - t.p);
        if (p == end) {
            return PROTO_CLOSE;     /* a 2 KB exptime is no request */
        }
        if (!proto_tok_i32(t, &exptime)) {
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
    if (nl == NULL) {
        return incomplete_line(buf, len, req, consumed);
    }
    *consumed = (size_t)(nl - buf) + 1;

    /* Shorter than the shortest request: memcached 1.6.45 says so. */
    if (*consumed < MC_LINE_MIN) {
        return proto_fail(req, ERR_FORMAT);
    }
    ln.start = buf;
    ln.end = nl;
    /* memcached strips "\r" only when something precedes it. */
    if (nl - buf > 1 && nl[-1] == '\r') {
        ln.end--;
    }
    /* It then treats the line as a C string: a NUL ends it early. */
    nul = memchr(buf, '\0', (size_t)(ln.end - buf));
    if (nul != NULL) {
        ln.end = nul;
    }

    tokenize(&ln);
    return dispatch(&ln, req);
}

bool
proto_key_next(const char **cursor, const char *end, const char **key,
               size_t *nkey)
{
    const char *p = *cursor;

    while (p < end && *p == ' ') {
        p++;
    }
    if (p == end) {
        *cursor = p;
        return false;
    }
    *key = p;
    while (p < end && *p != ' ') {
        p++;
    }
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
proto_compose_mgdump(char *buf, size_t cap, const char *key, size_t nkey, bool binary)
{
    struct out o = {buf, cap, 0, false};

    out_mem(&o, "mg ", 3);
    if (binary) {
        char enc[(PROTO_KEY_MAX + 2) / 3 * 4 + 1];
        out_mem(&o, enc, base64_encode((const unsigned char *)key, nkey, enc, sizeof(enc)));
        out_mem(&o, " b", 2);
    } else {
        out_mem(&o, key, nkey);
    }
    return out_done(&o);
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
