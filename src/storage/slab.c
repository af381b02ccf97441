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
    _Atomic rel_time_t   created;
    _Atomic rel_time_t   accessed;
};

struct slab_class {
    pthread_mutex_t lock;
    uint32_t        size;       /* chunk size */
    uint32_t        perslab;
    uint32_t        nslabs;
    uint64_t        nfree;
    struct item    *free_head;
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
    c->nfree++;
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
        c->nfree--;
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
    rel_time_t now = clock_now();

    atomic_store(&s->cls, cls);
    atomic_store(&s->created, now);
    atomic_store(&s->accessed, now);
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
    (void)sid;
    freelist_push(&classes[cls], chunk);
}

void
slab_free(uint8_t cls, uint32_t sid, struct item *chunk)
{
    pthread_mutex_lock(&classes[cls].lock);
    slab_free_locked(cls, sid, chunk);
    pthread_mutex_unlock(&classes[cls].lock);
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
    out->created = atomic_load(&s->created);
    out->accessed = atomic_load(&s->accessed);
    return true;
}

void
slab_touch(uint32_t sid)
{
    struct slab *s = table_entry(sid);
    rel_time_t now = clock_now();

    /* Coarse clock: at most one store per slab per second. */
    if (atomic_load_explicit(&s->accessed, memory_order_relaxed) != now) {
        atomic_store_explicit(&s->accessed, now, memory_order_relaxed);
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
    out->free_chunks = c->nfree;
    out->used_chunks = out->total_chunks - c->nfree;
    pthread_mutex_unlock(&c->lock);
}
