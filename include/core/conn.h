/*
 * conn.h -- one client connection: read, parse, dispatch, write.
 *
 * Per readable event a connection does one read(), handles every complete
 * request in its buffer (at most -R of them, then yields to other
 * connections) and answers them with one write. Input is bounded by the
 * line limits of the protocol; output is bounded by pausing input while a
 * slow reader leaves more than CONN_OUT_COPY_HIGH bytes of copied answers
 * (the copy buffer is reused only once everything is sent), CONN_OUT_HIGH
 * bytes in all (values queued by reference, which pin their items) or
 * CONN_OUT_SEGS pieces waiting, or DISPATCH_DUMP_FLASH_MAX lines of a
 * dump's flash items (about 2 KB each until sent). A connection that never
 * reads thus holds at most its 16 KB read buffer, a 64 KB copy buffer and
 * those lines.
 */
#ifndef SC_CONN_H
#define SC_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONN_RBUF_INIT  16384
#define CONN_OUT_HIGH   (1024u * 1024)      /* queued bytes, references included */
#define CONN_OUT_COPY_HIGH (32u * 1024)     /* copied bytes: the buffer doubles
                                               past it to at most 64 KB */
#define CONN_OUT_SEGS   2048                /* queued pieces (32 B each) */

struct conn;
struct event_base;
#include "dispatch.h"

struct stats_thread;

/* Per-thread connection list, owned by a worker. */
struct conn_list {
    pthread_mutex_t lock;       /* taken on open/close and by `stats conns` */
    struct conn    *head;
};

struct sockaddr;

/* memcached's `stats conns` address form: tcp:HOST:PORT, tcp6:[HOST]:PORT,
 * unix:PATH ("unknown" for anything else). */
void         conn_format_addr(const struct sockaddr *sa, char *out, size_t cap);

/* tls: the client came through a TLS listener (-Z): its bytes go through
 * tls.h, the handshake first. */
struct conn *conn_new(int fd, struct event_base *base, struct stats_thread *st,
                      struct conn_list *list, bool tls);
void         conn_free(struct conn *c);
/* Flash reads of this connection go to ring (NULL: the I/O threads) and
 * come back through fn(owner, ...). */
void         conn_set_flash(struct conn *c, dispatch_flash_notify_fn fn, void *owner,
                            struct flash_ring *ring);
/* An answer it waited for is ready: write (and read on) as after an event. */
void         conn_kick(struct conn *c);
/* Free every connection on the list (worker shutdown). */
void         conn_free_all(struct conn_list *list);
/* Emit `stats conns` lines for the list's connections. */
/*
 * Busy time of this thread's current event-loop turn: with timing on,
 * the first connection callback of a turn notes the time, and
 * conn_turn_take() returns it (0 if no connection ran) and starts over.
 * Workers sharing a CPU use it to yield after long turns (worker.c).
 */
void         conn_turn_timing(bool on);
uint64_t     conn_turn_take(void);
/*
 * Close the list's connections that have waited for a command longer than
 * timeout seconds (-o idle_timeout), counting each in idle_kicks. Only the
 * list's owning worker may call it.
 */
void         conn_kick_idle(struct conn_list *list, uint32_t timeout);
void         conn_list_stats(struct conn_list *list,
                             void (*emit)(void *, const char *, const char *),
                             void *ctx);

#endif
