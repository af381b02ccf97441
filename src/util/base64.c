/*
 * base64.c -- RFC 4648 base64 (see base64.h). Decoding is as lenient as
 * memcached's, since clients see its answers for odd keys: characters
 * outside the alphabet are skipped, '=' reads as a zero with padding, and
 * the first block with padding ends the key.
 */
#include "base64.h"

#include <stdint.h>

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
base64_encode(const unsigned char *src, size_t n, char *out, size_t cap)
{
    size_t need = base64_encoded_len(n), o = 0;

    if (need > cap) {
        return 0;
    }
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16;
        size_t left = n - i;
        if (left > 1) {
            v |= (uint32_t)src[i + 1] << 8;
        }
        if (left > 2) {
            v |= src[i + 2];
        }
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = left > 1 ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = left > 2 ? alphabet[v & 63] : '=';
    }
    return o;
}

/* A character's 6 bits; '=' reads as 0; -1 for anything else. */
static int
value_of(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : c == '=' ? 0 : -1;
}

size_t
base64_decode(const char *src, size_t n, unsigned char *out, size_t cap)
{
    size_t count = 0, o = 0;
    int block[4], k = 0, pad = 0;

    for (size_t i = 0; i < n; i++) {
        count += value_of(src[i]) >= 0;
    }
    if (count == 0 || count % 4 != 0 || count / 4 * 3 > cap) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int v = value_of(src[i]);
        if (v < 0) {
            continue;
        }
        pad += src[i] == '=';
        block[k++] = v;
        if (k < 4) {
            continue;
        }
        /* The block is complete, so out (which may be src) can be written. */
        unsigned char b[3] = {
            (unsigned char)(block[0] << 2 | block[1] >> 4),
            (unsigned char)(block[1] << 4 | block[2] >> 2),
            (unsigned char)(block[2] << 6 | block[3]),
        };
        if (pad > 2) {
            return 0;
        }
        for (int j = 0; j < 3 - pad; j++) {
            out[o++] = b[j];
        }
        k = 0;
        if (pad > 0) {
            break;              /* padding ends the input */
        }
    }
    return o;
}
