/*
 * flash_write.c -- the flash tier's writer thread: it writes each sealed
 * buffer to its slot, rescues a slab's read records (offering them for
 * rewriting) before the slab ahead of it is reclaimed, and tells
 * appenders when there is room (flash_int.h for the shared state).
 */
#include "flash_int.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* --- the writer -------------------------------------------------------------- */

/*
 * Write buf to the flash file at `at`, or read it from there, whole: the
 * bytes moved, fewer if the device failed (*err its errno) or ended (0).
 */
static size_t
io_whole(bool write, char *buf, size_t len, off_t at, int *err)
{
    size_t done = 0;

    *err = 0;
    while (done < len) {
        ssize_t n = write ? pwrite(fl.fd, buf + done, len - done, at + (off_t)done)
                          : pread(fl.fd, buf + done, len - done, at + (off_t)done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            *err = n < 0 ? errno : 0;
            break;
        }
        done += (size_t)n;
    }
    return done;
}

/*
 * The device took slot s's slab whole (ok), or did not (lock held). Its
 * records count as written only then; a slab the device refused is gone:
 * its records are dropped (extstore_objects_dropped), no longer live, and
 * the slot holds none, so nothing of it is read, offered or counted
 * again. The next lap writes the slot afresh: writing resumes by itself
 * once the device takes writes again.
 */
static void
slot_write_done(struct flash_slot *s, uint32_t seq, bool ok)
{
    if (atomic_load(&s->seq) != seq) {
        return;                 /* cannot be: flash_slot_ready keeps it until written */
    }
    if (ok) {
        fl.st.extstore_objects_written += s->nobj;
        fl.st.extstore_bytes_written += s->bytes;
    } else {
        fl.records_live -= s->nobj;
        atomic_fetch_add_explicit(&fl.dropped, s->nobj, memory_order_relaxed);
        s->nobj = 0;
        s->bytes = 0;
    }
    atomic_store_explicit(&s->state, ok ? SLOT_WRITTEN : SLOT_FAILED, memory_order_release);
}

static void
writer_write(struct wbuf *w)
{
    struct flash_slot *s = flash_slot_of(w->seq);
    uint64_t len = ((uint64_t)w->used + FLASH_WRITE_UNIT - 1) & ~(uint64_t)(FLASH_WRITE_UNIT - 1);
    off_t at = (off_t)(w->seq % fl.nslabs) * fl.slab_size;
    uint32_t expect = SLOT_BUFFERED;
    int err;

    if (len > fl.slab_size) {
        len = fl.slab_size;
    }
    memset(w->mem + w->used, 0, (size_t)(len - w->used));
    atomic_compare_exchange_strong(&s->state, &expect, SLOT_WRITING);
    size_t done = io_whole(true, w->mem, (size_t)len, at, &err);
    if (done != len) {
        flash_fault_note(flash_fault_of(done, err, FAULT_WRITE, FAULT_WRITE_SHORT), err,
                   "flash slab %" PRIu32 ", %zu of %" PRIu64 " bytes at offset %lld written",
                   w->seq, done, len, (long long)at);
    }
    pthread_mutex_lock(&fl.lock);
    slot_write_done(s, w->seq, done == len);
    w->seq = 0;                 /* free again */
    pthread_cond_broadcast(&fl.wcond);
    pthread_mutex_unlock(&fl.lock);
}

/*
 * Offer the records of the slab the next buffer will reclaim to the
 * rewrite function (see flash.h), once per slab. Read back from the file
 * into the writer's scratch buffer; records that fail their checksum are
 * skipped (the read path would refuse them too). The slot is not reused
 * before that copy is made (flash_slot_ready).
 */
static void writer_offer(flash_rewrite_fn fn, uint32_t seq, uint32_t bytes);

/*
 * A slab of the page the next page start will reclaim still to be offered,
 * or NULL (lock held). Offered while the page before it fills, not once
 * its start is due: appenders (and the rewrites themselves) would wait for
 * the offers of a whole page at every page boundary.
 */
static struct flash_slot *
rescue_due(void)
{
    bool starts;
    uint32_t idx = fl.next_seq % fl.nslabs;
    uint32_t to_start = (fl.page_slabs - idx % fl.page_slabs) % fl.page_slabs;
    uint32_t first = flash_page_first(idx + to_start, &starts);    /* <= nslabs: no overflow */

    if (atomic_load(&fl.rewrite) == NULL) {
        return NULL;
    }
    for (uint32_t i = first; i < first + fl.page_slabs; i++) {
        struct flash_slot *s = &fl.slots[i];
        if (atomic_load(&s->seq) != 0 && atomic_load(&s->state) == SLOT_WRITTEN &&
            !s->offered) {
            return s;
        }
    }
    return NULL;
}

/* Read a written slab's bytes back into the scratch buffer; a device that
 * fails or comes up short loses its records (they are not offered). */
static bool
rescue_read(uint32_t seq, uint32_t bytes, off_t at)
{
    int err;
    size_t done = io_whole(false, fl.scratch, bytes, at, &err);

    if (done != bytes) {
        flash_fault_note(flash_fault_of(done, err, FAULT_READ, FAULT_READ_SHORT), err,
                   "flash slab %" PRIu32 " read back for rewriting, %zu of %" PRIu32
                   " bytes at offset %lld", seq, done, bytes, (long long)at);
    }
    return done == bytes;
}

static void
writer_rescue(void)
{
    flash_rewrite_fn fn = atomic_load(&fl.rewrite);

    pthread_mutex_lock(&fl.lock);
    struct flash_slot *s = fn != NULL ? rescue_due() : NULL;
    uint32_t seq = s != NULL ? atomic_load(&s->seq) : 0;
    uint32_t bytes = s != NULL ? (uint32_t)s->bytes : 0;
    pthread_mutex_unlock(&fl.lock);
    if (s == NULL) {
        return;
    }
    off_t at = (off_t)(seq % fl.nslabs) * fl.slab_size;
    assert(bytes <= fl.slab_size);  /* the scratch buffer's size: slot_write_done */
    bool copied = bytes > 0 && rescue_read(seq, bytes, at);
    /* Copied: the slot may be reclaimed now, by this thread's own appends
     * of rewritten records too (each record's stub is checked to still
     * point at it before it moves). */
    pthread_mutex_lock(&fl.lock);
    if (atomic_load(&s->seq) == seq) {
        s->offered = true;
    }
    pthread_cond_broadcast(&fl.wcond);
    pthread_mutex_unlock(&fl.lock);
    if (copied) {
        atomic_store(&fl.offering_seq, seq);
        writer_offer(fn, seq, bytes);
        atomic_store(&fl.offering_seq, 0);
    }
}

/* Offer the records read back into the scratch buffer. */
static void
writer_offer(flash_rewrite_fn fn, uint32_t seq, uint32_t bytes)
{
    uint32_t budget = atomic_load(&fl.rewrite_budget), rescued = 0, skipped = 0;
    for (uint32_t off = 0; off + sizeof(struct flash_rec) <= bytes;) {
        struct flash_rec h;
        memcpy(&h, fl.scratch + off, sizeof(h));
        uint32_t len = flash_rec_size(h.nkey, h.nbytes);
        if (h.nbytes == 0 || len > bytes - off) {
            break;
        }
        const char *key = fl.scratch + off + sizeof(h), *value = key + h.nkey;
        struct flash_rec_view v = { key, h.nkey, value, h.nbytes, h.flags, h.cas,
                                    { seq, off } };
        if (flash_rec_crc(&h, key, value) != h.crc) {
            flash_fault_note(FAULT_BADCRC, 0, "flash slab %" PRIu32 " offset %" PRIu32
                       " read back for rewriting", seq, off);
        } else {
            uint32_t w = len <= budget ? fn(&v, budget) : 0;
            if (w > 0) {
                budget -= w < budget ? w : budget;
                rescued++;
            } else if (len > budget) {
                skipped++;
            }
        }
        off += len;
    }
    pthread_mutex_lock(&fl.lock);
    fl.st.extstore_compact_rescues += rescued;
    fl.st.extstore_compact_skipped += skipped;
    pthread_mutex_unlock(&fl.lock);
}

void *
flash_writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fl.lock);
    for (;;) {
        while (fl.whead == NULL && !fl.stop && !rescue_due()) {
            pthread_cond_wait(&fl.wcond, &fl.lock);
        }
        if (fl.whead == NULL && rescue_due() && !fl.stop) {
            /* a buffer was started since the last write: offer the slab
             * the next one will reclaim now, not after the next write
             * (appenders wait for it: flash_slot_ready) */
            fl.writing = true;
            pthread_mutex_unlock(&fl.lock);
            writer_rescue();
            pthread_mutex_lock(&fl.lock);
            fl.writing = false;
            pthread_cond_broadcast(&fl.wcond);
            continue;
        }
        if (fl.whead == NULL) {
            break;
        }
        struct wbuf *w = fl.whead;
        fl.whead = w->next;
        if (fl.whead == NULL) {
            fl.wtail = NULL;
        }
        fl.writing = true;
        pthread_mutex_unlock(&fl.lock);
        writer_write(w);
        writer_rescue();
        pthread_mutex_lock(&fl.lock);
        fl.writing = false;     /* flash_sync: written and rescued */
        pthread_cond_broadcast(&fl.wcond);
    }
    pthread_mutex_unlock(&fl.lock);
    return NULL;
}

/* A record of len bytes fits without waiting for the writer (lock held). */
static bool
room_for(uint32_t len)
{
    if (len > fl.slab_size) {
        return false;
    }
    if (fl.cur != NULL && fl.cur->used + len <= fl.slab_size) {
        return true;
    }
    return flash_wbuf_take_free() != NULL && flash_slot_ready(fl.next_seq);
}

/* A record of up to a quarter slab fits (lock held). */
static bool
flash_has_room(void)
{
    return room_for(fl.slab_size / 4);
}

bool
flash_wait_room(uint32_t timeout_ms)
{
    struct timespec until;
    bool room;

    if (!fl.on) {
        return true;
    }
    clock_deadline(&until, timeout_ms);
    pthread_mutex_lock(&fl.lock);
    if (!flash_has_room()) {
        fl.st.extstore_writer_waits++;
    }
    while (!(room = flash_has_room()) && !fl.stop &&
           pthread_cond_timedwait(&fl.wcond, &fl.lock, &until) == 0) {
    }
    pthread_mutex_unlock(&fl.lock);
    return room;
}

bool
flash_room(uint32_t len)
{
    bool room;

    if (!fl.on) {
        return false;
    }
    pthread_mutex_lock(&fl.lock);
    room = room_for(len);
    pthread_mutex_unlock(&fl.lock);
    return room;
}

void
flash_sync(void)
{
    if (!fl.on) {
        return;
    }
    pthread_mutex_lock(&fl.lock);
    flash_wbuf_seal();
    while (fl.whead != NULL || fl.writing) {
        pthread_cond_wait(&fl.wcond, &fl.lock);
    }
    pthread_mutex_unlock(&fl.lock);
}

