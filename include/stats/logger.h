/*
 * logger.h -- memcached's log stream for `watch`: fetches, mutations,
 * evictions, deletions and connection events as one text line each, in memcached's format, copied to every
 * watcher that asked for their kind.
 *
 * Each watcher owns a bounded buffer (-o watcher_logbuf_size). A line that
 * does not fit is dropped and counted; the watcher then reads
 * "skipped=N" before the next line, as memcached writes it. A slow watcher
 * therefore costs the cache one memcpy per line and never blocks it.
 * While nobody watches, logging costs a relaxed load (logger_wants()).
 */
#ifndef SC_LOGGER_H
#define SC_LOGGER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOGGER_FETCHERS  0x1u
#define LOGGER_MUTATIONS 0x2u
#define LOGGER_EVICTIONS 0x4u
#define LOGGER_CONNEVENTS 0x8u
#define LOGGER_DELETIONS 0x10u
#define LOGGER_WATCHERS_MAX 20              /* memcached's WATCHER_LIMIT */
#define LOGGER_BUF_DEFAULT (256u * 1024)    /* memcached's watcher_logbuf_size */

struct logger_watcher;

/* The kinds some watcher wants (0: nobody watches). */
extern _Atomic uint32_t logger_active;
static inline bool
logger_wants(uint32_t kind)
{
    return (atomic_load_explicit(&logger_active, memory_order_relaxed) & kind) != 0;
}

void     logger_setup(size_t bufsize);
void     logger_teardown(void);
/* A new watcher of kinds; NULL at LOGGER_WATCHERS_MAX (or out of memory). */
struct logger_watcher *logger_watch(uint32_t kinds);
void     logger_unwatch(struct logger_watcher *w);
/* Move up to cap bytes of the watcher's lines into buf; bytes moved. */
size_t   logger_take(struct logger_watcher *w, char *buf, size_t cap);

/* Get statuses, memcached's order: not_found, found, flushed, expired. */
typedef enum logger_get_status {
    LOGGER_GET_NOT_FOUND, LOGGER_GET_FOUND, LOGGER_GET_FLUSHED, LOGGER_GET_EXPIRED,
} logger_get_status_t;
/* Store statuses, memcached's order. */
typedef enum logger_store_status {
    LOGGER_STORE_NOT_STORED, LOGGER_STORE_STORED, LOGGER_STORE_EXISTS,
    LOGGER_STORE_NOT_FOUND, LOGGER_STORE_TOO_LARGE, LOGGER_STORE_NO_MEMORY,
} logger_store_status_t;

void logger_item_get(const char *key, size_t nkey, logger_get_status_t st,
                     unsigned cls, int fd, uint32_t vlen);
/* cmd: "set", "add", ...; ttl in seconds from now (0: none). */
void logger_item_store(const char *key, size_t nkey, logger_store_status_t st,
                       const char *cmd, uint32_t ttl, unsigned cls, int fd,
                       uint32_t vlen);
/* ttl -1: never expires; la: seconds since last access. */
void logger_eviction(const char *key, size_t nkey, bool fetched, int64_t ttl,
                     uint32_t la, unsigned cls, uint32_t vlen);

/* An item a delete (cmd "delete") or meta delete ("md") removed. */
void logger_deletion(const char *key, size_t nkey, const char *cmd, unsigned cls,
                     uint32_t vlen);

/* Why a connection closed, memcached's names and order. */
typedef enum logger_close_reason {
    LOGGER_CLOSE_ERROR, LOGGER_CLOSE_NORMAL, LOGGER_CLOSE_IDLE_TIMEOUT,
    LOGGER_CLOSE_SHUTDOWN,
} logger_close_reason_t;
/* rip: peer address ("unix" for a UNIX socket); transport: "tcp", "local". */
void logger_conn_new(const char *rip, unsigned rport, const char *transport, int fd);
void logger_conn_close(const char *rip, unsigned rport, const char *transport,
                       logger_close_reason_t reason, int fd);

/* `stats` figures: lines written to watchers, lines dropped, watchers. */
void     logger_stats(uint64_t *sent, uint64_t *skipped, uint64_t *watchers);

#endif
