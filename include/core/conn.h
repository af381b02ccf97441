/*
 * conn.h -- one client connection: read, parse, dispatch, write.
 *
 * Per readable event a connection does one read(), handles every complete
 * request in its buffer (at most -R of them, then yields to other
 * connections) and answers them with one write.
 *
 * Memory. A connection waiting for its next command holds only its own
 * struct (about 300 bytes) and, if part of a command has arrived, a copy
 * of that part (at most CONN_STASH_MAX bytes). Everything else is lent by
 * its worker while it works, as memcached lends read buffers: the read
 * buffer (CONN_RBUF_SIZE) while unparsed input is in it or its last read
 * filled it (a pipelining client: more is on its way, and it is read in
 * the same turn), and the request in progress with its output queue
 * until every answer is sent (with -S, for as long as the SASL state
 * lives). Output is bounded by pausing input while more than CONN_OUT_HIGH
 * bytes wait in
 * all (values queued by reference, which pin their items), more than
 * CONN_OUT_COPY_HIGH bytes of copied answers or CONN_OUT_SEGS pieces wait,
 * or DISPATCH_DUMP_FLASH_MAX lines of a dump's flash items (about 2 KB
 * each until sent); once the socket has refused part of what was sent (a
 * client that reads slowly or not at all), the bounds are the _SLOW ones.
 * A client that pipelines requests and never reads thus holds about its
 * read buffer, 2 KB of copied answers and 1 KB of bookkeeping; the large
 * bounds are reached only by answers held back while their own line is
 * still arriving (a long multi-get: conn.c), or queued in one turn before
 * the socket refused anything.
 */
#ifndef SC_CONN_H
#define SC_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONN_RBUF_SIZE      8192
#define CONN_OUT_HIGH       (1024u * 1024)  /* queued bytes, references included */
#define CONN_OUT_COPY_HIGH  (32u * 1024)    /* copied bytes */
#define CONN_OUT_SEGS       2048            /* queued pieces (40 B each) */
#define CONN_OUT_SLOW       (64u * 1024)    /* the same, once the socket refused */
#define CONN_OUT_COPY_SLOW  (2u * 1024)
#define CONN_OUT_SEGS_SLOW  256

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

/* How a listener's clients speak: plain, TLS (-Z: their bytes go through
 * tls.h, the handshake first), or TLS with a client certificate required
 * (an `mtls:` listener, as memcached's). */
typedef enum conn_tls {
    CONN_TLS_NONE,
    CONN_TLS_ON,
    CONN_TLS_MUTUAL,
} conn_tls_t;

struct conn *conn_new(int fd, struct event_base *base, struct stats_thread *st,
                      struct conn_list *list, conn_tls_t tls);
void         conn_free(struct conn *c);
/* Flash reads of this connection go to ring (NULL: the I/O threads) and
 * come back through fn(owner, ...). */
void         conn_set_flash(struct conn *c, dispatch_flash_notify_fn fn, void *owner,
                            struct flash_ring *ring);
/* An answer it waited for is ready: write (and read on) as after an event. */
void         conn_kick(struct conn *c);
/* Free every connection on the list (worker shutdown), and the calling
 * thread's spare buffers (conn_pool_drain). */
void         conn_free_all(struct conn_list *list);
/* Free the calling thread's spare read buffers and request contexts (a
 * worker, as its loop ends). */
void         conn_pool_drain(void);
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
/* Emit `stats conns` lines for the list's connections. */
void         conn_list_stats(struct conn_list *list,
                             void (*emit)(void *, const char *, const char *),
                             void *ctx);

#endif
