/*
 * dispatch_flash.c -- answering a fetch whose item is on flash (a stub,
 * item.h ITEM_FLASH) without blocking the worker.
 *
 * The fetch composes its answer as for a RAM hit, then what a miss would
 * answer; both are taken back from the output queue and queued again as
 * one waiting answer (outq_add_wait) that holds the hit's header with room
 * for the value behind it. The queue keeps everything after the waiting
 * answer unsent, so answers leave in request order while later requests
 * are parsed and answered meanwhile. The read goes to the worker's ring when it has one (no
 * thread hop), else to the flash tier's I/O threads. When it is done the
 * ring's reaper (the worker) or the I/O thread hands it back through
 * the connection's notify function (core) to the worker, which calls
 * dispatch_flash_finish(): the answer becomes the hit, or the miss if the
 * record was gone or bad, and the connection writes again.
 *
 * A dump's line of a flash item (dispatch_flash_dump) is a waiting answer
 * the same way: its record's key is read (key only), and the line is
 * composed when it is back.
 *
 * The answer object is shared by the output queue (its reference, tagged
 * in the pointer's low bit) and the read in flight; both are released on
 * the worker thread, so a plain count suffices. A connection that closes
 * or takes the answer back (a multi-get ending in an error) releases its
 * reference first; the read's completion then just frees it.
 */
#include "dispatch.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cache.h"
#include "flash.h"
#include "item.h"
#include "outq.h"
#include "settings.h"
#include "stats.h"

struct dispatch_flash {
    struct flash_read        rd;        /* first: the reader's view */
    dispatch_flash_notify_fn notify;
    void                    *owner;
    void                    *conn;
    struct dispatch_flash   *done_next; /* the owner's queue of reads done */
    struct outq             *out;       /* NULL once the queue let go */
    struct stats_thread     *stats;
    uint32_t                 seg;
    uint32_t                 nhdr;      /* the hit: buf[0, nhdr + send) */
    uint32_t                 send;
    uint32_t                 nmiss;     /* the miss: buf[nhdr + nbytes, +nmiss) */
    struct item_dump        *dump;      /* a dump's line: its item; else NULL */
    uint32_t                *held;      /* a dump's: its connection's count */
    dispatch_dump_t          dump_kind;
    int                      refs;
    char                     buf[];
};

#define FLASH_REF_TAG ((uintptr_t)1)

struct dispatch_flash **
dispatch_flash_next(struct dispatch_flash *f)
{
    return &f->done_next;
}

bool
dispatch_ref_is_flash(void *ref)
{
    return ((uintptr_t)ref & FLASH_REF_TAG) != 0;
}

static void
flash_unref(struct dispatch_flash *f)
{
    if (--f->refs == 0) {
        free(f->dump);
        free(f);
    }
}

void
dispatch_flash_release(void *ref)
{
    struct dispatch_flash *f = (struct dispatch_flash *)((uintptr_t)ref & ~FLASH_REF_TAG);

    if (f->held != NULL) {
        (*f->held)--;               /* sent, or the connection let go */
    }
    f->out = NULL;
    flash_unref(f);
}

/* On an I/O thread, or on the worker reaping its ring. */
static void
flash_read_done(struct flash_read *r)
{
    struct dispatch_flash *f = (struct dispatch_flash *)r;

    f->notify(f->owner, f);
}

/*
 * Reads again soon (ext_recache_hot): one slot per record location, a
 * location's tag written on a read and found by the next read of the same
 * record while no read of another record has taken the slot: a window of
 * about RECACHE_SLOTS flash reads. A key read twice in it is hot (under
 * Zipf gets, most of the reads) and belongs in RAM; one read once in a
 * while (uniform gets over a working set far larger than RAM) stays on
 * flash, as copying each back would evict another value to flash for
 * every read. Shared by the workers; a race between two of them loses or
 * adds one copy back, never a value. 256 KB.
 */
#define RECACHE_SLOTS_LOG2 16
static _Atomic uint32_t recache_seen[1u << RECACHE_SLOTS_LOG2];

static bool
flash_read_again(const struct flash_loc *loc)
{
    /* A location names one record until its flash slab is reused, and the
     * sequence number then differs. splitmix64's finalizer spreads it. */
    uint64_t h = ((uint64_t)loc->seq << 32) | loc->off;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    _Atomic uint32_t *slot = &recache_seen[h >> (64 - RECACHE_SLOTS_LOG2)];
    uint32_t tag = (uint32_t)h | 1u;    /* 0: an empty slot */

    if (atomic_load_explicit(slot, memory_order_relaxed) == tag) {
        atomic_store_explicit(slot, 0, memory_order_relaxed);
        return true;
    }
    atomic_store_explicit(slot, tag, memory_order_relaxed);
    return false;
}

/*
 * ext_recache_rate: every Nth value read from flash by this worker is
 * copied back to RAM (memcached's rule), and with ext_recache_hot every
 * value read again soon, so a key read often does not stay on the device.
 * Allocation may evict (so, perhaps, write others to flash): this runs on
 * the worker, holding no lock.
 */
static _Thread_local uint32_t reads_since_recache;

static void
flash_recache(struct dispatch_flash *f)
{
    uint32_t rate = (uint32_t)__atomic_load_n(&settings.ext_recache_rate, __ATOMIC_RELAXED);
    struct item *it;

    if (rate == 0) {
        return;
    }
    bool nth = ++reads_since_recache >= rate;
    bool hot = settings.ext_recache_hot && flash_read_again(&f->rd.loc);
    if (!nth && !hot) {
        return;
    }
    if (nth) {
        reads_since_recache = 0;
    }
    /* Another read of the key may have copied it back already (pipelined
     * gets of one hot key): then the allocation would be for nothing. */
    if (!item_flash_is_at(f->rd.key, f->rd.nkey, f->rd.cas, f->rd.nbytes, &f->rd.loc)) {
        return;
    }
    if (cache_alloc_nowait(f->rd.key, f->rd.nkey, 0, 0, f->rd.nbytes - 2, &it) != ITEM_OK) {
        return;
    }
    item_value_write(it, 0, f->rd.dst, f->rd.nbytes);
    if (item_flash_promote(it, f->rd.cas, &f->rd.loc) == ITEM_OK) {
        STATS_INCR(f->stats, recache_from_extstore);
    }
    item_release(it);
}

/* A dump's line: composed if the key came back, else nothing. */
static void *
flash_dump_finish(struct dispatch_flash *f)
{
    void *conn = NULL;

    if (f->out != NULL) {
        size_t len = 0;
        if (item_dump_key_read(f->dump, &f->rd)) {
            len = admin_dump_line(f->dump, f->dump_kind, f->buf, DISPATCH_DUMP_LINE_MAX);
        }
        outq_ready(f->out, f->seg, len);
        conn = f->conn;
    }
    flash_unref(f);
    return conn;
}

void *
dispatch_flash_finish(struct dispatch_flash *f)
{
    void *conn = NULL;

    if (f->dump != NULL) {
        return flash_dump_finish(f);
    }
    if (f->rd.status == FLASH_READ_OK) {
        flash_recache(f);
    }
    if (f->out != NULL) {
        if (f->rd.status == FLASH_READ_OK) {
            outq_ready(f->out, f->seg, (size_t)f->nhdr + f->send);
        } else {
            STATS_INCR(f->stats, miss_from_extstore);
            if (f->rd.status == FLASH_READ_BADCRC) {
                STATS_INCR(f->stats, badcrc_from_extstore);
            }
            memmove(f->buf, f->buf + f->nhdr + f->rd.nbytes, f->nmiss);
            outq_ready(f->out, f->seg, f->nmiss);
        }
        conn = f->conn;
    }
    flash_unref(f);
    return conn;
}

/*
 * Queue f as a waiting answer of n bytes (from f->buf) in d's output, its
 * read to be done: false if the queue refused it (f freed).
 */
static bool
flash_queue(struct dispatch_ctx *d, struct dispatch_flash *f, size_t n)
{
    f->rd.done = flash_read_done;
    f->notify = d->flash_notify;
    f->owner = d->flash_owner;
    f->conn = d->flash_conn;
    f->stats = d->stats;
    f->out = d->out;
    f->refs = 2;                    /* the queue's and the read's */
    int64_t seg = outq_add_wait(d->out, f->buf, n, (void *)((uintptr_t)f | FLASH_REF_TAG));
    if (seg < 0) {
        free(f->dump);
        free(f);                    /* released by the queue: refs 1 */
        return false;
    }
    f->seg = (uint32_t)seg;
    return true;
}

/* Start f's read: on the worker's ring, else on the I/O threads; with no
 * event loop to come back to, here and now. */
static void
flash_submit(struct dispatch_ctx *d, struct dispatch_flash *f)
{
    if (f->notify == NULL) {
        flash_read_sync(&f->rd);
        (void)dispatch_flash_finish(f);
        return;
    }
    if (d->flash_ring != NULL) {
        flash_ring_submit(d->flash_ring, &f->rd);
        d->flash_notify(d->flash_owner, NULL);  /* the ring's turn flushes it */
    } else {
        flash_read_submit(&f->rd);
    }
}

void
dispatch_flash_reply(struct dispatch_ctx *d, struct item *it, const char *key,
                     size_t nkey, uint64_t hit, uint64_t miss, uint32_t send)
{
    uint64_t end = outq_mark(d->out);
    size_t nhdr = (size_t)(miss - hit), nmiss = (size_t)(end - miss);
    struct dispatch_flash *f = malloc(sizeof(*f) + nhdr + it->nbytes + nmiss);

    if (f == NULL || !item_flash_read_init(it, key, nkey, &f->rd)) {
        free(f);
        item_release(it);
        outq_rollback(d->out, hit);         /* the header alone cannot stand */
        return;
    }
    item_release(it);
    outq_copy_since(d->out, hit, f->buf);
    memmove(f->buf + nhdr + f->rd.nbytes, f->buf + nhdr, nmiss);
    outq_rollback(d->out, hit);
    f->rd.dst = f->buf + nhdr;
    f->nhdr = (uint32_t)nhdr;
    f->send = send;
    f->nmiss = (uint32_t)nmiss;
    f->dump = NULL;
    f->held = NULL;
    if (flash_queue(d, f, nhdr + (size_t)f->rd.nbytes + nmiss)) {
        STATS_INCR(d->stats, get_extstore);
        flash_submit(d, f);
    }
}

void
dispatch_flash_dump(struct dispatch_ctx *d, const struct item_dump *it)
{
    struct dispatch_flash *f = malloc(sizeof(*f) + DISPATCH_DUMP_LINE_MAX);
    struct item_dump *copy = malloc(sizeof(*copy));

    if (f == NULL || copy == NULL) {
        free(f);
        free(copy);
        return;                     /* not listed, as an item moved meanwhile */
    }
    *copy = *it;
    memset(&f->rd, 0, sizeof(f->rd));
    item_dump_read_init(copy, &f->rd);
    f->rd.dst = NULL;               /* key only */
    f->nhdr = f->send = f->nmiss = 0;
    f->dump = copy;
    f->dump_kind = d->dump.kind;
    f->held = &d->dump.flash_held;
    d->dump.flash_held++;           /* the queue's release counts it down */
    if (flash_queue(d, f, DISPATCH_DUMP_LINE_MAX)) {
        flash_submit(d, f);
    }
}
