/*
 * base64.h -- RFC 4648 base64 (standard alphabet, '=' padding), for meta
 * commands' binary keys (the 'b' flag).
 */
#ifndef SC_BASE64_H
#define SC_BASE64_H

#include <stddef.h>

/* Bytes base64_encode() writes for n input bytes. */
static inline size_t
base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Encode n bytes of src into out (cap bytes); bytes written, 0 if cap is short. */
size_t base64_encode(const unsigned char *src, size_t n, char *out, size_t cap);
/*
 * Decode n characters of src into out (cap bytes), as memcached does (see
 * base64.c). Returns the bytes decoded; 0 when the characters of the
 * alphabet are not whole groups of four, or cap is short. out may equal
 * src (decoding never outruns its input).
 */
size_t base64_decode(const char *src, size_t n, unsigned char *out, size_t cap);

#endif
