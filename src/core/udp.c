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
 * reference), then cut into datagrams; one request's answer holds at most
 * UDP_ANSWER_MAX bytes. A storage command whose data block the datagram
 * does not hold is dropped before anything is allocated for it. Flash
 * reads block here (no completion to wait for between datagrams). A
 * `watch` or a key dump cannot stream over UDP: the first answers go.
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

/* A datagram being filled from the output queue (udp_take). */
struct udp_fill {
    unsigned char dgram[UDP_DATAGRAM_MAX];
    size_t        len;              /* of dgram, header included */
};

/* outq_write_with()'s writer: copy what still fits in the datagram. */
static ssize_t
udp_take(void *ctx, const struct iovec *iov, int n)
{
    struct udp_fill *f = ctx;
    size_t took = 0;

    for (int i = 0; i < n && f->len < sizeof(f->dgram); i++) {
        size_t room = sizeof(f->dgram) - f->len;
        size_t k = iov[i].iov_len < room ? iov[i].iov_len : room;
        memcpy(f->dgram + f->len, iov[i].iov_base, k);
        f->len += k;
        took += k;
        if (k < iov[i].iov_len) {
            break;
        }
    }
    return (ssize_t)took;
}

/*
 * Send what the last request queued as one sequence of full datagrams
 * (the last one shorter), their count known before the first. A datagram
 * the socket cannot take now is lost, as any datagram may be: the client
 * times out.
 */
static void
udp_answer(struct udp_conn *u)
{
    size_t pending = outq_pending(&u->out);
    size_t total = (pending + UDP_DATA_SIZE - 1) / UDP_DATA_SIZE;
    struct udp_fill f;

    for (uint16_t seq = 0; outq_pending(&u->out) > 0; seq++) {
        unsigned char hdr[UDP_HEADER_SIZE] = {
            (unsigned char)(u->request_id >> 8), (unsigned char)u->request_id,
            (unsigned char)(seq >> 8), (unsigned char)seq,
            (unsigned char)(total >> 8), (unsigned char)total, 0, 0,
        };
        memcpy(f.dgram, hdr, sizeof(hdr));
        f.len = sizeof(hdr);
        while (f.len < sizeof(f.dgram) && outq_pending(&u->out) > 0) {
            if (outq_write_with(&u->out, udp_take, &f) <= 0) {
                break;
            }
        }
        if (f.len == sizeof(hdr)) {
            /* Nothing more can be taken (no answer here waits, so this
             * is not reached): drop the rest, never send it to the next
             * request's client. */
            outq_rollback(&u->out, outq_mark(&u->out) - outq_pending(&u->out));
            break;
        }
        ssize_t w = sendto(u->fd, f.dgram, f.len, MSG_DONTWAIT,
                           (struct sockaddr *)&u->peer, u->peer_len);
        if (w > 0) {
            STATS_ADD(u->stats, bytes_written, (uint64_t)w);
        }
    }
}

/* The data block a request carries after its line (or binary header). */
static size_t
udp_data_len(const struct proto_req *req)
{
    if (req->bin.on) {
        return req->vlen;
    }
    switch (req->cmd) {
    case PROTO_CMD_SET: case PROTO_CMD_ADD: case PROTO_CMD_REPLACE:
    case PROTO_CMD_APPEND: case PROTO_CMD_PREPEND: case PROTO_CMD_CAS:
    case PROTO_CMD_MS:
        return (size_t)req->vlen + 2;
    default:
        return 0;
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
        /* The answer reached UDP_ANSWER_MAX: taken back, refused. */
        dispatch_get_finish(&u->d, "SERVER_ERROR out of memory writing get response");
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
    u->d.out_limit = UDP_ANSWER_MAX;
    u->d.out_copy_limit = UDP_ANSWER_MAX;
    u->d.out_segs_limit = UDP_ANSWER_MAX / 64;
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
        if (st == PROTO_OK && udp_data_len(&req) > len - pos - consumed) {
            break;                  /* its data block is cut off */
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
