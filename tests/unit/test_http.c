/*
 * test_http.c -- unit tests for the admin port's HTTP/1.x heads
 * (include/protocol/http.h): request lines in each target form, versions
 * (505 for any but 1.0 and 1.1), heads split anywhere, the head limit
 * (414, 431), malformed and ambiguously framed requests (400), keep-alive
 * by version and Connection, and the response head.
 */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static http_parse_t
parse(const char *s, struct http_req *r, size_t *used)
{
    return http_parse_head(s, strlen(s), r, used);
}

static void
assert_path(const struct http_req *r, const char *want)
{
    ck_assert_uint_eq(r->npath, strlen(want));
    ck_assert_int_eq(memcmp(r->path, want, r->npath), 0);
}

START_TEST(test_request_line_and_target_forms)
{
    struct http_req r;
    size_t used = 0;
    const char *get = "GET /stats?x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /next";

    ck_assert_int_eq(parse(get, &r, &used), HTTP_PARSE_OK);
    ck_assert_int_eq(r.method, HTTP_GET);
    assert_path(&r, "/stats");
    ck_assert_uint_eq(used, strlen(get) - strlen("GET /next"));
    ck_assert(r.keep_alive);
    ck_assert_int_eq(parse("HEAD /health HTTP/1.0\r\n\r\n", &r, &used), HTTP_PARSE_OK);
    ck_assert_int_eq(r.method, HTTP_HEAD);
    ck_assert(!r.keep_alive);
    /* CONNECT names its target as any other method does: its path */
    ck_assert_int_eq(parse("CONNECT /stats HTTP/1.1\r\n\r\n", &r, &used), HTTP_PARSE_OK);
    ck_assert_int_eq(r.method, HTTP_OTHER);
    assert_path(&r, "/stats");
    ck_assert_int_eq(parse("CONNECT example.com:443 HTTP/1.1\r\n\r\n", &r, &used),
                     HTTP_PARSE_OK);
    assert_path(&r, "example.com:443");
    ck_assert_int_eq(parse("GET http://h:9150/metrics?a HTTP/1.1\r\n\r\n", &r, &used),
                     HTTP_PARSE_OK);
    assert_path(&r, "/metrics");
    ck_assert_int_eq(parse("GET http://h HTTP/1.1\r\n\r\n", &r, &used), HTTP_PARSE_OK);
    assert_path(&r, "/");
    ck_assert_int_eq(parse("OPTIONS * HTTP/1.1\r\n\r\n", &r, &used), HTTP_PARSE_OK);
    assert_path(&r, "*");
    /* empty lines before the request line, bare LF endings */
    ck_assert_int_eq(parse("\r\n\r\nget /x HTTP/1.1\n\n", &r, &used), HTTP_PARSE_OK);
    ck_assert_int_eq(r.method, HTTP_OTHER);     /* methods are case-sensitive */
}
END_TEST

START_TEST(test_versions)
{
    struct http_req r;
    size_t used;

    ck_assert_int_eq(parse("GET /health HTTP/1.9\r\n", &r, &used), HTTP_PARSE_VERSION);
    ck_assert_int_eq(parse("GET /health HTTP/2.0\r\n\r\n", &r, &used), HTTP_PARSE_VERSION);
    ck_assert_int_eq(parse("GET /health HTTP/0.9\r\n\r\n", &r, &used), HTTP_PARSE_VERSION);
    ck_assert_int_eq(http_parse_status(HTTP_PARSE_VERSION), 505);
    static const char *const bad[] = {
        "GET /health\r\n\r\n", "GET /health HTTP/1.10\r\n\r\n", "GET /health http/1.1\r\n\r\n",
        "GET /health HTTP/1\r\n\r\n", "GET  /health HTTP/1.1\r\n\r\n", "GET /a b HTTP/1.1\r\n\r\n",
        "G(T /health HTTP/1.1\r\n\r\n", "GET /he\x01th HTTP/1.1\r\n\r\n",
        "GET /health HTTP/1.1\rX\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i], &r, &used) == HTTP_PARSE_BAD, "%s", bad[i]);
    }
}
END_TEST

START_TEST(test_split_anywhere_and_limits)
{
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
    struct http_req r;
    size_t used;

    for (size_t n = 0; n < strlen(req); n++) {
        ck_assert_int_eq(http_parse_head(req, n, &r, &used), HTTP_PARSE_MORE);
    }
    ck_assert_int_eq(http_parse_head(req, strlen(req), &r, &used), HTTP_PARSE_OK);
    size_t big = 3 * HTTP_HEAD_MAX;
    char *b = malloc(big + 1);
    ck_assert_ptr_nonnull(b);
    memset(b, 'a', big);
    b[big] = '\0';
    memcpy(b, "GET /", 5);
    ck_assert_int_eq(http_parse_head(b, HTTP_HEAD_MAX - 1, &r, &used), HTTP_PARSE_MORE);
    ck_assert_int_eq(http_parse_head(b, big, &r, &used), HTTP_PARSE_URI_TOO_LONG);
    memcpy(b, "GET / HTTP/1.1\r\nX-Big: ", 23);
    ck_assert_int_eq(http_parse_head(b, HTTP_HEAD_MAX - 1, &r, &used), HTTP_PARSE_MORE);
    ck_assert_int_eq(http_parse_head(b, HTTP_HEAD_MAX, &r, &used), HTTP_PARSE_TOO_LONG);
    ck_assert_int_eq(http_parse_status(HTTP_PARSE_TOO_LONG), 431);
    free(b);
}
END_TEST

START_TEST(test_headers)
{
    struct http_req r;
    size_t used;

    ck_assert_int_eq(parse("POST /s HTTP/1.1\r\ncontent-LENGTH:  12 \r\n\r\n", &r, &used),
                     HTTP_PARSE_OK);
    ck_assert_uint_eq(r.content_length, 12);
    ck_assert_int_eq(parse("POST /s HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
                           &r, &used), HTTP_PARSE_OK);
    ck_assert_int_eq(parse("POST /s HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r, &used),
                     HTTP_PARSE_OK);
    ck_assert(r.chunked);
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",                    /* space before the colon */
        "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",                   /* folded */
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n: x\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x01\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i], &r, &used) == HTTP_PARSE_BAD, "%s", bad[i]);
    }
}
END_TEST

START_TEST(test_keep_alive)
{
    struct http_req r;
    size_t used;

    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", &r, &used), 0);
    ck_assert(!r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r, &used), 0);
    ck_assert(r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
                           &r, &used), 0);
    ck_assert(!r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nConnection: Upgrade, close\r\n\r\n", &r, &used), 0);
    ck_assert(!r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", &r, &used), 0);
    ck_assert(r.keep_alive);
}
END_TEST

/* The admin token: Bearer's, or Basic's password; nothing else counts. */
static bool
token_is(const char *auth, const char *want)
{
    char head[512];
    struct http_req r;
    size_t used;

    snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n", auth);
    ck_assert_int_eq(parse(head, &r, &used), HTTP_PARSE_OK);
    if (want == NULL) {
        return !r.has_token;
    }
    return r.has_token && r.ntoken == strlen(want) && memcmp(r.token, want, r.ntoken) == 0;
}

START_TEST(test_authorization_token)
{
    struct http_req r;
    size_t used;

    ck_assert_int_eq(parse("GET / HTTP/1.1\r\n\r\n", &r, &used), HTTP_PARSE_OK);
    ck_assert(!r.has_token);
    ck_assert(token_is("Bearer s3cret", "s3cret"));
    ck_assert(token_is("bearer   s3cret", "s3cret"));
    ck_assert(token_is("Basic YW55b25lOnMzY3JldA==", "s3cret"));     /* anyone:s3cret */
    ck_assert(token_is("Basic OnMzY3JldA==", "s3cret"));             /* :s3cret */
    ck_assert(token_is("Basic YW55b25lOg==", NULL));                 /* anyone: (empty) */
    ck_assert(token_is("Basic YW55b25l", NULL));                     /* no colon */
    ck_assert(token_is("Basic !!!!", NULL));
    ck_assert(token_is("Bearer", NULL));
    ck_assert(token_is("Digest s3cret", NULL));
}
END_TEST

START_TEST(test_compose)
{
    char out[512], small[40];
    size_t n = http_compose_head(out, sizeof(out), 405, "text/plain", 7, true,
                                 "Allow: GET, HEAD\r\n", 0);

    ck_assert_uint_eq(n, strlen(out));
    ck_assert_str_eq(out, "HTTP/1.1 405 Method Not Allowed\r\n"
                          "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                          "Content-Type: text/plain\r\n"
                          "Content-Length: 7\r\n"
                          "Cache-Control: no-store\r\n"
                          "Allow: GET, HEAD\r\n"
                          "Connection: close\r\n\r\n");
    ck_assert_uint_eq(http_compose_head(small, sizeof(small), 200, "x", 1, false, NULL, 0), 0);
    ck_assert_str_eq(http_reason(431), "Request Header Fields Too Large");
    ck_assert_str_eq(http_reason(505), "HTTP Version Not Supported");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("heads");

    tcase_add_test(tc, test_request_line_and_target_forms);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_split_anywhere_and_limits);
    tcase_add_test(tc, test_headers);
    tcase_add_test(tc, test_keep_alive);
    tcase_add_test(tc, test_compose);
    tcase_add_test(tc, test_authorization_token);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
