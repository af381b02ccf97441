/*
 * proto_int.h -- what the protocol module's files share: memcached's
 * tokenizer output and its number parsers. Private to src/protocol.
 */
#ifndef SC_PROTO_INT_H
#define SC_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define MC_MAX_TOKENS 23  /* memcached's MAX_TOKENS (24) less its end marker */
#define TOK_KEEP      MC_MAX_TOKENS /* meta commands read every token */

struct tok {
    const char *p;
    size_t n;
};

/* One request line, tokenized the way memcached's tokenize_command() does. */
struct line {
    const char *start;
    const char *end;          /* excludes "\r\n" and anything after a NUL */
    struct tok tok[TOK_KEEP];
    size_t ntok;              /* capped at MC_MAX_TOKENS, like memcached */
    struct tok last;          /* the token memcached checks for "noreply" */
};

/* memcached's safe_strto*() on one token (see proto.c). */
bool proto_mc_strtoull(struct tok t, uint64_t *out);
bool proto_mc_strtoul(struct tok t, uint32_t *out);
bool proto_mc_strtol(struct tok t, int32_t *out);
/* memcached 1.6.45's token numbers: digits only (a '-' first for a signed
 * one), in range (proto.c). */
bool proto_tok_u64(struct tok t, uint64_t *out);
bool proto_tok_u32(struct tok t, uint32_t *out);
bool proto_tok_i32(struct tok t, int32_t *out);
bool proto_tok_is(struct tok t, const char *s);
bool proto_key_ok(struct tok t);
proto_status_t proto_fail(struct proto_req *req, const char *msg);

/* Meta commands (meta.c). */
proto_status_t proto_parse_meta(const struct line *ln, struct proto_req *req);

#endif
