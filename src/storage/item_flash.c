/*
 * item_flash.c -- items and the flash tier (flash.h): an item evicted from
 * RAM is appended to the flash log and replaced, in its hash chain, by a
 * stub: the same header (flags, exptime, CAS, value length) with a
 * struct item_stub (the record's location and two hashes of the key, no
 * key: item_int.h) where key and value were. Lookups, touch, delete, overwrite,
 * expiry and flush_all treat a stub as the item it stands for; only what
 * reads the value (a fetch, append, incr) needs the record.
 *
 * The stub's chunk is taken while the evicting thread holds the victim's
 * partition and class locks, so it can only try the stub's class lock
 * (two class locks are never waited for together) and take a free chunk
 * or a fresh slab under -m; it never evicts. When that fails the item is
 * dropped as before, and the stub's class is named for the cache layer
 * (item_flash_stub_wanted), which makes room there with the eviction
 * policies, holding no lock.
 */
#include "item.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "assoc.h"
#include "clock.h"
#include "flash.h"
#include "hash.h"
#include "item_int.h"
#include "slab.h"

#define STUB_LOW 1024       /* free stub chunks below which room is asked for: more
                               than a slab move drains of most value sizes */
#define STUB_LOCK_TRIES 64  /* tries of a stub class lock held by another */

static _Atomic uint8_t stub_wanted;

uint8_t
item_flash_stub_wanted(void)
{
    if (atomic_load_explicit(&stub_wanted, memory_order_relaxed) == 0) {
        return 0;
    }
    return atomic_exchange(&stub_wanted, 0);
}

/* Is it one to keep? Values below ext_item_size, stubs, chained items
 * (a record is copied from one block) and (with ext_drop_unread) items
 * never read are not. */
static bool
flash_keeps(struct item *it, uint8_t f)
{
    return flash_enabled() && !(f & ITEM_FLASH) && item_vlen(it) >= flash_min_value() &&
           !item_chained(it) &&
           (!flash_drop_unread() || (f & ITEM_FETCHED));
}

size_t
item_stub_size(void)
{
    return ITEM_STUB_SIZE;
}

uint8_t
item_stub_class(void)
{
    return flash_enabled() ? slab_clsid(ITEM_STUB_SIZE) : 0;
}

/* A stub keeps no key: one class for all. */
static uint8_t
stub_class(void)
{
    return slab_clsid(ITEM_STUB_SIZE);
}

/* A chunk of the stubs' class cls, or NULL (class busy or full: then
 * wanted). */
static struct item *
stub_alloc(uint8_t cls, bool count_drop)
{
    uint32_t sid;
    struct item *stub = NULL;
    /* The class lock is held only to pop a chunk: a short, bounded wait
     * (never a blocking one: this thread holds another class's lock). */
    for (int i = 0; i < STUB_LOCK_TRIES && stub == NULL; i++) {
        stub = slab_try_alloc(cls, &sid);
        if (stub == NULL && slab_class_free(cls) == 0 && slab_at_limit()) {
            break;              /* not busy: full */
        }
        if (stub == NULL) {
            /* Busy: the holder may be carving a whole slab of stubs,
             * which many tries in a row can miss under several evicting
             * writers (test_flash.py's load_overflows_into_flash dropped
             * items so): yield the CPU to it. */
            sched_yield();
        }
    }
    if (stub == NULL && count_drop) {
        flash_note_dropped();
    }
    /* Ask for room before the class runs out, not after: an eviction
     * that finds no stub chunk loses its item. */
    if (stub == NULL || slab_class_free(cls) < STUB_LOW) {
        atomic_store_explicit(&stub_wanted, cls, memory_order_relaxed);
    }
    return stub;
}

/* Fill stub from the item it stands for and swap it into the hash chain
 * (both partition and class locks held, the record at loc). */
static void
stub_link(struct item *it, struct item *stub, uint32_t hv, const struct flash_loc *loc)
{
    uint8_t f = item_iflags(it), nkey = item_nkey(it);

    stub->h_next = SLAB_HANDLE_NONE;
    stub->time = it->time;
    stub->exptime = it->exptime;
    stub->nbytes = it->nbytes;
    stub->flags = it->flags;
    /* The CAS with a key length of 0: the key is not kept (item_int.h). */
    atomic_store_explicit(&stub->cas_key, item_cas(it) << 8, memory_order_relaxed);
    struct item_stub st = { .loc = *loc, .hv = hv, .fp = item_key_fp(item_key(it), nkey) };
    memcpy(stub->data, &st, sizeof(st));
    /* Linked, with the table's reference; it keeps no ITEM_ACTIVE (it was
     * cold enough to be evicted). */
    uint8_t keep = f & (ITEM_FETCHED | ITEM_STALE | ITEM_TOKEN_SENT | ITEM_KEY_BINARY);
    atomic_store(&stub->refs, ((uint32_t)(keep | ITEM_LINKED | ITEM_FLASH) << ITEM_REF_BITS) | 1u);
    /* it is linked and its partition locked: it is in the chain. */
    bool replaced = assoc_replace(it, stub, hv);
    assert(replaced);
    (void)replaced;
    /* The victim leaves the table as an unlink would; the stub joins it. */
    struct item_class_state *vl = class_state_of(it), *sl = class_state_of(stub);
    item_iflags_clear(it, ITEM_LINKED);
    atomic_fetch_sub_explicit(&vl->number, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&vl->bytes, item_ntotal(it), memory_order_relaxed);
    atomic_fetch_add_explicit(&sl->number, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sl->bytes, item_ntotal(stub), memory_order_relaxed);
    item_note_ttl(slab_cls_of(stub), stub->exptime);
    slab_touch(slab_sid_of(stub));      /* as a link does: the slab is in use */
    flash_note_used(1, flash_rec_len(nkey, stub->nbytes));
}

bool
item_flash_stash(struct item *it, uint32_t hv, rel_time_t now)
{
    uint8_t f = item_iflags(it);
    uint8_t nkey = item_nkey(it);
    struct flash_loc loc;

    (void)now;
    if (!flash_keeps(it, f)) {
        return false;
    }
    /* A stub in the victim's own class would take a chunk this very
     * eviction is freeing (and the lock is held): such small values are
     * dropped as before. */
    uint8_t scls = stub_class();
    if (scls == 0 || scls == slab_cls_of(it)) {
        flash_note_dropped();
        return false;
    }
    /* The record first: if no stub can be had after it, only flash space
     * is wasted, and no chunk has to be given back under these locks. */
    if (!flash_append(item_key(it), nkey, item_value(it), it->nbytes, it->flags,
                      item_cas(it), &loc)) {
        return false;
    }
    struct item *stub = stub_alloc(scls, true);
    if (stub == NULL) {
        return false;
    }
    stub_link(it, stub, hv, &loc);
    return true;
}

item_stash_status_t
item_flash_stash_early(struct item *it, uint32_t hv)
{
    uint8_t f = item_iflags(it), nkey = item_nkey(it);
    uint8_t scls = stub_class();
    struct flash_loc loc;

    if (!flash_keeps(it, f) || scls == 0 || scls == slab_cls_of(it)) {
        return ITEM_STASH_SKIP;
    }
    if ((slab_class_free(scls) == 0 && slab_at_limit()) ||
        !flash_room(flash_rec_len(nkey, it->nbytes))) {
        return ITEM_STASH_FULL;
    }
    if (!flash_append(item_key(it), nkey, item_value(it), it->nbytes, it->flags,
                      item_cas(it), &loc)) {
        return ITEM_STASH_FULL;     /* the room went meanwhile (rare) */
    }
    /* The chunk went meanwhile (rare): the record stays on flash with no
     * stub pointing at it, space the log reclaims in turn; the item stays
     * in RAM, not dropped. */
    struct item *stub = stub_alloc(scls, false);
    if (stub == NULL) {
        return ITEM_STASH_FULL;
    }
    stub_link(it, stub, hv, &loc);
    return ITEM_STASHED;
}

bool
item_flash_read_init(struct item *it, const char *key, size_t nkey, struct flash_read *r)
{
    if (!(item_iflags(it) & ITEM_FLASH) || nkey > sizeof(r->key)) {
        return false;
    }
    /* The stub keeps no key: the record is checked against the one it
     * was looked up by. */
    r->loc = item_flash_loc(it);
    r->nkey = (uint8_t)nkey;
    memcpy(r->key, key, nkey);
    r->nbytes = it->nbytes;
    r->cas = item_cas(it);
    r->key_only = false;
    return true;
}

/* old is the stub of this CAS and length, and still points at the record
 * read (a location never names another record; the CAS alone is 0 for all
 * items under -C). */
static bool
stub_points_at(struct item *old, uint64_t cas, uint32_t nbytes, const struct flash_loc *from)
{
    if (!item_is_flash(old) || item_cas(old) != cas || old->nbytes != nbytes) {
        return false;
    }
    struct flash_loc at = item_flash_loc(old);
    return at.seq == from->seq && at.off == from->off;
}

bool
item_flash_is_at(const char *key, size_t nkey, uint64_t cas, uint32_t nbytes,
                 const struct flash_loc *loc)
{
    uint32_t hv = hash_key(key, nkey);

    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    bool at = it != NULL && stub_points_at(it, cas, nbytes, loc);
    assoc_unlock(hv);
    return at;
}

item_status_t
item_flash_promote(struct item *fresh, uint64_t cas, const struct flash_loc *from)
{
    uint32_t hv = item_hash(fresh);
    item_status_t st = ITEM_NOT_STORED;

    assoc_lock(hv);
    struct item *old = do_item_find(item_key(fresh), item_nkey(fresh), hv);
    if (old != NULL && stub_points_at(old, cas, fresh->nbytes, from)) {
        uint8_t keep = item_iflags(old) &
                       (ITEM_FETCHED | ITEM_STALE | ITEM_TOKEN_SENT | ITEM_KEY_BINARY);
        /* touch and gat change these in place: copied under the lock */
        fresh->flags = old->flags;
        item_set_exptime(fresh, old->exptime);
        item_note_ttl(slab_cls_of(fresh), fresh->exptime);
        do_item_replace(old, fresh, hv);
        item_set_cas(fresh, cas);       /* the same item to its clients */
        item_iflags_set(fresh, keep | ITEM_ACTIVE);
        st = ITEM_OK;
    }
    assoc_unlock(hv);
    return st;
}

/*
 * The writer is about to reclaim the flash slab holding r: an item read
 * since the CLOCK hand last passed its stub (ITEM_ACTIVE) is appended
 * again and its stub repointed, so a key read often is not lost to the
 * log's FIFO order; the others go with the slab. Writer thread, no lock
 * held but the key's partition (flash_append's lock ranks below it).
 */
static uint32_t
item_flash_rewrite(const struct flash_rec_view *r, uint32_t budget)
{
    uint32_t hv = hash_key(r->key, r->nkey), len = flash_rec_len(r->nkey, r->nbytes);
    uint32_t wrote = 0;

    if (len > budget) {
        return 0;
    }
    assoc_lock(hv);
    /* Found even if its slab was reclaimed since the writer copied it: the
     * copy is intact, and the stub is about to point elsewhere. */
    struct item *it = assoc_find(r->key, r->nkey, hv);
    /* The stub points at this very record (a location names one); its
     * CAS may have moved on since it was written (md I), and goes along. */
    if (it != NULL && item_is_flash(it) && (item_iflags(it) & ITEM_ACTIVE) &&
        !item_is_stale_by_time(it, clock_now()) && it->nbytes == r->nbytes) {
        struct flash_loc at = item_flash_loc(it), moved;
        if (at.seq == r->loc.seq && at.off == r->loc.off &&
            flash_append(r->key, r->nkey, r->value, r->nbytes, it->flags, item_cas(it),
                         &moved)) {
            memcpy(it->data, &moved, sizeof(moved));   /* struct item_stub's loc */
            wrote = len;
        }
    }
    assoc_unlock(hv);
    return wrote;
}

void
item_flash_attach(void)
{
    flash_set_rewrite(item_flash_rewrite);
}

/* --- ext_item_age: idle items written early ------------------------------- */

static struct {
    pthread_t       thread;
    pthread_mutex_t lock;
    pthread_cond_t  wake;
    bool            running;
    _Atomic bool    stop;           /* written under lock, for the wait */
    _Atomic rel_time_t min_idle;
} aged = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

#define AGED_PERIOD_MS 1000     /* a sweep of every slab per second, as items
                                   age in whole seconds */
#define AGED_ROOM_MS   100      /* wait for the writer before each slab */

/* One pass over the slab table; false once asked to stop. */
static bool
aged_sweep(void)
{
    uint32_t n = slab_table_count();

    for (uint32_t sid = 0; sid < n; sid++) {
        struct slab_info info;
        if (atomic_load(&aged.stop)) {
            return false;
        }
        if (!slab_table_info(sid, &info) || info.cls == 0 ||
            slab_class_chunk_size(info.cls) < flash_min_value()) {
            continue;           /* unassigned, or no value here is kept */
        }
        /* A full writer would make every stash fail: let it drain first. */
        if (!flash_wait_room(AGED_ROOM_MS)) {
            continue;
        }
        (void)item_clock_flash_aged(sid, info.cls, atomic_load(&aged.min_idle));
    }
    return true;
}

static void *
aged_main(void *arg)
{
    (void)arg;
    for (;;) {
        if (!aged_sweep()) {
            break;
        }
        struct timespec until;
        clock_deadline(&until, AGED_PERIOD_MS);
        pthread_mutex_lock(&aged.lock);
        while (!aged.stop &&
               pthread_cond_timedwait(&aged.wake, &aged.lock, &until) == 0) {
        }
        bool stop = aged.stop;
        pthread_mutex_unlock(&aged.lock);
        if (stop) {
            break;
        }
    }
    return NULL;
}

int
item_flash_age_start(uint32_t min_idle)
{
    if (!flash_enabled() || aged.running) {
        return -1;
    }
    aged.min_idle = min_idle;
    aged.stop = false;
    if (pthread_create(&aged.thread, NULL, aged_main, NULL) != 0) {
        return -1;
    }
    aged.running = true;
    return 0;
}

/* Serializes run-time starts and stops (workers run admin commands). */
static pthread_mutex_t aged_ctl = PTHREAD_MUTEX_INITIALIZER;

int
item_flash_age_set(uint32_t min_idle)
{
    int rc = 0;

    pthread_mutex_lock(&aged_ctl);
    if (min_idle == UINT32_MAX) {
        item_flash_age_stop();
    } else if (aged.running) {
        atomic_store(&aged.min_idle, min_idle);
    } else if (flash_enabled()) {
        rc = item_flash_age_start(min_idle);
    }
    pthread_mutex_unlock(&aged_ctl);
    return rc;
}

void
item_flash_age_stop(void)
{
    if (!aged.running) {
        return;
    }
    pthread_mutex_lock(&aged.lock);
    aged.stop = true;
    pthread_cond_signal(&aged.wake);
    pthread_mutex_unlock(&aged.lock);
    pthread_join(aged.thread, NULL);
    aged.running = false;
}
