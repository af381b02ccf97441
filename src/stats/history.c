/*
 * history.c -- a ring of one-second samples of `stats` (see history.h).
 *
 * A sample reads the figures as `stats` renders them (stats_emit with a
 * collector that keeps the names of HISTORY_FIELDS), so the history and
 * `stats` never disagree on what a field means. The main loop samples;
 * the admin thread reads; a mutex keeps a reader from seeing a sample
 * half-written.
 */
#include "history.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slab.h"

enum history_field {
#define HISTORY_ENUM(name) HF_##name,
    HISTORY_FIELDS(HISTORY_ENUM)
#undef HISTORY_ENUM
    HF_COUNT
};

static const char *const field_names[HF_COUNT] = {
#define HISTORY_NAME(name) #name,
    HISTORY_FIELDS(HISTORY_NAME)
#undef HISTORY_NAME
};

struct sample {
    int64_t  time;
    uint64_t v[HF_COUNT];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample  *ring;
static uint32_t        head;        /* the next slot written */
static uint32_t        count;

int
history_setup(void)
{
    pthread_mutex_lock(&lock);
    if (ring == NULL) {
        ring = calloc(HISTORY_SAMPLES, sizeof(*ring));
        if (ring != NULL) {
            slab_book((int64_t)(HISTORY_SAMPLES * sizeof(*ring)));  /* within -m */
        }
    }
    head = count = 0;
    pthread_mutex_unlock(&lock);
    return ring != NULL ? 0 : -1;
}

void
history_teardown(void)
{
    pthread_mutex_lock(&lock);
    if (ring != NULL) {
        free(ring);
        ring = NULL;
        slab_book(-(int64_t)(HISTORY_SAMPLES * sizeof(*ring)));
    }
    head = count = 0;
    pthread_mutex_unlock(&lock);
}

static void
collect(void *ctx, const char *name, const char *value)
{
    struct sample *s = ctx;

    for (int f = 0; f < HF_COUNT; f++) {
        if (strcmp(name, field_names[f]) == 0) {
            s->v[f] = strtoull(value, NULL, 10);
            return;
        }
    }
}

static uint64_t
rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) {
        resident = 0;
    }
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void
history_sample(int64_t now)
{
    struct sample s;

    pthread_mutex_lock(&lock);
    bool kept = ring != NULL;
    pthread_mutex_unlock(&lock);
    if (!kept) {
        return;                 /* no admin port: nothing to keep it for */
    }
    memset(&s, 0, sizeof(s));
    s.time = now;
    stats_emit(STATS_GENERAL, collect, &s);
    stats_emit(STATS_SLABCACHE, collect, &s);
    s.v[HF_rss_bytes] = rss_bytes();
    pthread_mutex_lock(&lock);
    if (ring != NULL) {
        uint32_t last = (head + HISTORY_SAMPLES - 1) % HISTORY_SAMPLES;

        if (count > 0 && ring[last].time == now) {
            ring[last] = s;     /* a late tick's catch-up: same second */
        } else {
            ring[head] = s;
            head = (head + 1) % HISTORY_SAMPLES;
            count += count < HISTORY_SAMPLES;
        }
    }
    pthread_mutex_unlock(&lock);
}

void
history_render_json(stats_write_fn w, void *ctx)
{
    char buf[64];
    int n;

    w(ctx, "{\"interval_s\":1,\"fields\":[\"time\"", 32);
    for (int f = 0; f < HF_COUNT; f++) {
        n = snprintf(buf, sizeof(buf), ",\"%s\"", field_names[f]);
        w(ctx, buf, (size_t)n);
    }
    w(ctx, "],\"samples\":[", 13);
    pthread_mutex_lock(&lock);
    for (uint32_t i = 0; ring != NULL && i < count; i++) {
        const struct sample *s = &ring[(head + HISTORY_SAMPLES - count + i) % HISTORY_SAMPLES];
        n = snprintf(buf, sizeof(buf), "%s[%" PRId64, i > 0 ? "," : "", s->time);
        w(ctx, buf, (size_t)n);
        for (int f = 0; f < HF_COUNT; f++) {
            n = snprintf(buf, sizeof(buf), ",%" PRIu64, s->v[f]);
            w(ctx, buf, (size_t)n);
        }
        w(ctx, "]", 1);
    }
    pthread_mutex_unlock(&lock);
    w(ctx, "]}\n", 3);
}
