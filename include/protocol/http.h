/*
 * http.h -- HTTP/1.x request heads and response heads for the admin port:
 * parse and compose, pure (no I/O), as the memcached protocols are.
 *
 * Only what a read-only admin port needs: the request line (method,
 * target, version), the headers that frame a request on a connection
 * (Content-Length, Transfer-Encoding, Connection), and a token from
 * Authorization: Bearer (RFC 6750, as scrapers send one) or the password
 * of Basic (RFC 7617, as a browser sends what its prompt was given). The rules are RFC
 * 9112's: a version other than HTTP/1.0 or 1.1 is answered 505, a head
 * longer than HTTP_HEAD_MAX 431 (414 when the request line alone is),
 * anything malformed 400.
 */
#ifndef SC_HTTP_H
#define SC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define HTTP_HEAD_MAX 8192      /* request line and headers, bytes */
#define HTTP_TOKEN_MAX 1024     /* longest token taken from Authorization */

typedef enum http_method {
    HTTP_GET,
    HTTP_HEAD,
    HTTP_OTHER,                 /* any other token: answered 405 by the admin port */
} http_method_t;

typedef enum http_parse {
    HTTP_PARSE_OK = 0,
    HTTP_PARSE_MORE,            /* no end of the head yet, and within the limit */
    HTTP_PARSE_BAD,             /* 400 */
    HTTP_PARSE_URI_TOO_LONG,    /* 414 */
    HTTP_PARSE_TOO_LONG,        /* 431 */
    HTTP_PARSE_VERSION,         /* 505 */
} http_parse_t;

struct http_req {
    http_method_t method;
    const char   *path;         /* the target's path (no query), in the buffer */
    size_t        npath;
    int           minor;        /* HTTP/1.minor: 0 or 1 */
    bool          keep_alive;   /* the version's default, or Connection's word */
    bool          chunked;      /* Transfer-Encoding present: the body's end is
                                   not known without decoding it */
    uint64_t      content_length;
    bool          has_token;    /* Authorization gave one: */
    char          token[HTTP_TOKEN_MAX];    /* Bearer's token, or Basic's password */
    size_t        ntoken;
};

/*
 * Parse the request head at the start of buf[0..n). OK: *req is filled
 * and *used is the head's length (through its empty line). Empty lines
 * before a request line are skipped (RFC 9112 2.2).
 */
http_parse_t http_parse_head(const char *buf, size_t n, struct http_req *req, size_t *used);

/* The status a parse result is answered with (0 for OK and MORE). */
int          http_parse_status(http_parse_t p);

/* The reason phrase of a status this module composes ("" if unknown). */
const char  *http_reason(int status);

/*
 * A response head: the status line (always HTTP/1.1), Date (at `now`),
 * Content-Type, Content-Length, Cache-Control: no-store, `extra` (full
 * header lines, each ending in CRLF, or NULL), Connection: close when
 * `close`, and the empty line. Its length, or 0 if it does not fit cap.
 */
size_t       http_compose_head(char *out, size_t cap, int status, const char *type,
                               size_t body_len, bool close, const char *extra, time_t now);

#endif
