/*
 * logger.c -- the `watch` log stream (see logger.h).
 *
 * Lines are formatted once by the thread that logs them and copied into
 * each interested watcher's ring buffer under that watcher's mutex (a
 * leaf lock: callers may hold storage locks, as eviction does). Watchers
 * are few (at most 20), so the list is a fixed array under one lock.
 */
#include "logger.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proto.h"

#define LINE_MAX_BYTES 1024

struct logger_watcher {
    pthread_mutex_t lock;
    uint32_t        kinds;
    char           *buf;            /* ring of cap bytes */
    size_t          cap;
    size_t          head;           /* next byte to take */
    size_t          used;
    uint64_t        skipped;        /* lines dropped since the last take */
};

_Atomic uint32_t              logger_active;
static pthread_mutex_t        list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct logger_watcher *watchers[LOGGER_WATCHERS_MAX];
static size_t                 buf_size = LOGGER_BUF_DEFAULT;
static _Atomic uint64_t       gid;
static _Atomic uint64_t       sent;
static _Atomic uint64_t       skipped_total;
static _Atomic uint64_t       nwatchers;

void
logger_setup(size_t bufsize)
{
    buf_size = bufsize > 0 ? bufsize : LOGGER_BUF_DEFAULT;
}

void
logger_teardown(void)
{
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < LOGGER_WATCHERS_MAX; i++) {
        if (watchers[i] != NULL) {
            pthread_mutex_destroy(&watchers[i]->lock);
            free(watchers[i]->buf);
            free(watchers[i]);
            watchers[i] = NULL;
        }
    }
    atomic_store(&logger_active, 0);
    atomic_store(&nwatchers, 0);
    pthread_mutex_unlock(&list_lock);
}

/* Recompute the kinds anybody wants; list_lock held. */
static void
update_active(void)
{
    uint32_t kinds = 0;

    for (size_t i = 0; i < LOGGER_WATCHERS_MAX; i++) {
        if (watchers[i] != NULL) {
            kinds |= watchers[i]->kinds;
        }
    }
    atomic_store(&logger_active, kinds);
}

struct logger_watcher *
logger_watch(uint32_t kinds)
{
    struct logger_watcher *w = calloc(1, sizeof(*w));

    if (w == NULL || (w->buf = malloc(buf_size)) == NULL) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->kinds = kinds;
    w->cap = buf_size;
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < LOGGER_WATCHERS_MAX; i++) {
        if (watchers[i] == NULL) {
            watchers[i] = w;
            atomic_fetch_add(&nwatchers, 1);
            update_active();
            pthread_mutex_unlock(&list_lock);
            return w;
        }
    }
    pthread_mutex_unlock(&list_lock);
    pthread_mutex_destroy(&w->lock);
    free(w->buf);
    free(w);
    return NULL;
}

void
logger_unwatch(struct logger_watcher *w)
{
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < LOGGER_WATCHERS_MAX; i++) {
        if (watchers[i] == w) {
            watchers[i] = NULL;
            atomic_fetch_sub(&nwatchers, 1);
        }
    }
    update_active();
    pthread_mutex_unlock(&list_lock);
    pthread_mutex_destroy(&w->lock);
    free(w->buf);
    free(w);
}

/* Append to the ring, or count the line as skipped; w->lock held. */
static void
ring_put(struct logger_watcher *w, const char *line, size_t len)
{
    if (w->cap - w->used < len) {
        w->skipped++;
        atomic_fetch_add_explicit(&skipped_total, 1, memory_order_relaxed);
        return;
    }
    size_t tail = (w->head + w->used) % w->cap;
    size_t first = len < w->cap - tail ? len : w->cap - tail;
    memcpy(w->buf + tail, line, first);
    memcpy(w->buf, line + first, len - first);
    w->used += len;
    atomic_fetch_add_explicit(&sent, 1, memory_order_relaxed);
}

size_t
logger_take(struct logger_watcher *w, char *buf, size_t cap)
{
    size_t n = 0;

    pthread_mutex_lock(&w->lock);
    if (w->skipped > 0) {
        char note[48];
        int len = snprintf(note, sizeof(note), "skipped=%" PRIu64 "\n", w->skipped);
        if (len > 0 && (size_t)len <= cap) {
            memcpy(buf, note, (size_t)len);
            n = (size_t)len;
            w->skipped = 0;
        }
    }
    while (n < cap && w->used > 0) {
        size_t chunk = w->cap - w->head < w->used ? w->cap - w->head : w->used;
        chunk = chunk < cap - n ? chunk : cap - n;
        memcpy(buf + n, w->buf + w->head, chunk);
        w->head = (w->head + chunk) % w->cap;
        w->used -= chunk;
        n += chunk;
    }
    pthread_mutex_unlock(&w->lock);
    return n;
}

static void
broadcast(uint32_t kind, const char *line, size_t len)
{
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < LOGGER_WATCHERS_MAX; i++) {
        struct logger_watcher *w = watchers[i];
        if (w != NULL && (w->kinds & kind)) {
            pthread_mutex_lock(&w->lock);
            ring_put(w, line, len);
            pthread_mutex_unlock(&w->lock);
        }
    }
    pthread_mutex_unlock(&list_lock);
}

/* "ts=S.U gid=N " as memcached starts every line. */
static int
line_head(char *line, size_t cap)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return snprintf(line, cap, "ts=%lld.%d gid=%" PRIu64 " ",
                    (long long)tv.tv_sec, (int)tv.tv_usec,
                    atomic_fetch_add(&gid, 1) + 1);
}

static void
emit(uint32_t kind, const char *line, int head, int tail)
{
    if (head < 0 || tail < 0) {
        return;
    }
    size_t len = (size_t)head + (size_t)tail;
    broadcast(kind, line, len < LINE_MAX_BYTES ? len : LINE_MAX_BYTES - 1);
}

void
logger_item_get(const char *key, size_t nkey, logger_get_status_t st,
                unsigned cls, int fd, uint32_t vlen)
{
    static const char *const names[] = { "not_found", "found", "flushed", "expired" };
    char line[LINE_MAX_BYTES], ekey[3 * 250 + 1];
    int head = line_head(line, sizeof(line));

    proto_uri_encode(ekey, sizeof(ekey), key, nkey);
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=item_get key=%s status=%s clsid=%u cfd=%d size=%u\n",
                        ekey, names[st], cls, fd, vlen);
    emit(LOGGER_FETCHERS, line, head, tail);
}

void
logger_item_store(const char *key, size_t nkey, logger_store_status_t st,
                  const char *cmd, uint32_t ttl, unsigned cls, int fd,
                  uint32_t vlen)
{
    static const char *const names[] = {
        "not_stored", "stored", "exists", "not_found", "too_large", "no_memory",
    };
    char line[LINE_MAX_BYTES], ekey[3 * 250 + 1];
    int head = line_head(line, sizeof(line));

    proto_uri_encode(ekey, sizeof(ekey), key, nkey);
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=item_store key=%s status=%s cmd=%s ttl=%u clsid=%u cfd=%d size=%u\n",
                        ekey, names[st], cmd, ttl, cls, fd, vlen);
    emit(LOGGER_MUTATIONS, line, head, tail);
}

void
logger_eviction(const char *key, size_t nkey, bool fetched, int64_t ttl,
                uint32_t la, unsigned cls, uint32_t vlen)
{
    char line[LINE_MAX_BYTES], ekey[3 * 250 + 1];
    int head = line_head(line, sizeof(line));

    proto_uri_encode(ekey, sizeof(ekey), key, nkey);
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=eviction key=%s fetch=%s ttl=%lld la=%u clsid=%u size=%u\n",
                        ekey, fetched ? "yes" : "no", (long long)ttl, la, cls, vlen);
    emit(LOGGER_EVICTIONS, line, head, tail);
}

void
logger_deletion(const char *key, size_t nkey, const char *cmd, unsigned cls, uint32_t vlen)
{
    char line[LINE_MAX_BYTES], ekey[3 * 250 + 1];
    int head = line_head(line, sizeof(line));

    proto_uri_encode(ekey, sizeof(ekey), key, nkey);
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=deleted key=%s cmd=%s clsid=%u size=%u\n",
                        ekey, cmd, cls, vlen);
    emit(LOGGER_DELETIONS, line, head, tail);
}

void
logger_conn_new(const char *rip, unsigned rport, const char *transport, int fd)
{
    char line[LINE_MAX_BYTES];
    int head = line_head(line, sizeof(line));
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=conn_new rip=%s rport=%u transport=%s cfd=%d\n",
                        rip, rport, transport, fd);
    emit(LOGGER_CONNEVENTS, line, head, tail);
}

void
logger_conn_close(const char *rip, unsigned rport, const char *transport,
                  logger_close_reason_t reason, int fd)
{
    static const char *const names[] = { "error", "normal", "idle_timeout", "shutdown" };
    char line[LINE_MAX_BYTES];
    int head = line_head(line, sizeof(line));
    int tail = snprintf(line + head, sizeof(line) - (size_t)head,
                        "type=conn_close rip=%s rport=%u transport=%s reason=%s cfd=%d\n",
                        rip, rport, transport, names[reason], fd);
    emit(LOGGER_CONNEVENTS, line, head, tail);
}

void
logger_stats(uint64_t *s, uint64_t *k, uint64_t *w)
{
    *s = atomic_load(&sent);
    *k = atomic_load(&skipped_total);
    *w = atomic_load(&nwatchers);
}
