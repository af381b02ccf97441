/*
 * hash.h -- key hash for the hash table and its lock stripes.
 */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>

uint32_t hash_key(const char *key, size_t nkey);

#endif
