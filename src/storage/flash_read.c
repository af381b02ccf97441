/*
 * flash_read.c -- reads of flash records: from a write buffer still in
 * memory, or from the device, synchronously or queued to the I/O threads;
 * each checked against its slot's sequence number and its checksum
 * (flash_int.h for the shared state).
 */
#include "flash_int.h"

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"

/* --- reads ------------------------------------------------------------------- */

static struct wbuf *
wbuf_holding(uint32_t seq)
{
    for (uint32_t i = 0; i < fl.nwbuf; i++) {
        if (fl.wbufs[i].seq == seq) {
            return &fl.wbufs[i];
        }
    }
    return NULL;
}

/* Is this the record asked for, intact? */
static flash_read_status_t
rec_check(const struct flash_read *r, const struct flash_rec *h, const char *key)
{
    if (h->nkey != r->nkey || h->nbytes != r->nbytes) {
        return FLASH_READ_BADCRC;
    }
    if (r->key_only) {
        return FLASH_READ_OK;       /* no value, no checksum: the caller's */
    }
    if (memcmp(key, r->key, r->nkey) != 0 || flash_rec_crc(h, key, r->dst) != h->crc) {
        return FLASH_READ_BADCRC;
    }
    return FLASH_READ_OK;
}

/* Bytes a device read of r must bring back. */
static size_t
read_want(const struct flash_read *r)
{
    return sizeof(struct flash_rec) + r->nkey + (r->key_only ? 0 : r->nbytes);
}

/* Its vectors: the header and key, then the value unless key_only. */
int
flash_read_niov(const struct flash_read *r)
{
    return r->key_only ? 1 : 2;
}

/* A record still in a write buffer: 1 copied, 0 not buffered (lock held). */
static int
read_buffered(struct flash_read *r)
{
    struct wbuf *w = wbuf_holding(r->loc.seq);

    if (w == NULL) {
        return 0;
    }
    if ((uint64_t)r->loc.off + read_want(r) > w->used) {
        return -1;
    }
    memcpy(r->rec, w->mem + r->loc.off, sizeof(struct flash_rec) + r->nkey);
    if (!r->key_only) {
        memcpy(r->dst, w->mem + r->loc.off + sizeof(struct flash_rec) + r->nkey, r->nbytes);
    }
    return 1;
}

/*
 * First half of any read: a record reclaimed is a miss and one still in a
 * write buffer is copied now (FLASH_READ_OK, not yet checked); otherwise
 * r's vectors are set up for a device read at *at (-1 returned as the
 * status: not finished).
 */
int
flash_read_start(struct flash_read *r, off_t *at)
{
    if (!flash_loc_valid(&r->loc)) {
        return FLASH_READ_GONE;
    }
    pthread_mutex_lock(&fl.lock);
    int buffered = read_buffered(r);
    pthread_mutex_unlock(&fl.lock);
    if (buffered != 0) {
        return buffered < 0 ? FLASH_READ_BADCRC : FLASH_READ_OK;
    }
    if ((uint64_t)r->loc.off + read_want(r) > fl.slab_size) {
        return FLASH_READ_BADCRC;
    }
    r->iov[0] = (struct iovec){ r->rec, sizeof(struct flash_rec) + r->nkey };
    r->iov[1] = (struct iovec){ r->dst, r->nbytes };   /* unused if key_only */
    *at = (off_t)(r->loc.seq % fl.nslabs) * fl.slab_size + r->loc.off;
    return -1;
}

/* A device read of r returned n (or -errno): is it the record, intact? */
flash_read_status_t
flash_read_device_done(const struct flash_read *r, ssize_t n)
{
    if (!flash_loc_valid(&r->loc)) {
        return FLASH_READ_GONE;     /* reclaimed while it was read */
    }
    if (n < 0 || (size_t)n != read_want(r)) {
        flash_fault_note(n < 0 ? FAULT_READ : FAULT_READ_SHORT, n < 0 ? (int)-n : 0,
                   "flash slab %" PRIu32 " offset %" PRIu32 ", %zd of %zu bytes read",
                   r->loc.seq, r->loc.off, n < 0 ? (ssize_t)0 : n, read_want(r));
        return FLASH_READ_EIO;
    }
    return FLASH_READ_OK;
}

/* Last half of any read: check the bytes, count them, set r->status. */
flash_read_status_t
flash_read_finish(struct flash_read *r, flash_read_status_t st)
{
    if (st == FLASH_READ_OK) {
        struct flash_rec h;
        memcpy(&h, r->rec, sizeof(h));
        st = rec_check(r, &h, r->rec + sizeof(h));
        if (st == FLASH_READ_BADCRC) {
            flash_fault_note(FAULT_BADCRC, 0, "flash slab %" PRIu32 " offset %" PRIu32,
                       r->loc.seq, r->loc.off);
        }
        if (st == FLASH_READ_OK && r->key_only) {
            memcpy(r->key, r->rec + sizeof(h), r->nkey);
        }
    }
    /* A dump's key read is not an object read (memcached's dump reads
     * nothing from extstore): extstore_objects_read stays gets' figure. */
    if (st == FLASH_READ_OK && !r->key_only) {
        atomic_fetch_add(&fl.objects_read, 1);
        atomic_fetch_add(&fl.bytes_read, read_want(r));
    }
    return r->status = st;
}

flash_read_status_t
flash_read_sync(struct flash_read *r)
{
    off_t at = 0;
    int st = flash_read_start(r, &at);
    ssize_t n;

    if (st >= 0) {
        return flash_read_finish(r, (flash_read_status_t)st);
    }
    do {
        n = preadv(fl.fd, r->iov, flash_read_niov(r), at);
    } while (n < 0 && errno == EINTR);
    return flash_read_finish(r, flash_read_device_done(r, n < 0 ? -errno : n));
}

void
flash_read_submit(struct flash_read *r)
{
    r->next = NULL;
    pthread_mutex_lock(&fl.io_lock);
    if (fl.io_stop) {
        /* shutting down: no thread will read it; done now, as a miss */
        pthread_mutex_unlock(&fl.io_lock);
        r->status = FLASH_READ_GONE;
        r->done(r);
        return;
    }
    if (fl.io_tail != NULL) {
        fl.io_tail->next = r;
    } else {
        fl.io_head = r;
    }
    fl.io_tail = r;
    fl.io_queued++;
    pthread_cond_signal(&fl.io_cond);
    pthread_mutex_unlock(&fl.io_lock);
}

void *
flash_io_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fl.io_lock);
    for (;;) {
        while (fl.io_head == NULL && !fl.io_stop) {
            pthread_cond_wait(&fl.io_cond, &fl.io_lock);
        }
        if (fl.io_head == NULL) {
            break;
        }
        struct flash_read *r = fl.io_head;
        fl.io_head = r->next;
        if (fl.io_head == NULL) {
            fl.io_tail = NULL;
        }
        fl.io_queued--;
        pthread_mutex_unlock(&fl.io_lock);
        flash_read_sync(r);
        r->done(r);
        pthread_mutex_lock(&fl.io_lock);
    }
    pthread_mutex_unlock(&fl.io_lock);
    return NULL;
}

