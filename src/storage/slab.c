/*
 * slab.c -- slab classes, their free lists, and the append-only slab table.
 *
 * A slab is one malloc of slab_size bytes, split at assignment into equal
 * chunks of its class's size, each chunk starting with an item header so
 * that any slab can later be walked chunk by chunk (slab-level eviction).
 * The table is a two-level array so that entries never move while it
 * grows and a slab id stays valid for the life of the process.
 */
#include "slab.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "item.h"

#define CHUNK_ALIGN   8
#define DIR_BITS      12
#define DIR_SIZE      (1u << DIR_BITS)
#define DIR_MAX       4096

struct slab {
    uint8_t             *mem;
    _Atomic uint8_t      cls;
    _Atomic bool         draining;  /* being emptied: frees stay off lists */
    _Atomic uint64_t     created_ms;
    _Atomic uint64_t     accessed_ms;
};

struct slab_class {
    pthread_mutex_t lock;
    uint32_t        size;       /* chunk size */
    uint32_t        perslab;
    _Atomic uint32_t nslabs;
    _Atomic uint64_t nfree;     /* written under lock, read without */
    struct item    *free_head;
    uint64_t        slabs_evicted;
    uint64_t        slabs_gained;
} __attribute__((aligned(64)));

static struct slab_class classes[SLAB_CLASS_MAX + 1];
static uint8_t           nclasses;
static size_t            slab_bytes;

static struct slab      *table_dir[DIR_MAX];
static _Atomic uint32_t  table_count;
static pthread_mutex_t   table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t    mem_limit;
static _Atomic size_t    mem_malloced;

static inline struct slab *
table_entry(uint32_t sid)
{
    return &table_dir[sid >> DIR_BITS][sid & (DIR_SIZE - 1)];
}

static size_t
align_up(size_t n)
{
    return (n + CHUNK_ALIGN - 1) & ~(size_t)(CHUNK_ALIGN - 1);
}

slab_rstatus_t
slab_setup(size_t maxbytes, size_t slab_sz, double factor, size_t chunk_min,
           size_t item_header)
{
    size_t size = align_up(item_header + chunk_min);
    uint8_t i = 0;

    if (slab_sz < 1024 || factor <= 1.0 || size >= slab_sz) {
        return SLAB_EINVAL;
    }
    memset(classes, 0, sizeof(classes));
    slab_bytes = slab_sz;
    while (++i < SLAB_CLASS_MAX && size <= slab_sz / factor) {
        classes[i].size = (uint32_t)size;
        classes[i].perslab = (uint32_t)(slab_sz / size);
        size = align_up((size_t)(size * factor));
    }
    classes[i].size = (uint32_t)slab_sz;
    classes[i].perslab = 1;
    nclasses = i;
    for (uint8_t c = 1; c <= nclasses; c++) {
        pthread_mutex_init(&classes[c].lock, NULL);
    }
    atomic_store(&mem_limit, maxbytes);
    atomic_store(&mem_malloced, 0);
    atomic_store(&table_count, 0);
    return SLAB_OK;
}

void
slab_teardown(void)
{
    uint32_t n = atomic_load(&table_count);

    for (uint32_t sid = 0; sid < n; sid++) {
        free(table_entry(sid)->mem);
    }
    for (uint32_t d = 0; d < DIR_MAX && table_dir[d] != NULL; d++) {
        free(table_dir[d]);
        table_dir[d] = NULL;
    }
    for (uint8_t c = 1; c <= nclasses; c++) {
        pthread_mutex_destroy(&classes[c].lock);
    }
    atomic_store(&table_count, 0);
    nclasses = 0;
}

uint8_t
slab_clsid(size_t size)
{
    if (size == 0 || size > slab_bytes) {
        return 0;
    }
    /* Classes are few (<= 63) and sorted; a linear scan is cache-friendly. */
    for (uint8_t c = 1; c <= nclasses; c++) {
        if (size <= classes[c].size) {
            return c;
        }
    }
    return 0;
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

static void
freelist_unlink(struct slab_class *c, struct item *it)
{
    if (it->prev != NULL) {
        it->prev->next = it->next;
    } else {
        c->free_head = it->next;
    }
    if (it->next != NULL) {
        it->next->prev = it->prev;
    }
    it->next = it->prev = NULL;
    nfree_add(c, -1);
}

static void
freelist_push(struct slab_class *c, struct item *it)
{
    it->iflags = ITEM_FREE;
    it->prev = NULL;
    it->next = c->free_head;
    if (c->free_head != NULL) {
        c->free_head->prev = it;
    }
    c->free_head = it;
    nfree_add(c, 1);
}

static struct item *
freelist_pop(struct slab_class *c)
{
    struct item *it = c->free_head;

    if (it != NULL) {
        c->free_head = it->next;
        if (it->next != NULL) {
            it->next->prev = NULL;
        }
        it->next = it->prev = NULL;
        it->iflags = 0;
        nfree_add(c, -1);
    }
    return it;
}

/* Append a new slab to the table if the limit allows; table lock inside. */
static uint32_t
table_append(void)
{
    uint32_t sid = SLAB_ID_NONE;

    pthread_mutex_lock(&table_lock);
    uint32_t n = atomic_load(&table_count);
    size_t used = atomic_load(&mem_malloced);
    if (used + slab_bytes <= atomic_load(&mem_limit) &&
        (n >> DIR_BITS) < DIR_MAX) {
        if (table_dir[n >> DIR_BITS] == NULL) {
            table_dir[n >> DIR_BITS] = calloc(DIR_SIZE, sizeof(struct slab));
        }
        uint8_t *mem = table_dir[n >> DIR_BITS] ? malloc(slab_bytes) : NULL;
        if (mem != NULL) {
            table_entry(n)->mem = mem;
            atomic_store(&mem_malloced, used + slab_bytes);
            atomic_store_explicit(&table_count, n + 1, memory_order_release);
            sid = n;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return sid;
}

/* Carve slab sid into chunks of class cls. Caller holds the class lock. */
static void
slab_carve(uint8_t cls, uint32_t sid)
{
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);
    uint64_t now = clock_now_ms();

    atomic_store(&s->cls, cls);
    atomic_store(&s->created_ms, now);
    atomic_store(&s->accessed_ms, now);
    /* Push in reverse so chunks are handed out in address order. */
    for (uint32_t i = c->perslab; i-- > 0;) {
        struct item *it = (struct item *)(s->mem + (size_t)i * c->size);
        memset(it, 0, sizeof(*it));
        it->sid = sid;
        it->cls = cls;
        freelist_push(c, it);
    }
    c->nslabs++;
}

struct item *
slab_alloc(uint8_t cls, uint32_t *sid)
{
    struct slab_class *c = &classes[cls];
    struct item *it;

    assert(cls >= 1 && cls <= nclasses);
    pthread_mutex_lock(&c->lock);
    if (c->free_head == NULL) {
        uint32_t nsid = table_append();
        if (nsid != SLAB_ID_NONE) {
            slab_carve(cls, nsid);
        }
    }
    it = freelist_pop(c);
    pthread_mutex_unlock(&c->lock);
    if (it != NULL) {
        *sid = it->sid;
    }
    return it;
}

void
slab_free_locked(uint8_t cls, uint32_t sid, struct item *chunk)
{
    assert(chunk->sid == sid && chunk->cls == cls);
    if (atomic_load_explicit(&table_entry(sid)->draining, memory_order_relaxed)) {
        chunk->iflags = ITEM_FREE;      /* stays out of reach until detached */
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

static inline struct item *
chunk_at(const struct slab_class *c, const struct slab *s, uint32_t i)
{
    return (struct item *)(s->mem + (size_t)i * c->size);
}

uint8_t
slab_drain_begin(uint32_t sid)
{
    uint8_t cls = slab_lock_owner(sid);

    if (cls == 0) {
        return 0;
    }
    struct slab_class *c = &classes[cls];
    struct slab *s = table_entry(sid);
    if (atomic_load(&s->draining)) {
        pthread_mutex_unlock(&c->lock);
        return 0;               /* another thread is emptying it */
    }
    atomic_store(&s->draining, true);
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, s, i);
        if (it->iflags & ITEM_FREE) {
            freelist_unlink(c, it);
            it->iflags = ITEM_FREE;
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
    for (uint32_t i = 0; i < c->perslab; i++) {
        struct item *it = chunk_at(c, s, i);
        if (it->iflags & ITEM_FREE) {
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
        struct item *it = chunk_at(c, s, i);
        assert(it->iflags == ITEM_FREE && it->sid == sid);
        it->iflags = 0;
    }
    atomic_store(&s->cls, 0);
    atomic_store(&s->draining, false);
    atomic_fetch_sub(&c->nslabs, 1);
    c->slabs_evicted++;
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
    struct slab *s = table_entry(sid);
    uint8_t cls = atomic_load(&s->cls);

    assert(cls != 0 && idx < classes[cls].perslab);
    return chunk_at(&classes[cls], s, idx);
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

uint64_t
slab_class_free(uint8_t cls)
{
    return atomic_load_explicit(&classes[cls].nfree, memory_order_relaxed);
}

bool
slab_at_limit(void)
{
    return atomic_load_explicit(&mem_malloced, memory_order_relaxed) + slab_bytes >
           atomic_load_explicit(&mem_limit, memory_order_relaxed);
}

uint32_t
slab_class_slabs(uint8_t cls)
{
    return atomic_load_explicit(&classes[cls].nslabs, memory_order_relaxed);
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
        uint64_t t = atomic_load_explicit(&s->accessed_ms, memory_order_relaxed);
        if (!found || t < *accessed_ms) {
            *accessed_ms = t;
            found = true;
        }
    }
    return found;
}

uint32_t
slab_table_count(void)
{
    return atomic_load_explicit(&table_count, memory_order_acquire);
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

void
slab_set_limit(size_t maxbytes)
{
    atomic_store(&mem_limit, maxbytes);
}

size_t
slab_limit(void)
{
    return atomic_load(&mem_limit);
}

size_t
slab_malloced(void)
{
    return atomic_load(&mem_malloced);
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
