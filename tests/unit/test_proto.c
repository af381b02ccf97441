/*
 * test_proto.c -- unit tests for the memcached ASCII protocol module.
 *
 * Expected values come from probing memcached 1.6.18 with the same bytes,
 * so these tests pin byte-exact compatibility, quirks included.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "proto.h"

static const char E_ERROR[] = "ERROR";
static const char E_FORMAT[] = "CLIENT_ERROR bad command line format";
static const char E_DELTA[] = "CLIENT_ERROR invalid numeric delta argument";
static const char E_EXPTIME[] = "CLIENT_ERROR invalid exptime argument";

static struct proto_req req;
static size_t used;

static proto_status_t parse_n(const char *s, size_t n) {
    return proto_parse(s, n, &req, &used);
}

static proto_status_t parse(const char *s) {
    return parse_n(s, strlen(s));
}

/* n copies of c into dst, NUL terminated. */
static char *fill(char *dst, char c, size_t n) {
    memset(dst, c, n);
    dst[n] = '\0';
    return dst;
}

static void expect_mem(const char *p, size_t n, const char *want) {
    ck_assert_uint_eq(n, strlen(want));
    ck_assert(p != NULL);
    ck_assert_msg(memcmp(p, want, n) == 0, "got '%.*s', want '%s'", (int)n,
                  p, want);
}

static void expect_key(const char *want) {
    expect_mem(req.key, req.nkey, want);
}

static void expect_sub(const char *want) {
    expect_mem(req.sub, req.nsub, want);
}

static void expect_ok(const char *line, proto_cmd_t cmd) {
    ck_assert_int_eq(parse(line), PROTO_OK);
    ck_assert_int_eq(req.cmd, cmd);
    ck_assert_uint_eq(used, strlen(line));
}

static void expect_err(const char *line, const char *err) {
    ck_assert_msg(parse(line) == PROTO_ERROR, "not an error: %s", line);
    ck_assert_str_eq(req.error, err);
    ck_assert_uint_eq(used, strlen(line));
}

/* Collect all keys of a multi-key request as one space-joined string. */
static void expect_keys(const char *want) {
    char got[8192] = "";
    size_t len = 0;
    const char *cur = req.keys, *k;
    size_t nk;

    while (proto_key_next(&cur, req.keys_end, &k, &nk)) {
        ck_assert_uint_lt(len + nk + 1, sizeof(got));
        if (len > 0)
            got[len++] = ' ';
        memcpy(got + len, k, nk);
        len += nk;
        got[len] = '\0';
    }
    ck_assert_str_eq(got, want);
}

/* ------------------------------------------------------------------------ */

START_TEST(test_parse_u64) {
    uint64_t v = 7;

    ck_assert(proto_parse_u64("0", 1, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert(proto_parse_u64("18446744073709551615", 20, &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert(proto_parse_u64("00000000000000000000000042", 26, &v));
    ck_assert_uint_eq(v, 42);
    ck_assert(proto_parse_u64("123456", 3, &v)); /* bounded by n */
    ck_assert_uint_eq(v, 123);
    v = 7;
    ck_assert(!proto_parse_u64("18446744073709551616", 20, &v));
    ck_assert(!proto_parse_u64("99999999999999999999", 20, &v));
    ck_assert(!proto_parse_u64("184467440737095516150", 21, &v));
    ck_assert(!proto_parse_u64("", 0, &v));
    ck_assert(!proto_parse_u64("1a", 2, &v));
    ck_assert(!proto_parse_u64("-1", 2, &v));
    ck_assert(!proto_parse_u64("+1", 2, &v));
    ck_assert(!proto_parse_u64(" 1", 2, &v));
    ck_assert(!proto_parse_u64("1 ", 2, &v));
    ck_assert_uint_eq(v, 7); /* untouched on failure */
}
END_TEST

START_TEST(test_parse_i64) {
    int64_t v = 7;

    ck_assert(proto_parse_i64("-9223372036854775808", 20, &v));
    ck_assert(v == INT64_MIN);
    ck_assert(proto_parse_i64("9223372036854775807", 19, &v));
    ck_assert(v == INT64_MAX);
    ck_assert(proto_parse_i64("-1", 2, &v));
    ck_assert_int_eq(v, -1);
    ck_assert(proto_parse_i64("-0", 2, &v));
    ck_assert_int_eq(v, 0);
    ck_assert(proto_parse_i64("300", 3, &v));
    ck_assert_int_eq(v, 300);
    v = 7;
    ck_assert(!proto_parse_i64("-9223372036854775809", 20, &v));
    ck_assert(!proto_parse_i64("9223372036854775808", 19, &v));
    ck_assert(!proto_parse_i64("99999999999999999999", 20, &v));
    ck_assert(!proto_parse_i64("-", 1, &v));
    ck_assert(!proto_parse_i64("--1", 3, &v));
    ck_assert(!proto_parse_i64("+1", 2, &v));
    ck_assert(!proto_parse_i64("", 0, &v));
    ck_assert(!proto_parse_i64("1-", 2, &v));
    ck_assert_int_eq(v, 7);
}
END_TEST

START_TEST(test_get_single) {
    expect_ok("get foo\r\n", PROTO_CMD_GET);
    expect_key("foo");
    expect_keys("foo");
    ck_assert(!req.noreply);
    expect_ok("gets foo\n", PROTO_CMD_GETS);
    expect_key("foo");
    /* memcached 1.6.45 no longer serves the long-gone "bget". */
    expect_err("bget foo\r\n", E_ERROR);
    /* noreply means nothing to get: it is just a key. */
    expect_ok("get noreply\r\n", PROTO_CMD_GET);
    expect_key("noreply");
}
END_TEST

START_TEST(test_get_multi) {
    expect_ok("get a bb  ccc \r\n", PROTO_CMD_GET);
    expect_key("a");
    expect_keys("a bb ccc");
    /* The command is what precedes the first space: none here. */
    expect_err("  gets x y\r\n", E_ERROR);
}
END_TEST

START_TEST(test_get_many_keys) {
    /* More keys than memcached's 24-token window: it re-tokenizes. */
    char line[1024] = "get";
    int i;

    for (i = 0; i < 40; i++)
        sprintf(line + strlen(line), " k%d", i);
    strcat(line, "\r\n");
    expect_ok(line, PROTO_CMD_GET);
    {
        const char *cur = req.keys, *k;
        size_t nk;
        int n = 0;
        char want[16];

        while (proto_key_next(&cur, req.keys_end, &k, &nk)) {
            snprintf(want, sizeof(want), "k%d", n++);
            expect_mem(k, nk, want);
        }
        ck_assert_int_eq(n, 40);
    }
}
END_TEST

START_TEST(test_get_arity) {
    expect_err("get\r\n", E_FORMAT);
    expect_err("get \r\n", E_FORMAT);
    expect_err("gets\r\n", E_FORMAT);
    expect_err("gat\r\n", E_FORMAT);
    expect_err("gats\r\n", E_FORMAT);
    expect_err("gat 0\r\n", E_FORMAT);     /* an exptime, no key */
    /* Tab is not a separator: "get\tk" is an unknown command. */
    expect_err("get\tk\r\n", E_ERROR);
}
END_TEST

START_TEST(test_get_key_length) {
    char key[300], line[700];

    snprintf(line, sizeof(line), "get %s\r\n", fill(key, 'b', 250));
    expect_ok(line, PROTO_CMD_GET);
    ck_assert_uint_eq(req.nkey, 250);
    snprintf(line, sizeof(line), "get %s\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
    /* Any overlong key rejects the whole request, wherever it is. */
    snprintf(line, sizeof(line), "get k %s k\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
    snprintf(line, sizeof(line), "gat 0 k %s\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
}
END_TEST

START_TEST(test_get_long_key_after_window) {
    char line[2048] = "get", key[300];
    int i;

    for (i = 0; i < 30; i++)
        strcat(line, " k");
    strcat(line, " ");
    strcat(line, fill(key, 'z', 251));
    strcat(line, "\r\n");
    expect_err(line, E_FORMAT);
}
END_TEST

START_TEST(test_gat) {
    expect_ok("gat 100 a b\r\n", PROTO_CMD_GAT);
    ck_assert_int_eq(req.exptime, 100);
    expect_key("a");
    expect_keys("a b");
    expect_ok("gats -1 k\r\n", PROTO_CMD_GATS);
    ck_assert_int_eq(req.exptime, -1);
    expect_keys("k");
    /* 1.6.18 answered "gat 0" with a bare END; 1.6.45 wants a key. */
    expect_err("gats 0  \r\n", E_FORMAT);
    /* exptime: digits only (after a '-'), within 32 bits. */
    expect_ok("gat 2147483647 k\r\n", PROTO_CMD_GAT);
    ck_assert_int_eq(req.exptime, INT32_MAX);
    expect_err("gat 4294967295 k\r\n", E_EXPTIME);
    expect_err("gat +5 k\r\n", E_EXPTIME);
    expect_err("gat abc k\r\n", E_EXPTIME);
    expect_err("gat 99999999999999999999 k\r\n", E_EXPTIME);
    expect_err("gats 1x k\r\n", E_EXPTIME);
}
END_TEST

START_TEST(test_set_basic) {
    expect_ok("set k 5 100 10\r\n", PROTO_CMD_SET);
    expect_key("k");
    ck_assert_uint_eq(req.flags, 5);
    ck_assert_int_eq(req.exptime, 100);
    ck_assert_uint_eq(req.vlen, 10);
    ck_assert(!req.noreply);
    ck_assert(!req.swallow);
    ck_assert_ptr_null(req.error);
    expect_ok("set k 4294967295 -5 0\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, UINT32_MAX);
    ck_assert_int_eq(req.exptime, -5);
    ck_assert_uint_eq(req.vlen, 0);
}
END_TEST

START_TEST(test_storage_commands) {
    expect_ok("add a 1 2 3\r\n", PROTO_CMD_ADD);
    expect_key("a");
    ck_assert_uint_eq(req.vlen, 3);
    expect_ok("replace r 1 2 3\r\n", PROTO_CMD_REPLACE);
    expect_key("r");
    expect_ok("append p 1 2 3\r\n", PROTO_CMD_APPEND);
    expect_key("p");
    expect_ok("prepend q 1 2 3\r\n", PROTO_CMD_PREPEND);
    expect_key("q");
    ck_assert_uint_eq(req.flags, 1);
    ck_assert_int_eq(req.exptime, 2);
}
END_TEST

START_TEST(test_set_noreply) {
    expect_ok("set k 0 0 1 noreply\r\n", PROTO_CMD_SET);
    ck_assert(req.noreply);
    ck_assert_uint_eq(req.vlen, 1);
    /* A sixth token other than noreply is ignored. */
    expect_ok("set k 0 0 1 junk\r\n", PROTO_CMD_SET);
    ck_assert(!req.noreply);
    expect_ok("append k 0 0 1 noreply\r\n", PROTO_CMD_APPEND);
    ck_assert(req.noreply);
}
END_TEST

START_TEST(test_set_arity) {
    expect_err("set k 0 0\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    expect_err("set k 0 0 noreply\r\n", E_FORMAT);
    ck_assert(!req.noreply); /* the length is checked before noreply */
    expect_err("set\r\n", E_FORMAT);
    expect_err("add k 0 0\r\n", E_FORMAT);
    expect_err("prepend k\r\n", E_FORMAT);
    /* Tokens past the command's are ignored; noreply only counts last. */
    expect_ok("set k 0 0 1 noreply extra\r\n", PROTO_CMD_SET);
    ck_assert(!req.noreply);
    expect_ok("set k 0 0 1 x y noreply\r\n", PROTO_CMD_SET);
    ck_assert(req.noreply);
}
END_TEST

START_TEST(test_set_swallow) {
    char key[300], line[700];

    snprintf(line, sizeof(line), "set %s 0 0 7\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 7);

    expect_err("set k abc 0 5\r\n", E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 5);
    expect_err("set k 5a 0 5\r\n", E_FORMAT);
    ck_assert(req.swallow);
    expect_err("set k -1 0 5\r\n", E_FORMAT);
    ck_assert(req.swallow);
    expect_err("set k 0 x 6\r\n", E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 6);
    expect_err("set k 0 99999999999999999999 6\r\n", E_FORMAT);
    ck_assert(req.swallow);
    expect_err("cas k 0 0 3 abc\r\n", E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 3);

    /* noreply still applies: the caller stays silent but swallows. */
    expect_err("set k abc 0 1 noreply\r\n", E_FORMAT);
    ck_assert(req.swallow);
    ck_assert(req.noreply);
    ck_assert_uint_eq(req.vlen, 1);
}
END_TEST

START_TEST(test_set_bad_length) {
    char key[300], line[700];

    expect_err("set k 0 0 abc\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    expect_err("set k 0 0 -1\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    expect_err("set k 0 0 99999999999999999999\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    expect_err("set k 0 0 2147483646\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    /* INT32_MAX - 2 parses; "too large" is the storage layer's call. */
    expect_ok("set k 0 0 2147483645\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.vlen, 2147483645u);
    /* Bad length and bad key: nothing is known about the block. */
    snprintf(line, sizeof(line), "set %s 0 0 x\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
    ck_assert(!req.swallow);
    /* A length that is not a number is answered, noreply or not. */
    expect_err("set k 0 0 x noreply\r\n", E_FORMAT);
    ck_assert(!req.noreply);
    ck_assert(!req.swallow);
    expect_err("set k 0 0 +1\r\n", E_FORMAT);
}
END_TEST

/* memcached parses flags and exptime with strtol()/strtoul() and
 * truncates them to 32 bits; the length is digits only. */
START_TEST(test_set_number_quirks) {
    expect_ok("set k +5 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 5);
    expect_ok("set k \t5 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 5);
    expect_ok("set k 5\tjunk 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 5);
    expect_ok("set k -0 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 0);
    expect_ok("set k 4294967296 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 0);
    expect_ok("set k 4294967297 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 1);
    expect_ok("set k -18446744073709551615 0 1\r\n", PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 1);
    expect_ok("set k 0 4294967295 1\r\n", PROTO_CMD_SET);
    ck_assert_int_eq(req.exptime, -1);
    expect_ok("set k 0 4294967296 1\r\n", PROTO_CMD_SET);
    ck_assert_int_eq(req.exptime, 0);
    expect_err("set k 0 0 4294967297\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    /* Only one "\r" is stripped; the second is part of the length. */
    expect_err("set k 0 0 1\r\r\n", E_FORMAT);
    expect_err("set k + 0 1\r\n", E_FORMAT);
    expect_err("set k 0 - 1\r\n", E_FORMAT);
}
END_TEST

START_TEST(test_cas) {
    expect_ok("cas k 1 2 3 99\r\n", PROTO_CMD_CAS);
    expect_key("k");
    ck_assert_uint_eq(req.flags, 1);
    ck_assert_int_eq(req.exptime, 2);
    ck_assert_uint_eq(req.vlen, 3);
    ck_assert_uint_eq(req.cas, 99);
    ck_assert(!req.noreply);
    expect_ok("cas k 0 0 1 18446744073709551615 noreply\r\n", PROTO_CMD_CAS);
    ck_assert_uint_eq(req.cas, UINT64_MAX);
    ck_assert(req.noreply);
    expect_ok("cas k 0 0 1 5 junk\r\n", PROTO_CMD_CAS);
    ck_assert(!req.noreply);
    /* No cas value: the data block is swallowed (memcached's cas.t). */
    expect_err("cas k 0 0 1\r\n", E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 1);
    expect_ok("cas k 0 0 1 99 noreply extra\r\n", PROTO_CMD_CAS);
    ck_assert(!req.noreply);
    expect_err("cas k 0 0 1 +5\r\n", E_FORMAT);
    expect_err("cas k 0 0 1 -1\r\n", E_FORMAT);
    ck_assert(req.swallow);
    expect_err("cas k 0 0 1 18446744073709551616\r\n", E_FORMAT);
    ck_assert(req.swallow);
    /* "cas k 0 0 1 noreply": noreply is the cas value, so both apply. */
    expect_err("cas k 0 0 1 noreply\r\n", E_FORMAT);
    ck_assert(req.noreply);
    ck_assert(req.swallow);
}
END_TEST

START_TEST(test_incr_decr) {
    expect_ok("incr k 5\r\n", PROTO_CMD_INCR);
    expect_key("k");
    ck_assert_uint_eq(req.delta, 5);
    ck_assert(!req.noreply);
    expect_ok("decr k 18446744073709551615\r\n", PROTO_CMD_DECR);
    ck_assert_uint_eq(req.delta, UINT64_MAX);
    expect_ok("incr k 1 noreply\r\n", PROTO_CMD_INCR);
    ck_assert(req.noreply);
    expect_ok("incr k 1 junk\r\n", PROTO_CMD_INCR);
    ck_assert(!req.noreply);
    /* digits only: 1.6.18's strtoull() wrapped "-N" */
    expect_err("incr k -18446744073709551615\r\n", E_DELTA);
    expect_err("incr k +1\r\n", E_DELTA);
    expect_err("incr k abc\r\n", E_DELTA);
    expect_err("incr k -1\r\n", E_DELTA);
    expect_err("decr k 18446744073709551616\r\n", E_DELTA);
    expect_err("incr k abc noreply\r\n", E_DELTA);
    ck_assert(req.noreply);
    expect_err("incr k\r\n", E_FORMAT);
    expect_ok("decr k 1 2 3\r\n", PROTO_CMD_DECR);
}
END_TEST

START_TEST(test_incr_key_length) {
    char key[300], line[700];

    snprintf(line, sizeof(line), "incr %s 1\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
    snprintf(line, sizeof(line), "decr %s 1\r\n", fill(key, 'a', 250));
    expect_ok(line, PROTO_CMD_DECR);
}
END_TEST

START_TEST(test_touch) {
    char key[300], line[700];

    expect_ok("touch k 60\r\n", PROTO_CMD_TOUCH);
    expect_key("k");
    ck_assert_int_eq(req.exptime, 60);
    expect_ok("touch k -1 noreply\r\n", PROTO_CMD_TOUCH);
    ck_assert_int_eq(req.exptime, -1);
    ck_assert(req.noreply);
    expect_err("touch k abc\r\n", E_EXPTIME);
    expect_err("touch k noreply\r\n", E_EXPTIME);
    ck_assert(req.noreply);
    expect_err("touch k +1\r\n", E_EXPTIME);
    expect_err("touch k\r\n", E_FORMAT);
    expect_ok("touch k 1 2 3\r\n", PROTO_CMD_TOUCH);
    snprintf(line, sizeof(line), "touch %s 1\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
}
END_TEST

START_TEST(test_delete) {
    char key[300], line[700];

    expect_ok("delete k\r\n", PROTO_CMD_DELETE);
    expect_key("k");
    ck_assert(!req.noreply);
    expect_ok("delete k noreply\r\n", PROTO_CMD_DELETE);
    ck_assert(req.noreply);
    /* 1.6.18's hold time ("0" only) is gone: extra tokens are ignored. */
    expect_ok("delete k 0\r\n", PROTO_CMD_DELETE);
    ck_assert(!req.noreply);
    expect_ok("delete k 1\r\n", PROTO_CMD_DELETE);
    expect_ok("delete k 0 noreply\r\n", PROTO_CMD_DELETE);
    ck_assert(req.noreply);
    expect_ok("delete k 0 noreply x\r\n", PROTO_CMD_DELETE);
    ck_assert(!req.noreply);
    /* The last token counts even as the key: deleted, silently. */
    expect_ok("delete noreply\r\n", PROTO_CMD_DELETE);
    expect_key("noreply");
    ck_assert(req.noreply);
    expect_err("delete\r\n", E_FORMAT);
    snprintf(line, sizeof(line), "delete %s\r\n", fill(key, 'a', 251));
    expect_err(line, E_FORMAT);
}
END_TEST

START_TEST(test_flush_all) {
    expect_ok("flush_all\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert(!req.has_arg);
    ck_assert(!req.noreply);
    expect_ok("flush_all 10\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert(req.has_arg);
    ck_assert_int_eq(req.arg, 10);
    expect_ok("flush_all noreply\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert(req.noreply);
    ck_assert(!req.has_arg);
    expect_ok("flush_all 10 noreply\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert(req.noreply);
    ck_assert_int_eq(req.arg, 10);
    expect_ok("flush_all 10 junk\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert(!req.noreply);
    ck_assert_int_eq(req.arg, 10);
    expect_ok("flush_all -1\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert_int_eq(req.arg, -1);
    expect_err("flush_all abc\r\n", E_EXPTIME);
    expect_err("flush_all abc noreply\r\n", E_EXPTIME);
    ck_assert(req.noreply);
    expect_err("flush_all noreply noreply\r\n", E_EXPTIME);
    expect_ok("flush_all 1 2 3\r\n", PROTO_CMD_FLUSH_ALL);
    ck_assert_int_eq(req.arg, 1);
    expect_err("flush_all +1\r\n", E_EXPTIME);
}
END_TEST

START_TEST(test_verbosity) {
    expect_ok("verbosity 1\r\n", PROTO_CMD_VERBOSITY);
    ck_assert(req.has_arg);
    ck_assert_int_eq(req.arg, 1);
    expect_ok("verbosity 2 noreply\r\n", PROTO_CMD_VERBOSITY);
    ck_assert_int_eq(req.arg, 2);
    ck_assert(req.noreply);
    expect_ok("verbosity 1 junk\r\n", PROTO_CMD_VERBOSITY);
    ck_assert(!req.noreply);
    expect_err("verbosity\r\n", E_FORMAT);
    expect_ok("verbosity 1 2 3\r\n", PROTO_CMD_VERBOSITY);
    expect_err("verbosity +1\r\n", E_FORMAT);
    /* an admin command: known by its first token, leading spaces or not */
    expect_ok("  verbosity 1\r\n", PROTO_CMD_VERBOSITY);
    expect_err("verbosity abc\r\n", E_FORMAT);
    expect_err("verbosity -1\r\n", E_FORMAT);
    expect_err("verbosity noreply\r\n", E_FORMAT);
    ck_assert(req.noreply);
}
END_TEST

START_TEST(test_cache_memlimit) {
    expect_ok("cache_memlimit 100\r\n", PROTO_CMD_CACHE_MEMLIMIT);
    ck_assert(req.has_arg);
    ck_assert_int_eq(req.arg, 100);
    expect_ok("cache_memlimit 64 noreply\r\n", PROTO_CMD_CACHE_MEMLIMIT);
    ck_assert_int_eq(req.arg, 64);
    ck_assert(req.noreply);
    /* memcached says plain ERROR here, not CLIENT_ERROR. */
    expect_err("cache_memlimit abc\r\n", E_ERROR);
    expect_err("cache_memlimit abc noreply\r\n", E_ERROR);
    ck_assert(req.noreply);
    expect_err("cache_memlimit\r\n", E_ERROR);
    expect_ok("cache_memlimit 1 2 3\r\n", PROTO_CMD_CACHE_MEMLIMIT);
}
END_TEST

START_TEST(test_version_quit) {
    expect_ok("version\r\n", PROTO_CMD_VERSION);
    expect_ok("version junk\r\n", PROTO_CMD_VERSION);
    expect_ok("quit\r\n", PROTO_CMD_QUIT);
    expect_ok("quit junk\n", PROTO_CMD_QUIT);
}
END_TEST

START_TEST(test_shutdown) {
    expect_ok("shutdown\r\n", PROTO_CMD_SHUTDOWN);
    ck_assert_uint_eq(req.nsub, 0);
    expect_ok("shutdown graceful\r\n", PROTO_CMD_SHUTDOWN);
    expect_sub("graceful");
    expect_ok("shutdown  a b c  \r\n", PROTO_CMD_SHUTDOWN);
    expect_sub("a b c");
}
END_TEST

START_TEST(test_stats_config) {
    expect_ok("stats\r\n", PROTO_CMD_STATS);
    ck_assert_uint_eq(req.nsub, 0);
    expect_ok("stats \r\n", PROTO_CMD_STATS);
    ck_assert_uint_eq(req.nsub, 0);
    expect_ok("stats  items \r\n", PROTO_CMD_STATS);
    expect_sub("items");
    expect_ok("stats detail on\n", PROTO_CMD_STATS);
    expect_sub("detail on");
    expect_ok("config evict lru\r\n", PROTO_CMD_CONFIG);
    expect_sub("evict lru");
    expect_ok("config\r\n", PROTO_CMD_CONFIG);
    ck_assert_uint_eq(req.nsub, 0);
}
END_TEST

START_TEST(test_unknown) {
    expect_err("foo\r\n", E_ERROR);
    ck_assert_int_eq(req.cmd, PROTO_CMD_NONE);
    /* Shorter than "mn\r\n": a bad line, not an unknown command. */
    expect_err("a\r\n", E_FORMAT);
    expect_err("ab\n", E_FORMAT);
    expect_err("\r\n", E_FORMAT);
    expect_err("\n", E_FORMAT);
    expect_err("ab\r\n", E_ERROR);
    expect_err("   \r\n", E_ERROR);
    expect_err(" set k 0 0 1\r\n", E_ERROR);  /* the command is "" */
    expect_err("mz k v\r\n", E_ERROR);      /* not a meta command */
    ck_assert(!req.noreply);
    /* An unknown command is answered with nothing under noreply. */
    expect_err("foo noreply\r\n", E_ERROR);
    ck_assert(req.noreply);
    expect_err("mz k noreply\r\n", E_ERROR);
    ck_assert(req.noreply);
    expect_err("GETS k\r\n", E_ERROR);
    expect_err("sets k 0 0 1\r\n", E_ERROR);
}
END_TEST

START_TEST(test_http_close) {
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\n"), PROTO_CLOSE);
    ck_assert_int_eq(parse("POST /x HTTP/1.0\n"), PROTO_CLOSE);
    /* A token before it, and only the last token counts... */
    expect_err("HTTP/1.1\r\n", E_ERROR);
    expect_err("foo HTTP/1.0 x\r\n", E_ERROR);
    /* ...for any unknown command (1.6.18 skipped some first letters). */
    ck_assert_int_eq(parse("sfoo HTTP/1.1\r\n"), PROTO_CLOSE);
    ck_assert_int_eq(parse("gx HTTP/1.1\r\n"), PROTO_CLOSE);
    ck_assert_int_eq(parse("mz HTTP/1.1\r\n"), PROTO_CLOSE);
    ck_assert_int_eq(parse("mgx HTTP/1.1\r\n"), PROTO_CLOSE);
    expect_ok("mg HTTP/1.1\r\n", PROTO_CMD_MG);   /* a key like any other */
}
END_TEST

START_TEST(test_http_token_window) {
    /* memcached sees 23 tokens; the HTTP check looks at the 23rd. */
    char line[512] = "foo";
    int i;

    for (i = 0; i < 21; i++)
        strcat(line, " x");
    strcat(line, " HTTP/1.1 y z\r\n");
    ck_assert_int_eq(parse(line), PROTO_CLOSE);

    strcpy(line, "foo");
    for (i = 0; i < 22; i++)
        strcat(line, " x");
    strcat(line, " HTTP/1.1\r\n");
    expect_err(line, E_ERROR);
}
END_TEST

START_TEST(test_line_endings) {
    expect_ok("get k\r\n", PROTO_CMD_GET);
    ck_assert_uint_eq(used, 7);
    expect_key("k");
    expect_ok("get k\n", PROTO_CMD_GET);
    ck_assert_uint_eq(used, 6);
    expect_key("k");
    /* A stray "\r" inside a line is part of the token. */
    expect_ok("get k\r\r\n", PROTO_CMD_GET);
    expect_key("k\r");
}
END_TEST

START_TEST(test_pipelined) {
    const char *buf = "get a\r\nset b 0 0 2\r\nhi\r\ndelete c\n";
    size_t off = 0;

    ck_assert_int_eq(parse_n(buf, strlen(buf)), PROTO_OK);
    ck_assert_int_eq(req.cmd, PROTO_CMD_GET);
    ck_assert_uint_eq(used, 7);
    off += used;
    ck_assert_int_eq(parse_n(buf + off, strlen(buf) - off), PROTO_OK);
    ck_assert_int_eq(req.cmd, PROTO_CMD_SET);
    ck_assert_uint_eq(used, 13);
    off += used;
    ck_assert(proto_data_ok(buf + off + req.vlen));
    off += req.vlen + 2;
    ck_assert_int_eq(parse_n(buf + off, strlen(buf) - off), PROTO_OK);
    ck_assert_int_eq(req.cmd, PROTO_CMD_DELETE);
    expect_key("c");
    ck_assert_uint_eq(off + used, strlen(buf));
}
END_TEST

START_TEST(test_nul_ends_line) {
    /* memcached handles the line as a C string. */
    ck_assert_int_eq(parse_n("version\0junk\r\n", 14), PROTO_OK);
    ck_assert_int_eq(req.cmd, PROTO_CMD_VERSION);
    ck_assert_uint_eq(used, 14);
    ck_assert_int_eq(parse_n("ge\0t k\r\n", 8), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_ERROR);
    ck_assert_int_eq(parse_n("get a\0 b\r\n", 10), PROTO_OK);
    expect_keys("a");
}
END_TEST

START_TEST(test_req_reset) {
    expect_ok("set k 1 2 3 noreply\r\n", PROTO_CMD_SET);
    ck_assert(req.noreply);
    expect_ok("version\r\n", PROTO_CMD_VERSION);
    ck_assert(!req.noreply);
    ck_assert_uint_eq(req.flags, 0);
    ck_assert_uint_eq(req.vlen, 0);
    ck_assert_ptr_null(req.key);
    ck_assert_ptr_null(req.error);
}
END_TEST

static void expect_same_req(const struct proto_req *a,
                            const struct proto_req *b) {
    ck_assert_int_eq(a->cmd, b->cmd);
    ck_assert_ptr_eq(a->key, b->key);
    ck_assert_uint_eq(a->nkey, b->nkey);
    ck_assert_ptr_eq(a->keys, b->keys);
    ck_assert_ptr_eq(a->keys_end, b->keys_end);
    ck_assert_uint_eq(a->flags, b->flags);
    ck_assert_int_eq(a->exptime, b->exptime);
    ck_assert_uint_eq(a->vlen, b->vlen);
    ck_assert_uint_eq(a->cas, b->cas);
    ck_assert_uint_eq(a->delta, b->delta);
    ck_assert_int_eq(a->arg, b->arg);
    ck_assert_int_eq(a->has_arg, b->has_arg);
    ck_assert_int_eq(a->noreply, b->noreply);
    ck_assert_ptr_eq(a->sub, b->sub);
    ck_assert_uint_eq(a->nsub, b->nsub);
    ck_assert_ptr_eq(a->error, b->error);
    ck_assert_int_eq(a->swallow, b->swallow);
}

/* Each prefix without "\n" must be AGAIN; the whole must equal one shot. */
static void feed_bytewise(const char *line, proto_status_t want) {
    size_t n = strlen(line), i;
    struct proto_req whole;
    size_t whole_used;

    ck_assert_int_eq(parse_n(line, n), want);
    whole = req;
    whole_used = used;
    for (i = 0; i < n; i++) {
        ck_assert_msg(parse_n(line, i) == PROTO_AGAIN, "prefix %zu of %s", i,
                      line);
        ck_assert_uint_eq(used, 0);
    }
    ck_assert_int_eq(parse_n(line, n), want);
    ck_assert_uint_eq(used, whole_used);
    ck_assert_uint_eq(used, n);
    expect_same_req(&req, &whole);
}

START_TEST(test_split_feed) {
    feed_bytewise("get a bb ccc\r\n", PROTO_OK);
    feed_bytewise("set k 1 2 3 noreply\r\n", PROTO_OK);
    feed_bytewise("cas k 1 2 3 4\n", PROTO_OK);
    feed_bytewise("incr k 18446744073709551615\r\n", PROTO_OK);
    feed_bytewise("set k abc 0 5\r\n", PROTO_ERROR);
    ck_assert(req.swallow);
    feed_bytewise("delete\r\n", PROTO_ERROR);
    feed_bytewise("stats slabs\r\n", PROTO_OK);
    expect_sub("slabs");
    feed_bytewise("bogus\r\n", PROTO_ERROR);
    /* The split may fall between "\r" and "\n". */
    ck_assert_int_eq(parse("touch k 5\r"), PROTO_AGAIN);
    expect_ok("touch k 5\r\n", PROTO_CMD_TOUCH);
}
END_TEST

START_TEST(test_long_line_limits) {
    static char buf[4096];
    size_t n;

    fill(buf, 'x', PROTO_LINE_MAX);
    ck_assert_int_eq(parse_n(buf, PROTO_LINE_MAX), PROTO_AGAIN);
    fill(buf, 'x', PROTO_LINE_MAX + 1);
    ck_assert_int_eq(parse_n(buf, PROTO_LINE_MAX + 1), PROTO_CLOSE);

    n = 3000;
    fill(buf, 'a', n);
    memcpy(buf, "set ", 4);
    ck_assert_int_eq(parse_n(buf, n), PROTO_CLOSE);
    /* A get line goes on; this one's only key is already too long. */
    memcpy(buf, "get ", 4);
    ck_assert_int_eq(parse_n(buf, n), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_FORMAT);
    ck_assert(req.swallow_line);
    ck_assert_uint_eq(used, n);
    memcpy(buf, "gets ", 5);
    ck_assert_int_eq(parse_n(buf, n), PROTO_ERROR);
    /* Unlike memcached, gat goes on too; its exptime is checked first. */
    memcpy(buf, "gat x ", 6);
    ck_assert_int_eq(parse_n(buf, n), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_EXPTIME);
    ck_assert(req.swallow_line);
    memcpy(buf, "gat 0 ", 6);
    ck_assert_int_eq(parse_n(buf, n), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_FORMAT);
    /* An exptime that is still unfinished after 2 KB is no request. */
    fill(buf, 'a', n);
    memcpy(buf, "gat 0", 5);
    ck_assert_int_eq(parse_n(buf, n), PROTO_CLOSE);
    memcpy(buf, "get\r", 4);
    ck_assert_int_eq(parse_n(buf, n), PROTO_CLOSE);
}
END_TEST

/* Keys "k0 k1 ..." from buf+len on until past min bytes; returns the length. */
static size_t keys_line(char *buf, size_t len, size_t min, int *nkeys) {
    int i = 0;

    while (len < min)
        len += (size_t)sprintf(buf + len, " k%d", i++);
    *nkeys = i;
    return len;
}

static int count_keys(void) {
    const char *cur = req.keys, *k;
    size_t nk;
    int n = 0;

    while (proto_key_next(&cur, req.keys_end, &k, &nk))
        n++;
    return n;
}

START_TEST(test_stream_get) {
    static char buf[8192];
    int nkeys;
    size_t len = keys_line(buf, (size_t)sprintf(buf, "get"), 3000, &nkeys);

    /* "get k0 ... k(n-1)" without newline: the last key may go on. */
    ck_assert_int_eq(parse_n(buf, len), PROTO_PART);
    ck_assert_int_eq(req.cmd, PROTO_CMD_GET);
    ck_assert_int_eq(count_keys(), nkeys - 1);
    expect_key("k0");
    ck_assert_uint_eq(used, (size_t)(strrchr(buf, ' ') + 1 - buf));
    ck_assert_uint_eq((size_t)(req.keys_end - buf), used);

    len = keys_line(buf, (size_t)sprintf(buf, "gats 77"), 3000, &nkeys);
    ck_assert_int_eq(parse_n(buf, len), PROTO_PART);
    ck_assert_int_eq(req.cmd, PROTO_CMD_GATS);
    ck_assert_int_eq(req.exptime, 77);
    ck_assert_int_eq(count_keys(), nkeys - 1);
}
END_TEST

static proto_status_t keys_n(const char *s, size_t n) {
    return proto_parse_keys(s, n, &req, &used);
}

static proto_status_t keys(const char *s) {
    return keys_n(s, strlen(s));
}

START_TEST(test_stream_keys) {
    static char buf[600];

    ck_assert_int_eq(keys("abc"), PROTO_AGAIN);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(keys("k3 k4"), PROTO_PART);
    ck_assert_uint_eq(used, 3);
    ck_assert_int_eq(count_keys(), 1);
    expect_key("k3");
    ck_assert_int_eq(keys("   "), PROTO_PART);
    ck_assert_uint_eq(used, 3);
    ck_assert_int_eq(count_keys(), 0);
    /* The newline ends the last key; "\r" before it is not part of it. */
    ck_assert_int_eq(keys("k4\r\nget x\r\n"), PROTO_OK);
    ck_assert_uint_eq(used, 4);
    expect_key("k4");
    ck_assert_int_eq(count_keys(), 1);
    ck_assert(!req.swallow_line);
    ck_assert_int_eq(keys("\r\n"), PROTO_OK);
    ck_assert_int_eq(count_keys(), 0);
    ck_assert_int_eq(keys("\n"), PROTO_OK);
    ck_assert_uint_eq(used, 1);
    /* A NUL ends the line early, as in memcached's C-string parse. */
    ck_assert_int_eq(keys_n("a\0b c\r\n", 7), PROTO_OK);
    ck_assert_uint_eq(used, 7);
    ck_assert_int_eq(count_keys(), 1);
    ck_assert(!req.swallow_line);
    ck_assert_int_eq(keys_n("a b\0c d", 8), PROTO_OK);
    ck_assert_int_eq(count_keys(), 2);
    ck_assert(req.swallow_line);
    ck_assert_uint_eq(used, 8);
    /* Keys too long: complete or not, the answer is memcached's error. */
    fill(buf, 'k', PROTO_KEY_MAX + 1);
    ck_assert_int_eq(keys(buf), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_FORMAT);
    ck_assert(req.swallow_line);
    ck_assert_uint_eq(used, PROTO_KEY_MAX + 1);
    fill(buf, 'k', PROTO_KEY_MAX);
    ck_assert_int_eq(keys(buf), PROTO_AGAIN);
    strcat(buf, " x\r\n");
    ck_assert_int_eq(keys(buf), PROTO_OK);
    fill(buf, 'k', PROTO_KEY_MAX + 1);
    strcat(buf, " x\r\n");
    ck_assert_int_eq(keys(buf), PROTO_ERROR);
    ck_assert(!req.swallow_line);
    ck_assert_uint_eq(used, strlen(buf));
    fill(buf, 'k', PROTO_KEY_MAX + 1);
    strcat(buf, " x y");
    ck_assert_int_eq(keys(buf), PROTO_ERROR);
    ck_assert(req.swallow_line);
}
END_TEST

START_TEST(test_long_line_spaces) {
    static char buf[4096];

    fill(buf, 'k', 3000);
    memset(buf, ' ', 100);
    memcpy(buf + 100, "get ", 4);
    /* Taken as a get: its one key is too long, not the leading spaces. */
    ck_assert_int_eq(parse_n(buf, 3000), PROTO_ERROR);
    fill(buf, 'k', 3000);
    memset(buf, ' ', 101);
    memcpy(buf + 101, "get ", 4);
    ck_assert_int_eq(parse_n(buf, 3000), PROTO_CLOSE);
    fill(buf, ' ', 3000);
    ck_assert_int_eq(parse_n(buf, 3000), PROTO_CLOSE);
}
END_TEST

START_TEST(test_long_get_with_newline) {
    static char buf[65536];
    size_t len = 0;
    int i, n = 0;
    const char *cur, *k;
    size_t nk;

    len += (size_t)sprintf(buf, "get");
    for (i = 0; i < 1000; i++)
        len += (size_t)sprintf(buf + len, " key%d", i);
    len += (size_t)sprintf(buf + len, "\r\n");
    ck_assert_uint_gt(len, PROTO_LINE_MAX);
    ck_assert_int_eq(parse_n(buf, len), PROTO_OK);
    ck_assert_uint_eq(used, len);
    cur = req.keys;
    while (proto_key_next(&cur, req.keys_end, &k, &nk)) {
        char want[16];
        snprintf(want, sizeof(want), "key%d", n++);
        expect_mem(k, nk, want);
    }
    ck_assert_int_eq(n, 1000);
}
END_TEST

START_TEST(test_long_set_with_newline) {
    /* A complete line is parsed whatever its length, as memcached does. */
    static char buf[4096];
    size_t len;

    fill(buf, 'a', 3004);
    memcpy(buf, "set ", 4);
    len = 3004 + (size_t)sprintf(buf + 3004, " 0 0 1\r\n");
    ck_assert_int_eq(parse_n(buf, len), PROTO_ERROR);
    ck_assert_str_eq(req.error, E_FORMAT);
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 1);
    ck_assert_uint_eq(used, len);
}
END_TEST

START_TEST(test_key_next) {
    const char *s = "  a  bc ", *cur = s, *k = NULL;
    size_t nk = 0;

    ck_assert(proto_key_next(&cur, s + strlen(s), &k, &nk));
    expect_mem(k, nk, "a");
    ck_assert(proto_key_next(&cur, s + strlen(s), &k, &nk));
    expect_mem(k, nk, "bc");
    ck_assert(!proto_key_next(&cur, s + strlen(s), &k, &nk));
    ck_assert(!proto_key_next(&cur, s + strlen(s), &k, &nk));
    cur = s;
    ck_assert(!proto_key_next(&cur, s, &k, &nk));
    /* The end bound is honoured even mid-token. */
    cur = s;
    ck_assert(proto_key_next(&cur, s + 6, &k, &nk));
    ck_assert(proto_key_next(&cur, s + 6, &k, &nk));
    expect_mem(k, nk, "b");
}
END_TEST

START_TEST(test_data_ok) {
    ck_assert(proto_data_ok("\r\n"));
    ck_assert(proto_data_ok("\r\nxyz"));
    ck_assert(!proto_data_ok("yz"));
    ck_assert(!proto_data_ok("\n\r"));
    ck_assert(!proto_data_ok("\rx"));
    ck_assert(!proto_data_ok("x\n"));
}
END_TEST

START_TEST(test_rsp_str) {
    static const char *want[PROTO_RSP_MAX] = {
        [PROTO_RSP_STORED] = "STORED\r\n",
        [PROTO_RSP_NOT_STORED] = "NOT_STORED\r\n",
        [PROTO_RSP_EXISTS] = "EXISTS\r\n",
        [PROTO_RSP_NOT_FOUND] = "NOT_FOUND\r\n",
        [PROTO_RSP_DELETED] = "DELETED\r\n",
        [PROTO_RSP_TOUCHED] = "TOUCHED\r\n",
        [PROTO_RSP_END] = "END\r\n",
        [PROTO_RSP_OK] = "OK\r\n",
        [PROTO_RSP_ERROR] = "ERROR\r\n",
        [PROTO_RSP_RESET] = "RESET\r\n",
        [PROTO_RSP_BAD_CHUNK] = "CLIENT_ERROR bad data chunk\r\n",
        [PROTO_RSP_BAD_FORMAT] = "CLIENT_ERROR bad command line format\r\n",
        [PROTO_RSP_TOO_LARGE] = "SERVER_ERROR object too large for cache\r\n",
        [PROTO_RSP_OOM] = "SERVER_ERROR out of memory storing object\r\n",
        [PROTO_RSP_NON_NUMERIC] =
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        [PROTO_RSP_INCR_OOM] = "SERVER_ERROR out of memory\r\n",
        [PROTO_RSP_TOO_MANY_CONNS] = "ERROR Too many open connections\r\n",
        [PROTO_RSP_SHUTDOWN_DISABLED] = "SERVER_ERROR: shutdown not enabled\r\n",
    };
    int i;
    size_t len;

    for (i = 0; i < PROTO_RSP_MAX; i++) {
        const char *s = proto_rsp_str((proto_rsp_t)i, &len);
        ck_assert_ptr_nonnull(want[i]);
        expect_mem(s, len, want[i]);
    }
    len = 99;
    ck_assert_ptr_null(proto_rsp_str(PROTO_RSP_MAX, &len));
    ck_assert_uint_eq(len, 0);
}
END_TEST

START_TEST(test_compose_value) {
    char buf[PROTO_VALUE_HDR_MAX], key[300];
    const char *want = "VALUE foo 5 10\r\n";
    size_t n;

    n = proto_compose_value(buf, sizeof(buf), "foo", 3, 5, 10, false, 0);
    expect_mem(buf, n, want);
    n = proto_compose_value(buf, sizeof(buf), "foo", 3, 0, 0, true, 77);
    expect_mem(buf, n, "VALUE foo 0 0 77\r\n");
    /* The header bound holds for the longest possible fields. */
    fill(key, 'k', PROTO_KEY_MAX);
    n = proto_compose_value(buf, sizeof(buf), key, PROTO_KEY_MAX, UINT32_MAX,
                            UINT32_MAX, true, UINT64_MAX);
    ck_assert_uint_eq(n, 6 + 250 + 1 + 10 + 1 + 10 + 1 + 20 + 2);
    ck_assert(memcmp(buf + 256, " 4294967295 4294967295 18446744073709551615\r\n",
                     45) == 0);
}
END_TEST

START_TEST(test_compose_cap) {
    char buf[64];
    size_t full = strlen("VALUE foo 5 10\r\n");

    memset(buf, '#', sizeof(buf));
    ck_assert_uint_eq(proto_compose_value(buf, full, "foo", 3, 5, 10, false, 0),
                      full);
    memset(buf, '#', sizeof(buf));
    ck_assert_uint_eq(
        proto_compose_value(buf, full - 1, "foo", 3, 5, 10, false, 0), 0);
    ck_assert_int_eq(buf[full - 1], '#'); /* nothing past cap */
    ck_assert_uint_eq(proto_compose_value(buf, 0, "foo", 3, 5, 10, false, 0),
                      0);
    ck_assert_uint_eq(proto_compose_uint(buf, 2, 0), 0);
    ck_assert_uint_eq(proto_compose_uint(buf, 3, 0), 3);
    ck_assert_uint_eq(proto_compose_uint(buf, 21, UINT64_MAX), 0);
    ck_assert_uint_eq(proto_compose_stat(buf, 12, "pid", "42"), 0);
    ck_assert_uint_eq(proto_compose_stat(buf, 13, "pid", "42"), 13);
    ck_assert_uint_eq(proto_compose_line(buf, 3, "END"), 0);
    ck_assert_uint_eq(proto_compose_line(buf, 4, "END"), 0);
    ck_assert_uint_eq(proto_compose_line(buf, 5, "END"), 5);
}
END_TEST

START_TEST(test_compose_uint_stat_line) {
    char buf[64];
    size_t n;

    n = proto_compose_uint(buf, sizeof(buf), 0);
    expect_mem(buf, n, "0\r\n");
    n = proto_compose_uint(buf, sizeof(buf), 1234567890);
    expect_mem(buf, n, "1234567890\r\n");
    n = proto_compose_uint(buf, sizeof(buf), UINT64_MAX);
    expect_mem(buf, n, "18446744073709551615\r\n");
    n = proto_compose_stat(buf, sizeof(buf), "curr_items", "17");
    expect_mem(buf, n, "STAT curr_items 17\r\n");
    n = proto_compose_line(buf, sizeof(buf), "VERSION 1.6.18");
    expect_mem(buf, n, "VERSION 1.6.18\r\n");
    n = proto_compose_line(buf, sizeof(buf), "");
    expect_mem(buf, n, "\r\n");
}
END_TEST

/* --- meta commands ---------------------------------------------------------- */

START_TEST(test_meta_get_flags) {
    expect_ok("mg foo v c T30 N-1 R10 Oab k\r\n", PROTO_CMD_MG);
    expect_key("foo");
    ck_assert(proto_meta_has(&req.meta, 'v'));
    ck_assert(proto_meta_has(&req.meta, 'O'));
    ck_assert(!proto_meta_has(&req.meta, 'q'));
    ck_assert(!proto_meta_has(&req.meta, 's'));
    ck_assert_int_eq(req.meta.ttl, 30);
    ck_assert_int_eq(req.meta.vivify_ttl, -1);
    ck_assert_int_eq(req.meta.recache_ttl, 10);
    ck_assert(!req.noreply);
    expect_ok("mg foo q\r\n", PROTO_CMD_MG);
    ck_assert(req.noreply);
    expect_ok("mg foo\r\n", PROTO_CMD_MG);
    ck_assert_uint_eq(req.meta.seen, 0);
    expect_ok("mn\r\n", PROTO_CMD_MN);
    expect_ok("mn extra tokens\r\n", PROTO_CMD_MN);
    expect_ok("me foo\r\n", PROTO_CMD_ME);
    /* P and L are a proxy's business: accepted, ignored */
    expect_ok("mg foo P/x Ly\r\n", PROTO_CMD_MG);
}
END_TEST

START_TEST(test_meta_errors) {
    char line[600], key[300];

    expect_err("mg\r\n", E_FORMAT);
    expect_err("ms\r\n", E_FORMAT);
    expect_err("ms foo\r\n", E_FORMAT);
    snprintf(line, sizeof(line), "mg %s v\r\n", fill(key, 'k', 251));
    expect_err(line, E_FORMAT);
    expect_err("mg foo zz\r\n", "CLIENT_ERROR invalid flag");
    expect_err("mg foo v v\r\n", "CLIENT_ERROR duplicate flag");
    /* md answers its flag errors as mg does; ma has one text for all */
    expect_err("md foo v v\r\n", "CLIENT_ERROR duplicate flag");
    expect_err("ma foo zz\r\n", "CLIENT_ERROR invalid or duplicate flag");
    expect_err("mg foo T\r\n", "CLIENT_ERROR bad token in command line format");
    expect_err("mg foo Fx\r\n", E_FORMAT);
    /* flag numbers are digits only */
    expect_err("mg foo T+5\r\n", "CLIENT_ERROR bad token in command line format");
    expect_err("ma foo D+5\r\n", "CLIENT_ERROR invalid or duplicate flag");
    /* a flag token that starts with neither a letter nor a digit fails
     * the line before any flag is judged */
    expect_err("mg foo v \xff\r\n", E_FORMAT);
    expect_err("ma foo !\r\n", E_FORMAT);
    expect_err("ms foo 2 {\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    /* x is a flag (md: empty the value, keep the item) */
    expect_ok("md foo x\r\n", PROTO_CMD_MD);
    ck_assert(proto_meta_has(&req.meta, 'x'));
    expect_err("ma foo Dx\r\n", "CLIENT_ERROR invalid or duplicate flag");
    expect_err("ma foo MX\r\n", "CLIENT_ERROR invalid mode for ma M token");
    expect_err("mg foo O123456789012345678901234567890123\r\n",
               "CLIENT_ERROR opaque token too long");
    /* 18 flags fit memcached 1.6.45's 20 tokens (command, key), 19 do not */
    expect_ok("mg foo v c f h k l O1 q s t u P L T1 N1 R1 I F1\r\n", PROTO_CMD_MG);
    expect_err("mg foo v c f h k l O1 q s t u P L T1 N1 R1 I F1 x\r\n",
               "CLIENT_ERROR options flags are too long");
    expect_err("md foo v c f h k l O1 q s t u P L T1 N1 R1 I F1 x\r\n",
               "CLIENT_ERROR options flags are too long");
    /* errors are answered even under q */
    expect_err("mg foo q zz\r\n", "CLIENT_ERROR invalid flag");
    ck_assert(!req.noreply);
}
END_TEST

START_TEST(test_meta_set) {
    expect_ok("ms foo 5 T10 F7 MA C99 I\r\n", PROTO_CMD_MS);
    expect_key("foo");
    ck_assert_uint_eq(req.vlen, 5);
    ck_assert_uint_eq(req.meta.client_flags, 7);
    ck_assert_int_eq(req.meta.ttl, 10);
    ck_assert_int_eq(req.meta.mode, 'A');
    ck_assert_uint_eq(req.meta.cas, 99);
    ck_assert(proto_meta_has(&req.meta, 'I'));
    ck_assert(!req.swallow);
    /* no length, or a bad one: nothing to swallow */
    expect_err("ms foo\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    expect_err("ms foo -1\r\n", E_FORMAT);
    ck_assert(!req.swallow);
    /* a bad flag after a good length: the data block is swallowed */
    expect_err("ms foo 5 Mz\r\n", "CLIENT_ERROR invalid mode for ms M token");
    ck_assert(req.swallow);
    ck_assert_uint_eq(req.vlen, 5);
    expect_err("ms foo 5 v v\r\n", "CLIENT_ERROR duplicate flag");
    ck_assert(req.swallow);
    /* M's mode is the letter after it, whatever follows (1.6.45) */
    expect_ok("ms foo 5 MEE\r\n", PROTO_CMD_MS);
    ck_assert_int_eq(req.meta.mode, 'E');
    expect_err("ms foo 5 M\r\n", "CLIENT_ERROR invalid mode for ms M token");
    ck_assert(req.swallow);
    /* E: the CAS the stored item gets */
    expect_ok("ms foo 5 E973\r\n", PROTO_CMD_MS);
    ck_assert(proto_meta_has(&req.meta, 'E'));
    ck_assert_uint_eq(req.meta.cas_in, 973);
    expect_err("ms foo 5 Ex\r\n", "CLIENT_ERROR bad token in command line format");
    expect_err("ms foo +5\r\n", E_FORMAT);
    ck_assert(!req.swallow);
}
END_TEST

START_TEST(test_meta_base64_key) {
    expect_ok("mg Zm9v b v\r\n", PROTO_CMD_MG);
    expect_key("foo");
    ck_assert(req.meta.key_binary);
    /* me decodes only when a token follows the b, as 1.6.45 does */
    expect_ok("me Zm9v b\r\n", PROTO_CMD_ME);
    expect_key("Zm9v");
    expect_ok("me Zm9v b x\r\n", PROTO_CMD_ME);
    expect_key("foo");
    expect_err("mg !!!! b\r\n", "CLIENT_ERROR error decoding key");
    expect_ok("me !!!! b\r\n", PROTO_CMD_ME);
    expect_err("me !!!! b x\r\n", E_FORMAT);
    /* memcached's leniency: stray characters skipped, '=' ends the key */
    expect_ok("mg Zm9v!! b\r\n", PROTO_CMD_MG);
    expect_key("foo");
    expect_ok("mg Zg==Zm9v b\r\n", PROTO_CMD_MG);
    expect_key("f");
    /* the next request's key is its own again */
    expect_ok("mg plain v\r\n", PROTO_CMD_MG);
    expect_key("plain");
    ck_assert(!req.meta.key_binary);
}
END_TEST

START_TEST(test_base64_codec) {
    char enc[16];
    unsigned char dec[16];
    const char *in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    const char *out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };

    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        size_t n = base64_encode((const unsigned char *)in[i], strlen(in[i]),
                                 enc, sizeof(enc));
        expect_mem(enc, n, out[i]);
        if (i > 0) {
            n = base64_decode(out[i], strlen(out[i]), dec, sizeof(dec));
            expect_mem((const char *)dec, n, in[i]);
        }
    }
    ck_assert_uint_eq(base64_decode("Zm9", 3, dec, sizeof(dec)), 0);
    ck_assert_uint_eq(base64_decode("Zm9vYmFy", 8, dec, 5), 0);   /* cap short */
    ck_assert_uint_eq(base64_encode((const unsigned char *)"foo", 3, enc, 3), 0);
}
END_TEST

START_TEST(test_meta_compose) {
    char buf[PROTO_META_LINE_MAX];
    struct proto_meta_item it = {
        .key = "foo", .nkey = 3, .vlen = 5, .client_flags = 9, .cas = 42,
        .ttl_before = -1, .la = 3, .fetched = true,
    };
    size_t n;

    expect_ok("mg foo s v f t c Oop k h l\r\n", PROTO_CMD_MG);
    n = proto_compose_meta(buf, sizeof(buf), "VA", "stcflhOk", &req.meta, &it);
    expect_mem(buf, n, "VA 5 s5 f9 t-1 c42 Oop kfoo h1 l3\r\n");
    it.ttl_before = 30;
    it.token_sent = it.stale = true;
    n = proto_compose_meta(buf, sizeof(buf), "HD", "t", &req.meta, &it);
    expect_mem(buf, n, "HD t30 Z X\r\n");
    it.token_sent = it.stale = false;
    /* t shows the TTL as the flags before it left it: a created item has
     * none until its N, then the N's, then the T's. */
    it.ttl_before = -1;
    it.ttl_vivify = 30;
    it.ttl = 60;
    it.vivified = true;
    static const char *const lines[] = {
        "mg foo t N30 T60\r\n", "mg foo N30 t T60\r\n", "mg foo N30 T60 t\r\n",
    };
    static const char *const created[] = { "HD t-1\r\n", "HD t30\r\n", "HD t60\r\n" };
    static const char *const existed[] = { "HD t-1\r\n", "HD t-1\r\n", "HD t60\r\n" };
    for (int i = 0; i < 3; i++) {
        expect_ok(lines[i], PROTO_CMD_MG);
        it.vivified = true;
        n = proto_compose_meta(buf, sizeof(buf), "HD", "t", &req.meta, &it);
        expect_mem(buf, n, created[i]);
        it.vivified = false;        /* N on an item that was there: no change */
        n = proto_compose_meta(buf, sizeof(buf), "HD", "t", &req.meta, &it);
        expect_mem(buf, n, existed[i]);
    }
    expect_ok("mg foo s v f t c Oop k h l\r\n", PROTO_CMD_MG);
    it.ttl_before = 30;
    it.token_sent = it.stale = true;
    it.token_sent = false;
    it.won = true;
    n = proto_compose_meta(buf, sizeof(buf), "EN", "Ok", &req.meta, &it);
    expect_mem(buf, n, "EN Oop kfoo X W\r\n");
    /* a binary key goes back base64-encoded, then " b" */
    it.stale = it.won = false;
    it.key_binary = true;
    n = proto_compose_meta(buf, sizeof(buf), "HD", "k", &req.meta, &it);
    expect_mem(buf, n, "HD kZm9v b\r\n");
    ck_assert_uint_eq(proto_compose_meta(buf, 5, "HD", "k", &req.meta, &it), 0);
    it.key_binary = false;
    n = proto_compose_me(buf, sizeof(buf), &it, -100, 3, 80);
    expect_mem(buf, n, "ME foo exp=-100 la=3 cas=42 fetch=yes cls=3 size=80\r\n");
}
END_TEST

/* --- binary protocol ------------------------------------------------------- */

static size_t bin_req(unsigned char *buf, uint8_t magic, uint8_t op, uint16_t keylen,
                      uint8_t extlen, uint32_t bodylen, uint32_t opaque, uint64_t cas) {
    memset(buf, 0, 24);
    buf[0] = magic;
    buf[1] = op;
    buf[2] = (unsigned char)(keylen >> 8);
    buf[3] = (unsigned char)keylen;
    buf[4] = extlen;
    for (int i = 0; i < 4; i++) {
        buf[8 + i] = (unsigned char)(bodylen >> (24 - 8 * i));
    }
    memcpy(buf + 12, &opaque, 4);
    for (int i = 0; i < 8; i++) {
        buf[16 + i] = (unsigned char)(cas >> (56 - 8 * i));
    }
    return 24;
}

static void
expect_peeked(const struct proto_key *k, const char *want)
{
    ck_assert_uint_eq(k->n, strlen(want));
    ck_assert_int_eq(memcmp(k->p, want, k->n), 0);
}

START_TEST(test_peek_keys) {
    struct proto_key k[4];
    size_t scanned;
    const char *run = "mg a v q\r\nget bb\r\nmg ccc s v\nmg d b v\r\nmn\r\n";

    /* one-key reads up to the first other request; a base64 key stops it */
    ck_assert_uint_eq(proto_peek_keys(run, strlen(run), k, 4, &scanned), 3);
    expect_peeked(&k[0], "a");
    expect_peeked(&k[1], "bb");
    expect_peeked(&k[2], "ccc");
    ck_assert_uint_eq(scanned, strlen("mg a v q\r\nget bb\r\nmg ccc s v\n"));
    /* at most max keys; scanned covers only their lines */
    ck_assert_uint_eq(proto_peek_keys(run, strlen(run), k, 1, &scanned), 1);
    ck_assert_uint_eq(scanned, strlen("mg a v q\r\n"));
    /* an unfinished line, a multi-key get, a set, no key: nothing */
    ck_assert_uint_eq(proto_peek_keys("mg a v", 6, k, 4, &scanned), 0);
    ck_assert_uint_eq(scanned, 0);
    ck_assert_uint_eq(proto_peek_keys("get a b\r\n", 9, k, 4, &scanned), 0);
    ck_assert_uint_eq(proto_peek_keys("set a 0 0 1\r\nx\r\n", 17, k, 4, &scanned), 0);
    ck_assert_uint_eq(proto_peek_keys("mg\r\n", 4, k, 4, &scanned), 0);
    /* gets counts; a NUL is just a byte of the key here (the parse that
     * answers decides what it means) */
    ck_assert_uint_eq(proto_peek_keys("gets ab\r\nget x\0y\r\n", 18, k, 4, &scanned), 2);
    expect_peeked(&k[0], "ab");
    ck_assert_uint_eq(k[1].n, 3);
    ck_assert_uint_eq(scanned, 18);
}
END_TEST

START_TEST(test_bin_peek_keys) {
    unsigned char b[200];
    struct proto_key k[4];
    size_t n = 0, scanned;

    n += bin_req(b + n, 0x80, 0x0d, 2, 0, 2, 1, 0);     /* GETKQ "k1" */
    memcpy(b + n, "k1", 2);
    n += 2;
    n += bin_req(b + n, 0x80, 0x09, 3, 0, 3, 2, 0);     /* GETQ "key" */
    memcpy(b + n, "key", 3);
    n += 3;
    size_t two = n;
    n += bin_req(b + n, 0x80, 0x0a, 0, 0, 0, 3, 0);     /* NOOP */
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, n, k, 4, &scanned), 2);
    expect_peeked(&k[0], "k1");
    expect_peeked(&k[1], "key");
    ck_assert_uint_eq(scanned, two);
    /* a request not yet whole is not looked at */
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, two - 1, k, 4, &scanned), 1);
    ck_assert_uint_eq(scanned, 26);
    /* a body shorter than its key, or the wrong magic: nothing */
    bin_req(b, 0x80, 0x00, 5, 0, 2, 0, 0);
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, 60, k, 4, &scanned), 0);
    bin_req(b, 0x81, 0x00, 2, 0, 2, 0, 0);
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, 60, k, 4, &scanned), 0);
    /* a body past the buffer (up to 4 GB), extras past the body: nothing */
    bin_req(b, 0x80, 0x00, 2, 0, 0xffffffffu, 0, 0);
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, 60, k, 4, &scanned), 0);
    bin_req(b, 0x80, 0x00, 2, 255, 2, 0, 0);
    ck_assert_uint_eq(proto_bin_peek_keys((char *)b, 60, k, 4, &scanned), 0);
}
END_TEST

START_TEST(test_bin_parse) {
    unsigned char b[600];
    size_t n;

    /* GETK "key": header and key consumed, quiet form flagged */
    n = bin_req(b, 0x80, 0x0d, 3, 0, 3, 0xdeadbeef, 0);
    memcpy(b + n, "key", 3);
    ck_assert_int_eq(proto_bin_parse((char *)b, 23, &req, &used), PROTO_AGAIN);
    ck_assert_int_eq(proto_bin_parse((char *)b, 26, &req, &used), PROTO_AGAIN);
    ck_assert_int_eq(proto_bin_parse((char *)b, 27, &req, &used), PROTO_OK);
    ck_assert_uint_eq(used, 27);
    ck_assert_int_eq(req.cmd, PROTO_CMD_GET);
    ck_assert(req.bin.on && req.bin.quiet && req.bin.with_key && req.noreply);
    ck_assert_uint_eq(req.bin.opaque, 0xdeadbeef);
    expect_key("key");

    /* SET: flags, exptime, value length; the value is not consumed */
    n = bin_req(b, 0x80, 0x01, 1, 8, 1 + 8 + 5, 0, 77);
    memcpy(b + n, "\0\0\0\x07\0\0\0\x1e" "kvalue", 14);
    ck_assert_int_eq(proto_bin_parse((char *)b, 33, &req, &used), PROTO_OK);
    ck_assert_uint_eq(used, 33);
    ck_assert_int_eq(req.cmd, PROTO_CMD_SET);
    ck_assert_uint_eq(req.flags, 7);
    ck_assert_int_eq(req.exptime, 30);
    ck_assert_uint_eq(req.vlen, 5);
    ck_assert_uint_eq(req.bin.cas, 77);

    /* INCR with expiration 0xffffffff: no create on a miss */
    n = bin_req(b, 0x80, 0x05, 1, 20, 21, 0, 0);
    memset(b + n, 0, 20);
    b[n + 7] = 3;                       /* delta 3 */
    b[n + 15] = 9;                      /* initial 9 */
    memset(b + n + 16, 0xff, 4);
    b[n + 20] = 'n';
    ck_assert_int_eq(proto_bin_parse((char *)b, 45, &req, &used), PROTO_OK);
    ck_assert_int_eq(req.cmd, PROTO_CMD_INCR);
    ck_assert_uint_eq(req.delta, 3);
    ck_assert_uint_eq(req.bin.initial, 9);
    ck_assert(!req.bin.create);

    /* errors: wrong magic closes; body shorter than the key: unknown and
     * close; a key over 250 bytes or wrong extras: EINVAL and close; an
     * unknown opcode: answered, the rest of its body dropped */
    bin_req(b, 0x81, 0x00, 1, 0, 1, 0, 0);
    ck_assert_int_eq(proto_bin_parse((char *)b, 25, &req, &used), PROTO_CLOSE);
    bin_req(b, 0x80, 0x00, 3, 0, 2, 0, 0);
    ck_assert_int_eq(proto_bin_parse((char *)b, 24, &req, &used), PROTO_ERROR);
    ck_assert_int_eq(req.bin.status, PROTO_BIN_UNKNOWN_COMMAND);
    ck_assert(req.bin.close);
    bin_req(b, 0x80, 0x00, 251, 0, 251, 0, 0);
    ck_assert_int_eq(proto_bin_parse((char *)b, 24, &req, &used), PROTO_ERROR);
    ck_assert_int_eq(req.bin.status, PROTO_BIN_EINVAL);
    ck_assert(req.bin.close);
    bin_req(b, 0x80, 0x00, 1, 4, 5, 0, 0);
    ck_assert_int_eq(proto_bin_parse((char *)b, 29, &req, &used), PROTO_ERROR);
    ck_assert_int_eq(req.bin.status, PROTO_BIN_EINVAL);
    bin_req(b, 0x80, 0x50, 1, 2, 10, 0, 0);
    ck_assert_int_eq(proto_bin_parse((char *)b, 27, &req, &used), PROTO_ERROR);
    ck_assert_int_eq(req.bin.status, PROTO_BIN_UNKNOWN_COMMAND);
    ck_assert(!req.bin.close);
    ck_assert_uint_eq(req.bin.swallow, 7);
    ck_assert_uint_eq(used, 27);
}
END_TEST

START_TEST(test_bin_compose) {
    char buf[128];
    const unsigned char *u = (const unsigned char *)buf;
    uint32_t opaque = 0x01020304;

    size_t n = proto_bin_compose(buf, sizeof(buf), 0x0c, 0, opaque, 0x1122334455667788ull,
                                 "\0\0\0\x05", 4, "key", 3, 6);
    ck_assert_uint_eq(n, 24 + 4 + 3);
    ck_assert_uint_eq(u[0], 0x81);
    ck_assert_uint_eq(u[1], 0x0c);
    ck_assert_uint_eq(u[3], 3);                 /* key length */
    ck_assert_uint_eq(u[4], 4);                 /* extras length */
    ck_assert_uint_eq(u[11], 4 + 3 + 6);        /* body length */
    ck_assert(memcmp(buf + 12, &opaque, 4) == 0);
    ck_assert_uint_eq(u[16], 0x11);
    ck_assert_uint_eq(u[23], 0x88);
    ck_assert(memcmp(buf + 28, "key", 3) == 0);
    n = proto_bin_compose_error(buf, sizeof(buf), 0x00, PROTO_BIN_KEY_ENOENT, 0, NULL);
    ck_assert_uint_eq(n, 24 + 9);
    ck_assert_uint_eq(u[7], 1);                 /* status */
    ck_assert(memcmp(buf + 24, "Not found", 9) == 0);
    ck_assert_uint_eq(proto_bin_compose(buf, 20, 0, 0, 0, 0, NULL, 0, NULL, 0, 0), 0);
}
END_TEST

static Suite *proto_suite(void) {
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_parse_u64);
    tcase_add_test(tc, test_parse_i64);
    tcase_add_test(tc, test_get_single);
    tcase_add_test(tc, test_get_multi);
    tcase_add_test(tc, test_get_many_keys);
    tcase_add_test(tc, test_get_arity);
    tcase_add_test(tc, test_get_key_length);
    tcase_add_test(tc, test_get_long_key_after_window);
    tcase_add_test(tc, test_gat);
    tcase_add_test(tc, test_set_basic);
    tcase_add_test(tc, test_storage_commands);
    tcase_add_test(tc, test_set_noreply);
    tcase_add_test(tc, test_set_arity);
    tcase_add_test(tc, test_set_swallow);
    tcase_add_test(tc, test_set_bad_length);
    tcase_add_test(tc, test_set_number_quirks);
    tcase_add_test(tc, test_cas);
    tcase_add_test(tc, test_incr_decr);
    tcase_add_test(tc, test_incr_key_length);
    tcase_add_test(tc, test_touch);
    tcase_add_test(tc, test_delete);
    tcase_add_test(tc, test_flush_all);
    tcase_add_test(tc, test_verbosity);
    tcase_add_test(tc, test_cache_memlimit);
    tcase_add_test(tc, test_version_quit);
    tcase_add_test(tc, test_shutdown);
    tcase_add_test(tc, test_stats_config);
    tcase_add_test(tc, test_unknown);
    tcase_add_test(tc, test_http_close);
    tcase_add_test(tc, test_http_token_window);
    tcase_add_test(tc, test_line_endings);
    tcase_add_test(tc, test_pipelined);
    tcase_add_test(tc, test_nul_ends_line);
    tcase_add_test(tc, test_req_reset);
    tcase_add_test(tc, test_split_feed);
    tcase_add_test(tc, test_long_line_limits);
    tcase_add_test(tc, test_stream_get);
    tcase_add_test(tc, test_stream_keys);
    tcase_add_test(tc, test_long_line_spaces);
    tcase_add_test(tc, test_long_get_with_newline);
    tcase_add_test(tc, test_long_set_with_newline);
    tcase_add_test(tc, test_key_next);
    tcase_add_test(tc, test_data_ok);
    tcase_add_test(tc, test_rsp_str);
    tcase_add_test(tc, test_compose_value);
    tcase_add_test(tc, test_compose_cap);
    tcase_add_test(tc, test_compose_uint_stat_line);
    tcase_add_test(tc, test_meta_get_flags);
    tcase_add_test(tc, test_meta_errors);
    tcase_add_test(tc, test_meta_set);
    tcase_add_test(tc, test_meta_base64_key);
    tcase_add_test(tc, test_base64_codec);
    tcase_add_test(tc, test_meta_compose);
    tcase_add_test(tc, test_bin_parse);
    tcase_add_test(tc, test_bin_compose);
    tcase_add_test(tc, test_peek_keys);
    tcase_add_test(tc, test_bin_peek_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(proto_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
