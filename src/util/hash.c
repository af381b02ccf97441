/*
 * hash.c -- 32-bit key hash (MurmurHash3 x86_32 algorithm, public domain),
 * and CRC-32C for checksums.
 *
 * Keys are short (<= 250 bytes); murmur3 mixes well enough that the low
 * bits can index both buckets and lock stripes.
 */
#include "hash.h"

#include <pthread.h>
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

/* --- CRC-32C ------------------------------------------------------------------ */

/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the flash tier's
 * record checksum. x86-64 CPUs since 2008 compute it in one instruction
 * per 8 bytes (SSE4.2), faster than murmur3 over the same bytes
 * (bench/crc-speed.c; figures in notes/flash.md); it is paid on every
 * append (under the item's locks) and every read. Elsewhere, a table, one
 * byte at a time.
 */
#define CRC32C_POLY 0x82f63b78u

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void
crc32c_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        }
        crc32c_table[i] = c;
    }
}

uint32_t
hash_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *d = p;

    pthread_once(&crc32c_once, crc32c_table_init);
    crc = ~crc;
    while (n-- > 0) {
        crc = crc32c_table[(crc ^ *d++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t
crc32c_sse42(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *d = p;
    uint64_t c = ~crc;

    for (; n >= 8; n -= 8, d += 8) {
        uint64_t v;
        memcpy(&v, d, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0) {
        c32 = __builtin_ia32_crc32qi(c32, *d++);
    }
    return ~c32;
}
#endif

uint32_t
hash_crc32c(uint32_t crc, const void *p, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        return crc32c_sse42(crc, p, n);
    }
#endif
    return hash_crc32c_sw(crc, p, n);
}
