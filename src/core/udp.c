/*
 * udp.c -- memcached's UDP transport (-U PORT): see udp.h for the frame.
 *
 * A datagram is served whole, as memcached serves it: its requests are
 * parsed and answered in order, and each request's answer goes back as a
 * sequence of its own (sequence numbers from 0, the count in every
 * datagram). A datagram that says it is one of several is dropped (memcached
 * does not reassemble requests); a request cut off by the end of its
 * datagram, a storage command whose data block is, is not answered. State
 * never carries from one datagram to the next.
 *
 * Answers are built in the worker's output queue as on TCP (values by
 * reference), then cut into datagrams. What one datagram's answers can
 * hold is bounded by its size (64 KB of requests): a multi-get's line of
 * keys, each a reference to a value held while it is sent. Flash reads
 * block here (no completion to wait for between datagrams). A `watch` or
 * a key dump cannot stream over UDP: the first answers go, no more.
 */
#include "udp.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "dispatch.h"
#include "logger.h"
#include "outq.h"
#include "proto.h"
#include "settings.h"
#include "stats.h"

#define UDP_DATA_SIZE     (UDP_DATAGRAM_MAX - UDP_HEADER_SIZE)
#define UDP_READS_MAX     32      /* datagrams per event, so others get a turn */
#define UDP_FRAME_MAX     65536   /* the largest datagram */

struct udp_conn {
    int                      fd;
    struct event             ev;
    struct stats_thread     *stats;
    struct outq              out;
    struct dispatch_ctx      d;
    struct sockaddr_storage  peer;
    socklen_t                peer_len;
    uint16_t                 request_id;
    char                     buf[UDP_FRAME_MAX];
};

/* A datagram being sent by outq_write_with(): header, then what fits. */
struct udp_send {
    struct udp_conn *u;
    uint16_t         seq;
    uint16_t         total;
};

static ssize_t
udp_send_one(void *ctx, const struct iovec *iov, int n)
{
    struct udp_send *s = ctx;
    struct iovec v[OUTQ_IOV_MAX + 1];
    unsigned char hdr[UDP_HEADER_SIZE] = {
        (unsigned char)(s->u->request_id >> 8), (unsigned char)s->u->request_id,
        (unsigned char)(s->seq >> 8), (unsigned char)s->seq,
        (unsigned char)(s->total >> 8), (unsigned char)s->total, 0, 0,
    };
    size_t len = 0;
    int k = 1;

    v[0].iov_base = hdr;
    v[0].iov_len = sizeof(hdr);
    for (int i = 0; i < n && len < UDP_DATA_SIZE; i++, k++) {
        size_t take = iov[i].iov_len < UDP_DATA_SIZE - len ? iov[i].iov_len : UDP_DATA_SIZE - len;
        v[k].iov_base = iov[i].iov_base;
        v[k].iov_len = take;
        len += take;
    }
    struct msghdr msg = {
        .msg_name = &s->u->peer, .msg_namelen = s->u->peer_len,
        .msg_iov = v, .msg_iovlen = (size_t)k,
    };
    /* A datagram the socket cannot take now is lost, as any datagram may
     * be: the client times out. The bytes count as done either way. */
    ssize_t w = sendmsg(s->u->fd, &msg, MSG_DONTWAIT);
    if (w > 0) {
        STATS_ADD(s->u->stats, bytes_written, (uint64_t)w);
    }
    s->seq++;
    return (ssize_t)len;
}

/* Send what the last request queued as one sequence of datagrams. */
static void
udp_answer(struct udp_conn *u)
{
    size_t pending = outq_pending(&u->out);
    size_t total = (pending + UDP_DATA_SIZE - 1) / UDP_DATA_SIZE;
    struct udp_send s = { u, 0, (uint16_t)(total > UINT16_MAX ? UINT16_MAX : total) };

    while (outq_pending(&u->out) > 0) {
        if (outq_write_with(&u->out, udp_send_one, &s) <= 0) {
            break;
        }
    }
}

/* The data block of a storage command, from the datagram; false if it is
 * cut off (the command is dropped). */
static bool
udp_feed(struct udp_conn *u, const char *p, size_t len, size_t *pos)
{
    for (;;) {
        if (len - *pos < u->d.ndata) {
            dispatch_abort(&u->d);
            return false;
        }
        memcpy(u->d.data, p + *pos, u->d.ndata);
        *pos += u->d.ndata;
        if (!dispatch_data_next(&u->d)) {
            break;
        }
    }
    dispatch_data_done(&u->d);
    return true;
}

/* After dispatching a request: false to stop serving the datagram. */
static bool
udp_apply(struct udp_conn *u, dispatch_result_t r, const char *p, size_t len, size_t *pos)
{
    switch (r) {
    case DISPATCH_DONE:
        return true;
    case DISPATCH_NEED_DATA:
        return udp_feed(u, p, len, pos);
    case DISPATCH_SWALLOW: {
        size_t n = len - *pos < u->d.swallow ? len - *pos : (size_t)u->d.swallow;
        *pos += n;
        u->d.swallow = 0;
        return true;
    }
    case DISPATCH_MORE_KEYS:
        /* No output bound here (see the file header): not reached. */
        dispatch_get_finish(&u->d, NULL);
        return true;
    case DISPATCH_MORE_DUMP:
        return false;               /* its first batch only */
    case DISPATCH_WATCH:
        logger_unwatch(u->d.watcher);
        u->d.watcher = NULL;
        return false;
    case DISPATCH_CLOSE:
        return false;
    }
    return false;
}

static void
udp_dispatch_reset(struct udp_conn *u)
{
    memset(&u->d, 0, sizeof(u->d));
    u->d.out = &u->out;
    u->d.stats = u->stats;
    u->d.out_limit = SIZE_MAX;
    u->d.out_copy_limit = SIZE_MAX;
    u->d.out_segs_limit = UINT32_MAX;
    u->d.fd = u->fd;
}

/* The requests of one datagram's payload. */
static void
udp_serve(struct udp_conn *u, const char *p, size_t len)
{
    bool binary = settings.binary_only ||
                  (settings.binary_auto && (unsigned char)p[0] == PROTO_BINARY_MAGIC);
    size_t pos = 0;

    udp_dispatch_reset(u);
    while (pos < len) {
        struct proto_req req;
        size_t consumed = 0;
        proto_status_t st = binary ? proto_bin_parse(p + pos, len - pos, &req, &consumed)
                                   : proto_parse(p + pos, len - pos, &req, &consumed);
        if (st != PROTO_OK && st != PROTO_ERROR) {
            break;                  /* cut off, or past a line's limit */
        }
        pos += consumed;
        dispatch_result_t r = st == PROTO_OK ? dispatch_request(&u->d, &req)
                                             : dispatch_error(&u->d, &req);
        bool more = udp_apply(u, r, p, len, &pos);
        udp_answer(u);
        if (!more) {
            break;
        }
    }
    dispatch_abort(&u->d);
}

static void
udp_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct udp_conn *u = arg;

    (void)what;
    for (int i = 0; i < UDP_READS_MAX; i++) {
        u->peer_len = sizeof(u->peer);
        ssize_t n = recvfrom(fd, u->buf, sizeof(u->buf), MSG_DONTWAIT,
                             (struct sockaddr *)&u->peer, &u->peer_len);
        if (n < 0) {
            return;                 /* EAGAIN: another worker took it */
        }
        if (n <= UDP_HEADER_SIZE) {
            continue;               /* no request: nothing to answer */
        }
        STATS_ADD(u->stats, bytes_read, (uint64_t)n);
        const unsigned char *h = (const unsigned char *)u->buf;
        u->request_id = (uint16_t)(h[0] << 8 | h[1]);
        if (h[4] != 0 || h[5] != 1) {
            continue;               /* one of several: dropped, as memcached */
        }
        udp_serve(u, u->buf + UDP_HEADER_SIZE, (size_t)n - UDP_HEADER_SIZE);
    }
}

struct udp_conn *
udp_conn_new(int fd, struct event_base *base, struct stats_thread *st)
{
    struct udp_conn *u = calloc(1, sizeof(*u));

    if (u == NULL) {
        return NULL;
    }
    u->fd = fd;
    u->stats = st;
    outq_init(&u->out, dispatch_ref_release);
    event_assign(&u->ev, base, fd, EV_READ | EV_PERSIST, udp_on_read, u);
    if (event_add(&u->ev, NULL) != 0) {
        outq_free(&u->out);
        free(u);
        return NULL;
    }
    return u;
}

void
udp_conn_free(struct udp_conn *u)
{
    if (u == NULL) {
        return;
    }
    event_del(&u->ev);
    outq_free(&u->out);
    free(u);
}
