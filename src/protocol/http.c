/*
 * http.c -- HTTP/1.x request heads and response heads (http.h).
 *
 * Strict where leniency would let a request be framed two ways (a header
 * name followed by space, folded lines, both Content-Length and
 * Transfer-Encoding, two lengths that differ: 400), lenient where RFC
 * 9112 asks it (empty lines before the request line, a bare LF ending a
 * line). The admin port reads nothing but the head, so the body's framing
 * is only reported: its length, or that it is chunked.
 */
#include "http.h"

#include "base64.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the header lines said so far. */
struct head_seen {
    bool length;                /* a Content-Length */
    bool close;                 /* "close" in a Connection line */
    bool keep;                  /* "keep-alive" in one */
};

/* RFC 9110 5.6.2: the characters of a token. */
static bool
is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A line [p, *end) without its CR: false if a CR stands elsewhere in it. */
static bool
line_trim(const char *p, const char **end)
{
    if (*end > p && (*end)[-1] == '\r') {
        (*end)--;
    }
    return memchr(p, '\r', (size_t)(*end - p)) == NULL;
}

/* The path of a request target: origin form up to its query; absolute
 * form from its authority's end; any other form (authority, "*") whole. */
static void
target_path(const char *t, size_t n, struct http_req *req)
{
    if (n > 0 && t[0] == '/') {
        size_t i = 0;
        while (i < n && t[i] != '?' && t[i] != '#') {
            i++;
        }
        req->path = t;
        req->npath = i;
        return;
    }
    const char *sep = n >= 3 ? memchr(t, ':', n) : NULL;
    if (sep != NULL && (size_t)(t + n - sep) >= 3 && memcmp(sep, "://", 3) == 0) {
        const char *auth = sep + 3;
        const char *slash = memchr(auth, '/', (size_t)(t + n - auth));
        if (slash == NULL) {
            req->path = "/";
            req->npath = 1;
        } else {
            target_path(slash, (size_t)(t + n - slash), req);
        }
        return;
    }
    req->path = t;
    req->npath = n;
}

/* "HTTP/" DIGIT "." DIGIT, the whole of [v, v + n). */
static http_parse_t
parse_version(const char *v, size_t n, struct http_req *req)
{
    if (n != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit(v[5]) || v[6] != '.' ||
        !is_digit(v[7])) {
        return HTTP_PARSE_BAD;
    }
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) {
        return HTTP_PARSE_VERSION;
    }
    req->minor = v[7] - '0';
    return HTTP_PARSE_OK;
}

static http_parse_t
parse_request_line(const char *p, const char *end, struct http_req *req)
{
    if (!line_trim(p, &end)) {
        return HTTP_PARSE_BAD;
    }
    const char *sp1 = memchr(p, ' ', (size_t)(end - p));
    const char *sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == p || sp2 == sp1 + 1) {
        return HTTP_PARSE_BAD;
    }
    for (const char *c = p; c < sp1; c++) {
        if (!is_tchar((unsigned char)*c)) {
            return HTTP_PARSE_BAD;
        }
    }
    for (const char *c = sp1 + 1; c < sp2; c++) {
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
            return HTTP_PARSE_BAD;
        }
    }
    size_t nm = (size_t)(sp1 - p);
    req->method = nm == 3 && memcmp(p, "GET", 3) == 0    ? HTTP_GET
                  : nm == 4 && memcmp(p, "HEAD", 4) == 0 ? HTTP_HEAD
                                                         : HTTP_OTHER;
    target_path(sp1 + 1, (size_t)(sp2 - sp1 - 1), req);
    return parse_version(sp2 + 1, (size_t)(end - sp2 - 1), req);
}

/* Does the comma-separated list [v, end) hold this token (any case)? */
static bool
list_has(const char *v, const char *end, const char *token)
{
    size_t n = strlen(token);

    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ',')) {
            v++;
        }
        const char *e = v;
        while (e < end && *e != ',' && *e != ' ' && *e != '\t') {
            e++;
        }
        if ((size_t)(e - v) == n && strncasecmp(v, token, n) == 0) {
            return true;
        }
        v = e;
    }
    return false;
}

static http_parse_t
parse_length(const char *v, const char *end, struct http_req *req, struct head_seen *seen)
{
    uint64_t x = 0;

    if (v == end || end - v > 18) {
        return HTTP_PARSE_BAD;
    }
    for (const char *c = v; c < end; c++) {
        if (!is_digit(*c)) {
            return HTTP_PARSE_BAD;
        }
        x = x * 10 + (uint64_t)(*c - '0');
    }
    if (seen->length && x != req->content_length) {
        return HTTP_PARSE_BAD;
    }
    seen->length = true;
    req->content_length = x;
    return HTTP_PARSE_OK;
}

/* Authorization: "Bearer TOKEN", or "Basic base64(user:password)" whose
 * password is the token. Another scheme, or one that does not decode,
 * gives none (the request then has no token). */
static void
parse_authorization(const char *v, const char *ve, struct http_req *req)
{
    const char *t = v;
    bool bearer = ve - v > 7 && strncasecmp(v, "bearer ", 7) == 0;
    bool basic = ve - v > 6 && strncasecmp(v, "basic ", 6) == 0;

    if (!bearer && !basic) {
        return;
    }
    t += bearer ? 7 : 6;
    while (t < ve && *t == ' ') {
        t++;
    }
    size_t n = (size_t)(ve - t);
    if (bearer) {
        if (n == 0 || n > sizeof(req->token)) {
            return;
        }
        memcpy(req->token, t, n);
        req->ntoken = n;
        req->has_token = true;
        return;
    }
    unsigned char pair[HTTP_TOKEN_MAX * 2];
    size_t m = n <= base64_encoded_len(sizeof(pair)) ? base64_decode(t, n, pair, sizeof(pair)) : 0;
    const unsigned char *colon = m > 0 ? memchr(pair, ':', m) : NULL;
    if (colon == NULL) {
        return;
    }
    size_t np = m - (size_t)(colon + 1 - pair);
    if (np == 0 || np > sizeof(req->token)) {
        return;
    }
    memcpy(req->token, colon + 1, np);
    req->ntoken = np;
    req->has_token = true;
}

/* One header line [p, end), its CR already trimmed. */
static http_parse_t
parse_header(const char *p, const char *end, struct http_req *req, struct head_seen *seen)
{
    const char *colon = p;

    while (colon < end && is_tchar((unsigned char)*colon)) {
        colon++;
    }
    if (colon == p || colon == end || *colon != ':') {
        return HTTP_PARSE_BAD;      /* no name, space before the colon, a fold */
    }
    const char *v = colon + 1;
    while (v < end && (*v == ' ' || *v == '\t')) {
        v++;
    }
    const char *ve = end;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
        ve--;
    }
    for (const char *c = v; c < ve; c++) {
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f) {
            return HTTP_PARSE_BAD;
        }
    }
    size_t nn = (size_t)(colon - p);
    if (nn == 14 && strncasecmp(p, "content-length", nn) == 0) {
        return parse_length(v, ve, req, seen);
    }
    if (nn == 17 && strncasecmp(p, "transfer-encoding", nn) == 0) {
        req->chunked = true;
    } else if (nn == 10 && strncasecmp(p, "connection", nn) == 0) {
        seen->close |= list_has(v, ve, "close");
        seen->keep |= list_has(v, ve, "keep-alive");
    } else if (nn == 13 && strncasecmp(p, "authorization", nn) == 0) {
        parse_authorization(v, ve, req);
    }
    return HTTP_PARSE_OK;
}

http_parse_t
http_parse_head(const char *buf, size_t n, struct http_req *req, size_t *used)
{
    size_t limit = n < HTTP_HEAD_MAX ? n : HTTP_HEAD_MAX;
    const char *p = buf, *end = buf + limit;
    struct head_seen seen = { false, false, false };
    http_parse_t st;

    memset(req, 0, sizeof(*req));
    while (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
        p += 2;
    }
    while (p < end && p[0] == '\n') {
        p++;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL) {
        return n >= HTTP_HEAD_MAX ? HTTP_PARSE_URI_TOO_LONG : HTTP_PARSE_MORE;
    }
    if ((st = parse_request_line(p, nl, req)) != HTTP_PARSE_OK) {
        return st;
    }
    for (p = nl + 1;; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) {
            return n >= HTTP_HEAD_MAX ? HTTP_PARSE_TOO_LONG : HTTP_PARSE_MORE;
        }
        const char *le = nl;
        if (!line_trim(p, &le)) {
            return HTTP_PARSE_BAD;
        }
        if (le == p) {
            break;
        }
        if ((st = parse_header(p, le, req, &seen)) != HTTP_PARSE_OK) {
            return st;
        }
    }
    if (req->chunked && seen.length) {
        return HTTP_PARSE_BAD;      /* framed two ways (RFC 9112 6.1) */
    }
    /* HTTP/1.1 persists unless "close"; 1.0 only with "keep-alive" */
    req->keep_alive = !seen.close && (req->minor == 1 || seen.keep);
    *used = (size_t)(nl + 1 - buf);
    return HTTP_PARSE_OK;
}

int
http_parse_status(http_parse_t p)
{
    switch (p) {
    case HTTP_PARSE_BAD:          return 400;
    case HTTP_PARSE_URI_TOO_LONG: return 414;
    case HTTP_PARSE_TOO_LONG:     return 431;
    case HTTP_PARSE_VERSION:      return 505;
    default:                      return 0;
    }
}

const char *
http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default:  return "";
    }
}

size_t
http_compose_head(char *out, size_t cap, int status, const char *type, size_t body_len,
                  bool close, const char *extra, time_t now)
{
    char date[64];
    struct tm tm;

    if (gmtime_r(&now, &tm) == NULL ||
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0) {
        date[0] = '\0';
    }
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\n"
                     "Date: %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "%s%s\r\n",
                     status, http_reason(status), date, type, body_len,
                     extra != NULL ? extra : "", close ? "Connection: close\r\n" : "");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
