/*
 * flash.c -- the flash tier's log (see flash.h for the design).
 *
 * One mutex guards the write buffers, the sequence counter and the
 * per-slot bookkeeping; it is a leaf lock (taken under an item's
 * partition and class locks by flash_append, never the other way), held
 * only to copy bytes. Device I/O happens outside it: the writer thread
 * writes a sealed buffer; the workers' rings, or the I/O threads, read
 * records.
 *
 * A physical slot p of the ring holds the flash slab whose sequence
 * number s has s % nslabs == p. Its `seq` field says which one; a reader
 * checks it after its pread, and a slot is given a new seq before the
 * writer overwrites it, so a read that raced with a reclaim is known and
 * answered FLASH_READ_GONE. The checksum guards the rest (a short or
 * failed device, a file changed underneath).
 */
#include "flash.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "clock.h"
#include "hash.h"
#include "log.h"

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

static struct {
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
} fl = { .fd = -1 };

/* --- options --------------------------------------------------------------- */

static flash_rstatus_t
flash_err(char *err, size_t cap, flash_rstatus_t st, const char *fmt, const char *a)
{
    snprintf(err, cap, fmt, a);
    return st;
}

flash_rstatus_t
flash_parse_path(const char *spec, char *path, size_t cap, uint64_t *size,
                 char *err, size_t errcap)
{
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || colon == spec || colon[1] == '\0') {
        return flash_err(err, errcap, FLASH_EINVAL,
                         "ext_path: '%s' is not FILE:SIZE (e.g. /var/cache/slabcache/flash:16G)", spec);
    }
    if ((size_t)(colon - spec) >= cap) {
        return flash_err(err, errcap, FLASH_EINVAL, "ext_path: path too long: %s", spec);
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(colon + 1, &end, 10);
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    case 't': case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (errno != 0 || end == colon + 1 || *end != '\0' || v == 0 || colon[1] == '-' ||
        v > UINT64_MAX / mult) {
        return flash_err(err, errcap, FLASH_EINVAL, "ext_path: bad size in '%s'", spec);
    }
    memcpy(path, spec, (size_t)(colon - spec));
    path[colon - spec] = '\0';
    *size = (uint64_t)v * mult;
    return FLASH_OK;
}

/* --- setup ----------------------------------------------------------------- */

static void *flash_writer_main(void *arg);
static void *flash_io_main(void *arg);

/* Open and size the file: a regular file is emptied, then sized (the file
 * is a cache: nothing in it survives a restart); a device is used as is. */
static flash_rstatus_t
flash_open(const char *path, uint64_t size, bool keep, char *err, size_t cap)
{
    struct stat sb;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0) {
        snprintf(err, cap, "ext_path: cannot open %s: %s", path, strerror(errno));
        return FLASH_EIO;
    }
    if (fstat(fd, &sb) != 0) {
        snprintf(err, cap, "ext_path: cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return FLASH_EIO;
    }
    fl.kept = keep && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == size;
    if (S_ISREG(sb.st_mode) && !fl.kept &&
        (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)size) != 0)) {
        snprintf(err, cap, "ext_path: cannot size %s to %" PRIu64 " bytes: %s", path, size,
                 strerror(errno));
        close(fd);
        return FLASH_EIO;
    }
    if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode) && !S_ISCHR(sb.st_mode)) {
        snprintf(err, cap, "ext_path: %s is not a file or a device", path);
        close(fd);
        return FLASH_EINVAL;
    }
    /* Reads are of single records anywhere in the file: no readahead
     * (bench/flash-cold-reads: 2,000 cold reads of 4 KB values moved 35 MB
     * from the device with the default, 14 MB without: two pages a
     * record). */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    fl.fd = fd;
    return FLASH_OK;
}

static flash_rstatus_t
flash_alloc(const struct flash_options *o)
{
    fl.slots = calloc(fl.nslabs, sizeof(*fl.slots));
    fl.nwbuf = o->wbufs < 2 ? 2 : o->wbufs;
    fl.wbufs = calloc(fl.nwbuf, sizeof(*fl.wbufs));
    /* A read blocks its reader: ext_io_depth reads in flight per I/O
     * thread are that many readers. */
    fl.nio_want = (o->io_threads < 1 ? 1 : o->io_threads) * (o->io_depth < 1 ? 1 : o->io_depth);
    if (fl.nio_want > FLASH_IO_MAX) {
        fl.nio_want = FLASH_IO_MAX;     /* ext_threads=64 x ext_io_depth=64 */
    }
    fl.io = calloc(fl.nio_want, sizeof(*fl.io));
    if (fl.slots == NULL || fl.wbufs == NULL || fl.io == NULL) {
        return FLASH_ENOMEM;
    }
    fl.scratch = malloc(fl.slab_size);
    if (fl.scratch == NULL) {
        return FLASH_ENOMEM;
    }
    for (uint32_t i = 0; i < fl.nwbuf; i++) {
        fl.wbufs[i].mem = calloc(1, fl.slab_size);
        if (fl.wbufs[i].mem == NULL) {
            return FLASH_ENOMEM;
        }
    }
    return FLASH_OK;
}

static flash_rstatus_t
flash_start_threads(void)
{
    if (pthread_create(&fl.writer, NULL, flash_writer_main, NULL) != 0) {
        return FLASH_ENOMEM;
    }
    fl.writer_started = true;
    for (uint32_t i = 0; i < fl.nio_want; i++) {
        if (pthread_create(&fl.io[i], NULL, flash_io_main, NULL) != 0) {
            return FLASH_ENOMEM;
        }
        fl.nio = i + 1;         /* joined by flash_stop_reads() */
    }
    return FLASH_OK;
}

flash_rstatus_t
flash_setup(const struct flash_options *o, char *err, size_t cap)
{
    flash_rstatus_t st;

    if (fl.on) {
        snprintf(err, cap, "flash: set up twice");
        return FLASH_EINVAL;
    }
    uint64_t page = o->page_size != 0 ? o->page_size : o->slab_size;
    if (o->slab_size < 4096 || page % o->slab_size != 0) {
        snprintf(err, cap, "ext_page_size: %" PRIu64 " bytes is not a multiple of the "
                 "write buffer (ext_wbuf_size, %u bytes)", page, o->slab_size);
        return FLASH_EINVAL;
    }
    if (o->size / page < 2) {
        snprintf(err, cap, "ext_path: %" PRIu64 " bytes is less than two flash pages of %"
                 PRIu64 " bytes", o->size, page);
        return FLASH_EINVAL;
    }
    fl.size = o->size;
    fl.slab_size = o->slab_size;
    fl.page_slabs = (uint32_t)(page / o->slab_size);
    uint64_t pages = o->size / page;
    if (pages > UINT32_MAX / 2 / fl.page_slabs) {
        pages = UINT32_MAX / 2 / fl.page_slabs;
    }
    fl.nslabs = (uint32_t)pages * fl.page_slabs;
    if ((uint64_t)o->free_pages + 2 > pages) {
        /* the writer needs the page it fills and the one before it */
        snprintf(err, cap, "ext_compact_under: %u is not below the file's %" PRIu64
                 " pages less one", o->free_pages + 1, pages);
        return FLASH_EINVAL;
    }
    fl.ahead_slabs = o->free_pages * fl.page_slabs;
    fl.rewrite_budget = (uint32_t)(o->rewrite_share * fl.slab_size);
    fl.min_value = o->min_value;
    fl.drop_unread = o->drop_unread;
    fl.next_seq = fl.nslabs;     /* slot 0 first: page-aligned from the start */
    pthread_mutex_init(&fl.lock, NULL);
    pthread_cond_init(&fl.wcond, NULL);
    pthread_mutex_init(&fl.io_lock, NULL);
    pthread_cond_init(&fl.io_cond, NULL);
    fl.on = true;               /* from here on, teardown undoes it */
    if ((st = flash_open(o->path, o->size, o->keep, err, cap)) != FLASH_OK) {
        flash_teardown();
        return st;
    }
    if (flash_alloc(o) != FLASH_OK || flash_start_threads() != FLASH_OK) {
        snprintf(err, cap, "ext_path: out of memory for the flash tier's buffers");
        flash_teardown();
        return FLASH_ENOMEM;
    }
    fl.st.extstore_limit_maxbytes = (uint64_t)fl.nslabs * fl.slab_size;
    return FLASH_OK;
}

void
flash_stop_reads(void)
{
    if (!fl.on || fl.io == NULL) {
        return;
    }
    pthread_mutex_lock(&fl.io_lock);
    fl.io_stop = true;
    pthread_cond_broadcast(&fl.io_cond);
    pthread_mutex_unlock(&fl.io_lock);
    for (uint32_t i = 0; i < fl.nio; i++) {
        pthread_join(fl.io[i], NULL);
    }
    fl.nio = 0;
}

void
flash_teardown(void)
{
    if (!fl.on) {
        return;
    }
    pthread_mutex_lock(&fl.lock);
    fl.stop = true;
    pthread_cond_broadcast(&fl.wcond);
    pthread_mutex_unlock(&fl.lock);
    flash_stop_reads();
    if (fl.writer_started) {
        pthread_join(fl.writer, NULL);
    }
    for (uint32_t i = 0; fl.wbufs != NULL && i < fl.nwbuf; i++) {
        free(fl.wbufs[i].mem);
    }
    free(fl.wbufs);
    free(fl.scratch);
    free(fl.slots);
    free(fl.io);
    if (fl.fd >= 0) {
        close(fl.fd);
    }
    pthread_mutex_destroy(&fl.lock);
    pthread_cond_destroy(&fl.wcond);
    pthread_mutex_destroy(&fl.io_lock);
    pthread_cond_destroy(&fl.io_cond);
    memset(&fl, 0, sizeof(fl));
    fl.fd = -1;
}

bool
flash_enabled(void)
{
    return fl.on;
}

uint32_t
flash_slab_size(void)
{
    return fl.slab_size;
}

uint32_t
flash_min_value(void)
{
    return atomic_load_explicit(&fl.min_value, memory_order_relaxed);
}

bool
flash_drop_unread(void)
{
    return atomic_load_explicit(&fl.drop_unread, memory_order_relaxed);
}

void
flash_set_min_value(uint32_t bytes)
{
    atomic_store(&fl.min_value, bytes);
}

void
flash_set_drop_unread(bool on)
{
    atomic_store(&fl.drop_unread, on);
}

void
flash_set_rewrite_share(double share)
{
    atomic_store(&fl.rewrite_budget, (uint32_t)(share * fl.slab_size));
}

/* --- device faults ------------------------------------------------------------ */

static const char *const fault_text[FAULT_KINDS] = {
#define FAULT_TEXT(kind, text) text,
    FLASH_FAULTS(FAULT_TEXT)
#undef FAULT_TEXT
};

/*
 * A device fault of this kind happened: count it, and log it with its
 * errno text (err, 0: none) and what it hit, unless a line of this kind
 * went out within FLASH_FAULT_LOG_MS: a dead device fails every I/O, and a
 * line for each would flood the log. The line says how many of its kind
 * came since the last one. Any thread; no lock.
 */
static void __attribute__((format(printf, 3, 4)))
fault_note(enum flash_fault_kind kind, int err, const char *fmt, ...)
{
    struct flash_fault *f = &fl.faults[kind];

    atomic_fetch_add(&f->count, 1);
    uint64_t last = atomic_load(&f->logged_ms);
    uint64_t now = clock_now_ms() + 1;
    /* signed: another thread may have logged at a later `now` meanwhile */
    if (last != 0 && (int64_t)(now - last) < FLASH_FAULT_LOG_MS) {
        return;
    }
    if (!atomic_compare_exchange_strong(&f->logged_ms, &last, now)) {
        return;                 /* another thread logs this one */
    }
    uint64_t n = atomic_load(&f->count);
    uint64_t since = n - atomic_exchange(&f->count_logged, n);
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    log_error("flash: %s: %s: %s (%" PRIu64 " since the last such line, %" PRIu64
              " in all; the records concerned are misses)", fault_text[kind], what,
              err != 0 ? strerror(err) : "no error reported", since, n);
}

/* One rule for reads and writes: an I/O that moved nothing and reports an
 * error failed; one that moved part (or ended without an error: a file
 * shorter than asked) came up short. */
static enum flash_fault_kind
fault_kind(size_t done, int err, enum flash_fault_kind failed, enum flash_fault_kind short_)
{
    return done == 0 && err != 0 ? failed : short_;
}

static uint64_t
fault_count(enum flash_fault_kind kind)
{
    return atomic_load(&fl.faults[kind].count);
}

/* --- the log ---------------------------------------------------------------- */

static inline struct flash_slot *
slot_of(uint32_t seq)
{
    return &fl.slots[seq % fl.nslabs];
}

uint64_t
flash_objects_used(void)
{
    int64_t n = atomic_load(&fl.objects_used);

    return n > 0 ? (uint64_t)n : 0;
}

uint64_t
flash_records_live(void)
{
    if (!fl.on) {
        return 0;
    }
    pthread_mutex_lock(&fl.lock);
    uint64_t n = fl.records_live;
    pthread_mutex_unlock(&fl.lock);
    return n;
}

bool
flash_loc_alive(const struct flash_loc *loc)
{
    return flash_loc_valid(loc) ||
           (fl.on && loc->seq != 0 && atomic_load(&fl.offering_seq) == loc->seq);
}

bool
flash_loc_valid(const struct flash_loc *loc)
{
    if (!fl.on || loc->seq == 0) {
        return false;
    }
    struct flash_slot *s = slot_of(loc->seq);
    uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

    return atomic_load_explicit(&s->seq, memory_order_acquire) == loc->seq &&
           (st == SLOT_BUFFERED || st == SLOT_WRITING || st == SLOT_WRITTEN);
}

static bool
slot_live(const struct flash_slot *s)
{
    uint32_t st = atomic_load(&s->state);

    return st == SLOT_WRITTEN || st == SLOT_BUFFERED || st == SLOT_WRITING;
}

/*
 * The first slot of the page that slab seq reclaims, and whether seq
 * reclaims one at all (it starts a page): its own page, or with
 * ext_compact_under the page that many pages less one ahead of it (those
 * between stay free).
 */
static uint32_t
page_first(uint32_t seq, bool *starts)
{
    uint32_t idx = seq % fl.nslabs;

    *starts = idx % fl.page_slabs == 0;
    return (idx - idx % fl.page_slabs + fl.ahead_slabs) % fl.nslabs;
}

/*
 * A slot's records die (lock held); true if it held any. Whatever state it
 * was in, it is empty of records after: its next slab counts from zero
 * (a failed slot keeps no count: slot_write_done).
 */
static bool
slot_reclaim(struct flash_slot *s)
{
    bool live = slot_live(s);

    assert(live || (s->nobj == 0 && s->bytes == 0));
    if (live) {
        fl.records_live -= s->nobj;
        fl.st.extstore_objects_evicted += s->nobj;
        fl.st.extstore_bytes_evicted += s->bytes;
    }
    s->nobj = 0;
    s->bytes = 0;
    return live;
}

/*
 * A buffer starts a new flash slab. A slab that starts a page reclaims the
 * whole page, every slab in it (as memcached frees extstore space a page
 * at a time); the page's other slabs then start on empty slots (lock held).
 */
static void
wbuf_start(struct wbuf *w)
{
    w->seq = fl.next_seq++;
    if (fl.next_seq == 0) {
        /* 0 names no slab: go on at the seq of the same slot (2^32 mod
         * nslabs), so pages stay aligned */
        uint32_t r = (uint32_t)((UINT64_C(1) << 32) % fl.nslabs);
        fl.next_seq = r != 0 ? r : fl.nslabs;
    }
    w->used = 0;
    bool starts;
    uint32_t first = page_first(w->seq, &starts);
    struct flash_slot *s = slot_of(w->seq);
    if (starts) {
        bool evicted = false;
        for (uint32_t i = first; i < first + fl.page_slabs; i++) {
            evicted |= slot_reclaim(&fl.slots[i]);
            if (&fl.slots[i] != s) {
                atomic_store_explicit(&fl.slots[i].state, SLOT_EMPTY, memory_order_release);
            }
        }
        fl.st.extstore_page_evictions += evicted;
        fl.st.extstore_page_allocs++;
    } else if (slot_reclaim(s)) {
        fl.st.extstore_page_evictions++;    /* not reached: reclaimed with its page */
    }
    atomic_store_explicit(&s->seq, w->seq, memory_order_release);
    atomic_store_explicit(&s->state, SLOT_BUFFERED, memory_order_release);
    s->offered = false;
    pthread_cond_broadcast(&fl.wcond);     /* the next slot may be due: writer */
}

/* Hand the buffer being filled to the writer (lock held). */
static void
wbuf_seal(void)
{
    struct wbuf *w = fl.cur;

    if (w == NULL) {
        return;
    }
    fl.cur = NULL;
    w->next = NULL;
    if (fl.wtail != NULL) {
        fl.wtail->next = w;
    } else {
        fl.whead = w;
    }
    fl.wtail = w;
    pthread_cond_broadcast(&fl.wcond);
}

/*
 * Starting slab seq reclaims its page: only once the writer has offered
 * the records of every slab in it for rewriting (writer_rescue), so a
 * burst that outruns the writer cannot reclaim slabs unread (lock held).
 * A slab of the previous lap still in a buffer (a ring of no more slots
 * than buffers, behind a slow writer) is not reclaimed either: it must be
 * written and offered first. A slab inside a page starts on a slot its
 * page's start emptied.
 */
static bool
slot_ready(uint32_t seq)
{
    bool starts;
    uint32_t first = page_first(seq, &starts);

    if (atomic_load(&fl.rewrite) == NULL || !starts) {
        return true;
    }
    for (uint32_t i = first; i < first + fl.page_slabs; i++) {
        uint32_t st = atomic_load(&fl.slots[i].state);
        if (st != SLOT_EMPTY && st != SLOT_FAILED &&
            !(st == SLOT_WRITTEN && fl.slots[i].offered)) {
            return false;
        }
    }
    return true;
}

static struct wbuf *
wbuf_take_free(void)
{
    for (uint32_t i = 0; i < fl.nwbuf; i++) {
        if (fl.wbufs[i].seq == 0) {
            return &fl.wbufs[i];
        }
    }
    return NULL;
}

static uint32_t
rec_crc(const struct flash_rec *r, const char *key, const char *value)
{
    uint32_t h = hash_crc32c(FLASH_CRC_SEED, (const char *)r + sizeof(r->crc),
                             sizeof(*r) - sizeof(r->crc));
    h = hash_crc32c(h, key, r->nkey);
    return hash_crc32c(h, value, r->nbytes);
}

static inline uint32_t
rec_len(uint32_t nkey, uint32_t nbytes)
{
    uint64_t n = sizeof(struct flash_rec) + (uint64_t)nkey + nbytes;
    n = (n + FLASH_ALIGN - 1) & ~(uint64_t)(FLASH_ALIGN - 1);
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

uint32_t
flash_rec_len(uint8_t nkey, uint32_t nbytes)
{
    return rec_len(nkey, nbytes);
}

void
flash_set_rewrite(flash_rewrite_fn fn)
{
    atomic_store(&fl.rewrite, fn);
}

bool
flash_append(const char *key, uint8_t nkey, const char *value, uint32_t nbytes,
             uint32_t flags, uint64_t cas, struct flash_loc *out)
{
    uint32_t len = rec_len(nkey, nbytes);

    if (!fl.on) {
        return false;
    }
    if (len > fl.slab_size) {
        atomic_fetch_add_explicit(&fl.dropped, 1, memory_order_relaxed);
        return false;
    }
    pthread_mutex_lock(&fl.lock);
    if (fl.cur != NULL && fl.cur->used + len > fl.slab_size) {
        wbuf_seal();
    }
    if (fl.cur == NULL) {
        fl.cur = slot_ready(fl.next_seq) ? wbuf_take_free() : NULL;
        if (fl.cur == NULL) {
            fl.st.extstore_wbuf_full++;
            atomic_fetch_add_explicit(&fl.dropped, 1, memory_order_relaxed);
            pthread_mutex_unlock(&fl.lock);
            return false;
        }
        wbuf_start(fl.cur);
    }
    struct wbuf *w = fl.cur;
    struct flash_rec r = { .nbytes = nbytes, .cas = cas, .flags = flags, .nkey = nkey };
    char *p = w->mem + w->used;
    memcpy(p + sizeof(r), key, nkey);
    memcpy(p + sizeof(r) + nkey, value, nbytes);
    r.crc = rec_crc(&r, key, value);
    memcpy(p, &r, sizeof(r));
    out->seq = w->seq;
    out->off = w->used;
    w->used += len;
    struct flash_slot *s = slot_of(w->seq);
    s->nobj++;
    s->bytes += len;
    fl.records_live++;
    pthread_mutex_unlock(&fl.lock);
    return true;
}

void
flash_note_used(int64_t objects, int64_t bytes)
{
    atomic_fetch_add_explicit(&fl.objects_used, objects, memory_order_relaxed);
    atomic_fetch_add_explicit(&fl.bytes_used, bytes, memory_order_relaxed);
}

void
flash_note_dropped(void)
{
    atomic_fetch_add_explicit(&fl.dropped, 1, memory_order_relaxed);
}

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
        return;                 /* cannot be: slot_ready keeps it until written */
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
    struct flash_slot *s = slot_of(w->seq);
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
        fault_note(fault_kind(done, err, FAULT_WRITE, FAULT_WRITE_SHORT), err,
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
 * before that copy is made (slot_ready).
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
    uint32_t first = page_first(idx + to_start, &starts);    /* <= nslabs: no overflow */

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
        fault_note(fault_kind(done, err, FAULT_READ, FAULT_READ_SHORT), err,
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
        uint32_t len = rec_len(h.nkey, h.nbytes);
        if (h.nbytes == 0 || len > bytes - off) {
            break;
        }
        const char *key = fl.scratch + off + sizeof(h), *value = key + h.nkey;
        struct flash_rec_view v = { key, h.nkey, value, h.nbytes, h.flags, h.cas,
                                    { seq, off } };
        if (rec_crc(&h, key, value) != h.crc) {
            fault_note(FAULT_BADCRC, 0, "flash slab %" PRIu32 " offset %" PRIu32
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

static void *
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
             * (appenders wait for it: slot_ready) */
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
    return wbuf_take_free() != NULL && slot_ready(fl.next_seq);
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
    wbuf_seal();
    while (fl.whead != NULL || fl.writing) {
        pthread_cond_wait(&fl.wcond, &fl.lock);
    }
    pthread_mutex_unlock(&fl.lock);
}

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
    if (memcmp(key, r->key, r->nkey) != 0 || rec_crc(h, key, r->dst) != h->crc) {
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
static int
read_niov(const struct flash_read *r)
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
static int
read_start(struct flash_read *r, off_t *at)
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
static flash_read_status_t
read_device_done(const struct flash_read *r, ssize_t n)
{
    if (!flash_loc_valid(&r->loc)) {
        return FLASH_READ_GONE;     /* reclaimed while it was read */
    }
    if (n < 0 || (size_t)n != read_want(r)) {
        fault_note(n < 0 ? FAULT_READ : FAULT_READ_SHORT, n < 0 ? (int)-n : 0,
                   "flash slab %" PRIu32 " offset %" PRIu32 ", %zd of %zu bytes read",
                   r->loc.seq, r->loc.off, n < 0 ? (ssize_t)0 : n, read_want(r));
        return FLASH_READ_EIO;
    }
    return FLASH_READ_OK;
}

/* Last half of any read: check the bytes, count them, set r->status. */
static flash_read_status_t
read_finish(struct flash_read *r, flash_read_status_t st)
{
    if (st == FLASH_READ_OK) {
        struct flash_rec h;
        memcpy(&h, r->rec, sizeof(h));
        st = rec_check(r, &h, r->rec + sizeof(h));
        if (st == FLASH_READ_BADCRC) {
            fault_note(FAULT_BADCRC, 0, "flash slab %" PRIu32 " offset %" PRIu32,
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
    int st = read_start(r, &at);
    ssize_t n;

    if (st >= 0) {
        return read_finish(r, (flash_read_status_t)st);
    }
    do {
        n = preadv(fl.fd, r->iov, read_niov(r), at);
    } while (n < 0 && errno == EINTR);
    return read_finish(r, read_device_done(r, n < 0 ? -errno : n));
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

static void *
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
    read_finish(r, st);
    r->done(r);
}

/* Prepare r for the kernel (it goes in at the next flush), or finish it
 * now: a record in a write buffer, or reclaimed. */
static void
ring_start(struct flash_ring *q, struct flash_read *r)
{
    off_t at = 0;
    int st = read_start(r, &at);

    if (st >= 0) {
        ring_finish(r, (flash_read_status_t)st);
        return;
    }
    /* never NULL: fewer than depth reads are in, and the ring has depth slots */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    assert(sqe != NULL && q->npending < q->depth);
    io_uring_prep_readv(sqe, fl.fd, r->iov, read_niov(r), (uint64_t)at);
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
    ring_finish(r, n == -ECANCELED ? FLASH_READ_GONE : read_device_done(r, n));
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

/* --- stats ------------------------------------------------------------------- */

void
flash_get_stats(struct flash_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!fl.on) {
        return;
    }
    pthread_mutex_lock(&fl.lock);
    *out = fl.st;
    uint64_t used = 0;
    for (uint32_t i = 0; i < fl.nslabs; i += fl.page_slabs) {
        bool any = false;
        for (uint32_t j = i; j < i + fl.page_slabs; j++) {
            any |= slot_live(&fl.slots[j]);
        }
        used += any;
    }
    pthread_mutex_unlock(&fl.lock);
    pthread_mutex_lock(&fl.io_lock);
    out->extstore_io_queue = fl.io_queued + atomic_load(&fl.ring_queued);
    pthread_mutex_unlock(&fl.io_lock);
    out->extstore_pages_used = used;
    out->extstore_pages_free = fl.nslabs / fl.page_slabs - used;
    out->extstore_objects_read = atomic_load(&fl.objects_read);
    out->extstore_bytes_read = atomic_load(&fl.bytes_read);
    out->extstore_write_errors = fault_count(FAULT_WRITE);
    out->extstore_short_writes = fault_count(FAULT_WRITE_SHORT);
    out->extstore_read_errors = fault_count(FAULT_READ);
    out->extstore_short_reads = fault_count(FAULT_READ_SHORT);
    out->extstore_ring_reads = atomic_load(&fl.ring_reads);
    out->extstore_objects_dropped = atomic_load(&fl.dropped);
    int64_t ou = atomic_load(&fl.objects_used), bu = atomic_load(&fl.bytes_used);
    out->extstore_objects_used = ou > 0 ? (uint64_t)ou : 0;
    out->extstore_bytes_used = bu > 0 ? (uint64_t)bu : 0;
}

/* --- warm restart ---------------------------------------------------------------- */

void
flash_quiesce(void)
{
    if (!fl.on) {
        return;
    }
    pthread_mutex_lock(&fl.lock);
    wbuf_seal();
    fl.stop = true;             /* the writer writes what is queued, then ends */
    pthread_cond_broadcast(&fl.wcond);
    pthread_mutex_unlock(&fl.lock);
    if (fl.writer_started) {
        pthread_join(fl.writer, NULL);
        fl.writer_started = false;
    }
}

bool
flash_state_save(struct flash_state *out)
{
    memset(out, 0, sizeof(*out));
    if (!fl.on) {
        return false;
    }
    out->slots = calloc(fl.nslabs, sizeof(*out->slots));
    if (out->slots == NULL) {
        return false;
    }
    pthread_mutex_lock(&fl.lock);
    out->size = fl.size;
    out->slab_size = fl.slab_size;
    out->nslabs = fl.nslabs;
    out->page_slabs = fl.page_slabs;
    out->next_seq = fl.next_seq;
    out->records_live = fl.records_live;
    for (uint32_t i = 0; i < fl.nslabs; i++) {
        const struct flash_slot *s = &fl.slots[i];
        uint32_t st = atomic_load(&s->state);
        struct flash_slot_state *o = &out->slots[i];
        /* Quiesced: nothing is buffered or being written. */
        o->state = st == SLOT_WRITTEN ? 1 : st == SLOT_FAILED ? 2 : 0;
        o->seq = o->state != 0 ? atomic_load(&s->seq) : 0;
        o->nobj = s->nobj;
        o->bytes = s->bytes;
        o->offered = s->offered;
    }
    pthread_mutex_unlock(&fl.lock);
    return true;
}

bool
flash_state_restore(const struct flash_state *in)
{
    uint64_t live = 0;

    if (!fl.on || !fl.kept || in->slots == NULL || in->size != fl.size ||
        in->slab_size != fl.slab_size || in->nslabs != fl.nslabs ||
        in->page_slabs != fl.page_slabs || in->next_seq == 0) {
        if (fl.on && fl.kept) {
            /* a file of the right size, another layout: nothing in it is ours */
            (void)(ftruncate(fl.fd, 0) == 0 && ftruncate(fl.fd, (off_t)fl.size) == 0);
        }
        return false;
    }
    pthread_mutex_lock(&fl.lock);
    for (uint32_t i = 0; i < fl.nslabs; i++) {
        const struct flash_slot_state *o = &in->slots[i];
        struct flash_slot *s = &fl.slots[i];
        bool used = o->state != 0 && o->seq != 0 && o->seq % fl.nslabs == i;
        atomic_store(&s->seq, used ? o->seq : 0);
        atomic_store(&s->state, !used ? SLOT_EMPTY : o->state == 1 ? SLOT_WRITTEN : SLOT_FAILED);
        s->nobj = used ? o->nobj : 0;
        s->bytes = used ? o->bytes : 0;
        s->offered = used && o->offered;
        if (used && o->state == 1) {
            live += s->nobj;
        }
    }
    fl.next_seq = in->next_seq;
    fl.records_live = live;
    pthread_mutex_unlock(&fl.lock);
    return true;
}
