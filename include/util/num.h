/*
 * num.h -- decimal number parsing shared by the protocol (command
 * arguments) and storage (incr/decr on a stored value): one parser, so the
 * two cannot drift apart.
 *
 * Two families: strict (the whole range must be digits, used for our own
 * arguments) and memcached's safe_strto*() (leading white space, a sign,
 * digits, then the end or white space), whose quirks clients depend on.
 */
#ifndef SC_NUM_H
#define SC_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Strict: s[0..n) is all digits (num_parse_i64: after an optional '-'). */
bool num_parse_u64(const char *s, size_t n, uint64_t *out);
bool num_parse_i64(const char *s, size_t n, int64_t *out);

/* memcached's safe_strtoull(): "-N" is refused unless it wraps to a value
 * strtoull() would have given without the sign showing. */
bool num_mc_strtoull(const char *s, size_t n, uint64_t *out);
/* safe_strtoul(): the 64-bit check, then cut to 32 bits. */
bool num_mc_strtoul(const char *s, size_t n, uint32_t *out);
/* safe_strtol(): range checked as a 64-bit long, then cut to int32_t. */
bool num_mc_strtol(const char *s, size_t n, int32_t *out);

#endif
