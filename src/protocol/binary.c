/*
 * binary.c -- memcached's binary protocol: parse requests, compose answers.
 *
 * Each request is a 24-byte header (magic 0x80, opcode, key length,
 * extras length, body length, opaque, cas), then extras, key and value.
 * Every opcode memcached 1.6.18 serves is mapped onto the ASCII command of
 * the same meaning, so one dispatcher runs both; what only binary has
 * (opaque, quiet forms, the key in GETK answers, incr's initial value)
 * travels in req->bin. The shape checks, and which failures close the
 * connection, are memcached's (proto_bin.c dispatch_bin_command).
 */
#include <string.h>

#include "proto.h"
#include "proto_int.h"

#define BIN_REQ_MAGIC 0x80

enum bin_opcode {
    OP_GET = 0x00, OP_SET = 0x01, OP_ADD = 0x02, OP_REPLACE = 0x03,
    OP_DELETE = 0x04, OP_INCREMENT = 0x05, OP_DECREMENT = 0x06, OP_QUIT = 0x07,
    OP_FLUSH = 0x08, OP_GETQ = 0x09, OP_NOOP = 0x0a, OP_VERSION = 0x0b,
    OP_GETK = 0x0c, OP_GETKQ = 0x0d, OP_APPEND = 0x0e, OP_PREPEND = 0x0f,
    OP_STAT = 0x10, OP_SETQ = 0x11, OP_ADDQ = 0x12, OP_REPLACEQ = 0x13,
    OP_DELETEQ = 0x14, OP_INCREMENTQ = 0x15, OP_DECREMENTQ = 0x16,
    OP_QUITQ = 0x17, OP_FLUSHQ = 0x18, OP_APPENDQ = 0x19, OP_PREPENDQ = 0x1a,
    OP_TOUCH = 0x1c, OP_GAT = 0x1d, OP_GATQ = 0x1e, OP_GATK = 0x23,
    OP_GATKQ = 0x24, OP_SASL_LIST = 0x20, OP_SASL_AUTH = 0x21, OP_SASL_STEP = 0x22,
};

static uint16_t
get16(const unsigned char *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t
get64(const unsigned char *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void
put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

void
proto_bin_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void
proto_bin_put64(unsigned char *p, uint64_t v)
{
    proto_bin_put32(p, (uint32_t)(v >> 32));
    proto_bin_put32(p + 4, (uint32_t)v);
}

/* The quiet opcode's loud form, or the opcode itself. */
static uint8_t
loud(uint8_t op, bool *quiet)
{
    static const uint8_t pairs[][2] = {
        { OP_SETQ, OP_SET }, { OP_ADDQ, OP_ADD }, { OP_REPLACEQ, OP_REPLACE },
        { OP_DELETEQ, OP_DELETE }, { OP_INCREMENTQ, OP_INCREMENT },
        { OP_DECREMENTQ, OP_DECREMENT }, { OP_QUITQ, OP_QUIT },
        { OP_FLUSHQ, OP_FLUSH }, { OP_APPENDQ, OP_APPEND },
        { OP_PREPENDQ, OP_PREPEND }, { OP_GETQ, OP_GET }, { OP_GETKQ, OP_GETK },
        { OP_GATQ, OP_GAT }, { OP_GATKQ, OP_GATK },
    };

    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        if (pairs[i][0] == op) {
            *quiet = true;
            return pairs[i][1];
        }
    }
    *quiet = false;
    return op;
}

static proto_status_t
bin_fail(struct proto_req *req, proto_bin_status_t status, bool close,
         uint32_t swallow)
{
    req->bin.status = status;
    req->bin.close = close;
    req->bin.swallow = swallow;
    req->error = "";
    return PROTO_ERROR;
}

/* Map a well-formed request onto its ASCII command; false if its shape is
 * wrong for the opcode (memcached then answers EINVAL and closes). */
static bool
bin_map(uint8_t op, uint8_t extlen, uint16_t keylen, uint32_t bodylen,
        const unsigned char *ext, struct proto_req *req)
{
    switch (op) {
    case OP_VERSION:
    case OP_NOOP:
    case OP_QUIT:
        req->cmd = op == OP_VERSION ? PROTO_CMD_VERSION :
                   op == OP_NOOP ? PROTO_CMD_MN : PROTO_CMD_QUIT;
        return extlen == 0 && keylen == 0 && bodylen == 0;
    case OP_FLUSH:
        req->cmd = PROTO_CMD_FLUSH_ALL;
        if (extlen == 4) {
            req->arg = (int64_t)get32(ext);
            req->has_arg = true;
        }
        return keylen == 0 && bodylen == extlen && (extlen == 0 || extlen == 4);
    case OP_SET:
    case OP_ADD:
    case OP_REPLACE:
        req->cmd = op == OP_SET ? PROTO_CMD_SET : op == OP_ADD ? PROTO_CMD_ADD :
                   PROTO_CMD_REPLACE;
        if (extlen != 8 || keylen == 0 || bodylen < (uint32_t)keylen + 8) {
            return false;
        }
        req->flags = get32(ext);
        req->exptime = get32(ext + 4);   /* unsigned, as memcached reads it */
        req->vlen = bodylen - keylen - 8;
        return true;
    case OP_GET:
    case OP_GETK:
        req->cmd = PROTO_CMD_GET;
        req->bin.with_key = op == OP_GETK;
        return extlen == 0 && bodylen == keylen && keylen > 0;
    case OP_DELETE:
        req->cmd = PROTO_CMD_DELETE;
        return keylen > 0 && extlen == 0 && bodylen == keylen;
    case OP_INCREMENT:
    case OP_DECREMENT:
        req->cmd = op == OP_INCREMENT ? PROTO_CMD_INCR : PROTO_CMD_DECR;
        if (keylen == 0 || extlen != 20 || bodylen != (uint32_t)keylen + 20) {
            return false;
        }
        req->delta = get64(ext);
        req->bin.initial = get64(ext + 8);
        req->exptime = get32(ext + 16);
        req->bin.create = get32(ext + 16) != 0xffffffffu;
        return true;
    case OP_APPEND:
    case OP_PREPEND:
        req->cmd = op == OP_APPEND ? PROTO_CMD_APPEND : PROTO_CMD_PREPEND;
        req->vlen = bodylen - keylen;
        return keylen > 0 && extlen == 0;
    case OP_STAT:
        req->cmd = PROTO_CMD_STATS;
        return extlen == 0;
    case OP_TOUCH:
    case OP_GAT:
    case OP_GATK:
        req->cmd = op == OP_TOUCH ? PROTO_CMD_TOUCH : PROTO_CMD_GAT;
        req->bin.with_key = op == OP_GATK;
        req->bin.touch_only = op == OP_TOUCH;
        if (extlen != 4 || keylen == 0) {
            return false;
        }
        req->exptime = get32(ext);
        return true;
    case OP_SASL_LIST:
    case OP_SASL_AUTH:
    case OP_SASL_STEP:
        /* the mechanism is the key, the client's data the value; what a
         * server without -S answers is the dispatcher's (it knows -S) */
        req->cmd = op == OP_SASL_LIST ? PROTO_CMD_SASL_LIST :
                   op == OP_SASL_AUTH ? PROTO_CMD_SASL_AUTH : PROTO_CMD_SASL_STEP;
        req->vlen = bodylen - keylen - extlen;
        return true;
    default:
        return false;
    }
}

static bool
bin_known(uint8_t op)
{
    switch (op) {
    case OP_VERSION: case OP_NOOP: case OP_QUIT: case OP_FLUSH: case OP_SET:
    case OP_ADD: case OP_REPLACE: case OP_GET: case OP_GETK: case OP_DELETE:
    case OP_INCREMENT: case OP_DECREMENT: case OP_APPEND: case OP_PREPEND:
    case OP_STAT: case OP_TOUCH: case OP_GAT: case OP_GATK:
    case OP_SASL_LIST: case OP_SASL_AUTH: case OP_SASL_STEP:
        return true;
    default:
        return false;
    }
}

size_t
proto_bin_peek_keys(const char *buf, size_t len, struct proto_key *keys, size_t max,
                    size_t *scanned)
{
    size_t off = 0, n = 0;

    *scanned = 0;
    while (n < max && len - off >= PROTO_BIN_HDR_LEN) {
        const unsigned char *h = (const unsigned char *)buf + off;
        uint8_t op = h[1], extlen = h[4];
        uint16_t keylen = get16(h + 2);
        uint32_t bodylen = get32(h + 8);
        bool get = op == OP_GET || op == OP_GETQ || op == OP_GETK || op == OP_GETKQ;
        if (h[0] != BIN_REQ_MAGIC || !get || keylen == 0 || keylen > PROTO_KEY_MAX ||
            (uint32_t)keylen + extlen > bodylen || bodylen > len - off - PROTO_BIN_HDR_LEN) {
            break;
        }
        keys[n].p = buf + off + PROTO_BIN_HDR_LEN + extlen;
        keys[n].n = keylen;
        n++;
        off += PROTO_BIN_HDR_LEN + (size_t)bodylen;
        *scanned = off;
    }
    return n;
}

proto_status_t
proto_bin_parse(const char *buf, size_t len, struct proto_req *req,
                size_t *consumed)
{
    const unsigned char *h = (const unsigned char *)buf;

    memset(req, 0, offsetof(struct proto_req, meta));
    *consumed = 0;
    if (len < PROTO_BIN_HDR_LEN) {
        return PROTO_AGAIN;
    }
    if (h[0] != BIN_REQ_MAGIC) {
        return PROTO_CLOSE;
    }
    uint8_t extlen = h[4];
    uint16_t keylen = get16(h + 2);
    uint32_t bodylen = get32(h + 8);
    req->bin.on = true;
    req->bin.opcode = h[1];
    memcpy(&req->bin.opaque, h + 12, 4);
    req->bin.cas = get64(h + 16);
    req->cas = req->bin.cas;
    /* Both answered and closed before the key is read (memcached reads
     * it first, but a key past 250 bytes would not fit the read buffer's
     * bound anyway): a body shorter than extras and key, a key longer
     * than memcached stores. */
    if (keylen > bodylen || (uint32_t)keylen + extlen > bodylen) {
        *consumed = PROTO_BIN_HDR_LEN;
        return bin_fail(req, PROTO_BIN_UNKNOWN_COMMAND, true, 0);
    }
    if (keylen > PROTO_KEY_MAX) {
        *consumed = PROTO_BIN_HDR_LEN;
        return bin_fail(req, PROTO_BIN_EINVAL, true, 0);
    }
    size_t need = PROTO_BIN_HDR_LEN + (size_t)extlen + keylen;
    if (len < need) {
        return PROTO_AGAIN;
    }
    *consumed = need;
    req->key = buf + PROTO_BIN_HDR_LEN + extlen;
    req->nkey = keylen;
    uint8_t op = loud(req->bin.opcode, &req->bin.quiet);
    uint32_t rest = bodylen - keylen - extlen;
    if (!bin_known(op)) {
        /* Dropping up to 2 GB is patience; more is garbage: close. */
        return bin_fail(req, PROTO_BIN_UNKNOWN_COMMAND, rest > INT32_MAX, rest);
    }
    if (!bin_map(op, extlen, keylen, bodylen, h + PROTO_BIN_HDR_LEN, req)) {
        return bin_fail(req, PROTO_BIN_EINVAL, true, 0);
    }
    req->noreply = req->bin.quiet;
    return PROTO_OK;
}

size_t
proto_bin_compose(char *buf, size_t cap, uint8_t opcode, uint16_t status,
                  uint32_t opaque, uint64_t cas, const void *extras,
                  uint8_t extlen, const char *key, uint16_t keylen,
                  uint32_t body_extra)
{
    size_t n = PROTO_BIN_HDR_LEN + (size_t)extlen + keylen;
    unsigned char *h = (unsigned char *)buf;

    if (n > cap) {
        return 0;
    }
    memset(h, 0, PROTO_BIN_HDR_LEN);
    h[0] = PROTO_BIN_RES_MAGIC;
    h[1] = opcode;
    put16(h + 2, keylen);
    h[4] = extlen;
    put16(h + 6, status);
    proto_bin_put32(h + 8, (uint32_t)extlen + keylen + body_extra);
    memcpy(h + 12, &opaque, 4);
    proto_bin_put64(h + 16, cas);
    if (extlen > 0) {
        memcpy(h + PROTO_BIN_HDR_LEN, extras, extlen);
    }
    if (keylen > 0) {
        memcpy(h + PROTO_BIN_HDR_LEN + extlen, key, keylen);
    }
    return n;
}

static const char *
status_text(uint16_t status)
{
    switch (status) {
    case PROTO_BIN_ENOMEM:          return "Out of memory";
    case PROTO_BIN_UNKNOWN_COMMAND: return "Unknown command";
    case PROTO_BIN_KEY_ENOENT:      return "Not found";
    case PROTO_BIN_EINVAL:          return "Invalid arguments";
    case PROTO_BIN_KEY_EEXISTS:     return "Data exists for key.";
    case PROTO_BIN_E2BIG:           return "Too large.";
    case PROTO_BIN_DELTA_BADVAL:    return "Non-numeric server-side value for incr or decr";
    case PROTO_BIN_NOT_STORED:      return "Not stored.";
    case PROTO_BIN_AUTH_ERROR:      return "Auth failure.";
    default:                        return "";
    }
}

size_t
proto_bin_compose_error(char *buf, size_t cap, uint8_t opcode, uint16_t status,
                        uint32_t opaque, const char *text)
{
    if (text == NULL) {
        text = status_text(status);
    }
    size_t tlen = strlen(text);
    size_t n = proto_bin_compose(buf, cap, opcode, status, opaque, 0, NULL, 0,
                                 NULL, 0, (uint32_t)tlen);

    if (n == 0 || n + tlen > cap) {
        return 0;
    }
    memcpy(buf + n, text, tlen);
    return n + tlen;
}
