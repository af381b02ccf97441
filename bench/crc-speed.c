/*
 * crc-speed.c -- microseconds per 4 KB of the flash record checksum:
 * CRC-32C (hash_crc32c: SSE4.2 where the CPU has it) against murmur3
 * (hash_seeded, the checksum before 0bf50b2). notes/flash.md cites it.
 *
 *   gcc -std=c11 -O2 -Iinclude/util bench/crc-speed.c src/util/hash.c \
 *       -lpthread -o /tmp/crc-speed && /tmp/crc-speed
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hash.h"

#define ROUNDS 100000

static double
now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int
main(void)
{
    static char buf[4096];
    volatile uint32_t sink = 0;
    double t0;

    memset(buf, 7, sizeof(buf));
    t0 = now_us();
    for (uint32_t i = 0; i < ROUNDS; i++) {
        sink += hash_seeded(buf, sizeof(buf), i);
    }
    printf("murmur3 %.2f us per 4 KB\n", (now_us() - t0) / ROUNDS);
    t0 = now_us();
    for (uint32_t i = 0; i < ROUNDS; i++) {
        sink += hash_crc32c(i, buf, sizeof(buf));
    }
    printf("crc32c  %.2f us per 4 KB\n", (now_us() - t0) / ROUNDS);
    return sink == 42 ? 1 : 0;
}
