/*
 * flash.h -- the flash tier's log: items evicted from RAM live on in a
 * file (an SSD), written whole and in order as flash slabs, fatcache's
 * design; memcached's extstore is the compatible face (-o ext_path).
 *
 * The file is a ring of flash slabs. Records (an evicted item's key,
 * value, flags and CAS under a checksum) are appended to a write buffer
 * the size of a flash slab; a full buffer is written by the writer thread
 * with one sequential write into the next slab of the ring. Slabs carry a
 * sequence number (log order): writing slab s reclaims the slab of s -
 * nslabs, FIFO, so every record in it dies at once, without an index
 * walk. With ext_page_size, pages of several slabs are reclaimed whole:
 * the slab that starts a page reclaims the page. RAM keeps a stub per flash-resident item (item.h, ITEM_FLASH)
 * whose value is a struct flash_loc; a stub whose slab has been reclaimed
 * (or failed to write) is dead, and dropped as an expired item is.
 *
 * A worker's event loop never waits for the device. Each worker may own
 * a read ring (io_uring, ext_io_uring): flash_ring_submit() prepares the
 * read on the worker itself, flash_ring_flush() hands the reads prepared
 * since the last flush to the kernel together, and flash_ring_reap(), run
 * by the worker (core/worker.c: the ring's turn), calls done() on the
 * worker. Without a ring, reads go through a small pool of I/O threads
 * (ext_threads): flash_read_submit() queues a request and the pool calls
 * done() on an I/O thread. Either way done() comes when the
 * bytes are in, checked (key, length, checksum) and known valid;
 * records still in a write buffer are copied from memory. Storage never
 * touches sockets: done() is how the caller learns.
 *
 * Why a ring: a read through the pool costs two thread hand-offs (a
 * futex wake to the reader, a pipe write back), about half of a flash
 * hit's time when the record is in the page cache (notes/flash.md); with
 * the ring the worker submits and reaps itself.
 *
 * The file is a cache: it is truncated to its size at start, and nothing
 * in it is read back after a restart -- unless the start is a warm restart
 * (restart.h) that kept the RAM stubs pointing into it: the slot table
 * saved by the graceful stop then comes back (flash_state_restore), and
 * the file is kept as it is.
 */
#ifndef SC_FLASH_H
#define SC_FLASH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Where a record lives: a stub's value (8 bytes). */
struct flash_loc {
    uint32_t seq;               /* flash slab, in log order (0: none) */
    uint32_t off;               /* the record's offset in it */
};

typedef enum flash_rstatus {
    FLASH_OK,
    FLASH_EINVAL,               /* bad path or size: message in the error buffer */
    FLASH_EIO,                  /* could not create, open or size the file */
    FLASH_ENOMEM,
} flash_rstatus_t;

struct flash_options {
    const char *path;
    uint64_t    size;           /* bytes */
    uint32_t    slab_size;      /* bytes per flash slab = write buffer (ext_wbuf_size) */
    uint64_t    page_size;      /* bytes reclaimed together, a multiple of
                                   slab_size (ext_page_size); 0: one slab */
    uint32_t    wbufs;          /* write buffers: one filling, the rest queued */
    uint32_t    free_pages;     /* ext_compact_under - 1 pages kept free ahead
                                   of the writer (0: reclaim when needed) */
    double      rewrite_share;  /* ext_max_frag: share of a reclaimed page its
                                   read records may fill when rewritten */
    uint32_t    io_threads;     /* ext_threads */
    uint32_t    io_depth;       /* ext_io_depth: blocking readers per I/O thread */
    uint32_t    min_value;      /* ext_item_size: smaller values are not kept */
    bool        drop_unread;    /* ext_drop_unread: items never read are not kept */
    bool        keep;           /* a warm restart: keep the file's contents if its
                                   size is unchanged (flash_state_restore) */
};

/* "FILE:SIZE" (k/m/g/t suffixes) as memcached's ext_path takes it. */
flash_rstatus_t flash_parse_path(const char *spec, char *path, size_t cap,
                                 uint64_t *size, char *err, size_t errcap);
flash_rstatus_t flash_setup(const struct flash_options *o, char *err, size_t errcap);
/* Finish the reads queued (each done() is called) and stop the I/O
 * threads; reads may not be submitted after. flash_teardown() does it
 * too; the server calls it early, while the workers that get the reads
 * back still exist (main.c). */
void            flash_stop_reads(void);
void            flash_teardown(void);
bool            flash_enabled(void);
uint32_t        flash_min_value(void);
uint32_t        flash_slab_size(void);
bool            flash_drop_unread(void);
/* Run-time changes (the `extstore` command): ext_item_size, ext_drop_unread,
 * ext_max_frag (share in [0, 1]). No effect while the tier is off. */
void            flash_set_min_value(uint32_t bytes);
void            flash_set_drop_unread(bool on);
void            flash_set_rewrite_share(double share);

/*
 * Append a record for an item being evicted. Called with the item's
 * partition and class locks held, so it only copies (no I/O, no storage
 * lock): false when the write buffers are all waiting for the writer, or
 * the record is larger than a flash slab (the item is then dropped).
 */
bool            flash_append(const char *key, uint8_t nkey, const char *value,
                             uint32_t nbytes, uint32_t flags, uint64_t cas,
                             struct flash_loc *out);

/*
 * Wait (at most timeout_ms) until the write buffers can take a record:
 * for a caller about to evict, holding no lock, so that a burst of
 * writes is slowed to what the device absorbs instead of evicting items
 * the writer has no room for. false: still no room.
 */
bool            flash_wait_room(uint32_t timeout_ms);

/* Whether a record of len bytes can be appended now (no stats counted). */
bool            flash_room(uint32_t len);

/* A stub was linked (+) or unlinked (-): records RAM still points at
 * (extstore_objects_used, extstore_bytes_used). */
void            flash_note_used(int64_t objects, int64_t bytes);

/* An item that was to be kept was dropped: no chunk for its stub. */
void            flash_note_dropped(void);

/*
 * Before the writer reuses the oldest flash slab it reads it back and
 * offers each intact record still valid to the rewrite function (set by
 * the item layer, item_flash.c), which may append it again (flash_append)
 * and repoint its stub. It runs on the writer thread, holding no flash
 * lock; budget is how many bytes this slab may still have rewritten (a
 * quarter of a slab, so rewriting never writes more than 1.25 bytes per
 * byte evicted). Returns the bytes it appended (0: the record goes).
 */
struct flash_rec_view {
    const char      *key;
    uint8_t          nkey;
    const char      *value;
    uint32_t         nbytes;
    uint32_t         flags;
    uint64_t         cas;
    struct flash_loc loc;
};
typedef uint32_t (*flash_rewrite_fn)(const struct flash_rec_view *r, uint32_t budget);
void            flash_set_rewrite(flash_rewrite_fn fn);
/* The bytes a record of this shape takes on flash. */
uint32_t        flash_rec_len(uint8_t nkey, uint32_t nbytes);

/* A record at loc may still be read (not reclaimed, not failed). */
bool            flash_loc_valid(const struct flash_loc *loc);
/* ... or its slab is being offered for rewriting right now: a stub
 * pointing there is not dead yet (it may be moved in a moment), though
 * a read of it fails. */
bool            flash_loc_alive(const struct flash_loc *loc);
/* Records in flash slabs that may still be read: what live stubs can
 * point at (an index bigger than this holds dead stubs). */
uint64_t        flash_records_live(void);
/* Stubs linked now (extstore_objects_used), cheaply. */
uint64_t        flash_objects_used(void);

typedef enum flash_read_status {
    FLASH_READ_OK,
    FLASH_READ_GONE,            /* reclaimed or failed to write: a miss */
    FLASH_READ_EIO,             /* the read failed or came back short */
    FLASH_READ_BADCRC,          /* bytes that are not the record asked for */
} flash_read_status_t;

/*
 * One read: the value (nbytes, with its "\r\n") of the record at loc,
 * which must be the one of this key and length, into dst. A location
 * names one record (it is written once, and checked still valid after the
 * read), so the CAS is not asked of it: it is the stub's, which `md I`
 * changes; cas is the caller's note of the stub read. Filled in by the
 * caller; status set before done() runs (on an I/O thread, or on the
 * ring's thread).
 */
struct flash_read {
    struct flash_loc    loc;
    char                key[256];
    uint8_t             nkey;
    uint32_t            nbytes;
    uint64_t            cas;    /* not read by the flash tier: the caller's note */
    bool                key_only;   /* a dump's: the record's header and key
                                       only, the key copied into key; no
                                       value, so no checksum: the caller
                                       checks the key (against hashes) */
    char               *dst;
    flash_read_status_t status;
    void              (*done)(struct flash_read *r);
    struct flash_read  *next;   /* the pool's or ring's queue; then the caller's */
    /* the reader's own (flash_read.c, flash_ring.c): where a device read puts the record's header and
     * key (checked against key and nkey), and the value (dst) */
    struct iovec        iov[2];
    char                rec[24 + 255];
};

/* Queue r for the I/O threads. */
void            flash_read_submit(struct flash_read *r);

/*
 * A worker's read ring (io_uring). flash_ring_open() returns NULL, with
 * the reason in err, where the kernel or the build has no io_uring; the
 * caller then uses flash_read_submit(). One thread uses a ring:
 *  - flash_ring_submit() prepares a read (or finishes it at once, calling
 *    done(): a record in a write buffer, or reclaimed); at most depth
 *    reads are in the kernel at once, more wait in the ring's queue;
 *  - flash_ring_flush() hands the prepared reads to the kernel in one
 *    call; false: it would not take them now, for want of resources
 *    (they go at the next flush). The thread must flush before it sleeps.
 *    A kernel that refuses them for good breaks the ring: those reads,
 *    and all after, go through the I/O threads (said once on stderr);
 *  - flash_ring_reap() calls done() for each read finished, and starts
 *    queued ones (flush again after). Reads of records in the page cache
 *    finish during the flush; others later: flash_ring_fd() polls
 *    readable while finished reads wait to be reaped;
 *  - flash_ring_busy(): reads prepared and not flushed, or finished and
 *    not reaped;
 *  - flash_ring_close() waits for the reads in flight and calls every
 *    done() (reads still queued finish as FLASH_READ_GONE); after it a
 *    submit finishes at once, as a miss, until flash_ring_free(). Close
 *    on the ring's thread: a thread's reads are cancelled when it exits.
 * flash_ring_open() tries one no-op through the ring first: some
 * sandboxes set a ring up and then refuse every submission.
 */
struct flash_ring;
struct flash_ring *flash_ring_open(uint32_t depth, char *err, size_t errcap);
int             flash_ring_fd(const struct flash_ring *q);
void            flash_ring_submit(struct flash_ring *q, struct flash_read *r);
bool            flash_ring_flush(struct flash_ring *q);
void            flash_ring_reap(struct flash_ring *q);
bool            flash_ring_busy(const struct flash_ring *q);
void            flash_ring_close(struct flash_ring *q);
void            flash_ring_free(struct flash_ring *q);
/* The same read, done by the calling thread (unit tests, tools). */
flash_read_status_t flash_read_sync(struct flash_read *r);

/* Seal the write buffer being filled and wait until everything queued is
 * written (tests; shutdown). */
void            flash_sync(void);

/*
 * Warm restart (restart.h). flash_quiesce(): seal and write what is
 * buffered, then stop the writer, so the file and the slot table hold
 * every record and nothing changes them (a graceful stop, once nothing
 * appends). flash_state_save(): the slot table and the writer's place, as
 * they stand (slots malloc'd: free them). flash_state_restore(): after
 * flash_setup() with keep, give them back; false, with the tier emptied,
 * when the file was not kept or its geometry differs.
 */
struct flash_slot_state {
    uint32_t seq;
    uint32_t state;             /* 0 empty, 1 written, 2 failed */
    uint32_t nobj;
    uint32_t offered;
    uint64_t bytes;
};
struct flash_state {
    uint64_t size;
    uint32_t slab_size;
    uint32_t nslabs;
    uint32_t page_slabs;
    uint32_t next_seq;
    uint64_t records_live;
    struct flash_slot_state *slots;     /* nslabs */
};
void            flash_quiesce(void);
bool            flash_state_save(struct flash_state *out);
bool            flash_state_restore(const struct flash_state *in);

/*
 * Counters, memcached's extstore names where they mean the same
 * (rendered by stats.c). Kinds: COUNT, a running total `stats reset`
 * does not clear (as memcached's extstore figures); GAUGE, a level.
 */
#define FLASH_STATS(X)                          \
    X(extstore_page_allocs,      COUNT)         \
    X(extstore_page_evictions,   COUNT)         \
    X(extstore_pages_free,       GAUGE)         \
    X(extstore_pages_used,       GAUGE)         \
    X(extstore_objects_used,     GAUGE)         \
    X(extstore_bytes_used,       GAUGE)         \
    X(extstore_objects_evicted,  COUNT)         \
    X(extstore_objects_read,     COUNT)         \
    X(extstore_objects_written,  COUNT)         \
    X(extstore_bytes_evicted,    COUNT)         \
    X(extstore_bytes_written,    COUNT)         \
    X(extstore_bytes_read,       COUNT)         \
    X(extstore_limit_maxbytes,   GAUGE)         \
    X(extstore_io_queue,         GAUGE)         \
    X(extstore_write_errors,     COUNT)         \
    X(extstore_short_writes,     COUNT)         \
    X(extstore_read_errors,      COUNT)         \
    X(extstore_short_reads,      COUNT)         \
    X(extstore_wbuf_full,        COUNT)         \
    X(extstore_writer_waits,     COUNT)         \
    X(extstore_objects_dropped,  COUNT)         \
    X(extstore_compact_rescues,  COUNT)         \
    X(extstore_compact_skipped,  COUNT)         \
    X(extstore_ring_reads,       COUNT)

struct flash_stats {
#define FLASH_STAT_FIELD(name, kind) uint64_t name;
    FLASH_STATS(FLASH_STAT_FIELD)
#undef FLASH_STAT_FIELD
};

void            flash_get_stats(struct flash_stats *out);

#endif
