/*
 * hash.h -- key hash for the hash table and its lock stripes.
 */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>

uint32_t hash_key(const char *key, size_t nkey);
/* The same function from another seed: chained over several buffers, the
 * flash tier's record checksum. */
uint32_t hash_seeded(const void *p, size_t n, uint32_t seed);

#endif
