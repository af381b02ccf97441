/*
 * outq.h -- a connection's output queue: bytes to send, written with one
 * writev per flush.
 *
 * Small pieces (answers, VALUE headers) are copied into one growing
 * buffer and coalesce into a single iovec; large ones (item values) are
 * queued by reference, with an opaque `ref` released through the queue's
 * release function once every byte of it has been written. Nothing is
 * allocated per piece once the queue has grown to its working size, which
 * is what libevent's evbuffer (a malloc per referenced chunk) could not do.
 */
#ifndef SC_OUTQ_H
#define SC_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct outq_seg {
    const char *ptr;            /* NULL: the bytes are in buf at off */
    size_t      off;
    size_t      len;
    void       *ref;            /* released once the segment is sent */
    bool        wait;           /* not ready: nothing from here on is sent */
};

struct outq {
    char            *buf;
    size_t           buf_len;
    size_t           buf_cap;
    struct outq_seg *seg;
    uint32_t         nseg;
    uint32_t         seg_cap;
    uint32_t         head;      /* first segment not fully sent */
    size_t           head_sent; /* bytes of seg[head] already sent */
    size_t           pending;   /* bytes queued, not yet sent */
    uint64_t         queued;    /* bytes ever queued (outq_mark) */
    uint64_t         hold;      /* bytes from this mark on wait (outq_hold) */
    uint64_t        *track;     /* a caller's mark, moved as the hold is */
    uint32_t         nwait;     /* segments not ready (outq_add_wait) */
    uint32_t         first_wait; /* the first of them, if nwait > 0 */
    void           (*release)(void *ref);
};

void    outq_init(struct outq *q, void (*release)(void *ref));
/* Release the references of unsent segments and free the queue's memory. */
void    outq_free(struct outq *q);
/* Copy n bytes. Returns 0, or -1 (nothing queued) if memory runs out. */
int     outq_add(struct outq *q, const void *p, size_t n);
/* Queue n bytes at p by reference; ref is released once they are sent
 * (or at once, on failure, returning -1). */
int     outq_add_ref(struct outq *q, const void *p, size_t n, void *ref);
/*
 * An answer whose bytes are not ready yet (a value being read from
 * flash): n bytes at p, by reference, queued in order; nothing queued
 * after it is sent until outq_ready() says how many of the n bytes (from
 * p, which the caller has filled by then) make the answer. Returns the
 * segment's index (stable until it is sent), or -1 as outq_add_ref.
 */
int64_t outq_add_wait(struct outq *q, const void *p, size_t n, void *ref);
void    outq_ready(struct outq *q, uint32_t seg, size_t n);
/* A mark the caller keeps (e.g. for a later outq_rollback) that must
 * follow its bytes when an earlier waiting answer shrinks; NULL: none. */
static inline void outq_track(struct outq *q, uint64_t *mark) { q->track = mark; }
/* Copy the bytes queued since mark (copies only: outq_add) to dst. */
void    outq_copy_since(const struct outq *q, uint64_t mark, char *dst);
static inline size_t outq_pending(const struct outq *q) { return q->pending; }
static inline uint32_t outq_segments(const struct outq *q) { return q->nseg - q->head; }
/* Bytes of the copy buffer in use: copies since it was last empty, sent
 * or not (it is reset, not compacted, once everything is sent). */
static inline size_t outq_copied(const struct outq *q) { return q->buf_len; }
/*
 * Take back everything queued since outq_mark() returned `mark`, releasing
 * its references: how a multi-key answer is replaced by an error line.
 * Returns -1 (nothing changed) if any of those bytes was already sent.
 */
static inline uint64_t outq_mark(const struct outq *q) { return q->queued; }
int     outq_rollback(struct outq *q, uint64_t mark);
/*
 * Keep the bytes queued from `mark` on (an outq_mark() value) from being
 * written until the hold is lifted with OUTQ_NO_HOLD: an answer that may
 * still be taken back waits while earlier answers go.
 */
#define OUTQ_NO_HOLD UINT64_MAX
static inline void outq_hold(struct outq *q, uint64_t mark) { q->hold = mark; }
/* Bytes before the first segment that is not ready. */
size_t  outq_ready_bytes(const struct outq *q);
/* Bytes a write may send now: pending, less what is held or waits. */
static inline size_t
outq_sendable(const struct outq *q)
{
    uint64_t sent = q->queued - q->pending;
    size_t n = q->pending;

    if (q->hold != OUTQ_NO_HOLD) {
        n = q->hold <= sent ? 0 : (size_t)(q->hold - sent < q->pending ?
                                           q->hold - sent : q->pending);
    }
    if (q->nwait > 0 && n > 0) {
        size_t r = outq_ready_bytes(q);
        n = r < n ? r : n;
    }
    return n;
}
/* One writev of what is queued: bytes written, or -1 with errno. */
ssize_t outq_write(struct outq *q, int fd);
/* The same through write_fn, which acts as writev() (TLS connections). */
typedef ssize_t (*outq_writev_fn)(void *ctx, const struct iovec *iov, int n);
ssize_t outq_write_with(struct outq *q, outq_writev_fn write_fn, void *ctx);

#endif
