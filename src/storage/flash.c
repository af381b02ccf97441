/*
 * flash.c -- the flash tier's log (see flash.h for the design): options,
 * setup and teardown, the ring of slots and its write buffers, appends,
 * device faults (counted and logged), stats and warm restart. The writer
 * is flash_write.c, reads flash_read.c and flash_ring.c (flash_int.h).
 *
 * A physical slot p of the ring holds the flash slab whose sequence
 * number s has s % nslabs == p. Its `seq` field says which one; a reader
 * checks it after its pread, and a slot is given a new seq before the
 * writer overwrites it, so a read that raced with a reclaim is known and
 * answered FLASH_READ_GONE. The checksum guards the rest (a short or
 * failed device, a file changed underneath).
 */
#include "flash_int.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "hash.h"
#include "log.h"

struct flash_log fl = { .fd = -1 };

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
    /* Reads are of single records anywhere in the file: no readahead,
     * which would move pages nobody asked for from the device
     * (bench/flash-cold-reads; figures in notes/flash.md). */
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
void
flash_fault_note(enum flash_fault_kind kind, int err, const char *fmt, ...)
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
enum flash_fault_kind
flash_fault_of(size_t done, int err, enum flash_fault_kind failed, enum flash_fault_kind short_)
{
    return done == 0 && err != 0 ? failed : short_;
}

uint64_t
flash_fault_count(enum flash_fault_kind kind)
{
    return atomic_load(&fl.faults[kind].count);
}

/* --- the log ---------------------------------------------------------------- */


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
    struct flash_slot *s = flash_slot_of(loc->seq);
    uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

    return atomic_load_explicit(&s->seq, memory_order_acquire) == loc->seq &&
           (st == SLOT_BUFFERED || st == SLOT_WRITING || st == SLOT_WRITTEN);
}

bool
flash_slot_live(const struct flash_slot *s)
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
uint32_t
flash_page_first(uint32_t seq, bool *starts)
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
    bool live = flash_slot_live(s);

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
    uint32_t first = flash_page_first(w->seq, &starts);
    struct flash_slot *s = flash_slot_of(w->seq);
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
void
flash_wbuf_seal(void)
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
bool
flash_slot_ready(uint32_t seq)
{
    bool starts;
    uint32_t first = flash_page_first(seq, &starts);

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

struct wbuf *
flash_wbuf_take_free(void)
{
    for (uint32_t i = 0; i < fl.nwbuf; i++) {
        if (fl.wbufs[i].seq == 0) {
            return &fl.wbufs[i];
        }
    }
    return NULL;
}

uint32_t
flash_rec_crc(const struct flash_rec *r, const char *key, const char *value)
{
    uint32_t h = hash_crc32c(FLASH_CRC_SEED, (const char *)r + sizeof(r->crc),
                             sizeof(*r) - sizeof(r->crc));
    h = hash_crc32c(h, key, r->nkey);
    return hash_crc32c(h, value, r->nbytes);
}


uint32_t
flash_rec_len(uint8_t nkey, uint32_t nbytes)
{
    return flash_rec_size(nkey, nbytes);
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
    uint32_t len = flash_rec_size(nkey, nbytes);

    if (!fl.on) {
        return false;
    }
    if (len > fl.slab_size) {
        atomic_fetch_add_explicit(&fl.dropped, 1, memory_order_relaxed);
        return false;
    }
    pthread_mutex_lock(&fl.lock);
    if (fl.cur != NULL && fl.cur->used + len > fl.slab_size) {
        flash_wbuf_seal();
    }
    if (fl.cur == NULL) {
        fl.cur = flash_slot_ready(fl.next_seq) ? flash_wbuf_take_free() : NULL;
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
    r.crc = flash_rec_crc(&r, key, value);
    memcpy(p, &r, sizeof(r));
    out->seq = w->seq;
    out->off = w->used;
    w->used += len;
    struct flash_slot *s = flash_slot_of(w->seq);
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
            any |= flash_slot_live(&fl.slots[j]);
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
    out->extstore_write_errors = flash_fault_count(FAULT_WRITE);
    out->extstore_short_writes = flash_fault_count(FAULT_WRITE_SHORT);
    out->extstore_read_errors = flash_fault_count(FAULT_READ);
    out->extstore_short_reads = flash_fault_count(FAULT_READ_SHORT);
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
    flash_wbuf_seal();
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

