/*
 * flash_int.h -- what the files of the flash tier share; private to
 * src/storage. flash.c: options, setup, the log's slots and write
 * buffers, appends, device faults, stats, warm restart; flash_write.c: the
 * writer thread (device writes, the rescue of read records before a
 * reclaim, room for appends); flash_read.c: reads, synchronous or through
 * the I/O threads; flash_ring.c: a worker's io_uring read ring (stubs
 * without liburing).
 *
 * One mutex (fl.lock) guards the write buffers, the sequence counter and
 * the per-slot bookkeeping; it is a leaf lock (taken under an item's
 * partition and class locks by flash_append, never the other way), held
 * only to copy bytes. Device I/O happens outside it.
 */
#ifndef SC_FLASH_INT_H
#define SC_FLASH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "flash.h"

#define FLASH_CRC_SEED   0x5f1a5ca1u
#define FLASH_ALIGN      8
#define FLASH_WRITE_UNIT 4096       /* writes are rounded up to this */
#define FLASH_IO_MAX     64
#define FLASH_FAULT_LOG_MS 5000     /* one log line per kind of fault at most this often */

/*
 * The kinds of device fault, each counted and logged on its own: what the
 * log line calls it. A truncated file reads short; a block overwritten
 * underneath fails its record's checksum.
 */
#define FLASH_FAULTS(X)                                         \
    X(FAULT_WRITE,       "a write to the flash file failed")    \
    X(FAULT_WRITE_SHORT, "a write to the flash file came up short") \
    X(FAULT_READ,        "a read of the flash file failed")     \
    X(FAULT_READ_SHORT,  "a read of the flash file came up short (truncated?)") \
    X(FAULT_BADCRC,      "a flash record failed its checksum (overwritten?)")

enum flash_fault_kind {
#define FAULT_ENUM(kind, text) kind,
    FLASH_FAULTS(FAULT_ENUM)
#undef FAULT_ENUM
    FAULT_KINDS
};

struct flash_fault {
    _Atomic uint64_t count;
    _Atomic uint64_t logged_ms;     /* when last logged, + 1; 0: never */
    _Atomic uint64_t count_logged;  /* count when last logged */
};

/* A record's header on flash; key and value follow. */
struct flash_rec {
    uint32_t crc;               /* over the rest of the header, key, value */
    uint32_t nbytes;
    uint64_t cas;
    uint32_t flags;
    uint8_t  nkey;
    uint8_t  pad[3];
};
_Static_assert(sizeof(struct flash_rec) == 24, "flash_read.rec holds a header and a key");

enum slot_state {
    SLOT_EMPTY,
    SLOT_BUFFERED,              /* being filled, or sealed and queued */
    SLOT_WRITING,               /* the writer has it; still in its buffer */
    SLOT_WRITTEN,
    SLOT_FAILED,                /* the write failed: its records are gone */
};

struct flash_slot {
    _Atomic uint32_t seq;
    _Atomic uint32_t state;
    uint32_t         nobj;      /* records in it (lock held) */
    uint64_t         bytes;
    bool             offered;   /* its records were offered for rewriting
                                   (writer_rescue): it may be reclaimed */
};

struct wbuf {
    char       *mem;
    uint32_t    seq;            /* 0: free */
    uint32_t    used;
    struct wbuf *next;          /* the writer's queue */
};

struct flash_log {
    bool               on;
    int                fd;
    uint64_t           size;
    uint32_t           slab_size;
    uint32_t           nslabs;      /* a multiple of page_slabs */
    uint32_t           page_slabs;  /* flash slabs reclaimed together (ext_page_size) */
    uint32_t           ahead_slabs; /* slots kept free ahead of the writer: whole
                                       pages (ext_compact_under - 1) */
    _Atomic uint32_t   rewrite_budget;  /* bytes of a reclaimed slab its read
                                           records may fill again (ext_max_frag) */
    _Atomic uint32_t   min_value;       /* these three change at run time */
    _Atomic bool       drop_unread;     /* (the `extstore` command) */

    pthread_mutex_t    lock;
    pthread_cond_t     wcond;       /* the writer's queue, flash_sync */
    struct flash_slot *slots;
    struct wbuf       *wbufs;
    uint32_t           nwbuf;
    struct wbuf       *cur;         /* being filled */
    struct wbuf       *whead, *wtail;
    bool               writing;     /* the writer holds a buffer */
    uint32_t           next_seq;
    _Atomic uint32_t   offering_seq;    /* the slab being offered, 0: none */
    uint64_t           records_live;    /* records in readable slabs (lock held) */
    char              *scratch;         /* the writer's copy of that slab */
    _Atomic flash_rewrite_fn rewrite;
    bool               stop;
    pthread_t          writer;
    bool               writer_started;
    bool               kept;        /* flash_setup kept the file's contents */

    pthread_mutex_t    io_lock;
    pthread_cond_t     io_cond;
    struct flash_read *io_head, *io_tail;
    uint64_t           io_queued;   /* io_lock held */
    bool               io_stop;
    pthread_t         *io;
    uint32_t           nio;         /* I/O threads running */
    uint32_t           nio_want;

    struct flash_stats st;          /* counters: lock held */
    struct flash_fault faults[FAULT_KINDS];
    _Atomic uint64_t   objects_read, bytes_read, dropped;
    _Atomic uint64_t   ring_queued;     /* reads in the workers' rings */
    _Atomic uint64_t   ring_reads;      /* device reads through them */
    _Atomic int64_t    objects_used, bytes_used;
};

extern struct flash_log fl;


/* The slot of the ring that holds flash slab seq. */
static inline struct flash_slot *
flash_slot_of(uint32_t seq)
{
    return &fl.slots[seq % fl.nslabs];
}

/* A record's length on flash: header, key and value, 8-byte aligned. */
static inline uint32_t
flash_rec_size(uint32_t nkey, uint32_t nbytes)
{
    uint64_t n = sizeof(struct flash_rec) + (uint64_t)nkey + nbytes;
    n = (n + FLASH_ALIGN - 1) & ~(uint64_t)(FLASH_ALIGN - 1);
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* flash.c */
void __attribute__((format(printf, 3, 4)))
flash_fault_note(enum flash_fault_kind kind, int err, const char *fmt, ...);
enum flash_fault_kind flash_fault_of(size_t done, int err, enum flash_fault_kind failed,
                                     enum flash_fault_kind short_);
uint64_t      flash_fault_count(enum flash_fault_kind kind);
bool          flash_slot_live(const struct flash_slot *s);
uint32_t      flash_page_first(uint32_t seq, bool *starts);
void          flash_wbuf_seal(void);
bool          flash_slot_ready(uint32_t seq);
struct wbuf  *flash_wbuf_take_free(void);
uint32_t      flash_rec_crc(const struct flash_rec *r, const char *key, const char *value);

/* flash_write.c */
void         *flash_writer_main(void *arg);

/* flash_read.c */
void         *flash_io_main(void *arg);
int           flash_read_niov(const struct flash_read *r);
int           flash_read_start(struct flash_read *r, off_t *at);
flash_read_status_t flash_read_device_done(const struct flash_read *r, ssize_t n);
flash_read_status_t flash_read_finish(struct flash_read *r, flash_read_status_t st);

#endif
