/*
 * worker.c -- worker threads: one event loop each, fed new sockets
 * through a pipe (a 4-byte write of the fd is atomic on a pipe). With
 * the flash tier on, each worker also owns a read ring (flash.h) when
 * the kernel has io_uring (ext_io_uring): its connections' flash reads
 * go in and come back on this thread, without a hand-off.
 */
#include "worker.h"


#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "conn.h"
#include "dispatch.h"
#include "flash.h"
#include "listener.h"
#include "log.h"
#include "settings.h"
#include "stats.h"
#include "udp.h"

#define WORKER_UDP_MAX 16

struct worker {
    pthread_t            tid;
    struct event_base   *base;
    struct event        *notify_ev;
    struct event        *idle_ev;   /* -o idle_timeout: once a second */
    int                  notify_rd;
    int                  notify_wr;
    struct conn_list     conns;
    struct stats_thread  stats;
    pthread_mutex_t      flash_lock; /* flash reads done, for this loop */
    struct dispatch_flash *flash_done;
    struct flash_ring   *ring;      /* NULL: reads go to the I/O threads */
    struct event        *ring_ev;   /* its fd: reads finished later */
    struct event        *ring_turn; /* made active when there is ring work,
                                       or timed: a refused flush's retry */
    struct udp_conn     *udp[WORKER_UDP_MAX]; /* -U: its readers of the UDP sockets */
};

static struct worker   *workers;
static int              nworkers;
static _Atomic unsigned next_worker;
static bool             yield_between_batches;

#define NOTIFY_STOP (-1)         /* written instead of an fd: leave the loop */
#define NOTIFY_FLASH (-2)        /* flash reads are done (w->flash_done) */
#define NOTIFY_TLS  (1 << 30)    /* or'ed into an fd: a TLS listener's client */
#define NOTIFY_MTLS (1 << 29)    /* ... an mtls: listener's (a certificate required) */

/* ext_io_depth 0: reads a worker's ring keeps in the kernel at once (a
 * closed loop of 8 connections keeps 8; an SSD serves dozens at once). */
#define WORKER_RING_DEPTH 64

static int worker_notify(struct worker *w, int value);

/* The worker running on this thread (NULL elsewhere). */
static _Thread_local struct worker *self;

/*
 * A flash read is done (on an I/O thread, or on the worker), or, f NULL,
 * one was prepared in this worker's ring: queue it for the worker whose
 * connection asked, waking the loop when the queue was empty. On the
 * worker itself, with a ring, the ring's turn event is made active
 * instead: it runs in this pass of the loop, after the callbacks already
 * active, and flushes, reaps and answers (worker_ring_turn). Making an
 * active event active again does nothing.
 */
static void
worker_flash_notify(void *owner, struct dispatch_flash *f)
{
    struct worker *w = owner;
    bool own = self == w && w->ring != NULL;

    if (f != NULL) {
        pthread_mutex_lock(&w->flash_lock);
        bool wake = w->flash_done == NULL && !own;
        *dispatch_flash_next(f) = w->flash_done;
        w->flash_done = f;
        pthread_mutex_unlock(&w->flash_lock);
        if (wake) {
            worker_notify(w, NOTIFY_FLASH);
        }
    }
    if (own) {
        event_active(w->ring_turn, EV_TIMEOUT, 0);
    }
}

/* On the worker: answer every read done, then let the connections write. */
static void
worker_flash_finish(struct worker *w)
{
    pthread_mutex_lock(&w->flash_lock);
    struct dispatch_flash *f = w->flash_done;
    w->flash_done = NULL;
    pthread_mutex_unlock(&w->flash_lock);
    while (f != NULL) {
        struct dispatch_flash *next = *dispatch_flash_next(f);
        struct conn *c = dispatch_flash_finish(f);
        if (c != NULL) {
            conn_kick(c);
        }
        f = next;
    }
}

/* Answers queued for this worker (its own done() calls wake nothing). */
static bool
worker_flash_pending(struct worker *w)
{
    pthread_mutex_lock(&w->flash_lock);
    bool any = w->flash_done != NULL;
    pthread_mutex_unlock(&w->flash_lock);
    return any;
}

/*
 * The ring's turn, an event of its own (made active by every read
 * prepared and every answer queued on the worker, by the ring's fd and by
 * the retry timer): the reads prepared since the last turn go to the
 * kernel together (a multi-get's, and those of the connections served
 * in the same pass of the loop), and every read finished is answered
 * (those of records in the page cache finished during the flush).
 * Answering may prepare more, or finish some at once (a connection
 * resumes its input: a record still in a write buffer is copied on the
 * spot), so it goes on until nothing is left to flush, reap or answer:
 * the loop must not sleep with reads the kernel has not got, or answers
 * nobody will wake it for. An event rather than a step after each pass:
 * a connection that yields stays active, and the pass would not end
 * while it does (a dump, a long pipeline).
 */
static void
worker_ring_turn(struct worker *w)
{
    static const struct timeval retry = { 0, 1000 };
    bool flushed;

    do {
        flushed = flash_ring_flush(w->ring);
        if (!flushed) {
            event_add(w->ring_turn, &retry);
        }
        flash_ring_reap(w->ring);
        worker_flash_finish(w);
    } while (flushed && (flash_ring_busy(w->ring) || worker_flash_pending(w)));
}

/* The ring's turn event (made active, or its retry timer) or its
 * descriptor (reads finished later). */
static void
worker_on_ring(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker_ring_turn(arg);
}

/*
 * Everything another thread asks of a worker comes through its pipe, so
 * libevent runs without its internal locks (no evthread_use_pthreads()).
 */
static void
worker_on_notify(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    int cfd;

    (void)what;
    while (read(fd, &cfd, sizeof(cfd)) == (ssize_t)sizeof(cfd)) {
        if (cfd == NOTIFY_STOP) {
            event_base_loopbreak(w->base);
            continue;
        }
        if (cfd == NOTIFY_FLASH) {
            worker_flash_finish(w);
            continue;
        }
        conn_tls_t tls = (cfd & NOTIFY_MTLS) != 0 ? CONN_TLS_MUTUAL :
                         (cfd & NOTIFY_TLS) != 0 ? CONN_TLS_ON : CONN_TLS_NONE;
        cfd &= ~(NOTIFY_TLS | NOTIFY_MTLS);
        struct conn *c = conn_new(cfd, w->base, &w->stats, &w->conns, tls);
        if (c != NULL) {
            conn_set_flash(c, worker_flash_notify, w, w->ring);
        } else {
            log_error("failed to set up connection %d", cfd);
            close(cfd);
            stats_conn_close();
        }
    }
}

static int
worker_notify(struct worker *w, int value)
{
    ssize_t n;

    do {
        n = write(w->notify_wr, &value, sizeof(value));
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(value) ? 0 : -1;
}

/*
 * More workers than CPUs to run them on (-t above the core count, or a
 * server pinned to fewer cores): a worker hands its CPU over after a long
 * batch of events instead of at the end of a scheduler time slice:
 * otherwise a request whose connection belongs to the other worker waits
 * up to a whole slice (notes/performance.md has the latencies). A short
 * batch (light load) ends in epoll_wait blocking anyway; yielding after it
 * too would cost CPU on every request. sched_yield() returns at once when
 * nothing else is runnable.
 */
#define YIELD_AFTER_NS 100000   /* a batch this long hands the CPU over */

static bool
workers_share_cpus(int nthreads)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return false;
    }
    return CPU_COUNT(&set) < nthreads;
}

/* The kernel cancels a thread's reads when it exits: they are waited for
 * on this thread and queued; worker_teardown answers them. */
static void
worker_ring_close(struct worker *w)
{
    if (w->ring != NULL) {
        flash_ring_close(w->ring);
    }
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;

    self = w;
    if (!yield_between_batches) {
        event_base_loop(w->base, 0);
        worker_ring_close(w);
        conn_pool_drain();
        return NULL;
    }
    /* The turn is timed from its first connection callback, not from the
     * loop call: the time blocked in epoll_wait is not work. */
    for (;;) {
        if (event_base_loop(w->base, EVLOOP_ONCE) != 0 || event_base_got_break(w->base)) {
            break;
        }
        uint64_t t0 = conn_turn_take();
        if (t0 != 0 && clock_mono_ns() - t0 >= YIELD_AFTER_NS) {
            sched_yield();
        }
    }
    worker_ring_close(w);
    conn_pool_drain();
    return NULL;
}

static void
worker_conns_stats(stats_emit_fn emit, void *ctx)
{
    listener_stats(emit, ctx);
    for (int i = 0; i < nworkers; i++) {
        conn_list_stats(&workers[i].conns, emit, ctx);
    }
}

static void
worker_on_idle_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    conn_kick_idle(&w->conns, (uint32_t)settings.idle_timeout);
}

/*
 * -o ext_io_uring: the worker's own read ring. Where the kernel (or the
 * build) has no io_uring, reads go through the I/O threads: worker_setup
 * says so, with the reason (err).
 */
static int
worker_ring_open(struct worker *w, char *err, size_t cap)
{
    if (!flash_enabled() || !settings.ext_io_uring) {
        return 0;
    }
    uint32_t depth = settings.ext_io_depth > 0 ? (uint32_t)settings.ext_io_depth
                                               : WORKER_RING_DEPTH;
    w->ring = flash_ring_open(depth, err, cap);
    if (w->ring == NULL) {
        return 0;
    }
    w->ring_ev = event_new(w->base, flash_ring_fd(w->ring), EV_READ | EV_PERSIST,
                           worker_on_ring, w);
    w->ring_turn = evtimer_new(w->base, worker_on_ring, w);
    return w->ring_ev != NULL && w->ring_turn != NULL && event_add(w->ring_ev, NULL) == 0
           ? 0 : -1;
}

static int
worker_init(struct worker *w, char *err, size_t cap)
{
    int fds[2];

    pthread_mutex_init(&w->conns.lock, NULL);
    pthread_mutex_init(&w->flash_lock, NULL);
    w->base = event_base_new();
    if (w->base == NULL || pipe(fds) != 0) {
        return -1;
    }
    w->notify_rd = fds[0];
    w->notify_wr = fds[1];
    fcntl(w->notify_rd, F_SETFL, O_NONBLOCK);
    w->notify_ev = event_new(w->base, w->notify_rd, EV_READ | EV_PERSIST,
                             worker_on_notify, w);
    if (w->notify_ev == NULL || event_add(w->notify_ev, NULL) != 0) {
        return -1;
    }
    if (settings.idle_timeout > 0) {
        struct timeval one_sec = { 1, 0 };
        w->idle_ev = event_new(w->base, -1, EV_PERSIST, worker_on_idle_tick, w);
        if (w->idle_ev == NULL || event_add(w->idle_ev, &one_sec) != 0) {
            return -1;
        }
    }
    stats_register_thread(&w->stats);
    for (int i = 0; i < listener_udp_count() && i < WORKER_UDP_MAX; i++) {
        w->udp[i] = udp_conn_new(listener_udp_fd(i), w->base, &w->stats);
        if (w->udp[i] == NULL) {
            return -1;
        }
    }
    return worker_ring_open(w, err, cap);
}

int
worker_setup(int nthreads)
{
    workers = calloc((size_t)nthreads, sizeof(*workers));
    if (workers == NULL) {
        return -1;
    }
    nworkers = nthreads;
    char err[256] = "";
    int norings = 0;
    for (int i = 0; i < nthreads; i++) {
        workers[i].notify_rd = workers[i].notify_wr = -1;
        if (worker_init(&workers[i], err, sizeof(err)) != 0) {
            return -1;
        }
        norings += workers[i].ring == NULL;
    }
    if (flash_enabled() && settings.ext_io_uring && norings > 0) {
        log_error("ext_io_uring: %d of %d workers have no io_uring (%s); their flash "
                  "reads go through the I/O threads (ext_threads)", norings, nthreads, err);
    }
    stats_set_conns_provider(worker_conns_stats);
    yield_between_batches = nthreads > 1 && workers_share_cpus(nthreads);
    conn_turn_timing(yield_between_batches);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]) != 0) {
            return -1;
        }
    }
    return 0;
}

void
worker_stop(void)
{
    for (int i = 0; i < nworkers; i++) {
        if (workers[i].tid != 0) {
            worker_notify(&workers[i], NOTIFY_STOP);
        }
    }
    for (int i = 0; i < nworkers; i++) {
        if (workers[i].tid != 0) {
            pthread_join(workers[i].tid, NULL);
            workers[i].tid = 0;
        }
    }
}

static void
worker_event_free(struct event *ev)
{
    if (ev != NULL) {
        event_free(ev);
    }
}

void
worker_teardown(void)
{
    worker_stop();
    for (int i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        /* Reads done after the loop stopped (the ring was closed as it
         * did); answering them may send more (completed at once now, as
         * misses: flash_read_submit, flash_ring_submit once closed). */
        while (w->flash_done != NULL) {
            worker_flash_finish(w);
        }
        conn_free_all(&w->conns);
        for (int k = 0; k < WORKER_UDP_MAX; k++) {
            udp_conn_free(w->udp[k]);
        }
        worker_event_free(w->ring_ev);
        worker_event_free(w->ring_turn);
        flash_ring_free(w->ring);
        worker_event_free(w->notify_ev);
        worker_event_free(w->idle_ev);
        if (w->base != NULL) {
            event_base_free(w->base);
        }
        if (w->notify_rd >= 0) {
            close(w->notify_rd);
            close(w->notify_wr);
        }
        pthread_mutex_destroy(&w->conns.lock);
        pthread_mutex_destroy(&w->flash_lock);
    }
    free(workers);
    workers = NULL;
    nworkers = 0;
}

int
worker_handoff(int fd, int tls)
{
    return worker_notify(&workers[atomic_fetch_add(&next_worker, 1) % (unsigned)nworkers],
                         fd | (tls == CONN_TLS_MUTUAL ? NOTIFY_MTLS :
                               tls == CONN_TLS_ON ? NOTIFY_TLS : 0));
}
