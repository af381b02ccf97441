/*
 * meta.c -- memcached 1.6's meta commands: parse "mg ms md ma mn me" lines
 * and compose their answers, byte for byte as memcached 1.6.18 does.
 *
 * A meta command is "<cm> <key> [<datalen>] <flag>*": each flag a letter,
 * some with a token ("T30", "Oopaque"). Which checks come first, and which
 * error text each command gives, differs between the commands in memcached
 * (mg says "options flags are too long", the others "options flags too
 * long"; md and ma report any flag error as "invalid or duplicate flag");
 * clients and memcached's own tests see those texts, so they are kept.
 *
 * One deviation: an opaque token over 32 bytes is refused before the
 * command runs; memcached notices it while writing the answer, after an mg
 * has already applied a T or an ma its delta.
 */
#include <string.h>

#include "base64.h"
#include "proto.h"
#include "proto_int.h"

#define META_TOKENS_MAX 20  /* command, key and flags memcached 1.6.45 takes */

static const char ERR_ERROR[] = "ERROR";
static const char ERR_FORMAT[] = "CLIENT_ERROR bad command line format";
static const char ERR_BAD_TOKEN[] = "CLIENT_ERROR bad token in command line format";
static const char ERR_DUP[] = "CLIENT_ERROR duplicate flag";
static const char ERR_INVALID[] = "CLIENT_ERROR invalid flag";
static const char ERR_INVALID_DUP[] = "CLIENT_ERROR invalid or duplicate flag";
static const char ERR_OPAQUE[] = "CLIENT_ERROR opaque token too long";

/* The flag's token without its letter. */
static struct tok
flag_arg(struct tok t)
{
    return (struct tok){ t.p + 1, t.n - 1 };
}

static bool
decode_key(struct proto_req *req)
{
    size_t n = base64_decode(req->key, req->nkey, (unsigned char *)req->meta.key,
                             sizeof(req->meta.key));

    if (n == 0) {
        return false;
    }
    req->key = req->meta.key;
    req->nkey = n;
    req->meta.key_binary = true;
    return true;
}

/*
 * memcached's flag pre-parse: every flag from token `first` on. A repeated
 * or unknown flag stops it at once; a bad number marks the request failed
 * (*err) and the parse goes on, so the last such error is the one shown.
 * Returns false on any error.
 */
static bool
meta_flags(const struct line *ln, size_t first, struct proto_req *req,
           const char **err)
{
    struct proto_meta *m = &req->meta;
    bool seen[128] = { false };
    bool failed = false;

    for (size_t i = first; i < ln->ntok; i++) {
        struct tok t = ln->tok[i];
        unsigned char o = (unsigned char)t.p[0];
        if (o >= 127 || seen[o]) {
            *err = ERR_DUP;
            return false;
        }
        seen[o] = true;
        m->seen |= proto_meta_bit((char)o);
        switch (o) {
        case 'b':
            if (!decode_key(req)) {
                *err = "CLIENT_ERROR error decoding key";
                failed = true;
            }
            break;
        case 'N':
        case 'T':
        case 'R': {
            int32_t v;
            if (t.n < 2 || !proto_tok_i32(flag_arg(t), &v)) {
                *err = ERR_BAD_TOKEN;
                failed = true;
            } else {
                *(o == 'N' ? &m->vivify_ttl : o == 'T' ? &m->ttl : &m->recache_ttl) = v;
            }
            break;
        }
        case 'F':
            failed |= t.n < 2 || !proto_tok_u32(flag_arg(t), &m->client_flags);
            break;
        case 'C':
        case 'E':
            if (t.n < 2 || !proto_tok_u64(flag_arg(t), o == 'C' ? &m->cas : &m->cas_in)) {
                *err = ERR_BAD_TOKEN;
                failed = true;
            }
            break;
        case 'M':
            /* The letter after M, whatever follows it (1.6.18 wanted
             * exactly one); none is no mode memcached knows. */
            m->mode = t.n >= 2 ? t.p[1] : ' ';
            break;
        case 'J':
            if (t.n < 2 || !proto_tok_u64(flag_arg(t), &m->initial)) {
                *err = "CLIENT_ERROR invalid numeric initial value";
                failed = true;
            }
            break;
        case 'D':
            if (t.n < 2 || !proto_tok_u64(flag_arg(t), &m->delta)) {
                *err = "CLIENT_ERROR invalid numeric delta value";
                failed = true;
            }
            break;
        case 'I': case 'O': case 'P': case 'L': case 'k': case 's': case 't': case 'c':
        case 'f': case 'v': case 'h': case 'u': case 'q': case 'l': case 'x':
            break;
        default:
            *err = ERR_INVALID;
            return false;
        }
    }
    return !failed;
}

/* memcached checks opaque lengths after the flags, with its own error
 * text for every command. */
static bool
opaque_ok(const struct line *ln, size_t first)
{
    for (size_t i = first; i < ln->ntok; i++) {
        if (ln->tok[i].p[0] == 'O' && ln->tok[i].n > PROTO_META_OPAQUE_MAX) {
            return false;
        }
    }
    return true;
}

/* The fields every meta command starts from. */
static void
meta_init(const struct line *ln, struct proto_req *req, size_t first)
{
    struct proto_meta *m = &req->meta;

    m->seen = 0;
    m->ttl = m->vivify_ttl = m->recache_ttl = 0;
    m->client_flags = 0;
    m->cas = m->cas_in = m->initial = 0;
    m->delta = 1;
    m->mode = 0;
    m->key_binary = false;
    m->flags = first < ln->ntok ? ln->tok[first].p : ln->end;
    m->flags_end = ln->end;
    req->key = ln->tok[1].p;
    req->nkey = ln->tok[1].n;
}

/* me <key> [b ...]: no flags beyond b, any other tokens ignored. The key
 * is decoded only when a token follows the b, as memcached 1.6.45 does
 * ("me KEY b" looks the key up as it is written). */
static proto_status_t
parse_me(const struct line *ln, struct proto_req *req)
{
    if (ln->ntok < 2 || !proto_key_ok(ln->tok[1])) {
        return proto_fail(req, ERR_FORMAT);
    }
    meta_init(ln, req, ln->ntok);
    if (ln->ntok >= 4 && proto_tok_is(ln->tok[2], "b") && !decode_key(req)) {
        return proto_fail(req, ERR_FORMAT);
    }
    return PROTO_OK;
}

/* mg, md, ma: "<cm> <key> <flag>*". */
static proto_status_t
parse_keyed(const struct line *ln, struct proto_req *req)
{
    const char *err = ERR_FORMAT;

    if (ln->ntok < 2) {
        return proto_fail(req, ERR_FORMAT);
    }
    /* ma answers every error of its key and flags with one text. */
    if (!proto_key_ok(ln->tok[1])) {
        return proto_fail(req, req->cmd == PROTO_CMD_MA ? ERR_INVALID_DUP : ERR_FORMAT);
    }
    if (ln->ntok > META_TOKENS_MAX) {
        return proto_fail(req, req->cmd == PROTO_CMD_MA ? ERR_INVALID_DUP :
                               "CLIENT_ERROR options flags are too long");
    }
    meta_init(ln, req, 2);
    if (!meta_flags(ln, 2, req, &err)) {
        return proto_fail(req, req->cmd == PROTO_CMD_MA ? ERR_INVALID_DUP : err);
    }
    if (!opaque_ok(ln, 2)) {
        return proto_fail(req, ERR_OPAQUE);
    }
    if (req->cmd == PROTO_CMD_MA && req->meta.mode != 0 &&
        strchr("I+D-", req->meta.mode) == NULL) {
        return proto_fail(req, "CLIENT_ERROR invalid mode for ma M token");
    }
    req->noreply = proto_meta_has(&req->meta, 'q');
    return PROTO_OK;
}

/*
 * ms <key> <datalen> <flag>*. Once the length is known, an error still
 * swallows the data block (as memcached does here, unlike for classic
 * storage commands with a bad line).
 */
static proto_status_t
parse_ms(const struct line *ln, struct proto_req *req)
{
    const char *err = ERR_FORMAT;
    int32_t vlen;

    if (ln->ntok < 3 || !proto_key_ok(ln->tok[1])) {
        return proto_fail(req, ERR_FORMAT);
    }
    if (ln->ntok > META_TOKENS_MAX) {
        return proto_fail(req, "CLIENT_ERROR options flags are too long");
    }
    if (!proto_tok_i32(ln->tok[2], &vlen) || vlen < 0 || vlen > INT32_MAX - 2) {
        return proto_fail(req, ERR_FORMAT);
    }
    req->vlen = (uint32_t)vlen;
    meta_init(ln, req, 3);
    req->swallow = true;
    if (!meta_flags(ln, 3, req, &err)) {
        return proto_fail(req, err);
    }
    if (!opaque_ok(ln, 3)) {
        return proto_fail(req, ERR_OPAQUE);
    }
    if (req->meta.mode != 0 && strchr("EAPRS", req->meta.mode) == NULL) {
        return proto_fail(req, "CLIENT_ERROR invalid mode for ms M token");
    }
    req->swallow = false;
    req->flags = req->meta.client_flags;
    req->exptime = req->meta.ttl;
    req->noreply = proto_meta_has(&req->meta, 'q');
    return PROTO_OK;
}

/*
 * memcached 1.6.45 reads a meta command's flags as it splits the line: a
 * flag token that starts with neither a letter (of 'A'..'z') nor a digit
 * fails the whole line, before any flag is judged.
 */
static bool
flag_tokens_ok(const struct line *ln)
{
    size_t first = ln->tok[0].p[1] == 's' ? 3 : 2;

    for (size_t i = first; i < ln->ntok; i++) {
        unsigned char c = (unsigned char)ln->tok[i].p[0];
        if (!(c >= 'A' && c <= 'z') && !(c >= '0' && c <= '9')) {
            return false;
        }
    }
    return true;
}

proto_status_t
proto_parse_meta(const struct line *ln, struct proto_req *req)
{
    if (!flag_tokens_ok(ln)) {
        return proto_fail(req, ERR_FORMAT);
    }
    switch (ln->tok[0].p[1]) {
    case 'g': req->cmd = PROTO_CMD_MG; return parse_keyed(ln, req);
    case 's': req->cmd = PROTO_CMD_MS; return parse_ms(ln, req);
    case 'd': req->cmd = PROTO_CMD_MD; return parse_keyed(ln, req);
    case 'a': req->cmd = PROTO_CMD_MA; return parse_keyed(ln, req);
    case 'e': req->cmd = PROTO_CMD_ME; return parse_me(ln, req);
    case 'n': req->cmd = PROTO_CMD_MN; return PROTO_OK;
    default:  return proto_fail(req, ERR_ERROR);
    }
}

/* --- answers ----------------------------------------------------------------- */

struct mout {
    char  *p;
    char  *end;
    bool   ok;
};

static void
put(struct mout *o, const char *s, size_t n)
{
    if (!o->ok || (size_t)(o->end - o->p) < n) {
        o->ok = false;
        return;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

static void
put_u64(struct mout *o, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(o, tmp + i, sizeof(tmp) - i);
}

static void
put_flag(struct mout *o, char c)
{
    char two[2] = { ' ', c };

    put(o, two, 2);
}

/* " k<key>", base64 and " b" for a binary key, as memcached's META_KEY. */
static void
put_key(struct mout *o, const char *key, size_t nkey, bool binary)
{
    put_flag(o, 'k');
    if (!binary) {
        put(o, key, nkey);
        return;
    }
    char enc[(PROTO_KEY_MAX + 2) / 3 * 4];
    size_t n = base64_encode((const unsigned char *)key, nkey, enc, sizeof(enc));
    put(o, enc, n);
    put(o, " b", 2);
}

size_t
proto_compose_meta(char *buf, size_t cap, const char *code, const char *echo,
                   const struct proto_meta *m, const struct proto_meta_item *it)
{
    struct mout o = { buf, buf + cap, true };
    const char *p = m->flags;
    int64_t ttl = it != NULL ? it->ttl_before : -1;   /* as the flags so far leave it */

    put(&o, code, 2);
    if (strcmp(code, "VA") == 0) {
        put(&o, " ", 1);
        put_u64(&o, it->vlen);
    }
    const char *s;
    size_t n;

    while (proto_key_next(&p, m->flags_end, &s, &n)) {
        if (*s == 'T' && it != NULL) {
            ttl = it->ttl;
        } else if (*s == 'N' && it != NULL && it->vivified) {
            ttl = it->ttl_vivify;
        }
        if (strchr(echo, *s) == NULL) {
            continue;
        }
        switch (*s) {
        case 'O':
            put(&o, " ", 1);
            put(&o, s, n);
            break;
        case 'k':
            put_key(&o, it->key, it->nkey, it->key_binary);
            break;
        case 's':
            put_flag(&o, 's');
            put_u64(&o, it->vlen);
            break;
        case 't': {
            put_flag(&o, 't');
            if (ttl < 0) {
                put(&o, "-1", 2);
            } else {
                put_u64(&o, (uint64_t)ttl);
            }
            break;
        }
        case 'c':
            put_flag(&o, 'c');
            put_u64(&o, it->cas);
            break;
        case 'f':
            put_flag(&o, 'f');
            put_u64(&o, it->client_flags);
            break;
        case 'l':
            put_flag(&o, 'l');
            put_u64(&o, it->la);
            break;
        case 'h':
            put_flag(&o, 'h');
            put(&o, it->fetched ? "1" : "0", 1);
            break;
        default:
            break;
        }
    }
    /* Z before X before W, and never W with Z (memcached's order). */
    if (it != NULL && it->token_sent) {
        put_flag(&o, 'Z');
    }
    if (it != NULL && it->stale) {
        put_flag(&o, 'X');
    }
    if (it != NULL && it->won) {
        put_flag(&o, 'W');
    }
    put(&o, "\r\n", 2);
    return o.ok ? (size_t)(o.p - buf) : 0;
}

size_t
proto_compose_me(char *buf, size_t cap, const struct proto_meta_item *it,
                 int64_t exp, unsigned cls, uint64_t size)
{
    struct mout o = { buf, buf + cap, true };

    put(&o, "ME ", 3);
    if (it->key_binary) {
        char enc[(PROTO_KEY_MAX + 2) / 3 * 4];
        put(&o, enc, base64_encode((const unsigned char *)it->key, it->nkey,
                                   enc, sizeof(enc)));
    } else {
        put(&o, it->key, it->nkey);
    }
    put(&o, " exp=", 5);
    if (exp < 0) {
        put(&o, "-", 1);
        put_u64(&o, (uint64_t)(-exp));
    } else {
        put_u64(&o, (uint64_t)exp);
    }
    put(&o, " la=", 4);
    put_u64(&o, it->la);
    put(&o, " cas=", 5);
    put_u64(&o, it->cas);
    put(&o, it->fetched ? " fetch=yes" : " fetch=no", it->fetched ? 10 : 9);
    put(&o, " cls=", 5);
    put_u64(&o, cls);
    put(&o, " size=", 6);
    put_u64(&o, size);
    put(&o, "\r\n", 2);
    return o.ok ? (size_t)(o.p - buf) : 0;
}
