/*
 * clock.c -- coarse relative clock (see clock.h).
 *
 * rel 0 is two seconds before start so that a valid timestamp is never 0
 * or 1: 0 means "never expires" and 1 means "already expired".
 */
#include "clock.h"

#include <stdatomic.h>

static time_t started;
static struct timespec started_mono;
static _Atomic rel_time_t now_rel;

void
clock_setup(void)
{
    started = time(NULL) - 2;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &started_mono);
    clock_tick();
}

void
clock_tick(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store_explicit(&now_rel, (rel_time_t)(ts.tv_sec - started),
                          memory_order_relaxed);
}

rel_time_t
clock_now(void)
{
    return atomic_load_explicit(&now_rel, memory_order_relaxed);
}

time_t
clock_started(void)
{
    return started;
}

void
clock_restore(time_t then)
{
    started = then;
    clock_tick();
}

time_t
clock_unix(rel_time_t t)
{
    return started + (time_t)t;
}

rel_time_t
clock_exptime(int64_t exptime)
{
    if (exptime == 0) {
        return 0;
    }
    if (exptime < 0) {
        return 1;               /* already expired, as memcached 1.6 */
    }
    if (exptime > CLOCK_MAXDELTA) {
        if (exptime <= (int64_t)started) {
            return 1;
        }
        int64_t rel = exptime - (int64_t)started;
        return rel > UINT32_MAX ? UINT32_MAX : (rel_time_t)rel;
    }
    return (rel_time_t)exptime + clock_now();
}

uint64_t
clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
clock_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t ns = (int64_t)(ts.tv_sec - started_mono.tv_sec) * 1000000000 +
                 (ts.tv_nsec - started_mono.tv_nsec);
    return (uint64_t)(ns / 1000000);
}

void
clock_deadline(struct timespec *out, uint32_t ms)
{
    clock_gettime(CLOCK_REALTIME, out);
    out->tv_sec += ms / 1000;
    out->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}
