/*
 * slab.c -- slab classes, their free lists, and the append-only slab table.
 *
 * All slabs come from one address range reserved at setup (PROT_NONE, so
 * it costs no memory) and made writable a slab at a time as the table
 * grows: slab i lives at arena + i * stride. That is what lets an item
 * header drop its slab id and its pointers (item.h): a chunk's slab is its
 * offset divided by the stride, and a 32-bit handle (offset / alignment)
 * names any chunk. A slab is split at assignment into equal chunks of its
 * class's size, each starting with an item header, so any slab can later
 * be walked chunk by chunk (slab-level eviction, the CLOCK hand).
 */
#include "slab.h"

#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "item.h"

#define HANDLE_SHIFT_MIN 3      /* chunks are at least 8-byte aligned */
#define HUGE_BYTES ((size_t)2 << 20)   /* x86-64 transparent huge page */

struct slab {
    _Atomic uint8_t      cls;
    _Atomic bool         draining;  /* being emptied: frees stay off lists */
    _Atomic uint64_t     created_ms;
    _Atomic uint64_t     accessed_ms;
    _Atomic uint32_t     used;      /* chunks handed out; written under the class lock */
    uint32_t             pool_next; /* released: the next in the pool (table lock) */
};

struct slab_class {
    pthread_mutex_t lock;
    uint32_t        size;       /* chunk size */
    uint32_t        perslab;
    _Atomic uint32_t nslabs;    /* length of sids; written under lock */
    _Atomic uint64_t nfree;     /* written under lock, read without */
    uint32_t        free_head;  /* handle; free chunks link by handle */
    uint32_t       *sids;       /* the class's slabs, in no order */
    uint32_t        hand_pos;   /* CLOCK hand: index into sids ... */
    uint32_t        hand_idx;   /* ... and chunk within that slab */
    uint32_t        ndraining;  /* of nslabs, being drained (under the lock) */
    uint64_t        slabs_evicted;
    uint64_t        slabs_gained;
} __attribute__((aligned(64)));

struct slab_arena        slab_arena;

static struct slab_class classes[SLAB_CLASS_MAX + 1];
static _Atomic uint32_t  nempty;        /* assigned slabs with nothing handed out */
static uint32_t          class_size[SLAB_CLASS_MAX + 1];  /* dense, for lookup */
static uint8_t           class_group[SLAB_CLASS_MAX + 1]; /* share_groups() */
static uint8_t           nclasses;
static size_t            slab_bytes;

static uint8_t          *arena;         /* slab 0 */
static size_t            arena_len;
static size_t            arena_rw;      /* bytes from arena made writable */
static size_t            stride;        /* slab_bytes rounded up to a page */
static unsigned          stride_shift;  /* log2(stride), or 0: divide */
static uint32_t          slab_cap;      /* slabs the arena can hold */

static struct slab      *table;         /* slab_cap entries */
static _Atomic uint32_t  table_count;
static pthread_mutex_t   table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t    mem_limit;
static _Atomic size_t    mem_reserved;     /* slab_set_reserve() */
static _Atomic int64_t   mem_booked;       /* slab_book() */
static _Atomic size_t    mem_malloced;
static uint32_t          pool_head;     /* released slabs (table lock), a stack */
static _Atomic uint32_t  pool_count;
static uint32_t          kept_head;     /* pooled within -m: carved, charged (table lock) */
static _Atomic uint32_t  kept_count;
static _Atomic uint64_t  kept_total;    /* slabs ever put in the pool from a class */
/* Item classes an item has been sized for (slab_clsid_alloc) since start
 * or the last cache_memlimit, kept across a warm restart: memcached carves
 * each of its classes a first page whatever -m says (slab_room). */
static _Atomic uint64_t  classes_asked[SLAB_ASKED_WORDS];
static _Atomic uint32_t  nclasses_asked;
/* Classes given a first slab while the room was full (table_append): each
 * adds a slab to the room, as each such first page adds to memcached's
 * memory. Forgotten and kept as classes_asked is. */
static _Atomic uint64_t  classes_past[SLAB_ASKED_WORDS];
static _Atomic uint32_t  nclasses_past;
static int               arena_fd = -1; /* slab_set_file(): the arena maps it */

static inline struct slab *
table_entry(uint32_t sid)
{
    return &table[sid];
}

static inline uint8_t *
slab_mem(uint32_t sid)
{
    return arena + (size_t)sid * stride;
}

static size_t
align_up(size_t n, size_t a)
{
    return (n + a - 1) & ~(a - 1);
}

static unsigned
log2_exact(size_t n)
{
    unsigned k = 0;

    while (((size_t)1 << k) < n) {
        k++;
    }
    return ((size_t)1 << k) == n ? k : 0;
}

/*
 * Map len bytes of PROT_NONE address space starting on a huge-page
 * boundary, and ask for transparent huge pages there. A get touches a
 * random item among millions: with 4 KB pages nearly every one is a TLB
 * miss, and in a VM a miss walks two page tables. memcached mallocs its
 * slabs and does not ask. madvise failing (THP off) is harmless.
 */
static void *
arena_map(size_t len)
{
    size_t span = len + HUGE_BYTES;
    uint8_t *p = mmap(NULL, span, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED) {
        return NULL;
    }
    uint8_t *base = (uint8_t *)align_up((uintptr_t)p, HUGE_BYTES);
    if (base > p) {
        munmap(p, (size_t)(base - p));
    }
    if (p + span > base + len) {
        munmap(base + len, (size_t)(p + span - (base + len)));
    }
    /* -e: the same addresses, backed by the memory file (sparse: its
     * pages exist as slabs are written). */
    if (arena_fd >= 0 &&
        (ftruncate(arena_fd, (off_t)len) != 0 ||
         mmap(base, len, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, arena_fd, 0) ==
             MAP_FAILED)) {
        munmap(base, len);
        return NULL;
    }
    (void)madvise(base, len, MADV_HUGEPAGE);
    return base;
}

void
slab_set_file(int fd)
{
    arena_fd = fd;
}

/* A slab's pages go back to the system: from the memory file too. */
static void
arena_discard(size_t off, size_t len)
{
    if (arena_fd < 0 || madvise(arena + off, len, MADV_REMOVE) != 0) {
        (void)madvise(arena + off, len, MADV_DONTNEED);
    }
}

/*
 * Reserve address space for the slabs. The chunk alignment (the handle
 * unit) is set by -m alone: 8 bytes below 32 GB, doubling beyond, so a
 * large cache does not coarsen its classes for headroom it may never use.
 * The reservation is whatever those handles reach (32 GB at 8 bytes), so
 * cache_memlimit can grow the cache at run time; a smaller one is tried
 * when the system refuses that much.
 */
static slab_rstatus_t
arena_reserve(size_t maxbytes)
{
    size_t need = (maxbytes / stride + 1) * stride;
    unsigned shift = HANDLE_SHIFT_MIN;

    /* Handles are 32 bits and 0 means none. */
    while ((need >> shift) + 1 > UINT32_MAX) {
        shift++;
    }
    /* Slabs must start on a chunk boundary (true up to 4 KB alignment:
     * 16 TB of cache). */
    if (stride % ((size_t)1 << shift) != 0) {
        return SLAB_EINVAL;
    }
    size_t want = ((size_t)UINT32_MAX - 1) << shift;
    for (;;) {
        size_t len = want / stride * stride;
        if (len < need) {
            len = need;
        }
        void *p = arena_map(len);
        if (p != NULL) {
            arena = p;
            arena_len = len;
            arena_rw = 0;
            break;
        }
        if (len <= need) {
            return SLAB_ENOMEM;
        }
        want /= 2;
    }
    assert((arena_len >> shift) + 1 <= UINT32_MAX);
    slab_cap = (uint32_t)(arena_len / stride);
    slab_arena.handle_shift = shift;
    slab_arena.handle_base = (uintptr_t)arena - ((uintptr_t)1 << shift);
    return SLAB_OK;
}

slab_rstatus_t
slab_setup(size_t maxbytes, size_t slab_sz, double factor, size_t chunk_min,
           size_t item_header)
{
    return slab_setup_chunked(maxbytes, slab_sz, factor, chunk_min, item_header, slab_sz);
}

static void share_groups(size_t chunk_min);

/* Read by the next slab_setup*(); 0: none. */
static size_t small_class;

void
slab_add_small_class(size_t size)
{
    small_class = size;
}

slab_rstatus_t
slab_setup_chunked(size_t maxbytes, size_t slab_sz, double factor, size_t chunk_min,
                   size_t item_header, size_t chunk_max)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t i = 0;

    if (slab_sz < 1024 || factor <= 1.0 || item_header + chunk_min >= slab_sz ||
        chunk_max > slab_sz || chunk_max == 0 || slab_sz % chunk_max != 0 ||
        item_header + chunk_min >= chunk_max) {
        return SLAB_EINVAL;
    }
    memset(classes, 0, sizeof(classes));
    atomic_store(&nempty, 0);
    slab_bytes = slab_sz;
    stride = align_up(slab_sz, page);
    stride_shift = log2_exact(stride);
    slab_rstatus_t st = arena_reserve(maxbytes);
    if (st != SLAB_OK) {
        return st;
    }
    size_t align = (size_t)1 << slab_arena.handle_shift;
    size_t size = align_up(item_header + chunk_min, align);
    size_t small = align_up(small_class, align);
    table = calloc(slab_cap, sizeof(*table));
    if (table == NULL || size >= chunk_max || chunk_max % align != 0) {
        slab_teardown();
        return table == NULL ? SLAB_ENOMEM : SLAB_EINVAL;
    }
    if (small != 0 && small < size) {
        /* The flash tier's stubs: one class that fits them exactly. */
        classes[++i].size = (uint32_t)small;
        classes[i].perslab = (uint32_t)(slab_sz / small);
    }
    while (++i < SLAB_CLASS_MAX && size < chunk_max / factor) {     /* as memcached */
        classes[i].size = (uint32_t)size;
        classes[i].perslab = (uint32_t)(slab_sz / size);
        /* Strictly growing even when factor * size rounds back down. */
        size_t next = align_up((size_t)(size * factor), align);
        size = next > size ? next : size + align;
    }
    classes[i].size = (uint32_t)chunk_max;
    classes[i].perslab = (uint32_t)(slab_sz / chunk_max);
    nclasses = i;
    for (uint8_t c = 1; c <= nclasses; c++) {
        class_size[c] = classes[c].size;
        pthread_mutex_init(&classes[c].lock, NULL);
        /* Address space only: pages are touched as the class grows. */
        classes[c].sids = calloc(slab_cap, sizeof(uint32_t));
        if (classes[c].sids == NULL) {
            slab_teardown();
            return SLAB_ENOMEM;
        }
    }
    share_groups(chunk_min);
    atomic_store(&mem_limit, maxbytes);
    atomic_store(&mem_reserved, 0);
    atomic_store(&mem_booked, 0);
    atomic_store(&mem_malloced, 0);
    atomic_store(&table_count, 0);
    pool_head = SLAB_ID_NONE;
    atomic_store(&pool_count, 0);
    kept_head = SLAB_ID_NONE;
    atomic_store(&kept_count, 0);
    atomic_store(&kept_total, 0);
    slab_room_classes_set(NULL);
    return SLAB_OK;
}

void
slab_teardown(void)
{
    for (uint8_t c = 1; c <= nclasses; c++) {
        pthread_mutex_destroy(&classes[c].lock);
        free(classes[c].sids);
        classes[c].sids = NULL;
    }
    free(table);
    table = NULL;
    if (arena != NULL) {
        munmap(arena, arena_len);
        arena = NULL;
    }
    arena_rw = 0;
    atomic_store(&table_count, 0);
    nclasses = 0;
    small_class = 0;
}

uint32_t
slab_sid_of(const void *chunk)
{
    size_t off = (size_t)((const uint8_t *)chunk - arena);

    assert((const uint8_t *)chunk >= arena && off < arena_len);
    return (uint32_t)(stride_shift != 0 ? off >> stride_shift : off / stride);
}

uint8_t
slab_cls_of(const void *chunk)
{
    return atomic_load_explicit(&table_entry(slab_sid_of(chunk))->cls,
                                memory_order_relaxed);
}

uint8_t
slab_clsid(size_t size)
{
    if (size == 0 || size > slab_bytes || nclasses == 0) {
        return 0;
    }
    /* Binary search over the dense sizes: up to SLAB_CLASS_MAX classes. */
    unsigned lo = 1, hi = nclasses;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (size <= class_size[mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return (uint8_t)lo;
}

/*
 * Chunk sizes fall in groups: the first ends at memcached's first chunk
 * for the same -n (its 48-byte item header plus -n), each next one at
 * SLAB_SHARE times the one before, aligned to 8. A class's group is the
 * one its smallest item fits, so the group's largest class holds every
 * item of the group. Groups, not a window around each item, so that
 * classes coming up in any order share one first slab per group.
 */
static void
share_groups(size_t chunk_min)
{
    size_t top = SLAB_MC_HEADER + chunk_min;
    uint8_t g = 0;

    for (uint8_t c = 1; c <= nclasses; c++) {
        size_t smallest = c > 1 ? class_size[c - 1] + 1u : 1u;
        while (smallest > top) {
            top = align_up((size_t)((double)top * SLAB_SHARE), 8);
            g++;
        }
        class_group[c] = g;
    }
}

/* Set c's bit in a class set, counting it once. */
static void
class_set_add(_Atomic uint64_t *set, _Atomic uint32_t *n, uint8_t c)
{
    uint64_t bit = 1ull << (c % 64);
    _Atomic uint64_t *w = &set[c / 64];

    if ((atomic_load_explicit(w, memory_order_relaxed) & bit) == 0 &&
        (atomic_fetch_or(w, bit) & bit) == 0) {
        atomic_fetch_add(n, 1);
    }
}

/* Count c among the classes asked for, once. */
static void
class_asked(uint8_t c)
{
    class_set_add(classes_asked, &nclasses_asked, c);
}

static bool
class_has_slab(unsigned c)
{
    return atomic_load_explicit(&classes[c].nslabs, memory_order_relaxed) > 0;
}

uint8_t
slab_clsid_alloc(size_t size)
{
    uint8_t own = slab_clsid(size);

    if (own != 0) {
        class_asked(own);
    }
    if (own == 0 || class_has_slab(own) || !slab_at_limit()) {
        return own;
    }
    /* Nearest larger class with a slab, within the group or SLAB_SHARE
     * times the item; with none, the group's largest class. */
    double reach = (double)size * SLAB_SHARE;
    unsigned top = own;
    for (unsigned c = own + 1u; c <= nclasses &&
                                (class_group[c] == class_group[own] || class_size[c] < reach);
         c++) {
        if (class_has_slab(c)) {
            return (uint8_t)c;
        }
        if (class_group[c] == class_group[own]) {
            top = c;
        }
    }
    return slab_first_past_limit() ? (uint8_t)top : own;
}

bool
slab_class_homed(uint8_t cls)
{
    for (unsigned c = cls + 1u; c <= nclasses && class_group[c] == class_group[cls]; c++) {
        if (class_has_slab(c)) {
            return true;
        }
    }
    return false;
}

uint8_t
slab_class_count(void)
{
    return nclasses;
}

size_t
slab_size(void)
{
    return slab_bytes;
}

void
slab_lock(uint8_t cls)
{
    pthread_mutex_lock(&classes[cls].lock);
}

int
slab_trylock(uint8_t cls)
{
    return pthread_mutex_trylock(&classes[cls].lock);
}

void
slab_unlock(uint8_t cls)
{
    pthread_mutex_unlock(&classes[cls].lock);
}

/* Under the class lock: a plain add, readable without the lock. */
static inline void
nfree_add(struct slab_class *c, int delta)
{
    atomic_store_explicit(&c->nfree,
        atomic_load_explicit(&c->nfree, memory_order_relaxed) + (uint64_t)(int64_t)delta,
        memory_order_relaxed);
}

/* Under the class lock: count a chunk of s handed out (+1) or back (-1). */
static inline void
slab_used_add(struct slab *s, int delta)
{
    uint32_t u = atomic_load_explicit(&s->used, memory_order_relaxed);

    assert(delta > 0 || u > 0);
    u += (uint32_t)delta;
    atomic_store_explicit(&s->used, u, memory_order_relaxed);
    if (u == 0) {
        atomic_fetch_add_explicit(&nempty, 1, memory_order_relaxed);
    } else if (u == 1 && delta > 0) {
        atomic_fetch_sub_explicit(&nempty, 1, memory_order_relaxed);
    }
}

static void
freelist_unlink(struct slab_class *c, struct item *it)
{
    if (it->f_prev != SLAB_HANDLE_NONE) {
        slab_handle_item(it->f_prev)->f_next = it->f_next;
    } else {
        c->free_head = it->f_next;
    }
    if (it->f_next != SLAB_HANDLE_NONE) {
        slab_handle_item(it->f_next)->f_prev = it->f_prev;
    }
    it->f_next = it->f_prev = SLAB_HANDLE_NONE;
    nfree_add(c, -1);
}

static void
freelist_push(struct slab_class *c, struct item *it)
{
    item_iflags_reset(it, ITEM_FREE);
    it->f_prev = SLAB_HANDLE_NONE;
    it->f_next = c->free_head;
    if (c->free_head != SLAB_HANDLE_NONE) {
        slab_handle_item(c->free_head)->f_prev = slab_handle(it);
    }
    c->free_head = slab_handle(it);
    nfree_add(c, 1);
}

static struct item *
freelist_pop(struct slab_class *c)
{
    if (c->free_head == SLAB_HANDLE_NONE) {
        return NULL;
    }
    struct item *it = slab_handle_item(c->free_head);
    c->free_head = it->f_next;
    if (it->f_next != SLAB_HANDLE_NONE) {
        slab_handle_item(it->f_next)->f_prev = SLAB_HANDLE_NONE;
    }
    it->f_next = it->f_prev = SLAB_HANDLE_NONE;
    item_iflags_reset(it, 0);
    nfree_add(c, -1);
    return it;
}

/*
 * Make the arena writable up to at least end, in whole huge pages: the
 * kernel backs a huge page only where the whole 2 MB is one mapping.
 * Costs at most one huge page of RSS beyond the slabs in use (the next
 * slab's pages, if -m stops short of it). Caller holds the table lock.
 */
static bool
arena_make_writable(size_t end)
{
    if (end <= arena_rw) {
        return true;
    }
    size_t to = align_up(end, HUGE_BYTES);
    if (to > arena_len) {
        to = arena_len;
    }
    if (mprotect(arena + arena_rw, to - arena_rw, PROT_READ | PROT_WRITE) != 0) {
        return false;
    }
    arena_rw = to;
    return true;
}

/*
 * A slab past the limit goes on small pages. Huge pages pay off for the
 * memory -m gives, which fills them in pairs of slabs; the slabs past it
 * come one at a time, and one alone in a huge page costs twice its size.
 * A huge page the slab shares with one inside the limit is already
 * backed whole: splitting it saves nothing, so this is advice, not a rule.
 */
static void
arena_small_pages(size_t off, size_t len)
{
    (void)madvise(arena + off, len, MADV_NOHUGEPAGE);
}

/*
 * Whether new slab sid (the table's last, n before it) may go on a huge
 * page: only if the rest of that page, which the kernel backs with it,
 * would be carved within the limit too. Otherwise a slab count ending
 * inside a huge page holds memory past -m for a slab that never comes.
 */
static bool
huge_page_fits(uint32_t sid, uint32_t n, size_t used)
{
    size_t end = (size_t)(sid + 1) * stride;

    if (sid < n) {
        return true;
    }
    return used + stride + (align_up(end, HUGE_BYTES) - end) <= slab_room();
}

/* A released slab carved again within the limit: huge pages again, so
 * that its 2 MB pair, once both halves are in use, can be collapsed back
 * into one (by the kernel's khugepaged). */
static void
arena_huge_pages(size_t off, size_t len)
{
    (void)madvise(arena + off, len, MADV_HUGEPAGE);
}

/* A class's first slab may be carved past the limit (slab_set_first_past_limit). */
static _Atomic bool first_past_limit;

void
slab_set_first_past_limit(bool on)
{
    atomic_store(&first_past_limit, on);
}

bool
slab_first_past_limit(void)
{
    return atomic_load_explicit(&first_past_limit, memory_order_relaxed);
}

/* Table lock held: a kept slab out of the pool, or SLAB_ID_NONE. */
static uint32_t
kept_pop_locked(void)
{
    uint32_t sid = kept_head;

    if (sid != SLAB_ID_NONE) {
        kept_head = table_entry(sid)->pool_next;
        atomic_fetch_sub(&kept_count, 1);
    }
    return sid;
}

/*
 * Append a new slab to the table if the limit allows; table lock inside.
 * A class's first slab may be granted past the limit (first): see
 * slab_grow_first().
 */
static uint32_t
table_append(uint8_t cls, bool first)
{
    uint32_t sid = SLAB_ID_NONE;

    pthread_mutex_lock(&table_lock);
    sid = kept_pop_locked();    /* charged already: no limit to check */
    if (sid != SLAB_ID_NONE) {
        pthread_mutex_unlock(&table_lock);
        return sid;
    }
    uint32_t n = atomic_load(&table_count);
    size_t used = atomic_load(&mem_malloced);
    /* A slab costs its whole pages (stride), whatever -I says. */
    bool within = used + stride <= slab_room();
    if (!within && !(first && atomic_load_explicit(&first_past_limit, memory_order_relaxed))) {
        pthread_mutex_unlock(&table_lock);
        return SLAB_ID_NONE;
    }
    /* A released slab before a new one: the table stays as short as the
     * most memory ever held at once. */
    if (pool_head != SLAB_ID_NONE) {
        sid = pool_head;
        pool_head = table_entry(sid)->pool_next;
        atomic_fetch_sub(&pool_count, 1);
    } else if (n < slab_cap && arena_make_writable((size_t)(n + 1) * stride)) {
        atomic_store_explicit(&table_count, n + 1, memory_order_release);
        sid = n;
    }
    if (sid != SLAB_ID_NONE) {
        if (!within) {
            class_set_add(classes_past, &nclasses_past, cls);
        }
        if (!within || !huge_page_fits(sid, n, used)) {
            arena_small_pages((size_t)sid * stride, stride);
        } else if (sid < n) {
            arena_huge_pages((size_t)sid * stride, stride);
        }
        atomic_store(&mem_malloced, used + stride);
    }
    pthread_mutex_unlock(&table_lock);
    return sid;
}

static inline struct item *
chunk_at(const struct slab_class *c, uint32_t sid, uint32_t i)
{
    return (struct item *)(slab_mem(sid) + (size_t)i * c->size);
}

/* Carve slab sid into chunks of class cls. Caller holds the class lock. */
static void
slab_carve(uint8_t cls, uint32_t sid)
{
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);
    uint64_t now = clock_now_ms();

    atomic_store(&s->cls, cls);
    atomic_store(&s->used, 0);
    atomic_fetch_add_explicit(&nempty, 1, memory_order_relaxed);
    atomic_store(&s->created_ms, now);
    atomic_store(&s->accessed_ms, now);
    /* Push in reverse so chunks are handed out in address order. */
    for (uint32_t i = c->perslab; i-- > 0;) {
        struct item *it = chunk_at(c, sid, i);
        memset(it, 0, sizeof(*it));
        freelist_push(c, it);
    }
    uint32_t n = atomic_load_explicit(&c->nslabs, memory_order_relaxed);
    assert(n < slab_cap);
    c->sids[n] = sid;
    atomic_store_explicit(&c->nslabs, n + 1, memory_order_relaxed);
}

/* Take sid out of its class's slab list; the CLOCK hand stays valid. */
static void
class_remove_slab(struct slab_class *c, uint32_t sid)
{
    uint32_t n = atomic_load_explicit(&c->nslabs, memory_order_relaxed);
    uint32_t i = 0;

    while (i < n && c->sids[i] != sid) {
        i++;
    }
    assert(i < n);
    if (i == n) {
        return;
    }
    c->sids[i] = c->sids[n - 1];        /* the last slab moves into the gap */
    if (c->hand_pos == n - 1) {
        c->hand_pos = i;                /* follow it */
    } else if (c->hand_pos == i) {
        c->hand_idx = 0;                /* a different slab is here now */
    }
    atomic_store_explicit(&c->nslabs, n - 1, memory_order_relaxed);
    if (c->hand_pos >= n - 1) {
        c->hand_pos = 0;
        c->hand_idx = 0;
    }
}

/* slab_alloc's work, class lock held. */
static struct item *
slab_alloc_locked(uint8_t cls, uint32_t *sid)
{
    struct slab_class *c = &classes[cls];
    struct item *it;

    if (c->free_head == SLAB_HANDLE_NONE) {
        uint32_t nsid = table_append(cls, atomic_load_explicit(&c->nslabs,
                                                               memory_order_relaxed) == 0);
        if (nsid != SLAB_ID_NONE) {
            slab_carve(cls, nsid);
        }
    }
    it = freelist_pop(c);
    if (it != NULL) {
        *sid = slab_sid_of(it);
        slab_used_add(table_entry(*sid), 1);
    }
    return it;
}

bool
slab_grow_first(uint8_t cls)
{
    struct slab_class *c = &classes[cls];
    bool grown = false;

    assert(cls >= 1 && cls <= nclasses);
    pthread_mutex_lock(&c->lock);
    if (atomic_load_explicit(&c->nslabs, memory_order_relaxed) == 0) {
        uint32_t nsid = table_append(cls, true);
        if (nsid != SLAB_ID_NONE) {
            slab_carve(cls, nsid);
            grown = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return grown;
}

struct item *
slab_alloc(uint8_t cls, uint32_t *sid)
{
    struct slab_class *c = &classes[cls];

    assert(cls >= 1 && cls <= nclasses);
    pthread_mutex_lock(&c->lock);
    struct item *it = slab_alloc_locked(cls, sid);
    pthread_mutex_unlock(&c->lock);
    return it;
}

struct item *
slab_try_alloc(uint8_t cls, uint32_t *sid)
{
    struct slab_class *c = &classes[cls];

    assert(cls >= 1 && cls <= nclasses);
    if (pthread_mutex_trylock(&c->lock) != 0) {
        return NULL;
    }
    struct item *it = slab_alloc_locked(cls, sid);
    pthread_mutex_unlock(&c->lock);
    return it;
}

struct item *
slab_pop_free_locked(uint8_t cls, uint32_t *sid)
{
    struct item *it = freelist_pop(&classes[cls]);

    if (it != NULL) {
        *sid = slab_sid_of(it);
        slab_used_add(table_entry(*sid), 1);
    }
    return it;
}

void
slab_free_locked(uint8_t cls, uint32_t sid, struct item *chunk)
{
    assert(slab_sid_of(chunk) == sid && slab_cls_of(chunk) == cls);
    slab_used_add(table_entry(sid), -1);
    if (atomic_load_explicit(&table_entry(sid)->draining, memory_order_relaxed)) {
        item_iflags_reset(chunk, ITEM_FREE);   /* out of reach until detached */
        return;
    }
    freelist_push(&classes[cls], chunk);
}

void
slab_free(uint8_t cls, uint32_t sid, struct item *chunk)
{
    pthread_mutex_lock(&classes[cls].lock);
    slab_free_locked(cls, sid, chunk);
    pthread_mutex_unlock(&classes[cls].lock);
}

struct item *
slab_clock_peek(uint8_t cls, uint32_t k)
{
    struct slab_class *c = &classes[cls];
    uint32_t n = atomic_load_explicit(&c->nslabs, memory_order_relaxed);

    if (n == 0) {
        return NULL;
    }
    uint64_t at = (uint64_t)c->hand_pos * c->perslab + c->hand_idx + k;
    at %= (uint64_t)n * c->perslab;
    return chunk_at(c, c->sids[at / c->perslab], (uint32_t)(at % c->perslab));
}

struct item *
slab_clock_next(uint8_t cls)
{
    struct slab_class *c = &classes[cls];
    uint32_t n = atomic_load_explicit(&c->nslabs, memory_order_relaxed);

    if (n == 0) {
        return NULL;
    }
    if (c->hand_idx >= c->perslab) {
        c->hand_idx = 0;
        c->hand_pos++;
    }
    if (c->hand_pos >= n) {
        c->hand_pos = 0;
    }
    return chunk_at(c, c->sids[c->hand_pos], c->hand_idx++);
}

/* Lock and return the class that owns sid, or 0 with nothing locked. */
static uint8_t
slab_lock_owner(uint32_t sid)
{
    if (sid >= slab_table_count()) {
        return 0;
    }
    struct slab *s = table_entry(sid);
    for (;;) {
        uint8_t cls = atomic_load(&s->cls);
        if (cls == 0) {
            return 0;
        }
        pthread_mutex_lock(&classes[cls].lock);
        if (atomic_load(&s->cls) == cls) {
            return cls;
        }
        /* Re-carved for another class while we waited: follow it. */
        pthread_mutex_unlock(&classes[cls].lock);
    }
}

/* Class lock held, every chunk off the free list: unassign the slab. */
static void
slab_detach_locked(struct slab_class *c, struct slab *s, uint32_t sid)
{
    class_remove_slab(c, sid);
    assert(atomic_load(&s->used) == 0);
    atomic_fetch_sub_explicit(&nempty, 1, memory_order_relaxed);
    atomic_store(&s->cls, 0);
    atomic_store(&s->draining, false);
    c->slabs_evicted++;
}

uint8_t
slab_drain_begin(uint32_t sid, uint32_t keep)
{
    uint8_t cls = slab_lock_owner(sid);

    if (cls == 0) {
        return 0;
    }
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);
    uint32_t n = atomic_load_explicit(&c->nslabs, memory_order_relaxed);
    if (atomic_load(&s->draining) || n - c->ndraining < keep + 1) {
        pthread_mutex_unlock(&c->lock);
        return 0;               /* another thread is emptying it, or too few left */
    }
    c->ndraining++;
    atomic_store(&s->draining, true);
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, sid, i);
        if (item_iflags(it) & ITEM_FREE) {
            freelist_unlink(c, it);
            item_iflags_reset(it, ITEM_FREE);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return cls;
}

void
slab_drain_abort(uint8_t cls, uint32_t sid)
{
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);

    pthread_mutex_lock(&c->lock);
    atomic_store(&s->draining, false);
    c->ndraining--;
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, sid, i);
        if (item_iflags(it) & ITEM_FREE) {
            freelist_push(c, it);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void
slab_drain_finish(uint8_t cls, uint32_t sid)
{
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);

    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, sid, i);
        assert(item_iflags(it) == ITEM_FREE && item_refcount(it) == 0);
        item_iflags_reset(it, 0);
    }
    c->ndraining--;
    slab_detach_locked(c, s, sid);
    pthread_mutex_unlock(&c->lock);
}

bool
slab_draining(uint32_t sid)
{
    return atomic_load_explicit(&table_entry(sid)->draining, memory_order_relaxed);
}

uint32_t
slab_class_perslab(uint8_t cls)
{
    return classes[cls].perslab;
}

struct item *
slab_chunk(uint32_t sid, uint32_t idx)
{
    uint8_t cls = atomic_load(&table_entry(sid)->cls);

    assert(cls != 0 && idx < classes[cls].perslab);
    return chunk_at(&classes[cls], sid, idx);
}

size_t
slab_class_chunk_size(uint8_t cls)
{
    return classes[cls].size;
}

struct item *
slab_chunk_in(uint32_t sid, uint8_t cls, uint32_t idx)
{
    assert(cls != 0 && idx < classes[cls].perslab);
    return chunk_at(&classes[cls], sid, idx);
}

void
slab_attach(uint8_t cls, uint32_t sid)
{
    struct slab_class *c = &classes[cls];

    pthread_mutex_lock(&c->lock);
    slab_carve(cls, sid);
    c->slabs_gained++;
    pthread_mutex_unlock(&c->lock);
}

void
slab_release(uint32_t sid)
{
    struct slab *s = table_entry(sid);

    assert(atomic_load(&s->cls) == 0 && atomic_load(&s->used) == 0);
    /* Its pages go back now; a racing walk reads zeros there (no item).
     * Small pages first: khugepaged would fill a hole in a huge page. The
     * slab sharing its 2 MB page loses the huge page with it (the kernel
     * splits it) until this one is carved again within the limit. */
    arena_small_pages((size_t)sid * stride, stride);
    arena_discard((size_t)sid * stride, stride);
    pthread_mutex_lock(&table_lock);
    s->pool_next = pool_head;
    pool_head = sid;
    atomic_fetch_add(&pool_count, 1);
    atomic_fetch_sub(&mem_malloced, stride);
    pthread_mutex_unlock(&table_lock);
}

void
slab_pool_keep(uint32_t sid)
{
    struct slab *s = table_entry(sid);

    assert(atomic_load(&s->cls) == 0 && atomic_load(&s->used) == 0);
    pthread_mutex_lock(&table_lock);
    s->pool_next = kept_head;
    kept_head = sid;
    atomic_fetch_add(&kept_count, 1);
    atomic_fetch_add(&kept_total, 1);
    pthread_mutex_unlock(&table_lock);
}

uint64_t
slab_pool_kept_total(void)
{
    return atomic_load_explicit(&kept_total, memory_order_relaxed);
}

/* A kept slab out of the pool, or SLAB_ID_NONE. */
static uint32_t
kept_pop(void)
{
    pthread_mutex_lock(&table_lock);
    uint32_t sid = kept_pop_locked();
    pthread_mutex_unlock(&table_lock);
    return sid;
}

bool
slab_pool_take(uint8_t cls)
{
    uint32_t sid = kept_pop();

    if (sid != SLAB_ID_NONE) {
        slab_attach(cls, sid);  /* unassigned: nobody else can reach it */
    }
    return sid != SLAB_ID_NONE;
}

bool
slab_pool_unkeep(void)
{
    uint32_t sid = kept_pop();

    if (sid != SLAB_ID_NONE) {
        slab_release(sid);
    }
    return sid != SLAB_ID_NONE;
}

uint32_t
slab_pool_count(void)
{
    return atomic_load_explicit(&pool_count, memory_order_relaxed) +
           atomic_load_explicit(&kept_count, memory_order_relaxed);
}

uint32_t
slab_pool_kept(void)
{
    return atomic_load_explicit(&kept_count, memory_order_relaxed);
}

uint64_t
slab_class_free(uint8_t cls)
{
    return atomic_load_explicit(&classes[cls].nfree, memory_order_relaxed);
}

bool
slab_all_carved(void)
{
    return atomic_load_explicit(&mem_malloced, memory_order_relaxed) + stride > slab_room() ||
           slab_table_count() >= slab_cap;
}

bool
slab_at_limit(void)
{
    return slab_all_carved() && atomic_load_explicit(&kept_count, memory_order_relaxed) == 0;
}

uint32_t
slab_class_slabs(uint8_t cls)
{
    return atomic_load_explicit(&classes[cls].nslabs, memory_order_relaxed);
}


bool
slab_move_empty(uint32_t sid, uint8_t cls)
{
    uint8_t owner = slab_lock_owner(sid);

    if (owner == 0) {
        return false;
    }
    struct slab_class *c = &classes[owner];
    struct slab *s = table_entry(sid);
    /* Exact here, under the owner's lock: slab_find_empty() was a hint,
     * and a chunk handed out since may already hold a linked item. */
    if (owner == cls || atomic_load(&s->draining) || atomic_load(&s->used) != 0) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, sid, i);
        assert(item_iflags(it) & ITEM_FREE);
        freelist_unlink(c, it);
        item_iflags_reset(it, 0);
    }
    slab_detach_locked(c, s, sid);
    pthread_mutex_unlock(&c->lock);
    /* Unassigned now: nobody else can reach it. */
    slab_attach(cls, sid);
    return true;
}

uint32_t
slab_find_empty(uint8_t except, uint32_t from)
{
    if (atomic_load_explicit(&nempty, memory_order_relaxed) == 0) {
        return SLAB_ID_NONE;
    }
    uint32_t n = slab_table_count();
    for (uint32_t sid = from; sid < n; sid++) {
        struct slab *s = table_entry(sid);
        uint8_t cls = atomic_load_explicit(&s->cls, memory_order_relaxed);
        if (cls != 0 && cls != except &&
            atomic_load_explicit(&s->used, memory_order_relaxed) == 0 &&
            !atomic_load_explicit(&s->draining, memory_order_relaxed)) {
            return sid;
        }
    }
    return SLAB_ID_NONE;
}

bool
slab_class_coldest(uint8_t cls, uint64_t *accessed_ms)
{
    uint32_t n = slab_table_count();
    bool found = false;

    for (uint32_t sid = 0; sid < n; sid++) {
        struct slab *s = table_entry(sid);
        if (atomic_load_explicit(&s->cls, memory_order_relaxed) != cls) {
            continue;
        }
        uint64_t a = atomic_load_explicit(&s->accessed_ms, memory_order_relaxed);
        if (!found || a < *accessed_ms) {
            *accessed_ms = a;
        }
        found = true;
    }
    return found;
}

uint32_t
slab_table_count(void)
{
    return atomic_load_explicit(&table_count, memory_order_acquire);
}

uint32_t
slab_table_capacity(void)
{
    return slab_cap;
}

bool
slab_table_info(uint32_t sid, struct slab_info *out)
{
    if (sid >= slab_table_count()) {
        return false;
    }
    struct slab *s = table_entry(sid);
    out->cls = atomic_load(&s->cls);
    out->created_ms = atomic_load(&s->created_ms);
    out->accessed_ms = atomic_load(&s->accessed_ms);
    out->used = atomic_load_explicit(&s->used, memory_order_relaxed);
    return true;
}

void
slab_touch(uint32_t sid)
{
    struct slab *s = table_entry(sid);
    uint64_t now = clock_now_ms();

    /* Coarse clock (a few ms): at most one store per slab per tick. */
    if (atomic_load_explicit(&s->accessed_ms, memory_order_relaxed) != now) {
        atomic_store_explicit(&s->accessed_ms, now, memory_order_relaxed);
    }
}

/* Clamped to what the reserved arena holds (32 GB for -m below 32 GB). */
void
slab_set_limit(size_t maxbytes)
{
    size_t cap = (size_t)slab_cap * stride;

    atomic_store(&mem_limit, maxbytes < cap ? maxbytes : cap);
    /* The classes in use ask again at their next allocation: the floor
     * forgets the ones no longer used, so a lowered limit gives them back. */
    slab_room_classes_set(NULL);
}

static void
class_set_get(_Atomic uint64_t *set, uint64_t *out)
{
    for (size_t w = 0; w < SLAB_ASKED_WORDS; w++) {
        out[w] = atomic_load(&set[w]);
    }
}

static void
class_set_put(_Atomic uint64_t *set, _Atomic uint32_t *n, const uint64_t *in)
{
    uint32_t k = 0;

    for (size_t w = 0; w < SLAB_ASKED_WORDS; w++) {
        uint64_t bits = in != NULL ? in[w] : 0;
        atomic_store(&set[w], bits);
        k += (uint32_t)__builtin_popcountll(bits);
    }
    atomic_store(n, k);
}

void
slab_room_classes_get(uint64_t out[SLAB_ROOM_WORDS])
{
    class_set_get(classes_asked, out);
    class_set_get(classes_past, out + SLAB_ASKED_WORDS);
}

void
slab_room_classes_set(const uint64_t in[SLAB_ROOM_WORDS])
{
    class_set_put(classes_asked, &nclasses_asked, in);
    class_set_put(classes_past, &nclasses_past, in != NULL ? in + SLAB_ASKED_WORDS : NULL);
}

size_t
slab_limit(void)
{
    return atomic_load(&mem_limit);
}

void
slab_set_reserve(size_t bytes)
{
    atomic_store(&mem_reserved, bytes);
}

void
slab_book(int64_t delta)
{
    atomic_fetch_add_explicit(&mem_booked, delta, memory_order_relaxed);
}

/* The bookkeeping takes whole slabs, to the nearest: -m bounds the slabs
 * and what slabcache keeps beyond memcached to within half a slab, and a
 * few hundred KB of it at -m 8 do not take an eighth of the cache. */
size_t
slab_held(void)
{
    int64_t booked = atomic_load_explicit(&mem_booked, memory_order_relaxed);
    size_t held = atomic_load_explicit(&mem_reserved, memory_order_relaxed) +
                  (booked > 0 ? (size_t)booked : 0);

    return (held + slab_bytes / 2) / slab_bytes * slab_bytes;
}

/*
 * What slabs may take: -m, or with first slabs past the limit (the
 * default) what memcached's first pages for the same classes take if that
 * is more. memcached gives every class a first page whatever its limit
 * says: its memory is -m plus the first pages of the classes that came
 * while it was full, and at least a page per class asked for. So: -m plus
 * a slab per class given its first slab while the room was full, or a 1 MB
 * page per class asked for (a slab, where slabs are smaller), whichever
 * is more, of 63 classes at most; the bookkeeping comes out of either.
 * Which classes keep a slab past -m is the groups' business
 * (slab_clsid_alloc); this is only how much.
 */
size_t
slab_room(void)
{
    size_t limit = atomic_load_explicit(&mem_limit, memory_order_relaxed);
    size_t held = slab_held();

    if (atomic_load_explicit(&first_past_limit, memory_order_relaxed)) {
        uint32_t n = atomic_load_explicit(&nclasses_asked, memory_order_relaxed);
        uint32_t past = atomic_load_explicit(&nclasses_past, memory_order_relaxed);
        size_t page = stride < SLAB_MC_PAGE ? stride : SLAB_MC_PAGE;
        size_t pages = (size_t)(n < SLAB_MC_CLASSES ? n : SLAB_MC_CLASSES) * page;
        limit += (size_t)(past < SLAB_MC_CLASSES ? past : SLAB_MC_CLASSES) * stride;
        limit = pages > limit ? pages : limit;
    }

    return limit > held ? limit - held : 0;
}

size_t
slab_malloced(void)
{
    return atomic_load(&mem_malloced);
}

size_t
slab_charged(void)
{
    return atomic_load(&mem_malloced) + slab_held();
}

void
slab_class_stats(uint8_t cls, struct slab_class_stats *out)
{
    struct slab_class *c = &classes[cls];

    memset(out, 0, sizeof(*out));
    if (cls < 1 || cls > nclasses) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    out->chunk_size = c->size;
    out->chunks_per_page = c->perslab;
    out->total_pages = c->nslabs;
    out->total_chunks = (uint64_t)c->nslabs * c->perslab;
    out->free_chunks = atomic_load(&c->nfree);
    out->used_chunks = out->total_chunks - out->free_chunks;
    out->slabs_evicted = c->slabs_evicted;
    out->slabs_gained = c->slabs_gained;
    pthread_mutex_unlock(&c->lock);
}

/* --- warm restart ------------------------------------------------------------- */

bool
slab_restore_table(uint32_t n, const uint8_t *cls)
{
    uint64_t now = clock_now_ms();

    pthread_mutex_lock(&table_lock);
    if (n > slab_cap || atomic_load(&table_count) != 0 ||
        !arena_make_writable((size_t)n * stride)) {
        pthread_mutex_unlock(&table_lock);
        return false;
    }
    atomic_store(&table_count, n);
    for (uint32_t sid = n; sid-- > 0;) {
        struct slab *s = table_entry(sid);
        uint8_t c = cls[sid];
        if (c == 0 || c > nclasses) {
            arena_small_pages((size_t)sid * stride, stride);
            arena_discard((size_t)sid * stride, stride);
            s->pool_next = pool_head;
            pool_head = sid;
            atomic_fetch_add(&pool_count, 1);
            continue;
        }
        struct slab_class *k = &classes[c];
        uint32_t at = atomic_load_explicit(&k->nslabs, memory_order_relaxed);
        atomic_store(&s->cls, c);
        atomic_store(&s->used, 0);
        atomic_store(&s->created_ms, now);
        atomic_store(&s->accessed_ms, now);
        k->sids[at] = sid;
        atomic_store_explicit(&k->nslabs, at + 1, memory_order_relaxed);
        atomic_fetch_add(&mem_malloced, stride);
    }
    pthread_mutex_unlock(&table_lock);
    return true;
}

bool
slab_restore_handle(uint32_t h)
{
    uintptr_t a = slab_arena.handle_base + ((uintptr_t)h << slab_arena.handle_shift);

    if (h == SLAB_HANDLE_NONE || a < (uintptr_t)arena ||
        a >= (uintptr_t)arena + (size_t)atomic_load(&table_count) * stride) {
        return false;
    }
    uint32_t sid = slab_sid_of((void *)a);
    uint8_t c = atomic_load(&table_entry(sid)->cls);
    size_t off = a - (uintptr_t)slab_mem(sid);
    return c != 0 && off % classes[c].size == 0 && off / classes[c].size < classes[c].perslab;
}

uint32_t
slab_restore_chunks(uint32_t sid, slab_keep_fn keep, void *arg)
{
    struct slab *s = table_entry(sid);
    uint8_t cls = atomic_load(&s->cls);
    struct slab_class *c = &classes[cls];
    uint32_t used = 0;

    if (cls == 0) {
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    /* Pushed in reverse, as a carve does, so chunks go out in address order. */
    for (uint32_t i = c->perslab; i-- > 0;) {
        struct item *it = chunk_at(c, sid, i);
        if (keep(it, arg)) {
            used++;
        } else {
            freelist_push(c, it);
        }
    }
    atomic_store(&s->used, used);
    if (used == 0) {
        atomic_fetch_add_explicit(&nempty, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c->lock);
    return used;
}

void
slab_restore_visit(uint32_t sid, slab_keep_fn visit, void *arg)
{
    uint8_t cls = atomic_load(&table_entry(sid)->cls);
    struct slab_class *c = &classes[cls];

    for (uint32_t i = 0; cls != 0 && i < c->perslab; i++) {
        (void)visit(chunk_at(c, sid, i), arg);
    }
}

int
slab_sync(void)
{
    if (arena_fd < 0 || arena_rw == 0) {
        return 0;
    }
    return msync(arena, arena_rw, MS_SYNC);
}
