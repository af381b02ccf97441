/*
 * proto_auth.c -- memcached's ASCII authentication exchange (-Y), parsed: a fake
 * "set <key> <flags> <exptime> <bytes>" whose data block is "user pass".
 * Pure, as the rest of the protocol layer: the connection (core) feeds
 * bytes in and checks the credentials it gets back.
 */
#include "proto.h"

#include <string.h>

#include "num.h"

/* Split s[0..n) on spaces into at most max tokens; the count. */
static size_t
auth_tokens(const char *s, size_t n, const char **tok, size_t *len, size_t max)
{
    size_t k = 0, i = 0;

    while (i < n && k < max) {
        while (i < n && s[i] == ' ') {
            i++;
        }
        if (i == n) {
            break;
        }
        size_t start = i;
        while (i < n && s[i] != ' ') {
            i++;
        }
        tok[k] = s + start;
        len[k++] = i - start;
    }
    return k;
}

proto_status_t
proto_parse_auth(const char *buf, size_t len, uint32_t *bytes, size_t *consumed)
{
    const char *nl = memchr(buf, '\n', len);

    if (nl == NULL) {
        /* memcached closes a connection that sends this much junk */
        return len > PROTO_AUTH_JUNK_MAX ? PROTO_CLOSE : PROTO_AGAIN;
    }
    size_t n = (size_t)(nl - buf);
    *consumed = n + 1;
    /* No exchange is that short: memcached 1.6.45 closes the connection. */
    if (n < PROTO_AUTH_LINE_MIN) {
        return PROTO_CLOSE;
    }
    if (n > 0 && buf[n - 1] == '\r') {
        n--;
    }
    const char *tok[6];
    size_t tlen[6];
    size_t k = auth_tokens(buf, n, tok, tlen, 6);
    uint64_t v;
    if (k < 5 || tlen[0] != 3 || memcmp(tok[0], "set", 3) != 0 || tlen[4] > 11 ||
        !num_parse_u64(tok[4], tlen[4], &v) || v > UINT32_MAX) {
        return PROTO_ERROR;
    }
    *bytes = (uint32_t)v;
    return PROTO_OK;
}

proto_auth_t
proto_auth_token(const char *data, size_t n, struct proto_auth_cred *cred)
{
    if (n < 2 || data[n - 2] != '\r' || data[n - 1] != '\n') {
        return PROTO_AUTH_BAD_TERMINATION;
    }
    const char *tok[2];
    size_t tlen[2];
    if (auth_tokens(data, n - 2, tok, tlen, 2) < 2) {
        return PROTO_AUTH_BAD_FORMAT;
    }
    cred->user = tok[0];
    cred->nuser = tlen[0];
    cred->pass = tok[1];
    cred->npass = tlen[1];
    return PROTO_AUTH_OK;
}
