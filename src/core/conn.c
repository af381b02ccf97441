/*
 * conn.c -- a client connection's read/parse/dispatch/write cycle.
 *
 * Readiness is level-triggered, so one read() per event is enough: if more
 * bytes are waiting the event fires again, and reading until EAGAIN would
 * cost an extra syscall per batch. Responses accumulate in an output queue
 * (values by reference) and leave in one writev per batch.
 *
 * States: CMD (parsing lines), DATA (filling a storage command's item),
 * SWALLOW (dropping a rejected data block), MGET (answering a multi-get
 * whose line is longer than the read buffer, or whose answer paused at the
 * output bound, key by key as the line arrives), SWALLOW_LINE (dropping the
 * rest of a line that already has its answer), DUMP (writing a key dump
 * piece by piece as the client reads it), WATCH (a `watch` log stream:
 * input is dropped, log lines are moved to the output on a timer),
 * CLOSING.
 *
 * Memory per connection is bounded whatever the client sends: the read
 * buffer never grows (a line that may be long is a get, and is consumed as
 * its keys arrive), and input pauses while the output queue is over its
 * bound.
 */
#include "conn.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "admin.h"
#include "auth.h"
#include "config.h"
#include "clock.h"
#include "dispatch.h"
#include "log.h"
#include "logger.h"
#include "outq.h"
#include "proto.h"
#include "settings.h"
#include "stats.h"
#ifdef HAVE_TLS
#include "tls.h"
#endif

#define DIRECT_READ_MIN 4096    /* data blocks this big skip the rbuf */

typedef enum conn_state {
    CONN_CMD,
    CONN_DATA,
    CONN_SWALLOW,
    CONN_MGET,
    CONN_SWALLOW_LINE,
    CONN_DUMP,
    CONN_WATCH,
    CONN_CLOSING,
} conn_state_t;

/* memcached's names for the nearest of its states (`stats conns`). */
static const char *const state_names[] = {
    "conn_parse_cmd", "conn_nread", "conn_swallow", "conn_parse_cmd",
    "conn_swallow", "conn_write", "conn_watch", "conn_closing",
};

/*
 * What a connection holds only while it works: its request in progress,
 * its answers until they are sent, its output queue's storage and its
 * write event. Lent by the worker's pool (conn_act_take) when input
 * arrives and given back once the connection waits, idle, for its next
 * command (conn_settle), as memcached lends read buffers. The read buffer
 * is lent on its own, while unparsed input is in it or its last read
 * filled it.
 */
struct conn_act {
    struct dispatch_ctx  d;
    struct outq          out;
    struct event         ev_write;
    char                *rbuf;      /* CONN_RBUF_SIZE bytes, or NULL */
    size_t               rpos;      /* first unparsed byte */
    size_t               peek_end;  /* requests before it were prefetched */
    size_t               rlen;      /* end of buffered bytes */
    uint32_t             data_got;  /* bytes of the data block so far */
    bool                 read_full; /* the last read filled the buffer */
    struct conn_act     *next_free; /* in the pool */
};

/* A peer or local address: all `stats conns` and connevents need of it
 * (a UNIX socket's path is -s's). */
union conn_addr {
    struct sockaddr     sa;
    struct sockaddr_in  in;
    struct sockaddr_in6 in6;
};

struct conn {
    int                  fd;
    conn_state_t         state;
    bool                 read_paused;
    bool                 write_pending; /* a->ev_write is added */
    bool                 yielded;
    bool                 got_input; /* the first byte has been looked at */
    bool                 binary;    /* speaks the binary protocol */
    bool                 authenticated; /* -Y: passed the auth exchange */
    bool                 tls_read_wants_write; /* SSL_read must wait for POLLOUT */
    bool                 sasl_ok;   /* -S: authenticated (d.sasl.ok while idle) */
    logger_close_reason_t close_reason; /* d.close_reason while idle */
    struct conn_act     *a;         /* NULL while idle */
    char                *stash;     /* idle with part of a command: its bytes */
    uint32_t             nstash;
    struct event         ev_read;
    struct event        *ev_watch;  /* CONN_WATCH: drains the watcher */
    struct stats_thread *stats;
    struct conn_list    *list;
    struct conn         *prev, *next;
    struct tls_conn     *tls;       /* -Z: a TLS listener's client, else NULL */
    rel_time_t           last_cmd;
    rel_time_t           last_io;   /* last command or bytes written */
    union conn_addr      peer, local;
    dispatch_flash_notify_fn flash_notify;
    void                *flash_owner;
    struct flash_ring   *flash_ring;
};

static void conn_on_read(evutil_socket_t fd, short what, void *arg);
static void conn_release(struct conn *c);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);
static bool conn_flush(struct conn *c);

void
conn_format_addr(const struct sockaddr *sa, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "";

    snprintf(out, cap, "unknown");
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(out, cap, "tcp:%s:%u", host, ntohs(sin->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        snprintf(out, cap, "tcp6:[%s]:%u", host, ntohs(sin6->sin6_port));
    } else if (sa->sa_family == AF_UNIX) {
        snprintf(out, cap, "unix:%s", settings.socket_path);
    }
}

/* The connection's peer and local addresses, kept for `stats conns` and
 * connevents (getpeername truncates a UNIX socket's to its family). */
static void
conn_describe_peer(struct conn *c)
{
    socklen_t len = sizeof(c->peer);

    if (getpeername(c->fd, &c->peer.sa, &len) != 0) {
        c->peer.sa.sa_family = AF_UNSPEC;
    }
    len = sizeof(c->local);
    if (getsockname(c->fd, &c->local.sa, &len) != 0) {
        c->local.sa.sa_family = AF_UNSPEC;
    }
}

/* connevents' form: the bare address and port; "unix" and 0 for a UNIX
 * socket, as memcached writes them. */
static unsigned
conn_peer_ip(const struct conn *c, char *out, size_t cap)
{
    if (c->peer.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &c->peer.in.sin_addr, out, (socklen_t)cap);
        return ntohs(c->peer.in.sin_port);
    }
    if (c->peer.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &c->peer.in6.sin6_addr, out, (socklen_t)cap);
        return ntohs(c->peer.in6.sin6_port);
    }
    snprintf(out, cap, "unix");
    return 0;
}

static const char *
conn_transport(const struct conn *c)
{
    return c->peer.sa.sa_family == AF_INET || c->peer.sa.sa_family == AF_INET6 ? "tcp" : "local";
}

/* --- lending: what a connection holds only while it works ------------------ */

#define CONN_POOL_MAX   32      /* acts and read buffers a thread keeps for reuse */
#define CONN_STASH_MAX  1024    /* idle with this much of a command: its own copy */

/* Each worker's spares; a thread frees its own at exit (conn_pool_drain).
 * Its read buffers are counted in the stats of the worker that made them. */
static _Thread_local struct {
    struct conn_act     *acts;
    unsigned             nacts;
    char                *rbufs[CONN_POOL_MAX];
    struct stats_thread *rbuf_stats[CONN_POOL_MAX];
    unsigned             nrbufs;
} pool;

/* Owner-only level changes: read buffers allocated, free for reuse. */
static void
rbuf_count(struct stats_thread *st, int64_t bufs, int64_t free_bufs)
{
    atomic_store_explicit(&st->read_bufs,
                          atomic_load_explicit(&st->read_bufs, memory_order_relaxed) + bufs,
                          memory_order_relaxed);
    atomic_store_explicit(&st->read_bufs_free,
                          atomic_load_explicit(&st->read_bufs_free, memory_order_relaxed) +
                          free_bufs, memory_order_relaxed);
}

void
conn_pool_drain(void)
{
    while (pool.acts != NULL) {
        struct conn_act *a = pool.acts;
        pool.acts = a->next_free;
        outq_free(&a->out);
        free(a);
    }
    pool.nacts = 0;
    while (pool.nrbufs > 0) {
        pool.nrbufs--;
        rbuf_count(pool.rbuf_stats[pool.nrbufs], -1, -1);
        free(pool.rbufs[pool.nrbufs]);
    }
}

/* Lend c a read buffer, with what it stashed of a command first. */
static bool
conn_rbuf_take(struct conn *c)
{
    struct conn_act *a = c->a;

    if (a->rbuf != NULL) {
        return true;
    }
    if (pool.nrbufs > 0) {
        pool.nrbufs--;
        a->rbuf = pool.rbufs[pool.nrbufs];
        rbuf_count(pool.rbuf_stats[pool.nrbufs], 0, -1);
    } else if ((a->rbuf = malloc(CONN_RBUF_SIZE)) != NULL) {
        rbuf_count(c->stats, 1, 0);
    } else {
        STATS_ADD(c->stats, read_buf_oom, 1);
        return false;
    }
    a->rpos = a->peek_end = 0;
    a->rlen = c->nstash;
    if (c->stash != NULL) {
        memcpy(a->rbuf, c->stash, c->nstash);
        free(c->stash);
        c->stash = NULL;
        c->nstash = 0;
    }
    return true;
}

static void
conn_rbuf_give(struct conn *c)
{
    struct conn_act *a = c->a;

    if (a->rbuf == NULL) {
        return;
    }
    if (pool.nrbufs < CONN_POOL_MAX) {
        pool.rbuf_stats[pool.nrbufs] = c->stats;
        pool.rbufs[pool.nrbufs++] = a->rbuf;
        rbuf_count(c->stats, 0, 1);
    } else {
        free(a->rbuf);
        rbuf_count(c->stats, -1, 0);
    }
    a->rbuf = NULL;
    a->rpos = a->rlen = a->peek_end = 0;
}

static struct conn_act *
conn_act_take(struct conn *c)
{
    struct conn_act *a = pool.acts;

    if (c->a != NULL) {
        return c->a;
    }
    if (a != NULL) {
        pool.acts = a->next_free;
        pool.nacts--;
    } else if ((a = calloc(1, sizeof(*a))) != NULL) {
        outq_init(&a->out, dispatch_ref_release);
    } else {
        return NULL;
    }
    memset(&a->d, 0, sizeof(a->d));
    a->d.out = &a->out;
    a->d.stats = c->stats;
    a->d.out_limit = CONN_OUT_HIGH;
    a->d.out_copy_limit = CONN_OUT_COPY_HIGH;
    a->d.out_segs_limit = CONN_OUT_SEGS;
    a->d.fd = c->fd;
    a->d.flash_notify = c->flash_notify;
    a->d.flash_owner = c->flash_owner;
    a->d.flash_ring = c->flash_ring;
    a->d.flash_conn = c;
    a->d.sasl.ok = c->sasl_ok;
    a->d.close_reason = c->close_reason;
    a->rbuf = NULL;
    a->rpos = a->rlen = a->peek_end = 0;
    a->data_got = 0;
    a->read_full = false;
    c->a = a;
    return a;
}

/*
 * Wait for the socket to take more output. The act's write event is
 * assigned here, not when the act is taken: most answers go out at once,
 * and an act changes connections at every request under load. Not while
 * the event is pending (write_pending): it is then already c's.
 */
static void
conn_write_wait(struct conn *c)
{
    struct conn_act *a = c->a;

    if (c->write_pending) {
        return;
    }
    event_assign(&a->ev_write, event_get_base(&c->ev_read), c->fd, EV_WRITE | EV_PERSIST,
                 conn_on_write, c);
    event_add(&a->ev_write, NULL);
    c->write_pending = true;
}

/* c no longer needs its act (idle, or being freed): back to the pool. */
static void
conn_act_give(struct conn *c)
{
    struct conn_act *a = c->a;

    if (a == NULL) {
        return;
    }
    c->sasl_ok = a->d.sasl.ok;
    c->close_reason = a->d.close_reason;
    if (c->write_pending) {
        event_del(&a->ev_write);
        c->write_pending = false;
    }
    conn_rbuf_give(c);
    if (outq_segments(&a->out) > 0 || outq_pending(&a->out) > 0) {
        outq_free(&a->out);     /* a connection freed with answers unsent */
        outq_init(&a->out, dispatch_ref_release);
    }
    c->a = NULL;
    if (pool.nacts < CONN_POOL_MAX) {
        a->next_free = pool.acts;
        pool.acts = a;
        pool.nacts++;
    } else {
        outq_free(&a->out);
        free(a);
    }
}

/* Waiting for its next command with nothing in progress: the act can go. */
static bool
conn_idle(const struct conn *c)
{
    const struct conn_act *a = c->a;

    return c->state == CONN_CMD && a->rbuf == NULL && !c->write_pending && !c->read_paused &&
           !c->yielded && !c->tls_read_wants_write && outq_segments(&a->out) == 0 &&
           outq_pending(&a->out) == 0 && a->out.nwait == 0 && a->out.hold == OUTQ_NO_HOLD &&
           a->d.it == NULL && a->d.sasl.state == NULL && a->d.sasl.data == NULL &&
           a->d.watcher == NULL;
}

/*
 * After a turn: a connection that waits for input gives its read buffer
 * back, keeping what is left of a command (a line still arriving) in a
 * copy of its size, and gives its act back when nothing is in progress.
 * A connection that yielded or paused keeps both: it goes on where it
 * was; one whose last read filled the buffer keeps the buffer (it
 * pipelines: more is on its way, and lending it back and forth would
 * cost a syscall or an allocation per buffer) until a read does not.
 */
static void
conn_settle(struct conn *c)
{
    struct conn_act *a = c->a;

    if (a == NULL || c->yielded || c->read_paused || c->state == CONN_CLOSING) {
        return;
    }
    if (a->rbuf != NULL && !a->read_full) {
        size_t left = a->rlen - a->rpos;
        if (left > CONN_STASH_MAX) {
            return;
        }
        if (left > 0) {
            char *s = malloc(left);
            if (s == NULL) {
                return;         /* keep the buffer */
            }
            memcpy(s, a->rbuf + a->rpos, left);
            c->stash = s;
            c->nstash = (uint32_t)left;
        }
        conn_rbuf_give(c);
    }
    if (conn_idle(c)) {
        conn_act_give(c);
    }
}

struct conn *
conn_new(int fd, struct event_base *base, struct stats_thread *st,
         struct conn_list *list, conn_tls_t tls)
{
    struct conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->fd = fd;
#ifdef HAVE_TLS
    if (tls != CONN_TLS_NONE && (c->tls = tls_conn_new(fd, tls == CONN_TLS_MUTUAL)) == NULL) {
        free(c);
        return NULL;
    }
#else
    (void)tls;
#endif
    c->state = CONN_CMD;
    c->stats = st;
    c->last_cmd = clock_now();
    /* A connection closes with "error" unless it ended cleanly (memcached's
     * default close reason). */
    c->close_reason = LOGGER_CLOSE_ERROR;
    if (event_assign(&c->ev_read, base, fd, EV_READ | EV_PERSIST, conn_on_read, c) != 0 ||
        event_add(&c->ev_read, NULL) != 0) {
#ifdef HAVE_TLS
        tls_conn_free(c->tls);
#endif
        free(c);                /* the caller closes fd and uncounts it */
        return NULL;
    }
    conn_describe_peer(c);
    if (logger_wants(LOGGER_CONNEVENTS)) {
        char ip[INET6_ADDRSTRLEN];
        unsigned port = conn_peer_ip(c, ip, sizeof(ip));
        logger_conn_new(ip, port, conn_transport(c), fd);
    }
    log_debug("<%d new %s client connection", fd,
              settings.binary_auto ? "auto-negotiating" : settings.binary_only ? "binary" : "ascii");
    c->list = list;
    pthread_mutex_lock(&list->lock);
    c->next = list->head;
    if (list->head != NULL) {
        list->head->prev = c;
    }
    list->head = c;
    pthread_mutex_unlock(&list->lock);
    return c;
}

/* Free what conn_new allocated; the fd and the connection count stay. */
static void
conn_release(struct conn *c)
{
    if (c->a != NULL) {
        dispatch_abort(&c->a->d);
        if (c->a->d.watcher != NULL) {
            logger_unwatch(c->a->d.watcher);
        }
        conn_act_give(c);
    }
    if (c->ev_watch != NULL) {
        event_free(c->ev_watch);
    }
    event_del(&c->ev_read);
#ifdef HAVE_TLS
    tls_conn_free(c->tls);
#endif
    free(c->stash);
    free(c);
}

void
conn_free(struct conn *c)
{
    if (c->list != NULL) {
        pthread_mutex_lock(&c->list->lock);
        if (c->prev != NULL) {
            c->prev->next = c->next;
        } else {
            c->list->head = c->next;
        }
        if (c->next != NULL) {
            c->next->prev = c->prev;
        }
        pthread_mutex_unlock(&c->list->lock);
    }
    int fd = c->fd;
    log_debug("<%d connection closed.", fd);
    if (logger_wants(LOGGER_CONNEVENTS)) {
        char ip[INET6_ADDRSTRLEN];
        unsigned port = conn_peer_ip(c, ip, sizeof(ip));
        logger_conn_close(ip, port, conn_transport(c),
                          c->a != NULL ? c->a->d.close_reason : c->close_reason, fd);
    }
    conn_release(c);
    close(fd);
    stats_conn_close();
}

void
conn_free_all(struct conn_list *list)
{
    while (list->head != NULL) {
        conn_free(list->head);
    }
    conn_pool_drain();
}

void
conn_kick_idle(struct conn_list *list, uint32_t timeout)
{
    rel_time_t now = clock_now();
    struct conn *c = list->head, *next;

    /* Only this thread changes the list, so it is walked unlocked. */
    for (; c != NULL; c = next) {
        next = c->next;
        /* Waiting for a command, or for the rest of one, as memcached;
         * never while an answer is still being written. */
        bool waiting = c->state == CONN_CMD || c->state == CONN_MGET ||
                       c->state == CONN_SWALLOW_LINE;
        rel_time_t last = c->last_io > c->last_cmd ? c->last_io : c->last_cmd;
        if (waiting && (c->a == NULL || outq_pending(&c->a->out) == 0) && !c->read_paused &&
            now - last > timeout) {
            STATS_INCR(c->stats, idle_kicks);
            if (c->a != NULL) {
                c->a->d.close_reason = LOGGER_CLOSE_IDLE_TIMEOUT;
            }
            c->close_reason = LOGGER_CLOSE_IDLE_TIMEOUT;
            conn_free(c);
        }
    }
}

void
conn_list_stats(struct conn_list *list,
                void (*emit)(void *, const char *, const char *), void *ctx)
{
    char name[64], value[96];

    pthread_mutex_lock(&list->lock);
    for (struct conn *c = list->head; c != NULL; c = c->next) {
        snprintf(name, sizeof(name), "%d:addr", c->fd);
        conn_format_addr(&c->peer.sa, value, sizeof(value));
        emit(ctx, name, value);
        snprintf(name, sizeof(name), "%d:listen_addr", c->fd);
        conn_format_addr(&c->local.sa, value, sizeof(value));
        emit(ctx, name, value);
        snprintf(name, sizeof(name), "%d:state", c->fd);
        emit(ctx, name, state_names[c->state]);
        snprintf(name, sizeof(name), "%d:secs_since_last_cmd", c->fd);
        snprintf(value, sizeof(value), "%u", clock_now() - c->last_cmd);
        emit(ctx, name, value);
    }
    pthread_mutex_unlock(&list->lock);
}

/* --- reading ---------------------------------------------------------------- */

/*
 * Make room at the end of rbuf. It never has to grow: whatever is left
 * unconsumed is a line of at most PROTO_LINE_MAX bytes or an unfinished
 * key of a streamed get, both far smaller than the buffer.
 */
static bool
conn_rbuf_room(struct conn *c)
{
    if (!conn_rbuf_take(c)) {
        return false;
    }
    if (c->a->rpos > 0 && (c->a->rlen == CONN_RBUF_SIZE || c->a->rpos >= CONN_RBUF_SIZE / 2)) {
        memmove(c->a->rbuf, c->a->rbuf + c->a->rpos, c->a->rlen - c->a->rpos);
        c->a->rlen -= c->a->rpos;
        c->a->peek_end = c->a->peek_end > c->a->rpos ? c->a->peek_end - c->a->rpos : 0;
        c->a->rpos = 0;
    }
    return c->a->rlen < CONN_RBUF_SIZE;
}

/* read(), or TLS's: bytes, 0 at the peer's close, -1 (errno EAGAIN: none yet). */
static ssize_t
conn_sock_read(struct conn *c, void *dst, size_t cap)
{
#ifdef HAVE_TLS
    if (c->tls != NULL) {
        bool want_write = false;
        ssize_t n = tls_read(c->tls, dst, cap, &want_write);
        if (n < 0 && errno == EAGAIN && want_write && !c->tls_read_wants_write) {
            /* the handshake must send before it can read on */
            c->tls_read_wants_write = true;
            conn_write_wait(c);
        }
        return n;
    }
#endif
    return read(c->fd, dst, cap);
}

#ifdef HAVE_TLS
static ssize_t
conn_tls_writev(void *ctx, const struct iovec *iov, int n)
{
    struct conn *c = ctx;
    bool want_read = false;

    return tls_writev(c->tls, iov, n, &want_read);
}
#endif

/* The output queue to the socket, through TLS for a TLS client. */
static ssize_t
conn_sock_write(struct conn *c)
{
#ifdef HAVE_TLS
    if (c->tls != NULL) {
        return outq_write_with(&c->a->out, conn_tls_writev, c);
    }
#endif
    return outq_write(&c->a->out, c->fd);
}

/* One read(). Returns bytes read, 0 if none are ready, -1 to close. */
static ssize_t
conn_read(struct conn *c)
{
    ssize_t n;
    char *dst;
    size_t cap;
    bool direct = c->state == CONN_DATA && c->a->rpos == c->a->rlen &&
                  c->a->d.ndata - c->a->data_got >= DIRECT_READ_MIN;

    c->a->read_full = false;
    if (direct) {
        /* Large value: straight into the item, no intermediate copy. */
        dst = c->a->d.data + c->a->data_got;
        cap = c->a->d.ndata - c->a->data_got;
    } else {
        if (!conn_rbuf_room(c)) {
            return -1;
        }
        dst = c->a->rbuf + c->a->rlen;
        cap = CONN_RBUF_SIZE - c->a->rlen;
    }
    n = conn_sock_read(c, dst, cap);
    if (n == 0) {
        c->a->d.close_reason = LOGGER_CLOSE_NORMAL;   /* the peer hung up */
        return -1;
    }
    if (n < 0) {
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    }
    STATS_ADD(c->stats, bytes_read, (uint64_t)n);
    if (!c->got_input) {
        c->got_input = true;
        /* The first byte picks the protocol, as in memcached (-B auto);
         * -B ascii reads a 0x80 as text, -B binary everything as binary. */
        c->binary = settings.binary_only ||
                    ((unsigned char)dst[0] == PROTO_BINARY_MAGIC && settings.binary_auto);
        if (settings.binary_auto) {
            log_debug("%d: Client using the %s protocol", c->fd, c->binary ? "binary" : "ascii");
        }
    }
    if (direct) {
        c->a->data_got += (uint32_t)n;
    } else {
        c->a->rlen += (size_t)n;
        c->a->read_full = (size_t)n == cap;
    }
    return n;
}

/* --- processing ------------------------------------------------------------------ */

#define WATCH_TICK_US   10000           /* how often watch lines are moved */
#define WATCH_OUT_MAX   CONN_OUT_COPY_HIGH  /* a watcher's queued output bound */

/* Move pending log lines to the output, within the watcher's bound. */
static void
conn_on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    char buf[16384];

    (void)fd;
    (void)what;
    if (outq_copied(&c->a->out) < WATCH_OUT_MAX) {
        size_t n = logger_take(c->a->d.watcher, buf, sizeof(buf));
        if (n > 0) {
            outq_add(&c->a->out, buf, n);
        }
    }
    conn_flush(c);
}

static void
conn_watch_start(struct conn *c)
{
    struct timeval tick = { 0, WATCH_TICK_US };

    c->state = CONN_WATCH;
    c->ev_watch = event_new(event_get_base(&c->ev_read), -1, EV_PERSIST,
                            conn_on_watch, c);
    if (c->ev_watch == NULL || event_add(c->ev_watch, &tick) != 0) {
        c->state = CONN_CLOSING;
    }
}

static void
conn_apply(struct conn *c, dispatch_result_t r)
{
    switch (r) {
    case DISPATCH_DONE:
        break;
    case DISPATCH_NEED_DATA:
        c->state = CONN_DATA;
        c->a->data_got = 0;
        break;
    case DISPATCH_SWALLOW:
        c->state = c->a->d.swallow > 0 ? CONN_SWALLOW : CONN_CMD;
        break;
    case DISPATCH_CLOSE:
        c->state = CONN_CLOSING;
        break;
    case DISPATCH_MORE_KEYS:
        break;                  /* conn_mget_resume() handles it */
    case DISPATCH_MORE_DUMP:
        c->state = CONN_DUMP;
        break;
    case DISPATCH_WATCH:
        conn_watch_start(c);
        break;
    }
}

/*
 * Like memcached, which reads a whole line before it answers, the answer
 * to a line that is still arriving (a streamed multi-get, or the rest of a
 * line being dropped) is held back from `mark` on until the line ends: a
 * bad key later in the line can then still replace it by the error line
 * alone. Earlier answers go out meanwhile; and when the held answer
 * reaches the output bound, it goes out too (conn_process).
 */
static void
conn_hold(struct conn *c, uint64_t mark)
{
    outq_hold(&c->a->out, mark);
}

/* A multi-get goes on: its next key is where dispatch stopped. */
static void
conn_mget_resume(struct conn *c)
{
    c->a->rpos = (size_t)(c->a->d.mget.resume - c->a->rbuf);
    c->state = CONN_MGET;
}

/* After a line's answer: drop what is left of it, or let the answer go. */
static void
conn_line_done(struct conn *c, const struct proto_req *req, uint64_t mark)
{
    if (req->swallow_line && c->state == CONN_CMD) {
        c->state = CONN_SWALLOW_LINE;
        conn_hold(c, mark);
    } else {
        conn_hold(c, OUTQ_NO_HOLD);
    }
}

/* Bytes of a -Y data block ("user pass\r\n") taken from the read buffer;
 * a larger one is answered as memcached 1.6.45 answers one past its 16 KB
 * (the line is consumed, the block is not: it is read as lines). */
#define CONN_AUTH_BLOCK_MAX 4096

/*
 * -Y: until it authenticates, a connection may send only memcached's auth
 * exchange, a "set" whose data block is "user pass"; anything else is
 * answered "CLIENT_ERROR unauthenticated". false when more input is needed.
 */
static bool
conn_auth_step(struct conn *c)
{
    const char *buf = c->a->rbuf + c->a->rpos;
    size_t avail = c->a->rlen - c->a->rpos, line = 0;
    uint32_t bytes = 0;

    switch (proto_parse_auth(buf, avail, &bytes, &line)) {
    case PROTO_AGAIN:
        return false;
    case PROTO_CLOSE:
        c->state = CONN_CLOSING;
        return false;
    case PROTO_ERROR:
    case PROTO_PART:
        c->a->rpos += line;
        dispatch_reply_line(&c->a->d, "CLIENT_ERROR unauthenticated");
        return true;
    case PROTO_OK:
        break;
    }
    if ((uint64_t)bytes + 2 > CONN_AUTH_BLOCK_MAX) {
        c->a->rpos += line;
        dispatch_reply_line(&c->a->d, "CLIENT_ERROR auth token too long");
        return true;
    }
    if (avail - line < (size_t)bytes + 2) {
        return false;               /* the rest of the block is on its way */
    }
    struct proto_auth_cred cred;
    const char *reply;
    switch (proto_auth_token(buf + line, (size_t)bytes + 2, &cred)) {
    case PROTO_AUTH_BAD_TERMINATION:
        reply = "CLIENT_ERROR bad command line termination";
        break;
    case PROTO_AUTH_BAD_FORMAT:
        reply = "CLIENT_ERROR bad authentication token format";
        break;
    default:
        c->authenticated = auth_check(cred.user, cred.nuser, cred.pass, cred.npass);
        STATS_INCR(c->stats, auth_cmds);
        if (!c->authenticated) {
            STATS_INCR(c->stats, auth_errors);
        }
        reply = c->authenticated ? "STORED" : "CLIENT_ERROR authentication failure";
        break;
    }
    c->a->rpos += line + bytes + 2;
    dispatch_reply_line(&c->a->d, reply);
    return true;
}

/* -vv: the command line about to be handled, as memcached logs it. */
static void
conn_log_line(struct conn *c)
{
    const char *p = c->a->rbuf + c->a->rpos;
    size_t avail = c->a->rlen - c->a->rpos;
    const char *nl = memchr(p, '\n', avail);
    size_t n = nl != NULL ? (size_t)(nl - p) : avail;

    if (n > 0 && p[n - 1] == '\r') {
        n--;
    }
    log_debug("<%d %.*s", c->fd, (int)(n < 1000 ? n : 1000), p);
}

/* Handle one request line; false when more input is needed. */
static bool
conn_parse_one(struct conn *c)
{
    if (!c->authenticated && settings.auth_file != NULL) {
        c->last_cmd = clock_now();
        return conn_auth_step(c);
    }
    struct proto_req req;
    size_t consumed = 0;
    dispatch_result_t r;
    uint64_t mark = outq_mark(&c->a->out);
    proto_status_t st = c->binary ?
        proto_bin_parse(c->a->rbuf + c->a->rpos, c->a->rlen - c->a->rpos, &req, &consumed) :
        proto_parse(c->a->rbuf + c->a->rpos, c->a->rlen - c->a->rpos, &req, &consumed);

    if (!c->binary && st != PROTO_AGAIN && st != PROTO_CLOSE && log_enabled(LOG_LEVEL_DEBUG)) {
        conn_log_line(c);
    }
    switch (st) {
    case PROTO_AGAIN:
        return false;
    case PROTO_CLOSE:
        c->state = CONN_CLOSING;
        return false;
    case PROTO_ERROR:
        c->a->rpos += consumed;
        conn_apply(c, dispatch_error(&c->a->d, &req));
        conn_line_done(c, &req, mark);
        return true;
    case PROTO_PART:
        c->last_cmd = clock_now();
        conn_hold(c, mark);
        dispatch_get_begin(&c->a->d, &req);
        conn_mget_resume(c);
        return true;
    case PROTO_OK:
        c->a->rpos += consumed;
        c->last_cmd = clock_now();
        r = dispatch_request(&c->a->d, &req);
        if (r == DISPATCH_MORE_KEYS) {
            conn_mget_resume(c);
            return true;
        }
        conn_apply(c, r);
        conn_line_done(c, &req, mark);
        return true;
    }
    return false;
}

/* The next keys of a multi-get in progress; false when more input is needed. */
static bool
conn_mget_step(struct conn *c)
{
    struct proto_req req;
    size_t consumed = 0;
    proto_status_t st = proto_parse_keys(c->a->rbuf + c->a->rpos, c->a->rlen - c->a->rpos,
                                         &req, &consumed);

    switch (st) {
    case PROTO_AGAIN:
    case PROTO_CLOSE:
        return false;
    case PROTO_ERROR:
        c->a->rpos += consumed;
        dispatch_get_finish(&c->a->d, req.error);
        c->state = CONN_CMD;
        conn_line_done(c, &req, c->a->out.hold);
        return true;
    case PROTO_PART:
    case PROTO_OK:
        if (dispatch_get_keys(&c->a->d, &req) == DISPATCH_MORE_KEYS) {
            conn_mget_resume(c);
            return true;
        }
        c->a->rpos += consumed;
        if (st == PROTO_OK) {
            dispatch_get_finish(&c->a->d, NULL);
            c->state = CONN_CMD;
            conn_line_done(c, &req, c->a->out.hold);
        }
        return true;
    }
    return false;
}

/* Drop input through the end of the current line. */
static bool
conn_swallow_line(struct conn *c)
{
    const char *p = c->a->rbuf + c->a->rpos;
    const char *nl = memchr(p, '\n', c->a->rlen - c->a->rpos);

    if (nl == NULL) {
        c->a->rpos = c->a->rlen;
        return false;
    }
    c->a->rpos = (size_t)(nl + 1 - c->a->rbuf);
    c->state = CONN_CMD;
    conn_hold(c, OUTQ_NO_HOLD);
    return true;
}

/* Move buffered bytes into the pending item or drop them (swallow). */
static bool
conn_feed_block(struct conn *c)
{
    size_t avail = c->a->rlen - c->a->rpos;

    if (c->state == CONN_DATA) {
        for (;;) {
            size_t need = c->a->d.ndata - c->a->data_got;
            size_t n = avail < need ? avail : need;
            memcpy(c->a->d.data + c->a->data_got, c->a->rbuf + c->a->rpos, n);
            c->a->rpos += n;
            avail -= n;
            c->a->data_got += (uint32_t)n;
            if (c->a->data_got < c->a->d.ndata) {
                return false;
            }
            if (!dispatch_data_next(&c->a->d)) {
                break;
            }
            c->a->data_got = 0;        /* the next chunk of a chained item */
        }
        dispatch_data_done(&c->a->d);
        c->state = CONN_CMD;
        return true;
    }
    size_t n = avail < c->a->d.swallow ? avail : (size_t)c->a->d.swallow;
    c->a->rpos += n;
    c->a->d.swallow -= n;
    if (c->a->d.swallow > 0) {
        return false;
    }
    c->state = CONN_CMD;
    return true;
}

/* Handle what is buffered; *handled counts requests of this event, at
 * most -R of them (then the connection yields). */
static void
conn_process_counted(struct conn *c, long *counted)
{
    long handled = *counted;

    while (c->state != CONN_CLOSING) {
        if (dispatch_out_full(&c->a->d)) {
            /* Slow reader: stop taking input until output drains. */
            event_del(&c->ev_read);
            c->read_paused = true;
            conn_hold(c, OUTQ_NO_HOLD);
            break;
        }
        if (c->state == CONN_DATA && c->a->data_got == c->a->d.ndata) {
            if (dispatch_data_next(&c->a->d)) {
                c->a->data_got = 0;            /* a chained item's next chunk */
                continue;
            }
            dispatch_data_done(&c->a->d);      /* filled by a direct read */
            c->state = CONN_CMD;
            continue;
        }
        if (c->state == CONN_WATCH) {
            c->a->rpos = c->a->rlen;      /* a watcher's input is not read */
            break;
        }
        if (c->state == CONN_DUMP) {
            /* Input waits while a dump is written, like any answer. */
            if (handled++ >= settings.reqs_per_event) {
                c->yielded = true;
                STATS_INCR(c->stats, conn_yields);
                event_active(&c->ev_read, EV_READ, 0);
                break;
            }
            if (admin_dump_more(&c->a->d) == DISPATCH_DONE) {
                c->state = CONN_CMD;
            }
            continue;
        }
        if (c->a->rpos == c->a->rlen) {
            break;
        }
        bool more = false;
        switch (c->state) {
        case CONN_DATA:
        case CONN_SWALLOW:
            more = conn_feed_block(c);
            break;
        case CONN_SWALLOW_LINE:
            more = conn_swallow_line(c);
            break;
        case CONN_DUMP:
        case CONN_WATCH:
            break;
        case CONN_CMD:
        case CONN_MGET:
            if (handled >= settings.reqs_per_event) {
                c->yielded = true;
                STATS_INCR(c->stats, conn_yields);
                event_active(&c->ev_read, EV_READ, 0);
                break;
            }
            if (c->state == CONN_CMD && c->a->rpos >= c->a->peek_end &&
                (c->authenticated || settings.auth_file == NULL) &&
                (c->a->d.sasl.ok || !settings.sasl)) {
                /* pipelined one-key reads (of a client allowed to read):
                 * warm their lookups together */
                c->a->peek_end = c->a->rpos + dispatch_prefetch(c->a->rbuf + c->a->rpos,
                                                          c->a->rlen - c->a->rpos, c->binary);
            }
            more = c->state == CONN_CMD ? conn_parse_one(c) : conn_mget_step(c);
            handled++;
            break;
        case CONN_CLOSING:
            break;
        }
        if (!more) {
            break;
        }
    }
    if (c->a->rpos == c->a->rlen) {
        c->a->rpos = c->a->rlen = c->a->peek_end = 0;
    }
    *counted = handled;
}

static void
conn_process(struct conn *c)
{
    long handled = 0;

    conn_process_counted(c, &handled);
}

/* --- writing ------------------------------------------------------------------------ */

/*
 * The output bounds input pauses at: the _SLOW ones while the socket holds
 * back part of what was sent (the client reads slowly or not at all), so
 * such a client holds little; the large ones while it keeps up, so a
 * batch of answers goes in one write.
 */
static void
conn_out_bounds(struct conn *c, bool slow)
{
    struct dispatch_ctx *d = &c->a->d;

    d->out_limit = slow ? CONN_OUT_SLOW : CONN_OUT_HIGH;
    d->out_copy_limit = slow ? CONN_OUT_COPY_SLOW : CONN_OUT_COPY_HIGH;
    d->out_segs_limit = slow ? CONN_OUT_SEGS_SLOW : CONN_OUT_SEGS;
}

/* Write what we can; returns false if the connection was freed. */
static bool
conn_flush(struct conn *c)
{
    if (c->a == NULL) {
        if (c->state == CONN_CLOSING) {
            conn_free(c);
            return false;
        }
        return true;            /* nothing was in progress */
    }
    for (;;) {
        if (outq_sendable(&c->a->out) > 0) {
            ssize_t n = conn_sock_write(c);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                conn_free(c);
                return false;
            }
            if (n > 0) {
                STATS_ADD(c->stats, bytes_written, (uint64_t)n);
                c->last_io = clock_now();
            }
        }
        conn_out_bounds(c, outq_sendable(&c->a->out) > 0);
        if (outq_sendable(&c->a->out) > 0) {
            if (c->state == CONN_CLOSING) {
                conn_free(c);       /* no waiting on a peer we are dropping */
                return false;
            }
            conn_write_wait(c);
            return true;
        }
        /* The common case (all written at once) costs no event call. A TLS
         * handshake waiting to write keeps its write event. */
        if (c->write_pending && !c->tls_read_wants_write) {
            event_del(&c->a->ev_write);
            c->write_pending = false;
        }
        if (c->state == CONN_CLOSING) {
            if (c->a->out.nwait == 0) {
                conn_free(c);
                return false;
            }
            /* Answers still wait for flash reads: go once they are out
             * (conn_kick), taking no more input (an EOF would fire on
             * every loop turn meanwhile). */
            if (!c->read_paused) {
                event_del(&c->ev_read);
                c->read_paused = true;
            }
            return true;
        }
        if (!c->read_paused) {
            return true;
        }
        /* Nothing can be sent before an answer that waits for flash: input
         * stays paused while the queue is over its bound, until the read
         * is done (conn_kick), or this would resume and pause for ever. */
        if (c->a->out.nwait > 0 && dispatch_out_full(&c->a->d)) {
            return true;
        }
        /* Drained: resume input, and handle what is already buffered. */
        c->read_paused = false;
        event_add(&c->ev_read, NULL);
#ifdef HAVE_TLS
        /* ... including what OpenSSL decrypted: no socket event says so */
        if (c->tls != NULL && tls_pending(c->tls)) {
            event_active(&c->ev_read, EV_READ, 0);
        }
#endif
        conn_process(c);
    }
}

static bool                     turn_timing;
static _Thread_local uint64_t   turn_start_ns;

void
conn_turn_timing(bool on)
{
    turn_timing = on;
}

uint64_t
conn_turn_take(void)
{
    uint64_t t = turn_start_ns;

    turn_start_ns = 0;
    return t;
}

/*
 * The read filled the buffer and every whole request in it was handled
 * (no yield, no pause): a pipelining client has more waiting. One more read
 * before the answers go, so that one write carries two buffers' worth of
 * answers, as it would with a buffer twice the size (memcached's 16 KB;
 * this one is half that so a client that never reads costs less).
 */
static bool
conn_read_again(const struct conn *c)
{
    const struct conn_act *a = c->a;

    return a->read_full && a->rlen - a->rpos <= CONN_RBUF_SIZE / 2 && !c->yielded &&
           !c->read_paused &&
           (c->state == CONN_CMD || c->state == CONN_DATA || c->state == CONN_MGET);
}

static void
conn_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (turn_timing && turn_start_ns == 0) {
        turn_start_ns = clock_mono_ns();
    }
    if (c->read_paused) {
        return;
    }
    if (conn_act_take(c) == NULL) {
        c->state = CONN_CLOSING;        /* out of memory: drop the client */
        conn_free(c);
        return;
    }
    /* A dump in progress takes no input: what follows it waits in the
     * kernel, not in a read buffer that could fill up meanwhile. */
    if (!c->yielded && c->state != CONN_DUMP && conn_read(c) < 0) {
        c->state = CONN_CLOSING;
    } else {
        long handled = 0;
        c->yielded = false;
        conn_process_counted(c, &handled);
        if (conn_read_again(c) && handled < settings.reqs_per_event) {
            if (conn_read(c) < 0) {
                c->state = CONN_CLOSING;
            } else {
                conn_process_counted(c, &handled);  /* -R counts both reads */
            }
        }
    }
    if (!conn_flush(c)) {
        return;                 /* freed */
    }
#ifdef HAVE_TLS
    /* Bytes OpenSSL decrypted but we did not take yet raise no event. */
    if (c->tls != NULL && !c->read_paused && c->state != CONN_CLOSING && tls_pending(c->tls)) {
        event_active(&c->ev_read, EV_READ, 0);
    }
#endif
    conn_settle(c);
}

void
conn_set_flash(struct conn *c, dispatch_flash_notify_fn fn, void *owner,
               struct flash_ring *ring)
{
    c->flash_notify = fn;
    c->flash_owner = owner;
    c->flash_ring = ring;
}

void
conn_kick(struct conn *c)
{
    if (conn_flush(c)) {
        conn_settle(c);
    }
}

static void
conn_on_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    if (c->tls_read_wants_write) {
        c->tls_read_wants_write = false;
        conn_on_read(fd, EV_READ, c);   /* the handshake can go on */
        return;
    }
    (void)what;
    if (conn_flush(c)) {
        conn_settle(c);
    }
}
