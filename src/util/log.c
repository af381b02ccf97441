/*
 * log.c -- leveled logging to stderr; one fprintf per line so lines from
 * worker threads do not interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic int log_level;

void
log_set_level(int level)
{
    atomic_store(&log_level, level);
}


bool
log_enabled(log_level_t level)
{
    return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void
log_write(log_level_t level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
