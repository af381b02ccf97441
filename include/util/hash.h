/*
 * hash.h -- key hash for the hash table and its lock stripes; CRC-32C.
 */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>

uint32_t hash_key(const char *key, size_t nkey);
/* The same function from another seed (a second, independent hash). */
uint32_t hash_seeded(const void *p, size_t n, uint32_t seed);
/* CRC-32C of n bytes, continuing crc (0 to start): crc32c(crc32c(0, a), b)
 * is the CRC of a then b. The flash tier's record checksum. _sw: the
 * table-driven version hash_crc32c() falls back to (the same values). */
uint32_t hash_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t hash_crc32c_sw(uint32_t crc, const void *p, size_t n);

#endif
