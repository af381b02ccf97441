/*
 * outq.c -- output queue (see outq.h). Buffer segments record offsets,
 * not pointers, so the copy buffer may grow while earlier bytes wait to
 * be sent; it is reset only once everything queued has been written.
 */
#include "outq.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define OUTQ_IOV_MAX     64         /* iovecs per writev */
#define OUTQ_BUF_INIT    2048
#define OUTQ_SEG_INIT    16
#define OUTQ_BUF_KEEP    (16 * 1024) /* larger buffers are freed when idle */
#define OUTQ_SEG_KEEP    256         /* and larger segment arrays */

void
outq_init(struct outq *q, void (*release)(void *ref))
{
    memset(q, 0, sizeof(*q));
    q->release = release;
    q->hold = OUTQ_NO_HOLD;
}

static void
outq_release_from(struct outq *q, uint32_t from)
{
    for (uint32_t i = from; i < q->nseg; i++) {
        if (q->seg[i].ref != NULL) {
            q->release(q->seg[i].ref);
        }
    }
}

void
outq_free(struct outq *q)
{
    outq_release_from(q, q->head);
    free(q->buf);
    free(q->seg);
    memset(q, 0, sizeof(*q));
}

static int
outq_seg_room(struct outq *q)
{
    if (q->nseg < q->seg_cap) {
        return 0;
    }
    uint32_t cap = q->seg_cap ? q->seg_cap * 2 : OUTQ_SEG_INIT;
    struct outq_seg *seg = realloc(q->seg, cap * sizeof(*seg));
    if (seg == NULL) {
        return -1;
    }
    q->seg = seg;
    q->seg_cap = cap;
    return 0;
}

int
outq_add(struct outq *q, const void *p, size_t n)
{
    if (q->buf_len + n > q->buf_cap) {
        size_t cap = q->buf_cap ? q->buf_cap : OUTQ_BUF_INIT;
        while (cap < q->buf_len + n) {
            cap *= 2;
        }
        char *buf = realloc(q->buf, cap);
        if (buf == NULL) {
            return -1;
        }
        q->buf = buf;
        q->buf_cap = cap;
    }
    struct outq_seg *last = q->nseg > q->head ? &q->seg[q->nseg - 1] : NULL;
    if (last != NULL && last->ptr == NULL && last->off + last->len == q->buf_len) {
        last->len += n;             /* coalesce with the previous copy */
    } else {
        if (outq_seg_room(q) != 0) {
            return -1;
        }
        q->seg[q->nseg++] = (struct outq_seg){ NULL, q->buf_len, n, NULL, false };
    }
    memcpy(q->buf + q->buf_len, p, n);
    q->buf_len += n;
    q->pending += n;
    q->queued += n;
    return 0;
}

int
outq_add_ref(struct outq *q, const void *p, size_t n, void *ref)
{
    if (outq_seg_room(q) != 0) {
        q->release(ref);
        return -1;
    }
    q->seg[q->nseg++] = (struct outq_seg){ p, 0, n, ref, false };
    q->pending += n;
    q->queued += n;
    return 0;
}

static void outq_skip_empty(struct outq *q);

int64_t
outq_add_wait(struct outq *q, const void *p, size_t n, void *ref)
{
    if (outq_add_ref(q, p, n, ref) != 0) {
        return -1;
    }
    uint32_t i = q->nseg - 1;
    q->seg[i].wait = true;
    if (q->nwait++ == 0) {
        q->first_wait = i;
    }
    return i;
}

/* The first waiting segment at or after i (nwait > 0). */
static uint32_t
outq_next_wait(const struct outq *q, uint32_t i)
{
    while (i < q->nseg && !q->seg[i].wait) {
        i++;
    }
    return i;
}

/*
 * Marks taken after a segment that shrinks would point past their place:
 * the hold and the tracked mark (outq_track) are the ones kept across a
 * wait, so they move with their bytes.
 */
void
outq_ready(struct outq *q, uint32_t i, size_t n)
{
    struct outq_seg *s = &q->seg[i];
    size_t cut = s->len - n;

    if ((q->hold != OUTQ_NO_HOLD || q->track != NULL) && cut > 0) {
        uint64_t at = q->queued - q->pending;       /* bytes sent */
        for (uint32_t j = q->head; j < i; j++) {
            at += q->seg[j].len - (j == q->head ? q->head_sent : 0);
        }
        if (q->hold != OUTQ_NO_HOLD && q->hold > at) {
            q->hold = q->hold - at > cut ? q->hold - cut : at;
        }
        if (q->track != NULL && *q->track > at) {
            *q->track = *q->track - at > cut ? *q->track - cut : at;
        }
    }
    s->len = n;
    s->wait = false;
    q->pending -= cut;
    q->queued -= cut;
    if (--q->nwait > 0 && q->first_wait == i) {
        q->first_wait = outq_next_wait(q, i + 1);
    }
    outq_skip_empty(q);
}

void
outq_copy_since(const struct outq *q, uint64_t mark, char *dst)
{
    size_t n = (size_t)(q->queued - mark);

    assert(n <= q->buf_len);
    memcpy(dst, q->buf + q->buf_len - n, n);
}

size_t
outq_ready_bytes(const struct outq *q)
{
    size_t n = 0;

    for (uint32_t j = q->head; j < q->first_wait; j++) {
        n += q->seg[j].len - (j == q->head ? q->head_sent : 0);
    }
    return n;
}

/*
 * Unsent bytes are always the queue's tail, so taking back the newest n of
 * them trims segments from the end; a copied segment is the end of buf.
 */
int
outq_rollback(struct outq *q, uint64_t mark)
{
    uint64_t n = q->queued - mark;

    if (n > q->pending) {
        return -1;
    }
    while (n > 0) {
        struct outq_seg *s = &q->seg[q->nseg - 1];
        size_t cut = s->len < n ? s->len : (size_t)n;
        s->len -= cut;
        if (s->ptr == NULL) {
            q->buf_len -= cut;
        }
        n -= cut;
        q->pending -= cut;
        q->queued -= cut;
        if (s->len == 0) {
            if (s->wait) {
                s->wait = false;
                if (--q->nwait > 0 && q->first_wait == q->nseg - 1) {
                    q->first_wait = outq_next_wait(q, q->head);
                }
            }
            if (s->ref != NULL) {
                q->release(s->ref);
            }
            q->nseg--;
        }
    }
    return 0;
}

/* Everything sent: start over at the front, freeing an outsized buffer or
 * segment array (a queue kept for reuse keeps its working size only). */
static void
outq_reset(struct outq *q)
{
    q->nseg = q->head = 0;
    q->head_sent = 0;
    q->buf_len = 0;
    if (q->buf_cap > OUTQ_BUF_KEEP) {
        free(q->buf);
        q->buf = NULL;
        q->buf_cap = 0;
    }
    if (q->seg_cap > OUTQ_SEG_KEEP) {
        free(q->seg);
        q->seg = NULL;
        q->seg_cap = 0;
    }
}

/* Release ready segments at the head with nothing left to send (an
 * answer that outq_ready() emptied); reset once all is sent. */
static void
outq_skip_empty(struct outq *q)
{
    while (q->head < q->nseg && !q->seg[q->head].wait &&
           q->seg[q->head].len == q->head_sent) {
        if (q->seg[q->head].ref != NULL) {
            q->release(q->seg[q->head].ref);
        }
        q->head++;
        q->head_sent = 0;
    }
    if (q->head == q->nseg) {
        outq_reset(q);
    }
}

/* Mark w bytes sent: release whole segments, remember a partial one. */
static void
outq_advance(struct outq *q, size_t w)
{
    size_t left = w;
    q->pending -= left;
    while (left > 0) {
        struct outq_seg *s = &q->seg[q->head];
        size_t rest = s->len - q->head_sent;
        if (left < rest) {
            q->head_sent += left;
            break;
        }
        left -= rest;
        if (s->ref != NULL) {
            q->release(s->ref);
        }
        q->head++;
        q->head_sent = 0;
    }
    outq_skip_empty(q);
}

/*
 * writev batches of up to OUTQ_IOV_MAX segments until the queue is empty
 * (or only held bytes are left) or the socket takes less than offered
 * (then it is full: stop, rather than spend a syscall on EAGAIN). Usually
 * one call, one writev.
 */
static ssize_t
outq_writev_fd(void *ctx, const struct iovec *iov, int n)
{
    return writev(*(int *)ctx, iov, n);
}

ssize_t
outq_write(struct outq *q, int fd)
{
    return outq_write_with(q, outq_writev_fd, &fd);
}

ssize_t
outq_write_with(struct outq *q, outq_writev_fn write_fn, void *ctx)
{
    struct iovec iov[OUTQ_IOV_MAX];
    ssize_t total = 0;
    size_t allow;

    while ((allow = outq_sendable(q)) > 0) {
        size_t offered = 0;
        int n = 0;
        for (uint32_t i = q->head; i < q->nseg && n < OUTQ_IOV_MAX &&
                                   offered < allow; i++, n++) {
            const struct outq_seg *s = &q->seg[i];
            const char *base = s->ptr != NULL ? s->ptr : q->buf + s->off;
            size_t skip = i == q->head ? q->head_sent : 0;
            size_t len = s->len - skip;
            iov[n].iov_base = (void *)(base + skip);
            iov[n].iov_len = len < allow - offered ? len : allow - offered;
            offered += iov[n].iov_len;
        }
        ssize_t w = write_fn(ctx, iov, n);
        if (w <= 0) {
            return total > 0 ? total : w;
        }
        outq_advance(q, (size_t)w);
        total += w;
        if ((size_t)w < offered) {
            break;
        }
    }
    return total;
}
