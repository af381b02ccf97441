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

struct conn {
    int                  fd;
    conn_state_t         state;
    struct event        *ev_read;
    struct event        *ev_write;
    struct event        *ev_watch;  /* CONN_WATCH: drains the watcher */
    struct stats_thread *stats;
    struct conn_list    *list;
    struct conn         *prev, *next;
    char                *rbuf;
    size_t               rsize;
    size_t               rpos;      /* first unparsed byte */
    size_t               peek_end;  /* requests before it were prefetched */
    size_t               rlen;      /* end of buffered bytes */
    uint32_t             data_got;  /* bytes of the data block so far */
    bool                 read_paused;
    bool                 write_pending; /* ev_write is added */
    bool                 yielded;
    bool                 got_input; /* the first byte has been looked at */
    bool                 binary;    /* speaks the binary protocol */
    bool                 authenticated; /* -Y: passed the auth exchange */
    struct tls_conn     *tls;       /* -Z: a TLS listener's client, else NULL */
    bool                 tls_read_wants_write; /* SSL_read must wait for POLLOUT */
    rel_time_t           last_cmd;
    rel_time_t           last_io;   /* last command or bytes written */
    char                 peer[64];
    char                 local[64]; /* the listener's address */
    char                 rip[INET6_ADDRSTRLEN]; /* connevents: peer address */
    unsigned             rport;
    bool                 unix_socket;
    struct outq          out;
    struct dispatch_ctx  d;
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

static void
conn_describe_peer(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    memset(&ss, 0, sizeof(ss));
    if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0) {
        ss.ss_family = AF_UNSPEC;
    }
    conn_format_addr((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    /* connevents lines as memcached writes them: bare address and port,
     * "unix" and 0 for a UNIX socket. */
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sin->sin_addr, c->rip, sizeof(c->rip));
        c->rport = ntohs(sin->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, c->rip, sizeof(c->rip));
        c->rport = ntohs(sin6->sin6_port);
    } else {
        snprintf(c->rip, sizeof(c->rip), "unix");
        c->unix_socket = true;
    }
    len = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (getsockname(c->fd, (struct sockaddr *)&ss, &len) != 0) {
        ss.ss_family = AF_UNSPEC;
    }
    conn_format_addr((struct sockaddr *)&ss, c->local, sizeof(c->local));
}

struct conn *
conn_new(int fd, struct event_base *base, struct stats_thread *st,
         struct conn_list *list, bool tls)
{
    struct conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->fd = fd;
#ifdef HAVE_TLS
    if (tls && (c->tls = tls_conn_new(fd)) == NULL) {
        free(c);
        return NULL;
    }
#else
    (void)tls;
#endif
    c->state = CONN_CMD;
    c->stats = st;
    c->rsize = CONN_RBUF_INIT;
    c->rbuf = malloc(c->rsize);
    outq_init(&c->out, dispatch_ref_release);
    c->d.out = &c->out;
    c->d.stats = st;
    c->d.out_limit = CONN_OUT_HIGH;
    c->d.out_copy_limit = CONN_OUT_COPY_HIGH;
    c->d.out_segs_limit = CONN_OUT_SEGS;
    c->d.fd = fd;
    c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, conn_on_read, c);
    c->ev_write = event_new(base, fd, EV_WRITE | EV_PERSIST, conn_on_write, c);
    c->last_cmd = clock_now();
    if (c->rbuf == NULL || c->ev_read == NULL ||
        c->ev_write == NULL || event_add(c->ev_read, NULL) != 0) {
        conn_release(c);        /* the caller closes fd and uncounts it */
        return NULL;
    }
    conn_describe_peer(c);
    /* A connection closes with "error" unless it ended cleanly (memcached's
     * default close reason). */
    c->d.close_reason = LOGGER_CLOSE_ERROR;
    if (logger_wants(LOGGER_CONNEVENTS)) {
        logger_conn_new(c->rip, c->rport, c->unix_socket ? "local" : "tcp", fd);
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
    dispatch_abort(&c->d);
    if (c->ev_watch != NULL) {
        event_free(c->ev_watch);
    }
    if (c->d.watcher != NULL) {
        logger_unwatch(c->d.watcher);
    }
    if (c->ev_read != NULL) {
        event_free(c->ev_read);
    }
    if (c->ev_write != NULL) {
        event_free(c->ev_write);
    }
    outq_free(&c->out);         /* drops value references */
#ifdef HAVE_TLS
    tls_conn_free(c->tls);
#endif
    free(c->rbuf);
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
        logger_conn_close(c->rip, c->rport, c->unix_socket ? "local" : "tcp",
                          c->d.close_reason, fd);
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
        if (waiting && outq_pending(&c->out) == 0 && !c->read_paused &&
            now - last > timeout) {
            STATS_INCR(c->stats, idle_kicks);
            c->d.close_reason = LOGGER_CLOSE_IDLE_TIMEOUT;
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
        emit(ctx, name, c->peer);
        snprintf(name, sizeof(name), "%d:listen_addr", c->fd);
        emit(ctx, name, c->local);
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
    if (c->rpos > 0 && (c->rlen == c->rsize || c->rpos >= c->rsize / 2)) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->peek_end = c->peek_end > c->rpos ? c->peek_end - c->rpos : 0;
        c->rpos = 0;
    }
    return c->rlen < c->rsize;
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
            if (!c->write_pending) {
                event_add(c->ev_write, NULL);
                c->write_pending = true;
            }
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
        return outq_write_with(&c->out, conn_tls_writev, c);
    }
#endif
    return outq_write(&c->out, c->fd);
}

/* One read(). Returns bytes read, 0 if none are ready, -1 to close. */
static ssize_t
conn_read(struct conn *c)
{
    ssize_t n;
    char *dst;
    size_t cap;
    bool direct = c->state == CONN_DATA && c->rpos == c->rlen &&
                  c->d.ndata - c->data_got >= DIRECT_READ_MIN;

    if (direct) {
        /* Large value: straight into the item, no intermediate copy. */
        dst = c->d.data + c->data_got;
        cap = c->d.ndata - c->data_got;
    } else {
        if (!conn_rbuf_room(c)) {
            return -1;
        }
        dst = c->rbuf + c->rlen;
        cap = c->rsize - c->rlen;
    }
    n = conn_sock_read(c, dst, cap);
    if (n == 0) {
        c->d.close_reason = LOGGER_CLOSE_NORMAL;   /* the peer hung up */
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
        c->data_got += (uint32_t)n;
    } else {
        c->rlen += (size_t)n;
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
    if (outq_copied(&c->out) < WATCH_OUT_MAX) {
        size_t n = logger_take(c->d.watcher, buf, sizeof(buf));
        if (n > 0) {
            outq_add(&c->out, buf, n);
        }
    }
    conn_flush(c);
}

static void
conn_watch_start(struct conn *c)
{
    struct timeval tick = { 0, WATCH_TICK_US };

    c->state = CONN_WATCH;
    c->ev_watch = event_new(event_get_base(c->ev_read), -1, EV_PERSIST,
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
        c->data_got = 0;
        break;
    case DISPATCH_SWALLOW:
        c->state = c->d.swallow > 0 ? CONN_SWALLOW : CONN_CMD;
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
    outq_hold(&c->out, mark);
}

/* A multi-get goes on: its next key is where dispatch stopped. */
static void
conn_mget_resume(struct conn *c)
{
    c->rpos = (size_t)(c->d.mget.resume - c->rbuf);
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
 * a larger one is junk and closes the connection. */
#define CONN_AUTH_BLOCK_MAX 4096

/*
 * -Y: until it authenticates, a connection may send only memcached's auth
 * exchange, a "set" whose data block is "user pass"; anything else is
 * answered "CLIENT_ERROR unauthenticated". false when more input is needed.
 */
static bool
conn_auth_step(struct conn *c)
{
    const char *buf = c->rbuf + c->rpos;
    size_t avail = c->rlen - c->rpos, line = 0;
    uint32_t bytes = 0;

    switch (proto_parse_auth(buf, avail, &bytes, &line)) {
    case PROTO_AGAIN:
        return false;
    case PROTO_CLOSE:
        c->state = CONN_CLOSING;
        return false;
    case PROTO_ERROR:
    case PROTO_PART:
        c->rpos += line;
        dispatch_reply_line(&c->d, "CLIENT_ERROR unauthenticated");
        return true;
    case PROTO_OK:
        break;
    }
    if ((uint64_t)bytes + 2 > CONN_AUTH_BLOCK_MAX) {
        c->state = CONN_CLOSING;
        return false;
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
    c->rpos += line + bytes + 2;
    dispatch_reply_line(&c->d, reply);
    return true;
}

/* -vv: the command line about to be handled, as memcached logs it. */
static void
conn_log_line(struct conn *c)
{
    const char *p = c->rbuf + c->rpos;
    size_t avail = c->rlen - c->rpos;
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
    uint64_t mark = outq_mark(&c->out);
    proto_status_t st = c->binary ?
        proto_bin_parse(c->rbuf + c->rpos, c->rlen - c->rpos, &req, &consumed) :
        proto_parse(c->rbuf + c->rpos, c->rlen - c->rpos, &req, &consumed);

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
        c->rpos += consumed;
        conn_apply(c, dispatch_error(&c->d, &req));
        conn_line_done(c, &req, mark);
        return true;
    case PROTO_PART:
        c->last_cmd = clock_now();
        conn_hold(c, mark);
        dispatch_get_begin(&c->d, &req);
        conn_mget_resume(c);
        return true;
    case PROTO_OK:
        c->rpos += consumed;
        c->last_cmd = clock_now();
        r = dispatch_request(&c->d, &req);
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
    proto_status_t st = proto_parse_keys(c->rbuf + c->rpos, c->rlen - c->rpos,
                                         &req, &consumed);

    switch (st) {
    case PROTO_AGAIN:
    case PROTO_CLOSE:
        return false;
    case PROTO_ERROR:
        c->rpos += consumed;
        dispatch_get_finish(&c->d, req.error);
        c->state = CONN_CMD;
        conn_line_done(c, &req, c->out.hold);
        return true;
    case PROTO_PART:
    case PROTO_OK:
        if (dispatch_get_keys(&c->d, &req) == DISPATCH_MORE_KEYS) {
            conn_mget_resume(c);
            return true;
        }
        c->rpos += consumed;
        if (st == PROTO_OK) {
            dispatch_get_finish(&c->d, NULL);
            c->state = CONN_CMD;
            conn_line_done(c, &req, c->out.hold);
        }
        return true;
    }
    return false;
}

/* Drop input through the end of the current line. */
static bool
conn_swallow_line(struct conn *c)
{
    const char *p = c->rbuf + c->rpos;
    const char *nl = memchr(p, '\n', c->rlen - c->rpos);

    if (nl == NULL) {
        c->rpos = c->rlen;
        return false;
    }
    c->rpos = (size_t)(nl + 1 - c->rbuf);
    c->state = CONN_CMD;
    conn_hold(c, OUTQ_NO_HOLD);
    return true;
}

/* Move buffered bytes into the pending item or drop them (swallow). */
static bool
conn_feed_block(struct conn *c)
{
    size_t avail = c->rlen - c->rpos;

    if (c->state == CONN_DATA) {
        for (;;) {
            size_t need = c->d.ndata - c->data_got;
            size_t n = avail < need ? avail : need;
            memcpy(c->d.data + c->data_got, c->rbuf + c->rpos, n);
            c->rpos += n;
            avail -= n;
            c->data_got += (uint32_t)n;
            if (c->data_got < c->d.ndata) {
                return false;
            }
            if (!dispatch_data_next(&c->d)) {
                break;
            }
            c->data_got = 0;        /* the next chunk of a chained item */
        }
        dispatch_data_done(&c->d);
        c->state = CONN_CMD;
        return true;
    }
    size_t n = avail < c->d.swallow ? avail : (size_t)c->d.swallow;
    c->rpos += n;
    c->d.swallow -= n;
    if (c->d.swallow > 0) {
        return false;
    }
    c->state = CONN_CMD;
    return true;
}

static void
conn_process(struct conn *c)
{
    long handled = 0;

    while (c->state != CONN_CLOSING) {
        if (dispatch_out_full(&c->d)) {
            /* Slow reader: stop taking input until output drains. */
            event_del(c->ev_read);
            c->read_paused = true;
            conn_hold(c, OUTQ_NO_HOLD);
            break;
        }
        if (c->state == CONN_DATA && c->data_got == c->d.ndata) {
            if (dispatch_data_next(&c->d)) {
                c->data_got = 0;            /* a chained item's next chunk */
                continue;
            }
            dispatch_data_done(&c->d);      /* filled by a direct read */
            c->state = CONN_CMD;
            continue;
        }
        if (c->state == CONN_WATCH) {
            c->rpos = c->rlen;      /* a watcher's input is not read */
            break;
        }
        if (c->state == CONN_DUMP) {
            /* Input waits while a dump is written, like any answer. */
            if (handled++ >= settings.reqs_per_event) {
                c->yielded = true;
                STATS_INCR(c->stats, conn_yields);
                event_active(c->ev_read, EV_READ, 0);
                break;
            }
            if (dispatch_dump_more(&c->d) == DISPATCH_DONE) {
                c->state = CONN_CMD;
            }
            continue;
        }
        if (c->rpos == c->rlen) {
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
                event_active(c->ev_read, EV_READ, 0);
                break;
            }
            if (c->state == CONN_CMD && c->rpos >= c->peek_end &&
                (c->authenticated || settings.auth_file == NULL) &&
                (c->d.sasl.ok || !settings.sasl)) {
                /* pipelined one-key reads (of a client allowed to read):
                 * warm their lookups together */
                c->peek_end = c->rpos + dispatch_prefetch(c->rbuf + c->rpos,
                                                          c->rlen - c->rpos, c->binary);
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
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = c->peek_end = 0;
    }
}

/* --- writing ------------------------------------------------------------------------ */

/* Write what we can; returns false if the connection was freed. */
static bool
conn_flush(struct conn *c)
{
    for (;;) {
        if (outq_sendable(&c->out) > 0) {
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
        if (outq_sendable(&c->out) > 0) {
            if (c->state == CONN_CLOSING) {
                conn_free(c);       /* no waiting on a peer we are dropping */
                return false;
            }
            if (!c->write_pending) {
                event_add(c->ev_write, NULL);
                c->write_pending = true;
            }
            return true;
        }
        /* The common case (all written at once) costs no event call. A TLS
         * handshake waiting to write keeps its write event. */
        if (c->write_pending && !c->tls_read_wants_write) {
            event_del(c->ev_write);
            c->write_pending = false;
        }
        if (c->state == CONN_CLOSING) {
            if (c->out.nwait == 0) {
                conn_free(c);
                return false;
            }
            /* Answers still wait for flash reads: go once they are out
             * (conn_kick), taking no more input (an EOF would fire on
             * every loop turn meanwhile). */
            if (!c->read_paused) {
                event_del(c->ev_read);
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
        if (c->out.nwait > 0 && dispatch_out_full(&c->d)) {
            return true;
        }
        /* Drained: resume input, and handle what is already buffered. */
        c->read_paused = false;
        event_add(c->ev_read, NULL);
#ifdef HAVE_TLS
        /* ... including what OpenSSL decrypted: no socket event says so */
        if (c->tls != NULL && tls_pending(c->tls)) {
            event_active(c->ev_read, EV_READ, 0);
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
    /* A dump in progress takes no input: what follows it waits in the
     * kernel, not in a read buffer that could fill up meanwhile. */
    if (!c->yielded && c->state != CONN_DUMP && conn_read(c) < 0) {
        c->state = CONN_CLOSING;
    } else {
        c->yielded = false;
        conn_process(c);
    }
    if (!conn_flush(c)) {
        return;                 /* freed */
    }
#ifdef HAVE_TLS
    /* Bytes OpenSSL decrypted but we did not take yet raise no event. */
    if (c->tls != NULL && !c->read_paused && c->state != CONN_CLOSING && tls_pending(c->tls)) {
        event_active(c->ev_read, EV_READ, 0);
    }
#endif
}

void
conn_set_flash(struct conn *c, dispatch_flash_notify_fn fn, void *owner,
               struct flash_ring *ring)
{
    c->d.flash_notify = fn;
    c->d.flash_owner = owner;
    c->d.flash_ring = ring;
    c->d.flash_conn = c;
}

void
conn_kick(struct conn *c)
{
    (void)conn_flush(c);
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
    conn_flush(c);
}
