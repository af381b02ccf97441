/*
 * num.c -- decimal parsing (see num.h). No locale, no strtol(): every
 * quirk of memcached's safe_strto*() is spelled out, and overflow is
 * detected in one place (scan_digits).
 */
#include "num.h"

/* isspace() in the C locale, without depending on the process locale. */
static bool
is_c_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

/*
 * Accumulate decimal digits from s[*pos..n). Returns false on overflow;
 * *ndigits tells whether anything was read.
 */
static bool
scan_digits(const char *s, size_t n, size_t *pos, uint64_t *out, size_t *ndigits)
{
    uint64_t v = 0;
    size_t i = *pos;

    while (i < n && s[i] >= '0' && s[i] <= '9') {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
        i++;
    }
    *ndigits = i - *pos;
    *pos = i;
    *out = v;
    return true;
}

bool
num_parse_u64(const char *s, size_t n, uint64_t *out)
{
    size_t pos = 0, nd;
    uint64_t v;

    if (!scan_digits(s, n, &pos, &v, &nd) || nd == 0 || pos != n) {
        return false;
    }
    *out = v;
    return true;
}

bool
num_parse_i64(const char *s, size_t n, int64_t *out)
{
    bool neg = n > 0 && s[0] == '-';
    uint64_t mag;

    if (!num_parse_u64(s + neg, n - neg, &mag)) {
        return false;
    }
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1) {
            return false;
        }
        /* Negate in unsigned space: -(INT64_MIN) does not fit in int64_t. */
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX) {
            return false;
        }
        *out = (int64_t)mag;
    }
    return true;
}

/*
 * The shape strtol()/strtoul() accept inside memcached's safe_strto*():
 * leading white space, an optional sign, at least one digit, then either
 * the end or white space (after which anything is ignored).
 */
static bool
mc_scan(const char *s, size_t n, uint64_t *mag, bool *neg)
{
    size_t pos = 0, nd;

    while (pos < n && is_c_space(s[pos])) {
        pos++;
    }
    *neg = false;
    if (pos < n && (s[pos] == '+' || s[pos] == '-')) {
        *neg = s[pos++] == '-';
    }
    if (!scan_digits(s, n, &pos, mag, &nd) || nd == 0) {
        return false;               /* ERANGE, or no digits at all */
    }
    return pos == n || is_c_space(s[pos]);
}

bool
num_mc_strtoull(const char *s, size_t n, uint64_t *out)
{
    uint64_t mag, v;
    bool neg;

    if (!mc_scan(s, n, &mag, &neg)) {
        return false;
    }
    v = neg ? 0 - mag : mag;
    if (neg && (v >> 63)) {
        return false;
    }
    *out = v;
    return true;
}

bool
num_mc_strtoul(const char *s, size_t n, uint32_t *out)
{
    uint64_t v;

    if (!num_mc_strtoull(s, n, &v)) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* Two's complement narrowing without implementation-defined conversions. */
static int32_t
to_int32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return u <= INT32_MAX ? (int32_t)u : -(int32_t)(UINT32_MAX - u) - 1;
}

bool
num_mc_strtol(const char *s, size_t n, int32_t *out)
{
    uint64_t mag;
    bool neg;

    if (!mc_scan(s, n, &mag, &neg)) {
        return false;
    }
    if (mag > (uint64_t)INT64_MAX + neg) {
        return false;
    }
    *out = to_int32(neg ? 0 - mag : mag);
    return true;
}
