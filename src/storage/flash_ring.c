/*
 * flash_ring.c -- a worker's io_uring read ring: reads of flash records
 * submitted and reaped on the worker's own event loop, without the I/O
 * threads. Built without liburing, every function here says there is no
 * ring and reads go to the I/O threads (flash_read.c).
 */
#include "flash_int.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "log.h"

/* --- a worker's read ring (io_uring) ------------------------------------------- */

#ifdef HAVE_LIBURING

struct flash_ring {
    struct io_uring    ring;
    uint32_t           depth;
    uint32_t           inflight;    /* reads the kernel has, or will at the flush */
    uint32_t           npending;    /* of those, prepared and not yet taken */
    struct flash_read **pending;    /* them, in order (depth slots) */
    struct flash_read *wait_head, *wait_tail;   /* beyond depth, in order */
    bool               closed;
    bool               broken;      /* the kernel refused a flush for good */
};

/* One no-op through the ring: some sandboxes let a ring be set up and
 * then refuse every submission (seccomp, gVisor). */
static int
ring_probe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    struct io_uring_cqe *cqe;
    int rc;

    if (sqe == NULL) {
        return -EBUSY;
    }
    io_uring_prep_nop(sqe);
    do {
        rc = io_uring_submit_and_wait(ring, 1);
    } while (rc == -EINTR);
    if (rc < 0) {
        return rc;
    }
    rc = io_uring_peek_cqe(ring, &cqe);
    if (rc == 0) {
        rc = cqe->res;
        io_uring_cqe_seen(ring, cqe);
    }
    return rc;
}

struct flash_ring *
flash_ring_open(uint32_t depth, char *err, size_t cap)
{
    struct flash_ring *q = calloc(1, sizeof(*q));
    int rc;

    if (q == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    q->depth = depth < 1 ? 1 : depth;
    q->pending = calloc(q->depth, sizeof(*q->pending));
    if (q->pending == NULL) {
        snprintf(err, cap, "out of memory");
        free(q);
        return NULL;
    }
    bool probed = false;
    rc = io_uring_queue_init(q->depth, &q->ring, 0);
    if (rc == 0) {
        probed = true;
        rc = ring_probe(&q->ring);
        if (rc != 0) {
            io_uring_queue_exit(&q->ring);
        }
    }
    if (rc != 0) {
        snprintf(err, cap, "io_uring: %s%s", probed ? "a no-op was refused: " : "",
                 strerror(-rc));
        free(q->pending);
        free(q);
        return NULL;
    }
    return q;
}

/*
 * The ring's own descriptor: readable while finished reads wait to be
 * reaped. Not an eventfd registered with the ring: that is signalled for
 * every completion, also those reaped in the turn that flushed them (page
 * cache hits), so each such turn cost one more wake-up and read; the
 * ring polls readable only while its completion queue is not empty.
 */
int
flash_ring_fd(const struct flash_ring *q)
{
    return q->ring.ring_fd;
}

/* Finish r on the ring's thread. */
static void
ring_finish(struct flash_read *r, flash_read_status_t st)
{
    flash_read_finish(r, st);
    r->done(r);
}

/* Prepare r for the kernel (it goes in at the next flush), or finish it
 * now: a record in a write buffer, or reclaimed. */
static void
ring_start(struct flash_ring *q, struct flash_read *r)
{
    off_t at = 0;
    int st = flash_read_start(r, &at);

    if (st >= 0) {
        ring_finish(r, (flash_read_status_t)st);
        return;
    }
    /* never NULL: fewer than depth reads are in, and the ring has depth slots */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    assert(sqe != NULL && q->npending < q->depth);
    io_uring_prep_readv(sqe, fl.fd, r->iov, flash_read_niov(r), (uint64_t)at);
    io_uring_sqe_set_data(sqe, r);
    q->pending[q->npending++] = r;
    q->inflight++;
    atomic_fetch_add(&fl.ring_queued, 1);
    atomic_fetch_add(&fl.ring_reads, 1);
}

/*
 * The kernel will not take reads from this ring any more: the reads it
 * has not taken go to the I/O threads instead (their done() then runs on
 * an I/O thread), and so does every read after. Said once.
 */
static void
ring_break(struct flash_ring *q, int rc)
{
    static atomic_bool told;

    if (!atomic_exchange(&told, true)) {
        fprintf(stderr, "slabcache: ext_io_uring: the kernel refused reads (%s); "
                "flash reads go through the I/O threads\n", strerror(-rc));
    }
    q->broken = true;
    for (uint32_t i = 0; i < q->npending; i++) {
        atomic_fetch_sub(&fl.ring_queued, 1);
        q->inflight--;
        flash_read_submit(q->pending[i]);
    }
    q->npending = 0;
}

/*
 * Reads prepared go to the kernel, all in one call (a multi-get's reads
 * together). A record in the page cache is read during the call, so its
 * completion is there to reap at once. For want of resources (EAGAIN,
 * EBUSY) the reads stay prepared and go at the next flush (false); any
 * other refusal breaks the ring (ring_break).
 */
bool
flash_ring_flush(struct flash_ring *q)
{
    /* a broken ring's queue keeps what it would not take: never again */
    assert(!q->broken || q->npending == 0);
    while (q->npending > 0) {
        int rc = io_uring_submit(&q->ring);
        if (rc == -EINTR) {
            continue;
        }
        if (rc == -EAGAIN || rc == -EBUSY) {
            return false;
        }
        /* 0 cannot be: the prepared reads are in the queue to be taken */
        assert(rc != 0);
        if (rc <= 0) {
            ring_break(q, rc < 0 ? rc : -EIO);
            return true;
        }
        /* taken in order: the first rc prepared */
        uint32_t n = (uint32_t)rc < q->npending ? (uint32_t)rc : q->npending;
        memmove(q->pending, q->pending + n, (q->npending - n) * sizeof(*q->pending));
        q->npending -= n;
    }
    return true;
}

void
flash_ring_submit(struct flash_ring *q, struct flash_read *r)
{
    r->next = NULL;
    if (q->closed) {
        ring_finish(r, FLASH_READ_GONE);
        return;
    }
    if (q->broken) {
        flash_read_submit(r);
        return;
    }
    if (q->inflight >= q->depth || q->wait_head != NULL) {
        if (q->wait_tail != NULL) {
            q->wait_tail->next = r;
        } else {
            q->wait_head = r;
        }
        q->wait_tail = r;
        atomic_fetch_add(&fl.ring_queued, 1);
        return;
    }
    ring_start(q, r);
}

/* One read the kernel finished. */
static void
ring_complete(struct flash_ring *q, struct io_uring_cqe *cqe)
{
    struct flash_read *r = io_uring_cqe_get_data(cqe);
    ssize_t n = cqe->res;

    io_uring_cqe_seen(&q->ring, cqe);
    q->inflight--;
    atomic_fetch_sub(&fl.ring_queued, 1);
    /* cancelled (its thread exited first): a miss, not a device error */
    ring_finish(r, n == -ECANCELED ? FLASH_READ_GONE : flash_read_device_done(r, n));
}

/* Reads waiting for room go in, in order (all finish, as misses, once
 * the ring is closed; to the I/O threads once it is broken). */
static void
ring_refill(struct flash_ring *q)
{
    while (q->wait_head != NULL && (q->inflight < q->depth || q->closed || q->broken)) {
        struct flash_read *r = q->wait_head;
        q->wait_head = r->next;
        if (q->wait_head == NULL) {
            q->wait_tail = NULL;
        }
        atomic_fetch_sub(&fl.ring_queued, 1);
        if (q->closed) {
            ring_finish(r, FLASH_READ_GONE);
        } else if (q->broken) {
            flash_read_submit(r);
        } else {
            ring_start(q, r);
        }
    }
}

void
flash_ring_reap(struct flash_ring *q)
{
    struct io_uring_cqe *cqe;

    while (io_uring_peek_cqe(&q->ring, &cqe) == 0) {
        ring_complete(q, cqe);
    }
    ring_refill(q);
}

bool
flash_ring_busy(const struct flash_ring *q)
{
    return q->npending > 0 || io_uring_cq_ready(&q->ring) > 0;
}

void
flash_ring_close(struct flash_ring *q)
{
    struct io_uring_cqe *cqe;

    q->closed = true;
    ring_refill(q);             /* the waiting ones finish as misses */
    for (int tries = 0; !flash_ring_flush(q); tries++) {
        if (tries == 100) {
            ring_break(q, -EAGAIN);     /* the I/O threads, or a miss after them */
            break;
        }
        sched_yield();          /* short of resources: the kernel gives them back */
    }
    while (q->inflight > 0) {
        int rc = io_uring_wait_cqe(&q->ring, &cqe);
        if (rc == -EINTR) {
            continue;
        }
        if (rc != 0) {
            break;              /* the ring broke: nothing more will come */
        }
        ring_complete(q, cqe);
    }
}

void
flash_ring_free(struct flash_ring *q)
{
    if (q == NULL) {
        return;
    }
    io_uring_queue_exit(&q->ring);
    free(q->pending);
    free(q);
}

#else /* !HAVE_LIBURING */

struct flash_ring {
    int unused;
};

bool
flash_ring_flush(struct flash_ring *q)
{
    (void)q;
    return true;
}

bool
flash_ring_busy(const struct flash_ring *q)
{
    (void)q;
    return false;
}

struct flash_ring *
flash_ring_open(uint32_t depth, char *err, size_t cap)
{
    (void)depth;
    snprintf(err, cap, "built without liburing");
    return NULL;
}

int
flash_ring_fd(const struct flash_ring *q)
{
    (void)q;
    return -1;
}

void
flash_ring_submit(struct flash_ring *q, struct flash_read *r)
{
    (void)q;
    flash_read_submit(r);
}

void
flash_ring_reap(struct flash_ring *q)
{
    (void)q;
}

void
flash_ring_close(struct flash_ring *q)
{
    (void)q;
}

void
flash_ring_free(struct flash_ring *q)
{
    (void)q;
}

#endif

