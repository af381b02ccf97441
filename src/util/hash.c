/*
 * hash.c -- 32-bit key hash (MurmurHash3 x86_32 algorithm, public domain).
 *
 * Keys are short (<= 250 bytes); murmur3 mixes well enough that the low
 * bits can index both buckets and lock stripes.
 */
#include "hash.h"

#include <string.h>

static inline uint32_t
rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

uint32_t
hash_key(const char *key, size_t nkey)
{
    return hash_seeded(key, nkey, 0x9747b28c);
}

uint32_t
hash_seeded(const void *p, size_t nkey, uint32_t seed)
{
    const uint8_t *data = p;
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    uint32_t h = seed;
    size_t nblocks = nkey / 4;

    for (size_t i = 0; i < nblocks; i++) {
        uint32_t k;
        memcpy(&k, data + i * 4, 4);
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64;
    }

    const uint8_t *tail = data + nblocks * 4;
    uint32_t k = 0;
    switch (nkey & 3) {
    case 3: k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: k ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }

    h ^= (uint32_t)nkey;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}
